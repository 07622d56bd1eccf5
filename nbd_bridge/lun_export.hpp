// LunExport: the NBD Export backed by one remote SCSI LUN through the initiator library. Maps NBD
// READ/WRITE(FUA)/FLUSH/TRIM/WRITE_ZEROES (NBD proto.md "Request types") onto READ/WRITE (10/16),
// SYNCHRONIZE CACHE, UNMAP and WRITE SAME (SBC-4 §5), and SCSI sense onto errno through the one
// table in common/scsi/errno_map (via initiator::to_errno).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "iserkit/initiator/lun.hpp"
#include "iserkit/initiator/url.hpp"
#include "nbd_bridge/export.hpp"

namespace iserkit::nbd {

/// Options for LunExport.
struct LunExportOptions {
  std::string name;          ///< export name (NBD_INFO_NAME)
  std::string description;   ///< NBD_INFO_DESCRIPTION, e.g. the URL without password
  bool read_only = false;
  /// The LUN's URL, named in the warning a refused request prints (initiator/diagnosis.hpp).
  std::optional<initiator::Url> url;
};

/// Serves one LUN. Payload moves without copies: READ data lands from Data-In straight in the
/// server's reply buffer, WRITE data goes from the server's request buffer straight into Data-Out.
/// Threading: must be called on the session's executor (the bridge runs each event loop's NBD
/// connections and its session on one io_context thread).
class LunExport final : public Export {
 public:
  LunExport(initiator::LunHandle lun, LunExportOptions options);

  [[nodiscard]] ExportInfo info() const override;
  /// The session's pool (registered memory on iSER): request buffers then go to the target as
  /// STags without a copy.
  [[nodiscard]] BufferPool* buffer_pool() const noexcept override { return &lun_.channel()->buffer_pool(); }
  /// From now on a request that fails for want of the session (closed, lost, logged out) reports
  /// ESHUTDOWN (NBD_ESHUTDOWN, proto.md: the server is shutting down) instead of its errno.
  void set_shutting_down() noexcept { shutting_down_ = true; }
  /// READ: offset/length are multiples of the LUN's block size (min_block_size). Errors: errno of
  /// the SCSI sense or transport failure (EIO, ENOTCONN, ETIMEDOUT…).
  Awaitable<std::error_code> read(std::uint64_t offset_bytes, ByteSpan dest) override;
  /// WRITE with FUA mapped to the FUA bit (SBC-4 §5.43).
  Awaitable<std::error_code> write(std::uint64_t offset_bytes, ConstByteSpan src, bool fua) override;
  /// One READ/WRITE command through CommandChannel::start() when the request fits in one command
  /// and the channel has the path (a Session; not Multipath). A result RetryPolicy would send
  /// again (UNIT ATTENTION, BUSY, TASK SET FULL) is redone through read()/write() (posted).
  bool start_read(std::uint64_t offset_bytes, ByteSpan dest, ExportIo& io) override;
  bool start_write(std::uint64_t offset_bytes, ConstByteSpan src, bool fua, ExportIo& io) override;
  /// SYNCHRONIZE CACHE over the whole LUN (LBA 0, NUMBER OF LOGICAL BLOCKS 0: through the last
  /// LBA; SBC-4 SYNCHRONIZE CACHE (10)), so it also covers writes other sessions completed.
  Awaitable<std::error_code> flush() override;
  /// UNMAP of the range (split at the unit's limits); FUA adds a SYNCHRONIZE CACHE.
  Awaitable<std::error_code> trim(std::uint64_t offset_bytes, std::uint64_t length_bytes, bool fua) override;
  /// WRITE SAME of zeroes, with the UNMAP bit when `may_trim`; FUA adds a SYNCHRONIZE CACHE.
  Awaitable<std::error_code> write_zeroes(std::uint64_t offset_bytes, std::uint64_t length_bytes, bool may_trim,
                                          bool fua) override;
  /// GET LBA STATUS (SBC-4 §5.8) from the request's first block: deallocated blocks are HOLE (and
  /// ZERO when LBPRZ), anchored ones ZERO when LBPRZ, mapped ones data. A unit that is not thin
  /// provisioned, or rejects the command, is all data (asked once, then remembered). One command
  /// per request: the runs may cover less than the range (the client asks again for the rest).
  Awaitable<std::error_code> block_status(std::uint64_t offset_bytes, std::uint32_t length_bytes, bool one,
                                          std::vector<BlockExtent>& extents) override;
  /// Payload bytes read from the LUN so far (NBD_CMD_READ; tests and the stats file).
  [[nodiscard]] std::uint64_t read_bytes() const noexcept { return read_bytes_; }
  /// GET LBA STATUS commands sent so far (tests and the stats file).
  [[nodiscard]] std::uint64_t lba_status_commands() const noexcept { return lba_status_commands_; }

 private:
  /// One start_read()/start_write() in flight; pooled (fast_free_), so none allocates once warm.
  struct FastOp final : initiator::CommandCallback {
    LunExport* owner = nullptr;
    ExportIo* io = nullptr;
    bool write = false;
    bool fua = false;
    std::uint64_t offset_bytes = 0;
    ByteSpan in;
    ConstByteSpan out;
    void command_done(Result<scsi::ScsiResult> result) noexcept override;
  };
  bool start_fast(std::uint64_t offset_bytes, bool write, bool fua, ByteSpan in, ConstByteSpan out, ExportIo& io);
  void fast_done(FastOp& op, Result<scsi::ScsiResult> result) noexcept;
  std::vector<std::unique_ptr<FastOp>> fast_all_;
  std::vector<FastOp*> fast_free_;
  std::uint64_t lba(std::uint64_t offset_bytes) const noexcept { return offset_bytes / block_size_; }

  initiator::LunHandle lun_;
  LunExportOptions options_;
  std::error_code as_errno(const std::error_code& ec) const noexcept;
  template <class T>
  std::error_code as_errno(const Result<T>& r) const noexcept {
    return r ? std::error_code{} : as_errno(r.error());
  }

  /// Prints, once per kind, why the LUN refused a request (read-only, past the end, …) in words;
  /// transport errors are the session's to report. Error path only.
  void warn_refused(const std::error_code& ec, std::uint64_t offset_bytes, std::uint64_t length_bytes);

  std::uint32_t block_size_;
  std::error_code warned_;  // the last refusal warn_refused() printed
  bool shutting_down_ = false;
  bool lba_status_unsupported_ = false;
  std::uint64_t lba_status_commands_ = 0;
  std::uint64_t read_bytes_ = 0;
};

}  // namespace iserkit::nbd

// Typed SCSI operations on one logical unit of a Session or a Multipath (any CommandChannel): READ/WRITE (10)/(16), SYNCHRONIZE
// CACHE, UNMAP, WRITE SAME (write zeroes), INQUIRY and VPD pages, READ CAPACITY (16)/(10), TEST UNIT
// READY, REPORT LUNS, MODE SENSE (header only). SBC-4 §5 (commands), §6.6 (VPD 0xb0, 0xb2); SPC-5 §6.6, §6.33, §6.47, §7.7.
// Layer 6 (public API) over initiator/src/scsi (layer 4).
//
// UNITS: the block-level calls take `lba` and `blocks` (logical blocks of info().block_size_bytes);
// the byte-level helpers (read_bytes/write_bytes) take `offset_bytes` and a byte span.
// SPLITTING: transfers larger than the target's MAXIMUM TRANSFER LENGTH (VPD 0xb0) — or 8 MiB when
// it reports none — are split into several commands, all issued at once (the session's CmdSN
// window paces them) and all awaited before the call returns; UNMAP lists are split at
// MAXIMUM UNMAP LBA COUNT / BLOCK DESCRIPTOR COUNT. RETRIES (src/scsi/retry_policy.hpp): a
// command ending in UNIT ATTENTION is sent once more (SAM-5 §5.14: it was not processed); BUSY and
// TASK SET FULL are retried with a doubling back-off from 10 ms to 1 s, six times. ERRORS: SCSI failures come back as
// scsi_status_category() codes (errors.hpp) with the sense; transport failures as iserkit::errc.
// THREADING and BUFFERS: as Session (session.hpp): call on the session's executor; spans must stay
// valid until the awaitable completes.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/initiator/session.hpp"
#include "iserkit/scsi/cdb.hpp"
#include "iserkit/scsi/lba_status.hpp"
#include "iserkit/scsi/inquiry.hpp"
#include "iserkit/scsi/lun.hpp"
#include "iserkit/scsi/third_party_copy.hpp"

namespace iserkit::initiator {

/// Capacity of a LUN (READ CAPACITY (16), or (10) when (16) is rejected). SBC-4 §5.20, §5.21.
struct Capacity {
  std::uint64_t blocks = 0;             ///< number of logical blocks (last LBA + 1)
  std::uint32_t block_size_bytes = 0;   ///< logical block length in bytes
  bool thin = false;                    ///< LBPME: logical block provisioning management enabled
  bool unmapped_reads_zero = false;     ///< LBPRZ
  [[nodiscard]] std::uint64_t size_bytes() const noexcept { return blocks * block_size_bytes; }
};

/// What LunHandle::open() learned about the unit.
struct LunInfo {
  scsi::Lun lun;
  Capacity capacity;
  /// VPD 0xb0 when the unit supports it (lengths in logical blocks; 0 = no limit).
  std::optional<scsi::BlockLimits> block_limits;
  /// VPD 0xb2 when the unit supports it.
  std::optional<scsi::LogicalBlockProvisioning> provisioning;
  /// The DEVICE-SPECIFIC PARAMETER of MODE SENSE (SBC-4 §6.5.1) when the unit answered it: DPOFUA
  /// (the unit accepts the FUA bit in READ/WRITE) and WP. Empty when MODE SENSE (10) and (6)
  /// both failed; callers then treat FUA as unsupported.
  std::optional<scsi::ModeParameterHeader> mode_header;
  /// Largest transfer one READ/WRITE carries here, in logical blocks (from block_limits, capped
  /// at 8 MiB worth of blocks and at 2^32 - 1 bytes).
  std::uint32_t max_transfer_blocks = 0;
};

/// READ options. `blocks` logical blocks from `lba`; the buffer must be blocks × block size bytes.
struct ReadOptions {
  std::uint64_t lba = 0;
  std::uint32_t blocks = 0;
  bool fua = false;  ///< read from the medium, not the cache
  std::chrono::milliseconds timeout{0};  ///< per command; 0 = session default
};
/// WRITE options. The buffer must be blocks × block size bytes.
struct WriteOptions {
  std::uint64_t lba = 0;
  std::uint32_t blocks = 0;
  bool fua = false;  ///< durable before status GOOD (SBC-4 §5.43 FUA)
  std::chrono::milliseconds timeout{0};
};
/// Options for the byte-level write helper.
struct ByteWriteOptions {
  bool fua = false;
};
/// SYNCHRONIZE CACHE range; blocks = 0 means from lba to the end of the medium.
struct FlushOptions {
  std::uint64_t lba = 0;
  std::uint32_t blocks = 0;
};
/// A range of logical blocks to UNMAP.
struct BlockRange {
  std::uint64_t lba = 0;
  std::uint64_t blocks = 0;
};
/// WRITE SAME used to write zeroes.
struct WriteZeroesOptions {
  std::uint64_t lba = 0;
  std::uint64_t blocks = 0;
  bool may_unmap = true;  ///< set the UNMAP bit (SBC-4 §5.50): the unit may deallocate instead
};

/// A handle on one LUN of a session or a multipath device. Cheap to copy (shares the channel).
class LunHandle {
 public:
  /// Opens LUN `lun` over `channel` (a Session, or a Multipath for several paths): TEST UNIT
  /// READY (retrying once through a UNIT ATTENTION), READ CAPACITY, and VPD 0x00/0xb0/0xb2 when
  /// supported (to learn transfer and unmap limits).
  /// Returns: the handle, or the SCSI/transport error of TEST UNIT READY or READ CAPACITY
  /// (errc::not_supported when the peripheral is not a direct-access block device).
  static Awaitable<Result<LunHandle>> open(std::shared_ptr<CommandChannel> channel, scsi::Lun lun);

  [[nodiscard]] const LunInfo& info() const noexcept { return info_; }
  /// The session when the handle was opened on one; null when it runs over a Multipath.
  [[nodiscard]] const std::shared_ptr<Session>& session() const noexcept { return session_; }
  /// What carries the commands (the Session, or the Multipath).
  [[nodiscard]] const std::shared_ptr<CommandChannel>& channel() const noexcept { return channel_; }

  /// READ (10) when the unit has < 2^32 blocks and blocks ≤ 65535, else READ (16); split at
  /// info().max_transfer_blocks. Errors: errc::invalid_argument when the buffer size is not
  /// blocks × block size or the range passes the end; SCSI errors; transport errors; an
  /// unexpected residual underflow → errc::protocol_error. SBC-4 §5.16, §5.18.
  Awaitable<Result<void>> read(const ReadOptions& options, std::span<std::byte> buffer);
  /// WRITE (10)/(16), same rules as read(). SBC-4 §5.41, §5.43.
  Awaitable<Result<void>> write(const WriteOptions& options, std::span<const std::byte> buffer);
  /// read()/write() of `blocks` (> 0) at `lba` as ONE command through CommandChannel::start(),
  /// without a coroutine frame: `done` hears the raw result, which finish_transfer() turns into
  /// read()/write()'s. Returns false, with nothing sent, when that does not apply: more blocks than
  /// one command carries, a range outside the LUN, buffer sizes that do not match, a channel
  /// without start(), or a submission the channel refused (read()/write() then report it).
  bool start_transfer(std::uint64_t lba, std::uint32_t blocks, bool write, bool fua, std::span<std::byte> in,
                      std::span<const std::byte> out, CommandCallback& done);
  /// What read()/write() make of one command's final result: success or the error (transport,
  /// status and sense, short transfer).
  [[nodiscard]] static Result<void> finish_transfer(const Result<scsi::ScsiResult>& result, bool write,
                                                    std::uint64_t lba, std::uint32_t blocks);
  /// True when read()/write() would send the command again after this result (UNIT ATTENTION,
  /// BUSY, TASK SET FULL: RetryPolicy): a start_transfer() caller then redoes it with them.
  [[nodiscard]] static bool wants_retry(const Result<scsi::ScsiResult>& result) noexcept;

  /// Reads buffer.size() bytes at `offset_bytes`; any alignment. Aligned parts go straight into
  /// `buffer`; an unaligned head/tail block is read into a bounce buffer and copied.
  Awaitable<Result<void>> read_bytes(std::uint64_t offset_bytes, std::span<std::byte> buffer);
  /// Writes `data` at `offset_bytes`; any alignment. Unaligned head/tail blocks are read, patched
  /// and written back (read-modify-write): NOT atomic against other writers touching the same
  /// edge blocks at the same time. Errors as read()/write().
  Awaitable<Result<void>> write_bytes(std::uint64_t offset_bytes, std::span<const std::byte> data,
                                      ByteWriteOptions options = {});

  /// SYNCHRONIZE CACHE (10), or (16) when the range needs it. SBC-4 §5.27, §5.28.
  Awaitable<Result<void>> synchronize_cache(FlushOptions options = {});
  /// UNMAP the ranges (SBC-4 §5.32), split at the unit's unmap limits (VPD 0xb0).
  /// errc::not_supported when VPD 0xb2 says LBPU=0 (or the unit lacks 0xb2).
  Awaitable<Result<void>> unmap(std::span<const BlockRange> ranges);
  /// WRITE SAME (16) of a zero block, with the UNMAP bit when may_unmap (SBC-4 §5.50); split at
  /// MAXIMUM WRITE SAME LENGTH (or max_transfer_blocks × 64 when the unit reports none).
  Awaitable<Result<void>> write_zeroes(WriteZeroesOptions options);

  /// Standard INQUIRY data (SPC-5 §6.6.2).
  Awaitable<Result<scsi::StandardInquiry>> inquiry();
  /// The raw bytes of VPD page `page_code` (header included), INQUIRY EVPD=1 (SPC-5 §7.7).
  Awaitable<Result<std::vector<std::byte>>> vpd_page(std::uint8_t page_code);
  /// VPD 0x00.
  Awaitable<Result<std::vector<std::uint8_t>>> supported_vpd_pages();
  /// VPD 0x80 PRODUCT SERIAL NUMBER.
  Awaitable<Result<std::string>> unit_serial_number();
  /// VPD 0x83 designators.
  Awaitable<Result<std::vector<scsi::Designator>>> device_identification();
  /// VPD 0xb0 (SBC-4 §6.6.4).
  Awaitable<Result<scsi::BlockLimits>> block_limits();
  /// VPD 0xb2 (SBC-4 §6.6.5).
  Awaitable<Result<scsi::LogicalBlockProvisioning>> logical_block_provisioning();
  /// The mode parameter header: MODE SENSE (10), DBD, Caching page (0x08), or MODE SENSE (6) when
  /// (10) ends in ILLEGAL REQUEST (SPC-5 §6.13, §6.14). Errors: the SCSI/transport error of the
  /// last command tried; errc::malformed_pdu for a short answer.
  Awaitable<Result<scsi::ModeParameterHeader>> mode_parameter_header();
  /// VPD 0x8f, the Third-party Copy page (SPC-4 §7.8.17), parsed. Errors: the SCSI error of
  /// INQUIRY (ILLEGAL REQUEST when the unit has no such page); errc::malformed_pdu.
  Awaitable<Result<scsi::ThirdPartyCopyLimits>> third_party_copy_limits();
  /// EXTENDED COPY (LID1, SPC-4 §6.4) with `parameter_list` (scsi::encode_extended_copy_list()),
  /// sent to this unit, whose copy manager does the copy; `timeout` per command (0 = the session's).
  /// UNIT ATTENTION, BUSY and TASK SET FULL are retried as for READ/WRITE. Errors: the SCSI error
  /// (COPY ABORTED with UNREACHABLE COPY TARGET, ILLEGAL REQUEST, …; sense_of() tells which) or a
  /// transport error. `parameter_list` must stay valid until the awaitable completes.
  Awaitable<Result<void>> extended_copy(std::span<const std::byte> parameter_list,
                                        std::chrono::milliseconds timeout = std::chrono::milliseconds{0});
  /// READ CAPACITY (16), falling back to (10) when (16) ends in CHECK CONDITION/ILLEGAL REQUEST.
  Awaitable<Result<Capacity>> read_capacity();
  /// TEST UNIT READY (SPC-5 §6.47).
  Awaitable<Result<void>> test_unit_ready();
  /// GET LBA STATUS (16) from `lba` (SBC-4 §5.8): up to `max_descriptors` (≥ 1) LBA status
  /// descriptors, in order, the first normally starting at `lba`. Errors: errc::not_supported when
  /// the unit is not thin provisioned (READ CAPACITY LBPME = 0) or rejects the command (ILLEGAL
  /// REQUEST); errc::invalid_argument for `lba` past the end; other SCSI and transport errors.
  Awaitable<Result<std::vector<scsi::LbaStatusDescriptor>>> get_lba_status(std::uint64_t lba,
                                                                          std::uint32_t max_descriptors);

 private:
  LunHandle(std::shared_ptr<CommandChannel> channel, scsi::Lun lun)
      : channel_(std::move(channel)), session_(std::dynamic_pointer_cast<Session>(channel_)) {
    info_.lun = lun;
  }
  Awaitable<Result<void>> transfer(std::uint64_t lba, std::uint32_t blocks, bool write, bool fua,
                                   std::span<std::byte> in, std::span<const std::byte> out,
                                   std::chrono::milliseconds timeout);
  Awaitable<Result<scsi::ScsiResult>> run(const scsi::Cdb& cdb, std::span<std::byte> in,
                                          std::span<const std::byte> out = {});

  std::shared_ptr<CommandChannel> channel_;
  std::shared_ptr<Session> session_;  // channel_ when it is a Session
  LunInfo info_;
};

/// REPORT LUNS (SPC-5 §6.33) on LUN 0's well-known addressing; retries with a larger allocation
/// length when the list was truncated.
Awaitable<Result<std::vector<scsi::Lun>>> report_luns(CommandChannel& channel);

}  // namespace iserkit::initiator

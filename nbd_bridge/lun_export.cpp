// LunExport: NBD requests → SCSI commands on one LUN (NBD proto.md; SBC-4 §5).
#include "nbd_bridge/lun_export.hpp"

#include <algorithm>
#include <cerrno>

#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/initiator/diagnosis.hpp"
#include "iserkit/initiator/errors.hpp"

namespace iserkit::nbd {
std::error_code LunExport::as_errno(const std::error_code& ec) const noexcept {
  if (!ec) return {};
  const int e = initiator::to_errno(ec);
  // proto.md "Error values": NBD_ESHUTDOWN while the server shuts down.
  if (shutting_down_ && (e == ENOTCONN || ec == make_error_code(errc::session_lost))) return {ESHUTDOWN, std::generic_category()};
  return {e, std::generic_category()};
}

void LunExport::warn_refused(const std::error_code& ec, std::uint64_t offset_bytes, std::uint64_t length_bytes) {
  // Once per kind: a client retrying a write to a read-only LUN must not flood the log.
  if (!initiator::is_scsi_error(ec) || ec == warned_) return;
  warned_ = ec;
  const initiator::ErrorContext context{.program = initiator::Program::nbd,
                                        .url = options_.url,
                                        .chap = nullptr,
                                        .offset_bytes = offset_bytes,
                                        .length_bytes = length_bytes,
                                        .capacity_bytes = lun_.info().capacity.size_bytes(),
                                        .listed_targets = std::nullopt};
  log::warn("iserkit-nbd: {}: offset={} length={}", initiator::diagnose(ec, context).text(), offset_bytes,
            length_bytes);
}

LunExport::LunExport(initiator::LunHandle lun, LunExportOptions options)
    : lun_(std::move(lun)), options_(std::move(options)), block_size_(lun_.info().capacity.block_size_bytes) {}

ExportInfo LunExport::info() const {
  const auto& i = lun_.info();
  const bool can_unmap = i.provisioning && i.provisioning->lbpu;
  return ExportInfo{
      .name = options_.name,
      .description = options_.description,
      .size_bytes = i.capacity.size_bytes(),
      .min_block_size_bytes = block_size_,
      .preferred_block_size_bytes = std::max<std::uint32_t>(block_size_, 4096),
      // LunHandle splits a request larger than one command may carry (MAXIMUM TRANSFER LENGTH, the
      // iSER caps), so clients may send up to 32 MiB whatever the LUN's limit is.
      .max_block_size_bytes = std::max<std::uint32_t>(32u << 20, block_size_),
      .read_only = options_.read_only,
      .can_flush = true,
      // Only when MODE SENSE reports DPOFUA (SBC-4 §6.5.1): a unit without it may reject WRITE with
      // FUA (LIO does, with INVALID FIELD IN CDB); without SEND_FUA the client sends FLUSH instead.
      .can_fua = i.mode_header && i.mode_header->dpofua,
      .can_trim = can_unmap,
      .can_write_zeroes = true,
      // proto.md NBD_FLAG_CAN_MULTI_CONN: a FLUSH on any connection must make durable every write
      // completed on any connection. flush() is SYNCHRONIZE CACHE with LBA 0 and NUMBER OF LOGICAL
      // BLOCKS 0, the whole medium (SBC-4 SYNCHRONIZE CACHE (10)), and a logical unit's cache is
      // the unit's, not the I_T nexus's: it covers writes that completed through this session or
      // through another one (iserkit-nbd --threads N: a session per event loop; multipath: a
      // session per path). A completed WRITE with FUA is durable by itself. nbd_bridge/README.md
      // "Multi-conn".
      .can_multi_conn = true,
  };
}

Awaitable<std::error_code> LunExport::read(std::uint64_t offset_bytes, ByteSpan dest) {
  read_bytes_ += dest.size();
  auto r = co_await lun_.read({.lba = lba(offset_bytes), .blocks = static_cast<std::uint32_t>(dest.size() / block_size_)},
                              dest);
  if (!r) warn_refused(r.error(), offset_bytes, dest.size());
  co_return as_errno(r);
}

Awaitable<std::error_code> LunExport::write(std::uint64_t offset_bytes, ConstByteSpan src, bool fua) {
  auto r = co_await lun_.write(
      {.lba = lba(offset_bytes), .blocks = static_cast<std::uint32_t>(src.size() / block_size_), .fua = fua}, src);
  if (!r) warn_refused(r.error(), offset_bytes, src.size());
  co_return as_errno(r);
}

bool LunExport::start_read(std::uint64_t offset_bytes, ByteSpan dest, ExportIo& io) {
  if (!start_fast(offset_bytes, false, false, dest, {}, io)) return false;
  read_bytes_ += dest.size();
  return true;
}

bool LunExport::start_write(std::uint64_t offset_bytes, ConstByteSpan src, bool fua, ExportIo& io) {
  return start_fast(offset_bytes, true, fua, {}, src, io);
}

bool LunExport::start_fast(std::uint64_t offset_bytes, bool write, bool fua, ByteSpan in, ConstByteSpan out,
                           ExportIo& io) {
  if (fast_free_.empty()) {
    fast_all_.push_back(std::make_unique<FastOp>());  // only while the requests in flight grow
    fast_free_.push_back(fast_all_.back().get());
  }
  FastOp& op = *fast_free_.back();
  op.owner = this;
  op.io = &io;
  op.write = write;
  op.fua = fua;
  op.offset_bytes = offset_bytes;
  op.in = in;
  op.out = out;
  const std::size_t bytes = write ? out.size() : in.size();
  if (!lun_.start_transfer(lba(offset_bytes), static_cast<std::uint32_t>(bytes / block_size_), write, fua, in, out, op))
    return false;
  fast_free_.pop_back();
  return true;
}

void LunExport::FastOp::command_done(Result<scsi::ScsiResult> result) noexcept { owner->fast_done(*this, std::move(result)); }

void LunExport::fast_done(FastOp& op, Result<scsi::ScsiResult> result) noexcept {
  ExportIo* io = op.io;
  const bool write = op.write;
  const bool fua = op.fua;
  const std::uint64_t offset = op.offset_bytes;
  const ByteSpan in = op.in;
  const ConstByteSpan out = op.out;
  fast_free_.push_back(&op);
  if (!initiator::LunHandle::wants_retry(result)) {
    const std::size_t bytes = write ? out.size() : in.size();
    const auto r = initiator::LunHandle::finish_transfer(result, write, lba(offset), static_cast<std::uint32_t>(bytes / block_size_));
    if (!r) warn_refused(r.error(), offset, bytes);
    io->io_done(as_errno(r));
    return;
  }
  // UNIT ATTENTION, BUSY, TASK SET FULL: the whole request again through read()/write(), which
  // retry as RetryPolicy says; posted, since this runs inside the session's event processing.
  if (!write) read_bytes_ -= in.size();  // read() counts it again
  asio::post(lun_.channel()->executor(), [this, io, write, fua, offset, in, out] {
    asio::co_spawn(lun_.channel()->executor(),
                   [this, io, write, fua, offset, in, out]() -> Awaitable<void> {
                     const std::error_code ec = write ? co_await this->write(offset, out, fua) : co_await this->read(offset, in);
                     io->io_done(ec);
                   },
                   asio::detached);
  });
}

Awaitable<std::error_code> LunExport::flush() { co_return as_errno(co_await lun_.synchronize_cache()); }

Awaitable<std::error_code> LunExport::trim(std::uint64_t offset_bytes, std::uint64_t length_bytes, bool fua) {
  const initiator::BlockRange range{.lba = lba(offset_bytes), .blocks = length_bytes / block_size_};
  if (auto ec = as_errno(co_await lun_.unmap(std::span(&range, 1)))) co_return ec;
  if (fua) co_return co_await flush();
  co_return std::error_code{};
}

Awaitable<std::error_code> LunExport::write_zeroes(std::uint64_t offset_bytes, std::uint64_t length_bytes,
                                                   bool may_trim, bool fua) {
  auto r = co_await lun_.write_zeroes(
      {.lba = lba(offset_bytes), .blocks = length_bytes / block_size_, .may_unmap = may_trim});
  if (!r) warn_refused(r.error(), offset_bytes, length_bytes);
  if (auto ec = as_errno(r)) co_return ec;
  if (fua) co_return co_await flush();
  co_return std::error_code{};
}

Awaitable<std::error_code> LunExport::block_status(std::uint64_t offset_bytes, std::uint32_t length_bytes, bool one,
                                                   std::vector<BlockExtent>& extents) {
  extents.clear();
  const std::uint64_t end = offset_bytes + length_bytes;
  if (!lba_status_unsupported_) {
    ++lba_status_commands_;
    // 64 descriptors a command: enough for a fragmented range, and the reply stays small.
    auto r = co_await lun_.get_lba_status(lba(offset_bytes), one ? 1 : 64);
    if (!r && r.error() == make_error_code(errc::not_supported)) {
      lba_status_unsupported_ = true;
    } else if (!r) {
      co_return as_errno(r.error());
    } else {
      const bool zeroes = lun_.info().capacity.unmapped_reads_zero;  // LBPRZ
      std::uint64_t position = offset_bytes;
      for (const scsi::LbaStatusDescriptor& d : *r) {
        const std::uint64_t run_start = d.lba * block_size_;
        const std::uint64_t run_end = run_start + std::uint64_t{d.blocks} * block_size_;
        if (d.blocks == 0 || run_end <= position) continue;  // before the request (SBC-4 allows it)
        if (run_start > position) break;  // a gap: report what is known so far
        const std::uint64_t stop = std::min(run_end, end);
        const auto status = static_cast<scsi::ProvisioningStatus>(d.provisioning_status);
        std::uint32_t flags = 0;
        if (status == scsi::ProvisioningStatus::deallocated) {
          flags = allocation_state::hole | (zeroes ? allocation_state::zero : 0u);
        } else if (status == scsi::ProvisioningStatus::anchored && zeroes) {
          flags = allocation_state::zero;
        }
        extents.push_back({.length_bytes = stop - position, .flags = flags});
        position = stop;
        if (position >= end) break;
      }
      if (!extents.empty()) co_return std::error_code{};
    }
  }
  // Nothing known: all of it is data, which is always a true answer (proto.md base:allocation).
  extents.push_back({.length_bytes = length_bytes, .flags = 0});
  co_return std::error_code{};
}

}  // namespace iserkit::nbd

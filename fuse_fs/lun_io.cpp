// The FUSE view's LUN data path (see lun_io.hpp): READ/WRITE with serialized partial-block RMW,
// SYNCHRONIZE CACHE, UNMAP / WRITE SAME. SBC-4 §5.16, §5.27, §5.32, §5.41, §5.50.
#include "fuse_fs/lun_io.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/initiator/diagnosis.hpp"
#include "iserkit/initiator/errors.hpp"

namespace iserkit::fuse_fs {
namespace {

// Largest run of zero blocks written per WRITE when the unit has no WRITE SAME.
constexpr std::size_t zero_chunk_bytes = 1 << 20;

bool unsupported(std::error_code ec) {
  const int e = initiator::to_errno(ec);
  return e == EOPNOTSUPP || e == EINVAL;  // not_supported, or ILLEGAL REQUEST (invalid opcode/field)
}

// Logs, once per kind for the LUN, why it refused a write: read-only, past the end (`ec` empty:
// refused here before sending), or another SCSI error, in the words every program uses
// (initiator/diagnosis.hpp). Transport errors are the session's to report. Error path only.
void warn_refused(LunState& lun, std::error_code ec, std::uint64_t offset_bytes, std::uint64_t length_bytes,
                  std::uint64_t capacity_bytes) {
  const std::error_code kind = ec ? ec : std::make_error_code(std::errc::no_space_on_device);
  if ((ec && !initiator::is_scsi_error(ec)) || kind == lun.warned) return;
  lun.warned = kind;
  initiator::ErrorContext context{.program = initiator::Program::fuse,
                                  .url = std::nullopt,
                                  .chap = nullptr,
                                  .offset_bytes = offset_bytes,
                                  .length_bytes = length_bytes,
                                  .capacity_bytes = capacity_bytes,
                                  .listed_targets = std::nullopt};
  if (lun.target != nullptr) {
    context.url = lun.target->portal;
    context.url->target = lun.target->iqn;
    context.url->lun = lun.index;
  }
  const auto d = ec ? initiator::diagnose(ec, context) : initiator::diagnose_past_end("write", context);
  log::warn("fuse: {}: file=lun{}", d.text(), lun.index);
}

// Zeroes whole blocks [lba, lba + blocks) by writing zero buffers.
Awaitable<Result<void>> write_zero_blocks(initiator::LunHandle h, std::uint64_t lba, std::uint64_t blocks) {
  const std::uint32_t bs = h.info().capacity.block_size_bytes;
  const std::uint64_t per = std::max<std::uint64_t>(1, zero_chunk_bytes / bs);
  // From the session's pool: registered memory on iSER, so the zeroes go out without a bounce.
  auto zeros = h.channel()->buffer_pool().allocate(static_cast<std::size_t>(std::min(per, blocks) * bs));
  std::memset(zeros.data(), 0, zeros.size());
  for (std::uint64_t done = 0; done < blocks;) {
    const auto n = static_cast<std::uint32_t>(std::min(per, blocks - done));
    if (auto r = co_await h.write({.lba = lba + done, .blocks = n}, zeros.bytes().first(std::size_t{n} * bs)); !r)
      co_return r;
    done += n;
  }
  co_return Result<void>{};
}

// Zeroes bytes [offset, offset + length) inside the LUN by read-modify-write (caller holds the lock).
Awaitable<Result<void>> zero_bytes(initiator::LunHandle h, std::uint64_t offset, std::size_t length) {
  if (length == 0) co_return Result<void>{};
  auto zeros = h.channel()->buffer_pool().allocate(length);
  std::memset(zeros.data(), 0, zeros.size());
  co_return co_await h.write_bytes(offset, zeros.bytes());
}

}  // namespace

Awaitable<Result<ReadData>> lun_read(PortalView& view, std::shared_ptr<LunState> lun, std::uint64_t offset,
                                     std::size_t size) {
  auto h = co_await view.handle(*lun);
  if (!h) co_return fail(h.error());
  const auto& cap = h->info().capacity;
  const std::uint64_t capacity = cap.size_bytes();
  ReadData out;
  if (size == 0 || offset >= capacity) co_return out;  // end of file
  const std::uint64_t n = std::min<std::uint64_t>(size, capacity - offset);
  const std::uint32_t bs = cap.block_size_bytes;
  const std::uint64_t first = offset / bs;
  const std::uint64_t last = (offset + n - 1) / bs;
  const std::uint64_t blocks = last - first + 1;
  // Aligned or not, one READ of the covering blocks into one pooled buffer; the reply points at
  // the requested bytes inside it (no bounce copies for unaligned edges). The buffer comes from the
  // session's pool — registered memory on iSER — so the target RDMA-writes straight into it: no
  // bounce copy on any transport.
  out.buffer = h->channel()->buffer_pool().allocate(static_cast<std::size_t>(blocks * bs));
  if (auto r = co_await h->read({.lba = first, .blocks = static_cast<std::uint32_t>(blocks)}, out.buffer.bytes()); !r)
    co_return fail(r.error());
  out.skip = static_cast<std::size_t>(offset - first * bs);
  out.length = static_cast<std::size_t>(n);
  co_return out;
}

Awaitable<Result<PooledBuffer>> lun_payload_buffer(PortalView& view, std::shared_ptr<LunState> lun,
                                                   std::size_t size) {
  auto h = co_await view.handle(*lun);
  if (!h) co_return fail(h.error());
  try {
    co_return h->channel()->buffer_pool().allocate(size);
  } catch (const std::bad_alloc&) {
    co_return fail(std::make_error_code(std::errc::not_enough_memory));
  }
}

Awaitable<Result<std::size_t>> lun_write(PortalView& view, std::shared_ptr<LunState> lun, std::uint64_t offset,
                                         std::span<const std::byte> data, bool fua) {
  if (data.empty()) co_return std::size_t{0};
  auto h = co_await view.handle(*lun);
  if (!h) co_return fail(h.error());
  const auto& cap = h->info().capacity;
  const std::uint64_t capacity = cap.size_bytes();
  // A block device refuses a write that starts at its end (ENOSPC) and shortens one that crosses it.
  if (offset >= capacity) {
    warn_refused(*lun, {}, offset, data.size(), capacity);
    co_return fail(std::make_error_code(std::errc::no_space_on_device));
  }
  const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(data.size(), capacity - offset));
  const std::uint32_t bs = cap.block_size_bytes;
  const std::uint64_t first = offset / bs;
  const std::uint64_t last = (offset + n - 1) / bs;
  // Serialize against every write touching the same blocks: LunHandle::write_bytes' RMW of the
  // edge blocks is not atomic against them (lun.hpp).
  auto guard = co_await lun->writes.lock(first, last);
  Result<void> r;
  if (offset % bs == 0 && n % bs == 0) {
    r = co_await h->write({.lba = first, .blocks = static_cast<std::uint32_t>(n / bs), .fua = fua}, data.first(n));
  } else {
    r = co_await h->write_bytes(offset, data.first(n), {.fua = fua});
  }
  if (!r) {
    warn_refused(*lun, r.error(), offset, n, capacity);
    co_return fail(r.error());
  }
  co_return n;
}

Awaitable<Result<void>> lun_flush(PortalView& view, std::shared_ptr<LunState> lun) {
  auto h = co_await view.handle(*lun);
  if (!h) co_return fail(h.error());
  co_return co_await h->synchronize_cache({});
}

Awaitable<Result<void>> lun_clear(PortalView& view, std::shared_ptr<LunState> lun, std::uint64_t offset,
                                  std::uint64_t length, ClearMode mode) {
  auto h = co_await view.handle(*lun);
  if (!h) co_return fail(h.error());
  const auto& cap = h->info().capacity;
  const std::uint64_t capacity = cap.size_bytes();
  if (length == 0 || offset >= capacity) co_return Result<void>{};
  const std::uint64_t end = offset + std::min(length, capacity - offset);
  const std::uint32_t bs = cap.block_size_bytes;
  auto guard = co_await lun->writes.lock(offset / bs, (end - 1) / bs);
  const std::uint64_t a = (offset + bs - 1) / bs;  // first whole block
  const std::uint64_t b = end / bs;                // one past the last whole block
  if (a >= b) co_return co_await zero_bytes(*h, offset, static_cast<std::size_t>(end - offset));
  if (auto r = co_await zero_bytes(*h, offset, static_cast<std::size_t>(a * bs - offset)); !r) co_return r;
  if (auto r = co_await zero_bytes(*h, b * bs, static_cast<std::size_t>(end - b * bs)); !r) co_return r;
  Result<void> r;
  const auto& m = lun->metadata;
  if (mode == ClearMode::punch_hole && m.unmap_supported && m.unmapped_reads_zero) {
    // SBC-4 §5.32 + LBPRZ (§6.6.5): unmapped blocks read back as zeroes, so UNMAP is a hole punch.
    const initiator::BlockRange range{.lba = a, .blocks = b - a};
    r = co_await h->unmap(std::span(&range, 1));
  } else {
    // SBC-4 §5.50: WRITE SAME of a zero block; with the UNMAP bit the unit may deallocate.
    r = co_await h->write_zeroes({.lba = a, .blocks = b - a, .may_unmap = mode == ClearMode::punch_hole});
  }
  if (!r && unsupported(r.error())) r = co_await write_zero_blocks(*h, a, b - a);
  co_return r;
}

}  // namespace iserkit::fuse_fs

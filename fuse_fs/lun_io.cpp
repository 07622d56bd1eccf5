// The FUSE view's LUN data path (see lun_io.hpp): READ/WRITE with serialized partial-block RMW,
// SYNCHRONIZE CACHE, UNMAP / WRITE SAME, and SEEK_DATA / SEEK_HOLE and st_blocks from GET LBA
// STATUS. SBC-4 §5.8, §5.16, §5.27, §5.32, §5.41, §5.50.
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

// Our write or clear of blocks [first, last] is done (or failed, perhaps half done): what the cache
// knew about them, and the LUN's count, no longer hold.
void invalidate(PortalView& view, const LunState& lun, std::uint64_t first, std::uint64_t last) {
  view.allocation_cache().invalidate(lun.allocation_key(), first, last - first + 1);
}

// One GET LBA STATUS from `lba`: the runs it tells from `lba` on (empty when it says nothing about
// it), recorded in the cache unless a write of ours overtook it. A refusal marks the LUN.
Awaitable<Result<std::vector<AllocationRun>>> fetch_runs(ExtentCache& cache, LunState& lun, initiator::LunHandle h,
                                                         std::uint64_t lba) {
  const auto generation = cache.generation(lun.allocation_key());
  auto r = co_await h.get_lba_status(lba, lba_status_descriptors_per_command);
  if (!r) {
    if (r.error() == make_error_code(errc::not_supported)) {
      lun.lba_status_unsupported = true;
      log::info("fuse: GET LBA STATUS not supported: target={} lun={}: holes and st_blocks show a fully allocated "
                "file",
                lun.target->iqn, lun.index);
    } else {
      log::debug("fuse: GET LBA STATUS: {}: target={} lun={} lba={}", r.error().message(), lun.target->iqn, lun.index,
                 lba);
    }
    co_return fail(r.error());
  }
  auto runs = runs_from_lba_status(*r, lba, h.info().capacity.blocks);
  cache.insert(lun.allocation_key(), runs, generation, Clock::now());
  co_return runs;
}

}  // namespace

Awaitable<Result<std::uint64_t>> seek_with(ExtentCache& cache, LunState& lun, initiator::LunHandle h,
                                           std::uint64_t offset, SeekWhence whence) {
  const auto enxio = std::make_error_code(std::errc::no_such_device_or_address);
  const auto& cap = h.info().capacity;
  const std::uint32_t bs = cap.block_size_bytes;
  const std::uint64_t size = cap.size_bytes();
  // lseek(2): ENXIO for SEEK_DATA / SEEK_HOLE at or past the end of the file.
  if (offset >= size || bs == 0) co_return fail(enxio);
  // A fully allocated file: data from here, the only hole at the end.
  const auto allocated = [&](std::uint64_t from) { return whence == SeekWhence::data ? from : size; };
  // A hole must read as zeroes: with LBPRZ = 0 (§6.6.5) a deallocated block may read as anything.
  if (!cap.thin || !cap.unmapped_reads_zero || lun.lba_status_unsupported) co_return allocated(offset);
  std::uint64_t block = offset / bs;
  for (int sent = 0;;) {
    auto runs = cache.known_from(lun.allocation_key(), block, Clock::now());
    if (runs.empty()) {
      if (sent == seek_max_commands) break;
      ++sent;
      auto fetched = co_await fetch_runs(cache, lun, h, block);
      if (!fetched || fetched->empty()) break;
      runs = std::move(*fetched);
    }
    const auto a = seek_in_runs(runs, whence, std::max(offset, block * bs), bs, cap.blocks);
    if (a.kind == SeekAnswer::Kind::offset) co_return a.value;
    if (a.kind == SeekAnswer::Kind::past_end) co_return fail(enxio);
    block = a.value;
  }
  // Everything before `block` is a known hole; what follows is not known: it counts as data.
  co_return allocated(std::max(offset, block * bs));
}

Awaitable<Result<std::uint64_t>> lun_seek(PortalView& view, std::shared_ptr<LunState> lun, std::uint64_t offset,
                                          SeekWhence whence) {
  auto h = co_await view.handle(*lun);
  if (h) co_return co_await seek_with(view.allocation_cache(), *lun, *h, offset, whence);
  // No session now: a fully allocated file of the size last seen (lseek may fail with ENXIO only).
  const std::uint64_t size = lun->metadata.size_bytes();
  if (offset >= size) co_return fail(std::make_error_code(std::errc::no_such_device_or_address));
  co_return whence == SeekWhence::data ? offset : size;
}

Awaitable<void> count_mapped_blocks(ExtentCache& cache, std::shared_ptr<LunState> lun, initiator::LunHandle h) {
  const auto key = lun->allocation_key();
  const auto generation = cache.generation(key);
  const std::uint64_t capacity = h.info().capacity.blocks;
  std::uint64_t block = 0;
  std::uint64_t mapped = 0;
  bool failed = false;
  for (int sent = 0; block < capacity;) {
    auto runs = cache.known_from(key, block, Clock::now());
    if (runs.empty()) {
      if (sent == count_max_commands) break;
      ++sent;
      auto fetched = co_await fetch_runs(cache, *lun, h, block);
      if (!fetched || fetched->empty()) {
        failed = !fetched && !lun->lba_status_unsupported;
        if (lun->lba_status_unsupported) {  // refused: a fully allocated file (below)
          block = 0;
          mapped = 0;
        }
        break;
      }
      runs = std::move(*fetched);
    }
    for (const auto& r : runs) {
      if (r.end() <= block) continue;
      mapped += r.mapped ? r.end() - std::max(r.lba, block) : 0;
      block = r.end();
    }
  }
  // Past the bound (or told nothing more) the rest counts as mapped: never under-reported.
  mapped += capacity - std::min(block, capacity);
  if (!failed) {
    cache.set_mapped_blocks(key, mapped, generation, Clock::now());
    lun->last_mapped_blocks = mapped;
  }
  lun->counting = false;
  auto waiters = std::move(lun->count_waiters);
  lun->count_waiters.clear();
  for (auto& w : waiters) w->complete();
}

Awaitable<std::uint64_t> lun_mapped_bytes(PortalView& view, std::shared_ptr<LunState> lun,
                                          std::chrono::milliseconds wait) {
  const std::uint64_t bs = lun->metadata.block_size_bytes;
  const std::uint64_t capacity = lun->metadata.size_bytes();
  // A stat never logs in, and asks nothing of a unit without provisioning management.
  if (!PortalView::usable(*lun) || !lun->handle->info().capacity.thin || lun->lba_status_unsupported)
    co_return capacity;
  auto& cache = view.allocation_cache();
  if (auto n = cache.mapped_blocks(lun->allocation_key(), Clock::now())) co_return *n * bs;
  if (!lun->counting) {
    lun->counting = true;
    asio::co_spawn(view.executor(), count_mapped_blocks(cache, lun, *lun->handle), asio::detached);
  }
  auto woken = std::make_shared<Completion>();
  lun->count_waiters.push_back(woken);
  asio::steady_timer timer(view.executor(), wait);
  timer.async_wait([woken](const boost::system::error_code&) { woken->complete(); });
  co_await woken->wait();
  timer.cancel();
  if (auto n = cache.mapped_blocks(lun->allocation_key(), Clock::now())) co_return *n * bs;
  if (lun->last_mapped_blocks && !lun->counting) co_return std::min(*lun->last_mapped_blocks * bs, capacity);
  co_return capacity;
}

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
  invalidate(view, *lun, first, last);
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
  // However it ends, the blocks' provisioning may have changed.
  struct Invalidate {
    PortalView& view;
    const LunState& lun;
    std::uint64_t first, last;
    ~Invalidate() { invalidate(view, lun, first, last); }
  } invalidate_at_exit{view, *lun, offset / bs, (end - 1) / bs};
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

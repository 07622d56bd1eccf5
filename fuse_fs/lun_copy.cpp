// copy_file_range between LUN files by EXTENDED COPY (SPC-4 §6.4); see lun_copy.hpp.
#include "fuse_fs/lun_copy.hpp"

#include <algorithm>

#include "iserkit/common/buffer.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/initiator/copy.hpp"

namespace iserkit::fuse_fs {
namespace {

// Moves `n` (< one block) bytes with READ + WRITE of their blocks (write_bytes read-modify-writes
// the destination's block; the caller holds its range lock).
Awaitable<Result<void>> copy_through(initiator::LunHandle& in, std::uint64_t offset_in, initiator::LunHandle& out,
                                     std::uint64_t offset_out, std::size_t n) {
  PooledBuffer buffer = in.channel()->buffer_pool().allocate(n);
  auto r = co_await in.read_bytes(offset_in, buffer.bytes().first(n));
  if (!r) co_return r;
  co_return co_await out.write_bytes(offset_out, buffer.bytes().first(n));
}

}  // namespace

Awaitable<Result<std::size_t>> lun_copy(PortalView& view, std::shared_ptr<LunState> in, std::uint64_t offset_in,
                                        std::shared_ptr<LunState> out, std::uint64_t offset_out, std::uint64_t length,
                                        bool fua) {
  const auto not_supported = make_error_code(errc::not_supported);
  auto hin = co_await view.handle(*in);
  if (!hin) co_return fail(hin.error());
  auto hout = co_await view.handle(*out);
  if (!hout) co_return fail(hout.error());
  const auto& cin = hin->info().capacity;
  const auto& cout = hout->info().capacity;
  if (offset_in >= cin.size_bytes() || length == 0) co_return std::size_t{0};
  // As for write(2) on a block device: ENOSPC at the end.
  if (offset_out >= cout.size_bytes()) co_return fail(std::make_error_code(std::errc::no_space_on_device));
  const std::uint64_t len = std::min({length, cin.size_bytes() - offset_in, cout.size_bytes() - offset_out,
                                      copy_max_request_bytes});
  const std::uint64_t bs = cin.block_size_bytes;
  if (bs == 0 || bs != cout.block_size_bytes || offset_in % bs != offset_out % bs) co_return fail(not_supported);
  const std::uint64_t head = std::min(len, (bs - offset_in % bs) % bs);
  const std::uint64_t blocks = (len - head) / bs;
  const std::uint64_t tail = len - head - blocks * bs;
  if (blocks == 0) co_return fail(not_supported);
  auto plan = co_await initiator::probe_extended_copy(*hin, *hout);
  if (!plan) {
    log::debug("fuse: copy_file_range: EXTENDED COPY not used: {}: {} lun {} → {} lun {}", plan.error(), in->target->iqn,
               in->index, out->target->iqn, out->index);
    co_return fail(not_supported);
  }
  const std::uint64_t first = offset_out / bs;
  const std::uint64_t last = (offset_out + len - 1) / bs;
  auto guard = co_await out->writes.lock(first, last);
  struct Invalidate {
    PortalView& view;
    const LunState& lun;
    std::uint64_t first, last;
    ~Invalidate() { view.allocation_cache().invalidate(lun.allocation_key(), first, last - first + 1); }
  } invalidate_at_exit{view, *out, first, last};
  std::uint64_t done = 0;
  // Ends the request: the bytes so far when there are any (a short copy), else `ec`.
  const auto stop = [&](std::error_code ec) -> Result<std::size_t> {
    if (done > 0) return static_cast<std::size_t>(done);
    return fail(ec);
  };
  if (head > 0) {
    if (auto r = co_await copy_through(*hin, offset_in, *hout, offset_out, head); !r) co_return fail(r.error());
    done = head;
  }
  for (std::uint64_t copied = 0; copied < blocks;) {
    const std::uint64_t n = std::min(plan->command.max_command_blocks(), blocks - copied);
    auto r = co_await initiator::extended_copy_blocks(*hin, *plan, (offset_in + done) / bs, (offset_out + done) / bs, n);
    if (!r) {
      if (done == 0 && initiator::extended_copy_refused(r.error())) {
        log::debug("fuse: copy_file_range: the target declined EXTENDED COPY: {}: {} lun {} → {} lun {}",
                   r.error().message(), in->target->iqn, in->index, out->target->iqn, out->index);
        co_return fail(not_supported);
      }
      log::warn("fuse: copy_file_range: EXTENDED COPY failed: {}: {} lun {} → {} lun {} offset_in={} offset_out={}",
                r.error().message(), in->target->iqn, in->index, out->target->iqn, out->index, offset_in + done,
                offset_out + done);
      co_return stop(r.error());
    }
    copied += n;
    done += n * bs;
  }
  if (tail > 0) {
    if (auto r = co_await copy_through(*hin, offset_in + done, *hout, offset_out + done, tail); !r)
      co_return stop(r.error());
    done += tail;
  }
  if (fua) {
    if (auto r = co_await hout->synchronize_cache({}); !r) co_return fail(r.error());
  }
  co_return static_cast<std::size_t>(done);
}

}  // namespace iserkit::fuse_fs

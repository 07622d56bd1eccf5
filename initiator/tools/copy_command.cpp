// `iserkit copy`: EXTENDED COPY (LID1, SPC-4 §6.4) or READ + WRITE between two LUNs; see
// copy_command.hpp.
#include "copy_command.hpp"

#include <algorithm>
#include <memory>
#include <vector>

#include "iserkit/common/buffer.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/initiator/copy.hpp"
#include "iserkit/initiator/errors.hpp"
#include "iserkit/initiator/lun.hpp"
#include "iserkit/initiator/session.hpp"

namespace iserkit::cli {
namespace {

namespace ik = initiator;

bool same_target(const ik::Url& a, const ik::Url& b) {
  return a.transport == b.transport && a.host == b.host && a.port == b.port && a.target == b.target &&
         a.user == b.user && a.password == b.password;
}

// The copy once both LUNs are open; fills `out` from `stage` copy on.
Awaitable<void> copy_between(const CopyArguments& args, ik::LunHandle& source, ik::LunHandle& destination,
                             CopyOutcome& out, const std::function<void(std::uint64_t, std::uint64_t)>& progress) {
  const std::uint64_t bs = out.block_size_bytes;
  const std::uint64_t length = out.length_bytes;
  const std::uint64_t src0 = args.source_offset_bytes;
  const std::uint64_t dst0 = args.destination_offset_bytes;
  bool use_xcopy = args.method != CopyMethod::read_write;
  if (args.method == CopyMethod::read_write) out.fallback_reason = "--method read-write";
  if (use_xcopy && (src0 % bs != 0 || dst0 % bs != 0 || length % bs != 0)) {
    use_xcopy = false;
    out.fallback_reason = "the offsets and the length are not all multiples of the " + std::to_string(bs) +
                          "-byte block size (EXTENDED COPY moves whole blocks)";
  }
  std::optional<ik::ExtendedCopyPlan> plan;
  if (use_xcopy) {
    auto probe = co_await ik::probe_extended_copy(source, destination, args.xcopy_command_bytes);
    if (probe) {
      plan = std::move(*probe);
    } else {
      use_xcopy = false;
      out.fallback_reason = probe.error();
    }
  }
  if (!use_xcopy && args.method == CopyMethod::xcopy) {
    out.stage = CopyStage::unusable_xcopy;
    co_return;
  }
  out.stage = CopyStage::copy;
  progress(0, length);
  if (use_xcopy) {
    out.method = "xcopy";
    out.xcopy_command_max_bytes = plan->command.max_command_blocks() * bs;
    while (out.copied_bytes < length) {
      const std::uint64_t blocks = std::min(plan->command.max_command_blocks(), (length - out.copied_bytes) / bs);
      auto r = co_await ik::extended_copy_blocks(source, *plan, (src0 + out.copied_bytes) / bs,
                                                 (dst0 + out.copied_bytes) / bs, blocks);
      if (!r) {
        // The copy manager declined the very first command (another target process, a LU it
        // cannot reach): nothing moved, so READ + WRITE does the whole copy.
        if (out.commands == 0 && args.method == CopyMethod::automatic && ik::extended_copy_refused(r.error())) {
          out.fallback_reason = "the target declined EXTENDED COPY: " + r.error().message();
          use_xcopy = false;
          break;
        }
        out.error = r.error();
        out.failed_command = "EXTENDED COPY";
        co_return;
      }
      out.copied_bytes += blocks * bs;
      ++out.commands;
      progress(out.copied_bytes, length);
    }
    if (!use_xcopy) out.xcopy_command_max_bytes = 0;
  }
  if (!use_xcopy) {
    out.method = "read-write";
    // From the source session's pool: registered memory on iSER, so READ lands in it without a
    // bounce (the WRITE goes out of it too when both LUNs share the session).
    const std::size_t chunk = std::max<std::size_t>(args.read_write_chunk_bytes, bs);
    PooledBuffer buffer = source.channel()->buffer_pool().allocate(chunk);
    while (out.copied_bytes < length) {
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, length - out.copied_bytes));
      auto r = co_await source.read_bytes(src0 + out.copied_bytes, buffer.bytes().first(n));
      if (!r) {
        out.error = r.error();
        out.failed_command = "READ";
        co_return;
      }
      auto w = co_await destination.write_bytes(dst0 + out.copied_bytes, buffer.bytes().first(n));
      if (!w) {
        out.error = w.error();
        out.failed_command = "WRITE";
        co_return;
      }
      out.copied_bytes += n;
      ++out.commands;
      progress(out.copied_bytes, length);
    }
  }
  // The copy is on the destination LU; make it durable (SBC-4 §5.27) before reporting success.
  out.stage = CopyStage::flush;
  if (auto f = co_await destination.synchronize_cache(); !f) {
    out.error = f.error();
    out.failed_command = "SYNCHRONIZE CACHE";
    co_return;
  }
  out.stage = CopyStage::done;
}

std::uint64_t payload_bytes(const ik::Session& s) {
  return s.stats().data_in_bytes_placed + s.stats().data_out_bytes_sent;
}

// Counts what the sessions moved and logs them out.
Awaitable<void> finish(std::vector<std::shared_ptr<ik::Session>>& sessions, CopyOutcome& out) {
  for (auto& s : sessions) out.network_payload_bytes += payload_bytes(*s);
  for (auto& s : sessions) {
    if (s->is_open()) (void)co_await s->logout();
    s->close();
  }
}

}  // namespace

Awaitable<CopyOutcome> run_copy(asio::any_io_executor ex, CopyArguments args, ik::SessionOptions options,
                                std::function<void(std::uint64_t, std::uint64_t)> progress) {
  CopyOutcome out;
  std::vector<std::shared_ptr<ik::Session>> sessions;
  out.stage = CopyStage::login_source;
  auto src_session = co_await ik::Session::connect(ex, args.source, options);
  if (!src_session) {
    out.error = src_session.error();
    co_return out;
  }
  sessions.push_back(*src_session);
  out.stage = CopyStage::open_source;
  auto source = co_await ik::LunHandle::open(*src_session, scsi::Lun::from_index(args.source.lun.value_or(0)));
  if (!source) {
    out.error = source.error();
    co_await finish(sessions, out);
    co_return out;
  }
  std::shared_ptr<ik::Session> dst_session = *src_session;
  out.one_session = same_target(args.source, args.destination);
  if (!out.one_session) {
    out.stage = CopyStage::login_destination;
    auto s = co_await ik::Session::connect(ex, args.destination, options);
    if (!s) {
      out.error = s.error();
      co_await finish(sessions, out);
      co_return out;
    }
    dst_session = *s;
    sessions.push_back(dst_session);
  }
  out.stage = CopyStage::open_destination;
  auto destination = co_await ik::LunHandle::open(dst_session, scsi::Lun::from_index(args.destination.lun.value_or(0)));
  if (!destination) {
    out.error = destination.error();
    co_await finish(sessions, out);
    co_return out;
  }
  out.source_capacity_bytes = source->info().capacity.size_bytes();
  out.destination_capacity_bytes = destination->info().capacity.size_bytes();
  out.block_size_bytes = source->info().capacity.block_size_bytes;
  const std::uint64_t src_size = out.source_capacity_bytes;
  const std::uint64_t dst_size = out.destination_capacity_bytes;
  const std::uint64_t src0 = args.source_offset_bytes;
  out.length_bytes = args.length_bytes.value_or(src0 <= src_size ? src_size - src0 : 0);
  if (src0 > src_size || out.length_bytes > src_size - src0) {
    out.stage = CopyStage::source_range;
  } else if (args.destination_offset_bytes > dst_size || out.length_bytes > dst_size - args.destination_offset_bytes) {
    out.stage = CopyStage::destination_range;
  } else {
    co_await copy_between(args, *source, *destination, out, progress);
  }
  co_await finish(sessions, out);
  co_return out;
}

}  // namespace iserkit::cli

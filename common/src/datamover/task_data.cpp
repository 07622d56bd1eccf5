// The initiator's per-command buffer descriptor (task_data.hpp): direct spans (TCP) or registered
// views with counted bounce copies (iSER). No I/O.
#include "iserkit/datamover/task_data.hpp"

#include <algorithm>
#include <new>

#include "iserkit/common/copy_counter.hpp"

namespace iserkit::datamover {

TaskData TaskData::direct(std::span<std::byte> data_in, std::span<const std::byte> data_out) noexcept {
  TaskData t;
  t.data_in_ = data_in;
  t.data_out_ = data_out;
  return t;
}

Result<TaskData> TaskData::registered(BufferPool& pool, std::span<std::byte> data_in,
                                      std::span<const std::byte> data_out) {
  TaskData t = direct(data_in, data_out);
  try {
    if (!data_in.empty()) {
      if (auto b = pool.registration(data_in)) {
        t.read_region_ = *b;  // zero copy: the peer RDMA-writes into the caller's own bytes
      } else {
        t.bounce_in_ = pool.allocate(data_in.size());
        t.caller_in_ = data_in;
        t.data_in_ = t.bounce_in_.bytes();
        t.read_region_ = t.bounce_in_.buffer();
      }
    }
    if (!data_out.empty()) {
      if (auto b = pool.registration(data_out)) {
        t.write_region_ = *b;  // zero copy: the peer RDMA-reads the caller's own bytes
      } else {
        t.bounce_out_ = pool.allocate(data_out.size());
        copy_payload(t.bounce_out_.data(), data_out.data(), data_out.size());
        t.data_out_ = t.bounce_out_.bytes();
        t.write_region_ = t.bounce_out_.buffer();
      }
    }
  } catch (const std::bad_alloc&) {
    return fail(std::make_error_code(std::errc::not_enough_memory));
  }
  return t;
}

void TaskData::finish(std::size_t data_in_bytes) noexcept {
  binding_.read_lease.set_answered();  // the command got its response (no-op without a lease)
  binding_.write_lease.set_answered();
  if (caller_in_.empty() || !bounce_in_) return;  // nothing bounced (or moved from)
  copy_payload(caller_in_.data(), bounce_in_.data(), std::min(data_in_bytes, caller_in_.size()));
  caller_in_ = {};  // once
}

}  // namespace iserkit::datamover

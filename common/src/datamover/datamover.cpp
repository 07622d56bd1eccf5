// Default behaviour of the Datamover interface for transports without RDMA (RFC 5047 §7: only the
// iSER datamover implements Put_Data/Get_Data as RDMA operations).
#include "iserkit/datamover/datamover.hpp"

#include "iserkit/common/errors.hpp"

namespace iserkit::datamover {

BufferPool& Datamover::buffer_pool() noexcept { return HeapBufferPool::shared(); }

Result<TaskData> Datamover::prepare_task_data(std::span<std::byte> data_in, std::span<const std::byte> data_out) {
  return TaskData::direct(data_in, data_out);
}

Awaitable<std::error_code> Datamover::send_batch(std::vector<PduOut> pdus) {
  for (auto& pdu : pdus)
    if (auto ec = co_await send(std::move(pdu))) co_return ec;
  co_return std::error_code{};
}

Awaitable<std::error_code> Datamover::send_chain(std::vector<ChainStep> steps) {
  std::vector<PduOut> run;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (auto* put = std::get_if<PutDataStep>(&steps[i])) {
      if (auto ec = co_await put_data(put->dest, put->offset, put->source)) co_return ec;
      continue;
    }
    run.push_back(std::move(std::get<PduOut>(steps[i])));
    if (i + 1 == steps.size() || std::holds_alternative<PutDataStep>(steps[i + 1])) {
      if (auto ec = co_await send_batch(std::move(run))) co_return ec;
      run.clear();
    }
  }
  co_return std::error_code{};
}

Awaitable<std::error_code> Datamover::finish_send() { co_return make_error_code(errc::not_supported); }

Awaitable<std::error_code> Datamover::put_data(PeerBuffer, std::uint64_t, Buffer) {
  co_return make_error_code(errc::not_supported);
}

Awaitable<std::error_code> Datamover::get_data(PeerBuffer, std::uint64_t, Buffer) {
  co_return make_error_code(errc::not_supported);
}

}  // namespace iserkit::datamover

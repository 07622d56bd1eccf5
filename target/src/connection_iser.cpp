// Target connection, iSER data transfer (RFC 7145 §7.3): with an RDMA datamover the target moves
// the payload itself — read data by RDMA Write into the initiator's Read STag (Put_Data, §7.3.5),
// write data by RDMA Read from its Write STag (Get_Data, §7.3.4) — so no Data-In, R2T or solicited
// Data-Out PDU is sent or expected; the status always travels in a SCSI Response.
#include "connection.hpp"

#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"

namespace iserkit::target {
namespace {

constexpr scsi::SenseData sense_data_phase_error{.key = scsi::SenseKey::aborted_command, .asc = 0x4b, .ascq = 0x00};

}  // namespace

Awaitable<void> Connection::fetch_write_data(Task& task) {
  const CommandPlan& plan = task.plan;
  const std::uint32_t needed =
      (!task.early && plan.direction == DataDirection::to_target) ? plan.transfer_length_bytes : 0;
  if (task.immediate_bytes >= needed || task.failure || task.aborted || closed_) {
    task.data_complete = true;
    co_return;
  }
  if (!task.remote_write) {
    // RFC 7145 §9.2: a write with data beyond the immediate data must carry a Write STag (WSV).
    log::info("connection {}: write without a Write STag: itt=0x{:08x}", datamover_->peer(), iscsi::to_u32(task.itt()));
    task.failure = sense_data_phase_error;
    co_return;
  }
  // The Write Base Offset points at the first byte after the immediate (and, were InitialR2T=No
  // allowed here, unsolicited) data: buffer offset `immediate_bytes`.
  const auto want = task.buffer.bytes().subspan(task.immediate_bytes, needed - task.immediate_bytes);
  const Buffer dest{.bytes = want, .lkey = task.buffer.buffer().lkey};
  if (const auto ec = co_await datamover_->get_data(*task.remote_write, 0, dest)) {
    log::info("connection {}: RDMA Read failed: itt=0x{:08x} bytes={} error={}", datamover_->peer(),
              iscsi::to_u32(task.itt()), want.size(), ec.message());
    close();
    co_return;
  }
  task.data_complete = true;
}

Awaitable<void> Connection::put_read_data(Task& task, std::uint32_t bytes, scsi::Status status, Residual residual) {
  if (!task.remote_read) {
    // RFC 7145 §9.2: a read must carry a Read STag (RSV); without one the data has nowhere to go.
    log::info("connection {}: read without a Read STag: itt=0x{:08x}", datamover_->peer(), iscsi::to_u32(task.itt()));
    co_await send_scsi_response(task, scsi::Status::check_condition, sense_data_phase_error,
                                residual_for(task.command.expected_data_transfer_length, 0));
    co_return;
  }
  const Buffer source{.bytes = task.buffer.bytes().first(bytes), .lkey = task.buffer.buffer().lkey};
  if (const auto ec = co_await datamover_->put_data(*task.remote_read, 0, source)) {
    log::info("connection {}: RDMA Write failed: itt=0x{:08x} bytes={} error={}", datamover_->peer(),
              iscsi::to_u32(task.itt()), bytes, ec.message());
    close();
    co_return;
  }
  if (task.aborted || closed_) co_return;
  // The RC QP delivers the RDMA Write before this SEND: the data is in place when the initiator
  // sees the status.
  co_await send_scsi_response(task, status, std::nullopt, residual);
}

}  // namespace iserkit::target

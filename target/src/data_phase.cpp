// The TCP and iSER data phases of the target (RFC 7143 §11.7/§11.8; RFC 7145 §7.3).
#include "data_phase.hpp"

#include "session_engine.hpp"

namespace iserkit::target {
namespace {

constexpr scsi::SenseData sense_data_phase_error{.key = scsi::SenseKey::aborted_command, .asc = 0x4b, .ascq = 0x00};

// Lets unsolicited data end (and, when `solicit`, asks for the rest with R2Ts).
WriteDataState solicit_with_r2ts(EngineTask& task, bool solicit, DataPhaseHost& host) {
  if (!task.sequencer || task.sequencer->complete()) return WriteDataState::complete;
  if (!solicit && !task.sequencer->unsolicited_done()) return WriteDataState::waiting;
  while (auto r2t = task.sequencer->next_r2t(host.allocate_ttt())) host.emit_r2t(task, *r2t);
  return task.sequencer->complete() ? WriteDataState::complete : WriteDataState::waiting;
}

class TcpDataPhase final : public DataPhase {
 public:
  WriteDataState get_write_data(EngineTask& task, bool solicit, DataPhaseHost& host) override {
    return solicit_with_r2ts(task, solicit, host);
  }
  void put_read_data(EngineTask& task, std::uint32_t bytes, scsi::Status status, Residual residual,
                     DataPhaseHost& host) override {
    host.emit_data_in(task, bytes, status, residual);
  }
};

class IserDataPhase final : public DataPhase {
 public:
  WriteDataState get_write_data(EngineTask& task, bool solicit, DataPhaseHost& host) override {
    // Nothing to fetch for an early-answered write: only immediate data, if any, came.
    if (!solicit) return solicit_with_r2ts(task, false, host);
    if (task.life.state == TaskState::fetching_write_data) return WriteDataState::waiting;
    const std::uint32_t needed = task.plan.transfer_length_bytes;
    const std::uint32_t immediate = task.sequencer ? task.sequencer->unsolicited_bytes() : 0;
    if (task.life.state == TaskState::write_data_fetched || immediate >= needed) return WriteDataState::complete;
    if (!task.peer_write) {
      // RFC 7145 §9.2: a write with data beyond the immediate data must carry a Write STag.
      host.emit_status(task, scsi::Status::check_condition, sense_data_phase_error,
                       residual_for(task.command.expected_data_transfer_length, 0));
      return WriteDataState::answered;
    }
    // The Write Base Offset points at the first byte after the immediate data.
    host.emit_get_data(task, *task.peer_write, immediate, needed - immediate);
    return WriteDataState::waiting;
  }
  void put_read_data(EngineTask& task, std::uint32_t bytes, scsi::Status status, Residual residual,
                     DataPhaseHost& host) override {
    if (!task.peer_read) {
      // RFC 7145 §9.2: a read must carry a Read STag; without one the data has nowhere to go.
      host.emit_status(task, scsi::Status::check_condition, sense_data_phase_error,
                       residual_for(task.command.expected_data_transfer_length, 0));
      return;
    }
    // The RC QP delivers the RDMA Write before the SEND of the status that follows it.
    host.emit_put_data(task, *task.peer_read, bytes);
    host.emit_status(task, status, std::nullopt, residual);
  }
};

}  // namespace

std::unique_ptr<DataPhase> make_data_phase(const datamover::Capabilities& capabilities) {
  if (capabilities.rdma_data) return std::make_unique<IserDataPhase>();
  return std::make_unique<TcpDataPhase>();
}

}  // namespace iserkit::target

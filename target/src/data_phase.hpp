// DataPhase: how a connection's transport moves a SCSI task's payload, chosen once per connection
// from Datamover::capabilities() (LIO's iscsit_transport get_dataout / queue_data_in are the model).
//  - TCP (RFC 7143 §11.7, §11.8): "get the write data" = R2Ts, answered by Data-Out PDUs the
//    engine places; "put the read data" = Data-In PDUs, the status in the last one.
//  - iSER (RFC 7145 §7.3): "get" = one RDMA Read from the initiator's Write STag; "put" = one RDMA
//    Write to its Read STag, then the status in a SCSI Response.
// Sans-I/O like the engine that calls it: it only asks its DataPhaseHost (the SessionEngine) to
// emit PDUs or actions.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "iserkit/datamover/capabilities.hpp"
#include "iserkit/datamover/pdu_io.hpp"
#include "iserkit/scsi/sense.hpp"
#include "data_in.hpp"
#include "write_sequencer.hpp"

namespace iserkit::target {

struct EngineTask;

/// What the session engine offers a data phase (all emissions are in the engine's action order).
class DataPhaseHost {
 public:
  /// Sends an R2T for `task` (RFC 7143 §11.8; current StatSN, not advanced).
  virtual void emit_r2t(const EngineTask& task, const R2tRequest& r2t) = 0;
  /// A Target Transfer Tag of this connection's, never 0xffffffff.
  virtual iscsi::Ttt allocate_ttt() noexcept = 0;
  /// Asks the driver to get `length` bytes of the initiator's buffer `source` into the task buffer
  /// at `buffer_offset` (GetWriteData: Get_Data, an RDMA Read on iSER); the task waits until
  /// SessionEngine::on_write_data().
  virtual void emit_get_data(EngineTask& task, datamover::PeerBuffer source, std::uint32_t buffer_offset,
                             std::uint32_t length) = 0;
  /// Sends the first `bytes` of the task buffer as Data-In with the status in the last PDU; ends the task.
  virtual void emit_data_in(EngineTask& task, std::uint32_t bytes, scsi::Status status, Residual residual) = 0;
  /// Asks the driver to put the first `bytes` of the task buffer into the initiator's buffer `dest`
  /// (PutReadData: Put_Data, an RDMA Write on iSER).
  virtual void emit_put_data(EngineTask& task, datamover::PeerBuffer dest, std::uint32_t bytes) = 0;
  /// Sends a SCSI Response and ends the task.
  virtual void emit_status(EngineTask& task, scsi::Status status, const std::optional<scsi::SenseData>& sense,
                           Residual residual) = 0;

 protected:
  ~DataPhaseHost() = default;
};

/// Where a task's write data stands after DataPhase::get_write_data().
enum class WriteDataState : std::uint8_t {
  waiting,   ///< bytes still to come (Data-Out PDUs or an RDMA Read under way)
  complete,  ///< every byte the task needs is in its buffer
  answered,  ///< the task was answered with a failure (emit_status was called): stop
};

/// One transport's data phase. Stateless apart from the task it is given.
class DataPhase {
 public:
  virtual ~DataPhase() = default;
  /// Gets the write data `task` still needs beyond what came with the command. `solicit`: the
  /// command will run and its full buffer exists; false: an early-answered write that only lets
  /// its unsolicited data end.
  virtual WriteDataState get_write_data(EngineTask& task, bool solicit, DataPhaseHost& host) = 0;
  /// Puts `bytes` (> 0) of read data from the task buffer to the initiator, with GOOD `status`
  /// and `residual` (RFC 7143 §11.4.5); the task ends.
  virtual void put_read_data(EngineTask& task, std::uint32_t bytes, scsi::Status status, Residual residual,
                             DataPhaseHost& host) = 0;
};

/// The data phase for a datamover with `capabilities`: iSER when rdma_data is set, else TCP.
std::unique_ptr<DataPhase> make_data_phase(const datamover::Capabilities& capabilities);

}  // namespace iserkit::target

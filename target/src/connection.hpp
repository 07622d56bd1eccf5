// Connection: one iSCSI connection of the target, from login to close (RFC 7143 §6.3 login phase,
// §3.2.4 full-feature phase, §11 PDUs). At MaxConnections=1 the connection is also its session: it
// owns the CmdSN window, StatSN, the task table and the negotiated parameters.
//
// THREAD MODEL: everything of a connection runs on the io_context it was accepted onto; one
// thread runs that io_context, so nothing here takes a lock. The receive loop never waits for
// backend I/O: each SCSI command runs as its own coroutine (co_spawn) on the same io_context.
// Receive handling is split in two, as SPDK does: the header phase (place(), called by the
// datamover before the data segment is read) validates the PDU and chooses where the data lands
// (the task's buffer at BufferOffset, so Data-Out needs no copy); the payload phase runs after
// the whole PDU arrived. Failures are one of: Reject PDU (recoverable), connection-fatal (close),
// or a SCSI CHECK CONDITION.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/datamover/datamover.hpp"
#include "iserkit/target/config.hpp"
#include "cmd_sn_window.hpp"
#include "login.hpp"
#include "payload_budget.hpp"
#include "target_node.hpp"
#include "task.hpp"

namespace iserkit::target {

/// What the portal learns from a connection (its admission bookkeeping). Called on the
/// connection's executor; either may be empty.
struct ConnectionHooks {
  std::function<void()> logged_in;  ///< the login succeeded (full-feature phase starts)
  std::function<void()> closed;     ///< run() is about to return
};

/// One target connection (and its single-connection session).
class Connection final : public std::enable_shared_from_this<Connection>, private datamover::DataPlacement {
 public:
  /// `registry` is shared by every connection; `datamover` is connected.
  /// `limits`: timeouts and per-connection bounds (login timeout, idle NOP-In ping, immediate
  /// commands, payload budget); `hooks` tell the portal about login and close; `global_budget`
  /// (null: none) is the payload budget shared by all connections.
  Connection(std::unique_ptr<datamover::Datamover> datamover, std::shared_ptr<const TargetRegistry> registry,
             TargetLoginOptions options, ConnectionLimits limits = {}, ConnectionHooks hooks = {},
             std::shared_ptr<SharedPayloadBudget> global_budget = nullptr);
  ~Connection() override;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// Runs login and the full-feature phase until the connection closes (logout, error, close()).
  /// Executor: the datamover's. Keep a shared_ptr to the connection while it runs.
  Awaitable<void> run();

  /// Closes the socket; run() then returns and running tasks stop. Call on the connection's executor.
  void close() noexcept;

  /// The peer's address, for logs.
  [[nodiscard]] std::string peer() const { return datamover_->peer(); }

 private:
  struct CurrentPdu {
    bool header_done = false;
    bool ignored = false;  // CmdSN outside the window: silently ignored (RFC 7143 §4.2.2.1)
    bool admitted = false;  // a non-immediate command that took a window slot
    std::optional<iscsi::RejectReason> reject;
    std::optional<DataOutError> data_out_error;
    std::shared_ptr<Task> task;
    std::span<std::byte> placed;  // where the data segment went (empty: scratch)
  };

  std::span<std::byte> place(const iscsi::Bhs& bhs, std::uint32_t length) noexcept override;
  std::span<std::byte> command_header(const iscsi::Bhs& bhs, ConstByteSpan ahs, std::uint32_t length);
  std::span<std::byte> data_out_header(const iscsi::Bhs& bhs, std::uint32_t length) noexcept;

  Awaitable<bool> login();
  Awaitable<void> watch_idle();
  void open_nexus();
  Awaitable<void> full_feature();
  Awaitable<void> handle(datamover::PduIn& in);
  Awaitable<void> on_scsi_command(datamover::PduIn& in);
  Awaitable<void> on_data_out(datamover::PduIn& in);
  Awaitable<void> on_nop_out(const iscsi::NopOut& h, datamover::PduIn& in);
  Awaitable<void> on_text(const iscsi::TextRequest& h, datamover::PduIn& in);
  Awaitable<void> on_logout(const iscsi::LogoutRequest& h);
  Awaitable<void> on_task_management(iscsi::TaskManagementRequest h);
  Awaitable<void> send_reject(iscsi::RejectReason reason, const iscsi::Bhs& bhs);

  Awaitable<void> run_task(std::shared_ptr<Task> task);
  Awaitable<void> run_task_body(Task& task);
  Awaitable<void> wait_for_data(Task& task);
  // iSER (RFC 7145 §7.3): the data moves by RDMA; see connection_iser.cpp.
  Awaitable<void> fetch_write_data(Task& task);
  Awaitable<void> put_read_data(Task& task, std::uint32_t bytes, scsi::Status status, Residual residual);
  Awaitable<void> send_scsi_response(Task& task, scsi::Status status, const std::optional<scsi::SenseData>& sense,
                                     Residual residual);
  Awaitable<void> send_data_in(Task& task, std::uint32_t bytes, scsi::Status status, Residual residual);
  Awaitable<void> wait_finished(Task& task);
  void finish_task(Task& task) noexcept;
  void abort_task(Task& task) noexcept;
  void fail_task(Task& task, const scsi::SenseData& sense) noexcept;
  void drop_unstarted_task() noexcept;
  // Payload budgets (payload_budget.hpp): the connection's, then the target's, in request order.
  void request_budget(const std::shared_ptr<Task>& task, std::uint64_t bytes);
  void request_global_budget(const std::shared_ptr<Task>& task);
  void budget_granted(Task& task) noexcept;
  void wake_budget_waiters(const std::vector<std::uint64_t>& ids);
  Awaitable<bool> wait_budget(Task& task);
  Awaitable<bool> obtain_write_buffer(Task& task);
  void release_budget(Task& task);

  SerialNumber take_stat_sn() noexcept {
    const SerialNumber v = stat_sn_;
    ++stat_sn_;
    return v;
  }
  template <class H>
  void stamp(H& header) const noexcept {
    header.exp_cmd_sn = window_.exp_cmd_sn();
    header.max_cmd_sn = window_.max_cmd_sn();
  }

  std::unique_ptr<datamover::Datamover> datamover_;
  std::shared_ptr<const TargetRegistry> registry_;
  TargetLoginOptions options_;
  ConnectionLimits limits_;
  ConnectionHooks hooks_;
  asio::steady_timer timer_;  // login timeout, then the idle watch
  std::uint64_t received_pdus_ = 0;  // full-feature PDUs received (the idle watch compares it)
  PayloadBudget budget_;
  std::shared_ptr<SharedPayloadBudget> global_budget_;
  std::unordered_map<std::uint64_t, std::shared_ptr<Task>> budget_waiters_;  // by Task::budget_id
  std::uint64_t next_budget_id_ = 1;
  std::uint32_t immediate_outstanding_ = 0;  // immediate SCSI commands not yet finished
  std::uint32_t task_management_outstanding_ = 0;  // TMF coroutines running
  LoginResult session_;
  iscsi::OperationalParameters params_;
  CmdSnWindow window_{SerialNumber(0), 1};
  SerialNumber stat_sn_;
  std::uint32_t next_ttt_ = 1;
  bool closed_ = false;
  bool logged_out_ = false;
  bool rdma_ = false;  // iSER: no Data-In/R2T/Data-Out; put_data/get_data instead
  CurrentPdu current_;
  NexusId nexus_;           // this session's I_T nexus at the device server (normal sessions)
  bool nexus_open_ = false;
  std::unordered_map<std::uint32_t, std::shared_ptr<Task>> tasks_;
  // Text Request state (RFC 7143 §11.10: C bit on requests, long responses continued by TTT).
  std::vector<std::byte> text_in_;
  std::vector<std::byte> text_out_;
  std::size_t text_out_offset_ = 0;
  iscsi::Ttt text_ttt_ = iscsi::reserved_ttt;
};

}  // namespace iserkit::target

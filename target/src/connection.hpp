// Connection: one iSCSI connection of the target, from login to close (RFC 7143 §6.3 login phase,
// §3.2.4 full-feature phase). At MaxConnections=1 the connection is also its session.
//
// The full-feature phase is a thin driver of the sans-I/O SessionEngine (session_engine.hpp), which
// holds every protocol rule (CmdSN window, StatSN, tasks, R2T/Data-Out, Data-In, TMF, logout...):
//  - one receive loop: the datamover's header phase asks the engine where the data segment goes
//    (place()), the payload phase hands it the PDU (on_pdu());
//  - one timer on the engine's next_deadline() (idle NOP-In ping and its timeout);
//  - one writer: the engine's ordered actions (PDU batches through Datamover::send_batch, iSER
//    RDMA Writes, budget releases, close) are carried out in order;
//  - backend execution (and iSER RDMA Reads) as coroutines that report back to the engine.
// THREAD MODEL: everything runs on the io_context the connection was accepted onto (one thread),
// so nothing here takes a lock; only the target-wide payload budget's grants come from other
// connections' threads and are posted back.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/completion.hpp"
#include "iserkit/common/fifo.hpp"
#include "iserkit/datamover/datamover.hpp"
#include "iserkit/target/config.hpp"
#include "cmd_sn_window.hpp"
#include "data_in_pipes.hpp"
#include "login.hpp"
#include "payload_budget.hpp"
#include "payload_ledger.hpp"
#include "target_node.hpp"
#include "session_engine.hpp"
#include "session_table.hpp"
#include "target_stats.hpp"

namespace iserkit::target {

/// What the portal learns from a connection (its admission bookkeeping). Called on the
/// connection's executor; either may be empty.
struct ConnectionHooks {
  std::function<void()> logged_in;  ///< the login succeeded (full-feature phase starts)
  /// Asked before the final Login Response of a successful login: false refuses the login with
  /// 0x0302 (out of resources), e.g. at a tenant's session cap. The argument is true when the
  /// login reinstates a live session (same InitiatorName + ISID + target + portal group, RFC 7143
  /// §6.3.5), which ends before this login completes. Null = always admitted.
  std::function<bool(bool reinstating)> admit_session;
  std::function<void()> closed;     ///< run() is about to return
};

/// One target connection (and its single-connection session).
class Connection final : public std::enable_shared_from_this<Connection>,
                         private datamover::DataPlacement,
                         private SendPass::Flusher {
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

  /// Target shutdown: a connection still logging in is closed; a session drains
  /// (SessionEngine::begin_drain: Async Message asking for a logout within `logout_within`,
  /// commands already received answered, then close). The caller bounds it with close().
  /// Call on the connection's executor.
  void drain(std::chrono::milliseconds logout_within) noexcept;

  /// The peer's address, for logs.
  [[nodiscard]] std::string peer() const { return datamover_->peer(); }

  /// This connection's identity and counters for the status socket (target_stats.hpp); readable
  /// from any thread, alive as long as the caller holds it.
  [[nodiscard]] std::shared_ptr<const ConnectionStats> stats() const noexcept { return stats_; }

 private:
  /// The ledger's shared level (payload_ledger.hpp): global_budget_, whose grants made on other
  /// connections' threads are posted to this connection's executor.
  struct SharedBudgetPort final : PayloadLedger::SharedLevel {
    explicit SharedBudgetPort(Connection& c) noexcept : connection(c) {}
    PayloadLedger::SharedAsk request(std::uint64_t hold, std::uint64_t bytes) override;
    bool cancel(std::uint64_t shared_id) override;
    void release(std::uint64_t bytes) override;
    Connection& connection;
  };

  std::span<std::byte> place(const iscsi::Bhs& bhs, std::uint32_t length) noexcept override;
  /// The loop's send pass ended: the writer takes what the pass queued (SendPass::Flusher).
  void flush_pass() override;

  Awaitable<bool> login();
  /// What reinstate() found.
  enum class Reinstatement : std::uint8_t {
    ready,      ///< no live session with this identity, or it has wholly ended: answer the login
    closed,     ///< this connection was closed meanwhile (e.g. the login timeout)
    timed_out,  ///< the old session did not end within limits_.reinstate_timeout: refuse (0x0301)
  };
  /// Session reinstatement (RFC 7143 §6.3.5): registers the session `result` is about to open and
  /// ends a live session with the same InitiatorName + ISID + target first, waiting up to
  /// limits_.reinstate_timeout until it has wholly ended (tasks, budgets, I_T nexus). A session
  /// not ended in time stays this connection's predecessor_ (see session_ended()).
  Awaitable<Reinstatement> reinstate(const LoginResult& result);
  /// True when `result` (a successful normal login) names the SessionKey of a live session: the
  /// login will reinstate it (RFC 7143 §6.3.5).
  [[nodiscard]] bool reinstates_live_session(const LoginResult& result) const;
  /// Unregisters the session and tells a reinstating login that it has ended (end of run()).
  void session_ended() noexcept;
  void open_nexus();
  void start_engine();
  Awaitable<void> receive_loop();
  Awaitable<void> timer_loop();
  Awaitable<void> writer();
  Awaitable<void> execute(iscsi::Itt itt);
  Awaitable<void> get_write_data(GetWriteData get);
  /// A task on the fast path (ScsiDispatcher::start_media_io(): no coroutine). Pooled per connection.
  /// What executed() counts for a task, taken as it starts.
  struct CommandStart {
    iscsi::Itt itt{0};
    std::size_t kind = 0;                    // op_kind
    std::uint32_t out_bytes = 0;             // Data-Out bytes of a write
    std::chrono::steady_clock::time_point start;
    LogicalUnitStats* unit_stats = nullptr;  // the addressed LU's counters (per-LUN metrics)
  };
  /// writer(): the steps of one send chain — `first` (a PutReadData) and the PutReadData, SendPdus
  /// and ReleaseBudget actions queued right behind it, taken off the queue; the releases go to
  /// releases_after_send_, the actions whose buffers the steps use to `held`. Also returns how
  /// many RDMA Writes (Put_Data) the chain has.
  std::pair<std::vector<datamover::ChainStep>, std::size_t> chain_steps(EngineAction first,
                                                                        std::vector<EngineAction>& held);
  /// A task starts: its CommandStart, and the transport's largest command noted.
  CommandStart command_started(iscsi::Itt itt, const EngineTask& task);
  struct FastCommand final : MediaIo {
    std::shared_ptr<Connection> owner;  // keeps the connection alive while the backend works
    CommandStart started;
    std::size_t pipe_bytes = 0;  // with splice_pipe: the READ's bytes (data_in_pipes_)
    void complete(ScsiOutcome outcome) noexcept override;
  };
  /// Starts task `itt` on the fast path; false when it does not apply (nothing was done: run
  /// execute()). True: backend_running_ counts it until finish_fast().
  bool execute_fast(iscsi::Itt itt);
  /// The fast path's end: as execute() after the dispatcher answered.
  void finish_fast(FastCommand& command, const ScsiOutcome& outcome) noexcept;
  /// A task's outcome: the counters (`unit_stats`: the addressed LU's, nullptr for none), the
  /// engine, the actions it produced.
  void executed(const CommandStart& started, const ScsiOutcome& outcome);
  /// Takes the engine's actions: starts backend work at once, queues the ordered ones for writer().
  void pump();
  /// While one lives (the outermost), pump() leaves the writer's wake-up to its destructor, which
  /// runs the writer inline when nothing holds the send pass (WriterWakeAfter in connection.cpp).
  struct WriterWakeAfter {
    explicit WriterWakeAfter(Connection& c) noexcept;
    ~WriterWakeAfter();
    WriterWakeAfter(const WriterWakeAfter&) = delete;
    WriterWakeAfter& operator=(const WriterWakeAfter&) = delete;
    Connection& connection;
    bool outer;
  };
  bool writer_wake_deferred_ = false;  // a WriterWakeAfter is open
  bool writer_wake_pending_ = false;   // pump() queued work for the writer meanwhile

  // Payload budgets (ledger_): requests by the engine (hook), releases by writer(), shared-level
  // grants posted back (shared_budget_granted()).
  bool request_budget(iscsi::Itt itt, std::uint64_t bytes);
  void release_budget(const ReleaseBudget& release);
  void shared_budget_granted(std::uint64_t hold);
  void backend_done() noexcept;

  std::unique_ptr<datamover::Datamover> datamover_;
  std::shared_ptr<const TargetRegistry> registry_;
  TargetLoginOptions options_;
  ConnectionLimits limits_;
  ConnectionHooks hooks_;
  asio::steady_timer timer_;  // login timeout, then the engine's deadline
  std::shared_ptr<SharedPayloadBudget> global_budget_;
  SharedBudgetPort shared_budget_port_{*this};
  PayloadLedger ledger_;  // the connection's budget, then global_budget_ (through the port)
  LoginResult session_;
  iscsi::OperationalParameters params_;
  std::unique_ptr<SessionEngine> engine_;
  Fifo<EngineAction> ordered_;        // for writer(), in order
  std::vector<ReleaseBudget> releases_after_send_;  // writer(): those its joined batch passed over
  SendPass* pass_ = nullptr;          // the loop's send pass (full-feature phase)
  Event ordered_ready_;               // ordered_ got work (or the writer must stop)
  Event ordered_room_;                // ordered_ drained below the receive loop's bound
  bool writer_stop_ = false;
  Event writer_done_;
  std::uint32_t backend_running_ = 0;  // execute() / get_write_data() coroutines, fast commands
  std::vector<std::unique_ptr<FastCommand>> fast_commands_;  // every one made (at most the commands in flight)
  std::vector<FastCommand*> fast_free_;                      // of those, the idle ones
  std::vector<FastCommand*> fast_done_now_;                  // finished inside pump(): answered after its loop
  Event backend_idle_;
  // Zero-copy READ Data-In over TCP without a data digest (data_in_pipes.hpp); off otherwise.
  DataInPipes data_in_pipes_;
  bool splice_data_in_ = false;
  bool closed_ = false;
  NexusId nexus_;           // this session's I_T nexus at the device server (normal sessions)
  std::uint64_t session_id_;  // unique per connection, for the SessionTable
  std::optional<SessionKey> session_key_;  // set once registered in the SessionTable
  std::shared_ptr<SessionEnd> session_end_ = std::make_shared<SessionEnd>();
  // The session this login replaced and gave up waiting for (reinstate()); our end waits for its.
  std::shared_ptr<SessionEnd> predecessor_;
  bool nexus_open_ = false;
  std::shared_ptr<ConnectionStats> stats_ = std::make_shared<ConnectionStats>();
};

}  // namespace iserkit::target

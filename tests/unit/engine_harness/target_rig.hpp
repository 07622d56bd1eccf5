// TargetRig: the target's two sans-I/O machines as its driver runs them (Connection: the login
// phase, then start_engine()), for ScriptedPeer scripts (scripted_peer.hpp) where the script plays
// the initiator. The login runs target::LoginMachine against a registry with one node
// (TargetRig::target_name); send_then_full_feature starts a SessionEngine with the negotiated
// parameters and the login's ExpCmdSN and StatSN (RFC 7143 §11.12.8, §11.13). The SCSI layer is a
// fake plan: READ(10)/WRITE(10) of 512-byte blocks, INQUIRY, TEST UNIT READY on LUNs 0 and 1;
// the backend is the script (call steps complete()), and payload budgets are granted at once or,
// with grant_budgets = false, by grant(). Every engine action is an Action, in order (a SendPdus
// batch as one SentPdu per PDU, SentPdu::batch numbering the batches).
//
// Invariants checked on every action (ADD_FAILURE, prefixed with the step): nothing is sent,
// executed, fetched or put after CloseConnection, which comes at most once; a task is never handed
// to the backend twice at once; every ReleaseBudget matches a request (SessionEngineHooks:
// "every request is ended by exactly one ReleaseBudget"). finish() closes the connection as the
// driver does (on_closed()), lets the backend finish what it holds, and checks that no task is
// left and every budget request was released exactly once. While the backend or an RDMA Read
// holds a task, its buffer must stay where it was (checked after every step).
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "iserkit/common/buffer.hpp"
#include "iserkit/common/bytes.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/iscsi/text.hpp"
#include "login.hpp"
#include "scripted_peer.hpp"
#include "session_engine.hpp"

namespace iserkit::test::harness {

/// ExecuteTask: the backend got the task.
struct Executed {
  iscsi::Itt itt{0};
};
/// GetWriteData (iSER RDMA Read).
struct FetchedWriteData {
  target::GetWriteData get;
};
/// PutReadData (iSER RDMA Write).
struct PutData {
  iscsi::Itt itt{0};
  std::uint32_t bytes = 0;
};
/// ReleaseBudget (granted or cancelled).
struct Released {
  target::ReleaseBudget release;
};
/// DeviceReset.
struct ResetDevice {
  target::DeviceReset reset;
};
/// CloseConnection (why).
struct Closed {
  std::string reason;
};
/// The login reached full feature phase; the SessionEngine now runs.
struct TargetLoggedIn {
  iscsi::OperationalParameters parameters;
};

/// How a TargetRig starts (TargetRig::Options).
struct TargetRigOptions {
  bool login = true;                        ///< run the LoginMachine first
  target::TargetLoginOptions login_options;
  /// The engine's configuration; after a login its params, ExpCmdSN, StatSN, discovery and CID
  /// come from the login.
  target::SessionEngineConfig engine{.exp_cmd_sn = SerialNumber(1), .stat_sn = SerialNumber(100),
                                     .cmd_window_depth = 4, .max_immediate_commands = 2};
  bool rdma = false;  ///< the iSER data phase
};

/// The target side. Options: log in first (login = true) or start the engine at once.
class TargetRig {
 public:
  using Action =
      std::variant<SentPdu, Executed, FetchedWriteData, PutData, Released, ResetDevice, Closed, TargetLoggedIn>;
  static constexpr const char* target_name = "iqn.2026-11.org.iserkit:harness";
  static constexpr std::uint32_t block = 512;

  using Options = TargetRigOptions;

  explicit TargetRig(Options options = {}) : options_(std::move(options)) {
    auto node = std::make_shared<target::TargetNode>();
    node->name = target_name;
    node->dispatcher = std::make_shared<target::ScsiDispatcher>();
    EXPECT_TRUE(registry_.add(node));
    if (options_.login) {
      login_.emplace(registry_, options_.login_options);
    } else {
      start_engine(options_.engine);
    }
  }

  // ---- the harness's interface (scripted_peer.hpp) ----
  TimePoint now = t0;
  std::string context;
  bool lenient = false;
  bool grant_budgets = true;         ///< request_budget answers true at once
  iscsi::TextPairs send_targets;     ///< the SendTargets answer

  std::deque<Action>& pending() { return pending_; }

  void deliver(const PeerPdu& p, TimePoint at) { deliver_raw(iscsi::encode_bhs(p.header), p, p.pdu_error, at); }
  /// The PDU with opcode 0x1e (no initiator opcode, RFC 7143 §11.2.1.2).
  void deliver_malformed(const PeerPdu& p, TimePoint at) {
    iscsi::Bhs bhs = iscsi::encode_bhs(p.header);
    bhs[0] = std::byte{0x1e};
    deliver_raw(bhs, p, {}, at);
  }
  /// A PDU read just before the connection closed: to the engine even after the close.
  void deliver_late(const PeerPdu& p, TimePoint at) {
    late_ = true;
    deliver(p, at);
    late_ = false;
  }
  void deliver_digest_error(const PeerPdu& p, TimePoint at) {
    deliver_raw(iscsi::encode_bhs(p.header), p, make_error_code(errc::data_digest_error), at);
  }
  void fire_timer(TimePoint at) {
    now = at;
    if (!engine_ || closed_) return;
    engine_->on_timer(at);
    collect();
  }
  /// The connection drops (socket error, peer gone): on_closed(); during login the driver just ends.
  void lose_connection(TimePoint at) {
    now = at;
    if (closed_) return;
    if (login_) {
      login_.reset();
      closed_ = true;
      return;
    }
    if (!engine_) return;
    engine_->on_closed();
    collect();
    closed_ = true;  // on_closed() may or may not say CloseConnection: the socket is gone anyway
  }
  [[nodiscard]] bool connection_up() const noexcept { return !closed_ && (login_ || engine_); }

  void begin_fault(Fault) {
    fault_from_ = history_.size();
    up_at_fault_ = connection_up();
    in_login_at_fault_ = login_.has_value();
  }
  /// The documented reaction to the fault (RFC 7143 §6.3 / §11.13.5 for the login,
  /// session_engine.hpp for the full feature phase).
  void check_reaction(Fault f) {
    if (!up_at_fault_) return;
    if (in_login_at_fault_) {
      // A login PDU with another opcode or a PDU error ends the login (Login reject, or no reply).
      if (f == Fault::malformed_pdu || f == Fault::digest_error) {
        EXPECT_TRUE(saw<Closed>()) << context << ": the login went on after " << to_string(f);
      }
      return;
    }
    if (f == Fault::connection_lost || f == Fault::late_pdu) {
      EXPECT_TRUE(saw<Closed>()) << context << ": no CloseConnection after on_closed()";
    }
    if (f == Fault::malformed_pdu) {
      EXPECT_TRUE(saw_reject(iscsi::RejectReason::command_not_supported))
          << context << ": no Reject (command not supported) for an unknown opcode";
    }
  }

  /// Teardown as the driver does: on_closed(), then the backend finishes every task it holds and
  /// every RDMA Read ends; then no task, budget or backend work may be left.
  void finish() {
    login_.reset();
    if (engine_ && !closed_) {
      engine_->on_closed();
      collect();
      closed_ = true;
    }
    if (engine_) {
      while (!executing_.empty()) {
        const std::uint32_t itt = executing_.begin()->first;
        executing_.erase(executing_.begin());
        engine_->on_task_executed(iscsi::Itt{itt}, target::ScsiOutcome::good());
        collect();
      }
      while (!fetching_.empty()) {
        const std::uint32_t itt = fetching_.begin()->first;
        fetching_.erase(fetching_.begin());
        engine_->on_write_data(iscsi::Itt{itt}, std::make_error_code(std::errc::connection_reset));
        collect();
      }
      EXPECT_EQ(engine_->task_count(), 0u) << context << ": teardown: tasks left in the engine";
      EXPECT_EQ(engine_->task_moves_refused(), 0u) << context << ": a task move without a row in task_transitions";
    }
    for (const auto& [itt, open] : budgets_)
      EXPECT_EQ(open, 0) << context << ": teardown: the payload budget of ITT " << itt << " was never released";
  }

  std::string describe(const Action& a) const {
    struct V {
      std::string operator()(const SentPdu& p) const { return "sent " + harness::describe(p.bhs); }
      std::string operator()(const Executed& e) const { return "execute itt=" + std::to_string(iscsi::to_u32(e.itt)); }
      std::string operator()(const FetchedWriteData& g) const {
        return "get write data itt=" + std::to_string(iscsi::to_u32(g.get.itt));
      }
      std::string operator()(const PutData& p) const { return "put read data itt=" + std::to_string(iscsi::to_u32(p.itt)); }
      std::string operator()(const Released& r) const {
        return "release budget itt=" + std::to_string(iscsi::to_u32(r.release.itt)) + " bytes=" +
               std::to_string(r.release.bytes);
      }
      std::string operator()(const ResetDevice&) const { return "device reset"; }
      std::string operator()(const Closed& c) const { return "close (" + c.reason + ")"; }
      std::string operator()(const TargetLoggedIn&) const { return "logged in"; }
    };
    return std::visit(V{}, a);
  }

  // ---- for scripts: the backend's and the registry's calls ----

  target::SessionEngine* engine() noexcept { return engine_ ? engine_.get() : nullptr; }
  /// Copies `data` into the task's buffer (a read's data, before complete()).
  void fill(iscsi::Itt itt, const std::vector<std::byte>& data) {
    if (!engine_) return;
    auto buf = engine_->task_data(itt);
    if (buf.size() < data.size()) {
      if (!lenient) ADD_FAILURE() << context << ": task buffer of " << buf.size() << " bytes for " << data.size();
      return;
    }
    std::memcpy(buf.data(), data.data(), data.size());
  }
  /// The task's buffer as the backend sees it (a write's data).
  std::vector<std::byte> task_data(iscsi::Itt itt) {
    if (!engine_) return {};
    auto buf = engine_->task_data(itt);
    return {buf.begin(), buf.end()};
  }
  /// The backend finishes task `itt` (after an Executed action).
  void complete(iscsi::Itt itt, const target::ScsiOutcome& outcome) {
    if (!engine_) return;
    if (executing_.erase(iscsi::to_u32(itt)) == 0) {
      if (!lenient) ADD_FAILURE() << context << ": complete(): ITT " << iscsi::to_u32(itt) << " is not on the backend";
      return;
    }
    engine_->on_task_executed(itt, outcome);
    collect();
  }
  /// iSER: the RDMA Read of task `itt` ended.
  void write_data_done(iscsi::Itt itt, std::error_code error = {}) {
    if (!engine_ || fetching_.erase(iscsi::to_u32(itt)) == 0) return;
    if (!error) {
      auto buf = engine_->task_data(itt);  // the RDMA Read's bytes land there
      std::fill(buf.begin(), buf.end(), std::byte{0xd5});
    }
    engine_->on_write_data(itt, error);
    collect();
  }
  /// The payload budget asked for task `itt` is granted.
  void grant(iscsi::Itt itt) {
    if (!engine_) return;
    engine_->on_budget_granted(itt);
    collect();
  }
  /// The target shuts down (begin_drain()).
  void drain(std::uint16_t seconds) {
    if (!engine_) return;
    engine_->begin_drain(seconds);
    collect();
  }

  /// A READ(10) (0x28) / WRITE(10) (0x2a) CDB of `blocks` blocks at LBA 0.
  static std::array<std::byte, 16> cdb10(std::uint8_t op, std::uint16_t blocks) {
    std::array<std::byte, 16> c{};
    c[0] = std::byte{op};
    store_be16(&c[7], blocks);
    return c;
  }

  /// The fake SCSI layer (see the file comment).
  static target::CommandPlan plan(const scsi::Lun& lun, ConstByteSpan cdb) {
    target::CommandPlan p;
    if (!(lun == scsi::Lun::from_index(0) || lun == scsi::Lun::from_index(1))) {
      p.error = scsi::SenseData{.key = scsi::SenseKey::illegal_request, .asc = 0x25, .ascq = 0};
      return p;
    }
    const auto op = static_cast<std::uint8_t>(cdb[0]);
    if (op == 0x28 || op == 0x2a) {
      p.transfer_length_bytes = load_be16(&cdb[7]) * block;
      p.direction = p.transfer_length_bytes == 0 ? target::DataDirection::none
                    : op == 0x28                 ? target::DataDirection::from_target
                                                 : target::DataDirection::to_target;
    } else if (op == 0x12) {
      p.transfer_length_bytes = load_be16(&cdb[3]);
      p.direction = p.transfer_length_bytes ? target::DataDirection::from_target : target::DataDirection::none;
    } else if (op != 0x00) {
      p.error = scsi::SenseData{.key = scsi::SenseKey::illegal_request, .asc = 0x20, .ascq = 0};
    }
    return p;
  }

 private:
  template <class T>
  bool saw() const {
    for (std::size_t i = fault_from_; i < history_.size(); ++i)
      if (std::holds_alternative<T>(history_[i])) return true;
    return false;
  }
  bool saw_reject(iscsi::RejectReason reason) const {
    for (std::size_t i = fault_from_; i < history_.size(); ++i)
      if (auto* p = std::get_if<SentPdu>(&history_[i]))
        if (auto* r = p->as<iscsi::Reject>(); r && r->reason == reason) return true;
    return false;
  }

  void add(Action a) {
    history_.push_back(a);
    pending_.push_back(std::move(a));
  }

  void start_engine(const target::SessionEngineConfig& config) {
    target::SessionEngineHooks hooks;
    hooks.plan = &TargetRig::plan;
    hooks.lun_exists = [](const scsi::Lun& l) { return l == scsi::Lun::from_index(0) || l == scsi::Lun::from_index(1); };
    hooks.send_targets = [this](const std::string&) { return send_targets; };
    hooks.request_budget = [this](iscsi::Itt itt, std::uint64_t) {
      ++budgets_[iscsi::to_u32(itt)];
      return grant_budgets;
    };
    engine_ = std::make_unique<target::SessionEngine>(config, std::move(hooks), pool_,
                                                      target::make_data_phase({.rdma_data = options_.rdma}), now);
  }

  void send_login_step(const target::LoginStep& step) {
    if (step.action != target::LoginAction::close) {
      SentPdu p;
      p.data = step.text;
      p.bhs = iscsi::encode_bhs(step.response);
      iscsi::set_lengths(p.bhs, 0, static_cast<std::uint32_t>(p.data.size()));
      p.header = step.response;
      add(std::move(p));
    }
    switch (step.action) {
      case target::LoginAction::send: break;
      case target::LoginAction::send_then_full_feature: {
        const auto& r = login_->result();
        target::SessionEngineConfig c = options_.engine;
        c.params = r.parameters;
        c.discovery = r.discovery;
        c.cid = r.cid;
        c.exp_cmd_sn = r.exp_cmd_sn;
        c.stat_sn = r.stat_sn;
        login_.reset();
        start_engine(c);
        add(TargetLoggedIn{c.params});
        break;
      }
      case target::LoginAction::send_then_close:
      case target::LoginAction::close:
        login_.reset();
        closed_ = true;
        add(Closed{step.reason});
        break;
    }
  }

  void deliver_raw(iscsi::Bhs bhs, const PeerPdu& p, std::error_code pdu_error, TimePoint at) {
    now = at;
    if (closed_ && !late_) return;  // no connection: nothing arrives
    iscsi::set_lengths(bhs, 0, static_cast<std::uint32_t>(p.data.size()));
    if (login_) return send_login_step(login_->on_pdu(bhs, p.data, pdu_error));
    if (!engine_) return;
    datamover::PduIn in;
    in.bhs = bhs;
    in.pdu_error = pdu_error;
    in.peer_read = p.peer_read;
    in.peer_write = p.peer_write;
    auto dest = engine_->place(bhs, static_cast<std::uint32_t>(p.data.size()));
    if (!dest.empty()) {
      EXPECT_EQ(dest.size(), p.data.size()) << context << ": place() gave a span of another size";
      std::memcpy(dest.data(), p.data.data(), std::min(dest.size(), p.data.size()));
      in.data = dest;
    } else {
      scratch_.assign(p.data.begin(), p.data.end());
      in.data = scratch_;
    }
    engine_->on_pdu(in, at);
    collect();
  }

  void collect() {
    if (!engine_) return;
    auto actions = engine_->take_actions();
    for (auto& a : actions) {
      if (auto* batch = std::get_if<target::SendPdus>(&a)) {
        ++batches_;
        for (auto& p : batch->pdus) {
          EXPECT_FALSE(closed_) << context << ": sent after CloseConnection: " << harness::describe(p.bhs);
          auto h = iscsi::decode_bhs(p.bhs);
          EXPECT_TRUE(h) << context << ": the engine sent a BHS it cannot decode";
          if (!h) continue;
          EXPECT_EQ(iscsi::data_segment_length_bytes(p.bhs), p.data.size()) << context;
          add(SentPdu{*h, p.bhs, std::vector<std::byte>(p.data.begin(), p.data.end()), batches_});
        }
      } else if (auto* ex = std::get_if<target::ExecuteTask>(&a)) {
        EXPECT_FALSE(closed_) << context << ": ExecuteTask after CloseConnection";
        EXPECT_TRUE(executing_.emplace(iscsi::to_u32(ex->itt), engine_->task_data(ex->itt).data()).second)
            << context << ": ITT " << iscsi::to_u32(ex->itt) << " handed to the backend twice";
        add(Executed{ex->itt});
      } else if (auto* get = std::get_if<target::GetWriteData>(&a)) {
        EXPECT_FALSE(closed_) << context << ": GetWriteData after CloseConnection";
        fetching_.emplace(iscsi::to_u32(get->itt), engine_->task_data(get->itt).data());
        add(FetchedWriteData{*get});
      } else if (auto* put = std::get_if<target::PutReadData>(&a)) {
        EXPECT_FALSE(closed_) << context << ": PutReadData after CloseConnection";
        add(PutData{put->itt, put->bytes});
      } else if (auto* rel = std::get_if<target::ReleaseBudget>(&a)) {
        int& open = budgets_[iscsi::to_u32(rel->itt)];
        EXPECT_GT(open, 0) << context << ": ReleaseBudget of ITT " << iscsi::to_u32(rel->itt)
                           << " without a request (released twice?)";
        --open;
        add(Released{*rel});
      } else if (auto* reset = std::get_if<target::DeviceReset>(&a)) {
        add(ResetDevice{*reset});
      } else if (auto* c = std::get_if<target::CloseConnection>(&a)) {
        EXPECT_FALSE(closed_) << context << ": CloseConnection twice (" << c->reason << ")";
        closed_ = true;
        add(Closed{c->reason});
      }
    }
    engine_->recycle_actions(std::move(actions));
    // The backend and an RDMA Read write into the task's buffer until they report: it must stay.
    for (auto* held : {&executing_, &fetching_})
      for (const auto& [itt, data] : *held)
        EXPECT_TRUE(engine_->task(iscsi::Itt{itt}) != nullptr && engine_->task_data(iscsi::Itt{itt}).data() == data)
            << context << ": the buffer of ITT " << itt << " went away while the "
            << (held == &executing_ ? "backend" : "RDMA Read") << " still writes into it";
  }

  Options options_;
  target::TargetRegistry registry_;
  HeapBufferPool pool_;
  std::optional<target::LoginMachine> login_;
  std::unique_ptr<target::SessionEngine> engine_;
  // Tasks on the backend / under an RDMA Read, with the buffer they write into.
  std::map<std::uint32_t, const std::byte*> executing_;
  std::map<std::uint32_t, const std::byte*> fetching_;
  std::map<std::uint32_t, int> budgets_;  // open requests by ITT
  std::deque<Action> pending_;
  std::vector<Action> history_;
  std::vector<std::byte> scratch_;
  bool closed_ = false;
  bool late_ = false;  // deliver_late()
  std::uint64_t batches_ = 0;
  std::size_t fault_from_ = 0;
  bool up_at_fault_ = false;
  bool in_login_at_fault_ = false;
};

}  // namespace iserkit::test::harness

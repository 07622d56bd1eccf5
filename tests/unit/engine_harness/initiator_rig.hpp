// InitiatorRig: the initiator's two sans-I/O machines as its driver runs them (login_io.cpp, then
// session.cpp), for ScriptedPeer scripts (scripted_peer.hpp) where the script plays the target.
// The login phase runs the LoginMachine (RFC 7143 §6.3: only Login Responses may arrive; a PDU
// error or another PDU fails the login with errc::protocol_error, as perform_login() does); its
// LoginDone starts a SessionEngine with the negotiated write limits and the login's numbering
// (§11.12.8, §11.13). Its actions: PDUs sent, task completions, the session's end, a lost
// connection, give-up, logged in, login failed; from one take_actions() batch in that order (the
// PDUs, then the completions, then the rest), as Session::Impl::apply() handles them.
//
// Invariants checked on every action (ADD_FAILURE, prefixed with the step): nothing is sent after
// the session ended or the connection was lost; no task completes twice; a PDU never borrows the
// buffer of a task that already completed; after a failed connection no task completes without an
// error. A task's buffer is freed as soon as it completes (its read data copied first), so a late
// Data-In placed into it is a heap-use-after-free under ASan (and without ASan, a span from
// place() must lie inside the buffer of a task still running). finish() closes the session as its
// owner would (fail_session) and checks that every task submitted completed exactly once and that
// no ITT, queued command or in-flight count is left.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "iserkit/common/errors.hpp"
#include "iserkit/iscsi/text.hpp"
#include "login.hpp"
#include "scripted_peer.hpp"
#include "session_engine.hpp"

namespace iserkit::initiator {
/// The write limits of negotiated `params` (session.cpp; declared in session_start.hpp, which
/// brings Asio with it: declared again here so the rig stays free of Asio, as the engine is).
WriteLimits write_limits_of(const iscsi::OperationalParameters& params);
}  // namespace iserkit::initiator

namespace iserkit::test::harness {

/// The engine completed a task (TaskOutcome as it came).
struct Completed {
  initiator::TaskOutcome outcome;
};
/// EngineActions::ended: the session is over (why).
struct SessionEnded {
  std::error_code error;
};
/// EngineActions::connection_lost: the session is recovering (why).
struct ConnectionLost {
  std::error_code error;
};
/// EngineActions::gave_up: past the replacement timeout.
struct GaveUp {
  std::error_code error;
};
/// The login reached full feature phase; the SessionEngine now runs.
struct LoggedIn {
  iscsi::OperationalParameters parameters;
};
/// The login failed (the LoginMachine's error, a PDU that is no Login Response, a lost connection).
struct LoginFailed {
  std::error_code error;
};

/// ISID 80 01 02 03 00 01, ITT 7, CmdSN 1, no security stage, iqn.2026-11.org.iserkit:test →
/// iqn.2026-11.org.example:vol1.
inline initiator::LoginConfig default_login_config() {
  initiator::LoginConfig c;
  c.initiator_name = "iqn.2026-11.org.iserkit:test";
  c.target_name = "iqn.2026-11.org.example:vol1";
  c.isid = {std::byte{0x80}, std::byte{1}, std::byte{2}, std::byte{3}, std::byte{0}, std::byte{1}};
  c.itt = iscsi::Itt{7};
  c.cmd_sn = SerialNumber(1);
  c.options.security_stage = false;
  return c;
}

/// How an InitiatorRig starts (InitiatorRig::Options).
struct InitiatorRigOptions {
  bool login = true;                 ///< run the LoginMachine first
  initiator::LoginConfig login_config = default_login_config();
  initiator::EngineConfig engine;    ///< limits are replaced by the negotiated ones after a login
  initiator::EngineStart start{.cmd_sn = SerialNumber(1), .exp_cmd_sn = SerialNumber(1),
                               .max_cmd_sn = SerialNumber(64), .exp_stat_sn = SerialNumber(10)};  ///< without login
};

/// The initiator side. Options: log in first (login = true) or start the engine at once.
class InitiatorRig {
 public:
  using Action = std::variant<SentPdu, Completed, SessionEnded, ConnectionLost, GaveUp, LoggedIn, LoginFailed>;

  using Options = InitiatorRigOptions;

  /// See harness::default_login_config().
  static initiator::LoginConfig default_login_config() { return harness::default_login_config(); }

  explicit InitiatorRig(Options options = {}) : options_(std::move(options)) {
    if (options_.login) {
      login_.emplace(options_.login_config);
      auto first = login_->start();
      push_login_request(first);
    } else {
      engine_.emplace(options_.engine, options_.start, now);
    }
  }

  // ---- the harness's interface (scripted_peer.hpp) ----
  TimePoint now = t0;
  std::string context;
  bool lenient = false;

  std::deque<Action>& pending() { return pending_; }

  void deliver(const PeerPdu& p, TimePoint at) {
    iscsi::Bhs bhs = iscsi::encode_bhs(p.header);
    deliver_raw(bhs, p.data, p.pdu_error, at);
  }
  /// The PDU with opcode 0x2f (no target opcode, RFC 7143 §11.2.1.2).
  void deliver_malformed(const PeerPdu& p, TimePoint at) {
    iscsi::Bhs bhs = iscsi::encode_bhs(p.header);
    bhs[0] = std::byte{0x2f};
    deliver_raw(bhs, p.data, {}, at);
  }
  /// A PDU read just before the connection closed: to the engine even when it ended.
  void deliver_late(const PeerPdu& p, TimePoint at) {
    late_ = true;
    deliver(p, at);
    late_ = false;
  }
  void deliver_digest_error(PeerPdu p, TimePoint at) {
    p.pdu_error = make_error_code(errc::data_digest_error);
    deliver(p, at);
  }
  void fire_timer(TimePoint at) {
    now = at;
    if (!engine_) return;
    engine_->on_timer(at);
    collect();
  }
  /// The transport fails (I/O error): connection_failed(), or a login that stops.
  void lose_connection(TimePoint at) {
    now = at;
    if (login_) {
      login_.reset();
      add(LoginFailed{std::make_error_code(std::errc::connection_reset)});
      return;
    }
    if (!engine_ || dead_) return;
    engine_->connection_failed(std::make_error_code(std::errc::connection_reset), at);
    collect();
  }
  /// A new connection is logged in (recovery, RFC 7143 §6.3.5): on_reconnected().
  void reconnect(initiator::EngineStart start, initiator::WriteLimits limits) {
    if (!engine_) return;
    engine_->on_reconnected(start, limits, now);
    if (!ended_ && engine_->open() && !engine_->recovering()) {
      dead_ = false;
      // RFC 7143 §6.3.5: the interrupted commands go out again on the new connection and may
      // succeed there.
      for (auto& [id, t] : tasks_) t.must_fail = false;
    }
    collect();
  }
  [[nodiscard]] bool connection_up() const noexcept { return login_.has_value() || (engine_ && !dead_); }

  void begin_fault(Fault f) {
    fault_ = f;
    fault_from_ = history_.size();
    dead_at_fault_ = !connection_up();
    in_login_at_fault_ = login_.has_value();
    if (f == Fault::connection_lost || f == Fault::malformed_pdu || f == Fault::late_pdu)
      for (auto& [id, t] : tasks_)
        if (t.completions == 0) t.must_fail = true;
  }
  /// The documented reaction to the fault (RFC 7143 §6.3 for the login; session_engine.hpp).
  void check_reaction(Fault f) {
    if (dead_at_fault_) return;
    if (f != Fault::connection_lost && f != Fault::late_pdu && f != Fault::malformed_pdu &&
        !(f == Fault::digest_error && in_login_at_fault_))
      return;
    bool reacted = false;
    for (std::size_t i = fault_from_; i < history_.size(); ++i) {
      const Action& a = history_[i];
      if (in_login_at_fault_) {
        reacted |= std::holds_alternative<LoginFailed>(a);
      } else {
        std::error_code ec;
        if (auto* e = std::get_if<SessionEnded>(&a)) ec = e->error;
        if (auto* l = std::get_if<ConnectionLost>(&a)) ec = l->error;
        if (ec && f == Fault::malformed_pdu) {
          EXPECT_EQ(ec, make_error_code(errc::protocol_error)) << context;
        }
        reacted |= static_cast<bool>(ec);
      }
      if (reacted) break;  // the first reaction; later steps may end a recovering session
    }
    EXPECT_TRUE(reacted) << context << ": no " << (in_login_at_fault_ ? "failed login" : "end of session or lost connection")
                         << " after " << to_string(f);
  }

  /// Teardown as the owner does: a session still open is closed (fail_session); then every task
  /// submitted must have completed exactly once and nothing may be held.
  void finish() {
    login_.reset();
    if (engine_ && engine_->open()) {
      engine_->fail_session(make_error_code(errc::connection_closed));
      collect();
    }
    for (const auto& [id, t] : tasks_)
      EXPECT_EQ(t.completions, 1u) << context << ": teardown: task " << id << " (" << t.label << ") completed "
                                   << t.completions << " times";
    if (engine_) {
      EXPECT_EQ(engine_->itts_in_use(), 0u) << context << ": teardown: ITTs still held";
      EXPECT_EQ(engine_->commands_queued(), 0u) << context << ": teardown: commands still queued";
      EXPECT_EQ(engine_->commands_holding_itt(), 0u) << context << ": teardown: commands still in flight";
    }
  }

  std::string describe(const Action& a) const {
    struct V {
      std::string operator()(const SentPdu& p) const { return "sent " + harness::describe(p.bhs); }
      std::string operator()(const Completed& c) const {
        return "completion of task " + std::to_string(c.outcome.id) + " (" +
               (c.outcome.error ? c.outcome.error.message() : std::string("no error")) + ")";
      }
      std::string operator()(const SessionEnded& e) const { return "session ended (" + e.error.message() + ")"; }
      std::string operator()(const ConnectionLost& e) const { return "connection lost (" + e.error.message() + ")"; }
      std::string operator()(const GaveUp& e) const { return "gave up (" + e.error.message() + ")"; }
      std::string operator()(const LoggedIn&) const { return "logged in"; }
      std::string operator()(const LoginFailed& e) const { return "login failed (" + e.error.message() + ")"; }
    };
    return std::visit(V{}, a);
  }

  // ---- for scripts: the owner's calls ----

  /// The engine (nullptr before the login ended or when it failed).
  initiator::SessionEngine* engine() noexcept { return engine_ ? &*engine_ : nullptr; }

  /// Submits `s` with a read buffer of `read_bytes` (rig-owned) and the write data `write`.
  /// Returns the TaskId, or 0 when refused (a test failure unless lenient).
  initiator::TaskId submit(std::string label, initiator::ScsiSubmission s, std::uint32_t read_bytes = 0,
                           std::vector<std::byte> write = {}) {
    auto buffer = std::make_unique<std::vector<std::byte>>(read_bytes != 0 ? read_bytes : write.size());
    if (read_bytes != 0) s.data_in = *buffer;
    if (!write.empty()) {
      *buffer = std::move(write);
      s.data_out = *buffer;
    }
    if (!engine_) return refused(label, "no session");
    auto id = engine_->submit(s, now);
    if (!id) {
      collect();  // a refusal may still have actions (none expected, but the rig checks them)
      return refused(label, id.error().message());
    }
    tasks_[*id] = Tracked{std::move(label), std::move(buffer)};
    collect();
    return *id;
  }
  /// READ(10) of `bytes` on LUN 0.
  initiator::TaskId read(std::string label, std::uint32_t bytes, std::chrono::milliseconds timeout = {}) {
    initiator::ScsiSubmission s;
    s.lun = scsi::Lun::from_index(0);
    s.cdb.length = 10;
    s.cdb.bytes[0] = std::byte{0x28};
    s.timeout = timeout;
    return submit(std::move(label), s, bytes);
  }
  /// WRITE(10) of `data` on LUN 0.
  initiator::TaskId write(std::string label, std::vector<std::byte> data, std::chrono::milliseconds timeout = {}) {
    initiator::ScsiSubmission s;
    s.lun = scsi::Lun::from_index(0);
    s.cdb.length = 10;
    s.cdb.bytes[0] = std::byte{0x2a};
    s.timeout = timeout;
    return submit(std::move(label), s, 0, std::move(data));
  }
  initiator::TaskId task_management(std::string label, const initiator::TaskManagementOptions& o) {
    if (!engine_) return refused(label, "no session");
    return track(std::move(label), engine_->submit_task_management(o, now));
  }
  initiator::TaskId logout(std::string label) {
    if (!engine_) return refused(label, "no session");
    return track(std::move(label), engine_->logout(now));
  }
  initiator::TaskId text(std::string label, std::vector<std::byte> text) {
    if (!engine_) return refused(label, "no session");
    return track(std::move(label), engine_->submit_text(std::move(text), now));
  }
  /// The read data of a completed task (copied at its completion).
  [[nodiscard]] const std::vector<std::byte>& read_data(initiator::TaskId id) { return tasks_[id].read_copy; }

 private:
  struct Tracked {
    std::string label;
    std::unique_ptr<std::vector<std::byte>> buffer;  // freed at completion
    unsigned completions = 0;
    bool must_fail = false;  // pending when the connection failed under it (until a reconnect)
    std::vector<std::byte> read_copy;
  };

  initiator::TaskId refused(const std::string& label, const std::string& why) {
    if (!lenient) ADD_FAILURE() << context << ": " << label << " refused: " << why;
    return 0;
  }
  initiator::TaskId track(std::string label, Result<initiator::TaskId> id) {
    if (!id) {
      collect();  // e.g. a logout while recovering ends the session: its completions and end
      return refused(label, id.error().message());
    }
    tasks_[*id] = Tracked{std::move(label), nullptr};
    collect();
    return *id;
  }

  /// True when `span` lies inside the buffer of a task that has not completed.
  bool inside_a_live_buffer(std::span<std::byte> span) const {
    for (const auto& [id, t] : tasks_) {
      if (!t.buffer || t.completions != 0) continue;
      const std::byte* begin = t.buffer->data();
      if (span.data() >= begin && span.data() + span.size() <= begin + t.buffer->size()) return true;
    }
    return false;
  }

  void add(Action a) {
    history_.push_back(a);
    pending_.push_back(std::move(a));
  }

  void push_login_request(const initiator::LoginSend& send) {
    SentPdu p;
    p.data = iscsi::encode_text(send.text);
    p.bhs = iscsi::encode_bhs(send.request);
    iscsi::set_lengths(p.bhs, 0, static_cast<std::uint32_t>(p.data.size()));
    p.header = send.request;
    add(std::move(p));
  }

  void login_failed(std::error_code ec) {
    login_.reset();
    add(LoginFailed{ec});
  }

  void deliver_raw(const iscsi::Bhs& bhs_in, const std::vector<std::byte>& data, std::error_code pdu_error,
                   TimePoint at) {
    now = at;
    iscsi::Bhs bhs = bhs_in;
    iscsi::set_lengths(bhs, 0, static_cast<std::uint32_t>(data.size()));
    if (login_) {
      // As perform_login(): RFC 7143 §6.3: only Login Responses may arrive during the login phase.
      if (pdu_error) return login_failed(make_error_code(errc::protocol_error));
      auto rsp = iscsi::decode_bhs_as<iscsi::LoginResponse>(bhs);
      if (!rsp) return login_failed(make_error_code(errc::protocol_error));
      auto text = iscsi::decode_text(data);
      if (!text) return login_failed(make_error_code(errc::protocol_error));
      auto step = login_->on_response(*rsp, *text);
      if (!step) return login_failed(step.error());
      if (auto* send = std::get_if<initiator::LoginSend>(&*step)) return push_login_request(*send);
      if (auto* done = std::get_if<initiator::LoginDone>(&*step)) {
        initiator::EngineConfig c = options_.engine;
        c.limits = initiator::write_limits_of(done->parameters);
        engine_.emplace(c,
                        initiator::EngineStart{.cmd_sn = options_.login_config.cmd_sn, .exp_cmd_sn = done->exp_cmd_sn,
                                               .max_cmd_sn = done->max_cmd_sn, .exp_stat_sn = done->exp_stat_sn},
                        now);
        auto parameters = done->parameters;
        login_.reset();
        add(LoggedIn{parameters});
        collect();
        return;
      }
      return login_failed(make_error_code(errc::protocol_error));  // a redirect: not scripted here
    }
    if (!engine_ || (dead_ && !late_)) return;  // no connection: nothing arrives
    datamover::PduIn in;
    in.bhs = bhs;
    in.pdu_error = pdu_error;
    if (!data.empty()) {
      auto where = engine_->place(bhs, static_cast<std::uint32_t>(data.size()));
      EXPECT_TRUE(where.empty() || inside_a_live_buffer(where))
          << context << ": place() gave a span outside every buffer of a task still running";
      if (where.empty()) {
        scratch_.assign(data.begin(), data.end());
        where = scratch_;
      }
      EXPECT_EQ(where.size(), data.size()) << context << ": place() gave a span of another size";
      std::memcpy(where.data(), data.data(), std::min(where.size(), data.size()));
      in.data = where;
    }
    engine_->on_pdu(in, at);
    collect();
  }

  void collect() {
    if (!engine_) return;
    initiator::EngineActions a = engine_->take_actions();
    ++batches_;
    const bool was_dead = dead_;
    for (auto& p : a.pdus) {
      EXPECT_FALSE(was_dead) << context << ": sent on a dead connection: " << harness::describe(p.pdu.bhs);
      if (p.borrower != 0) {
        auto it = tasks_.find(p.borrower);
        EXPECT_TRUE(it != tasks_.end() && it->second.buffer && it->second.completions == 0)
            << context << ": a PDU borrows the buffer of task " << p.borrower << ", which already completed";
      }
      auto h = iscsi::decode_bhs(p.pdu.bhs);
      EXPECT_TRUE(h) << context << ": the engine sent a BHS it cannot decode";
      if (!h) continue;
      EXPECT_EQ(iscsi::data_segment_length_bytes(p.pdu.bhs), p.pdu.data.size()) << context;
      add(SentPdu{*h, p.pdu.bhs, std::vector<std::byte>(p.pdu.data.begin(), p.pdu.data.end()), batches_});
    }
    for (auto& c : a.completions) {
      auto it = tasks_.find(c.id);
      if (it == tasks_.end()) {
        ADD_FAILURE() << context << ": completion of task " << c.id << ", which nobody submitted";
        continue;
      }
      Tracked& t = it->second;
      ++t.completions;
      EXPECT_EQ(t.completions, 1u) << context << ": task " << c.id << " (" << t.label << ") completed twice";
      EXPECT_TRUE(c.error || !(was_dead || t.must_fail))
          << context << ": task " << c.id << " (" << t.label << ") completed without error after its connection failed";
      if (t.buffer) {
        t.read_copy = *t.buffer;
        t.buffer.reset();  // a late write into it is a use-after-free under ASan
      }
      add(Completed{std::move(c)});
    }
    if (a.connection_lost) {
      dead_ = true;
      add(ConnectionLost{*a.connection_lost});
    }
    if (a.gave_up) add(GaveUp{*a.gave_up});
    if (a.ended) {
      EXPECT_FALSE(ended_) << context << ": the session ended twice";
      ended_ = dead_ = true;
      add(SessionEnded{*a.ended});
    }
    engine_->recycle_actions(std::move(a));
  }

  Options options_;
  std::optional<initiator::LoginMachine> login_;
  std::optional<initiator::SessionEngine> engine_;
  std::map<initiator::TaskId, Tracked> tasks_;
  std::deque<Action> pending_;
  std::vector<Action> history_;
  std::vector<std::byte> scratch_;
  bool dead_ = false;
  bool late_ = false;  // deliver_late()
  bool ended_ = false;
  std::uint64_t batches_ = 0;
  Fault fault_ = Fault::connection_lost;
  std::size_t fault_from_ = 0;
  bool dead_at_fault_ = false;
  bool in_login_at_fault_ = false;
};

}  // namespace iserkit::test::harness

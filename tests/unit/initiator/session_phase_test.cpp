// The initiator session's phase table (session_transitions in session_engine.hpp) checked against
// the engine: every phase is reached by driving the engine, every event is applied in every phase
// under each recovery configuration, and
//  - every row of the table is taken by some (phase, event, configuration), with that event;
//  - an event applied in a phase without a row for it changes nothing;
//  - a phase change always is one row of the table (the phase and last_transition() agree).
// Time is injected; no sleeping.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>

#include "iserkit/common/errors.hpp"
#include "session_engine.hpp"
#include "table_coverage.hpp"

using namespace iserkit;
using namespace iserkit::initiator;
using namespace std::chrono_literals;

namespace {

const SessionEngine::TimePoint t0{};

constexpr SessionPhase all_phases[] = {SessionPhase::logged_in,  SessionPhase::logging_out,
                                       SessionPhase::logout_requested, SessionPhase::recovering,
                                       SessionPhase::failed,     SessionPhase::ended};
constexpr PhaseEvent all_events[] = {
    PhaseEvent::caller_logout,   PhaseEvent::target_requests_logout, PhaseEvent::logout_finished,
    PhaseEvent::logout_deadline, PhaseEvent::connection_lost,        PhaseEvent::reconnected,
    PhaseEvent::replacement_timeout, PhaseEvent::closed};

/// The recovery configurations a phase change depends on.
enum class Recovery { off, on, on_reconnect_after_give_up };
constexpr Recovery all_recoveries[] = {Recovery::off, Recovery::on, Recovery::on_reconnect_after_give_up};

const char* to_string(Recovery r) {
  switch (r) {
    case Recovery::off: return "recovery off";
    case Recovery::on: return "recovery on";
    case Recovery::on_reconnect_after_give_up: return "recovery on, reconnect after give-up";
  }
  return "?";
}

constexpr auto replacement_timeout = 10s;
constexpr std::uint16_t logout_within_seconds = 2;  // Async Message Parameter3

EngineConfig config_for(Recovery r) {
  EngineConfig c;
  c.replacement_timeout = r == Recovery::off ? 0ms : std::chrono::milliseconds(replacement_timeout);
  c.reconnect_after_give_up = r == Recovery::on_reconnect_after_give_up;
  c.request_timeout = 1h;  // the Logout's own timeout stays out of the way of the timers under test
  return c;
}

EngineStart start() {
  return {.cmd_sn = SerialNumber(1), .exp_cmd_sn = SerialNumber(1), .max_cmd_sn = SerialNumber(64),
          .exp_stat_sn = SerialNumber(10)};
}

/// The target's Async Message asking for a logout within `logout_within_seconds` (RFC 7143 §11.9.1).
iscsi::AsyncMessage logout_request_message() {
  iscsi::AsyncMessage m;
  m.stat_sn = SerialNumber(10);
  m.exp_cmd_sn = SerialNumber(1);
  m.max_cmd_sn = SerialNumber(64);
  m.event = iscsi::AsyncEvent::logout_request;
  m.parameter3 = logout_within_seconds;
  return m;
}

/// A PDU without a data segment as the datamover hands it over.
datamover::PduIn header_only(const iscsi::PduHeader& h) {
  datamover::PduIn in;
  in.bhs = iscsi::encode_bhs(h);
  return in;
}

/// An engine, its clock and the ITT of the last Logout Request it sent.
struct Rig {
  explicit Rig(Recovery r) : engine(config_for(r), start(), t0) {}
  SessionEngine engine;
  SessionEngine::TimePoint now = t0;
  iscsi::Itt logout_itt = iscsi::Itt{0x7777};  // answers no task until a Logout Request went out

  void drain() {
    auto a = engine.take_actions();
    for (const auto& p : a.pdus) {
      auto h = iscsi::decode_bhs(p.pdu.bhs);
      ASSERT_TRUE(h);
      if (const auto* l = std::get_if<iscsi::LogoutRequest>(&*h)) logout_itt = l->itt;
    }
  }
  void deliver(const iscsi::PduHeader& h) {
    engine.on_pdu(header_only(h), now);
    drain();
  }
  void async_logout_request() { deliver(logout_request_message()); }
};

/// Drives a fresh engine into `phase`; false when `recovery` cannot reach it.
bool reach(Rig& r, SessionPhase phase, Recovery recovery) {
  switch (phase) {
    case SessionPhase::logged_in: break;
    case SessionPhase::logging_out:
      // Without recovery through the target's request (it sets the Parameter3 deadline), with
      // recovery through the owner's logout.
      if (recovery == Recovery::off) {
        r.async_logout_request();
      } else {
        (void)r.engine.logout(r.now);
      }
      break;
    case SessionPhase::logout_requested:
      if (recovery == Recovery::off) return false;
      r.async_logout_request();
      break;
    case SessionPhase::recovering:
      if (recovery == Recovery::off) return false;
      r.engine.connection_failed(make_error_code(errc::connection_closed), r.now);
      break;
    case SessionPhase::failed:
      if (recovery != Recovery::on_reconnect_after_give_up) return false;
      r.engine.connection_failed(make_error_code(errc::connection_closed), r.now);
      r.now += replacement_timeout + 1s;
      r.engine.on_timer(r.now);
      break;
    case SessionPhase::ended: r.engine.fail_session(make_error_code(errc::connection_closed)); break;
  }
  r.drain();
  return r.engine.phase() == phase;
}

/// Applies `event` through the engine's public inputs, as the driver or the target would.
void apply(Rig& r, PhaseEvent event) {
  switch (event) {
    case PhaseEvent::caller_logout: (void)r.engine.logout(r.now); break;
    case PhaseEvent::target_requests_logout: r.async_logout_request(); break;
    case PhaseEvent::logout_finished: {
      iscsi::LogoutResponse resp;
      resp.itt = r.logout_itt;
      resp.stat_sn = SerialNumber(10);
      resp.exp_cmd_sn = SerialNumber(1);
      resp.max_cmd_sn = SerialNumber(64);
      resp.response = iscsi::to_wire(iscsi::LogoutResponseCode::closed_successfully);
      r.deliver(resp);
      break;
    }
    case PhaseEvent::logout_deadline:
      r.now += std::chrono::seconds(logout_within_seconds) + 1s;
      r.engine.on_timer(r.now);
      break;
    case PhaseEvent::connection_lost:
      r.engine.connection_failed(make_error_code(errc::connection_closed), r.now);
      break;
    case PhaseEvent::reconnected: r.engine.on_reconnected(start(), WriteLimits{}, r.now); break;
    case PhaseEvent::replacement_timeout:
      r.now += replacement_timeout + 1s;
      r.engine.on_timer(r.now);
      break;
    case PhaseEvent::closed: r.engine.fail_session(make_error_code(errc::connection_closed)); break;
  }
  r.drain();
}

bool has_row(SessionPhase from, PhaseEvent event) { return SessionTable::has(from, event); }

bool is_timer_event(PhaseEvent e) {
  return e == PhaseEvent::logout_deadline || e == PhaseEvent::replacement_timeout;
}

TEST(SessionPhaseTable, RowsAreDistinctNameTheirRuleAndNothingLeavesEnded) {
  engine_tables::expect_well_formed<session_transitions>(all_phases, all_events);
  for (const auto& t : session_transitions) EXPECT_NE(t.from, SessionPhase::ended) << "an ended session does not move";
  // The owner can always close a session that is not over.
  for (SessionPhase p : all_phases) {
    if (p != SessionPhase::ended) {
      EXPECT_TRUE(has_row(p, PhaseEvent::closed)) << to_string(p);
    }
  }
  EXPECT_EQ(SessionTable::find(SessionPhase::ended, PhaseEvent::reconnected, SessionPhase::logged_in), nullptr);
}

TEST(SessionPhaseTable, EveryRowIsTakenAndEveryOtherEventChangesNothing) {
  engine_tables::TableCoverage<session_transitions> coverage;
  for (Recovery recovery : all_recoveries) {
    for (SessionPhase from : all_phases) {
      for (PhaseEvent event : all_events) {
        Rig r(recovery);
        if (!reach(r, from, recovery)) continue;
        SCOPED_TRACE(std::string(to_string(recovery)) + ": " + to_string(from) + " + " + to_string(event));
        const std::uint64_t before = r.engine.transitions_taken();
        apply(r, event);
        // The clock passes every deadline up to the one driven: only another timer may fire.
        const SessionTransition* row = r.engine.last_transition();
        coverage.step(from, event, r.engine.transitions_taken() - before, row, r.engine.phase(),
                      row != nullptr && is_timer_event(event) && is_timer_event(row->input));
      }
    }
  }
  coverage.expect_every_row_taken();
}

TEST(SessionPhaseTable, AccessorsFollowThePhase) {
  // The driver and the public API read the phase through these.
  for (Recovery recovery : all_recoveries) {
    for (SessionPhase p : all_phases) {
      Rig r(recovery);
      if (!reach(r, p, recovery)) continue;
      SCOPED_TRACE(std::string(to_string(recovery)) + ": " + to_string(p));
      EXPECT_EQ(r.engine.open(), p != SessionPhase::ended);
      EXPECT_EQ(r.engine.accepting(), p != SessionPhase::ended && p != SessionPhase::logging_out);
      EXPECT_EQ(r.engine.recovering(), p == SessionPhase::recovering || p == SessionPhase::failed);
      EXPECT_EQ(r.engine.failed(), p == SessionPhase::failed);
    }
  }
}

// Found by fuzz_initiator_engine: a Logout the target asks for (no recovery) while every ITT is
// taken ends at once, which ends the session (logging_out --logout_finished--> ended); that
// Logout is the engine's own, so no completion of a task nobody submitted may reach the owner.
TEST(SessionPhaseTable, TargetRequestedLogoutWithoutAFreeIttEndsTheSessionReportingOnlySubmittedTasks) {
  EngineConfig c = config_for(Recovery::off);
  c.max_commands_in_flight = 1;  // a small ITT table
  SessionEngine engine(c, start(), t0);
  std::set<TaskId> submitted;
  for (int i = 0; i < 100; ++i) {
    auto id = engine.submit_task_management(
        TaskManagementOptions{.function = iscsi::TaskManagementFunction::logical_unit_reset,
                              .lun = scsi::Lun::from_index(0)},
        t0);
    if (!id) break;
    submitted.insert(*id);
  }
  ASSERT_FALSE(submitted.empty());
  ASSERT_LT(submitted.size(), 100u) << "the ITT table never filled";
  (void)engine.take_actions();
  engine.on_pdu(header_only(logout_request_message()), t0);
  EXPECT_EQ(engine.phase(), SessionPhase::ended);
  ASSERT_NE(engine.last_transition(), nullptr);
  EXPECT_EQ(engine.last_transition()->input, PhaseEvent::logout_finished);
  auto a = engine.take_actions();
  ASSERT_TRUE(a.ended);
  EXPECT_EQ(*a.ended, make_error_code(errc::session_closed));
  EXPECT_EQ(a.completions.size(), submitted.size());  // the TMFs, each once
  for (const TaskOutcome& o : a.completions) EXPECT_TRUE(submitted.contains(o.id)) << "task " << o.id;
}

}  // namespace

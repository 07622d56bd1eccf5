// MultipathEngine (initiator/src/multipath_engine.hpp), sans-I/O: the path and device state tables
// are the engine's whole behaviour (every row taken by driving the engine, every other pair changes
// nothing), then table-driven checks of what each path transition asks the driver to do (actions
// in order), the reinstating back-off (iserkit::Backoff: reinstate_delay_min doubling to
// reinstate_delay_max, jittered) and the give-up deadline (replacement_timeout).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "iserkit/common/errors.hpp"
#include "iserkit/initiator/errors.hpp"
#include "multipath_engine.hpp"
#include "table_coverage.hpp"

using namespace iserkit;
using namespace iserkit::initiator;
using namespace std::chrono_literals;
using Kind = MultipathAction::Kind;
using scsi::AccessState;
using TimePoint = MultipathEngine::TimePoint;

namespace {

constexpr PathState all_path_states[] = {PathState::unconnected, PathState::logging_in,  PathState::up,
                                         PathState::recovering,  PathState::backing_off, PathState::refused};
constexpr PathInput all_path_inputs[] = {PathInput::login_started,   PathInput::login_succeeded, PathInput::login_failed,
                                         PathInput::login_refused,   PathInput::device_opened,   PathInput::reinstate_due,
                                         PathInput::connection_lost, PathInput::recovered,       PathInput::session_ended};
constexpr DeviceState all_device_states[] = {DeviceState::opening, DeviceState::serving, DeviceState::waiting_for_path,
                                             DeviceState::gave_up, DeviceState::closed};
constexpr DeviceInput all_device_inputs[] = {DeviceInput::opened, DeviceInput::path_usable, DeviceInput::no_usable_path,
                                             DeviceInput::give_up_deadline, DeviceInput::closed};

const TimePoint t0 = TimePoint{} + 1000h;  // any fixed time: the engine has no clock of its own
const std::error_code lost = make_error_code(errc::connection_closed);

MultipathEngineConfig config(std::size_t paths = 2) {
  return MultipathEngineConfig{.paths = paths,
                               .policy = MultipathPolicy::failover,
                               .replacement_timeout = 10s,
                               .reinstate_delay_min = 1s,
                               .reinstate_delay_max = 5s,
                               .seed = 7};
}

std::vector<Kind> kinds(const MultipathEngine::Actions& actions) {
  std::vector<Kind> out;
  for (const auto& a : actions) out.push_back(a.kind);
  return out;
}

const MultipathAction* find(const MultipathEngine::Actions& actions, Kind kind) {
  for (const auto& a : actions)
    if (a.kind == kind) return &a;
  return nullptr;
}

// ---- path table ----

// Path 1 is up in every rig, so the device keeps a usable path and only path 0 moves.
enum class Context { opening, open };
const char* to_string(Context c) { return c == Context::opening ? "during open()" : "after open()"; }

MultipathEngine path_rig() {
  MultipathEngine e(config());
  e.begin_login(1, t0);
  e.login_succeeded(1, t0);
  return e;
}

// Brings path 0 to `state` in `context`; false when that state does not exist there.
bool reach(MultipathEngine& e, PathState state, Context context) {
  const bool open = context == Context::open;
  switch (state) {
    case PathState::unconnected:
      return !open;  // after open() an unconnected path backs off at once
    case PathState::logging_in:
      if (!open) {
        e.begin_login(0, t0);
      } else {
        e.opened(t0);  // unconnected → backing_off
        e.expire(t0 + 1h);
      }
      break;
    case PathState::up:
    case PathState::recovering:
      e.begin_login(0, t0);
      e.login_succeeded(0, t0);
      if (open) e.opened(t0);
      if (state == PathState::recovering) e.connection_lost(0, lost, t0);
      break;
    case PathState::backing_off:
      if (!open) return false;
      e.opened(t0);
      break;
    case PathState::refused:
      e.begin_login(0, t0);
      e.login_refused(0, t0);
      if (open) e.opened(t0);
      break;
  }
  return e.path_state(0) == state && e.opening() == !open;
}

void apply(MultipathEngine& e, PathInput input) {
  switch (input) {
    case PathInput::login_started: e.begin_login(0, t0); break;
    case PathInput::login_succeeded: e.login_succeeded(0, t0); break;
    case PathInput::login_failed: e.login_failed(0, t0); break;
    case PathInput::login_refused: e.login_refused(0, t0); break;
    case PathInput::device_opened: e.opened(t0); break;
    case PathInput::reinstate_due: e.expire(t0 + 2h); break;
    case PathInput::connection_lost: e.connection_lost(0, lost, t0); break;
    case PathInput::recovered: e.recovered(0, t0); break;
    case PathInput::session_ended: e.session_ended(0, lost, t0); break;
  }
}

TEST(MultipathEngineTable, PathRowsAreDistinctNameTheirRuleAndNothingLeavesRefused) {
  engine_tables::expect_well_formed<path_transitions>(all_path_states, all_path_inputs);
  for (const auto& t : path_transitions) EXPECT_NE(t.from, PathState::refused) << "a refused path is never used again";
  engine_tables::expect_well_formed<device_transitions>(all_device_states, all_device_inputs);
  for (const auto& t : device_transitions) EXPECT_NE(t.from, DeviceState::closed) << "a closed device does not move";
  // The device can always be closed.
  for (DeviceState s : all_device_states) {
    if (s == DeviceState::closed) continue;
    EXPECT_NE(DeviceTable::find(s, DeviceInput::closed, DeviceState::closed), nullptr) << to_string(s);
  }
}

TEST(MultipathEngineTable, EveryPathRowIsTakenAndEveryOtherInputChangesNothing) {
  engine_tables::TableCoverage<path_transitions> coverage;
  for (Context context : {Context::opening, Context::open}) {
    for (PathState from : all_path_states) {
      for (PathInput input : all_path_inputs) {
        MultipathEngine e = path_rig();
        if (!reach(e, from, context)) continue;
        SCOPED_TRACE(std::string(to_string(context)) + ": " + to_string(from) + " + " + to_string(input));
        const std::uint64_t before = e.path_transitions_taken();
        apply(e, input);
        EXPECT_EQ(e.path_state(1), PathState::up) << "only the path the input is about moves";
        coverage.step(from, input, e.path_transitions_taken() - before, e.last_path_transition(), e.path_state(0));
      }
    }
  }
  coverage.expect_every_row_taken();
}

// Both paths logged in at open() and the device open: serving on path 0 (failover).
MultipathEngine opened_with_both_paths_up() {
  MultipathEngine e(config());
  for (std::size_t i : {0u, 1u}) {
    e.begin_login(i, t0);
    e.login_succeeded(i, t0);
  }
  e.opened(t0);
  return e;
}

// ---- device table ----

// Path 0 is up, path 1 refused: path 0's ALUA state decides whether any path is usable.
MultipathEngine device_rig(bool usable_at_open) {
  MultipathEngine e(config());
  e.begin_login(0, t0);
  e.login_succeeded(0, t0);
  e.begin_login(1, t0);
  e.login_refused(1, t0);
  if (!usable_at_open) e.access_changed(0, AccessState::standby, t0);
  return e;
}

bool reach(MultipathEngine& e, DeviceState state) {
  switch (state) {
    case DeviceState::opening: break;
    case DeviceState::serving:
    case DeviceState::waiting_for_path:
    case DeviceState::gave_up:
      e.opened(t0);
      if (state != DeviceState::serving) e.access_changed(0, AccessState::standby, t0);
      if (state == DeviceState::gave_up) e.expire(t0 + 1h);
      break;
    case DeviceState::closed: e.close(); break;
  }
  return e.device_state() == state;
}

void apply(MultipathEngine& e, DeviceInput input) {
  switch (input) {
    case DeviceInput::opened: e.opened(t0); break;
    case DeviceInput::path_usable:
      e.set_access(0, AccessState::standby);  // recorded, not evaluated: then it becomes usable
      e.access_changed(0, AccessState::active_optimized, t0);
      break;
    case DeviceInput::no_usable_path: e.access_changed(0, AccessState::unavailable, t0); break;
    case DeviceInput::give_up_deadline: e.expire(t0 + 2h); break;
    case DeviceInput::closed: e.close(); break;
  }
}

TEST(MultipathEngineTable, EveryDeviceRowIsTakenAndEveryOtherInputChangesNothing) {
  engine_tables::TableCoverage<device_transitions> coverage;
  for (bool usable_at_open : {true, false}) {
    for (DeviceState from : all_device_states) {
      for (DeviceInput input : all_device_inputs) {
        MultipathEngine e = device_rig(usable_at_open);
        if (!reach(e, from)) continue;
        SCOPED_TRACE(std::string(usable_at_open ? "usable at open: " : "standby at open: ") + to_string(from) + " + " +
                     to_string(input));
        const std::uint64_t before = e.device_transitions_taken();
        apply(e, input);
        coverage.step(from, input, e.device_transitions_taken() - before, e.last_device_transition(), e.device_state());
      }
    }
  }
  coverage.expect_every_row_taken();
}

// ---- what each path transition asks of the driver ----

struct ActionCase {
  const char* name;
  PathState from;
  Context context;
  bool other_path_up;  // path 1 up (else refused: path 0 is the device's only path)
  PathInput input;
  PathState to;
  std::vector<Kind> actions;  // in order
};

const std::vector<ActionCase>& action_cases() {
  static const std::vector<ActionCase> cases = {
      {"first login starts", PathState::unconnected, Context::opening, true, PathInput::login_started,
       PathState::logging_in, {}},
      {"login at open succeeds: not announced", PathState::logging_in, Context::opening, true,
       PathInput::login_succeeded, PathState::up, {Kind::wake}},
      {"login at open fails: reinstating waits for the end of open()", PathState::logging_in, Context::opening, true,
       PathInput::login_failed, PathState::unconnected, {}},
      {"other unit at open: refused", PathState::logging_in, Context::opening, true, PathInput::login_refused,
       PathState::refused, {Kind::wake}},
      {"open() done: the failed path backs off", PathState::unconnected, Context::opening, true,
       PathInput::device_opened, PathState::backing_off, {Kind::arm_reinstate_timer, Kind::wake}},
      {"back-off passed: log in again", PathState::backing_off, Context::open, true, PathInput::reinstate_due,
       PathState::logging_in, {Kind::connect}},
      {"reinstated: announced, ALUA re-read", PathState::logging_in, Context::open, true, PathInput::login_succeeded,
       PathState::up, {Kind::wake, Kind::announce, Kind::refresh_alua}},
      {"reinstating login fails: back off again", PathState::logging_in, Context::open, true,
       PathInput::login_failed, PathState::backing_off, {Kind::arm_reinstate_timer}},
      {"reinstated path leads elsewhere: refused", PathState::logging_in, Context::open, true,
       PathInput::login_refused, PathState::refused, {Kind::wake}},
      {"connection lost: path_down", PathState::up, Context::open, true, PathInput::connection_lost,
       PathState::recovering, {Kind::announce, Kind::wake}},
      {"connection lost on the only path: all paths lost, give-up deadline armed", PathState::up, Context::open,
       false, PathInput::connection_lost, PathState::recovering,
       {Kind::announce, Kind::announce, Kind::arm_give_up_timer, Kind::wake}},
      {"session recovered: path_up, ALUA re-read", PathState::recovering, Context::open, true, PathInput::recovered,
       PathState::up, {Kind::wake, Kind::announce, Kind::refresh_alua}},
      {"only path recovered: the give-up deadline is cancelled", PathState::recovering, Context::open, false,
       PathInput::recovered, PathState::up,
       {Kind::cancel_give_up_timer, Kind::wake, Kind::announce, Kind::refresh_alua}},
      {"session ended while up: path_down, session dropped, back off", PathState::up, Context::open, true,
       PathInput::session_ended, PathState::backing_off,
       {Kind::announce, Kind::close_session, Kind::wake, Kind::arm_reinstate_timer}},
      {"only path's session ended: all paths lost too", PathState::up, Context::open, false, PathInput::session_ended,
       PathState::backing_off,
       {Kind::announce, Kind::close_session, Kind::announce, Kind::arm_give_up_timer, Kind::wake,
        Kind::arm_reinstate_timer}},
      {"recovering session gave up: dropped without a second path_down", PathState::recovering, Context::open, true,
       PathInput::session_ended, PathState::backing_off,
       {Kind::close_session, Kind::wake, Kind::arm_reinstate_timer}},
  };
  return cases;
}

TEST(MultipathEngineTransitions, EachPathTransitionAsksTheDriverForItsActionsInOrder) {
  std::set<const PathTransition*> covered;
  for (const auto& c : action_cases()) {
    SCOPED_TRACE(c.name);
    MultipathEngine e(config());
    e.begin_login(1, t0);
    if (c.other_path_up) {
      e.login_succeeded(1, t0);
    } else {
      e.login_refused(1, t0);
    }
    ASSERT_TRUE(reach(e, c.from, c.context));
    MultipathEngine::Actions out;
    switch (c.input) {
      case PathInput::login_started: out = e.begin_login(0, t0); break;
      case PathInput::login_succeeded: out = e.login_succeeded(0, t0); break;
      case PathInput::login_failed: out = e.login_failed(0, t0); break;
      case PathInput::login_refused: out = e.login_refused(0, t0); break;
      case PathInput::device_opened: out = e.opened(t0); break;
      case PathInput::reinstate_due: out = e.expire(t0 + 2h); break;
      case PathInput::connection_lost: out = e.connection_lost(0, lost, t0); break;
      case PathInput::recovered: out = e.recovered(0, t0); break;
      case PathInput::session_ended: out = e.session_ended(0, lost, t0); break;
    }
    EXPECT_EQ(e.path_state(0), c.to);
    EXPECT_EQ(kinds(out), c.actions);
    for (const auto& a : out) {
      if (a.kind == Kind::announce && a.event != PathEvent::Kind::all_paths_lost) {
        EXPECT_EQ(a.path, 0u);
      }
      if (a.kind == Kind::announce && a.event == PathEvent::Kind::path_down) {
        EXPECT_EQ(a.error, lost);
      }
      if (a.kind == Kind::announce && a.event == PathEvent::Kind::path_up) {
        EXPECT_EQ(a.cause, c.input);
      }
      if (a.kind == Kind::connect || a.kind == Kind::close_session || a.kind == Kind::arm_reinstate_timer) {
        EXPECT_EQ(a.path, 0u);
      }
    }
    if (const auto* row = PathTable::find(c.from, c.input, c.to)) covered.insert(row);
  }
  for (const auto& t : path_transitions)
    EXPECT_TRUE(covered.contains(&t)) << "no action case for " << to_string(t.from) << " --" << to_string(t.input)
                                      << "--> " << to_string(t.to);
}

TEST(MultipathEngineTransitions, PublicStateNextAttemptAndAttemptsFollowThePathState) {
  struct Row {
    PathState state;
    Context context;
    PathStatus::State shown;
    bool has_next_attempt;
    std::uint64_t attempts;
  };
  const Row rows[] = {
      {PathState::unconnected, Context::opening, PathStatus::State::down, false, 0},
      {PathState::logging_in, Context::opening, PathStatus::State::down, false, 0},
      {PathState::logging_in, Context::open, PathStatus::State::down, false, 1},
      {PathState::up, Context::open, PathStatus::State::up, false, 0},
      {PathState::recovering, Context::open, PathStatus::State::recovering, false, 0},
      {PathState::backing_off, Context::open, PathStatus::State::down, true, 0},
      {PathState::refused, Context::open, PathStatus::State::refused, false, 0},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(std::string(to_string(r.state)) + " " + to_string(r.context));
    MultipathEngine e = path_rig();
    ASSERT_TRUE(reach(e, r.state, r.context));
    EXPECT_EQ(e.public_state(0), r.shown);
    EXPECT_EQ(e.next_attempt(0).has_value(), r.has_next_attempt);
    EXPECT_EQ(e.reinstate_attempts(0), r.attempts);
    EXPECT_EQ(e.any_usable(), true);
  }
}

// ---- reinstatement back-off ----

TEST(MultipathEngineBackoff, FailedReinstatingLoginsDoubleTheWaitUpToTheMaxJittered) {
  MultipathEngine e = path_rig();
  ASSERT_TRUE(reach(e, PathState::up, Context::open));
  TimePoint now = t0;
  auto out = e.session_ended(0, lost, now);
  // The unjittered wait before each attempt: reinstate_delay_min doubling to reinstate_delay_max.
  const std::chrono::milliseconds expected[] = {1s, 2s, 4s, 5s, 5s, 5s};
  std::uint64_t attempt = 0;
  for (auto delay : expected) {
    SCOPED_TRACE("attempt " + std::to_string(attempt + 1));
    EXPECT_EQ(e.backoff_delay(0), delay);
    const auto* arm = find(out, Kind::arm_reinstate_timer);
    ASSERT_NE(arm, nullptr);
    EXPECT_GE(arm->at, now + delay / 2);
    EXPECT_LE(arm->at, now + delay);
    ASSERT_EQ(e.next_attempt(0), arm->at);
    // Not before the deadline.
    EXPECT_TRUE(e.expire(arm->at - 1ms).empty());
    EXPECT_EQ(e.path_state(0), PathState::backing_off);
    now = arm->at;
    out = e.expire(now);
    EXPECT_EQ(kinds(out), std::vector<Kind>{Kind::connect});
    EXPECT_EQ(e.path_state(0), PathState::logging_in);
    EXPECT_EQ(e.reinstate_attempts(0), ++attempt);
    EXPECT_FALSE(e.next_attempt(0).has_value());
    now += 100ms;  // the login takes a while
    out = e.login_failed(0, now);
  }
}

TEST(MultipathEngineBackoff, APathThatCameBackStartsFromTheMinimumWhenItGoesDownAgain) {
  MultipathEngine e = path_rig();
  ASSERT_TRUE(reach(e, PathState::up, Context::open));
  e.session_ended(0, lost, t0);
  for (int i = 0; i < 3; ++i) {
    e.expire(t0 + 1h);
    e.login_failed(0, t0);
  }
  EXPECT_EQ(e.backoff_delay(0), 5s);
  e.expire(t0 + 2h);
  e.login_succeeded(0, t0 + 2h);
  EXPECT_EQ(e.reinstate_attempts(0), 0u);
  const auto out = e.session_ended(0, lost, t0 + 3h);
  EXPECT_EQ(e.backoff_delay(0), 1s);
  const auto* arm = find(out, Kind::arm_reinstate_timer);
  ASSERT_NE(arm, nullptr);
  EXPECT_LE(arm->at, t0 + 3h + 1s);
}

TEST(MultipathEngineBackoff, ThePathsBackOffIndependently) {
  MultipathEngine e = opened_with_both_paths_up();
  e.session_ended(0, lost, t0);
  e.expire(t0 + 1h);
  e.login_failed(0, t0 + 1h);
  e.session_ended(1, lost, t0 + 1h);
  EXPECT_EQ(e.backoff_delay(0), 2s);
  EXPECT_EQ(e.backoff_delay(1), 1s);
  // One expire() takes every deadline passed (path 0 at most 2 s, path 1 at most 1 s after
  // t0 + 1h; the give-up deadline 10 s after it): both paths log in.
  const auto out = e.expire(t0 + 1h + 5s);
  ASSERT_EQ(kinds(out), (std::vector<Kind>{Kind::connect, Kind::connect}));
  EXPECT_EQ(out[0].path, 0u);
  EXPECT_EQ(out[1].path, 1u);
  EXPECT_EQ(e.path_state(0), PathState::logging_in);
  EXPECT_EQ(e.path_state(1), PathState::logging_in);
}

// ---- give-up deadline ----

TEST(MultipathEngineGiveUp, CommandsWaitUntilTheDeadlineThenFailUntilAPathIsBack) {
  MultipathEngine e(config(1));
  e.begin_login(0, t0);
  e.login_succeeded(0, t0);
  e.opened(t0);
  EXPECT_EQ(e.device_state(), DeviceState::serving);
  EXPECT_FALSE(e.fail_without_path());
  const TimePoint lost_at = t0 + 1s;
  auto out = e.connection_lost(0, lost, lost_at);
  ASSERT_EQ(e.device_state(), DeviceState::waiting_for_path);
  const auto* arm = find(out, Kind::arm_give_up_timer);
  ASSERT_NE(arm, nullptr);
  EXPECT_EQ(arm->at, lost_at + 10s) << "the deadline is replacement_timeout after the last usable path went";
  EXPECT_EQ(e.give_up_deadline(), lost_at + 10s);
  EXPECT_FALSE(e.fail_without_path()) << "commands wait";
  EXPECT_FALSE(e.pick().has_value());

  EXPECT_TRUE(e.expire(lost_at + 10s - 1ms).empty());
  EXPECT_EQ(e.device_state(), DeviceState::waiting_for_path);
  out = e.expire(lost_at + 10s);
  EXPECT_EQ(e.device_state(), DeviceState::gave_up);
  ASSERT_EQ(kinds(out), (std::vector<Kind>{Kind::announce, Kind::wake}));
  EXPECT_EQ(out[0].event, PathEvent::Kind::gave_up);
  EXPECT_EQ(out[0].error, make_error_code(errc::session_lost));
  EXPECT_TRUE(e.fail_without_path());
  EXPECT_TRUE(e.gave_up());
  EXPECT_FALSE(e.give_up_deadline().has_value());
  EXPECT_TRUE(e.expire(lost_at + 1h).empty()) << "gives up once";

  // The path's session comes back: commands go out again.
  out = e.recovered(0, lost_at + 20s);
  EXPECT_EQ(e.device_state(), DeviceState::serving);
  EXPECT_EQ(kinds(out),
            (std::vector<Kind>{Kind::cancel_give_up_timer, Kind::resumed, Kind::wake, Kind::announce,
                               Kind::refresh_alua}));
  EXPECT_FALSE(e.fail_without_path());
  EXPECT_EQ(e.pick(), 0u);
}

TEST(MultipathEngineGiveUp, APathBackBeforeTheDeadlineCancelsIt) {
  MultipathEngine e(config(1));
  e.begin_login(0, t0);
  e.login_succeeded(0, t0);
  e.opened(t0);
  e.session_ended(0, lost, t0);
  ASSERT_EQ(e.device_state(), DeviceState::waiting_for_path);
  e.expire(t0 + 5s);  // the reinstating login starts (back-off at most 1 s), not the give-up
  ASSERT_EQ(e.path_state(0), PathState::logging_in);
  ASSERT_EQ(e.device_state(), DeviceState::waiting_for_path);
  const auto out = e.login_succeeded(0, t0 + 6s);
  EXPECT_EQ(kinds(out), (std::vector<Kind>{Kind::cancel_give_up_timer, Kind::wake, Kind::announce,
                                           Kind::refresh_alua}));
  EXPECT_EQ(e.device_state(), DeviceState::serving);
  EXPECT_TRUE(e.expire(t0 + 1h).empty()) << "the deadline no longer applies";
}

TEST(MultipathEngineGiveUp, AluaBlockingEveryLoggedInPathPollsAndStartsTheDeadline) {
  MultipathEngine e = opened_with_both_paths_up();
  EXPECT_EQ(kinds(e.access_changed(0, AccessState::standby, t0)), std::vector<Kind>{Kind::wake});
  const auto out = e.access_changed(1, AccessState::transitioning, t0);
  ASSERT_EQ(kinds(out), (std::vector<Kind>{Kind::poll_alua, Kind::announce, Kind::arm_give_up_timer, Kind::wake}));
  EXPECT_EQ(out[1].event, PathEvent::Kind::all_paths_lost);
  EXPECT_EQ(out[2].at, t0 + 10s);
  EXPECT_EQ(e.device_state(), DeviceState::waiting_for_path);
  // The next REPORT TARGET PORT GROUPS read finds path 1 active again.
  e.set_access(1, AccessState::active_non_optimized);
  EXPECT_EQ(kinds(e.settle(t0 + 1s)), (std::vector<Kind>{Kind::cancel_give_up_timer, Kind::wake}));
  EXPECT_EQ(e.pick(), 1u);
}

TEST(MultipathEngineGiveUp, ZeroReplacementTimeoutFailsCommandsAtOnceOnceOpen) {
  auto c = config(1);
  c.replacement_timeout = 0s;
  MultipathEngine e(c);
  e.begin_login(0, t0);
  EXPECT_FALSE(e.fail_without_path()) << "open() waits for its own logins";
  e.login_succeeded(0, t0);
  e.opened(t0);
  e.connection_lost(0, lost, t0);
  EXPECT_TRUE(e.fail_without_path());
}

TEST(MultipathEngineClose, EveryInputAfterCloseIsIgnored) {
  MultipathEngine e = path_rig();
  ASSERT_TRUE(reach(e, PathState::up, Context::open));
  e.close();
  EXPECT_TRUE(e.closed());
  const auto before = e.path_transitions_taken() + e.device_transitions_taken();
  EXPECT_TRUE(e.connection_lost(0, lost, t0).empty());
  EXPECT_TRUE(e.session_ended(1, lost, t0).empty());
  EXPECT_TRUE(e.access_changed(0, AccessState::standby, t0).empty());
  EXPECT_TRUE(e.settle(t0).empty());
  EXPECT_TRUE(e.expire(t0 + 1h).empty());
  EXPECT_TRUE(e.opened(t0).empty());
  EXPECT_EQ(e.path_transitions_taken() + e.device_transitions_taken(), before);
  EXPECT_EQ(e.path_state(0), PathState::up);
  EXPECT_FALSE(e.gave_up());
}

}  // namespace

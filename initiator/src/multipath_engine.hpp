// MultipathEngine: the path states of a Multipath device as a sans-I/O state machine (layer 2).
// No sessions, no timers, no coroutines, no clock of its own: what happened to a path (a login's
// result, its session's events, an ALUA state read) and the time go in; actions (log in on a path,
// close its session, announce a PathEvent, arm a timer at a deadline, re-read ALUA states, wake the
// commands waiting for a path) come out as values, in the order the driver must carry them out.
// The driver (multipath.cpp, Multipath::Impl) owns the sessions, the timers and the commands; it
// feeds the engine and runs its actions. PathSelector (path_selector.hpp) inside picks the path of
// each command from the states the engine keeps.
//
// Rules it carries:
//  - A path is one PathState; it moves only along path_transitions (below), through one input.
//  - Reinstatement: a path whose session ended (or whose first login failed, once open() is done)
//    waits, then logs in again; the waits are an iserkit::Backoff per path (reinstate_delay_min
//    doubling to reinstate_delay_max, jittered from an injected seed), started afresh each time the
//    path goes down. The engine returns the deadline (arm_reinstate_timer); the driver calls
//    expire(now) when it passes.
//  - Give-up (the device's replacement timeout, open-iscsi's replacement_timeout): when no path is
//    usable (DeviceState::waiting_for_path) commands wait until the deadline it returns
//    (arm_give_up_timer); at expire(now) past it the device gives up (commands fail with
//    errc::session_lost) until a path is usable again.
//  - ALUA (SPC-5 §5.16.2.4): a path is usable when it is up and its access state processes I/O;
//    while paths are up but none is usable the engine asks for the states to be polled.
//  - The device is one DeviceState; it moves only along device_transitions.
//
// THREADING: none; the owner calls it from one thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <system_error>
#include <vector>

#include "iserkit/common/backoff.hpp"
#include "iserkit/common/transition_table.hpp"
#include "iserkit/initiator/multipath_types.hpp"
#include "iserkit/scsi/alua.hpp"
#include "path_selector.hpp"

namespace iserkit::initiator {

/// Where one path stands. PathStatus::State is the public view (to_public()).
enum class PathState : std::uint8_t {
  unconnected,  ///< no session and no login planned: before open() tries it, or its login at open() failed
  logging_in,   ///< a login (and the INQUIRY / VPD 0x83 probe) runs on it
  up,           ///< logged in and the same logical unit: takes commands if its ALUA state allows
  recovering,   ///< its session lost the connection and logs in again by itself (path_replacement_timeout)
  backing_off,  ///< no session: the next reinstating login starts at the path's deadline
  refused,      ///< leads to another logical unit (SPC-5 §7.7.6): never used again
};

/// What happens to one path (the inputs of MultipathEngine for a path, named).
enum class PathInput : std::uint8_t {
  login_started,    ///< begin_login(): open() logs in on the path
  login_succeeded,  ///< login_succeeded(): logged in, same logical unit
  login_failed,     ///< login_failed(): the login or the probe failed
  login_refused,    ///< login_refused(): the logical-unit designators differ (SPC-5 §7.7.6)
  device_opened,    ///< opened(): open() is done; paths whose login failed start reinstating
  reinstate_due,    ///< expire(): the path's reinstate deadline passed
  connection_lost,  ///< connection_lost(): its session lost the connection (or a command saw it recovering)
  recovered,        ///< recovered(): its session logged in again by itself
  session_ended,    ///< session_ended(): its session gave up or closed
};

/// One allowed move of PathState: on `input` in state `from` the path goes to `to`; `rule` says
/// when and why.
using PathTransition = Transition<PathState, PathInput>;

/// Every path state change the engine makes. A pair (from, input) with no row changes nothing (the
/// input is ignored in that state); so does every input once the device is closed.
/// tests/unit/initiator/multipath_engine_test.cpp drives the engine through every row and checks
/// every other pair changes nothing.
inline constexpr PathTransition path_transitions[] = {
    {PathState::unconnected, PathInput::login_started, PathState::logging_in, "open(): the path's first login"},
    {PathState::logging_in, PathInput::login_succeeded, PathState::up,
     "logged in and the same logical unit: in service (announced path_up after open())"},
    {PathState::logging_in, PathInput::login_failed, PathState::unconnected,
     "a login at open() failed: reinstating starts once open() is done"},
    {PathState::logging_in, PathInput::login_failed, PathState::backing_off,
     "a reinstating login failed: the next one after the doubled (bounded, jittered) back-off"},
    {PathState::logging_in, PathInput::login_refused, PathState::refused,
     "SPC-5 §7.7.6: its logical-unit designators differ from the first path's: never used"},
    {PathState::unconnected, PathInput::device_opened, PathState::backing_off,
     "open() is done: a path that could not log in is reinstated, after reinstate_delay_min (jittered)"},
    {PathState::backing_off, PathInput::reinstate_due, PathState::logging_in,
     "the back-off passed: a new login with the same ISID (the target reinstates the I_T nexus)"},
    {PathState::up, PathInput::connection_lost, PathState::recovering,
     "the connection dropped: no new commands (announced path_down); those on it wait for its session"},
    {PathState::recovering, PathInput::recovered, PathState::up,
     "its session logged in again within path_replacement_timeout: in service (announced path_up)"},
    {PathState::up, PathInput::session_ended, PathState::backing_off,
     "its session ended (announced path_down): dropped; reinstating after reinstate_delay_min"},
    {PathState::recovering, PathInput::session_ended, PathState::backing_off,
     "its session gave up past path_replacement_timeout: dropped; reinstating after reinstate_delay_min"},
};

/// The lookup over path_transitions (PathTable::find(from, input, to): the row, or nullptr).
using PathTable = TransitionTable<path_transitions>;

/// Where the whole device stands.
enum class DeviceState : std::uint8_t {
  opening,           ///< open() runs: paths log in one after the other; nothing is announced
  serving,           ///< some path is usable
  waiting_for_path,  ///< no path usable: commands wait until the give-up deadline
  gave_up,           ///< no path usable for replacement_timeout: commands fail (errc::session_lost)
  closed,            ///< close() or logout(): nothing changes any more
};

/// What moves the device (the inputs of MultipathEngine for the device, named).
enum class DeviceInput : std::uint8_t {
  opened,            ///< opened(): open() is done
  path_usable,       ///< a path became usable (up and ALUA active)
  no_usable_path,    ///< the last usable path stopped being usable
  give_up_deadline,  ///< expire(): replacement_timeout passed without a usable path
  closed,            ///< close()
};

/// One allowed move of DeviceState.
using DeviceTransition = Transition<DeviceState, DeviceInput>;

/// Every device state change the engine makes; a pair (from, input) with no row changes nothing.
inline constexpr DeviceTransition device_transitions[] = {
    {DeviceState::opening, DeviceInput::opened, DeviceState::serving, "open() is done and a path is usable"},
    {DeviceState::opening, DeviceInput::opened, DeviceState::waiting_for_path,
     "open() is done but ALUA leaves no path usable: all_paths_lost, commands wait up to replacement_timeout"},
    {DeviceState::opening, DeviceInput::closed, DeviceState::closed, "open() failed or the device is closed"},
    {DeviceState::serving, DeviceInput::no_usable_path, DeviceState::waiting_for_path,
     "all_paths_lost: commands wait; the give-up deadline is now + replacement_timeout"},
    {DeviceState::serving, DeviceInput::closed, DeviceState::closed, "close() / logout()"},
    {DeviceState::waiting_for_path, DeviceInput::path_usable, DeviceState::serving,
     "a path is usable again before the deadline: waiting commands go out"},
    {DeviceState::waiting_for_path, DeviceInput::give_up_deadline, DeviceState::gave_up,
     "replacement_timeout without a usable path: gave_up, commands fail with errc::session_lost"},
    {DeviceState::waiting_for_path, DeviceInput::closed, DeviceState::closed, "close() / logout()"},
    {DeviceState::gave_up, DeviceInput::path_usable, DeviceState::serving,
     "a path came back after giving up (reinstating goes on): commands go out again"},
    {DeviceState::gave_up, DeviceInput::closed, DeviceState::closed, "close() / logout()"},
};

/// The lookup over device_transitions (DeviceTable::find(from, input, to): the row, or nullptr).
using DeviceTable = TransitionTable<device_transitions>;

/// What the driver must do, in order.
struct MultipathAction {
  enum class Kind : std::uint8_t {
    connect,              ///< log in on `path` (then report login_succeeded / _failed / _refused)
    close_session,        ///< drop `path`'s session (not from inside its own callback: posted)
    announce,             ///< log and report PathEvent `event` (path, error) to MultipathOptions::on_event
    resumed,              ///< a path is usable again after giving up (log)
    arm_reinstate_timer,  ///< call expire() at `at` for `path`'s reinstating login (replaces any earlier)
    arm_give_up_timer,    ///< call expire() at `at` for the give-up deadline
    cancel_give_up_timer,  ///< the give-up deadline no longer applies
    refresh_alua,         ///< a path came back: re-read REPORT TARGET PORT GROUPS (if the unit has TPGS)
    poll_alua,            ///< paths are up but none usable: poll the ALUA states (if TPGS, one poller)
    wake,                 ///< commands waiting for a usable path look again
  };
  Kind kind = Kind::wake;
  std::size_t path = 0;                              ///< connect … refresh_alua: which path
  PathEvent::Kind event = PathEvent::Kind::path_down;  ///< announce: what
  std::error_code error;                             ///< announce: why (path_down, gave_up)
  PathInput cause = PathInput::login_started;        ///< announce path_up: recovered or login_succeeded
  std::chrono::steady_clock::time_point at{};        ///< arm_*: the deadline (steady clock)
};

/// The engine's settings (MultipathOptions' times, milliseconds).
struct MultipathEngineConfig {
  std::size_t paths = 1;
  MultipathPolicy policy = MultipathPolicy::failover;
  /// How long commands wait while no path is usable; 0 = they fail at once (once open).
  std::chrono::milliseconds replacement_timeout{120000};
  std::chrono::milliseconds reinstate_delay_min{1000};  ///< first wait before reinstating (at least 1 ms)
  std::chrono::milliseconds reinstate_delay_max{5000};  ///< the longest wait between attempts
  std::uint32_t seed = 1;                               ///< of the back-off jitter
};

/// The states of one Multipath device and its paths (see the file comment). Inputs return the
/// actions to carry out; deadlines come back inside them (arm_*_timer) and are taken by expire().
/// Inputs for a path in a state with no row for them change nothing (logged when the driver could
/// not have meant it: a login result for a path not logging in).
class MultipathEngine {
 public:
  using Clock = std::chrono::steady_clock;
  using TimePoint = Clock::time_point;
  using Actions = std::vector<MultipathAction>;

  /// Every path starts unconnected (access active/optimized), the device opening.
  explicit MultipathEngine(MultipathEngineConfig config);

  // ---- inputs (each returns the actions to carry out, in order; none once closed) ----
  /// open() starts path `i`'s first login (unconnected → logging_in).
  Actions begin_login(std::size_t i, TimePoint now);
  /// Path `i`'s login succeeded and leads to the same logical unit.
  Actions login_succeeded(std::size_t i, TimePoint now);
  /// Path `i`'s login (or its probe) failed: at open() it stays unconnected, later it backs off.
  Actions login_failed(std::size_t i, TimePoint now);
  /// Path `i` leads to another logical unit (SPC-5 §7.7.6): refused for good.
  Actions login_refused(std::size_t i, TimePoint now);
  /// open() is done: unconnected paths start reinstating; the device serves or waits for a path.
  Actions opened(TimePoint now);
  /// Path `i`'s session lost its connection (or a command found it recovering); `why` announced.
  Actions connection_lost(std::size_t i, std::error_code why, TimePoint now);
  /// Path `i`'s session logged in again by itself.
  Actions recovered(std::size_t i, TimePoint now);
  /// Path `i`'s session gave up or is closed; `why` announced if the path was up.
  Actions session_ended(std::size_t i, std::error_code why, TimePoint now);
  /// Path `i`'s ALUA access state changed (an ALUA sense); re-evaluates usability.
  Actions access_changed(std::size_t i, scsi::AccessState state, TimePoint now);
  /// Records path `i`'s ALUA access state without re-evaluating: call settle() after a batch (a
  /// REPORT TARGET PORT GROUPS read sets every path at once).
  void set_access(std::size_t i, scsi::AccessState state);
  /// Re-evaluates the device after set_access() calls (poll, all_paths_lost, resumed, wake).
  Actions settle(TimePoint now);
  /// The time is `now`: every deadline at or before it is taken (give-up, reinstating logins).
  Actions expire(TimePoint now);
  /// close() / logout(): the device closes; every later input is ignored.
  Actions close();

  // ---- queries ----
  /// Path `i`'s state (`i` < size(), else std::out_of_range).
  [[nodiscard]] PathState path_state(std::size_t i) const { return paths_.at(i).state; }
  /// The device's state.
  [[nodiscard]] DeviceState device_state() const noexcept { return device_; }
  /// close() was called.
  [[nodiscard]] bool closed() const noexcept { return device_ == DeviceState::closed; }
  /// opened() was not called yet.
  [[nodiscard]] bool opening() const noexcept { return device_ == DeviceState::opening; }
  /// The give-up deadline passed and no path is usable since (Multipath::gave_up()).
  [[nodiscard]] bool gave_up() const noexcept { return device_ == DeviceState::gave_up; }
  /// True when a command with no usable path fails at once instead of waiting: gave up, or open
  /// with replacement_timeout 0.
  [[nodiscard]] bool fail_without_path() const noexcept;
  /// Path `i`'s ALUA access state (SPC-5 §5.16.2.4; active/optimized when the unit has no TPGS).
  [[nodiscard]] scsi::AccessState access(std::size_t i) const { return paths_.at(i).access; }
  /// Some path is up and in an ALUA state that processes I/O (as of the last evaluation).
  [[nodiscard]] bool any_usable() const noexcept { return selector_.any_usable(); }
  /// The path for the next command (policy and ALUA), or nullopt when none is usable.
  std::optional<std::size_t> pick() noexcept { return selector_.pick(); }
  /// Path `i`'s public state: up, recovering, refused, else down.
  [[nodiscard]] PathStatus::State public_state(std::size_t i) const;
  /// While path `i` backs off: when its next reinstating login starts.
  [[nodiscard]] std::optional<TimePoint> next_attempt(std::size_t i) const;
  /// While path `i` is being reinstated: logins tried since it went down; else 0.
  [[nodiscard]] std::uint64_t reinstate_attempts(std::size_t i) const { return paths_.at(i).attempts; }
  /// While waiting for a path: when the device gives up.
  [[nodiscard]] std::optional<TimePoint> give_up_deadline() const noexcept;
  /// The current (unjittered) reinstate back-off delay of path `i`, milliseconds.
  [[nodiscard]] Backoff::Duration backoff_delay(std::size_t i) const { return paths_.at(i).backoff.delay(); }
  /// The number of paths.
  [[nodiscard]] std::size_t size() const noexcept { return paths_.size(); }

  /// The last rows taken and how many moves were made (tests: nothing moves outside the tables).
  [[nodiscard]] const PathTransition* last_path_transition() const noexcept { return last_path_; }
  [[nodiscard]] const DeviceTransition* last_device_transition() const noexcept { return last_device_; }
  [[nodiscard]] std::uint64_t path_transitions_taken() const noexcept { return path_taken_; }
  [[nodiscard]] std::uint64_t device_transitions_taken() const noexcept { return device_taken_; }

 private:
  struct Path {
    PathState state = PathState::unconnected;
    scsi::AccessState access = scsi::AccessState::active_optimized;
    Backoff backoff;
    TimePoint deadline{};        // backing_off: when the next login starts
    std::uint64_t attempts = 0;  // reinstating logins since the path went down
  };

  bool move(std::size_t i, PathInput input, PathState to);
  bool move(DeviceInput input, DeviceState to);
  void back_off(std::size_t i, TimePoint now, Actions& out);
  void evaluate(TimePoint now, Actions& out);

  MultipathEngineConfig config_;
  std::vector<Path> paths_;
  PathSelector selector_;
  DeviceState device_ = DeviceState::opening;
  TimePoint give_up_at_{};  // waiting_for_path: the give-up deadline
  std::minstd_rand random_;
  const PathTransition* last_path_ = nullptr;
  const DeviceTransition* last_device_ = nullptr;
  std::uint64_t path_taken_ = 0;
  std::uint64_t device_taken_ = 0;
};

/// The enumerator's name ("backing_off", "session_ended", "waiting_for_path", …).
const char* to_string(PathState state) noexcept;
/// The enumerator's name.
const char* to_string(PathInput input) noexcept;
/// The enumerator's name.
const char* to_string(DeviceState state) noexcept;
/// The enumerator's name.
const char* to_string(DeviceInput input) noexcept;

}  // namespace iserkit::initiator

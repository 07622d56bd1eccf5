// MultipathEngine (multipath_engine.hpp): path and device state machines of Multipath, sans-I/O.
#include "multipath_engine.hpp"

#include <algorithm>

#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/initiator/errors.hpp"

namespace iserkit::initiator {
namespace {

using Action = MultipathAction;
using Kind = MultipathAction::Kind;

Action path_action(Kind kind, std::size_t i) { return Action{.kind = kind, .path = i}; }

}  // namespace

MultipathEngine::MultipathEngine(MultipathEngineConfig config)
    : config_(config),
      selector_(config.paths, config.policy),
      random_(config.seed) {
  const Backoff backoff(std::max(config_.reinstate_delay_min, std::chrono::milliseconds(1)),
                        config_.reinstate_delay_max);
  paths_.assign(config_.paths, Path{.backoff = backoff});
}

bool MultipathEngine::move(std::size_t i, PathInput input, PathState to) {
  Path& p = paths_.at(i);
  const PathTransition* row = PathTable::find(p.state, input, to);
  if (row == nullptr) {
    log::error("multipath: path {}: state change {} --{}--> {} is not in path_transitions: refused", i,
               to_string(p.state), to_string(input), to_string(to));
    return false;
  }
  p.state = to;
  last_path_ = row;
  ++path_taken_;
  return true;
}

bool MultipathEngine::move(DeviceInput input, DeviceState to) {
  const DeviceTransition* row = DeviceTable::find(device_, input, to);
  if (row == nullptr) {
    log::error("multipath: device state change {} --{}--> {} is not in device_transitions: refused",
               to_string(device_), to_string(input), to_string(to));
    return false;
  }
  device_ = to;
  last_device_ = row;
  ++device_taken_;
  return true;
}

// Path `i` just entered backing_off: its next login starts after the current back-off, jittered.
void MultipathEngine::back_off(std::size_t i, TimePoint now, Actions& out) {
  Path& p = paths_[i];
  p.deadline = now + p.backoff.jittered(random_);
  out.push_back(Action{.kind = Kind::arm_reinstate_timer, .path = i, .at = p.deadline});
}

void MultipathEngine::evaluate(TimePoint now, Actions& out) {
  for (std::size_t i = 0; i < paths_.size(); ++i) {
    selector_.set_up(i, paths_[i].state == PathState::up);
    selector_.set_state(i, paths_[i].access);
  }
  if (selector_.any_usable()) {
    if (device_ == DeviceState::waiting_for_path || device_ == DeviceState::gave_up) {
      const bool had_given_up = device_ == DeviceState::gave_up;
      move(DeviceInput::path_usable, DeviceState::serving);
      out.push_back(Action{.kind = Kind::cancel_give_up_timer});
      if (had_given_up) out.push_back(Action{.kind = Kind::resumed});
    }
  } else {
    // SPC-5 §5.16.2.4: logged-in paths that ALUA keeps from I/O (standby, transitioning…): a
    // failover is under way; its end is seen by reading the states again.
    const bool blocked_by_alua =
        std::any_of(paths_.begin(), paths_.end(), [](const Path& p) { return p.state == PathState::up; });
    if (blocked_by_alua) out.push_back(Action{.kind = Kind::poll_alua});
    if (device_ == DeviceState::serving) {
      move(DeviceInput::no_usable_path, DeviceState::waiting_for_path);
      give_up_at_ = now + config_.replacement_timeout;
      out.push_back(Action{.kind = Kind::announce, .event = PathEvent::Kind::all_paths_lost});
      out.push_back(Action{.kind = Kind::arm_give_up_timer, .at = give_up_at_});
    }
  }
  out.push_back(Action{.kind = Kind::wake});
}

MultipathEngine::Actions MultipathEngine::begin_login(std::size_t i, TimePoint) {
  Actions out;
  if (closed()) return out;
  move(i, PathInput::login_started, PathState::logging_in);
  return out;
}

MultipathEngine::Actions MultipathEngine::login_succeeded(std::size_t i, TimePoint now) {
  Actions out;
  if (closed() || !move(i, PathInput::login_succeeded, PathState::up)) return out;
  paths_[i].attempts = 0;
  evaluate(now, out);
  if (!opening()) {
    out.push_back(Action{.kind = Kind::announce,
                         .path = i,
                         .event = PathEvent::Kind::path_up,
                         .cause = PathInput::login_succeeded});
    out.push_back(path_action(Kind::refresh_alua, i));
  }
  return out;
}

MultipathEngine::Actions MultipathEngine::login_failed(std::size_t i, TimePoint now) {
  Actions out;
  if (closed()) return out;
  if (opening()) {
    move(i, PathInput::login_failed, PathState::unconnected);
    return out;
  }
  if (!move(i, PathInput::login_failed, PathState::backing_off)) return out;
  paths_[i].backoff.failed();
  back_off(i, now, out);
  return out;
}

MultipathEngine::Actions MultipathEngine::login_refused(std::size_t i, TimePoint now) {
  Actions out;
  if (closed() || !move(i, PathInput::login_refused, PathState::refused)) return out;
  paths_[i].attempts = 0;
  evaluate(now, out);
  return out;
}

MultipathEngine::Actions MultipathEngine::opened(TimePoint now) {
  Actions out;
  if (device_ != DeviceState::opening) return out;
  for (std::size_t i = 0; i < paths_.size(); ++i) {
    if (paths_[i].state != PathState::unconnected) continue;
    move(i, PathInput::device_opened, PathState::backing_off);
    paths_[i].backoff.reset();
    paths_[i].attempts = 0;
    back_off(i, now, out);
  }
  for (std::size_t i = 0; i < paths_.size(); ++i) {
    selector_.set_up(i, paths_[i].state == PathState::up);
    selector_.set_state(i, paths_[i].access);
  }
  if (selector_.any_usable()) {
    move(DeviceInput::opened, DeviceState::serving);
  } else {
    move(DeviceInput::opened, DeviceState::waiting_for_path);
    give_up_at_ = now + config_.replacement_timeout;
    out.push_back(Action{.kind = Kind::announce, .event = PathEvent::Kind::all_paths_lost});
    out.push_back(Action{.kind = Kind::arm_give_up_timer, .at = give_up_at_});
  }
  evaluate(now, out);
  return out;
}

MultipathEngine::Actions MultipathEngine::connection_lost(std::size_t i, std::error_code why, TimePoint now) {
  Actions out;
  if (closed() || paths_.at(i).state != PathState::up) return out;
  move(i, PathInput::connection_lost, PathState::recovering);
  out.push_back(Action{.kind = Kind::announce, .path = i, .event = PathEvent::Kind::path_down, .error = why});
  evaluate(now, out);
  return out;
}

MultipathEngine::Actions MultipathEngine::recovered(std::size_t i, TimePoint now) {
  Actions out;
  if (closed() || paths_.at(i).state != PathState::recovering) return out;
  move(i, PathInput::recovered, PathState::up);
  evaluate(now, out);
  out.push_back(
      Action{.kind = Kind::announce, .path = i, .event = PathEvent::Kind::path_up, .cause = PathInput::recovered});
  out.push_back(path_action(Kind::refresh_alua, i));
  return out;
}

MultipathEngine::Actions MultipathEngine::session_ended(std::size_t i, std::error_code why, TimePoint now) {
  Actions out;
  if (closed()) return out;
  const PathState from = paths_.at(i).state;
  if (from != PathState::up && from != PathState::recovering) return out;
  move(i, PathInput::session_ended, PathState::backing_off);
  if (from == PathState::up)
    out.push_back(Action{.kind = Kind::announce, .path = i, .event = PathEvent::Kind::path_down, .error = why});
  out.push_back(path_action(Kind::close_session, i));
  evaluate(now, out);
  paths_[i].backoff.reset();
  paths_[i].attempts = 0;
  back_off(i, now, out);
  return out;
}

void MultipathEngine::set_access(std::size_t i, scsi::AccessState state) { paths_.at(i).access = state; }

MultipathEngine::Actions MultipathEngine::access_changed(std::size_t i, scsi::AccessState state, TimePoint now) {
  Actions out;
  if (closed()) return out;
  set_access(i, state);
  evaluate(now, out);
  return out;
}

MultipathEngine::Actions MultipathEngine::settle(TimePoint now) {
  Actions out;
  if (closed()) return out;
  evaluate(now, out);
  return out;
}

MultipathEngine::Actions MultipathEngine::expire(TimePoint now) {
  Actions out;
  if (closed()) return out;
  if (device_ == DeviceState::waiting_for_path && now >= give_up_at_) {
    move(DeviceInput::give_up_deadline, DeviceState::gave_up);
    out.push_back(Action{.kind = Kind::announce,
                         .event = PathEvent::Kind::gave_up,
                         .error = make_error_code(errc::session_lost)});
    out.push_back(Action{.kind = Kind::wake});
  }
  for (std::size_t i = 0; i < paths_.size(); ++i) {
    Path& p = paths_[i];
    if (p.state != PathState::backing_off || now < p.deadline) continue;
    move(i, PathInput::reinstate_due, PathState::logging_in);
    ++p.attempts;
    out.push_back(path_action(Kind::connect, i));
  }
  return out;
}

MultipathEngine::Actions MultipathEngine::close() {
  if (!closed()) move(DeviceInput::closed, DeviceState::closed);
  return {};
}

bool MultipathEngine::fail_without_path() const noexcept {
  if (device_ == DeviceState::gave_up) return true;
  return device_ != DeviceState::opening && config_.replacement_timeout.count() == 0;
}

PathStatus::State MultipathEngine::public_state(std::size_t i) const {
  switch (paths_.at(i).state) {
    case PathState::up: return PathStatus::State::up;
    case PathState::recovering: return PathStatus::State::recovering;
    case PathState::refused: return PathStatus::State::refused;
    case PathState::unconnected:
    case PathState::logging_in:
    case PathState::backing_off: return PathStatus::State::down;
  }
  return PathStatus::State::down;
}

std::optional<MultipathEngine::TimePoint> MultipathEngine::next_attempt(std::size_t i) const {
  const Path& p = paths_.at(i);
  if (p.state != PathState::backing_off) return std::nullopt;
  return p.deadline;
}

std::optional<MultipathEngine::TimePoint> MultipathEngine::give_up_deadline() const noexcept {
  if (device_ != DeviceState::waiting_for_path) return std::nullopt;
  return give_up_at_;
}

const char* to_string(PathState state) noexcept {
  switch (state) {
    case PathState::unconnected: return "unconnected";
    case PathState::logging_in: return "logging_in";
    case PathState::up: return "up";
    case PathState::recovering: return "recovering";
    case PathState::backing_off: return "backing_off";
    case PathState::refused: return "refused";
  }
  return "unknown";
}

const char* to_string(PathInput input) noexcept {
  switch (input) {
    case PathInput::login_started: return "login_started";
    case PathInput::login_succeeded: return "login_succeeded";
    case PathInput::login_failed: return "login_failed";
    case PathInput::login_refused: return "login_refused";
    case PathInput::device_opened: return "device_opened";
    case PathInput::reinstate_due: return "reinstate_due";
    case PathInput::connection_lost: return "connection_lost";
    case PathInput::recovered: return "recovered";
    case PathInput::session_ended: return "session_ended";
  }
  return "unknown";
}

const char* to_string(DeviceState state) noexcept {
  switch (state) {
    case DeviceState::opening: return "opening";
    case DeviceState::serving: return "serving";
    case DeviceState::waiting_for_path: return "waiting_for_path";
    case DeviceState::gave_up: return "gave_up";
    case DeviceState::closed: return "closed";
  }
  return "unknown";
}

const char* to_string(DeviceInput input) noexcept {
  switch (input) {
    case DeviceInput::opened: return "opened";
    case DeviceInput::path_usable: return "path_usable";
    case DeviceInput::no_usable_path: return "no_usable_path";
    case DeviceInput::give_up_deadline: return "give_up_deadline";
    case DeviceInput::closed: return "closed";
  }
  return "unknown";
}

}  // namespace iserkit::initiator

// SessionEngine: see session_engine.hpp for the rules it carries.
#include "session_engine.hpp"

#include <algorithm>

#include "async_events.hpp"
#include "iserkit/common/bytes.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/scsi/opcodes.hpp"

namespace iserkit::initiator {
namespace {

std::error_code busy() { return std::make_error_code(std::errc::resource_unavailable_try_again); }

std::uint32_t itt_capacity(std::uint32_t max_in_flight) {
  // Each SCSI command may hold its ITT while its own ABORT TASK holds another; plus room for a
  // ping, a Logout, text and caller TMFs.
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(2ull * max_in_flight + 8, 65535));
}

}  // namespace

SessionEngine::SessionEngine(EngineConfig config, EngineStart start, TimePoint now)
    : config_(config),
      exp_stat_sn_(start.exp_stat_sn),
      itts_(itt_capacity(config.max_commands_in_flight)),
      ping_(config.nop_interval, config.nop_timeout, now),
      last_now_(now) {
  window_.reset(start.cmd_sn, start.exp_cmd_sn, start.max_cmd_sn);
}

// ---- bookkeeping ----

SessionEngine::Task& SessionEngine::new_task(TaskKind kind) {
  const TaskId id = next_id_++;
  if (!spare_task_nodes_.empty()) {
    // A node of an ended task (reset when it ended): no allocation per command in steady state.
    auto node = std::move(spare_task_nodes_.back());
    spare_task_nodes_.pop_back();
    node.key() = id;
    tasks_.insert(std::move(node));
  }
  Task& t = tasks_[id];
  t.id = id;
  t.kind = kind;
  t.outcome.id = id;
  t.outcome.kind = kind;
  return t;
}

void SessionEngine::erase_task(TaskId id) {
  auto node = tasks_.extract(id);
  if (node.empty()) return;
  node.mapped() = Task();
  if (spare_task_nodes_.size() < max_spare_task_nodes) spare_task_nodes_.push_back(std::move(node));
}

SessionEngine::Task* SessionEngine::find(TaskId id) noexcept {
  auto it = tasks_.find(id);
  return it == tasks_.end() ? nullptr : &it->second;
}

SessionEngine::Task* SessionEngine::by_itt(iscsi::Itt itt) const noexcept {
  if (itt == iscsi::reserved_itt) return nullptr;
  return itts_.find(itt);
}

bool SessionEngine::take_itt(Task& t) {
  const iscsi::Itt itt = itts_.insert(&t);
  if (itt == iscsi::reserved_itt) return false;
  t.itt = itt;
  if (t.kind == TaskKind::scsi) ++scsi_holding_itt_;
  return true;
}

void SessionEngine::release(Task& t) {
  if (t.itt == iscsi::reserved_itt) return;
  itts_.erase(t.itt);
  t.itt = iscsi::reserved_itt;
  if (t.kind == TaskKind::scsi) --scsi_holding_itt_;
}

TaskState SessionEngine::state(TaskId id) const noexcept {
  auto it = tasks_.find(id);
  return it == tasks_.end() ? TaskState::done : it->second.state;
}

void SessionEngine::complete(Task& t, std::error_code ec) {
  if (t.receiving) {
    // The datamover is filling this task's buffer: the owner may not get it back before the
    // receive ends (on_pdu / on_receive_ended).
    if (!t.deferred) t.deferred = ec;
    return;
  }
  if (t.report && t.state != TaskState::timed_out_aborting) {
    t.outcome.error = ec;
    actions_.completions.push_back(std::move(t.outcome));
  } else if (t.report && t.timeout_held) {
    actions_.completions.push_back(std::move(t.outcome));  // its errc::timeout, held until now
  }
  if (t.replaying) {
    t.replaying = false;
    --replaying_in_flight_;
  }
  release(t);
  const TaskId aborts = t.aborts;
  const TaskKind kind = t.kind;
  const TaskId id = t.id;
  // RFC 7143 §11.6.1: after "function complete" or "task does not exist" the target moves no more
  // data for the aborted task.
  const iscsi::TaskManagementResponseCode tmf_response = t.outcome.tmf_response;
  const bool abort_done = !ec && iscsi::abort_task_ended(tmf_response);
  if (id == ping_task_) ping_task_ = 0;
  if (id == logout_task_) logout_task_ = 0;
  erase_task(id);  // t is gone from here on
  if (aborts != 0) {
    // The ABORT TASK after a timeout is answered (or failed): the aborted task's ITT is free.
    const Task* a = find(aborts);
    if (a != nullptr && a->timeout_held && !abort_done && connected()) {
      // The target may still be moving the task's data: only closing the connection stops its
      // RDMA. lose_connection() ends the aborted task and hands its owner the timeout.
      log::warn("session: ABORT TASK for itt=0x{:08x} did not end it ({}): closing the connection",
                iscsi::to_u32(a->itt), ec ? ec.message() : "response " + std::to_string(iscsi::to_wire(tmf_response)));
      lose_connection(make_error_code(errc::connection_closed), PhaseEvent::connection_lost);
    } else {
      end_aborted(aborts);
    }
  }
  if (kind == TaskKind::logout) {
    // RFC 7143 §11.15: after the Logout Response the target closes the connection; so do we,
    // whatever the answer was. A logout the target asked for while recovery is on: log in again.
    if (phase_ == SessionPhase::logout_requested) {
      lose_connection(ec ? ec : make_error_code(errc::connection_closed), PhaseEvent::logout_finished);
    } else if (phase_ == SessionPhase::logging_out) {
      end_session(make_error_code(errc::session_closed), PhaseEvent::logout_finished);
    }
  }
}

void SessionEngine::end_aborted(TaskId aborted) {
  Task* a = find(aborted);
  if (a == nullptr) return;
  if (a->report && a->timeout_held) actions_.completions.push_back(std::move(a->outcome));
  release(*a);
  erase_task(aborted);
}

void SessionEngine::resolve_deferred(Task& t) {
  if (!t.deferred) return;
  const std::error_code ec = *t.deferred;
  t.deferred.reset();
  if (!open()) {
    complete(t, error_);
  } else if (ec == make_error_code(errc::timeout) && t.kind == TaskKind::scsi && active_scsi(t.state)) {
    time_out(t, last_now_);
  } else {
    complete(t, ec);
  }
}

bool SessionEngine::transition(PhaseEvent event, SessionPhase to) noexcept {
  const SessionTransition* row = SessionTable::find(phase_, event, to);
  if (row == nullptr) {
    log::error("session: phase change {} --{}--> {} is not in session_transitions: refused", to_string(phase_),
               to_string(event), to_string(to));
    return false;
  }
  phase_ = to;
  last_transition_ = row;
  ++transitions_taken_;
  return true;
}

const char* to_string(SessionPhase phase) noexcept {
  switch (phase) {
    case SessionPhase::logged_in: return "logged_in";
    case SessionPhase::logging_out: return "logging_out";
    case SessionPhase::logout_requested: return "logout_requested";
    case SessionPhase::recovering: return "recovering";
    case SessionPhase::failed: return "failed";
    case SessionPhase::ended: return "ended";
  }
  return "?";
}

const char* to_string(PhaseEvent event) noexcept {
  switch (event) {
    case PhaseEvent::caller_logout: return "caller_logout";
    case PhaseEvent::target_requests_logout: return "target_requests_logout";
    case PhaseEvent::logout_finished: return "logout_finished";
    case PhaseEvent::logout_deadline: return "logout_deadline";
    case PhaseEvent::connection_lost: return "connection_lost";
    case PhaseEvent::reconnected: return "reconnected";
    case PhaseEvent::replacement_timeout: return "replacement_timeout";
    case PhaseEvent::closed: return "closed";
  }
  return "?";
}

void SessionEngine::end_session(std::error_code ec, PhaseEvent event) {
  if (!open()) return;
  const bool after_logout = in_logout();
  if (!transition(event, SessionPhase::ended)) return;
  error_ = ec;
  actions_.ended = ec;
  if (after_logout && ec == make_error_code(errc::session_closed)) {
    log::debug("session: closed after logout");
  } else {
    log::warn("session: failed: {}", ec.message());
  }
  fail_every_task(ec);
}

void SessionEngine::fail_session(std::error_code ec) { end_session(ec, PhaseEvent::closed); }

void SessionEngine::give_up() {
  const std::error_code lost = make_error_code(errc::session_lost);
  ++stats_.gave_up;
  if (!config_.reconnect_after_give_up) {
    log::warn("session: no new connection within the replacement timeout ({} ms): giving up",
              config_.replacement_timeout.count());
    end_session(lost, PhaseEvent::replacement_timeout);
    return;
  }
  // open-iscsi's replacement_timeout: the waiting commands fail (queued for ever they would hold
  // their callers and buffers), new ones fail at once, and the driver keeps logging in again; a
  // login that succeeds makes the session logged in again (on_reconnected()).
  log::warn("session: no new connection within the replacement timeout ({} ms): giving up on the waiting "
            "commands; logging in again goes on", config_.replacement_timeout.count());
  if (!transition(PhaseEvent::replacement_timeout, SessionPhase::failed)) return;
  recovery_deadline_ = TimePoint::max();
  actions_.gave_up = lost;
  fail_every_task(lost);
}

void SessionEngine::fail_every_task(std::error_code ec) {
  queue_.clear();
  std::vector<TaskId> ids;
  ids.reserve(tasks_.size());
  for (const auto& [id, t] : tasks_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());  // owners hear in submission order
  for (TaskId id : ids)
    if (Task* t = find(id)) complete(*t, ec);
}

void SessionEngine::connection_failed(std::error_code ec, TimePoint now) {
  last_now_ = now;
  lose_connection(ec, PhaseEvent::connection_lost);
}

void SessionEngine::lose_connection(std::error_code ec, PhaseEvent event) {
  if (!connected()) return;
  // Without a replacement timeout, or while the caller's logout is under way, the session ends
  // with the connection (ErrorRecoveryLevel 0, RFC 7143 §7.1.4.1 / §6.3.5).
  if (config_.replacement_timeout.count() <= 0 || phase_ == SessionPhase::logging_out) {
    end_session(ec, event);
    return;
  }
  if (!transition(event, SessionPhase::recovering)) return;
  log::warn("session: connection lost ({}): recovering for up to {} ms", ec.message(),
            config_.replacement_timeout.count());
  recovering_since_ = last_now_;
  recovery_deadline_ = last_now_ + config_.replacement_timeout;
  ++stats_.connections_lost;
  actions_.connection_lost = ec;
  // The connection is gone: no receive is filling any buffer any more.
  if (receiving_ != nullptr) receiving_->receiving = false;
  receiving_ = nullptr;
  logout_task_ = 0;
  logout_deadline_ = TimePoint::max();
  ping_task_ = 0;

  std::vector<TaskId> ids;
  ids.reserve(tasks_.size());
  for (const auto& [id, t] : tasks_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  std::vector<Task*> replay;
  for (TaskId id : ids) {
    Task* t = find(id);
    if (t == nullptr) continue;
    t->receiving = false;
    if (t->deferred) {
      // An end decided while the buffer was being filled (timeout, digest error): it stands.
      const std::error_code end = *t->deferred;
      t->deferred.reset();
      if (t->kind == TaskKind::scsi && active_scsi(t->state) && end == make_error_code(errc::timeout)) {
        t->outcome.error = end;
        if (t->report) actions_.completions.push_back(t->outcome);
        t->report = false;
        t->state = TaskState::timed_out_aborting;
      } else {
        complete(*t, end);
        continue;
      }
    }
    if (t->kind == TaskKind::scsi) {
      if (active_scsi(t->state)) {
        replay.push_back(t);
      } else if (t->state == TaskState::timed_out_aborting) {
        // Its owner heard errc::timeout, or hears it now that the connection is closed (a held
        // timeout); the old session's task is gone with it.
        end_aborted(id);
      }
      continue;  // queued ones stay queued
    }
    if (!t->report || t->kind == TaskKind::logout) {
      // Our own requests (ping, ABORT TASK after a timeout, a target-requested logout).
      release(*t);
      tasks_.erase(id);
      continue;
    }
    // A caller's task management or text request belonged to the lost connection.
    complete(*t, make_error_code(errc::connection_closed));
  }
  // RFC 7143 §6.3.5: the reinstated session starts with no task; the interrupted commands go
  // first, in the order they were sent, then those that never left.
  std::sort(replay.begin(), replay.end(), [](const Task* a, const Task* b) { return a->dispatch_seq < b->dispatch_seq; });
  for (auto it = replay.rbegin(); it != replay.rend(); ++it) {
    requeue(**it);
    queue_.push_front((*it)->id);
  }
}

void SessionEngine::requeue(Task& t) {
  release(t);
  t.state = TaskState::queued_for_window;
  t.deadline = TimePoint::max();
  t.next_r2t_sn = 0;
  t.solicited_bytes_left = 0;
  t.data_in_tracker = DataInTracker(t.command.data_in.size());
  t.outcome.result = scsi::ScsiResult{};
  t.outcome.error = {};
  if (t.replaying) {
    t.replaying = false;
    --replaying_in_flight_;
  }
  const auto opcode = static_cast<scsi::Opcode>(t.command.cdb.bytes[0]);
  // SBC-4 SYNCHRONIZE CACHE (10)/(16): it may be acknowledged only after the writes it covers
  // were done again on this session.
  t.replay_barrier = opcode == scsi::Opcode::synchronize_cache10 || opcode == scsi::Opcode::synchronize_cache16;
  t.dispatch_seq = 0;
  ++t.replays;
}

void SessionEngine::on_reconnected(EngineStart start, WriteLimits limits, TimePoint now) {
  last_now_ = now;
  if (!recovering()) return;
  // Logged in again (after giving up too): commands are accepted again.
  if (!transition(PhaseEvent::reconnected, SessionPhase::logged_in)) return;
  recovery_deadline_ = TimePoint::max();
  config_.limits = limits;
  window_.reset(start.cmd_sn, start.exp_cmd_sn, start.max_cmd_sn);
  exp_stat_sn_ = start.exp_stat_sn;
  ping_ = PingMonitor(config_.nop_interval, config_.nop_timeout, now);
  ++stats_.recoveries;
  log::info("session: recovered: {} commands to send again", queue_.size());
  pump(now);
}

bool SessionEngine::rebind_task_data(TaskId id, std::span<std::byte> data_in, std::span<const std::byte> data_out,
                                     const datamover::TaskData* task_data) noexcept {
  Task* t = find(id);
  if (t == nullptr || t->kind != TaskKind::scsi || t->state != TaskState::queued_for_window) return false;
  if (data_in.size() != t->command.data_in.size() || data_out.size() != t->command.data_out.size()) return false;
  t->command.data_in = data_in;
  t->command.data_out = data_out;
  t->command.task_data = task_data;
  return true;
}

bool SessionEngine::fail_queued(TaskId id, std::error_code ec) {
  Task* t = find(id);
  if (t == nullptr || t->kind != TaskKind::scsi || t->state != TaskState::queued_for_window) return false;
  if (auto it = std::find(queue_.begin(), queue_.end(), id); it != queue_.end()) queue_.erase(it);
  complete(*t, ec);
  return true;
}

bool SessionEngine::absorb_unit_attention(Task& t) {
  // After a reinstatement the target reports POWER ON, RESET, OR BUS DEVICE RESET OCCURRED or
  // I_T NEXUS LOSS OCCURRED (ASC 29h, SPC-5 §6.37): the command was not run (SAM-5 §5.14), so it
  // is sent again instead of reaching the caller.
  // Every UNIT ATTENTION the session receives is counted here, absorbed or not (called once per
  // response with status): the metrics keep them apart from errors.
  const scsi::ScsiResult& r = t.outcome.result;
  if (r.status != scsi::Status::check_condition || !r.sense || r.sense->key != scsi::SenseKey::unit_attention)
    return false;
  ++stats_.unit_attentions;
  if (stats_.recoveries == 0 || r.sense->asc != 0x29 || t.unit_attention_retries >= config_.unit_attention_retries ||
      t.receiving)
    return false;
  ++t.unit_attention_retries;
  ++stats_.unit_attentions_absorbed;
  const bool was_replaying = t.replaying;
  requeue(t);
  --t.replays;
  // It keeps its place before a re-issued SYNCHRONIZE CACHE.
  if (was_replaying) {
    t.replaying = true;
    ++replaying_in_flight_;
  }
  t.replay_barrier = false;
  queue_.push_front(t.id);
  return true;
}

void SessionEngine::on_receive_ended() noexcept {
  Task* p = std::exchange(receiving_, nullptr);
  if (p == nullptr) return;
  p->receiving = false;
  resolve_deferred(*p);
}

EngineActions SessionEngine::take_actions() {
  EngineActions out;
  std::swap(out, actions_);
  // Start from the vectors of an earlier, carried-out batch (empty, with their capacity).
  actions_.pdus.swap(spare_actions_.pdus);
  actions_.completions.swap(spare_actions_.completions);
  return out;
}

void SessionEngine::recycle_actions(EngineActions&& taken) noexcept {
  taken.pdus.clear();
  taken.completions.clear();
  if (taken.pdus.capacity() > spare_actions_.pdus.capacity()) spare_actions_.pdus.swap(taken.pdus);
  if (taken.completions.capacity() > spare_actions_.completions.capacity())
    spare_actions_.completions.swap(taken.completions);
}

// ---- submissions ----

Result<TaskId> SessionEngine::submit(const ScsiSubmission& command, TimePoint now) {
  last_now_ = now;
  if (!command.data_in.empty() && !command.data_out.empty()) return fail(errc::invalid_argument);
  if (command.data_in.size() > 0xffffffffu || command.data_out.size() > 0xffffffffu)
    return fail(errc::invalid_argument);
  if (!accepting()) return tl::unexpected(error_ ? error_ : make_error_code(errc::session_closed));
  // Past the replacement timeout commands fail at once; none is queued until a login succeeds.
  if (phase_ == SessionPhase::failed) return fail(errc::session_lost);
  if (queue_.size() >= config_.max_queued_commands) return tl::unexpected(busy());
  Task& t = new_task(TaskKind::scsi);
  t.command = command;
  t.timeout = command.timeout.count() != 0 ? command.timeout : config_.command_timeout;
  t.data_in_tracker = DataInTracker(command.data_in.size());
  const TaskId id = t.id;
  queue_.push_back(id);
  pump(now);
  if (state(id) == TaskState::queued_for_window) ++stats_.commands_queued_for_window;
  return id;
}

Result<TaskId> SessionEngine::submit_task_management(const TaskManagementOptions& request, TimePoint now) {
  last_now_ = now;
  if (!open()) return tl::unexpected(error_);
  if (recovering()) return fail(errc::connection_closed);  // no connection to send it on
  Task& t = new_task(TaskKind::task_management);
  t.tmf = request;
  t.timeout = request.timeout.count() > 0 ? request.timeout : config_.request_timeout;
  if (!take_itt(t)) {
    log::warn("session: no free ITT for a task management request");
    erase_task(t.id);
    return tl::unexpected(busy());
  }
  log::info("session: task management: function={} lun={} referenced_itt=0x{:08x}",
            static_cast<unsigned>(request.function), request.lun.index().value_or(0xffff),
            iscsi::to_u32(request.referenced_task_tag));
  send_request(t, now);
  return t.id;
}

Result<TaskId> SessionEngine::submit_text(std::vector<std::byte> text, TimePoint now) {
  last_now_ = now;
  if (!accepting()) return tl::unexpected(error_ ? error_ : make_error_code(errc::session_closed));
  if (recovering()) return fail(errc::connection_closed);
  Task& t = new_task(TaskKind::text);
  t.request_text = std::move(text);
  t.timeout = config_.request_timeout;
  if (!take_itt(t)) {
    erase_task(t.id);
    return tl::unexpected(busy());
  }
  send_request(t, now);
  return t.id;
}

Result<TaskId> SessionEngine::logout(TimePoint now) {
  last_now_ = now;
  if (!open()) return tl::unexpected(error_);
  if (phase_ == SessionPhase::logging_out) return fail(errc::session_closed);
  if (recovering()) {
    // No connection to log out on: the session just ends; waiting commands fail.
    end_session(make_error_code(errc::session_closed), PhaseEvent::caller_logout);
    return fail(errc::session_closed);
  }
  return start_logout(PhaseEvent::caller_logout, now);
}

Result<TaskId> SessionEngine::start_logout(PhaseEvent event, TimePoint now) {
  const bool takes_over = phase_ == SessionPhase::logout_requested;
  if (!transition(event, SessionPhase::logging_out)) return fail(errc::session_closed);
  if (takes_over) {
    // The caller's logout takes over the one the target asked for.
    const TaskId old_id = logout_task_;
    if (Task* old = find(old_id)) {
      release(*old);
      tasks_.erase(old_id);
    }
    logout_task_ = 0;
  }
  // Commands not sent yet will not be: they fail now (RFC 7143 §11.14: no new commands after
  // the Logout Request).
  std::vector<TaskId> queued(queue_.begin(), queue_.end());
  queue_.clear();
  for (TaskId id : queued)
    if (Task* q = find(id)) complete(*q, make_error_code(errc::session_closed));
  Task& t = new_task(TaskKind::logout);
  t.state = TaskState::waiting_to_send;
  t.timeout = config_.request_timeout;
  // The Logout the target asked for is the engine's own: its end reaches no owner (set before
  // maybe_send_logout(), which may end it at once when no ITT is free).
  t.report = event == PhaseEvent::caller_logout;
  logout_task_ = t.id;
  const TaskId id = t.id;
  maybe_send_logout(now);
  return id;
}

// ---- sending ----

void SessionEngine::pump(TimePoint now) {
  while (phase_ == SessionPhase::logged_in && !queue_.empty()) {
    Task* t = find(queue_.front());
    if (t == nullptr) {
      queue_.pop_front();
      continue;
    }
    // A re-issued SYNCHRONIZE CACHE leaves only after every re-issued command before it completed.
    if (t->replay_barrier && replaying_in_flight_ > 0) break;
    // RFC 7143 §4.2.2.1: only while CmdSN ≤ MaxCmdSN; and at most max_commands_in_flight commands
    // holding ITTs (timed-out ones included until their ABORT TASK is answered).
    if (!window_.is_open() || scsi_holding_itt_ >= config_.max_commands_in_flight || itts_.full()) break;
    queue_.pop_front();
    dispatch(*t, now);
  }
}

void SessionEngine::dispatch(Task& t, TimePoint now) {
  if (!take_itt(t)) {
    complete(t, busy());
    return;
  }
  const ScsiSubmission& c = t.command;
  const bool write = !c.data_out.empty();
  const auto total = static_cast<std::uint32_t>(write ? c.data_out.size() : c.data_in.size());
  const std::uint32_t immediate = write ? immediate_data_length(config_.limits, total) : 0;
  const std::uint32_t unsolicited = write ? unsolicited_data_out_length(config_.limits, total, immediate) : 0;

  iscsi::ScsiCommand cmd;
  cmd.read = !c.data_in.empty();
  cmd.write = write;
  cmd.final = unsolicited == 0;  // RFC 7143 §11.3.1: F=0 when unsolicited Data-Out follows
  cmd.attribute = c.attribute;
  cmd.lun = c.lun;
  cmd.itt = t.itt;
  cmd.expected_data_transfer_length = total;
  cmd.cmd_sn = window_.take();
  cmd.exp_stat_sn = exp_stat_sn_;
  std::copy(c.cdb.bytes.begin(), c.cdb.bytes.end(), cmd.cdb.begin());
  t.cmd_sn = cmd.cmd_sn;
  t.dispatch_seq = next_dispatch_seq_++;
  t.replay_barrier = false;
  if (t.replays > 0 && !t.replaying) {
    t.replaying = true;
    ++replaying_in_flight_;
    ++stats_.commands_reissued;
  }
  OutgoingPdu out{datamover::make_pdu(cmd, c.data_out.first(immediate)), t.id};
  out.pdu.task_data = c.task_data;
  actions_.pdus.push_back(std::move(out));
  ++stats_.commands_sent;
  stats_.data_out_bytes_sent += immediate;
  stats_.max_in_flight_seen = std::max(stats_.max_in_flight_seen, scsi_holding_itt_);
  if (unsolicited > 0) send_data_out(t, iscsi::reserved_ttt, immediate, unsolicited);
  t.solicited_bytes_left = total - immediate - unsolicited;
  t.state = write && t.solicited_bytes_left > 0 ? TaskState::awaiting_data : TaskState::sent;
  t.deadline = t.timeout.count() > 0 ? now + t.timeout : TimePoint::max();
}

void SessionEngine::send_data_out(Task& t, iscsi::Ttt ttt, std::uint32_t offset, std::uint32_t length) {
  // One sequence: DataSN from 0, F on its last PDU (RFC 7143 §11.7.1, §11.7.5).
  iscsi::DataSegmenter seq(offset, length, config_.limits.max_send_segment_length);
  while (const auto s = seq.next()) {
    iscsi::DataOut d;
    d.final = s->final;
    d.lun = t.command.lun;
    d.itt = t.itt;
    d.ttt = ttt;  // RFC 7143 §11.7.3: 0xffffffff for unsolicited data, the R2T's TTT otherwise
    d.exp_stat_sn = exp_stat_sn_;
    d.data_sn = s->index;
    d.buffer_offset = s->buffer_offset;
    stats_.data_out_bytes_sent += s->length;
    actions_.pdus.push_back({datamover::make_pdu(d, t.command.data_out.subspan(s->buffer_offset, s->length)), t.id});
  }
}

void SessionEngine::send_request(Task& t, TimePoint now) {
  t.cmd_sn = window_.next();  // immediate: CmdSN is carried, not advanced
  switch (t.kind) {
    case TaskKind::task_management: {
      iscsi::TaskManagementRequest req;
      req.immediate = true;  // RFC 7143 §11.5: TMF requests go as immediate commands
      req.function = t.tmf.function;
      req.lun = t.tmf.lun;
      req.itt = t.itt;
      req.referenced_task_tag = t.tmf.referenced_task_tag;
      req.cmd_sn = t.cmd_sn;
      req.exp_stat_sn = exp_stat_sn_;
      req.ref_cmd_sn = t.tmf.ref_cmd_sn;
      actions_.pdus.push_back({datamover::make_pdu(req), 0});
      break;
    }
    case TaskKind::text: {
      iscsi::TextRequest req;
      req.immediate = true;
      req.final = true;
      req.itt = t.itt;
      req.ttt = iscsi::reserved_ttt;
      req.cmd_sn = t.cmd_sn;
      req.exp_stat_sn = exp_stat_sn_;
      actions_.pdus.push_back({datamover::make_pdu_owned(req, std::move(t.request_text)), 0});
      t.request_text.clear();
      break;
    }
    case TaskKind::logout: {
      iscsi::LogoutRequest req;
      req.immediate = true;
      req.reason = iscsi::LogoutReason::close_session;
      req.itt = t.itt;
      req.cmd_sn = t.cmd_sn;
      req.exp_stat_sn = exp_stat_sn_;
      actions_.pdus.push_back({datamover::make_pdu(req), 0});
      break;
    }
    case TaskKind::ping: {
      iscsi::NopOut out;
      out.immediate = true;
      out.itt = t.itt;  // RFC 7143 §11.18.1: a valid ITT asks for a NOP-In answer
      out.ttt = iscsi::reserved_ttt;
      out.cmd_sn = t.cmd_sn;
      out.exp_stat_sn = exp_stat_sn_;
      actions_.pdus.push_back({datamover::make_pdu(out), 0});
      break;
    }
    case TaskKind::scsi: return;  // dispatch() sends commands
  }
  t.state = TaskState::sent;
  if (t.timeout.count() > 0) t.deadline = now + t.timeout;
}

void SessionEngine::maybe_send_logout(TimePoint now) {
  if (!in_logout() || logout_task_ == 0) return;
  Task* t = find(logout_task_);
  if (t == nullptr || t->state != TaskState::waiting_to_send) return;
  // Let the commands in flight finish first (timed-out ones are finished for their owners).
  for (const auto& [id, task] : tasks_)
    if (task.kind == TaskKind::scsi && active_scsi(task.state)) return;
  if (!take_itt(*t)) {
    complete(*t, busy());
    return;
  }
  send_request(*t, now);
}

// ---- timeouts ----

void SessionEngine::time_out(Task& t, TimePoint now) {
  if (t.kind != TaskKind::scsi) {
    log::warn("session: request timed out: itt=0x{:08x}", iscsi::to_u32(t.itt));
    complete(t, make_error_code(errc::timeout));
    return;
  }
  if (t.receiving) {
    if (!t.deferred) t.deferred = make_error_code(errc::timeout);
    return;
  }
  log::warn("command: timed out: itt=0x{:08x}", iscsi::to_u32(t.itt));
  t.outcome.error = make_error_code(errc::timeout);
  if (t.report) {
    if (config_.hold_timed_out_until_aborted && !config_.fail_session_on_timeout) {
      t.timeout_held = true;  // the owner hears it when the ABORT TASK ends (end_aborted())
    } else {
      actions_.completions.push_back(t.outcome);
    }
  }
  t.state = TaskState::timed_out_aborting;
  t.deadline = TimePoint::max();
  // RFC 7143 §11.5.1: ABORT TASK tells the target to drop it (RefCmdSN = its CmdSN). The task's
  // ITT stays reserved until the answer, so a late PDU for it can never reach a new task.
  Task& abort = new_task(TaskKind::task_management);
  abort.report = false;
  abort.aborts = t.id;
  abort.tmf = TaskManagementOptions{.function = iscsi::TaskManagementFunction::abort_task,
                                    .lun = t.command.lun,
                                    .referenced_task_tag = t.itt,
                                    .ref_cmd_sn = t.cmd_sn};
  abort.timeout = config_.request_timeout;
  if (!take_itt(abort)) {
    // Cannot happen with the table's sizing; never leak the slot if it does.
    const TaskId aborted = t.id;
    const bool held = t.timeout_held;
    erase_task(abort.id);
    if (held) {
      // Nothing else stops the RDMA.
      lose_connection(make_error_code(errc::connection_closed), PhaseEvent::connection_lost);
    } else {
      end_aborted(aborted);
    }
  } else {
    send_request(abort, now);
  }
  if (config_.fail_session_on_timeout)
    lose_connection(make_error_code(errc::connection_closed), PhaseEvent::connection_lost);
}

void SessionEngine::on_timer(TimePoint now) {
  last_now_ = now;
  if (!open()) return;
  if (recovering()) {
    if (phase_ == SessionPhase::recovering && now >= recovery_deadline_) give_up();
    return;
  }
  std::vector<TaskId> expired;
  for (const auto& [id, t] : tasks_) {
    if (t.deadline > now) continue;
    if (t.kind == TaskKind::scsi ? active_scsi(t.state) : t.state == TaskState::sent) expired.push_back(id);
  }
  std::sort(expired.begin(), expired.end());
  for (TaskId id : expired) {
    if (!open()) break;
    if (Task* t = find(id)) time_out(*t, now);
  }
  if (open() && logout_deadline_ <= now) {
    // RFC 7143 §11.9.1: the target drops the connection after Parameter3 seconds anyway.
    log::warn("session: logout requested by the target did not finish in time");
    if (phase_ == SessionPhase::logout_requested) {
      lose_connection(make_error_code(errc::timeout), PhaseEvent::logout_deadline);
    } else {
      end_session(make_error_code(errc::session_closed), PhaseEvent::logout_deadline);
    }
  }
  if (open() && ping_.enabled()) {
    switch (ping_.on_tick(now)) {
      case PingMonitor::Action::none: break;
      case PingMonitor::Action::send_ping: {
        Task& p = new_task(TaskKind::ping);
        p.report = false;
        if (!take_itt(p)) {
          erase_task(p.id);
          break;
        }
        ping_task_ = p.id;
        send_request(p, now);
        ping_.on_ping_sent(now);
        ++stats_.pings_sent;
        break;
      }
      case PingMonitor::Action::connection_dead:
        log::warn("session: no NOP-In within {} ms of our ping: connection dead", config_.nop_timeout.count());
        lose_connection(make_error_code(errc::timeout), PhaseEvent::connection_lost);
        break;
    }
  }
  pump(now);
  maybe_send_logout(now);
}

SessionEngine::TimePoint SessionEngine::next_deadline() const noexcept {
  if (!open()) return TimePoint::max();
  if (recovering()) return recovery_deadline_;
  TimePoint next = logout_deadline_;
  for (const auto& [id, t] : tasks_) {
    const bool live = t.kind == TaskKind::scsi ? active_scsi(t.state) : t.state == TaskState::sent;
    if (live && !t.receiving) next = std::min(next, t.deadline);
  }
  if (ping_.enabled()) next = std::min(next, ping_.next_check());
  return next;
}

}  // namespace iserkit::initiator

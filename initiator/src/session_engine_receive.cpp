// SessionEngine, receiving: what the target sends (Data-In placement, SCSI Response, R2T, NOP-In,
// task management, text, logout and reject responses, asynchronous messages; RFC 7143 §11).
// The rest of the engine: session_engine.cpp; its rules: session_engine.hpp.
#include <algorithm>

#include "async_events.hpp"
#include "iserkit/common/bytes.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"
#include "session_engine.hpp"

namespace iserkit::initiator {

// ---- receiving ----

std::span<std::byte> SessionEngine::place(const iscsi::Bhs& bhs, std::uint32_t length) noexcept {
  if (!connected() || iscsi::raw_opcode(bhs) != static_cast<std::uint8_t>(iscsi::Opcode::data_in)) return {};
  auto din = iscsi::decode_bhs_as<iscsi::DataIn>(bhs);
  if (!din) return {};
  Task* t = by_itt(din->itt);
  // RFC 7143 §11.7.6: the data must lie inside the expected transfer; otherwise it goes to
  // scratch and the command fails with a protocol error (on_pdu).
  if (t == nullptr || t->kind != TaskKind::scsi || !active_scsi(t->state) ||
      !t->data_in_tracker.fits(din->buffer_offset, length))
    return {};
  receiving_ = t;
  t->receiving = true;
  return t->command.data_in.subspan(din->buffer_offset, length);
}

void SessionEngine::on_pdu(const datamover::PduIn& in, TimePoint now) {
  last_now_ = now;
  Task* placed = std::exchange(receiving_, nullptr);
  TaskId placed_id = 0;
  if (placed != nullptr) {
    placed->receiving = false;
    placed_id = placed->id;
  }
  if (connected()) {
    ping_.on_receive(now);
    placed_for_pdu_ = placed_id;
    auto header = iscsi::decode_bhs(in.bhs);
    if (!header) {
      log::warn("session: malformed PDU from target: opcode=0x{:02x}", iscsi::raw_opcode(in.bhs));
      lose_connection(make_error_code(errc::protocol_error), PhaseEvent::connection_lost);
    } else {
      std::visit([&](const auto& h) { handle(h, in, now); }, *header);
    }
    placed_for_pdu_ = 0;
  }
  if (placed_id != 0)
    if (Task* p = find(placed_id)) resolve_deferred(*p);
  pump(now);
  maybe_send_logout(now);
}

void SessionEngine::update(SerialNumber exp_cmd_sn, SerialNumber max_cmd_sn) { window_.update(exp_cmd_sn, max_cmd_sn); }

void SessionEngine::update_stat_sn(SerialNumber stat_sn) {
  // RFC 7143 §4.2.2.2: ExpStatSN acknowledges status up to StatSN.
  if (stat_sn + 1 > exp_stat_sn_) exp_stat_sn_ = stat_sn + 1;
}

void SessionEngine::handle(const iscsi::DataIn& d, const datamover::PduIn& in, TimePoint) {
  update(d.exp_cmd_sn, d.max_cmd_sn);
  Task* t = by_itt(d.itt);
  if (t == nullptr || t->kind != TaskKind::scsi || !active_scsi(t->state)) {
    log::debug("session: Data-In for unknown or finished itt=0x{:08x} dropped", iscsi::to_u32(d.itt));
    return;
  }
  const auto length = static_cast<std::uint32_t>(in.data.size());
  if (length != 0 && placed_for_pdu_ != t->id) {
    log::warn("session: Data-In outside the buffer: itt=0x{:08x} offset={} length={} buffer={}",
              iscsi::to_u32(d.itt), d.buffer_offset, length, t->command.data_in.size());
    complete(*t, make_error_code(errc::protocol_error));
    return;
  }
  if (in.pdu_error) {
    complete(*t, in.pdu_error);
    return;
  }
  if (auto r = t->data_in_tracker.accept(d.data_sn, d.buffer_offset, length); !r) {
    log::warn("session: Data-In out of order: itt=0x{:08x} data_sn={} expected={}", iscsi::to_u32(d.itt), d.data_sn,
              t->data_in_tracker.next_data_sn());
    complete(*t, r.error());
    return;
  }
  stats_.data_in_bytes_placed += length;
  // RFC 7143 §11.7.5: status and StatSN are valid only with the S bit (which requires F).
  if (d.status_present) {
    update_stat_sn(d.stat_sn);
    t->outcome.result.status = iscsi::status_of(d);
    if (d.residual_underflow || d.residual_overflow) {
      t->outcome.result.residual_bytes = d.residual_count;
      t->outcome.result.residual_overflow = d.residual_overflow;
    }
    if (absorb_unit_attention(*t)) return;
    complete(*t, {});
  }
}

void SessionEngine::handle(const iscsi::ScsiResponse& r, const datamover::PduIn& in, TimePoint) {
  update_stat_sn(r.stat_sn);
  update(r.exp_cmd_sn, r.max_cmd_sn);
  Task* t = by_itt(r.itt);
  if (t == nullptr || t->kind != TaskKind::scsi || !active_scsi(t->state)) {
    log::debug("session: SCSI Response for unknown or finished itt=0x{:08x} dropped", iscsi::to_u32(r.itt));
    return;
  }
  if (iscsi::response_of(r) != iscsi::ScsiResponseCode::command_completed) {
    // RFC 7143 §11.4.3: Target Failure (or a vendor code): the status is not valid.
    log::warn("session: command failed at target: itt=0x{:08x} response=0x{:02x}", iscsi::to_u32(r.itt), r.response);
    complete(*t, make_error_code(errc::protocol_error));
    return;
  }
  scsi::ScsiResult& result = t->outcome.result;
  result.status = iscsi::status_of(r);
  if (r.residual_underflow || r.residual_overflow) {
    result.residual_bytes = r.residual_count;
    result.residual_overflow = r.residual_overflow;
  }
  // RFC 7143 §11.4.7: the data segment is SenseLength (2 bytes) followed by the sense data.
  if (in.data.size() >= 2 && !in.pdu_error) {
    const std::uint16_t sense_length = load_be16(in.data.data());
    const auto avail = std::min<std::size_t>(sense_length, in.data.size() - 2);
    if (avail > 0) {
      if (auto s = scsi::decode_sense(in.data.subspan(2, avail))) result.sense = *s;
    }
  }
  if (absorb_unit_attention(*t)) return;
  complete(*t, {});
}

void SessionEngine::handle(const iscsi::R2t& r, const datamover::PduIn&, TimePoint) {
  update(r.exp_cmd_sn, r.max_cmd_sn);
  ++stats_.r2ts_received;
  Task* t = by_itt(r.itt);
  if (t == nullptr || t->kind != TaskKind::scsi || !active_scsi(t->state)) {
    log::debug("session: R2T for unknown or finished itt=0x{:08x} dropped", iscsi::to_u32(r.itt));
    return;
  }
  const auto total = static_cast<std::uint32_t>(t->command.data_out.size());
  if (auto ok = validate_r2t(r, total, config_.limits); !ok) {
    log::warn("session: R2T outside the transfer: itt=0x{:08x} offset={} length={} total={}", iscsi::to_u32(r.itt),
              r.buffer_offset, r.desired_data_transfer_length, total);
    complete(*t, ok.error());
    return;
  }
  // RFC 7143 §11.8.3: R2TSN numbers a task's R2Ts from 0; at ErrorRecoveryLevel 0 a gap cannot
  // be recovered.
  if (r.r2t_sn != t->next_r2t_sn) {
    log::warn("session: R2T out of order: itt=0x{:08x} r2t_sn={} expected={}", iscsi::to_u32(r.itt), r.r2t_sn,
              t->next_r2t_sn);
    complete(*t, make_error_code(errc::protocol_error));
    return;
  }
  ++t->next_r2t_sn;
  send_data_out(*t, r.ttt, r.buffer_offset, r.desired_data_transfer_length);
  t->solicited_bytes_left -= std::min(t->solicited_bytes_left, r.desired_data_transfer_length);
  if (t->solicited_bytes_left == 0) t->state = TaskState::sent;
}

void SessionEngine::handle(const iscsi::NopIn& n, const datamover::PduIn& in, TimePoint) {
  update(n.exp_cmd_sn, n.max_cmd_sn);
  // RFC 7143 §11.19.1: StatSN is advanced only by a NOP-In that answers our NOP-Out (ITT valid).
  if (n.itt != iscsi::reserved_itt) {
    update_stat_sn(n.stat_sn);
    Task* t = by_itt(n.itt);
    if (t != nullptr && t->kind == TaskKind::ping) {
      ping_.on_pong();
      ++stats_.pings_answered;
      complete(*t, {});
    }
  }
  // RFC 7143 §11.19.2: a TTT other than 0xffffffff asks for a NOP-Out answer; with 0xffffffff
  // the NOP-In is unsolicited and needs none.
  if (n.ttt == iscsi::reserved_ttt) return;
  ++stats_.nop_in_answered;
  iscsi::NopOut out;
  out.immediate = true;
  out.lun = n.lun;
  out.itt = iscsi::reserved_itt;  // RFC 7143 §11.18.1: a reply to a NOP-In carries ITT 0xffffffff
  out.ttt = n.ttt;                // RFC 7143 §11.18.3: echo the TTT
  out.cmd_sn = window_.next();    // immediate: CmdSN is not advanced
  out.exp_stat_sn = exp_stat_sn_;
  // RFC 7143 §11.18.5: the ping data is returned.
  actions_.pdus.push_back({datamover::make_pdu_owned(out, std::vector<std::byte>(in.data.begin(), in.data.end())), 0});
}

void SessionEngine::handle(const iscsi::Reject& r, const datamover::PduIn& in, TimePoint) {
  update_stat_sn(r.stat_sn);
  update(r.exp_cmd_sn, r.max_cmd_sn);
  // RFC 7143 §11.17.3: the data segment carries the rejected PDU's header.
  if (in.data.size() < iscsi::bhs_size) {
    log::warn("session: Reject without the rejected header: reason=0x{:02x}", static_cast<unsigned>(r.reason));
    return;
  }
  iscsi::Bhs rejected;
  std::copy_n(in.data.begin(), iscsi::bhs_size, rejected.begin());
  const iscsi::Itt itt = iscsi::itt_of(rejected);
  log::warn("session: target rejected PDU: reason=0x{:02x} opcode={} itt=0x{:08x}", static_cast<unsigned>(r.reason),
            iscsi::opcode_name(iscsi::raw_opcode(rejected)), iscsi::to_u32(itt));
  Task* t = by_itt(itt);
  if (t == nullptr || t->state == TaskState::timed_out_aborting) return;
  complete(*t, make_error_code(errc::protocol_error));
}

void SessionEngine::handle(const iscsi::AsyncMessage& a, const datamover::PduIn&, TimePoint now) {
  update_stat_sn(a.stat_sn);
  update(a.exp_cmd_sn, a.max_cmd_sn);
  log::info("session: async message: event={} parameter1={} parameter2={} parameter3={}",
            static_cast<unsigned>(a.event), a.parameter1, a.parameter2, a.parameter3);
  const AsyncDecision d = decide_async(a);
  if (d.kind == AsyncDecision::Kind::fail_session) {
    lose_connection(make_error_code(errc::connection_closed), PhaseEvent::connection_lost);
  } else if (d.kind == AsyncDecision::Kind::logout && phase_ == SessionPhase::logged_in) {
    if (config_.replacement_timeout.count() > 0) {
      // With recovery on, the target's logout request is a connection to replace: commands not
      // sent yet wait (pump() holds them while logging out), the Logout goes out once those in
      // flight answered, then the session logs in again (lose_connection() after the response).
      if (!transition(PhaseEvent::target_requests_logout, SessionPhase::logout_requested)) return;
      Task& t = new_task(TaskKind::logout);
      t.state = TaskState::waiting_to_send;
      t.timeout = config_.request_timeout;
      t.report = false;
      logout_task_ = t.id;
      logout_deadline_ = now + d.within;
      maybe_send_logout(now);
    } else if (start_logout(PhaseEvent::target_requests_logout, now)) {
      logout_deadline_ = now + d.within;
    }
  }
}

void SessionEngine::handle(const iscsi::LogoutResponse& r, const datamover::PduIn&, TimePoint) {
  update_stat_sn(r.stat_sn);
  update(r.exp_cmd_sn, r.max_cmd_sn);
  Task* t = by_itt(r.itt);
  if (t == nullptr || t->kind != TaskKind::logout) return;
  // RFC 7143 §11.15.1: anything but "closed successfully" is a failed logout.
  complete(*t, iscsi::response_of(r) == iscsi::LogoutResponseCode::closed_successfully
                   ? std::error_code{}
                   : make_error_code(errc::protocol_error));
}

void SessionEngine::handle(const iscsi::TaskManagementResponse& r, const datamover::PduIn&, TimePoint) {
  update_stat_sn(r.stat_sn);
  update(r.exp_cmd_sn, r.max_cmd_sn);
  Task* t = by_itt(r.itt);
  if (t == nullptr || t->kind != TaskKind::task_management) return;
  t->outcome.tmf_response = iscsi::response_of(r);
  log::info("session: task management response: itt=0x{:08x} response={}", iscsi::to_u32(r.itt), r.response);
  if (t->outcome.tmf_response == iscsi::TaskManagementResponseCode::function_complete) after_tmf(*t);
  complete(*t, {});
}

void SessionEngine::after_tmf(const Task& tmf) {
  using F = iscsi::TaskManagementFunction;
  // RFC 7143 §11.5.1 / SAM-5 §7: "function complete" means the target ended the tasks the
  // function names that it received before the TMF (CmdSN below the TMF's); those that did not
  // answer with their own status end here.
  std::vector<TaskId> ended;
  for (const auto& [id, t] : tasks_) {
    if (t.kind != TaskKind::scsi || !active_scsi(t.state) || !(t.cmd_sn < tmf.cmd_sn)) continue;
    bool hit = false;
    switch (tmf.tmf.function) {
      case F::abort_task: hit = t.itt == tmf.tmf.referenced_task_tag; break;
      case F::abort_task_set:
      case F::clear_task_set:
      case F::logical_unit_reset: hit = t.command.lun == tmf.tmf.lun; break;
      case F::target_warm_reset:
      case F::target_cold_reset: hit = true; break;
      default: break;
    }
    if (hit) ended.push_back(id);
  }
  std::sort(ended.begin(), ended.end());
  for (TaskId id : ended)
    if (Task* t = find(id)) complete(*t, make_error_code(errc::task_aborted));
}

void SessionEngine::handle(const iscsi::TextResponse& r, const datamover::PduIn& in, TimePoint now) {
  update_stat_sn(r.stat_sn);
  update(r.exp_cmd_sn, r.max_cmd_sn);
  Task* t = by_itt(r.itt);
  if (t == nullptr || t->kind != TaskKind::text) {
    log::debug("session: Text Response for unknown itt=0x{:08x} dropped", iscsi::to_u32(r.itt));
    return;
  }
  if (in.pdu_error) {
    complete(*t, in.pdu_error);
    return;
  }
  // Bound what a target can make us hold (SendTargets of many targets fits easily).
  constexpr std::size_t max_text_bytes = 16u << 20;
  if (t->outcome.text.size() + in.data.size() > max_text_bytes) {
    log::warn("session: text response above {} bytes refused", max_text_bytes);
    complete(*t, make_error_code(errc::protocol_error));
    return;
  }
  t->outcome.text.insert(t->outcome.text.end(), in.data.begin(), in.data.end());
  if (r.final) {
    complete(*t, {});
    return;
  }
  // RFC 7143 §11.11.2: F=0 — ask for the rest with an empty Text Request echoing the TTT.
  if (r.ttt == iscsi::reserved_ttt) {
    complete(*t, make_error_code(errc::protocol_error));
    return;
  }
  iscsi::TextRequest more;
  more.immediate = true;
  more.final = true;
  more.itt = t->itt;
  more.ttt = r.ttt;
  more.cmd_sn = window_.next();
  more.exp_stat_sn = exp_stat_sn_;
  actions_.pdus.push_back({datamover::make_pdu_owned(more, {}), 0});
  t->deadline = now + t->timeout;
}

template <class Other>
void SessionEngine::handle(const Other&, const datamover::PduIn& in, TimePoint) {
  // RFC 7143 §6.3: initiator opcodes or a Login Response in full feature phase break the protocol.
  log::warn("session: unexpected PDU: opcode={}", iscsi::opcode_name(iscsi::raw_opcode(in.bhs)));
  lose_connection(make_error_code(errc::protocol_error), PhaseEvent::connection_lost);
}

}  // namespace iserkit::initiator

// The target's sans-I/O session engine (RFC 7143 §3.2.4, §4.2.2.1, §7.8, §11.3-§11.19).
#include "session_engine.hpp"

#include <algorithm>
#include <utility>

#include "iserkit/common/copy_counter.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/iscsi/data_segmenter.hpp"

namespace iserkit::target {
namespace {

using iscsi::Opcode;

constexpr scsi::SenseData sense_crc_error{.key = scsi::SenseKey::aborted_command, .asc = 0x47, .ascq = 0x05};
constexpr scsi::SenseData sense_data_phase_error{.key = scsi::SenseKey::aborted_command, .asc = 0x4b, .ascq = 0x00};
constexpr std::size_t max_text_request_bytes = 64 * 1024;

// A task that may still take Data-Out or a data failure (its buffer is not on the backend).
bool takes_data(TaskState s) noexcept {
  return s == TaskState::placed || s == TaskState::receiving_data || s == TaskState::waiting_budget ||
         s == TaskState::fetching_write_data || s == TaskState::write_data_fetched;
}

bool is_aborted(TaskState s) noexcept { return s == TaskState::aborted_executing || s == TaskState::aborted_fetching; }

bool is_opcode(const iscsi::Bhs& bhs, Opcode op) noexcept { return iscsi::raw_opcode(bhs) == static_cast<std::uint8_t>(op); }

iscsi::RejectReason reject_reason_for(const std::error_code& pdu_error) noexcept {
  return pdu_error == make_error_code(errc::data_digest_error) ? iscsi::RejectReason::data_digest_error
                                                               : iscsi::RejectReason::protocol_error;
}

}  // namespace

SessionEngine::SessionEngine(SessionEngineConfig config, SessionEngineHooks hooks, BufferPool& pool,
                             std::unique_ptr<DataPhase> data_phase, TimePoint now)
    : config_(std::move(config)),
      hooks_(std::move(hooks)),
      pool_(pool),
      data_phase_(data_phase ? std::move(data_phase) : make_data_phase({})),
      window_(config_.exp_cmd_sn, std::max<std::uint32_t>(1, config_.cmd_window_depth)),
      stat_sn_(config_.stat_sn),
      last_rx_(now) {
  spare_batches_.reserve(max_spare_batches);  // recycle_batch() never allocates
}

std::vector<EngineAction> SessionEngine::take_actions() {
  // Draining: the connection closes once the last answer is queued (after it, in order).
  if (draining_ && !ended_ && tasks_.empty() && tmfs_.empty() && !logout_) close("target shutting down");
  std::vector<EngineAction> out;
  out.swap(actions_);
  actions_.swap(spare_actions_);  // empty, with the capacity of an earlier pass
  return out;
}

void SessionEngine::recycle_actions(std::vector<EngineAction>&& taken) noexcept {
  taken.clear();
  if (taken.capacity() > spare_actions_.capacity() && taken.capacity() <= max_spare_actions)
    spare_actions_ = std::move(taken);
}

void SessionEngine::recycle_batch(SendPdus&& sent) noexcept {
  sent.pdus.clear();
  sent.keep.clear();
  if (spare_batches_.size() < max_spare_batches && sent.pdus.capacity() > 0 && spare_batches_.capacity() > spare_batches_.size())
    spare_batches_.push_back(std::move(sent));
}

std::unique_ptr<EngineTask> SessionEngine::new_task() {
  if (spare_tasks_.empty()) return std::make_unique<EngineTask>();
  auto task = std::move(spare_tasks_.back());
  spare_tasks_.pop_back();
  return task;
}

void SessionEngine::insert_task(std::uint32_t itt, std::unique_ptr<EngineTask> task) {
  if (spare_task_nodes_.empty()) {
    tasks_.emplace(itt, std::move(task));
    return;
  }
  auto node = std::move(spare_task_nodes_.back());
  spare_task_nodes_.pop_back();
  node.key() = itt;
  node.mapped() = std::move(task);
  tasks_.insert(std::move(node));
}

void SessionEngine::recycle_task(std::unique_ptr<EngineTask> task) noexcept {
  *task = EngineTask{};  // releases its buffer now, as destroying it did
  if (spare_tasks_.size() < max_spare_tasks) spare_tasks_.push_back(std::move(task));
}

void SessionEngine::begin_drain(std::uint16_t logout_within_seconds) {
  if (ended_ || draining_) return;
  draining_ = true;
  if (config_.discovery) return;
  // RFC 7143 §11.9.1: AsyncEvent 1, "target requests Logout"; Parameter3 is the time to do it in.
  iscsi::AsyncMessage m{.lun = {}, .stat_sn = take_stat_sn(), .event = iscsi::AsyncEvent::logout_request,
                        .parameter3 = logout_within_seconds};
  stamp(m);
  send(datamover::make_pdu(m));
}

const EngineTask* SessionEngine::task(iscsi::Itt itt) const noexcept {
  auto it = tasks_.find(iscsi::to_u32(itt));
  return it == tasks_.end() ? nullptr : it->second.get();
}

std::span<std::byte> SessionEngine::task_data(iscsi::Itt itt) const noexcept {
  auto it = tasks_.find(iscsi::to_u32(itt));
  if (it == tasks_.end() || !it->second->buffer) return {};
  return it->second->buffer.bytes().first(
      std::min<std::size_t>(it->second->plan.transfer_length_bytes, it->second->buffer.size()));
}

iscsi::Ttt SessionEngine::take_ttt() noexcept {
  const iscsi::Ttt t{next_ttt_};
  if (++next_ttt_ == iscsi::to_u32(iscsi::reserved_ttt)) next_ttt_ = 1;
  return t;
}

void SessionEngine::send(datamover::PduOut pdu, PooledBuffer keep) {
  if (ended_) return;
  if (actions_.empty() || !std::holds_alternative<SendPdus>(actions_.back())) {
    if (spare_batches_.empty()) {
      actions_.emplace_back(SendPdus{});
    } else {
      actions_.emplace_back(std::move(spare_batches_.back()));
      spare_batches_.pop_back();
    }
  }
  auto& batch = std::get<SendPdus>(actions_.back());
  batch.pdus.push_back(std::move(pdu));
  if (keep) batch.keep.push_back(std::move(keep));
}

void SessionEngine::send_reject(iscsi::RejectReason reason, const iscsi::Bhs& bhs) {
  // RFC 7143 §11.17: the data segment of a Reject is the complete header of the rejected PDU.
  if (config_.stats) config_.stats->count_reject(reason);
  iscsi::Reject r{.reason = reason, .stat_sn = take_stat_sn()};
  stamp(r);
  send(datamover::make_pdu_owned(r, std::vector<std::byte>(bhs.begin(), bhs.end())));
}

void SessionEngine::close(std::string reason) {
  if (ended_) return;
  actions_.emplace_back(CloseConnection{std::move(reason)});
  ended_ = true;
  tmfs_.clear();
  logout_.reset();
  // abort_task() ends what is not on the backend; the rest ends in on_task_executed().
  std::vector<std::uint32_t> itts;
  for (auto& [itt, t] : tasks_) itts.push_back(itt);
  for (auto itt : itts) {
    auto it = tasks_.find(itt);
    if (it != tasks_.end()) abort_task(*it->second);
  }
}

void SessionEngine::on_closed() { close("connection closed"); }

// ---------------------------------------------------------------------------------------------
// Time: the idle watch (RFC 7143 §11.19: a NOP-In ping with ITT 0xffffffff and a TTT of ours)
// ---------------------------------------------------------------------------------------------

std::optional<SessionEngine::TimePoint> SessionEngine::next_deadline() const noexcept {
  if (ended_ || config_.idle_interval.count() <= 0) return std::nullopt;
  if (ping_deadline_) return ping_deadline_;
  return last_rx_ + config_.idle_interval;
}

void SessionEngine::on_timer(TimePoint now) {
  if (ended_ || config_.idle_interval.count() <= 0) return;
  if (ping_deadline_) {
    if (now >= *ping_deadline_) close("no answer to a NOP-In ping");
    return;
  }
  if (now < last_rx_ + config_.idle_interval) return;
  // RFC 7143 §11.19.2: StatSN is the next StatSN, not advanced when ITT is 0xffffffff.
  iscsi::NopIn ping{.lun = {}, .itt = iscsi::reserved_itt, .ttt = take_ttt(), .stat_sn = stat_sn_};
  stamp(ping);
  send(datamover::make_pdu(ping));
  ping_deadline_ = now + config_.ping_timeout;
  ++pings_sent_;
}

// ---------------------------------------------------------------------------------------------
// Header phase
// ---------------------------------------------------------------------------------------------

std::span<std::byte> SessionEngine::place(const iscsi::Bhs& bhs, std::uint32_t length) noexcept {
  current_ = Current{};
  if (ended_) return {};
  try {
    if (is_opcode(bhs, Opcode::scsi_command)) {
      if (iscsi::total_ahs_length_words(bhs) != 0) return {};  // the AHS (long CDB): payload phase
      current_.header_done = true;
      return command_header(bhs, {}, length);
    }
    if (is_opcode(bhs, Opcode::data_out)) {
      current_.header_done = true;
      return data_out_header(bhs, length);
    }
  } catch (...) {
    // Allocation failure: leave the bytes in scratch; the payload phase rejects the PDU.
    current_.reject = iscsi::RejectReason::protocol_error;
  }
  return {};
}

std::span<std::byte> SessionEngine::command_header(const iscsi::Bhs& bhs, ConstByteSpan ahs, std::uint32_t length) {
  auto decoded = iscsi::decode_bhs_as<iscsi::ScsiCommand>(bhs);
  if (!decoded || config_.discovery) {
    // RFC 7143 §4.3: a discovery session carries only Text (SendTargets), NOP and Logout.
    current_.reject = iscsi::RejectReason::protocol_error;
    return {};
  }
  const iscsi::ScsiCommand& cmd = *decoded;
  if (window_.admit(cmd.cmd_sn, cmd.immediate) == Admission::ignore) {
    current_.ignored = true;  // RFC 7143 §4.2.2.1: silently ignored
    return {};
  }
  current_.admitted = !cmd.immediate;
  if (cmd.immediate && immediate_outstanding_ >= config_.max_immediate_commands) {
    // RFC 7143 §11.17.1 reason 0x06: too many immediate commands.
    current_.reject = iscsi::RejectReason::immediate_command_reject;
    return {};
  }
  if (tasks_.contains(iscsi::to_u32(cmd.itt)) || cmd.itt == iscsi::reserved_itt) {
    current_.reject = iscsi::RejectReason::task_in_progress;  // RFC 7143 §11.17.1: ITT in use
    return {};
  }
  const auto& params = config_.params;
  auto owned = new_task();
  EngineTask& task = *owned;
  task.command = cmd;
  life_rows_taken_.take(task_life_row(task.life));  // placed, no budget asked
  if (!ahs.empty()) {
    auto segments = iscsi::decode_ahs(ahs);
    if (!segments) {
      current_.reject = iscsi::RejectReason::protocol_error;
      return {};
    }
    for (const auto& s : *segments) {
      if (s.type != iscsi::AhsType::extended_cdb) continue;
      // RFC 7143 §11.2.2.3: the Extended CDB AHS carries CDB bytes 16 and up.
      task.long_cdb.assign(cmd.cdb.begin(), cmd.cdb.end());
      task.long_cdb.insert(task.long_cdb.end(), s.specific.begin(), s.specific.end());
    }
  }
  const std::uint32_t edtl = cmd.expected_data_transfer_length;
  // RFC 7143 §3.2.4.2 / §13.11: immediate data only on writes, only with ImmediateData=Yes, and at
  // most min(FirstBurstLength, EDTL) bytes.
  if (length > 0 && (!cmd.write || !params.immediate_data || length > std::min(edtl, params.first_burst_length))) {
    current_.reject = iscsi::RejectReason::protocol_error;
    return {};
  }
  task.plan = hooks_.plan(cmd.lun, task.cdb());
  CommandPlan& plan = task.plan;
  const auto invalid_field =
      scsi::SenseData::make(scsi::SenseKey::illegal_request, scsi::asc::invalid_field_in_information_unit);
  using Cause = EarlyAnswer::Cause;
  if (plan.rejected()) {
    task.early = EarlyAnswer{Cause::plan, plan.early_outcome(), residual_for(edtl, 0)};
  } else if (auto bad_length = check_data_out_length(plan, edtl)) {
    task.early = EarlyAnswer{Cause::plan, ScsiOutcome::check_condition(*bad_length),
                             residual_for(edtl, plan.transfer_length_bytes)};
  } else if (plan.direction == DataDirection::to_target && !cmd.write) {
    // RFC 7143 §11.3: needs the W bit.
    task.early = EarlyAnswer{Cause::plan, ScsiOutcome::check_condition(invalid_field),
                             residual_for(edtl, plan.transfer_length_bytes)};
  } else if (plan.direction == DataDirection::to_target) {
    task.wanted_out_bytes = plan.transfer_length_bytes;
    // RFC 7143 §11.4.5.1: EDTL below the CDB's length: a WRITE runs on the whole blocks sent.
    if (edtl < plan.transfer_length_bytes && !shorten_transfer(plan, edtl)) {
      task.early = EarlyAnswer{Cause::plan, ScsiOutcome::check_condition(invalid_field),
                               residual_for(edtl, plan.transfer_length_bytes)};
    }
  }
  const bool unsolicited_follows = !cmd.final && !params.initial_r2t;
  // Writes ask for their buffer now (data lands in place when the budget allows); reads when they
  // can run (advance()).
  std::uint32_t capacity = 0;
  if (!task.early && plan.direction == DataDirection::to_target)
    capacity = std::max(plan.transfer_length_bytes, std::min(edtl, params.first_burst_length));
  // Unsolicited data comes whether or not the budget allows: at most FirstBurstLength of it
  // waits in a buffer of its own until the grant (advance() moves it).
  const TaskBudget if_queued = length > 0 || unsolicited_follows ? TaskBudget::queued_staging : TaskBudget::queued;
  if (capacity > 0 && request_budget(task, capacity, if_queued)) {
    // The datamover's pool: registered memory on iSER, so RDMA and io_uring use this buffer too.
    task.buffer = pool_.allocate(capacity);
  } else if (budget_staging(task.life.budget)) {
    task.buffer = pool_.allocate(std::min(edtl, params.first_burst_length));
  }
  if (cmd.write && edtl > 0) {
    const bool solicit = !task.early && plan.direction == DataDirection::to_target;
    task.sequencer.emplace(WriteSequencerParams{
        .needed_bytes = solicit ? plan.transfer_length_bytes : 0,
        .expected_data_transfer_length = edtl,
        .immediate_bytes = length,
        .unsolicited_follows = unsolicited_follows,
        .first_burst_length = params.first_burst_length,
        .max_burst_length = params.max_burst_length,
        .max_outstanding_r2t = params.max_outstanding_r2t,
    });
  }
  // A non-immediate task holds a CmdSN window slot (current_.admitted), an immediate one a slot of
  // max_immediate_commands; end_task() gives it back by the same I bit.
  if (cmd.immediate) ++immediate_outstanding_;
  current_.itt = iscsi::to_u32(cmd.itt);
  insert_task(iscsi::to_u32(cmd.itt), std::move(owned));
  if (length > 0 && length <= task.buffer.size()) return task.buffer.bytes().first(length);
  return {};
}

std::span<std::byte> SessionEngine::data_out_header(const iscsi::Bhs& bhs, std::uint32_t length) noexcept {
  auto decoded = iscsi::decode_bhs_as<iscsi::DataOut>(bhs);
  if (!decoded) return {};
  auto it = tasks_.find(iscsi::to_u32(decoded->itt));
  if (it == tasks_.end() || !it->second->sequencer || it->second->data_failed() || !takes_data(it->second->life.state)) {
    // RFC 7143 §11.17.1: Data-Out for no task of ours: Invalid PDU field.
    current_.reject = iscsi::RejectReason::invalid_pdu_field;
    return {};
  }
  EngineTask& task = *it->second;
  current_.itt = it->first;
  if (auto err = task.sequencer->check_and_record(*decoded, length)) {
    current_.data_out_error = err;
    return {};
  }
  const std::uint64_t end = std::uint64_t{decoded->buffer_offset} + length;
  if (length > 0 && end <= task.buffer.size()) return task.buffer.bytes().subspan(decoded->buffer_offset, length);
  return {};  // bytes the command does not use: scratch
}

// ---------------------------------------------------------------------------------------------
// Payload phase
// ---------------------------------------------------------------------------------------------

void SessionEngine::on_pdu(const datamover::PduIn& in, TimePoint now) {
  // The header-phase state belongs to this PDU only (place() is not called for every PDU).
  struct ResetCurrent {
    Current& c;
    ~ResetCurrent() { c = Current{}; }
  } reset_current{current_};
  last_rx_ = now;
  ping_deadline_.reset();
  if (ended_) return;
  auto decoded = iscsi::decode_bhs(in.bhs);
  if (!decoded) {
    send_reject(iscsi::RejectReason::command_not_supported, in.bhs);  // RFC 7143 §11.17.1
    return;
  }
  switch (static_cast<Opcode>(iscsi::raw_opcode(in.bhs))) {
    case Opcode::scsi_command: on_scsi_command(in); return;
    case Opcode::data_out: on_data_out(in); return;
    default: break;
  }
  if (in.pdu_error) {
    // RFC 7143 §13.12 (too long) and §7.8 (data digest): discarded and rejected.
    send_reject(reject_reason_for(in.pdu_error), in.bhs);
    return;
  }
  if (auto* nop = std::get_if<iscsi::NopOut>(&*decoded)) {
    on_nop_out(*nop, in);
  } else if (auto* text = std::get_if<iscsi::TextRequest>(&*decoded)) {
    on_text(*text, in);
  } else if (auto* logout = std::get_if<iscsi::LogoutRequest>(&*decoded)) {
    on_logout(*logout);
  } else if (auto* tmf = std::get_if<iscsi::TaskManagementRequest>(&*decoded)) {
    on_task_management(*tmf, in.bhs);
  } else if (std::holds_alternative<iscsi::SnackRequest>(*decoded)) {
    send_reject(iscsi::RejectReason::snack_reject, in.bhs);  // RFC 7143 §11.16: needs ERL > 0
  } else {
    send_reject(iscsi::RejectReason::protocol_error, in.bhs);  // Login in FFP, or a target opcode
  }
}

bool SessionEngine::admit_non_command(bool immediate, SerialNumber cmd_sn) {
  if (immediate) return true;
  if (window_.admit(cmd_sn, false) == Admission::ignore) return false;
  window_.release();  // answered at once: the slot opens again
  return true;
}

void SessionEngine::on_scsi_command(const datamover::PduIn& in) {
  if (!current_.header_done && !in.pdu_error) {
    current_.header_done = true;
    std::span<std::byte> dest;
    try {
      dest = command_header(in.bhs, in.ahs, static_cast<std::uint32_t>(in.data.size()));
    } catch (...) {
      current_.reject = iscsi::RejectReason::protocol_error;
    }
    // A long CDB (AHS) kept the placement out of the datamover: copy the immediate data now.
    if (!dest.empty() && dest.data() != in.data.data()) copy_payload(dest.data(), in.data.data(), in.data.size());
  }
  if (current_.ignored) return;
  if (in.pdu_error) {
    if (!current_.header_done) {
      // Too long and never placed: the command still used its CmdSN.
      auto cmd = iscsi::decode_bhs_as<iscsi::ScsiCommand>(in.bhs);
      if (cmd && !admit_non_command(cmd->immediate, cmd->cmd_sn)) return;
    } else if (EngineTask* t = current_task()) {
      drop_unstarted(*t);
    } else if (current_.admitted) {
      window_.release();
    }
    // RFC 7143 §7.8: a data digest error in immediate data discards the command (Reject 0x02).
    send_reject(reject_reason_for(in.pdu_error), in.bhs);
    return;
  }
  if (current_.reject) {
    if (EngineTask* t = current_task()) {
      drop_unstarted(*t);
    } else if (current_.admitted) {
      window_.release();
    }
    send_reject(*current_.reject, in.bhs);
    return;
  }
  EngineTask* current = current_task();
  if (current == nullptr) return;
  EngineTask& task = *current;
  task.peer_read = in.peer_read;  // iSER: the initiator's STags (RFC 7145 §9.2)
  task.peer_write = in.peer_write;
  if (!move(task, TaskEvent::payload_received, TaskState::receiving_data)) return;
  advance(task);
}

void SessionEngine::on_data_out(const datamover::PduIn& in) {
  if (!current_.header_done && !in.pdu_error) {
    current_.header_done = true;
    (void)data_out_header(in.bhs, 0);  // zero-length Data-Out: nothing was placed
  }
  if (in.pdu_error || current_.reject) {
    const auto reason = in.pdu_error ? reject_reason_for(in.pdu_error) : *current_.reject;
    EngineTask* task = current_task();
    if (in.pdu_error && !task) {
      if (auto h = iscsi::decode_bhs_as<iscsi::DataOut>(in.bhs)) {
        auto it = tasks_.find(iscsi::to_u32(h->itt));
        if (it != tasks_.end() && !is_aborted(it->second->life.state)) task = it->second.get();
      }
    }
    send_reject(reason, in.bhs);
    // RFC 7143 §7.8: at ERL 0 a Data-Out with a data digest error fails its task with CHECK
    // CONDITION, PROTOCOL SERVICE CRC ERROR.
    if (task && task->sequencer) fail_task(*task, in.pdu_error ? sense_crc_error : sense_data_phase_error);
    return;
  }
  if (current_.data_out_error) {
    send_reject(*current_.data_out_error == DataOutError::unknown_ttt ? iscsi::RejectReason::invalid_pdu_field
                                                                      : iscsi::RejectReason::protocol_error,
                in.bhs);
    if (EngineTask* t = current_task()) fail_task(*t, sense_data_phase_error);
    return;
  }
  if (EngineTask* t = current_task(); t != nullptr && t->life.state != TaskState::placed) advance(*t);
}

void SessionEngine::on_nop_out(const iscsi::NopOut& h, const datamover::PduIn& in) {
  if (!admit_non_command(h.immediate, h.cmd_sn)) return;
  // RFC 7143 §11.18.1: ITT 0xffffffff wants no response; a TTT other than 0xffffffff answers a
  // NOP-In ping of ours (the received PDU already reset the idle watch).
  if (h.itt == iscsi::reserved_itt || h.ttt != iscsi::reserved_ttt) return;
  iscsi::NopIn r{.lun = h.lun, .itt = h.itt, .ttt = iscsi::reserved_ttt, .stat_sn = take_stat_sn()};
  stamp(r);
  const std::size_t n = std::min<std::size_t>(in.data.size(), config_.params.initiator_max_recv_data_segment_length);
  send(datamover::make_pdu_owned(r, std::vector<std::byte>(in.data.begin(), in.data.begin() + static_cast<std::ptrdiff_t>(n))));
}

void SessionEngine::on_text(const iscsi::TextRequest& h, const datamover::PduIn& in) {
  if (!admit_non_command(h.immediate, h.cmd_sn)) return;
  const std::uint32_t mrdsl = config_.params.initiator_max_recv_data_segment_length;
  if (h.ttt != iscsi::reserved_ttt && h.ttt == text_ttt_ && in.data.empty()) {
    // RFC 7143 §11.11: an empty request echoing our TTT asks for the rest of a long response.
  } else {
    if (text_in_.size() + in.data.size() > max_text_request_bytes) {
      text_in_.clear();
      send_reject(iscsi::RejectReason::protocol_error, in.bhs);
      return;
    }
    text_in_.insert(text_in_.end(), in.data.begin(), in.data.end());
    if (h.continue_) {
      // RFC 7143 §11.10.2: more text follows; acknowledge with an empty response.
      iscsi::TextResponse r{.final = false, .lun = h.lun, .itt = h.itt, .ttt = take_ttt(), .stat_sn = take_stat_sn()};
      stamp(r);
      send(datamover::make_pdu(r));
      return;
    }
    auto pairs = iscsi::decode_text(text_in_);
    text_in_.clear();
    if (!pairs) {
      send_reject(iscsi::RejectReason::protocol_error, in.bhs);
      return;
    }
    iscsi::TextPairs answers;
    for (const auto& p : *pairs) {
      if (p.key == "SendTargets") {
        if (hooks_.send_targets) {
          auto list = hooks_.send_targets(p.value);
          answers.insert(answers.end(), list.begin(), list.end());
        }
      } else if (iscsi::find_key(p.key) != nullptr) {
        answers.push_back({p.key, std::string(iscsi::value_reject)});  // no renegotiation in FFP
      } else {
        answers.push_back({p.key, std::string(iscsi::value_not_understood)});
      }
    }
    text_out_ = iscsi::encode_text(answers);
    text_out_offset_ = 0;
  }
  const std::size_t left = text_out_.size() - text_out_offset_;
  const std::size_t n = std::min<std::size_t>(left, mrdsl);
  const bool more = n < left;
  if (more) text_ttt_ = take_ttt();
  // RFC 7143 §11.11.1: F=0 and C=1 while the response continues; TTT 0xffffffff on the final one.
  iscsi::TextResponse r{.final = !more, .continue_ = more, .lun = h.lun, .itt = h.itt,
                        .ttt = more ? text_ttt_ : iscsi::reserved_ttt, .stat_sn = take_stat_sn()};
  stamp(r);
  std::vector<std::byte> chunk(text_out_.begin() + static_cast<std::ptrdiff_t>(text_out_offset_),
                               text_out_.begin() + static_cast<std::ptrdiff_t>(text_out_offset_ + n));
  text_out_offset_ += n;
  if (!more) {
    text_out_.clear();
    text_out_offset_ = 0;
    text_ttt_ = iscsi::reserved_ttt;
  }
  send(datamover::make_pdu_owned(r, std::move(chunk)));
}

void SessionEngine::on_logout(const iscsi::LogoutRequest& h) {
  if (!admit_non_command(h.immediate, h.cmd_sn)) return;
  if (logout_) {
    send_reject(iscsi::RejectReason::waiting_for_logout, iscsi::encode_bhs(h));
    return;
  }
  PendingLogout pending{.request = h};
  if (h.reason == iscsi::LogoutReason::remove_connection_for_recovery) {
    pending.response = iscsi::LogoutResponseCode::connection_recovery_not_supported;  // RFC 7143 §11.15.1 (ERL 0)
  } else if (h.reason == iscsi::LogoutReason::close_connection && h.cid != config_.cid) {
    pending.response = iscsi::LogoutResponseCode::cid_not_found;  // RFC 7143 §11.15.1
  } else {
    // RFC 7143 §11.14: closing the session terminates its tasks; answer once they stopped.
    for (auto& [itt, t] : tasks_) pending.victims.push_back(itt);
  }
  logout_ = std::move(pending);
  std::vector<std::uint32_t> victims = logout_->victims;
  for (auto itt : victims) {
    auto it = tasks_.find(itt);
    if (it != tasks_.end()) abort_task(*it->second);
  }
  check_waiters();
}

void SessionEngine::on_task_management(const iscsi::TaskManagementRequest& h, const iscsi::Bhs& bhs) {
  using F = iscsi::TaskManagementFunction;
  if (config_.stats) config_.stats->count_task_management(h.function);
  if (config_.discovery) {
    send_reject(iscsi::RejectReason::protocol_error, bhs);
    return;
  }
  if (!admit_non_command(h.immediate, h.cmd_sn)) return;
  if (tmfs_.size() >= config_.max_immediate_commands) {
    send_reject(iscsi::RejectReason::immediate_command_reject, bhs);  // bounded like immediate commands
    return;
  }
  PendingTmf pending{.request = h};
  const auto fn = h.function;
  if (fn == F::abort_task) {
    auto it = tasks_.find(iscsi::to_u32(h.referenced_task_tag));
    if (it != tasks_.end() && it->second->command.lun == h.lun) {
      pending.victims.push_back(it->first);
    } else {
      // RFC 7143 §11.5.1: a task not found whose RefCmdSN is inside the window counts as received
      // and aborted ("function complete"); outside it: "task does not exist".
      const bool in_window = h.ref_cmd_sn >= window_.exp_cmd_sn() && h.ref_cmd_sn <= window_.max_cmd_sn();
      pending.response = in_window ? iscsi::TaskManagementResponseCode::function_complete
                                   : iscsi::TaskManagementResponseCode::task_does_not_exist;
    }
  } else if (fn == F::abort_task_set || fn == F::clear_task_set || fn == F::logical_unit_reset) {
    if (hooks_.lun_exists && !hooks_.lun_exists(h.lun)) {
      pending.response = iscsi::TaskManagementResponseCode::lun_does_not_exist;
    } else {
      for (auto& [itt, t] : tasks_)
        if (t->command.lun == h.lun) pending.victims.push_back(itt);
    }
  } else if (fn == F::target_warm_reset || fn == F::target_cold_reset) {
    for (auto& [itt, t] : tasks_) pending.victims.push_back(itt);
  } else if (fn == F::clear_aca) {
    pending.response = iscsi::TaskManagementResponseCode::function_complete;  // no ACA is ever established here
  } else if (fn == F::task_reassign) {
    pending.response = iscsi::TaskManagementResponseCode::task_reassignment_not_supported;  // ERL 0
  } else {
    pending.response = iscsi::TaskManagementResponseCode::function_not_supported;
  }
  tmfs_.push_back(std::move(pending));
  const std::vector<std::uint32_t> victims = tmfs_.back().victims;
  for (auto itt : victims) {
    auto it = tasks_.find(itt);
    if (it != tasks_.end()) abort_task(*it->second);
  }
  check_waiters();
}

// ---------------------------------------------------------------------------------------------
// Tasks
// ---------------------------------------------------------------------------------------------

void SessionEngine::advance(EngineTask& task) {
  // placed: its command PDU's payload phase is not over. fetching_write_data (iSER): an RDMA Read
  // is filling the buffer; nothing may end the task (a refused Data-Out, a failure) before
  // on_write_data(): the buffer would go back to the pool under the transfer.
  if (ended_) return;
  if (task.life.state != TaskState::receiving_data && task.life.state != TaskState::waiting_budget &&
      task.life.state != TaskState::write_data_fetched)
    return;
  if (task.data_failed()) {
    respond(task, task.early->outcome.status, task.early->outcome.sense, task.early->residual);
    return;
  }
  const bool writes = !task.early && task.plan.direction == DataDirection::to_target;
  if (writes) {
    if (budget_staging(task.life.budget) && task.sequencer && !task.sequencer->unsolicited_done()) {
      // Unsolicited data still lands in the staging buffer.
      (void)move(task, TaskEvent::budget_granted, TaskState::receiving_data);
      return;
    }
    if (task.life.budget == TaskBudget::queued || task.life.budget == TaskBudget::queued_staging) {
      (void)move(task, TaskEvent::budget_short, TaskState::waiting_budget);
      return;
    }
    if (task.life.budget == TaskBudget::granted_staging) {
      PooledBuffer full = pool_.allocate(task.budget_bytes);
      // Only when the budget was short at arrival: the unsolicited bytes move once (counted).
      copy_payload(full.data(), task.buffer.data(), task.buffer.size());
      task.buffer = std::move(full);
      (void)move_budget(task, BudgetEvent::staged_moved, TaskBudget::granted);
    } else if (task.life.budget == TaskBudget::granted && !task.buffer) {
      task.buffer = pool_.allocate(task.budget_bytes);
    }
  }
  if (task.life.state == TaskState::waiting_budget) (void)move(task, TaskEvent::budget_granted, TaskState::receiving_data);
  // The transport's data phase gets what the command still needs (R2Ts on TCP, an RDMA Read on iSER).
  switch (data_phase_->get_write_data(task, writes, *this)) {
    case WriteDataState::waiting:
    case WriteDataState::answered:
      return;
    case WriteDataState::complete:
      break;
  }
  // Every byte is in (Data-Out is taken in full before status, even for a failed command).
  if (task.early) {
    respond(task, task.early->outcome.status, task.early->outcome.sense, task.early->residual);
    return;
  }
  if (task.plan.direction == DataDirection::from_target && task.plan.transfer_length_bytes > 0 && !task.buffer) {
    // The read buffer is taken when the command can run, under the payload budget.
    if (task.life.budget == TaskBudget::none) (void)request_budget(task, task.plan.transfer_length_bytes, TaskBudget::queued);
    if (!budget_granted(task.life.budget)) {
      (void)move(task, TaskEvent::budget_short, TaskState::waiting_budget);
      return;
    }
    task.buffer = pool_.allocate(task.plan.transfer_length_bytes);
  }
  if (!move(task, TaskEvent::ready, TaskState::executing)) return;
  actions_.emplace_back(ExecuteTask{task.itt()});
}

void SessionEngine::emit_r2t(const EngineTask& task, const R2tRequest& r2t) {
  // RFC 7143 §11.8: R2Ts carry the current StatSN without advancing it.
  iscsi::R2t r{.lun = task.command.lun, .itt = task.itt(), .ttt = r2t.ttt, .stat_sn = stat_sn_, .r2t_sn = r2t.r2t_sn,
               .buffer_offset = r2t.buffer_offset, .desired_data_transfer_length = r2t.desired_data_transfer_length};
  stamp(r);
  send(datamover::make_pdu(r));
}

void SessionEngine::emit_get_data(EngineTask& task, datamover::PeerBuffer source, std::uint32_t buffer_offset,
                                  std::uint32_t length) {
  (void)move(task, TaskEvent::get_data_started, TaskState::fetching_write_data);  // the buffer is in use
  actions_.emplace_back(GetWriteData{task.itt(), source, buffer_offset, length});
}

void SessionEngine::emit_put_data(EngineTask& task, datamover::PeerBuffer dest, std::uint32_t bytes) {
  // The buffer travels with the action: the task may end before the RDMA Write is done.
  actions_.emplace_back(PutReadData{task.itt(), dest, std::move(task.buffer), bytes});
}

void SessionEngine::on_write_data(iscsi::Itt itt, std::error_code error) {
  auto it = tasks_.find(iscsi::to_u32(itt));
  if (it == tasks_.end()) return;
  EngineTask& task = *it->second;
  if (task.life.state == TaskState::aborted_fetching) {
    end_task(it->first, TaskEvent::completion_arrived);
    check_waiters();
    return;
  }
  if (task.life.state != TaskState::fetching_write_data) return;
  if (error) {
    (void)move(task, TaskEvent::get_data_failed, TaskState::receiving_data);
    close("RDMA Read failed: " + error.message());
    return;
  }
  (void)move(task, TaskEvent::get_data_done, TaskState::write_data_fetched);
  advance(task);
}

bool SessionEngine::request_budget(EngineTask& task, std::uint64_t bytes, TaskBudget if_queued) {
  task.budget_bytes = bytes;
  const bool now = !hooks_.request_budget || hooks_.request_budget(task.itt(), bytes);
  (void)move_budget(task, BudgetEvent::requested, now ? TaskBudget::granted : if_queued);
  return now;
}

void SessionEngine::on_budget_granted(iscsi::Itt itt) {
  auto it = tasks_.find(iscsi::to_u32(itt));
  if (it == tasks_.end()) return;
  EngineTask& task = *it->second;
  switch (task.life.budget) {
    case TaskBudget::queued: (void)move_budget(task, BudgetEvent::granted, TaskBudget::granted); break;
    case TaskBudget::queued_staging: (void)move_budget(task, BudgetEvent::granted, TaskBudget::granted_staging); break;
    case TaskBudget::none:
    case TaskBudget::granted_staging:
    case TaskBudget::granted:
      return;  // not waiting for a grant
  }
  advance(task);
}

void SessionEngine::on_task_executed(iscsi::Itt itt, const ScsiOutcome& outcome) {
  auto it = tasks_.find(iscsi::to_u32(itt));
  if (it == tasks_.end() ||
      (it->second->life.state != TaskState::executing && it->second->life.state != TaskState::aborted_executing))
    return;
  EngineTask& task = *it->second;
  if (task.life.state == TaskState::aborted_executing || ended_) {
    (void)move(task, TaskEvent::aborted, TaskState::aborted_executing);
    end_task(it->first, TaskEvent::completion_arrived);
    check_waiters();
    return;
  }
  const std::uint32_t edtl = task.command.expected_data_transfer_length;
  switch (task.plan.direction) {
    case DataDirection::to_target:
    case DataDirection::none:
      // A WRITE cut to fewer bytes by the EDTL reports its overflow (RFC 7143 §11.4.5.1).
      respond(task, outcome.status, outcome.sense, residual_for(edtl, task.wanted_out_bytes));
      return;
    case DataDirection::from_target: {
      const std::uint32_t produced = std::min(outcome.data_length_bytes, task.plan.transfer_length_bytes);
      if (outcome.status == scsi::Status::good && !outcome.sense) {
        const std::uint32_t bytes = std::min(edtl, produced);
        const Residual residual = residual_for(edtl, produced);
        if (bytes > 0) {
          data_phase_->put_read_data(task, bytes, outcome.status, residual, *this);
        } else {
          respond(task, outcome.status, std::nullopt, residual);
        }
        return;
      }
      respond(task, outcome.status, outcome.sense, residual_for(edtl, 0));
      return;
    }
  }
}

void SessionEngine::send_data_in(EngineTask& task, std::uint32_t bytes, scsi::Status status, Residual residual) {
  (void)move(task, TaskEvent::executed_read, TaskState::sending_data_in);
  const auto& params = config_.params;
  // RFC 7143 §13.12: no Data-In data segment above the initiator's MaxRecvDataSegmentLength.
  iscsi::DataSegmenter segmenter(0, bytes, params.initiator_max_recv_data_segment_length, params.max_burst_length);
  const std::uint32_t itt = iscsi::to_u32(task.itt());
  PooledBuffer buffer = std::move(task.buffer);  // travels with the batch: the PDUs borrow it
  // The budget comes back once the batch was sent (a peer that stops reading holds it meanwhile).
  std::optional<ReleaseBudget> release;
  while (auto s = segmenter.next()) {
    iscsi::DataIn d{.final = s->final, .lun = task.command.lun, .itt = task.itt(), .ttt = iscsi::reserved_ttt,
                    .data_sn = task.data_in_pdus++, .buffer_offset = s->buffer_offset};
    if (s->last) {
      // RFC 7143 §11.7.4: status in the last Data-In (S with F) when GOOD without sense; the
      // residual travels with it. The task ends first: the window opens before the initiator hears.
      d.status_present = true;
      d.status = iscsi::to_wire(status);
      d.residual_underflow = residual.underflow;
      d.residual_overflow = residual.overflow;
      d.residual_count = residual.count;
      end_task(itt, TaskEvent::answered, &release);
      d.stat_sn = take_stat_sn();
    }
    stamp(d);
    send(datamover::make_pdu(d, std::span<const std::byte>(buffer.bytes().subspan(s->buffer_offset, s->length))));
  }
  if (!ended_ && !actions_.empty() && std::holds_alternative<SendPdus>(actions_.back()))
    std::get<SendPdus>(actions_.back()).keep.push_back(std::move(buffer));
  if (release) actions_.emplace_back(*release);
  check_waiters();
}

void SessionEngine::respond(EngineTask& task, scsi::Status status, const std::optional<scsi::SenseData>& sense,
                            Residual residual) {
  if (status != scsi::Status::good) {
    // A UNIT ATTENTION is the unit's news (SAM-5 §5.14), counted apart from errors everywhere.
    if (config_.stats) config_.stats->count_status(status, sense);
    const bool attention = is_unit_attention(status, sense);
    if (config_.connection_stats)
      (attention ? config_.connection_stats->unit_attentions : config_.connection_stats->errors)
          .fetch_add(1, std::memory_order_relaxed);
    if (task.plan.unit != nullptr) {
      auto& unit = unit_stats(*task.plan.unit);
      (attention ? unit.unit_attentions : unit.errors).fetch_add(1, std::memory_order_relaxed);
    }
  }
  // RFC 7143 §11.4.6: ExpDataSN counts the R2T and Data-In PDUs sent for the task.
  iscsi::ScsiResponse r{.residual_overflow = residual.overflow, .residual_underflow = residual.underflow,
                        .response = iscsi::to_wire(iscsi::ScsiResponseCode::command_completed),
                        .status = iscsi::to_wire(status), .itt = task.itt(),
                        .exp_data_sn = task.data_in_pdus + (task.sequencer ? task.sequencer->r2ts_sent() : 0),
                        .residual_count = residual.count};
  std::vector<std::byte> data;
  if (sense) {
    // RFC 7143 §11.4.7.2: SenseLength (2 bytes) followed by the sense data.
    std::array<std::byte, 2 + scsi::max_sense_size_bytes> segment{};
    const std::size_t n = scsi::encode_sense(*sense, scsi::SenseFormat::fixed, std::span(segment).subspan(2));
    store_be16(segment.data(), static_cast<std::uint16_t>(n));
    data.assign(segment.begin(), segment.begin() + static_cast<std::ptrdiff_t>(2 + n));
  }
  // Frees the ITT and opens the window before the initiator hears.
  end_task(iscsi::to_u32(task.itt()), TaskEvent::answered);
  r.stat_sn = take_stat_sn();
  stamp(r);
  send(datamover::make_pdu_owned(r, std::move(data)));
  check_waiters();
}

void SessionEngine::fail_task(EngineTask& task, const scsi::SenseData& sense) {
  if (!takes_data(task.life.state)) return;
  // The first failure is the one answered; it replaces a planned early answer.
  if (!task.data_failed())
    task.early = EarlyAnswer{EarlyAnswer::Cause::data_failure, ScsiOutcome::check_condition(sense),
                             residual_for(task.command.expected_data_transfer_length, 0)};
  advance(task);
}

void SessionEngine::abort_task(EngineTask& task) {
  if (task.life.state == TaskState::done || is_aborted(task.life.state)) return;
  // A task on the backend (or under an RDMA Read) ends when its completion arrives; any other now.
  if (task.life.state == TaskState::executing || task.life.state == TaskState::fetching_write_data) {
    (void)move(task, TaskEvent::aborted,
               task.life.state == TaskState::executing ? TaskState::aborted_executing : TaskState::aborted_fetching);
    // A command waiting on a long device operation (SANITIZE, IMMED = 0) stops waiting and ends.
    task.plan.abort_requested = true;
    return;
  }
  end_task(iscsi::to_u32(task.itt()), TaskEvent::aborted);
}

bool SessionEngine::move(EngineTask& task, TaskEvent event, TaskState to) noexcept {
  if (task.life.state == to) return true;
  return move_life(task, TaskLife{to, task.life.budget}, TaskTable::row(task.life.state, event, to),
                   task_rows_taken_, "task_transitions", task.life.state, event, to);
}

bool SessionEngine::move_budget(EngineTask& task, BudgetEvent event, TaskBudget to) noexcept {
  if (task.life.budget == to) return true;
  return move_life(task, TaskLife{task.life.state, to}, BudgetTable::row(task.life.budget, event, to),
                   budget_rows_taken_, "budget_transitions", task.life.budget, event, to);
}

template <class Value, class Event>
bool SessionEngine::move_life(EngineTask& task, TaskLife next, std::size_t row, RowsTaken& rows, const char* table,
                              Value from, Event event, Value to) noexcept {
  const std::size_t life = task_life_row(next);
  if (row == 0 || life == 0) {
    refuse(task, row == 0 ? table : "task_lives", to_string(from), to_string(event), to_string(to));
    return false;
  }
  rows.take(row);
  life_rows_taken_.take(life);
  task.life = next;
  return true;
}

void SessionEngine::refuse(const EngineTask& task, const char* table, const char* from, const char* event,
                           const char* to) noexcept {
  ++task_moves_refused_;
  log::error("target session: task itt=0x{:08x} ({} / {}): {} --{}--> {} is not in {}: refused",
             iscsi::to_u32(task.itt()), to_string(task.life.state), to_string(task.life.budget), from, event, to,
             table);
}

void SessionEngine::end_task(std::uint32_t itt, TaskEvent event, std::optional<ReleaseBudget>* deferred) {
  auto it = tasks_.find(itt);
  if (it == tasks_.end()) return;
  (void)move(*it->second, event, TaskState::done);
  auto node = tasks_.extract(it);
  std::unique_ptr<EngineTask> task = std::move(node.mapped());
  if (spare_task_nodes_.size() < max_spare_tasks) spare_task_nodes_.push_back(std::move(node));
  // Ends the task (its buffer goes back to the pool) and keeps the object for the next command.
  struct Recycle {
    SessionEngine& engine;
    std::unique_ptr<EngineTask>& task;
    ~Recycle() { engine.recycle_task(std::move(task)); }
  } recycle{*this, task};
  if (task->command.immediate) {
    --immediate_outstanding_;
  } else if (!draining_) {
    window_.release();  // draining: the window does not open again
  }
  if (task->life.budget == TaskBudget::none) return;
  ReleaseBudget release{task->itt(), task->budget_bytes, budget_granted(task->life.budget)};
  if (deferred != nullptr) {
    *deferred = release;
  } else {
    actions_.emplace_back(release);
  }
}

void SessionEngine::drop_unstarted(EngineTask& task) {
  // The command PDU itself was refused: it never ran; its CmdSN slot is given back.
  end_task(iscsi::to_u32(task.itt()), TaskEvent::refused);
  current_.itt.reset();
}

EngineTask* SessionEngine::current_task() noexcept {
  if (!current_.itt) return nullptr;
  auto it = tasks_.find(*current_.itt);
  return it == tasks_.end() ? nullptr : it->second.get();
}

void SessionEngine::check_waiters() {
  auto gone = [this](const std::vector<std::uint32_t>& itts) {
    return std::none_of(itts.begin(), itts.end(), [this](std::uint32_t itt) {
      auto it = tasks_.find(itt);
      return it != tasks_.end() && is_aborted(it->second->life.state);
    });
  };
  using F = iscsi::TaskManagementFunction;
  for (auto it = tmfs_.begin(); it != tmfs_.end();) {
    if (!gone(it->victims)) {
      ++it;
      continue;
    }
    PendingTmf tmf = std::move(*it);
    it = tmfs_.erase(it);
    const auto fn = tmf.request.function;
    // SAM-5 §7.7, §7.10: resets also change device state (unit attentions, reservations).
    const bool complete = tmf.response == iscsi::TaskManagementResponseCode::function_complete;
    if (complete) {
      if (fn == F::logical_unit_reset) actions_.emplace_back(DeviceReset{tmf.request.lun, TaskManagement::logical_unit_reset});
      if (fn == F::target_warm_reset) actions_.emplace_back(DeviceReset{tmf.request.lun, TaskManagement::target_warm_reset});
      if (fn == F::target_cold_reset) actions_.emplace_back(DeviceReset{tmf.request.lun, TaskManagement::target_cold_reset});
    }
    iscsi::TaskManagementResponse r{
        .response = iscsi::to_wire(tmf.response), .itt = tmf.request.itt, .stat_sn = take_stat_sn()};
    stamp(r);
    send(datamover::make_pdu(r));
    // RFC 7143 §11.5.1: a cold reset drops all connections.
    if (fn == F::target_cold_reset && complete) {
      close("target cold reset");
      return;
    }
  }
  if (logout_ && gone(logout_->victims)) {
    PendingLogout logout = std::move(*logout_);
    logout_.reset();
    iscsi::LogoutResponse r{
        .response = iscsi::to_wire(logout.response), .itt = logout.request.itt, .stat_sn = take_stat_sn()};
    stamp(r);
    send(datamover::make_pdu(r));
    if (logout.response == iscsi::LogoutResponseCode::closed_successfully) close("logout");
  }
}

}  // namespace iserkit::target

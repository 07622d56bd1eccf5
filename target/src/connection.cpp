// Target connection: login phase, full-feature phase receive handling, per-command coroutines
// (RFC 7143 §3.2.4, §4.2.2.1 CmdSN window, §6.3 login, §7.8 digest errors, §11.3-§11.19 PDUs).
#include "connection.hpp"

#include <algorithm>

#include "iserkit/common/copy_counter.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"

namespace iserkit::target {
namespace {

using iscsi::Opcode;

constexpr scsi::SenseData sense_crc_error{.key = scsi::SenseKey::aborted_command, .asc = 0x47, .ascq = 0x05};
constexpr scsi::SenseData sense_data_phase_error{.key = scsi::SenseKey::aborted_command, .asc = 0x4b, .ascq = 0x00};
constexpr std::size_t max_text_request_bytes = 64 * 1024;

bool is_opcode(const iscsi::Bhs& bhs, Opcode op) noexcept { return iscsi::raw_opcode(bhs) == static_cast<std::uint8_t>(op); }

}  // namespace

Connection::Connection(std::unique_ptr<datamover::Datamover> datamover, std::shared_ptr<const TargetRegistry> registry,
                       TargetLoginOptions options, ConnectionLimits limits, ConnectionHooks hooks,
                       std::shared_ptr<SharedPayloadBudget> global_budget)
    : datamover_(std::move(datamover)),
      registry_(std::move(registry)),
      options_(options),
      limits_(limits),
      hooks_(std::move(hooks)),
      timer_(datamover_->executor()),
      budget_(limits.connection_payload_bytes),
      global_budget_(std::move(global_budget)) {
  rdma_ = datamover_->capabilities().rdma_data;
  options_.rdma = rdma_;
}

Connection::~Connection() = default;

void Connection::close() noexcept {
  if (closed_) return;
  closed_ = true;
  timer_.cancel();
  datamover_->close();
  for (auto& [itt, task] : tasks_) {
    task->data_event.complete(make_error_code(errc::connection_closed));
    task->budget_event.complete(make_error_code(errc::connection_closed));
  }
}

Awaitable<void> Connection::run() {
  auto self = shared_from_this();
  // The portal's bookkeeping hears of the close on every way out, an exception included.
  struct ClosedHook {
    Connection& c;
    ~ClosedHook() {
      if (c.hooks_.closed) c.hooks_.closed();
    }
  } closed_hook{*this};
  if (co_await login()) {
    if (hooks_.logged_in) hooks_.logged_in();
    open_nexus();
    if (limits_.idle_interval.count() > 0) asio::co_spawn(datamover_->executor(), watch_idle(), asio::detached);
    co_await full_feature();
  }
  close();
  // Let running tasks see the close and drop their references.
  std::vector<std::shared_ptr<Task>> left;
  for (auto& [itt, t] : tasks_) left.push_back(t);
  for (auto& t : left) co_await wait_finished(*t);
  // SAM-5 §6.3.4: the session is gone: I_T nexus loss (releases its RESERVE(6) reservation).
  if (nexus_open_) session_.target->dispatcher->close_nexus(nexus_);
  nexus_open_ = false;
  log::debug("connection {}: closed", datamover_->peer());
}

// Full-feature phase idle watch: after idle_interval without a PDU, a NOP-In ping (RFC 7143
// §11.19: ITT 0xffffffff, a TTT of ours, StatSN not advanced); nothing within ping_timeout → close.
Awaitable<void> Connection::watch_idle() {
  auto self = shared_from_this();
  std::uint64_t seen = received_pdus_;
  boost::system::error_code ec;
  while (!closed_ && !logged_out_) {
    timer_.expires_after(limits_.idle_interval);
    co_await timer_.async_wait(use_awaitable_ec(ec));
    if (closed_ || logged_out_) co_return;
    if (received_pdus_ != seen) {
      seen = received_pdus_;
      continue;
    }
    const iscsi::Ttt ttt{next_ttt_};
    log::debug("connection {}: idle for {} ms: NOP-In ping ttt={}", datamover_->peer(), limits_.idle_interval.count(),
               iscsi::to_u32(ttt));
    if (++next_ttt_ == iscsi::to_u32(iscsi::reserved_ttt)) next_ttt_ = 1;
    // RFC 7143 §11.19.2: StatSN is the next StatSN, not advanced when ITT is 0xffffffff.
    iscsi::NopIn ping{.lun = {}, .itt = iscsi::reserved_itt, .ttt = ttt, .stat_sn = stat_sn_};
    stamp(ping);
    // Sent on its own: a peer that stopped reading must not stall the watch.
    asio::co_spawn(
        datamover_->executor(),
        [](std::shared_ptr<Connection> c, datamover::PduOut pdu) -> Awaitable<void> {
          co_await c->datamover_->send(std::move(pdu));
        }(self, datamover::make_pdu(ping)),
        asio::detached);
    timer_.expires_after(limits_.ping_timeout);
    co_await timer_.async_wait(use_awaitable_ec(ec));
    if (closed_ || logged_out_) co_return;
    if (received_pdus_ == seen) {
      log::info("connection {}: no answer to a NOP-In ping within {} ms: closing", datamover_->peer(),
                limits_.ping_timeout.count());
      close();
      co_return;
    }
    seen = received_pdus_;
  }
}

// ---------------------------------------------------------------------------------------------
// Login phase
// ---------------------------------------------------------------------------------------------

Awaitable<bool> Connection::login() {
  LoginMachine machine(*registry_, options_);
  // RFC 7143 §13.12 (8192 bytes per login PDU): a longer one is refused without reading its data
  // segment (the machine answers Initiator Error and the connection closes).
  datamover_->set_drain_oversize(false);
  // The login timeout: a connection still logging in then is closed.
  timer_.expires_after(limits_.login_timeout);
  timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto c = weak.lock()) {
      log::info("login {}: not complete within {} ms: closing", c->datamover_->peer(), c->limits_.login_timeout.count());
      c->close();
    }
  });
  // Failed authentications are counted per source address (login_throttle.hpp); while an address
  // is blocked, each of its Login Requests is refused with 0x0301 before its credentials are looked
  // at — also on connections opened before the block began.
  const std::string address = address_of_peer(datamover_->peer());
  bool throttled = false;
  while (true) {
    auto in = co_await datamover_->receive(nullptr);
    if (!in) co_return false;
    if (const auto wait = registry_->login_throttle().blocked_for(address, std::chrono::steady_clock::now());
        wait.count() > 0) {
      throttled = true;
      machine.refuse_login(LoginStatus::service_unavailable,
                           fmt::format("too many failed logins from {}: refused for {} ms more", address, wait.count()));
    }
    LoginStep step = machine.on_pdu(in->bhs, in->data, in->pdu_error);
    if (step.response.status_class == 0x02 && step.response.status_detail == 0x01) {  // 0x0201
      const auto block = registry_->login_throttle().record_failure(address, std::chrono::steady_clock::now());
      if (block.count() > 0) step.reason += fmt::format(" (logins from {} refused for {} ms)", address, block.count());
    }
    if (step.action == LoginAction::close) {
      log::info("login {}: first PDU is not a Login Request (opcode 0x{:02x}): closing", datamover_->peer(),
                iscsi::raw_opcode(in->bhs));
      co_return false;
    }
    // A blocked address's refusals are logged at debug: they come as fast as a peer can connect,
    // and the failure that started the block was logged at info.
    if (step.response.status_class != 0)
      spdlog::log(throttled ? spdlog::level::debug : spdlog::level::info, "login {}: rejected: status=0x{:02x}{:02x}{}{}",
                  datamover_->peer(), step.response.status_class, step.response.status_detail,
                  step.reason.empty() ? "" : ": ", step.reason);
    const auto ec = co_await datamover_->send(datamover::make_pdu_owned(step.response, std::move(step.text)));
    if (ec || step.action == LoginAction::send_then_close) co_return false;
    if (step.action == LoginAction::send_then_full_feature) break;
  }
  timer_.cancel();
  datamover_->set_drain_oversize(true);
  session_ = machine.result();
  params_ = session_.parameters;
  window_ = CmdSnWindow(session_.exp_cmd_sn, options_.cmd_window_depth);
  stat_sn_ = session_.stat_sn;
  // RFC 7143 §13.1, §13.12: digests and our declared MaxRecvDataSegmentLength apply from the
  // first PDU after the final Login Response.
  datamover_->set_digests(params_.header_digest_crc32c, params_.data_digest_crc32c);
  datamover_->set_max_recv_data_segment_length(params_.target_max_recv_data_segment_length);
  datamover_->set_unexpected_pdu_limit(params_.max_outstanding_unexpected_pdus);
  log::info("login {}: {} session tsih={} initiator={} target={} digests={}/{} mrdsl={}/{} burst={}/{} r2t={}",
            datamover_->peer(), session_.discovery ? "discovery" : "normal", session_.tsih, log::escaped(params_.initiator_name),
            log::escaped(session_.target ? session_.target->name : "-"), params_.header_digest_crc32c ? "crc32c" : "none",
            params_.data_digest_crc32c ? "crc32c" : "none", params_.initiator_max_recv_data_segment_length,
            params_.target_max_recv_data_segment_length, params_.first_burst_length, params_.max_burst_length,
            params_.max_outstanding_r2t);
  co_return true;
}

void Connection::open_nexus() {
  if (session_.discovery || !session_.target) return;
  // SPC-5 §7.6.4.6 / RFC 7143 §4.2.7: the iSCSI initiator port name is
  // "<InitiatorName>,i,0x<ISID in 12 hex digits>".
  std::string port = params_.initiator_name + ",i,0x";
  for (std::byte b : session_.isid) port += fmt::format("{:02x}", static_cast<unsigned>(b));
  nexus_ = session_.target->dispatcher->open_nexus(std::move(port));
  nexus_open_ = true;
}

// ---------------------------------------------------------------------------------------------
// Full-feature phase: receive loop and header phase (placement)
// ---------------------------------------------------------------------------------------------

Awaitable<void> Connection::full_feature() {
  while (!closed_ && !logged_out_) {
    current_ = CurrentPdu{};
    auto in = co_await datamover_->receive(this);
    ++received_pdus_;
    if (!in) {
      if (in.error() != make_error_code(errc::connection_closed))
        log::info("connection {}: receive failed: {}", datamover_->peer(), in.error().message());
      co_return;
    }
    co_await handle(*in);
  }
}

std::span<std::byte> Connection::place(const iscsi::Bhs& bhs, std::uint32_t length) noexcept {
  if (is_opcode(bhs, Opcode::scsi_command)) {
    if (iscsi::total_ahs_length_words(bhs) != 0) return {};  // the AHS (long CDB) is parsed in the payload phase
    current_.header_done = true;
    return current_.placed = command_header(bhs, {}, length);
  }
  if (is_opcode(bhs, Opcode::data_out)) {
    current_.header_done = true;
    return current_.placed = data_out_header(bhs, length);
  }
  return {};
}

std::span<std::byte> Connection::command_header(const iscsi::Bhs& bhs, ConstByteSpan ahs, std::uint32_t length) {
  auto decoded = iscsi::decode_bhs_as<iscsi::ScsiCommand>(bhs);
  if (!decoded) {
    current_.reject = iscsi::RejectReason::protocol_error;
    return {};
  }
  const iscsi::ScsiCommand& cmd = *decoded;
  if (session_.discovery) {
    // RFC 7143 §4.3: a discovery session carries only Text (SendTargets), NOP and Logout.
    current_.reject = iscsi::RejectReason::protocol_error;
    return {};
  }
  if (window_.admit(cmd.cmd_sn, cmd.immediate) == Admission::ignore) {
    log::debug("connection {}: CmdSN {} outside [{}, {}]: ignored", datamover_->peer(), cmd.cmd_sn.value(),
               window_.exp_cmd_sn().value(), window_.max_cmd_sn().value());
    current_.ignored = true;
    return {};
  }
  current_.admitted = !cmd.immediate;
  if (cmd.immediate && immediate_outstanding_ >= limits_.max_immediate_commands) {
    // Immediate commands bypass the CmdSN window (RFC 7143 §3.2.2.1), so they are bounded here:
    // RFC 7143 §11.17.1 reason 0x06, "Immediate command reject - too many immediate commands".
    current_.reject = iscsi::RejectReason::immediate_command_reject;
    return {};
  }
  if (tasks_.contains(iscsi::to_u32(cmd.itt)) || cmd.itt == iscsi::reserved_itt) {
    // RFC 7143 §11.17.1: an ITT already in use by a running task.
    current_.reject = iscsi::RejectReason::task_in_progress;
    return {};
  }
  auto task = std::make_shared<Task>();
  task->command = cmd;
  task->in_window = current_.admitted;
  if (!ahs.empty()) {
    auto segments = iscsi::decode_ahs(ahs);
    if (!segments) {
      current_.reject = iscsi::RejectReason::protocol_error;
      return {};
    }
    for (const auto& s : *segments) {
      if (s.type != iscsi::AhsType::extended_cdb) continue;
      // RFC 7143 §11.2.2.3: the Extended CDB AHS carries CDB bytes 16 and up.
      task->long_cdb.assign(cmd.cdb.begin(), cmd.cdb.end());
      task->long_cdb.insert(task->long_cdb.end(), s.specific.begin(), s.specific.end());
    }
  }
  const std::uint32_t edtl = cmd.expected_data_transfer_length;
  if (length > 0) {
    // RFC 7143 §3.2.4.2 / §13.11: immediate data only on writes, only when ImmediateData=Yes and at
    // most min(FirstBurstLength, EDTL) bytes.
    if (!cmd.write || !params_.immediate_data || length > std::min(edtl, params_.first_burst_length)) {
      current_.reject = iscsi::RejectReason::protocol_error;
      return {};
    }
  }
  task->plan = session_.target->dispatcher->plan(nexus_, cmd.lun, task->cdb());
  CommandPlan& plan = task->plan;
  if (plan.rejected()) {
    task->early = plan.early_outcome();
    task->early_residual = residual_for(edtl, 0);
  } else if (auto bad_length = check_data_out_length(plan, edtl)) {
    task->early = ScsiOutcome::check_condition(*bad_length);
    task->early_residual = residual_for(edtl, plan.transfer_length_bytes);
  } else if (plan.direction == DataDirection::to_target && !cmd.write) {
    // RFC 7143 §11.3: data to the target needs the W bit.
    task->early = ScsiOutcome::check_condition(
        scsi::SenseData::make(scsi::SenseKey::illegal_request, scsi::asc::invalid_field_in_information_unit));
    task->early_residual = residual_for(edtl, plan.transfer_length_bytes);
  } else if (plan.direction == DataDirection::to_target) {
    task->wanted_out_bytes = plan.transfer_length_bytes;
    // RFC 7143 §11.4.5.1: with EDTL below what the CDB asks for, a WRITE runs on the whole blocks
    // the initiator sends and reports the rest as overflow; anything else fails with INVALID
    // FIELD IN INFORMATION UNIT and the overflow residual (scsi_dispatcher.hpp).
    if (edtl < plan.transfer_length_bytes && !shorten_transfer(plan, edtl)) {
      task->early = ScsiOutcome::check_condition(
          scsi::SenseData::make(scsi::SenseKey::illegal_request, scsi::asc::invalid_field_in_information_unit));
      task->early_residual = residual_for(edtl, plan.transfer_length_bytes);
    }
  }
  const bool unsolicited_follows = !cmd.final && !params_.initial_r2t;
  // Reads take their buffer when they can run (run_task_body), under the payload budget; writes
  // ask for it now, so the data can land in place when the budget allows.
  std::uint32_t capacity = 0;
  if (!task->early && plan.direction == DataDirection::to_target)
    capacity = std::max(plan.transfer_length_bytes, std::min(edtl, params_.first_burst_length));
  if (capacity > 0) {
    request_budget(task, capacity);
    // The datamover's pool: registered memory on iSER, so RDMA Read/Write and the io_uring backend
    // both work on this one buffer.
    if (task->budget == Task::Budget::granted) {
      task->buffer = datamover_->buffer_pool().allocate(capacity);
    } else if (length > 0 || unsolicited_follows) {
      // Unsolicited data comes whether or not the budget allows: at most FirstBurstLength of it
      // per command waits in a buffer of its own (obtain_write_buffer() moves it).
      task->staging = true;
      task->buffer = datamover_->buffer_pool().allocate(std::min(edtl, params_.first_burst_length));
    }
  }
  task->immediate_bytes = length;
  if (cmd.write && edtl > 0) {
    const bool solicit = !task->early && plan.direction == DataDirection::to_target;
    task->sequencer.emplace(WriteSequencerParams{
        .needed_bytes = solicit ? plan.transfer_length_bytes : 0,
        .expected_data_transfer_length = edtl,
        .immediate_bytes = length,
        .unsolicited_follows = unsolicited_follows,
        .first_burst_length = params_.first_burst_length,
        .max_burst_length = params_.max_burst_length,
        .max_outstanding_r2t = params_.max_outstanding_r2t,
    });
    task->data_complete = task->sequencer->complete();
  } else {
    task->data_complete = true;
  }
  tasks_.emplace(iscsi::to_u32(cmd.itt), task);
  if (cmd.immediate) {
    task->counted_immediate = true;
    ++immediate_outstanding_;
  }
  current_.task = task;
  if (length > 0 && length <= task->buffer.size()) return task->buffer.bytes().first(length);
  return {};
}

std::span<std::byte> Connection::data_out_header(const iscsi::Bhs& bhs, std::uint32_t length) noexcept {
  auto decoded = iscsi::decode_bhs_as<iscsi::DataOut>(bhs);
  if (!decoded) return {};
  auto it = tasks_.find(iscsi::to_u32(decoded->itt));
  if (it == tasks_.end() || !it->second->sequencer || it->second->failure || it->second->aborted) {
    // RFC 7143 §11.17.1: Data-Out for no task of ours: Invalid PDU field (ITT/TTT).
    current_.reject = iscsi::RejectReason::invalid_pdu_field;
    return {};
  }
  current_.task = it->second;
  Task& task = *it->second;
  if (auto err = task.sequencer->check_and_record(*decoded, length)) {
    current_.data_out_error = err;
    return {};
  }
  const std::uint64_t end = std::uint64_t{decoded->buffer_offset} + length;
  if (length > 0 && end <= task.buffer.size()) return task.buffer.bytes().subspan(decoded->buffer_offset, length);
  return {};  // bytes the command does not use (e.g. unsolicited data of a failed command): scratch
}

// ---------------------------------------------------------------------------------------------
// Payload phase
// ---------------------------------------------------------------------------------------------

Awaitable<void> Connection::handle(datamover::PduIn& in) {
  auto decoded = iscsi::decode_bhs(in.bhs);
  if (!decoded) {
    // RFC 7143 §11.17.1: an opcode we do not know: Reject, "Command not supported".
    log::info("connection {}: unknown opcode 0x{:02x}: reject", datamover_->peer(), iscsi::raw_opcode(in.bhs));
    co_await send_reject(iscsi::RejectReason::command_not_supported, in.bhs);
    co_return;
  }
  switch (static_cast<Opcode>(iscsi::raw_opcode(in.bhs))) {
    case Opcode::scsi_command: co_await on_scsi_command(in); co_return;
    case Opcode::data_out: co_await on_data_out(in); co_return;
    default: break;
  }
  if (in.pdu_error) {
    // RFC 7143 §13.12 (too long) and §7.8 (data digest): the PDU is discarded and rejected.
    co_await send_reject(in.pdu_error == make_error_code(errc::data_digest_error)
                             ? iscsi::RejectReason::data_digest_error
                             : iscsi::RejectReason::protocol_error,
                         in.bhs);
    co_return;
  }
  if (auto* nop = std::get_if<iscsi::NopOut>(&*decoded)) {
    co_await on_nop_out(*nop, in);
  } else if (auto* text = std::get_if<iscsi::TextRequest>(&*decoded)) {
    co_await on_text(*text, in);
  } else if (auto* logout = std::get_if<iscsi::LogoutRequest>(&*decoded)) {
    co_await on_logout(*logout);
  } else if (auto* tmf = std::get_if<iscsi::TaskManagementRequest>(&*decoded)) {
    if (session_.discovery) {
      co_await send_reject(iscsi::RejectReason::protocol_error, in.bhs);
      co_return;
    }
    if (!tmf->immediate) {
      if (window_.admit(tmf->cmd_sn, false) == Admission::ignore) co_return;
      window_.release();
    }
    if (task_management_outstanding_ >= limits_.max_immediate_commands) {
      // Each TMF runs in its own coroutine (it waits for the tasks it aborts): bounded like
      // immediate commands, since neither the window nor a stalled socket would bound them.
      co_await send_reject(iscsi::RejectReason::immediate_command_reject, in.bhs);
      co_return;
    }
    ++task_management_outstanding_;
    asio::co_spawn(datamover_->executor(), on_task_management(*tmf), [self = shared_from_this()](std::exception_ptr) {
      --self->task_management_outstanding_;
    });
  } else if (std::holds_alternative<iscsi::SnackRequest>(*decoded)) {
    // RFC 7143 §11.16: SNACK needs ErrorRecoveryLevel > 0; at level 0 it is rejected
    // ("SNACK Reject", §11.17.1).
    co_await send_reject(iscsi::RejectReason::snack_reject, in.bhs);
  } else {
    // A Login Request in the full-feature phase, or a target opcode sent by the initiator.
    co_await send_reject(iscsi::RejectReason::protocol_error, in.bhs);
  }
}

Awaitable<void> Connection::send_reject(iscsi::RejectReason reason, const iscsi::Bhs& bhs) {
  // RFC 7143 §11.17: the data segment of a Reject is the complete header of the rejected PDU.
  iscsi::Reject r{.reason = reason, .stat_sn = take_stat_sn()};
  stamp(r);
  co_await datamover_->send(datamover::make_pdu(r, std::span<const std::byte>(bhs)));
}

Awaitable<void> Connection::on_scsi_command(datamover::PduIn& in) {
  if (!current_.header_done && !in.pdu_error) {
    current_.header_done = true;
    const auto dest = command_header(in.bhs, in.ahs, static_cast<std::uint32_t>(in.data.size()));
    // A long CDB (AHS) kept the placement out of the datamover: copy the immediate data now.
    if (!dest.empty() && dest.data() != in.data.data()) copy_payload(dest.data(), in.data.data(), in.data.size());
  }
  if (current_.ignored) co_return;
  if (in.pdu_error) {
    if (!current_.header_done) {
      // The data segment was too long and never placed: the command still used its CmdSN.
      auto cmd = iscsi::decode_bhs_as<iscsi::ScsiCommand>(in.bhs);
      if (cmd && !cmd->immediate) {
        if (window_.admit(cmd->cmd_sn, false) == Admission::ignore) co_return;
        window_.release();
      }
    } else if (current_.task) {
      if (current_.task->in_window) window_.release();
      drop_unstarted_task();
    } else if (current_.admitted) {
      window_.release();
    }
    // RFC 7143 §7.8: a data digest error in immediate data discards the command (Reject 0x02);
    // RFC 7143 §13.12: so does a data segment longer than MaxRecvDataSegmentLength (protocol error).
    co_await send_reject(in.pdu_error == make_error_code(errc::data_digest_error)
                             ? iscsi::RejectReason::data_digest_error
                             : iscsi::RejectReason::protocol_error,
                         in.bhs);
    co_return;
  }
  if (current_.reject) {
    if (current_.task) drop_unstarted_task();
    if (current_.admitted) window_.release();
    co_await send_reject(*current_.reject, in.bhs);
    co_return;
  }
  if (!current_.task) co_return;
  current_.task->remote_read = in.remote_read;  // iSER: the initiator's STags (RFC 7145 §9.2)
  current_.task->remote_write = in.remote_write;
  asio::co_spawn(datamover_->executor(), run_task(current_.task), asio::detached);
}

Awaitable<void> Connection::on_data_out(datamover::PduIn& in) {
  std::optional<DataOutError> error;
  if (!current_.header_done && !in.pdu_error) {
    current_.header_done = true;
    data_out_header(in.bhs, 0);  // zero-length Data-Out: nothing was placed
  }
  error = current_.data_out_error;
  if (in.pdu_error || current_.reject) {
    const auto reason = in.pdu_error == make_error_code(errc::data_digest_error) ? iscsi::RejectReason::data_digest_error
                        : current_.reject                                         ? *current_.reject
                                                                                  : iscsi::RejectReason::protocol_error;
    if (in.pdu_error && !current_.task) {
      auto h = iscsi::decode_bhs_as<iscsi::DataOut>(in.bhs);
      if (h) {
        auto it = tasks_.find(iscsi::to_u32(h->itt));
        if (it != tasks_.end()) current_.task = it->second;
      }
    }
    // RFC 7143 §7.8: at ErrorRecoveryLevel 0 a Data-Out with a data digest error is discarded and
    // the task ends with CHECK CONDITION, PROTOCOL SERVICE CRC ERROR.
    if (current_.task) fail_task(*current_.task, in.pdu_error ? sense_crc_error : sense_data_phase_error);
    co_await send_reject(reason, in.bhs);
    co_return;
  }
  if (error) {
    log::info("connection {}: bad Data-Out (error {}): reject", datamover_->peer(), static_cast<int>(*error));
    if (current_.task) fail_task(*current_.task, sense_data_phase_error);
    co_await send_reject(*error == DataOutError::unknown_ttt ? iscsi::RejectReason::invalid_pdu_field
                                                             : iscsi::RejectReason::protocol_error,
                         in.bhs);
    co_return;
  }
  if (current_.task && current_.task->sequencer) {
    Task& task = *current_.task;
    task.data_complete = task.sequencer->complete();
    task.data_event.complete();
  }
}

void Connection::drop_unstarted_task() noexcept {
  Task& task = *current_.task;
  tasks_.erase(iscsi::to_u32(task.itt()));
  if (task.counted_immediate) {
    task.counted_immediate = false;
    --immediate_outstanding_;
  }
  task.buffer.reset();
  release_budget(task);
  current_.task.reset();
}

void Connection::fail_task(Task& task, const scsi::SenseData& sense) noexcept {
  if (!task.failure) task.failure = sense;
  task.data_event.complete();
}

Awaitable<void> Connection::on_nop_out(const iscsi::NopOut& h, datamover::PduIn& in) {
  if (!h.immediate) {
    if (window_.admit(h.cmd_sn, false) == Admission::ignore) co_return;
    window_.release();
  }
  // RFC 7143 §11.18.1: ITT 0xffffffff means "no response wanted"; a TTT other than 0xffffffff
  // answers a NOP-In of ours (we send none).
  if (h.itt == iscsi::reserved_itt || h.ttt != iscsi::reserved_ttt) co_return;
  // RFC 7143 §11.19: the NOP-In echoes the ping data; TTT is 0xffffffff.
  iscsi::NopIn r{.lun = h.lun, .itt = h.itt, .ttt = iscsi::reserved_ttt, .stat_sn = take_stat_sn()};
  stamp(r);
  const std::size_t n = std::min<std::size_t>(in.data.size(), params_.initiator_max_recv_data_segment_length);
  co_await datamover_->send(datamover::make_pdu(r, std::span<const std::byte>(in.data.first(n))));
}

Awaitable<void> Connection::on_text(const iscsi::TextRequest& h, datamover::PduIn& in) {
  if (!h.immediate) {
    if (window_.admit(h.cmd_sn, false) == Admission::ignore) co_return;
    window_.release();
  }
  const std::uint32_t mrdsl = params_.initiator_max_recv_data_segment_length;
  if (h.ttt != iscsi::reserved_ttt && h.ttt == text_ttt_ && in.data.empty()) {
    // RFC 7143 §11.11: the initiator asks for the rest of a long response with an empty request.
  } else {
    if (text_in_.size() + in.data.size() > max_text_request_bytes) {
      text_in_.clear();
      co_await send_reject(iscsi::RejectReason::protocol_error, in.bhs);
      co_return;
    }
    text_in_.insert(text_in_.end(), in.data.begin(), in.data.end());
    if (h.continue_) {
      // RFC 7143 §11.10.2: more text follows; acknowledge with an empty response.
      iscsi::TextResponse r{.final = false, .lun = h.lun, .itt = h.itt, .ttt = iscsi::Ttt{next_ttt_++},
                            .stat_sn = take_stat_sn()};
      stamp(r);
      co_await datamover_->send(datamover::make_pdu(r));
      co_return;
    }
    auto pairs = iscsi::decode_text(text_in_);
    text_in_.clear();
    if (!pairs) {
      co_await send_reject(iscsi::RejectReason::protocol_error, in.bhs);
      co_return;
    }
    iscsi::TextPairs answers;
    for (const auto& p : *pairs) {
      if (p.key == "SendTargets") {
        auto list = send_targets(*registry_, p.value, session_.discovery, session_.target.get(),
                                 params_.initiator_name, datamover_->local());
        answers.insert(answers.end(), list.begin(), list.end());
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
  if (more) text_ttt_ = iscsi::Ttt{next_ttt_++};
  // RFC 7143 §11.11.1: F=0 and C=1 while the response continues; TTT is 0xffffffff on the final one.
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
  co_await datamover_->send(datamover::make_pdu_owned(r, std::move(chunk)));
}

Awaitable<void> Connection::on_logout(const iscsi::LogoutRequest& h) {
  if (!h.immediate) {
    if (window_.admit(h.cmd_sn, false) == Admission::ignore) co_return;
    window_.release();
  }
  std::uint8_t response = 0;
  if (h.reason == iscsi::LogoutReason::remove_connection_for_recovery) {
    response = 2;  // RFC 7143 §11.15.1: connection recovery is not supported (ERL 0)
  } else if (h.reason == iscsi::LogoutReason::close_connection && h.cid != session_.cid) {
    response = 1;  // CID not found
  }
  if (response == 0) {
    // RFC 7143 §11.14: closing the session/connection terminates its tasks; wait until they stop.
    std::vector<std::shared_ptr<Task>> running;
    for (auto& [itt, t] : tasks_) running.push_back(t);
    for (auto& t : running) abort_task(*t);
    for (auto& t : running) co_await wait_finished(*t);
  }
  iscsi::LogoutResponse r{.response = response, .itt = h.itt, .stat_sn = take_stat_sn()};
  stamp(r);
  co_await datamover_->send(datamover::make_pdu(r));
  if (response == 0) logged_out_ = true;
}

Awaitable<void> Connection::on_task_management(iscsi::TaskManagementRequest h) {
  auto self = shared_from_this();
  using F = iscsi::TaskManagementFunction;
  std::uint8_t response = 0;  // RFC 7143 §11.6.1: 0 function complete
  std::vector<std::shared_ptr<Task>> victims;
  const auto fn = h.function;
  if (fn == F::abort_task) {
    auto it = tasks_.find(iscsi::to_u32(h.referenced_task_tag));
    if (it != tasks_.end() && it->second->command.lun == h.lun) {
      victims.push_back(it->second);
    } else {
      // RFC 7143 §11.5.1: a task not found whose RefCmdSN is inside the CmdSN window is considered
      // received and aborted ("function complete"); outside the window: "task does not exist".
      const bool in_window = h.ref_cmd_sn >= window_.exp_cmd_sn() && h.ref_cmd_sn <= window_.max_cmd_sn();
      response = in_window ? 0 : 1;
    }
  } else if (fn == F::abort_task_set || fn == F::clear_task_set || fn == F::logical_unit_reset) {
    if (session_.target->dispatcher->find(h.lun) == nullptr) {
      response = 2;  // LUN does not exist
    } else {
      for (auto& [itt, t] : tasks_)
        if (t->command.lun == h.lun) victims.push_back(t);
    }
  } else if (fn == F::target_warm_reset || fn == F::target_cold_reset) {
    for (auto& [itt, t] : tasks_) victims.push_back(t);
  } else if (fn == F::clear_aca) {
    response = 0;  // no ACA is ever established here
  } else if (fn == F::task_reassign) {
    response = 4;  // task allegiance reassignment not supported (ErrorRecoveryLevel 0)
  } else {
    response = 5;  // task management function not supported
  }
  for (auto& t : victims) abort_task(*t);
  for (auto& t : victims) co_await wait_finished(*t);
  // SAM-5 §7.7, §7.10: resets also change device state (unit attentions, RESERVE(6) released).
  if (response == 0 && nexus_open_) {
    auto& dispatcher = *session_.target->dispatcher;
    if (fn == F::logical_unit_reset) dispatcher.task_management(nexus_, h.lun, TaskManagement::logical_unit_reset);
    if (fn == F::target_warm_reset) dispatcher.task_management(nexus_, h.lun, TaskManagement::target_warm_reset);
    if (fn == F::target_cold_reset) dispatcher.task_management(nexus_, h.lun, TaskManagement::target_cold_reset);
  }
  if (closed_) co_return;
  iscsi::TaskManagementResponse r{.response = response, .itt = h.itt, .stat_sn = take_stat_sn()};
  stamp(r);
  co_await datamover_->send(datamover::make_pdu(r));
  if (fn == F::target_cold_reset) close();  // RFC 7143 §11.5.1: cold reset drops all connections
}

// ---------------------------------------------------------------------------------------------
// Tasks
// ---------------------------------------------------------------------------------------------

void Connection::abort_task(Task& task) noexcept {
  task.aborted = true;
  task.data_event.complete(make_error_code(errc::task_aborted));
  task.budget_event.complete(make_error_code(errc::task_aborted));
}

// ---------------------------------------------------------------------------------------------
// Payload budgets
// ---------------------------------------------------------------------------------------------

void Connection::request_budget(const std::shared_ptr<Task>& task, std::uint64_t bytes) {
  task->budget_bytes = bytes;
  task->budget_id = next_budget_id_++;
  if (budget_.request(task->budget_id, bytes)) {
    request_global_budget(task);
    return;
  }
  task->budget = Task::Budget::waiting_connection;
  budget_waiters_.emplace(task->budget_id, task);
}

void Connection::request_global_budget(const std::shared_ptr<Task>& task) {
  if (!global_budget_) {
    budget_granted(*task);
    return;
  }
  task->budget = Task::Budget::waiting_global;
  task->global_budget_id = global_budget_->next_id();
  // Runs on the releasing connection's thread: hand the grant over to ours.
  auto on_grant = [self = shared_from_this(), task] {
    asio::post(self->datamover_->executor(), [self, task] {
      if (task->budget == Task::Budget::waiting_global) {
        self->budget_granted(*task);
      } else if (task->budget == Task::Budget::abandoned) {
        task->budget = Task::Budget::none;  // the task ended while the grant was on its way
        self->global_budget_->release(task->budget_bytes);
      }
    });
  };
  if (global_budget_->request(task->global_budget_id, task->budget_bytes, std::move(on_grant))) budget_granted(*task);
}

void Connection::budget_granted(Task& task) noexcept {
  task.budget = Task::Budget::granted;
  task.budget_event.complete();
}

void Connection::wake_budget_waiters(const std::vector<std::uint64_t>& ids) {
  for (auto id : ids) {
    auto it = budget_waiters_.find(id);
    if (it == budget_waiters_.end()) continue;
    auto task = std::move(it->second);
    budget_waiters_.erase(it);
    request_global_budget(task);
  }
}

Awaitable<bool> Connection::wait_budget(Task& task) {
  if (task.budget != Task::Budget::granted) co_await task.budget_event.wait();
  co_return task.budget == Task::Budget::granted && !task.aborted && !closed_;
}

Awaitable<bool> Connection::obtain_write_buffer(Task& task) {
  // Unsolicited Data-Out still arriving lands in the staging buffer: let it end before moving it.
  while (task.staging && task.sequencer && !task.sequencer->unsolicited_done() && !task.failure && !task.aborted &&
         !closed_) {
    co_await task.data_event.wait();
    task.data_event.reset();
  }
  if (task.failure || task.aborted || closed_) co_return false;
  if (!co_await wait_budget(task)) co_return false;
  PooledBuffer full = datamover_->buffer_pool().allocate(task.budget_bytes);
  // Only when the budget was short at arrival: the unsolicited bytes move once (counted).
  if (task.staging) copy_payload(full.data(), task.buffer.data(), task.buffer.size());
  task.staging = false;
  task.buffer = std::move(full);
  co_return true;
}

void Connection::release_budget(Task& task) {
  std::vector<std::uint64_t> granted;
  switch (task.budget) {
    case Task::Budget::none:
    case Task::Budget::abandoned:
      return;
    case Task::Budget::waiting_connection:
      budget_.cancel(task.budget_id, granted);
      budget_waiters_.erase(task.budget_id);
      task.budget = Task::Budget::none;
      break;
    case Task::Budget::waiting_global:
      // Held at the connection level already. A grant already on its way is given back when it
      // arrives (abandoned).
      task.budget = global_budget_->cancel(task.global_budget_id) ? Task::Budget::none : Task::Budget::abandoned;
      granted = budget_.release(task.budget_bytes);
      break;
    case Task::Budget::granted:
      if (global_budget_) global_budget_->release(task.budget_bytes);
      granted = budget_.release(task.budget_bytes);
      task.budget = Task::Budget::none;
      break;
  }
  wake_budget_waiters(granted);
}

Awaitable<void> Connection::wait_finished(Task& task) {
  if (!task.has_finish_waiter) {
    task.has_finish_waiter = true;
    co_await task.finished.wait();
    task.has_finish_waiter = false;
    co_return;
  }
  asio::steady_timer timer(datamover_->executor());
  while (!task.finished.done()) {
    timer.expires_after(std::chrono::milliseconds(1));
    boost::system::error_code ec;
    co_await timer.async_wait(use_awaitable_ec(ec));
  }
}

void Connection::finish_task(Task& task) noexcept {
  auto it = tasks_.find(iscsi::to_u32(task.itt()));
  if (it != tasks_.end() && it->second.get() == &task) tasks_.erase(it);
  if (task.counted_immediate) {
    task.counted_immediate = false;
    --immediate_outstanding_;
  }
  if (task.in_window) {
    task.in_window = false;
    window_.release();
  }
}

Awaitable<void> Connection::run_task(std::shared_ptr<Task> task) {
  auto self = shared_from_this();
  co_await run_task_body(*task);
  finish_task(*task);
  task->buffer.reset();
  release_budget(*task);
  task->finished.complete();
}

Awaitable<void> Connection::wait_for_data(Task& task) {
  if ((task.budget == Task::Budget::waiting_connection || task.budget == Task::Budget::waiting_global) &&
      !co_await obtain_write_buffer(task))
    co_return;
  if (rdma_) {
    co_await fetch_write_data(task);  // iSER: an RDMA Read instead of R2T + Data-Out
    co_return;
  }
  while (!task.data_complete && !task.failure && !task.aborted && !closed_) {
    if (task.sequencer) {
      while (auto r2t = task.sequencer->next_r2t(iscsi::Ttt{next_ttt_})) {
        if (++next_ttt_ == iscsi::to_u32(iscsi::reserved_ttt)) next_ttt_ = 1;
        // RFC 7143 §11.8: R2T carries the current StatSN without advancing it.
        iscsi::R2t r{.lun = task.command.lun, .itt = task.itt(), .ttt = r2t->ttt, .stat_sn = stat_sn_,
                     .r2t_sn = r2t->r2t_sn, .buffer_offset = r2t->buffer_offset,
                     .desired_data_transfer_length = r2t->desired_data_transfer_length};
        stamp(r);
        if (co_await datamover_->send(datamover::make_pdu(r))) co_return;
      }
    }
    if (task.data_complete || task.failure || task.aborted || closed_) break;
    co_await task.data_event.wait();
    task.data_event.reset();
  }
}

Awaitable<void> Connection::run_task_body(Task& task) {
  const std::uint32_t edtl = task.command.expected_data_transfer_length;
  const CommandPlan& plan = task.plan;
  const auto& dispatcher = *session_.target->dispatcher;
  // Data-Out (solicited or unsolicited) is taken in full before any status goes out, even when the
  // command already failed: that keeps the session in step (DESIGN.md, unlike tgtd).
  co_await wait_for_data(task);
  if (task.aborted || closed_) co_return;
  if (task.failure) {
    co_await send_scsi_response(task, scsi::Status::check_condition, task.failure, residual_for(edtl, 0));
    co_return;
  }
  if (task.early) {
    co_await send_scsi_response(task, task.early->status, task.early->sense, task.early_residual);
    co_return;
  }
  switch (plan.direction) {
    case DataDirection::to_target: {
      auto data = task.buffer.bytes().first(plan.transfer_length_bytes);
      const ScsiOutcome outcome = co_await dispatcher.execute(nexus_, task.command.lun, task.cdb(), plan, data);
      if (task.aborted || closed_) co_return;
      co_await send_scsi_response(task, outcome.status, outcome.sense, residual_for(edtl, task.wanted_out_bytes));
      co_return;
    }
    case DataDirection::from_target: {
      // The read buffer is taken now that the command can run, under the payload budget: an
      // initiator that stops reading its socket holds at most its connection's budget.
      if (plan.transfer_length_bytes > 0) {
        request_budget(task.shared_from_this(), plan.transfer_length_bytes);
        if (!co_await wait_budget(task)) co_return;
        task.buffer = datamover_->buffer_pool().allocate(plan.transfer_length_bytes);
      }
      auto data = task.buffer.bytes().first(plan.transfer_length_bytes);
      const ScsiOutcome outcome = co_await dispatcher.execute(nexus_, task.command.lun, task.cdb(), plan, data);
      if (task.aborted || closed_) co_return;
      const std::uint32_t produced = std::min(outcome.data_length_bytes, plan.transfer_length_bytes);
      if (outcome.status == scsi::Status::good && !outcome.sense) {
        const std::uint32_t bytes = std::min(edtl, produced);
        const Residual residual = residual_for(edtl, produced);
        if (bytes > 0) {
          co_await send_data_in(task, bytes, outcome.status, residual);
        } else {
          co_await send_scsi_response(task, outcome.status, std::nullopt, residual);
        }
        co_return;
      }
      co_await send_scsi_response(task, outcome.status, outcome.sense, residual_for(edtl, 0));
      co_return;
    }
    case DataDirection::none: {
      const ScsiOutcome outcome = co_await dispatcher.execute(nexus_, task.command.lun, task.cdb(), plan, {});
      if (task.aborted || closed_) co_return;
      // A WRITE cut to zero blocks by an EDTL of 0 still reports its overflow (RFC 7143 §11.4.5.1).
      co_await send_scsi_response(task, outcome.status, outcome.sense, residual_for(edtl, task.wanted_out_bytes));
      co_return;
    }
  }
}

Awaitable<void> Connection::send_data_in(Task& task, std::uint32_t bytes, scsi::Status status, Residual residual) {
  if (rdma_) {
    co_await put_read_data(task, bytes, status, residual);  // iSER: an RDMA Write instead of Data-In
    co_return;
  }
  // RFC 7143 §13.12: no Data-In data segment above the initiator's MaxRecvDataSegmentLength.
  DataInSegmenter segmenter(bytes, params_.initiator_max_recv_data_segment_length, params_.max_burst_length);
  std::optional<DataInSegment> s = segmenter.next();
  // Every PDU but the last is handed to the datamover at once (each send in its own coroutine,
  // started in order), so a multi-PDU read goes out in as few gather writes as the datamover
  // can make instead of one write per PDU, each waiting for the previous one.
  std::size_t spawned = 0;
  std::size_t spawned_done = 0;
  Completion all_spawned_done;
  while (s && !s->last) {
    iscsi::DataIn d{.final = s->final, .lun = task.command.lun, .itt = task.itt(), .ttt = iscsi::reserved_ttt,
                    .data_sn = task.data_in_pdus++, .buffer_offset = s->buffer_offset};
    stamp(d);
    ++spawned;
    asio::co_spawn(
        datamover_->executor(),
        datamover_->send(
            datamover::make_pdu(d, std::span<const std::byte>(task.buffer.bytes().subspan(s->buffer_offset, s->length)))),
        [&spawned, &spawned_done, &all_spawned_done](std::exception_ptr, std::error_code) {
          if (++spawned_done == spawned) all_spawned_done.complete();
        });
    s = segmenter.next();
  }
  // co_spawn starts each send after one post; one post of our own puts the last PDU behind them.
  if (spawned > 0) co_await asio::post(datamover_->executor(), asio::use_awaitable);
  if (s) {
    iscsi::DataIn d{.final = s->final, .lun = task.command.lun, .itt = task.itt(), .ttt = iscsi::reserved_ttt,
                    .data_sn = task.data_in_pdus++, .buffer_offset = s->buffer_offset};
    // RFC 7143 §11.7.4: status goes in the last Data-In (S bit, with F) when it is GOOD and there
    // is no sense data; the residual travels with it.
    finish_task(task);
    d.status_present = true;
    d.status = static_cast<std::uint8_t>(status);
    d.residual_underflow = residual.underflow;
    d.residual_overflow = residual.overflow;
    d.residual_count = residual.count;
    d.stat_sn = take_stat_sn();
    stamp(d);
    co_await datamover_->send(
        datamover::make_pdu(d, std::span<const std::byte>(task.buffer.bytes().subspan(s->buffer_offset, s->length))));
  }
  // The spawned sends borrow the task buffer: wait for them (they fail fast once the connection
  // failed, so this does not hang).
  if (spawned_done < spawned) co_await all_spawned_done.wait();
}

Awaitable<void> Connection::send_scsi_response(Task& task, scsi::Status status,
                                               const std::optional<scsi::SenseData>& sense, Residual residual) {
  finish_task(task);  // frees the ITT and opens the window before the initiator hears of it
  iscsi::ScsiResponse r{.residual_overflow = residual.overflow, .residual_underflow = residual.underflow,
                        .response = 0x00, .status = static_cast<std::uint8_t>(status), .itt = task.itt(),
                        .stat_sn = take_stat_sn(),
                        // RFC 7143 §11.4.6: ExpDataSN counts the R2T and Data-In PDUs sent for the task.
                        .exp_data_sn = task.data_in_pdus + (task.sequencer ? task.sequencer->r2ts_sent() : 0),
                        .residual_count = residual.count};
  stamp(r);
  std::span<const std::byte> data;
  if (sense) {
    // RFC 7143 §11.4.7.2: the data segment is SenseLength (2 bytes) followed by the sense data.
    const std::size_t n = scsi::encode_sense(*sense, scsi::SenseFormat::fixed, std::span(task.sense_segment).subspan(2));
    store_be16(task.sense_segment.data(), static_cast<std::uint16_t>(n));
    data = std::span<const std::byte>(task.sense_segment).first(2 + n);
  }
  co_await datamover_->send(datamover::make_pdu(r, data));
}

}  // namespace iserkit::target

// The initiator session (RFC 7143 §4.2.2.1 command numbering, §11.3–§11.9 and §11.14–§11.19 PDUs,
// ErrorRecoveryLevel 0): admission into the CmdSN window, the ITT table, write data (immediate,
// unsolicited, R2T-solicited) sent from the caller's buffer, and the receive loop that places
// Data-In straight into the caller's buffer and completes commands.
//
// NOTES ON THE THREAD MODEL: everything here runs on the session's executor, one thread. A command
// is one coroutine (execute) whose frame holds its Task; the receive loop finds the Task by ITT,
// records what arrived and wakes the command through Task::event. Only the command coroutine sends
// its Data-Out PDUs (so its buffer is never referenced after it returns); the receive loop never
// waits for a send (NOP-Out replies go out from their own coroutine), so a full socket in one
// direction cannot stall the other.
#include "iserkit/initiator/session.hpp"

#include <deque>

#include "command_window.hpp"
#include "data_transfer.hpp"
#include "iserkit/common/completion.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/datamover/iser_datamover.hpp"
#include "iserkit/datamover/tcp_datamover.hpp"
#include "iserkit/initiator/errors.hpp"
#include "iser_buffers.hpp"
#include "itt_table.hpp"
#include "async_events.hpp"
#include "login_io.hpp"
#include "ping_monitor.hpp"

namespace iserkit::initiator {
namespace {

using Clock = std::chrono::steady_clock;

struct Task {
  iscsi::Itt itt = iscsi::reserved_itt;
  std::span<std::byte> data_in;
  std::span<const std::byte> data_out;
  DataInTracker data_in_tracker;
  Completion event;  // woken on R2T, status, error or timeout
  bool finished = false;
  bool timed_out = false;
  std::error_code error;
  scsi::ScsiResult result;
  std::vector<iscsi::R2t> r2ts;  // FIFO, at most MaxOutstandingR2T long; a vector allocates only when used
  Clock::time_point deadline = Clock::time_point::max();
  scsi::Lun lun;                  // for ABORT TASK after a timeout
  SerialNumber cmd_sn;            // RefCmdSN of that ABORT TASK
  std::uint8_t tmf_response = 0;  // task management requests: the response code (RFC 7143 §11.6.1)
  bool scsi_command = false;      // only SCSI commands get an ABORT TASK when they time out
};

struct Waiter {
  Completion admitted;
};

}  // namespace

struct Session::Impl final : datamover::DataPlacement {
  Impl(asio::any_io_executor e, std::unique_ptr<datamover::Datamover> d, SessionOptions o)
      : ex(std::move(e)), dm(std::move(d)), options(std::move(o)), itts(options.max_commands_in_flight + 4),
        sweep_timer(ex), ping(options.nop_interval, options.nop_timeout, Clock::now()), keepalive_timer(ex) {}

  asio::any_io_executor ex;
  std::unique_ptr<datamover::Datamover> dm;
  bool rdma_data = dm->capabilities().rdma_data;  // iSER: the target moves data by RDMA
  SessionOptions options;
  iscsi::OperationalParameters params;
  std::string target_name;
  WriteLimits limits;
  CommandWindow window;
  SerialNumber exp_stat_sn;
  IttTable<Task> itts;
  std::deque<Waiter*> waiters;
  std::uint32_t admitted_not_started = 0;
  std::uint32_t commands_in_flight = 0;
  bool open = true;
  bool logging_out = false;
  std::error_code error;
  Task* receiving = nullptr;  // the task whose buffer the datamover is reading into
  asio::steady_timer sweep_timer;
  bool sweeping = false;
  SessionStats stats;
  std::weak_ptr<Session> owner;  // for coroutines spawned from the receive loop
  PingMonitor ping;              // NOP-Out keepalive decisions (ping_monitor.hpp)
  Task ping_task;                // the outstanding ping's ITT slot
  asio::steady_timer keepalive_timer;

  // ---- admission into the CmdSN window (RFC 7143 §4.2.2.1) ----
  [[nodiscard]] bool can_admit() const noexcept {
    return window.available() > admitted_not_started &&
           commands_in_flight + admitted_not_started < options.max_commands_in_flight;
  }
  void admit() {
    while (!waiters.empty() && can_admit()) {
      Waiter* w = waiters.front();
      waiters.pop_front();
      ++admitted_not_started;
      w->admitted.complete();
    }
  }
  Awaitable<std::error_code> acquire() {
    if (!open || logging_out) co_return error ? error : make_error_code(errc::session_closed);
    if (waiters.empty() && can_admit()) co_return std::error_code{};
    Waiter w;
    waiters.push_back(&w);
    ++stats.commands_queued_for_window;
    const std::error_code ec = co_await w.admitted.wait();
    if (ec) co_return ec;
    --admitted_not_started;
    if (!open) {
      --admitted_not_started;
      co_return error;
    }
    co_return std::error_code{};
  }

  // ---- task completion ----
  void finish(Task& t, std::error_code ec) {
    if (t.finished) return;
    t.finished = true;
    t.error = ec;
    itts.erase(t.itt);
    t.event.complete();
  }

  void fail_session(std::error_code ec) {
    if (!open) return;
    open = false;
    error = ec;
    if (logging_out) {
      log::debug("session: closed after logout: target={} peer={}", log::escaped(target_name), dm->peer());
    } else {
      log::warn("session: failed: target={} peer={} error={}", log::escaped(target_name), dm->peer(), ec.message());
    }
    dm->close();
    std::vector<Task*> tasks;
    itts.for_each([&](Task* t) { tasks.push_back(t); });
    for (Task* t : tasks) {
      // A task the datamover is reading into is finished by the receive loop once the read ends.
      if (t == receiving) {
        t->error = ec;
        continue;
      }
      finish(*t, ec);
    }
    while (!waiters.empty()) {
      Waiter* w = waiters.front();
      waiters.pop_front();
      w->admitted.complete(ec);
    }
    sweep_timer.cancel();
    keepalive_timer.cancel();
  }

  void update_window(SerialNumber exp_cmd_sn, SerialNumber max_cmd_sn) {
    if (window.update(exp_cmd_sn, max_cmd_sn)) admit();
  }
  void update_stat_sn(SerialNumber stat_sn) {
    // RFC 7143 §4.2.2.2: ExpStatSN acknowledges status up to StatSN.
    if (stat_sn + 1 > exp_stat_sn) exp_stat_sn = stat_sn + 1;
  }

  // ---- DataPlacement: Data-In lands in the command's buffer at BufferOffset ----
  std::span<std::byte> place(const iscsi::Bhs& bhs, std::uint32_t length) noexcept override {
    if (iscsi::raw_opcode(bhs) != static_cast<std::uint8_t>(iscsi::Opcode::data_in)) return {};
    auto din = iscsi::decode_bhs_as<iscsi::DataIn>(bhs);
    if (!din) return {};
    Task* t = itts.find(din->itt);
    // RFC 7143 §11.7.6: the data must lie inside the expected transfer; otherwise it goes to
    // scratch and the command fails with a protocol error (checked again in on_data_in).
    if (t == nullptr || t->finished || !t->data_in_tracker.fits(din->buffer_offset, length)) return {};
    receiving = t;
    return t->data_in.subspan(din->buffer_offset, length);
  }

  // ---- timeouts ----
  void arm_sweeper(std::shared_ptr<Session> self) {
    if (sweeping || !open) return;
    sweeping = true;
    asio::co_spawn(ex, sweep(std::move(self)), asio::detached);
  }
  Awaitable<void> sweep(std::shared_ptr<Session> self) {
    while (open) {
      sweep_timer.expires_after(std::chrono::milliseconds(50));
      boost::system::error_code ec;
      co_await sweep_timer.async_wait(use_awaitable_ec(ec));
      if (!open) break;
      const auto now = Clock::now();
      std::vector<Task*> expired;
      bool any = false;
      itts.for_each([&](Task* t) {
        if (t->deadline == Clock::time_point::max()) return;
        any = true;
        if (t->deadline <= now && !t->finished) expired.push_back(t);
      });
      for (Task* t : expired) {
        log::warn("command: timed out: itt=0x{:08x}", iscsi::to_u32(t->itt));
        // RFC 7143 §11.5.1: ABORT TASK tells the target to drop it (RefCmdSN = its CmdSN).
        if (t->scsi_command)
          asio::co_spawn(ex, abort_task(self, t->itt, t->cmd_sn, t->lun), asio::detached);
        if (t == receiving) {
          t->timed_out = true;  // finished by the receive loop after the current PDU
        } else {
          finish(*t, make_error_code(errc::timeout));
        }
      }
      if (!any) break;
    }
    sweeping = false;
    (void)self;
  }

  // ---- sending ----
  Awaitable<std::error_code> send(datamover::PduOut pdu) {
    auto ec = co_await dm->send(std::move(pdu));
    if (ec) fail_session(ec == make_error_code(errc::connection_closed) ? ec : make_error_code(errc::connection_closed));
    co_return ec;
  }

  /// Sends one Data-Out sequence from the task's buffer (RFC 7143 §11.7).
  Awaitable<std::error_code> send_sequence(Task& t, iscsi::Ttt ttt, std::uint32_t offset, std::uint32_t length,
                                           const scsi::Lun& lun) {
    DataOutSequence seq(offset, length, limits.max_send_segment_length);
    while (!seq.done()) {
      if (t.finished) co_return std::error_code{};
      const DataOutSegment s = seq.next();
      iscsi::DataOut d;
      d.final = s.final;
      d.lun = lun;
      d.itt = t.itt;
      d.ttt = ttt;  // RFC 7143 §11.7.3: 0xffffffff for unsolicited data, the R2T's TTT otherwise
      d.exp_stat_sn = exp_stat_sn;
      d.data_sn = s.data_sn;
      d.buffer_offset = s.buffer_offset;
      stats.data_out_bytes_sent += s.length;
      if (auto ec = co_await send(datamover::make_pdu(d, t.data_out.subspan(s.buffer_offset, s.length))))
        co_return ec;
    }
    co_return std::error_code{};
  }

  // ---- the receive loop ----
  Awaitable<void> receive_loop(std::shared_ptr<Session> self) {
    while (open) {
      auto in = co_await dm->receive(this);
      Task* placed = std::exchange(receiving, nullptr);
      if (!in) {
        if (placed != nullptr && placed->error) finish(*placed, placed->error);
        fail_session(logging_out ? make_error_code(errc::session_closed) : make_error_code(errc::connection_closed));
        if (placed != nullptr) finish(*placed, error);
        break;
      }
      if (!open) {
        if (placed != nullptr) finish(*placed, error);
        break;
      }
      ping.on_receive(Clock::now());
      handle(*in, placed);
      if (placed != nullptr && placed->timed_out) finish(*placed, make_error_code(errc::timeout));
    }
    (void)self;
  }

  void handle(const datamover::PduIn& in, Task* placed) {
    auto header = iscsi::decode_bhs(in.bhs);
    if (!header) {
      log::warn("session: malformed PDU from target: opcode=0x{:02x}", iscsi::raw_opcode(in.bhs));
      fail_session(make_error_code(errc::protocol_error));
      return;
    }
    std::visit([&](auto& h) { on_pdu(h, in, placed); }, *header);
  }

  void on_pdu(const iscsi::DataIn& d, const datamover::PduIn& in, Task* placed) {
    update_window(d.exp_cmd_sn, d.max_cmd_sn);
    Task* t = itts.find(d.itt);
    if (t == nullptr) {
      log::debug("session: Data-In for unknown itt=0x{:08x} dropped", iscsi::to_u32(d.itt));
      return;
    }
    const auto length = static_cast<std::uint32_t>(in.data.size());
    if (length != 0 && placed != t) {
      log::warn("session: Data-In outside the buffer: itt=0x{:08x} offset={} length={} buffer={}",
                iscsi::to_u32(d.itt), d.buffer_offset, length, t->data_in.size());
      finish(*t, make_error_code(errc::protocol_error));
      return;
    }
    if (in.pdu_error) {
      finish(*t, in.pdu_error);
      return;
    }
    if (auto r = t->data_in_tracker.accept(d.data_sn, d.buffer_offset, length); !r) {
      log::warn("session: Data-In out of order: itt=0x{:08x} data_sn={} expected={}", iscsi::to_u32(d.itt), d.data_sn,
                t->data_in_tracker.next_data_sn());
      finish(*t, r.error());
      return;
    }
    stats.data_in_bytes_placed += length;
    // RFC 7143 §11.7.5: status and StatSN are valid only with the S bit (which requires F).
    if (d.status_present) {
      update_stat_sn(d.stat_sn);
      t->result.status = static_cast<scsi::Status>(d.status);
      if (d.residual_underflow || d.residual_overflow) {
        t->result.residual_bytes = d.residual_count;
        t->result.residual_overflow = d.residual_overflow;
      }
      finish(*t, {});
    }
  }

  void on_pdu(const iscsi::ScsiResponse& r, const datamover::PduIn& in, Task*) {
    update_stat_sn(r.stat_sn);
    update_window(r.exp_cmd_sn, r.max_cmd_sn);
    Task* t = itts.find(r.itt);
    if (t == nullptr) {
      log::debug("session: SCSI Response for unknown itt=0x{:08x} dropped", iscsi::to_u32(r.itt));
      return;
    }
    if (r.response != 0) {
      // RFC 7143 §11.4.3: response 0x01 = target failure; the status is not valid.
      log::warn("session: command failed at target: itt=0x{:08x} response=0x{:02x}", iscsi::to_u32(r.itt), r.response);
      finish(*t, make_error_code(errc::protocol_error));
      return;
    }
    t->result.status = static_cast<scsi::Status>(r.status);
    if (r.residual_underflow || r.residual_overflow) {
      t->result.residual_bytes = r.residual_count;
      t->result.residual_overflow = r.residual_overflow;
    }
    // RFC 7143 §11.4.7: the data segment is SenseLength (2 bytes) followed by the sense data.
    if (in.data.size() >= 2 && !in.pdu_error) {
      const std::uint16_t sense_length = load_be16(in.data.data());
      const auto avail = std::min<std::size_t>(sense_length, in.data.size() - 2);
      if (avail > 0) {
        if (auto s = scsi::decode_sense(in.data.subspan(2, avail))) t->result.sense = *s;
      }
    }
    finish(*t, {});
  }

  void on_pdu(const iscsi::R2t& r, const datamover::PduIn&, Task*) {
    update_window(r.exp_cmd_sn, r.max_cmd_sn);
    ++stats.r2ts_received;
    Task* t = itts.find(r.itt);
    if (t == nullptr) {
      log::debug("session: R2T for unknown itt=0x{:08x} dropped", iscsi::to_u32(r.itt));
      return;
    }
    if (auto ok = validate_r2t(r, static_cast<std::uint32_t>(t->data_out.size()), limits); !ok) {
      log::warn("session: R2T outside the transfer: itt=0x{:08x} offset={} length={} total={}", iscsi::to_u32(r.itt),
                r.buffer_offset, r.desired_data_transfer_length, t->data_out.size());
      finish(*t, ok.error());
      return;
    }
    t->r2ts.push_back(r);
    t->event.complete();
  }

  void on_pdu(const iscsi::NopIn& n, const datamover::PduIn& in, Task*) {
    update_window(n.exp_cmd_sn, n.max_cmd_sn);
    // RFC 7143 §11.19.1: StatSN is advanced only by a NOP-In that answers our NOP-Out (ITT valid).
    if (n.itt != iscsi::reserved_itt) {
      update_stat_sn(n.stat_sn);
      // The answer to our ping (RFC 7143 §11.19.1: the NOP-In echoes the NOP-Out's ITT).
      if (Task* t = itts.find(n.itt)) {
        if (t == &ping_task) {
          ping.on_pong();
          ++stats.pings_answered;
          keepalive_timer.cancel();  // re-plan: the next check is an interval after now, not the timeout
        }
        finish(*t, {});
      }
    }
    // RFC 7143 §11.19.2: a TTT other than 0xffffffff asks for a NOP-Out answer; with 0xffffffff
    // the NOP-In is unsolicited and needs none.
    if (n.ttt == iscsi::reserved_ttt) return;
    ++stats.nop_in_answered;
    std::vector<std::byte> ping(in.data.begin(), in.data.end());
    asio::co_spawn(ex, answer_nop(owner.lock(), n, std::move(ping)), asio::detached);
  }
  Awaitable<void> answer_nop(std::shared_ptr<Session> self, iscsi::NopIn n, std::vector<std::byte> ping) {
    iscsi::NopOut out;
    out.immediate = true;
    out.lun = n.lun;
    out.itt = iscsi::reserved_itt;  // RFC 7143 §11.18.1: a reply to a NOP-In carries ITT 0xffffffff
    out.ttt = n.ttt;                // RFC 7143 §11.18.3: echo the TTT
    out.cmd_sn = window.next();     // immediate: CmdSN is not advanced
    out.exp_stat_sn = exp_stat_sn;
    // RFC 7143 §11.18.5: the ping data is returned.
    co_await send(datamover::make_pdu_owned(out, std::move(ping)));
    (void)self;
  }

  void on_pdu(const iscsi::Reject& r, const datamover::PduIn& in, Task*) {
    update_stat_sn(r.stat_sn);
    update_window(r.exp_cmd_sn, r.max_cmd_sn);
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
    if (Task* t = itts.find(itt)) finish(*t, make_error_code(errc::protocol_error));
  }

  void on_pdu(const iscsi::AsyncMessage& a, const datamover::PduIn&, Task*) {
    update_stat_sn(a.stat_sn);
    update_window(a.exp_cmd_sn, a.max_cmd_sn);
    log::info("session: async message: event={} parameter1={} parameter2={} parameter3={}",
              static_cast<unsigned>(a.event), a.parameter1, a.parameter2, a.parameter3);
    const AsyncDecision d = decide_async(a);
    if (d.kind == AsyncDecision::Kind::fail_session) {
      fail_session(make_error_code(errc::connection_closed));
    } else if (d.kind == AsyncDecision::Kind::logout && !logging_out) {
      asio::co_spawn(ex, logout_on_request(owner.lock(), d.within), asio::detached);
    }
  }

  void on_pdu(const iscsi::LogoutResponse& r, const datamover::PduIn&, Task*) {
    update_stat_sn(r.stat_sn);
    update_window(r.exp_cmd_sn, r.max_cmd_sn);
    if (Task* t = itts.find(r.itt)) {
      t->result.status = r.response == 0 ? scsi::Status::good : scsi::Status::check_condition;
      finish(*t, {});
    }
  }

  void on_pdu(const iscsi::TaskManagementResponse& r, const datamover::PduIn&, Task*) {
    update_stat_sn(r.stat_sn);
    update_window(r.exp_cmd_sn, r.max_cmd_sn);
    if (Task* t = itts.find(r.itt)) {
      t->tmf_response = r.response;
      finish(*t, {});
    }
  }
  void on_pdu(const iscsi::TextResponse& r, const datamover::PduIn&, Task*) {
    update_stat_sn(r.stat_sn);
    update_window(r.exp_cmd_sn, r.max_cmd_sn);
  }

  template <class Other>
  void on_pdu(const Other&, const datamover::PduIn& in, Task*) {
    // RFC 7143 §6.3: initiator opcodes or a Login Response in full feature phase break the protocol.
    log::warn("session: unexpected PDU: opcode={}", iscsi::opcode_name(iscsi::raw_opcode(in.bhs)));
    fail_session(make_error_code(errc::protocol_error));
  }

  // ---- commands ----
  // `req` is taken by value: the caller's CommandRequest need not outlive the call.
  Awaitable<Result<scsi::ScsiResult>> execute(std::shared_ptr<Session> self, CommandRequest req) {
    if (!req.data_in.empty() && !req.data_out.empty()) co_return fail(errc::invalid_argument);
    if (req.data_in.size() > 0xffffffffu || req.data_out.size() > 0xffffffffu) co_return fail(errc::invalid_argument);
    if (auto ec = co_await acquire()) co_return fail(ec);
    RdmaBuffers rdma;  // iSER: registered views of the caller's buffers (STags, RFC 7145 §9.2)
    if (rdma_data) rdma.prepare(dm->buffer_pool(), req);

    Task task;
    task.data_in = req.data_in;
    task.data_out = req.data_out;
    task.data_in_tracker = DataInTracker(req.data_in.size());
    task.itt = itts.insert(&task);
    assert(task.itt != iscsi::reserved_itt);
    ++commands_in_flight;
    stats.max_in_flight_seen = std::max(stats.max_in_flight_seen, commands_in_flight);
    const auto timeout = req.timeout.count() != 0 ? req.timeout : options.command_timeout;
    if (timeout.count() > 0) {
      task.deadline = Clock::now() + timeout;
      arm_sweeper(self);
    }

    const bool write = !req.data_out.empty();
    const auto total = static_cast<std::uint32_t>(write ? req.data_out.size() : req.data_in.size());
    const std::uint32_t immediate = write ? immediate_data_length(limits, total) : 0;
    const std::uint32_t unsolicited = write ? unsolicited_data_out_length(limits, total, immediate) : 0;

    iscsi::ScsiCommand cmd;
    cmd.read = !req.data_in.empty();
    cmd.write = write;
    cmd.final = unsolicited == 0;  // RFC 7143 §11.3.1: F=0 when unsolicited Data-Out follows
    cmd.attribute = req.attribute;
    cmd.lun = req.lun;
    cmd.itt = task.itt;
    cmd.expected_data_transfer_length = total;
    // RFC 7143 §4.2.2.1: CmdSN taken and the PDU queued with no suspension in between, so commands
    // leave in CmdSN order, and only while CmdSN ≤ MaxCmdSN (acquire() waited for that).
    cmd.cmd_sn = window.take();
    task.cmd_sn = cmd.cmd_sn;
    task.lun = req.lun;
    task.scsi_command = true;
    cmd.exp_stat_sn = exp_stat_sn;
    std::copy(req.cdb.bytes.begin(), req.cdb.bytes.end(), cmd.cdb.begin());
    auto pdu = datamover::make_pdu(cmd, req.data_out.first(immediate));
    pdu.read_buffers = req.read_buffers;
    pdu.write_buffers = req.write_buffers;
    ++stats.commands_sent;
    stats.data_out_bytes_sent += immediate;

    if (!co_await send(std::move(pdu)) && unsolicited > 0) {
      co_await send_sequence(task, iscsi::reserved_ttt, immediate, unsolicited, req.lun);
    }
    while (!task.finished) {
      co_await task.event.wait();
      task.event.reset();
      while (!task.finished && !task.r2ts.empty()) {
        const iscsi::R2t r2t = task.r2ts.front();
        task.r2ts.erase(task.r2ts.begin());
        co_await send_sequence(task, r2t.ttt, r2t.buffer_offset, r2t.desired_data_transfer_length, req.lun);
      }
    }
    --commands_in_flight;
    admit();
    if (rdma_data && task.error == make_error_code(errc::timeout)) {
      // iSER: the target may still RDMA into the buffer we are about to give back; only closing
      // the connection (QP to error) makes that impossible.
      fail_session(make_error_code(errc::connection_closed));
    }
    if (task.error) co_return fail(task.error);
    if (rdma_data) rdma.finish(task.result);
    co_return task.result;
  }

  // ---- task management (RFC 7143 §11.5/§11.6), keepalive (§11.18/§11.19), async logout (§11.9) ----
  Awaitable<Result<TaskManagementResult>> task_management(std::shared_ptr<Session> self, TaskManagementOptions o) {
    if (!open) co_return fail(error ? error : make_error_code(errc::session_closed));
    Task task;
    task.itt = itts.insert(&task);
    if (task.itt == iscsi::reserved_itt) co_return fail(errc::invalid_argument);
    task.deadline = Clock::now() + (o.timeout.count() > 0 ? o.timeout : options.login_timeout);
    arm_sweeper(self);
    iscsi::TaskManagementRequest req;
    req.immediate = true;  // RFC 7143 §11.5: TMF requests go as immediate commands
    req.function = o.function;
    req.lun = o.lun;
    req.itt = task.itt;
    req.referenced_task_tag = o.referenced_task_tag;
    req.cmd_sn = window.next();  // immediate: not advanced
    req.exp_stat_sn = exp_stat_sn;
    req.ref_cmd_sn = o.ref_cmd_sn;
    log::info("session: task management: function={} lun={} referenced_itt=0x{:08x}", static_cast<unsigned>(o.function),
              o.lun.index().value_or(0xffff), iscsi::to_u32(o.referenced_task_tag));
    co_await send(datamover::make_pdu(req));
    while (!task.finished) co_await task.event.wait();
    if (task.error) co_return fail(task.error);
    co_return TaskManagementResult{.response = task.tmf_response};
  }

  Awaitable<void> abort_task(std::shared_ptr<Session> self, iscsi::Itt itt, SerialNumber cmd_sn, scsi::Lun lun) {
    auto r = co_await task_management(self, TaskManagementOptions{.function = iscsi::TaskManagementFunction::abort_task,
                                                                  .lun = lun,
                                                                  .referenced_task_tag = itt,
                                                                  .ref_cmd_sn = cmd_sn});
    if (!r) {
      log::warn("session: ABORT TASK itt=0x{:08x} failed: {}", iscsi::to_u32(itt), r.error().message());
    } else {
      log::info("session: ABORT TASK itt=0x{:08x}: response={}", iscsi::to_u32(itt), r->response);
    }
  }

  Awaitable<void> keepalive(std::shared_ptr<Session> self) {
    while (open) {
      keepalive_timer.expires_at(ping.next_check());
      boost::system::error_code ec;
      co_await keepalive_timer.async_wait(use_awaitable_ec(ec));
      if (!open) break;
      switch (ping.on_tick(Clock::now())) {
        case PingMonitor::Action::none: break;
        case PingMonitor::Action::send_ping: {
          ping_task.finished = false;
          ping_task.error = {};
          ping_task.itt = itts.insert(&ping_task);
          if (ping_task.itt == iscsi::reserved_itt) break;
          iscsi::NopOut out;
          out.immediate = true;
          out.itt = ping_task.itt;  // RFC 7143 §11.18.1: a valid ITT asks for a NOP-In answer
          out.ttt = iscsi::reserved_ttt;
          out.cmd_sn = window.next();
          out.exp_stat_sn = exp_stat_sn;
          ping.on_ping_sent(Clock::now());
          ++stats.pings_sent;
          co_await send(datamover::make_pdu(out));
          break;
        }
        case PingMonitor::Action::connection_dead:
          log::warn("session: no NOP-In within {} ms of our ping: connection dead: target={} peer={}",
                    options.nop_timeout.count(), log::escaped(target_name), dm->peer());
          itts.erase(ping_task.itt);
          fail_session(make_error_code(errc::timeout));
          break;
      }
    }
    (void)self;
  }

  Awaitable<void> logout_on_request(std::shared_ptr<Session> self, std::chrono::seconds within) {
    // RFC 7143 §11.9.1 AsyncEvent 1: log out within Parameter3 seconds, or the target drops us.
    asio::steady_timer deadline(ex);
    deadline.expires_after(within);
    deadline.async_wait([weak = std::weak_ptr<Session>(self), this](const boost::system::error_code& e) {
      if (e || weak.expired()) return;
      if (open) fail_session(make_error_code(errc::session_closed));
    });
    auto r = co_await logout(self);
    deadline.cancel();
    if (!r) log::warn("session: logout requested by the target failed: {}", r.error().message());
  }

  Awaitable<Result<void>> logout(std::shared_ptr<Session> self) {
    if (!open) {
      if (error == make_error_code(errc::session_closed)) co_return Result<void>{};
      co_return fail(error);
    }
    logging_out = true;
    while (!waiters.empty()) {
      Waiter* w = waiters.front();
      waiters.pop_front();
      w->admitted.complete(make_error_code(errc::session_closed));
    }
    // Let the commands in flight finish first.
    while (commands_in_flight > 0 && open) {
      asio::steady_timer t(ex);
      t.expires_after(std::chrono::milliseconds(1));
      boost::system::error_code ec;
      co_await t.async_wait(use_awaitable_ec(ec));
    }
    if (!open) co_return fail(error);
    Task task;
    task.itt = itts.insert(&task);
    task.deadline = Clock::now() + options.login_timeout;
    arm_sweeper(self);
    iscsi::LogoutRequest req;
    req.immediate = true;
    req.reason = iscsi::LogoutReason::close_session;
    req.itt = task.itt;
    req.cmd_sn = window.next();  // immediate: not advanced
    req.exp_stat_sn = exp_stat_sn;
    co_await send(datamover::make_pdu(req));
    while (!task.finished) co_await task.event.wait();
    const bool ok = !task.error && task.result.status == scsi::Status::good;
    // RFC 7143 §11.15: after the Logout Response the target closes; so do we.
    open = false;
    error = make_error_code(errc::session_closed);
    dm->close();
    sweep_timer.cancel();
    if (task.error) co_return fail(task.error);
    if (!ok) co_return fail(errc::protocol_error);
    co_return Result<void>{};
  }
};

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

std::optional<TransportPolicy> parse_transport_policy(std::string_view text) noexcept {
  if (text == "url") return TransportPolicy::from_url;
  if (text == "tcp") return TransportPolicy::tcp;
  if (text == "iser") return TransportPolicy::iser;
  if (text == "auto") return TransportPolicy::automatic;
  return std::nullopt;
}

std::vector<datamover::Transport> select_transports(const Url& url, TransportPolicy policy) {
  using datamover::Transport;
  switch (policy) {
    case TransportPolicy::tcp: return {Transport::tcp};
    case TransportPolicy::iser: return {Transport::iser};
    case TransportPolicy::automatic:
      if (datamover::iser_built()) return {Transport::iser, Transport::tcp};
      return {Transport::tcp};
    case TransportPolicy::from_url: break;
  }
  return {url.transport};
}

namespace {

}  // namespace

Awaitable<Result<std::unique_ptr<datamover::Datamover>>> connect_datamover(asio::any_io_executor ex,
                                                                           datamover::Transport transport,
                                                                           const Url& url,
                                                                           const SessionOptions& options) {
  if (transport == datamover::Transport::iser) {
    // Receive buffers: a response per command in flight, plus 4 unexpected PDUs (NOP-In, Async;
    // Linux reserves as many) and 4 answers to immediate PDUs (NOP-Out, Logout).
    const datamover::IserOptions iser{.recv_data_segment_length = options.iser_recv_data_segment_length,
                                      .receive_depth = options.max_commands_in_flight + 8,
                                      .send_depth = options.max_commands_in_flight + 8,
                                      .timeout = options.connect_timeout};
    co_return co_await datamover::iser_connect(ex, url.host, url.port, iser);
  }
  auto dm = co_await datamover::TcpDatamover::connect(ex, url.host, url.port, options.connect_timeout);
  if (!dm) co_return fail(dm.error());
  co_return std::unique_ptr<datamover::Datamover>(std::move(*dm));
}


Awaitable<Result<std::shared_ptr<Session>>> Session::connect(asio::any_io_executor ex, const Url& url,
                                                             SessionOptions options) {
  if (url.target.empty()) co_return fail(errc::invalid_argument);
  if (options.max_commands_in_flight == 0 || options.max_commands_in_flight > 65534)
    co_return fail(errc::invalid_argument);
  if (options.initiator_name.empty()) options.initiator_name = default_initiator_name();
  auto resolved = resolve_credentials(url, std::move(options));
  if (!resolved) co_return fail(resolved.error());
  options = std::move(*resolved);
  const auto transports = select_transports(url, options.transport);
  std::error_code last;
  for (std::size_t i = 0; i < transports.size(); ++i) {
    auto session = co_await connect_one(ex, url, options, transports[i]);
    if (session) co_return session;
    last = session.error();
    if (i + 1 < transports.size())
      log::info("session: iSER to {}:{} failed ({}): trying TCP", url.host, url.port, last.message());
  }
  co_return fail(last);
}

Awaitable<Result<std::shared_ptr<Session>>> Session::connect_one(asio::any_io_executor ex, const Url& url,
                                                                 SessionOptions options,
                                                                 datamover::Transport transport) {

  LoginConfig config;
  config.initiator_name = options.initiator_name;
  config.initiator_alias = options.initiator_alias;
  config.target_name = url.target;
  config.isid = options.isid.value_or(random_isid());
  config.itt = iscsi::Itt{0};
  config.cmd_sn = SerialNumber(1);
  config.options = options;
  config.rdma = transport == datamover::Transport::iser;
  // Redirects (RFC 7143 §11.13.5) reconnect over the same transport to the TargetAddress given.
  // The connector captures by reference only: `url` and `options` outlive the awaited login, and
  // GCC 12 mishandles non-trivial by-value captures of coroutine lambdas (double destruction).
  auto logged_in = co_await connect_and_login(
      url.host, url.port, config, options.login_timeout, options.max_redirects,
      [ex, transport, &url, &options](const std::string& host, std::uint16_t port)
          -> Awaitable<Result<std::unique_ptr<datamover::Datamover>>> {
        Url to = url;
        to.host = host;
        to.port = port;
        co_return co_await connect_datamover(ex, transport, to, options);
      });
  if (!logged_in) co_return fail(logged_in.error());
  auto& dm = logged_in->datamover;
  auto* done = &logged_in->done;
  auto impl = std::make_unique<Impl>(ex, std::move(dm), std::move(options));
  impl->params = done->parameters;
  impl->target_name = url.target;
  impl->exp_stat_sn = done->exp_stat_sn;
  // RFC 7143 §11.12.8: the first command carries the leading login's CmdSN.
  impl->window.reset(config.cmd_sn, done->exp_cmd_sn, done->max_cmd_sn);
  const auto& p = impl->params;
  impl->limits = WriteLimits{.immediate_data = p.immediate_data,
                             .initial_r2t = p.initial_r2t,
                             .first_burst_length = p.first_burst_length,
                             .max_burst_length = p.max_burst_length,
                             .max_send_segment_length = p.max_send_segment(iscsi::Role::initiator)};
  log::debug("session: logged in: target={} peer={} tsih={} ImmediateData={} InitialR2T={} FirstBurstLength={} "
             "MaxBurstLength={} MaxRecvDataSegmentLength(target)={} window=[{},{}]",
             log::escaped(url.target), impl->dm->peer(), done->tsih, p.immediate_data, p.initial_r2t,
             p.first_burst_length, p.max_burst_length, impl->limits.max_send_segment_length, done->exp_cmd_sn.value(),
             done->max_cmd_sn.value());
  auto session = std::make_shared<Session>(std::move(impl));
  session->impl_->owner = session;
  asio::co_spawn(ex, session->impl_->receive_loop(session), asio::detached);
  if (session->impl_->ping.enabled()) asio::co_spawn(ex, session->impl_->keepalive(session), asio::detached);
  co_return session;
}

Awaitable<Result<scsi::ScsiResult>> Session::execute(const CommandRequest& request) {
  return impl_->execute(shared_from_this(), request);
}
Awaitable<Result<void>> Session::logout() { return impl_->logout(shared_from_this()); }
Awaitable<Result<TaskManagementResult>> Session::task_management(const TaskManagementOptions& options) {
  return impl_->task_management(shared_from_this(), options);
}
Awaitable<Result<TaskManagementResult>> Session::lun_reset(scsi::Lun lun) {
  return impl_->task_management(shared_from_this(),
                                TaskManagementOptions{.function = iscsi::TaskManagementFunction::logical_unit_reset,
                                                      .lun = lun});
}
void Session::close() noexcept { impl_->fail_session(make_error_code(errc::connection_closed)); }
bool Session::is_open() const noexcept { return impl_->open && !impl_->logging_out; }
std::error_code Session::error() const noexcept { return impl_->error; }
const iscsi::OperationalParameters& Session::parameters() const noexcept { return impl_->params; }
const std::string& Session::target_name() const noexcept { return impl_->target_name; }
std::string Session::peer() const { return impl_->dm->peer(); }
asio::any_io_executor Session::executor() const { return impl_->ex; }
const SessionStats& Session::stats() const noexcept { return impl_->stats; }
datamover::Transport Session::transport() const noexcept { return impl_->dm->transport(); }
std::uint32_t Session::max_transfer_bytes() const noexcept {
  return impl_->rdma_data ? impl_->options.iser_max_transfer_bytes : 0;
}
BufferPool& Session::buffer_pool() const noexcept { return impl_->dm->buffer_pool(); }

}  // namespace iserkit::initiator

// Target connection: login phase, then the full-feature phase as a thin driver of the SessionEngine
// (RFC 7143 §3.2.4, §6.3 login; the protocol rules live in session_engine.cpp).
#include "connection.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <ctime>
#include <iterator>
#include <string_view>

#include <fmt/chrono.h>
#include <utility>

#include "iserkit/common/command_size_counter.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/datamover/tcp_datamover.hpp"
#include "backend/uring_socket.hpp"

namespace iserkit::target {
namespace {

// $ISERKIT_SPLICE_DATA_IN=1: large READ Data-In by splice (data_in_pipes.hpp), read once. Opt-in:
// on loopback it saved the target about 5 % CPU at 1 MiB and cost the receiving bridge more (skbs
// of page-sized fragments), so the chain was no faster (docs/performance.md, "READ Data-In by
// splice").
bool splice_data_in_allowed() {
  static const bool allowed = [] {
    const char* v = std::getenv("ISERKIT_SPLICE_DATA_IN");
    return v != nullptr && std::string_view(v) == "1";
  }();
  return allowed;
}

// The receive loop stops reading while this many ordered actions wait for the writer: a peer that
// stops reading its socket cannot make the target queue responses without bound.
constexpr std::size_t max_ordered_actions = 64;

std::atomic<std::uint64_t> next_session_id{1};

std::string isid_hex(const std::array<std::byte, 6>& isid) {
  std::string out;
  for (std::byte b : isid) out += fmt::format("{:02x}", static_cast<unsigned>(b));
  return out;
}

/// Installs the ring-backed socket sender on a TCP datamover when `mode` and the kernel say so.
void use_ring_sends(datamover::Datamover& datamover, SocketIo mode) {
  // --socket-io (issue 23 item 3): the writer's gather sends as SQEs on this I/O thread's io_uring
  // ring, submitted with the backend's reads and writes of the pass. TCP only (iSER posts work
  // requests); the login phase's few sends stay on sendmsg.
  auto* tcp = dynamic_cast<datamover::TcpDatamover*>(&datamover);
  if (tcp == nullptr || !detail::socket_sends_on_ring(mode, detail::socket_io_features())) return;
  // $ISERKIT_URING_SEND_ALWAYS=1: every send on the ring (measurements; see Policy::always).
  const char* always = std::getenv("ISERKIT_URING_SEND_ALWAYS");
  auto sender = detail::UringSocketSender::create(datamover.executor(), always != nullptr && *always == '1'
                                                                            ? detail::UringSocketSender::Policy::always
                                                                            : detail::UringSocketSender::Policy::join_pending);
  if (!sender) {
    log::warn("connection {}: io_uring sends unavailable ({}): sendmsg", datamover.peer(), sender.error().message());
    return;
  }
  tcp->set_socket_sender(std::move(*sender));
}

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
      global_budget_(std::move(global_budget)),
      ledger_(limits.connection_payload_bytes, global_budget_ ? &shared_budget_port_ : nullptr),
      session_id_(next_session_id.fetch_add(1, std::memory_order_relaxed)) {
  // Login negotiates the iSER keys when the transport moves data by RDMA.
  options_.rdma = datamover_->capabilities().rdma_data;
  stats_->peer = datamover_->peer();
  stats_->portal = datamover_->local();
  stats_->transport = options_.rdma ? "iser" : "tcp";
  stats_->tenant = options_.tenant;
}

Connection::~Connection() = default;

void Connection::close() noexcept {
  if (closed_) return;
  closed_ = true;
  timer_.cancel();
  datamover_->close();
  if (engine_) {
    engine_->on_closed();
    pump();
  }
  ordered_ready_.set();
  ordered_room_.set();
}

void Connection::drain(std::chrono::milliseconds logout_within) noexcept {
  if (closed_) return;
  if (!engine_ || engine_->ended()) {
    close();
    return;
  }
  const auto seconds = std::clamp<std::int64_t>((logout_within.count() + 999) / 1000, 1, 0xffff);
  log::debug("connection {}: draining (logout requested within {} s)", datamover_->peer(), seconds);
  engine_->begin_drain(static_cast<std::uint16_t>(seconds));
  pump();
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
  // Declared after closed_hook, so it runs first: a reinstating login waiting for this session
  // hears of its end once everything below (tasks, writer, budgets, I_T nexus) is over.
  struct EndedHook {
    Connection& c;
    ~EndedHook() { c.session_ended(); }
  } ended_hook{*this};
  if (co_await login()) {
    if (hooks_.logged_in) hooks_.logged_in();
    open_nexus();
    start_engine();
    // Batch sends per loop pass (common/send_pass.hpp): each of the target's io_contexts is run by
    // one thread. While the datamover returns commands that already arrived, or the io_uring
    // backend reaps several completions, the writer waits and then sends every response of the
    // burst in one gather write.
    pass_ = &SendPass::of(datamover_->executor());
    datamover_->set_send_pass(pass_);
    use_ring_sends(*datamover_, limits_.socket_io);
    backend_idle_.set();
    asio::co_spawn(datamover_->executor(), writer(), asio::detached);
    if (limits_.idle_interval.count() > 0) asio::co_spawn(datamover_->executor(), timer_loop(), asio::detached);
    co_await receive_loop();
    // A logout's response (and its close) may still be queued: the writer carries them out.
    if (!engine_->ended()) close();
    // Let backend work report back (aborted tasks send nothing) and the writer give budgets back.
    while (backend_running_ > 0) {
      backend_idle_.reset();
      if (backend_running_ > 0) co_await backend_idle_.wait();
    }
    writer_stop_ = true;
    ordered_ready_.set();
    co_await writer_done_.wait();
  }
  close();
  // SAM-5 §6.3.4: the session is gone: I_T nexus loss (releases its RESERVE(6) reservation).
  if (nexus_open_) session_.target->dispatcher->close_nexus(nexus_);
  nexus_open_ = false;
  log::debug("connection {}: closed", datamover_->peer());
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
      c->registry_->stats().count_login_failure(LoginFailure::timeout);
      c->close();
    }
  });
  // Failed authentications are counted per source address (login_throttle.hpp), in the table of
  // the portal's tenant (addresses of different tenants' overlays may be equal); while an address
  // is blocked, each of its Login Requests is refused with 0x0301 before its credentials are looked
  // at — also on connections opened before the block began.
  const std::string address = address_of_peer(datamover_->peer());
  bool throttled = false;
  while (true) {
    auto in = co_await datamover_->receive(nullptr);
    if (!in) co_return false;
    if (const auto wait = registry_->login_throttle(options_.tenant).blocked_for(address, std::chrono::steady_clock::now());
        wait.count() > 0) {
      throttled = true;
      machine.refuse_login(LoginStatus::service_unavailable,
                           fmt::format("too many failed logins from {}: refused for {} ms more", address, wait.count()));
    }
    LoginStep step = machine.on_pdu(in->bhs, in->data, in->pdu_error);
    if (step.response.status_class == 0x02 && step.response.status_detail == 0x01) {  // 0x0201
      const auto block = registry_->login_throttle(options_.tenant).record_failure(address, std::chrono::steady_clock::now());
      if (block.count() > 0) step.reason += fmt::format(" (logins from {} refused for {} ms)", address, block.count());
    }
    if (step.action == LoginAction::close) {
      registry_->stats().count_login_failure(LoginFailure::not_login);
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
    // RFC 7143 §6.3.5: a live session with this InitiatorName + ISID ends before the final Login
    // Response of its successor leaves (after authentication, as LIO checks it too).
    // A cap on sessions (a tenant's max_sessions): RFC 7143 §11.13.5 0x0302 Out of resources.
    // A reinstatement is admitted at the cap: the session it replaces gives its slot back.
    if (step.action == LoginAction::send_then_full_feature && hooks_.admit_session &&
        !hooks_.admit_session(reinstates_live_session(machine.result()))) {
      step = machine.refuse_final(step, LoginStatus::out_of_resources, "session limit reached");
      log::info("login {}: rejected: status=0x0302: session limit of the portal's tenant reached", datamover_->peer());
    }
    if (step.action == LoginAction::send_then_full_feature) {
      switch (co_await reinstate(machine.result())) {
        case Reinstatement::ready: break;
        case Reinstatement::closed: co_return false;
        case Reinstatement::timed_out:
          // RFC 7143 §11.13.5: 0x0301 Service Unavailable, a Target Error the initiator may retry.
          step = machine.refuse_final(step, LoginStatus::service_unavailable, "the session it reinstates has not ended");
          break;
      }
    }
    if (step.response.status_class != 0)
      registry_->stats().count_login_failure(throttled ? LoginFailure::throttled
                                                       : login_failure_of(step.response.status_class,
                                                                          step.response.status_detail));
    const auto ec = co_await datamover_->send(datamover::make_pdu_owned(step.response, std::move(step.text)));
    if (ec || step.action == LoginAction::send_then_close) co_return false;
    if (step.action == LoginAction::send_then_full_feature) break;
  }
  timer_.cancel();
  datamover_->set_drain_oversize(true);
  session_ = machine.result();
  params_ = session_.parameters;
  registry_->stats().logins.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard lock(stats_->identity_mutex);
    stats_->identity = ConnectionStats::Identity{
        .logged_in = true,
        .discovery = session_.discovery,
        .initiator = params_.initiator_name,
        .isid = isid_hex(session_.isid),
        .tsih = session_.tsih,
        .cid = session_.cid,
        .target = session_.target ? session_.target->name : std::string{},
        .since = fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::time(nullptr))),
    };
  }
  // RFC 7143 §13.1, §13.12: digests and our declared MaxRecvDataSegmentLength apply from the
  // first PDU after the final Login Response.
  datamover_->set_digests(params_.header_digest_crc32c, params_.data_digest_crc32c);
  // Large READs may leave by splice on TCP (data_in_pipes.hpp; opt-in, $ISERKIT_SPLICE_DATA_IN=1),
  // never with a data digest (its bytes would have to be read).
  splice_data_in_ = datamover_->transport() == datamover::Transport::tcp && !params_.data_digest_crc32c &&
                    !session_.discovery && splice_data_in_allowed();
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

bool Connection::reinstates_live_session(const LoginResult& result) const {
  if (result.discovery || !result.target) return false;
  const auto key = SessionKey::make(result.initiator_name, result.isid, result.target->name, options_.portal_group_tag);
  return registry_->sessions().tsih(key).has_value();
}

Awaitable<Connection::Reinstatement> Connection::reinstate(const LoginResult& result) {
  // Discovery sessions hold nothing a successor could collide with; they are not registered.
  if (result.discovery || !result.target) co_return Reinstatement::ready;
  session_key_ = SessionKey::make(result.initiator_name, result.isid, result.target->name, options_.portal_group_tag);
  SessionTable::Entry entry{
      .id = session_id_,
      .tsih = result.tsih,
      .close =
          [ex = datamover_->executor(), weak = weak_from_this()] {
            asio::post(ex, [weak] {
              if (auto c = weak.lock()) {
                log::info("connection {}: session reinstated by a new login: closing", c->datamover_->peer());
                c->close();
              }
            });
          },
      .ended = session_end_,
  };
  auto old = registry_->sessions().replace(*session_key_, std::move(entry));
  if (!old) co_return Reinstatement::ready;
  log::info("login {}: reinstating the session of initiator={} isid=0x{} target={}: ending tsih={} first (new tsih={})",
            datamover_->peer(), log::escaped(result.initiator_name), isid_hex(result.isid),
            log::escaped(result.target->name), old->tsih, result.tsih);
  old->close();
  // Bounded: a command of the old session that the backend never completes (a hung disk, a
  // frozen FUSE file) must not hold this login until the login timeout. Not cut short by our own
  // close(): whether or not the old session ended, session_ended() must know.
  if (!co_await old->ended->wait_for(limits_.reinstate_timeout)) {
    // Our session stands for the old one from now on: whoever replaces ours waits for both
    // (SessionTable::finish()), so none of its commands can reach the LU after a newer session
    // started.
    predecessor_ = old->ended;
    if (closed_) co_return Reinstatement::closed;
    log::warn("login {}: the session it reinstates (tsih={}) has not ended within {} ms (a command is still on the "
              "backend): refusing the login with 0x0301 (service unavailable); the initiator may retry",
              datamover_->peer(), old->tsih, limits_.reinstate_timeout.count());
    co_return Reinstatement::timed_out;
  }
  log::debug("login {}: session tsih={} ended", datamover_->peer(), old->tsih);
  co_return closed_ ? Reinstatement::closed : Reinstatement::ready;
}

void Connection::session_ended() noexcept {
  if (session_key_) {
    registry_->sessions().finish(*session_key_, session_id_, session_end_, std::move(predecessor_));
  } else {
    session_end_->set();
  }
}

void Connection::open_nexus() {
  if (session_.discovery || !session_.target) return;
  // SPC-5 §7.6.4.6 / RFC 7143 §4.2.7: the iSCSI initiator port name is
  // "<InitiatorName>,i,0x<ISID in 12 hex digits>".
  std::string port = params_.initiator_name + ",i,0x" + isid_hex(session_.isid);
  // One target port per portal group: the tag is its relative target port identifier and its
  // ALUA target port group (SPC-5 §7.7.6.5, §7.7.6.6).
  // The origin (the peer's address without its port) lets an EXTENDED COPY reach another target
  // of this process only through a session there from the same address (CopyDomain).
  std::string origin = address_of_peer(peer());
  if (origin == "?") origin.clear();  // unknown: never matches
  nexus_ = session_.target->dispatcher->open_nexus(
      std::move(port), TargetPort{.relative_port = options_.portal_group_tag, .group = options_.portal_group_tag},
      std::move(origin));
  nexus_open_ = true;
}

// ---------------------------------------------------------------------------------------------
// Full-feature phase: the engine's driver
// ---------------------------------------------------------------------------------------------

void Connection::start_engine() {
  SessionEngineConfig config{
      .params = params_,
      .discovery = session_.discovery,
      .cid = session_.cid,
      .exp_cmd_sn = session_.exp_cmd_sn,
      .stat_sn = session_.stat_sn,
      .cmd_window_depth = options_.cmd_window_depth,
      .max_immediate_commands = limits_.max_immediate_commands,
      .idle_interval = limits_.idle_interval,
      .ping_timeout = limits_.ping_timeout,
      .stats = &registry_->stats(),
      .connection_stats = stats_.get(),
  };
  SessionEngineHooks hooks;
  if (!session_.discovery && session_.target) {
    hooks.plan = [this](const scsi::Lun& lun, ConstByteSpan cdb) {
      return session_.target->dispatcher->plan(nexus_, lun, cdb);
    };
    hooks.lun_exists = [this](const scsi::Lun& lun) { return session_.target->dispatcher->find(lun) != nullptr; };
  } else {
    hooks.plan = [](const scsi::Lun&, ConstByteSpan) { return CommandPlan{}; };  // never asked: discovery
  }
  hooks.send_targets = [this](const std::string& value) {
    return send_targets(*registry_, value, session_.discovery, session_.target.get(), params_.initiator_name,
                        datamover_->local(), options_.portal_group_tag, options_.tenant);
  };
  hooks.request_budget = [this](iscsi::Itt itt, std::uint64_t bytes) { return request_budget(itt, bytes); };
  // The data phase is chosen once, from the transport (TCP: R2T/Data-Out/Data-In; iSER: RDMA).
  engine_ = std::make_unique<SessionEngine>(std::move(config), std::move(hooks), datamover_->buffer_pool(),
                                            make_data_phase(datamover_->capabilities()),
                                            std::chrono::steady_clock::now());
}

std::span<std::byte> Connection::place(const iscsi::Bhs& bhs, std::uint32_t length) noexcept {
  if (!engine_) return {};
  return engine_->place(bhs, length);
}

Awaitable<void> Connection::receive_loop() {
  while (!closed_ && !engine_->ended()) {
    // PDUs already here are taken without suspending (no coroutine frame or posted completion
    // each); receive() waits for the rest. Not one `?:` with a co_await: GCC 12 destroys its
    // result early.
    auto polled = datamover_->try_receive(this);
    if (!polled) polled.emplace(co_await datamover_->receive(this));
    auto& in = *polled;
    if (!in) {
      if (in.error() != make_error_code(errc::connection_closed))
        log::info("connection {}: receive failed: {}", datamover_->peer(), in.error().message());
      co_return;
    }
    if (closed_) co_return;
    engine_->on_pdu(*in, std::chrono::steady_clock::now());
    {
      const WriterWakeAfter wake(*this);
      pump();
    }
    while (ordered_.size() > max_ordered_actions && !closed_) {
      // The writer must not wait for a send pass this receive holds (a peer that stopped reading
      // would stall every connection of the loop: limits.py immediate_reads).
      datamover_->end_burst();
      ordered_room_.reset();
      co_await ordered_room_.wait();
    }
  }
}

Awaitable<void> Connection::timer_loop() {
  auto self = shared_from_this();
  boost::system::error_code ec;
  while (!closed_) {
    const auto deadline = engine_->next_deadline();
    if (!deadline) co_return;
    timer_.expires_at(*deadline);
    co_await timer_.async_wait(use_awaitable_ec(ec));
    if (closed_) co_return;
    const auto pings = engine_->pings_sent();
    engine_->on_timer(std::chrono::steady_clock::now());
    if (engine_->pings_sent() != pings)
      log::debug("connection {}: idle for {} ms: NOP-In ping", datamover_->peer(), limits_.idle_interval.count());
    pump();
  }
}

void Connection::pump() {
  if (!engine_) return;
  bool queued = false;
  auto actions = engine_->take_actions();
  for (auto& action : actions) {
    if (auto* ex = std::get_if<ExecuteTask>(&action)) {
      if (!execute_fast(ex->itt)) {
        ++backend_running_;
        asio::co_spawn(datamover_->executor(), execute(ex->itt), asio::detached);
      }
    } else if (auto* get = std::get_if<GetWriteData>(&action)) {
      ++backend_running_;
      asio::co_spawn(datamover_->executor(), get_write_data(*get), asio::detached);
    } else if (auto* reset = std::get_if<DeviceReset>(&action)) {
      // SAM-5 §7.7, §7.10: unit attentions, RESERVE(6) released; before the TMF response leaves.
      if (nexus_open_) session_.target->dispatcher->task_management(nexus_, reset->lun, reset->what);
    } else {
      if (auto* c = std::get_if<CloseConnection>(&action)) {
        if (c->reason == "logout") {
          log::debug("connection {}: logged out", datamover_->peer());
          // RFC 7143 §11.14: a successful Logout ends the session, and with it the I_T nexus
          // (SAM-5 §6.3.4): its RESERVE(6) reservation goes now, before the Logout Response just
          // queued leaves. An initiator that has the response may at once send a command on
          // another session and must not meet that reservation (libiscsi's ALL.Sanitize.Reset
          // after .Reservations did, most runs).
          if (nexus_open_) session_.target->dispatcher->close_nexus(nexus_);
          nexus_open_ = false;
        } else {
          log::info("connection {}: {}: closing", datamover_->peer(), c->reason);
        }
      }
      ordered_.push_back(std::move(action));
      queued = true;
    }
  }
  engine_->recycle_actions(std::move(actions));
  if (queued) {
    if (writer_wake_deferred_) {
      writer_wake_pending_ = true;
    } else {
      ordered_ready_.set();
    }
  }
  // Commands the backend finished at once (a RAM file system): answered now that the loop above
  // is done with the engine's actions.
  while (!fast_done_now_.empty()) {
    FastCommand* done = fast_done_now_.back();
    fast_done_now_.pop_back();
    finish_fast(*done, done->outcome);
  }
}

void Connection::flush_pass() { ordered_ready_.set(); }

Connection::WriterWakeAfter::WriterWakeAfter(Connection& c) noexcept : connection(c), outer(!c.writer_wake_deferred_) {
  c.writer_wake_deferred_ = true;
}

Connection::WriterWakeAfter::~WriterWakeAfter() {
  if (!outer) return;
  Connection& c = connection;
  c.writer_wake_deferred_ = false;
  if (!c.writer_wake_pending_) return;
  c.writer_wake_pending_ = false;
  // Nothing holds the loop's send pass (queue depth 1, or the end of a burst): the writer, parked
  // on an empty queue, runs here and now (Event::set_now) and writes what pump() queued before
  // the receive loop reads the socket again — no posted resumption, no extra pass of the loop.
  // During a burst it is woken as before and waits for the pass to end.
  if (!c.closed_ && (c.pass_ == nullptr || !c.pass_->held())) {
    c.ordered_ready_.set_now();
  } else {
    c.ordered_ready_.set();
  }
}

Awaitable<void> Connection::writer() {
  auto self = shared_from_this();
  while (true) {
    if (ordered_.empty()) {
      ordered_room_.set();
      if (writer_stop_) break;
      ordered_ready_.reset();
      co_await ordered_ready_.wait();
      continue;
    }
    // A burst of commands or backend completions is being handled (the loop's send pass is held):
    // wait for its end and send every response it produced together. Not when the queue is at
    // its bound: the receive loop waits for room then, and the pass may be its datamover's.
    if (!writer_stop_ && pass_ != nullptr && ordered_.size() <= max_ordered_actions && pass_->defer(*this)) {
      ordered_ready_.reset();
      co_await ordered_ready_.wait();
      continue;
    }
    EngineAction action = std::move(ordered_.front());
    ordered_.pop_front();
    if (auto* batch = std::get_if<SendPdus>(&action)) {
      // The PDU batches queued behind it join it (in order): the responses of one pass leave in
      // one gather write. Every task ends with a ReleaseBudget right after its last PDUs, so the
      // releases between them wait until the joined batch was sent (a budget held a little
      // longer, never given back before its PDUs left): without that, a pass of 32 READ
      // responses was 32 writes.
      while (!ordered_.empty()) {
        if (auto* release = std::get_if<ReleaseBudget>(&ordered_.front())) {
          releases_after_send_.push_back(*release);
          ordered_.pop_front();
          continue;
        }
        auto* next = std::get_if<SendPdus>(&ordered_.front());
        if (next == nullptr) break;
        std::move(next->pdus.begin(), next->pdus.end(), std::back_inserter(batch->pdus));
        std::move(next->keep.begin(), next->keep.end(), std::back_inserter(batch->keep));
        if (engine_) engine_->recycle_batch(std::move(*next));  // its elements moved: only capacity goes back
        ordered_.pop_front();
      }
    }
    if (ordered_.size() <= max_ordered_actions) ordered_room_.set();
    if (auto* batch = std::get_if<SendPdus>(&action)) {
      // One ordered batch: a read's Data-In PDUs and its status in one gather write on TCP.
      if (splice_data_in_ && !closed_) {
        if (!data_in_pipes_.mark(batch->pdus)) {
          // A spliced READ's Data-In not taking its pipe's bytes in order: never send wrong data.
          log::error("connection {}: a Data-In does not follow its READ's spliced data in order; closing",
                     datamover_->peer());
          close();
        }
        if (const auto spliced = data_in_pipes_.take_marked_bytes(); spliced != 0)
          registry_->stats().spliced_data_in_bytes.fetch_add(spliced, std::memory_order_relaxed);
      }
      if (!closed_) {
        // One non-blocking gather write on this thread when the socket takes it all (the usual
        // case): no send_batch() coroutine frames per batch.
        std::error_code ec;
        switch (datamover_->try_send_now(batch->pdus)) {
          case datamover::Datamover::SendNow::sent: break;
          case datamover::Datamover::SendNow::queued: ec = co_await datamover_->finish_send(); break;
          case datamover::Datamover::SendNow::refused: ec = co_await datamover_->send_batch(std::move(batch->pdus)); break;
        }
        // Sent (or failed): its buffers go back now, and its vectors' capacity serves a later
        // batch. Also after a queued send (the socket took part of it: a 1 MiB Data-In the
        // peer is slow to read), where the datamover handed back an emptied vector for the PDUs
        // it took; dropping the batch there made the engine allocate two vectors for a later
        // one, and grow them again when a pass joined batches into it.
        if (engine_) engine_->recycle_batch(std::move(*batch));
        if (ec) {
          log::debug("connection {}: send failed: {}", datamover_->peer(), ec.message());
          close();
        }
      }
    } else if (auto* put = std::get_if<PutReadData>(&action)) {
      if (!closed_) {
        // iSER: this RDMA Write and what the pass queued right behind it (more reads' RDMA Writes,
        // their SCSI Responses, budget releases) as one chain of work requests: one ibv_post_send
        // per pass, and no wait for a write's completion before its response (the RC QP keeps
        // their order). The actions stay here until the chain completed (their buffers).
        const auto itt = put->itt;
        std::vector<EngineAction> held;
        auto steps = chain_steps(std::move(action), held);
        if (ordered_.size() <= max_ordered_actions) ordered_room_.set();
        if (const auto ec = co_await datamover_->send_chain(std::move(steps.first))) {
          log::info("connection {}: RDMA Write or send failed: itt=0x{:08x} ({} RDMA Writes in the chain) error={}",
                    datamover_->peer(), iscsi::to_u32(itt), steps.second, ec.message());
          close();
        }
        for (auto& done : held)
          if (auto* sent = std::get_if<SendPdus>(&done); sent != nullptr && engine_)
            engine_->recycle_batch(std::move(*sent));
      }
    } else if (auto* release = std::get_if<ReleaseBudget>(&action)) {
      release_budget(*release);
    } else if (std::holds_alternative<CloseConnection>(action)) {
      close();
    }
    for (const auto& release : releases_after_send_) release_budget(release);
    releases_after_send_.clear();
  }
  writer_done_.set();
}

std::pair<std::vector<datamover::ChainStep>, std::size_t> Connection::chain_steps(EngineAction first,
                                                                                  std::vector<EngineAction>& held) {
  std::vector<datamover::ChainStep> steps;
  std::size_t puts = 0;
  held.push_back(std::move(first));
  while (true) {
    EngineAction& a = held.back();
    if (auto* put = std::get_if<PutReadData>(&a)) {
      steps.emplace_back(datamover::PutDataStep{
          .dest = put->dest,
          .offset = 0,
          .source = Buffer{.bytes = put->buffer.bytes().first(put->bytes), .lkey = put->buffer.buffer().lkey}});
      ++puts;
    } else if (auto* batch = std::get_if<SendPdus>(&a)) {
      for (auto& pdu : batch->pdus) steps.emplace_back(std::move(pdu));
    }
    // What comes next joins the chain: releases wait for it (as after a joined send), puts and
    // sends go in; anything else ends it.
    while (!ordered_.empty() && std::holds_alternative<ReleaseBudget>(ordered_.front())) {
      releases_after_send_.push_back(std::get<ReleaseBudget>(ordered_.front()));
      ordered_.pop_front();
    }
    if (ordered_.empty() ||
        !(std::holds_alternative<PutReadData>(ordered_.front()) || std::holds_alternative<SendPdus>(ordered_.front())))
      break;
    held.push_back(std::move(ordered_.front()));
    ordered_.pop_front();
  }
  return {std::move(steps), puts};
}

Connection::CommandStart Connection::command_started(iscsi::Itt itt, const EngineTask& task) {
  const auto cdb = task.cdb();
  // What arrived, per transport (iserkit-target prints the largest at exit: the lab's proof that
  // commands above 512 KiB came over iSER).
  note_command_bytes(datamover_->transport() == datamover::Transport::iser ? CommandTransport::iser : CommandTransport::tcp,
                     task.plan.transfer_length_bytes);
  return CommandStart{
      .itt = itt,
      .kind = static_cast<std::size_t>(op_kind(cdb.empty() ? 0 : static_cast<std::uint8_t>(cdb[0]))),
      .out_bytes = task.plan.direction == DataDirection::to_target ? task.plan.transfer_length_bytes : 0,
      .start = std::chrono::steady_clock::now(),
      .unit_stats = task.plan.unit != nullptr ? &task.plan.unit->stats() : nullptr};
}

Awaitable<void> Connection::execute(iscsi::Itt itt) {
  auto self = shared_from_this();
  // The engine keeps the task (CDB, plan, buffer) until on_task_executed(), aborted or not.
  const EngineTask* task = engine_->task(itt);
  if (task == nullptr) {
    engine_->on_task_executed(itt, ScsiOutcome::good());
    pump();
    backend_done();
    co_return;
  }
  const CommandStart started = command_started(itt, *task);
  const ScsiOutcome outcome = co_await session_.target->dispatcher->execute(nexus_, task->command.lun, task->cdb(),
                                                                           task->plan, engine_->task_data(itt));
  executed(started, outcome);
}

bool Connection::execute_fast(iscsi::Itt itt) {
  const EngineTask* task = engine_->task(itt);
  if (task == nullptr) return false;
  if (fast_free_.empty()) {
    fast_commands_.push_back(std::make_unique<FastCommand>());  // only while the commands in flight grow
    fast_free_.push_back(fast_commands_.back().get());
  }
  FastCommand& f = *fast_free_.back();
  f.executor = datamover_->executor();
  f.splice_pipe = -1;
  f.pipe_bytes = 0;
  if (splice_data_in_ && task->plan.direction == DataDirection::from_target && task->plan.unit != nullptr) {
    f.pipe_bytes = task->plan.transfer_length_bytes;
    f.splice_pipe = data_in_pipes_.take(task->plan.lba * task->plan.unit->block_size_bytes(), f.pipe_bytes);
  }
  const auto started = session_.target->dispatcher->start_media_io(task->command.lun, task->plan,
                                                                   engine_->task_data(itt), f);
  if (started == MediaIoStart::unsupported) {
    if (f.splice_pipe >= 0) data_in_pipes_.started(f.splice_pipe, itt, false, 0);
    return false;
  }
  fast_free_.pop_back();
  f.started = command_started(itt, *task);
  ++backend_running_;
  if (started == MediaIoStart::completed) {
    fast_done_now_.push_back(&f);
  } else {
    f.owner = shared_from_this();
  }
  return true;
}

void Connection::FastCommand::complete(ScsiOutcome result) noexcept {
  // Hold the connection through finish_fast(): it may drop the last other reference.
  const std::shared_ptr<Connection> self = std::move(owner);
  const WriterWakeAfter wake(*self);  // called from the io_uring reaper, outside any pump()
  self->finish_fast(*this, result);
}

void Connection::finish_fast(FastCommand& command, const ScsiOutcome& outcome) noexcept {
  const CommandStart started = command.started;
  // A READ spliced into a pipe: the pipe is the task's until it ends (its Data-In PDUs take from
  // it), registered before the engine produces them.
  if (command.splice_pipe >= 0)
    data_in_pipes_.started(command.splice_pipe, started.itt, command.spliced && outcome.status == scsi::Status::good,
                           command.pipe_bytes);
  fast_free_.push_back(&command);
  executed(started, outcome);
}

void Connection::executed(const CommandStart& started, const ScsiOutcome& outcome) {
  const std::size_t kind = started.kind;
  LogicalUnitStats* unit_stats = started.unit_stats;
  // Counted here, not per PDU: relaxed atomics, no lock (target_stats.hpp).
  auto& stats = registry_->stats();
  stats.latency[kind].observe(std::chrono::steady_clock::now() - started.start);
  stats.commands[kind].fetch_add(1, std::memory_order_relaxed);
  stats_->commands[kind].fetch_add(1, std::memory_order_relaxed);
  if (unit_stats != nullptr) unit_stats->commands[kind].fetch_add(1, std::memory_order_relaxed);
  if (outcome.status == scsi::Status::good) {
    const std::uint64_t moved = outcome.data_length_bytes + started.out_bytes;
    stats.bytes[kind].fetch_add(moved, std::memory_order_relaxed);
    stats_->bytes[kind].fetch_add(moved, std::memory_order_relaxed);
    if (unit_stats != nullptr) unit_stats->bytes[kind].fetch_add(moved, std::memory_order_relaxed);
  }
  const iscsi::Itt itt = started.itt;
  engine_->on_task_executed(itt, outcome);
  pump();
  backend_done();
}

Awaitable<void> Connection::get_write_data(GetWriteData get) {
  auto self = shared_from_this();
  std::error_code ec = make_error_code(errc::connection_closed);
  const EngineTask* task = engine_->task(get.itt);
  if (task != nullptr && !closed_) {
    const Buffer dest{.bytes = task->buffer.bytes().subspan(get.buffer_offset, get.length),
                      .lkey = task->buffer.buffer().lkey};
    ec = co_await datamover_->get_data(get.source, 0, dest);
    if (ec)
      log::info("connection {}: RDMA Read failed: itt=0x{:08x} bytes={} error={}", datamover_->peer(),
                iscsi::to_u32(get.itt), get.length, ec.message());
  }
  engine_->on_write_data(get.itt, ec);
  pump();
  backend_done();
}

void Connection::backend_done() noexcept {
  if (--backend_running_ == 0) backend_idle_.set();
}

// ---------------------------------------------------------------------------------------------
// Payload budgets (payload_ledger.hpp): the connection's, then the target's, in request order
// ---------------------------------------------------------------------------------------------

bool Connection::request_budget(iscsi::Itt itt, std::uint64_t bytes) {
  const bool now = ledger_.request(itt, bytes);
  stats_->payload_budget_bytes.store(ledger_.connection_used(), std::memory_order_relaxed);
  return now;
}

void Connection::release_budget(const ReleaseBudget& release) {
  if (splice_data_in_) data_in_pipes_.end(release.itt);  // the task ended: its READ's pipe (if any) comes back
  std::vector<iscsi::Itt> granted;  // allocates only when a waiting request is granted
  (void)ledger_.release(release.itt, granted);
  stats_->payload_budget_bytes.store(ledger_.connection_used(), std::memory_order_relaxed);
  for (const iscsi::Itt itt : granted) {
    engine_->on_budget_granted(itt);
    pump();
  }
}

void Connection::shared_budget_granted(std::uint64_t hold) {
  if (auto itt = ledger_.on_shared_grant(hold)) {
    engine_->on_budget_granted(*itt);
    pump();
  }
}

PayloadLedger::SharedAsk Connection::SharedBudgetPort::request(std::uint64_t hold, std::uint64_t bytes) {
  SharedPayloadBudget& shared = *connection.global_budget_;
  const std::uint64_t id = shared.next_id();
  // Runs on the releasing connection's thread: hand the grant over to ours.
  auto on_grant = [self = connection.shared_from_this(), hold] {
    asio::post(self->datamover_->executor(), [self, hold] { self->shared_budget_granted(hold); });
  };
  if (shared.request(id, bytes, std::move(on_grant))) return {.id = id, .granted = true};
  // One line per episode of the shared budget being full (not one per waiting command).
  if (auto used = shared.take_full_notice())
    log::info("connection {}: {} payload budget full ({} of {} bytes held): commands wait for buffers",
              connection.peer(), shared.name(), *used, shared.limit());
  return {.id = id, .granted = false};
}

bool Connection::SharedBudgetPort::cancel(std::uint64_t shared_id) { return connection.global_budget_->cancel(shared_id); }

void Connection::SharedBudgetPort::release(std::uint64_t bytes) { connection.global_budget_->release(bytes); }

}  // namespace iserkit::target

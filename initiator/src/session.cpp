// The initiator session's coroutine driver around SessionEngine (session_engine.hpp, where every
// RFC 7143 rule lives). The driver only moves things between the engine and the Datamover:
//  - one receive loop: Datamover::receive(this) → SessionEngine::place() picks where Data-In
//    lands (the caller's buffer) → SessionEngine::on_pdu();
//  - one timer: waits for SessionEngine::next_deadline() and calls on_timer() (command timeouts,
//    request timeouts, keepalive pings, a target-requested logout);
//  - one sender: drains the engine's PDU batches through Datamover::send_batch() in the order the
//    engine produced them;
//  - execute()/task_management()/logout() submit to the engine and await their task's completion.
// No polling: everything waits on an Event, a Completion or the timer.
//
// RECOVERY: when the engine reports a lost connection (EngineActions::connection_lost), the driver
// resets the datamover (Datamover::abort: its send queue is dropped, never delivered later),
// drops the PDUs not sent yet (the engine sends their commands again) and starts a reconnect
// coroutine: it waits (reconnect_delay_min doubling to reconnect_delay_max,
// jittered), logs in again through the Reconnector (same ISID, TSIH 0), hands the new datamover a
// new receive loop and tells the engine (on_reconnected()). Each connection has a generation: a
// receive loop or a send that belongs to an older one never touches the engine again. The
// replacement timeout itself is the engine's (a deadline like any other). Past it (EngineActions::
// gave_up, SessionOptions::reconnect_after_give_up) the same reconnect coroutine goes on with the
// same bounded back-off — one timer, one login at a time, nothing queued (the engine fails new
// commands at once) — and logs a failed attempt once a minute instead of each time.
//
// NOTES ON THE THREAD MODEL: everything here runs on the session's executor, one thread.
// BUFFER LIFETIME: a PDU the engine emits may borrow a task's buffer (OutgoingPdu::borrower). A
// task's completion is handed to its caller only after every such PDU has been sent (or failed),
// so when execute() returns no queued PDU references the caller's buffer; the engine itself holds
// back completions while the datamover is receiving into the buffer. That holds whatever ends the
// task — its timeout, a lost connection (recovered or not), close(), an early response, a Reject:
// PDUs still in the outbox count until dropped, the batch being written counts until
// send_batch() returned, and a closed datamover fails what it holds without reading it
// (tests/unit/initiator/session_buffer_lifetime_test.cpp, over a held send and a full socket).
// Closing the datamover in the same apply() that reports the loss also cancels a receive still
// filling a buffer, before any caller resumes (completions are posted, never run inline).
#include "iserkit/initiator/session.hpp"

#include <optional>
#include <span>
#include <random>
#include <unordered_map>
#include <vector>

#include "iserkit/common/backoff.hpp"
#include "iserkit/common/completion.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/common/fifo.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/initiator/errors.hpp"
#include "login_io.hpp"
#include "session_engine.hpp"
#include "session_start.hpp"
#include "transport_select.hpp"

namespace iserkit::initiator {
namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

struct Session::Impl final : datamover::DataPlacement, SendPass::Flusher {
  Impl(asio::any_io_executor e, std::unique_ptr<datamover::Datamover> d, SessionOptions o, EngineConfig config,
       EngineStart start)
      : ex(std::move(e)),
        pass(o.batch_sends ? &SendPass::of(ex) : nullptr),
        dm(std::move(d)),
        options(std::move(o)),
        engine(config, start, Clock::now()),
        timer(ex),
        reconnect_timer(ex) {}

  asio::any_io_executor ex;
  SendPass* pass;  // SessionOptions::batch_sends: the loop's send pass, else null
  // Shared: a loop still awaiting the previous connection keeps it alive until it returns.
  std::shared_ptr<datamover::Datamover> dm;
  SessionOptions options;
  iscsi::OperationalParameters params;
  std::string target_name;
  SessionEngine engine;

  /// A SCSI command's buffers as a connection's datamover prepared them (execute()'s frame owns
  /// it). After a reconnect a queued command is prepared again on the new datamover (iSER: its
  /// STags are the new connection's), see prepare_again().
  struct Prepared {
    std::span<std::byte> data_in;         // the caller's spans, as submitted
    std::span<const std::byte> data_out;
    datamover::TaskData data;             // what the engine's task points at
    std::uint64_t connection = 0;         // the datamover it was prepared on (connection_serial)
    std::vector<datamover::TaskData> retired;  // earlier ones a PDU of a lost connection still held
  };
  struct Started;
  struct Waiter {
    Completion done;
    TaskOutcome outcome;
    Prepared* prepared = nullptr;  // SCSI commands
    CommandCallback* callback = nullptr;  // start(): told instead of `done`
    Started* started = nullptr;           // start(): the slot this waiter belongs to
  };
  /// A command of start(): its waiter and buffers, pooled (no allocation per command once warm).
  struct Started {
    Waiter waiter;
    Prepared prepared;
  };
  std::vector<std::unique_ptr<Started>> started_all;  // every one made (at most the commands in flight)
  std::vector<Started*> started_free;
  std::unordered_map<TaskId, Waiter*> waiters;
  Fifo<OutgoingPdu> outbox;                           // PDUs in the order they must leave
  Event outbox_ready;                                  // the sender has work (or the session ended)
  std::vector<datamover::PduOut> send_pdus;           // send_outbox()'s batch (capacity kept)
  bool sender_busy = false;                            // send_outbox() runs (one sender at a time)
  bool defer_wake = false;                             // apply() leaves waking the sender to its caller
  std::vector<TaskId> send_borrowers;                  // send_outbox()'s batch: whose buffers it points into
  std::unordered_map<TaskId, std::uint32_t> borrowed;  // unsent PDUs that point into a task's buffer
  std::unordered_map<TaskId, TaskOutcome> held;        // completions waiting for those PDUs
  asio::steady_timer timer;
  Clock::time_point timer_armed_for = Clock::time_point::max();
  bool ended = false;
  // recovery
  std::weak_ptr<Session> owner;
  Reconnector reconnect;
  std::uint64_t generation = 0;  // of the connection in use
  std::uint64_t connection_serial = 0;  // bumped whenever `dm` is replaced by a new connection
  asio::steady_timer reconnect_timer;
  unsigned attempts = 0;         // logins tried since the connection was lost
  std::optional<Clock::time_point> next_attempt;  // while reconnect_loop waits: when it tries again
  bool hurry = false;  // reconnect_now(): the wait was cut short; the back-off starts again
  std::error_code last_attempt_error;             // of the last failed login since the loss
  // Past the replacement timeout a failed login is logged once a minute (with how many were not).
  static constexpr std::chrono::seconds failed_login_log_interval{60};
  std::optional<Clock::time_point> failed_login_logged_at;
  unsigned failed_logins_not_logged = 0;

  void emit(SessionEvent::Kind kind, std::error_code ec) {
    if (!options.on_event) return;
    options.on_event(SessionEvent{.kind = kind, .error = ec, .attempts = attempts});
  }

  // Nodes of the two maps above kept for reuse: no allocation per command in steady state.
  static constexpr std::size_t max_spare_nodes = 256;
  std::vector<decltype(waiters)::node_type> spare_waiter_nodes;
  std::vector<decltype(borrowed)::node_type> spare_borrowed_nodes;

  std::uint32_t& borrowed_count(TaskId id) {
    if (auto it = borrowed.find(id); it != borrowed.end()) return it->second;
    if (spare_borrowed_nodes.empty()) return borrowed[id];
    auto node = std::move(spare_borrowed_nodes.back());
    spare_borrowed_nodes.pop_back();
    node.key() = id;
    node.mapped() = 0;
    return borrowed.insert(std::move(node)).position->second;
  }

  // ---- the engine's actions ----
  void apply() {
    EngineActions a = engine.take_actions();
    if (!a.pdus.empty()) {
      for (auto& p : a.pdus) {
        if (p.borrower != 0) ++borrowed_count(p.borrower);
        outbox.push_back(std::move(p));
      }
      // During a burst of received PDUs (the send pass held) the sender waits for its end.
      if (!defer_wake && !(pass != nullptr && pass->defer(*this))) outbox_ready.set();
    }
    for (auto& c : a.completions) {
      if (borrowed.contains(c.id)) {
        held.emplace(c.id, std::move(c));
      } else {
        deliver(std::move(c));
      }
    }
    if (a.connection_lost && !a.ended && !ended) lose_connection(*a.connection_lost);
    if (a.gave_up && !a.ended && !ended) {
      log::warn("session: failed: target={} error={}: commands fail until a login succeeds; logging in again every "
                "{} ms at most", log::escaped(target_name), a.gave_up->message(),
                std::max(options.reconnect_delay_max, options.reconnect_delay_min).count());
      failed_login_logged_at.reset();
      failed_logins_not_logged = 0;
      emit(SessionEvent::Kind::gave_up, *a.gave_up);
    }
    if (a.ended && !ended) {
      ended = true;
      if (*a.ended == make_error_code(errc::session_closed)) {
        log::debug("session: closed: target={} peer={}", log::escaped(target_name), dm->peer());
      } else {
        log::warn("session: failed: target={} peer={} error={}", log::escaped(target_name), dm->peer(), a.ended->message());
      }
      // A failed session's connection is reset, not closed: nothing still queued on it may reach
      // the target after the caller (a multipath device) sent its commands elsewhere.
      if (*a.ended == make_error_code(errc::session_closed)) {
        dm->close();
      } else {
        dm->abort();
      }
      outbox_ready.set();
      timer.cancel();
      reconnect_timer.cancel();
      if (*a.ended == make_error_code(errc::session_lost)) emit(SessionEvent::Kind::gave_up, *a.ended);
    } else if (!ended && engine.next_deadline() < timer_armed_for) {
      timer.cancel();  // re-plan for the earlier deadline
    }
    engine.recycle_actions(std::move(a));
  }

  void deliver(TaskOutcome o) {
    auto it = waiters.find(o.id);
    if (it == waiters.end()) return;  // the session's own tasks
    Waiter* w = it->second;
    auto node = waiters.extract(it);
    if (spare_waiter_nodes.size() < max_spare_nodes) spare_waiter_nodes.push_back(std::move(node));
    if (w->callback != nullptr) {
      finish_started(*w->started, std::move(o));
      return;
    }
    w->outcome = std::move(o);
    w->done.complete();
  }

  /// A start() command ended: its result as execute() makes it, the slot back to the pool, then
  /// the caller told.
  void finish_started(Started& st, TaskOutcome o) {
    CommandCallback* cb = st.waiter.callback;
    Result<scsi::ScsiResult> result = command_result(std::move(o), st.prepared);
    st.waiter.callback = nullptr;
    st.prepared = Prepared{};
    started_free.push_back(&st);
    cb->command_done(std::move(result));
  }


  /// The engine recovers from a lost connection: close it, forget what was not sent on it, and
  /// log in again in the background.
  void lose_connection(std::error_code ec) {
    ++generation;
    attempts = 0;
    last_attempt_error.clear();
    log::warn("session: connection lost: target={} peer={} error={}: reconnecting for up to {} ms",
              log::escaped(target_name), dm->peer(), ec.message(), options.replacement_timeout.count());
    // Reset (SO_LINGER 0), not closed: the bytes still in the lost connection's send queue are
    // dropped here, before any of its commands is sent again — on the next connection, or by a
    // multipath device on another path once this session gives up. A graceful close would leave
    // them to an orphaned socket that delivers them when the link returns, after newer writes to
    // the same blocks (tests/integration/recovery/nbd_multipath_stale_write_test.sh).
    dm->abort();
    // Those PDUs belonged to the lost connection; the engine numbers and sends the commands again.
    while (!outbox.empty()) {
      const TaskId b = outbox.front().borrower;
      outbox.pop_front();
      returned(b);
    }
    emit(SessionEvent::Kind::connection_lost, ec);
    if (auto self = owner.lock()) asio::co_spawn(ex, reconnect_loop(self, generation), asio::detached);
  }

  Awaitable<void> reconnect_loop(std::shared_ptr<Session> self, std::uint64_t gen) {
    auto still_wanted = [&] { return !ended && engine.recovering() && gen == generation; };
    std::minstd_rand random(static_cast<std::uint32_t>(Clock::now().time_since_epoch().count()));
    // Doubling, bounded by reconnect_delay_max (common/backoff.hpp).
    Backoff backoff(std::max(options.reconnect_delay_min, std::chrono::milliseconds(1)), options.reconnect_delay_max);
    while (still_wanted()) {
      // Jitter: somewhere between half the delay and all of it, so many initiators that lost the
      // same target do not all come back at the same instant.
      const auto wait = backoff.jittered(random);
      reconnect_timer.expires_after(wait);
      next_attempt = Clock::now() + wait;
      boost::system::error_code ec;
      co_await reconnect_timer.async_wait(use_awaitable_ec(ec));
      next_attempt.reset();
      if (!still_wanted()) break;
      if (hurry) {
        hurry = false;
        backoff.reset();
        log::info("session: reconnect: logging in now (told the target is back): target={}", log::escaped(target_name));
      }
      ++attempts;
      engine.count_reconnect_attempt();
      auto r = co_await reconnect();
      if (!still_wanted()) {
        if (r) r->datamover->close();
        break;
      }
      if (!r) {
        last_attempt_error = r.error();
        log_failed_login(r.error());
        // Bounded: reconnect_delay_max also between the attempts after the replacement timeout.
        backoff.failed();
        continue;
      }
      const bool had_failed = engine.failed();
      dm = std::shared_ptr<datamover::Datamover>(std::move(r->datamover));
      dm->set_send_pass(pass);
      ++connection_serial;
      params = r->parameters;
      prepare_again();
      engine.on_reconnected(r->start, write_limits_of(params), Clock::now());
      log::warn("session: recovered{}: target={} peer={} after {} attempt(s)",
                had_failed ? " after the replacement timeout" : "", log::escaped(target_name), dm->peer(), attempts);
      asio::co_spawn(ex, receive_loop(self, dm, gen), asio::detached);
      apply();
      emit(SessionEvent::Kind::recovered, {});
      break;
    }
    next_attempt.reset();
  }

  /// A background login failed: each one while commands wait; past the replacement timeout, when
  /// the target may stay away for days, one line a minute.
  void log_failed_login(std::error_code ec) {
    if (!engine.failed()) {
      log::info("session: reconnect: attempt {} failed: target={} error={}", attempts, log::escaped(target_name),
                ec.message());
      return;
    }
    const auto now = Clock::now();
    if (failed_login_logged_at && now - *failed_login_logged_at < failed_login_log_interval) {
      ++failed_logins_not_logged;
      return;
    }
    log::warn("session: reconnect: attempt {} failed: target={} error={}{}: commands fail until a login succeeds",
              attempts, log::escaped(target_name), ec.message(),
              failed_logins_not_logged == 0
                  ? std::string{}
                  : " (" + std::to_string(failed_logins_not_logged) + " more failed since the last report)");
    failed_login_logged_at = now;
    failed_logins_not_logged = 0;
  }

  /// After a reconnect, before the queued commands go out again: each one's buffers are prepared
  /// again by the new connection's datamover (RFC 7145 §9.2: the STags a SCSI Command carries are
  /// the connection's; a bounce buffer from the old connection's pool is given back). A command
  /// whose buffers cannot be prepared (no bounce memory) fails with that error. The descriptor
  /// being replaced is kept until the command ends if a PDU of the lost connection still points
  /// at it (the sender has not heard back from that connection yet).
  void prepare_again() {
    std::vector<std::pair<TaskId, std::error_code>> failed;
    for (auto& [id, w] : waiters) {
      Prepared* p = w->prepared;
      if (p == nullptr || p->connection == connection_serial) continue;
      if (engine.state(id) != TaskState::queued_for_window) continue;
      auto fresh = dm->prepare_task_data(p->data_in, p->data_out);
      if (!fresh) {
        failed.emplace_back(id, fresh.error());
        continue;
      }
      if (borrowed.contains(id)) p->retired.push_back(std::move(p->data));
      p->data = std::move(*fresh);
      p->connection = connection_serial;
      engine.rebind_task_data(id, p->data.data_in(), p->data.data_out(), &p->data);
    }
    for (const auto& [id, ec] : failed) engine.fail_queued(id, ec);
  }

  /// A sent (or failed) PDU no longer references its task's buffer.
  void returned(TaskId borrower) {
    if (borrower == 0) return;
    auto it = borrowed.find(borrower);
    if (it == borrowed.end() || --it->second > 0) return;
    auto node = borrowed.extract(it);
    if (spare_borrowed_nodes.size() < max_spare_nodes) spare_borrowed_nodes.push_back(std::move(node));
    if (auto h = held.find(borrower); h != held.end()) {
      TaskOutcome o = std::move(h->second);
      held.erase(h);
      deliver(std::move(o));
    }
  }

  /// Registers `w` as task `id`'s waiter (a spare map node when there is one: no allocation).
  void add_waiter(TaskId id, Waiter& w) {
    if (spare_waiter_nodes.empty()) {
      waiters.emplace(id, &w);
      return;
    }
    auto node = std::move(spare_waiter_nodes.back());
    spare_waiter_nodes.pop_back();
    node.key() = id;
    node.mapped() = &w;
    waiters.insert(std::move(node));
  }

  /// Waits for the outcome of a task just submitted (`prepared`: a SCSI command's buffers).
  Awaitable<TaskOutcome> await_task(TaskId id, Prepared* prepared = nullptr) {
    Waiter w;
    w.prepared = prepared;
    add_waiter(id, w);
    // The command's own coroutine sends what the engine produced when no send is under way: no
    // post and no resumption of the send loop per command (that hop cost about 14 % of the
    // bridge's instructions per 4 KiB read at QD1, docs/performance.md). While a send is under way
    // its sender takes these PDUs too, in order, when its write completes.
    // During a burst of received PDUs (the send pass held: other commands are being issued in the
    // same pass) the PDUs wait for the pass to end and leave together (flush_pass()).
    defer_wake = true;
    apply();
    defer_wake = false;
    if (!outbox.empty() && !sender_busy && !(pass != nullptr && pass->defer(*this))) {
      PendingSend pending;
      if (!try_send_outbox(pending)) co_await send_outbox(std::move(pending));
    }
    co_await w.done.wait();
    co_return std::move(w.outcome);
  }

  // ---- SendPass::Flusher: the pass ended; what it queued goes out in one batch ----
  void flush_pass() override {
    if (!outbox.empty()) outbox_ready.set();
  }

  // ---- DataPlacement: Data-In lands in the command's buffer at BufferOffset ----
  std::span<std::byte> place(const iscsi::Bhs& bhs, std::uint32_t length) noexcept override {
    return engine.place(bhs, length);
  }

  // ---- the three loops ----
  Awaitable<void> receive_loop(std::shared_ptr<Session> self, std::shared_ptr<datamover::Datamover> d,
                               std::uint64_t gen) {
    while (!ended && gen == generation) {
      // PDUs already here are taken without suspending (no coroutine frame or posted completion
      // each); receive() waits for the rest. Not one `?:` with a co_await: GCC 12 destroys its
      // result early.
      auto polled = d->try_receive(this);
      if (!polled) polled.emplace(co_await d->receive(this));
      auto& in = *polled;
      if (gen != generation) break;  // a lost connection's last receive: the engine moved on
      if (!in) {
        engine.on_receive_ended();
        // While logging out the target closing the connection is the expected end.
        if (engine.phase() == SessionPhase::logging_out) {
          engine.fail_session(make_error_code(errc::session_closed));
        } else {
          engine.connection_failed(make_error_code(errc::connection_closed), Clock::now());
        }
        apply();
        break;
      }
      engine.on_pdu(*in, Clock::now());
      apply();
    }
    (void)self;
  }

  Awaitable<void> timer_loop(std::shared_ptr<Session> self) {
    while (!ended) {
      const auto now = Clock::now();
      timer_armed_for = engine.next_deadline();
      timer.expires_at(std::min(timer_armed_for, now + std::chrono::hours(1)));
      boost::system::error_code ec;
      co_await timer.async_wait(use_awaitable_ec(ec));
      timer_armed_for = Clock::time_point::max();
      if (ended) break;
      const auto at = Clock::now();
      if (at >= engine.next_deadline()) {
        engine.on_timer(at);
        apply();
      }
    }
    (void)self;
  }

  // Parked on outbox_ready (an Event this Impl owns) the sender holds no strong reference to the
  // session: the parked coroutine's handler lives in the Event, so a strong one would be a cycle
  // (Impl → Event → handler → frame → Session → Impl) that nothing breaks when the io_context stops
  // with the session still open. If the session is destroyed meanwhile, the Event's destructor
  // drops the handler and the frame is destroyed without resuming; if it was destroyed after set()
  // posted the resumption, `weak` (a frame local) says so before `this` is touched.
  // It sends what the loops (receive, timer, recovery) queue; a command's coroutine sends its own
  // PDUs when no send is under way (await_task), and a running send_outbox() takes everything.
  Awaitable<void> send_loop(std::weak_ptr<Session> weak) {
    while (true) {
      auto self = weak.lock();
      if (!self) co_return;
      if (handoff) {
        // start() began a batch the socket did not take whole (sender_busy is set for it).
        PendingSend pending = std::move(*handoff);
        handoff.reset();
        co_await send_outbox(std::move(pending));
        continue;
      }
      if (outbox.empty() || sender_busy) {
        if (ended) break;  // a busy sender drains the outbox
        outbox_ready.reset();
        self.reset();
        co_await outbox_ready.wait();
        continue;
      }
      PendingSend pending;
      if (!try_send_outbox(pending)) co_await send_outbox(std::move(pending));
    }
  }

  /// Sends every queued PDU in the order the engine produced it, batch by batch, until the outbox
  /// is empty — PDUs queued while a batch is being written included. Only one runs at a time
  /// (sender_busy). The caller holds a strong reference to the session.
  /// What send_outbox_now() left to wait for: nothing (the outbox is empty and every batch left),
  /// or the last batch, which the socket did not take at once.
  struct PendingSend {
    datamover::Datamover::SendNow how = datamover::Datamover::SendNow::sent;  // sent: nothing
    std::shared_ptr<datamover::Datamover> dm;  // the connection the batch was made for
    std::uint64_t generation = 0;
  };
  /// A batch start() began that the socket did not take whole: the send loop finishes it.
  std::optional<PendingSend> handoff;

  /// send_outbox()'s part without a coroutine frame: batch after batch, each one non-blocking
  /// gather write, as long as the socket takes every batch at once (the usual case). Returns the
  /// batch that must be waited for, if any (its PDUs in send_pdus, its borrowers in send_borrowers).
  /// The caller set sender_busy.
  PendingSend send_outbox_now() {
    while (!outbox.empty()) {
      // A member: its capacity is kept from batch to batch (sent at once: no allocation).
      auto& batch = send_pdus;
      batch.clear();
      batch.reserve(outbox.size());
      send_borrowers.clear();
      while (!outbox.empty()) {
        batch.push_back(std::move(outbox.front().pdu));
        send_borrowers.push_back(outbox.front().borrower);
        outbox.pop_front();
      }
      PendingSend p{.how = dm->try_send_now(batch), .dm = dm, .generation = generation};
      if (p.how != datamover::Datamover::SendNow::sent) return p;
      batch_sent(p.generation, {});
    }
    return {};
  }

  /// A batch's end: its borrowers' buffers are free; a failed send fails the connection it was
  /// made for (unless the session moved on since).
  void batch_sent(std::uint64_t gen, std::error_code ec) {
    for (TaskId b : send_borrowers) returned(b);
    if (ec && !ended && gen == generation) {
      engine.connection_failed(make_error_code(errc::connection_closed), Clock::now());
      apply();
    }
  }

  /// Sends every queued PDU in the order the engine produced it, batch by batch, until the outbox
  /// is empty — PDUs queued while a batch is being written included. Only one runs at a time
  /// (sender_busy, set by try_send_outbox()). The caller holds a strong reference to the session.
  /// Called only after try_send_outbox() left a batch `p` to wait for.
  Awaitable<void> send_outbox(PendingSend p) {
    while (p.how != datamover::Datamover::SendNow::sent) {
      std::error_code ec;
      if (p.how == datamover::Datamover::SendNow::queued) {
        ec = co_await p.dm->finish_send();
      } else {
        ec = co_await p.dm->send_batch(std::move(send_pdus));
      }
      batch_sent(p.generation, ec);
      p = send_outbox_now();
    }
    sender_busy = false;
  }

  /// send_outbox() without a coroutine frame when every batch leaves at once: returns true when
  /// the outbox was sent (or another sender runs); false with `pending` set when a batch must be
  /// waited for (then co_await send_outbox(std::move(pending))).
  bool try_send_outbox(PendingSend& pending) {
    if (sender_busy) return true;
    sender_busy = true;
    pending = send_outbox_now();
    if (pending.how == datamover::Datamover::SendNow::sent) {
      sender_busy = false;
      return true;
    }
    return false;
  }

  // ---- commands ----
  // `req` is taken by value: the caller's CommandRequest need not outlive the call.
  /// execute()'s and start()'s submission: the checks, the buffers as the connection's datamover
  /// prepares them (into `prepared`: iSER's registered memory whose STags the command carries,
  /// RFC 7145 §9.2; TCP's spans as they are; prepared again on the new datamover if the command
  /// is re-issued after a reconnect), the engine's task. Errors: those returned before anything
  /// is sent.
  Result<TaskId> submit_command(const CommandRequest& req, Prepared& prepared) {
    if (!req.data_in.empty() && !req.data_out.empty()) return fail(errc::invalid_argument);
    if (req.data_in.size() > 0xffffffffu || req.data_out.size() > 0xffffffffu) return fail(errc::invalid_argument);
    if (!engine.accepting()) return fail(engine.error() ? engine.error() : make_error_code(errc::session_closed));
    if (engine.failed()) return fail(errc::session_lost);  // past the replacement timeout: at once
    auto data = dm->prepare_task_data(req.data_in, req.data_out);
    if (!data) return fail(data.error());
    prepared = Prepared{.data_in = req.data_in,
                        .data_out = req.data_out,
                        .data = std::move(*data),
                        .connection = connection_serial,
                        .retired = {}};
    ScsiSubmission s{.lun = req.lun,
                     .cdb = req.cdb,
                     .data_in = prepared.data.data_in(),
                     .data_out = prepared.data.data_out(),
                     .attribute = req.attribute,
                     .timeout = req.timeout,
                     .task_data = &prepared.data};
    auto id = engine.submit(s, Clock::now());
    if (!id) {
      prepared = Prepared{};
      apply();  // whatever the engine decided on the way (none today) reaches the loops
      return fail(id.error());
    }
    return *id;
  }

  /// A SCSI command's outcome as execute() returns it; on success the read data is finished: the
  /// buffer less an underflow residual (RFC 7143 §11.4.5.1).
  static Result<scsi::ScsiResult> command_result(TaskOutcome o, Prepared& prepared) {
    if (o.error) return fail(o.error);
    const std::size_t residual = o.result.residual_overflow ? 0 : o.result.residual_bytes;
    prepared.data.finish(prepared.data_in.size() - std::min(prepared.data_in.size(), residual));
    return std::move(o.result);
  }

  // ---- commands ----
  // `req` is taken by value: the caller's CommandRequest need not outlive the call.
  Awaitable<Result<scsi::ScsiResult>> execute(std::shared_ptr<Session> self, CommandRequest req) {
    Prepared prepared;  // lives until the task's PDUs were sent
    auto id = submit_command(req, prepared);
    if (!id) co_return fail(id.error());
    TaskOutcome o = co_await await_task(*id, &prepared);
    (void)self;
    co_return command_result(std::move(o), prepared);
  }

  // execute() without its frame: the same submission, the waiter and buffers in a pooled
  // Started, the caller's callback told by deliver().
  Result<void> start(const CommandRequest& req, CommandCallback& done) {
    if (started_free.empty()) {
      started_all.push_back(std::make_unique<Started>());
      started_free.push_back(started_all.back().get());
    }
    Started& st = *started_free.back();
    auto id = submit_command(req, st.prepared);
    if (!id) return fail(id.error());
    started_free.pop_back();
    st.waiter.prepared = &st.prepared;
    st.waiter.callback = &done;
    st.waiter.started = &st;
    add_waiter(*id, st.waiter);
    // Like await_task(): the command's PDUs leave from here when no send is under way, so the
    // send loop is not resumed (a posted handler, and the reactor poll Asio runs before it: one
    // epoll_wait per command at queue depth 1, docs/performance.md "start() sends inline"). During
    // a burst (the send pass held) they wait for the pass's end. Completions are never delivered
    // from inside start() (CommandCallback's contract): a batch that went out returns its
    // borrowers, which delivers a held completion, so with any held the send loop sends instead.
    defer_wake = true;
    apply();
    defer_wake = false;
    if (!outbox.empty() && !sender_busy && !(pass != nullptr && pass->defer(*this))) {
      if (!held.empty()) {
        outbox_ready.set();
      } else if (PendingSend pending; !try_send_outbox(pending)) {
        // The socket took part (or refused): the send loop finishes that batch and the rest.
        handoff = std::move(pending);
        outbox_ready.set();
      }
    }
    return {};
  }

  Awaitable<Result<TaskManagementResult>> task_management(std::shared_ptr<Session> self, TaskManagementOptions o) {
    if (o.timeout.count() <= 0) o.timeout = options.login_timeout;
    auto id = engine.submit_task_management(o, Clock::now());
    if (!id) {
      apply();
      co_return fail(id.error() ? id.error() : make_error_code(errc::session_closed));
    }
    TaskOutcome out = co_await await_task(*id);
    (void)self;
    if (out.error) co_return fail(out.error);
    co_return TaskManagementResult{.response = iscsi::to_wire(out.tmf_response)};
  }

  Awaitable<Result<void>> logout(std::shared_ptr<Session> self) {
    if (!engine.open()) {
      if (engine.error() == make_error_code(errc::session_closed)) co_return Result<void>{};
      co_return fail(engine.error());
    }
    auto id = engine.logout(Clock::now());
    if (!id) {
      // A logout while recovering ends the session in the engine (no connection to log out on):
      // its actions must be applied like any other, or the loops never hear that it ended (the
      // sender stayed parked on outbox_ready, holding the session: a reference cycle, LSan).
      apply();
      co_return fail(id.error());
    }
    TaskOutcome out = co_await await_task(*id);
    (void)self;
    if (out.error) co_return fail(out.error);
    co_return Result<void>{};
  }
};

WriteLimits write_limits_of(const iscsi::OperationalParameters& p) {
  return WriteLimits{.immediate_data = p.immediate_data,
                     .initial_r2t = p.initial_r2t,
                     .first_burst_length = p.first_burst_length,
                     .max_burst_length = p.max_burst_length,
                     .max_send_segment_length = p.max_send_segment(iscsi::Role::initiator)};
}

std::shared_ptr<Session> start_session(asio::any_io_executor ex, std::unique_ptr<datamover::Datamover> dm,
                                       SessionOptions options, const iscsi::OperationalParameters& params,
                                       std::string target_name, EngineStart start, Reconnector reconnect) {
  const auto& p = params;
  EngineConfig config;
  config.limits = write_limits_of(p);
  config.max_commands_in_flight = options.max_commands_in_flight;
  config.command_timeout = options.command_timeout;
  config.request_timeout = options.login_timeout;
  config.nop_interval = options.nop_interval;
  config.nop_timeout = options.nop_timeout;
  // Where the peer reaches the buffers itself (iSER), a timed-out command's connection is
  // replaced (with recovery) or the session ends: only closing it stops the peer's RDMA.
  config.fail_session_on_timeout = dm->capabilities().exposes_task_buffers;
  // With per-command STags the connection survives a timeout (ABORT TASK), but the caller gets its
  // buffers back only once the target has ended the task: until then its RDMA may still reach them.
  config.hold_timed_out_until_aborted = dm->capabilities().rdma_data && !dm->capabilities().exposes_task_buffers;
  // Without a way to log in again a lost connection ends the session. Over iSER too, recovery
  // re-issues commands with task data prepared again on the new connection (prepare_again()).
  config.replacement_timeout = reconnect ? options.replacement_timeout : std::chrono::milliseconds(0);
  config.reconnect_after_give_up = options.reconnect_after_give_up;
  log::debug("session: logged in: target={} peer={} ImmediateData={} InitialR2T={} FirstBurstLength={} "
             "MaxBurstLength={} MaxRecvDataSegmentLength(target)={} window=[{},{}]",
             target_name, dm->peer(), p.immediate_data, p.initial_r2t, p.first_burst_length, p.max_burst_length,
             config.limits.max_send_segment_length, start.exp_cmd_sn.value(), start.max_cmd_sn.value());
  auto impl = std::make_unique<Session::Impl>(ex, std::move(dm), std::move(options), config, start);
  impl->params = params;
  impl->target_name = std::move(target_name);
  impl->reconnect = std::move(reconnect);
  Session::Impl& i = *impl;
  auto session = std::make_shared<Session>(std::move(impl));
  i.owner = session;
  i.dm->set_send_pass(i.pass);
  asio::co_spawn(ex, i.receive_loop(session, i.dm, i.generation), asio::detached);
  asio::co_spawn(ex, i.timer_loop(session), asio::detached);
  asio::co_spawn(ex, i.send_loop(std::weak_ptr<Session>(session)), asio::detached);
  return session;
}

namespace {

/// What a session needs to log in again (RFC 7143 §6.3.5: same initiator name, ISID and target;
/// TSIH 0 since LoginConfig never sends another).
struct ReloginPlan {
  asio::any_io_executor ex;
  Url url;
  SessionOptions options;  // transport pinned to the one the session runs on
  LoginConfig config;
};

// A free coroutine with its plan by value (shared_ptr): GCC 12 mishandles coroutine lambdas
// with non-trivial by-value captures.
Awaitable<Result<Reconnected>> relogin(std::shared_ptr<const ReloginPlan> plan) {
  auto logged_in = co_await login_over_transports(plan->ex, plan->url, plan->options, plan->config, "session");
  if (!logged_in) co_return fail(logged_in.error());
  const LoginDone& done = logged_in->done;
  co_return Reconnected{.datamover = std::move(logged_in->datamover),
                        .parameters = done.parameters,
                        .start = engine_start_after(plan->config.cmd_sn, done)};
}

}  // namespace

const char* to_string(SessionEvent::Kind kind) noexcept {
  switch (kind) {
    case SessionEvent::Kind::connection_lost: return "connection lost";
    case SessionEvent::Kind::recovered: return "recovered";
    case SessionEvent::Kind::gave_up: return "gave up";
  }
  return "unknown";
}

const char* to_string(SessionState state) noexcept {
  switch (state) {
    case SessionState::logged_in: return "logged-in";
    case SessionState::recovering: return "recovering";
    case SessionState::failed: return "failed";
    case SessionState::ended: return "ended";
  }
  return "unknown";
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

Awaitable<Result<std::shared_ptr<Session>>> Session::connect(asio::any_io_executor ex, const Url& url,
                                                             SessionOptions options) {
  if (url.target.empty()) co_return fail(errc::invalid_argument);
  if (options.max_commands_in_flight == 0 || options.max_commands_in_flight > 65534)
    co_return fail(errc::invalid_argument);
  auto leading = co_await log_in_leading(ex, url, std::move(options), /*discovery=*/false);
  if (!leading) co_return fail(leading.error());
  const LoginConfig& config = leading->config;
  options = config.options;
  // RFC 7143 §11.12.8: the first command carries the leading login's CmdSN.
  const LoginDone& done = leading->logged_in.done;
  Reconnector reconnect;
  if (options.replacement_timeout.count() > 0) {
    auto plan = std::make_shared<ReloginPlan>(ReloginPlan{.ex = ex, .url = url, .options = options, .config = config});
    // The same wire as now (an `auto` session that fell back to TCP stays on TCP).
    plan->options.transport = same_transport(*leading->logged_in.datamover);
    plan->config.options = plan->options;
    reconnect = [plan]() { return relogin(plan); };
  }
  co_return start_session(ex, std::move(leading->logged_in.datamover), std::move(options), done.parameters,
                          url.target, engine_start_after(config.cmd_sn, done), std::move(reconnect));
}

Awaitable<Result<std::vector<std::byte>>> SessionInternals::text_request(Session& session,
                                                                        std::vector<std::byte> text) {
  auto self = session.shared_from_this();  // alive until the answer
  Session::Impl& i = *session.impl_;
  auto id = i.engine.submit_text(std::move(text), Clock::now());
  if (!id) {
    i.apply();
    co_return fail(id.error());
  }
  TaskOutcome out = co_await i.await_task(*id);
  if (out.error) co_return fail(out.error);
  co_return std::move(out.text);
}

Result<void> Session::start(const CommandRequest& request, CommandCallback& done) {
  return impl_->start(request, done);
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
void Session::close() noexcept {
  impl_->engine.fail_session(make_error_code(errc::connection_closed));
  impl_->apply();
}
bool Session::is_open() const noexcept { return impl_->engine.accepting(); }
bool Session::recovering() const noexcept { return impl_->engine.recovering(); }
SessionState Session::state() const noexcept {
  switch (impl_->engine.phase()) {
    case SessionPhase::logged_in:
    case SessionPhase::logging_out:
    case SessionPhase::logout_requested: return SessionState::logged_in;
    case SessionPhase::recovering: return SessionState::recovering;
    case SessionPhase::failed: return SessionState::failed;
    case SessionPhase::ended: return SessionState::ended;
  }
  return SessionState::ended;
}
ReconnectStatus Session::reconnect_status() const noexcept {
  if (!impl_->engine.recovering()) return ReconnectStatus{};
  return ReconnectStatus{.attempts = impl_->attempts,
                         .next_attempt = impl_->next_attempt,
                         .last_error = impl_->last_attempt_error};
}
void Session::reconnect_now() noexcept {
  Impl& i = *impl_;
  if (!i.next_attempt || i.ended) return;  // no login waits for its turn
  i.hurry = true;
  i.reconnect_timer.cancel();
}
std::chrono::steady_clock::time_point Session::recovering_since() const noexcept {
  return impl_->engine.recovering_since();
}
std::error_code Session::error() const noexcept { return impl_->engine.error(); }
const iscsi::OperationalParameters& Session::parameters() const noexcept { return impl_->params; }
const std::string& Session::target_name() const noexcept { return impl_->target_name; }
std::string Session::peer() const { return impl_->dm->peer(); }
asio::any_io_executor Session::executor() const { return impl_->ex; }
const SessionStats& Session::stats() const noexcept { return impl_->engine.stats(); }
datamover::Transport Session::transport() const noexcept { return impl_->dm->transport(); }
std::uint32_t Session::max_transfer_bytes() const noexcept {
  return impl_->dm->capabilities().max_transfer_bytes;
}
std::uint32_t Session::unstated_max_transfer_bytes() const noexcept {
  return impl_->dm->capabilities().unstated_max_transfer_bytes;
}
BufferPool& Session::buffer_pool() const noexcept { return impl_->dm->buffer_pool(); }

}  // namespace iserkit::initiator

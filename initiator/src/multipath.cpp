// Multipath driver (multipath.hpp): one Session per path; the path and device states, the give-up
// deadline and the reinstating back-off are MultipathEngine's (multipath_engine.hpp, sans-I/O): this
// file feeds it what the sessions, timers and logins report and carries out its actions (log in,
// drop a session, arm a timer, announce a PathEvent, re-read ALUA states). Its PathSelector picks
// the path of each command; WriteOrder keeps SYNCHRONIZE CACHE behind earlier writes. ALUA per
// SPC-5 §5.16 (REPORT TARGET PORT GROUPS §6.36; VPD 0x83 designators §7.7.6).
//
// NOTES ON THE THREAD MODEL: everything runs on the device's executor, one thread; a path's
// session calls back (SessionOptions::on_event) on that same executor, from inside its own
// processing, so the callback only updates state: it never destroys the session (released through
// a posted handler) and never awaits.
#include "iserkit/initiator/multipath.hpp"

#include <algorithm>

#include "iserkit/common/completion.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/initiator/errors.hpp"
#include "iserkit/initiator/session.hpp"
#include "login_io.hpp"
#include "multipath_engine.hpp"
#include "multipath_internal.hpp"
#include "path_selector.hpp"

namespace iserkit::initiator {
namespace {

using Clock = std::chrono::steady_clock;

// Commands that fail like this failed because of their path, not the logical unit.
bool is_path_error(std::error_code ec) noexcept {
  return ec == make_error_code(errc::connection_closed) || ec == make_error_code(errc::session_lost) ||
         ec == make_error_code(errc::session_closed) || ec == make_error_code(errc::timeout);
}
bool is_flush(const CommandRequest& r) noexcept {
  const auto op = r.cdb.opcode();
  return op == scsi::Opcode::synchronize_cache10 || op == scsi::Opcode::synchronize_cache16;
}

void notify(Event& e) {
  e.set();
  e.reset();
}

// Sends `cdb` with a data-in buffer of `length` bytes from the session's pool; a UNIT ATTENTION
// (a fresh I_T nexus reports POWER ON/RESET first, SAM-5 §5.14) is retried. Returns the bytes read.
Awaitable<Result<std::vector<std::byte>>> read_data(Session& session, scsi::Lun lun, scsi::Cdb cdb,
                                                    std::uint32_t length) {
  auto buffer = session.buffer_pool().allocate(length);
  const CommandRequest req{.lun = lun, .cdb = cdb, .data_in = buffer.bytes().first(length)};
  for (int attempt = 0; attempt < 4; ++attempt) {
    auto r = co_await session.execute(req);
    if (!r) co_return fail(r.error());
    if (r->status == scsi::Status::check_condition && r->sense && r->sense->key == scsi::SenseKey::unit_attention)
      continue;
    if (auto ok = check(*r); !ok) co_return fail(ok.error());
    const std::size_t got = (r->residual_overflow || r->residual_bytes == 0)
                                ? length
                                : (r->residual_bytes >= length ? 0 : length - r->residual_bytes);
    co_return std::vector<std::byte>(buffer.bytes().begin(), buffer.bytes().begin() + static_cast<std::ptrdiff_t>(got));
  }
  co_return fail(errc::protocol_error);
}

struct Probe {
  std::uint8_t tpgs = 0;
  std::vector<scsi::Designator> designators;  // all of VPD 0x83
};

// What a path leads to: standard INQUIRY (TPGS, SPC-5 §6.6.2) and VPD 0x83 (SPC-5 §7.7.6).
Awaitable<Result<Probe>> probe(Session& session, scsi::Lun lun) {
  Probe p;
  auto inq = co_await read_data(session, lun, scsi::inquiry({.allocation_length = 255}), 255);
  if (!inq) co_return fail(inq.error());
  auto standard = scsi::parse_standard_inquiry(*inq);
  if (!standard) co_return fail(standard.error());
  p.tpgs = standard->tpgs;
  auto page = co_await read_data(
      session, lun, scsi::inquiry({.evpd = true, .page_code = scsi::vpd::device_identification, .allocation_length = 1024}),
      1024);
  if (!page) co_return fail(page.error());
  auto designators = scsi::parse_device_identification(*page);
  if (!designators) co_return fail(designators.error());
  p.designators = std::move(*designators);
  co_return p;
}

std::string designators_text(const std::vector<scsi::Designator>& ds) {
  std::string out = scsi::designators_text(ds, ", ");
  return out.empty() ? "none" : out;
}

}  // namespace

struct Multipath::Impl {
  // What the driver keeps of a path: its session and what was learned through it. Its state,
  // ALUA access state and reinstating back-off are the engine's (multipath_engine.hpp).
  struct Path {
    Url url;
    std::array<std::byte, 6> isid{};
    std::shared_ptr<Session> session;  // null while down
    std::uint64_t generation = 0;      // of `session`; callbacks of older sessions are ignored
    std::optional<std::uint16_t> target_port_group;
    std::optional<std::uint16_t> relative_port;
    std::uint64_t commands = 0, failures = 0, downs = 0, reinstatements = 0;
    std::uint64_t data_in_bytes = 0, data_out_bytes = 0;  // of commands completed on this path
    std::unique_ptr<asio::steady_timer> timer;            // the engine's reinstate deadline
  };

  Impl(asio::any_io_executor e, std::vector<Url> urls, scsi::Lun l, MultipathOptions o)
      : ex(std::move(e)),
        lun(l),
        options(std::move(o)),
        engine(MultipathEngineConfig{
            .paths = urls.size(),
            .policy = options.policy,
            .replacement_timeout = options.replacement_timeout,
            .reinstate_delay_min = options.reinstate_delay_min,
            .reinstate_delay_max = options.reinstate_delay_max,
            .seed = static_cast<std::uint32_t>(Clock::now().time_since_epoch().count())}),
        give_up_timer(ex) {
    for (auto& u : urls) {
      Path p;
      p.url = std::move(u);
      p.isid = random_isid();
      p.timer = std::make_unique<asio::steady_timer>(ex);
      paths.push_back(std::move(p));
    }
    if (options.session.nop_interval.count() == 0) options.session.nop_interval = std::chrono::seconds(5);
  }
  ~Impl() {
    // Dropped without logout(): the sessions would otherwise run on (their loops hold them).
    for (auto& p : paths)
      if (p.session) p.session->close();
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  asio::any_io_executor ex;
  scsi::Lun lun;
  MultipathOptions options;
  std::vector<Path> paths;  // never resized after construction: references stay valid
  MultipathEngine engine;   // path and device states, deadlines; picks the path of each command
  WriteOrder writes;
  Event writes_progress;  // notified when the covered point of `writes` moves
  Event paths_changed;    // notified when a path's usability changed, on give-up and on close
  MultipathStats stats;
  std::vector<scsi::Designator> reference;  // the logical-unit designators every path must match
  bool tpgs = false;
  asio::steady_timer give_up_timer;  // the engine's give-up deadline
  bool refreshing = false;           // a REPORT TARGET PORT GROUPS read runs
  bool polling = false;              // poll_alua() runs
  std::weak_ptr<Multipath> owner;
  // The pool callers lease from (buffer_pool()): the first iSER path's registered pool once one
  // logged in, else the first path's (docs/iser.md "Multipath over iSER").
  BufferPool* pool = nullptr;
  bool pool_registered = false;  // `pool` is an iSER path's (registered memory)
  std::uint32_t max_transfer = 0;     // smallest non-zero limit of every path that may run iSER
  std::uint32_t unstated_max = 0;     // the same for units without a MAXIMUM TRANSFER LENGTH
  PathConnector connector;

  static void lower_limit(std::uint32_t& limit, std::uint32_t bytes) {
    if (bytes != 0 && (limit == 0 || bytes < limit)) limit = bytes;
  }

  void emit(PathEvent::Kind kind, std::size_t path, std::error_code ec = {}) {
    if (options.on_event) options.on_event(PathEvent{.kind = kind, .path = path, .error = ec});
  }
  std::string url_text(std::size_t i) const { return format_url(paths[i].url); }

  // ---- carrying out the engine's actions ----
  /// Runs `actions` in order. The engine already moved its states, so an observer reading paths()
  /// in on_event sees the path as announced.
  void run(const MultipathEngine::Actions& actions) {
    for (const auto& a : actions) {
      switch (a.kind) {
        case MultipathAction::Kind::connect:
          if (auto self = owner.lock()) asio::co_spawn(ex, reinstate(self, a.path), asio::detached);
          break;
        case MultipathAction::Kind::close_session: {
          Path& p = paths[a.path];
          ++p.generation;  // anything the old session still reports is stale
          // Not destroyed here: this may run inside the session's own callback.
          asio::post(ex, [s = std::move(p.session)]() mutable {
            if (s) s->close();
          });
          break;
        }
        case MultipathAction::Kind::announce: announce(a); break;
        case MultipathAction::Kind::resumed:
          log::warn("multipath: a path is usable again: commands go out again");
          break;
        case MultipathAction::Kind::arm_reinstate_timer: arm(*paths[a.path].timer, a.at); break;
        case MultipathAction::Kind::arm_give_up_timer: arm(give_up_timer, a.at); break;
        case MultipathAction::Kind::cancel_give_up_timer: give_up_timer.cancel(); break;
        case MultipathAction::Kind::refresh_alua:
          if (tpgs) {
            if (auto self = owner.lock()) asio::co_spawn(ex, refresh_alua_detached(self), asio::detached);
          }
          break;
        case MultipathAction::Kind::poll_alua:
          if (tpgs && !polling) {
            if (auto self = owner.lock()) {
              polling = true;  // before the coroutine starts: one poller at a time
              asio::co_spawn(ex, poll_alua(self), asio::detached);
            }
          }
          break;
        case MultipathAction::Kind::wake: notify(paths_changed); break;
      }
    }
  }

  /// A timer for an engine deadline: at `at` the engine is told the time.
  void arm(asio::steady_timer& timer, Clock::time_point at) {
    timer.expires_at(at);
    timer.async_wait([w = owner, this](boost::system::error_code ec) {
      auto self = w.lock();
      if (!self || ec) return;
      run(engine.expire(Clock::now()));
    });
  }

  void announce(const MultipathAction& a) {
    switch (a.event) {
      case PathEvent::Kind::path_down: {
        Path& p = paths[a.path];
        ++p.downs;
        ++stats.path_downs;
        log::warn("multipath: path {} down: url={} error={}", a.path, url_text(a.path), a.error.message());
        emit(PathEvent::Kind::path_down, a.path, a.error);
        break;
      }
      case PathEvent::Kind::path_up: {
        Path& p = paths[a.path];
        ++p.reinstatements;
        ++stats.path_ups;
        log::warn("multipath: path {} up ({}): url={} peer={}", a.path,
                  a.cause == PathInput::recovered ? "recovered" : "reinstated", url_text(a.path),
                  p.session ? p.session->peer() : "");
        emit(PathEvent::Kind::path_up, a.path);
        break;
      }
      case PathEvent::Kind::all_paths_lost:
        log::warn("multipath: all paths lost: commands wait up to {} ms", options.replacement_timeout.count());
        emit(PathEvent::Kind::all_paths_lost, 0);
        break;
      case PathEvent::Kind::gave_up:
        ++stats.gave_up;
        log::warn("multipath: gave up: no usable path for {} ms: commands fail", options.replacement_timeout.count());
        emit(PathEvent::Kind::gave_up, 0, a.error);
        break;
    }
  }

  // ---- path events ----
  /// Path `i`'s session (generation `gen`) ended: the engine drops it and reinstates the path.
  void path_failed(std::size_t i, std::uint64_t gen, std::error_code ec) {
    if (gen != paths[i].generation) return;
    run(engine.session_ended(i, ec, Clock::now()));
  }

  void on_session_event(std::size_t i, std::uint64_t gen, const SessionEvent& e) {
    if (gen != paths[i].generation || engine.closed()) return;
    switch (e.kind) {
      case SessionEvent::Kind::connection_lost: run(engine.connection_lost(i, e.error, Clock::now())); break;
      case SessionEvent::Kind::recovered: run(engine.recovered(i, Clock::now())); break;
      case SessionEvent::Kind::gave_up: path_failed(i, gen, e.error); break;
    }
  }

  // ---- connecting a path ----
  /// Logs in on path `i` (the engine has it logging_in), checks it leads to the same logical unit,
  /// and reports the result to the engine (a refused path is reported by log_in()).
  Awaitable<Result<void>> connect_path(std::size_t i) {
    auto r = co_await log_in(i);
    if (!r && engine.path_state(i) == PathState::logging_in) run(engine.login_failed(i, Clock::now()));
    co_return r;
  }

  Awaitable<Result<void>> log_in(std::size_t i) {
    Path& p = paths[i];
    const std::uint64_t gen = ++p.generation;
    SessionOptions so = options.session;
    so.isid = p.isid;
    so.replacement_timeout = options.path_replacement_timeout;
    // A path whose session gives up is dropped and reinstated by the engine (its own bounded
    // back-off, for ever): the session itself must end, not linger in SessionState::failed.
    so.reconnect_after_give_up = false;
    so.on_event = [w = owner, this, i, gen](const SessionEvent& e) {
      if (auto self = w.lock()) on_session_event(i, gen, e);
    };
    auto session = co_await connector(p.url, std::move(so));
    if (!session) co_return fail(session.error());
    auto s = *session;
    if (engine.closed() || gen != p.generation) {
      s->close();
      co_return fail(errc::session_closed);
    }
    auto found = co_await probe(*s, lun);
    if (!found) {
      s->close();
      co_return fail(found.error());
    }
    auto lu = scsi::logical_unit_designators(found->designators);
    if (reference.empty()) {
      if (lu.empty() && paths.size() > 1) {
        log::error("multipath: path {}: the logical unit reports no designator (VPD 0x83) to tell its paths apart: "
                   "url={}", i, url_text(i));
        s->close();
        co_return fail(errc::not_supported);
      }
      reference = lu;
      tpgs = found->tpgs != 0;
    } else if (lu != reference) {
      // SPC-5 §7.7.6: the logical-unit designators are the same through every port of one unit.
      log::error("multipath: path {} refused: it leads to another logical unit: url={} designators=[{}], "
                 "expected [{}]", i, url_text(i), designators_text(lu), designators_text(reference));
      s->close();
      run(engine.login_refused(i, Clock::now()));
      co_return fail(errc::invalid_argument);
    }
    if (engine.closed() || gen != p.generation) {
      s->close();
      co_return fail(errc::session_closed);
    }
    p.target_port_group = scsi::target_port_group_of(found->designators);
    p.relative_port = scsi::relative_target_port_of(found->designators);
    p.session = s;
    const bool iser = s->transport() == datamover::Transport::iser;
    if (pool == nullptr || (iser && !pool_registered)) {
      // Each path's session registers what it is given in its own device's pool
      // (TaskData::registered): buffers of this pool cost no copy on every path of its device;
      // a path on another device bounces through its own pool; a TCP path takes any memory.
      if (pool != nullptr) log::info("multipath: path {}: buffers now come from its registered (iSER) pool", i);
      pool = &s->buffer_pool();
      pool_registered = iser;
    }
    lower_limit(max_transfer, s->max_transfer_bytes());
    lower_limit(unstated_max, s->unstated_max_transfer_bytes());
    if (engine.opening())
      log::info("multipath: path {} up: url={} peer={} target_port_group={}", i, url_text(i), s->peer(),
                p.target_port_group ? int(*p.target_port_group) : -1);
    run(engine.login_succeeded(i, Clock::now()));
    co_return Result<void>{};
  }

  /// A reinstating login the engine asked for (MultipathAction::Kind::connect).
  Awaitable<void> reinstate(std::shared_ptr<Multipath> self, std::size_t i) {
    auto r = co_await connect_path(i);
    if (!r && engine.path_state(i) == PathState::backing_off)
      log::info("multipath: path {}: reinstating: login failed: url={} error={}", i, url_text(i), r.error().message());
    (void)self;
  }
  // ---- ALUA ----
  /// Reads REPORT TARGET PORT GROUPS through the first path that answers and sets every path's
  /// state from its target port group (or relative target port).
  Awaitable<void> refresh_alua() {
    if (!tpgs || engine.closed()) co_return;
    if (refreshing) {
      // One read at a time; a caller that needs fresh states waits for the one running.
      while (refreshing && !engine.closed()) co_await paths_changed.wait();
      co_return;
    }
    refreshing = true;
    ++stats.alua_refreshes;
    for (std::size_t i = 0; i < paths.size() && !engine.closed(); ++i) {
      auto s = paths[i].session;
      if (!s || engine.path_state(i) != PathState::up) continue;
      auto data = co_await read_data(*s, lun, scsi::report_target_port_groups({.allocation_length = 4096}), 4096);
      if (!data) continue;
      auto groups = scsi::parse_report_target_port_groups(*data);
      if (!groups) continue;
      for (std::size_t j = 0; j < paths.size(); ++j) {
        Path& p = paths[j];
        for (const auto& g : *groups) {
          const bool ours = (p.target_port_group && *p.target_port_group == g.id) ||
                            (!p.target_port_group && p.relative_port &&
                             std::find(g.relative_ports.begin(), g.relative_ports.end(), *p.relative_port) !=
                                 g.relative_ports.end());
          if (!ours) continue;
          if (engine.access(j) != g.state)
            log::info("multipath: path {}: ALUA state {} (target port group {})", j, scsi::to_string(g.state), g.id);
          engine.set_access(j, g.state);
        }
      }
      break;
    }
    refreshing = false;
    run(engine.settle(Clock::now()));
    notify(paths_changed);  // also when closed: callers waiting for this read look again
  }
  Awaitable<void> refresh_alua_detached(std::shared_ptr<Multipath> self) {
    co_await refresh_alua();
    (void)self;
  }
  /// While logged-in paths exist but none is in a state that processes I/O (standby,
  /// transitioning…), re-read the states: after 100 ms, then at twice the last interval up to
  /// every second. A gateway failover (the standby gateway takes the lock of the one that died or
  /// handed over, target/README.md "ALUA failover") is seen within about 100–300 ms of the new
  /// active group's change, not a second later.
  Awaitable<void> poll_alua(std::shared_ptr<Multipath> self) {
    asio::steady_timer t(ex);
    std::chrono::milliseconds interval{100};
    while (!engine.closed() && !engine.any_usable()) {
      bool any_up = false;
      for (std::size_t i = 0; i < paths.size(); ++i) any_up |= engine.path_state(i) == PathState::up;
      if (!any_up) break;
      t.expires_after(interval);
      interval = std::min<std::chrono::milliseconds>(interval * 2, std::chrono::seconds(1));
      boost::system::error_code ec;
      co_await t.async_wait(use_awaitable_ec(ec));
      co_await refresh_alua();
    }
    polling = false;
    (void)self;
  }

  // ---- commands ----
  struct WriteGuard {
    Impl* impl;
    std::optional<std::uint64_t> number;
    ~WriteGuard() {
      if (number && impl->writes.end(*number)) notify(impl->writes_progress);
    }
  };

  Awaitable<Result<scsi::ScsiResult>> execute(std::shared_ptr<Multipath> self, CommandRequest req) {
    ++stats.commands;
    if (engine.closed()) co_return fail(errc::session_closed);
    WriteGuard guard{this, std::nullopt};
    if (!req.data_out.empty()) guard.number = writes.begin();
    if (is_flush(req)) {
      // Sent only once every write submitted before it completed, on whatever path.
      const std::uint64_t barrier = writes.barrier();
      if (!writes.covered(barrier)) ++stats.flushes_held;
      while (!writes.covered(barrier) && !engine.closed()) co_await writes_progress.wait();
    }
    unsigned alua_tries = 0;
    std::size_t timeouts = 0;  // command timeouts on paths whose session stayed up
    while (true) {
      if (engine.closed()) co_return fail(errc::session_closed);
      const auto pick = engine.pick();
      if (!pick) {
        if (engine.fail_without_path()) co_return fail(errc::session_lost);
        co_await paths_changed.wait();
        continue;
      }
      const std::size_t i = *pick;
      Path& p = paths[i];
      const auto session = p.session;
      const std::uint64_t gen = p.generation;
      ++p.commands;
      auto r = co_await session->execute(req);
      if (!r) {
        if (!is_path_error(r.error()) || engine.closed()) co_return r;
        // A command that times out on a live path is tried once per path, not forever.
        if (r.error() == make_error_code(errc::timeout) && session->is_open() && !session->recovering() &&
            ++timeouts >= paths.size())
          co_return r;
        ++p.failures;
        ++stats.path_retries;
        log::debug("multipath: path {}: command failed ({}): sending it on another path", i, r.error().message());
        if (gen == p.generation) {
          if (!session->is_open()) {
            path_failed(i, gen, r.error());
          } else if (session->recovering()) {
            run(engine.connection_lost(i, r.error(), Clock::now()));
          }
        }
        continue;
      }
      const auto condition = scsi::alua_condition(*r);
      if (condition == scsi::AluaCondition::none) {
        p.data_in_bytes += req.data_in.size();
        p.data_out_bytes += req.data_out.size();
        co_return r;
      }
      // SPC-5 §5.16.2.4: the command was not processed through this port: learn the new states
      // and send it again where the unit accepts it (bounded, in case the target contradicts itself).
      if (++alua_tries > 16) co_return r;
      ++stats.alua_retries;
      if (gen == p.generation && tpgs) {
        std::optional<scsi::AccessState> state;
        switch (condition) {
          case scsi::AluaCondition::standby: state = scsi::AccessState::standby; break;
          case scsi::AluaCondition::unavailable: state = scsi::AccessState::unavailable; break;
          case scsi::AluaCondition::transitioning: state = scsi::AccessState::transitioning; break;
          default: break;
        }
        run(state ? engine.access_changed(i, *state, Clock::now()) : engine.settle(Clock::now()));
      }
      // Without TPGS there are no states to read (refresh_alua() does nothing): just send it again.
      co_await refresh_alua();
      (void)self;
    }
  }

  void close_all() {
    run(engine.close());
    give_up_timer.cancel();
    for (auto& p : paths) {
      p.timer->cancel();
      if (p.session) p.session->close();
    }
    notify(paths_changed);
    notify(writes_progress);
  }
};

Multipath::Multipath(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Multipath::~Multipath() = default;

namespace {
// A free coroutine (GCC 12 mishandles coroutine lambdas with by-value captures).
Awaitable<Result<std::shared_ptr<Session>>> connect_session(asio::any_io_executor ex, Url url, SessionOptions options) {
  co_return co_await Session::connect(ex, url, std::move(options));
}
}  // namespace

Awaitable<Result<std::shared_ptr<Multipath>>> Multipath::open(asio::any_io_executor ex, std::vector<Url> urls,
                                                              scsi::Lun lun, MultipathOptions options) {
  PathConnector connect = [ex](const Url& url, SessionOptions o) { return connect_session(ex, url, std::move(o)); };
  return open_multipath(ex, std::move(urls), lun, std::move(options), std::move(connect));
}

Awaitable<Result<std::shared_ptr<Multipath>>> open_multipath(asio::any_io_executor ex, std::vector<Url> urls,
                                                             scsi::Lun lun, MultipathOptions options,
                                                             PathConnector connect) {
  if (urls.empty()) co_return fail(errc::invalid_argument);
  // The transfer limits are fixed here, before any login: a LunHandle reads them once, and a path
  // that may run iSER (select_transports) may come up only later.
  std::uint32_t max_transfer = 0;
  std::uint32_t unstated_max = 0;
  for (const auto& u : urls) {
    if (u.target.empty()) co_return fail(errc::invalid_argument);
    const auto transports = select_transports(u, options.session.transport);
    if (std::find(transports.begin(), transports.end(), datamover::Transport::iser) != transports.end()) {
      Multipath::Impl::lower_limit(max_transfer, options.session.iser_max_transfer_bytes);
      Multipath::Impl::lower_limit(unstated_max, options.session.iser_unstated_max_transfer_bytes);
    }
  }
  auto impl = std::make_unique<Multipath::Impl>(ex, std::move(urls), lun, std::move(options));
  Multipath::Impl& m = *impl;
  m.max_transfer = max_transfer;
  m.unstated_max = unstated_max;
  m.connector = std::move(connect);
  auto mp = std::make_shared<Multipath>(std::move(impl));
  m.owner = mp;
  std::error_code first_error;
  for (std::size_t i = 0; i < m.paths.size(); ++i) {
    m.run(m.engine.begin_login(i, Clock::now()));
    auto r = co_await m.connect_path(i);
    if (r) continue;
    const bool refused = m.engine.path_state(i) == PathState::refused;
    if (refused && m.options.open_without_refused_paths) continue;  // logged
    if (refused || r.error() == make_error_code(errc::not_supported)) {
      m.close_all();
      co_return fail(r.error());
    }
    log::warn("multipath: path {}: login failed: url={} error={}: reinstating it in the background", i, m.url_text(i),
              r.error().message());
    if (!first_error) first_error = r.error();
  }
  if (m.pool == nullptr) {
    m.close_all();
    co_return fail(first_error ? first_error : make_error_code(errc::connection_closed));
  }
  co_await m.refresh_alua();
  // Paths that could not log in start reinstating; the device serves or waits for a path.
  m.run(m.engine.opened(Clock::now()));
  co_return mp;
}

Awaitable<Result<scsi::ScsiResult>> Multipath::execute(const CommandRequest& request) {
  return impl_->execute(shared_from_this(), request);
}
BufferPool& Multipath::buffer_pool() const noexcept { return *impl_->pool; }
std::uint32_t Multipath::max_transfer_bytes() const noexcept { return impl_->max_transfer; }
std::uint32_t Multipath::unstated_max_transfer_bytes() const noexcept { return impl_->unstated_max; }
asio::any_io_executor Multipath::executor() const { return impl_->ex; }
const MultipathStats& Multipath::stats() const noexcept { return impl_->stats; }
bool Multipath::any_path_usable() const noexcept { return impl_->engine.any_usable(); }
bool Multipath::gave_up() const noexcept { return impl_->engine.gave_up(); }
MultipathPolicy Multipath::policy() const noexcept { return impl_->options.policy; }

std::vector<PathStatus> Multipath::paths() const {
  std::vector<PathStatus> out;
  for (std::size_t i = 0; i < impl_->paths.size(); ++i) {
    const auto& p = impl_->paths[i];
    const auto& engine = impl_->engine;
    out.push_back(PathStatus{.state = engine.public_state(i),
                             .url = format_url(p.url),
                             .peer = p.session ? p.session->peer() : std::string{},
                             .access_state = engine.access(i),
                             .target_port_group = p.target_port_group,
                             .commands = p.commands,
                             .failures = p.failures,
                             .downs = p.downs,
                             .reinstatements = p.reinstatements,
                             .reinstate_attempts = engine.reinstate_attempts(i),
                             .next_attempt = engine.next_attempt(i),
                             .data_in_bytes = p.data_in_bytes,
                             .data_out_bytes = p.data_out_bytes});
  }
  return out;
}

Awaitable<void> Multipath::logout() {
  auto self = shared_from_this();
  Impl& m = *impl_;
  m.run(m.engine.close());
  m.give_up_timer.cancel();
  for (auto& p : m.paths) p.timer->cancel();
  notify(m.paths_changed);
  notify(m.writes_progress);
  for (auto& p : m.paths) {
    if (auto s = p.session) {
      if (s->is_open() && !s->recovering()) (void)co_await s->logout();
      s->close();
    }
  }
}

void Multipath::close() noexcept { impl_->close_all(); }

}  // namespace iserkit::initiator

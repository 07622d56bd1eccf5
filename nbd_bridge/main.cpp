// iserkit-nbd: serves one remote SCSI LUN (iscsi:// URL) as an NBD export on a Unix socket and/or a
// TCP address, so the kernel's nbd client, qemu, nbdcopy, nbdfuse or fio can attach it.
// THREAD MODEL: --threads N event loops (default 1), each an io_context run by one thread (loop 0
// is the main thread), each with its own iSCSI session to the LUN (same target and LUN, distinct
// ISIDs) logged in at start-up. NBD connections are accepted on loop 0 and handed to the loop with
// the fewest open connections; from then on a connection, its requests and the SCSI commands they
// become run on that loop only: no thread hop, no lock on the data path. A session per loop, not
// per NBD connection nor MC/S: the target sees N sessions whatever the clients open, an NBD connect
// costs no login, and MC/S is implemented by neither iserkit-target nor our initiator. With N = 1 this is
// the one io_context of before. NBD_FLAG_CAN_MULTI_CONN stays offered: a FLUSH is SYNCHRONIZE CACHE
// of the whole logical unit, which covers writes completed through any session (lun_export.cpp).
// Several URLs (multipath) run on one loop: --threads > 1 is refused with them.
// The session runs over TCP (iscsi://) or iSER (iser://, RFC 7145); --transport overrides. NBD
// payload buffers come from the session's pool, so over iSER they are the registered memory the
// target RDMA-reads and -writes: no copy in user space (counted, printed at exit).
// RECOVERY: the session rides through a lost connection (target restart, network loss, a target
// frozen past the NOP-Out ping timeout) for --replacement-timeout seconds: requests wait and are
// sent again. After that it gives up: --on-give-up error keeps serving, fails every request at
// once with NBD_EIO (none is queued) and the session keeps logging in in the background (bounded
// back-off, as iscsid does): once a login succeeds requests are served again, without a restart;
// --on-give-up exit exits with status 3 so a supervisor restarts the bridge. Where it stands
// (connected / recovering since / gave up, the logins tried and when the next one starts,
// counters) goes to --stats-file on every change and at exit, to stderr on SIGUSR1, and to
// --status-socket / --metrics.
// MULTIPATH: several URLs are several paths to one LUN (initiator::Multipath): one session per
// path with a short replacement timeout (--path-replacement-timeout) and NOP-Out checks, commands
// spread by --multipath failover|round-robin and ALUA, a failed path's commands sent again on
// another path, failed paths reinstated in the background. --replacement-timeout is then how
// long requests wait while no path is usable. Per-path state goes to --stats-file and SIGUSR1.
// STATUS QUERY: --status-socket PATH answers each connection with the same status as one JSON
// document (nbd_bridge/README.md "Status"; `iserkit status PATH` reads it).
// FLAGS: qemu-nbd's and nbdkit's spellings for what the bridge does (-k, -p/-b, -x, -e, -t, -r,
// --fork, --pid-file, --exit-with-parent, --print-uri, --run), none of their short options that
// mean something else there; values in the four programs' grammar (common/cli_values.hpp).
// What differs from qemu-nbd and why: nbd_bridge/README.md "Flags from qemu-nbd and nbdkit".
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>

#include <cxxopts.hpp>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/cli_values.hpp"
#include "iserkit/common/copy_counter.hpp"
#include "iserkit/common/host_port.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/common/netns.hpp"
#include "iserkit/common/service_manager.hpp"
#include "iserkit/common/status_socket.hpp"
#include "iserkit/datamover/iser_datamover.hpp"
#include "iserkit/initiator/chap_credentials.hpp"
#include "iserkit/initiator/diagnosis.hpp"
#include "iserkit/initiator/discovery.hpp"
#include "iserkit/initiator/lun.hpp"
#include "iserkit/initiator/multipath.hpp"
#include "iserkit/initiator/option_values.hpp"
#include "iserkit/initiator/session.hpp"
#include "iserkit/initiator/url.hpp"
#include "iserkit/metrics/daemon_metrics.hpp"
#include "nbd_bridge/bridge_status.hpp"
#include "nbd_bridge/captive.hpp"
#include "nbd_bridge/config_file.hpp"
#include "nbd_bridge/event_loops.hpp"
#include "nbd_bridge/lun_export.hpp"
#include "nbd_bridge/metrics.hpp"
#include "nbd_bridge/server.hpp"
#include "nbd_bridge/status_json.hpp"
#include "nbd_bridge/tls.hpp"

namespace {

using namespace iserkit;
using nbd::BridgeStatus;
using nbd::LoopSample;
using nbd::sample_session;

enum class OnGiveUp { error, exit };

struct Config {
  OnGiveUp on_give_up = OnGiveUp::error;
  initiator::Url url;              // the first (or only) path
  std::vector<initiator::Url> urls;  // every path; more than one = multipath
  initiator::MultipathPolicy policy = initiator::MultipathPolicy::failover;
  std::chrono::milliseconds path_replacement_timeout{5000};
  std::size_t threads = 1;  // --threads: event loops, each with its own session
  std::string socket_path;
  std::string listen;
  std::string port_file;
  std::string name;
  bool read_only = false;
  std::size_t max_connections = 1024;  // -e/--shared (0 = no limit)
  bool print_uri = false;              // --print-uri
  bool exit_with_parent = false;       // --exit-with-parent
  std::string stats_file;
  std::string status_socket;
  std::string metrics;  // --metrics HOST:PORT (Prometheus)
  initiator::SessionOptions session;
  nbd::ProcessMode process;  // --run, --fork, --pid-file (captive.hpp)
  /// Listening sockets passed by socket activation (LISTEN_FDS), taken in main() before --fork:
  /// sd_listen_fds() only hands them to the process LISTEN_PID names, which the forked child is not.
  std::vector<int> passed_sockets;
  std::chrono::milliseconds handshake_limit{10000};  // --handshake-limit
  nbd::TlsSettings tls;      // --tls, --tls-certificates, --tls-psk, --tls-verify-peer (tls.hpp)
  std::shared_ptr<const nbd::TlsContext> tls_context;  // loaded before the login
};

// Splits "host:port", "[v6]:port" or ":port" (any address); the port is required.
bool split_host_port(const std::string& s, std::string& host, std::uint16_t& port) {
  auto hp = parse_host_port(s);
  if (!hp || !hp->port) return false;
  host = hp->host.empty() ? "*" : hp->host;
  port = *hp->port;
  return true;
}

/// What one event loop holds: its session and the LUN export its NBD connections call. Released
/// by main() once every loop has stopped (Bridge::loops).
struct LoopParts {
  std::shared_ptr<initiator::Session> session;
  std::shared_ptr<nbd::LunExport> exported;
};

/// Prints `ec` in words (initiator/diagnosis.hpp) with the URL; after an unknown target, what
/// discovery lists at the portal. `suffix` names the loop or the paths.
Awaitable<void> print_error(std::error_code ec, const initiator::Url& url, const initiator::SessionOptions& options,
                            std::string suffix) {
  initiator::ErrorContext context{.program = initiator::Program::nbd, .url = url, .chap = &options.chap};
  if (initiator::needs_target_list(ec)) {
    auto found = co_await initiator::discover(co_await asio::this_coro::executor, url, options);
    if (found) context.listed_targets = initiator::target_names(*found);
  }
  std::cerr << "iserkit-nbd: " << initiator::diagnose(ec, context).text() << ": url=" << initiator::format_url(url)
            << suffix << "\n";
}

/// The exit status for a start-up failure (iserkit-nbd(1) EXIT STATUS).
int exit_status_of(std::error_code ec) {
  return initiator::exit_code(initiator::diagnose(ec, {.program = initiator::Program::nbd}).exit_status);
}

/// Logs in one loop's session and opens the LUN on it. Runs on that loop (a session and every
/// awaitable of it live on one executor). Errors are printed; `loop` names the loop when N > 1.
Awaitable<Result<LoopParts>> open_loop(initiator::Url url, initiator::SessionOptions options, std::uint32_t lun_index,
                                       nbd::LunExportOptions export_options, std::string loop) {
  auto ex = co_await asio::this_coro::executor;
  const initiator::SessionOptions kept = options;  // for the message: `options` is moved from below
  auto session = co_await initiator::Session::connect(ex, url, std::move(options));
  if (!session) {
    co_await print_error(session.error(), url, kept, loop);
    co_return fail(session.error());
  }
  log::info("iserkit-nbd: logged in over {}{}", (*session)->transport() == datamover::Transport::iser ? "iSER" : "TCP",
            loop);
  auto lun = co_await initiator::LunHandle::open(*session, scsi::Lun::from_index(lun_index));
  if (!lun) {
    co_await print_error(lun.error(), url, kept, loop);
    (*session)->close();
    co_return fail(lun.error());
  }
  co_return LoopParts{.session = *session,
                      .exported = std::make_shared<nbd::LunExport>(std::move(*lun), std::move(export_options))};
}

/// Closes `session` at once (start-up failed). On the session's loop.
Awaitable<void> close_session(std::shared_ptr<initiator::Session> session) {
  session->close();
  co_return;
}

/// Logs `session` out and samples its loop's counters a last time. On the session's loop; `exported`
/// first answers ESHUTDOWN to requests the lost session fails.
Awaitable<void> logout_loop(LoopParts parts, std::shared_ptr<LoopSample> sample) {
  parts.exported->set_shutting_down();
  co_await parts.session->logout();
  if (sample) {
    std::lock_guard lock(sample->mutex);
    sample_session(*parts.session, *sample);
    sample->read_bytes = parts.exported->read_bytes();
    sample->lba_status_commands = parts.exported->lba_status_commands();
  }
}

/// Runs `work` on loop `io` and resumes the caller on its own executor when it is done.
template <class T>
Awaitable<T> on_loop(asio::io_context& io, Awaitable<T> work) {
  co_return co_await asio::co_spawn(io, std::move(work), asio::use_awaitable);
}

/// Samples a worker loop's session and export counters into `sample` every 250 ms, on that loop,
/// until `stop` is set.
Awaitable<void> sample_loop(LoopParts parts, std::shared_ptr<LoopSample> sample,
                            std::shared_ptr<std::atomic<bool>> stop) {
  asio::steady_timer tick(co_await asio::this_coro::executor);
  while (!stop->load()) {
    {
      std::lock_guard lock(sample->mutex);
      sample_session(*parts.session, *sample);
      sample->read_bytes = parts.exported->read_bytes();
      sample->lba_status_commands = parts.exported->lba_status_commands();
    }
    tick.expires_after(std::chrono::milliseconds(250));
    boost::system::error_code ec;
    co_await tick.async_wait(use_awaitable_ec(ec));
  }
}

/// Every loop's parts, kept by main() until the loops have stopped, so that no session is destroyed
/// on another loop's thread while that loop runs.
struct Bridge {
  std::vector<LoopParts> loops;
};

Awaitable<int> run(nbd::EventLoops& event_loops, Config cfg, std::shared_ptr<BridgeStatus> status,
                   std::shared_ptr<Bridge> bridge) {
  asio::io_context& io = event_loops.io(0);
  auto ex = co_await asio::this_coro::executor;
  const auto lun_index = cfg.url.lun.value_or(0);
  const std::size_t threads = event_loops.size();
  std::shared_ptr<initiator::CommandChannel> channel;
  std::shared_ptr<initiator::Session> single;
  std::shared_ptr<initiator::Multipath> multipath;
  std::shared_ptr<nbd::LunExport> exported;  // loop 0's
  auto stop_sampling = std::make_shared<std::atomic<bool>>(false);
  std::string description;
  const nbd::LunExportOptions export_options{
      .name = cfg.name.empty() ? cfg.url.target + "/" + std::to_string(lun_index) : cfg.name,
      .read_only = cfg.read_only,
      .url = cfg.url};
  // Closes every session opened so far, each on its own loop (start-up failed).
  auto close_all = [&]() -> Awaitable<void> {
    stop_sampling->store(true);
    if (multipath) multipath->close();
    for (std::size_t k = 0; k < bridge->loops.size(); ++k) {
      auto session = bridge->loops[k].session;
      co_await on_loop(event_loops.io(k), close_session(session));
    }
  };
  if (cfg.urls.size() <= 1) {
    description = initiator::format_url(cfg.url);
    auto options = export_options;
    options.description = description;
    // --threads N: N sessions from one initiator to one target, told apart by their ISIDs.
    const auto isids = threads > 1 ? nbd::loop_isids(threads) : std::vector<std::array<std::byte, 6>>{};
    for (std::size_t k = 0; k < threads; ++k) {
      auto session_options = cfg.session;
      session_options.batch_sends = true;  // each loop is one io_context run by one thread
      if (threads > 1) session_options.isid = isids[k];
      if (k == 0) {
        session_options.on_event = [status](const initiator::SessionEvent& e) { status->on_event(0, e); };
      } else {
        // Called on loop k; the status lives on the main loop.
        session_options.on_event = [status, k, ex](const initiator::SessionEvent& e) {
          asio::post(ex, [status, k, e] { status->on_event(k, e); });
        };
      }
      const std::string loop_name = threads > 1 ? " loop=" + std::to_string(k) : "";
      // Not one `?:` with a co_await in each arm: GCC 12 destroys the result early there.
      Result<LoopParts> opened = fail(std::errc::operation_canceled);
      if (k == 0) {
        opened = co_await open_loop(cfg.url, std::move(session_options), lun_index, options, loop_name);
      } else {
        opened = co_await on_loop(event_loops.io(k),
                                  open_loop(cfg.url, std::move(session_options), lun_index, options, loop_name));
      }
      if (!opened) {
        co_await close_all();
        co_return exit_status_of(opened.error());
      }
      bridge->loops.push_back(*opened);
      status->loop_states[k] = BridgeStatus::State::connected;
      if (k > 0) {
        asio::co_spawn(event_loops.io(k), sample_loop(*opened, status->samples[k], stop_sampling), asio::detached);
      }
    }
    if (threads > 1) {
      // Runs on the main loop (loop 0); each session is told on its own loop.
      status->reconnect_others = [&event_loops, weak = std::weak_ptr<Bridge>(bridge)](std::size_t k) {
        auto b = weak.lock();
        if (!b) return;
        for (std::size_t j = 0; j < b->loops.size(); ++j) {
          if (j == k) continue;
          asio::post(event_loops.io(j), [s = std::weak_ptr<initiator::Session>(b->loops[j].session)] {
            if (auto session = s.lock()) session->reconnect_now();
          });
        }
      };
    }
    single = bridge->loops[0].session;
    exported = bridge->loops[0].exported;
    status->session = single;
    status->exported = exported;
    if (threads > 1) log::info("iserkit-nbd: {} event loops, one session each", threads);
  } else {
    initiator::MultipathOptions mo;
    mo.policy = cfg.policy;
    mo.session = cfg.session;
    mo.replacement_timeout = cfg.session.replacement_timeout;
    mo.path_replacement_timeout = cfg.path_replacement_timeout;
    mo.on_event = [status](const initiator::PathEvent& e) { status->on_path_event(e); };
    auto opened = co_await initiator::Multipath::open(ex, cfg.urls, scsi::Lun::from_index(lun_index), mo);
    if (!opened) {
      const initiator::ErrorContext context{.program = initiator::Program::nbd, .url = std::nullopt,
                                            .chap = &cfg.session.chap};
      std::cerr << "iserkit-nbd: multipath: " << initiator::diagnose(opened.error(), context).text() << ": "
                << cfg.urls.size() << " paths (see the log for which path failed)\n";
      co_return exit_status_of(opened.error());
    }
    multipath = *opened;
    status->multipath = multipath;
    channel = multipath;
    for (const auto& u : cfg.urls) description += (description.empty() ? "" : " ") + initiator::format_url(u);
    auto lun = co_await initiator::LunHandle::open(channel, scsi::Lun::from_index(lun_index));
    if (!lun) {
      co_await print_error(lun.error(), cfg.url, cfg.session, " (multipath)");
      co_await close_all();
      co_return exit_status_of(lun.error());
    }
    auto options = export_options;
    options.description = description;
    exported = std::make_shared<nbd::LunExport>(std::move(*lun), options);
    status->exported = exported;
  }
  status->loop_states[0] = BridgeStatus::State::connected;
  status->set(BridgeStatus::State::connected);
  const auto cap = exported->info();
  std::vector<std::shared_ptr<nbd::Export>> metered{exported};
  for (std::size_t k = 1; k < bridge->loops.size(); ++k) metered.push_back(bridge->loops[k].exported);
  std::shared_ptr<nbd::BridgeMetrics> metrics;
  if (!cfg.metrics.empty()) {
    auto opened = nbd::BridgeMetrics::open(cfg.metrics);
    if (!opened) {
      std::cerr << "iserkit-nbd: metrics: " << opened.error().message() << ": address=" << cfg.metrics << "\n";
      co_await close_all();
      co_return 1;
    }
    metrics = std::move(*opened);
    metrics->describe_export(cfg.url.target, lun_index);
    // One decorator per loop; its counters are atomic, so every loop counts into the same metrics.
    for (auto& m : metered) m = metrics->meter(m);
    std::cout << "metrics on " << format_host_port(parse_host_port(cfg.metrics).value_or(HostPort{}).host, metrics->port())
              << std::endl;
  }
  const nbd::ServerOptions server_options{.read_only = cfg.read_only, .max_connections = cfg.max_connections,
                                          .single_threaded = true,
                                          .tls_mode = cfg.tls.mode, .tls = cfg.tls_context,
                                          .handshake_limit = cfg.handshake_limit,
                                          .buffered_total = status->buffered};
  std::vector<nbd::ServerLoop> server_loops;
  for (std::size_t k = 0; k < metered.size(); ++k) server_loops.push_back({.io = &event_loops.io(k), .exported = metered[k]});
  // Accepts on the main loop; each connection then runs on the least loaded loop (server.hpp).
  auto server = std::make_shared<nbd::Server>(io, std::move(server_loops), server_options);
  status->server = server;
  status->buffer_limit_bytes = server_options.max_buffered_bytes;
  bool listening = false;
  nbd::PrivateSocket private_socket;  // --run without --socket/--listen: a socket only CMD knows
  if (!cfg.process.run_command.empty() && cfg.socket_path.empty() && cfg.listen.empty()) {
    auto made = nbd::PrivateSocket::create();
    if (!made) {
      std::cerr << "iserkit-nbd: --run: private socket directory: " << made.error().message() << "\n";
      co_return 1;
    }
    private_socket = std::move(*made);
    cfg.socket_path = private_socket.path();
  }
  nbd::ServedAddress served{.export_name = cfg.name};
  if (cfg.tls.mode == nbd::TlsMode::require) {
    // $uri of --run must then be TLS, with the credentials libnbd needs (the server's own files:
    // the key file holds the PSK, the certificate directory ca-cert.pem).
    served.tls = true;
    served.tls_psk_file = cfg.tls.psk_file;
    served.tls_certificates = cfg.tls.certificates_dir;
    if (!cfg.tls_context->psk_identities().empty()) served.tls_username = cfg.tls_context->psk_identities().front();
  }
  // Socket activation (iserkit-nbd@.socket, systemd-socket-activate): taken in main().
  for (int fd : cfg.passed_sockets) {
    if (auto r = server->adopt_listener(fd); !r) {
      std::cerr << "iserkit-nbd: socket activation: " << r.error().message() << "\n";
      co_return 1;
    }
    listening = true;
  }
  if (!cfg.socket_path.empty()) {
    if (auto r = server->listen_unix(cfg.socket_path); !r) {
      std::cerr << "iserkit-nbd: listen: " << r.error().message() << ": socket=" << cfg.socket_path << "\n";
      co_return 1;
    }
    (cfg.print_uri ? std::cerr : std::cout) << "serving " << description << " (" << cap.size_bytes << " bytes, "
                                            << cap.min_block_size_bytes << "-byte blocks) on unix:" << cfg.socket_path
                                            << std::endl;
    served.unix_socket = cfg.socket_path;
    listening = true;
  }
  if (!cfg.listen.empty()) {
    std::string host;
    std::uint16_t port = 0;
    if (!split_host_port(cfg.listen, host, port)) {
      std::cerr << "iserkit-nbd: --listen wants HOST:PORT, got " << cfg.listen << "\n";
      co_return 1;
    }
    auto bound = server->listen_tcp(host, port);
    if (!bound) {
      std::cerr << "iserkit-nbd: listen: " << bound.error().message() << ": address=" << cfg.listen << "\n";
      co_return 1;
    }
    (cfg.print_uri ? std::cerr : std::cout) << "serving " << description << " (" << cap.size_bytes << " bytes) on tcp:"
                                            << host << ":" << *bound << std::endl;
    if (!cfg.port_file.empty()) std::ofstream(cfg.port_file) << *bound << "\n";
    served.tcp_host = nbd::client_host(host);
    served.tcp_port = *bound;
    listening = true;
  }
  if (!listening) {
    std::cerr << "iserkit-nbd: nothing to listen on: give -k/--socket PATH, -p/--port PORT (TCP, -b/--bind ADDRESS) "
                 "or --listen HOST:PORT\n";
    co_return 1;
  }

  std::unique_ptr<StatusSocket> status_socket;
  if (!cfg.status_socket.empty()) {
    auto opened = StatusSocket::open(ex, cfg.status_socket, [status] { return status->json(); });
    if (!opened) {
      std::cerr << "iserkit-nbd: status socket: " << opened.error().message() << ": path=" << cfg.status_socket << "\n";
      co_return 1;
    }
    status_socket = std::move(*opened);
  }
  if (metrics) {
    // Session counters into the metrics once a second (loop 0's live, the other loops' sampled;
    // summed). The coroutine shares the metrics and ends with the io_context.
    asio::co_spawn(ex, [metrics, status]() -> Awaitable<void> {
      asio::steady_timer tick(co_await asio::this_coro::executor);
      while (true) {
        const initiator::SessionStats st = status->session_total().value_or(initiator::SessionStats{});
        metrics->update_session(st, copied_payload_bytes(), status->state == BridgeStatus::State::connected);
        const auto reconnect = status->reconnect_view();
        const auto mp_gave_up = status->multipath.lock() ? status->multipath.lock()->stats().gave_up : 0;
        metrics->update_reconnect(status->state == BridgeStatus::State::gave_up, st.gave_up + mp_gave_up,
                                  reconnect && reconnect->next_attempt_in_ms ? *reconnect->next_attempt_in_ms / 1000.0
                                                                             : 0.0);
        if (auto mp = status->multipath.lock()) metrics->update_paths(mp->paths(), mp->stats().path_retries);
        metrics->update_buffers(status->buffered->load(std::memory_order_relaxed), status->buffer_limit_bytes);
        tick.expires_after(std::chrono::seconds(1));
        boost::system::error_code ec;
        co_await tick.async_wait(use_awaitable_ec(ec));
        if (ec) co_return;
      }
    }, asio::detached);
  }
  asio::signal_set signals(ex, SIGINT, SIGTERM);
  signals.add(SIGUSR1);
  if (!cfg.process.run_command.empty()) signals.add(SIGCHLD);  // before the command can end
  // --print-uri (nbdkit's): the URI on stdout, before a --fork parent returns, so that
  // `uri=$(iserkit-nbd ... --fork --print-uri)` has it.
  if (cfg.print_uri) {
    if (served.unix_socket.empty() && served.tcp_port == 0) {
      std::cerr << "iserkit-nbd: --print-uri: only passed sockets (socket activation): no URI to print\n";
    } else {
      std::cout << nbd::nbd_uri(served) << std::endl;
    }
  }
  // --pid-file, --fork (the parent exits now), --run (captive.hpp).
  auto command = nbd::start_process_mode(cfg.process, served);
  if (!command) {
    std::cerr << "iserkit-nbd: --pid-file/--run: " << command.error().message() << "\n";
    co_return 1;
  }
  status->shutdown = [&signals] { signals.cancel(); };
  int exit_code = 0;
  while (true) {
    if (command->running() && command->finished(exit_code)) break;
    boost::system::error_code ec;
    const int signal = co_await signals.async_wait(use_awaitable_ec(ec));
    if (ec) break;
    if (signal == SIGCHLD) continue;  // checked at the top of the loop
    if (signal != SIGUSR1) break;
    std::cerr << status->line() << std::endl;
    status->write();
  }
  status->shutdown = nullptr;
  log::info("iserkit-nbd: shutting down");
  stop_sampling->store(true);
  exported->set_shutting_down();  // requests failing from here on get NBD_ESHUTDOWN
  server->stop();
  if (multipath) co_await multipath->logout();
  // Every loop's session logs out on its own loop (loop 0 here, the others through their loop).
  for (std::size_t k = 0; k < bridge->loops.size(); ++k) {
    if (k == 0) {
      co_await logout_loop(bridge->loops[0], nullptr);
    } else {
      co_await on_loop(event_loops.io(k), logout_loop(bridge->loops[k], status->samples[k]));
    }
  }
  // The connections drain (their requests fail with ESHUTDOWN once the sessions are gone); wait for
  // them, bounded, so that no loop stops with a connection still on it.
  {
    asio::steady_timer wait(ex);
    for (int i = 0; i < 500 && server->connection_count() > 0; ++i) {
      wait.expires_after(std::chrono::milliseconds(10));
      boost::system::error_code ec;
      co_await wait.async_wait(use_awaitable_ec(ec));
    }
    if (server->connection_count() > 0) log::warn("iserkit-nbd: {} NBD connections still open at exit", server->connection_count());
  }
  status->refresh_exported_counters();
  status->set(BridgeStatus::State::stopped);
  // Stopped by a signal while the command runs: it is told too, and its status is ours (nbdkit).
  if (command->running()) exit_code = command->stop_and_wait();
  co_return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options options("iserkit-nbd", "Serve a remote iSCSI LUN as an NBD export.\n"
                                          "Usage: iserkit-nbd iscsi://HOST[:PORT]/TARGET-IQN/LUN -k PATH         (Unix socket)\n"
                                          "       iserkit-nbd iscsi://HOST[:PORT]/TARGET-IQN/LUN -p 10809 [-b ADDRESS]  (TCP)\n"
                                          "       iserkit-nbd iser://HOST[:PORT]/TARGET-IQN/LUN -k PATH   (iSER, RDMA)\n"
                                          "       iserkit-nbd URL URL [URL...] --multipath failover|round-robin -k PATH\n"
                                          "         (several paths to one LUN, TCP)\n"
                                          "Options spelled as qemu-nbd and nbdkit spell them: -k, -p, -b, -x, -e, -t, -r, "
                                          "--fork, --pid-file,\n--exit-with-parent, --print-uri, --run. Durations: a bare "
                                          "number is seconds; 500ms, 1.5s, 2m, 1h.\nSizes: 4096, 4K, 1M, 2G. Words "
                                          "(digest, transport, ...): any case.");
  options.add_options()
      ("url", "iSCSI URL of the LUN; several URLs = several paths to the same LUN",
       cxxopts::value<std::vector<std::string>>())
      ("threads", "event loops (threads), 1..64, each with its own iSCSI session to the LUN (distinct ISIDs, "
                  "logged in at start); each NBD connection runs on the loop with the fewest. One URL only",
       cxxopts::value<unsigned>()->default_value("1"))
      ("k,socket", "serve on this Unix socket path (qemu-nbd -k)", cxxopts::value<std::string>())
      ("p,port", "serve on this TCP port (qemu-nbd/nbdkit -p; 0 = any free port, see --port-file); on -b's address. "
                 "Default 10809 when -b is given", cxxopts::value<std::string>())
      ("b,bind", "the address -p listens on (qemu-nbd -b; default 0.0.0.0, every IPv4 interface; :: for IPv6)",
       cxxopts::value<std::string>())
      ("listen", "serve on TCP HOST:PORT ([::]:10809, 127.0.0.1:0 for any free port); the same as -b HOST -p PORT",
       cxxopts::value<std::string>())
      ("port-file", "write the bound TCP port to this file", cxxopts::value<std::string>())
      ("metrics", "serve Prometheus metrics on HOST:PORT (:PORT = 127.0.0.1:PORT; 0 = any free port), "
                  "GET /metrics, 2 scrapes at a time", cxxopts::value<std::string>())
      ("status-socket", "answer each connection to this Unix socket (mode 0600) with the status as JSON "
                        "(`iserkit status PATH`)", cxxopts::value<std::string>())
      ("x,export-name", "export name (qemu-nbd -x; default TARGET/LUN; the empty name is always accepted)",
       cxxopts::value<std::string>())
      ("e,shared", "most NBD clients connected at once (qemu-nbd -e; 0 = no limit). Default 1024, not qemu-nbd's 1: "
                   "the bridge serves many clients (NBD_FLAG_CAN_MULTI_CONN)", cxxopts::value<unsigned>())
      ("t,persistent", "accepted for qemu-nbd scripts: iserkit-nbd always keeps serving after the last client "
                       "disconnects (stop it with SIGTERM, --run or --exit-with-parent)")
      ("r,read-only", "serve read-only (qemu-nbd/nbdkit -r; also spelled readonly, as nbdkit does)")
      ("initiator-name", "InitiatorName to log in with", cxxopts::value<std::string>())
      ("chap-file", "CHAP credentials (mode 0600, refused if group/other may access it): lines username = ..., "
                    "secret = ..., and for mutual CHAP target_username = ..., target_secret = ...; else "
                    "LIBISCSI_CHAP_USERNAME, LIBISCSI_CHAP_PASSWORD, LIBISCSI_CHAP_TARGET_USERNAME and "
                    "LIBISCSI_CHAP_TARGET_PASSWORD; a URL's USER[%SECRET]@ wins over both",
       cxxopts::value<std::string>())
      ("digest", "header and data digests to offer: none or crc32c (any case)",
       cxxopts::value<std::string>()->default_value("none"))
      ("transport", "url (iscsi:// = TCP, iser:// = iSER), tcp, iser, or auto (iSER, else TCP)",
       cxxopts::value<std::string>()->default_value("url"))
      ("iser-max-transfer", "over iSER: the largest SCSI command in bytes (the target's MAXIMUM TRANSFER LENGTH "
                            "lowers it; a target that states none gets 524288); larger requests are split",
       cxxopts::value<std::string>()->default_value("8M"))
      ("iser-stags", "over iSER: how command buffers are exposed to the target: automatic (a memory window per "
                     "command where the device has them, else the whole registered pool), per-command, whole-slab",
       cxxopts::value<std::string>())
      ("netns", "open the iSCSI/iSER connections in network namespace /run/netns/NAME (e.g. a tenant's) while "
                "NBD is served where this process runs (needs CAP_SYS_ADMIN)", cxxopts::value<std::string>())
      ("stats-file", "write the status (state=connected|recovering|gave_up, since=UTC, recovery counters, "
                     "copied_payload_bytes=N) to PATH on every change and at exit", cxxopts::value<std::string>())
      ("replacement-timeout", "seconds to wait for a new connection after losing one (requests wait and are sent "
                              "again); then requests fail at once with EIO while logins go on in the background "
                              "(every 5 s at most) until one succeeds; 0 = fail at once, no recovery",
       cxxopts::value<std::string>()->default_value("120"))
      ("on-give-up", "after the replacement timeout: error (keep serving, fail requests with EIO until a "
                     "background login succeeds) or exit (exit with status 3, for a supervisor to restart)",
       cxxopts::value<std::string>()->default_value("error"))
      ("nop-interval", "seconds of silence from the target before a NOP-Out ping (0 = never); a frozen target "
                       "is noticed after this plus --nop-timeout",
       cxxopts::value<std::string>()->default_value("5"))
      ("nop-timeout", "seconds a ping may stay unanswered before the connection counts as lost",
       cxxopts::value<std::string>()->default_value("5"))
      ("multipath", "with several URLs: failover (one path at a time) or round-robin (spread over the usable paths "
                    "of the best ALUA group)", cxxopts::value<std::string>()->default_value("failover"))
      ("path-replacement-timeout", "with several URLs: seconds a path's session tries to log in again by itself "
                                   "before its requests go to another path (--replacement-timeout is then how long "
                                   "requests wait while no path is usable)",
       cxxopts::value<std::string>()->default_value("5"))
      ("tls", "TLS (NBD_OPT_STARTTLS): off; on (offered, plain-text clients served too); require (before TLS every "
              "option but STARTTLS and ABORT is refused with NBD_REP_ERR_TLS_REQD)",
       cxxopts::value<std::string>()->default_value("off"))
      ("tls-certificates", "X.509 credentials: DIR with server-cert.pem, server-key.pem and ca-cert.pem (the CA "
                           "client certificates must chain to, with --tls-verify-peer)", cxxopts::value<std::string>())
      ("tls-psk", "TLS-PSK credentials: FILE of username:hexkey lines (psktool's format)", cxxopts::value<std::string>())
      ("tls-verify-peer", "with --tls-certificates: require a client certificate signed by DIR/ca-cert.pem")
      ("tls-handshake-timeout", "seconds a client may take to finish the TLS handshake after STARTTLS before it "
                                "is dropped", cxxopts::value<std::string>()->default_value("10"))
      ("handshake-limit", "seconds a client has from connecting to the end of the NBD handshake (option "
                          "haggling, TLS included) before it is dropped; 0: no limit",
       cxxopts::value<std::string>()->default_value("10"))
      ("run", "captive mode: once serving, run CMD with /bin/sh (it may use $uri, $nbd, $unixsocket, $port, "
              "$exportname); serve until it exits, then exit with its status. Without --socket/--listen the "
              "export is served on a private Unix socket", cxxopts::value<std::string>())
      ("fork", "go to the background once the listening socket is ready (the parent exits 0 then, 1 if "
               "the server failed to start)")
      ("pid-file", "write the server's pid to PATH once the listening socket is ready (also spelled pidfile, as nbdkit does)",
       cxxopts::value<std::string>())
      ("exit-with-parent", "exit (as on SIGTERM) when the process that started the bridge exits (nbdkit's; "
                           "prctl PR_SET_PDEATHSIG); not with --fork")
      ("print-uri", "print the export's NBD URI (nbd+unix:///NAME?socket=PATH or nbd://HOST:PORT/NAME) on stdout "
                    "once serving, before --fork returns; the \"serving ...\" lines then go to stderr")
      ("log-level", "trace, debug, info, warn, error, off (any case)", cxxopts::value<std::string>()->default_value("warn"))
      ("config", "TOML file of options: keys are the long options above (url = \"iscsi://...\", socket = \"...\", "
                 "read-only = true); the command line wins over it", cxxopts::value<std::string>())
      ("version", "print the version")
      ("h,help", "print this help");
  // Other spellings, not in --help (its option table is the "" group): iserkit-nbd's former --name,
  // nbdkit's --readonly and --pidfile. Also keys of --config files.
  options.add_options("other spellings")
      ("name", "former spelling of --export-name (deprecated)", cxxopts::value<std::string>())
      ("readonly", "nbdkit's spelling of --read-only")
      ("pidfile", "nbdkit's spelling of --pid-file", cxxopts::value<std::string>());
  const pid_t parent_at_start = ::getppid();  // --exit-with-parent checks it has not changed
  options.parse_positional({"url"});
  options.positional_help("URL");
  Config cfg;
  try {
    auto args = nbd::parse_with_config_file(options, argc, argv);
    if (args.count("help")) {
      std::cout << options.help({""}) << "\n";
      return 0;
    }
    if (args.count("version")) {
      const auto build = metrics::build_info();
      std::cout << "iserkit-nbd " << build.version << " (commit " << build.commit << ", " << build.compiler << ")\n";
      return 0;
    }
    if (!args.count("url")) {
      std::cerr << "iserkit-nbd: missing URL (see --help)\n";
      return 2;
    }
    for (const auto& text : args["url"].as<std::vector<std::string>>()) {
      auto url = initiator::parse_url(text);
      if (!url || url->target.empty()) {
        std::cerr << "iserkit-nbd: " << initiator::diagnose_bad_url(text, true).text() << "\n";
        return 2;
      }
      cfg.urls.push_back(*url);
    }
    cfg.url = cfg.urls.front();
    // The environment's secrets are not passed on to --run's command.
    // Every path logs in with the same credentials.
    auto chap = initiator::daemon_chap(
        "iserkit-nbd", argc, argv,
        args.count("chap-file") ? std::optional(args["chap-file"].as<std::string>()) : std::nullopt, cfg.urls,
        cfg.session.chap);
    if (!chap) {
      std::cerr << chap.error() << "\n";
      return 2;
    }
    cfg.session.chap = std::move(*chap);
    initiator::check_chap_names(cfg.session.chap, "CHAP credentials (the URL, --chap-file or LIBISCSI_CHAP_*)");
    for (const auto& u : cfg.urls) {
      if (u.lun.value_or(0) != cfg.url.lun.value_or(0)) {
        std::cerr << "iserkit-nbd: the paths name different LUNs; every URL must name the same LUN\n";
        return 2;
      }
    }
    const unsigned threads = args["threads"].as<unsigned>();
    if (threads < 1 || threads > 64) {
      std::cerr << "iserkit-nbd: --threads wants 1..64\n";
      return 2;
    }
    if (threads > 1 && cfg.urls.size() > 1) {
      std::cerr << "iserkit-nbd: --threads " << threads
                << ": several URLs (multipath) run on one event loop; give one URL or --threads 1\n";
      return 2;
    }
    cfg.threads = threads;
    cfg.policy = initiator::multipath_option(args["multipath"].as<std::string>());
    if (args.count("socket")) cfg.socket_path = args["socket"].as<std::string>();
    if (args.count("listen")) cfg.listen = args["listen"].as<std::string>();
    // -p/-b (qemu-nbd, nbdkit): TCP on BIND:PORT, 0.0.0.0 and 10809 when one of the two is missing.
    if (args.count("port") || args.count("bind")) {
      if (args.count("listen")) {
        std::cerr << "iserkit-nbd: give either --listen HOST:PORT or -b/--bind and -p/--port, not both\n";
        return 2;
      }
      std::uint16_t port = 10809;
      if (args.count("port")) {
        const auto text = args["port"].as<std::string>();
        unsigned long value = 0;
        std::size_t used = 0;
        try {
          value = std::stoul(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != text.size() || value > 65535 || text.front() == '-' || text.front() == '+') {
          std::cerr << "iserkit-nbd: --port " << text << ": want a TCP port 0..65535 (0 = any free port)\n";
          return 2;
        }
        port = static_cast<std::uint16_t>(value);
      }
      std::string host = args.count("bind") ? args["bind"].as<std::string>() : std::string("0.0.0.0");
      if (host.empty()) {
        std::cerr << "iserkit-nbd: --bind \"\": want an address (0.0.0.0, ::, 127.0.0.1, a host name)\n";
        return 2;
      }
      if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";
      cfg.listen = host + ":" + std::to_string(port);
    }
    if (args.count("port-file")) cfg.port_file = args["port-file"].as<std::string>();
    // Of two spellings of one option the later wins: --config's keys come first, then the command line.
    for (const auto& kv : args.arguments()) {
      if (kv.key() == "export-name" || kv.key() == "name") cfg.name = kv.value();
      if (kv.key() == "pid-file" || kv.key() == "pidfile") cfg.process.pid_file = kv.value();
    }
    if (args.count("name"))
      std::cerr << "iserkit-nbd: warning: --name is deprecated: write -x/--export-name (qemu-nbd's spelling)\n";
    cfg.read_only = args.count("read-only") > 0 || args.count("readonly") > 0;
    if (args.count("shared")) {
      const unsigned shared = args["shared"].as<unsigned>();
      cfg.max_connections = shared == 0 ? std::numeric_limits<std::size_t>::max() : shared;
    }
    cfg.print_uri = args.count("print-uri") > 0;
    cfg.exit_with_parent = args.count("exit-with-parent") > 0;
    if (args.count("initiator-name")) {
      cfg.session.initiator_name = args["initiator-name"].as<std::string>();
      initiator::check_initiator_name(cfg.session.initiator_name);
    }
    const auto d = initiator::digest_option("digest", args["digest"].as<std::string>());
    cfg.session.header_digest = cfg.session.data_digest = d;
    cfg.session.transport = initiator::transport_option(args["transport"].as<std::string>());
    cfg.session.iser_max_transfer_bytes = static_cast<std::uint32_t>(
        cli::size_option("iser-max-transfer", args["iser-max-transfer"].as<std::string>(), 4096, UINT32_MAX));
    cfg.session.iser_unstated_max_transfer_bytes =
        std::min(cfg.session.iser_unstated_max_transfer_bytes, cfg.session.iser_max_transfer_bytes);
    if (args.count("iser-stags")) cfg.session.iser_stags = initiator::iser_stags_option(args["iser-stags"].as<std::string>());
    if (args.count("netns")) {
      cfg.session.netns = args["netns"].as<std::string>();
      if (!netns::valid_name(cfg.session.netns)) {
        std::cerr << "iserkit-nbd: --netns wants a namespace name under /run/netns\n";
        return 2;
      }
    }
    if (args.count("stats-file")) cfg.stats_file = args["stats-file"].as<std::string>();
    if (args.count("status-socket")) cfg.status_socket = args["status-socket"].as<std::string>();
    if (args.count("metrics")) {
      cfg.metrics = args["metrics"].as<std::string>();
      if (!cfg.metrics.empty() && cfg.metrics.front() == ':') cfg.metrics = "127.0.0.1" + cfg.metrics;  // loopback default
    }
    using ms = std::chrono::milliseconds;
    const auto duration = [&](const char* name, ms min) {
      return cli::duration_option(name, args[name].as<std::string>(), min);
    };
    cfg.session.replacement_timeout = duration("replacement-timeout", ms(0));
    cfg.session.nop_interval = duration("nop-interval", ms(0));
    cfg.session.nop_timeout = duration("nop-timeout", ms(1));
    cfg.path_replacement_timeout = duration("path-replacement-timeout", ms(0));
    cfg.on_give_up = cli::enum_option<OnGiveUp>("on-give-up", args["on-give-up"].as<std::string>(),
                                                {{"error", OnGiveUp::error}, {"exit", OnGiveUp::exit}});
    log::set_level(cli::log_level_option(args["log-level"].as<std::string>()));
    if (args.count("run")) cfg.process.run_command = args["run"].as<std::string>();
    cfg.process.daemonize = args.count("fork") > 0;
    if (cfg.exit_with_parent && cfg.process.daemonize) {
      std::cerr << "iserkit-nbd: --exit-with-parent and --fork exclude each other (a forked server has left its "
                   "parent on purpose)\n";
      return 2;
    }
    cfg.tls.mode = cli::enum_option<nbd::TlsMode>(
        "tls", args["tls"].as<std::string>(),
        {{"off", nbd::TlsMode::off}, {"on", nbd::TlsMode::on}, {"require", nbd::TlsMode::require}});
    if (args.count("tls-certificates")) cfg.tls.certificates_dir = args["tls-certificates"].as<std::string>();
    if (args.count("tls-psk")) cfg.tls.psk_file = args["tls-psk"].as<std::string>();
    cfg.tls.verify_peer = args.count("tls-verify-peer") > 0;
    cfg.tls.handshake_timeout = duration("tls-handshake-timeout", ms(1));
    cfg.handshake_limit = duration("handshake-limit", ms(0));
    if (cfg.tls.mode == nbd::TlsMode::off) {
      if (!cfg.tls.certificates_dir.empty() || !cfg.tls.psk_file.empty() || cfg.tls.verify_peer) {
        std::cerr << "iserkit-nbd: --tls-certificates, --tls-psk and --tls-verify-peer need --tls=on or --tls=require\n";
        return 2;
      }
    } else {
      auto context = nbd::TlsContext::create(cfg.tls);
      if (!context) {
        std::cerr << "iserkit-nbd: tls: " << context.error() << "\n";
        return 2;
      }
      cfg.tls_context = std::move(*context);
    }
  } catch (const cxxopts::exceptions::exception& e) {
    std::cerr << "iserkit-nbd: " << e.what() << "\n";
    return 2;
  } catch (const cli::BadValue& e) {  // a value the shared grammar refuses; the message lists what is accepted
    std::cerr << "iserkit-nbd: " << e.what() << "\n";
    return 2;
  } catch (const std::runtime_error& e) {  // --config FILE
    std::cerr << "iserkit-nbd: " << e.what() << "\n";
    return 2;
  }
  // Socket activation (sd_listen_fds through libsystemd) before --fork: LISTEN_PID names this
  // process, not the child that will serve, so the child would find no passed socket.
  auto passed = service::passed_sockets();
  if (!passed) {
    std::cerr << "iserkit-nbd: socket activation: " << passed.error().message()
              << " (LISTEN_FDS must name listening stream sockets; passed sockets need a build with libsystemd)\n";
    return 1;
  }
  cfg.passed_sockets = std::move(*passed);
  // Nothing to serve on: said before the login, not after it. Unlike qemu-nbd, no default of
  // 0.0.0.0:10809: a LUN is not put on the network unasked (nbd_bridge/README.md).
  if (cfg.socket_path.empty() && cfg.listen.empty() && cfg.passed_sockets.empty() && cfg.process.run_command.empty()) {
    std::cerr << "iserkit-nbd: nothing to listen on: give -k/--socket PATH, -p/--port PORT (TCP, -b/--bind ADDRESS) "
                 "or --listen HOST:PORT\n";
    return 2;
  }
  // --exit-with-parent: before the login, so that a parent gone meanwhile is noticed too.
  if (cfg.exit_with_parent) {
    if (auto r = nbd::exit_with_parent(parent_at_start); !r) {
      std::cerr << "iserkit-nbd: --exit-with-parent: "
                << (r.error() == std::errc::no_such_process ? std::string("the parent has already exited")
                                                            : r.error().message())
                << "\n";
      return 1;
    }
  }
  // --fork: before any thread or io_context exists; only the child returns.
  if (auto r = nbd::begin_process_mode(cfg.process); !r) {
    std::cerr << "iserkit-nbd: --fork: " << r.error().message() << "\n";
    return 1;
  }
  std::signal(SIGPIPE, SIG_IGN);
  // Every loop, loop 0 (this thread's) included, is owned by event_loops, which destroys their
  // pending handlers on all loops before it destroys any loop (event_loops.hpp).
  nbd::EventLoops event_loops(cfg.threads);
  asio::io_context& io = event_loops.io(0);
  int rc = 1;
  auto status = std::make_shared<BridgeStatus>();
  status->stats_file = cfg.stats_file;
  status->set_threads(cfg.threads);
  if (cfg.on_give_up == OnGiveUp::exit) {
    status->exit_on_give_up = [&] {
      std::cerr << "iserkit-nbd: exiting (--on-give-up exit)\n";
      rc = 3;
      // One loop: stop at once, as always. Several: shut down in order (the other loops' sessions
      // log out and their connections drain) unless still starting.
      if (event_loops.size() > 1 && status->shutdown) {
        status->shutdown();
      } else {
        io.stop();
      }
    };
  }
  auto bridge = std::make_shared<Bridge>();
  event_loops.start();
  asio::co_spawn(io, run(event_loops, std::move(cfg), status, bridge), [&](std::exception_ptr e, int r) {
    if (rc != 3) rc = e ? 1 : r;
    io.stop();
  });
  io.run();
  event_loops.stop_and_join();
  // Payload bytes our code copied in user space (copy_counter.hpp): NBD buffers go to the target
  // as Data-Out / come back as Data-In (TCP) or are RDMA-read / -written in place (iSER).
  std::cerr << "iserkit-nbd: copied payload bytes: " << copied_payload_bytes() << "\n";
  // The iSER send queues' use (issue 23 item 7): ibv_post_send calls and work requests per command.
  if (const auto posts = datamover::iser_post_counts(); posts.scsi_commands > 0)
    std::cerr << "iserkit-nbd: iser posts: post_send_calls=" << posts.post_send_calls
              << " work_requests=" << posts.work_requests << " scsi_commands=" << posts.scsi_commands << "\n";
  status->write();
  // Every loop has stopped: the sessions go now, on this thread, before any loop is destroyed;
  // then what the loops still hold (a coroutine frame of loop 0 may keep loop 1's session).
  bridge.reset();
  event_loops.shutdown();
  return rc;
}

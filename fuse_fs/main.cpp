// iserkit-fuse: mounts what an iSCSI portal offers as a file tree — one directory per target
// (SendTargets), one regular file per LUN (REPORT LUNS) of the LUN's capacity, xattrs and an "info"
// file — so ordinary file tools, fio or a loop device can use a LUN without the kernel's nbd.
// Startup order matters: discovery (so a bad portal fails before anything is mounted), mount,
// daemonize (fork: no thread may exist yet), then the loop thread and the FUSE worker threads.
// Shutdown (SIGINT/SIGTERM or fusermount3 -u): leave the FUSE loop, log every session out, wait
// for replies still in flight, stop the loop, then unmount (which closes /dev/fuse). THREAD MODEL: see fuse_ops.cpp.
// MULTIPATH (--multipath failover|round-robin): a target reached through several portals (several
// URLs naming it, or the TargetAddresses SendTargets lists for it) is one directory whose LUNs do
// I/O through an initiator::Multipath (portal_view.hpp); --path-replacement-timeout is then how long
// a path tries to come back by itself, --replacement-timeout how long requests wait with no path.
// CHAP (discovery and every target, one set of credentials): --chap-file (mode 0600) or libiscsi's
// LIBISCSI_CHAP_* variables; a URL's USER[%SECRET]@ wins (initiator/chap_credentials.hpp).
// LOGS: standard error with -f; once daemonized, syslog(3) (log::to_syslog: the journal under
// systemd), since standard error then goes to /dev/null.
#include <unistd.h>

#include <climits>
#include <csignal>
#include <cstdlib>
#include <future>
#include <iostream>
#include <thread>

#include <cxxopts.hpp>

#include "fuse_fs/fuse_ops.hpp"
#include "fuse_fs/portal_view.hpp"
#include "fuse_fs/write_payload.hpp"
#include "iserkit/common/netns.hpp"
#include "iserkit/common/asio.hpp"
#include "iserkit/common/cli_values.hpp"
#include "iserkit/common/copy_counter.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/initiator/chap_credentials.hpp"
#include "iserkit/initiator/client.hpp"
#include "iserkit/initiator/diagnosis.hpp"
#include "iserkit/initiator/option_values.hpp"
#include "iserkit/initiator/url.hpp"

namespace {

using namespace iserkit;

struct Config {
  std::vector<initiator::Url> urls;
  std::string mountpoint;
  std::vector<std::string> fuse_options;
  bool foreground = false;
  bool debug = false;
  fuse_fs::MountOptions mount;
  fuse_fs::ViewOptions view;
  unsigned max_threads = 64;
};

// A duration option (common/cli_values.hpp): a bare number is seconds; 500ms, 1.5s, 2m, 1h.
std::chrono::milliseconds duration(const cxxopts::ParseResult& args, const char* name, std::chrono::milliseconds min) {
  return cli::duration_option(name, args[name].as<std::string>(), min);
}

int fail_usage(const std::string& what) {
  std::cerr << "iserkit-fuse: " << what << " (see --help)\n";
  return 2;
}

// Reads the command line into `cfg`; returns -1 to go on, else the exit code.
int parse(int argc, char** argv, Config& cfg) {
  cxxopts::Options options(
      "iserkit-fuse",
      "Mount the targets and LUNs of iSCSI portals as a file tree.\n"
      "Usage: iserkit-fuse iscsi://HOST[:PORT][/TARGET-IQN] [MORE-URLS…] MOUNTPOINT [options]\n"
      "       iserkit-fuse URL [URL…] MOUNTPOINT --multipath failover|round-robin   (a target reached through\n"
      "         several portals is one directory; its LUNs do I/O over every path, TCP, iSER or both)\n"
      "  MOUNTPOINT/<target-iqn>/lun<N>   the LUN's data (its size is the LUN's capacity)\n"
      "  MOUNTPOINT/<target-iqn>/info     JSON: portal, session parameters, LUNs (--multipath: each path, its state)\n"
      "  MOUNTPOINT/.rescan               write anything to rescan now (so does SIGHUP)\n"
      "Unmount with fusermount3 -u MOUNTPOINT, or SIGINT/SIGTERM to iserkit-fuse.");
  options.add_options()
      ("args", "iSCSI URLs of portals or targets, then the mount point", cxxopts::value<std::vector<std::string>>())
      ("o", "FUSE mount options, passed through (allow_other, ro, max_read=N, …); repeatable",
       cxxopts::value<std::vector<std::string>>())
      ("f,foreground", "stay in the foreground, logging to standard error (without it the daemon logs to syslog: "
                       "the journal where journald runs)")
      ("d,debug", "print every FUSE request (implies --foreground)")
      ("r,read-only", "refuse writes to LUN files (EROFS); .rescan stays writable (-o ro: nothing is)")
      ("netns", "open the iSCSI/iSER connections in network namespace /run/netns/NAME (e.g. a tenant's) while the "
                "mount stays where this process runs (`ip netns exec` would hide it in its own mount namespace; "
                "needs CAP_SYS_ADMIN)", cxxopts::value<std::string>())
      ("timeout", "seconds a SCSI command, TCP connect or login may take; a target that stops answering gives EIO "
                  "after at most this long (with --multipath: each attempt on a path, a timed-out command is sent "
                  "again on another path)",
       cxxopts::value<std::string>()->default_value("30"))
      ("replacement-timeout", "seconds a session waits for a new connection after losing one, its commands "
                              "held and sent again (each then gets --timeout); 0 = fail at once with EIO and log "
                              "in again on the next use. With --multipath: seconds requests wait while no path is "
                              "usable, then EIO (0 = at once)",
       cxxopts::value<std::string>()->default_value("0"))
      ("nop-interval", "seconds of silence from a target before a NOP-Out ping (0 = never); a frozen target is "
                       "noticed after this plus --nop-timeout, and with --replacement-timeout its connection is "
                       "then replaced",
       cxxopts::value<std::string>()->default_value("5"))
      ("nop-timeout", "seconds a ping may stay unanswered before the connection counts as lost",
       cxxopts::value<std::string>()->default_value("5"))
      ("multipath", "failover (one path at a time) or round-robin (spread over the usable paths of the best ALUA "
                    "group): every URL naming a target and every TargetAddress discovery lists for it is a path to "
                    "it; without this option a target uses the first portal that listed it",
       cxxopts::value<std::string>())
      ("path-replacement-timeout", "with --multipath: seconds a path's session tries to log in again by itself "
                                   "before its requests go to another path (paths are always checked with "
                                   "NOP-Out pings; --nop-interval 0 means 5 s there)",
       cxxopts::value<std::string>()->default_value("5"))
      ("cache-time", "seconds a directory listing is reused before SendTargets/REPORT LUNS run again (0 = every time)",
       cxxopts::value<std::string>()->default_value("5"))
      ("attr-timeout", "seconds the kernel may cache names and attributes", cxxopts::value<std::string>()->default_value("1"))
      ("direct-io", "bypass the page cache for every LUN file (O_DIRECT opens always do)")
      ("splice-writes", "=always|never|auto: splice requests from /dev/fuse, so WRITE payload of a page or more is "
                        "read straight into a session-pool buffer (no bounce copy over iSER; costs a system call per "
                        "request and, for O_DIRECT writes, a kernel copy). auto: when a portal URL is iser://; "
                        "--splice-writes alone: always",
       cxxopts::value<std::string>()->default_value("auto")->implicit_value("always"))
      ("max-threads", "most FUSE worker threads (each write in flight from libfuse's buffer holds one)",
       cxxopts::value<unsigned>()->default_value("64"))
      ("initiator-name", "InitiatorName to log in with", cxxopts::value<std::string>())
      ("chap-file", "CHAP credentials for discovery and every target (mode 0600, refused if group/other may "
                    "access it): lines username = ..., secret = ..., and for mutual CHAP target_username = ..., "
                    "target_secret = ...; else LIBISCSI_CHAP_USERNAME, LIBISCSI_CHAP_PASSWORD, "
                    "LIBISCSI_CHAP_TARGET_USERNAME and LIBISCSI_CHAP_TARGET_PASSWORD; a URL's USER[%SECRET]@ wins "
                    "over both", cxxopts::value<std::string>())
      ("digest", "header and data digests to offer: none or crc32c (any case)",
       cxxopts::value<std::string>()->default_value("none"))
      ("log-level", "trace, debug, info, warn, error, off (any case)", cxxopts::value<std::string>()->default_value("warn"))
      ("version", "print the version")
      ("h,help", "print this help");
  options.parse_positional({"args"});
  options.positional_help("URL... MOUNTPOINT");
  try {
    auto args = options.parse(argc, argv);
    if (args.count("help")) {
      std::cout << options.help() << "\n";
      return 0;
    }
    if (args.count("version")) {
      std::cout << "iserkit-fuse " << ISERKIT_VERSION << "\n";
      return 0;
    }
    const auto positional = args.count("args") ? args["args"].as<std::vector<std::string>>() : std::vector<std::string>{};
    if (positional.size() < 2) return fail_usage("want a URL and a mount point");
    for (std::size_t i = 0; i + 1 < positional.size(); ++i) {
      auto url = initiator::parse_url(positional[i]);
      if (!url) return fail_usage(initiator::diagnose_bad_url(positional[i], false).text());
      if (url->lun) {
        auto whole = *url;
        whole.lun.reset();
        whole.password.clear();
        return fail_usage("the URL names LUN " + std::to_string(*url->lun) + ": give the portal or the target (" +
                          initiator::format_url(whole) + "): each of its LUNs becomes a file lun<N>");
      }
      cfg.urls.push_back(*url);
    }
    // One set of credentials for every portal and target (sessions are made from discovered names).
    auto chap = initiator::daemon_chap(
        "iserkit-fuse", argc, argv,
        args.count("chap-file") ? std::optional(args["chap-file"].as<std::string>()) : std::nullopt, cfg.urls,
        cfg.view.session.chap);
    if (!chap) {
      std::cerr << chap.error() << "\n";
      return 2;
    }
    cfg.view.session.chap = std::move(*chap);
    initiator::check_chap_names(cfg.view.session.chap, "CHAP credentials (the URL, --chap-file or LIBISCSI_CHAP_*)");
    char real[PATH_MAX];
    if (::realpath(positional.back().c_str(), real) == nullptr)
      return fail_usage("mount point " + positional.back() + ": " + std::strerror(errno));
    cfg.mountpoint = real;
    if (args.count("o")) cfg.fuse_options = args["o"].as<std::vector<std::string>>();
    cfg.debug = args.count("debug") > 0;
    cfg.foreground = cfg.debug || args.count("foreground") > 0;
    cfg.mount.read_only = args.count("read-only") > 0;
    for (const auto& o : cfg.fuse_options) {
      if (o == "ro") cfg.mount.read_only = true;
    }
    cfg.mount.direct_io = args.count("direct-io") > 0;
    using ms = std::chrono::milliseconds;
    cfg.mount.attr_timeout_seconds = static_cast<double>(duration(args, "attr-timeout", ms(0)).count()) / 1000.0;
    cfg.max_threads = std::max(1u, args["max-threads"].as<unsigned>());
    const auto timeout = duration(args, "timeout", ms(1));
    const auto cache = duration(args, "cache-time", ms(0));
    auto& so = cfg.view.session;
    if (args.count("initiator-name")) {
      so.initiator_name = args["initiator-name"].as<std::string>();
      initiator::check_initiator_name(so.initiator_name);
    }
    if (args.count("netns")) {
      so.netns = args["netns"].as<std::string>();
      if (!netns::valid_name(so.netns)) {
        std::cerr << "iserkit-fuse: --netns wants a namespace name under /run/netns\n";
        return 2;
      }
    }
    so.header_digest = so.data_digest = initiator::digest_option("digest", args["digest"].as<std::string>());
    // One bound for everything that waits on the target (see README "Timeouts").
    so.command_timeout = timeout;
    so.connect_timeout = std::min(so.connect_timeout, timeout);
    so.login_timeout = std::min(so.login_timeout, timeout);
    so.replacement_timeout = duration(args, "replacement-timeout", ms(0));
    // Without pings a frozen target (connection up, nothing answers) is never seen as lost: each
    // command would just time out after --timeout and the session would never be replaced.
    so.nop_interval = duration(args, "nop-interval", ms(0));
    so.nop_timeout = duration(args, "nop-timeout", ms(1));
    // Decided here, once for the mount: libfuse takes FUSE_CAP_SPLICE_READ at init, before any
    // session exists (write_payload.hpp, README "Write payload").
    using fuse_fs::SpliceWrites;
    const auto splice = cli::enum_option<SpliceWrites>(
        "splice-writes", args["splice-writes"].as<std::string>(),
        {{"always", SpliceWrites::always}, {"never", SpliceWrites::never}, {"auto", SpliceWrites::automatic}});
    cfg.mount.splice_writes = fuse_fs::splice_wanted(splice, cfg.urls, so.transport);
    if (args.count("multipath")) {
      const auto policy = initiator::multipath_option(args["multipath"].as<std::string>());
      cfg.view.multipath = policy;
    }
    cfg.view.path_replacement_timeout = duration(args, "path-replacement-timeout", ms(0));
    cfg.view.portals = cfg.urls;
    cfg.view.cache_time = cache;
    log::set_level(cli::log_level_option(args["log-level"].as<std::string>()));
    log::info("fuse: --splice-writes={}: {}", fuse_fs::to_string(splice),
              cfg.mount.splice_writes ? "requests are spliced (WRITE payload into session-pool buffers)"
                                      : "WRITEs go from libfuse's buffer");
  } catch (const cxxopts::exceptions::exception& e) {
    return fail_usage(e.what());
  } catch (const cli::BadValue& e) {  // the shared grammar: the message lists what is accepted
    return fail_usage(e.what());
  }
  return -1;
}

// Waits for SIGHUP and rescans, until cancelled.
iserkit::Awaitable<void> rescan_on_hangup(asio::signal_set& signals, fuse_fs::PortalView& view) {
  for (;;) {
    boost::system::error_code ec;
    co_await signals.async_wait(use_awaitable_ec(ec));
    if (ec) co_return;
    log::info("fuse: SIGHUP: rescanning");
    if (auto r = co_await view.rescan_all(); !r) log::warn("fuse: rescan: {}", r.error().message());
  }
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  if (int rc = parse(argc, argv, cfg); rc >= 0) return rc;

  asio::io_context io(1);
  fuse_fs::PortalView view(io.get_executor(), cfg.view);
  // Discovery first, each on a private io_context that is gone before the fork below. A portal that
  // does not answer is a warning (its targets appear once it does); none answering is an error.
  std::size_t targets = 0;
  int discovered = 0;
  int tried = 0;
  int status = 1;  // the exit status when no portal answers (iserkit-fuse(1) EXIT STATUS)
  for (std::size_t i = 0; i < cfg.urls.size(); ++i) {
    if (!cfg.urls[i].target.empty()) {
      ++targets;
      continue;
    }
    ++tried;
    auto found = initiator::BlockingClient::discover(cfg.urls[i], cfg.view.session);
    if (!found) {
      const auto d = initiator::diagnose(found.error(), {.program = initiator::Program::fuse,
                                                         .url = cfg.urls[i],
                                                         .chap = &cfg.view.session.chap});
      std::cerr << "iserkit-fuse: discovery: " << d.text() << ": url=" << initiator::format_url(cfg.urls[i]) << "\n";
      status = initiator::exit_code(d.exit_status);
      continue;
    }
    ++discovered;
    targets += found->size();
    view.set_listing(i, *found);
  }
  if (tried > 0 && discovered == 0 && targets == 0) return status;
  cfg.mount.uid = ::getuid();
  cfg.mount.gid = ::getgid();
  ::clock_gettime(CLOCK_REALTIME, &cfg.mount.mount_time);
  fuse_fs::FuseContext context(view, cfg.mount);

  std::string options = "fsname=" + initiator::format_url(cfg.urls.front()) + ",subtype=iserkit,default_permissions";
  // --read-only is enforced by the view (EROFS, mode 0444), not with the kernel's "ro", so the
  // .rescan control file stays writable; -o ro makes the kernel refuse every write as well.
  for (const auto& o : cfg.fuse_options) options += "," + o;
  std::vector<std::string> fuse_argv = {"iserkit-fuse", "-o", options};
  if (cfg.debug) fuse_argv.emplace_back("-d");
  std::vector<char*> fuse_ptrs;
  for (auto& a : fuse_argv) fuse_ptrs.push_back(a.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(fuse_ptrs.size()), fuse_ptrs.data());
  const auto& ops = fuse_fs::fuse_operations();
  fuse_session* se = fuse_session_new(&args, &ops, sizeof ops, &context);
  fuse_opt_free_args(&args);
  if (se == nullptr) {
    std::cerr << "iserkit-fuse: bad FUSE options: " << options << "\n";
    return 2;
  }
  if (fuse_session_mount(se, cfg.mountpoint.c_str()) != 0) {
    std::cerr << "iserkit-fuse: mount failed: mountpoint=" << cfg.mountpoint << "\n";
    fuse_session_destroy(se);
    return 1;
  }
  if (!cfg.foreground) {
    io.notify_fork(asio::execution_context::fork_prepare);
    fuse_daemonize(0);  // the parent exits here
    io.notify_fork(asio::execution_context::fork_child);
    // Standard error is /dev/null now: log to syslog (the journal where journald runs), before
    // any other thread exists.
    log::to_syslog("iserkit-fuse");
  }

  // SIGHUP rescans (registered before fuse_set_signal_handlers, which then leaves it alone);
  // SIGINT/SIGTERM end the FUSE loop.
  asio::signal_set hangup(io, SIGHUP);
  asio::co_spawn(io, rescan_on_hangup(hangup, view), asio::detached);
  if (fuse_set_signal_handlers(se) != 0) {
    log::error("fuse: cannot install signal handlers");
    std::cerr << "iserkit-fuse: cannot install signal handlers\n";
    fuse_session_unmount(se);
    fuse_session_destroy(se);
    return 1;
  }
  const std::size_t shown = view.tree().list(fuse_fs::root_ino).size() - 1;  // minus .rescan
  auto work = asio::make_work_guard(io);
  std::thread loop([&io] { io.run(); });
  std::cout << "iserkit-fuse: " << initiator::format_url(cfg.urls.front()) << (cfg.urls.size() > 1 ? " (and more)" : "")
            << " mounted on " << cfg.mountpoint << " (" << shown << " targets)" << std::endl;
  log::info("fuse: mounted: url={} mountpoint={} targets={}", initiator::format_url(cfg.urls.front()), cfg.mountpoint,
            shown);

  fuse_loop_config* loop_config = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(loop_config, cfg.max_threads);
  fuse_loop_cfg_set_idle_threads(loop_config, std::min(cfg.max_threads, 16u));
  const int rc = fuse_session_loop_mt(se, loop_config);
  fuse_loop_cfg_destroy(loop_config);
  log::info("fuse: loop ended: rc={}", rc);

  fuse_remove_signal_handlers(se);
  std::promise<void> logged_out;
  asio::co_spawn(io, view.shutdown(), [&](std::exception_ptr) { logged_out.set_value(); });
  logged_out.get_future().wait();
  // Replies still running on the loop finish quickly now that every session is closed. They write
  // to /dev/fuse, so they must be done before fuse_session_unmount() closes that descriptor: a
  // reply racing the close (ThreadSanitizer, integration_fuse_tree) could land in whatever file
  // next reuses the descriptor number.
  const auto deadline = std::chrono::steady_clock::now() + cfg.view.session.command_timeout + std::chrono::seconds(5);
  while (context.in_flight.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // The last handler on the loop: handles released earlier were posted for deletion before it
  // (one thread runs the loop, in order); handles never released (files still open at unmount)
  // are freed here, while the loop still owns their LUN state.
  std::promise<void> drained;
  asio::post(io, [&] {
    free_open_files(context);
    hangup.cancel();
    drained.set_value();
  });
  drained.get_future().wait();
  work.reset();
  io.stop();
  loop.join();  // nothing runs on the loop any more: no reply can touch the descriptor
  fuse_session_unmount(se);
  fuse_session_destroy(se);
  std::cerr << "iserkit-fuse: copied payload bytes: " << copied_payload_bytes()
            << "; writes through splice: " << context.spliced_writes.load() << "\n";
  log::info("fuse: unmounted: mountpoint={} copied_payload_bytes={} spliced_writes={}", cfg.mountpoint,
            copied_payload_bytes(), context.spliced_writes.load());
  // rc > 0 is the signal that ended the loop: a requested, clean unmount.
  return rc < 0 ? 1 : 0;
}

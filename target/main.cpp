// iserkit-target: the bundled iSCSI target (RFC 7143) serving files, block devices and memory LUNs
// over TCP and, where the host has an RDMA device, iSER (RFC 7145) on the same portals. Layer 6
// front end: flags (cxxopts) and the --config TOML file → TargetConfig → TargetServer. CHAP secrets
// come from files or the environment, never from the command line, and are never printed
// (RFC 7143 §12.1.3).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include <sys/resource.h>

#include <cxxopts.hpp>

#include "iserkit/common/cli_values.hpp"
#include "iserkit/common/command_size_counter.hpp"
#include "iserkit/common/copy_counter.hpp"
#include "iserkit/common/host_port.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/datamover/iser_datamover.hpp"
#include "iserkit/iscsi/names.hpp"
#include "iserkit/metrics/daemon_metrics.hpp"
#include "iserkit/target/backends.hpp"
#include "iserkit/target/target.hpp"

namespace {


// Raises the soft RLIMIT_NOFILE to the hard limit: the connection caps (target/README.md "Limits")
// are computed from it, minus --fd-reserve.
void raise_descriptor_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == r.rlim_max) return;
  r.rlim_cur = r.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &r) != 0) iserkit::log::warn("limits: cannot raise RLIMIT_NOFILE to {}", r.rlim_max);
}

// A duration option (common/cli_values.hpp: a bare number is seconds; 500ms, 1.5s, 2m, 1h), up to a day.
std::chrono::milliseconds seconds_option(const cxxopts::ParseResult& args, const char* name, bool zero_ok) {
  return iserkit::cli::duration_option(name, args[name].as<std::string>(),
                                       std::chrono::milliseconds(zero_ok ? 0 : 1), std::chrono::hours(24));
}

// A size option (4096, 64K, 64M, 2G): at least 1 byte, at most `max`.
std::uint64_t size_option(const cxxopts::ParseResult& args, const char* name, std::uint64_t max = UINT64_MAX) {
  return iserkit::cli::size_option(name, args[name].as<std::string>(), 1, max);
}

// --iqn, --allow-initiator: refused at once with what is accepted. Checked case-folded: names
// compare in lower case (RFC 3722), as the configuration file's and the login's do.
void check_name(const char* flag, const std::string& name) {
  if (auto ok = iserkit::iscsi::check_iscsi_name(iserkit::iscsi::fold_case(name)); !ok)
    throw iserkit::cli::BadValue(iserkit::cli::option_message(flag, name, ok.error()));
}

int run(int argc, char** argv) {
  using iserkit::target::TargetConfig;
  cxxopts::Options options("iserkit-target", "iSCSI target serving files, block devices and memory LUNs");
  options.add_options()
      ("lun", "LUN source: a file or block device, mem:SIZE for a sparse memory LUN (e.g. mem:64M; "
              "suffixes K, M, G, T are powers of 1024), or rbd:POOL/IMAGE for a Ceph RBD image, optionally "
              "followed by the LU identity: ,uuid=UUID ,serial=TEXT ,naa=HEX (default: a UUID kept with the file "
              "in xattr user.iserkit.lu-uuid; see README \"LU identity\"). Repeat for lun0, lun1, ...",
       cxxopts::value<std::vector<std::string>>())
      ("iqn", "target name; with --export-dir the base name of the targets",
       cxxopts::value<std::string>()->default_value("iqn.2026-11.org.iserkit:target"))
      ("listen", "portal HOST:PORT, [IPV6]:PORT; port 0 picks a free port. Repeatable (default 0.0.0.0:3260)",
       cxxopts::value<std::vector<std::string>>())
      ("export-dir", "each subfolder of DIR is a target <iqn>:<name>; its files and block devices, sorted by "
                     "name, are lun0, lun1, ...",
       cxxopts::value<std::string>())
      ("ceph-conf", "ceph.conf of the cluster holding rbd: LUNs", cxxopts::value<std::string>()->default_value("/etc/ceph/ceph.conf"))
      ("ceph-id", "Ceph client id for rbd: LUNs (client.ID; its key comes from the keyring ceph.conf names)",
       cxxopts::value<std::string>()->default_value("admin"))
      ("export-rbd", "each image of Ceph pool POOL is a target <iqn>:<image> with the image as lun0; rescanned on "
                     "SIGHUP and every --rbd-rescan-interval", cxxopts::value<std::string>())
      ("rbd-rescan-interval", "time between rescans of --export-rbd: seconds, or 500ms, 2m, 1h (0 = only on SIGHUP)",
       cxxopts::value<std::string>()->default_value("30"))
      ("read-only", "refuse writes (WRITE PROTECTED)")
      ("sanitize-rate", "pace of SANITIZE operations per LUN, bytes per second (e.g. 64M; default: unpaced)",
       cxxopts::value<std::string>())
      ("block-size", "logical block size: 512 or 4096 (4K)", cxxopts::value<std::string>()->default_value("512"))
      ("threads", "I/O threads, each with its own io_context", cxxopts::value<unsigned>()->default_value("1"))
      ("socket-io", "TCP socket I/O: uring (sends on the I/O thread's io_uring ring, with the backend's I/O), "
                    "epoll (sendmsg), or auto (the measured default; target/README.md \"Socket I/O\")",
       cxxopts::value<std::string>())
      ("port-file", "write the first bound port to PATH once listening", cxxopts::value<std::string>())
      ("log-level", "trace, debug, info, warn, error or off (any case)", cxxopts::value<std::string>()->default_value("info"))
      ("max-recv-data-segment-length", "bytes the target accepts per PDU (declared): bytes or 256K, 1M",
       cxxopts::value<std::string>()->default_value("256K"))
      ("first-burst-length", "bytes of unsolicited data accepted per command (bytes or 256K, 1M)",
       cxxopts::value<std::string>()->default_value("256K"))
      ("max-burst-length", "bytes per Data-In or solicited Data-Out sequence (bytes or 4M)",
       cxxopts::value<std::string>()->default_value("4M"))
      ("max-outstanding-r2t", "R2Ts outstanding per command", cxxopts::value<std::uint32_t>()->default_value("8"))
      ("config", "TOML file: portals, targets, LUNs, ACLs, CHAP users and mutual secrets, discovery "
                 "authentication (see target/README.md); combines with the flags", cxxopts::value<std::string>())
      ("allow-initiator", "initiator IQN allowed to log in to the --lun/--export-dir targets (repeatable; "
                          "default: any)", cxxopts::value<std::vector<std::string>>())
      ("chap-user", "require CHAP for the --lun/--export-dir targets with this CHAP_N; the secret comes from "
                    "--chap-secret-file or $ISERKIT_TARGET_CHAP_SECRET", cxxopts::value<std::string>())
      ("chap-secret-file", "file holding the --chap-user secret (first line)", cxxopts::value<std::string>())
      ("mutual-user", "the target's CHAP_N for mutual CHAP; secret from --mutual-secret-file or "
                      "$ISERKIT_TARGET_MUTUAL_SECRET", cxxopts::value<std::string>())
      ("mutual-secret-file", "file holding the --mutual-user secret", cxxopts::value<std::string>())
      ("discovery-chap-user", "require CHAP for discovery sessions with this CHAP_N; secret from "
                              "--discovery-chap-secret-file or $ISERKIT_DISCOVERY_CHAP_SECRET",
       cxxopts::value<std::string>())
      ("discovery-chap-secret-file", "file holding the --discovery-chap-user secret", cxxopts::value<std::string>())
      ("login-timeout", "seconds a connection may take to complete its login (durations everywhere: a bare number "
                        "is seconds; 500ms, 1.5s, 2m, 1h)", cxxopts::value<std::string>()->default_value("15"))
      ("reinstate-timeout", "seconds a login that reinstates a session (same InitiatorName + ISID) waits for the old "
                            "session's commands to end; then it is refused with 0x0301 and the initiator retries",
       cxxopts::value<std::string>()->default_value("10"))
      ("idle-interval", "seconds without a PDU before a NOP-In ping (0 = never)",
       cxxopts::value<std::string>()->default_value("15"))
      ("ping-timeout", "seconds to wait for an answer to a NOP-In ping before closing",
       cxxopts::value<std::string>()->default_value("30"))
      ("max-logging-in", "connections in the login phase at once (the oldest is closed for a new one)",
       cxxopts::value<std::uint32_t>()->default_value("64"))
      ("fd-reserve", "file descriptors kept free: connections are capped at RLIMIT_NOFILE minus this",
       cxxopts::value<std::uint32_t>()->default_value("64"))
      ("max-immediate-commands", "immediate SCSI commands outstanding per connection",
       cxxopts::value<std::uint32_t>()->default_value("16"))
      ("connection-payload-budget", "payload bytes held for one connection's commands",
       cxxopts::value<std::string>()->default_value("64M"))
      ("global-payload-budget", "payload bytes held for all commands", cxxopts::value<std::string>()->default_value("512M"))
      ("pool-idle-cap", "idle task-buffer memory kept for reuse", cxxopts::value<std::string>()->default_value("64M"))
      ("alua-state", "TPGT=STATE: the ALUA state of portal group TPGT (a --listen ADDRESS,tpgt=N): "
                     "active/optimized (default), active/non-optimized, standby or unavailable (repeatable)",
       cxxopts::value<std::vector<std::string>>())
      ("alua-peer", "TPGT=STATE: a peer gateway's portal group TPGT serving the same logical units from another "
                    "process (same LUN identity): listed in REPORT TARGET PORT GROUPS in STATE, not served here "
                    "(repeatable; see README \"Two gateways, one RBD image\"); with --alua-lock, TPGT alone "
                    "(the peer's state follows the lock)",
       cxxopts::value<std::vector<std::string>>())
      ("alua-lock", "PATH: ALUA failover: the file every gateway of these LUNs locks (created if missing; may be "
                    "the backing file). The holder is active/optimized, the others standby; the lock moves when "
                    "its holder dies or is told to (SET TARGET PORT GROUPS). See README \"ALUA failover\"",
       cxxopts::value<std::string>())
      ("shutdown-timeout", "seconds SIGTERM/SIGINT lets sessions finish the commands they sent before closing "
                           "them (0 = at once)", cxxopts::value<std::string>()->default_value("10"))
      ("chap-algorithms", "CHAP_A accepted for the --lun/--export-dir targets and discovery, comma-separated "
                          "(default SHA-256,SHA3-256,SHA-1; add MD5 for libiscsi/QEMU)", cxxopts::value<std::string>())
      ("no-iser", "serve iSCSI/TCP only (by default each portal also listens for iSER when an RDMA device exists)")
      ("stats-file", "at exit, write counters (copied_payload_bytes=N, largest_command_bytes_iser=N, largest_command_bytes_tcp=N) to PATH", cxxopts::value<std::string>())
      ("status-socket", "answer status queries (JSON: targets, LUNs, sessions, counters; read with `iserkit status "
                        "PATH`) on Unix socket PATH, mode 0600", cxxopts::value<std::string>())
      ("metrics", "serve Prometheus metrics on http://HOST:PORT/metrics (port 0 picks a free port; printed as "
                  "\"metrics on HOST:PORT\")", cxxopts::value<std::string>())
      ("version", "print the version and exit")
      ("h,help", "print this help and exit");
  auto args = options.parse(argc, argv);
  if (args.count("help")) {
    std::cout << options.help() << "\nExamples:\n"
              << "  iserkit-target --lun disk.img --listen 0.0.0.0:3260\n"
              << "  iserkit-target --lun mem:64M --listen 127.0.0.1:0 --port-file /tmp/port\n"
              << "  iserkit-target --export-dir /srv/volumes --iqn iqn.2026-11.org.example\n"
              << "  ISERKIT_TARGET_CHAP_SECRET=... iserkit-target --lun mem:64M --chap-user alice\n"
              << "  iserkit-target --config /etc/iserkit/target.toml\n";
    return 0;
  }
  if (args.count("version")) {
    const auto build = iserkit::metrics::build_info();
    std::cout << "iserkit-target " << build.version << " (commit " << build.commit << ", " << build.compiler << ")\n";
    return 0;
  }
  iserkit::log::set_level(iserkit::cli::log_level_option(args["log-level"].as<std::string>()));

  TargetConfig config;
  config.iqn = args["iqn"].as<std::string>();
  check_name("iqn", config.iqn);
  if (args.count("listen")) {
    // cxxopts splits vector values at commas: glue "ADDRESS,tpgt=N" back together.
    std::vector<std::string> listens;
    for (const auto& l : args["listen"].as<std::vector<std::string>>()) {
      if (l.starts_with("tpgt=") && !listens.empty()) {
        listens.back() += "," + l;
      } else {
        listens.push_back(l);
      }
    }
    for (const auto& l : listens) {
      auto a = iserkit::target::parse_listen_address(l);
      if (!a) {
        std::cerr << "iserkit-target: --listen " << l << ": expected HOST:PORT or [IPV6]:PORT, optionally ,tpgt=N\n";
        return 2;
      }
      config.listen.push_back(*a);
    }
  }
  if (args.count("lun")) {
    // cxxopts splits vector values at commas: glue "SOURCE,uuid=…,serial=…,naa=…" back together.
    std::vector<std::string> luns;
    for (const auto& l : args["lun"].as<std::vector<std::string>>()) {
      if (!luns.empty() && (l.starts_with("uuid=") || l.starts_with("serial=") || l.starts_with("naa="))) {
        luns.back() += "," + l;
      } else {
        luns.push_back(l);
      }
    }
    for (const auto& l : luns) {
      auto s = iserkit::target::parse_lun_source(l);
      if (!s) {
        std::cerr << "iserkit-target: --lun " << l << ": expected a path, mem:SIZE or rbd:POOL/IMAGE, optionally "
                     "followed by ,uuid=UUID (8-4-4-4-12 hex digits) ,serial=TEXT (1..247 printable ASCII, no comma) "
                     ",naa=HEX (16 hex digits of NAA 2, 3 or 5, or 32 of NAA 6), each at most once\n";
        return 2;
      }
      if (s->rbd && !iserkit::target::rbd_backend_available()) {
        std::cerr << "iserkit-target: --lun " << l << ": this build has no RBD backend (WITH_RBD=OFF; install librbd-dev)\n";
        return 2;
      }
      if (!s->memory && !s->rbd && !std::filesystem::exists(s->path)) {
        std::cerr << "iserkit-target: --lun " << s->path.string() << ": no such file or device\n";
        return 2;
      }
      config.luns.push_back(*s);
    }
  }
  if (args.count("export-dir")) config.export_dir = args["export-dir"].as<std::string>();
  config.read_only = args.count("read-only") > 0;
  if (args.count("sanitize-rate") > 0) config.sanitize_bytes_per_second = size_option(args, "sanitize-rate");
  const auto block_size = iserkit::cli::size_option("block-size", args["block-size"].as<std::string>());
  if (block_size != 512 && block_size != 4096) {
    std::cerr << "iserkit-target: --block-size " << args["block-size"].as<std::string>() << ": want 512 or 4096 (4K)\n";
    return 2;
  }
  config.block_size_bytes = static_cast<unsigned>(block_size);
  config.ceph_conf = args["ceph-conf"].as<std::string>();
  config.ceph_id = args["ceph-id"].as<std::string>();
  if (args.count("export-rbd")) {
    if (!iserkit::target::rbd_backend_available()) {
      std::cerr << "iserkit-target: --export-rbd: this build has no RBD backend (WITH_RBD=OFF; install librbd-dev)\n";
      return 2;
    }
    config.export_rbd = args["export-rbd"].as<std::string>();
  }
  // Below a second rounds up to one: the rescan counts whole seconds.
  config.rbd_rescan_interval = std::chrono::ceil<std::chrono::seconds>(iserkit::cli::duration_option(
      "rbd-rescan-interval", args["rbd-rescan-interval"].as<std::string>(), std::chrono::milliseconds(0), std::chrono::hours(24)));
  config.threads = std::max(1u, args["threads"].as<unsigned>());
  // $ISERKIT_SOCKET_IO: the same choice without a flag (benchmark scripts that start the target).
  const char* socket_io_env = std::getenv("ISERKIT_SOCKET_IO");
  if (args.count("socket-io") || (socket_io_env != nullptr && *socket_io_env != '\0')) {
    auto mode = iserkit::target::parse_socket_io(args.count("socket-io") ? args["socket-io"].as<std::string>()
                                                                          : std::string(socket_io_env));
    if (!mode) {
      std::cerr << "iserkit-target: --socket-io (or $ISERKIT_SOCKET_IO) must be auto, uring or epoll\n";
      return 2;
    }
    config.limits.socket_io = *mode;
  }
  config.max_recv_data_segment_length =
      static_cast<std::uint32_t>(size_option(args, "max-recv-data-segment-length", 16777215));  // RFC 7143 §13.12
  config.first_burst_length = static_cast<std::uint32_t>(size_option(args, "first-burst-length", 16777215));  // §13.14
  config.max_burst_length = static_cast<std::uint32_t>(size_option(args, "max-burst-length", 16777215));      // §13.13
  config.max_outstanding_r2t = std::max<std::uint32_t>(1, args["max-outstanding-r2t"].as<std::uint32_t>());
  config.limits.login_timeout = seconds_option(args, "login-timeout", false);
  config.limits.reinstate_timeout = seconds_option(args, "reinstate-timeout", false);
  config.limits.idle_interval = seconds_option(args, "idle-interval", true);
  config.limits.ping_timeout = seconds_option(args, "ping-timeout", false);
  config.limits.max_logging_in = std::max<std::uint32_t>(1, args["max-logging-in"].as<std::uint32_t>());
  config.limits.fd_reserve = std::max<std::uint32_t>(16, args["fd-reserve"].as<std::uint32_t>());
  config.limits.max_immediate_commands = std::max<std::uint32_t>(1, args["max-immediate-commands"].as<std::uint32_t>());
  config.limits.connection_payload_bytes = size_option(args, "connection-payload-budget");
  config.limits.global_payload_bytes = size_option(args, "global-payload-budget");
  config.limits.pool_idle_bytes = size_option(args, "pool-idle-cap");
  config.limits.shutdown_timeout = seconds_option(args, "shutdown-timeout", true);
  // --alua-state and --alua-peer: TPGT=STATE, repeatable (a bare TPGT peer with --alua-lock).
  if (args.count("alua-lock")) config.alua_lock = args["alua-lock"].as<std::string>();
  for (const char* flag : {"alua-state", "alua-peer"}) {
    if (!args.count(flag)) continue;
    auto& states = std::string_view(flag) == "alua-state" ? config.alua_states : config.alua_peers;
    for (auto a : args[flag].as<std::vector<std::string>>()) {
      if (config.alua_lock && std::string_view(flag) == "alua-peer" && a.find('=') == std::string::npos)
        a += "=standby";
      const auto eq = a.find('=');
      auto state = eq == std::string::npos ? std::nullopt : iserkit::target::parse_alua_state(a.substr(eq + 1));
      unsigned long tag = 0;
      try {
        tag = eq == std::string::npos ? 0 : std::stoul(a.substr(0, eq));
      } catch (const std::exception&) {
        tag = 0;
      }
      if (!state || tag == 0 || tag > 65535) {
        std::cerr << "iserkit-target: --" << flag << " " << a
                  << ": expected TPGT=active/optimized|active/non-optimized|standby|unavailable\n";
        return 2;
      }
      states[static_cast<std::uint16_t>(tag)] = *state;
    }
  }
  if (args.count("allow-initiator")) {
    config.allowed_initiators = args["allow-initiator"].as<std::vector<std::string>>();
    for (const auto& n : config.allowed_initiators) check_name("allow-initiator", n);
  }
  std::vector<std::string> warnings;
  // A credential from a flag: the user name from `user_flag`, the secret from `file_flag` or `env`.
  auto credential = [&](const char* user_flag, const char* file_flag,
                        const char* env) -> std::optional<iserkit::target::ChapCredential> {
    if (!args.count(user_flag)) {
      if (args.count(file_flag)) throw std::runtime_error(std::string("--") + file_flag + " needs --" + user_flag);
      return std::nullopt;
    }
    iserkit::target::ChapCredential c{.user = args[user_flag].as<std::string>(), .secret = {}};
    if (auto ok = iserkit::iscsi::check_chap_user(c.user); !ok)
      throw iserkit::cli::BadValue(iserkit::cli::option_message(user_flag, c.user, ok.error()));
    if (args.count(file_flag)) {
      auto s = iserkit::target::read_secret_file(args[file_flag].as<std::string>(), &warnings);
      if (!s) throw std::runtime_error(s.error().message);
      c.secret = std::move(*s);
    } else if (const char* v = std::getenv(env); v != nullptr && *v != '\0') {
      c.secret = v;
    } else {
      throw std::runtime_error(std::string("--") + user_flag + ": no secret: give --" + file_flag + " or set " + env);
    }
    if (c.secret.size() > iserkit::iscsi::chap_max_secret_bytes)
      throw std::runtime_error(std::string("--") + user_flag + ": the secret is longer than 255 bytes");
    return c;
  };
  if (auto c = credential("chap-user", "chap-secret-file", "ISERKIT_TARGET_CHAP_SECRET")) config.auth.users.push_back(*c);
  config.auth.mutual = credential("mutual-user", "mutual-secret-file", "ISERKIT_TARGET_MUTUAL_SECRET");
  if (config.auth.mutual && !config.auth.required()) throw std::runtime_error("--mutual-user needs --chap-user");
  if (config.auth.mutual && config.auth.users.front().secret == config.auth.mutual->secret)
    throw std::runtime_error("--chap-user and --mutual-user must not share a secret (RFC 7143 §12.1.3)");
  if (auto c = credential("discovery-chap-user", "discovery-chap-secret-file", "ISERKIT_DISCOVERY_CHAP_SECRET"))
    config.discovery_auth.users.push_back(*c);
  if (args.count("chap-algorithms")) {
    auto list = iserkit::target::parse_chap_algorithm_list(args["chap-algorithms"].as<std::string>());
    if (!list) {
      std::cerr << "iserkit-target: --chap-algorithms: give names from MD5, SHA-1, SHA-256, SHA3-256, "
                   "comma-separated\n";
      return 2;
    }
    config.auth.algorithms = *list;
    config.discovery_auth.algorithms = *list;
  }
  if (args.count("status-socket")) config.status_socket = args["status-socket"].as<std::string>();
  if (args.count("metrics")) config.metrics = args["metrics"].as<std::string>();
  const TargetConfig flags_config = config;  // SIGHUP reads the file again onto this
  if (args.count("config")) {
    auto loaded = iserkit::target::load_config_file(args["config"].as<std::string>(), config);
    if (!loaded) {
      std::cerr << "iserkit-target: --config: " << loaded.error().message << "\n";
      return 2;
    }
    config = std::move(*loaded);
  }
  config.iser = args.count("no-iser") == 0;
  if (config.luns.empty() && !config.export_dir && !config.export_rbd && config.targets.empty()) {
    std::cerr << "iserkit-target: no LUNs: give --lun FILE|mem:SIZE, --export-dir DIR or --config FILE (see --help)\n";
    return 2;
  }
  for (const auto& w : iserkit::target::config_warnings(config)) warnings.push_back(w);
  for (const auto& w : warnings) iserkit::log::warn("config: {}", w);

  raise_descriptor_limit();
  auto server = iserkit::target::TargetServer::create(config);
  if (!server) {
    std::cerr << "iserkit-target: " << server.error().message() << "\n";
    return 1;
  }
  for (const auto& line : (*server)->describe()) iserkit::log::info("target {}", line);
  for (const auto& a : (*server)->listening()) std::cout << "listening on " << a << std::endl;  // read by scripts
  if (config.status_socket) {
    if (auto r = (*server)->serve_status(*config.status_socket); !r) {
      std::cerr << "iserkit-target: status socket: " << r.error().message() << " (path=" << *config.status_socket << ")\n";
      return 1;
    }
  }
  if (config.metrics) {
    auto port = (*server)->serve_metrics(*config.metrics);
    if (!port) {
      std::cerr << "iserkit-target: metrics: " << port.error().message() << " (address=" << *config.metrics << ")\n";
      return 1;
    }
    std::cout << "metrics on " << iserkit::format_host_port(iserkit::parse_host_port(*config.metrics).value_or(iserkit::HostPort{}).host, *port)
              << "\n";
  }
  std::cout.flush();
  if (args.count("port-file")) {
    const auto path = args["port-file"].as<std::string>();
    const auto tmp = path + ".tmp";
    {
      std::ofstream f(tmp);
      f << (*server)->ports().front() << "\n";
    }
    std::filesystem::rename(tmp, path);  // appears whole, never half-written
  }
  if (args.count("config")) (*server)->watch_config_file(args["config"].as<std::string>(), flags_config);
  (*server)->run(true);
  // Payload bytes our code copied in user space (copy_counter.hpp): 0 on the TCP and iSER data
  // paths unless an initiator sends immediate data over iSER (copied out of the receive buffer).
  std::cerr << "iserkit-target: copied payload bytes: " << iserkit::copied_payload_bytes() << "\n";
  // The largest command (transfer length in bytes) each transport carried (command_size_counter.hpp).
  const auto largest_iser = iserkit::largest_command_bytes(iserkit::CommandTransport::iser);
  const auto largest_tcp = iserkit::largest_command_bytes(iserkit::CommandTransport::tcp);
  std::cerr << "iserkit-target: largest command bytes: iser=" << largest_iser << " tcp=" << largest_tcp << "\n";
  // The iSER send queues' use (issue 23 item 7): ibv_post_send calls and work requests per command.
  const auto posts = iserkit::datamover::iser_post_counts();
  std::cerr << "iserkit-target: iser posts: post_send_calls=" << posts.post_send_calls
            << " work_requests=" << posts.work_requests << " scsi_commands=" << posts.scsi_commands << "\n";
  if (args.count("stats-file")) std::ofstream(args["stats-file"].as<std::string>())
      << "copied_payload_bytes=" << iserkit::copied_payload_bytes() << "\n"
      << "largest_command_bytes_iser=" << largest_iser << "\n"
      << "largest_command_bytes_tcp=" << largest_tcp << "\n"
      << "iser_post_send_calls=" << posts.post_send_calls << "\n"
      << "iser_work_requests=" << posts.work_requests << "\n"
      << "iser_scsi_commands=" << posts.scsi_commands << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    std::cerr << "iserkit-target: " << e.what() << " (see --help)\n";
    return 2;
  } catch (const iserkit::cli::BadValue& e) {  // a value the flags' grammar refuses: what is accepted is in it
    std::cerr << "iserkit-target: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "iserkit-target: " << e.what() << "\n";
    return 1;
  }
}

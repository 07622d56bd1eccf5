// TargetServer: TCP portals (RFC 7143 §4.2.6) and, beside each, an iSER portal on the same address
// and port (RFC 7145 §5: an RDMA CM listener; the connection then runs the same login and
// full-feature code over the iSER datamover), I/O threads, and building target nodes and LUNs
// from the configuration (SAM-5 §4.6.4 logical units; their names: docs/lu-identity.md).
#include "iserkit/target/target.hpp"

#include <algorithm>
#include <atomic>
#include <ctime>
#include <mutex>
#include <set>
#include <thread>

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fmt/chrono.h>

#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/common/netns.hpp"
#include "iserkit/common/service_manager.hpp"
#include "iserkit/common/status_socket.hpp"
#include "iserkit/datamover/iser_datamover.hpp"
#include "iserkit/datamover/tcp_datamover.hpp"
#include "iserkit/target/backends.hpp"
#include "admission.hpp"
#include "alua_failover.hpp"
#include "connection.hpp"
#include "export_dir.hpp"
#include "lu_identity_store.hpp"
#include "reload.hpp"
#include "target_status.hpp"
#include "tenant.hpp"

namespace iserkit::target {
namespace {

// A second SIGTERM/SIGINT while the target drains (target/README.md "Shutdown"): the process ends
// at once, with status 128 + the signal number, as a shell reports a death by that signal.
// Nothing acknowledged is lost: every answered write is already in the kernel (no write-back
// cache in the process), FUA and flushed writes on stable media; commands not yet answered are
// dropped, as at kill -9. Async-signal-safe calls only (write(2), _exit(2)).
extern "C" void exit_at_second_signal(int signo) {
  static constexpr char message[] =
      "iserkit-target: second signal during shutdown: exiting now; commands not answered yet are dropped\n";
  const ssize_t ignored = ::write(STDERR_FILENO, message, sizeof message - 1);
  (void)ignored;
  ::_exit(128 + signo);
}

// From now on SIGTERM and SIGINT end the process at once (exit_at_second_signal).
void exit_at_next_signal() noexcept {
  struct sigaction sa {};
  sa.sa_handler = exit_at_second_signal;
  ::sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
}

std::string format_endpoint(const asio::ip::tcp::endpoint& ep) {
  const auto addr = ep.address();
  return (addr.is_v6() ? "[" + addr.to_string() + "]" : addr.to_string()) + ":" + std::to_string(ep.port());
}

// Connections that may be open at once: RLIMIT_NOFILE (soft) minus the reserve, at least 1.
std::uint64_t max_open_connections(const ConnectionLimits& limits) {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return std::uint64_t{1} << 20;
  const std::uint64_t reserve = limits.fd_reserve;
  return r.rlim_cur > reserve + 1 ? r.rlim_cur - reserve : 1;
}

Result<std::shared_ptr<BlockBackend>> open_lun(const LunSource& source, const TargetConfig& config) {
  if (source.memory) {
    return make_memory_backend(MemoryBackendOptions{.size_bytes = source.size_bytes,
                                                    .block_size_bytes = config.block_size_bytes,
                                                    .read_only = config.read_only});
  }
  if (source.rbd) {
    return open_rbd_backend(RbdBackendOptions{.pool = source.rbd->pool,
                                              .image = source.rbd->image,
                                              .ceph_conf = config.ceph_conf,
                                              .ceph_id = config.ceph_id,
                                              .read_only = config.read_only,
                                              .block_size_bytes = config.block_size_bytes,
                                              .shared_by_gateways = !config.alua_peers.empty()});
  }
  std::error_code ec;
  if (!std::filesystem::exists(source.open_path(), ec))
    return fail(std::make_error_code(std::errc::no_such_file_or_directory));
  return open_uring_backend(OpenBackendOptions{.path = source.open_path(), .read_only = config.read_only,
                                               .block_size_bytes = config.block_size_bytes});
}

// Opens a LUN of target `name` from `source`: the backend and its logical unit.
Result<std::shared_ptr<LogicalUnit>> make_unit(const std::string& name, const LunSource& source,
                                               const TargetConfig& config) {
  auto backend = open_lun(source, config);
  if (!backend) {
    log::error("lun: cannot open {}: {}", log::escaped(source.display()), backend.error().message());
    return fail(backend.error());
  }
  if ((*backend)->capabilities().size_bytes == 0) {
    log::error("lun: {} is empty", log::escaped(source.display()));
    return fail(errc::invalid_argument);
  }
  LogicalUnitOptions options;
  options.read_only = config.read_only;
  options.sanitize_bytes_per_second = config.sanitize_bytes_per_second;
  // The LU's name (docs/lu-identity.md): configured; else the storage's own name (an RBD image:
  // the same on every gateway); else kept with the file (xattr) or the device's identity; a
  // memory LUN, which lives and dies with this process, gets a new one per run.
  const auto& configured = source.identity;
  Result<LuUuid> lu;
  if (configured.uuid) {
    lu = LuUuid{.uuid = *configured.uuid, .origin = LuUuidOrigin::configured, .detail = {}};
  } else if (const auto& id = (*backend)->capabilities().storage_id; !id.empty()) {
    lu = lu_uuid_of_storage(id);
  } else if (source.memory) {
    auto fresh = random_uuid();
    if (fresh) lu = LuUuid{.uuid = *fresh, .origin = LuUuidOrigin::process, .detail = {}};
    else lu = fail(fresh.error());
  } else if (source.rbd) {
    // An image without an id (rbd_unavailable never opens one): one name per target and LUN.
    const std::string id = fmt::format("rbd-name:{}:{}/{}", name, source.rbd->pool, source.rbd->image);
    lu = LuUuid{.uuid = name_based_uuid(id), .origin = LuUuidOrigin::storage_name, .detail = id};
  } else {
    static const std::string host = host_id();
    lu = lu_uuid_of_file(source.open_path(), host);
  }
  if (!lu) {
    if (lu.error() == make_error_code(errc::invalid_argument))
      log::error("lun: {}: xattr {} holds no UUID; give the LUN ,uuid=UUID or remove it (setfattr -x {} FILE) "
                 "to have a new one made (the LU's identity then changes)",
                 log::escaped(source.display()), lu_uuid_xattr, lu_uuid_xattr);
    else
      log::error("lun: {}: cannot find its LU UUID: {}", log::escaped(source.display()), lu.error().message());
    return fail(lu.error());
  }
  options.identity.uuid = lu->uuid;
  options.identity.serial = configured.serial;
  options.identity.naa = configured.naa;
  if (lu->origin == LuUuidOrigin::host_file)
    log::warn("lun: {}: LU UUID {} not kept with the storage ({}): it changes if the file is moved or copied, and "
              "other hosts derive another; give ,uuid= for shared storage (docs/lu-identity.md)",
              log::escaped(source.display()), to_string(lu->uuid), lu->detail);
  auto unit = std::make_shared<LogicalUnit>(std::move(*backend), options);
  const bool show_detail = lu->origin == LuUuidOrigin::device_id || lu->origin == LuUuidOrigin::storage_name;
  log::info("lun: {}: LU UUID {} ({}{}), serial {}", log::escaped(source.display()), to_string(unit->uuid()),
            to_string(lu->origin), show_detail ? ", " + lu->detail : std::string(), log::escaped(unit->serial()));
  return unit;
}

Result<std::shared_ptr<TargetNode>> make_node(const std::string& name, const std::string& alias,
                                              const std::vector<LunSource>& luns, const TargetConfig& config,
                                              std::vector<std::string>& lines) {
  auto node = std::make_shared<TargetNode>();
  node->name = name;
  node->alias = alias;
  node->dispatcher = std::make_shared<ScsiDispatcher>();
  std::string line = name + ":";
  for (std::size_t i = 0; i < luns.size(); ++i) {
    auto unit = make_unit(name, luns[i], config);
    if (!unit) return fail(unit.error());
    if (auto r = node->dispatcher->add_logical_unit(static_cast<std::uint16_t>(i), *unit); !r) return fail(r.error());
    line += fmt::format(" lun{}={}({} bytes)", i, log::escaped(luns[i].display()),
                        (*unit)->block_count() * (*unit)->block_size_bytes());
  }
  lines.push_back(std::move(line));
  return node;
}

// One portal as configured: its address and the tenant it belongs to (-1: none).
struct PortalSpec {
  ListenAddress address;
  int tenant = -1;
};

// Opens, binds and listens one TCP portal. With `netns` set, the socket is created by a thread
// inside that network namespace (netns::run_in), so the portal and every connection it accepts
// live there; the descriptor is then served by `context` like any other.
Result<std::unique_ptr<asio::ip::tcp::acceptor>> open_tcp_portal(asio::io_context& context, const ListenAddress& l,
                                                                 const std::string& netns) {
  std::unique_ptr<asio::ip::tcp::acceptor> acceptor;
  boost::system::error_code ec;
  std::string where;
  auto open = [&] {
    asio::ip::tcp::resolver resolver(context);
    auto results = resolver.resolve(l.host, std::to_string(l.port), asio::ip::tcp::resolver::numeric_service, ec);
    if (ec || results.empty()) {
      if (!ec) ec = asio::error::host_not_found;
      where = "cannot resolve " + l.host;
      return;
    }
    const auto endpoint = results.begin()->endpoint();
    where = "cannot listen on " + format_endpoint(endpoint);
    acceptor = std::make_unique<asio::ip::tcp::acceptor>(context);
    acceptor->open(endpoint.protocol(), ec);
    if (!ec) acceptor->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec && endpoint.address().is_v6()) acceptor->set_option(asio::ip::v6_only(true), ec);
    if (!ec) acceptor->bind(endpoint, ec);
    if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  };
  if (netns.empty()) {
    open();
  } else if (auto entered = netns::run_in(netns, open); !entered) {
    log::error("portal: cannot enter network namespace {} ({}): {}", log::escaped(netns), netns::path_of(netns),
               entered.error().message());
    return fail(entered.error());
  }
  if (ec) {
    log::error("portal: {}{}: {}", where, netns.empty() ? "" : " in network namespace " + netns, ec.message());
    return fail(std::error_code(ec));
  }
  return acceptor;
}

}  // namespace

struct TargetServer::Impl {
  TargetConfig config;
  std::shared_ptr<TargetRegistry> registry = std::make_shared<TargetRegistry>();
  std::vector<std::unique_ptr<asio::io_context>> contexts;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
  std::vector<std::unique_ptr<asio::ip::tcp::acceptor>> acceptors;
  std::vector<std::unique_ptr<datamover::IserListener>> iser_listeners;
  std::vector<std::string> bound;
  std::vector<std::string> description;
  std::atomic<std::size_t> next_context{0};
  std::atomic<bool> stopping{false};
  std::mutex mutex;  // guards connections
  struct Open {
    asio::any_io_executor executor;
    std::weak_ptr<Connection> connection;
    std::shared_ptr<const ConnectionStats> stats;  // for the status socket and the metrics
  };
  std::unordered_map<std::uint64_t, Open> connections;  // by admission id
  std::uint64_t next_id = 1;                            // under mutex
  std::unique_ptr<ConnectionAdmission> admission;
  std::shared_ptr<SharedPayloadBudget> global_budget;
  std::unique_ptr<asio::steady_timer> shutdown_timer;  // on contexts[0]: the drain's bound
  // ALUA groups every node's dispatcher shares, and the coordinator that moves their states
  // between gateways (--alua-lock; null without).
  std::shared_ptr<PortGroupTable> port_groups = std::make_shared<PortGroupTable>(std::vector<TargetPortGroup>{{}});
  std::shared_ptr<AluaFailover> alua_failover;
  // Tenants (target/README.md "Tenants"), in configuration order; PortalSpec::tenant indexes them.
  struct Tenant {
    TenantDefinition definition;
    std::shared_ptr<TenantSessions> sessions;
    std::shared_ptr<SharedPayloadBudget> budget;  // replaces global_budget for its connections
  };
  std::vector<Tenant> tenants;
  std::vector<PortalSpec> portals;  // one per acceptor, in the same order

  // --export-rbd: the targets the pool's images made, rescanned off the I/O threads (librbd's
  // listing and opening block) by one helper thread, one rescan at a time.
  std::mutex rbd_mutex;                 // guards rbd_targets; held for a whole rescan
  std::set<std::string> rbd_targets;    // target names added from the pool
  std::atomic<bool> rbd_rescan_queued{false};
  asio::thread_pool rbd_rescan_thread{1};

  /// Lists the pool and makes the target set follow it. Blocking; safe from any thread.
  /// Returns the number of targets now served from the pool, or the listing's error.
  Result<std::size_t> rescan_rbd() {
    std::lock_guard lock(rbd_mutex);
    RbdBackendOptions o{.pool = *config.export_rbd, .ceph_conf = config.ceph_conf, .ceph_id = config.ceph_id};
    auto images = list_rbd_images(o);
    if (!images) {
      log::error("rbd: cannot list pool {}: {}", log::escaped(*config.export_rbd), images.error().message());
      return fail(images.error());
    }
    std::set<std::string> listed;
    for (const auto& image : *images) {
      const std::string name = config.iqn + ":" + image;
      if (!is_valid_iscsi_name(name)) {
        if (!rbd_targets.contains(name))
          log::warn("rbd: pool {}: image {} skipped: {} is not a valid iSCSI name (lower case a-z, 0-9, '-', '.', "
                    "':', at most 223 bytes)", log::escaped(*config.export_rbd), log::escaped(image), log::escaped(name));
        continue;
      }
      listed.insert(name);
      if (rbd_targets.contains(name)) continue;
      std::vector<std::string> lines;
      LunSource lun;
      lun.rbd = RbdImageName{.pool = *config.export_rbd, .image = image};
      auto node = make_node(name, image, {lun}, config, lines);
      if (!node) continue;  // make_node logged why; the next rescan tries again
      (*node)->allowed_initiators = config.allowed_initiators;
      (*node)->auth = config.auth;
      (*node)->dispatcher->share_port_groups(port_groups);
      if (auto r = registry->add(*node); !r) {
        log::warn("rbd: target {} exists already; image {} skipped", log::escaped(name), log::escaped(image));
        continue;
      }
      rbd_targets.insert(name);
      for (const auto& l : lines) log::info("rbd: added target {}", l);
    }
    for (auto it = rbd_targets.begin(); it != rbd_targets.end();) {
      if (listed.contains(*it)) {
        ++it;
        continue;
      }
      registry->remove(*it);
      log::info("rbd: dropped target {}: its image is no longer in pool {}", log::escaped(*it),
                log::escaped(*config.export_rbd));
      it = rbd_targets.erase(it);
    }
    return rbd_targets.size();
  }

  /// Queues a rescan on the helper thread unless one is already queued.
  void queue_rbd_rescan(const char* why) {
    if (!config.export_rbd || stopping || rbd_rescan_queued.exchange(true)) return;
    // A periodic rescan every 30 s would fill an info log; SIGHUP is the operator asking.
    if (std::string_view(why) == "periodic") {
      log::debug("rbd: rescanning pool {} ({})", log::escaped(*config.export_rbd), why);
    } else {
      log::info("rbd: rescanning pool {} ({})", log::escaped(*config.export_rbd), why);
    }
    asio::post(rbd_rescan_thread, [this] {
      rbd_rescan_queued = false;
      if (!stopping) (void)rescan_rbd();
    });
  }

  // --- Configuration reload (SIGHUP; target/README.md "Reloading"), on the helper thread too ---
  std::optional<std::filesystem::path> config_file;  // set by watch_config_file()
  TargetConfig flags_config;                         // the command line's part; the file is read onto it
  std::atomic<bool> reload_queued{false};

  /// "N session(s), M target(s)": the STATUS= line of the service manager.
  std::string status_text() const {
    return fmt::format("{} session(s), {} target(s)", registry->sessions().size(), registry->nodes()->size());
  }

  /// Reads the configuration file again and applies what changed in its targets. Everything that
  /// can fail (reading, parsing, the plan, opening every new LUN) happens before the first change,
  /// so on error the running configuration is untouched. Returns one line per change.
  tl::expected<std::vector<std::string>, ConfigError> reload_config() {
    auto next = load_config_file(*config_file, flags_config);
    if (!next) return tl::unexpected(next.error());
    auto plan = plan_reload(config, *next);
    if (!plan) return tl::unexpected(plan.error());
    std::vector<std::string> done;
    // 1. Build: new targets and new LUNs, with the running block size and read-only setting.
    std::vector<std::shared_ptr<TargetNode>> added;
    for (const auto& t : plan->added) {
      if (registry->find(t.iqn))
        return tl::unexpected(ConfigError{fmt::format("target {}: a target of this name is served already "
                                                      "(--export-dir or --export-rbd)", t.iqn)});
      std::vector<std::string> lines;
      auto node = make_node(t.iqn, t.alias, t.luns, config, lines);
      if (!node) return tl::unexpected(ConfigError{fmt::format("target {}: {}", t.iqn, node.error().message())});
      (*node)->allowed_initiators = t.allowed_initiators;
      (*node)->auth = t.auth;
      (*node)->tenant = t.tenant;  // a running tenant (plan_reload checked)
      (*node)->dispatcher->share_port_groups(port_groups);
      added.push_back(std::move(*node));
      done.push_back("added target " + (lines.empty() ? t.iqn : lines.front()));
    }
    struct Grown {
      std::shared_ptr<TargetNode> node;  // as registered now
      std::vector<std::pair<std::uint16_t, std::shared_ptr<LogicalUnit>>> units;
      std::shared_ptr<TargetNode> replacement;  // new alias/ACL/CHAP, same dispatcher; or null
    };
    std::vector<Grown> grown;
    for (const auto& c : plan->changed) {
      const auto& t = c.definition;
      Grown g{.node = registry->find(t.iqn), .units = {}, .replacement = nullptr};
      if (!g.node) return tl::unexpected(ConfigError{fmt::format("target {}: not served now", t.iqn)});
      for (std::size_t i = c.first_new_lun; i < t.luns.size(); ++i) {
        auto unit = make_unit(t.iqn, t.luns[i], config);
        if (!unit)
          return tl::unexpected(ConfigError{fmt::format("target {}: lun {}: cannot open {}: {}", t.iqn, i,
                                                        t.luns[i].display(), unit.error().message())});
        done.push_back(fmt::format("target {}: added lun{}={}({} bytes)", t.iqn, i, t.luns[i].display(),
                                   (*unit)->block_count() * (*unit)->block_size_bytes()));
        g.units.emplace_back(static_cast<std::uint16_t>(i), std::move(*unit));
      }
      if (c.access_changed) {
        g.replacement = std::make_shared<TargetNode>(*g.node);
        g.replacement->alias = t.alias;
        g.replacement->allowed_initiators = t.allowed_initiators;
        g.replacement->auth = t.auth;
        done.push_back(fmt::format("target {}: alias, ACL and CHAP settings updated for new logins", t.iqn));
      }
      grown.push_back(std::move(g));
    }
    // 2. Commit. Nothing here depends on the file: the steps below cannot fail for what it says.
    for (auto& g : grown) {
      for (auto& [index, unit] : g.units)
        if (auto r = g.node->dispatcher->add_logical_unit(index, unit); !r)
          log::error("reload: target {}: lun {}: {}", log::escaped(g.node->name), index, r.error().message());
      if (g.replacement) (void)registry->replace(g.replacement);
    }
    for (auto& node : added) (void)registry->add(node);
    for (const auto& name : plan->removed) {
      registry->remove(name);
      done.push_back(fmt::format("removed target {}: new logins refused, logged-in sessions keep it until they end",
                                 name));
    }
    config.targets = next->targets;
    for (const auto& w : config_warnings(*next)) log::warn("reload: {}", w);
    for (const auto& what : plan->restart_needed)
      log::warn("reload: {} changed in {}: applied at the next restart only", what, config_file->string());
    return done;
  }

  /// Queues a reload of the configuration file on the helper thread unless one is queued already.
  void queue_reload() {
    if (!config_file || stopping || reload_queued.exchange(true)) return;
    asio::post(rbd_rescan_thread, [this] {
      reload_queued = false;
      if (stopping) return;
      const std::string file = config_file->string();
      service::notify_reloading("reloading " + file);
      log::info("reload: reading {}", log::escaped(file));
      auto changes = reload_config();
      if (!changes) {
        log::error("reload: {}: kept the running configuration: {}", log::escaped(file), changes.error().message);
        service::notify_ready(status_text() + "; last reload failed, see the log");
        return;
      }
      if (changes->empty()) log::info("reload: {}: no target changed", log::escaped(file));
      for (const auto& line : *changes) log::info("reload: {}", line);
      service::notify_ready(status_text());
    });
  }

  TargetLoginOptions login_options(std::uint16_t portal_group_tag, int tenant) const {
    // .rdma is set by the connection from its datamover's capabilities.
    return TargetLoginOptions{.max_recv_data_segment_length = config.max_recv_data_segment_length,
                              .max_burst_length = config.max_burst_length,
                              .first_burst_length = config.first_burst_length,
                              .max_outstanding_r2t = config.max_outstanding_r2t,
                              .cmd_window_depth = config.cmd_window_depth,
                              .rdma_recv_data_segment_length = iser_recv_data_segment_length,
                              .max_outstanding_unexpected_pdus = config.cmd_window_depth + iser_extra_receives,
                              .portal_group_tag = portal_group_tag,
                              .tenant = tenant < 0 ? std::string{} : tenants[static_cast<std::size_t>(tenant)].definition.name};
  }

  Awaitable<void> accept_loop(asio::ip::tcp::acceptor& acceptor, PortalSpec portal) {
    while (!stopping) {
      auto& context = *contexts[next_context++ % contexts.size()];
      boost::system::error_code ec;
      asio::ip::tcp::socket socket =
          co_await acceptor.async_accept(asio::any_io_executor(context.get_executor()), use_awaitable_ec(ec));
      if (stopping) co_return;
      if (ec) {
        log::warn("portal: accept failed: {}", ec.message());
        asio::steady_timer t(acceptor.get_executor(), std::chrono::milliseconds(100));
        co_await t.async_wait(use_awaitable_ec(ec));
        continue;
      }
      start_connection(context, std::make_unique<datamover::TcpDatamover>(std::move(socket)), portal);
    }
  }

  // The iSER portal: same as accept_loop, over an RDMA CM listener.
  Awaitable<void> iser_accept_loop(datamover::IserListener& listener, PortalSpec portal) {
    while (!stopping) {
      auto& context = *contexts[next_context++ % contexts.size()];
      auto dm = co_await listener.accept(asio::any_io_executor(context.get_executor()));
      if (stopping) co_return;
      if (!dm) {
        log::warn("portal: iSER accept failed: {}: iSER portal closed", dm.error().message());
        co_return;
      }
      start_connection(context, std::move(*dm), portal);
    }
  }

  void start_connection(asio::io_context& context, std::unique_ptr<datamover::Datamover> dm, const PortalSpec& portal) {
    std::uint64_t id = 0;
    {
      std::lock_guard lock(mutex);
      id = next_id++;
    }
    const std::size_t group = portal.tenant < 0 ? 0 : static_cast<std::size_t>(portal.tenant) + 1;
    const AdmissionDecision decision = admission->on_accept(id, group);
    if (!decision.admit) {
      // Every descriptor the reserve leaves (or the tenant's max_connections) is a session's:
      // refuse at once (the reserve keeps the target's own files, io_uring and listeners working).
      if (portal.tenant >= 0 && admission->open(group) >= tenants[group - 1].definition.limits.max_connections &&
          tenants[group - 1].definition.limits.max_connections != 0)
        log::warn("portal: {} refused: tenant {} has {} connections open, its max_connections", dm->peer(),
                  tenants[group - 1].definition.name, admission->open(group));
      else
        log::warn("portal: {} refused: {} connections open, descriptor reserve {} reached", dm->peer(),
                  admission->open(), config.limits.fd_reserve);
      dm->close();
      return;
    }
    if (decision.evict) {
      std::lock_guard lock(mutex);
      if (auto it = connections.find(*decision.evict); it != connections.end()) {
        log::debug("portal: closing the oldest connection still logging in to make room for {}", dm->peer());
        asio::post(it->second.executor, [weak = it->second.connection] {
          if (auto c = weak.lock()) c->close();
        });
      }
    }
    // A tenant portal's sessions count against the tenant's cap; its payload comes from the
    // tenant's budget.
    Tenant* tenant = portal.tenant < 0 ? nullptr : &tenants[static_cast<std::size_t>(portal.tenant)];
    auto counted = std::make_shared<bool>(false);  // this connection holds one of the tenant's sessions
    std::function<bool(bool)> admit_session;
    if (tenant != nullptr)
      admit_session = [sessions = tenant->sessions, counted](bool reinstating) {
        if (reinstating) {
          sessions->open_replacing();
          return *counted = true;
        }
        return *counted = sessions->try_open();
      };
    ConnectionHooks hooks{
        .logged_in = [this, id] { admission->on_logged_in(id); },
        .admit_session = std::move(admit_session),
        .closed =
            [this, id, counted, sessions = tenant != nullptr ? tenant->sessions : nullptr] {
              if (*counted) sessions->close();
              admission->on_closed(id);
              std::lock_guard lock(mutex);
              connections.erase(id);
              // The last connection drained: nothing is left for the shutdown bound to wait for.
              if (stopping && connections.empty()) asio::post(*contexts[0], [this] {
                if (shutdown_timer) shutdown_timer->cancel();
              });
            },
    };
    auto connection =
        std::make_shared<Connection>(std::move(dm), registry, login_options(portal.address.portal_group, portal.tenant),
                                     config.limits, std::move(hooks), tenant != nullptr ? tenant->budget : global_budget);
    log::debug("portal: connection from {}", connection->peer());
    {
      std::lock_guard lock(mutex);
      connections.emplace(id, Open{context.get_executor(), connection, connection->stats()});
    }
    asio::co_spawn(context, connection->run(), [connection](std::exception_ptr e) {
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& x) {
          log::error("connection {}: {}", connection->peer(), x.what());
        }
      }
    });
  }

  /// Opens an iSER listener beside each bound TCP portal. Without iSER in the build or without an
  /// RDMA device it logs once and the target serves TCP only.
  void open_iser_portals() {
    if (!config.iser) return;
    if (!datamover::iser_built()) {
      log::info("portal: built without iSER (WITH_ISER=OFF): serving iSCSI/TCP only");
      return;
    }
    if (!datamover::rdma_device_present()) {
      log::info("portal: no RDMA device: serving iSCSI/TCP only");
      return;
    }
    const datamover::IserOptions options{
        .recv_data_segment_length = iser_recv_data_segment_length,
        .receive_depth = config.cmd_window_depth + iser_extra_receives,
        .send_depth = 2 * config.cmd_window_depth + iser_extra_receives};
    for (std::size_t i = 0; i < portals.size() && i < acceptors.size(); ++i) {
      boost::system::error_code ec;
      const auto port = acceptors[i]->local_endpoint(ec).port();
      const auto& host = portals[i].address.host;
      // A tenant's iSER listener: its RDMA CM id is created by a thread inside the tenant's
      // namespace (rdma_create_id takes the caller's network namespace), so it binds to the
      // tenant's overlay address and resolves its connections there (target/README.md "Tenants":
      // RDMA namespace mode "shared").
      const std::string netns =
          portals[i].tenant < 0 ? std::string{} : tenants[static_cast<std::size_t>(portals[i].tenant)].definition.netns;
      Result<std::unique_ptr<datamover::IserListener>> l = fail(errc::not_supported);
      auto open = [&] {
        l = datamover::IserListener::listen(asio::any_io_executor(contexts[0]->get_executor()), host, port, options);
      };
      if (netns.empty()) {
        open();
      } else if (auto entered = netns::run_in(netns, open); !entered) {
        l = fail(entered.error());
      }
      if (!l) {
        log::warn("portal: no iSER on {}:{}{}: {}", host, port, netns.empty() ? "" : " in network namespace " + netns,
                  l.error().message());
        continue;
      }
      log::info("portal: iSER listening on {}{}", bound[i], netns.empty() ? "" : " in network namespace " + netns);
      iser_bound.push_back(bound[i]);
      iser_listeners.push_back(std::move(*l));
      iser_portals.push_back(portals[i]);
    }
  }

  // TargetRecvDataSegmentLength declared on iSER (RFC 7145 §6.4): control PDUs only, data goes by
  // RDMA; immediate data up to this size still arrives in the receive buffer.
  static constexpr std::uint32_t iser_recv_data_segment_length = 8192;
  // Receives beyond the CmdSN window: immediate commands (NOP-Out, TMF, Logout) and NOP-Out echoes.
  static constexpr std::uint32_t iser_extra_receives = 16;
  std::vector<std::string> iser_bound;
  std::vector<PortalSpec> iser_portals;  // the portal of each iSER listener
  // Declared last, destroyed first: its scrape threads read the members above.
  std::unique_ptr<TargetMetrics> metrics;

  // --- Status socket and metrics (target/README.md "Status and metrics") ---
  std::string since;  // start time, UTC ISO 8601
  std::unique_ptr<StatusSocket> status_socket;  // on contexts[0]

  StatusSources status_sources() {
    StatusSources s{.registry = registry, .global_budget = global_budget, .tenants = {}, .portals = bound, .since = since,
                    .connections = {}};
    for (const auto& t : tenants)
      s.tenants.push_back({.name = t.definition.name, .netns = t.definition.netns, .sessions = t.sessions, .budget = t.budget});
    s.port_groups = port_groups;
    s.socket_io = config.limits.socket_io;
    if (alua_failover) {
      s.alua_lock = config.alua_lock ? config.alua_lock->string() : std::string();
      s.alua_active = [f = std::weak_ptr<AluaFailover>(alua_failover)] {
        auto p = f.lock();
        return p && p->active();
      };
    }
    s.connections = [this] {
      std::vector<std::shared_ptr<const ConnectionStats>> out;
      std::lock_guard lock(mutex);
      out.reserve(connections.size());
      for (const auto& [id, open] : connections) out.push_back(open.stats);
      return out;
    };
    return s;
  }

  // Closes every connection still open (on its own executor). Call with `mutex` held.
  void close_all() {
    for (auto& [id, open] : connections)
      asio::post(open.executor, [weak = open.connection] {
        if (auto c = weak.lock()) c->close();
      });
  }

  // Shutdown (target/README.md "Shutdown"): no new connections; connections still logging in are
  // closed; sessions drain (Connection::drain) for at most limits.shutdown_timeout, then whatever
  // is still open is closed. run() returns once every connection is gone.
  void stop() {
    if (stopping.exchange(true)) return;
    service::notify_stopping("stopping: " + status_text());
    // Background device operations (a sanitize) end at their next step, or the I/O threads'
    // io_contexts would never run out of work.
    for (const auto& node : *registry->nodes()) node->dispatcher->stop_background_operations();
    if (alua_failover) alua_failover->stop();  // its lock stays held until the process ends
    asio::post(*contexts[0], [this] {
      for (auto& a : acceptors) {
        boost::system::error_code ignored;
        a->close(ignored);
      }
      for (auto& l : iser_listeners) l->close();
      if (status_socket) status_socket->stop();  // its pending accept would keep contexts[0] running
      const auto bound = config.limits.shutdown_timeout;
      std::lock_guard lock(mutex);
      if (bound.count() <= 0 || connections.empty()) {
        close_all();
      } else {
        log::info("shutdown: draining {} connection(s) for at most {} ms", connections.size(), bound.count());
        for (auto& [id, open] : connections)
          asio::post(open.executor, [weak = open.connection, bound] {
            if (auto c = weak.lock()) c->drain(bound);
          });
        shutdown_timer = std::make_unique<asio::steady_timer>(*contexts[0], bound);
        shutdown_timer->async_wait([this](const boost::system::error_code& ec) {
          if (ec) return;
          std::lock_guard lock(mutex);
          if (connections.empty()) return;
          log::info("shutdown: {} connection(s) not drained within {} ms: closing them", connections.size(),
                    config.limits.shutdown_timeout.count());
          close_all();
        });
      }
      for (auto& g : guards) g.reset();
    });
  }
};

TargetServer::TargetServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TargetServer::~TargetServer() = default;

Result<std::unique_ptr<TargetServer>> TargetServer::create(const TargetConfig& config) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  // Admission groups: 0 = the portals of no tenant, 1 + i = tenant i (its own caps).
  std::vector<AdmissionGroupLimits> admission_groups{AdmissionGroupLimits{}};
  for (const auto& t : config.tenants)
    admission_groups.push_back(AdmissionGroupLimits{.max_open = t.limits.max_connections, .max_logging_in = t.limits.max_logging_in});
  impl->since = fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::time(nullptr)));
  impl->admission = std::make_unique<ConnectionAdmission>(max_open_connections(config.limits),
                                                          config.limits.max_logging_in, std::move(admission_groups));
  impl->global_budget = std::make_shared<SharedPayloadBudget>(config.limits.global_payload_bytes);
  HeapBufferPool::shared().set_idle_cap(config.limits.pool_idle_bytes);
  if (config.block_size_bytes != 512 && config.block_size_bytes != 4096) return fail(errc::invalid_argument);
  if (config.luns.empty() && !config.export_dir && !config.export_rbd && config.targets.empty()) {
    log::error("config: no LUNs: give --lun, --export-dir, --export-rbd or targets in --config");
    return fail(errc::invalid_argument);
  }
  if (!config.luns.empty()) {
    auto node = make_node(config.iqn, config.alias, config.luns, config, impl->description);
    if (!node) return fail(node.error());
    (*node)->allowed_initiators = config.allowed_initiators;
    (*node)->auth = config.auth;
    if (auto r = impl->registry->add(*node); !r) return fail(r.error());
  }
  // Targets of the configuration file, each with its own ACL and CHAP users.
  for (const auto& t : config.targets) {
    auto node = make_node(t.iqn, t.alias, t.luns, config, impl->description);
    if (!node) return fail(node.error());
    (*node)->allowed_initiators = t.allowed_initiators;
    (*node)->auth = t.auth;
    (*node)->tenant = t.tenant;
    if (auto r = impl->registry->add(*node); !r) {
      log::error("config: target {} is defined twice", t.iqn);
      return fail(r.error());
    }
  }
  impl->registry->set_discovery_auth(config.discovery_auth);
  impl->registry->login_throttle().set_options(config.login_throttle);
  for (const auto& t : config.tenants) impl->registry->add_tenant_throttle(t.name, config.login_throttle);
  if (config.export_dir) {
    // No symlinks followed, only regular files and block devices, valid iSCSI names (export_dir.hpp).
    auto scan = scan_export_dir(*config.export_dir, config.iqn);
    if (!scan) {
      log::error("config: --export-dir {}: {}", log::escaped(config.export_dir->string()), scan.error().message());
      return fail(scan.error());
    }
    for (const auto& w : scan->warnings) log::warn("config: {}", w);
    for (const auto& t : scan->targets) {
      auto node = make_node(t.name, t.alias, t.luns, config, impl->description);
      if (!node) return fail(node.error());
      (*node)->allowed_initiators = config.allowed_initiators;
      (*node)->auth = config.auth;
      if (auto r = impl->registry->add(*node); !r) return fail(r.error());
    }
  }
  const unsigned threads = std::max(1u, config.threads);
  for (unsigned i = 0; i < threads; ++i) {
    impl->contexts.push_back(std::make_unique<asio::io_context>(1));
    impl->guards.push_back(asio::make_work_guard(*impl->contexts.back()));
  }
  // Tenants: each with its session cap and payload budget (default: as large as the global one).
  for (const auto& t : config.tenants) {
    const std::uint64_t budget = t.limits.payload_bytes != 0 ? t.limits.payload_bytes : config.limits.global_payload_bytes;
    impl->tenants.push_back(Impl::Tenant{.definition = t,
                                         .sessions = std::make_shared<TenantSessions>(t.limits.max_sessions),
                                         .budget = std::make_shared<SharedPayloadBudget>(budget, "tenant " + t.name)});
  }
  for (const auto& t : config.targets) {
    if (!t.tenant.empty() && std::none_of(config.tenants.begin(), config.tenants.end(),
                                          [&](const TenantDefinition& d) { return d.name == t.tenant; })) {
      log::error("config: target {}: tenant {} is not defined", log::escaped(t.iqn), log::escaped(t.tenant));
      return fail(errc::invalid_argument);
    }
  }
  // The portals: those of no tenant (`listen`; 0.0.0.0:3260 when neither they nor tenants are
  // given), then each tenant's, opened in the tenant's network namespace.
  std::vector<ListenAddress> listen = config.listen;
  if (listen.empty() && config.tenants.empty()) listen.push_back(ListenAddress{.host = "0.0.0.0", .port = 3260});
  for (const auto& l : listen) impl->portals.push_back(PortalSpec{.address = l});
  for (std::size_t i = 0; i < config.tenants.size(); ++i)
    for (const auto& l : config.tenants[i].listen)
      impl->portals.push_back(PortalSpec{.address = l, .tenant = static_cast<int>(i)});
  std::vector<std::string> advertised;
  std::vector<std::uint16_t> advertised_tags;
  std::vector<std::string> advertised_tenants;
  for (const auto& portal : impl->portals) {
    const std::string tenant_name = portal.tenant < 0 ? std::string{} : config.tenants[static_cast<std::size_t>(portal.tenant)].name;
    const std::string netns = portal.tenant < 0 ? std::string{} : config.tenants[static_cast<std::size_t>(portal.tenant)].netns;
    auto acceptor = open_tcp_portal(*impl->contexts[0], portal.address, netns);
    if (!acceptor) {
      if (!tenant_name.empty()) log::error("portal: tenant {}: portal {} not opened", tenant_name, portal.address.host);
      return fail(acceptor.error());
    }
    boost::system::error_code ec;
    const auto local = (*acceptor)->local_endpoint(ec);
    impl->bound.push_back(format_endpoint(local));
    if (!tenant_name.empty())
      log::info("portal: tenant {}: listening on {}{}", tenant_name, format_endpoint(local),
                netns.empty() ? "" : " in network namespace " + netns);
    if (!local.address().is_unspecified()) {
      advertised.push_back(format_endpoint(local));
      advertised_tags.push_back(portal.address.portal_group);
      advertised_tenants.push_back(tenant_name);
    }
    impl->acceptors.push_back(std::move(*acceptor));
  }
  impl->registry->set_portal_addresses(std::move(advertised), std::move(advertised_tags), std::move(advertised_tenants));
  for (const auto& t : config.tenants) listen.insert(listen.end(), t.listen.begin(), t.listen.end());
  // ALUA (SPC-5 §5.16): one target port group per portal group, plus the peer gateways' groups.
  if (config.alua_lock && !config.alua_states.empty()) {
    log::error("config: --alua-state/[alua] and --alua-lock/alua_lock exclude each other: with the lock, this "
               "gateway's groups are active/optimized while it holds the lock and standby otherwise");
    return fail(errc::invalid_argument);
  }
  auto made = make_port_groups(listen, config.alua_states, config.alua_peers);
  if (!made) return fail(made.error());
  const std::vector<TargetPortGroup> groups = std::move(*made);
  auto table = PortGroupTable::make(groups);
  if (!table) return fail(table.error());
  impl->port_groups = *table;
  if (config.alua_lock) {
    // ALUA failover (target/README.md "ALUA failover"): this process's groups are standby until
    // it holds the lock; the peers' follow their markers.
    AluaFailoverOptions o{.lock_path = *config.alua_lock};
    for (const auto& l : listen)
      if (std::find(o.local_groups.begin(), o.local_groups.end(), l.portal_group) == o.local_groups.end())
        o.local_groups.push_back(l.portal_group);
    for (const auto& [tag, state] : config.alua_peers) o.peer_groups.push_back(tag);
    Impl* im = impl.get();
    auto failover = AluaFailover::open(std::move(o), impl->port_groups, [im]() -> Awaitable<void> {
      for (const auto& node : *im->registry->nodes()) co_await node->dispatcher->quiesce_writes();
    });
    if (!failover) {
      log::error("alua: cannot open the lock file {}: {}", config.alua_lock->string(), failover.error().message());
      return fail(failover.error());
    }
    impl->alua_failover = *failover;
    impl->port_groups->set_transitions(*failover);
  }
  for (const auto& node : *impl->registry->nodes()) node->dispatcher->share_port_groups(impl->port_groups);
  if (config.export_rbd) {
    // At start-up an unreadable pool is fatal; later rescans only log.
    auto served = impl->rescan_rbd();
    if (!served) return fail(served.error());
    impl->description.push_back(fmt::format("pool {}: {} image target(s) under {}:", *config.export_rbd, *served,
                                            config.iqn));
  }
  if (config.alua_lock)
    log::info("alua: failover through locks on {}: active/optimized while holding them, standby otherwise",
              config.alua_lock->string());
  for (const auto& g : impl->port_groups->groups())
    if (groups.size() > 1 || g.state != AluaState::active_optimized)
      log::info("portal group {}: ALUA {}{}", g.id, to_string(g.state),
                config.alua_peers.contains(g.id) ? " (a peer gateway's)" : "");
  impl->open_iser_portals();
  return std::unique_ptr<TargetServer>(new TargetServer(std::move(impl)));
}

std::vector<std::string> TargetServer::listening() const { return impl_->bound; }

std::vector<std::uint16_t> TargetServer::ports() const {
  std::vector<std::uint16_t> out;
  for (const auto& a : impl_->acceptors) {
    boost::system::error_code ec;
    out.push_back(a->local_endpoint(ec).port());
  }
  return out;
}

std::vector<std::string> TargetServer::describe() const { return impl_->description; }

void TargetServer::stop() { impl_->stop(); }

std::string TargetServer::status_json() const { return target_status_json(impl_->status_sources()); }

Result<void> TargetServer::serve_status(const std::string& path) {
  if (impl_->status_socket) return fail(errc::invalid_argument);
  auto socket = StatusSocket::open(asio::any_io_executor(impl_->contexts[0]->get_executor()), path,
                                   [sources = impl_->status_sources()] { return target_status_json(sources); });
  if (!socket) return fail(socket.error());
  impl_->status_socket = std::move(*socket);
  return {};
}

Result<int> TargetServer::serve_metrics(const std::string& host_port) {
  if (impl_->metrics) return fail(errc::invalid_argument);
  auto metrics = TargetMetrics::open(host_port, impl_->status_sources());
  if (!metrics) return fail(metrics.error());
  impl_->metrics = std::move(*metrics);
  return impl_->metrics->port();
}

void TargetServer::watch_config_file(std::filesystem::path path, TargetConfig flags_config) {
  impl_->config_file = std::move(path);
  impl_->flags_config = std::move(flags_config);
}

void TargetServer::run(bool handle_signals) {
  Impl& impl = *impl_;
  std::optional<asio::signal_set> signals;
  if (handle_signals) {
    signals.emplace(*impl.contexts[0], SIGINT, SIGTERM);
    signals->async_wait([&impl, &signals](const boost::system::error_code& ec, int signo) {
      if (ec) return;
      log::info("signal {}: shutting down (a second SIGTERM or SIGINT exits at once)", signo);
      // Asio gives the signals back to their default action; ours replaces it right after.
      boost::system::error_code ignored;
      signals->clear(ignored);
      exit_at_next_signal();
      impl.stop();
    });
  }
  // SIGHUP: reload the configuration file (watch_config_file) and rescan --export-rbd's pool; a
  // periodic timer rescans the pool too. With neither, SIGHUP is logged and ignored (it must not
  // end the target: `systemctl reload` sends it).
  std::optional<asio::signal_set> hangups;
  std::optional<asio::steady_timer> rescan_timer;
  if (handle_signals) {
    // Coroutine lambdas take what they use as parameters: captures would die with the closure.
    hangups.emplace(*impl.contexts[0], SIGHUP);
    asio::co_spawn(*impl.contexts[0], [](Impl& im, asio::signal_set& set) -> Awaitable<void> {
      while (!im.stopping) {
        boost::system::error_code ec;
        co_await set.async_wait(use_awaitable_ec(ec));
        if (ec || im.stopping) break;
        if (!im.config_file && !im.config.export_rbd)
          log::info("signal {}: nothing to reload (no --config file, no --export-rbd pool)", SIGHUP);
        im.queue_reload();
        im.queue_rbd_rescan("SIGHUP");
      }
    }(impl, *hangups), asio::detached);
  }
  if (impl.config.export_rbd) {
    if (impl.config.rbd_rescan_interval.count() > 0) {
      rescan_timer.emplace(*impl.contexts[0]);
      asio::co_spawn(*impl.contexts[0], [](Impl& im, asio::steady_timer& timer) -> Awaitable<void> {
        while (!im.stopping) {
          timer.expires_after(im.config.rbd_rescan_interval);
          boost::system::error_code ec;
          co_await timer.async_wait(use_awaitable_ec(ec));
          if (ec || im.stopping) break;
          im.queue_rbd_rescan("periodic");
        }
      }(impl, *rescan_timer), asio::detached);
    }
  }
  for (std::size_t i = 0; i < impl.acceptors.size(); ++i)
    asio::co_spawn(*impl.contexts[0], impl.accept_loop(*impl.acceptors[i], impl.portals[i]), asio::detached);
  if (impl.alua_failover)
    asio::co_spawn(*impl.contexts[0], [](std::shared_ptr<AluaFailover> f) -> Awaitable<void> { co_await f->run(); }(
                                          impl.alua_failover), asio::detached);
  for (std::size_t i = 0; i < impl.iser_listeners.size(); ++i)
    asio::co_spawn(*impl.contexts[0], impl.iser_accept_loop(*impl.iser_listeners[i], impl.iser_portals[i]), asio::detached);
  // Service manager (sd_notify): READY=1 now that every portal listens, then STATUS= whenever the
  // session or target count changes (looked at every second).
  std::optional<asio::steady_timer> status_timer;
  service::notify_ready(impl.status_text());
  if (service::notify_socket_set()) {
    status_timer.emplace(*impl.contexts[0]);
    asio::co_spawn(*impl.contexts[0], [](Impl& im, asio::steady_timer& timer) -> Awaitable<void> {
      std::string sent = im.status_text();
      while (!im.stopping) {
        timer.expires_after(std::chrono::seconds(1));
        boost::system::error_code ec;
        co_await timer.async_wait(use_awaitable_ec(ec));
        if (ec || im.stopping) break;
        if (auto now = im.status_text(); now != sent && service::notify_status(now)) sent = std::move(now);
      }
    }(impl, *status_timer), asio::detached);
  }
  std::vector<std::thread> threads;
  for (std::size_t i = 1; i < impl.contexts.size(); ++i)
    threads.emplace_back([&impl, i] { impl.contexts[i]->run(); });
  // Wake the signal wait once stopping so context 0 can drain.
  impl.contexts[0]->run_one();  // start accept loops
  while (!impl.stopping) impl.contexts[0]->run_one();
  if (signals) {
    boost::system::error_code ignored;
    signals->cancel(ignored);  // stop() without a signal (or from another thread): stop waiting
  }
  if (hangups) {
    boost::system::error_code ignored;
    hangups->cancel(ignored);
  }
  if (rescan_timer) rescan_timer->cancel();
  if (status_timer) status_timer->cancel();
  impl.contexts[0]->run();
  for (auto& t : threads) t.join();
}

}  // namespace iserkit::target

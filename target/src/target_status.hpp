// iserkit-target's status document (--status-socket, read by `iserkit status PATH`) and its
// Prometheus metrics (--metrics HOST:PORT). Both read the same sources: the target-wide counters
// (TargetStats), each open connection's ConnectionStats, the payload budgets and the tenants' session
// counts; nothing here is on the data path. Field names: target/README.md "Status and metrics";
// metric names: docs/metrics.md (add, never rename). Layer 6 helper.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "iserkit/common/result.hpp"
#include "payload_budget.hpp"
#include "target_node.hpp"
#include "target_stats.hpp"
#include "tenant.hpp"

namespace iserkit::target {

/// What the status and the metrics are made of. Every member is safe to use from any thread.
struct StatusSources {
  struct Tenant {
    std::string name;
    std::string netns;
    std::shared_ptr<TenantSessions> sessions;
    std::shared_ptr<SharedPayloadBudget> budget;
  };
  std::shared_ptr<const TargetRegistry> registry;
  std::shared_ptr<SharedPayloadBudget> global_budget;  ///< the budget of connections of no tenant
  std::vector<Tenant> tenants;
  std::vector<std::string> portals;  ///< bound addresses ("ip:port")
  std::string since;                 ///< start time, UTC ISO 8601
  /// The open connections (logging in or logged in) now; thread-safe.
  std::function<std::vector<std::shared_ptr<const ConnectionStats>>()> connections;
  /// The ALUA target port groups and their states now (may be null).
  std::shared_ptr<const PortGroupTable> port_groups;
  /// ALUA failover (--alua-lock): the lock file, and whether this gateway holds it now; empty
  /// without failover.
  std::string alua_lock;
  std::function<bool()> alua_active;
  /// --socket-io as configured (the status reports it with the kernel probe and what it selects).
  SocketIo socket_io = SocketIo::automatic;
};

/// The status as JSON: {"program": "iserkit-target", "since", "portals", "payload_budget":
/// {"used_bytes", "limit_bytes"}, "tenants": [...], "targets": [{"name", "alias", "tenant", "luns":
/// [{"lun", "block_size", "blocks"}]}], "sessions": [{"initiator", "isid", "tsih", "type", "target",
/// "tenant", "since", "connections": [{"cid", "peer", "portal", "transport"}], "commands", "bytes",
/// "errors" (not GOOD, not UNIT ATTENTION), "unit_attentions", "payload_budget_bytes"}], "logging_in",
/// "totals": {..., "unit_attentions", ...}, "alua": {"groups": [{"group", "state"}], "lock" (null
/// without --alua-lock), "active" (null without)}, "socket_io": {"requested" ("auto", "uring",
/// "epoll"), "sends" ("uring" or "epoll": what TCP connections use), "kernel": {"io_uring",
/// "sendmsg", "send", "send_zc", "recv_multishot", "buf_ring", "fast_poll" (booleans), "error"}}}.
std::string target_status_json(const StatusSources& sources);

/// Most logical units given their own iserkit_target_lun_* series (target and lun labels), in the
/// registry's order; the units beyond it are counted in the target-wide series only.
inline constexpr std::size_t max_labelled_luns = 4096;

/// The Prometheus endpoint: GET /metrics on its own civetweb threads, with the daemons' shared
/// iserkit_build_info and process_* metrics (common/metrics). Names: docs/metrics.md.
class TargetMetrics {
 public:
  /// Listens on `host_port` ("127.0.0.1:9101", "[::1]:0"; port 0 = any free port). Bounds: at most
  /// `max_connections` scrapes served at once (more wait in the listen backlog); a scraper that
  /// sends nothing holds its thread for 5 s at most. Errors: std::errc::invalid_argument for a
  /// malformed address, std::errc::address_in_use when it cannot be bound.
  static Result<std::unique_ptr<TargetMetrics>> open(const std::string& host_port, StatusSources sources,
                                                     int max_connections = 2);
  ~TargetMetrics();
  TargetMetrics(const TargetMetrics&) = delete;
  TargetMetrics& operator=(const TargetMetrics&) = delete;
  /// The bound TCP port.
  [[nodiscard]] int port() const;

  struct Impl;  ///< implementation detail (target_status.cpp)

 private:
  explicit TargetMetrics(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace iserkit::target

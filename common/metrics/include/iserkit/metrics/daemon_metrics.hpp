// What both daemons' Prometheus endpoints have in common (docs/metrics.md): the HTTP endpoint
// itself (prometheus-cpp's pull Exposer on civetweb, with the same bounds in both), the build's
// identity as iserkit_build_info, and the standard process_* metrics read from /proc at scrape
// time (prometheus-cpp 1.0 has no process collector). Layer 6 helper for iserkit-nbd and
// iserkit-target; not part of the installed library.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>

#include "iserkit/common/process_stats.hpp"
#include "iserkit/common/result.hpp"

namespace iserkit::metrics {

/// This build's identity, fixed at build time.
struct BuildInfo {
  std::string_view version;   ///< the CMake project version, e.g. "0.1.0"
  std::string_view commit;    ///< `git rev-parse --short=12 HEAD` at build time, "-dirty" appended for
                              ///< uncommitted changes; $ISERKIT_COMMIT or "unknown" without git
  std::string_view compiler;  ///< e.g. "gcc 12.2.0", "clang 14.0.6"
};

/// The build's identity (see BuildInfo).
BuildInfo build_info() noexcept;

/// The families iserkit_build_info (gauge, 1, labels version/commit/compiler) and, when `process`
/// holds a value, process_cpu_seconds_total, process_resident_memory_bytes,
/// process_virtual_memory_bytes, process_open_fds, process_max_fds and process_start_time_seconds
/// (Prometheus' conventional names and units). Pure: the collector's output for given inputs.
std::vector<prometheus::MetricFamily> daemon_metric_families(const BuildInfo& build, const Result<ProcessStats>& process);

/// A Collectable that returns daemon_metric_families(build_info(), read_process_stats()) at each
/// scrape; when /proc cannot be read the process_* families are left out of that scrape.
std::shared_ptr<prometheus::Collectable> make_daemon_collector();

/// The metrics endpoint of a daemon: GET /metrics on civetweb's own threads, serving the daemon
/// collector and whatever add() gives it.
class Endpoint {
 public:
  /// Listens on `host_port` ("127.0.0.1:9100", "[::1]:0"; port 0 = any free port). Bounds: at most
  /// `max_connections` scrapes served at once (more wait in the listen backlog); a scraper that
  /// sends nothing holds its thread for 5 s at most. Errors: std::errc::invalid_argument for a
  /// malformed address, std::errc::address_in_use when it cannot be bound.
  static Result<std::unique_ptr<Endpoint>> open(const std::string& host_port, int max_connections);
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;
  ~Endpoint();

  /// Serves `collectable` too, and keeps it alive as long as the endpoint (prometheus-cpp's
  /// Exposer holds only a weak reference).
  void add(std::shared_ptr<prometheus::Collectable> collectable);
  /// The bound TCP port (0 if none).
  [[nodiscard]] int port() const;

 private:
  Endpoint() = default;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
  std::unique_ptr<prometheus::Exposer> exposer_;  // after collectables_: stops serving before they go
};

}  // namespace iserkit::metrics

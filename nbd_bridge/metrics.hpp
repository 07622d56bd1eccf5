// Prometheus metrics of iserkit-nbd (--metrics HOST:PORT): NBD requests, bytes, errors and
// latency by kind (read, write, flush, trim, write_zeroes), from a decorator around the Export
// the server serves. Exposition by the daemons' shared endpoint (common/metrics: prometheus-cpp's
// pull Exposer on civetweb, with iserkit_build_info and the process_* metrics): its own threads, at
// most `max_connections` scrapes served at once (more wait in the listen backlog); counters are
// atomic, so the io_context thread updates them without locks.
// Names, types, labels and units: docs/metrics.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "iserkit/common/result.hpp"
#include "iserkit/initiator/multipath.hpp"
#include "iserkit/initiator/session.hpp"
#include "nbd_bridge/export.hpp"

namespace iserkit::nbd {

/// The registry and the HTTP endpoint.
class BridgeMetrics {
 public:
  /// Listens on `host_port` ("127.0.0.1:9100", "[::1]:0"; port 0 = any free port) serving
  /// GET /metrics. Errors: std::errc::invalid_argument for a malformed address,
  /// std::errc::address_in_use when civetweb cannot bind.
  static Result<std::unique_ptr<BridgeMetrics>> open(const std::string& host_port, int max_connections = 2);
  ~BridgeMetrics();
  BridgeMetrics(const BridgeMetrics&) = delete;
  BridgeMetrics& operator=(const BridgeMetrics&) = delete;

  /// The bound TCP port.
  [[nodiscard]] int port() const;
  /// The sessions' counters summed over the event loops (`totals`: connections lost, reconnect
  /// attempts, recoveries, commands re-issued, unit attentions) and the copied payload bytes, as
  /// cumulative values: each counter grows by the difference from the last call (call from the
  /// bridge's thread, e.g. once a second). `connected`: 1 while the bridge has a usable session.
  void update_session(const initiator::SessionStats& totals, std::uint64_t copied_payload_bytes, bool connected);
  /// Names what the bridge serves: gauge iserkit_nbd_export_info{target, lun} = 1. One series: the
  /// target IQN and LUN come from the command line (the first URL), never from the peer.
  void describe_export(const std::string& target, std::uint32_t lun);
  /// After the replacement timeout: `failed` (gauge iserkit_nbd_gave_up, 1 while requests fail
  /// with EIO and the session — or the multipath paths — log in again in the background),
  /// `gave_up_total` (cumulative, as update_session()'s counters: times the replacement timeout
  /// passed), `next_attempt_seconds` (gauge iserkit_nbd_reconnect_next_attempt_seconds: until the
  /// next background login, 0 when none is waiting). Call from the bridge's thread.
  void update_reconnect(bool failed, std::uint64_t gave_up_total, double next_attempt_seconds);
  /// Multipath sessions: each path's state (gauge iserkit_nbd_path_up, 1 = up) and counters
  /// (commands, bytes by direction, path errors, downs, reinstatements), as cumulative values like
  /// update_session(), plus `failovers` (commands sent again on another path after a path error).
  /// Paths are labelled path="INDEX" and url (password hidden). Call from the bridge's thread.
  void update_paths(const std::vector<initiator::PathStatus>& paths, std::uint64_t failovers);
  /// The NBD buffer budget: payload bytes held now by every client connection, and what one
  /// connection may hold (--max-buffered-bytes... ServerOptions::max_buffered_bytes).
  void update_buffers(std::uint64_t used_bytes, std::uint64_t limit_bytes_per_connection);
  /// Wraps `inner` so every request it serves is counted.
  std::shared_ptr<Export> meter(std::shared_ptr<Export> inner);

  struct Impl;  ///< implementation detail (metrics.cpp)

 private:
  explicit BridgeMetrics(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace iserkit::nbd

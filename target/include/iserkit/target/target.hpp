// TargetServer: the running iSCSI target (layer 6): TCP portals, I/O threads and the connections
// on them (RFC 7143 §4.2.6 portals; one session per connection at MaxConnections=1).
//
// THREAD MODEL: `threads` io_contexts, one thread each. Listening sockets live on the first;
// each accepted connection is placed on the next io_context in turn and stays there with its
// session and every command it runs, so the data path takes no locks and never changes thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "iserkit/common/result.hpp"
#include "iserkit/target/config.hpp"

namespace iserkit::target {

/// A configured target, listening once create() returns.
class TargetServer {
 public:
  /// Builds the target nodes and LUNs of `config` and binds every listen address.
  /// Errors: the backend's errno (e.g. ENOENT for a missing LUN file), errc::invalid_argument for
  /// a bad configuration (no LUNs, bad block size), socket errors from bind/listen.
  static Result<std::unique_ptr<TargetServer>> create(const TargetConfig& config);
  ~TargetServer();
  TargetServer(const TargetServer&) = delete;
  TargetServer& operator=(const TargetServer&) = delete;

  /// The bound addresses as "ip:port" (IPv6 in brackets), in --listen order, then each tenant's
  /// (TargetConfig::tenants, in order); port 0 resolved.
  [[nodiscard]] std::vector<std::string> listening() const;
  /// The bound port of each listen address, in the order of listening().
  [[nodiscard]] std::vector<std::uint16_t> ports() const;
  /// One line per target node: its name and LUNs, for the startup log.
  [[nodiscard]] std::vector<std::string> describe() const;

  /// Runs the I/O threads until stop() (or SIGINT/SIGTERM when `handle_signals`); then closes
  /// every connection and returns when they are gone. Call once, from one thread.
  /// With `handle_signals`, a second SIGINT/SIGTERM once the first one's drain began ends the
  /// process at once with _exit(128 + signal number): commands not answered yet are dropped (what
  /// was answered is in the kernel already; target/README.md "Shutdown").
  void run(bool handle_signals);
  /// Stops accepting and closes every connection. Thread-safe; returns at once.
  void stop();

 private:
  struct Impl;
  explicit TargetServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace iserkit::target

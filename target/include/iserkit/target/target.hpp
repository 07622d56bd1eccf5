// TargetServer: the running iSCSI target (layer 6): TCP portals, I/O threads and the connections
// on them (RFC 7143 §4.2.6 portals; one session per connection at MaxConnections=1).
//
// THREAD MODEL: `threads` io_contexts, one thread each. Listening sockets live on the first;
// each accepted connection is placed on the next io_context in turn and stays there with its
// session and every command it runs, so the data path takes no locks and never changes thread.
#pragma once

#include <filesystem>
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

  /// Makes SIGHUP (in run() with `handle_signals`) read configuration file `path` again onto
  /// `flags_config` (the configuration the command line alone gives, as load_config_file() takes
  /// it) and apply what changed in its [[targets]] without dropping a session: new targets, LUNs
  /// appended to a target, alias/ACL/CHAP changes (for new logins), removed targets (new logins
  /// refused; logged-in sessions keep them until they end). A file that does not parse, a removed
  /// or changed LUN, or a new LUN that cannot be opened keeps the running configuration whole and
  /// logs why. Other settings are read at start only (a warning names them). The service manager
  /// hears RELOADING=1, then READY=1 (service_manager.hpp). Call before run(). Target/README.md
  /// "Reloading".
  void watch_config_file(std::filesystem::path path, TargetConfig flags_config);

  /// Runs the I/O threads until stop() (or SIGINT/SIGTERM when `handle_signals`); then closes
  /// every connection and returns when they are gone. Call once, from one thread. Tells the
  /// service manager READY=1 at once (every portal listens since create()), STATUS= "N session(s),
  /// M target(s)" as the counts change, and STOPPING=1 when the shutdown begins. With
  /// `handle_signals`, SIGHUP reloads (watch_config_file(), --export-rbd) and never ends the process.
  /// With `handle_signals`, a second SIGINT/SIGTERM once the first one's drain began ends the
  /// process at once with _exit(128 + signal number): commands not answered yet are dropped (what
  /// was answered is in the kernel already; target/README.md "Shutdown").
  void run(bool handle_signals);
  /// Stops accepting and closes every connection. Thread-safe; returns at once.
  void stop();

  /// The status document (JSON: portals, payload budgets, tenants, targets and LUNs, sessions with
  /// initiator name, ISID, TSIH, connections, portal, transport and counters; target/README.md
  /// "Status and metrics"). Thread-safe.
  [[nodiscard]] std::string status_json() const;
  /// Answers every connection to the Unix socket `path` (mode 0600) with status_json() until the
  /// shutdown (iserkit-target --status-socket; StatusSocket bounds its clients). Call before run().
  /// Errors: as StatusSocket::open (ENAMETOOLONG, EEXIST for a file that is no socket, EACCES…),
  /// errc::invalid_argument when called twice.
  Result<void> serve_status(const std::string& path);
  /// Serves Prometheus metrics on GET http://`host_port`/metrics ("127.0.0.1:9101"; port 0 picks
  /// a free one) until the server is destroyed (iserkit-target --metrics). Returns the bound
  /// port. Errors: errc::invalid_argument for a malformed address or a second call,
  /// errc::address_in_use when it cannot be bound.
  Result<int> serve_metrics(const std::string& host_port);

 private:
  struct Impl;
  explicit TargetServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace iserkit::target

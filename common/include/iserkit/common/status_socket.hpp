// A status query endpoint for the daemons (iserkit-nbd --status-socket, later iserkit-target):
// a Unix stream socket that answers every connection with one document (the daemon's status as
// JSON) and closes it. Nothing is read from the client, so a peer can send nothing that matters.
// Bounded (StatusSocketLimits): at most `max_clients` clients are answered at once, each by its own
// coroutine, so a client that connects and never reads holds only its own answer; a client not
// done reading within `write_timeout` is closed; connections above `max_clients` are closed
// unanswered. Nothing is read, so the request size is 0. The socket file is mode 0600 (the status
// names URLs, paths and initiator names). Layer 6 helper.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/result.hpp"

namespace iserkit {

/// How much a status socket's clients may hold.
struct StatusSocketLimits {
  std::size_t max_clients = 16;  ///< clients answered at once; more are closed unanswered
  std::chrono::milliseconds write_timeout{5000};  ///< time a client has to read the whole document
};

/// Serves `document()` on a Unix socket at `path` until stop() or destruction.
/// Executor: `ex` must be single-threaded; document() is called there, once per client.
class StatusSocket {
 public:
  /// Binds `path` (a stale socket file left by a dead daemon is replaced; any other existing file
  /// is an error: std::errc::file_exists) with mode 0600 and starts answering.
  /// Errors: the bind/listen errno (e.g. ENAMETOOLONG past 107 bytes, EACCES).
  static Result<std::unique_ptr<StatusSocket>> open(asio::any_io_executor ex, std::string path,
                                                    std::function<std::string()> document,
                                                    StatusSocketLimits limits = {});
  /// Stops answering and removes the socket file.
  ~StatusSocket();
  StatusSocket(const StatusSocket&) = delete;
  StatusSocket& operator=(const StatusSocket&) = delete;

  /// Stops answering and removes the socket file (idempotent).
  void stop() noexcept;

  struct State;  ///< implementation detail (status_socket.cpp)

 private:
  explicit StatusSocket(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

/// Connects to a status socket and returns the whole document it sent (at most 1 MiB).
/// Errors: connect errno (ENOENT, ECONNREFUSED, …), std::errc::message_size past 1 MiB.
Result<std::string> query_status_socket(const std::string& path);

}  // namespace iserkit

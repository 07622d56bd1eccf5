// iserkit-nbd --threads N (layer 6): the event loops beyond the main one, each an io_context run by
// its own thread, and the distinct ISIDs their iSCSI sessions log in with. One session per loop,
// opened at start-up: the number of sessions on the target is N whatever the NBD clients open, an
// NBD connect costs no login, and no MC/S is needed (nbd_bridge/README.md "Threads").
// Spec: RFC 7143 §11.12.5 (ISID: type, naming authority, qualifier).
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <thread>
#include <vector>

#include "iserkit/common/asio.hpp"

namespace iserkit::nbd {

/// `count` ISIDs of the "random" type (T = 10b, RFC 7143 §11.12.5): the same random B and C fields,
/// and qualifiers (D) that differ, never zero — so each is its own session from one initiator
/// (same InitiatorName) to the same target. `count`: 1..65535.
std::vector<std::array<std::byte, 6>> loop_isids(std::size_t count);

/// Loop 0 is the caller's io_context (main thread); loops 1..N-1 are made here and run by their
/// own threads from start() until stop_and_join(). Executor and thread: io(i) is single-threaded,
/// so objects living on it (a session, its LUN export, NBD connections) need no strand.
/// Destroy before loop 0's io_context: a handler left on a worker loop may hold objects of loop 0.
class EventLoops {
 public:
  /// `main` is loop 0; `count` ≥ 1 loops in all.
  EventLoops(asio::io_context& main, std::size_t count);
  ~EventLoops();
  EventLoops(const EventLoops&) = delete;
  EventLoops& operator=(const EventLoops&) = delete;

  [[nodiscard]] std::size_t size() const noexcept { return 1 + workers_.size(); }
  /// Loop `index` (0 = main). Precondition: index < size().
  [[nodiscard]] asio::io_context& io(std::size_t index) noexcept;
  /// Starts the worker threads (loops 1..N-1). Each runs until stop_and_join().
  void start();
  /// Stops the worker loops (pending handlers are left, destroyed with the loops) and joins their
  /// threads. Idempotent. Call from the main thread.
  void stop_and_join();

 private:
  struct Worker {
    asio::io_context io{1};
    asio::executor_work_guard<asio::io_context::executor_type> guard = asio::make_work_guard(io);
    std::thread thread;
  };
  asio::io_context& main_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace iserkit::nbd

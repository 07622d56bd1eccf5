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

/// All N event loops, owned here. Loop 0 is run by the caller (main thread, `io(0).run()`); loops
/// 1..N-1 are run by their own threads from start() until stop_and_join(). Executor and thread:
/// io(i) is single-threaded, so objects living on it (a session, its LUN export, NBD connections)
/// need no strand.
/// Teardown is two-phase (shutdown()): every loop's pending handlers are destroyed first, while
/// every loop's services still exist, and only then are the loops destroyed. A handler left on one
/// loop may hold objects of another (loop 0's accept coroutine holds the lanes whose sessions and
/// timers live on loops 1..N-1, and the reverse), so no loop may be destroyed while another still
/// has handlers.
class EventLoops {
 public:
  /// `count` ≥ 1 loops in all, each an io_context with concurrency hint 1.
  explicit EventLoops(std::size_t count);
  ~EventLoops();
  EventLoops(const EventLoops&) = delete;
  EventLoops& operator=(const EventLoops&) = delete;

  [[nodiscard]] std::size_t size() const noexcept { return 1 + workers_.size(); }
  /// Loop `index` (0 = main). Precondition: index < size().
  [[nodiscard]] asio::io_context& io(std::size_t index) noexcept;
  /// Starts the worker threads (loops 1..N-1). Each runs until stop_and_join().
  void start();
  /// Stops the worker loops (pending handlers are left) and joins their threads. Idempotent. Call
  /// from the main thread.
  void stop_and_join();
  /// stop_and_join(), then destroys every loop's pending handlers (asio's execution_context
  /// shutdown) while all loops' services are still alive. Idempotent; the destructor calls it.
  /// After it, no handler runs on any loop. Call from the main thread once loop 0 has returned.
  void shutdown();

 private:
  /// An io_context whose shutdown (protected in asio) can be called before its destruction.
  struct Loop : asio::io_context {
    Loop() : asio::io_context(1) {}
    void destroy_handlers() { asio::execution_context::shutdown(); }
  };
  struct Worker {
    Loop io;
    asio::executor_work_guard<asio::io_context::executor_type> guard = asio::make_work_guard(io);
    std::thread thread;
  };
  Loop main_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace iserkit::nbd

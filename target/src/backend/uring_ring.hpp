// UringService: the io_uring ring of one io_context (an Asio execution_context service, so each
// io_context — hence each I/O thread in the target's model — has its own ring, with no globals).
// The io_context waits on the ring's own descriptor (a dup of it, readable while CQEs are there;
// $ISERKIT_URING_EVENTFD=1: an eventfd registered with io_uring_register_eventfd, as before) through
// posix::stream_descriptor::async_wait while operations are in flight; SQEs prepared during one
// turn of the loop are submitted together by a single posted flush, which waits a few more passes
// of the ready queue while they keep bringing new SQEs (a pipelined burst); when the SQ is full it is
// submitted at once and the SQE taken again (as Seastar's get_sqe does). user_data points at a
// UringOp whose Completion resumes the waiting coroutine. Not thread-safe: one thread runs the
// io_context.
#pragma once

#include <liburing.h>

#include <cstdint>
#include <optional>
#include <utility>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/completion.hpp"
#include "iserkit/common/handler_memory.hpp"
#include "iserkit/common/result.hpp"

namespace iserkit::target::detail {

/// One in-flight io_uring operation: `res` is the CQE result (bytes or -errno). Without
/// `on_complete` the CQE completes `done` (the waiting coroutine resumes, posted); with it, reap()
/// calls on_complete(op) at once, on the loop's thread (no post: BlockBackend::start_transfer()).
struct UringOp {
  Completion done;
  int res = 0;
  void (*on_complete)(UringOp& op) noexcept = nullptr;
};

class UringService final : public asio::execution_context::service {
 public:
  using key_type = UringService;
  static inline asio::execution_context::id id;

  explicit UringService(asio::execution_context& context);
  ~UringService() override;
  UringService(const UringService&) = delete;
  UringService& operator=(const UringService&) = delete;

  /// Creates the ring and its wait descriptor on first use (bound to `executor`'s io_context).
  /// Errors: the errno of io_uring_queue_init / fcntl(F_DUPFD_CLOEXEC) (or eventfd /
  /// io_uring_register_eventfd).
  Result<void> ensure(const asio::any_io_executor& executor);

  /// An SQE to fill; submits the queue first when it is full. nullptr only if the kernel accepts
  /// nothing (then fail the operation with EBUSY).
  io_uring_sqe* get_sqe() noexcept;

  /// Two consecutive SQEs to fill (a linked pair, IOSQE_IO_LINK on the first): submits the queue
  /// first when fewer than two entries are free, so the first is never submitted alone before the
  /// second is prepared. {nullptr, nullptr} only if the kernel accepts nothing (EBUSY).
  std::pair<io_uring_sqe*, io_uring_sqe*> get_sqe_pair() noexcept;

  /// Registers `op` (whose SQE was just prepared) and schedules the batched submit.
  void queued(UringOp& op, io_uring_sqe* sqe);

  /// Registers `op`, a socket send whose SQE was just prepared, for a submission that does not
  /// wait: when a batched submit is pending it goes with it, on that flush's next run (no further
  /// deferral), together with the backend SQEs of the pass; else it is submitted at once (one
  /// io_uring_enter where a sendmsg would have been).
  void queued_now(UringOp& op, io_uring_sqe* sqe);

  /// Submits an IORING_OP_ASYNC_CANCEL of `op` (in flight) at once; its own CQE is ignored.
  /// False when no SQE could be had (the ring is full and the kernel accepts nothing).
  bool cancel(UringOp& op) noexcept;

  /// True while SQEs wait for a posted batched submit (flush): an SQE queued now shares its
  /// io_uring_enter.
  [[nodiscard]] bool submit_pending() const noexcept { return flush_posted_; }

  /// False once the io_context shut down (no SQE may be prepared any more).
  [[nodiscard]] bool running() const noexcept { return !shut_down_; }

  /// The ring of `executor`'s io_context, created on first use. Errors as for ensure().
  static Result<UringService*> of(const asio::any_io_executor& executor);

  void shutdown() override;

 private:
  void flush();
  /// io_uring_submit() now (a transient failure leaves the SQEs for a posted flush), then arms the
  /// eventfd wait when operations are in flight.
  void submit_now();
  /// Posts flush() to the loop (flush_posted_ says one is pending; at most one is).
  void post_flush();
  void arm();
  void reap();

  std::optional<io_uring> ring_;
  std::optional<asio::posix::stream_descriptor> eventfd_;  // the descriptor waited on (ring dup or eventfd)
  bool use_eventfd_ = false;
  std::optional<asio::any_io_executor> executor_;
  HandlerMemory flush_memory_;    // the one posted flush() (flush_posted_)
  HandlerMemory eventfd_memory_;  // the eventfd wait's operation state (armed_)
  std::error_code init_error_;
  std::size_t in_flight_ = 0;
  std::size_t queued_since_check_ = 0;  // SQEs prepared since flush() last looked
  unsigned deferrals_ = 0;              // passes the pending submission has waited so far
  bool flush_posted_ = false;
  bool send_waiting_ = false;           // queued_now() joined the pending flush: no more deferral
  bool armed_ = false;
  bool shut_down_ = false;
};

/// Runs one io_uring operation on the calling io_context's ring: `prep(sqe)` fills the SQE.
/// Returns: the CQE result (>= 0) or a negative errno.
template <class Prep>
Awaitable<int> uring_run(Prep prep) {
  auto service = UringService::of(co_await asio::this_coro::executor);
  if (!service) co_return -service.error().value();
  io_uring_sqe* sqe = (*service)->get_sqe();
  if (sqe == nullptr) co_return -EBUSY;
  UringOp op;
  prep(sqe);
  (*service)->queued(op, sqe);
  co_await op.done.wait();
  co_return op.res;
}

/// Runs two io_uring operations as a linked pair on the calling io_context's ring: `prep_first`
/// and `prep_second` fill the SQEs; the first gets IOSQE_IO_LINK, so the second starts only after
/// the first completed in full (a short or failed first cancels it: -ECANCELED).
/// Returns: both CQE results (>= 0 or a negative errno), once both completed.
template <class PrepFirst, class PrepSecond>
Awaitable<std::pair<int, int>> uring_run_linked(PrepFirst prep_first, PrepSecond prep_second) {
  auto service = UringService::of(co_await asio::this_coro::executor);
  if (!service) co_return std::pair{-service.error().value(), -service.error().value()};
  auto [first_sqe, second_sqe] = (*service)->get_sqe_pair();
  if (first_sqe == nullptr) co_return std::pair{-EBUSY, -EBUSY};
  // The CQEs may come in either order (the second's cancellation can be posted with the first):
  // the last one completes the wait. Both run on the loop's thread (reap()).
  struct Op : UringOp {
    UringOp* last = nullptr;  // the op whose Completion the coroutine waits on
    int* pending = nullptr;
  };
  int pending = 2;
  Op first;
  Op second;
  for (Op* op : {&first, &second}) {
    op->last = &second;
    op->pending = &pending;
    op->on_complete = [](UringOp& base) noexcept {
      auto& op = static_cast<Op&>(base);
      if (--*op.pending == 0) op.last->done.complete();
    };
  }
  prep_first(first_sqe);
  first_sqe->flags |= IOSQE_IO_LINK;
  prep_second(second_sqe);
  (*service)->queued(first, first_sqe);
  (*service)->queued(second, second_sqe);
  co_await second.done.wait();
  co_return std::pair{first.res, second.res};
}

}  // namespace iserkit::target::detail

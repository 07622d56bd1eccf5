// UringService: per-io_context io_uring ring driven from the Asio loop through the ring's descriptor
// (see uring_ring.hpp). Uses liburing 2.3.
#include "backend/uring_ring.hpp"

#include "iserkit/common/log.hpp"
#include "iserkit/common/send_pass.hpp"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace iserkit::target::detail {
namespace {
constexpr unsigned ring_entries = 256;
// How many extra passes of the io_context's ready queue a submission may wait for more SQEs
// (see flush()). Each pass costs one post; 4 covers the bursts a QD32 initiator sends.
constexpr unsigned max_flush_deferrals = 4;
}

UringService::UringService(asio::execution_context& context) : asio::execution_context::service(context) {}

UringService::~UringService() {
  if (ring_) io_uring_queue_exit(&*ring_);
}

void UringService::shutdown() {
  // Destroy the descriptor here, not in the destructor: services are destroyed newest first, and
  // the reactor service the descriptor belongs to was created after this one.
  shut_down_ = true;
  eventfd_.reset();
}

Result<void> UringService::ensure(const asio::any_io_executor& executor) {
  if (ring_) return {};
  if (init_error_) return fail(init_error_);
  io_uring ring;
  std::memset(&ring, 0, sizeof ring);
  // COOP_TASKRUN: completions run as task work at our next system call instead of interrupting
  // the thread (an IPI or a forced kernel entry per completion); the loop makes a system call
  // every few microseconds and a sleeping thread is still woken. SINGLE_ISSUER: only this
  // io_context's thread submits. Kernels before 5.19/6.0 refuse the flags: then plain.
  int rc = io_uring_queue_init(ring_entries, &ring, IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER);
  if (rc == -EINVAL) {
    std::memset(&ring, 0, sizeof ring);
    rc = io_uring_queue_init(ring_entries, &ring, 0);
  }
  if (rc < 0) {
    init_error_ = std::error_code(-rc, std::generic_category());
    return fail(init_error_);
  }
  // The loop waits for completions on the ring's own descriptor (readable while CQEs are there):
  // a wake-up then costs no read(2) of an eventfd. $ISERKIT_URING_EVENTFD=1: the eventfd as before
  // (io_uring_register_eventfd), for comparison (docs/performance.md, issue 23 item 3).
  const char* eventfd_env = std::getenv("ISERKIT_URING_EVENTFD");
  use_eventfd_ = eventfd_env != nullptr && *eventfd_env == '1';
  const int efd = use_eventfd_ ? ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC) : ::fcntl(ring.ring_fd, F_DUPFD_CLOEXEC, 0);
  if (efd < 0) {
    init_error_ = std::error_code(errno, std::generic_category());
    io_uring_queue_exit(&ring);
    return fail(init_error_);
  }
  if (int rc = use_eventfd_ ? io_uring_register_eventfd(&ring, efd) : 0; rc < 0) {
    init_error_ = std::error_code(-rc, std::generic_category());
    ::close(efd);
    io_uring_queue_exit(&ring);
    return fail(init_error_);
  }
  ring_.emplace(ring);
  executor_.emplace(executor);
  eventfd_.emplace(executor, efd);
  return {};
}

Result<UringService*> UringService::of(const asio::any_io_executor& executor) {
  auto& service = asio::use_service<UringService>(asio::query(executor, asio::execution::context));
  if (auto r = service.ensure(executor); !r) return fail(r.error());
  return &service;
}

io_uring_sqe* UringService::get_sqe() noexcept {
  io_uring_sqe* sqe = io_uring_get_sqe(&*ring_);
  if (sqe == nullptr) {
    // SQ full: hand what is queued to the kernel now, then take an entry again.
    io_uring_submit(&*ring_);
    sqe = io_uring_get_sqe(&*ring_);
  }
  return sqe;
}

std::pair<io_uring_sqe*, io_uring_sqe*> UringService::get_sqe_pair() noexcept {
  if (io_uring_sq_space_left(&*ring_) < 2) io_uring_submit(&*ring_);
  if (io_uring_sq_space_left(&*ring_) < 2) return {nullptr, nullptr};
  io_uring_sqe* first = io_uring_get_sqe(&*ring_);
  io_uring_sqe* second = io_uring_get_sqe(&*ring_);
  return {first, second};
}

void UringService::queued(UringOp& op, io_uring_sqe* sqe) {
  io_uring_sqe_set_data(sqe, &op);
  ++in_flight_;
  ++queued_since_check_;
  if (!flush_posted_) {
    flush_posted_ = true;
    deferrals_ = 0;
    post_flush();
  }
}

void UringService::queued_now(UringOp& op, io_uring_sqe* sqe) {
  io_uring_sqe_set_data(sqe, &op);
  ++in_flight_;
  if (flush_posted_) {
    // The pass's backend SQEs are about to be submitted: the send goes with them, in one
    // io_uring_enter, without waiting for more passes.
    send_waiting_ = true;
    return;
  }
  submit_now();
}

bool UringService::cancel(UringOp& op) noexcept {
  io_uring_sqe* sqe = get_sqe();
  if (sqe == nullptr) return false;
  io_uring_prep_cancel(sqe, &op, 0);
  io_uring_sqe_set_data(sqe, nullptr);  // reap() skips its CQE
  ++in_flight_;
  if (!flush_posted_) submit_now();
  else send_waiting_ = true;
  return true;
}

void UringService::submit_now() {
  const int rc = io_uring_submit(&*ring_);
  if (rc == -EINTR || rc == -EAGAIN || rc == -EBUSY) {
    // Transient: the SQEs stay queued; a posted flush retries without deferral.
    send_waiting_ = true;
    if (!flush_posted_) {
      flush_posted_ = true;
      post_flush();
    }
  } else if (rc < 0) {
    log::error("io_uring: submit failed: errno={}", -rc);
  }
  if (!armed_ && in_flight_ > 0) arm();
}

void UringService::post_flush() { post_with_memory(*executor_, flush_memory_, [this] { flush(); }); }

void UringService::flush() {
  flush_posted_ = false;
  if (shut_down_) return;
  // Batch submissions: a pipelining initiator's commands are received one per pass of the ready
  // queue (each command's coroutine is posted), so while the last pass queued new SQEs, wait one
  // more pass (bounded). One io_uring_enter then carries the burst; on a virtio disk that is also
  // one doorbell (a VM exit) instead of one per command. An idle pass submits at once.
  if (queued_since_check_ > 0 && deferrals_ < max_flush_deferrals && !send_waiting_) {
    queued_since_check_ = 0;
    ++deferrals_;
    flush_posted_ = true;
    post_flush();
    return;
  }
  queued_since_check_ = 0;
  send_waiting_ = false;
  const int rc = io_uring_submit(&*ring_);
  if (rc == -EINTR || rc == -EAGAIN || rc == -EBUSY) {
    // Transient (EBUSY: completions are backing up): reap what is there and retry next turn. The
    // SQEs stay in the submission queue meanwhile.
    reap();
    flush_posted_ = true;
    post_flush();
  } else if (rc < 0) {
    log::error("io_uring: submit failed: errno={}", -rc);
  }
  if (!armed_ && in_flight_ > 0) arm();
}

void UringService::arm() {
  armed_ = true;
  eventfd_->async_wait(asio::posix::stream_descriptor::wait_read, with_memory(eventfd_memory_, [this](const boost::system::error_code& ec) {
    armed_ = false;
    if (ec || shut_down_) return;
    if (use_eventfd_) {
      std::uint64_t count = 0;
      [[maybe_unused]] auto n = ::read(eventfd_->native_handle(), &count, sizeof count);
    }
    reap();
    if (in_flight_ > 0) arm();
  }));
}

void UringService::reap() {
  io_uring_cqe* cqe = nullptr;
  // Two or more completions at once: hold the loop's send pass (common/send_pass.hpp) until the
  // coroutines they resume have run, so their responses leave in one write per connection.
  SendPass* pass = nullptr;
  std::size_t reaped = 0;
  while (io_uring_peek_cqe(&*ring_, &cqe) == 0 && cqe != nullptr) {
    if (++reaped == 2) {
      pass = &SendPass::of(*executor_);
      pass->hold();
    }
    auto* op = static_cast<UringOp*>(io_uring_cqe_get_data(cqe));
    const int res = cqe->res;
    io_uring_cqe_seen(&*ring_, cqe);
    --in_flight_;
    if (op != nullptr) {
      op->res = res;
      if (op->on_complete != nullptr) {
        op->on_complete(*op);  // start_transfer()'s: here, on the loop's thread
      } else {
        op->done.complete();  // resumes the coroutine through its executor (never inline)
      }
    }
  }
  if (pass != nullptr) pass->release_later(*executor_);
}

}  // namespace iserkit::target::detail

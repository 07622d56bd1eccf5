// The target's socket sends on its io_uring ring and the kernel probe (uring_socket.hpp).
#include "backend/uring_socket.hpp"

#include <sys/uio.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <system_error>

namespace iserkit::target::detail {
namespace {

// The default of --socket-io auto: whether the ring carries TCP sends (docs/performance.md, issue
// 23 item 3, "Socket sends on the ring").
constexpr bool auto_sends_on_ring = false;

SocketIoFeatures probe() {
  SocketIoFeatures f;
  io_uring ring;
  std::memset(&ring, 0, sizeof ring);
  io_uring_params params;
  std::memset(&params, 0, sizeof params);
  if (const int rc = io_uring_queue_init_params(4, &ring, &params); rc < 0) {
    f.error = std::generic_category().message(-rc);
    return f;
  }
  f.ring = true;
  f.fast_poll = (params.features & IORING_FEAT_FAST_POLL) != 0;
  if (io_uring_probe* p = io_uring_get_probe_ring(&ring)) {
    f.sendmsg = io_uring_opcode_supported(p, IORING_OP_SENDMSG) != 0;
    f.send = io_uring_opcode_supported(p, IORING_OP_SEND) != 0;
    f.send_zc = io_uring_opcode_supported(p, IORING_OP_SEND_ZC) != 0;
    // Multishot receive has no opcode of its own; it came with SEND_ZC's kernel (6.0).
    f.recv_multishot = f.send_zc;
    io_uring_free_probe(p);
  }
  // A provided buffer ring of one page: registered and dropped again (EINVAL before 5.19).
  void* mem = nullptr;
  if (posix_memalign(&mem, 4096, 4096) == 0) {
    std::memset(mem, 0, 4096);
    io_uring_buf_reg reg;
    std::memset(&reg, 0, sizeof reg);
    reg.ring_addr = reinterpret_cast<std::uintptr_t>(mem);
    reg.ring_entries = 1;
    reg.bgid = 0;
    if (io_uring_register_buf_ring(&ring, &reg, 0) == 0) {
      f.buf_ring = true;
      io_uring_unregister_buf_ring(&ring, 0);
    }
    std::free(mem);
  }
  io_uring_queue_exit(&ring);
  return f;
}

}  // namespace

const SocketIoFeatures& socket_io_features() {
  static const SocketIoFeatures features = probe();
  return features;
}

bool socket_sends_on_ring(SocketIo mode, const SocketIoFeatures& features) noexcept {
  const bool possible = features.ring && features.sendmsg && features.send;
  switch (mode) {
    case SocketIo::epoll: return false;
    case SocketIo::uring: return possible;
    case SocketIo::automatic: break;
  }
  return possible && auto_sends_on_ring;
}

std::string_view selected_socket_io(SocketIo mode) {
  return socket_sends_on_ring(mode, socket_io_features()) ? "uring" : "epoll";
}

Result<std::unique_ptr<UringSocketSender>> UringSocketSender::create(const asio::any_io_executor& executor,
                                                                      Policy policy) {
  auto service = UringService::of(executor);
  if (!service) return fail(service.error());
  return std::unique_ptr<UringSocketSender>(new UringSocketSender(**service, policy));
}

UringSocketSender::UringSocketSender(UringService& service, Policy policy)
    : service_(&service), policy_(policy), op_(new Op) {
  op_->on_complete = &UringSocketSender::on_complete;
}

UringSocketSender::~UringSocketSender() {
  // After the io_context's shutdown no CQE is reaped any more (the ring goes with the service).
  if (!op_->in_flight || !service_->running()) {
    delete op_;
    return;
  }
  // The CQE still comes (with what was sent, or -ECANCELED): it frees the op then. Its buffers'
  // owner is going away, so the send is cancelled.
  op_->orphaned = true;
  op_->done = nullptr;
  op_->result = nullptr;
  cancel();
}

bool UringSocketSender::start(int fd, const iovec* iov, std::size_t count, Completion& done, int& result) {
  if (op_->in_flight || count == 0 || count > IOV_MAX || !service_->running()) return false;
  if (policy_ == Policy::join_pending && !service_->submit_pending()) return false;
  io_uring_sqe* sqe = service_->get_sqe();
  if (sqe == nullptr) return false;
  Op& op = *op_;
  op.iov.assign(iov, iov + count);
  op.done = &done;
  op.result = &result;
  op.res = 0;
  if (count == 1) {
    io_uring_prep_send(sqe, fd, op.iov[0].iov_base, op.iov[0].iov_len, MSG_NOSIGNAL);
  } else {
    std::memset(&op.msg, 0, sizeof op.msg);
    op.msg.msg_iov = op.iov.data();
    op.msg.msg_iovlen = op.iov.size();
    io_uring_prep_sendmsg(sqe, fd, &op.msg, MSG_NOSIGNAL);
  }
  op.in_flight = true;
  ++started_;
  service_->queued_now(op, sqe);
  return true;
}

void UringSocketSender::cancel() noexcept {
  if (op_->in_flight && service_->running()) service_->cancel(*op_);
}

void UringSocketSender::on_complete(UringOp& base) noexcept {
  auto& op = static_cast<Op&>(base);
  op.in_flight = false;
  if (op.orphaned) {
    delete &op;
    return;
  }
  *op.result = op.res;
  op.done->complete();  // resumes the datamover's finish_send() through its executor
}

}  // namespace iserkit::target::detail

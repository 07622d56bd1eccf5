// IserDatamover: iSCSI over RDMA (RFC 7145) with librdmacm/libibverbs, driven by the Asio loop.
// RFC 7145 §5 (connection setup; iSER-assisted login over SENDs), §7.2 (control-type PDUs as
// SENDs with the iSER header), §7.3 (data transfer: Put_Data = RDMA Write into the Read STag,
// Get_Data = RDMA Read from the Write STag), §8 (receive buffers), §9.2 (header).
//
// NOTES ON THE THREAD MODEL: one IserConnection per RDMA connection, used from one executor
// (single-threaded). Its CM event channel fd and CQ completion channel fd are non-blocking and
// watched with posix::stream_descriptor::async_wait; the poll loop turns work completions into
// Completion wake-ups. Coroutines waiting on a Completion (send, put/get data, receive) hold
// pointers into their own frames; every posted work request produces exactly one completion
// (all are signaled), including the flush after a disconnect, so no waiter is left behind.
//
// This file: helpers, connection setup, CM events and completions. The control-type PDU path
// (SENDs, credits, control receive): iser_control.cpp; Put_Data / Get_Data: iser_data.cpp.
#include "iserkit/datamover/iser_datamover.hpp"

#include "iserkit/common/errors.hpp"

#ifdef ISERKIT_WITH_ISER

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <deque>
#include <string_view>
#include <unordered_set>

#include "iser_connection.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/common/netns.hpp"
#include "iserkit/iser/header.hpp"

namespace iserkit::datamover {
namespace rdma {

namespace {

// How long a connection the peer disconnected keeps its QP up for the peer's last SENDs.
constexpr std::chrono::milliseconds disconnect_grace{250};

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

}  // namespace

namespace {
std::atomic<std::uint64_t> post_send_calls{0};
std::atomic<std::uint64_t> posted_work_requests{0};
std::atomic<std::uint64_t> scsi_commands{0};
}  // namespace

void count_post_send(std::size_t work_requests) noexcept {
  post_send_calls.fetch_add(1, std::memory_order_relaxed);
  posted_work_requests.fetch_add(work_requests, std::memory_order_relaxed);
}

void count_scsi_command() noexcept { scsi_commands.fetch_add(1, std::memory_order_relaxed); }

std::error_code errno_error(int e) { return {e, std::generic_category()}; }

std::string format_address(const sockaddr* sa) {
  if (sa == nullptr) return "?";
  char text[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    return std::string(text) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in->sin6_addr, text, sizeof text);
    return "[" + std::string(text) + "]:" + std::to_string(ntohs(in->sin6_port));
  }
  return "?";
}

bool set_nonblocking(int fd) noexcept {
  const int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

const char* event_name(rdma_cm_event_type t) noexcept { return rdma_event_str(t); }

bool port_active(rdma_cm_id* id) noexcept {
  if (id == nullptr || id->verbs == nullptr || id->port_num == 0) return true;
  ibv_port_attr attr{};
  if (ibv_query_port(id->verbs, id->port_num, &attr) != 0) return true;
  return attr.state == IBV_PORT_ACTIVE;
}

namespace {
struct ParkedId {
  EventChannel channel;  // declared first: destroyed after the id
  CmId id;
};
std::mutex parked_mutex;
std::vector<ParkedId> parked_ids;
}  // namespace

void park_cm_id(CmId id, EventChannel channel) noexcept {
  try {
    const std::lock_guard lock(parked_mutex);
    parked_ids.push_back({std::move(channel), std::move(id)});
  } catch (...) {
    // No memory for the list: destroy it now (and send the DREQ after all).
  }
}

void reap_parked_ids() noexcept {
  std::vector<ParkedId> ready;
  {
    const std::lock_guard lock(parked_mutex);
    for (auto it = parked_ids.begin(); it != parked_ids.end();) {
      if (port_active(it->id.get())) {
        ready.push_back(std::move(*it));
        it = parked_ids.erase(it);
      } else {
        ++it;
      }
    }
  }
  if (!ready.empty())
    log::debug("iser: {} connection(s) closed while their port was down: disconnected now", ready.size());
}

void release_gone_devices() noexcept {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return;  // cannot tell which devices are there: release nothing
  std::vector<ibv_device*> present;
  try {
    present.assign(list, list + n);
  } catch (...) {
    ibv_free_device_list(list);
    return;
  }
  ibv_free_device_list(list);  // the ibv_device objects outlive the list; only pointers are compared
  bool changed = retire_gone_devices(present);
  // Parked ids on a device that is gone will never see their port come back: destroy them now
  // (their DREQ cannot go anywhere, and they hold the device open).
  std::vector<ParkedId> dead;
  {
    const std::lock_guard lock(parked_mutex);
    for (auto it = parked_ids.begin(); it != parked_ids.end();) {
      ibv_context* verbs = it->id->verbs;
      if (verbs != nullptr && std::find(present.begin(), present.end(), verbs->device) == present.end()) {
        try {
          dead.push_back(std::move(*it));
        } catch (...) {
          ++it;
          continue;
        }
        it = parked_ids.erase(it);
      } else {
        ++it;
      }
    }
  }
  if (!dead.empty()) {
    log::info("iser: {} parked connection(s) on a removed device destroyed", dead.size());
    dead.clear();
    changed = true;
  }
  reap_parked_ids();  // and those whose port is up again
  if (changed) {
    // (changed: something was released now, or a released device may still be open in librdmacm.)
    // librdmacm notices a removed device only when it re-reads the device list; then it closes its
    // context once its last cm_id there is gone (rdma-core librdmacm/cma.c sync_devices_list).
    // Until that close the kernel's device removal waits (ib_uverbs without disassociate support).
    if (ibv_context** contexts = rdma_get_devices(nullptr); contexts != nullptr) rdma_free_devices(contexts);
  }
}

// ---------------------------------------------------------------------------------------------
// IserConnection: setup
// ---------------------------------------------------------------------------------------------

IserConnection::IserConnection(asio::any_io_executor ex, bool initiator, IserOptions options)
    : ex_(std::move(ex)), initiator_(initiator), options_(options) {
  options_.recv_data_segment_length = std::max<std::uint32_t>(options_.recv_data_segment_length, 8192);
  max_recv_ = 8192;  // RFC 7143 §13.12: the login phase limit until set_max_recv_data_segment_length()
}

IserConnection::~IserConnection() {
  if (cm_fd_) cm_fd_->release();
  if (comp_fd_) comp_fd_->release();
  // Windows before the QP their type 2 binding refers to (deallocating a bound window unbinds it).
  for (ibv_mw* mw : windows_) ibv_dealloc_mw(mw);
  windows_.clear();
  if (id_ && id_->qp != nullptr) rdma_destroy_qp(id_.get());
  cq_.reset();
  comp_.reset();
  recv_region_ = {};
  send_region_ = {};
  // On a device that is gone, free its protection domain while this id still keeps librdmacm's
  // device context open (the last id's destruction may close it).
  if (id_ && device_ != nullptr && device_gone(device_)) {
    disconnect_skipped_ = false;  // no DREQ can go out on a removed device: never park
    release_gone_devices();
  }
  // rdma_destroy_id() of a connected id sends the DREQ that abort_connection() held back: not
  // while the port is still down (see port_active()).
  if (id_ && disconnect_skipped_ && !port_active(id_.get())) park_cm_id(std::move(id_), std::move(channel_));
  id_.reset();
  channel_.reset();
}

std::error_code IserConnection::open_channel() {
  channel_.reset(rdma_create_event_channel());
  if (!channel_) return errno_error(errno);
  if (!set_nonblocking(channel_->fd)) return errno_error(errno);
  cm_fd_.emplace(ex_, channel_->fd);
  return {};
}

std::error_code IserConnection::create_resources() {
  rdma_cm_id* id = id_.get();
  device_ = device_for(id->verbs);
  if (device_ == nullptr) return errno_error(ENODEV);
  comp_.reset(ibv_create_comp_channel(id->verbs));
  if (!comp_ || !set_nonblocking(comp_->fd)) return errno_error(errno ? errno : ENOMEM);
  const auto max_wr = static_cast<std::uint32_t>(std::max(device_->attr.max_qp_wr, 16));
  options_.receive_depth = std::clamp<std::uint32_t>(options_.receive_depth, 8, max_wr);
  options_.send_depth = std::clamp<std::uint32_t>(options_.send_depth, 8, max_wr);
  // Per-command STags (initiator): one window per command that may hold one — in flight, queued
  // for the window, or given up and not yet invalidated — each with at most two work requests
  // outstanding (its Bind MW and its Local Invalidate), on send-queue entries of their own.
  if (initiator_ && options_.stags != IserStags::whole_slab) {
    if (device_->window_pool) {
      const auto want = std::min({2 * options_.receive_depth + 16, static_cast<std::uint32_t>(device_->attr.max_mw),
                                  (max_wr - std::min(max_wr, options_.send_depth)) / 2});
      std::vector<std::uint32_t> rkeys;
      for (std::uint32_t i = 0; i < want; ++i) {
        ibv_mw* mw = ibv_alloc_mw(device_->pd, IBV_MW_TYPE_2);
        if (mw == nullptr) break;
        windows_.push_back(mw);
        rkeys.push_back(mw->rkey);
      }
      if (windows_.size() >= 8) {
        stags_.emplace(std::move(rkeys));
        window_wrs_ = 2 * static_cast<std::uint32_t>(windows_.size());
      } else {
        for (ibv_mw* mw : windows_) ibv_dealloc_mw(mw);
        windows_.clear();
      }
    }
    if (!stags_) {
      if (options_.stags == IserStags::per_command) {
        log::warn("iser: per-command STags asked for, but the device cannot bind type 2 memory windows");
        return make_error_code(errc::not_supported);
      }
      log::info("iser: the device cannot bind type 2 memory windows: the whole registered slab is exposed");
    }
  }
  const int cqe = static_cast<int>(options_.receive_depth + options_.send_depth + window_wrs_);
  cq_.reset(ibv_create_cq(id->verbs, cqe, nullptr, comp_.get(), 0));
  if (!cq_) return errno_error(errno ? errno : ENOMEM);
  ibv_qp_init_attr attr{};
  attr.send_cq = cq_.get();
  attr.recv_cq = cq_.get();
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_wr = options_.send_depth + window_wrs_;
  attr.cap.max_recv_wr = options_.receive_depth;
  attr.cap.max_send_sge = 2;
  attr.cap.max_recv_sge = 1;
  attr.sq_sig_all = 1;  // every work request completes visibly: waiters never get stuck
  if (rdma_create_qp(id, device_->pd, &attr) != 0) return errno_error(errno);
  // Receive descriptors: iSER header + BHS + AHS room + the declared receive data segment length.
  recv_slot_size_ = round_up(iser::headers_size + ahs_room + options_.recv_data_segment_length, 64);
  recv_region_ = RegisteredRegion(device_->pd, recv_slot_size_ * options_.receive_depth, IBV_ACCESS_LOCAL_WRITE);
  // Send descriptors: headers + AHS + room for control data (text, sense, ping data; 8192 bytes is
  // the login limit). Larger or registered data goes as a second SGE.
  send_slot_size_ = round_up(iser::headers_size + ahs_room + 8192, 64);
  send_region_ = RegisteredRegion(device_->pd, send_slot_size_ * options_.send_depth, 0);
  if (!recv_region_ || !send_region_) return errno_error(ENOMEM);
  free_send_slots_.clear();
  for (std::uint32_t i = options_.send_depth; i > 0; --i) free_send_slots_.push_back(i - 1);
  for (std::uint32_t i = 0; i < options_.receive_depth; ++i)
    if (auto ec = post_receive(i)) return ec;
  return {};
}

std::error_code IserConnection::post_receive(std::uint32_t slot) noexcept {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<std::uintptr_t>(recv_region_.data() + std::size_t{slot} * recv_slot_size_);
  sge.length = static_cast<std::uint32_t>(recv_slot_size_);
  sge.lkey = recv_region_.lkey();
  ibv_recv_wr wr{};
  wr.wr_id = (std::uint64_t{slot} << 1) | 1u;  // odd: a receive; even: an Op*
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (const int rc = ibv_post_recv(id_->qp, &wr, &bad); rc != 0) return errno_error(rc);
  return {};
}

void IserConnection::start(std::shared_ptr<IserConnection> self) {
  comp_fd_.emplace(ex_, comp_->fd);
  asio::co_spawn(ex_, poll_loop(self), asio::detached);
  asio::co_spawn(ex_, cm_loop(std::move(self)), asio::detached);
}

void IserConnection::describe() {
  peer_ = format_address(rdma_get_peer_addr(id_.get()));
  local_ = format_address(rdma_get_local_addr(id_.get()));
}

BufferPool& IserConnection::pool() const noexcept {
  if (!initiator_) return *device_->local_pool;
  return stags_ ? *device_->window_pool : *device_->remote_pool;
}

std::optional<Buffer> IserConnection::lookup(ConstByteSpan bytes) const noexcept {
  if (device_->window_pool)
    if (auto b = device_->window_pool->registration(bytes)) return b;
  if (auto b = device_->remote_pool->registration(bytes)) return b;
  return device_->local_pool->registration(bytes);
}

// ---------------------------------------------------------------------------------------------
// CM events
// ---------------------------------------------------------------------------------------------

Awaitable<Result<CmEvent>> IserConnection::next_cm_event(std::chrono::steady_clock::time_point deadline) {
  while (true) {
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(channel_.get(), &ev) == 0) {
      CmEvent out;
      out.type = ev->event;
      out.status = ev->status;
      out.id = ev->id;
      if (ev->param.conn.private_data != nullptr && ev->param.conn.private_data_len > 0) {
        const auto* p = static_cast<const std::byte*>(ev->param.conn.private_data);
        out.private_data.assign(p, p + ev->param.conn.private_data_len);
      }
      out.responder_resources = ev->param.conn.responder_resources;
      out.initiator_depth = ev->param.conn.initiator_depth;
      rdma_ack_cm_event(ev);
      co_return out;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) co_return fail(errno_error(errno));
    struct TimerState {
      bool fired = false;
    };
    auto state = std::make_shared<TimerState>();
    asio::steady_timer timer(ex_);
    timer.expires_at(deadline);
    auto* fd = &*cm_fd_;
    timer.async_wait([state, fd](const boost::system::error_code& e) {
      if (e) return;
      state->fired = true;
      boost::system::error_code ignored;
      fd->cancel(ignored);
    });
    boost::system::error_code ec;
    co_await cm_fd_->async_wait(asio::posix::stream_descriptor::wait_read, use_awaitable_ec(ec));
    timer.cancel();
    if (state->fired) co_return fail(errc::timeout);
    if (ec || stopped_) co_return fail(errc::connection_closed);
  }
}

Awaitable<void> IserConnection::cm_loop(std::shared_ptr<IserConnection> self) {
  while (!stopped_) {
    auto ev = co_await next_cm_event(std::chrono::steady_clock::time_point::max());
    if (!ev) break;
    switch (ev->type) {
      case RDMA_CM_EVENT_ESTABLISHED:
        established_ = true;
        log::debug("iser {}: established", peer_);
        break;
      case RDMA_CM_EVENT_DISCONNECTED: {
        log::debug("iser {}: disconnected by peer", peer_);
        // The peer's last SENDs (LIO sends a Logout Response and disconnects at once) travel on
        // the RC QP while its Disconnect Request takes the CM's path, and may arrive after it:
        // the QP stays up for a short grace while the poll loop takes what still arrives, so
        // that response is received, not flushed (the lab saw both orders).
        drain();
        if (!failed_ && !stopped_) {
          asio::steady_timer grace(ex_);
          grace.expires_after(disconnect_grace);
          boost::system::error_code ignored;
          co_await grace.async_wait(use_awaitable_ec(ignored));
          drain();
        }
        abort_connection(make_error_code(errc::connection_closed));
        break;
      }
      case RDMA_CM_EVENT_DEVICE_REMOVAL:
        log::warn("iser {}: RDMA device removed: closing and releasing its verbs objects", peer_);
        release_device();
        break;
      case RDMA_CM_EVENT_TIMEWAIT_EXIT:
        break;
      default:
        log::debug("iser {}: cm event {} status={}", peer_, event_name(ev->type), ev->status);
        if (ev->type == RDMA_CM_EVENT_CONNECT_ERROR || ev->type == RDMA_CM_EVENT_UNREACHABLE ||
            ev->type == RDMA_CM_EVENT_REJECTED)
          abort_connection(make_error_code(errc::connection_closed));
        break;
    }
  }
  (void)self;
}

// ---------------------------------------------------------------------------------------------
// Completions
// ---------------------------------------------------------------------------------------------

Awaitable<void> IserConnection::poll_loop(std::shared_ptr<IserConnection> self) {
  ibv_req_notify_cq(cq_.get(), 0);
  drain();
  while (!stopped_ && !released_) {
    boost::system::error_code ec;
    co_await comp_fd_->async_wait(asio::posix::stream_descriptor::wait_read, use_awaitable_ec(ec));
    if (ec || stopped_ || released_) break;
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    while (ibv_get_cq_event(comp_.get(), &cq, &context) == 0) ibv_ack_cq_events(cq, 1);
    // Re-arm before draining so a completion arriving in between still raises an event.
    ibv_req_notify_cq(cq_.get(), 0);
    drain();
  }
  (void)self;
}

void IserConnection::drain() {
  if (!cq_) return;
  std::array<ibv_wc, 32> wc{};
  int n = 0;
  while ((n = ibv_poll_cq(cq_.get(), static_cast<int>(wc.size()), wc.data())) > 0)
    for (int i = 0; i < n; ++i) on_completion(wc[static_cast<std::size_t>(i)]);
}

void IserConnection::on_completion(const ibv_wc& wc) {
  if ((wc.wr_id & 1u) != 0) {
    const auto slot = static_cast<std::uint32_t>(wc.wr_id >> 1);
    if (wc.status != IBV_WC_SUCCESS) {
      if (wc.status != IBV_WC_WR_FLUSH_ERR)
        log::info("iser {}: receive failed: {}", peer_, ibv_wc_status_str(wc.status));
      abort_connection(make_error_code(errc::connection_closed), wc.status != IBV_WC_WR_FLUSH_ERR);
      return;
    }
    // Debian 12's 6.1 rxe reports a Send with Invalidate with the kernel's IB_WC_WITH_INVALIDATE
    // bit (0x4, which libibverbs calls IBV_WC_IP_CSUM_OK, meaningless on an RC QP) instead of
    // IBV_WC_WITH_INV (docs/iser.md). Both are honoured when they name one of our bound windows:
    // that window is FREE now, and a Local Invalidate of it would panic that kernel, so a target
    // that invalidates without having been offered Send with Invalidate is caught here.
    constexpr unsigned rxe_with_invalidate = 0x4;
    const bool invalidated =
        (wc.wc_flags & IBV_WC_WITH_INV) != 0 ||
        (stags_ && (wc.wc_flags & rxe_with_invalidate) != 0 && stags_->find(wc.invalidated_rkey).has_value());
    if (invalidated) {
      // Send with Invalidate (RFC 7145 §5.1): the target ended a command's STag. Only one of our
      // bound windows may be named; anything else breaks what the CM private data agreed.
      const bool ours = stags_ && stags_->remote_invalidated(wc.invalidated_rkey);
      if (!send_with_invalidate_ || !ours) {
        log::warn("iser {}: peer invalidated STag 0x{:08x}: {}", peer_, wc.invalidated_rkey,
                  ours ? "Send with Invalidate was not agreed" : "not a bound window of ours");
        abort_connection(make_error_code(errc::protocol_error));
        return;
      }
      ++remote_invalidations_;
    }
    ready_.push_back({slot, wc.byte_len});
    wake(receive_waiter_);
    return;
  }
  if ((wc.wr_id & 6u) != 0) {
    on_window_completion(wc);
    return;
  }
  auto* op = reinterpret_cast<Op*>(static_cast<std::uintptr_t>(wc.wr_id));
  if (sq_in_use_ > 0) --sq_in_use_;
  wake_one(sq_waiters_);
  if (wc.status != IBV_WC_SUCCESS) {
    if (wc.status != IBV_WC_WR_FLUSH_ERR)
      log::info("iser {}: work request failed: {} (opcode {})", peer_, ibv_wc_status_str(wc.status),
                static_cast<int>(wc.opcode));
    if (!op->ec) op->ec = make_error_code(errc::connection_closed);
    abort_connection(make_error_code(errc::connection_closed), wc.status != IBV_WC_WR_FLUSH_ERR);
  }
  if (--op->remaining == 0) {
    pending_.erase(op);
    op->done.complete(op->ec);
  }
}

void IserConnection::wake(Completion*& waiter) noexcept {
  if (waiter != nullptr) std::exchange(waiter, nullptr)->complete();
}

void IserConnection::wake_one(std::deque<Completion*>& waiters) noexcept {
  if (!waiters.empty()) {
    Completion* c = waiters.front();
    waiters.pop_front();
    c->complete();
  }
}

void IserConnection::abort_connection(std::error_code ec, bool hold_dreq) noexcept {
  if (failed_) return;
  failed_ = true;
  error_ = ec;
  invalidates_.drop();  // queued Local Invalidates are not posted on a QP in the error state
  // The QP goes to the error state: every posted receive, send and RDMA operation is flushed and
  // completes with IBV_WC_WR_FLUSH_ERR, waking its waiter. rdma_disconnect() does that and sends
  // a DREQ; while the port is down (or may be going down: hold_dreq) only the QP is moved (a MAD
  // sent then can wedge the device's CM, see port_active()), and the DREQ goes when the id is
  // destroyed with the port up (the destructor parks it until then).
  if (id_) {
    if (!hold_dreq && port_active(id_.get())) {
      rdma_disconnect(id_.get());
    } else {
      disconnect_skipped_ = true;
      log::info("iser {}: {}: connection closed, its Disconnect Request held back", peer_,
                hold_dreq ? "a work request failed (the link may be going down)" : "the port is down");
      if (id_->qp != nullptr) {
        ibv_qp_attr attr{};
        attr.qp_state = IBV_QPS_ERR;
        ibv_modify_qp(id_->qp, &attr, IBV_QP_STATE);
      }
    }
  }
  wake(receive_waiter_);
  for (auto* list : {&sq_waiters_, &slot_waiters_, &credit_waiters_, &gate_waiters_, &window_waiters_}) {
    auto waiters = std::move(*list);
    list->clear();
    for (Completion* c : waiters) c->complete();
  }
}

void IserConnection::release_device() noexcept {
  if (released_ || !id_) return;
  // Only the QP goes to the error state: no DREQ (the device is going; the kernel already tears
  // down its side of the cm_id).
  abort_connection(make_error_code(errc::connection_closed), true);
  disconnect_skipped_ = false;
  released_ = true;
  // The CQ is destroyed below, so no flush completion will come: finish every pending work
  // request now (their waiters resume later, on this executor, with connection_closed).
  auto pending = std::move(pending_);
  pending_.clear();
  for (Op* op : pending) op->done.complete(error_);
  if (comp_fd_) {
    boost::system::error_code ignored;
    comp_fd_->cancel(ignored);
    comp_fd_->release();
    comp_fd_.reset();
  }
  mark_device_removed(id_->verbs);
  // Memory windows hold the PD (and a type 2 binding the QP): freed first, like in the destructor.
  // The STag table stays, so leases still held are given back without posting anything (failed_).
  for (ibv_mw* mw : windows_) ibv_dealloc_mw(mw);
  windows_.clear();
  if (id_->qp != nullptr) rdma_destroy_qp(id_.get());
  cq_.reset();
  comp_.reset();
  // The descriptors' memory stays (a PduIn handed out may still point into a receive slot).
  recv_region_.deregister();
  send_region_.deregister();
  // Frees the device's PD once this was its last QP, while this id still holds librdmacm's
  // device context open; then the id goes (librdmacm may close the context with it).
  release_gone_devices();
  id_.reset();
  log::info("iser {}: released every verbs object on the removed device", peer_);
}

void IserConnection::shutdown() noexcept {
  abort_connection(make_error_code(errc::connection_closed));
  if (stopped_) return;
  stopped_ = true;
  // Nobody will poll any more: finish what is still pending so no coroutine waits forever.
  auto pending = std::move(pending_);
  pending_.clear();
  for (Op* op : pending) op->done.complete(make_error_code(errc::connection_closed));
  boost::system::error_code ignored;
  if (cm_fd_) cm_fd_->cancel(ignored);
  if (comp_fd_) comp_fd_->cancel(ignored);
}

}  // namespace rdma

IserPostCounts iser_post_counts() noexcept {
  return {.post_send_calls = rdma::post_send_calls.load(std::memory_order_relaxed),
          .work_requests = rdma::posted_work_requests.load(std::memory_order_relaxed),
          .scsi_commands = rdma::scsi_commands.load(std::memory_order_relaxed)};
}

bool iser_chain_enabled() noexcept {
  static const bool enabled = [] {
    const char* v = std::getenv("ISERKIT_ISER_CHAIN");
    return v == nullptr || std::string_view(v) != "off";
  }();
  return enabled;
}

}  // namespace iserkit::datamover

#endif  // ISERKIT_WITH_ISER

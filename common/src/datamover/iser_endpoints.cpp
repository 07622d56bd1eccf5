// iSER (RFC 7145) endpoints: the Datamover face of an IserConnection, iser_connect() (RDMA CM
// address and route resolution, connect with the iSER private data, RFC 7145 §5.1) and
// IserListener (listen and accept). The connection itself — its queue pair, buffers, STags and
// completions — is rdma::IserConnection (iser_datamover.cpp, iser_connection.hpp). Without
// rdma-core at build time every entry point answers errc::not_supported.
#include "iserkit/datamover/iser_datamover.hpp"

#include "iserkit/common/errors.hpp"

#ifndef ISERKIT_WITH_ISER

namespace iserkit::datamover {

struct IserListener::Impl {};
bool iser_built() noexcept { return false; }
IserPostCounts iser_post_counts() noexcept { return {}; }
bool iser_chain_enabled() noexcept { return false; }
bool rdma_device_present() noexcept { return false; }
Awaitable<Result<std::unique_ptr<Datamover>>> iser_connect(asio::any_io_executor, std::string, std::uint16_t,
                                                           IserOptions) {
  co_return fail(errc::not_supported);
}
Result<std::unique_ptr<IserListener>> IserListener::listen(asio::any_io_executor, const std::string&, std::uint16_t,
                                                           IserOptions) {
  return fail(errc::not_supported);
}
IserListener::IserListener(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
IserListener::~IserListener() = default;
Awaitable<Result<std::unique_ptr<Datamover>>> IserListener::accept(asio::any_io_executor) {
  co_return fail(errc::not_supported);
}
void IserListener::close() noexcept {}
std::uint16_t IserListener::port() const noexcept { return 0; }

}  // namespace iserkit::datamover

#else  // ISERKIT_WITH_ISER

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "iser_connection.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/common/netns.hpp"

namespace iserkit::datamover {

// ---------------------------------------------------------------------------------------------
// The Datamover face, connect and listen
// ---------------------------------------------------------------------------------------------

namespace {

using rdma::IserConnection;

/// One step of iser_connect() for the log: its name ("route to", "connect"), the peer and when the
/// connect started.
struct ConnectStep {
  const char* name;
  const std::string& host;
  std::uint16_t port;
  std::chrono::steady_clock::time_point start;
  [[nodiscard]] long long elapsed_ms() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  }
};

/// The CM event that ends `step` (rdma_resolve_route, rdma_connect), waited for until `deadline`
/// and logged; an event other than `wanted` fails with `otherwise` (logged at info with its
/// status). Errors: next_cm_event()'s (errc::timeout at the deadline), or `otherwise`.
Awaitable<Result<rdma::CmEvent>> step_event(IserConnection& c, std::chrono::steady_clock::time_point deadline,
                                            ConnectStep step, rdma_cm_event_type wanted, std::error_code otherwise) {
  auto ev = co_await c.next_cm_event(deadline);
  if (!ev) {
    log::debug("iser: {} {}:{}: no answer after {} ms ({})", step.name, step.host, step.port, step.elapsed_ms(),
               ev.error().message());
    co_return fail(ev.error());
  }
  log::debug("iser: {} {}:{}: {} after {} ms", step.name, step.host, step.port, rdma::event_name(ev->type),
             step.elapsed_ms());
  if (ev->type != wanted) {
    log::info("iser: {} {}:{}: {} status={}", step.name, step.host, step.port, rdma::event_name(ev->type), ev->status);
    co_return fail(otherwise);
  }
  co_return ev;
}

class IserDatamover final : public Datamover {
 public:
  explicit IserDatamover(std::shared_ptr<IserConnection> c) : c_(std::move(c)) {}
  ~IserDatamover() override {
    c_->end_burst();  // the send pass must not stay held by a connection that is gone
    c_->shutdown();
  }
  Awaitable<std::error_code> send(PduOut pdu) override { return c_->send(std::move(pdu)); }
  Awaitable<std::error_code> send_batch(std::vector<PduOut> pdus) override {
    std::vector<ChainStep> steps;
    steps.reserve(pdus.size());
    for (auto& pdu : pdus) steps.emplace_back(std::move(pdu));
    return c_->send_chain(std::move(steps));
  }
  Awaitable<std::error_code> send_chain(std::vector<ChainStep> steps) override {
    return c_->send_chain(std::move(steps));
  }
  Awaitable<Result<PduIn>> receive(DataPlacement* placement) override { return c_->receive(placement); }
  void set_send_pass(SendPass* pass) noexcept override { c_->set_send_pass(pass); }
  void end_burst() override { c_->end_burst(); }
  void set_digests(bool, bool) noexcept override {}  // RFC 7145 §6.1: no digests on iSER
  void set_max_recv_data_segment_length(std::uint32_t bytes) noexcept override { c_->set_max_recv(bytes); }
  void close() noexcept override { c_->abort_connection(make_error_code(errc::connection_closed)); }
  [[nodiscard]] std::string peer() const override { return c_->peer(); }
  [[nodiscard]] std::string local() const override { return c_->local(); }
  [[nodiscard]] Transport transport() const noexcept override { return Transport::iser; }
  [[nodiscard]] asio::any_io_executor executor() const override { return c_->executor(); }
  [[nodiscard]] Capabilities capabilities() const noexcept override {
    return {.rdma_data = true,
            .digests = false,
            .max_transfer_bytes = c_->options().max_transfer_bytes,
            .unstated_max_transfer_bytes = c_->options().unstated_max_transfer_bytes,
            // Slab STags stay valid for the connection's life; per-command ones end with the command.
            .exposes_task_buffers = !c_->per_command_stags()};
  }
  [[nodiscard]] BufferPool& buffer_pool() noexcept override { return c_->pool(); }
  // RFC 7145 §9.2: the command's buffers must be registered memory the target can RDMA to/from.
  Result<TaskData> prepare_task_data(std::span<std::byte> data_in, std::span<const std::byte> data_out) override {
    // Per-command STags are bound when the SCSI Command is sent (IserConnection::bind_stags()), so
    // a command waiting for the CmdSN window holds none.
    return TaskData::registered(c_->pool(), data_in, data_out);
  }
  Awaitable<std::error_code> put_data(PeerBuffer dest, std::uint64_t offset, Buffer source) override {
    return c_->rdma(true, dest, offset, source);
  }
  Awaitable<std::error_code> get_data(PeerBuffer source, std::uint64_t offset, Buffer dest) override {
    return c_->rdma(false, source, offset, dest);
  }
  void set_unexpected_pdu_limit(std::uint32_t pdus) noexcept override { c_->set_unexpected_limit(pdus); }

 private:
  std::shared_ptr<IserConnection> c_;
};

struct AddrInfoDeleter {
  void operator()(addrinfo* a) const noexcept { freeaddrinfo(a); }
};

Result<std::unique_ptr<addrinfo, AddrInfoDeleter>> resolve(const std::string& host, std::uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* out = nullptr;
  const std::string service = std::to_string(port);
  const char* node = (host.empty() || host == "*") ? nullptr : host.c_str();
  if (const int rc = getaddrinfo(node, service.c_str(), &hints, &out); rc != 0 || out == nullptr)
    return fail(std::make_error_code(std::errc::address_not_available));
  return std::unique_ptr<addrinfo, AddrInfoDeleter>(out);
}

int timeout_ms(std::chrono::milliseconds t) { return static_cast<int>(std::clamp<std::int64_t>(t.count(), 100, 60000)); }

// The kernel's timer for one address resolution (rdma_resolve_addr). Linux's ib_addr re-checks a
// pending resolution only when a neighbour update is announced (netevent) or when this timer
// expires; an ARP reply that arrives while rdma_resolve_ip() is still queueing the request (on a
// veth/VXLAN path inside one host the reply is processed within the ARP send itself) announces
// the update before anyone listens, and the request then waits for its timer although the
// neighbour is already known (docs/notes/lab-kernel-7.md, 2026-11-29: 10 s for every first iSER
// connect over a fresh tenant overlay on 7.3.4). A short timer bounds that wait; a neighbour still
// unknown when it expires is asked for again while the connect's own timeout lasts. 1 s is what
// the Linux iSER initiator gives rdma_resolve_addr.
constexpr std::chrono::milliseconds address_attempt{1000};

}  // namespace

bool iser_built() noexcept { return true; }

bool rdma_device_present() noexcept {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list != nullptr) ibv_free_device_list(list);
  return n > 0;
}

Awaitable<Result<std::unique_ptr<Datamover>>> iser_connect(asio::any_io_executor ex, std::string host,
                                                           std::uint16_t port, IserOptions options) {
  // A device that went away since the last attempt is let go of first (also when no device is
  // left), before librdmacm resolves the address to a device (it may then close a removed
  // device's context itself).
  rdma::release_gone_devices();
  if (!rdma_device_present()) co_return fail(std::make_error_code(std::errc::no_such_device));
  auto c = std::make_shared<IserConnection>(ex, true, options);
  if (auto ec = c->open_channel()) co_return fail(ec);
  rdma_cm_id* raw = nullptr;
  if (options.netns.empty()) {
    if (rdma_create_id(c->channel(), &raw, c.get(), RDMA_PS_TCP) != 0) co_return fail(rdma::errno_error(errno));
  } else {
    // rdma_create_id takes the calling thread's network namespace: create the id from a thread
    // inside `options.netns`; resolution and the connection then happen there.
    int create_errno = 0;
    auto entered = netns::run_in(options.netns, [&] {
      if (rdma_create_id(c->channel(), &raw, c.get(), RDMA_PS_TCP) != 0) create_errno = errno;
    });
    if (!entered) co_return fail(entered.error());
    if (create_errno != 0) co_return fail(rdma::errno_error(create_errno));
  }
  c->adopt_id(raw);
  auto addresses = resolve(host, port, false);
  if (!addresses) co_return fail(addresses.error());
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + options.timeout;
  const auto elapsed_ms = [start] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  };
  Result<rdma::CmEvent> ev = fail(errc::timeout);
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (rdma_resolve_addr(raw, nullptr, (*addresses)->ai_addr, timeout_ms(std::min(address_attempt, left))) != 0)
      co_return fail(rdma::errno_error(errno));
    ev = co_await c->next_cm_event(deadline);
    if (!ev) {
      log::debug("iser: resolve {}:{}: no answer after {} ms ({})", host, port, elapsed_ms(), ev.error().message());
      co_return fail(ev.error());
    }
    log::debug("iser: resolve {}:{}: {} status={} after {} ms", host, port, rdma::event_name(ev->type), ev->status,
               elapsed_ms());
    // The kernel's timer ran out with the neighbour still unknown (the id is back in ADDR_BOUND,
    // where it may resolve again): ask again while the connect's timeout lasts.
    const bool attempt_timed_out = ev->type == RDMA_CM_EVENT_ADDR_ERROR && ev->status == -ETIMEDOUT;
    if (!attempt_timed_out) break;
    if (std::chrono::steady_clock::now() >= deadline) co_return fail(errc::timeout);
  }
  if (ev->type != RDMA_CM_EVENT_ADDR_RESOLVED) {
    log::info("iser: resolve {}:{}: {} status={}", host, port, rdma::event_name(ev->type), ev->status);
    co_return fail(std::make_error_code(std::errc::no_such_device));
  }
  if (rdma_resolve_route(raw, timeout_ms(options.timeout)) != 0) co_return fail(rdma::errno_error(errno));
  ev = co_await step_event(*c, deadline, {"route to", host, port, start}, RDMA_CM_EVENT_ROUTE_RESOLVED,
                           std::make_error_code(std::errc::host_unreachable));
  if (!ev) co_return fail(ev.error());
  // No CM REQ over a port that is down (it can wedge the device's CM, see port_active()): this
  // attempt fails at once and the caller's backoff tries again.
  if (!rdma::port_active(raw)) {
    log::info("iser: connect {}:{}: port {} of {} is not active: not connecting", host, port,
              static_cast<int>(raw->port_num), raw->verbs != nullptr ? ibv_get_device_name(raw->verbs->device) : "?");
    co_return fail(std::make_error_code(std::errc::network_down));
  }
  rdma::reap_parked_ids();
  if (auto ec = c->create_resources()) co_return fail(ec);
  // RFC 7145 §5.1 / Linux "iSER CM REQ": ZBVA not supported; Send with Invalidate only with
  // per-command STags (a slab STag is shared by every command and must never be invalidated) and
  // when asked for (IserOptions::send_with_invalidate: see there why it is off by default).
  const iser::CmRequest request{
      .zbva_not_supported = true,
      .send_with_invalidate_not_supported = !(c->per_command_stags() && options.send_with_invalidate)};
  const auto req = iser::encode_cm_request(request);
  rdma_conn_param param{};
  param.private_data = req.data();
  param.private_data_len = static_cast<std::uint8_t>(req.size());
  param.responder_resources = static_cast<std::uint8_t>(std::min(c->device().attr.max_qp_rd_atom, 255));
  param.initiator_depth = 1;  // the initiator never issues RDMA Reads
  param.retry_count = 7;
  param.rnr_retry_count = 7;  // "infinite": a target that is slow to re-post a receive is waited for
  if (rdma_connect(raw, &param) != 0) co_return fail(rdma::errno_error(errno));
  ev = co_await step_event(*c, deadline, {"connect", host, port, start}, RDMA_CM_EVENT_ESTABLISHED,
                           make_error_code(errc::connection_closed));
  if (!ev) co_return fail(ev.error());
  c->set_established();
  const auto reply = iser::decode_cm_reply(ev->private_data);
  if (reply)
    log::debug("iser: CM REP: zbva_not_used={} send_with_invalidate_not_used={}", reply->zbva_not_used,
               reply->send_with_invalidate_not_used);
  c->set_send_with_invalidate(iser::send_with_invalidate_agreed(request, reply));
  c->describe();
  c->start(c);
  log::info("iser: connected to {} from {} (STags: {}, send with invalidate: {})", c->peer(), c->local(),
            c->per_command_stags() ? "per command" : "whole slab", c->send_with_invalidate());
  co_return std::unique_ptr<Datamover>(std::make_unique<IserDatamover>(std::move(c)));
}

struct IserListener::Impl {
  explicit Impl(asio::any_io_executor e) : ex(std::move(e)), retry(ex) {}
  asio::any_io_executor ex;
  IserOptions options;
  rdma::EventChannel channel;
  rdma::CmId id;  // null while the device under the address is gone (waiting to listen again)
  std::string host;
  std::uint16_t port = 0;  // the bound port
  std::optional<asio::posix::stream_descriptor> fd;
  asio::steady_timer retry;
  bool closed = false;
  ~Impl() {
    if (fd) fd->release();
    id.reset();
    channel.reset();
  }
  /// A new listening id on `host`:`port` on the same event channel. Errors: bind/listen errno
  /// (ENODEV or EADDRNOTAVAIL while no RDMA device serves the address).
  std::error_code bind_and_listen() {
    rdma_cm_id* raw = nullptr;
    if (rdma_create_id(channel.get(), &raw, nullptr, RDMA_PS_TCP) != 0) return rdma::errno_error(errno);
    rdma::CmId fresh(raw);
    auto addresses = resolve(host, port, true);
    if (!addresses) return addresses.error();
    if (rdma_bind_addr(raw, (*addresses)->ai_addr) != 0) return rdma::errno_error(errno);
    if (rdma_listen(raw, 64) != 0) return rdma::errno_error(errno);
    port = ntohs(rdma_get_src_port(raw));
    id = std::move(fresh);
    return {};
  }
};

IserListener::IserListener(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
IserListener::~IserListener() { close(); }

Result<std::unique_ptr<IserListener>> IserListener::listen(asio::any_io_executor ex, const std::string& host,
                                                           std::uint16_t port, IserOptions options) {
  if (!rdma_device_present()) return fail(std::make_error_code(std::errc::no_such_device));
  auto impl = std::make_shared<Impl>(ex);
  impl->options = options;
  impl->host = host;
  impl->port = port;
  impl->channel.reset(rdma_create_event_channel());
  if (!impl->channel || !rdma::set_nonblocking(impl->channel->fd)) return fail(rdma::errno_error(errno));
  if (auto ec = impl->bind_and_listen()) return fail(ec);
  impl->fd.emplace(ex, impl->channel->fd);
  return std::unique_ptr<IserListener>(new IserListener(std::move(impl)));
}

void IserListener::close() noexcept {
  if (!impl_ || impl_->closed) return;
  impl_->closed = true;
  boost::system::error_code ignored;
  if (impl_->fd) impl_->fd->cancel(ignored);
  impl_->retry.cancel();
}

std::uint16_t IserListener::port() const noexcept { return impl_->port; }

Awaitable<Result<std::unique_ptr<Datamover>>> IserListener::accept(asio::any_io_executor connection_executor) {
  auto impl = impl_;
  while (!impl->closed) {
    if (!impl->id) {
      // The device under the address went away: let go of it, and listen again once a device
      // serves the address (rdma_bind_addr fails until then).
      rdma::release_gone_devices();
      if (const auto ec = impl->bind_and_listen(); !ec) {
        log::info("iser portal: listening again on {}:{} (device {})", impl->host, impl->port,
                  impl->id->verbs != nullptr ? ibv_get_device_name(impl->id->verbs->device) : "?");
        continue;
      }
      boost::system::error_code ec;
      impl->retry.expires_after(impl->options.relisten_interval);
      co_await impl->retry.async_wait(use_awaitable_ec(ec));
      continue;
    }
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(impl->channel.get(), &ev) != 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) co_return fail(rdma::errno_error(errno));
      boost::system::error_code ec;
      co_await impl->fd->async_wait(asio::posix::stream_descriptor::wait_read, use_awaitable_ec(ec));
      if (ec || impl->closed) break;
      continue;
    }
    const auto type = ev->event;
    rdma_cm_id* id = ev->id;
    // Seen from the passive side (ib_cm swaps the REQ fields): initiator_depth is how many RDMA
    // Reads we may have outstanding (the initiator's responder resources), responder_resources how
    // many the initiator may send us (its initiator depth).
    const std::uint8_t our_read_depth = ev->param.conn.initiator_depth;
    const std::uint8_t their_read_depth = ev->param.conn.responder_resources;
    std::optional<iser::CmRequest> request;
    if (ev->param.conn.private_data != nullptr)
      request = iser::decode_cm_request(ConstByteSpan(static_cast<const std::byte*>(ev->param.conn.private_data),
                                                      ev->param.conn.private_data_len));
    rdma_ack_cm_event(ev);
    if (type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
      if (id == impl->id.get()) {
        log::warn("iser portal {}:{}: RDMA device removed: listening again when a device serves the address",
                  impl->host, impl->port);
        impl->id.reset();  // the kernel already dropped its side; this lets go of the device
        rdma::release_gone_devices();
      }
      continue;
    }
    if (type != RDMA_CM_EVENT_CONNECT_REQUEST) {
      log::debug("iser portal: cm event {}", rdma::event_name(type));
      continue;
    }
    rdma::reap_parked_ids();  // a request came in: the port is up again
    if (request && !request->zbva_not_supported)
      log::debug("iser portal: initiator offers ZBVA; iserkit uses virtual addresses (ZBVA not used)");
    // The connection gets its own event channel, watched by its own executor.
    auto c = std::make_shared<IserConnection>(connection_executor, false, impl->options);
    std::error_code ec = c->open_channel();
    if (!ec && rdma_migrate_id(id, c->channel()) != 0) ec = rdma::errno_error(errno);
    if (ec) {
      log::warn("iser portal: cannot take connection: {}", ec.message());
      rdma_reject(id, nullptr, 0);
      rdma_destroy_id(id);
      continue;
    }
    c->adopt_id(id);
    if (auto e = c->create_resources()) {
      log::warn("iser portal: cannot create QP for connection: {}", e.message());
      rdma_reject(id, nullptr, 0);
      continue;
    }
    // Send with Invalidate when the initiator supports it and the device can send it.
    const bool swi = impl->options.send_with_invalidate && request && !request->send_with_invalidate_not_supported &&
                     (c->device().attr.device_cap_flags & IBV_DEVICE_MEM_MGT_EXTENSIONS) != 0;
    const iser::CmReply reply{.zbva_not_used = true, .send_with_invalidate_not_used = !swi};
    c->set_send_with_invalidate(iser::send_with_invalidate_agreed(request, reply));
    const auto rep = iser::encode_cm_reply(reply);
    rdma_conn_param param{};
    param.private_data = rep.data();
    param.private_data_len = static_cast<std::uint8_t>(rep.size());
    // Our RDMA Reads (Get_Data) are limited by what the initiator can answer, and by the device.
    param.initiator_depth =
        static_cast<std::uint8_t>(std::min<int>(our_read_depth, c->device().attr.max_qp_init_rd_atom));
    param.responder_resources =
        static_cast<std::uint8_t>(std::min<int>(their_read_depth, c->device().attr.max_qp_rd_atom));
    param.retry_count = 7;
    param.rnr_retry_count = 7;
    if (rdma_accept(id, &param) != 0) {
      log::warn("iser portal: rdma_accept failed: {}", std::strerror(errno));
      continue;
    }
    c->describe();
    c->start(c);
    log::debug("iser portal: accepted {} (rdma read depth {}, send with invalidate {})", c->peer(),
               static_cast<int>(param.initiator_depth), c->send_with_invalidate());
    co_return std::unique_ptr<Datamover>(std::make_unique<IserDatamover>(std::move(c)));
  }
  co_return fail(errc::connection_closed);
}

}  // namespace iserkit::datamover

#endif  // ISERKIT_WITH_ISER

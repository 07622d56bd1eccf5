// One NBD client connection: handshake, then the transmission phase (see transmission.hpp).
// Spec: NBD proto.md "Transmission", "Request message", "Simple reply message", "Structured reply
// chunk message", "Request types", "Terminating the transmission phase".
#include "nbd_bridge/transmission.hpp"

#include <algorithm>
#include <cassert>
#include <exception>
#include <vector>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/common/past_end.hpp"
#include "nbd_bridge/error_map.hpp"
#include "nbd_bridge/request_check.hpp"

namespace iserkit::nbd {
namespace {

constexpr std::size_t max_replies_per_write = 64;  // replies gathered into one write (≤ 4 buffers each)
static_assert(Stream::read_ahead_capacity == request_header_size, "a payload read takes one request header along");

/// The buffers one reply goes out as, in wire order: its header, then its error message, BLOCK_STATUS
/// payload or read data (proto.md "Simple reply message", "Structured reply chunk message").
template <class Reply, class Out>
void gather(const Reply& reply, Out& out) {
  out.push_back(asio::buffer(reply.head.data(), reply.head_bytes));
  if (!reply.message.empty()) out.push_back(asio::buffer(reply.message));
  if (!reply.body.empty()) out.push_back(asio::buffer(reply.body));
  if (reply.data) out.push_back(asio::buffer(reply.data.data(), reply.data.size()));
}

/// A fixed-capacity list of the (at most 4) buffers of one reply.
struct ReplyBuffers {
  std::array<asio::const_buffer, 4> items;
  std::size_t count = 0;
  void push_back(asio::const_buffer b) { items[count++] = b; }
  std::span<const asio::const_buffer> view() const { return std::span(items.data(), count); }
};

bool is_disconnect(const boost::system::error_code& ec) noexcept {
  return ec == asio::error::eof || ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor;
}

}  // namespace

std::shared_ptr<Connection> Connection::create(Socket socket, std::shared_ptr<Export> exported,
                                               ConnectionOptions options) {
  return std::shared_ptr<Connection>(new Connection(std::move(socket), std::move(exported), std::move(options)));
}

Connection::Connection(Socket socket, std::shared_ptr<Export> exported, ConnectionOptions options)
    : stream_(std::move(socket)), export_(std::move(exported)), options_(std::move(options)) {}

Connection::~Connection() = default;

BufferPool& Connection::pool() noexcept {
  if (options_.pool_source) {
    if (BufferPool* current = options_.pool_source()) return *current;
  }
  return options_.pool != nullptr ? *options_.pool : HeapBufferPool::shared();
}

void Connection::request_stop() {
  asio::post(stream_.socket().get_executor(), [self = shared_from_this()] {
    self->stop_requested_ = true;
    // Shutting down the receive side makes the pending read see EOF, which starts the orderly drain.
    boost::system::error_code ignored;
    self->stream_.socket().shutdown(asio::socket_base::shutdown_receive, ignored);
  });
}

void Connection::hard_close() noexcept {
  if (dead_) return;
  dead_ = true;
  stream_.abort();
  // Replies still queued will never be written: retire them so the drain can finish.
  while (!queue_.empty()) {
    retire(queue_.front().accounted_bytes);
    queue_.pop_front();
  }
  end_writer();
  progress_.complete();
}

void Connection::retire(std::size_t accounted_bytes) noexcept {
  assert(in_flight_ > 0 && buffered_bytes_ >= accounted_bytes);
  --in_flight_;
  buffered_bytes_ -= accounted_bytes;
  if (options_.buffered_total) options_.buffered_total->fetch_sub(accounted_bytes, std::memory_order_relaxed);
}

Awaitable<void> Connection::wait_progress() {
  progress_.reset();
  co_await progress_.wait();
}

Awaitable<void> Connection::run() {
  auto self = shared_from_this();
  const ExportInfo info = export_->info();
  // The handshake's deadline: at expiry the connection is closed, which ends the handshake's
  // pending read with an error. `handshaking` keeps a late timer from closing a connection that
  // reached the transmission phase.
  auto handshaking = std::make_shared<bool>(true);
  asio::steady_timer limit(stream_.socket().get_executor());
  if (options_.handshake.limit.count() > 0) {
    limit.expires_after(options_.handshake.limit);
    limit.async_wait([weak = weak_from_this(), handshaking, ms = options_.handshake.limit.count()](
                         const boost::system::error_code& ec) {
      if (ec || !*handshaking) return;
      if (auto connection = weak.lock()) {
        log::info("nbd: handshake not finished within {} ms of the accept: dropping the client", ms);
        connection->hard_close();
      }
    });
  }
  auto negotiated = co_await run_server_handshake(stream_, info, options_.handshake);
  *handshaking = false;
  limit.cancel();
  if (!negotiated) {
    if (negotiated.error() != make_error_code(errc::connection_closed)) {
      log::info("nbd: handshake failed: {}", negotiated.error().message());
    }
    hard_close();
    co_return;
  }
  params_ = negotiated->params;
  log::debug("nbd: transmission: size={} flags=0x{:x} structured={} max_payload={}", params_.size_bytes,
             params_.transmission_flags, params_.structured_replies, params_.max_payload_bytes);

  if (options_.batch_sends) {
    pass_ = &SendPass::of(stream_.socket().get_executor());
    stream_.set_send_pass(pass_);
  }
  start_writer();
  co_await receive_loop();
  stream_.end_burst();  // the replies still to come must not wait for a pass this reader held

  // proto.md NBD_CMD_DISC: the server MUST handle all outstanding requests before closing.
  while (in_flight_ > 0 || writing_) co_await wait_progress();
  if (!dead_) stream_.close();
  end_writer();
  log::debug("nbd: connection closed: requests={} errors={} batches={} max_in_flight={}", stats_.requests,
             stats_.errors, stats_.reply_batches, stats_.max_in_flight);
}

Awaitable<std::error_code> Connection::discard_payload(std::size_t bytes) {
  std::array<std::byte, 16 * 1024> scratch;
  while (bytes > 0) {
    const std::size_t n = std::min(bytes, scratch.size());
    const auto ec = co_await stream_.read_exact(ByteSpan(scratch.data(), n));
    if (ec) co_return make_error_code(errc::connection_closed);
    bytes -= n;
  }
  co_return std::error_code{};
}

Awaitable<void> Connection::receive_loop() {
  auto self = shared_from_this();
  auto executor = co_await asio::this_coro::executor;
  std::array<std::byte, request_header_size> header_bytes{};
  // Lookahead: a WRITE payload read takes the next request header along (one recvmsg per write
  // request instead of two); header reads are exact, so no payload byte is ever read ahead of its
  // buffer (zero copy).
  while (!dead_ && !stop_requested_) {
    // Flow control: stop reading while too many requests or too many payload bytes are held.
    while (!dead_ && (in_flight_ >= options_.max_requests_in_flight || buffered_bytes_ >= options_.max_buffered_bytes)) {
      stream_.end_burst();  // the replies that make progress must not wait for this reader's pass
      co_await wait_progress();
    }
    if (dead_) break;

    auto ec = co_await stream_.read_exact(header_bytes, {.starts_request = true});
    if (ec) {
      if (!is_disconnect(ec)) log::info("nbd: read request: {}", ec.message());
      // EOF without NBD_CMD_DISC: treated like a disconnect; outstanding requests still finish.
      break;
    }
    auto request = decode_request_header(header_bytes);
    if (!request) {
      // The stream has lost framing; proto.md lets the server hard-disconnect on such a violation.
      log::info("nbd: invalid request: bad magic: magic=0x{:08x}", load_be32(header_bytes.data()));
      hard_close();
      break;
    }
    const auto command = static_cast<Command>(request->type);
    if (command == Command::disc) {
      log::debug("nbd: client sent NBD_CMD_DISC");
      break;
    }
    ++stats_.requests;
    if (options_.requests_total) options_.requests_total->fetch_add(1, std::memory_order_relaxed);

    const RequestVerdict verdict = check_request(*request, params_);
    if (!verdict.ok()) {
      if (verdict.error == NbdError::nospc && !warned_past_end_) {
        // A write past the end is a usual mistake (an image larger than the LUN): said once per
        // connection in the words every iserkit program uses (common/past_end.hpp).
        warned_past_end_ = true;
        const char* operation = command == Command::write ? "write" : "write zeroes";
        log::warn("nbd: {}: {}: refused with NBD_ENOSPC", past_end_text(operation, request->offset_bytes,
                                                                      request->length_bytes, params_.size_bytes),
                  past_end_next_step(request->offset_bytes, params_.size_bytes));
      } else {
        log::info("nbd: invalid request: {}: {}: offset={} length={} flags=0x{:x}", name_of(command), verdict.reason,
                  request->offset_bytes, request->length_bytes, request->flags);
      }
      if (command == Command::write && request->length_bytes > 0) {
        // The payload is on the wire whatever we think of the request: consume it to keep framing,
        // unless it is so large that reading it would be a denial of service.
        if (request->length_bytes > options_.max_discard_bytes) {
          log::info("nbd: rejected write payload too large to skip: length={}", request->length_bytes);
          hard_close();
          break;
        }
        if (co_await discard_payload(request->length_bytes)) break;
      }
      ++in_flight_;
      stats_.max_in_flight = std::max(stats_.max_in_flight, in_flight_);
      send_error(*request, verdict.error, std::string(verdict.reason), 0);
      continue;
    }

    PooledBuffer payload;
    std::size_t accounted = 0;
    if (command == Command::read || command == Command::write) accounted = request->length_bytes;
    if (command == Command::write && request->length_bytes > 0) {
      bool out_of_memory = false;
      try {
        payload = pool().allocate(request->length_bytes);
      } catch (const std::bad_alloc&) {
        out_of_memory = true;
      }
      if (out_of_memory) {
        log::warn("nbd: out of memory for a write payload: length={}", request->length_bytes);
        if (co_await discard_payload(request->length_bytes)) break;
        ++in_flight_;
        send_error(*request, NbdError::nomem, "out of memory", 0);
        continue;
      }
      // Zero copy over a plain socket: the payload lands in the buffer the export writes from (over
      // TLS, GnuTLS decrypts into it).
      ec = co_await stream_.read_exact(ByteSpan(payload.data(), payload.size()),
                                       {.payload = true, .read_ahead = request_header_size});
      if (ec) {
        log::info("nbd: short write payload: {}", ec.message());
        break;
      }
    }

    ++in_flight_;
    buffered_bytes_ += accounted;
    if (options_.buffered_total) options_.buffered_total->fetch_add(accounted, std::memory_order_relaxed);
    stats_.max_in_flight = std::max(stats_.max_in_flight, in_flight_);
    if (start_fast(*request, payload, accounted)) continue;
    asio::co_spawn(executor, handle_request(*request, std::move(payload), accounted),
                   [self](std::exception_ptr e) {
                     // handle_request catches everything; this only guards against a bug.
                     if (e) {
                       log::error("nbd: request coroutine threw; closing the connection");
                       self->hard_close();
                     }
                   });
  }
}

Awaitable<void> Connection::handle_request(RequestHeader request, PooledBuffer payload, std::size_t accounted_bytes) {
  auto self = shared_from_this();
  const auto command = static_cast<Command>(request.type);
  const bool fua = (request.flags & command_flag::fua) != 0;
  std::error_code ec;
  PooledBuffer data;
  std::vector<BlockExtent> descriptors;
  try {
    switch (command) {
      case Command::read:
        if (request.length_bytes > 0) {
          // start_fast() may have leased it already (an export without the fast path).
          data = payload ? std::move(payload) : pool().allocate(request.length_bytes);
          ec = co_await export_->read(request.offset_bytes, data.bytes());
        }
        break;
      case Command::write:
        ec = co_await export_->write(request.offset_bytes, ConstByteSpan(payload.data(), payload.size()), fua);
        break;
      case Command::flush:
        ec = co_await export_->flush();
        break;
      case Command::trim:
        ec = co_await export_->trim(request.offset_bytes, request.length_bytes, fua);
        break;
      case Command::write_zeroes: {
        const bool may_trim = (request.flags & command_flag::no_hole) == 0;
        ec = co_await export_->write_zeroes(request.offset_bytes, request.length_bytes, may_trim, fua);
        break;
      }
      case Command::block_status: {
        const bool req_one = (request.flags & command_flag::req_one) != 0;
        std::vector<BlockExtent> extents;
        ec = co_await export_->block_status(request.offset_bytes, request.length_bytes, req_one, extents);
        if (!ec) {
          descriptors = block_status_descriptors(extents, request.length_bytes, req_one);
          // proto.md: a successful reply holds at least one descriptor.
          if (descriptors.empty()) ec = std::make_error_code(std::errc::io_error);
        }
        break;
      }
      case Command::cache:  // advisory only (proto.md NBD_CMD_CACHE); nothing to prefetch
      default:
        break;
    }
  } catch (const std::bad_alloc&) {
    ec = std::make_error_code(std::errc::not_enough_memory);
  } catch (const std::exception& e) {
    log::error("nbd: export threw: {}: {}", name_of(command), e.what());
    ec = std::make_error_code(std::errc::io_error);
  }
  payload.reset();  // the write payload is no longer needed

  if (ec) {
    log::debug("nbd: {} failed: offset={} length={}: {}", name_of(command), request.offset_bytes,
               request.length_bytes, ec.message());
    send_error(request, to_nbd_error(ec, request.flags), ec.message(), accounted_bytes);
  } else if (command == Command::read) {
    send_read_data(request, std::move(data), accounted_bytes);
  } else if (command == Command::block_status) {
    send_block_status(request, descriptors);
  } else {
    send_ok(request, accounted_bytes);
  }
}

bool Connection::start_fast(const RequestHeader& request, PooledBuffer& payload, std::size_t accounted_bytes) {
  const auto command = static_cast<Command>(request.type);
  if (!options_.batch_sends || request.length_bytes == 0 || (command != Command::read && command != Command::write))
    return false;
  if (fast_free_.empty()) {
    fast_all_.push_back(std::make_unique<FastRequest>());  // only while the requests in flight grow
    fast_free_.push_back(fast_all_.back().get());
  }
  FastRequest& fast = *fast_free_.back();
  bool started = false;
  try {
    if (command == Command::read) {
      fast.data = pool().allocate(request.length_bytes);
      started = export_->start_read(request.offset_bytes, fast.data.bytes().first(request.length_bytes), fast);
      if (!started) payload = std::move(fast.data);  // handle_request() reads into it: not leased twice
    } else {
      started = export_->start_write(request.offset_bytes, ConstByteSpan(payload.data(), payload.size()),
                                     (request.flags & command_flag::fua) != 0, fast);
      if (started) fast.payload = std::move(payload);
    }
  } catch (const std::bad_alloc&) {
    return false;  // handle_request() answers it
  }
  if (!started) return false;
  fast_free_.pop_back();
  fast.request = request;
  fast.accounted_bytes = accounted_bytes;
  fast.owner = shared_from_this();
  return true;
}

void Connection::FastRequest::io_done(std::error_code ec) noexcept {
  // Hold the connection through finish_fast(): the reply may be its last use.
  const std::shared_ptr<Connection> self = std::move(owner);
  self->finish_fast(*this, ec);
}

void Connection::finish_fast(FastRequest& fast, std::error_code ec) noexcept {
  const RequestHeader request = fast.request;
  const std::size_t accounted = fast.accounted_bytes;
  PooledBuffer data = std::move(fast.data);
  fast.payload.reset();  // the write payload is no longer needed
  fast_free_.push_back(&fast);
  const auto command = static_cast<Command>(request.type);
  if (ec) {
    log::debug("nbd: {} failed: offset={} length={}: {}", name_of(command), request.offset_bytes, request.length_bytes,
               ec.message());
    send_error(request, to_nbd_error(ec, request.flags), ec.message(), accounted);
  } else if (command == Command::read) {
    send_read_data(request, std::move(data), accounted);
  } else {
    send_ok(request, accounted);
  }
}

void Connection::send_ok(const RequestHeader& request, std::size_t accounted_bytes) {
  // proto.md "Simple reply message": with structured replies negotiated a simple reply MAY still be
  // used for requests other than READ when there is no payload.
  Reply reply;
  encode_simple_reply(std::span<std::byte, simple_reply_size>(reply.head.data(), simple_reply_size),
                      {.error = NbdError::ok, .cookie = request.cookie});
  reply.head_bytes = simple_reply_size;
  reply.accounted_bytes = accounted_bytes;
  enqueue(std::move(reply));
}

void Connection::send_read_data(const RequestHeader& request, PooledBuffer data, std::size_t accounted_bytes) {
  Reply reply;
  reply.accounted_bytes = accounted_bytes;
  if (params_.structured_replies) {
    if (request.length_bytes == 0) {
      // OFFSET_DATA needs at least one byte; an empty read is answered with a lone NONE chunk.
      encode_chunk_header(std::span<std::byte, chunk_header_size>(reply.head.data(), chunk_header_size),
                          {.flags = reply_flag::done, .type = ChunkType::none, .cookie = request.cookie});
      reply.head_bytes = chunk_header_size;
    } else {
      // The data is complete in memory, so no error can follow: this one chunk is also the last
      // (proto.md NBD_CMD_READ, structured replies), which also satisfies NBD_CMD_FLAG_DF.
      encode_offset_data_header(
          std::span<std::byte, offset_data_header_size>(reply.head.data(), offset_data_header_size), request.cookie,
          reply_flag::done, request.offset_bytes, request.length_bytes);
      reply.head_bytes = offset_data_header_size;
    }
  } else {
    encode_simple_reply(std::span<std::byte, simple_reply_size>(reply.head.data(), simple_reply_size),
                        {.error = NbdError::ok, .cookie = request.cookie});
    reply.head_bytes = simple_reply_size;
  }
  reply.data = std::move(data);
  enqueue(std::move(reply));
}

void Connection::send_block_status(const RequestHeader& request, std::span<const BlockExtent> descriptors) {
  // proto.md NBD_REPLY_TYPE_BLOCK_STATUS: one chunk for the one selected context, so it is also
  // the last one (DONE).
  Reply reply;
  reply.body = encode_block_status_payload(base_allocation_context_id, descriptors);
  encode_chunk_header(std::span<std::byte, chunk_header_size>(reply.head.data(), chunk_header_size),
                      {.flags = reply_flag::done,
                       .type = ChunkType::block_status,
                       .cookie = request.cookie,
                       .length_bytes = static_cast<std::uint32_t>(reply.body.size())});
  reply.head_bytes = chunk_header_size;
  enqueue(std::move(reply));
}

void Connection::send_error(const RequestHeader& request, NbdError error, std::string message,
                            std::size_t accounted_bytes) {
  ++stats_.errors;
  Reply reply;
  reply.accounted_bytes = accounted_bytes;
  if (params_.structured_replies) {
    // proto.md: with structured replies a READ MUST NOT get a simple reply (even for an early
    // EINVAL), and errors SHOULD be structured so that a message can go with them.
    if (message.size() > max_string_bytes) message.resize(max_string_bytes);
    encode_error_chunk_header(
        std::span<std::byte, error_chunk_fixed_size>(reply.head.data(), error_chunk_fixed_size), request.cookie,
        reply_flag::done, error, static_cast<std::uint16_t>(message.size()));
    reply.head_bytes = error_chunk_fixed_size;
    reply.message = std::move(message);
  } else {
    // proto.md "Simple reply message": no payload follows when error is nonzero.
    encode_simple_reply(std::span<std::byte, simple_reply_size>(reply.head.data(), simple_reply_size),
                        {.error = error, .cookie = request.cookie});
    reply.head_bytes = simple_reply_size;
  }
  enqueue(std::move(reply));
}

void Connection::enqueue(Reply reply) {
  if (dead_) {
    retire(reply.accounted_bytes);
    progress_.complete();
    return;
  }
  queue_.push_back(std::move(reply));
  if (writing_) return;  // the writer takes it, in order
  // While requests or iSCSI responses that already arrived are being handled (the loop's send
  // pass is held), the reply waits: the pass's end writes every reply of the burst at once.
  if (pass_ != nullptr && pass_->defer(*this)) return;
  write_queued_now();
}

void Connection::flush_pass() {
  if (!writing_ && !dead_ && !queue_.empty()) write_queued_now();
}

void Connection::write_queued_now() {
  // One non-blocking gather write of the queued replies, on this thread, without a writer
  // coroutine (plain sockets; over TLS write_now() writes nothing). Replies written whole are
  // retired; what the socket does not take goes to the writer.
  const std::size_t count = std::min(queue_.size(), max_replies_per_write);
  now_buffers_.clear();
  for (std::size_t i = 0; i < count; ++i) gather(queue_[i], now_buffers_);
  boost::system::error_code ec;
  std::size_t sent = stream_.write_now(now_buffers_, ec);
  if (ec) {
    if (!is_disconnect(ec)) log::info("nbd: write reply: {}", ec.message());
    hard_close();  // retires every queued reply
    return;
  }
  bool retired_any = false;
  for (std::size_t i = 0; i < count; ++i) {
    ReplyBuffers parts;
    gather(queue_.front(), parts);
    const std::size_t size = asio::buffer_size(parts.view());
    if (sent < size) {
      queue_.front().sent_bytes = sent;
      break;
    }
    sent -= size;
    retire(queue_.front().accounted_bytes);
    queue_.pop_front();
    retired_any = true;
  }
  if (retired_any) {
    ++stats_.reply_batches;
    progress_.complete();
  }
  if (queue_.empty()) return;
  wake_writer();
}

void Connection::start_writer() {
  writer_batch_.reserve(max_replies_per_write);
  writer_buffers_.reserve(max_replies_per_write * 4);
  writer_rest_.reserve(max_replies_per_write * 4);
  // The completion handler lives as long as the writer: a weak reference, or the idle writer would
  // keep its connection alive.
  asio::co_spawn(stream_.socket().get_executor(), write_loop(shared_from_this()), [weak = weak_from_this()](std::exception_ptr e) {
    auto self = weak.lock();
    if (e && self) {
      log::error("nbd: writer threw; closing the connection");
      self->writing_ = false;
      self->hard_close();
    }
  });
}

void Connection::end_writer() noexcept {
  writer_done_ = true;
  // An idle writer needs its reference back to end (wake_writer()); during the connection's
  // destruction there is none, and the destruction ends the wait itself.
  auto self = weak_from_this().lock();
  if (!self) return;
  if (writer_self_ != nullptr) *writer_self_ = std::move(self);
  writer_wake_.set();
}

void Connection::wake_writer() {
  writing_ = true;
  // The reference goes into the waiting writer's frame before its resumption is posted: the frame
  // (and with it the reference) then belongs to the loop's queue, so even a loop destroyed before
  // it runs leaves no cycle behind.
  if (writer_self_ != nullptr) *writer_self_ = shared_from_this();
  writer_wake_.set();
}

Awaitable<void> Connection::write_loop(std::shared_ptr<Connection> self) {
  // The writer holds the connection only while it has work. Idle, it waits without a reference:
  // the connection's owners keep it, and its destruction ends the wait (and this frame).
  for (;;) {
    if (!writing_) {
      // It ends with the connection (end_writer(): run() finished, or hard_close()), so that
      // its co_spawn no longer keeps the loop's io_context busy. One that nobody else holds has
      // ended too: dropping the last reference here, before the wait, would destroy the
      // connection under this coroutine.
      if (writer_done_ || dead_ || !self || self.use_count() == 1) co_return;
      self.reset();
      writer_self_ = &self;
      writer_wake_.reset();
      co_await writer_wake_.wait();
      writer_self_ = nullptr;
      continue;
    }
    while (!queue_.empty() && !dead_) {
      // One gather write carries every reply that is ready (up to a bound): fewer syscalls under load.
      writer_batch_.clear();
      writer_buffers_.clear();
      while (!queue_.empty() && writer_batch_.size() < max_replies_per_write) {
        writer_batch_.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      for (const Reply& reply : writer_batch_) gather(reply, writer_buffers_);
      if (writer_batch_.front().sent_bytes > 0) {  // write_queued_now() wrote its start already
        rest_of(writer_buffers_, writer_batch_.front().sent_bytes, writer_rest_);
        writer_buffers_.swap(writer_rest_);
      }
      // write_now() first, then write_rest() for what the socket did not take: no coroutine frame
      // and no allocation per batch (Stream::write_all() makes a frame per call; TLS uses it).
      boost::system::error_code ec;
      const std::size_t sent = stream_.write_now(writer_buffers_, ec);
      if (!ec && sent < asio::buffer_size(writer_buffers_)) {
        if (stream_.is_tls()) {
          ec = co_await stream_.write_all(writer_buffers_);
        } else {
          co_await stream_.write_rest(writer_buffers_, sent, ec);
        }
      }
      ++stats_.reply_batches;
      for (const Reply& reply : writer_batch_) retire(reply.accounted_bytes);
      writer_batch_.clear();  // return READ buffers to the pool now
      if (ec) {
        if (!is_disconnect(ec)) log::info("nbd: write reply: {}", ec.message());
        hard_close();
      }
      progress_.complete();
    }
    writing_ = false;
    progress_.complete();
  }
}

}  // namespace iserkit::nbd

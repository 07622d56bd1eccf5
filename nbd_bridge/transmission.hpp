// One NBD client connection (layer 6): runs the handshake, then the transmission phase with many
// requests in flight. The receive loop reads a request header, reads a WRITE payload straight into a
// pooled buffer, validates, and spawns the request as its own coroutine; replies leave through a
// per-connection write queue served by one writer at a time, which batches every reply that is ready
// into one gather write (header + READ data, no copy).
//
// Flow control: at most `max_requests_in_flight` requests (counted from header to reply written) and
// about `max_buffered_bytes` payload bytes (READ and WRITE data held) per connection; beyond that the
// receive loop stops reading until replies go out, so a client that does not read its replies
// cannot make the server buffer without bound.
//
// Ending: on NBD_CMD_DISC or EOF the loop stops reading, waits for every in-flight request to finish
// and its reply to be written (proto.md: the server MUST handle all outstanding requests), then
// closes. A request with a bad magic (framing lost), a write failure, or an oversize WRITE payload
// ends the connection at once (hard disconnect); other connections are not affected.
//
// THREAD MODEL: everything of one connection runs on the socket's executor, which must be a strand
// (or a single-threaded io_context); the Export is called from that executor.
// Spec: NBD proto.md "Transmission", "Ordering of messages and writes", "Request message",
// "Simple reply message", "Structured reply chunk message", "Terminating the transmission phase".
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/buffer.hpp"
#include "iserkit/common/completion.hpp"
#include "iserkit/common/fifo.hpp"
#include "nbd_bridge/export.hpp"
#include "nbd_bridge/handshake.hpp"
#include "nbd_bridge/stream.hpp"

namespace iserkit::nbd {

/// Limits and policy of one connection.
struct ConnectionOptions {
  HandshakeOptions handshake;
  std::size_t max_requests_in_flight = 64;   ///< requests between header read and reply written
  std::size_t max_buffered_bytes = 64u << 20;  ///< READ/WRITE payload bytes held before reading pauses
  std::size_t max_discard_bytes = 64u << 20;   ///< a rejected WRITE payload up to this is read and dropped;
                                               ///< a longer one ends the connection (proto.md DoS clause)
  BufferPool* pool = nullptr;                ///< where payload buffers come from; nullptr = HeapBufferPool::shared()
  /// Where the payload bytes held by every connection are summed (the buffer-budget metric);
  /// null = not summed. Updated on the connection's executor, read from any thread.
  std::shared_ptr<std::atomic<std::uint64_t>> buffered_total;
  /// Where the requests read are counted (one per request header, NBD_CMD_DISC not counted; e.g.
  /// per event loop); null = not counted. Updated on the connection's executor, read from any thread.
  std::shared_ptr<std::atomic<std::uint64_t>> requests_total;
  /// When set, asked at every payload allocation and wins over `pool` (unless it answers nullptr):
  /// the export's current pool. A session's pool changes when recovery replaces its connection
  /// (iSER: the new connection's registered memory, perhaps on another RDMA device); a cached pool
  /// would send every payload through a counted copy from then on.
  std::function<BufferPool*()> pool_source;
  /// Batch replies per event-loop pass (common/send_pass.hpp): while requests that already
  /// arrived are being read, and while the iSCSI side returns responses that already arrived,
  /// replies wait and leave in one gather write when the burst ends. Only when the connection's
  /// executor is run by one thread (iserkit-nbd's loops).
  bool batch_sends = false;
};

/// Counters of one connection, for tests and logs.
struct ConnectionStats {
  std::uint64_t requests = 0;        ///< requests read (not counting NBD_CMD_DISC)
  std::uint64_t errors = 0;          ///< error replies sent
  std::uint64_t reply_batches = 0;   ///< gather writes issued by the writer
  std::size_t max_in_flight = 0;     ///< the most requests that were in flight at once
};

/// One client connection. Create with Connection::create() and co_spawn run() on the socket's executor.
class Connection final : public std::enable_shared_from_this<Connection>, private SendPass::Flusher {
 public:
  /// Takes ownership of a connected socket. `exported` is shared with other connections.
  static std::shared_ptr<Connection> create(Socket socket, std::shared_ptr<Export> exported,
                                            ConnectionOptions options);

  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  /// Runs the handshake and the transmission phase; completes once the socket is closed and no
  /// request is in flight. Never throws for protocol or socket errors (they are logged).
  /// Executor: must be co_spawned on the socket's executor.
  Awaitable<void> run();

  /// Stops reading new requests; in-flight requests finish and their replies are sent, then the
  /// connection closes (proto.md "Terminating the transmission phase": the server SHOULD wait for
  /// in-flight requests). Thread-safe: posts to the connection's executor.
  void request_stop();

  /// Counters so far. Read on the connection's executor (or after run() completed).
  [[nodiscard]] const ConnectionStats& stats() const noexcept { return stats_; }

 private:
  /// One reply waiting in the write queue: a header (simple reply, chunk header, or error chunk
  /// fixed part), an optional error message, and optional READ data sent straight from its buffer.
  struct Reply {
    std::array<std::byte, 32> head{};
    std::size_t head_bytes = 0;
    std::string message;
    std::vector<std::byte> body;  // a BLOCK_STATUS chunk's payload (context ID + descriptors)
    PooledBuffer data;
    std::size_t accounted_bytes = 0;  // payload bytes this request counted against the budget
    std::size_t sent_bytes = 0;       // already written by enqueue()'s immediate attempt
  };
  Connection(Socket socket, std::shared_ptr<Export> exported, ConnectionOptions options);

  Awaitable<void> receive_loop();
  Awaitable<void> handle_request(RequestHeader request, PooledBuffer payload, std::size_t accounted_bytes);
  /// A READ/WRITE on the export's fast path (Export::start_read()/start_write(): no coroutine).
  /// Pooled per connection (fast_free_).
  struct FastRequest final : ExportIo {
    std::shared_ptr<Connection> owner;  // keeps the connection alive while the export works
    RequestHeader request;
    PooledBuffer payload;  // a write's
    PooledBuffer data;     // a read's
    std::size_t accounted_bytes = 0;
    void io_done(std::error_code ec) noexcept override;
  };
  /// Starts `request` on the fast path (batch_sends: the connection runs on the export's loop
  /// thread); false when it does not apply (handle_request() then; for a READ `payload` holds
  /// the buffer already leased for its data).
  bool start_fast(const RequestHeader& request, PooledBuffer& payload, std::size_t accounted_bytes);
  /// handle_request()'s end for a fast request: the reply.
  void finish_fast(FastRequest& fast, std::error_code ec) noexcept;
  std::vector<std::unique_ptr<FastRequest>> fast_all_;
  std::vector<FastRequest*> fast_free_;
  /// Starts write_loop() (once, with the transmission phase).
  void start_writer();
  /// Hands queue_ to the writer (writing_) and resumes it.
  void wake_writer();
  /// Tells the writer to end once it has nothing to write (run()'s end, hard_close()).
  void end_writer() noexcept;
  Awaitable<void> write_loop(std::shared_ptr<Connection> self);
  Awaitable<std::error_code> discard_payload(std::size_t bytes);
  Awaitable<void> wait_progress();

  void send_ok(const RequestHeader& request, std::size_t accounted_bytes);
  void send_read_data(const RequestHeader& request, PooledBuffer data, std::size_t accounted_bytes);
  void send_block_status(const RequestHeader& request, std::span<const BlockExtent> descriptors);
  void send_error(const RequestHeader& request, NbdError error, std::string message, std::size_t accounted_bytes);
  void enqueue(Reply reply);
  void flush_pass() override;
  void write_queued_now();
  void retire(std::size_t accounted_bytes) noexcept;
  void hard_close() noexcept;
  BufferPool& pool() noexcept;

  Stream stream_;  // the socket, plain or TLS after NBD_OPT_STARTTLS
  std::shared_ptr<Export> export_;
  ConnectionOptions options_;
  TransmissionParams params_;
  ConnectionStats stats_;
  Fifo<Reply> queue_;
  SendPass* pass_ = nullptr;  // ConnectionOptions::batch_sends: the loop's send pass
  std::vector<asio::const_buffer> now_buffers_;  // write_queued_now()'s gather list, kept between calls
  Completion progress_;          // completed whenever a reply is retired or the writer stops
  // The writer (write_loop): one coroutine per connection, started with the transmission phase
  // and woken through writer_wake_ when write_queued_now() leaves replies the socket did not take;
  // its gather lists are members so that their capacity is kept (no allocation per writer turn).
  Event writer_wake_;
  std::vector<Reply> writer_batch_;
  std::vector<asio::const_buffer> writer_buffers_;
  std::vector<asio::const_buffer> writer_rest_;  // swapped with writer_buffers_
  std::shared_ptr<Connection>* writer_self_ = nullptr;  // the idle writer's reference slot (wake_writer())
  bool writer_done_ = false;     // end_writer() was called
  std::size_t in_flight_ = 0;    // requests read whose reply has not been written (or dropped)
  std::size_t buffered_bytes_ = 0;
  bool writing_ = false;         // the writer has replies to write (queue_ is its)
  bool dead_ = false;            // hard-closed: replies are dropped
  bool warned_past_end_ = false;  // a write past the end was logged (once per connection)
  bool stop_requested_ = false;
};

}  // namespace iserkit::nbd

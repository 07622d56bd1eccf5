// The Datamover interface (RFC 5047): the only layer that touches sockets or RDMA verbs. It moves
// whole iSCSI PDUs (Send_Control / control receive) and, on iSER, the data itself (Put_Data as RDMA
// Write, Get_Data as RDMA Read, RFC 5047 §7.3/§7.4). The TCP datamover frames PDUs with padding and
// digests; the iSER datamover prefixes the iSER header (RFC 7145 §9.2), advertises the STags of the
// task's registered Buffers, and moves Data-In/solicited Data-Out by RDMA.
//
// The values it moves (PduOut, PduIn, ...) are in pdu_io.hpp, the initiator's buffer descriptor in
// task_data.hpp and what it can do in capabilities.hpp, all free of Asio: the sans-I/O engines
// include pdu_io.hpp and capabilities.hpp, never this header.
//
// Which one a connection has is asked through capabilities(): when rdma_data is set the target
// never sends Data-In or R2T and never expects Data-Out; it calls put_data()/get_data() with the
// STags that came in the command's iSER header (PduIn::peer_read/peer_write).
// The initiator never asks which transport it has: it lets the datamover prepare each command's
// buffers (prepare_task_data() → TaskData, carried by the command's PDU) and reads its limits
// from capabilities().
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <variant>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/buffer.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/common/send_pass.hpp"
#include "iserkit/datamover/capabilities.hpp"
#include "iserkit/datamover/pdu_io.hpp"
#include "iserkit/datamover/task_data.hpp"
#include "iserkit/iscsi/pdu.hpp"

namespace iserkit::datamover {

/// A Put_Data of send_chain(): RDMA-write `source` (registered) to the peer's `dest` at `offset`.
struct PutDataStep {
  PeerBuffer dest;
  std::uint64_t offset = 0;
  Buffer source;
};
/// One step of send_chain(): a Put_Data or a whole PDU to send.
using ChainStep = std::variant<PutDataStep, PduOut>;

/// One iSCSI connection's datamover. Used from one executor (thread); not thread-safe.
class Datamover {
 public:
  virtual ~Datamover() = default;

  /// Send_Control (RFC 5047 §7.2): sends one whole PDU. Several coroutines may send at once: PDUs
  /// go out whole, in the order send() was called, batched into one gather write where possible.
  /// Returns the socket error (or errc::connection_closed) when the connection failed; after an
  /// error every later send fails too.
  virtual Awaitable<std::error_code> send(PduOut pdu) = 0;

  /// Sends `pdus` whole and in this order, none of another send() between them: the order of a
  /// command's PDUs (SCSI Command, then its unsolicited Data-Out; a Data-Out sequence) is part of
  /// this contract, not a consequence of scheduling. Completes when all were sent; returns the
  /// first error (the rest are then not sent). The default sends them one after another;
  /// TcpDatamover queues them at once (one gather write where the socket takes it).
  virtual Awaitable<std::error_code> send_batch(std::vector<PduOut> pdus);

  /// What try_send_now() did.
  enum class SendNow : std::uint8_t {
    sent,     ///< every byte of the PDUs was written: they, and the buffers they borrow, are free
    queued,   ///< part was written; the datamover took the PDUs (`pdus` is left empty, maybe with
              ///< the capacity of a batch it took before) and the caller must co_await
              ///< finish_send() next, keeping the borrowed buffers until then
    refused,  ///< nothing was written (a send is under way, an earlier error, or no such path):
              ///< use send_batch()
  };
  /// send_batch() without a coroutine frame when the transport takes the PDUs at once: one
  /// non-blocking gather write on the calling thread. The same ordering contract as send_batch().
  /// Default: refused (iSER: its sends complete through the completion queue).
  virtual SendNow try_send_now(std::vector<PduOut>& pdus) {
    (void)pdus;
    return SendNow::refused;
  }
  /// After try_send_now() returned queued: writes the rest (and what other sends queued
  /// meanwhile) and returns as send_batch() would. Default: errc::not_supported.
  virtual Awaitable<std::error_code> finish_send();

  /// Receives the next PDU: BHS, AHS, header digest (checked), data segment (placed by
  /// `placement`, may be null), padding and data digest (checked). Only one receive at a time.
  /// Errors (connection-fatal): errc::connection_closed, errc::header_digest_error, socket errors.
  /// Recoverable problems with one PDU come back in PduIn::pdu_error instead.
  virtual Awaitable<Result<PduIn>> receive(DataPlacement* placement) = 0;
  /// receive() without suspending: the next PDU when its bytes are already here or can be read
  /// without waiting, else nullopt (then call receive(), which waits). Same results and errors
  /// as receive(); a receive loop calls this first so a burst of PDUs costs no coroutine frame or
  /// posted completion each. Default: nullopt (the transport always goes through receive()).
  virtual std::optional<Result<PduIn>> try_receive(DataPlacement* placement) {
    (void)placement;
    return std::nullopt;
  }

  /// Turns CRC32C header/data digests on or off (after login, RFC 7143 §13.1).
  virtual void set_digests(bool header, bool data) noexcept = 0;
  /// The largest data segment this side accepts (its declared MaxRecvDataSegmentLength, bytes).
  /// 8192 until changed (the login-phase limit, RFC 7143 §13.12).
  virtual void set_max_recv_data_segment_length(std::uint32_t bytes) noexcept = 0;

  /// What receive() does with a data segment longer than set_max_recv_data_segment_length():
  /// `true` (the default) reads it through a bounded buffer and drops it, returning the PDU with
  /// PduIn::pdu_error = errc::pdu_too_large (the caller Rejects, RFC 7143 §13.12); `false` returns
  /// the header at once with that pdu_error and without reading a byte of the segment, after which
  /// every receive fails with errc::protocol_error (the caller answers and closes: the login phase,
  /// where an oversize PDU ends the login anyway). Either way the announced length commits no memory.
  virtual void set_drain_oversize(bool drain) noexcept { (void)drain; }

  /// Joins the event loop's send pass (send_pass.hpp; null: none, the default): receive() holds
  /// `pass` while it returns PDUs that had already arrived (no wait between them) and releases it
  /// (posted) just before it must wait for the transport, so what the caller's reactions to one
  /// burst of PDUs queued leaves in one write per socket. Only for a loop run by one thread. The
  /// default ignores it (no receive-side batching).
  virtual void set_send_pass(SendPass* pass) noexcept { (void)pass; }

  /// Ends the current receive burst: releases the send pass if this datamover holds it (posted).
  /// The caller of receive() calls it before it waits for anything else (flow control): the
  /// progress that wait needs may be output the pass holds back.
  virtual void end_burst() {}

  /// Closes the connection; pending sends and receives complete with errors. Bytes already
  /// handed to the transport (a TCP send queue) may still be delivered after the call.
  virtual void close() noexcept = 0;
  /// Closes the connection as failed: like close(), and nothing handed to the transport but not
  /// yet delivered goes out later — TCP discards its send queue and resets the connection
  /// (SO_LINGER 0, RST), so a PDU queued on a failed connection can never reach the target after
  /// its command was sent again on another connection (a multipath retry, a re-issue after
  /// reconnect). Synchronous: when it returns, the queue is gone. The default is close() (iSER:
  /// the QP goes to error, which flushes every posted work request).
  virtual void abort() noexcept { close(); }
  /// The peer's address as "ip:port" (IPv6 in brackets), for logs.
  [[nodiscard]] virtual std::string peer() const = 0;
  /// The local address as "ip:port", e.g. for TargetAddress in SendTargets.
  [[nodiscard]] virtual std::string local() const = 0;
  [[nodiscard]] virtual Transport transport() const noexcept = 0;
  /// The executor all of this datamover's work runs on.
  [[nodiscard]] virtual asio::any_io_executor executor() const = 0;

  /// What this datamover can do (TCP: no RDMA data, digests available, no transfer limit).
  [[nodiscard]] virtual Capabilities capabilities() const noexcept { return {}; }

  /// Initiator side: prepares one SCSI command's buffers — `data_in` (read, bytes) and `data_out`
  /// (write, bytes), either may be empty — for this transport. The default (TCP) is
  /// TaskData::direct(): the spans as they are, at no cost. The iSER datamover returns
  /// TaskData::registered() over buffer_pool(). Errors: std::errc::not_enough_memory (iSER: no
  /// bounce buffer). Thread: the datamover's executor.
  [[nodiscard]] virtual Result<TaskData> prepare_task_data(std::span<std::byte> data_in,
                                                           std::span<const std::byte> data_out);

  /// Where data-path buffers for this connection come from: registered memory of the connection's
  /// protection domain on iSER (so put_data/get_data and STags work on them without registering per
  /// command), HeapBufferPool::shared() on TCP. Thread-safe; outlives the datamover.
  [[nodiscard]] virtual BufferPool& buffer_pool() noexcept;

  /// Put_Data (RFC 5047 §7.3; RFC 7145 §7.3.5): target side, RDMA-writes `source` (registered:
  /// its lkey is used) to the initiator's buffer `dest` at `dest_offset` bytes from its start.
  /// Completes when the write is done (the caller may reuse `source` and then send the SCSI
  /// Response, which the RC QP orders after the write). Errors: errc::not_supported (TCP),
  /// errc::connection_closed or a work-completion error (connection-fatal).
  virtual Awaitable<std::error_code> put_data(PeerBuffer dest, std::uint64_t dest_offset, Buffer source);

  /// Get_Data (RFC 5047 §7.4; RFC 7145 §7.3.4): target side, RDMA-reads `dest.bytes.size()` bytes
  /// from the initiator's buffer `source` at `source_offset` bytes into `dest` (registered).
  /// Completes when the data is in `dest`. Errors as put_data().
  virtual Awaitable<std::error_code> get_data(PeerBuffer source, std::uint64_t source_offset, Buffer dest);

  /// Target side: the steps in this order, as put_data() and send_batch() would do them one after
  /// another (nothing of another send between them), completing when all are done; returns the
  /// first error (the steps after it are not done). A SCSI Response after its command's Put_Data
  /// may go out before that RDMA Write completed: the RC QP executes them in posting order
  /// (RFC 7145 §7.3.5), so the initiator sees the data before the status. The sources must stay
  /// valid until it completes. The default runs put_data() for each Put_Data and send_batch() for
  /// each run of PDUs; iSER posts each send-queue's worth of steps as one chain of work requests
  /// in one ibv_post_send.
  virtual Awaitable<std::error_code> send_chain(std::vector<ChainStep> steps);

  /// The number of unexpected PDUs (see iserkit/iser/credits.hpp) the peer accepts outstanding, as
  /// negotiated (MaxOutstandingUnexpectedPDUs); 0 = no limit. Ignored by TCP.
  virtual void set_unexpected_pdu_limit(std::uint32_t pdus) noexcept { (void)pdus; }
};

}  // namespace iserkit::datamover

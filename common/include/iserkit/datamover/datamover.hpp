// The Datamover interface (RFC 5047): the only layer that touches sockets or RDMA verbs. It moves
// whole iSCSI PDUs (Send_Control / control receive) and, on iSER, the data itself (Put_Data as RDMA
// Write, Get_Data as RDMA Read, RFC 5047 §7.3/§7.4). The TCP datamover frames PDUs with padding and
// digests; the iSER datamover prefixes the iSER header (RFC 7145 §9.2), advertises the STags of the
// task's registered Buffers, and moves Data-In/solicited Data-Out by RDMA.
//
// Which one a connection has is asked through capabilities(): when rdma_data is set the target
// never sends Data-In or R2T and never expects Data-Out; it calls put_data()/get_data() with the
// STags that came in the command's iSER header (PduIn::remote_read/remote_write).
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
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/buffer.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/common/send_pass.hpp"
#include "iserkit/iscsi/pdu.hpp"

namespace iserkit::datamover {

/// Who gives back a per-command STag (iSER: a memory window bound over the registered pool for one
/// command, RFC 7145 §9.2): release_stag() is called once when the command's TaskData ends, on
/// the datamover's executor. The iSER connection invalidates the window then (Local Invalidate)
/// unless the peer already did (Send with Invalidate).
class StagOwner {
 public:
  /// `slot` is the owner's own index of the window.
  virtual void release_stag(std::uint32_t slot) noexcept = 0;

 protected:
  ~StagOwner() = default;
};

/// A held per-command STag: calls StagOwner::release_stag() once, when destroyed or assigned
/// over. Move-only; costs no allocation (the owner pointer shares its owner's control block).
class StagLease {
 public:
  StagLease() = default;
  StagLease(std::shared_ptr<StagOwner> owner, std::uint32_t slot) noexcept : owner_(std::move(owner)), slot_(slot) {}
  StagLease(StagLease&& o) noexcept : owner_(std::move(o.owner_)), slot_(o.slot_) {}
  StagLease& operator=(StagLease&& o) noexcept {
    if (this != &o) {
      reset();
      owner_ = std::move(o.owner_);
      slot_ = o.slot_;
    }
    return *this;
  }
  StagLease(const StagLease&) = delete;
  StagLease& operator=(const StagLease&) = delete;
  ~StagLease() { reset(); }
  void reset() noexcept {
    if (auto owner = std::move(owner_)) owner->release_stag(slot_);
  }
  explicit operator bool() const noexcept { return static_cast<bool>(owner_); }

 private:
  std::shared_ptr<StagOwner> owner_;
  std::uint32_t slot_ = 0;
};

/// The data buffers of one SCSI command as the connection's datamover prepared them
/// (Datamover::prepare_task_data()). Opaque to the initiator's session: it places Data-In into
/// data_in() and sends immediate data and Data-Out from data_out(), points the SCSI Command PDU at
/// the descriptor (PduOut::task_data), and calls finish() when the command completed.
/// - TCP (direct()): the caller's spans as they are; no registration, no allocation, no copy.
/// - iSER (registered()): the registered views whose STags go in the iSER header (RFC 7145 §9.2),
///   over the caller's own bytes when they lie in the connection's registered pool (zero copy),
///   else over a registered bounce buffer with one counted copy (copy_counter.hpp): the write data
///   into it at preparation, the read data out of it at finish().
/// Move-only. The caller's spans must stay valid until finish() (or the descriptor's destruction);
/// the descriptor must not move while a PDU points at it.
class TaskData {
 public:
  /// No data (a command without a data phase).
  TaskData() = default;
  TaskData(TaskData&&) noexcept = default;
  TaskData& operator=(TaskData&&) noexcept = default;
  TaskData(const TaskData&) = delete;
  TaskData& operator=(const TaskData&) = delete;
  ~TaskData() = default;

  /// For datamovers whose peer does not touch the initiator's memory (TCP): the caller's spans,
  /// `data_in` (read buffer, bytes) and `data_out` (write buffer, bytes), used as they are.
  [[nodiscard]] static TaskData direct(std::span<std::byte> data_in, std::span<const std::byte> data_out) noexcept;

  /// For RDMA datamovers (iSER, RFC 7145 §9.2): registered views of `data_in` / `data_out` from
  /// `pool` (BufferPool::registration()); a span outside the pool's registered memory is replaced
  /// by a bounce buffer leased from `pool` (the write data is copied into it now, counted).
  /// Errors: std::errc::not_enough_memory when the pool cannot lease a bounce buffer (nothing was
  /// copied, the caller's spans are untouched).
  [[nodiscard]] static Result<TaskData> registered(BufferPool& pool, std::span<std::byte> data_in,
                                                   std::span<const std::byte> data_out);

  /// Where the read data lands (the caller's span, or the bounce buffer), bytes.
  [[nodiscard]] std::span<std::byte> data_in() const noexcept { return data_in_; }
  /// Where the write data is sent from (the caller's span, or the bounce buffer), bytes.
  [[nodiscard]] std::span<const std::byte> data_out() const noexcept { return data_out_; }
  /// For the datamover: the registered memory the peer RDMA-writes the read data into (its rkey is
  /// the Read STag, its address the Base Offset); nullopt when none (TCP, or no read data).
  [[nodiscard]] const std::optional<Buffer>& read_region() const noexcept { return read_region_; }
  /// For the datamover: the registered memory the peer RDMA-reads the write data from; nullopt
  /// when none.
  [[nodiscard]] const std::optional<Buffer>& write_region() const noexcept { return write_region_; }
  /// For the iSER datamover, when the SCSI Command is sent: the peer reaches the read region
  /// (`read` true) or the write region through the per-command STag `stag` (a memory window bound
  /// over it) instead of the pool's rkey; `lease` gives that STag back when this descriptor ends.
  /// const because the command's PDU points at a const descriptor: the binding is the datamover's
  /// bookkeeping, not the caller's data. No-op without that region.
  void bind_stag(bool read, std::uint32_t stag, StagLease lease) const noexcept {
    if (!(read ? read_region_ : write_region_)) return;
    (read ? binding_.read_stag : binding_.write_stag) = stag;
    (read ? binding_.read_lease : binding_.write_lease) = std::move(lease);
  }
  /// True when bind_stag() gave every region of this descriptor a per-command STag.
  [[nodiscard]] bool stags_bound() const noexcept {
    return (!read_region_ || binding_.read_lease) && (!write_region_ || binding_.write_lease);
  }
  /// The STag the iSER header carries for the read region: the per-command one when bound, else
  /// the region's rkey; 0 without a read region.
  [[nodiscard]] std::uint32_t read_stag() const noexcept {
    return binding_.read_lease ? binding_.read_stag : (read_region_ ? read_region_->rkey : 0);
  }
  /// The STag for the write region, as read_stag().
  [[nodiscard]] std::uint32_t write_stag() const noexcept {
    return binding_.write_lease ? binding_.write_stag : (write_region_ ? write_region_->rkey : 0);
  }
  /// True when a bounce buffer stands in for one of the caller's spans.
  [[nodiscard]] bool bounced() const noexcept { return static_cast<bool>(bounce_in_) || static_cast<bool>(bounce_out_); }

  /// Ends the command after it completed with `data_in_bytes` bytes of read data (the read
  /// buffer's size less an underflow residual; clamped to it): a bounced read copies them into the
  /// caller's span (counted); otherwise nothing happens. Call at most once; a command that failed
  /// is not finished, so its caller's read buffer is left as the transport left it.
  void finish(std::size_t data_in_bytes) noexcept;

 private:
  std::span<std::byte> data_in_;
  std::span<const std::byte> data_out_;
  std::optional<Buffer> read_region_;
  std::optional<Buffer> write_region_;
  PooledBuffer bounce_in_;        // registered stand-in for the caller's read span
  PooledBuffer bounce_out_;       // registered copy of the caller's write span
  std::span<std::byte> caller_in_;  // where finish() copies bounced read data
  // Declared last: the STags are given back (invalidated) before the bounce buffers go back to
  // the pool.
  struct Binding {
    std::uint32_t read_stag = 0;
    std::uint32_t write_stag = 0;
    StagLease read_lease;
    StagLease write_lease;
  };
  mutable Binding binding_;
};

/// An outgoing PDU: BHS, encoded AHS and a data segment the PDU may or may not own.
/// The datamover adds padding and digests; set_lengths() is applied by the constructors below.
struct PduOut {
  iscsi::Bhs bhs{};
  std::vector<std::byte> ahs;         ///< encoded AHS (iscsi::encode_ahs), a multiple of 4 bytes
  std::span<const std::byte> data;    ///< the data segment; must stay valid until send() completes
  std::vector<std::byte> owned_data;  ///< storage when the PDU owns its data (data points into it)
  /// SCSI Command PDUs: the task's data as this datamover prepared it (prepare_task_data()); the
  /// iSER datamover puts its regions' STags in the iSER header (RFC 7145 §9.2), TCP ignores it.
  /// Must stay valid until send() completes; null for every other PDU.
  const TaskData* task_data = nullptr;
};

/// A PDU whose data segment is borrowed from the caller (zero copy). Sets the BHS length fields.
PduOut make_pdu(const iscsi::PduHeader& header, std::span<const std::byte> data = {},
                std::vector<std::byte> ahs = {});
/// A PDU that owns its data segment (text, sense data, rejected BHS). Sets the BHS length fields.
PduOut make_pdu_owned(const iscsi::PduHeader& header, std::vector<std::byte> data);

/// A buffer of the peer's that this side may RDMA-read or RDMA-write: its STag (rkey) and the
/// peer's virtual address of its first byte (RFC 7145 §9.2, ZBVA not used). Only ever received.
struct RemoteBuffer {
  std::uint32_t stag = 0;
  std::uint64_t address = 0;
  friend bool operator==(const RemoteBuffer&, const RemoteBuffer&) = default;
};

/// A received PDU. `data` views where the data segment landed: the span the DataPlacement chose,
/// or the datamover's scratch buffer, which stays valid until the next receive() call.
struct PduIn {
  iscsi::Bhs bhs{};
  std::vector<std::byte> ahs;  ///< raw AHS area (TotalAHSLength × 4 bytes)
  std::span<std::byte> data;
  /// iSER only, SCSI Command PDUs: the initiator's read buffer (Read STag and Base Offset, RSV set)
  /// — byte 0 of the read data goes to `address` — and its write buffer (Write STag/Base Offset,
  /// WSV set), whose `address` holds the first byte after the immediate and unsolicited data
  /// (RFC 7145 §9.2; Linux iser_prepare_write_cmd).
  std::optional<RemoteBuffer> remote_read;
  std::optional<RemoteBuffer> remote_write;
  /// A per-PDU error that left the connection usable: errc::data_digest_error or
  /// errc::pdu_too_large (the data segment was read and discarded). The receiver answers with a
  /// Reject (RFC 7143 §11.17) or drops the task; framing is intact.
  std::error_code pdu_error;
};

/// Chooses where an incoming data segment goes, so Data-In / Data-Out land straight in the task's
/// buffer at its BufferOffset (no user-space copy). Called once per PDU with a data segment, after
/// the BHS (and its digest) is validated and before the data segment is read.
class DataPlacement {
 public:
  virtual ~DataPlacement() = default;
  /// Returns a span of exactly `length` bytes to receive into, or an empty span to use the
  /// datamover's scratch buffer. Must not block or suspend.
  virtual std::span<std::byte> place(const iscsi::Bhs& bhs, std::uint32_t length) noexcept = 0;
};

/// Which wire a datamover drives.
enum class Transport { tcp, iser };

/// What a datamover can do beyond Send_Control.
struct Capabilities {
  /// Put_Data/Get_Data move the payload by RDMA (iSER): no Data-In, R2T or solicited Data-Out PDUs
  /// on the wire (RFC 7145 §7.3); buffers must come from buffer_pool() (registered memory).
  bool rdma_data = false;
  /// CRC32C digests can be used (TCP only; RFC 7145 §6.1 makes them irrelevant on iSER).
  bool digests = true;
  /// The largest data transfer one SCSI command should carry over this connection, bytes; 0 = no
  /// limit of the transport's own (iSER: IserOptions::max_transfer_bytes, sized to what the
  /// peer's RDMA buffers take per command).
  std::uint32_t max_transfer_bytes = 0;
  /// The peer reads and writes a command's buffers by itself (RDMA to the STags of its TaskData):
  /// a command given up before its response (a timeout) leaves its buffer exposed to the peer
  /// until the connection is closed.
  bool exposes_task_buffers = false;
};

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
    queued,   ///< part was written; the datamover took the PDUs (`pdus` is left empty) and the
              ///< caller must co_await finish_send() next, keeping the borrowed buffers until then
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
  virtual Awaitable<std::error_code> put_data(RemoteBuffer dest, std::uint64_t dest_offset, Buffer source);

  /// Get_Data (RFC 5047 §7.4; RFC 7145 §7.3.4): target side, RDMA-reads `dest.bytes.size()` bytes
  /// from the initiator's buffer `source` at `source_offset` bytes into `dest` (registered).
  /// Completes when the data is in `dest`. Errors as put_data().
  virtual Awaitable<std::error_code> get_data(RemoteBuffer source, std::uint64_t source_offset, Buffer dest);

  /// The number of unexpected PDUs (see iserkit/iser/credits.hpp) the peer accepts outstanding, as
  /// negotiated (MaxOutstandingUnexpectedPDUs); 0 = no limit. Ignored by TCP.
  virtual void set_unexpected_pdu_limit(std::uint32_t pdus) noexcept { (void)pdus; }
};

}  // namespace iserkit::datamover

// The Datamover interface (RFC 5047): the only layer that touches sockets or RDMA verbs. It moves
// whole iSCSI PDUs (Send_Control / control receive) and, on iSER, the data itself (Put_Data as RDMA
// Write, Get_Data as RDMA Read, RFC 5047 §7.3/§7.4). The TCP datamover frames PDUs with padding and
// digests; the iSER datamover prefixes the iSER header (RFC 7145 §9.2), advertises the STags of the
// task's registered Buffers, and moves Data-In/solicited Data-Out by RDMA.
//
// Which one a connection has is asked through capabilities(): when rdma_data is set the target
// never sends Data-In or R2T and never expects Data-Out; it calls put_data()/get_data() with the
// STags that came in the command's iSER header (PduIn::remote_read/remote_write).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/buffer.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/iscsi/pdu.hpp"

namespace iserkit::datamover {

/// An outgoing PDU: BHS, encoded AHS and a data segment the PDU may or may not own.
/// The datamover adds padding and digests; set_lengths() is applied by the constructors below.
struct PduOut {
  iscsi::Bhs bhs{};
  std::vector<std::byte> ahs;         ///< encoded AHS (iscsi::encode_ahs), a multiple of 4 bytes
  std::span<const std::byte> data;    ///< the data segment; must stay valid until send() completes
  std::vector<std::byte> owned_data;  ///< storage when the PDU owns its data (data points into it)
  /// For SCSI Command PDUs on iSER: the task's data-in (read) and data-out (write) buffers whose
  /// STags go in the iSER header (RFC 7145 §9.2). Ignored by the TCP datamover.
  const SgList* read_buffers = nullptr;
  const SgList* write_buffers = nullptr;
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

  /// Receives the next PDU: BHS, AHS, header digest (checked), data segment (placed by
  /// `placement`, may be null), padding and data digest (checked). Only one receive at a time.
  /// Errors (connection-fatal): errc::connection_closed, errc::header_digest_error, socket errors.
  /// Recoverable problems with one PDU come back in PduIn::pdu_error instead.
  virtual Awaitable<Result<PduIn>> receive(DataPlacement* placement) = 0;

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

  /// Closes the connection; pending sends and receives complete with errors.
  virtual void close() noexcept = 0;
  /// The peer's address as "ip:port" (IPv6 in brackets), for logs.
  [[nodiscard]] virtual std::string peer() const = 0;
  /// The local address as "ip:port", e.g. for TargetAddress in SendTargets.
  [[nodiscard]] virtual std::string local() const = 0;
  [[nodiscard]] virtual Transport transport() const noexcept = 0;
  /// The executor all of this datamover's work runs on.
  [[nodiscard]] virtual asio::any_io_executor executor() const = 0;

  /// What this datamover can do (TCP: no RDMA data, digests available).
  [[nodiscard]] virtual Capabilities capabilities() const noexcept { return {}; }

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

// The values that cross the datamover seam (RFC 5047): the PDUs the engines produce (PduOut,
// make_pdu) and consume (PduIn), where a received data segment lands (DataPlacement), and the
// handle of a peer's buffer that a transport moves data to or from by itself (PeerBuffer). The
// initiator's per-command buffer descriptor (TaskData, task_data.hpp) is only named here: the
// engines pass a pointer to it through and never look inside.
//
// Transport-neutral and free of I/O: no Asio, no sockets, no verbs. The sans-I/O session engines
// (initiator/src/session_engine.*, target/src/session_engine.*) include this header, never
// datamover.hpp (docs/architecture.md, "The transport seam"); the Datamover interface that moves
// these values is in datamover.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <system_error>
#include <vector>

#include "iserkit/iscsi/pdu.hpp"

namespace iserkit::datamover {

class TaskData;  // task_data.hpp: opaque here, only the datamover reads it

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
  /// TCP only: when >= 0, the read end of a pipe holding the data segment's `data.size()` bytes,
  /// which the datamover moves to the socket with splice(2) instead of sending `data` (whose bytes
  /// are then not read; `data` still gives the length). The target's zero-copy READ Data-In
  /// (target/src/data_in_pipes.hpp). Never with a data digest (the bytes are not seen). -1: none.
  int splice_from = -1;
};

/// A PDU whose data segment is borrowed from the caller (zero copy). Sets the BHS length fields.
PduOut make_pdu(const iscsi::PduHeader& header, std::span<const std::byte> data = {},
                std::vector<std::byte> ahs = {});
/// A PDU that owns its data segment (text, sense data, rejected BHS). Sets the BHS length fields.
PduOut make_pdu_owned(const iscsi::PduHeader& header, std::vector<std::byte> data);

/// A buffer of the peer's that the transport itself moves one command's data into or out of (RFC
/// 5047 Put_Data / Get_Data); iSER names it by a STag and the peer's address of its first byte
/// (RFC 7145 §9.2, ZBVA not used). Opaque above the datamover: the engines carry it from the
/// received command (PduIn) to the data phase's action and hand it back to
/// Datamover::put_data()/get_data(); only a datamover reads what it holds. Only ever received.
class PeerBuffer {
 public:
  PeerBuffer() = default;
  /// For datamovers: the buffer the peer names with `key` (iSER: the STag) at its `address`.
  constexpr PeerBuffer(std::uint32_t key, std::uint64_t address) noexcept : key_(key), address_(address) {}
  /// For datamovers: the peer's key of the buffer (iSER: the STag, an rkey).
  [[nodiscard]] constexpr std::uint32_t key() const noexcept { return key_; }
  /// For datamovers: the peer's address of the buffer's first byte (iSER: the Base Offset).
  [[nodiscard]] constexpr std::uint64_t address() const noexcept { return address_; }
  friend bool operator==(const PeerBuffer&, const PeerBuffer&) = default;

 private:
  std::uint32_t key_ = 0;
  std::uint64_t address_ = 0;
};

/// A received PDU. `data` views where the data segment landed: the span the DataPlacement chose,
/// or the datamover's scratch buffer, which stays valid until the next receive() call.
struct PduIn {
  iscsi::Bhs bhs{};
  std::vector<std::byte> ahs;  ///< raw AHS area (TotalAHSLength × 4 bytes)
  std::span<std::byte> data;
  /// SCSI Command PDUs on a transport that moves the data itself (iSER): the initiator's read buffer
  /// — byte 0 of the read data goes to its first byte — and its write buffer, whose first byte is
  /// the first after the immediate and unsolicited data (RFC 7145 §9.2: Read/Write STag and Base
  /// Offset, RSV/WSV set; Linux iser_prepare_write_cmd). Absent on TCP.
  std::optional<PeerBuffer> peer_read;
  std::optional<PeerBuffer> peer_write;
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

}  // namespace iserkit::datamover

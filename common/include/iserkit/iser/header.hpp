// iSER wire codecs (RFC 7145): the 28-byte iSER header in front of every iSCSI control-type PDU
// (§9.2), the Hello/HelloReply messages (§9.3, §9.4), and the RDMA CM private data of the
// connection request and reply (the "iSER CM REQ/REP" formats, Linux include/scsi/iser.h
// `struct iser_cm_hdr`). Layer 1: pure functions over byte spans, shared by both ends.
//
// Checked against: RFC 7145 (field names), Linux include/scsi/iser.h (`struct iser_ctrl`, flag
// values), Wireshark epan/dissectors/packet-iser.c (ISER_HDR_SZ = 1+3+4+8+4+8, Hello/HelloReply
// layout, version nibbles = 10), tgt usr/iscsi/iser.c (how a target uses the STags and VAs).
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "iserkit/common/bytes.hpp"
#include "iserkit/common/result.hpp"

namespace iserkit::iser {

/// Size of the iSER header on the wire, bytes (RFC 7145 §9.2).
inline constexpr std::size_t header_size = 28;
/// Size of the iSER header plus the iSCSI BHS, bytes: the fixed part of every control-type PDU.
inline constexpr std::size_t headers_size = header_size + 48;
/// The only iSER protocol version (RFC 7145 §9.3: MaxVer/MinVer/CurVer = 10).
inline constexpr std::uint8_t protocol_version = 10;

/// The opcode in the high nibble of the first byte (RFC 7145 §9.1).
enum class Opcode : std::uint8_t {
  iscsi_control = 0x1,  ///< an iSCSI control-type PDU follows the header
  hello = 0x2,          ///< iSER Hello (iWARP-style connection setup; unused on IB/RoCE)
  hello_reply = 0x3,    ///< iSER HelloReply
};

/// Flag bits of byte 0 (RFC 7145 §9.2, Linux ISER_WSV/ISER_RSV; §9.4 REJ).
inline constexpr std::uint8_t flag_wsv = 0x08;  ///< Write STag Valid
inline constexpr std::uint8_t flag_rsv = 0x04;  ///< Read STag Valid
inline constexpr std::uint8_t flag_rej = 0x01;  ///< HelloReply: the target rejects the connection

/// The iSER header of an iSCSI control-type PDU (RFC 7145 §9.2).
/// Write STag/Base Offset: the initiator's buffer the target RDMA-reads solicited write data from.
/// Read STag/Base Offset: the initiator's buffer the target RDMA-writes read data into.
/// With ZBVA not in use (every deployed stack), the base offsets are the initiator's virtual
/// addresses: read_va is where byte 0 of the read data goes; write_va is where the first byte
/// after the immediate and unsolicited data lives (Linux iser_prepare_write_cmd: VA + unsol_sz).
struct Header {
  bool write_valid = false;    ///< WSV
  bool read_valid = false;     ///< RSV
  std::uint32_t write_stag = 0;
  std::uint64_t write_base_offset = 0;
  std::uint32_t read_stag = 0;
  std::uint64_t read_base_offset = 0;
  friend bool operator==(const Header&, const Header&) = default;
};

/// Encodes `h` as an iSCSI control-type iSER header into the 28 bytes at `out`.
/// Fields whose valid bit is clear are written as zero (RFC 7145 §9.2: reserved when not valid).
void encode_header(const Header& h, std::span<std::byte, header_size> out) noexcept;

/// Decodes the header of a received control-type PDU. STags/offsets whose valid bit is clear are
/// returned as zero. Errors: errc::malformed_pdu when `in` is shorter than 28 bytes or the opcode
/// is not "iSCSI control-type PDU" (Hello messages are decoded with decode_hello*).
Result<Header> decode_header(ConstByteSpan in) noexcept;

/// The opcode nibble of a received iSER message (errc::malformed_pdu for an empty span or an
/// unknown opcode).
Result<Opcode> peek_opcode(ConstByteSpan in) noexcept;

/// iSER Hello (RFC 7145 §9.3): sent by the initiator as the first message on iWARP.
struct Hello {
  std::uint8_t max_version = protocol_version;  ///< MaxVer, 4 bits
  std::uint8_t min_version = protocol_version;  ///< MinVer, 4 bits
  std::uint16_t ird = 0;                         ///< iSER-IRD: inbound RDMA Read queue depth
  friend bool operator==(const Hello&, const Hello&) = default;
};
/// iSER HelloReply (RFC 7145 §9.4): the target's answer.
struct HelloReply {
  bool reject = false;                             ///< REJ
  std::uint8_t max_version = protocol_version;     ///< MaxVer, 4 bits
  std::uint8_t current_version = protocol_version; ///< CurVer, 4 bits
  std::uint16_t ord = 0;                           ///< iSER-ORD: outbound RDMA Read queue depth
  friend bool operator==(const HelloReply&, const HelloReply&) = default;
};
/// Encodes a Hello into a full 28-byte header (the bytes after IRD are reserved, zero).
void encode_hello(const Hello& h, std::span<std::byte, header_size> out) noexcept;
/// Encodes a HelloReply into a full 28-byte header (reserved bytes zero).
void encode_hello_reply(const HelloReply& h, std::span<std::byte, header_size> out) noexcept;
/// Decodes a Hello. Errors: errc::malformed_pdu (short, wrong opcode, a version nibble > 15 cannot
/// occur; MaxVer < MinVer is malformed).
Result<Hello> decode_hello(ConstByteSpan in) noexcept;
/// Decodes a HelloReply. Errors: errc::malformed_pdu (short or wrong opcode).
Result<HelloReply> decode_hello_reply(ConstByteSpan in) noexcept;

/// The iSER part of the RDMA CM private data (Linux `struct iser_cm_hdr`: one flags byte and three
/// reserved bytes; librdmacm adds the IP CM header itself for RDMA_PS_TCP).
inline constexpr std::size_t cm_private_data_size = 4;

/// Connection request private data, sent by the initiator (rdma_connect).
struct CmRequest {
  /// ZBVA not supported: the base offsets in iSER headers are virtual addresses. Always set by
  /// iserkit, as by Linux ib_iser and libiscsi (Linux ISER_ZBVA_NOT_SUP 0x80).
  bool zbva_not_supported = true;
  /// The initiator does not want its STags invalidated by Send with Invalidate (0x40). iserkit
  /// sets it: its STags belong to long-lived registered slabs shared by many commands.
  bool send_with_invalidate_not_supported = true;
  friend bool operator==(const CmRequest&, const CmRequest&) = default;
};
/// Connection reply private data, sent by the target (rdma_accept).
struct CmReply {
  bool zbva_not_used = true;                 ///< Linux ISERT_ZBVA_NOT_USED 0x80
  bool send_with_invalidate_not_used = true; ///< Linux ISERT_SEND_W_INV_NOT_USED 0x40
  friend bool operator==(const CmReply&, const CmReply&) = default;
};
std::array<std::byte, cm_private_data_size> encode_cm_request(const CmRequest& r) noexcept;
std::array<std::byte, cm_private_data_size> encode_cm_reply(const CmReply& r) noexcept;
/// Decodes request private data. A peer that sent none (or fewer than 4 bytes — librdmacm may
/// also pad to the transport's size) is treated as the Linux defaults: nullopt.
std::optional<CmRequest> decode_cm_request(ConstByteSpan in) noexcept;
/// Decodes reply private data; nullopt when absent (e.g. tgtd sends none).
std::optional<CmReply> decode_cm_reply(ConstByteSpan in) noexcept;

}  // namespace iserkit::iser

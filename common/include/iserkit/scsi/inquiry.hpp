// Data-in formats of the identification and capacity commands, encoded by the target and parsed by
// the initiator: standard INQUIRY data (SPC-5 §6.6.2), VPD pages 0x00 (§7.7.13), 0x80 (§7.7.15),
// 0x83 (§7.7.6), 0xb0 block limits (SBC-4 §6.6.4), 0xb1 block device characteristics (§6.6.2),
// 0xb2 logical block provisioning (§6.6.5), READ CAPACITY (10)/(16) data (SBC-4 §5.20.2, §5.21.2)
// and REPORT LUNS data (SPC-5 §6.33.2).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "iserkit/common/bytes.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/scsi/lun.hpp"
#include "iserkit/scsi/opcodes.hpp"

namespace iserkit::scsi {

/// VPD page codes (SPC-5 §7.7, SBC-4 §6.6).
namespace vpd {
inline constexpr std::uint8_t supported_pages = 0x00;
inline constexpr std::uint8_t unit_serial_number = 0x80;
inline constexpr std::uint8_t device_identification = 0x83;
inline constexpr std::uint8_t block_limits = 0xb0;
inline constexpr std::uint8_t block_device_characteristics = 0xb1;
inline constexpr std::uint8_t logical_block_provisioning = 0xb2;
}  // namespace vpd

/// Standard INQUIRY data (SPC-5 §6.6.2). Strings are ASCII without trailing spaces after parsing;
/// when encoding they are space padded or truncated to 8/16/4 bytes.
struct StandardInquiry {
  PeripheralQualifier qualifier = PeripheralQualifier::connected;
  PeripheralType type = PeripheralType::direct_access_block;
  bool removable = false;     ///< RMB
  std::uint8_t version = 0x07;  ///< 0x07 = SPC-5
  bool hisup = true;          ///< hierarchical LUN addressing supported
  std::uint8_t tpgs = 0;      ///< target port group support (2 bits)
  bool third_party_copy = false;  ///< 3PC: third-party copy commands (EXTENDED COPY, SPC-4 §6.4) supported
  bool protect = false;       ///< PROTECT: protection information supported
  bool cmdque = true;         ///< command queuing
  std::string vendor;         ///< T10 VENDOR IDENTIFICATION, 8 bytes
  std::string product;        ///< PRODUCT IDENTIFICATION, 16 bytes
  std::string revision;       ///< PRODUCT REVISION LEVEL, 4 bytes
  std::vector<std::uint16_t> version_descriptors;  ///< up to 8 (bytes 58..73)
};
/// Size in bytes of encoded standard INQUIRY data without version descriptors (SPC-5: at least 36).
inline constexpr std::size_t standard_inquiry_min_size_bytes = 36;
/// Encodes standard INQUIRY data into a new buffer (36 bytes, or 74 + 22 reserved = 96 with version
/// descriptors). The caller truncates to the allocation length. SPC-5 §6.6.2.
std::vector<std::byte> encode_standard_inquiry(const StandardInquiry& d);
/// Parses standard INQUIRY data. Errors: errc::malformed_pdu when shorter than 36 bytes.
Result<StandardInquiry> parse_standard_inquiry(ConstByteSpan data);

/// Builds a VPD page: 4-byte header (qualifier/type, page code, 16-bit page length) + `payload`.
/// SPC-5 §7.7.1.
std::vector<std::byte> encode_vpd_page(std::uint8_t page_code, ConstByteSpan payload,
                                       PeripheralType type = PeripheralType::direct_access_block);
/// Checks a VPD page's header: page code matches and the page length fits in `data`.
/// Returns: the payload (bytes after the 4-byte header), or errc::malformed_pdu.
Result<ConstByteSpan> vpd_payload(ConstByteSpan data, std::uint8_t page_code);

/// Parses VPD 0x00: the list of supported page codes. SPC-5 §7.7.13.
Result<std::vector<std::uint8_t>> parse_supported_vpd_pages(ConstByteSpan data);
/// Parses VPD 0x80: the PRODUCT SERIAL NUMBER (trailing spaces removed). SPC-5 §7.7.15.
Result<std::string> parse_unit_serial_number(ConstByteSpan data);

/// Designator types of VPD 0x83 (SPC-5 §7.7.6.1, table 488).
enum class DesignatorType : std::uint8_t {
  vendor_specific = 0x0, t10_vendor_id = 0x1, eui64 = 0x2, naa = 0x3,
  relative_target_port = 0x4, target_port_group = 0x5, logical_unit_group = 0x6,
  md5_logical_unit = 0x7, scsi_name_string = 0x8, protocol_specific_port = 0x9, uuid = 0xa,
};
/// Code sets of a designator (SPC-5 table 486).
enum class CodeSet : std::uint8_t { binary = 1, ascii = 2, utf8 = 3 };
/// Association of a designator (SPC-5 table 487).
enum class Association : std::uint8_t { logical_unit = 0, target_port = 1, target_device = 2 };

/// One designation descriptor of VPD 0x83 (SPC-5 §7.7.6.1).
struct Designator {
  CodeSet code_set = CodeSet::binary;
  DesignatorType type = DesignatorType::naa;
  Association association = Association::logical_unit;
  std::uint8_t protocol_identifier = 0;  ///< valid when piv; 5 = iSCSI
  bool piv = false;                      ///< protocol identifier valid
  std::vector<std::byte> value;          ///< the designator bytes
  friend bool operator==(const Designator&, const Designator&) = default;
};
/// Encodes designation descriptors as the VPD 0x83 payload (without the page header).
std::vector<std::byte> encode_designators(const std::vector<Designator>& designators);
/// Parses VPD 0x83 (whole page with header). SPC-5 §7.7.6.
Result<std::vector<Designator>> parse_device_identification(ConstByteSpan data);
/// A short name for a designator type ("naa", "t10", "eui64", "scsi-name", …; SPC-5 table 592).
std::string_view designator_type_name(DesignatorType type) noexcept;
/// One designator as text: "<type> <value>", the value in lowercase hex for the binary code set and
/// as is for ASCII/UTF-8 with NUL padding trimmed (SPC-5 §7.7.6.1). The form `iserkit inquiry`
/// prints and the FUSE view's xattrs carry.
std::string designator_text(const Designator& designator);
/// Every designator's designator_text(), in order, with `separator` between them ("" for none):
/// the FUSE view's xattr (one a line) and the initiator's multipath messages.
std::string designators_text(const std::vector<Designator>& designators, std::string_view separator);

/// VPD 0xb0 Block Limits (SBC-4 §6.6.4, table 262). All lengths are in logical blocks; 0 = no limit
/// reported.
struct BlockLimits {
  bool wsnz = false;                              ///< WRITE SAME with zero blocks is not supported
  std::uint8_t maximum_compare_and_write_length = 0;  ///< logical blocks; 0 = COMPARE AND WRITE not supported
  std::uint16_t optimal_transfer_length_granularity = 0;
  std::uint32_t maximum_transfer_length = 0;
  std::uint32_t optimal_transfer_length = 0;
  std::uint32_t maximum_prefetch_length = 0;
  std::uint32_t maximum_unmap_lba_count = 0;
  std::uint32_t maximum_unmap_block_descriptor_count = 0;
  std::uint32_t optimal_unmap_granularity = 0;
  bool ugavalid = false;
  std::uint32_t unmap_granularity_alignment = 0;
  std::uint64_t maximum_write_same_length = 0;
  std::uint32_t maximum_atomic_transfer_length = 0;       ///< blocks; 0 = WRITE ATOMIC not supported
  std::uint32_t atomic_alignment = 0;                     ///< blocks; 0 = any
  std::uint32_t atomic_transfer_length_granularity = 0;   ///< blocks; 0 = any
  std::uint32_t maximum_atomic_transfer_length_with_atomic_boundary = 0;
  std::uint32_t maximum_atomic_boundary_size = 0;
  friend bool operator==(const BlockLimits&, const BlockLimits&) = default;
};
/// Size in bytes of the 0xb0 page (header + 0x3c).
inline constexpr std::size_t block_limits_page_size_bytes = 64;
/// Encodes the whole 0xb0 page (64 bytes).
std::vector<std::byte> encode_block_limits(const BlockLimits& b);
/// Parses the 0xb0 page. Errors: errc::malformed_pdu when shorter than 64 bytes or the wrong page.
Result<BlockLimits> parse_block_limits(ConstByteSpan data);

/// VPD 0xb1 Block Device Characteristics (SBC-4 §6.6.2).
struct BlockDeviceCharacteristics {
  std::uint16_t medium_rotation_rate = 1;  ///< 1 = non-rotating medium (solid state)
  std::uint8_t nominal_form_factor = 0;    ///< 0 = not reported
  /// WABEREQ (2 bits): what a read of a block after a SANITIZE BLOCK ERASE and before it is written
  /// returns: 0 not reported, 1 GOOD status with data, 2 MEDIUM ERROR, 3 MEDIUM ERROR / WRITE AFTER
  /// SANITIZE REQUIRED (SBC-4 §6.6.2).
  std::uint8_t wabereq = 0;
  /// WACEREQ (2 bits): the same after a SANITIZE CRYPTOGRAPHIC ERASE.
  std::uint8_t wacereq = 0;
  friend bool operator==(const BlockDeviceCharacteristics&, const BlockDeviceCharacteristics&) = default;
};
/// Encodes the whole 0xb1 page (64 bytes).
std::vector<std::byte> encode_block_device_characteristics(const BlockDeviceCharacteristics& b);
/// Parses the 0xb1 page. Errors: errc::malformed_pdu.
Result<BlockDeviceCharacteristics> parse_block_device_characteristics(ConstByteSpan data);

/// Provisioning types (SBC-4 table 266).
enum class ProvisioningType : std::uint8_t { full = 0, resource = 1, thin = 2 };
/// VPD 0xb2 Logical Block Provisioning (SBC-4 §6.6.5).
struct LogicalBlockProvisioning {
  std::uint8_t threshold_exponent = 0;
  bool lbpu = false;     ///< UNMAP supported
  bool lbpws = false;    ///< WRITE SAME (16) with UNMAP supported
  bool lbpws10 = false;  ///< WRITE SAME (10) with UNMAP supported
  std::uint8_t lbprz = 0;  ///< 3 bits; 1 = unmapped blocks read as zero
  bool anc_sup = false;  ///< ANCHOR supported
  bool dp = false;       ///< a provisioning group descriptor is present (never, here)
  ProvisioningType provisioning_type = ProvisioningType::full;
  friend bool operator==(const LogicalBlockProvisioning&, const LogicalBlockProvisioning&) = default;
};
/// Encodes the whole 0xb2 page (8 bytes: header + 4).
std::vector<std::byte> encode_logical_block_provisioning(const LogicalBlockProvisioning& p);
/// Parses the 0xb2 page. Errors: errc::malformed_pdu.
Result<LogicalBlockProvisioning> parse_logical_block_provisioning(ConstByteSpan data);

/// The mode parameter header of MODE SENSE (6) or (10) data (SPC-5 §7.5.5, tables 446 and 447),
/// with the direct-access DEVICE-SPECIFIC PARAMETER decoded (SBC-4 §6.5.1, table 241).
struct ModeParameterHeader {
  std::uint16_t mode_data_length_bytes = 0;       ///< MODE DATA LENGTH (bytes after the field itself)
  std::uint8_t medium_type = 0;
  bool write_protected = false;                   ///< WP: the medium is write-protected
  bool dpofua = false;                            ///< DPOFUA: the unit honours DPO and FUA bits
  std::uint16_t block_descriptor_length_bytes = 0;  ///< BLOCK DESCRIPTOR LENGTH
  friend bool operator==(const ModeParameterHeader&, const ModeParameterHeader&) = default;
};
/// Parses the header at the start of MODE SENSE parameter data; `ten` = the data came from
/// MODE SENSE (10) (8-byte header) rather than (6) (4-byte header). Only the header is read, so a
/// truncated page list is fine. Errors: errc::malformed_pdu when `data` is shorter than the header.
Result<ModeParameterHeader> parse_mode_parameter_header(ConstByteSpan data, bool ten);

/// READ CAPACITY (10) parameter data (SBC-4 §5.20.2).
struct ReadCapacity10Data {
  std::uint32_t last_lba = 0;          ///< RETURNED LOGICAL BLOCK ADDRESS; 0xffffffff = use (16)
  std::uint32_t block_length_bytes = 0;
  friend bool operator==(ReadCapacity10Data, ReadCapacity10Data) = default;
};
/// Size of READ CAPACITY (10) data in bytes.
inline constexpr std::size_t read_capacity10_size_bytes = 8;
/// Encodes READ CAPACITY (10) data into `out` (at least 8 bytes).
void encode_read_capacity10(const ReadCapacity10Data& d, ByteSpan out) noexcept;
/// Parses READ CAPACITY (10) data. Errors: errc::malformed_pdu when shorter than 8 bytes.
Result<ReadCapacity10Data> parse_read_capacity10(ConstByteSpan data) noexcept;

/// READ CAPACITY (16) parameter data (SBC-4 §5.21.2).
struct ReadCapacity16Data {
  std::uint64_t last_lba = 0;
  std::uint32_t block_length_bytes = 0;
  std::uint8_t p_type = 0;
  bool prot_en = false;
  std::uint8_t p_i_exponent = 0;
  std::uint8_t logical_blocks_per_physical_block_exponent = 0;
  bool lbpme = false;  ///< logical block provisioning management enabled (thin)
  bool lbprz = false;  ///< unmapped blocks read as zeroes
  std::uint16_t lowest_aligned_lba = 0;
  friend bool operator==(ReadCapacity16Data, ReadCapacity16Data) = default;
};
/// Size of READ CAPACITY (16) data in bytes.
inline constexpr std::size_t read_capacity16_size_bytes = 32;
/// Encodes READ CAPACITY (16) data into `out` (at least 32 bytes).
void encode_read_capacity16(const ReadCapacity16Data& d, ByteSpan out) noexcept;
/// Parses READ CAPACITY (16) data. Errors: errc::malformed_pdu when shorter than 32 bytes.
Result<ReadCapacity16Data> parse_read_capacity16(ConstByteSpan data) noexcept;

/// Encodes REPORT LUNS parameter data: 8-byte header (LUN LIST LENGTH in bytes) + 8 bytes per LUN.
/// SPC-5 §6.33.2.
std::vector<std::byte> encode_report_luns(const std::vector<Lun>& luns);
/// Parses REPORT LUNS data; LUNs beyond the buffer (truncated by the allocation length) are omitted.
/// Errors: errc::malformed_pdu when shorter than the 8-byte header.
Result<std::vector<Lun>> parse_report_luns(ConstByteSpan data);
/// The total size the full REPORT LUNS data would need, read from the header (to retry with a
/// larger allocation length). Errors: errc::malformed_pdu when shorter than 4 bytes.
Result<std::uint32_t> report_luns_full_size(ConstByteSpan data) noexcept;

}  // namespace iserkit::scsi

// GET LBA STATUS for the initiator (SBC-4 §5.8): the CDB builder and the parameter data parser.
// The target side parses the CDB in block_cdb.hpp and builds the data in target/src/scsi.
#pragma once

#include <cstdint>
#include <vector>

#include "iserkit/common/bytes.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/scsi/cdb.hpp"

namespace iserkit::scsi {

/// Size of the GET LBA STATUS parameter data header and of one LBA status descriptor, bytes
/// (SBC-4 §5.8.2, §5.8.3).
inline constexpr std::size_t lba_status_header_bytes = 8;
inline constexpr std::size_t lba_status_descriptor_bytes = 16;

/// PROVISIONING STATUS of an LBA status descriptor (SBC-4 §5.8.3, table "PROVISIONING STATUS").
enum class ProvisioningStatus : std::uint8_t {
  mapped = 0x0,        ///< mapped, or unknown
  deallocated = 0x1,   ///< deallocated
  anchored = 0x2,      ///< anchored
  mapped_or_unknown = 0x3,  ///< "mapped or unknown" (SBC-4 r17 and later)
};

/// One LBA status descriptor: `blocks` logical blocks from `lba` share `status`.
struct LbaStatusDescriptor {
  std::uint64_t lba = 0;       ///< LBA STATUS LOGICAL BLOCK ADDRESS
  std::uint32_t blocks = 0;    ///< NUMBER OF LOGICAL BLOCKS
  std::uint8_t provisioning_status = 0;  ///< low 4 bits of byte 12 (a ProvisioningStatus, as sent)
};

/// GET LBA STATUS (16) (SERVICE ACTION IN (16), service action 12h): `lba` is the STARTING LOGICAL
/// BLOCK ADDRESS, `allocation_length` in bytes (header + 16 bytes per descriptor wanted).
Cdb get_lba_status16(std::uint64_t lba, std::uint32_t allocation_length) noexcept;

/// Parses GET LBA STATUS parameter data (`in` = the bytes received). Descriptors beyond what was
/// received, or beyond PARAMETER DATA LENGTH, are left out. Errors: errc::invalid_argument when
/// fewer than 8 bytes arrived.
Result<std::vector<LbaStatusDescriptor>> parse_lba_status(ConstByteSpan in);

}  // namespace iserkit::scsi

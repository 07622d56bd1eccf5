// GET LBA STATUS: initiator-side CDB builder and parameter data parser (SBC-4 §5.8).
#include "iserkit/scsi/lba_status.hpp"

#include <algorithm>

#include "iserkit/common/errors.hpp"
#include "iserkit/scsi/opcodes.hpp"

namespace iserkit::scsi {

Cdb get_lba_status16(std::uint64_t lba, std::uint32_t allocation_length) noexcept {
  Cdb c;
  c.length = 16;
  store_u8(c.bytes.data(), static_cast<std::uint8_t>(Opcode::service_action_in16));
  store_u8(c.bytes.data() + 1, static_cast<std::uint8_t>(ServiceActionIn16::get_lba_status));
  store_be64(c.bytes.data() + 2, lba);
  store_be32(c.bytes.data() + 10, allocation_length);
  return c;
}

Result<std::vector<LbaStatusDescriptor>> parse_lba_status(ConstByteSpan in) {
  if (in.size() < lba_status_header_bytes) return fail(std::errc::invalid_argument);
  // PARAMETER DATA LENGTH counts the bytes after itself (n - 3).
  const std::uint64_t reported = std::uint64_t{load_be32(in.data())} + 4;
  const std::size_t usable = static_cast<std::size_t>(std::min<std::uint64_t>(reported, in.size()));
  std::vector<LbaStatusDescriptor> out;
  for (std::size_t pos = lba_status_header_bytes; pos + lba_status_descriptor_bytes <= usable;
       pos += lba_status_descriptor_bytes) {
    out.push_back({.lba = load_be64(in.data() + pos),
                   .blocks = load_be32(in.data() + pos + 8),
                   .provisioning_status = static_cast<std::uint8_t>(load_u8(in.data() + pos + 12) & 0x0f)});
  }
  return out;
}

}  // namespace iserkit::scsi

// The initiator's side of a copy manager (SPC-4 §5.17, LID1): VPD 0x8f (SPC-4 §7.8.17), the
// EXTENDED COPY (LID1) parameter list (§6.4.3, §6.4.5.1, §6.4.6.5) and CDB (§6.4.1), and the
// split of a copy into segments within the page's limits. See third_party_copy.hpp.
#include "iserkit/scsi/third_party_copy.hpp"

#include <algorithm>

#include "iserkit/common/errors.hpp"
#include "iserkit/scsi/inquiry.hpp"

namespace iserkit::scsi {
namespace {

// Third-party copy descriptor types (SPC-4 §7.8.17.1, table 595).
constexpr std::uint16_t supported_commands = 0x0001;
constexpr std::uint16_t parameter_data = 0x0004;
constexpr std::uint16_t supported_descriptors = 0x0008;
constexpr std::uint16_t general_copy_operations = 0x8001;

constexpr std::uint8_t extended_copy_opcode = 0x83;
constexpr std::uint8_t lid1_service_action = 0x00;
constexpr std::uint8_t block_to_block_code = 0x02;     // SPC-4 §6.4.6.5
constexpr std::uint8_t identification_cscd_code = 0xe4;  // SPC-4 §6.4.5.1
constexpr std::uint32_t segment_field_max_blocks = 0xffff;  // BLOCK DEVICE NUMBER OF BLOCKS is 16 bits

// Supported Commands body (after the 4-byte descriptor header): COMMANDS SUPPORTED LIST LENGTH,
// then per command OPERATION CODE, SERVICE ACTION LIST LENGTH, the service actions.
bool lists_extended_copy_lid1(ConstByteSpan body) {
  if (body.empty()) return false;
  const std::size_t list = std::min<std::size_t>(load_u8(body.data()), body.size() - 1);
  const std::byte* p = body.data() + 1;
  for (std::size_t i = 0; i + 2 <= list;) {
    const std::uint8_t opcode = load_u8(p + i);
    const std::size_t actions = load_u8(p + i + 1);
    const std::size_t end = std::min(list, i + 2 + actions);
    for (std::size_t a = i + 2; a < end; ++a)
      if (opcode == extended_copy_opcode && load_u8(p + a) == lid1_service_action) return true;
    i += 2 + actions;
  }
  return false;
}

void append_descriptor(std::vector<std::byte>& out, std::uint16_t type, std::vector<std::byte> body) {
  body.resize((body.size() + 3) / 4 * 4);  // SPC-4 §7.8.17.1: a multiple of four bytes
  const std::size_t at = out.size();
  out.resize(at + 4 + body.size());
  store_be16(out.data() + at, type);
  store_be16(out.data() + at + 2, static_cast<std::uint16_t>(body.size()));
  std::copy(body.begin(), body.end(), out.begin() + static_cast<std::ptrdiff_t>(at + 4));
}

}  // namespace

Result<ThirdPartyCopyLimits> parse_third_party_copy_vpd(ConstByteSpan page) {
  auto payload = vpd_payload(page, vpd::third_party_copy);
  if (!payload) return fail(payload.error());
  ThirdPartyCopyLimits l;
  const ConstByteSpan p = *payload;
  for (std::size_t at = 0; at < p.size();) {
    // A descriptor: TYPE (2 bytes), LENGTH (2 bytes, bytes after these four), body.
    if (p.size() - at < 4) return fail(errc::malformed_pdu);
    const std::uint16_t type = load_be16(p.data() + at);
    const std::size_t length = load_be16(p.data() + at + 2);
    if (p.size() - at - 4 < length) return fail(errc::malformed_pdu);
    const ConstByteSpan body = p.subspan(at + 4, length);
    switch (type) {
      case supported_commands:
        l.extended_copy_lid1 = l.extended_copy_lid1 || lists_extended_copy_lid1(body);
        break;
      case parameter_data:  // bytes 4..7 of the descriptor reserved (body 0..3)
        if (body.size() >= 16) {
          l.max_cscd_descriptors = load_be16(body.data() + 4);
          l.max_segment_descriptors = load_be16(body.data() + 6);
          l.max_descriptor_list_bytes = load_be32(body.data() + 8);
        }
        break;
      case supported_descriptors:
        if (!body.empty()) {
          const std::size_t n = std::min<std::size_t>(load_u8(body.data()), body.size() - 1);
          for (std::size_t i = 0; i < n; ++i) {
            const std::uint8_t code = load_u8(body.data() + 1 + i);
            l.block_to_block = l.block_to_block || code == block_to_block_code;
            l.identification_cscd = l.identification_cscd || code == identification_cscd_code;
          }
        }
        break;
      case general_copy_operations:
        if (body.size() >= 13) {
          l.max_segment_bytes = load_be32(body.data() + 8);
          l.data_segment_granularity_log2 = load_u8(body.data() + 12);
        }
        break;
      default:
        break;
    }
    at += 4 + length;
  }
  return l;
}

std::vector<std::byte> encode_third_party_copy_vpd(const ThirdPartyCopyLimits& l) {
  std::vector<std::byte> out;
  // Each body a vector of its own: GCC 12 misreads assign() over a shorter one (-Warray-bounds).
  std::vector<std::byte> commands{std::byte{0}};
  if (l.extended_copy_lid1)
    commands = {std::byte{3}, std::byte{extended_copy_opcode}, std::byte{1}, std::byte{lid1_service_action}};
  append_descriptor(out, supported_commands, std::move(commands));
  std::vector<std::byte> parameters(28);
  store_be16(parameters.data() + 4, l.max_cscd_descriptors);
  store_be16(parameters.data() + 6, l.max_segment_descriptors);
  store_be32(parameters.data() + 8, l.max_descriptor_list_bytes);
  append_descriptor(out, parameter_data, std::move(parameters));
  std::vector<std::byte> descriptors{std::byte{0}};
  if (l.block_to_block) descriptors.push_back(std::byte{block_to_block_code});
  if (l.identification_cscd) descriptors.push_back(std::byte{identification_cscd_code});
  descriptors[0] = static_cast<std::byte>(descriptors.size() - 1);
  append_descriptor(out, supported_descriptors, std::move(descriptors));
  std::vector<std::byte> general(32);
  store_be32(general.data() + 8, l.max_segment_bytes);
  store_u8(general.data() + 12, l.data_segment_granularity_log2);
  append_descriptor(out, general_copy_operations, std::move(general));
  return encode_vpd_page(vpd::third_party_copy, out);
}

std::vector<std::byte> encode_extended_copy_list(const ExtendedCopyList& list) {
  const std::size_t cscd_bytes = 2 * xcopy_cscd_bytes;
  const std::size_t segment_bytes = list.segments.size() * xcopy_block_segment_bytes;
  std::vector<std::byte> p(xcopy_header_bytes + cscd_bytes + segment_bytes);
  // SPC-4 §6.4.3.1: LIST IDENTIFIER, LIST ID USAGE (bits 4..3 of byte 1), the two list lengths.
  store_u8(p.data(), list.list_id);
  store_u8(p.data() + 1, list.discard_status ? 0x18 : 0x00);
  store_be16(p.data() + 2, static_cast<std::uint16_t>(cscd_bytes));
  store_be32(p.data() + 8, static_cast<std::uint32_t>(segment_bytes));
  for (int i = 0; i < 2; ++i) {
    // SPC-4 §6.4.5.1: E4h, peripheral device type 00h, a designation descriptor (binary code set,
    // association logical unit, designator type NAA) and the block device parameters.
    const auto& naa = i == 0 ? list.source_naa : list.destination_naa;
    std::byte* d = p.data() + xcopy_header_bytes + xcopy_cscd_bytes * static_cast<std::size_t>(i);
    store_u8(d, identification_cscd_code);
    store_u8(d + 4, 0x01);  // CODE SET binary
    store_u8(d + 5, 0x03);  // ASSOCIATION logical unit, DESIGNATOR TYPE NAA
    const std::size_t n = std::min<std::size_t>(naa.size(), 20);
    store_u8(d + 7, static_cast<std::uint8_t>(n));
    std::copy_n(naa.begin(), n, d + 8);
    store_be24(d + 29, list.block_size_bytes);  // DISK BLOCK LENGTH
  }
  std::byte* s = p.data() + xcopy_header_bytes + cscd_bytes;
  for (const auto& seg : list.segments) {
    // SPC-4 §6.4.6.5: 02h, DESCRIPTOR LENGTH 0018h, SOURCE/DESTINATION CSCD DESCRIPTOR ID 0 and 1.
    store_u8(s, block_to_block_code);
    store_be16(s + 2, 0x18);
    store_be16(s + 4, 0);
    store_be16(s + 6, 1);
    store_be16(s + 10, seg.blocks);
    store_be64(s + 12, seg.source_lba);
    store_be64(s + 20, seg.destination_lba);
    s += xcopy_block_segment_bytes;
  }
  return p;
}

Cdb extended_copy_cdb(std::uint32_t list_bytes) noexcept {
  Cdb c;
  c.length = 16;
  store_u8(c.bytes.data(), extended_copy_opcode);
  store_u8(c.bytes.data() + 1, lid1_service_action);
  store_be32(c.bytes.data() + 10, list_bytes);  // PARAMETER LIST LENGTH
  return c;
}

CopyCommandLimits copy_command_limits(const ThirdPartyCopyLimits& l, std::uint32_t block_size_bytes,
                                      std::uint64_t cap_bytes) noexcept {
  CopyCommandLimits c;
  if (block_size_bytes == 0) return c;
  std::uint64_t segment_blocks = segment_field_max_blocks;
  if (l.max_segment_bytes != 0) segment_blocks = std::min<std::uint64_t>(segment_blocks, l.max_segment_bytes / block_size_bytes);
  std::uint64_t segments = l.max_segment_descriptors;
  if (l.max_descriptor_list_bytes != 0) {
    const std::uint64_t room = l.max_descriptor_list_bytes > 2 * xcopy_cscd_bytes
                                   ? (l.max_descriptor_list_bytes - 2 * xcopy_cscd_bytes) / xcopy_block_segment_bytes
                                   : 0;
    segments = std::min(segments, room);
  }
  if (l.max_cscd_descriptors != 0 && l.max_cscd_descriptors < 2) segments = 0;
  if (cap_bytes != 0 && segment_blocks != 0) {
    const std::uint64_t cap_blocks = cap_bytes / block_size_bytes;
    segment_blocks = std::min(segment_blocks, cap_blocks);
    if (segment_blocks != 0) segments = std::min(segments, cap_blocks / segment_blocks);
  }
  c.max_segment_blocks = static_cast<std::uint32_t>(segment_blocks);
  c.max_segments = static_cast<std::uint16_t>(std::min<std::uint64_t>(segments, 0xffff));
  return c;
}

std::vector<CopySegment> split_copy_segments(std::uint64_t source_lba, std::uint64_t destination_lba,
                                             std::uint64_t blocks, const CopyCommandLimits& limits) {
  std::vector<CopySegment> out;
  if (limits.max_segment_blocks == 0) return out;
  for (std::uint64_t done = 0; done < blocks;) {
    const auto n = static_cast<std::uint16_t>(std::min<std::uint64_t>(limits.max_segment_blocks, blocks - done));
    out.push_back({.source_lba = source_lba + done, .destination_lba = destination_lba + done, .blocks = n});
    done += n;
  }
  return out;
}

}  // namespace iserkit::scsi

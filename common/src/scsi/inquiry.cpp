// Encoders and parsers for INQUIRY data (SPC-5 §6.6.2), VPD pages 0x00/0x80/0x83 (SPC-5 §7.7.13,
// §7.7.15, §7.7.6) and 0xb0/0xb1/0xb2 (SBC-4 §6.6.4, §6.6.2, §6.6.5), READ CAPACITY (10)/(16)
// parameter data (SBC-4 §5.20.2, §5.21.2) and REPORT LUNS parameter data (SPC-5 §6.33.2).
#include "iserkit/scsi/inquiry.hpp"

#include <algorithm>
#include <cstring>

#include "iserkit/common/errors.hpp"

namespace iserkit::scsi {
namespace {

void put_ascii(std::byte* p, std::size_t width, const std::string& s) {
  // SPC-5 §4.3.1: ASCII fields are left-aligned and padded with spaces.
  for (std::size_t i = 0; i < width; ++i) {
    p[i] = static_cast<std::byte>(i < s.size() ? s[i] : ' ');
  }
}

std::string get_ascii(const std::byte* p, std::size_t width) {
  std::string s(reinterpret_cast<const char*>(p), width);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\0')) s.pop_back();
  return s;
}

std::uint8_t peripheral_byte(PeripheralQualifier q, PeripheralType t) {
  return static_cast<std::uint8_t>((static_cast<std::uint8_t>(q) << 5) | (static_cast<std::uint8_t>(t) & 0x1f));
}

}  // namespace

std::vector<std::byte> encode_standard_inquiry(const StandardInquiry& d) {
  const bool with_descriptors = !d.version_descriptors.empty();
  std::vector<std::byte> out(with_descriptors ? 96 : standard_inquiry_min_size_bytes);
  std::byte* p = out.data();
  store_u8(p, peripheral_byte(d.qualifier, d.type));
  store_u8(p + 1, d.removable ? 0x80 : 0);
  store_u8(p + 2, d.version);
  // RESPONSE DATA FORMAT shall be 2 (SPC-5 §6.6.2); HISUP bit 4.
  store_u8(p + 3, static_cast<std::uint8_t>((d.hisup ? 0x10 : 0) | 0x02));
  store_u8(p + 4, static_cast<std::uint8_t>(out.size() - 5));  // ADDITIONAL LENGTH: n - 4
  store_u8(p + 5, static_cast<std::uint8_t>(((d.tpgs & 0x3) << 4) | (d.third_party_copy ? 0x08 : 0) | (d.protect ? 0x01 : 0)));
  store_u8(p + 7, d.cmdque ? 0x02 : 0);
  put_ascii(p + 8, 8, d.vendor);
  put_ascii(p + 16, 16, d.product);
  put_ascii(p + 32, 4, d.revision);
  if (with_descriptors) {
    for (std::size_t i = 0; i < d.version_descriptors.size() && i < 8; ++i)
      store_be16(p + 58 + 2 * i, d.version_descriptors[i]);
  }
  return out;
}

Result<StandardInquiry> parse_standard_inquiry(ConstByteSpan data) {
  if (data.size() < standard_inquiry_min_size_bytes) return fail(errc::malformed_pdu);
  const std::byte* p = data.data();
  StandardInquiry d;
  d.qualifier = static_cast<PeripheralQualifier>(load_u8(p) >> 5);
  d.type = static_cast<PeripheralType>(load_u8(p) & 0x1f);
  d.removable = (load_u8(p + 1) & 0x80) != 0;
  d.version = load_u8(p + 2);
  d.hisup = (load_u8(p + 3) & 0x10) != 0;
  d.tpgs = static_cast<std::uint8_t>((load_u8(p + 5) >> 4) & 0x3);
  d.third_party_copy = (load_u8(p + 5) & 0x08) != 0;
  d.protect = (load_u8(p + 5) & 0x01) != 0;
  d.cmdque = (load_u8(p + 7) & 0x02) != 0;
  d.vendor = get_ascii(p + 8, 8);
  d.product = get_ascii(p + 16, 16);
  d.revision = get_ascii(p + 32, 4);
  const std::size_t total = std::min<std::size_t>(data.size(), 5u + load_u8(p + 4));
  for (std::size_t off = 58; off + 2 <= total && off < 74; off += 2) {
    const std::uint16_t v = load_be16(p + off);
    if (v != 0) d.version_descriptors.push_back(v);
  }
  return d;
}

std::vector<std::byte> encode_vpd_page(std::uint8_t page_code, ConstByteSpan payload, PeripheralType type) {
  std::vector<std::byte> out(4 + payload.size());
  store_u8(out.data(), peripheral_byte(PeripheralQualifier::connected, type));
  store_u8(out.data() + 1, page_code);
  store_be16(out.data() + 2, static_cast<std::uint16_t>(payload.size()));
  if (!payload.empty()) std::memcpy(out.data() + 4, payload.data(), payload.size());
  return out;
}

Result<ConstByteSpan> vpd_payload(ConstByteSpan data, std::uint8_t page_code) {
  if (data.size() < 4 || load_u8(data.data() + 1) != page_code) return fail(errc::malformed_pdu);
  const std::size_t length = load_be16(data.data() + 2);
  if (4 + length > data.size()) return fail(errc::malformed_pdu);
  return data.subspan(4, length);
}

Result<std::vector<std::uint8_t>> parse_supported_vpd_pages(ConstByteSpan data) {
  auto payload = vpd_payload(data, vpd::supported_pages);
  if (!payload) return fail(payload.error());
  std::vector<std::uint8_t> pages;
  for (std::byte b : *payload) pages.push_back(static_cast<std::uint8_t>(b));
  return pages;
}

Result<std::string> parse_unit_serial_number(ConstByteSpan data) {
  auto payload = vpd_payload(data, vpd::unit_serial_number);
  if (!payload) return fail(payload.error());
  return get_ascii(payload->data(), payload->size());
}

std::vector<std::byte> encode_designators(const std::vector<Designator>& designators) {
  std::vector<std::byte> out;
  for (const auto& d : designators) {
    const std::size_t off = out.size();
    out.resize(off + 4 + d.value.size());
    std::byte* p = out.data() + off;
    store_u8(p, static_cast<std::uint8_t>((d.protocol_identifier << 4) | static_cast<std::uint8_t>(d.code_set)));
    store_u8(p + 1, static_cast<std::uint8_t>((d.piv ? 0x80 : 0) | (static_cast<std::uint8_t>(d.association) << 4) |
                                              static_cast<std::uint8_t>(d.type)));
    store_u8(p + 2, 0);
    store_u8(p + 3, static_cast<std::uint8_t>(d.value.size()));
    if (!d.value.empty()) std::memcpy(p + 4, d.value.data(), d.value.size());
  }
  return out;
}

Result<std::vector<Designator>> parse_device_identification(ConstByteSpan data) {
  auto payload = vpd_payload(data, vpd::device_identification);
  if (!payload) return fail(payload.error());
  std::vector<Designator> out;
  const std::byte* p = payload->data();
  std::size_t off = 0;
  while (off + 4 <= payload->size()) {
    const std::size_t len = load_u8(p + off + 3);
    if (off + 4 + len > payload->size()) return fail(errc::malformed_pdu);
    Designator d;
    d.protocol_identifier = static_cast<std::uint8_t>(load_u8(p + off) >> 4);
    d.code_set = static_cast<CodeSet>(load_u8(p + off) & 0x0f);
    d.piv = (load_u8(p + off + 1) & 0x80) != 0;
    d.association = static_cast<Association>((load_u8(p + off + 1) >> 4) & 0x3);
    d.type = static_cast<DesignatorType>(load_u8(p + off + 1) & 0x0f);
    d.value.assign(p + off + 4, p + off + 4 + len);
    out.push_back(std::move(d));
    off += 4 + len;
  }
  return out;
}

std::vector<std::byte> encode_block_limits(const BlockLimits& b) {
  std::vector<std::byte> payload(block_limits_page_size_bytes - 4);
  std::byte* p = payload.data() - 4;  // so offsets below match SBC-4 table 262 byte numbers
  store_u8(p + 4, b.wsnz ? 0x01 : 0);
  store_u8(p + 5, b.maximum_compare_and_write_length);
  store_be16(p + 6, b.optimal_transfer_length_granularity);
  store_be32(p + 8, b.maximum_transfer_length);
  store_be32(p + 12, b.optimal_transfer_length);
  store_be32(p + 16, b.maximum_prefetch_length);
  store_be32(p + 20, b.maximum_unmap_lba_count);
  store_be32(p + 24, b.maximum_unmap_block_descriptor_count);
  store_be32(p + 28, b.optimal_unmap_granularity);
  store_be32(p + 32, (b.ugavalid ? 0x80000000u : 0) | (b.unmap_granularity_alignment & 0x7fffffffu));
  store_be64(p + 36, b.maximum_write_same_length);
  // SBC-4 table 262, bytes 44-63: atomic write limits.
  store_be32(p + 44, b.maximum_atomic_transfer_length);
  store_be32(p + 48, b.atomic_alignment);
  store_be32(p + 52, b.atomic_transfer_length_granularity);
  store_be32(p + 56, b.maximum_atomic_transfer_length_with_atomic_boundary);
  store_be32(p + 60, b.maximum_atomic_boundary_size);
  return encode_vpd_page(vpd::block_limits, payload);
}

Result<BlockLimits> parse_block_limits(ConstByteSpan data) {
  auto payload = vpd_payload(data, vpd::block_limits);
  if (!payload) return fail(payload.error());
  if (payload->size() < block_limits_page_size_bytes - 4) return fail(errc::malformed_pdu);
  const std::byte* p = data.data();
  BlockLimits b;
  b.wsnz = (load_u8(p + 4) & 0x01) != 0;
  b.maximum_compare_and_write_length = load_u8(p + 5);
  b.optimal_transfer_length_granularity = load_be16(p + 6);
  b.maximum_transfer_length = load_be32(p + 8);
  b.optimal_transfer_length = load_be32(p + 12);
  b.maximum_prefetch_length = load_be32(p + 16);
  b.maximum_unmap_lba_count = load_be32(p + 20);
  b.maximum_unmap_block_descriptor_count = load_be32(p + 24);
  b.optimal_unmap_granularity = load_be32(p + 28);
  const std::uint32_t uga = load_be32(p + 32);
  b.ugavalid = (uga & 0x80000000u) != 0;
  b.unmap_granularity_alignment = uga & 0x7fffffffu;
  b.maximum_write_same_length = load_be64(p + 36);
  b.maximum_atomic_transfer_length = load_be32(p + 44);
  b.atomic_alignment = load_be32(p + 48);
  b.atomic_transfer_length_granularity = load_be32(p + 52);
  b.maximum_atomic_transfer_length_with_atomic_boundary = load_be32(p + 56);
  b.maximum_atomic_boundary_size = load_be32(p + 60);
  return b;
}

std::vector<std::byte> encode_block_device_characteristics(const BlockDeviceCharacteristics& b) {
  std::vector<std::byte> payload(0x3c);
  std::byte* p = payload.data() - 4;
  store_be16(p + 4, b.medium_rotation_rate);
  // Byte 7: WABEREQ (bits 7:6), WACEREQ (bits 5:4), NOMINAL FORM FACTOR (bits 3:0).
  store_u8(p + 7, static_cast<std::uint8_t>((b.wabereq & 0x03) << 6 | (b.wacereq & 0x03) << 4 | (b.nominal_form_factor & 0x0f)));
  return encode_vpd_page(vpd::block_device_characteristics, payload);
}

Result<BlockDeviceCharacteristics> parse_block_device_characteristics(ConstByteSpan data) {
  auto payload = vpd_payload(data, vpd::block_device_characteristics);
  if (!payload) return fail(payload.error());
  if (payload->size() < 4) return fail(errc::malformed_pdu);
  BlockDeviceCharacteristics b;
  b.medium_rotation_rate = load_be16(data.data() + 4);
  b.nominal_form_factor = load_u8(data.data() + 7) & 0x0f;
  b.wabereq = static_cast<std::uint8_t>(load_u8(data.data() + 7) >> 6 & 0x03);
  b.wacereq = static_cast<std::uint8_t>(load_u8(data.data() + 7) >> 4 & 0x03);
  return b;
}

std::vector<std::byte> encode_logical_block_provisioning(const LogicalBlockProvisioning& l) {
  std::vector<std::byte> payload(4);
  std::byte* p = payload.data() - 4;
  store_u8(p + 4, l.threshold_exponent);
  store_u8(p + 5, static_cast<std::uint8_t>((l.lbpu ? 0x80 : 0) | (l.lbpws ? 0x40 : 0) | (l.lbpws10 ? 0x20 : 0) |
                                            ((l.lbprz & 0x7) << 2) | (l.anc_sup ? 0x02 : 0) | (l.dp ? 0x01 : 0)));
  store_u8(p + 6, static_cast<std::uint8_t>(l.provisioning_type) & 0x7);
  return encode_vpd_page(vpd::logical_block_provisioning, payload);
}

Result<LogicalBlockProvisioning> parse_logical_block_provisioning(ConstByteSpan data) {
  auto payload = vpd_payload(data, vpd::logical_block_provisioning);
  if (!payload) return fail(payload.error());
  if (payload->size() < 4) return fail(errc::malformed_pdu);
  const std::byte* p = data.data();
  LogicalBlockProvisioning l;
  l.threshold_exponent = load_u8(p + 4);
  const std::uint8_t b5 = load_u8(p + 5);
  l.lbpu = (b5 & 0x80) != 0;
  l.lbpws = (b5 & 0x40) != 0;
  l.lbpws10 = (b5 & 0x20) != 0;
  l.lbprz = static_cast<std::uint8_t>((b5 >> 2) & 0x7);
  l.anc_sup = (b5 & 0x02) != 0;
  l.dp = (b5 & 0x01) != 0;
  l.provisioning_type = static_cast<ProvisioningType>(load_u8(p + 6) & 0x7);
  return l;
}

Result<ModeParameterHeader> parse_mode_parameter_header(ConstByteSpan data, bool ten) {
  const std::size_t header_bytes = ten ? 8 : 4;
  if (data.size() < header_bytes) return fail(errc::malformed_pdu);
  const std::byte* p = data.data();
  ModeParameterHeader h;
  // SPC-5 §7.5.5: (6) = length(1) medium(1) device-specific(1) bd-length(1);
  // (10) = length(2) medium(1) device-specific(1) LONGLBA(1) reserved(1) bd-length(2).
  h.mode_data_length_bytes = ten ? load_be16(p) : load_u8(p);
  h.medium_type = load_u8(p + (ten ? 2 : 1));
  const std::uint8_t device_specific = load_u8(p + (ten ? 3 : 2));
  // SBC-4 §6.5.1: WP is bit 7, DPOFUA bit 4 of the DEVICE-SPECIFIC PARAMETER.
  h.write_protected = (device_specific & 0x80) != 0;
  h.dpofua = (device_specific & 0x10) != 0;
  h.block_descriptor_length_bytes = ten ? load_be16(p + 6) : load_u8(p + 3);
  return h;
}

void encode_read_capacity10(const ReadCapacity10Data& d, ByteSpan out) noexcept {
  store_be32(out.data(), d.last_lba);
  store_be32(out.data() + 4, d.block_length_bytes);
}

Result<ReadCapacity10Data> parse_read_capacity10(ConstByteSpan data) noexcept {
  if (data.size() < read_capacity10_size_bytes) return fail(errc::malformed_pdu);
  return ReadCapacity10Data{load_be32(data.data()), load_be32(data.data() + 4)};
}

void encode_read_capacity16(const ReadCapacity16Data& d, ByteSpan out) noexcept {
  std::byte* p = out.data();
  std::memset(p, 0, read_capacity16_size_bytes);
  store_be64(p, d.last_lba);
  store_be32(p + 8, d.block_length_bytes);
  store_u8(p + 12, static_cast<std::uint8_t>(((d.p_type & 0x7) << 1) | (d.prot_en ? 1 : 0)));
  store_u8(p + 13, static_cast<std::uint8_t>(((d.p_i_exponent & 0xf) << 4) |
                                             (d.logical_blocks_per_physical_block_exponent & 0xf)));
  store_be16(p + 14, static_cast<std::uint16_t>((d.lbpme ? 0x8000 : 0) | (d.lbprz ? 0x4000 : 0) |
                                                (d.lowest_aligned_lba & 0x3fff)));
}

Result<ReadCapacity16Data> parse_read_capacity16(ConstByteSpan data) noexcept {
  if (data.size() < read_capacity16_size_bytes) return fail(errc::malformed_pdu);
  const std::byte* p = data.data();
  ReadCapacity16Data d;
  d.last_lba = load_be64(p);
  d.block_length_bytes = load_be32(p + 8);
  d.p_type = static_cast<std::uint8_t>((load_u8(p + 12) >> 1) & 0x7);
  d.prot_en = (load_u8(p + 12) & 0x01) != 0;
  d.p_i_exponent = static_cast<std::uint8_t>(load_u8(p + 13) >> 4);
  d.logical_blocks_per_physical_block_exponent = load_u8(p + 13) & 0xf;
  const std::uint16_t b14 = load_be16(p + 14);
  d.lbpme = (b14 & 0x8000) != 0;
  d.lbprz = (b14 & 0x4000) != 0;
  d.lowest_aligned_lba = b14 & 0x3fff;
  return d;
}

std::vector<std::byte> encode_report_luns(const std::vector<Lun>& luns) {
  std::vector<std::byte> out(8 + 8 * luns.size());
  store_be32(out.data(), static_cast<std::uint32_t>(8 * luns.size()));  // LUN LIST LENGTH in bytes
  for (std::size_t i = 0; i < luns.size(); ++i) luns[i].store(out.data() + 8 + 8 * i);
  return out;
}

Result<std::vector<Lun>> parse_report_luns(ConstByteSpan data) {
  if (data.size() < 8) return fail(errc::malformed_pdu);
  const std::size_t listed = load_be32(data.data()) / 8;
  const std::size_t present = std::min(listed, (data.size() - 8) / 8);
  std::vector<Lun> luns;
  luns.reserve(present);
  for (std::size_t i = 0; i < present; ++i) luns.push_back(Lun::load(data.data() + 8 + 8 * i));
  return luns;
}

Result<std::uint32_t> report_luns_full_size(ConstByteSpan data) noexcept {
  if (data.size() < 4) return fail(errc::malformed_pdu);
  return load_be32(data.data()) + 8;
}

std::string_view designator_type_name(DesignatorType t) noexcept {
  using T = DesignatorType;
  switch (t) {
    case T::vendor_specific: return "vendor-specific";
    case T::t10_vendor_id: return "t10";
    case T::eui64: return "eui64";
    case T::naa: return "naa";
    case T::relative_target_port: return "relative-target-port";
    case T::target_port_group: return "target-port-group";
    case T::logical_unit_group: return "logical-unit-group";
    case T::md5_logical_unit: return "md5";
    case T::scsi_name_string: return "scsi-name";
    case T::protocol_specific_port: return "protocol-specific";
    case T::uuid: return "uuid";
  }
  return "unknown";
}

std::string designator_text(const Designator& d) {
  std::string s(designator_type_name(d.type));
  s += ' ';
  if (d.code_set == CodeSet::binary) {
    static constexpr char digits[] = "0123456789abcdef";
    for (auto b : d.value) {
      s += digits[static_cast<unsigned>(b) >> 4];
      s += digits[static_cast<unsigned>(b) & 0xf];
    }
  } else {
    std::string text(reinterpret_cast<const char*>(d.value.data()), d.value.size());
    text.erase(text.find_last_not_of('\0') + 1);  // SPC-5 §7.7.6.1: ASCII values may be NUL padded
    if (auto nul = text.find('\0'); nul != std::string::npos) text.resize(nul);
    s += text;
  }
  return s;
}

std::string designators_text(const std::vector<Designator>& designators, std::string_view separator) {
  std::string s;
  for (const auto& d : designators) {
    if (!s.empty()) s += separator;
    s += designator_text(d);
  }
  return s;
}

}  // namespace iserkit::scsi

// ALUA codecs for both ends: REPORT TARGET PORT GROUPS CDB and parameter data (SPC-5 §6.36), the access states and
// their sense data (SPC-5 §5.16.2.4, §5.16.2.6), the target-port designators of VPD 0x83.
#include "iserkit/scsi/alua.hpp"

#include <algorithm>
#include <array>

#include "iserkit/common/errors.hpp"

namespace iserkit::scsi {

std::string_view to_string(AccessState state) noexcept {
  switch (state) {
    case AccessState::active_optimized: return "active/optimized";
    case AccessState::active_non_optimized: return "active/non-optimized";
    case AccessState::standby: return "standby";
    case AccessState::unavailable: return "unavailable";
    case AccessState::logical_block_dependent: return "lba-dependent";
    case AccessState::offline: return "offline";
    case AccessState::transitioning: return "transitioning";
  }
  return "unknown";
}

Cdb report_target_port_groups(const ReportTargetPortGroupsOptions& o) noexcept {
  Cdb c;
  c.length = 12;
  store_u8(c.bytes.data(), static_cast<std::uint8_t>(Opcode::maintenance_in));
  // SPC-5 §6.36.1: PARAMETER DATA FORMAT in bits 7..5 of byte 1, SERVICE ACTION 0Ah in bits 4..0.
  store_u8(c.bytes.data() + 1, static_cast<std::uint8_t>((o.extended_header ? 0x20 : 0x00) | 0x0a));
  store_be32(c.bytes.data() + 6, o.allocation_length);
  return c;
}

Result<ReportTargetPortGroupsOptions> parse_report_target_port_groups_cdb(ConstByteSpan cdb) {
  if (cdb.size() < 12) return fail(errc::invalid_argument);
  // SPC-5 §6.36.1: PARAMETER DATA FORMAT 000b (length only) or 001b (extended header); the rest
  // are reserved.
  const std::uint8_t format = load_u8(cdb.data() + 1) >> 5;
  if (format > 1) return fail(errc::invalid_argument);
  return ReportTargetPortGroupsOptions{.extended_header = format == 1, .allocation_length = load_be32(cdb.data() + 6)};
}

std::vector<std::byte> encode_report_target_port_groups(const std::vector<TargetPortGroupDescriptor>& groups,
                                                        const ReportTargetPortGroupsFormat& format) {
  std::vector<std::byte> data(format.extended_header ? 8 : 4);
  if (format.extended_header) store_u8(data.data() + 4, 0x10);  // FORMAT TYPE 001b, transition time 0
  for (const auto& g : groups) {
    const std::size_t ports = std::min<std::size_t>(g.relative_ports.size(), 255);
    std::array<std::byte, 8> d{};
    store_u8(d.data(), static_cast<std::uint8_t>((g.preferred ? 0x80 : 0) | (static_cast<std::uint8_t>(g.state) & 0x0f)));
    store_u8(d.data() + 1, format.supported_states);
    store_be16(d.data() + 2, g.id);
    store_u8(d.data() + 5, 0);  // STATUS CODE: no status available
    store_u8(d.data() + 7, static_cast<std::uint8_t>(ports));
    data.insert(data.end(), d.begin(), d.end());
    for (std::size_t i = 0; i < ports; ++i) {
      std::array<std::byte, 4> p{};
      store_be16(p.data() + 2, g.relative_ports[i]);
      data.insert(data.end(), p.begin(), p.end());
    }
  }
  store_be32(data.data(), static_cast<std::uint32_t>(data.size() - 4));
  return data;
}

Result<std::vector<TargetPortGroupDescriptor>> parse_report_target_port_groups(ConstByteSpan data) {
  if (data.size() < 4) return fail(errc::protocol_error);
  // SPC-5 §6.36.2: RETURN DATA LENGTH counts the bytes after itself; FORMAT TYPE 001b in byte 4
  // bits 6..4 marks the extended header (four more bytes).
  const std::size_t total = std::min<std::size_t>(data.size(), std::size_t{load_be32(data.data())} + 4);
  std::size_t pos = 4;
  if (total >= 8 && ((load_u8(data.data() + 4) >> 4) & 0x07) == 1) pos = 8;
  std::vector<TargetPortGroupDescriptor> groups;
  while (pos + 8 <= total) {
    const std::byte* d = data.data() + pos;
    TargetPortGroupDescriptor g;
    g.preferred = (load_u8(d) & 0x80) != 0;
    g.state = static_cast<AccessState>(load_u8(d) & 0x0f);
    g.id = load_be16(d + 2);
    const std::size_t ports = load_u8(d + 7);
    const std::size_t size = 8 + 4 * ports;
    if (pos + size > total) {
      // Cut by the allocation length: keep what fit whole. Past RETURN DATA LENGTH: malformed.
      if (total < std::size_t{load_be32(data.data())} + 4) break;
      return fail(errc::protocol_error);
    }
    for (std::size_t i = 0; i < ports; ++i) g.relative_ports.push_back(load_be16(d + 8 + 4 * i + 2));
    groups.push_back(std::move(g));
    pos += size;
  }
  return groups;
}

std::vector<std::byte> encode_set_target_port_groups(const std::vector<SetTargetPortGroup>& groups) {
  std::vector<std::byte> data(4 + 4 * groups.size());
  for (std::size_t i = 0; i < groups.size(); ++i) {
    std::byte* d = data.data() + 4 + 4 * i;
    store_u8(d, static_cast<std::uint8_t>(groups[i].state) & 0x0f);
    store_be16(d + 2, groups[i].id);
  }
  return data;
}

Cdb set_target_port_groups(std::uint32_t parameter_list_length) noexcept {
  Cdb c;
  c.length = 12;
  store_u8(c.bytes.data(), static_cast<std::uint8_t>(Opcode::maintenance_out));
  store_u8(c.bytes.data() + 1, 0x0a);  // SPC-4 §6.45.1: SERVICE ACTION 0Ah
  store_be32(c.bytes.data() + 6, parameter_list_length);
  return c;
}

Result<std::vector<SetTargetPortGroup>> parse_set_target_port_groups(ConstByteSpan data) {
  std::vector<SetTargetPortGroup> groups;
  if (data.empty()) return groups;
  // SPC-4 §6.45.2: a 4-byte header (reserved), then 4-byte descriptors.
  if (data.size() < 4 || (data.size() - 4) % 4 != 0) return fail(errc::invalid_argument);
  for (std::size_t pos = 4; pos < data.size(); pos += 4) {
    groups.push_back(SetTargetPortGroup{.id = load_be16(data.data() + pos + 2),
                                        .state = static_cast<AccessState>(load_u8(data.data() + pos) & 0x0f)});
  }
  return groups;
}

AluaCondition alua_condition(const ScsiResult& result) noexcept {
  if (result.status != Status::check_condition || !result.sense) return AluaCondition::none;
  const SenseData& s = *result.sense;
  if (s.key == SenseKey::unit_attention && s.asc == 0x2a && s.ascq == 0x06) return AluaCondition::state_changed;
  if (s.key == SenseKey::not_ready && s.asc == 0x04) {
    switch (s.ascq) {
      case 0x0a: return AluaCondition::transitioning;
      case 0x0b: return AluaCondition::standby;
      case 0x0c: return AluaCondition::unavailable;
      default: break;
    }
  }
  return AluaCondition::none;
}

std::vector<Designator> logical_unit_designators(const std::vector<Designator>& all) {
  std::vector<Designator> out;
  for (const auto& d : all)
    if (d.association == Association::logical_unit) out.push_back(d);
  return out;
}

namespace {
std::optional<std::uint16_t> port_designator(const std::vector<Designator>& all, DesignatorType type) noexcept {
  for (const auto& d : all) {
    // SPC-5 §7.7.6.5/§7.7.6.6: 4 bytes, the identifier in bytes 2..3.
    if (d.association == Association::target_port && d.type == type && d.value.size() >= 4)
      return load_be16(d.value.data() + 2);
  }
  return std::nullopt;
}
}  // namespace

std::optional<std::uint16_t> target_port_group_of(const std::vector<Designator>& all) noexcept {
  return port_designator(all, DesignatorType::target_port_group);
}
std::optional<std::uint16_t> relative_target_port_of(const std::vector<Designator>& all) noexcept {
  return port_designator(all, DesignatorType::relative_target_port);
}

}  // namespace iserkit::scsi

// SPC-5 commands of the target's device server: INQUIRY with standard data (SPC-5 §6.6.2) and VPD
// pages 0x00, 0x80, 0x83 (§7.7), 0x8f (SPC-4 §7.8.17, from extended_copy.cpp) plus SBC-4's 0xb0, 0xb1, 0xb2 (§6.6); REPORT LUNS (§6.33);
// REQUEST SENSE (§6.39); MODE SENSE (6)/(10) (§6.13, §6.14) with the caching (SBC-4 §6.5.5) and
// control (SPC-5 §7.5.8) mode pages; REPORT SUPPORTED OPERATION CODES (§6.35).
#include <algorithm>
#include <array>
#include <cstring>

#include "iserkit/scsi/alua.hpp"
#include "iserkit/scsi/inquiry.hpp"
#include "scsi/command_table.hpp"
#include "scsi/extended_copy.hpp"
#include "scsi/sanitize.hpp"
#include "scsi/device_state.hpp"
#include "scsi/handlers.hpp"

namespace iserkit::target::detail {

using scsi::Opcode;

namespace {

// The standards this device server claims (SPC-5 §6.6.2, table 150): SAM-5, SPC-4, SBC-3 and
// iSCSI (no version claimed). We claim the SPC-4/SBC-3 level, as LIO does: the command set and the
// VPD page layouts implemented are theirs, and initiators and test tools of the SPC-4 era (libiscsi
// 1.19 accepts VERSION 4..6 only and detects SBC-3 by its descriptor) then judge us by that level.
constexpr std::array<std::uint16_t, 4> version_descriptors{0x00a0, 0x0460, 0x04c0, 0x0960};
constexpr std::uint8_t claimed_version = 0x06;  // SPC-4

constexpr std::array<std::uint8_t, 7> supported_vpd_pages{
    scsi::vpd::supported_pages, scsi::vpd::unit_serial_number, scsi::vpd::device_identification,
    third_party_copy_vpd_page, scsi::vpd::block_limits, scsi::vpd::block_device_characteristics, scsi::vpd::logical_block_provisioning};

std::vector<std::byte> standard_inquiry(const LogicalUnit* unit, bool explicit_alua) {
  scsi::StandardInquiry d;
  if (unit == nullptr) {
    // SPC-5 §6.6.2: no logical unit at this LUN → qualifier 011b, type 1Fh.
    d.qualifier = scsi::PeripheralQualifier::not_supported;
    d.type = scsi::PeripheralType::unknown_or_none;
    d.vendor = "ISERKIT";
  } else {
    const auto& id = unit->options().identity;
    d.vendor = id.vendor;
    d.product = id.product;
    d.revision = id.revision;
    // SPC-5 §6.6.2: TPGS 01b implicit ALUA (REPORT TARGET PORT GROUPS only), 11b implicit and
    // explicit (SET TARGET PORT GROUPS too: a failover coordinator runs it).
    d.tpgs = explicit_alua ? 0x3 : 0x1;
    d.third_party_copy = true;  // 3PC: EXTENDED COPY (LID1) and RECEIVE COPY RESULTS (extended_copy.cpp)
  }
  d.version = claimed_version;
  d.version_descriptors.assign(version_descriptors.begin(), version_descriptors.end());
  return scsi::encode_standard_inquiry(d);
}

std::vector<std::byte> vpd_page(const LogicalUnit& unit, std::uint8_t page, TargetPort port) {
  switch (page) {
    case scsi::vpd::supported_pages:
      return scsi::encode_vpd_page(page, {reinterpret_cast<const std::byte*>(supported_vpd_pages.data()),
                                          supported_vpd_pages.size()});
    case scsi::vpd::unit_serial_number:
      return scsi::encode_vpd_page(page, as_bytes(unit.serial()));
    case scsi::vpd::device_identification: {
      std::vector<scsi::Designator> ds;
      // NAA (SPC-5 §7.7.6.6), binary, associated with the logical unit: NAA 6h IEEE Registered
      // Extended derived from the unit's UUID (docs/lu-identity.md), or the configured one.
      scsi::Designator naa;
      naa.type = scsi::DesignatorType::naa;
      naa.value.assign(reinterpret_cast<const std::byte*>(unit.naa().data()),
                       reinterpret_cast<const std::byte*>(unit.naa().data() + unit.naa().size()));
      ds.push_back(std::move(naa));
      // T10 vendor ID based (SPC-5 §7.7.6): 8-byte vendor + vendor specific: the serial, itself
      // from the unit's UUID unless configured, so the WWID Linux may take from it is unique too.
      scsi::Designator t10;
      t10.type = scsi::DesignatorType::t10_vendor_id;
      t10.code_set = scsi::CodeSet::ascii;
      std::string text = unit.options().identity.vendor.substr(0, 8);
      text.resize(8, ' ');
      text += unit.serial();
      const auto bytes = as_bytes(text);
      t10.value.assign(bytes.begin(), bytes.end());
      ds.push_back(std::move(t10));
      // The target port the command came through (SPC-5 §7.7.6.5, §7.7.6.6): its relative target
      // port identifier and its target port group, both 4 bytes (2 reserved, 2 the value).
      for (const auto& [type, value] : {std::pair{scsi::DesignatorType::relative_target_port, port.relative_port},
                                        std::pair{scsi::DesignatorType::target_port_group, port.group}}) {
        scsi::Designator d;
        d.type = type;
        d.association = scsi::Association::target_port;
        d.value.resize(4);
        store_be16(d.value.data() + 2, value);
        ds.push_back(std::move(d));
      }
      const auto payload = scsi::encode_designators(ds);
      return scsi::encode_vpd_page(page, payload);
    }
    case third_party_copy_vpd_page:
      // SPC-4 §7.8.17: what EXTENDED COPY (LID1) offers, with the copy manager's limits.
      return scsi::encode_vpd_page(page, encode_third_party_copy_vpd(unit.block_size_bytes()));
    case scsi::vpd::block_limits: {
      scsi::BlockLimits b;
      const std::uint32_t granularity = std::max<std::uint32_t>(1, 4096 / unit.block_size_bytes());
      b.wsnz = false;  // WRITE SAME with NUMBER OF LOGICAL BLOCKS 0 writes to the end (SBC-4 §5.50)
      b.maximum_compare_and_write_length = 255;  // COMPARE AND WRITE (SBC-4 §5.3), blocks
      b.optimal_transfer_length_granularity = static_cast<std::uint16_t>(granularity);
      b.maximum_transfer_length = unit.max_transfer_blocks();
      b.optimal_transfer_length = unit.max_transfer_blocks();
      if (unit.thin()) {
        b.maximum_unmap_lba_count = unit.options().max_unmap_blocks;
        b.maximum_unmap_block_descriptor_count = unit.options().max_unmap_descriptors;
        b.optimal_unmap_granularity = granularity;
      }
      b.maximum_write_same_length = unit.options().max_unmap_blocks;
      // WRITE ATOMIC (16): any aligned length up to the transfer limit (SBC-4 §4.29, §5.48).
      b.maximum_atomic_transfer_length = unit.max_transfer_blocks();
      return scsi::encode_block_limits(b);
    }
    case scsi::vpd::block_device_characteristics:
      // WABEREQ 01b: after SANITIZE BLOCK ERASE (deallocation, LBPRZ) a block reads GOOD, as zeroes.
      return scsi::encode_block_device_characteristics({.medium_rotation_rate = 1,
                                                        .nominal_form_factor = 0,
                                                        .wabereq = static_cast<std::uint8_t>(block_erase_supported(unit) ? 1 : 0),
                                                        .wacereq = 0});
    case scsi::vpd::logical_block_provisioning: {
      scsi::LogicalBlockProvisioning l;
      if (unit.thin()) {
        l.lbpu = true;
        l.lbpws = true;
        l.lbpws10 = true;
        l.lbprz = unit.backend().capabilities().discard_zeroes ? 1 : 0;
        l.provisioning_type = scsi::ProvisioningType::thin;
      }
      return scsi::encode_logical_block_provisioning(l);
    }
    default:
      return {};
  }
}

}  // namespace

void plan_inquiry(CommandPlan& plan, ConstByteSpan cdb) noexcept {
  const auto q = scsi::parse_inquiry_cdb(cdb);
  if (!parsed_cdb(plan, q)) return;
  if (q->evpd) {
    if (plan.unit == nullptr) {
      plan.error = illegal_request(scsi::asc::logical_unit_not_supported);
      return;
    }
    // SPC-5 §6.6.1: an unsupported VPD page → INVALID FIELD IN CDB (PAGE CODE, byte 2).
    if (std::find(supported_vpd_pages.begin(), supported_vpd_pages.end(), q->page_code) == supported_vpd_pages.end()) {
      plan.error = scsi::SenseData::invalid_field_in_cdb(2);
      return;
    }
  }
  plan_data_in(plan, q->allocation_length);
}

ScsiOutcome execute_inquiry(const CommandPlan& plan, ConstByteSpan cdb, ByteSpan out) {
  const auto q = scsi::parse_inquiry_cdb(cdb);
  if (!q) return ScsiOutcome::check_condition(q.error());
  if (!q->evpd) return reply_data(standard_inquiry(plan.unit, plan.explicit_alua), out);
  return reply_data(vpd_page(*plan.unit, q->page_code, plan.port), out);
}

void plan_report_luns(CommandPlan& plan, ConstByteSpan cdb) noexcept {
  const auto r = scsi::parse_report_luns_cdb(cdb);
  if (!parsed_cdb(plan, r)) return;
  plan_data_in(plan, r->allocation_length);
}

ScsiOutcome execute_report_luns(const std::vector<scsi::Lun>& luns, ConstByteSpan cdb, ByteSpan out) {
  const auto r = scsi::parse_report_luns_cdb(cdb);
  if (!r) return ScsiOutcome::check_condition(r.error());
  // SPC-5 table 286: 01h/11h list well-known LUNs only (we have none); the others list every LUN.
  const bool well_known_only = r->select_report == 0x01 || r->select_report == 0x11;
  const auto data = scsi::encode_report_luns(well_known_only ? std::vector<scsi::Lun>{} : luns);
  return reply_data(data, out);
}

void plan_request_sense(CommandPlan& plan, ConstByteSpan cdb) noexcept {
  const auto r = scsi::parse_request_sense_cdb(cdb);
  if (!parsed_cdb(plan, r)) return;
  plan_data_in(plan, r->allocation_length);
}

ScsiOutcome execute_request_sense(const CommandPlan& plan, UnitState* unit, std::uint64_t nexus, ConstByteSpan cdb,
                                  ByteSpan out) {
  const auto r = scsi::parse_request_sense_cdb(cdb);
  if (!r) return ScsiOutcome::check_condition(r.error());
  // SAM-5 §5.14 / SPC-5 §6.39: a pending unit attention is returned as the parameter data (and
  // cleared); otherwise NO SENSE (no deferred errors are kept: autosense only), except for a LUN
  // without a logical unit: LOGICAL UNIT NOT SUPPORTED as parameter data with GOOD status.
  scsi::SenseData sense = plan.unit == nullptr
                              ? illegal_request(scsi::asc::logical_unit_not_supported)
                              : scsi::SenseData::make(scsi::SenseKey::no_sense, scsi::asc::no_additional_sense);
  if (unit != nullptr) {
    std::lock_guard g(unit->mutex);
    auto it = unit->unit_attentions.find(nexus);
    if (it != unit->unit_attentions.end() && !it->second.empty()) {
      sense = scsi::SenseData::make(scsi::SenseKey::unit_attention, it->second.front());
      it->second.pop_front();
    } else if (auto s = unit->sanitize->current_sense()) {
      // SBC-4 §4.11: REQUEST SENSE polls a sanitize operation: NOT READY with the progress
      // indication while it runs, MEDIUM ERROR after it failed.
      sense = *s;
    }
  }
  std::array<std::byte, scsi::max_sense_size_bytes> buf{};
  const std::size_t n = scsi::encode_sense(
      sense, r->descriptor_format ? scsi::SenseFormat::descriptor : scsi::SenseFormat::fixed, buf);
  return reply_data({buf.data(), n}, out);
}

// ---------------------------------------------------------------------------------------------
// MODE SENSE
// ---------------------------------------------------------------------------------------------

namespace {

constexpr std::uint8_t caching_page = 0x08;
constexpr std::uint8_t control_page = 0x0a;
constexpr std::uint8_t all_pages = 0x3f;

void append_caching_page(std::vector<std::byte>& out, const LogicalUnit& unit, scsi::ModePageControl pc) {
  // SBC-4 §6.5.5, table 245: 20 bytes.
  std::array<std::byte, 20> page{};
  store_u8(page.data(), caching_page);
  store_u8(page.data() + 1, 0x12);
  const bool changeable = pc == scsi::ModePageControl::changeable;
  const bool wce = unit.backend().capabilities().volatile_cache;
  if (!changeable && wce) store_u8(page.data() + 2, 0x04);  // WCE: writes may be cached until flushed
  out.insert(out.end(), page.begin(), page.end());
}

void append_control_page(std::vector<std::byte>& out, scsi::ModePageControl pc, bool swp) {
  // SPC-5 §7.5.8, table 457: 12 bytes. D_SENSE = 0 (fixed sense), QUEUE ALGORITHM MODIFIER 1
  // (unrestricted reordering), QERR 00b, BUSY TIMEOUT PERIOD unlimited.
  std::array<std::byte, 12> page{};
  store_u8(page.data(), control_page);
  store_u8(page.data() + 1, 0x0a);
  if (pc != scsi::ModePageControl::changeable) {
    store_u8(page.data() + 3, 0x10);
    if (swp && pc == scsi::ModePageControl::current) store_u8(page.data() + 4, 0x08);  // SWP
    store_be16(page.data() + 8, 0xffff);
  } else {
    store_u8(page.data() + 4, 0x08);  // SWP is changeable (MODE SELECT, spc_state.cpp)
  }
  out.insert(out.end(), page.begin(), page.end());
}

}  // namespace

void plan_mode_sense(CommandPlan& plan, ConstByteSpan cdb) noexcept {
  const auto m = scsi::parse_mode_sense_cdb(cdb);
  if (!parsed_cdb(plan, m)) return;
  if (m->pc == scsi::ModePageControl::saved) {
    // SPC-5 §6.13: saved values not implemented → SAVING PARAMETERS NOT SUPPORTED.
    plan.error = illegal_request(scsi::asc::saving_parameters_not_supported);
    return;
  }
  const bool page_ok = m->page_code == caching_page || m->page_code == control_page || m->page_code == all_pages;
  // Only subpage 0 pages exist; subpage FFh ("all subpages") is fine for them.
  const bool subpage_ok = m->subpage_code == 0 || m->subpage_code == 0xff;
  if (!page_ok) {
    plan.error = scsi::SenseData::invalid_field_in_cdb(2, 5);
    return;
  }
  if (!subpage_ok) {
    plan.error = scsi::SenseData::invalid_field_in_cdb(3);
    return;
  }
  plan_data_in(plan, m->allocation_length);
}

ScsiOutcome execute_mode_sense(const CommandPlan& plan, ConstByteSpan cdb, ByteSpan out) {
  const auto m = scsi::parse_mode_sense_cdb(cdb);
  if (!m) return ScsiOutcome::check_condition(m.error());
  const LogicalUnit& unit = *plan.unit;
  const std::size_t header = m->ten ? 8 : 4;
  std::vector<std::byte> data(header);
  // DEVICE-SPECIFIC PARAMETER for direct-access devices (SBC-4 §6.5.1): WP bit 7, DPOFUA bit 4.
  const std::uint8_t device_specific = static_cast<std::uint8_t>((plan.write_protected ? 0x80 : 0) | 0x10);
  std::size_t descriptor_length = 0;
  if (!m->dbd) {
    const bool long_lba = m->ten && m->llbaa;
    descriptor_length = long_lba ? 16 : 8;
    std::vector<std::byte> d(descriptor_length);
    if (long_lba) {
      // SBC-4 §6.5.2.3: long LBA block descriptor.
      store_be64(d.data(), unit.block_count());
      store_be32(d.data() + 12, unit.block_size_bytes());
    } else {
      // SBC-4 §6.5.2.2: NUMBER OF LOGICAL BLOCKS saturates at FFFFFFFFh.
      store_be32(d.data(), static_cast<std::uint32_t>(std::min<std::uint64_t>(unit.block_count(), 0xffffffffu)));
      store_be24(d.data() + 5, unit.block_size_bytes());
    }
    data.insert(data.end(), d.begin(), d.end());
  }
  if (m->page_code == caching_page || m->page_code == all_pages) append_caching_page(data, unit, m->pc);
  if (m->page_code == control_page || m->page_code == all_pages) append_control_page(data, m->pc, plan.software_write_protect);
  if (m->ten) {
    store_be16(data.data(), static_cast<std::uint16_t>(data.size() - 2));  // MODE DATA LENGTH: n - 1 - 1
    store_u8(data.data() + 3, device_specific);
    store_u8(data.data() + 4, m->llbaa && descriptor_length == 16 ? 0x01 : 0);  // LONGLBA
    store_be16(data.data() + 6, static_cast<std::uint16_t>(descriptor_length));
  } else {
    store_u8(data.data(), static_cast<std::uint8_t>(data.size() - 1));  // MODE DATA LENGTH
    store_u8(data.data() + 2, device_specific);
    store_u8(data.data() + 3, static_cast<std::uint8_t>(descriptor_length));
  }
  return reply_data(data, out);
}

// ---------------------------------------------------------------------------------------------
// REPORT SUPPORTED OPERATION CODES (MAINTENANCE IN, service action 0Ch), from command_table.cpp
// ---------------------------------------------------------------------------------------------

namespace {

constexpr std::uint8_t report_supported_opcodes_sa = 0x0c;
constexpr std::uint8_t report_target_port_groups_sa = 0x0a;

bool available(const CommandInfo& c, const LogicalUnit& unit) noexcept {
  switch (c.availability) {
    case Availability::always: return true;
    case Availability::thin_only: return unit.thin();
    case Availability::block_erase: return block_erase_supported(unit);
  }
  return false;
}

// SPC-5 §6.35.4: the command timeouts descriptor (12 bytes). No timeouts are known: 0 = unknown.
void append_timeouts_descriptor(std::vector<std::byte>& data) {
  std::array<std::byte, 12> t{};
  store_be16(t.data(), 0x0a);  // DESCRIPTOR LENGTH
  data.insert(data.end(), t.begin(), t.end());
}

}  // namespace

void plan_maintenance_in(CommandPlan& plan, ConstByteSpan cdb) noexcept {
  if ((load_u8(cdb.data() + 1) & 0x1f) == report_target_port_groups_sa) {
    // SPC-5 §6.36: PARAMETER DATA FORMAT 000b (length only) or 001b (extended header).
    const auto options = scsi::parse_report_target_port_groups_cdb(cdb);
    if (!options) {
      plan.error = scsi::SenseData::invalid_field_in_cdb(1, 7);
      return;
    }
    plan_data_in(plan, options->allocation_length);
    return;
  }
  if ((load_u8(cdb.data() + 1) & 0x1f) != report_supported_opcodes_sa) {
    plan.error = scsi::SenseData::invalid_field_in_cdb(1, 4);
    return;
  }
  // SPC-5 §6.35.1, table 262: REPORTING OPTIONS 000b..011b; RCTD (bit 7) asks for timeouts.
  const std::uint8_t options = load_u8(cdb.data() + 2) & 0x07;
  if (options > 3) {
    plan.error = scsi::SenseData::invalid_field_in_cdb(2, 2);
    return;
  }
  plan_data_in(plan, load_be32(cdb.data() + 6));
}

ScsiOutcome execute_report_supported_opcodes(const CommandPlan& plan, ConstByteSpan cdb, ByteSpan out) {
  const LogicalUnit& unit = *plan.unit;
  const std::uint8_t options = load_u8(cdb.data() + 2) & 0x07;
  const bool rctd = (load_u8(cdb.data() + 2) & 0x80) != 0;
  const std::uint8_t requested = load_u8(cdb.data() + 3);
  const std::uint16_t requested_sa = load_be16(cdb.data() + 4);
  std::vector<std::byte> data;
  if (options == 0) {
    // SPC-5 §6.35.2: all commands: a 4-byte length, then 8-byte command descriptors (20 with
    // CTDP set and a timeouts descriptor when RCTD is 1).
    data.resize(4);
    for (const auto& c : command_table()) {
      if (!available(c, unit)) continue;
      std::array<std::byte, 8> d{};
      store_u8(d.data(), static_cast<std::uint8_t>(c.opcode));
      store_be16(d.data() + 2, c.has_service_action ? c.service_action : 0);
      store_u8(d.data() + 5, static_cast<std::uint8_t>((c.has_service_action ? 0x01 : 0) | (rctd ? 0x02 : 0)));  // SERVACTV, CTDP
      store_be16(d.data() + 6, c.cdb_length);
      data.insert(data.end(), d.begin(), d.end());
      if (rctd) append_timeouts_descriptor(data);
    }
    store_be32(data.data(), static_cast<std::uint32_t>(data.size() - 4));
    return reply_data(data, out);
  }
  // SPC-5 §6.35.3: one command. 001b: by opcode (INVALID FIELD IN CDB if it has service actions);
  // 010b: by opcode and service action (INVALID FIELD IN CDB if it has none); 011b: either.
  const bool has_sa = opcode_has_service_actions(requested);
  if (options == 1 && has_sa) return ScsiOutcome::check_condition(scsi::SenseData::invalid_field_in_cdb(2, 2));
  if (options == 2 && !has_sa && find_command(requested, 0) != nullptr)
    return ScsiOutcome::check_condition(scsi::SenseData::invalid_field_in_cdb(2, 2));
  const CommandInfo* found = find_command(requested, has_sa ? requested_sa : 0);
  if (found != nullptr && !available(*found, unit)) found = nullptr;
  data.resize(4);
  if (found == nullptr) {
    store_u8(data.data() + 1, 0x01);  // SUPPORT 001b: not supported
    return reply_data(data, out);
  }
  store_u8(data.data() + 1, static_cast<std::uint8_t>((rctd ? 0x80 : 0) | 0x03));  // CTDP; SUPPORT 011b
  store_be16(data.data() + 2, found->cdb_length);
  data.insert(data.end(), reinterpret_cast<const std::byte*>(found->usage.data()),
              reinterpret_cast<const std::byte*>(found->usage.data()) + found->cdb_length);
  if (rctd) append_timeouts_descriptor(data);
  return reply_data(data, out);
}

ScsiOutcome execute_report_target_port_groups(const PortGroupTable& table, ConstByteSpan cdb, ByteSpan out) {
  // SPC-5 §6.36.2, encoded by common's codec (the one the initiator parses with). Supported:
  // U_SUP, S_SUP, AN_SUP, AO_SUP, and T_SUP when a failover coordinator moves the states (no
  // offline or logical block dependent).
  const auto options = scsi::parse_report_target_port_groups_cdb(cdb);  // checked in plan
  const auto groups = table.groups();
  std::vector<scsi::TargetPortGroupDescriptor> descriptors;
  descriptors.reserve(groups.size());
  for (const auto& g : groups) descriptors.push_back({.id = g.id, .state = g.state, .relative_ports = g.relative_ports});
  using Sup = scsi::SupportedAccessStates;
  const std::uint8_t supported = Sup::unavailable | Sup::standby | Sup::active_non_optimized | Sup::active_optimized |
                                 (table.explicit_transitions() ? Sup::transitioning : 0);
  const auto data = scsi::encode_report_target_port_groups(
      descriptors, {.extended_header = options && options->extended_header, .supported_states = supported});
  return reply_data(data, out);
}

}  // namespace iserkit::target::detail

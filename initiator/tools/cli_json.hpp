// JSON documents of the `iserkit` CLI (--json): one function per result type, so every
// subcommand prints the same field names. The field names are a stable interface, documented in
// initiator/README.md "iserkit --json"; add fields, never rename or remove them.
// Sources: SPC-5 §6.6.2 (standard INQUIRY), §7.7.6 (VPD 0x83), §7.7.15 (VPD 0x80), SBC-4 §6.6.4
// (VPD 0xb0), §6.6.5 (VPD 0xb2), §5.21.2 (READ CAPACITY (16)), SPC-5 §6.33 (REPORT LUNS),
// RFC 7143 Appendix C (SendTargets).
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "iserkit/initiator/discovery.hpp"
#include "iserkit/initiator/lun.hpp"
#include "iserkit/scsi/inquiry.hpp"
#include "iserkit/scsi/lun.hpp"

namespace iserkit::cli {

using Json = nlohmann::ordered_json;

/// A portal as "host:port", IPv6 literals in brackets (RFC 7143 §13.8 TargetAddress form).
inline std::string portal_text(const std::string& host, std::uint16_t port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

/// SendTargets result: {"portal", "targets": [{"name", "portals": [{"host", "port",
/// "portal_group_tag", "address"}]}]}.
inline Json discovery_json(const std::string& portal, const std::vector<initiator::DiscoveredTarget>& targets) {
  Json list = Json::array();
  for (const auto& t : targets) {
    Json portals = Json::array();
    for (const auto& p : t.portals)
      portals.push_back({{"host", p.host}, {"port", p.port}, {"portal_group_tag", p.portal_group_tag},
                         {"address", portal_text(p.host, p.port)}});
    list.push_back({{"name", t.name}, {"portals", std::move(portals)}});
  }
  return {{"portal", portal}, {"targets", std::move(list)}};
}

/// The SPC-5 table 487 name of an association.
inline const char* association_name(scsi::Association a) {
  switch (a) {
    case scsi::Association::logical_unit: return "logical_unit";
    case scsi::Association::target_port: return "target_port";
    case scsi::Association::target_device: return "target_device";
  }
  return "reserved";
}

/// One VPD 0x83 designator: {"type", "association", "code_set", "value", "text"}; "value" is the
/// designator as `iserkit inquiry` prints it (hex for binary, the string otherwise).
inline Json designator_json(const scsi::Designator& d) {
  const std::string text = scsi::designator_text(d);
  const auto space = text.find(' ');
  const char* code_set = d.code_set == scsi::CodeSet::binary ? "binary" : d.code_set == scsi::CodeSet::ascii ? "ascii" : "utf8";
  return {{"type", std::string(scsi::designator_type_name(d.type))},
          {"association", association_name(d.association)},
          {"code_set", code_set},
          {"value", space == std::string::npos ? std::string() : text.substr(space + 1)},
          {"text", text}};
}

/// VPD 0xb0 (lengths in logical blocks, 0 = no limit reported).
inline Json block_limits_json(const scsi::BlockLimits& b) {
  return {{"maximum_transfer_length_blocks", b.maximum_transfer_length},
          {"optimal_transfer_length_blocks", b.optimal_transfer_length},
          {"optimal_transfer_length_granularity_blocks", b.optimal_transfer_length_granularity},
          {"maximum_compare_and_write_length_blocks", b.maximum_compare_and_write_length},
          {"maximum_unmap_lba_count", b.maximum_unmap_lba_count},
          {"maximum_unmap_block_descriptor_count", b.maximum_unmap_block_descriptor_count},
          {"optimal_unmap_granularity_blocks", b.optimal_unmap_granularity},
          {"maximum_write_same_length_blocks", b.maximum_write_same_length}};
}

/// VPD 0xb2.
inline Json provisioning_json(const scsi::LogicalBlockProvisioning& p) {
  const char* type = p.provisioning_type == scsi::ProvisioningType::thin       ? "thin"
                     : p.provisioning_type == scsi::ProvisioningType::resource ? "resource"
                                                                               : "full";
  return {{"unmap", p.lbpu}, {"write_same_unmap", p.lbpws}, {"write_same_10_unmap", p.lbpws10},
          {"unmapped_reads_zero", p.lbprz != 0}, {"provisioning_type", type}};
}

/// Standard INQUIRY plus the VPD pages the unit answered (absent pages are null).
inline Json inquiry_json(const scsi::StandardInquiry& inq, const std::optional<std::string>& serial,
                         const std::optional<std::vector<scsi::Designator>>& designators,
                         const initiator::LunInfo& info) {
  Json ids = nullptr;
  if (designators) {
    ids = Json::array();
    for (const auto& d : *designators) ids.push_back(designator_json(d));
  }
  return {{"vendor", inq.vendor},
          {"product", inq.product},
          {"revision", inq.revision},
          {"peripheral_device_type", static_cast<unsigned>(inq.type)},
          {"peripheral_qualifier", static_cast<unsigned>(inq.qualifier)},
          {"removable", inq.removable},
          {"version", inq.version},
          {"tpgs", inq.tpgs},
          {"command_queuing", inq.cmdque},
          {"serial", serial ? Json(*serial) : Json(nullptr)},
          {"designators", std::move(ids)},
          {"block_limits", info.block_limits ? block_limits_json(*info.block_limits) : Json(nullptr)},
          {"provisioning", info.provisioning ? provisioning_json(*info.provisioning) : Json(nullptr)}};
}

/// READ CAPACITY (16): sizes in logical blocks and in bytes.
inline Json capacity_json(const initiator::Capacity& c) {
  return {{"blocks", c.blocks},
          {"block_size_bytes", c.block_size_bytes},
          {"size_bytes", c.size_bytes()},
          {"thin", c.thin},
          {"unmapped_reads_zero", c.unmapped_reads_zero}};
}

/// One REPORT LUNS entry: {"lun": index or null, "address": the 8 bytes in hex}.
inline Json lun_json(const scsi::Lun& lun) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(lun.raw()));
  const auto index = lun.index();
  return {{"lun", index ? Json(*index) : Json(nullptr)}, {"address", std::string(hex)}};
}

}  // namespace iserkit::cli

// LUN xattrs, the target "info" JSON and the FUSE errno policy (see lun_metadata.hpp).
#include "fuse_fs/lun_metadata.hpp"

#include <cerrno>

#include <nlohmann/json.hpp>

#include "iserkit/initiator/errors.hpp"

namespace iserkit::fuse_fs {
namespace {

// Keys in the order they are set (the info file reads top-down: target, session, LUNs).
using Json = nlohmann::ordered_json;

constexpr std::string_view prefix = "user.iscsi.";

std::string hex(const std::vector<std::byte>& bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (auto b : bytes) {
    const auto v = static_cast<unsigned>(b);
    s += digits[v >> 4];
    s += digits[v & 0xf];
  }
  return s;
}

Json path_json(const PathInfo& p) {
  Json j;
  j["url"] = p.url;
  j["peer"] = p.peer;
  j["state"] = p.state;
  j["alua"] = p.alua;
  j["target_port_group"] = p.target_port_group ? Json(*p.target_port_group) : Json(nullptr);
  j["commands"] = p.commands;
  j["failures"] = p.failures;
  j["downs"] = p.downs;
  j["reinstatements"] = p.reinstatements;
  return j;
}

Json paths_json(const std::vector<PathInfo>& paths) {
  Json j = Json::array();
  for (const auto& p : paths) j.push_back(path_json(p));
  return j;
}

// Every JSON text the view writes: UTF-8, 2-space indent; a string's bytes that are not valid UTF-8
// (a target's INQUIRY or VPD text may hold any byte) each become U+FFFD, so the text always parses.
std::string dump(const Json& j, int indent) { return j.dump(indent, ' ', false, Json::error_handler_t::replace); }

}  // namespace

std::optional<std::string> naa_hex(const std::vector<scsi::Designator>& ds) {
  for (const auto& d : ds) {
    if (d.type == scsi::DesignatorType::naa && d.association == scsi::Association::logical_unit &&
        d.code_set == scsi::CodeSet::binary)
      return hex(d.value);
  }
  return std::nullopt;
}

std::vector<std::string> xattr_names(const LunMetadata& m) {
  std::vector<std::string> names;
  const auto add = [&](std::string_view n) { names.push_back(std::string(prefix) + std::string(n)); };
  add("vendor");
  add("product");
  add("revision");
  if (m.serial) add("serial");
  if (naa_hex(m.designators)) add("naa");
  if (!m.designators.empty()) add("designators");
  add("block_size");
  add("blocks");
  add("thin");
  return names;
}

std::optional<std::string> xattr_value(const LunMetadata& m, std::string_view name) {
  if (!name.starts_with(prefix)) return std::nullopt;
  const auto key = name.substr(prefix.size());
  if (key == "vendor") return m.vendor;
  if (key == "product") return m.product;
  if (key == "revision") return m.revision;
  if (key == "serial") return m.serial;
  if (key == "naa") return naa_hex(m.designators);
  if (key == "designators") {
    if (m.designators.empty()) return std::nullopt;
    return scsi::designators_text(m.designators, "\n");
  }
  if (key == "block_size") return std::to_string(m.block_size_bytes);
  if (key == "blocks") return std::to_string(m.blocks);
  if (key == "thin") return std::string(m.thin ? "1" : "0");
  return std::nullopt;
}

std::string json_string(std::string_view s) { return dump(Json(std::string(s)), -1); }

std::string target_info_json(const TargetInfo& info) {
  Json j;
  j["target"] = info.target;
  j["portal"] = info.portal;
  j["url"] = info.url;
  Json session;
  session["state"] = info.session_state;
  if (info.parameters) {
    const auto& p = *info.parameters;
    // RFC 7143 §13 key names, as negotiated.
    Json keys;
    keys["HeaderDigest"] = p.header_digest_crc32c ? "CRC32C" : "None";
    keys["DataDigest"] = p.data_digest_crc32c ? "CRC32C" : "None";
    keys["MaxConnections"] = p.max_connections;
    keys["InitialR2T"] = p.initial_r2t;
    keys["ImmediateData"] = p.immediate_data;
    keys["MaxBurstLength"] = p.max_burst_length;
    keys["FirstBurstLength"] = p.first_burst_length;
    keys["DefaultTime2Wait"] = p.default_time2wait;
    keys["DefaultTime2Retain"] = p.default_time2retain;
    keys["MaxOutstandingR2T"] = p.max_outstanding_r2t;
    keys["DataPDUInOrder"] = p.data_pdu_in_order;
    keys["DataSequenceInOrder"] = p.data_sequence_in_order;
    keys["ErrorRecoveryLevel"] = p.error_recovery_level;
    keys["InitiatorMaxRecvDataSegmentLength"] = p.initiator_max_recv_data_segment_length;
    keys["TargetMaxRecvDataSegmentLength"] = p.target_max_recv_data_segment_length;
    keys["InitiatorName"] = p.initiator_name;
    keys["TargetAlias"] = p.target_alias;
    keys["TargetPortalGroupTag"] = p.target_portal_group_tag;
    session["parameters"] = std::move(keys);
  }
  if (info.reconnect) {
    const auto& r = *info.reconnect;
    Json reconnect;
    reconnect["attempts"] = r.attempts;
    reconnect["next_attempt_in_ms"] = r.next_attempt_in_ms ? Json(*r.next_attempt_in_ms) : Json(nullptr);
    reconnect["last_error"] = r.last_error;
    session["reconnect"] = std::move(reconnect);
  }
  j["session"] = std::move(session);
  if (!info.multipath_policy.empty()) {
    Json multipath;
    multipath["policy"] = info.multipath_policy;
    multipath["paths"] = paths_json(info.paths);
    j["multipath"] = std::move(multipath);
  }
  Json luns = Json::array();
  for (std::size_t i = 0; i < info.luns.size(); ++i) {
    const auto& l = info.luns[i];
    Json lun;
    lun["lun"] = l.index;
    lun["file"] = "lun" + std::to_string(l.index);
    lun["size_bytes"] = l.size_bytes();
    lun["block_size"] = l.block_size_bytes;
    lun["blocks"] = l.blocks;
    lun["thin"] = l.thin;
    lun["vendor"] = l.vendor;
    lun["product"] = l.product;
    lun["revision"] = l.revision;
    lun["serial"] = l.serial ? Json(*l.serial) : Json(nullptr);
    const auto naa = naa_hex(l.designators);
    lun["naa"] = naa ? Json(*naa) : Json(nullptr);
    Json designators = Json::array();
    for (const auto& d : l.designators) designators.push_back(designator_text(d));
    lun["designators"] = std::move(designators);
    if (i < info.lun_paths.size() && !info.lun_paths[i].empty()) lun["paths"] = paths_json(info.lun_paths[i]);
    luns.push_back(std::move(lun));
  }
  j["luns"] = std::move(luns);
  return dump(j, 2) + "\n";
}

int fuse_errno(std::error_code ec) noexcept {
  if (!ec) return EIO;
  const int e = initiator::to_errno(ec);
  switch (e) {
    case 0:
    case ENOTCONN:      // connection_closed / session_closed: the target went away
    case ETIMEDOUT:     // a command or the login outlived --timeout
    case ECONNREFUSED:  // reconnect to a target that is gone
    case ECONNRESET:
    case ECONNABORTED:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EPIPE:
      return EIO;
    default:
      return e;
  }
}

}  // namespace iserkit::fuse_fs

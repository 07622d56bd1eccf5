// LUN xattrs, the target "info" JSON and the FUSE errno policy (see lun_metadata.hpp).
#include "fuse_fs/lun_metadata.hpp"

#include <cerrno>
#include <cstdio>

#include "iserkit/initiator/errors.hpp"

namespace iserkit::fuse_fs {
namespace {

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

std::string designators_text(const std::vector<scsi::Designator>& ds) {
  std::string s;
  for (const auto& d : ds) {
    if (!s.empty()) s += '\n';
    s += scsi::designator_text(d);
  }
  return s;
}

std::string path_json(const PathInfo& p) {
  const auto n = [](std::uint64_t v) { return std::to_string(v); };
  return "{\"url\": " + json_string(p.url) + ", \"peer\": " + json_string(p.peer) + ", \"state\": " +
         json_string(p.state) + ", \"alua\": " + json_string(p.alua) + ", \"target_port_group\": " +
         (p.target_port_group ? n(*p.target_port_group) : std::string("null")) + ", \"commands\": " + n(p.commands) +
         ", \"failures\": " + n(p.failures) + ", \"downs\": " + n(p.downs) + ", \"reinstatements\": " +
         n(p.reinstatements) + "}";
}

std::string paths_json(const std::vector<PathInfo>& paths, std::string_view indent) {
  std::string j = "[";
  for (std::size_t i = 0; i < paths.size(); ++i)
    j += (i == 0 ? "\n" : ",\n") + std::string(indent) + path_json(paths[i]);
  return j + "]";
}

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
    return designators_text(m.designators);
  }
  if (key == "block_size") return std::to_string(m.block_size_bytes);
  if (key == "blocks") return std::to_string(m.blocks);
  if (key == "thin") return std::string(m.thin ? "1" : "0");
  return std::nullopt;
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (u < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", u);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::string target_info_json(const TargetInfo& info) {
  const auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  const auto n = [](std::uint64_t v) { return std::to_string(v); };
  std::string j = "{\n";
  j += "  \"target\": " + json_string(info.target) + ",\n";
  j += "  \"portal\": " + json_string(info.portal) + ",\n";
  j += "  \"url\": " + json_string(info.url) + ",\n";
  j += "  \"session\": {\n    \"state\": " + json_string(info.session_state);
  if (info.parameters) {
    const auto& p = *info.parameters;
    // RFC 7143 §13 key names, as negotiated.
    const std::vector<std::pair<std::string, std::string>> keys = {
        {"HeaderDigest", json_string(p.header_digest_crc32c ? "CRC32C" : "None")},
        {"DataDigest", json_string(p.data_digest_crc32c ? "CRC32C" : "None")},
        {"MaxConnections", n(p.max_connections)},
        {"InitialR2T", b(p.initial_r2t)},
        {"ImmediateData", b(p.immediate_data)},
        {"MaxBurstLength", n(p.max_burst_length)},
        {"FirstBurstLength", n(p.first_burst_length)},
        {"DefaultTime2Wait", n(p.default_time2wait)},
        {"DefaultTime2Retain", n(p.default_time2retain)},
        {"MaxOutstandingR2T", n(p.max_outstanding_r2t)},
        {"DataPDUInOrder", b(p.data_pdu_in_order)},
        {"DataSequenceInOrder", b(p.data_sequence_in_order)},
        {"ErrorRecoveryLevel", n(p.error_recovery_level)},
        {"InitiatorMaxRecvDataSegmentLength", n(p.initiator_max_recv_data_segment_length)},
        {"TargetMaxRecvDataSegmentLength", n(p.target_max_recv_data_segment_length)},
        {"InitiatorName", json_string(p.initiator_name)},
        {"TargetAlias", json_string(p.target_alias)},
        {"TargetPortalGroupTag", n(p.target_portal_group_tag)},
    };
    j += ",\n    \"parameters\": {\n";
    for (std::size_t i = 0; i < keys.size(); ++i) {
      j += "      " + json_string(keys[i].first) + ": " + keys[i].second + (i + 1 < keys.size() ? ",\n" : "\n");
    }
    j += "    }";
  }
  if (info.reconnect) {
    const auto& r = *info.reconnect;
    j += ",\n    \"reconnect\": {\"attempts\": " + n(r.attempts) + ", \"next_attempt_in_ms\": " +
         (r.next_attempt_in_ms ? n(*r.next_attempt_in_ms) : std::string("null")) +
         ", \"last_error\": " + json_string(r.last_error) + "}";
  }
  j += "\n  },\n";
  if (!info.multipath_policy.empty()) {
    j += "  \"multipath\": {\"policy\": " + json_string(info.multipath_policy) + ", \"paths\": " +
         paths_json(info.paths, "      ") + "},\n";
  }
  j += "  \"luns\": [";
  for (std::size_t i = 0; i < info.luns.size(); ++i) {
    const auto& l = info.luns[i];
    j += i == 0 ? "\n" : ",\n";
    j += "    {\"lun\": " + n(l.index) + ", \"file\": " + json_string("lun" + std::to_string(l.index)) +
         ", \"size_bytes\": " + n(l.size_bytes()) + ", \"block_size\": " + n(l.block_size_bytes) +
         ", \"blocks\": " + n(l.blocks) + ", \"thin\": " + b(l.thin) + ",\n     \"vendor\": " +
         json_string(l.vendor) + ", \"product\": " + json_string(l.product) + ", \"revision\": " +
         json_string(l.revision) + ", \"serial\": " + (l.serial ? json_string(*l.serial) : "null") +
         ", \"naa\": ";
    const auto naa = naa_hex(l.designators);
    j += naa ? json_string(*naa) : "null";
    j += ",\n     \"designators\": [";
    for (std::size_t k = 0; k < l.designators.size(); ++k) {
      j += (k == 0 ? "" : ", ") + json_string(designator_text(l.designators[k]));
    }
    j += "]";
    if (i < info.lun_paths.size() && !info.lun_paths[i].empty())
      j += ",\n     \"paths\": " + paths_json(info.lun_paths[i], "       ");
    j += "}";
  }
  j += info.luns.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return j;
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

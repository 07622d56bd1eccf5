// Parsers for iserkit-target's flag syntaxes (--listen, --lun; sizes are common/cli_values.hpp's).
#include <algorithm>
#include "iserkit/target/config.hpp"

#include <cctype>
#include <charconv>
#include <string>

#include <unistd.h>

#include "iserkit/common/cli_values.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/common/host_port.hpp"
#include "iserkit/common/log.hpp"

namespace iserkit::target {
namespace {

std::optional<std::uint64_t> parse_u64(std::string_view s) {
  std::uint64_t v = 0;
  if (s.empty()) return std::nullopt;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

Result<SocketIo> parse_socket_io(std::string_view text) {
  std::string lower(text);
  std::ranges::transform(lower, lower.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "auto") return SocketIo::automatic;
  if (lower == "uring" || lower == "io_uring") return SocketIo::uring;
  if (lower == "epoll") return SocketIo::epoll;
  return fail(errc::invalid_argument);
}

std::string_view to_string(SocketIo mode) noexcept {
  switch (mode) {
    case SocketIo::uring: return "uring";
    case SocketIo::epoll: return "epoll";
    case SocketIo::automatic: break;
  }
  return "auto";
}

Result<ListenAddress> parse_listen_address(std::string_view text) {
  ListenAddress out;
  if (const auto comma = text.find(','); comma != std::string_view::npos) {
    // "ADDRESS,tpgt=N", as SendTargets writes a TargetAddress (RFC 7143 §13.8).
    const auto tag_text = text.substr(comma + 1);
    if (!tag_text.starts_with("tpgt=")) return fail(errc::invalid_argument);
    auto tag = parse_u64(tag_text.substr(5));
    if (!tag || *tag == 0 || *tag > 65535) return fail(errc::invalid_argument);
    out.portal_group = static_cast<std::uint16_t>(*tag);
    text = text.substr(0, comma);
  }
  auto hp = parse_host_port(text);
  if (!hp || hp->host.empty()) return fail(errc::invalid_argument);
  out.host = std::move(hp->host);
  if (hp->port) out.port = *hp->port;
  return out;
}

Result<std::vector<iscsi::ChapAlgorithm>> parse_chap_algorithm_list(std::string_view text) {
  std::vector<iscsi::ChapAlgorithm> out;
  while (true) {
    const auto comma = text.find(',');
    auto a = iscsi::parse_chap_algorithm(text.substr(0, comma));
    if (!a) return fail(errc::invalid_argument);
    out.push_back(*a);
    if (comma == std::string_view::npos) return out;
    text.remove_prefix(comma + 1);
  }
}

PinnedFile::~PinnedFile() {
  if (fd >= 0) ::close(fd);
}

std::filesystem::path LunSource::open_path() const {
  if (pinned) return "/proc/self/fd/" + std::to_string(pinned->fd);
  return path;
}

std::string LunSource::display() const {
  std::string out = memory ? "mem" : rbd ? "rbd:" + rbd->pool + "/" + rbd->image : path.string();
  if (identity.uuid) out += ",uuid=" + to_string(*identity.uuid);
  if (!identity.serial.empty()) out += ",serial=" + identity.serial;
  if (!identity.naa.empty()) {
    out += ",naa=";
    for (auto b : identity.naa) out += fmt::format("{:02x}", b);
  }
  return out;
}

namespace {

// Takes ",uuid=…", ",serial=…" and ",naa=…" off the end of a --lun value into `identity`.
Result<void> take_identity_options(std::string_view& text, LuIdentityOverride& identity) {
  for (;;) {
    const auto comma = text.rfind(',');
    if (comma == std::string_view::npos) return {};
    const std::string_view option = text.substr(comma + 1);
    const auto eq = option.find('=');
    if (eq == std::string_view::npos) return {};
    const std::string_view key = option.substr(0, eq);
    const std::string_view value = option.substr(eq + 1);
    if (key == "uuid") {
      auto uuid = parse_uuid(value);
      if (!uuid || identity.uuid) return fail(errc::invalid_argument);
      identity.uuid = *uuid;
    } else if (key == "serial") {
      if (!check_unit_serial(value) || !identity.serial.empty()) return fail(errc::invalid_argument);
      identity.serial = std::string(value);
    } else if (key == "naa") {
      auto naa = parse_naa_designator(value);
      if (!naa || !identity.naa.empty()) return fail(errc::invalid_argument);
      identity.naa = std::move(*naa);
    } else {
      return {};  // not an identity option: part of the source (a path with a comma)
    }
    text = text.substr(0, comma);
  }
}

}  // namespace

Result<LunSource> parse_lun_source(std::string_view text) {
  LunSource out;
  if (auto r = take_identity_options(text, out.identity); !r) return fail(r.error());
  if (text.starts_with("rbd:")) {
    text.remove_prefix(4);
    const auto slash = text.find('/');
    if (slash == std::string_view::npos) return fail(errc::invalid_argument);
    const auto pool = text.substr(0, slash);
    const auto image = text.substr(slash + 1);
    auto bad = [](std::string_view n) {
      return n.empty() || n.size() > 255 ||
             std::any_of(n.begin(), n.end(), [](char ch) { return ch == '/' || ch == '@' || static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f; });
    };
    if (bad(pool) || bad(image)) return fail(errc::invalid_argument);
    out.rbd = RbdImageName{.pool = std::string(pool), .image = std::string(image)};
    return out;
  }
  if (text.starts_with("mem:")) {
    auto size = cli::parse_size(text.substr(4));
    if (!size || *size == 0) return fail(errc::invalid_argument);
    out.memory = true;
    out.size_bytes = *size;
    return out;
  }
  if (text.empty()) return fail(errc::invalid_argument);
  out.path = std::filesystem::path(std::string(text));
  return out;
}

Result<std::vector<TargetPortGroup>> make_port_groups(const std::vector<ListenAddress>& listen,
                                                      const std::map<std::uint16_t, AluaState>& alua_states,
                                                      const std::map<std::uint16_t, AluaState>& alua_peers) {
  // SPC-5 §5.16: one target port group per portal group, one target port in it (relative port id
  // = tag), in the state the configuration gives (default active/optimized).
  std::map<std::uint16_t, TargetPortGroup> groups;
  for (const auto& l : listen) {
    const auto it = alua_states.find(l.portal_group);
    groups.emplace(l.portal_group,
                   TargetPortGroup{.id = l.portal_group,
                                   .state = it == alua_states.end() ? AluaState::active_optimized : it->second,
                                   .relative_ports = {l.portal_group}});
  }
  for (const auto& [tag, state] : alua_states) {
    if (!groups.contains(tag)) {
      log::error("config: ALUA state for portal group {}, which no listen address uses (ADDRESS,tpgt={})", tag, tag);
      return fail(errc::invalid_argument);
    }
  }
  // A peer gateway's group: relative target port identifiers stay unique across the gateways
  // (SPC-5 §7.7.6.5) because each gateway uses its own tags.
  for (const auto& [tag, state] : alua_peers) {
    if (tag == 0) {
      log::error("config: ALUA peer portal group 0: tags are 1..65535");
      return fail(errc::invalid_argument);
    }
    if (groups.contains(tag)) {
      log::error("config: ALUA peer portal group {} is also served here (a listen address has tpgt={}); a peer "
                 "gateway's group needs a tag of its own", tag, tag);
      return fail(errc::invalid_argument);
    }
    groups.emplace(tag, TargetPortGroup{.id = tag, .state = state, .relative_ports = {tag}});
  }
  std::vector<TargetPortGroup> out;
  out.reserve(groups.size());
  for (auto& [tag, g] : groups) out.push_back(std::move(g));
  return out;
}

}  // namespace iserkit::target

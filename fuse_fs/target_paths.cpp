// Grouping the FUSE view's portals by target (see target_paths.hpp). RFC 7143 Appendix C, §13.8.
#include "fuse_fs/target_paths.hpp"

#include <algorithm>
#include <cctype>

namespace iserkit::fuse_fs {
namespace {

bool same_text(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
  });
}

bool same_path(const initiator::Url& a, const initiator::Url& b) {
  return a.transport == b.transport && a.port == b.port && same_text(a.host, b.host);
}

}  // namespace

std::vector<TargetPaths> group_target_paths(
    const std::vector<initiator::Url>& portals,
    const std::vector<std::optional<std::vector<initiator::DiscoveredTarget>>>& listings, bool multipath) {
  std::vector<TargetPaths> out;
  const auto add = [&](const std::string& iqn, initiator::Url path) {
    path.target = iqn;
    path.lun.reset();
    auto it = std::find_if(out.begin(), out.end(), [&](const TargetPaths& t) { return same_text(t.iqn, iqn); });
    if (it == out.end()) {
      out.push_back({.iqn = iqn, .paths = {std::move(path)}});
      return;
    }
    if (!multipath) return;  // the first URL that listed it
    path.target = it->iqn;
    if (std::none_of(it->paths.begin(), it->paths.end(), [&](const initiator::Url& u) { return same_path(u, path); }))
      it->paths.push_back(std::move(path));
  };
  for (std::size_t i = 0; i < portals.size(); ++i) {
    const initiator::Url& portal = portals[i];
    if (!portal.target.empty()) {
      add(portal.target, portal);
      continue;
    }
    if (i >= listings.size() || !listings[i]) continue;
    for (const auto& t : *listings[i]) {
      if (!multipath || t.portals.empty()) {
        add(t.name, portal);
        continue;
      }
      for (const auto& p : t.portals) {
        initiator::Url u = portal;  // scheme and CHAP user of the discovery URL
        u.host = p.host;
        u.port = p.port;
        add(t.name, std::move(u));
      }
    }
  }
  return out;
}

}  // namespace iserkit::fuse_fs

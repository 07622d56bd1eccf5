// Which portals lead to which target in the FUSE view: the union of the mounted URLs' targets (a
// URL that names a target, or the SendTargets listing of a discovery URL, RFC 7143 Appendix C),
// each IQN once, with the URLs to log in to it. Without --multipath a target is logged in to
// through the first URL that listed it (the discovery portal itself, TargetAddress not followed);
// with --multipath every URL naming it and every TargetAddress (RFC 7143 §13.8) a listing gave for
// it is a path (initiator::Multipath), deduplicated, in the order first seen. Pure; no I/O.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "iserkit/initiator/discovery.hpp"
#include "iserkit/initiator/url.hpp"

namespace iserkit::fuse_fs {

/// One target of the mount and where to log in to it.
struct TargetPaths {
  std::string iqn;  ///< the target name as first listed
  /// The URLs to log in through: target = iqn, no LUN; the first is the primary path. Exactly one
  /// without multipath; one or more with it.
  std::vector<initiator::Url> paths;
  friend bool operator==(const TargetPaths&, const TargetPaths&) = default;
};

/// Groups the mount's portals by target.
/// Parameters:
///  - `portals`: the mounted URLs, in command-line order;
///  - `listings`: per portal (same index), what its SendTargets discovery returned; nullopt = not
///    listed yet. Ignored for a URL that names a target (it lists just that target). Shorter than
///    `portals` counts as nullopt.
///  - `multipath`: false = one path per target, the first URL that listed it (the view's old
///    behaviour); true = every path described above. A TargetAddress path keeps the discovery
///    URL's scheme (transport) and CHAP user; a target listed without TargetAddress is reached at
///    the discovery portal (initiator::parse_send_targets fills it in).
/// Returns: the targets in first-seen order (first portal first, a portal's targets in the order it
/// listed them). Paths are the same when transport, host and port are (host compared as text,
/// case-insensitively: "LOCALHOST" and "localhost" are one path, "localhost" and "127.0.0.1" two).
/// IQNs are compared case-insensitively too (RFC 7143 §4.2.7.1); names are not validated here.
std::vector<TargetPaths> group_target_paths(
    const std::vector<initiator::Url>& portals,
    const std::vector<std::optional<std::vector<initiator::DiscoveredTarget>>>& listings, bool multipath);

}  // namespace iserkit::fuse_fs

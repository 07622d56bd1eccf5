// What the FUSE view shows about a LUN and a target besides the data: the LUN's extended
// attributes (user.iscsi.*, from standard INQUIRY SPC-5 §6.6.2, VPD 0x80 §7.7.15, VPD 0x83 §7.7.6,
// READ CAPACITY (16) SBC-4 §5.20), the per-target "info" file (JSON), and the errno a FUSE reply
// carries for an initiator error. Pure functions; no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "iserkit/iscsi/negotiation.hpp"
#include "iserkit/scsi/inquiry.hpp"

namespace iserkit::fuse_fs {

/// Identification and geometry of one LUN, gathered when the LUN is first opened.
struct LunMetadata {
  std::uint16_t index = 0;
  std::string vendor;    ///< T10 VENDOR IDENTIFICATION (trailing spaces removed)
  std::string product;   ///< PRODUCT IDENTIFICATION
  std::string revision;  ///< PRODUCT REVISION LEVEL
  std::optional<std::string> serial;            ///< VPD 0x80, leading/trailing spaces removed
  std::vector<scsi::Designator> designators;    ///< VPD 0x83
  std::uint32_t block_size_bytes = 0;           ///< logical block length in bytes
  std::uint64_t blocks = 0;                     ///< number of logical blocks
  bool thin = false;                            ///< LBPME (READ CAPACITY (16))
  bool unmapped_reads_zero = false;             ///< LBPRZ
  bool unmap_supported = false;                 ///< VPD 0xb2 LBPU
  [[nodiscard]] std::uint64_t size_bytes() const noexcept { return blocks * block_size_bytes; }
};

/// The lowercase hex of the first NAA designator associated with the logical unit; nullopt if none.
std::optional<std::string> naa_hex(const std::vector<scsi::Designator>& designators);

/// The extended attribute names a LUN file has, in listxattr order: user.iscsi.vendor, product,
/// revision, serial (when VPD 0x80 answered), naa (when VPD 0x83 has one), designators (one
/// designator_text per line, when any), block_size, blocks, thin.
std::vector<std::string> xattr_names(const LunMetadata& m);
/// The value of attribute `name` (decimal numbers, "0"/"1" for thin; no trailing newline except
/// between designator lines); nullopt when the LUN has no such attribute (ENODATA).
std::optional<std::string> xattr_value(const LunMetadata& m, std::string_view name);

/// Quotes and escapes `s` as a JSON string (RFC 8259 §7, nlohmann::json): ", \ and control
/// characters escaped; valid UTF-8 passed through; each byte that is not part of valid UTF-8 (a
/// target's INQUIRY text may hold any byte) replaced by U+FFFD, so the result is always valid JSON.
std::string json_string(std::string_view s);

/// One path of a multipath device, as the "info" file shows it (from initiator::PathStatus).
struct PathInfo {
  std::string url;    ///< the path's URL (password hidden)
  std::string peer;   ///< "ip:port" while the path has a session, else empty
  std::string state;  ///< "up", "recovering", "down", "refused"; "not-connected" before the device is opened
  std::string alua;   ///< the ALUA state of its target port group ("active/optimized", …)
  std::optional<std::uint16_t> target_port_group;
  std::uint64_t commands = 0;        ///< commands sent on it
  std::uint64_t failures = 0;        ///< commands that failed on it with a path error
  std::uint64_t downs = 0;           ///< times it went down
  std::uint64_t reinstatements = 0;  ///< times it came back
};

/// The content of a target directory's "info" file.
struct TargetInfo {
  std::string target;   ///< IQN
  std::string portal;   ///< "host:port" the view logs in to
  std::string url;      ///< iscsi://host:port/iqn
  /// "logged-in", "recovering" (connection lost, logging in again, requests wait), "gave-up" (past
  /// the replacement timeout: requests fail with EIO while logins go on in the background),
  /// "not-connected" or "failed: <reason>"; with multipath also "all-paths-lost".
  std::string session_state;
  /// While "recovering" or "gave-up" without multipath: the background logins
  /// (initiator::Session::reconnect_status()), as "session": {"reconnect": {…}}.
  struct Reconnect {
    std::uint64_t attempts = 0;                       ///< logins tried since the connection was lost
    std::optional<std::uint64_t> next_attempt_in_ms;  ///< nullopt while one is under way
    std::string last_error;                           ///< of the last failed login; empty if none
  };
  std::optional<Reconnect> reconnect;
  /// Negotiated operational parameters while logged in (RFC 7143 §13).
  std::optional<iscsi::OperationalParameters> parameters;
  std::vector<LunMetadata> luns;
  /// With --multipath: the policy ("failover", "round-robin"); empty without multipath.
  std::string multipath_policy;
  /// With multipath: the paths of the target's control device (LUN 0's Multipath).
  std::vector<PathInfo> paths;
  /// With multipath: each LUN's own paths, parallel to `luns` (shorter or empty = none shown).
  std::vector<std::vector<PathInfo>> lun_paths;
};
/// Renders `info` as pretty-printed JSON (2-space indent, a trailing newline): keys "target",
/// "portal", "url", "session" {"state", "parameters" {RFC-spelled key: value}}, with multipath
/// "multipath" {"policy", "paths" [path]}, then "luns" [{"lun", "file", "size_bytes", "block_size",
/// "blocks", "thin", "vendor", "product", "revision", "serial", "naa", "designators", with
/// multipath "paths" [path]}]; a path is {"url", "peer", "state", "alua", "target_port_group"
/// (number or null), "commands", "failures", "downs", "reinstatements"}. Written with
/// nlohmann::json: always valid UTF-8 JSON, whatever bytes the strings hold (invalid UTF-8 becomes
/// U+FFFD, as in json_string()).
std::string target_info_json(const TargetInfo& info);

/// The errno a FUSE reply carries for an initiator error: the SCSI sense table through
/// initiator::to_errno() (EIO, ENOSPC, EROFS, EINVAL, …; scsi/errno_map.hpp is the one table), with
/// the transport failures a vanished or silent target produces — connection closed, session
/// closed, command timeout, connect refused/unreachable — reported as EIO, as a block device that
/// disappears does. Never returns 0 for a non-empty code.
int fuse_errno(std::error_code ec) noexcept;

}  // namespace iserkit::fuse_fs

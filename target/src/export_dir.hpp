// --export-dir: the targets and LUNs found in a folder tree, and the iSCSI name rules they must
// meet (RFC 7143 §4.2.7.1 iSCSI names, RFC 3722 stringprep profile).
//
// Rules: each folder directly inside the export folder is a target "<base iqn>:<folder name>";
// each regular file or block device directly inside that folder is a LUN (sorted by name: lun0,
// lun1, …). Symlinks are never followed — neither a symlinked folder nor a symlinked file — and
// FIFOs, character devices, sockets and sub-folders are skipped with a warning. The scan cannot be
// tricked by a swap between check and open: every folder is opened with openat(O_DIRECTORY |
// O_NOFOLLOW) relative to its parent's descriptor, and every file with openat(O_PATH | O_NOFOLLOW)
// and checked with fstat on that descriptor; the LUN is later opened through /proc/self/fd/N of
// that descriptor (LunSource::pinned), which names the inode that was checked, not a path that
// could since point elsewhere.
//
// Folder names become part of the target name, which must be a valid iSCSI name: upper-case ASCII
// letters are folded to lower case (RFC 3722 maps case away, so "Disk1" is served as "…:disk1");
// then only a-z, 0-9, '-', '.' and ':' are accepted (spaces, '=', ',', control characters,
// non-ASCII and anything else make the folder skipped with a warning), and the whole name must
// be at most 223 bytes. Two folders that fold to the same name: the second is skipped. File names
// never become part of a name (only logged, escaped).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "iserkit/common/result.hpp"
#include "iserkit/iscsi/names.hpp"
#include "iserkit/target/config.hpp"

namespace iserkit::target {

// The iSCSI name rules (RFC 7143 §4.2.7) are shared with every program: iscsi/names.hpp.
using iscsi::is_valid_iscsi_name;
using iscsi::max_iscsi_name_bytes;

/// One target the export folder describes.
struct ExportedTarget {
  std::string name;            ///< "<base iqn>:<folded folder name>"
  std::string alias;           ///< the folder name as found
  std::vector<LunSource> luns; ///< each with `pinned` set; at least one
};

/// What scan_export_dir() found, and what it skipped (one warning each, peer-safe: names escaped).
struct ExportScan {
  std::vector<ExportedTarget> targets;  ///< sorted by folder name
  std::vector<std::string> warnings;
};

/// Scans `dir` by the rules above. `base_iqn` is the target name prefix (--iqn).
/// Errors: the errno of opening or reading `dir` itself (ENOENT, ENOTDIR, EACCES).
Result<ExportScan> scan_export_dir(const std::filesystem::path& dir, std::string_view base_iqn);

}  // namespace iserkit::target

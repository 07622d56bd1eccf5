// The FUSE view's namespace: the inode tree of one mounted portal — the root directory, one
// directory per target (named by its IQN, from SendTargets, RFC 7143 Appendix C), and in each target
// directory one regular file per LUN ("lun<N>", from REPORT LUNS, SPC-5 §6.33) plus an "info" file;
// the root also holds the ".rescan" control file. Pure data: no FUSE, no I/O, no locks (the FUSE
// view touches it from the initiator's loop thread only, see fuse_ops.cpp THREAD MODEL).
//
// Inode numbers are stable for the life of the mount: a name keeps its inode when it disappears and
// comes back, and inodes are never reused, so the kernel's cached inodes never point at the wrong
// thing. Nodes are never freed (a vanished target or LUN is marked absent): the tree is bounded by
// the number of distinct names the portal ever offered.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace iserkit::fuse_fs {

/// A FUSE inode number (fuse_ino_t).
using Ino = std::uint64_t;
/// The root directory's inode (FUSE_ROOT_ID).
inline constexpr Ino root_ino = 1;

/// What a node is.
enum class NodeKind { root, rescan, target, info, lun };

/// One file or directory of the view.
struct Node {
  Ino ino = 0;
  NodeKind kind = NodeKind::root;
  std::string name;     ///< the directory entry name ("" for the root)
  Ino parent = root_ino;
  bool present = true;  ///< false once the portal stopped offering it (lookups fail with ENOENT)
  std::string target;   ///< the target IQN (target, info and lun nodes)
  std::uint16_t lun_index = 0;  ///< lun nodes: the LUN index (SAM-5 §4.7 single level)
  std::uint64_t size_bytes = 0; ///< lun nodes: the capacity in bytes
  /// Directories: children in first-seen order, and by name.
  std::vector<Ino> children;
  std::map<std::string, Ino, std::less<>> by_name;
};

/// One LUN as a target directory lists it.
struct LunEntry {
  std::uint16_t index = 0;       ///< LUN index; the file is lun_file_name(index)
  std::uint64_t size_bytes = 0;  ///< capacity in bytes (blocks × block size)
  friend bool operator==(const LunEntry&, const LunEntry&) = default;
};

/// Names that appeared and disappeared in one update.
struct TreeDiff {
  std::vector<std::string> added;
  std::vector<std::string> removed;
  std::vector<std::string> skipped;  ///< names that cannot be a directory entry (see valid_name)
};

/// The inode tree of one portal. Not thread-safe (one thread owns it).
class NamespaceTree {
 public:
  /// Name of the root's control file: a write to it forces a rescan.
  static constexpr std::string_view rescan_name = ".rescan";
  /// Name of each target directory's JSON description file.
  static constexpr std::string_view info_name = "info";

  /// A tree with the root and its ".rescan" file.
  NamespaceTree();

  /// The node with inode `ino`, present or not; nullptr for an inode never handed out.
  [[nodiscard]] const Node* get(Ino ino) const;
  /// The present child `name` of directory `parent`; nullptr when there is none.
  [[nodiscard]] const Node* lookup(Ino parent, std::string_view name) const;
  /// The present children of directory `dir`, in first-seen order (targets as discovery listed
  /// them the first time, "info" first then LUNs by index in a target). Empty for non-directories.
  [[nodiscard]] std::vector<const Node*> list(Ino dir) const;
  /// The directory inode of target `iqn` (present or not); 0 when never seen.
  [[nodiscard]] Ino target_dir(std::string_view iqn) const;

  /// Makes `names` the root's targets: new names get a directory (with an "info" file), names no
  /// longer listed are marked absent, names that come back are present again with their old inode.
  /// Duplicates are ignored; invalid names (valid_name) are skipped and reported.
  TreeDiff set_targets(const std::vector<std::string>& names);
  /// Makes `luns` the LUN files of target directory `dir` (sizes updated in place). Returns the
  /// file names added and removed; an empty diff when `dir` is not a target directory.
  TreeDiff set_luns(Ino dir, const std::vector<LunEntry>& luns);

  /// True when `name` can be a directory entry: 1..255 bytes, no '/' or NUL, not "." or "..",
  /// not one of the view's own names (".rescan" at the root).
  static bool valid_name(std::string_view name);
  /// "lun<index>", e.g. "lun0", "lun12".
  static std::string lun_file_name(std::uint16_t index);

 private:
  Node& add(Ino parent, NodeKind kind, std::string name);
  Node& node(Ino ino) { return *nodes_.at(ino); }

  std::map<Ino, std::unique_ptr<Node>> nodes_;
  Ino next_ino_ = root_ino;
};

}  // namespace iserkit::fuse_fs

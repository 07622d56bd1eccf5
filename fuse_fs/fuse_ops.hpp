// The FUSE low-level operations of the iSCSI namespace view (libfuse 3 low-level API): the table
// given to fuse_session_new() and the context it runs with. See fuse_ops.cpp for the THREAD MODEL.
// Layer 6 (front end).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <mutex>
#include <unordered_set>

#include <fuse_lowlevel.h>

#include "fuse_fs/portal_view.hpp"

namespace iserkit::fuse_fs {

/// What the mount looks like.
struct MountOptions {
  bool read_only = false;   ///< refuse writes (EROFS); files are mode 0444
  bool direct_io = false;   ///< open every LUN file with FOPEN_DIRECT_IO (no page cache even for buffered opens)
  double attr_timeout_seconds = 1.0;  ///< how long the kernel may cache names and attributes
  uid_t uid = 0;            ///< owner shown for every node (the mounting user)
  gid_t gid = 0;
  std::timespec mount_time{};  ///< atime/mtime/ctime shown for every node
  /// Ask libfuse to splice requests from /dev/fuse (FUSE_CAP_SPLICE_READ), so WRITE payload of a
  /// page or more stays in its pipe and is read(2) straight into a session-pool buffer (no copy of
  /// ours on iSER either). Set from --splice-writes (splice_wanted(), write_payload.hpp): by
  /// default when a portal URL is iser://; see fuse_fs/README.md "Write payload".
  bool splice_writes = false;
};

/// Everything the operations need; the session's userdata. The view is used on its executor only.
struct OpenFile;  // fuse_ops.cpp: what fi->fh of a file points at

/// State shared by the operations (fuse_session userdata).
struct FuseContext {
  FuseContext(PortalView& v, MountOptions o) : view(v), options(o) {}
  PortalView& view;
  MountOptions options;
  /// Requests handed to the loop and not yet replied to (main.cpp waits for 0 before destroying
  /// the FUSE session).
  std::atomic<int> in_flight{0};
  /// WRITEs whose payload came through libfuse's pipe into a session-pool buffer (splice_writes).
  std::atomic<std::uint64_t> spliced_writes{0};
  /// File handles (fi->fh) opened and not yet released. A handle still open when the loop ends
  /// (no FUSE_RELEASE will come) is freed by free_open_files().
  std::mutex open_files_mutex;
  std::unordered_set<OpenFile*> open_files;
};

/// Frees every file handle still in `c.open_files` (unmount with files open). Call on the loop
/// thread once the FUSE loop has ended and every session is closed.
void free_open_files(FuseContext& c);

/// The operations table (static storage).
const fuse_lowlevel_ops& fuse_operations() noexcept;

}  // namespace iserkit::fuse_fs

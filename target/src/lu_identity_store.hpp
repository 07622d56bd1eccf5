// Where a logical unit's name (its UUID, lu_identity.hpp) comes from, for each kind of LUN
// source: kept with a file in a user xattr, derived from a block device's own identity or an RBD
// image's, random for a memory LUN, or given in the configuration. Blocking file-system calls:
// used while the target builds its LUNs (start-up, reload), never on an I/O loop.
// Design, order and limits: docs/lu-identity.md.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "iserkit/common/result.hpp"
#include "iserkit/target/lu_identity.hpp"

namespace iserkit::target {

/// The user extended attribute that keeps a file LUN's UUID, in canonical text form (36 bytes).
inline constexpr const char* lu_uuid_xattr = "user.iserkit.lu-uuid";

/// How a LUN's UUID was found (logged at start-up).
enum class LuUuidOrigin {
  configured,     ///< `uuid=` in --lun or the configuration file
  storage_name,   ///< name-based from BackendCapabilities::storage_id (an RBD image)
  xattr_found,    ///< read from lu_uuid_xattr on the file
  xattr_created,  ///< new random UUID, stored in lu_uuid_xattr now
  device_id,      ///< name-based from the block device's own identity (dm uuid, WWID)
  host_file,      ///< name-based from host id + st_dev + st_ino (no xattr possible; see docs)
  process,        ///< new random UUID for this run only (memory LUN)
};

/// A LUN's UUID and where it came from.
struct LuUuid {
  Uuid uuid;
  LuUuidOrigin origin = LuUuidOrigin::configured;
  /// For device_id and host_file: what the UUID was derived from; for the fallbacks also why
  /// the xattr was not used (e.g. "user xattrs not supported"). Empty otherwise.
  std::string detail;
};

/// "configured", "storage", "xattr", "xattr-created", "device", "host-file", "process".
std::string_view to_string(LuUuidOrigin origin) noexcept;

/// This host's stable id: /etc/machine-id, else /var/lib/dbus/machine-id, else the host name.
/// Never empty (falls back to "unknown-host").
std::string host_id();

/// The UUID of the file or block device at `path` (followed if a symlink, so /proc/self/fd/N of a
/// pinned --export-dir file works). `host` is host_id() (a parameter for tests).
/// - Regular file: lu_uuid_xattr read; if absent, a new random UUID is stored with XATTR_CREATE,
///   and if another process stored one first (EEXIST), that one is read and used — so every
///   process serving the file (gateways on shared storage) agrees. If the file system has no user
///   xattrs (ENOTSUP) or the attribute cannot be set (EPERM, EACCES, EROFS: an immutable file, a
///   read-only mount, another owner), the name-based UUID of host, st_dev and st_ino (host_file).
/// - Block device (user xattrs cannot be set on device nodes): the name-based UUID of its
///   device-mapper UUID or WWID from sysfs (device_id: the same on every host that sees the
///   device), else of host and st_rdev (host_file).
/// Errors: the errno of stat(2), getxattr(2) or setxattr(2) (other than "none", "not supported"
/// and the refusals above); errc::invalid_argument (iserkit's category) when lu_uuid_xattr holds
/// something that is not a UUID (the caller logs how to repair it); ENODEV for a path that is
/// neither a regular file nor a block device.
Result<LuUuid> lu_uuid_of_file(const std::filesystem::path& path, std::string_view host);

/// The UUID of a backend that names its storage (BackendCapabilities::storage_id, e.g.
/// "rbd:FSID/POOL-ID/IMAGE-ID"): name-based, the same in every process and on every host.
LuUuid lu_uuid_of_storage(std::string_view storage_id);

}  // namespace iserkit::target

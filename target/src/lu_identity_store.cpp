// Where a logical unit's UUID comes from (lu_identity_store.hpp; docs/lu-identity.md): the user
// xattr user.iserkit.lu-uuid on a file LUN, created once with XATTR_CREATE; a block device's
// sysfs identity; host id + inode when neither is possible.
#include "lu_identity_store.hpp"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "iserkit/common/errors.hpp"

namespace iserkit::target {
namespace {

std::error_code errno_code(int e) { return {e, std::generic_category()}; }

// The first line of a small text file, trimmed of white space; empty if unreadable or empty.
std::string first_line(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return {};
  const auto first = line.find_first_not_of(" \t\r");
  const auto last = line.find_last_not_of(" \t\r");
  return first == std::string::npos ? std::string() : line.substr(first, last - first + 1);
}

// Errors of setxattr/getxattr that mean "this file cannot keep an xattr", not "something broke".
bool xattr_impossible(int e) noexcept {
  return e == ENOTSUP || e == EPERM || e == EACCES || e == EROFS || e == ENOSPC || e == EDQUOT;
}

const char* xattr_reason(int e) noexcept {
  switch (e) {
    case ENOTSUP: return "the file system has no user xattrs";
    case EPERM: return "setting the xattr is not permitted (immutable or append-only file?)";
    case EACCES: return "no permission to set the xattr";
    case EROFS: return "read-only file system";
    default: return "no space for the xattr";
  }
}

enum class XattrRead { found, absent, impossible };

// Reads lu_uuid_xattr. On `found` sets `out`; `error` is set on a real failure (then the return
// value is meaningless) and to invalid_argument for a value that is not a UUID.
XattrRead read_xattr(const std::filesystem::path& path, Uuid& out, std::error_code& error, int& why) {
  char value[64] = {};
  const ssize_t n = ::getxattr(path.c_str(), lu_uuid_xattr, value, sizeof value - 1);
  if (n < 0) {
    if (errno == ENODATA) return XattrRead::absent;
    if (errno == ENOTSUP) {
      why = ENOTSUP;
      return XattrRead::impossible;
    }
    error = errno_code(errno == ERANGE ? EINVAL : errno);
    return XattrRead::found;
  }
  auto uuid = parse_uuid(std::string_view(value, static_cast<std::size_t>(n)));
  if (!uuid) {
    error = make_error_code(errc::invalid_argument);
    return XattrRead::found;
  }
  out = *uuid;
  return XattrRead::found;
}

LuUuid host_file_uuid(std::string_view host, const struct stat& st, std::string why) {
  const std::string name = fmt::format("host-file:{}:{}:{}:{}", host, major(st.st_dev), minor(st.st_dev), st.st_ino);
  return LuUuid{.uuid = name_based_uuid(name),
                .origin = LuUuidOrigin::host_file,
                .detail = fmt::format("{}; derived from host {} device {}:{} inode {}", why, host, major(st.st_dev),
                                      minor(st.st_dev), st.st_ino)};
}

Result<LuUuid> block_device_uuid(std::string_view host, const struct stat& st) {
  // The device's own identity, the same on every host that sees it: a device-mapper UUID (LVM:
  // "LVM-<vg uuid><lv uuid>"), the WWID of an NVMe namespace or SCSI disk; for a partition the
  // disk's, with the partition number.
  const std::filesystem::path sys = fmt::format("/sys/dev/block/{}:{}", major(st.st_rdev), minor(st.st_rdev));
  std::string suffix;
  std::filesystem::path base = sys;
  if (const auto part = first_line(sys / "partition"); !part.empty()) {
    suffix = ":part" + part;
    base = sys / "..";
  }
  for (const char* file : {"dm/uuid", "wwid", "device/wwid"}) {
    const std::string id = first_line(base / file);
    if (id.empty()) continue;
    return LuUuid{.uuid = name_based_uuid(fmt::format("block-device:{}{}", id, suffix)),
                  .origin = LuUuidOrigin::device_id,
                  .detail = fmt::format("derived from the device's {} {}{}", file, id, suffix)};
  }
  const std::string name = fmt::format("host-block-device:{}:{}:{}", host, major(st.st_rdev), minor(st.st_rdev));
  return LuUuid{.uuid = name_based_uuid(name),
                .origin = LuUuidOrigin::host_file,
                .detail = fmt::format("the device has no dm uuid or WWID; derived from host {} device number {}:{}",
                                      host, major(st.st_rdev), minor(st.st_rdev))};
}

}  // namespace

std::string_view to_string(LuUuidOrigin origin) noexcept {
  switch (origin) {
    case LuUuidOrigin::configured: return "configured";
    case LuUuidOrigin::storage_name: return "storage";
    case LuUuidOrigin::xattr_found: return "xattr";
    case LuUuidOrigin::xattr_created: return "xattr-created";
    case LuUuidOrigin::device_id: return "device";
    case LuUuidOrigin::host_file: return "host-file";
    case LuUuidOrigin::process: return "process";
  }
  return "?";
}

std::string host_id() {
  for (const char* file : {"/etc/machine-id", "/var/lib/dbus/machine-id"})
    if (auto id = first_line(file); !id.empty()) return id;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) == 0 && name[0] != '\0') return name;
  return "unknown-host";
}

Result<LuUuid> lu_uuid_of_file(const std::filesystem::path& path, std::string_view host) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return fail(errno_code(errno));
  if (S_ISBLK(st.st_mode)) return block_device_uuid(host, st);
  if (!S_ISREG(st.st_mode)) return fail(std::make_error_code(std::errc::no_such_device));
  // Two tries: a process that loses the XATTR_CREATE race reads the winner's UUID.
  for (int attempt = 0; attempt < 2; ++attempt) {
    Uuid uuid;
    std::error_code error;
    int why = 0;
    switch (read_xattr(path, uuid, error, why)) {
      case XattrRead::found:
        if (error) return fail(error);
        return LuUuid{.uuid = uuid, .origin = LuUuidOrigin::xattr_found, .detail = {}};
      case XattrRead::impossible:
        return host_file_uuid(host, st, xattr_reason(why));
      case XattrRead::absent:
        break;
    }
    auto fresh = random_uuid();
    if (!fresh) return fail(fresh.error());
    const std::string text = to_string(*fresh);
    if (::setxattr(path.c_str(), lu_uuid_xattr, text.data(), text.size(), XATTR_CREATE) == 0)
      return LuUuid{.uuid = *fresh, .origin = LuUuidOrigin::xattr_created, .detail = {}};
    if (errno == EEXIST) continue;  // another process stored one since our read: use that one
    if (xattr_impossible(errno)) return host_file_uuid(host, st, xattr_reason(errno));
    return fail(errno_code(errno));
  }
  return fail(errno_code(EEXIST));  // created and removed again under us twice: give up
}

LuUuid lu_uuid_of_storage(std::string_view storage_id) {
  return LuUuid{.uuid = name_based_uuid(fmt::format("storage:{}", storage_id)),
                .origin = LuUuidOrigin::storage_name,
                .detail = std::string(storage_id)};
}

}  // namespace iserkit::target

// --export-dir scanning without following symlinks (see export_dir.hpp for the rules).
#include "export_dir.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"

namespace iserkit::target {
namespace {

std::error_code errno_code(int e) { return {e, std::generic_category()}; }

bool name_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == ':';
}

// A descriptor closed at scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// The entry names of the open folder `dir_fd` (its descriptor stays open), sorted; "." and ".." left out.
Result<std::vector<std::string>> list_names(int dir_fd) {
  const int copy = ::dup(dir_fd);
  if (copy < 0) return fail(errno_code(errno));
  DIR* d = ::fdopendir(copy);
  if (d == nullptr) {
    const int e = errno;
    ::close(copy);
    return fail(errno_code(e));
  }
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* entry = ::readdir(d)) {
    std::string_view n(entry->d_name);
    if (n != "." && n != "..") names.emplace_back(n);
  }
  const int e = errno;
  ::closedir(d);
  if (e != 0) return fail(errno_code(e));
  std::sort(names.begin(), names.end());
  return names;
}

// The folder part of a target name: upper case folded, then only RFC 3722-safe ASCII.
std::optional<std::string> fold_folder_name(std::string_view folder) {
  std::string out;
  out.reserve(folder.size());
  for (char c : folder) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (!name_char(c)) return std::nullopt;
    out += c;
  }
  if (out.empty()) return std::nullopt;
  return out;
}

}  // namespace

Result<ExportScan> scan_export_dir(const std::filesystem::path& dir, std::string_view base_iqn) {
  ExportScan scan;
  // The export folder itself is the administrator's choice and may be reached through a symlink;
  // nothing below it is.
  Fd root(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (root.fd < 0) return fail(errno_code(errno));
  auto folders = list_names(root.fd);
  if (!folders) return fail(folders.error());
  std::vector<std::string> taken;
  for (const auto& folder : *folders) {
    const auto shown = log::escape(folder);
    Fd sub(::openat(root.fd, folder.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (sub.fd < 0) {
      const int e = errno;
      // O_NOFOLLOW on a symlink fails with ELOOP, or ENOTDIR when O_DIRECTORY is checked first.
      struct stat st {};
      const bool link = ::fstatat(root.fd, folder.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
      if (e == ENOTDIR && !link) continue;  // a file at the top: not a target
      if (link || e == ELOOP) {
        scan.warnings.push_back(fmt::format("export-dir: {} is a symlink: not followed, no target for it", shown));
      } else {
        scan.warnings.push_back(fmt::format("export-dir: {}: {}: no target for it", shown, std::strerror(e)));
      }
      continue;
    }
    auto folded = fold_folder_name(folder);
    if (!folded) {
      scan.warnings.push_back(fmt::format(
          "export-dir: folder {} has characters an iSCSI name cannot hold (RFC 7143 §4.2.7.1: a-z, 0-9, '-', '.', ':'"
          "; upper case is folded): no target for it",
          shown));
      continue;
    }
    std::string name = std::string(base_iqn) + ":" + *folded;
    if (name.size() > max_iscsi_name_bytes) {
      scan.warnings.push_back(fmt::format(
          "export-dir: folder {} makes a target name of {} bytes, more than the 223 of RFC 7143 §4.2.7.1: no target for it",
          shown, name.size()));
      continue;
    }
    if (!is_valid_iscsi_name(name)) {
      scan.warnings.push_back(fmt::format("export-dir: {} is not a valid iSCSI name (RFC 7143 §4.2.7.2, iqn. format): "
                                          "check --iqn; no target for folder {}",
                                          log::escape(name), shown));
      continue;
    }
    if (std::find(taken.begin(), taken.end(), name) != taken.end()) {
      scan.warnings.push_back(fmt::format("export-dir: folder {} folds to the name {} of an earlier folder: no target for it",
                                          shown, name));
      continue;
    }
    auto files = list_names(sub.fd);
    if (!files) {
      scan.warnings.push_back(fmt::format("export-dir: {}: {}: no target for it", shown, files.error().message()));
      continue;
    }
    ExportedTarget target{.name = name, .alias = folder, .luns = {}};
    for (const auto& file : *files) {
      const auto where = fmt::format("{}/{}", shown, log::escape(file));
      // O_PATH: nothing is opened for I/O yet (a FIFO cannot block us); O_NOFOLLOW: a symlink is
      // opened as the link itself, and fstat then says so.
      Fd f(::openat(sub.fd, file.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
      struct stat st {};
      if (f.fd < 0 || ::fstat(f.fd, &st) != 0) {
        scan.warnings.push_back(fmt::format("export-dir: {}: {}: skipped", where, std::strerror(errno)));
        continue;
      }
      if (S_ISLNK(st.st_mode)) {
        scan.warnings.push_back(fmt::format("export-dir: {} is a symlink: not followed, skipped", where));
        continue;
      }
      if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
        scan.warnings.push_back(fmt::format("export-dir: {} is not a regular file or block device ({}): skipped", where,
                                            S_ISDIR(st.st_mode)    ? "a folder"
                                            : S_ISFIFO(st.st_mode) ? "a FIFO"
                                            : S_ISCHR(st.st_mode)  ? "a character device"
                                            : S_ISSOCK(st.st_mode) ? "a socket"
                                                                   : "another kind"));
        continue;
      }
      auto pinned = std::make_shared<PinnedFile>(f.fd);
      f.fd = -1;  // owned by `pinned` now
      target.luns.push_back(LunSource{.path = dir / folder / file, .pinned = std::move(pinned)});
    }
    if (target.luns.empty()) {
      scan.warnings.push_back(fmt::format("export-dir: {} has no regular files or block devices: no target for it", shown));
      continue;
    }
    taken.push_back(name);
    scan.targets.push_back(std::move(target));
  }
  return scan;
}

}  // namespace iserkit::target

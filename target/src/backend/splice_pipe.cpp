// SplicePipe (see splice_pipe.hpp).
#include "backend/splice_pipe.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include <system_error>

namespace iserkit::target {
namespace {

/// /proc/sys/fs/pipe-max-size (read once): an unprivileged F_SETPIPE_SZ above it fails with EPERM.
std::size_t pipe_max_size() noexcept {
  static const std::size_t value = [] {
    std::size_t v = 0;
    if (FILE* f = std::fopen("/proc/sys/fs/pipe-max-size", "re")) {
      unsigned long n = 0;
      if (std::fscanf(f, "%lu", &n) == 1) v = n;
      std::fclose(f);
    }
    return v;
  }();
  return value;
}

}  // namespace

void SplicePipe::close() noexcept {
  if (read_fd >= 0) ::close(read_fd);
  if (write_fd >= 0) ::close(write_fd);
  read_fd = write_fd = -1;
}

bool SplicePipe::empty() const noexcept {
  int left = 0;
  return ::ioctl(read_fd, FIONREAD, &left) == 0 && left == 0;
}

Result<SplicePipe> open_splice_pipe(std::size_t want_bytes, int extra_flags) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | extra_flags) != 0) return fail(std::error_code(errno, std::generic_category()));
  SplicePipe p{fds[0], fds[1], 0};
  if (const std::size_t max = pipe_max_size(); max >= 4096) want_bytes = std::min(want_bytes, max);
  // Refused (EPERM past pipe-max-size or the user's pipe-user-pages-soft): keep what it has.
  (void)::fcntl(p.write_fd, F_SETPIPE_SZ, static_cast<int>(want_bytes));
  const int capacity = ::fcntl(p.write_fd, F_GETPIPE_SZ);
  if (capacity <= 0) {
    const int e = capacity < 0 ? errno : EINVAL;
    p.close();
    return fail(std::error_code(e, std::generic_category()));
  }
  p.capacity = static_cast<std::size_t>(capacity);
  return p;
}

}  // namespace iserkit::target

// SplicePipe: a pipe used as splice(2)'s kernel buffer (layer 5), and how one is opened. Shared by
// UringBackend's in-kernel copy (file → pipe → file) and the connection's zero-copy READ Data-In
// (file → pipe → socket, data_in_pipes.hpp).
#pragma once

#include <cstddef>

#include "iserkit/common/result.hpp"

namespace iserkit::target {

/// Both ends of a pipe and its capacity in bytes (F_GETPIPE_SZ). A plain value: close() it once.
struct SplicePipe {
  int read_fd = -1;
  int write_fd = -1;
  std::size_t capacity = 0;
  /// Closes both ends (if open).
  void close() noexcept;
  /// True when no byte waits in the pipe (FIONREAD); false also when that cannot be asked.
  [[nodiscard]] bool empty() const noexcept;
};

/// A new pipe (O_CLOEXEC | `extra_flags`, e.g. O_NONBLOCK) grown with F_SETPIPE_SZ towards
/// `want_bytes`, at most /proc/sys/fs/pipe-max-size (above it an unprivileged F_SETPIPE_SZ fails
/// with EPERM); a refused grow keeps the size it has. Errors: pipe2's and fcntl's errno.
Result<SplicePipe> open_splice_pipe(std::size_t want_bytes, int extra_flags = 0);

}  // namespace iserkit::target

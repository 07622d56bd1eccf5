// Service manager notifications and socket activation through libsystemd (sd_notify(3),
// sd_listen_fds(3), sd_is_socket(3)); without libsystemd in the build, a stand-in that sends nothing.
#include "iserkit/common/service_manager.hpp"

#include <cstdlib>
#include <ctime>

#include <fcntl.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include "iserkit/common/errors.hpp"

#ifdef ISERKIT_WITH_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

namespace iserkit::service {
namespace {

std::string status_line(std::string_view status) {
  // STATUS= is one line: a newline would start another assignment.
  std::string s(status);
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return "STATUS=" + s;
}

}  // namespace

bool built_with_systemd() noexcept {
#ifdef ISERKIT_WITH_SYSTEMD
  return true;
#else
  return false;
#endif
}

bool notify_socket_set() noexcept {
  const char* s = std::getenv("NOTIFY_SOCKET");
  return s != nullptr && *s != '\0';
}

bool notify(std::string_view state) noexcept {
  if (!notify_socket_set()) return false;
#ifdef ISERKIT_WITH_SYSTEMD
  try {
    const std::string text(state);
    // 0: keep NOTIFY_SOCKET set, later notifications (STATUS, RELOADING, STOPPING) need it.
    return sd_notify(0, text.c_str()) > 0;
  } catch (...) {
    return false;
  }
#else
  (void)state;
  return false;
#endif
}

bool notify_ready(std::string_view status) noexcept {
  try {
    return notify("READY=1\n" + status_line(status));
  } catch (...) {
    return false;
  }
}

bool notify_status(std::string_view status) noexcept {
  try {
    return notify(status_line(status));
  } catch (...) {
    return false;
  }
}

bool notify_reloading(std::string_view status) noexcept {
  try {
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    const auto usec = static_cast<unsigned long long>(now.tv_sec) * 1000000ull +
                      static_cast<unsigned long long>(now.tv_nsec) / 1000ull;
    return notify(fmt::format("RELOADING=1\nMONOTONIC_USEC={}\n{}", usec, status_line(status)));
  } catch (...) {
    return false;
  }
}

bool notify_stopping(std::string_view status) noexcept {
  try {
    return notify("STOPPING=1\n" + status_line(status));
  } catch (...) {
    return false;
  }
}

Result<std::vector<int>> passed_sockets() {
  std::vector<int> out;
#ifdef ISERKIT_WITH_SYSTEMD
  // 1: unset LISTEN_PID/LISTEN_FDS/LISTEN_FDNAMES, so a child (--run, a fork) does not take them.
  const int n = sd_listen_fds(1);
  if (n < 0) return fail(std::error_code(-n, std::system_category()));
  for (int i = 0; i < n; ++i) {
    const int fd = SD_LISTEN_FDS_START + i;
    // A listening stream socket of any family (AF_INET, AF_INET6, AF_UNIX): listening = 1.
    if (sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0) return fail(errc::invalid_argument);
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    out.push_back(fd);
  }
#else
  const char* pid = std::getenv("LISTEN_PID");
  if (pid != nullptr && *pid != '\0') return fail(errc::not_supported);
#endif
  return out;
}

}  // namespace iserkit::service

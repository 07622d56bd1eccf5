// Network namespaces: run code on a thread inside /run/netns/NAME (setns(2), CLONE_NEWNET).
#include "iserkit/common/netns.hpp"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "iserkit/common/errors.hpp"

namespace iserkit::netns {

std::string path_of(std::string_view name) { return "/run/netns/" + std::string(name); }

bool valid_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 255 || name == "." || name == "..") return false;
  return std::none_of(name.begin(), name.end(),
                      [](char c) { return c == '/' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

Result<void> run_in(std::string_view name, const std::function<void()>& work) {
  if (!valid_name(name)) return fail(errc::invalid_argument);
  const std::string path = path_of(name);
  int error = 0;
  // A fresh thread: its namespace is set once and it ends after `work`, so no thread of the
  // process is ever left in, or has to find its way back from, another namespace.
  std::thread thread([&] {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      error = errno;
      return;
    }
    const int rc = ::setns(fd, CLONE_NEWNET);
    const int setns_errno = errno;
    ::close(fd);
    if (rc != 0) {
      error = setns_errno;
      return;
    }
    work();
  });
  thread.join();
  if (error != 0) return fail(std::error_code(error, std::generic_category()));
  return {};
}

}  // namespace iserkit::netns

// Network namespaces (Linux, setns(2)): run a piece of code with a thread's network namespace set
// to a named one (/run/netns/NAME, as `ip netns add` creates it), so that the sockets — and RDMA
// CM ids — it creates belong to that namespace while the rest of the process stays where it is. A
// socket keeps its namespace for life: a listener created there accepts connections there, a
// connected socket talks there, whichever thread later uses it. Layer 0 (no Asio).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "iserkit/common/result.hpp"

namespace iserkit::netns {

/// The path of namespace `name`: "/run/netns/NAME".
[[nodiscard]] std::string path_of(std::string_view name);

/// True when `name` can name a namespace under /run/netns: 1..255 bytes, no '/', not "." or "..",
/// no NUL or control character.
[[nodiscard]] bool valid_name(std::string_view name) noexcept;

/// Runs `work` to completion on a new thread that has first entered network namespace `name`
/// (setns(2) with CLONE_NEWNET; a network namespace is per thread, so the caller's thread and the
/// process's other threads are not moved). Blocks until the thread ends. `work` must not throw.
/// Errors (`work` is then not run): errc::invalid_argument for an invalid name; the errno of
/// open(2) on /run/netns/NAME (ENOENT: no such namespace) or of setns(2) (EPERM: needs
/// CAP_SYS_ADMIN).
Result<void> run_in(std::string_view name, const std::function<void()>& work);

}  // namespace iserkit::netns

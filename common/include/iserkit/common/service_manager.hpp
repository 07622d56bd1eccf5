// The service manager interface of the daemons (layer 6 support): readiness, status and reload
// notifications (sd_notify(3): READY=1, STATUS=, RELOADING=1, STOPPING=1) and the listening
// sockets socket activation passes (sd_listen_fds(3): LISTEN_PID, LISTEN_FDS, descriptors from 3).
// Through libsystemd when the build has it (WITH_SYSTEMD); otherwise notify() sends nothing and
// passed_sockets() finds none. Outside systemd (no NOTIFY_SOCKET) every call is a cheap no-op.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "iserkit/common/result.hpp"

namespace iserkit::service {

/// True when this build talks to the service manager through libsystemd.
[[nodiscard]] bool built_with_systemd() noexcept;

/// True when a service manager listens for notifications ($NOTIFY_SOCKET is set).
[[nodiscard]] bool notify_socket_set() noexcept;

/// Sends `state` — newline-separated VARIABLE=VALUE assignments as sd_notify(3) defines them — to
/// the service manager. Returns true when sent; false when no manager listens, the build has no
/// libsystemd, or sending failed (never throws). Thread-safe.
bool notify(std::string_view state) noexcept;

/// READY=1 with STATUS=`status`: startup (or a reload) is complete and the service is serving.
bool notify_ready(std::string_view status) noexcept;
/// STATUS=`status` alone (shown by `systemctl status`).
bool notify_status(std::string_view status) noexcept;
/// RELOADING=1 with MONOTONIC_USEC (systemd.service(5) Type=notify-reload asks for it; earlier
/// versions ignore it) and STATUS=`status`. Follow it with notify_ready() when the reload ends,
/// whether it succeeded or not.
bool notify_reloading(std::string_view status) noexcept;
/// STOPPING=1 with STATUS=`status`: shutdown has begun.
bool notify_stopping(std::string_view status) noexcept;

/// The listening sockets socket activation passed to this process (sd_listen_fds(3)): descriptors
/// 3, 4, … when $LISTEN_PID is this process; each is checked to be a listening stream socket and
/// made close-on-exec. Unsets LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES so children do not inherit
/// them. Returns an empty list when nothing was passed.
/// Errors: errc::not_supported when sockets were passed but the build has no libsystemd;
/// errc::invalid_argument when a passed descriptor is not a listening stream socket.
Result<std::vector<int>> passed_sockets();

}  // namespace iserkit::service

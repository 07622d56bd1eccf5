// Drives LoginMachine over a Datamover (RFC 7143 §6), shared by normal and discovery sessions,
// plus the ISID and default-name helpers.
#pragma once

#include <array>
#include <chrono>

#include "iserkit/common/asio.hpp"
#include "iserkit/datamover/datamover.hpp"
#include "login.hpp"

namespace iserkit::initiator {

/// Runs the login phase on `dm`: sends Login Requests and feeds responses to a LoginMachine until
/// it is done, fails, or `timeout` elapses (errc::timeout; the connection is closed then).
/// On success the datamover's digests and receive limit are switched to the negotiated values.
Awaitable<Result<LoginDone>> perform_login(datamover::Datamover& dm, LoginConfig config,
                                           std::chrono::milliseconds timeout);

/// A random ISID of type 2 (RFC 7143 §11.12.5: T=10b "random", A=0, B and C random, D qualifier).
std::array<std::byte, 6> random_isid();

}  // namespace iserkit::initiator

// What the library (and its unit tests) can do with a Multipath beyond its public API: open it with
// another way of logging in on a path (the tests start Sessions over FakeDatamovers).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "iserkit/initiator/multipath.hpp"
#include "iserkit/initiator/session.hpp"

namespace iserkit::initiator {

/// Logs in on one path: Session::connect() by default. Called on the device's executor, once at
/// open and once per reinstatement attempt, with the session options Multipath chose for the path.
using PathConnector = std::function<Awaitable<Result<std::shared_ptr<Session>>>(const Url&, SessionOptions)>;

/// Multipath::open() with `connect` in place of Session::connect().
Awaitable<Result<std::shared_ptr<Multipath>>> open_multipath(asio::any_io_executor ex, std::vector<Url> urls,
                                                             scsi::Lun lun, MultipathOptions options,
                                                             PathConnector connect);

}  // namespace iserkit::initiator

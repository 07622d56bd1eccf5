// Multipath: one logical unit reached through several portals (paths) is one device. One Session
// per path (its own ISID, kept across reinstatements), all to the same logical unit — checked with
// the VPD 0x83 designators of association "logical unit" (SPC-5 §7.7.6; the target-port
// designators differ per path by design). ALUA (SPC-5 §5.16): REPORT TARGET PORT GROUPS when
// INQUIRY says TPGS≠0; active/optimized paths first, active/non-optimized next, never standby,
// unavailable, offline or transitioning; states re-read on ASYMMETRIC ACCESS STATE CHANGED
// (2Ah/06h) and on NOT READY 04h/0Ah/0Bh/0Ch, the command then sent again on another path; while
// no logged-in path is usable because of ALUA (a gateway failover under way), re-read after 100,
// 200, 400, 800 ms, then every second.
// Policies: failover and round-robin (PathSelector, src/path_selector.hpp).
// Layer 6 (public API) over Session.
//
// PATH FAULTS: each path's session has a short replacement timeout (path_replacement_timeout) and
// NOP-Out pings, so a path fails fast. While its session recovers, the path takes no new commands;
// those already on it wait (up to path_replacement_timeout) and, when the session gives up (or
// fails with connection_closed / session_lost / session_closed / timeout), are sent again on another
// path. A failed path is reinstated in the background (a new login with the same ISID, backing off
// from reinstate_delay_min to reinstate_delay_max) and used again once it logged in and still
// leads to the same logical unit. While no path is usable, commands wait; after
// replacement_timeout without one they fail with errc::session_lost (paths keep being reinstated:
// a later command can succeed again).
// ORDERING: a SYNCHRONIZE CACHE is sent only after every write-like command (one with data-out)
// submitted before it has completed, on whatever path, so its GOOD covers them.
// TRANSPORTS: paths may be TCP, iSER or both (options.session.transport and each URL's scheme,
// select_transports()); see buffer_pool() for what a command's buffer costs on each.
// THREADING and BUFFERS: as Session (session.hpp): one executor; spans valid until completion.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/initiator/command_channel.hpp"
#include "iserkit/initiator/multipath_types.hpp"
#include "iserkit/initiator/options.hpp"
#include "iserkit/initiator/url.hpp"
#include "iserkit/scsi/alua.hpp"
#include "iserkit/scsi/lun.hpp"

namespace iserkit::initiator {

/// Options of a Multipath. Times in milliseconds.
struct MultipathOptions {
  MultipathPolicy policy = MultipathPolicy::failover;
  /// Options of every path's session. Multipath sets per path: isid (random, one per path, kept
  /// when the path is reinstated), replacement_timeout (= path_replacement_timeout),
  /// reconnect_after_give_up (false: a path that gives up is reinstated here) and on_event;
  /// nop_interval 0 becomes 5 s (paths are always checked with NOP-Out pings).
  SessionOptions session;
  /// How long a path's session tries to log in again by itself before its commands go to another
  /// path: short, so a path fails fast (as open-iscsi advises for dm-multipath).
  std::chrono::milliseconds path_replacement_timeout{5000};
  /// How long commands wait while no path is usable, then fail with errc::session_lost; the device's
  /// replacement timeout (open-iscsi's default 120 s). 0 = fail at once.
  std::chrono::milliseconds replacement_timeout{120000};
  std::chrono::milliseconds reinstate_delay_min{1000};   ///< first wait before reinstating a failed path
  std::chrono::milliseconds reinstate_delay_max{5000};   ///< the longest wait between attempts
  /// What open() does with a path whose logical-unit designators differ from the first path's:
  /// false = open fails with errc::invalid_argument (a misconfigured device: iserkit-nbd);
  /// true = that path stays refused (PathStatus::State::refused, never used) and the device opens
  /// with the others (iserkit-fuse, which groups discovered portals by target name).
  bool open_without_refused_paths = false;
  /// Called on the executor when a path goes down or up, all are lost, or the device gives up.
  /// Must not block; may be empty.
  std::function<void(const PathEvent&)> on_event;
};

/// Several sessions to one logical unit behind one CommandChannel. Open with Multipath::open(), then
/// LunHandle::open(multipath, lun) for the typed commands.
class Multipath : public CommandChannel, public std::enable_shared_from_this<Multipath> {
 public:
  struct Impl;

  /// Logs in to every URL (one Session each) and, per path, reads standard INQUIRY (TPGS) and VPD
  /// 0x83 of LUN `lun` (the same LUN through every path; the URLs' own LUN fields are not used); then the ALUA states (REPORT TARGET PORT GROUPS) when TPGS≠0. A path that
  /// cannot log in now is reinstated in the background. URLs may name different targets only if
  /// the logical unit's designators match.
  /// Returns: the device, or
  ///  - errc::invalid_argument: no URL, a URL without a target, or a path whose logical-unit
  ///    designators differ from the first path's (logged: it leads to another logical unit), unless
  ///    options.open_without_refused_paths;
  ///  - errc::not_supported: the unit reports no logical-unit designator to compare (with 2+ URLs);
  ///  - the first path's login error when no path could log in.
  static Awaitable<Result<std::shared_ptr<Multipath>>> open(asio::any_io_executor ex, std::vector<Url> urls,
                                                            scsi::Lun lun, MultipathOptions options = {});

  /// Sends the command on a path the policy and ALUA pick; sent again on another path after a path
  /// error or an ALUA sense (a path error of a write: it may have run too — as with any retried
  /// write). SYNCHRONIZE CACHE waits for the writes submitted before it (see ORDERING).
  /// Returns: the ScsiResult of the path that answered, or
  ///  - errc::session_lost: no path usable for replacement_timeout;
  ///  - errc::session_closed: close() or logout() was called;
  ///  - errc::timeout: the command timed out on as many live paths as there are paths;
  ///  - the errors of Session::execute() that are not path errors (invalid_argument, task_aborted,
  ///    protocol_error…).
  Awaitable<Result<scsi::ScsiResult>> execute(const CommandRequest& request) override;
  /// Where to lease data buffers: the registered pool of the first iSER path that logged in (from
  /// then on), else the first path's (HeapBufferPool::shared() on TCP). Its buffers cost no copy
  /// on TCP paths and on iSER paths of the same RDMA device; an iSER path on another device
  /// copies them through its own pool (counted by the copy counter; docs/iser.md "Multipath over
  /// iSER"). May change once, when the first iSER path logs in after a TCP one: lease per use.
  [[nodiscard]] BufferPool& buffer_pool() const noexcept override;
  /// The smallest transport limit, bytes, of the paths that may run iSER (their
  /// SessionOptions::iser_max_transfer_bytes, known before any login) and of the paths logged in
  /// so far; 0 = none (TCP only).
  [[nodiscard]] std::uint32_t max_transfer_bytes() const noexcept override;
  /// As max_transfer_bytes(), for a unit that states no MAXIMUM TRANSFER LENGTH
  /// (SessionOptions::iser_unstated_max_transfer_bytes when a path may run iSER), bytes; 0 = none.
  [[nodiscard]] std::uint32_t unstated_max_transfer_bytes() const noexcept override;
  [[nodiscard]] asio::any_io_executor executor() const override;

  /// Every path, in URL order.
  [[nodiscard]] std::vector<PathStatus> paths() const;
  /// Counters.
  [[nodiscard]] const MultipathStats& stats() const noexcept;
  /// True while some path is usable.
  [[nodiscard]] bool any_path_usable() const noexcept;
  /// True once the replacement timeout passed without a usable path (until a path comes back).
  [[nodiscard]] bool gave_up() const noexcept;
  /// The policy in use.
  [[nodiscard]] MultipathPolicy policy() const noexcept;

  /// Logs out of every path after its commands finished; no reinstating afterwards. Commands
  /// started afterwards fail with errc::session_closed.
  Awaitable<void> logout();
  /// Closes every path at once (commands in flight fail).
  void close() noexcept;

  explicit Multipath(std::unique_ptr<Impl> impl);
  ~Multipath() override;
  Multipath(const Multipath&) = delete;
  Multipath& operator=(const Multipath&) = delete;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace iserkit::initiator

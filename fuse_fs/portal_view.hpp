// The FUSE view's model of the portals it mounts, on the initiator's loop: the namespace tree, one
// lazily logged-in Session per target, the LUNs each target offers and their metadata, rescans (discovery
// SendTargets=All, RFC 7143 Appendix C; REPORT LUNS, SPC-5 §6.33) with a cache time, and
// reconnection after a connection loss. The data path on a LUN (read, write with serialized
// read-modify-write, flush, unmap/zero) is in lun_io.hpp.
//
// THREADING: everything here runs on one single-threaded executor (the loop), never from a FUSE
// worker thread; fuse_ops.cpp posts to it. No locks.
// SESSIONS: created lazily — a target's session logs in the first time its directory is listed or
// looked into, or one of its files is opened; a session that failed (target killed, connection
// reset, command timeout that closed it) is replaced by a new login on the next use, at most one
// attempt per target at a time and none for `reconnect_backoff` after a failed attempt (callers get
// the failure at once meanwhile). Connect, login and every SCSI command are bounded by the session
// options' timeouts, which main.cpp sets from --timeout.
// MULTIPATH (ViewOptions::multipath): a target reached through several portals (target_paths.hpp)
// is still one directory; each of its LUNs does I/O through an initiator::Multipath of its own over
// every path (one session per path and LUN). LUN 0's Multipath is also the target's control
// channel (REPORT LUNS), opened on the first look into the directory. A Multipath is never
// replaced: its paths fail over and are reinstated by the library, so a LUN's handle stays valid.
// Paths whose logical unit differs from the first path's are refused (logged) and the rest used.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "fuse_fs/allocation_map.hpp"
#include "fuse_fs/loop_sync.hpp"
#include "fuse_fs/lun_metadata.hpp"
#include "fuse_fs/namespace_tree.hpp"
#include "iserkit/common/asio.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/initiator/discovery.hpp"
#include "iserkit/initiator/lun.hpp"
#include "iserkit/initiator/multipath.hpp"
#include "iserkit/initiator/options.hpp"
#include "iserkit/initiator/session.hpp"
#include "iserkit/initiator/url.hpp"

namespace iserkit::fuse_fs {

using Clock = std::chrono::steady_clock;

/// How the view talks to the portals.
struct ViewOptions {
  /// The portals (host, port), at least one. The root lists the union of their targets; a URL
  /// that names a target contributes just that target (no discovery). An IQN offered by several
  /// portals appears once and is logged in to through the first portal that listed it (iSCSI
  /// names are worldwide unique, RFC 7143 §4.2.7.1).
  std::vector<initiator::Url> portals;
  /// Options of every session (normal and discovery): timeouts bound connect, login and commands.
  initiator::SessionOptions session;
  /// A listing older than this is refreshed on the next directory read or lookup (0 = always).
  std::chrono::milliseconds cache_time{5000};
  /// After a failed login, fail at once for this long instead of trying again.
  std::chrono::milliseconds reconnect_backoff{1000};
  /// --multipath: nullopt = one Session per target through the first portal that listed it; a
  /// policy = every portal that leads to a target is a path, and each LUN does I/O through an
  /// initiator::Multipath over them (TCP portals only: Multipath refuses iSER paths).
  std::optional<initiator::MultipathPolicy> multipath;
  /// With multipath: how long a path's session logs in again by itself before its commands go to
  /// another path (MultipathOptions::path_replacement_timeout). session.replacement_timeout is then
  /// how long commands wait while no path is usable.
  std::chrono::milliseconds path_replacement_timeout{5000};
  /// Bounds of the GET LBA STATUS cache behind SEEK_DATA / SEEK_HOLE and st_blocks (README
  /// "Holes and st_blocks").
  ExtentCacheLimits allocation_cache;
};

struct TargetState;

/// One LUN of a target: its metadata, a handle on the current session, and the write range lock.
/// Shared (std::shared_ptr) by the target and every open file of it; loop thread only.
struct LunState {
  TargetState* target = nullptr;  ///< owner; lives as long as the PortalView
  std::uint16_t index = 0;
  LunMetadata metadata;
  /// The handle on the target's current session (replaced after a reconnect), or on `multipath`.
  std::optional<initiator::LunHandle> handle;
  /// With multipath: this LUN's device (LUN 0's is the target's `multipath`); kept for the mount.
  std::shared_ptr<initiator::Multipath> multipath;
  std::error_code last_error;  ///< why the last (re)open failed
  std::error_code warned;      ///< the last refusal of an I/O that was logged (lun_io.cpp: once per kind)
  SingleFlight reopening;
  /// Writes hold the logical blocks they touch (whole range) so partial-block read-modify-write
  /// never interleaves with another write of the same block.
  BlockRangeLock writes;
  /// GET LBA STATUS was refused (unit not thin, or ILLEGAL REQUEST): seeks and st_blocks answer
  /// "fully allocated" without asking again until the LUN is opened again (lun_io.hpp).
  bool lba_status_unsupported = false;
  /// The mapped-block count (st_blocks) under way, at most one per LUN, and the stats waiting for it.
  bool counting = false;
  std::vector<std::shared_ptr<Completion>> count_waiters;
  /// What the last count found, also when a write of ours made it too old for the cache.
  std::optional<std::uint64_t> last_mapped_blocks;
  /// This LUN's key in PortalView::allocation_cache(): the directory inode (never reused) and the index.
  [[nodiscard]] ExtentCache::Key allocation_key() const noexcept;
};

/// One target directory.
struct TargetState {
  std::string iqn;
  Ino dir = 0;
  bool present = true;
  initiator::Url portal;  ///< where to log in (host, port; target = iqn); with multipath the first path
  std::vector<initiator::Url> paths;  ///< with multipath: every path (target_paths.hpp), taken when opened
  std::shared_ptr<initiator::Session> session;  ///< without multipath
  /// With multipath: LUN 0's device, also the control channel (REPORT LUNS).
  std::shared_ptr<initiator::Multipath> multipath;
  std::error_code last_error;       ///< why the last login or scan failed (empty after success)
  Clock::time_point failed_at{};    ///< when the last login failed
  SingleFlight connecting;
  SingleFlight scanning;
  bool scanned = false;             ///< REPORT LUNS answered at least once
  Clock::time_point scanned_at{};
  std::map<std::uint16_t, std::shared_ptr<LunState>> luns;
};

/// The portals as the FUSE view shows them. Construct, seed with set_listing(), then call
/// everything on `ex`'s thread.
class PortalView {
 public:
  PortalView(asio::any_io_executor ex, ViewOptions options);
  PortalView(const PortalView&) = delete;
  PortalView& operator=(const PortalView&) = delete;

  [[nodiscard]] NamespaceTree& tree() noexcept { return tree_; }
  [[nodiscard]] const ViewOptions& options() const noexcept { return options_; }
  [[nodiscard]] asio::any_io_executor executor() const { return ex_; }
  /// Records what portal `portal` (an index into options().portals) lists — from a discovery done
  /// before the mount — and rebuilds the root; counts the listing as fresh. Ignored for a URL that
  /// names a target (it always lists just that one).
  void set_listing(std::size_t portal, const std::vector<initiator::DiscoveredTarget>& targets);

  /// Re-runs SendTargets discovery on every portal URL without a target when the root listing is
  /// older than cache_time (or `force`). Errors: the first discovery error; a portal that fails
  /// keeps its previous listing.
  Awaitable<Result<void>> refresh_root(bool force);
  /// Logs in to the target of directory `dir` if needed and re-runs REPORT LUNS when its listing is
  /// older than cache_time (or `force`); LUNs seen for the first time are opened and identified
  /// (INQUIRY, VPD 0x80/0x83/0xb0/0xb2, READ CAPACITY). Errors: ENOENT-worthy errc::invalid_argument
  /// for an unknown directory; login/REPORT LUNS errors — but only when the target was never
  /// listed; after a failed refresh of a listed target the old listing stays and this succeeds.
  Awaitable<Result<void>> refresh_target(Ino dir, bool force);
  /// Forces refresh_root() and then refresh_target() of every present target that was listed
  /// before (".rescan" and SIGHUP). Returns the first error.
  Awaitable<Result<void>> rescan_all();

  /// The target of directory `dir`; nullptr when `dir` is not a target directory.
  [[nodiscard]] TargetState* target(Ino dir) const;
  /// The LUN behind file `ino`; nullptr when `ino` is not a present LUN file.
  [[nodiscard]] std::shared_ptr<LunState> lun(Ino ino) const;
  /// The "info" JSON of target directory `dir` (empty when `dir` is not one).
  [[nodiscard]] std::string info_json(Ino dir) const;

  /// True when `lun` has a handle whose session (or Multipath) can take commands now, so using it
  /// needs no login.
  [[nodiscard]] static bool usable(const LunState& lun) noexcept;
  /// The allocation runs and mapped-block counts of every LUN (allocation_map.hpp), bounded by
  /// options().allocation_cache.
  [[nodiscard]] ExtentCache& allocation_cache() noexcept { return allocation_; }

  /// A handle on the LUN's current session, logging in again and re-opening the LUN when the
  /// session ended (with multipath: on the LUN's Multipath, opened again only after the target was
  /// dropped from the listing and came back). Returned by value (it shares the session) so a
  /// reconnect meanwhile cannot pull it from under the caller. Errors: login/open errors, or the last one during the backoff.
  Awaitable<Result<initiator::LunHandle>> handle(LunState& lun);

  /// Logs every open session out (commands in flight finish first; each bounded by the login
  /// timeout). Later calls fail with errc::session_closed.
  Awaitable<void> shutdown();

 private:
  Awaitable<Result<std::shared_ptr<initiator::Session>>> session(TargetState& t);
  /// The target's control channel: its Session, or with multipath LUN 0's Multipath.
  Awaitable<Result<std::shared_ptr<initiator::CommandChannel>>> channel(TargetState& t);
  /// With multipath: opens a Multipath for LUN `index` over t.paths.
  Awaitable<Result<std::shared_ptr<initiator::Multipath>>> open_multipath(TargetState& t, std::uint16_t index);
  /// The channel LUN `index` does I/O on: the control channel, or (multipath, index ≠ 0) a new Multipath.
  Awaitable<Result<std::shared_ptr<initiator::CommandChannel>>> lun_channel(TargetState& t, std::uint16_t index);
  Awaitable<Result<std::shared_ptr<LunState>>> open_lun(TargetState& t, std::shared_ptr<initiator::CommandChannel> ch,
                                                        std::uint16_t index);
  /// Logs out and forgets every session or Multipath of `t` (it left the listing).
  void drop_channels(TargetState& t);
  Awaitable<Result<void>> scan_target(TargetState& t);
  void sync_tree(TargetState& t);
  void rebuild_root();
  Awaitable<void> discover_one(std::size_t portal, std::shared_ptr<std::size_t> pending,
                               std::shared_ptr<Completion> all_done);

  asio::any_io_executor ex_;
  ViewOptions options_;
  NamespaceTree tree_;
  std::map<Ino, std::unique_ptr<TargetState>> targets_;  // by directory inode; never erased
  std::vector<std::optional<std::vector<initiator::DiscoveredTarget>>> listings_;  // per portal; nullopt = never listed
  ExtentCache allocation_;
  SingleFlight root_scan_;
  std::error_code root_error_;
  Clock::time_point root_scanned_at_{};
  bool shut_down_ = false;
};

}  // namespace iserkit::fuse_fs

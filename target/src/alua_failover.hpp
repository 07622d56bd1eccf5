// ALUA failover between gateways (target/README.md "ALUA failover"): two or more iserkit-target
// processes serving the same backing store agree, through open file description (OFD) locks on
// one shared file, which of them is active. Exactly one holds the election lock; its target port
// groups are active/optimized and every other gateway's are standby (SPC-5 §5.16.2.4: a standby
// port refuses media access with NOT READY 04h/0Bh, so only the lock holder writes).
//
// Byte-range locks on the lock file (which may be the backing file itself: the ranges lie far past
// any data, and OFD locks are advisory, so they never get in the way of I/O):
//   election   held by the active gateway; the kernel drops it when the process dies (kill -9
//              included), so a standby gateway takes it at its next poll.
//   request    held by a standby gateway that SET TARGET PORT GROUPS asked to become active; the
//              active gateway sees it (F_OFD_GETLK) and hands over.
//   marker(N)  held by the active gateway for each of its groups N: how a standby gateway learns
//              which peer group is active/optimized for REPORT TARGET PORT GROUPS.
//
// Hand-over by the active gateway (asked by a peer's request lock or by SET TARGET PORT GROUPS
// through itself): its groups go transitioning (new commands get NOT READY 04h/0Ah), it waits for
// every write it accepted to end and flushes (ScsiDispatcher::quiesce_writes(): writes re-check
// the state with their LBA range held, so none slips past), then it drops the locks and goes
// standby, and keeps off the election for `yield_hold_off` so the peer gets it. Writes are fenced
// by the lock alone, never by a timer: a gateway goes active/optimized only after taking the
// election lock, and releases it only after its writes drained.
//
// Every state change moves the shared PortGroupTable's generation, so each device server raises
// ASYMMETRIC ACCESS STATE CHANGED (2Ah/06h) on each of its I_T nexuses (SPC-5 §5.16.2.6).
//
// THREAD MODEL: run() is one coroutine on one io_context (the target's first); step() runs only
// there. request() and active() are safe from any thread (atomics).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/target/scsi_dispatcher.hpp"

namespace iserkit::target {

/// An open file with OFD byte-range locks (fcntl F_OFD_SETLK / F_OFD_GETLK, Linux 3.15+). Locks
/// belong to this open file description: two LockFile objects on one path conflict even in one
/// process, and all of them go when the description is closed or the process dies.
class LockFile {
 public:
  /// Opens (creating, mode 0644) `path` read-write. Errors: the open's errno.
  static Result<LockFile> open(const std::filesystem::path& path);
  LockFile(LockFile&& o) noexcept;
  LockFile& operator=(LockFile&&) = delete;
  ~LockFile();

  /// Takes a write lock on the byte at `offset` without waiting. Returns true when held (also when
  /// already held by this description), false when another description holds it.
  bool try_lock(std::uint64_t offset) noexcept;
  /// Drops this description's lock on the byte at `offset` (none held: nothing happens).
  void unlock(std::uint64_t offset) noexcept;
  /// True when another open file description holds a lock on the byte at `offset`.
  bool locked_by_other(std::uint64_t offset) const noexcept;

 private:
  explicit LockFile(int fd) noexcept : fd_(fd) {}
  int fd_ = -1;
};

/// The lock ranges (bytes) in the lock file: far past the end of any backing file.
namespace alua_lock_offsets {
inline constexpr std::uint64_t base = 0x4953'4552'0000'0000;  // "ISER" in the high bytes
inline constexpr std::uint64_t election = base;
inline constexpr std::uint64_t request = base + 1;
/// The marker of target port group `tag`.
constexpr std::uint64_t marker(std::uint16_t tag) noexcept { return base + 0x1'0000 + tag; }
}  // namespace alua_lock_offsets

struct AluaFailoverOptions {
  std::filesystem::path lock_path;             ///< the file the gateways lock (shared by all of them)
  std::vector<std::uint16_t> local_groups;     ///< this process's target port groups (its portal groups)
  std::vector<std::uint16_t> peer_groups;      ///< the other gateways' groups (--alua-peer)
  std::chrono::milliseconds poll_interval{100};  ///< how often the locks are looked at
  /// After handing over, how long this gateway stays off the election (so the peer gets it; if
  /// none takes it by then, this one takes it back).
  std::chrono::milliseconds yield_hold_off{3000};
  /// How long a standby gateway asked to become active (SET TARGET PORT GROUPS) keeps asking.
  std::chrono::milliseconds request_timeout{20000};
};

/// The failover coordinator of one iserkit-target process (see the file comment).
class AluaFailover final : public AluaTransitions {
 public:
  /// Waits until no write accepted by this process is still running, and flushes (all device
  /// servers' ScsiDispatcher::quiesce_writes()).
  using Quiesce = std::function<Awaitable<void>()>;

  /// Opens the lock file and sets every group of `table` standby (nothing is active before the
  /// election lock is held). Errors: the lock file's open errno; errc::invalid_argument for no
  /// local group.
  static Result<std::shared_ptr<AluaFailover>> open(AluaFailoverOptions options, std::shared_ptr<PortGroupTable> table,
                                                    Quiesce quiesce);
  AluaFailover(AluaFailoverOptions options, std::shared_ptr<PortGroupTable> table, Quiesce quiesce, LockFile lock);

  /// Polls every poll_interval until stop(). Executor: one io_context thread.
  Awaitable<void> run();
  /// Ends run() at its next poll. The locks stay held until this object is destroyed (or the
  /// process exits): a stopping gateway keeps fencing its peers until its writes are over.
  void stop() noexcept;
  /// One poll: hand over, take the election, or read the peers' markers (for tests and run()).
  Awaitable<void> step();

  [[nodiscard]] bool is_local(std::uint16_t id) const noexcept override;
  void request(bool active) noexcept override;
  /// True while this process holds the election lock (its groups active/optimized).
  [[nodiscard]] bool active() const noexcept { return active_.load(); }

 private:
  enum Want : int { none = 0, want_active = 1, want_standby = 2 };
  void set_local(AluaState state);
  void become_active();
  Awaitable<void> hand_over(const char* why);

  AluaFailoverOptions options_;
  std::shared_ptr<PortGroupTable> table_;
  Quiesce quiesce_;
  LockFile lock_;
  std::atomic<bool> active_{false};
  std::atomic<int> want_{none};
  std::atomic<bool> stopping_{false};
  bool holding_request_ = false;  // the request lock (asking the active gateway to hand over)
  bool asking_ = false;           // asked to become active since asked_since_
  std::chrono::steady_clock::time_point hold_off_until_{};
  std::chrono::steady_clock::time_point asked_since_{};
  std::unique_ptr<asio::steady_timer> timer_;
};

}  // namespace iserkit::target

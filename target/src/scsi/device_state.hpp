// Internal state of the device server (ScsiDispatcher::State): the LUN map, the names of the open
// I_T nexuses, and per logical unit the state shared by all nexuses: unit attention queues
// (SAM-5 §5.14, one queue per I_T_L nexus), the RESERVE(6) holder (SPC-2 §5.5.1), persistent
// reservations (SPC-5 §5.14), software write protect (SPC-5 §7.5.8 SWP) and the range lock that
// makes COMPARE AND WRITE atomic against other writes (SBC-4 §5.3), and the sanitize state (SBC-4 §4.11).
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/target/scsi_dispatcher.hpp"
#include "scsi/persistent_reservations.hpp"

namespace iserkit::target::detail {

struct SanitizeState;  // scsi/sanitize.hpp
class CopyManager;     // scsi/extended_copy.hpp
class TokenStore;      // scsi/token_copy.hpp
class RodStatuses;     // scsi/token_copy.hpp

/// The LBA ranges of one logical unit that ROD tokens represent (SBC-4 point in time ROD
/// tokens, scsi/token_copy.hpp): a writer taking an overlapping range in RangeLock::try_lock()
/// sets the token's `cancelled` flag before it writes. Shared (a token may outlive the RangeLock's
/// device server while a copy reads it). Thread-safe.
class WriteWatches {
 public:
  /// Watches `ranges` ([begin, end) pairs) for `cancelled`. Returns the id for unwatch().
  std::uint64_t watch(std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges,
                      std::shared_ptr<std::atomic<bool>> cancelled);
  /// Stops watching `id` (unknown ids are ignored).
  void unwatch(std::uint64_t id) noexcept;
  /// A writer takes [begin, end): cancel every token with an overlapping range.
  void written(std::uint64_t begin, std::uint64_t end) noexcept;
  /// Watches held (tests).
  std::size_t size() const;

 private:
  struct Watch {
    std::uint64_t id;
    std::uint64_t low, high;  // the bounding range of `ranges`
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
    std::shared_ptr<std::atomic<bool>> cancelled;
  };
  mutable std::mutex mutex_;
  std::vector<Watch> watches_;
  std::uint64_t next_id_ = 1;
  std::atomic<bool> any_{false};  // skip the mutex on the write path when nothing is watched
};

/// Exclusive locks on LBA ranges of one logical unit. Writers that overlap take turns; disjoint
/// ranges proceed in parallel. Every writer of the medium goes through try_lock(), which also
/// cancels the ROD tokens of the ranges it takes (WriteWatches). Thread-safe.
class RangeLock {
 public:
  /// Takes [lba, lba + blocks) if no held range overlaps it. Returns true on success.
  bool try_lock(std::uint64_t lba, std::uint64_t blocks);
  /// Releases a range taken by try_lock().
  void unlock(std::uint64_t lba, std::uint64_t blocks) noexcept;
  /// True when a range overlapping one of `ranges` ([begin, end) pairs) is held now (a write in
  /// flight that began before a token watched the range).
  bool any_held(const std::vector<std::pair<std::uint64_t, std::uint64_t>>& ranges);
  /// The token watches of this unit (never null).
  const std::shared_ptr<WriteWatches>& watches() const noexcept { return watches_; }

 private:
  std::mutex mutex_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> held_;  // [begin, end)
  std::shared_ptr<WriteWatches> watches_ = std::make_shared<WriteWatches>();
};

/// A held range; releases it when destroyed.
class RangeGuard {
 public:
  RangeGuard() = default;
  RangeGuard(RangeLock* lock, std::uint64_t lba, std::uint64_t blocks) noexcept : lock_(lock), lba_(lba), blocks_(blocks) {}
  RangeGuard(RangeGuard&& o) noexcept : lock_(std::exchange(o.lock_, nullptr)), lba_(o.lba_), blocks_(o.blocks_) {}
  RangeGuard& operator=(RangeGuard&&) = delete;
  ~RangeGuard() {
    if (lock_ != nullptr) lock_->unlock(lba_, blocks_);
  }

 private:
  RangeLock* lock_ = nullptr;
  std::uint64_t lba_ = 0;
  std::uint64_t blocks_ = 0;
};

/// Waits until [lba, lba + blocks) can be taken, then holds it. Polls every 100 µs on the
/// caller's executor while another writer holds an overlapping range (contention is rare: only
/// overlapping writes in flight at once).
Awaitable<RangeGuard> lock_range(RangeLock& lock, std::uint64_t lba, std::uint64_t blocks);

/// Per logical unit state shared by every I_T nexus. Everything but `unit` and `ranges` is guarded
/// by `mutex`.
struct UnitState {
  std::shared_ptr<LogicalUnit> unit;
  std::mutex mutex;
  std::map<std::uint64_t, std::deque<scsi::AscPair>> unit_attentions;  ///< by nexus id, oldest first
  std::optional<std::uint64_t> reserve6_holder;                       ///< nexus id
  PersistentReservations persistent;
  bool software_write_protect = false;  ///< SWP of the control mode page (MODE SELECT)
  /// The range lock, shared with background copies (WRITE USING TOKEN with IMMED), which may
  /// outlive the device server; `ranges` names it.
  std::shared_ptr<RangeLock> range_lock = std::make_shared<RangeLock>();
  RangeLock& ranges = *range_lock;
  /// Counts logical unit resets (and the device server's end): a background copy into this LU
  /// stops when it changed since the copy began (SAM-5 §6.3.3).
  std::shared_ptr<std::atomic<std::uint32_t>> resets = std::make_shared<std::atomic<std::uint32_t>>(0);
  /// The sanitize state (SBC-4 §4.11; never null): shared with a running sanitize operation,
  /// which outlives a command and a session. Its own mutex; taken after `mutex` when both are.
  std::shared_ptr<SanitizeState> sanitize;

  /// Queues `asc` for nexus `id` (at most 8 distinct entries; a duplicate is not queued again).
  void add_unit_attention(std::uint64_t id, scsi::AscPair asc);
};

}  // namespace iserkit::target::detail

namespace iserkit::target {

struct ScsiDispatcher::State {
  mutable std::shared_mutex units_mutex;  // guards the map; UnitState objects never move or go away
  std::map<std::uint16_t, std::unique_ptr<detail::UnitState>> units;
  mutable std::mutex nexus_mutex;
  std::map<std::uint64_t, std::string> nexuses;  // open nexus id → initiator port name
  std::map<std::uint64_t, TargetPort> nexus_ports;  // open nexus id → its target port (under nexus_mutex)
  std::map<std::uint64_t, std::string> nexus_origins;  // open nexus id → its origin (under nexus_mutex)
  std::uint64_t next_nexus = 1;
  // The ALUA groups and their states (set during setup; the table's states change at any time).
  std::shared_ptr<PortGroupTable> port_groups = std::make_shared<PortGroupTable>(std::vector<TargetPortGroup>{{}});
  mutable std::atomic<std::uint64_t> seen_port_group_generation{0};  // port_groups->generation() last noted
  std::shared_ptr<detail::CopyManager> copy_manager;  // EXTENDED COPY statuses (never null; set by ScsiDispatcher)
  std::shared_ptr<detail::TokenStore> tokens;  // ROD tokens: the process's table (never null; set by ScsiDispatcher)
  std::shared_ptr<detail::RodStatuses> rod_statuses;  // RECEIVE ROD TOKEN INFORMATION (never null)
  std::shared_ptr<const CopyDomain> copy_domain;  // other servers a copy may reach (set during setup; may be null)
  std::string copy_tenant;                        // this server's tenant in copy_domain

  /// The target port of `nexus` (the default port for the anonymous or an unknown nexus).
  TargetPort target_port(NexusId nexus) const;
  /// The ALUA state of group `id` (active/optimized when not listed).
  AluaState group_state(std::uint16_t id) const noexcept;
  /// When the port groups' states changed since the last call: queues ASYMMETRIC ACCESS STATE
  /// CHANGED (SPC-5 §5.16.2.6) for every open nexus on every LU (exactly once per change, whichever
  /// thread notices). Takes the units' mutexes: call without holding one.
  void note_port_group_changes() const;

  /// The state of the LU at `lun`, or nullptr.
  detail::UnitState* unit(scsi::Lun lun) const noexcept;
  /// Every LU's state.
  std::vector<detail::UnitState*> all_units() const;
  /// The initiator port name of `nexus` ("" for the anonymous or an unknown nexus).
  std::string port_name(NexusId nexus) const;
  /// The ids of the open nexuses named `port`.
  std::vector<std::uint64_t> nexuses_named(const std::string& port) const;
  /// Ids of every open nexus.
  std::vector<std::uint64_t> all_nexuses() const;
  /// The origin open_nexus() was given for `nexus` ("" for none or an unknown nexus).
  std::string origin(NexusId nexus) const;
  /// An open nexus of the initiator named `initiator` (the iSCSI name before ",i,0x" in the port
  /// name, compared case-insensitively) from `origin` (non-empty, equal): its id and port name, or
  /// nullopt.
  std::optional<std::pair<std::uint64_t, std::string>> nexus_of_initiator(std::string_view initiator,
                                                                          std::string_view origin) const;
};

}  // namespace iserkit::target

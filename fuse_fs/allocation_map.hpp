// What the FUSE view knows about which blocks of its LUNs are mapped (pure; no I/O): the runs GET
// LBA STATUS (SBC-4 §5.8) reported, turned into mapped / not-mapped block runs; the lseek(2)
// SEEK_DATA / SEEK_HOLE answer a run list gives; and ExtentCache, the bounded per-LUN cache of
// those runs and of each LUN's mapped-block count (st_blocks), with a TTL and invalidation by the
// view's own writes and discards. lun_io.cpp issues the commands and uses these on the loop.
// Bounds and what is reported past them: fuse_fs/README.md "Holes and st_blocks".
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "iserkit/scsi/lba_status.hpp"

namespace iserkit::fuse_fs {

/// A run of `blocks` logical blocks from `lba` sharing one provisioning state.
struct AllocationRun {
  std::uint64_t lba = 0;
  std::uint64_t blocks = 0;
  /// PROVISIONING STATUS mapped (0h), mapped-or-unknown (3h) or a value SBC-4 does not define
  /// (taken as mapped, the safe side); false for deallocated (1h) and anchored (2h).
  bool mapped = true;
  [[nodiscard]] std::uint64_t end() const noexcept { return lba + blocks; }
  friend bool operator==(const AllocationRun&, const AllocationRun&) = default;
};

/// Turns the descriptors of one GET LBA STATUS answer for `from_lba` into runs that start exactly at
/// `from_lba` and follow each other without gaps: descriptors (or parts) before `from_lba` and empty
/// ones are skipped, the list stops at the first gap (SBC-4 lets a device server answer less than
/// asked) or at `capacity_blocks`, and neighbours with the same state are merged. Returns an empty
/// vector when the answer says nothing about `from_lba`.
std::vector<AllocationRun> runs_from_lba_status(std::span<const scsi::LbaStatusDescriptor> descriptors,
                                                std::uint64_t from_lba, std::uint64_t capacity_blocks);

/// lseek(2) SEEK_DATA or SEEK_HOLE.
enum class SeekWhence { data, hole };

/// What a run list says about a SEEK_DATA / SEEK_HOLE.
struct SeekAnswer {
  enum class Kind {
    offset,        ///< `value` is the answer, in bytes
    past_end,      ///< SEEK_DATA: nothing but holes up to the end of the LUN (lseek(2): ENXIO)
    unknown_from,  ///< the runs end before the answer: `value` is the first LBA not known
  };
  Kind kind = Kind::offset;
  std::uint64_t value = 0;
  friend bool operator==(const SeekAnswer&, const SeekAnswer&) = default;
};

/// Answers SEEK_DATA / SEEK_HOLE for `offset_bytes` (< capacity) from `runs`, which must start at
/// or before the block holding `offset_bytes` and follow each other without gaps (as
/// ExtentCache::known_from() and runs_from_lba_status() give them). A hole is a run not mapped;
/// SEEK_HOLE at the end of the mapped runs reaching the capacity answers the capacity (the implicit
/// hole at end of file). `block_size_bytes` > 0.
SeekAnswer seek_in_runs(std::span<const AllocationRun> runs, SeekWhence whence, std::uint64_t offset_bytes,
                        std::uint32_t block_size_bytes, std::uint64_t capacity_blocks);

/// The blocks of `runs` that are mapped.
std::uint64_t mapped_blocks_in(std::span<const AllocationRun> runs) noexcept;

/// ExtentCache bounds.
struct ExtentCacheLimits {
  /// Runs kept over all LUNs (about 80 bytes each with the map node and the allocator's header:
  /// 16384 ≈ 1.3 MiB). When an insert passes it, the runs of the least recently used other LUNs
  /// go first, then the LUN's own runs below the new ones (a scan moves upwards), then its highest.
  std::size_t max_runs = 16384;
  /// LUNs with an entry (runs and/or a mapped-block count); the least recently used one goes.
  std::size_t max_luns = 1024;
  /// A run or count older than this is not used (other initiators' writes show after it).
  std::chrono::milliseconds ttl{5000};
};

/// Bounded cache of allocation runs and mapped-block counts, per LUN key. Single thread (the
/// view's loop). Races with writes are closed by generations: take generation() before sending
/// GET LBA STATUS and pass it to insert()/set_mapped_blocks(); an invalidate() in between makes them
/// drop the stale answer.
class ExtentCache {
 public:
  using Key = std::uint64_t;
  using TimePoint = std::chrono::steady_clock::time_point;

  explicit ExtentCache(ExtentCacheLimits limits = {}) : limits_(limits) {}

  /// The generation an answer about `key` must carry to be kept.
  [[nodiscard]] std::uint64_t generation(Key key) const;
  /// Records `runs` (sorted, from runs_from_lba_status()) fetched at `now`, replacing what was
  /// known about those blocks; ignored when `generation` is stale. Applies the bounds.
  void insert(Key key, std::span<const AllocationRun> runs, std::uint64_t generation, TimePoint now);
  /// The runs known at `now` from the one holding `lba` on, as long as they follow each other
  /// without gaps and are younger than the TTL; at most `max_runs` of them. Empty when the block is
  /// not known.
  [[nodiscard]] std::vector<AllocationRun> known_from(Key key, std::uint64_t lba, TimePoint now,
                                                      std::size_t max_runs = 4096);
  /// Records the LUN's mapped-block count (st_blocks) computed at `now`; ignored when stale.
  void set_mapped_blocks(Key key, std::uint64_t blocks, std::uint64_t generation, TimePoint now);
  /// The mapped-block count when one younger than the TTL is kept.
  [[nodiscard]] std::optional<std::uint64_t> mapped_blocks(Key key, TimePoint now);
  /// Our own write or discard of blocks [lba, lba + blocks): forgets what was known about them
  /// (runs are cut around the range) and the LUN's count, and makes answers in flight stale.
  void invalidate(Key key, std::uint64_t lba, std::uint64_t blocks);
  /// Forgets everything about `key`.
  void forget(Key key);

  /// Runs kept over all LUNs.
  [[nodiscard]] std::size_t runs() const noexcept { return total_runs_; }
  /// LUNs with an entry.
  [[nodiscard]] std::size_t luns() const noexcept { return entries_.size(); }
  [[nodiscard]] const ExtentCacheLimits& limits() const noexcept { return limits_; }

 private:
  struct Run {
    std::uint64_t blocks = 0;
    bool mapped = true;
    TimePoint fetched_at{};
  };
  struct Entry {
    std::map<std::uint64_t, Run> runs;  // by first LBA; never overlapping
    std::optional<std::uint64_t> mapped_blocks;
    TimePoint counted_at{};
    std::uint64_t generation = 0;
    std::uint64_t last_used = 0;
  };
  Entry& entry(Key key);
  void cut(Entry& e, std::uint64_t lba, std::uint64_t end);
  void evict_for(Key key, std::uint64_t new_first);
  bool fresh(TimePoint at, TimePoint now) const { return now - at < limits_.ttl; }

  ExtentCacheLimits limits_;
  std::unordered_map<Key, Entry> entries_;
  std::size_t total_runs_ = 0;
  std::uint64_t generations_ = 0;  // the newest generation handed out
  std::uint64_t uses_ = 0;         // LRU clock
};

}  // namespace iserkit::fuse_fs

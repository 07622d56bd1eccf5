// Allocation runs from GET LBA STATUS, the SEEK_DATA / SEEK_HOLE answer and the bounded cache (see
// allocation_map.hpp). SBC-4 §5.8.3 (PROVISIONING STATUS); lseek(2) for the seek rules.
#include "fuse_fs/allocation_map.hpp"

#include <algorithm>
#include <limits>

namespace iserkit::fuse_fs {

std::vector<AllocationRun> runs_from_lba_status(std::span<const scsi::LbaStatusDescriptor> descriptors,
                                                std::uint64_t from_lba, std::uint64_t capacity_blocks) {
  std::vector<AllocationRun> out;
  std::uint64_t position = from_lba;
  for (const auto& d : descriptors) {
    if (position >= capacity_blocks) break;
    if (d.blocks == 0) continue;
    const std::uint64_t end = d.lba > std::numeric_limits<std::uint64_t>::max() - d.blocks
                                  ? std::numeric_limits<std::uint64_t>::max()
                                  : d.lba + d.blocks;
    if (end <= position) continue;  // before the request (SBC-4 §5.8.2 allows the first to start earlier)
    if (d.lba > position) break;    // a gap: what follows is not about the blocks asked for
    const std::uint64_t stop = std::min(end, capacity_blocks);
    const auto status = static_cast<scsi::ProvisioningStatus>(d.provisioning_status & 0x0f);
    const bool mapped = status != scsi::ProvisioningStatus::deallocated && status != scsi::ProvisioningStatus::anchored;
    if (!out.empty() && out.back().mapped == mapped) {
      out.back().blocks += stop - position;
    } else {
      out.push_back({.lba = position, .blocks = stop - position, .mapped = mapped});
    }
    position = stop;
  }
  return out;
}

SeekAnswer seek_in_runs(std::span<const AllocationRun> runs, SeekWhence whence, std::uint64_t offset_bytes,
                        std::uint32_t block_size_bytes, std::uint64_t capacity_blocks) {
  std::uint64_t block = offset_bytes / block_size_bytes;
  for (const auto& r : runs) {
    if (r.end() <= block) continue;
    if (r.lba > block) break;  // a gap in what is known
    // lseek(2): the answer is the first offset ≥ the given one inside data (a hole).
    if (r.mapped == (whence == SeekWhence::data)) {
      return {.kind = SeekAnswer::Kind::offset, .value = std::max(offset_bytes, r.lba * block_size_bytes)};
    }
    block = r.end();
    if (block >= capacity_blocks) {
      // lseek(2): SEEK_DATA with only holes up to the end is ENXIO; the end of the file counts as a hole.
      if (whence == SeekWhence::data) return {.kind = SeekAnswer::Kind::past_end};
      return {.kind = SeekAnswer::Kind::offset, .value = capacity_blocks * block_size_bytes};
    }
  }
  return {.kind = SeekAnswer::Kind::unknown_from, .value = block};
}

std::uint64_t mapped_blocks_in(std::span<const AllocationRun> runs) noexcept {
  std::uint64_t n = 0;
  for (const auto& r : runs) n += r.mapped ? r.blocks : 0;
  return n;
}

std::uint64_t ExtentCache::generation(Key key) const {
  const auto it = entries_.find(key);
  return it != entries_.end() ? it->second.generation : generations_;
}

ExtentCache::Entry& ExtentCache::entry(Key key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (entries_.size() >= limits_.max_luns && !entries_.empty()) {
      auto oldest = std::min_element(entries_.begin(), entries_.end(),
                                     [](const auto& a, const auto& b) { return a.second.last_used < b.second.last_used; });
      total_runs_ -= oldest->second.runs.size();
      entries_.erase(oldest);
    }
    it = entries_.emplace(key, Entry{}).first;
    it->second.generation = generations_;
  }
  it->second.last_used = ++uses_;
  return it->second;
}

void ExtentCache::cut(Entry& e, std::uint64_t lba, std::uint64_t end) {
  auto it = e.runs.lower_bound(lba);
  if (it != e.runs.begin()) {
    auto prev = std::prev(it);
    const std::uint64_t prev_end = prev->first + prev->second.blocks;
    if (prev_end > lba) {
      prev->second.blocks = lba - prev->first;
      if (prev_end > end) {  // the range sits inside one run: keep its right part too
        Run right = prev->second;
        right.blocks = prev_end - end;
        e.runs.emplace(end, right);
        ++total_runs_;
      }
    }
  }
  while (it != e.runs.end() && it->first < end) {
    const std::uint64_t run_end = it->first + it->second.blocks;
    if (run_end > end) {
      Run right = it->second;
      right.blocks = run_end - end;
      e.runs.emplace(end, right);
      ++total_runs_;
    }
    it = e.runs.erase(it);
    --total_runs_;
  }
}

void ExtentCache::evict_for(Key key, std::uint64_t new_first) {
  while (total_runs_ > limits_.max_runs) {
    Entry* victim = nullptr;
    for (auto& [k, e] : entries_) {
      if (k != key && !e.runs.empty() && (victim == nullptr || e.last_used < victim->last_used)) victim = &e;
    }
    if (victim != nullptr) {
      total_runs_ -= victim->runs.size();
      victim->runs.clear();
      continue;
    }
    // Only this LUN is left over the bound: its runs below the new ones go first (a scan moves
    // upwards), then its highest.
    auto& own = entries_.at(key).runs;
    if (own.begin()->first < new_first) {
      own.erase(own.begin());
    } else {
      own.erase(std::prev(own.end()));
    }
    --total_runs_;
  }
}

void ExtentCache::insert(Key key, std::span<const AllocationRun> runs, std::uint64_t generation, TimePoint now) {
  if (runs.empty() || generation != this->generation(key) || limits_.max_runs == 0) return;
  Entry& e = entry(key);
  cut(e, runs.front().lba, runs.back().end());
  for (const auto& r : runs) {
    if (r.blocks == 0) continue;
    e.runs.emplace(r.lba, Run{.blocks = r.blocks, .mapped = r.mapped, .fetched_at = now});
    ++total_runs_;
  }
  evict_for(key, runs.front().lba);
}

std::vector<AllocationRun> ExtentCache::known_from(Key key, std::uint64_t lba, TimePoint now, std::size_t max_runs) {
  std::vector<AllocationRun> out;
  const auto found = entries_.find(key);
  if (found == entries_.end()) return out;
  Entry& e = found->second;
  auto it = e.runs.upper_bound(lba);
  if (it == e.runs.begin()) return out;
  --it;
  if (it->first + it->second.blocks <= lba) return out;
  e.last_used = ++uses_;
  for (; it != e.runs.end() && out.size() < max_runs; ++it) {
    if (!fresh(it->second.fetched_at, now)) break;
    if (!out.empty() && out.back().end() != it->first) break;
    out.push_back({.lba = it->first, .blocks = it->second.blocks, .mapped = it->second.mapped});
  }
  return out;
}

void ExtentCache::set_mapped_blocks(Key key, std::uint64_t blocks, std::uint64_t generation, TimePoint now) {
  if (generation != this->generation(key)) return;
  Entry& e = entry(key);
  e.mapped_blocks = blocks;
  e.counted_at = now;
}

std::optional<std::uint64_t> ExtentCache::mapped_blocks(Key key, TimePoint now) {
  const auto it = entries_.find(key);
  if (it == entries_.end() || !it->second.mapped_blocks || !fresh(it->second.counted_at, now)) return std::nullopt;
  it->second.last_used = ++uses_;
  return it->second.mapped_blocks;
}

void ExtentCache::invalidate(Key key, std::uint64_t lba, std::uint64_t blocks) {
  ++generations_;  // also for a LUN without an entry: an answer in flight for it is stale now
  const auto it = entries_.find(key);
  if (it == entries_.end()) return;
  Entry& e = it->second;
  e.generation = generations_;
  e.mapped_blocks.reset();
  const std::uint64_t end = lba > std::numeric_limits<std::uint64_t>::max() - blocks
                                ? std::numeric_limits<std::uint64_t>::max()
                                : lba + blocks;
  cut(e, lba, end);
}

void ExtentCache::forget(Key key) {
  ++generations_;
  const auto it = entries_.find(key);
  if (it == entries_.end()) return;
  total_runs_ -= it->second.runs.size();
  entries_.erase(it);
}

}  // namespace iserkit::fuse_fs

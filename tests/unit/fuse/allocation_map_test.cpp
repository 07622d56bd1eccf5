// The FUSE view's allocation knowledge without a target: GET LBA STATUS descriptors to runs, the
// SEEK_DATA / SEEK_HOLE answer from a run list (lseek(2) rules), and ExtentCache's bounds, TTL,
// invalidation by our own writes and stale answers.
#include "fuse_fs/allocation_map.hpp"

#include <gtest/gtest.h>

namespace iserkit::fuse_fs {
namespace {

using Kind = SeekAnswer::Kind;
using namespace std::chrono_literals;

scsi::LbaStatusDescriptor descriptor(std::uint64_t lba, std::uint32_t blocks, std::uint8_t status) {
  return {.lba = lba, .blocks = blocks, .provisioning_status = status};
}

TEST(RunsFromLbaStatus, ClipsMergesAndStopsAtAGapOrTheCapacity) {
  // The first descriptor starts before the request (SBC-4 allows it); 0h and 3h are both mapped,
  // 1h and 2h both not; a zero-length one is skipped; the gap after block 40 ends the list.
  const std::vector<scsi::LbaStatusDescriptor> ds = {descriptor(0, 10, 0), descriptor(10, 0, 1),
                                                     descriptor(10, 5, 3), descriptor(15, 5, 1),
                                                     descriptor(20, 20, 2), descriptor(50, 8, 0)};
  EXPECT_EQ(runs_from_lba_status(ds, 4, 100),
            (std::vector<AllocationRun>{{4, 11, true}, {15, 25, false}}));
  // The capacity cuts the last run.
  EXPECT_EQ(runs_from_lba_status(ds, 4, 18), (std::vector<AllocationRun>{{4, 11, true}, {15, 3, false}}));
  // Nothing about the block asked for.
  EXPECT_TRUE(runs_from_lba_status(ds, 45, 100).empty());
  EXPECT_TRUE(runs_from_lba_status({}, 0, 100).empty());
  // A status SBC-4 does not define counts as mapped (the safe side).
  EXPECT_EQ(runs_from_lba_status(std::vector{descriptor(0, 4, 7)}, 0, 4), (std::vector<AllocationRun>{{0, 4, true}}));
}

// A 100-block LUN of 512-byte blocks: data 0..9, hole 10..49, data 50..59, hole 60..99.
const std::vector<AllocationRun> sparse = {{0, 10, true}, {10, 40, false}, {50, 10, true}, {60, 40, false}};

TEST(SeekInRuns, DataAndHoleFollowLseekRules) {
  const auto seek = [](SeekWhence w, std::uint64_t off) { return seek_in_runs(sparse, w, off, 512, 100); };
  // In data: SEEK_DATA is the offset itself, SEEK_HOLE the end of the run.
  EXPECT_EQ(seek(SeekWhence::data, 100), (SeekAnswer{Kind::offset, 100}));
  EXPECT_EQ(seek(SeekWhence::hole, 100), (SeekAnswer{Kind::offset, 10 * 512}));
  // In a hole: SEEK_DATA is the next data, SEEK_HOLE the offset itself.
  EXPECT_EQ(seek(SeekWhence::data, 20 * 512 + 7), (SeekAnswer{Kind::offset, 50 * 512}));
  EXPECT_EQ(seek(SeekWhence::hole, 20 * 512 + 7), (SeekAnswer{Kind::offset, 20 * 512 + 7}));
  // In the last hole: no data up to the end is ENXIO.
  EXPECT_EQ(seek(SeekWhence::data, 70 * 512), (SeekAnswer{Kind::past_end, 0}));
  // SEEK_HOLE in the last data run.
  EXPECT_EQ(seek(SeekWhence::hole, 55 * 512), (SeekAnswer{Kind::offset, 60 * 512}));
}

TEST(SeekInRuns, DataUpToTheEndGivesTheImplicitHoleAtEof) {
  const std::vector<AllocationRun> full = {{0, 30, false}, {30, 70, true}};
  EXPECT_EQ(seek_in_runs(full, SeekWhence::hole, 40 * 4096, 4096, 100), (SeekAnswer{Kind::offset, 100 * 4096}));
  EXPECT_EQ(seek_in_runs(full, SeekWhence::data, 0, 4096, 100), (SeekAnswer{Kind::offset, 30 * 4096}));
}

TEST(SeekInRuns, SaysWhereKnowledgeEnds) {
  const std::vector<AllocationRun> part = {{0, 10, false}, {10, 5, false}};
  EXPECT_EQ(seek_in_runs(part, SeekWhence::data, 0, 512, 100), (SeekAnswer{Kind::unknown_from, 15}));
  EXPECT_EQ(seek_in_runs({}, SeekWhence::hole, 1024, 512, 100), (SeekAnswer{Kind::unknown_from, 2}));
  // A gap in the list stops at the gap.
  const std::vector<AllocationRun> gap = {{0, 10, true}, {20, 5, false}};
  EXPECT_EQ(seek_in_runs(gap, SeekWhence::hole, 0, 512, 100), (SeekAnswer{Kind::unknown_from, 10}));
}

TEST(MappedBlocksIn, CountsMappedRunsOnly) { EXPECT_EQ(mapped_blocks_in(sparse), 20u); }

const ExtentCache::TimePoint t0{};

TEST(ExtentCache, KnownFromFollowsContiguousFreshRuns) {
  ExtentCache cache;
  cache.insert(1, sparse, cache.generation(1), t0);
  EXPECT_EQ(cache.runs(), 4u);
  EXPECT_EQ(cache.known_from(1, 15, t0), (std::vector<AllocationRun>{sparse[1], sparse[2], sparse[3]}));
  EXPECT_EQ(cache.known_from(1, 15, t0, 1).size(), 1u);
  EXPECT_TRUE(cache.known_from(1, 100, t0).empty());
  EXPECT_TRUE(cache.known_from(2, 0, t0).empty());
}

TEST(ExtentCache, RunsAndCountsExpireAfterTheTtl) {
  ExtentCache cache({.ttl = 2s});
  cache.insert(1, sparse, cache.generation(1), t0);
  cache.set_mapped_blocks(1, 20, cache.generation(1), t0);
  EXPECT_EQ(cache.mapped_blocks(1, t0 + 1999ms), 20u);
  EXPECT_EQ(cache.known_from(1, 0, t0 + 1999ms).size(), 4u);
  EXPECT_EQ(cache.mapped_blocks(1, t0 + 2s), std::nullopt);
  EXPECT_TRUE(cache.known_from(1, 0, t0 + 2s).empty());
  // A newer insert of part of the LUN: only the fresh part is followed.
  cache.insert(1, std::vector<AllocationRun>{{0, 10, true}}, cache.generation(1), t0 + 3s);
  EXPECT_EQ(cache.known_from(1, 0, t0 + 3s), (std::vector<AllocationRun>{{0, 10, true}}));
}

TEST(ExtentCache, OurWriteCutsTheRunsAndDropsTheCount) {
  ExtentCache cache;
  cache.insert(1, sparse, cache.generation(1), t0);
  cache.set_mapped_blocks(1, 20, cache.generation(1), t0);
  cache.insert(2, sparse, cache.generation(2), t0);
  cache.invalidate(1, 20, 2);  // a write inside the first hole
  EXPECT_EQ(cache.mapped_blocks(1, t0), std::nullopt);
  EXPECT_EQ(cache.known_from(1, 0, t0), (std::vector<AllocationRun>{{0, 10, true}, {10, 10, false}}));
  EXPECT_TRUE(cache.known_from(1, 20, t0).empty());
  EXPECT_EQ(cache.known_from(1, 22, t0), (std::vector<AllocationRun>{{22, 28, false}, sparse[2], sparse[3]}));
  EXPECT_EQ(cache.runs(), 5u + 4u);
  EXPECT_EQ(cache.known_from(2, 0, t0).size(), 4u);  // another LUN keeps its runs
  // A range over several runs.
  cache.invalidate(1, 5, 50);
  EXPECT_EQ(cache.known_from(1, 0, t0), (std::vector<AllocationRun>{{0, 5, true}}));
  EXPECT_EQ(cache.known_from(1, 55, t0), (std::vector<AllocationRun>{{55, 5, true}, sparse[3]}));
}

TEST(ExtentCache, AnAnswerOlderThanOurWriteIsDropped) {
  ExtentCache cache;
  const auto g = cache.generation(1);  // GET LBA STATUS sent ...
  cache.invalidate(1, 0, 1);           // ... our write completes before its answer arrives
  cache.insert(1, sparse, g, t0);
  cache.set_mapped_blocks(1, 20, g, t0);
  EXPECT_EQ(cache.runs(), 0u);
  EXPECT_EQ(cache.mapped_blocks(1, t0), std::nullopt);
  cache.insert(1, sparse, cache.generation(1), t0);
  EXPECT_EQ(cache.runs(), 4u);
  // Also once the LUN has an entry.
  const auto g2 = cache.generation(1);
  cache.invalidate(1, 90, 1);
  cache.set_mapped_blocks(1, 20, g2, t0);
  EXPECT_EQ(cache.mapped_blocks(1, t0), std::nullopt);
}

TEST(ExtentCache, RunBoundEvictsTheLeastRecentlyUsedLunFirstThenOwnRuns) {
  ExtentCache cache({.max_runs = 7});
  cache.insert(1, sparse, cache.generation(1), t0);
  cache.set_mapped_blocks(1, 20, cache.generation(1), t0);
  cache.insert(2, std::vector<AllocationRun>{{0, 1, true}}, cache.generation(2), t0);
  cache.insert(3, std::vector<AllocationRun>{{0, 1, true}, {1, 1, false}}, cache.generation(3), t0);
  EXPECT_EQ(cache.runs(), 7u);
  (void)cache.known_from(1, 0, t0);  // LUN 1 used: LUN 2 is now the least recently used
  cache.insert(3, std::vector<AllocationRun>{{5, 1, true}}, cache.generation(3), t0);
  EXPECT_EQ(cache.runs(), 7u);
  EXPECT_TRUE(cache.known_from(2, 0, t0).empty());
  EXPECT_EQ(cache.known_from(1, 0, t0).size(), 4u);
  EXPECT_EQ(cache.mapped_blocks(1, t0), 20u);  // counts are kept; they are one number per LUN
  // One LUN alone past the bound keeps the newest runs (its lower, older ones go first).
  ExtentCache one({.max_runs = 3});
  one.insert(1, std::vector<AllocationRun>{{0, 1, true}, {1, 1, false}, {2, 1, true}}, one.generation(1), t0);
  one.insert(1, std::vector<AllocationRun>{{10, 1, true}, {11, 1, false}}, one.generation(1), t0);
  EXPECT_EQ(one.runs(), 3u);
  EXPECT_TRUE(one.known_from(1, 0, t0).empty());
  EXPECT_EQ(one.known_from(1, 10, t0).size(), 2u);
}

TEST(ExtentCache, LunBoundDropsTheLeastRecentlyUsedEntry) {
  ExtentCache cache({.max_luns = 2});
  cache.set_mapped_blocks(1, 1, cache.generation(1), t0);
  cache.set_mapped_blocks(2, 2, cache.generation(2), t0);
  EXPECT_EQ(cache.mapped_blocks(1, t0), 1u);  // 2 is now the older one
  cache.set_mapped_blocks(3, 3, cache.generation(3), t0);
  EXPECT_EQ(cache.luns(), 2u);
  EXPECT_EQ(cache.mapped_blocks(2, t0), std::nullopt);
  EXPECT_EQ(cache.mapped_blocks(1, t0), 1u);
  EXPECT_EQ(cache.mapped_blocks(3, t0), 3u);
  cache.forget(3);
  EXPECT_EQ(cache.luns(), 1u);
}

}  // namespace
}  // namespace iserkit::fuse_fs

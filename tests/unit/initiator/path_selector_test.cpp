// Multipath's pure pieces (initiator/src/path_selector.hpp): which path the next command takes
// under failover and round-robin with ALUA states (SPC-5 §5.16.2.4), and WriteOrder, which keeps a
// SYNCHRONIZE CACHE behind the writes submitted before it.
#include <gtest/gtest.h>

#include <map>

#include "path_selector.hpp"

using namespace iserkit;
using namespace iserkit::initiator;
using scsi::AccessState;

TEST(PathSelector, NoPathUpPicksNothing) {
  PathSelector s(2);
  EXPECT_FALSE(s.pick());
  EXPECT_FALSE(s.any_usable());
}

TEST(PathSelector, FailoverStaysOnOnePathAndMovesOnlyWhenItFails) {
  PathSelector s(3, MultipathPolicy::failover);
  for (std::size_t i = 0; i < 3; ++i) s.set_up(i, true);
  for (int k = 0; k < 5; ++k) EXPECT_EQ(s.pick(), 0u);
  s.set_up(0, false);
  EXPECT_EQ(s.pick(), 1u);
  s.set_up(0, true);  // a path of the same group coming back does not take over
  EXPECT_EQ(s.pick(), 1u);
  s.set_up(1, false);
  s.set_up(2, false);
  EXPECT_EQ(s.pick(), 0u);
}

TEST(PathSelector, AluaActiveOptimizedFirstNonOptimizedNextStandbyNever) {
  PathSelector s(3, MultipathPolicy::failover);
  for (std::size_t i = 0; i < 3; ++i) s.set_up(i, true);
  s.set_state(0, AccessState::standby);
  s.set_state(1, AccessState::active_non_optimized);
  s.set_state(2, AccessState::active_optimized);
  EXPECT_EQ(s.pick(), 2u);
  s.set_up(2, false);
  EXPECT_EQ(s.pick(), 1u);  // non-optimized before nothing
  s.set_up(2, true);
  EXPECT_EQ(s.pick(), 2u);  // a better group takes over, even under failover
  s.set_state(1, AccessState::unavailable);
  s.set_state(2, AccessState::transitioning);
  EXPECT_FALSE(s.pick());   // standby, unavailable, transitioning: none usable
  EXPECT_FALSE(s.any_usable());
  s.set_state(0, AccessState::offline);
  s.set_state(1, AccessState::logical_block_dependent);
  EXPECT_EQ(s.pick(), 1u);
}

TEST(PathSelector, RoundRobinSpreadsOverTheBestGroupOnly) {
  PathSelector s(4, MultipathPolicy::round_robin);
  for (std::size_t i = 0; i < 4; ++i) s.set_up(i, true);
  s.set_state(3, AccessState::active_non_optimized);
  std::map<std::size_t, int> count;
  for (int k = 0; k < 30; ++k) ++count[*s.pick()];
  EXPECT_EQ(count[0], 10);
  EXPECT_EQ(count[1], 10);
  EXPECT_EQ(count[2], 10);
  EXPECT_EQ(count.count(3), 0u);
  s.set_up(1, false);
  count.clear();
  for (int k = 0; k < 10; ++k) ++count[*s.pick()];
  EXPECT_EQ(count[0], 5);
  EXPECT_EQ(count[2], 5);
  s.set_up(0, false);
  s.set_up(2, false);
  EXPECT_EQ(s.pick(), 3u);
  EXPECT_EQ(s.pick(), 3u);
}

TEST(WriteOrder, AFlushWaitsForEveryEarlierWriteWhateverOrderTheyComplete) {
  WriteOrder w;
  const auto a = w.begin();
  const auto b = w.begin();
  const auto flush = w.barrier();
  const auto c = w.begin();  // after the flush: does not hold it
  EXPECT_FALSE(w.covered(flush));
  EXPECT_FALSE(w.end(b));  // b done, a not: nothing moves
  EXPECT_FALSE(w.covered(flush));
  EXPECT_EQ(w.in_flight(), 2u);
  EXPECT_TRUE(w.end(a));
  EXPECT_TRUE(w.covered(flush));
  EXPECT_FALSE(w.covered(w.barrier()));  // c is still out
  EXPECT_TRUE(w.end(c));
  EXPECT_TRUE(w.covered(w.barrier()));
  EXPECT_FALSE(w.end(c));  // twice, or unknown: ignored
  EXPECT_FALSE(w.end(1000));
}

TEST(WriteOrder, AFlushWithNoWriteBeforeItGoesAtOnce) {
  WriteOrder w;
  EXPECT_TRUE(w.covered(w.barrier()));
  const auto a = w.begin();
  w.end(a);
  EXPECT_TRUE(w.covered(w.barrier()));
}

// EmptySocketGuess: skips the own read at queue depth 1, probes now and then, and never skips in
// a burst.
#include <gtest/gtest.h>

#include "iserkit/common/empty_socket_guess.hpp"

using iserkit::EmptySocketGuess;

TEST(EmptySocketGuess, OneUnitPerWakeUpSkipsAllButOneReadInProbeEvery) {
  EmptySocketGuess g;
  unsigned tried = 0;
  const unsigned wakeups = 10 * EmptySocketGuess::probe_every;
  for (unsigned i = 0; i < wakeups; ++i) {
    g.waiting();  // Asio's read waits, then one unit arrives
    g.unit();
    if (g.worth_reading()) ++tried;  // the probe's read finds nothing: the loop waits again
  }
  // Until runs_of_one_to_start runs were seen every read is tried; then one in probe_every.
  const unsigned start = EmptySocketGuess::runs_of_one_to_start;
  EXPECT_EQ(tried, start + (wakeups - start) / EmptySocketGuess::probe_every);
}

TEST(EmptySocketGuess, ABurstIsReadOnTheLoopsOwnThread) {
  EmptySocketGuess g;
  // A run of several units per wake-up: every own read is worth it.
  g.waiting();
  for (int i = 0; i < 5; ++i) {
    g.unit();
    EXPECT_TRUE(g.worth_reading());
  }
  // Runs of one now and then (a burst that trickles) do not start the guess...
  for (int round = 0; round < 3; ++round) {
    for (unsigned i = 1; i < EmptySocketGuess::runs_of_one_to_start; ++i) {
      g.waiting();
      g.unit();
      EXPECT_TRUE(g.worth_reading());
    }
    g.waiting();
    g.unit();
    g.unit();  // a run of two
    EXPECT_TRUE(g.worth_reading());
  }
  // ...only runs_of_one_to_start of them in a row do.
  for (unsigned i = 0; i <= EmptySocketGuess::runs_of_one_to_start; ++i) {
    g.waiting();
    g.unit();
  }
  EXPECT_FALSE(g.worth_reading());
}

TEST(EmptySocketGuess, AProbeThatFindsABurstEndsTheGuess) {
  EmptySocketGuess g;
  for (unsigned i = 0; i <= EmptySocketGuess::runs_of_one_to_start; ++i) {
    g.waiting();
    g.unit();
  }
  unsigned reads = 0;
  // Queue depth 1 until the probe, which finds a second unit: the run goes on without skipping.
  for (unsigned i = 0; i < EmptySocketGuess::probe_every; ++i) {
    if (i > 0) {
      g.waiting();
      g.unit();
    }
    if (g.worth_reading()) ++reads;
  }
  ASSERT_EQ(reads, 1u);
  g.unit();  // the probe's read got a unit
  EXPECT_TRUE(g.worth_reading());
  g.unit();
  g.waiting();
  g.unit();
  EXPECT_TRUE(g.worth_reading());  // the last run had 3: the guess starts over
}

// Backoff (common/include/iserkit/common/backoff.hpp): the delay sequences of the retry loops,
// their bounds and overflow edges, and the jitter drawn from an injected source.
#include "iserkit/common/backoff.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace iserkit {
namespace {

using namespace std::chrono_literals;
using ms = std::chrono::milliseconds;

struct Sequence {
  std::string name;
  ms initial;
  ms cap;
  unsigned factor;
  std::vector<std::int64_t> delays;  // delay() before each failed(), in ms
};

constexpr auto max_rep = std::numeric_limits<ms::rep>::max();

class BackoffSequence : public ::testing::TestWithParam<Sequence> {};

TEST_P(BackoffSequence, DelaysGrowThenStayAtTheBound) {
  const Sequence& s = GetParam();
  Backoff b(s.initial, s.cap, s.factor);
  std::vector<std::int64_t> seen;
  for (std::size_t i = 0; i < s.delays.size(); ++i) {
    seen.push_back(b.delay().count());
    b.failed();
  }
  EXPECT_EQ(seen, s.delays);
}

INSTANTIATE_TEST_SUITE_P(
    Rules, BackoffSequence,
    ::testing::Values(
        // The defaults the docs state (initiator/README.md, docs/architecture.md).
        Sequence{"SessionReconnect", 100ms, 5000ms, 2, {100, 200, 400, 800, 1600, 3200, 5000, 5000}},
        Sequence{"MultipathReinstate", 1000ms, 5000ms, 2, {1000, 2000, 4000, 5000, 5000}},
        Sequence{"BusyRetry", 10ms, 1000ms, 2, {10, 20, 40, 80, 160, 320, 640, 1000, 1000}},
        Sequence{"CapNotAPowerOfTheFactor", 3ms, 10ms, 2, {3, 6, 10, 10}},
        Sequence{"CapBelowInitialKeepsInitial", 500ms, 100ms, 2, {500, 500, 500}},
        Sequence{"FactorThree", 1ms, 100ms, 3, {1, 3, 9, 27, 81, 100}},
        Sequence{"FactorZeroIsConstant", 7ms, 100ms, 0, {7, 7, 7}},
        Sequence{"ZeroInitialStaysZero", 0ms, 100ms, 2, {0, 0, 0}},
        Sequence{"NegativeInitialIsZero", -5ms, 100ms, 2, {0, 0}},
        // Overflow edges: doubling near the largest representable delay saturates at the bound.
        Sequence{"HugeCapSaturates", ms(max_rep / 2 + 1), ms(max_rep), 2, {max_rep / 2 + 1, max_rep, max_rep}},
        Sequence{"HugeFactor", 2ms, ms(max_rep), 4000000000u, {2, 8000000000, max_rep, max_rep}}),
    [](const auto& info) { return info.param.name; });

TEST(Backoff, ResetStartsAgainFromInitial) {
  Backoff b(100ms, 5000ms);
  b.failed();
  b.failed();
  EXPECT_EQ(b.delay(), 400ms);
  b.reset();
  EXPECT_EQ(b.delay(), 100ms);
  b.failed();
  EXPECT_EQ(b.delay(), 200ms);
  EXPECT_EQ(b.bound(), 5000ms);
}

TEST(Backoff, JitterIsBetweenHalfTheDelayAndAllOfIt) {
  Backoff b(100ms, 5000ms);
  // Injected sources: the smallest and largest draws give the ends of the range.
  auto zero = [] { return 0u; };
  auto top = [] { return 50u; };  // 50 % (50 + 1) = 50
  EXPECT_EQ(b.jittered(zero), 50ms);
  EXPECT_EQ(b.jittered(top), 100ms);
  auto wraps = [] { return 51u; };  // 51 % 51 = 0
  EXPECT_EQ(b.jittered(wraps), 50ms);
  // A real generator stays in range at every step.
  std::minstd_rand random(42);
  for (int i = 0; i < 10; ++i, b.failed()) {
    for (int k = 0; k < 100; ++k) {
      const ms w = b.jittered(random);
      ASSERT_GE(w, b.delay() / 2);
      ASSERT_LE(w, b.delay());
    }
  }
}

TEST(Backoff, JitterOfAZeroOrOneMillisecondDelay) {
  auto big = [] { return 0xffffffffu; };
  EXPECT_EQ(Backoff(0ms, 0ms).jittered(big), 0ms);
  // half = 0: the wait is 0 ms whatever the draw (random() % 1).
  EXPECT_EQ(Backoff(1ms, 1ms).jittered(big), 0ms);
}

TEST(Backoff, JitterMatchesTheLoopsFormulaForTheSameDraws) {
  // The reconnect and reinstatement loops drew `half + random() % (half + 1)` from a
  // std::minstd_rand before this type existed; the same seed gives the same waits.
  std::minstd_rand a(7);
  std::minstd_rand b(7);
  Backoff backoff(100ms, 5000ms);
  for (int i = 0; i < 8; ++i, backoff.failed()) {
    const auto half = backoff.delay().count() / 2;
    const auto expected = ms(half + static_cast<long>(a() % static_cast<unsigned long>(half + 1)));
    EXPECT_EQ(backoff.jittered(b), expected);
  }
}

}  // namespace
}  // namespace iserkit

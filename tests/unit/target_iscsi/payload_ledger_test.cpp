// PayloadLedger (target/src/payload_ledger.hpp): the two-level payload budget of a connection,
// table-driven. Each scenario runs steps against a ledger whose shared level is a PayloadBudget
// with deferred grants (as the driver's posted ones) and checks every step's answer and the bytes
// held afterwards.
#include <gtest/gtest.h>

#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "payload_ledger.hpp"

namespace iserkit::target {
namespace {

constexpr std::uint64_t max_bytes = std::numeric_limits<std::uint64_t>::max();

/// A shared level over a PayloadBudget: grants of queued requests wait in `grants` until the test
/// delivers them; other connections' use is played by take()/give().
class TestSharedLevel final : public PayloadLedger::SharedLevel {
 public:
  explicit TestSharedLevel(std::uint64_t limit) : budget(limit) {}
  PayloadLedger::SharedAsk request(std::uint64_t hold, std::uint64_t bytes) override {
    const std::uint64_t id = next_id_++;
    if (budget.request(id, bytes)) return {.id = id, .granted = true};
    queued_[id] = hold;
    return {.id = id, .granted = false};
  }
  bool cancel(std::uint64_t shared_id) override {
    std::vector<std::uint64_t> granted;
    const bool was_queued = budget.cancel(shared_id, granted);
    if (was_queued) queued_.erase(shared_id);
    deliver_later(granted);
    return was_queued;
  }
  void release(std::uint64_t bytes) override { deliver_later(budget.release(bytes)); }
  /// Another connection takes `bytes` (granted at once in these tables).
  void take(std::uint64_t bytes) { ASSERT_TRUE(budget.request(next_id_++, bytes)); }
  /// Another connection gives `bytes` back.
  void give(std::uint64_t bytes) { release(bytes); }

  PayloadBudget budget;
  std::deque<std::uint64_t> grants;  // ledger holds granted here, not delivered yet

 private:
  void deliver_later(const std::vector<std::uint64_t>& ids) {
    for (auto id : ids) {
      if (auto it = queued_.find(id); it != queued_.end()) {
        grants.push_back(it->second);
        queued_.erase(it);
      }
    }
  }
  std::map<std::uint64_t, std::uint64_t> queued_;
  std::uint64_t next_id_ = 1;
};

enum class Op {
  request,         ///< ledger.request(itt, bytes) == granted
  release,         ///< ledger.release(itt): `released` and the ITTs granted by it
  shared_grant,    ///< the oldest shared grant arrives: the ITT granted (or none)
  other_takes,     ///< another connection takes `bytes` of the shared level
  other_gives,     ///< another connection gives `bytes` back
};

struct Step {
  Op op;
  std::uint32_t itt = 0;
  std::uint64_t bytes = 0;
  bool granted = false;                               // request
  std::optional<PayloadLedger::Released> released;    // release
  std::vector<std::uint32_t> granted_itts;            // release, shared_grant
  // Afterwards:
  std::uint64_t connection_used = 0;
  std::uint64_t granted_bytes = 0;
};

struct Scenario {
  std::string name;
  std::uint64_t connection_limit;
  std::uint64_t shared_limit;  // 0: no shared level
  std::vector<Step> steps;
  std::uint64_t shared_used_at_end = 0;
  std::size_t holds_at_end = 0;
};

using R = PayloadLedger::Released;

std::vector<Scenario> scenarios() {
  return {
      {"GrantsWhileBytesFit", 100, 0,
       {{.op = Op::request, .itt = 1, .bytes = 60, .granted = true, .connection_used = 60, .granted_bytes = 60},
        {.op = Op::request, .itt = 2, .bytes = 40, .granted = true, .connection_used = 100, .granted_bytes = 100}},
       0, 2},
      {"RefusesAboveTheLimitAndGrantsInRequestOrder", 100, 0,
       {{.op = Op::request, .itt = 1, .bytes = 60, .granted = true, .connection_used = 60, .granted_bytes = 60},
        {.op = Op::request, .itt = 2, .bytes = 50, .granted = false, .connection_used = 60, .granted_bytes = 60},
        // 10 would fit, but request 2 came first: no overtaking.
        {.op = Op::request, .itt = 3, .bytes = 10, .granted = false, .connection_used = 60, .granted_bytes = 60},
        {.op = Op::release, .itt = 1, .released = R{60, true}, .granted_itts = {2, 3}, .connection_used = 60,
         .granted_bytes = 60}},
       0, 2},
      {"ReleaseOfAWaitingRequestWithdrawsIt", 100, 0,
       {{.op = Op::request, .itt = 1, .bytes = 100, .granted = true, .connection_used = 100, .granted_bytes = 100},
        {.op = Op::request, .itt = 2, .bytes = 10, .granted = false, .connection_used = 100, .granted_bytes = 100},
        {.op = Op::release, .itt = 2, .released = R{10, false}, .connection_used = 100, .granted_bytes = 100},
        {.op = Op::release, .itt = 1, .released = R{100, true}}}},
      {"ReleaseOfAnUnknownTaskDoesNothing", 100, 0,
       {{.op = Op::request, .itt = 1, .bytes = 10, .granted = true, .connection_used = 10, .granted_bytes = 10},
        {.op = Op::release, .itt = 7, .released = std::nullopt, .connection_used = 10, .granted_bytes = 10},
        {.op = Op::release, .itt = 1, .released = R{10, true}},
        {.op = Op::release, .itt = 1, .released = std::nullopt}}},
      {"ATasksRequestsEndOldestFirst", 100, 0,
       {{.op = Op::request, .itt = 1, .bytes = 30, .granted = true, .connection_used = 30, .granted_bytes = 30},
        {.op = Op::request, .itt = 1, .bytes = 50, .granted = true, .connection_used = 80, .granted_bytes = 80},
        {.op = Op::release, .itt = 1, .released = R{30, true}, .connection_used = 50, .granted_bytes = 50},
        {.op = Op::release, .itt = 1, .released = R{50, true}}}},
      {"ARequestAboveTheLimitRunsAlone", 100, 0,
       {{.op = Op::request, .itt = 1, .bytes = 10, .granted = true, .connection_used = 10, .granted_bytes = 10},
        {.op = Op::request, .itt = 2, .bytes = 500, .granted = false, .connection_used = 10, .granted_bytes = 10},
        {.op = Op::release, .itt = 1, .released = R{10, true}, .granted_itts = {2}, .connection_used = 500,
         .granted_bytes = 500},
        {.op = Op::request, .itt = 3, .bytes = 1, .granted = false, .connection_used = 500, .granted_bytes = 500},
        {.op = Op::release, .itt = 2, .released = R{500, true}, .granted_itts = {3}, .connection_used = 1,
         .granted_bytes = 1}},
       0, 1},
      {"ALimitOfZeroIsOneByte", 0, 0,
       {{.op = Op::request, .itt = 1, .bytes = 1, .granted = true, .connection_used = 1, .granted_bytes = 1},
        {.op = Op::request, .itt = 2, .bytes = 1, .granted = false, .connection_used = 1, .granted_bytes = 1}},
       0, 2},
      // Overflow edges: `used + bytes` would wrap around 2^64.
      {"ARequestNearTwoToTheSixtyFourDoesNotWrapPastTheLimit", 100, 0,
       {{.op = Op::request, .itt = 1, .bytes = 60, .granted = true, .connection_used = 60, .granted_bytes = 60},
        {.op = Op::request, .itt = 2, .bytes = max_bytes - 10, .granted = false, .connection_used = 60,
         .granted_bytes = 60},
        {.op = Op::release, .itt = 1, .released = R{60, true}, .granted_itts = {2}, .connection_used = max_bytes - 10,
         .granted_bytes = max_bytes - 10},
        // Held above the limit: nothing else fits, however small.
        {.op = Op::request, .itt = 3, .bytes = 20, .granted = false, .connection_used = max_bytes - 10,
         .granted_bytes = max_bytes - 10},
        {.op = Op::release, .itt = 2, .released = R{max_bytes - 10, true}, .granted_itts = {3}, .connection_used = 20,
         .granted_bytes = 20}},
       0, 1},
      {"ALimitOfTwoToTheSixtyFourMinusOne", max_bytes, 0,
       {{.op = Op::request, .itt = 1, .bytes = max_bytes, .granted = true, .connection_used = max_bytes,
         .granted_bytes = max_bytes},
        {.op = Op::request, .itt = 2, .bytes = 1, .granted = false, .connection_used = max_bytes,
         .granted_bytes = max_bytes},
        {.op = Op::release, .itt = 1, .released = R{max_bytes, true}, .granted_itts = {2}, .connection_used = 1,
         .granted_bytes = 1}},
       0, 1},
      // Two levels.
      {"BothLevelsGrantAtOnce", 100, 1000,
       {{.op = Op::request, .itt = 1, .bytes = 100, .granted = true, .connection_used = 100, .granted_bytes = 100},
        {.op = Op::release, .itt = 1, .released = R{100, true}}}},
      {"TheSharedLevelRefusesWhileTheConnectionGrants", 100, 50,
       {{.op = Op::request, .itt = 1, .bytes = 40, .granted = true, .connection_used = 40, .granted_bytes = 40},
        // Held at the connection level, waiting at the shared one.
        {.op = Op::request, .itt = 2, .bytes = 20, .granted = false, .connection_used = 60, .granted_bytes = 40},
        // The shared grant is on its way, not granted before it arrives.
        {.op = Op::release, .itt = 1, .released = R{40, true}, .connection_used = 20, .granted_bytes = 0},
        {.op = Op::shared_grant, .granted_itts = {2}, .connection_used = 20, .granted_bytes = 20}},
       20, 1},
      {"AnotherConnectionHoldsTheSharedLevel", 100, 100,
       {{.op = Op::other_takes, .bytes = 80},
        {.op = Op::request, .itt = 1, .bytes = 30, .granted = false, .connection_used = 30, .granted_bytes = 0},
        {.op = Op::other_gives, .bytes = 80, .connection_used = 30, .granted_bytes = 0},
        {.op = Op::shared_grant, .granted_itts = {1}, .connection_used = 30, .granted_bytes = 30},
        {.op = Op::release, .itt = 1, .released = R{30, true}}}},
      {"AWaitingSharedRequestIsWithdrawnByItsRelease", 100, 50,
       {{.op = Op::request, .itt = 1, .bytes = 50, .granted = true, .connection_used = 50, .granted_bytes = 50},
        {.op = Op::request, .itt = 2, .bytes = 10, .granted = false, .connection_used = 60, .granted_bytes = 50},
        {.op = Op::release, .itt = 2, .released = R{10, false}, .connection_used = 50, .granted_bytes = 50},
        {.op = Op::release, .itt = 1, .released = R{50, true}}}},
      {"ASharedGrantArrivingAfterTheReleaseIsGivenBack", 100, 50,
       {{.op = Op::request, .itt = 1, .bytes = 50, .granted = true, .connection_used = 50, .granted_bytes = 50},
        {.op = Op::request, .itt = 2, .bytes = 10, .granted = false, .connection_used = 60, .granted_bytes = 50},
        {.op = Op::release, .itt = 1, .released = R{50, true}, .connection_used = 10, .granted_bytes = 0},
        // Task 2 ends while its shared grant is on its way: the connection level is given back
        // now, the shared bytes when the grant arrives.
        {.op = Op::release, .itt = 2, .released = R{10, false}, .connection_used = 0, .granted_bytes = 0},
        {.op = Op::shared_grant, .granted_itts = {}, .connection_used = 0, .granted_bytes = 0}}},
      {"AConnectionGrantThenAsksTheSharedLevel", 100, 100,
       {{.op = Op::request, .itt = 1, .bytes = 50, .granted = true, .connection_used = 50, .granted_bytes = 50},
        {.op = Op::request, .itt = 2, .bytes = 60, .granted = false, .connection_used = 50, .granted_bytes = 50},
        {.op = Op::request, .itt = 3, .bytes = 10, .granted = false, .connection_used = 50, .granted_bytes = 50},
        {.op = Op::other_takes, .bytes = 40},
        // Both now fit the connection; the shared level (100, 40 taken elsewhere) grants 2 at once
        // and queues 3.
        {.op = Op::release, .itt = 1, .released = R{50, true}, .granted_itts = {2}, .connection_used = 70,
         .granted_bytes = 60},
        {.op = Op::other_gives, .bytes = 40, .connection_used = 70, .granted_bytes = 60},
        {.op = Op::shared_grant, .granted_itts = {3}, .connection_used = 70, .granted_bytes = 70}},
       70, 2},
  };
}

class PayloadLedgerTable : public ::testing::TestWithParam<Scenario> {};

TEST_P(PayloadLedgerTable, Steps) {
  const Scenario& s = GetParam();
  std::unique_ptr<TestSharedLevel> shared;
  if (s.shared_limit != 0) shared = std::make_unique<TestSharedLevel>(s.shared_limit);
  PayloadLedger ledger(s.connection_limit, shared.get());
  for (std::size_t i = 0; i < s.steps.size(); ++i) {
    const Step& step = s.steps[i];
    SCOPED_TRACE("step " + std::to_string(i));
    std::vector<std::uint32_t> granted;
    switch (step.op) {
      case Op::request: EXPECT_EQ(ledger.request(iscsi::Itt{step.itt}, step.bytes), step.granted); break;
      case Op::release: {
        std::vector<iscsi::Itt> itts;
        const auto released = ledger.release(iscsi::Itt{step.itt}, itts);
        ASSERT_EQ(released.has_value(), step.released.has_value());
        if (released) {
          EXPECT_EQ(released->bytes, step.released->bytes);
          EXPECT_EQ(released->granted, step.released->granted);
        }
        for (auto itt : itts) granted.push_back(iscsi::to_u32(itt));
        EXPECT_EQ(granted, step.granted_itts);
        break;
      }
      case Op::shared_grant: {
        ASSERT_TRUE(shared && !shared->grants.empty()) << "no shared grant on its way";
        const std::uint64_t hold = shared->grants.front();
        shared->grants.pop_front();
        if (auto itt = ledger.on_shared_grant(hold)) granted.push_back(iscsi::to_u32(*itt));
        EXPECT_EQ(granted, step.granted_itts);
        break;
      }
      case Op::other_takes: shared->take(step.bytes); continue;  // the ledger is not involved
      case Op::other_gives: shared->give(step.bytes); break;
    }
    EXPECT_EQ(ledger.connection_used(), step.connection_used);
    EXPECT_EQ(ledger.granted_bytes(), step.granted_bytes);
  }
  if (shared) {
    EXPECT_EQ(shared->budget.used(), s.shared_used_at_end);
    EXPECT_TRUE(shared->grants.empty()) << "a shared grant was not delivered";
  }
  EXPECT_EQ(ledger.holds(), s.holds_at_end);
}

INSTANTIATE_TEST_SUITE_P(Rules, PayloadLedgerTable, ::testing::ValuesIn(scenarios()),
                         [](const auto& info) { return info.param.name; });

// The "runs alone" count the fuzzer checks: requests holding connection-level bytes.
TEST(PayloadLedger, CountsRequestsHoldingTheConnectionLevel) {
  TestSharedLevel shared(10);
  PayloadLedger ledger(100, &shared);
  EXPECT_TRUE(ledger.request(iscsi::Itt{1}, 10));
  EXPECT_FALSE(ledger.request(iscsi::Itt{2}, 10));   // waits for the shared level
  EXPECT_FALSE(ledger.request(iscsi::Itt{3}, 200));  // waits for the connection level
  EXPECT_EQ(ledger.connection_holders(), 2u);
  std::vector<iscsi::Itt> granted;
  ASSERT_TRUE(ledger.release(iscsi::Itt{2}, granted).has_value());
  EXPECT_EQ(ledger.connection_holders(), 1u);
  EXPECT_TRUE(granted.empty());  // 200 does not run alone while 10 bytes are held
  ASSERT_TRUE(ledger.release(iscsi::Itt{1}, granted).has_value());
  EXPECT_EQ(ledger.connection_holders(), 1u);  // request 3, alone, now waits for the shared level
  EXPECT_EQ(ledger.connection_used(), 200u);
}

}  // namespace
}  // namespace iserkit::target

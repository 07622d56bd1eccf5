// LocalInvalidates (common/src/datamover/local_invalidates.hpp): when the iSER initiator posts the
// Local Invalidates of per-command STags (issue 23 item 7) — at once outside a send pass or for a
// command that ended without its response; queued during a held pass, taken at the head of the
// next chain posted or flushed as one chain when the pass ends; dropped when the connection fails —
// together with the StagTable rules it must keep (a window is bound again only after its
// invalidate completed; a window the peer invalidated or whose bind failed is never invalidated).
#include "local_invalidates.hpp"

#include <gtest/gtest.h>

#include <initializer_list>
#include <vector>

#include "iserkit/iser/stag_table.hpp"

namespace iserkit::datamover::rdma {
namespace {

using iser::StagTable;
using Release = StagTable::Release;
using Chains = std::vector<std::vector<std::uint32_t>>;

// One loop's pass, and the chains of Local Invalidates "posted" (each a list of window slots).
class LocalInvalidatesTest : public ::testing::Test {
 protected:
  asio::io_context io;
  SendPass& pass = SendPass::of(io.get_executor());
  Chains posted;
  LocalInvalidates inv{[this](std::span<const std::uint32_t> slots) { posted.emplace_back(slots.begin(), slots.end()); }};

  /// Joins the pass, holds it, and ends the commands of `slots` with their responses, in order.
  void hold_with_answered(std::initializer_list<std::uint32_t> slots) {
    inv.set_pass(&pass);
    pass.hold();
    for (const auto slot : slots) inv.add(slot, true);
  }
};

TEST_F(LocalInvalidatesTest, WithoutAPassEachIsPostedAtOnceAlone) {
  inv.add(3, true);
  inv.add(5, true);
  EXPECT_EQ(posted, (Chains{{3}, {5}}));
  EXPECT_EQ(inv.queued(), 0u);
}

TEST_F(LocalInvalidatesTest, OutsideAHeldPassEachIsPostedAtOnce) {
  inv.set_pass(&pass);
  inv.add(3, true);
  EXPECT_EQ(posted, (Chains{{3}}));
  EXPECT_EQ(pass.deferred(), 0u);
}

TEST_F(LocalInvalidatesTest, AHeldPassGathersTheAnsweredOnesIntoOneChainAtItsEnd) {
  hold_with_answered({3, 1, 4});
  EXPECT_TRUE(posted.empty()) << "nothing posted while the pass is held";
  EXPECT_EQ(inv.queued(), 3u);
  EXPECT_EQ(pass.deferred(), 1u) << "armed once";
  pass.release();
  EXPECT_EQ(posted, (Chains{{3, 1, 4}})) << "one chain, in the order the commands ended";
  EXPECT_EQ(inv.queued(), 0u);
}

TEST_F(LocalInvalidatesTest, AChainPostedDuringThePassTakesThemAndThePassEndPostsNothingMore) {
  hold_with_answered({2, 7});
  std::vector<std::uint32_t> head;  // the head of the chain a sender already running posts
  inv.take(head);
  EXPECT_EQ(head, (std::vector<std::uint32_t>{2, 7}));
  inv.add(8, true);  // a command that ends after that send: queued for the next one
  pass.release();
  EXPECT_EQ(posted, (Chains{{8}}));
}

TEST_F(LocalInvalidatesTest, AnUnansweredCommandIsInvalidatedAtOnceWithWhatIsQueued) {
  // A timed-out or aborted command: its target may still write, so nothing waits for the pass.
  hold_with_answered({1});
  inv.add(6, false);
  EXPECT_EQ(posted, (Chains{{1, 6}})) << "the queued one first, in the same chain";
  EXPECT_EQ(inv.queued(), 0u);
  pass.release();
  EXPECT_EQ(posted.size(), 1u) << "the pass end has nothing left";
}

TEST_F(LocalInvalidatesTest, FlushPostsTheQueuedOnesBeforeASenderWaitsForAWindow) {
  hold_with_answered({4, 5});
  inv.flush();
  EXPECT_EQ(posted, (Chains{{4, 5}}));
  inv.flush();  // nothing queued: nothing posted
  pass.release();
  EXPECT_EQ(posted.size(), 1u);
}

TEST_F(LocalInvalidatesTest, AFailedConnectionDropsWhatIsQueued) {
  hold_with_answered({4});
  inv.drop();
  pass.release();
  EXPECT_TRUE(posted.empty());
}

TEST_F(LocalInvalidatesTest, ReleaseLaterFlushesAfterTheBurstsHandlers) {
  // The receive burst's handlers (posted) end commands; the posted release ends the pass after them.
  inv.set_pass(&pass);
  pass.hold();
  asio::post(io, [&] { inv.add(1, true); });
  asio::post(io, [&] { inv.add(2, true); });
  pass.release_later(io.get_executor());
  io.run();
  EXPECT_EQ(posted, (Chains{{1, 2}}));
}

TEST_F(LocalInvalidatesTest, ADestroyedQueueIsForgottenByThePass) {
  pass.hold();
  {
    LocalInvalidates gone{[this](std::span<const std::uint32_t> slots) { posted.emplace_back(slots.begin(), slots.end()); }};
    gone.set_pass(&pass);
    gone.add(1, true);
  }
  EXPECT_EQ(pass.deferred(), 0u);
  pass.release();
  EXPECT_TRUE(posted.empty());
}

// With the StagTable, as IserConnection drives them: a queued window is not bound again before its
// invalidate was posted and completed; only windows the table says to invalidate are queued.
TEST_F(LocalInvalidatesTest, AQueuedWindowIsNotReusedBeforeItsInvalidateCompleted) {
  StagTable t({0x100, 0x200});
  inv.set_pass(&pass);
  auto a = t.acquire();
  auto b = t.acquire();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(t.bind_completed(a->slot, true), Release::ignored);
  EXPECT_EQ(t.bind_completed(b->slot, true), Release::ignored);
  pass.hold();
  ASSERT_EQ(t.release(a->slot), Release::invalidate);
  inv.add(a->slot, true);
  EXPECT_EQ(t.state(a->slot), StagTable::State::invalidating);
  EXPECT_FALSE(t.acquire()) << "queued: not free";
  pass.release();
  ASSERT_EQ(posted, (Chains{{a->slot}}));
  EXPECT_FALSE(t.acquire()) << "posted, not completed: still not free";
  t.invalidated(a->slot);
  auto c = t.acquire();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->slot, a->slot);
  EXPECT_NE(c->rkey, a->rkey);
}

TEST_F(LocalInvalidatesTest, NeitherAPeerInvalidatedWindowNorAFailedBindIsEverQueued) {
  StagTable t({0x100, 0x200, 0x300});
  inv.set_pass(&pass);
  auto peer = t.acquire();
  auto failed = t.acquire();
  auto late = t.acquire();
  ASSERT_TRUE(peer && failed && late);
  EXPECT_EQ(t.bind_completed(peer->slot, true), Release::ignored);
  pass.hold();
  // Send with Invalidate: the window is free on release, no Local Invalidate (rxe 6.1 panics on
  // one, docs/iser.md).
  ASSERT_TRUE(t.remote_invalidated(peer->rkey));
  EXPECT_EQ(t.release(peer->slot), Release::reusable);
  // A release before the bind completed waits for it; a bind that failed is never invalidated.
  EXPECT_EQ(t.release(failed->slot), Release::deferred);
  EXPECT_EQ(t.bind_completed(failed->slot, false), Release::ignored);
  // A release that waited for a bind that succeeded: invalidated then, not delayed (unanswered).
  EXPECT_EQ(t.release(late->slot), Release::deferred);
  ASSERT_EQ(t.bind_completed(late->slot, true), Release::invalidate);
  inv.add(late->slot, false);
  EXPECT_EQ(posted, (Chains{{late->slot}}));
  pass.release();
  EXPECT_EQ(posted.size(), 1u);
}

}  // namespace
}  // namespace iserkit::datamover::rdma

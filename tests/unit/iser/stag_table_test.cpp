// StagTable (iser/stag_table.hpp): the lifecycle of per-command memory windows — a fresh rkey per
// bind, Local Invalidate on release, Send with Invalidate from the peer, stale rkeys refused — and
// the CM private data rule for Send with Invalidate (RFC 7145 §5.1, Linux include/scsi/iser.h).
#include "iserkit/iser/stag_table.hpp"
#include "iserkit/datamover/iser_datamover.hpp"

#include <gtest/gtest.h>

#include <set>

namespace iserkit::iser {
namespace {

using State = StagTable::State;
using Release = StagTable::Release;

TEST(StagTable, NextStagAdvancesOnlyTheKeyByte) {
  EXPECT_EQ(next_stag(0x00001200u), 0x00001201u);
  EXPECT_EQ(next_stag(0x000012ffu), 0x00001200u);  // wraps inside the low byte, index kept
  EXPECT_EQ(next_stag(0xabcdef7fu), 0xabcdef80u);
}

TEST(StagTable, EveryBindGetsAFreshRkeyAndReleaseNeedsALocalInvalidate) {
  StagTable t({0x100, 0x200});
  auto a = t.acquire();
  ASSERT_TRUE(a);
  ASSERT_EQ(t.bind_completed(a->slot, true), Release::ignored);
  EXPECT_EQ(t.state(a->slot), State::bound);
  EXPECT_EQ(a->rkey, next_stag(a->slot == 0 ? 0x100u : 0x200u));
  EXPECT_EQ(t.release(a->slot), Release::invalidate);
  EXPECT_EQ(t.state(a->slot), State::invalidating);
  // Not reusable before its Local Invalidate completed.
  auto b = t.acquire();
  ASSERT_TRUE(b);
  ASSERT_EQ(t.bind_completed(b->slot, true), Release::ignored);
  EXPECT_NE(b->slot, a->slot);
  EXPECT_FALSE(t.acquire());
  t.invalidated(a->slot);
  EXPECT_EQ(t.state(a->slot), State::free);
  auto c = t.acquire();
  ASSERT_TRUE(c);
  ASSERT_EQ(t.bind_completed(c->slot, true), Release::ignored);
  EXPECT_EQ(c->slot, a->slot);
  EXPECT_NE(c->rkey, a->rkey);  // the old STag names no window any more
  EXPECT_FALSE(t.find(a->rkey));
}

TEST(StagTable, SendWithInvalidateFreesTheWindowWithoutALocalInvalidate) {
  StagTable t({0x300});
  auto a = t.acquire();
  ASSERT_TRUE(a);
  ASSERT_EQ(t.bind_completed(a->slot, true), Release::ignored);
  EXPECT_TRUE(t.remote_invalidated(a->rkey));
  EXPECT_EQ(t.state(a->slot), State::peer_invalidated);
  EXPECT_FALSE(t.acquire());  // still held by its command until released
  EXPECT_EQ(t.release(a->slot), Release::reusable);
  EXPECT_EQ(t.state(a->slot), State::free);
  EXPECT_EQ(t.free_count(), 1u);
}

TEST(StagTable, StaleUnknownOrRepeatedInvalidationsAreRefused) {
  StagTable t({0x400, 0x500});
  auto a = t.acquire();
  ASSERT_TRUE(a);
  ASSERT_EQ(t.bind_completed(a->slot, true), Release::ignored);
  EXPECT_FALSE(t.remote_invalidated(0xdead00u));             // never ours
  EXPECT_FALSE(t.remote_invalidated(a->rkey - 1));           // the window's previous key
  EXPECT_EQ(t.state(a->slot), State::bound);
  EXPECT_TRUE(t.remote_invalidated(a->rkey));
  EXPECT_FALSE(t.remote_invalidated(a->rkey));               // twice
  EXPECT_EQ(t.release(a->slot), Release::reusable);
  EXPECT_FALSE(t.remote_invalidated(a->rkey));               // after the command ended
  // A window being invalidated locally cannot also be invalidated by the peer.
  auto b = t.acquire();
  ASSERT_TRUE(b);
  ASSERT_EQ(t.bind_completed(b->slot, true), Release::ignored);
  EXPECT_EQ(t.release(b->slot), Release::invalidate);
  EXPECT_FALSE(t.remote_invalidated(b->rkey));
  EXPECT_EQ(t.state(b->slot), State::invalidating);
}

TEST(StagTable, DoubleOrBogusReleasesChangeNothing) {
  StagTable t({0x600});
  auto a = t.acquire();
  ASSERT_TRUE(a);
  ASSERT_EQ(t.bind_completed(a->slot, true), Release::ignored);
  EXPECT_EQ(t.release(a->slot), Release::invalidate);
  EXPECT_EQ(t.release(a->slot), Release::ignored);
  EXPECT_EQ(t.release(7), Release::ignored);
  t.invalidated(a->slot);
  t.invalidated(a->slot);  // a second completion does not free it twice
  EXPECT_EQ(t.free_count(), 1u);
  EXPECT_EQ(t.release(a->slot), Release::ignored);  // free windows are not released
  EXPECT_EQ(t.free_count(), 1u);
}

TEST(StagTable, ManyCommandsNeverShareAnRkey) {
  StagTable t({0x1000, 0x2000, 0x3000});
  std::set<std::uint32_t> live;
  for (int round = 0; round < 600; ++round) {
    auto a = t.acquire();
    ASSERT_TRUE(a);
    ASSERT_EQ(t.bind_completed(a->slot, true), Release::ignored);
    EXPECT_TRUE(live.insert(a->rkey).second);
    if (round % 2 == 0) {
      EXPECT_TRUE(t.remote_invalidated(a->rkey));
      EXPECT_EQ(t.release(a->slot), Release::reusable);
    } else {
      ASSERT_EQ(t.release(a->slot), Release::invalidate);
      t.invalidated(a->slot);
    }
    live.erase(a->rkey);
  }
  EXPECT_EQ(t.free_count(), 3u);
}

TEST(StagTable, AReleaseBeforeTheBindCompletedWaitsForIt) {
  // rxe dereferences NULL when it invalidates a window that is not bound: no Local Invalidate
  // may be asked for before the window's Bind MW is seen complete.
  StagTable t({0x700});
  auto a = t.acquire();
  ASSERT_TRUE(a);
  EXPECT_EQ(t.release(a->slot), Release::deferred);
  EXPECT_EQ(t.release(a->slot), Release::ignored);  // a double release
  EXPECT_EQ(t.state(a->slot), State::bound);
  EXPECT_EQ(t.free_count(), 0u);
  EXPECT_EQ(t.bind_completed(a->slot, true), Release::invalidate);
  EXPECT_EQ(t.state(a->slot), State::invalidating);
  EXPECT_EQ(t.bind_completed(a->slot, true), Release::ignored);  // no bind pending any more
  t.invalidated(a->slot);
  EXPECT_EQ(t.free_count(), 1u);
}

TEST(StagTable, AFailedBindIsNeverInvalidatedNorReused) {
  StagTable t({0x800});
  auto a = t.acquire();
  ASSERT_TRUE(a);
  EXPECT_EQ(t.release(a->slot), Release::deferred);
  EXPECT_EQ(t.bind_completed(a->slot, false), Release::ignored);
  EXPECT_NE(t.state(a->slot), State::free);
  EXPECT_EQ(t.free_count(), 0u);
  EXPECT_FALSE(t.acquire());
  EXPECT_EQ(t.release(a->slot), Release::ignored);
  // A failed bind with no release yet: the later release asks for nothing either.
  StagTable u({0x900});
  auto b = u.acquire();
  ASSERT_TRUE(b);
  EXPECT_EQ(u.bind_completed(b->slot, false), Release::ignored);
  EXPECT_EQ(u.release(b->slot), Release::ignored);
  EXPECT_EQ(u.free_count(), 0u);
}

TEST(StagTable, APeerInvalidationSeenBeforeTheBindCompletionFreesItAfterIt) {
  StagTable t({0xa00});
  auto a = t.acquire();
  ASSERT_TRUE(a);
  EXPECT_TRUE(t.remote_invalidated(a->rkey));
  EXPECT_EQ(t.release(a->slot), Release::deferred);
  EXPECT_EQ(t.free_count(), 0u);  // the slot's bind completion must be seen before its reuse
  EXPECT_EQ(t.bind_completed(a->slot, true), Release::reusable);
  EXPECT_EQ(t.state(a->slot), State::free);
  EXPECT_EQ(t.free_count(), 1u);
}

TEST(SendWithInvalidate, BothSidesMustAgreeInThePrivateData) {
  const CmRequest wants{.zbva_not_supported = true, .send_with_invalidate_not_supported = false};
  const CmRequest refuses{};
  const CmReply uses{.zbva_not_used = true, .send_with_invalidate_not_used = false};
  const CmReply does_not{};
  EXPECT_TRUE(send_with_invalidate_agreed(wants, uses));
  EXPECT_FALSE(send_with_invalidate_agreed(wants, does_not));
  EXPECT_FALSE(send_with_invalidate_agreed(refuses, uses));
  EXPECT_FALSE(send_with_invalidate_agreed(wants, std::nullopt));  // tgtd sends no REP data
  EXPECT_FALSE(send_with_invalidate_agreed(std::nullopt, uses));
  // Through the codecs, as the wire carries them.
  EXPECT_TRUE(send_with_invalidate_agreed(decode_cm_request(encode_cm_request(wants)),
                                          decode_cm_reply(encode_cm_reply(uses))));
  EXPECT_FALSE(send_with_invalidate_agreed(decode_cm_request(encode_cm_request(refuses)),
                                           decode_cm_reply(encode_cm_reply(uses))));
}

TEST(IserStagsSpelling, ParsesTheThreeModesAndNothingElse) {
  using datamover::IserStags;
  using datamover::parse_iser_stags;
  EXPECT_EQ(parse_iser_stags("per-command"), IserStags::per_command);
  EXPECT_EQ(parse_iser_stags("automatic"), IserStags::automatic);
  EXPECT_EQ(parse_iser_stags("auto"), IserStags::automatic);
  EXPECT_EQ(parse_iser_stags("whole-slab"), IserStags::whole_slab);
  EXPECT_EQ(parse_iser_stags(""), std::nullopt);
  EXPECT_EQ(parse_iser_stags("per_command"), std::nullopt);
  EXPECT_EQ(parse_iser_stags("Per-Command"), std::nullopt);
}

TEST(IserStagsDefaults, SendWithInvalidateIsNeverOfferedUnlessAsked) {
  // Debian 12's rxe panics when a window the peer invalidated is invalidated again: neither side
  // turns Send with Invalidate on by itself.
  EXPECT_FALSE(datamover::IserOptions{}.send_with_invalidate);
}

TEST(IserStagsDefaults, EachCommandIsExposedAloneByDefault) {
  // A window per command where the device has them (issue 13 item 2), as the Linux initiator.
  EXPECT_EQ(datamover::IserOptions{}.stags, datamover::IserStags::automatic);
}

}  // namespace
}  // namespace iserkit::iser

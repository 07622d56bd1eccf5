// Unit tests of the FUSE view's --splice-writes policy (fuse_fs/write_payload.hpp): the option's
// values, and which mounts splice requests (iSER portals by default, never all-TCP ones).
#include "fuse_fs/write_payload.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "iserkit/initiator/session.hpp"

namespace iserkit::fuse_fs {
namespace {

initiator::Url url(std::string_view text) {
  auto u = initiator::parse_url(text);
  EXPECT_TRUE(u) << text;
  return u ? *u : initiator::Url{};
}

TEST(SpliceWrites, ParsesTheThreeModesAndNothingElse) {
  EXPECT_EQ(parse_splice_writes("always"), SpliceWrites::always);
  EXPECT_EQ(parse_splice_writes("never"), SpliceWrites::never);
  EXPECT_EQ(parse_splice_writes("auto"), SpliceWrites::automatic);
  for (std::string_view bad : {"", "Always", "yes", "on", "1", "auto ", "automatic"})
    EXPECT_FALSE(parse_splice_writes(bad)) << '"' << bad << '"';
  for (auto mode : {SpliceWrites::never, SpliceWrites::always, SpliceWrites::automatic})
    EXPECT_EQ(parse_splice_writes(to_string(mode)), mode);
}

TEST(SpliceWrites, AutoSplicesOnlyWhenAPortalMayUseIser) {
  const auto tcp = url("iscsi://127.0.0.1:3260");
  const auto tcp2 = url("iscsi://[::1]:3261/iqn.2026-11.org.example:t");
  const auto iser = url("iser://192.0.2.7");
  constexpr auto from_url = initiator::TransportPolicy::from_url;
  EXPECT_FALSE(splice_wanted(SpliceWrites::automatic, {tcp}, from_url));
  EXPECT_FALSE(splice_wanted(SpliceWrites::automatic, {tcp, tcp2}, from_url));
  EXPECT_TRUE(splice_wanted(SpliceWrites::automatic, {iser}, from_url));
  EXPECT_TRUE(splice_wanted(SpliceWrites::automatic, {tcp, iser}, from_url));  // one mount, one decision
  // A policy that forces the wire overrides the scheme.
  EXPECT_FALSE(splice_wanted(SpliceWrites::automatic, {iser}, initiator::TransportPolicy::tcp));
  EXPECT_TRUE(splice_wanted(SpliceWrites::automatic, {tcp}, initiator::TransportPolicy::iser));
  // "automatic" tries iSER first only where this build has it: the decision follows select_transports().
  const auto wires = initiator::select_transports(tcp, initiator::TransportPolicy::automatic);
  const bool may_use_iser = std::find(wires.begin(), wires.end(), datamover::Transport::iser) != wires.end();
  EXPECT_EQ(splice_wanted(SpliceWrites::automatic, {tcp}, initiator::TransportPolicy::automatic), may_use_iser);
}

TEST(SpliceWrites, AlwaysAndNeverIgnoreTheTransport) {
  const std::vector<initiator::Url> tcp{url("iscsi://127.0.0.1")};
  const std::vector<initiator::Url> iser{url("iser://127.0.0.1")};
  for (const auto* portals : {&tcp, &iser}) {
    EXPECT_TRUE(splice_wanted(SpliceWrites::always, *portals, initiator::TransportPolicy::from_url));
    EXPECT_FALSE(splice_wanted(SpliceWrites::never, *portals, initiator::TransportPolicy::from_url));
  }
  EXPECT_FALSE(splice_wanted(SpliceWrites::automatic, {}, initiator::TransportPolicy::from_url));
}

}  // namespace
}  // namespace iserkit::fuse_fs

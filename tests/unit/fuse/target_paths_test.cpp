// Unit tests of the FUSE view's grouping of portals by target (fuse_fs/target_paths.hpp): each IQN
// once; without --multipath the first URL that listed it, with it every URL and TargetAddress.
#include "fuse_fs/target_paths.hpp"

#include <gtest/gtest.h>

namespace iserkit::fuse_fs {
namespace {

using initiator::DiscoveredTarget;
using initiator::Portal;
using Listings = std::vector<std::optional<std::vector<DiscoveredTarget>>>;

initiator::Url url(std::string_view text) {
  auto u = initiator::parse_url(text);
  EXPECT_TRUE(u) << text;
  return u ? *u : initiator::Url{};
}

std::vector<std::string> texts(const std::vector<initiator::Url>& urls) {
  std::vector<std::string> out;
  for (const auto& u : urls) out.push_back(initiator::format_url(u));
  return out;
}

constexpr const char* a = "iqn.2026-11.org.example:a";
constexpr const char* b = "iqn.2026-11.org.example:b";

TEST(TargetPaths, WithoutMultipathEachTargetKeepsTheFirstUrlThatListedIt) {
  const std::vector portals{url("iscsi://10.0.0.1"), url("iscsi://10.0.0.2:3261")};
  const Listings listings{
      std::vector<DiscoveredTarget>{{a, {{"10.0.0.1", 3260, 1}, {"10.0.0.2", 3261, 2}}}, {b, {{"10.0.0.1", 3260, 1}}}},
      std::vector<DiscoveredTarget>{{a, {{"10.0.0.2", 3261, 2}}}}};
  const auto got = group_target_paths(portals, listings, false);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].iqn, a);
  // The discovery portal itself, TargetAddress not followed (the old behaviour).
  EXPECT_EQ(texts(got[0].paths), std::vector<std::string>{std::string("iscsi://10.0.0.1/") + a});
  EXPECT_EQ(got[1].iqn, b);
  EXPECT_EQ(texts(got[1].paths), std::vector<std::string>{std::string("iscsi://10.0.0.1/") + b});
}

TEST(TargetPaths, WithMultipathEveryTargetAddressIsAPathOnce) {
  const std::vector portals{url("iscsi://10.0.0.1"), url("iscsi://10.0.0.2:3261")};
  const Listings listings{
      std::vector<DiscoveredTarget>{{a, {{"10.0.0.1", 3260, 1}, {"10.0.0.2", 3261, 2}}}, {b, {{"10.0.0.1", 3260, 1}}}},
      std::vector<DiscoveredTarget>{{a, {{"10.0.0.2", 3261, 2}, {"10.0.0.1", 3260, 1}}}, {b, {{"fd00::5", 3260, 3}}}}};
  const auto got = group_target_paths(portals, listings, true);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(texts(got[0].paths), (std::vector<std::string>{std::string("iscsi://10.0.0.1/") + a,
                                                          std::string("iscsi://10.0.0.2:3261/") + a}));
  EXPECT_EQ(texts(got[1].paths), (std::vector<std::string>{std::string("iscsi://10.0.0.1/") + b,
                                                          std::string("iscsi://[fd00::5]/") + b}));
}

TEST(TargetPaths, UrlsNamingTheSameTargetAreItsPathsAndIqnsCompareWithoutCase) {
  const std::vector portals{url(std::string("iscsi://127.0.0.1:4001/") + a),
                            url("iscsi://127.0.0.1:4002/IQN.2026-11.ORG.EXAMPLE:A"),
                            url(std::string("iscsi://127.0.0.1:4001/") + a), url(std::string("iscsi://127.0.0.1:4003/") + b)};
  const auto one = group_target_paths(portals, {}, false);
  ASSERT_EQ(one.size(), 2u);
  EXPECT_EQ(texts(one[0].paths), std::vector<std::string>{std::string("iscsi://127.0.0.1:4001/") + a});
  const auto many = group_target_paths(portals, {}, true);
  ASSERT_EQ(many.size(), 2u);
  EXPECT_EQ(many[0].iqn, a);
  // The second URL's spelling of the name is replaced by the first one's; the repeated URL is one path.
  EXPECT_EQ(texts(many[0].paths), (std::vector<std::string>{std::string("iscsi://127.0.0.1:4001/") + a,
                                                           std::string("iscsi://127.0.0.1:4002/") + a}));
  EXPECT_EQ(texts(many[1].paths), std::vector<std::string>{std::string("iscsi://127.0.0.1:4003/") + b});
}

TEST(TargetPaths, ATargetAddressKeepsTheDiscoveryUrlsSchemeAndUser) {
  const std::vector portals{url("iser://alice%secret@192.0.2.1")};
  const Listings listings{std::vector<DiscoveredTarget>{{a, {{"192.0.2.1", 3260, 1}, {"192.0.2.2", 3260, 2}}}}};
  const auto got = group_target_paths(portals, listings, true);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].paths.size(), 2u);
  for (const auto& p : got[0].paths) {
    EXPECT_EQ(p.transport, datamover::Transport::iser);
    EXPECT_EQ(p.user, "alice");
    EXPECT_EQ(p.password, "secret");
    EXPECT_EQ(p.target, a);
    EXPECT_FALSE(p.lun);
  }
  EXPECT_EQ(got[0].paths[1].host, "192.0.2.2");
  // Same host and port over another transport is another path; host names compare without case.
  const std::vector mixed{url(std::string("iscsi://Host1/") + a), url(std::string("iscsi://host1/") + a),
                          url(std::string("iser://host1/") + a)};
  EXPECT_EQ(group_target_paths(mixed, {}, true)[0].paths.size(), 2u);
}

TEST(TargetPaths, UnlistedPortalsContributeNothingAndATargetWithoutAddressUsesItsPortal) {
  const std::vector portals{url("iscsi://10.0.0.1"), url("iscsi://10.0.0.2"), url("iscsi://10.0.0.3")};
  const Listings listings{std::nullopt, std::vector<DiscoveredTarget>{{a, {}}}};  // third: shorter = unlisted
  const auto got = group_target_paths(portals, listings, true);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(texts(got[0].paths), std::vector<std::string>{std::string("iscsi://10.0.0.2/") + a});
  EXPECT_TRUE(group_target_paths(portals, {}, true).empty());
}

}  // namespace
}  // namespace iserkit::fuse_fs

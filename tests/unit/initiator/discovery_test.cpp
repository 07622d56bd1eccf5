// SendTargets response parsing (RFC 7143 Appendix C, §13.9 TargetAddress).
#include "iserkit/initiator/discovery.hpp"

#include <gtest/gtest.h>

using namespace iserkit;
using namespace iserkit::initiator;

TEST(Discovery, TargetsWithPortalsAndDefaults) {
  iscsi::TextPairs pairs{{"TargetName", "iqn.a:one"},
                         {"TargetAddress", "10.0.0.1:3260,1"},
                         {"TargetAddress", "[fe80::2]:3261,2"},
                         {"TargetName", "iqn.a:two"}};
  auto t = parse_send_targets(pairs, Portal{.host = "h", .port = 3262, .portal_group_tag = 1});
  ASSERT_TRUE(t);
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[0].name, "iqn.a:one");
  ASSERT_EQ((*t)[0].portals.size(), 2u);
  EXPECT_EQ((*t)[0].portals[1], (Portal{.host = "fe80::2", .port = 3261, .portal_group_tag = 2}));
  EXPECT_EQ((*t)[1].portals[0], (Portal{.host = "h", .port = 3262, .portal_group_tag = 1}));
}

TEST(Discovery, AddressForms) {
  EXPECT_EQ(parse_target_address("host")->port, 3260);
  EXPECT_EQ(parse_target_address("host,7")->portal_group_tag, 7);
  EXPECT_EQ(parse_target_address("[::1],3")->host, "::1");
  EXPECT_FALSE(parse_target_address("host:0,1"));
  EXPECT_FALSE(parse_target_address("[::1:3260,1"));
  EXPECT_FALSE(parse_target_address(":3260,1"));
}

TEST(Discovery, AddressBeforeNameIsProtocolError) {
  EXPECT_FALSE(parse_send_targets({{"TargetAddress", "h:1,1"}}, Portal{}));
}

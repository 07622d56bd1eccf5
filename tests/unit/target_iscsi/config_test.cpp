// Flag parsers and SendTargets (RFC 7143 Appendix C, §13.8).
#include "iserkit/target/config.hpp"
#include "target_node.hpp"

#include <gtest/gtest.h>

namespace iserkit::target {
namespace {

TEST(Config, ParsesListenAddresses) {
  auto a = parse_listen_address("127.0.0.1:3261");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 3261);
  auto b = parse_listen_address("[::1]:0");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->host, "::1");
  EXPECT_EQ(b->port, 0);
  auto c = parse_listen_address("0.0.0.0");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->port, 3260);
  EXPECT_FALSE(parse_listen_address("::1:3260"));
  EXPECT_FALSE(parse_listen_address("[::1:3260"));
  EXPECT_FALSE(parse_listen_address("host:99999"));
  EXPECT_FALSE(parse_listen_address(":3260"));
}

TEST(Config, ParsesLunSources) {
  auto m = parse_lun_source("mem:1G");
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->memory);
  EXPECT_EQ(m->size_bytes, 1ull << 30);
  auto f = parse_lun_source("/tmp/disk.img");
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->memory);
  EXPECT_EQ(f->path, "/tmp/disk.img");
  EXPECT_FALSE(parse_lun_source("mem:x"));
}

TEST(Config, ParsesRbdLunSources) {
  auto r = parse_lun_source("rbd:pool1/vol-a");
  ASSERT_TRUE(r);
  ASSERT_TRUE(r->rbd);
  EXPECT_FALSE(r->memory);
  EXPECT_EQ(r->rbd->pool, "pool1");
  EXPECT_EQ(r->rbd->image, "vol-a");
  EXPECT_EQ(r->display(), "rbd:pool1/vol-a");
  // No pool, no image, a snapshot or namespace part, control characters: refused.
  for (const char* bad : {"rbd:", "rbd:vol", "rbd:/vol", "rbd:pool/", "rbd:pool/ns/vol", "rbd:pool/vol@snap",
                          "rbd:pool/v\nol"}) {
    EXPECT_FALSE(parse_lun_source(bad)) << bad;
  }
}

TEST(Config, ListenAddressCarriesItsPortalGroupTag) {
  auto a = parse_listen_address("127.0.0.2:3260,tpgt=2");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "127.0.0.2");
  EXPECT_EQ(a->port, 3260);
  EXPECT_EQ(a->portal_group, 2);
  auto b = parse_listen_address("[::1]:0,tpgt=65535");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->host, "::1");
  EXPECT_EQ(b->portal_group, 65535);
  EXPECT_EQ(parse_listen_address("127.0.0.1:3260")->portal_group, 1);
  for (const char* bad : {"127.0.0.1:3260,tpgt=0", "127.0.0.1:3260,tpgt=65536", "127.0.0.1:3260,tpgt=", "127.0.0.1:3260,2",
                          "127.0.0.1:3260,tpgt=x"})
    EXPECT_FALSE(parse_listen_address(bad)) << bad;
}

TEST(SendTargets, EachAddressCarriesItsOwnPortalGroupTag) {
  TargetRegistry r;
  auto node = std::make_shared<TargetNode>();
  node->name = "iqn.2026-11.org.a:one";
  node->dispatcher = std::make_shared<ScsiDispatcher>();
  ASSERT_TRUE(r.add(node));
  r.set_portal_addresses({"127.0.0.1:3260", "127.0.0.2:3260"}, {1, 2});
  const iscsi::TextPairs expected{{"TargetName", "iqn.2026-11.org.a:one"},
                                  {"TargetAddress", "127.0.0.2:3260,2"},
                                  {"TargetAddress", "127.0.0.1:3260,1"}};
  EXPECT_EQ(send_targets(r, "All", true, nullptr, "iqn.2026-11.org.test:any", "127.0.0.2:3260", 2), expected);
}

TEST(SendTargets, DiscoveryAllListsEveryTargetWithAddresses) {
  TargetRegistry r;
  for (const char* n : {"iqn.2026-11.org.a:one", "iqn.2026-11.org.a:two"}) {
    auto node = std::make_shared<TargetNode>();
    node->name = n;
    node->dispatcher = std::make_shared<ScsiDispatcher>();
    ASSERT_TRUE(r.add(node));
  }
  r.set_portal_addresses({"[::1]:3260"});
  auto pairs = send_targets(r, "All", true, nullptr, "iqn.2026-11.org.test:any", "127.0.0.1:3260");
  const iscsi::TextPairs expected{{"TargetName", "iqn.2026-11.org.a:one"}, {"TargetAddress", "127.0.0.1:3260,1"},
                                  {"TargetAddress", "[::1]:3260,1"},      {"TargetName", "iqn.2026-11.org.a:two"},
                                  {"TargetAddress", "127.0.0.1:3260,1"},  {"TargetAddress", "[::1]:3260,1"}};
  EXPECT_EQ(pairs, expected);
  // A normal session only ever sees its own target.
  auto own = send_targets(r, "All", false, r.find("IQN.2026-11.ORG.A:TWO").get(), "iqn.2026-11.org.test:any",
                          "127.0.0.1:3260");
  ASSERT_EQ(own.size(), 3u);
  EXPECT_EQ(own[0].value, "iqn.2026-11.org.a:two");
  EXPECT_TRUE(send_targets(r, "iqn.2026-11.org.a:three", true, nullptr, "iqn.2026-11.org.test:any", "127.0.0.1:3260").empty());
}

TEST(TargetRegistry, RemoveDropsANodeFromLookupsButNotFromEarlierSnapshotsOrSessions) {
  TargetRegistry r;
  for (const char* n : {"iqn.2026-11.org.a:one", "iqn.2026-11.org.a:two"}) {
    auto node = std::make_shared<TargetNode>();
    node->name = n;
    node->dispatcher = std::make_shared<ScsiDispatcher>();
    ASSERT_TRUE(r.add(node));
  }
  const auto before = r.nodes();
  std::shared_ptr<TargetNode> held = r.find("iqn.2026-11.org.a:one");  // a session logged in to it
  auto removed = r.remove("IQN.2026-11.ORG.A:ONE");
  ASSERT_TRUE(removed);
  EXPECT_EQ(removed, held);
  EXPECT_EQ(r.find("iqn.2026-11.org.a:one"), nullptr);
  EXPECT_EQ(r.nodes()->size(), 1u);
  EXPECT_EQ(before->size(), 2u);  // the earlier snapshot is unchanged
  EXPECT_EQ(held->name, "iqn.2026-11.org.a:one");
  EXPECT_EQ(r.remove("iqn.2026-11.org.a:one"), nullptr);
  auto pairs = send_targets(r, "All", true, nullptr, "iqn.2026-11.org.test:any", "127.0.0.1:3260");
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0].value, "iqn.2026-11.org.a:two");
  // The name is free again.
  auto again = std::make_shared<TargetNode>();
  again->name = "iqn.2026-11.org.a:one";
  again->dispatcher = std::make_shared<ScsiDispatcher>();
  EXPECT_TRUE(r.add(again));
  EXPECT_FALSE(r.add(again));  // but not twice
}

TEST(SendTargets, ListsOnlyTargetsWhoseAclAdmitsTheInitiator) {
  TargetRegistry r;
  auto add = [&](const char* name, std::vector<std::string> acl) {
    auto node = std::make_shared<TargetNode>();
    node->name = name;
    node->dispatcher = std::make_shared<ScsiDispatcher>();
    node->allowed_initiators = std::move(acl);
    ASSERT_TRUE(r.add(node));
  };
  add("iqn.2026-11.org.a:open", {});
  add("iqn.2026-11.org.a:alice-only", {"iqn.2026-11.org.test:alice"});
  add("iqn.2026-11.org.a:bob-only", {"iqn.2026-11.org.test:bob"});
  auto names = [](const iscsi::TextPairs& pairs) {
    std::vector<std::string> out;
    for (const auto& p : pairs)
      if (p.key == "TargetName") out.push_back(p.value);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names(send_targets(r, "All", true, nullptr, "iqn.2026-11.org.test:alice", "127.0.0.1:3260")),
            (V{"iqn.2026-11.org.a:open", "iqn.2026-11.org.a:alice-only"}));
  // ACL names compare case-insensitively (RFC 3722 case folding).
  EXPECT_EQ(names(send_targets(r, "All", true, nullptr, "IQN.2026-11.ORG.TEST:BOB", "127.0.0.1:3260")),
            (V{"iqn.2026-11.org.a:open", "iqn.2026-11.org.a:bob-only"}));
  EXPECT_EQ(names(send_targets(r, "All", true, nullptr, "iqn.2026-11.org.test:mallory", "127.0.0.1:3260")),
            (V{"iqn.2026-11.org.a:open"}));
  // Asking by name does not disclose a refused target either.
  EXPECT_TRUE(send_targets(r, "iqn.2026-11.org.a:bob-only", true, nullptr, "iqn.2026-11.org.test:alice",
                           "127.0.0.1:3260").empty());
  EXPECT_EQ(names(send_targets(r, "iqn.2026-11.org.a:bob-only", true, nullptr, "iqn.2026-11.org.test:bob",
                               "127.0.0.1:3260")),
            (V{"iqn.2026-11.org.a:bob-only"}));
}

}  // namespace
}  // namespace iserkit::target

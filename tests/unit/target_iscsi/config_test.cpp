// Flag parsers and SendTargets (RFC 7143 Appendix C, §13.8).
#include "iserkit/target/config.hpp"
#include "target_node.hpp"
#include "target_node_helpers.hpp"

#include <gtest/gtest.h>

namespace iserkit::target {
namespace {

TEST(Config, ParsesListenAddresses) {
  struct Case {
    const char* text;
    const char* host;
    std::uint16_t port;
  };
  for (const Case& c : {Case{"127.0.0.1:3261", "127.0.0.1", 3261}, Case{"[::1]:0", "::1", 0},
                        Case{"0.0.0.0", "0.0.0.0", 3260}}) {
    auto a = parse_listen_address(c.text);
    ASSERT_TRUE(a) << c.text;
    EXPECT_EQ(a->host, c.host) << c.text;
    EXPECT_EQ(a->port, c.port) << c.text;
  }
  for (const char* bad : {"::1:3260", "[::1:3260", "host:99999", ":3260"}) EXPECT_FALSE(parse_listen_address(bad)) << bad;
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

// The LU identity options of --lun (docs/lu-identity.md): ",uuid=", ",serial=", ",naa=" after
// any source, each at most once; a comma that starts no such option stays in the path.
TEST(Config, LunSourceCarriesItsIdentityOptions) {
  auto f = parse_lun_source("/srv/disk.img,uuid=9BF074CC-CB20-4476-AFE9-95D0AB4E2176,serial=SN 7,naa=naa.6001405abcdef0123456789abcdef012");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->path, "/srv/disk.img");
  ASSERT_TRUE(f->identity.uuid);
  EXPECT_EQ(to_string(*f->identity.uuid), "9bf074cc-cb20-4476-afe9-95d0ab4e2176");
  EXPECT_EQ(f->identity.serial, "SN 7");
  ASSERT_EQ(f->identity.naa.size(), 16u);
  EXPECT_EQ(f->display(),
            "/srv/disk.img,uuid=9bf074cc-cb20-4476-afe9-95d0ab4e2176,serial=SN 7,naa=6001405abcdef0123456789abcdef012");
  // display() reads back the same.
  auto again = parse_lun_source(f->display());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->identity, f->identity);
  EXPECT_EQ(again->path, f->path);

  auto m = parse_lun_source("mem:16M,uuid=79c94a783e6445d48f8a256534ce3612");
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->memory);
  EXPECT_EQ(m->size_bytes, 16u << 20);
  ASSERT_TRUE(m->identity.uuid);
  auto r = parse_lun_source("rbd:pool/vol,naa=3000000000000001");
  ASSERT_TRUE(r);
  ASSERT_TRUE(r->rbd);
  EXPECT_EQ(r->rbd->image, "vol");
  EXPECT_EQ(r->identity.naa.size(), 8u);

  auto comma = parse_lun_source("/srv/a,b.img");  // not an option: part of the path
  ASSERT_TRUE(comma);
  EXPECT_EQ(comma->path, "/srv/a,b.img");
  EXPECT_TRUE(comma->identity.empty());

  for (const char* bad : {"disk.img,uuid=", "disk.img,uuid=not-a-uuid", "disk.img,uuid=00000000-0000-0000-0000-000000000000",
                          "disk.img,uuid=9bf074cc-cb20-4476-afe9-95d0ab4e217", "disk.img,serial=", "disk.img,serial=tab\there",
                          "disk.img,naa=3000", "disk.img,naa=6000000000000001",   // NAA 6 is 16 bytes
                          "disk.img,naa=30000000000000000000000000000001",       // NAA 3 is 8 bytes
                          "disk.img,naa=4000000000000001", "disk.img,naa=zz00000000000001",
                          "disk.img,serial=a,serial=b", ",uuid=9bf074cc-cb20-4476-afe9-95d0ab4e2176"}) {
    EXPECT_FALSE(parse_lun_source(bad)) << bad;
  }
  EXPECT_FALSE(parse_lun_source("disk.img,serial=" + std::string(max_unit_serial_bytes + 1, 'x')));
  EXPECT_TRUE(parse_lun_source("disk.img,serial=" + std::string(max_unit_serial_bytes, 'x')));
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
  auto node = test::make_node("iqn.2026-11.org.a:one");
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
    auto node = test::make_node(n);
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
    auto node = test::make_node(n);
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
  auto again = test::make_node("iqn.2026-11.org.a:one");
  EXPECT_TRUE(r.add(again));
  EXPECT_FALSE(r.add(again));  // but not twice
}

TEST(SendTargets, ListsOnlyTargetsWhoseAclAdmitsTheInitiator) {
  TargetRegistry r;
  auto add = [&](const char* name, std::vector<std::string> acl) {
    auto node = test::make_node(name);
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

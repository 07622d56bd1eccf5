// URL parsing: libiscsi's iscsi://[user[%password]@]host[:port]/target-iqn/lun form.
#include "iserkit/initiator/url.hpp"

#include <gtest/gtest.h>

#include "iserkit/common/errors.hpp"

using namespace iserkit;
using namespace iserkit::initiator;

TEST(Url, FullFormWithDefaults) {
  auto u = parse_url("iscsi://10.0.0.5/iqn.2026-11.org.example:vol1/3");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->transport, datamover::Transport::tcp);
  EXPECT_EQ(u->host, "10.0.0.5");
  EXPECT_EQ(u->port, 3260);
  EXPECT_EQ(u->target, "iqn.2026-11.org.example:vol1");
  ASSERT_TRUE(u->lun);
  EXPECT_EQ(*u->lun, 3);
  EXPECT_TRUE(u->user.empty());
}

TEST(Url, UserPasswordPortAndIpv6) {
  auto u = parse_url("iser://alice%s3cr%et@[fe80::1]:3261/iqn.x:y/0");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->transport, datamover::Transport::iser);
  EXPECT_EQ(u->user, "alice");
  EXPECT_EQ(u->password, "s3cr%et");
  EXPECT_EQ(u->host, "fe80::1");
  EXPECT_EQ(u->port, 3261);
  EXPECT_EQ(*u->lun, 0);
  EXPECT_EQ(format_url(*u), "iser://alice%***@[fe80::1]:3261/iqn.x:y/0");
  EXPECT_EQ(format_url(*u, true), "iser://alice%s3cr%et@[fe80::1]:3261/iqn.x:y/0");
}

TEST(Url, DiscoveryForms) {
  for (const char* s : {"iscsi://host", "iscsi://host/", "iscsi://host:3262", "iscsi://[::1]", "iscsi://[::1]:99/"}) {
    auto u = parse_url(s);
    ASSERT_TRUE(u) << s;
    EXPECT_TRUE(u->target.empty()) << s;
    EXPECT_FALSE(u->lun) << s;
  }
  EXPECT_EQ(parse_url("iscsi://[::1]:99/")->port, 99);
  EXPECT_EQ(parse_url("iscsi://[::1]")->host, "::1");
}

TEST(Url, TargetWithoutLun) {
  auto u = parse_url("iscsi://h/iqn.a:b");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->target, "iqn.a:b");
  EXPECT_FALSE(u->lun);
  EXPECT_EQ(*parse_url("iscsi://h/iqn.a:b/7/")->lun, 7);
}

TEST(Url, BadUrlsAreInvalidArgument) {
  for (const char* s : {"http://h/t/0", "iscsi://", "iscsi://:3260/t/0", "iscsi://h:0/t/0", "iscsi://h:65536/t/0",
                        "iscsi://h:x/t/0", "iscsi://[::1/t/0", "iscsi://[::1]x/t/0", "iscsi://h//0",
                        "iscsi://h/t/lun", "iscsi://h/t/16384", "iscsi://h/t/0/extra", "iscsi://@h/t/0",
                        "iscsi://h:/t/0", "iscsi:/h/t/0"}) {
    auto u = parse_url(s);
    EXPECT_FALSE(u) << s;
    if (!u) {
      EXPECT_EQ(u.error(), make_error_code(errc::invalid_argument)) << s;
    }
  }
}

// Found by fuzz_url: "iscsi://u%p@[[)\0 1]/" gave the host "[)\0 1", which format_url() could not
// write back and which no resolver takes. Hosts with brackets, blanks or control bytes are refused.
TEST(Url, HostsWithBracketsOrControlCharactersAreRefused) {
  using namespace std::string_view_literals;
  for (auto text : {"iscsi://u%p@[[)\0 1]/"sv, "iscsi://[a]b]/"sv, "iscsi://ho st/"sv, "iscsi://h\tx:3260"sv,
                    "iscsi://[::1\x01]/iqn.x:y/0"sv, "iscsi://[x/y]/"sv}) {
    auto u = parse_url(text);
    EXPECT_FALSE(u) << "accepted host: " << (u ? u->host : "");
    if (!u) {
      EXPECT_EQ(u.error(), make_error_code(errc::invalid_argument));
    }
  }
  // Ordinary names, IPv4, IPv6 and IPv6 with a zone still parse, and format back to the same URL.
  for (auto text : {"iscsi://storage-1.example.org/iqn.x:y/1", "iscsi://10.1.2.3:3261", "iscsi://[fe80::1%eth0]/"}) {
    auto u = parse_url(text);
    ASSERT_TRUE(u) << text;
    EXPECT_EQ(parse_url(format_url(*u, true)), u);
  }
}

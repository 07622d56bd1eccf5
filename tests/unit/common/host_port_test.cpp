// parse_host_port(): the forms every program takes, and what it refuses.
#include <gtest/gtest.h>

#include "iserkit/common/host_port.hpp"

using iserkit::parse_host_port;

TEST(HostPort, SplitsTheUsualForms) {
  auto a = parse_host_port("192.0.2.1:3260");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "192.0.2.1");
  EXPECT_EQ(a->port, 3260);
  auto b = parse_host_port("[2001:db8::1]:10809");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->host, "2001:db8::1");
  EXPECT_EQ(b->port, 10809);
  auto c = parse_host_port("storage.example");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->host, "storage.example");
  EXPECT_FALSE(c->port);
  auto d = parse_host_port(":0");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->host, "");
  EXPECT_EQ(d->port, 0);
  auto e = parse_host_port("[::1]");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->host, "::1");
  EXPECT_FALSE(e->port);
  EXPECT_EQ(parse_host_port("h:65535")->port, 65535);
}

TEST(HostPort, RefusesWhatIsAmbiguousOrOutOfRange) {
  for (const char* bad : {"::1", "2001:db8::1:3260", "[::1", "[::1]x", "[::1]:", "host:", "host:65536", "host:-1",
                          "host:12a", "host:000003260"}) {
    EXPECT_FALSE(parse_host_port(bad)) << bad;
  }
}

TEST(HostPort, FormatsIPv6InBrackets) {
  EXPECT_EQ(iserkit::format_host_port("::1", 3260), "[::1]:3260");
  EXPECT_EQ(iserkit::format_host_port("127.0.0.1", 0), "127.0.0.1:0");
  EXPECT_EQ(iserkit::format_host_port("*", 10809), "*:10809");
}

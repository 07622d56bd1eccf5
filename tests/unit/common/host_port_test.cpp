// parse_host_port(): the forms every program takes, and what it refuses.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>

#include "iserkit/common/host_port.hpp"

using iserkit::parse_host_port;

TEST(HostPort, SplitsTheUsualForms) {
  struct Case {
    const char* text;
    const char* host;
    std::optional<std::uint16_t> port;
  };
  for (const Case& c : {Case{"192.0.2.1:3260", "192.0.2.1", 3260}, Case{"[2001:db8::1]:10809", "2001:db8::1", 10809},
                        Case{"storage.example", "storage.example", std::nullopt}, Case{":0", "", 0},
                        Case{"[::1]", "::1", std::nullopt}, Case{"h:65535", "h", 65535}}) {
    auto r = parse_host_port(c.text);
    ASSERT_TRUE(r) << c.text;
    EXPECT_EQ(r->host, c.host) << c.text;
    EXPECT_EQ(r->port, c.port) << c.text;
  }
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

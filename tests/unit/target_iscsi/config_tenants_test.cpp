// [[tenants]] and the `tenant` key of [[targets]] in the target's TOML configuration
// (target/README.md "Tenants").
#include <gtest/gtest.h>

#include "iserkit/target/config.hpp"

namespace iserkit::target {
namespace {

constexpr const char* two_tenants = R"(
[[tenants]]
name = "blue"
netns = "tnt-blue"
listen = ["192.168.100.1:3260", "[fd00::1]:3261,tpgt=2"]
limits = { max_sessions = 4, payload_budget = "32M", max_connections = 40, max_logging_in = 8 }

[[tenants]]
name = "red"
listen = ["127.0.0.1:0"]

[[targets]]
iqn = "iqn.2026-11.org.example:blue-vol"
tenant = "blue"
luns = ["mem:1M"]

[[targets]]
iqn = "iqn.2026-11.org.example:shared"
luns = ["mem:1M"]
)";

TEST(ConfigTenants, ParsesTenantsAndTheTargetsThatNameThem) {
  auto c = parse_config_toml(two_tenants, "tenants.toml");
  ASSERT_TRUE(c) << c.error().message;
  ASSERT_EQ(c->tenants.size(), 2u);
  const auto& blue = c->tenants[0];
  EXPECT_EQ(blue.name, "blue");
  EXPECT_EQ(blue.netns, "tnt-blue");
  ASSERT_EQ(blue.listen.size(), 2u);
  EXPECT_EQ(blue.listen[0].host, "192.168.100.1");
  EXPECT_EQ(blue.listen[0].port, 3260);
  EXPECT_EQ(blue.listen[1].host, "fd00::1");
  EXPECT_EQ(blue.listen[1].portal_group, 2);
  EXPECT_EQ(blue.limits.max_sessions, 4u);
  EXPECT_EQ(blue.limits.payload_bytes, 32u << 20);
  EXPECT_EQ(blue.limits.max_connections, 40u);
  EXPECT_EQ(blue.limits.max_logging_in, 8u);
  const auto& red = c->tenants[1];
  EXPECT_EQ(red.netns, "");  // the process's own namespace
  EXPECT_EQ(red.limits.max_sessions, 0u);
  EXPECT_EQ(red.limits.payload_bytes, 0u);
  EXPECT_EQ(red.limits.max_connections, 0u);  // only the target-wide caps
  EXPECT_EQ(red.limits.max_logging_in, 0u);
  ASSERT_EQ(c->targets.size(), 2u);
  EXPECT_EQ(c->targets[0].tenant, "blue");
  EXPECT_EQ(c->targets[1].tenant, "");  // no tenant: served on `listen`, as without tenants
  EXPECT_TRUE(c->listen.empty());       // a tenant's portals are not the target's own
}

TEST(ConfigTenants, PayloadBudgetTakesBytes) {
  auto c = parse_config_toml("[[tenants]]\nname = \"t\"\nlisten = [\"127.0.0.1\"]\nlimits = { payload_budget = 65536 }\n",
                             "t.toml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->tenants[0].limits.payload_bytes, 65536u);
}

struct BadTenant {
  const char* text;
  const char* message;  // a piece of the expected error
};

class ConfigTenantsRejects : public ::testing::TestWithParam<BadTenant> {};

TEST_P(ConfigTenantsRejects, WithAClearError) {
  auto c = parse_config_toml(GetParam().text, "bad.toml");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find(GetParam().message), std::string::npos) << c.error().message;
  EXPECT_EQ(c.error().message.rfind("bad.toml:", 0), 0u) << c.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ConfigTenantsRejects,
    ::testing::Values(
        BadTenant{"[[tenants]]\nname = \"t\"\nlisten = [\"127.0.0.1\"]\nnetnss = \"x\"\n", "unknown key \"netnss\""},
        BadTenant{"[[tenants]]\nlisten = [\"127.0.0.1\"]\n", "\"name\" is missing"},
        BadTenant{"[[tenants]]\nname = \"a/b\"\nlisten = [\"127.0.0.1\"]\n", "name must be"},
        BadTenant{"[[tenants]]\nname = \"t\"\nnetns = \"../etc\"\nlisten = [\"127.0.0.1\"]\n", "netns must be"},
        BadTenant{"[[tenants]]\nname = \"t\"\nnetns = \"..\"\nlisten = [\"127.0.0.1\"]\n", "netns must be"},
        BadTenant{"[[tenants]]\nname = \"t\"\n", "\"listen\" is missing"},
        BadTenant{"[[tenants]]\nname = \"t\"\nlisten = []\n", "\"listen\" is empty"},
        BadTenant{"[[tenants]]\nname = \"t\"\nlisten = [\"[::1\"]\n", "bad address"},
        BadTenant{"[[tenants]]\nname = \"t\"\nlisten = [\"127.0.0.1\"]\nlimits = { max_session = 1 }\n",
                  "unknown key \"max_session\""},
        BadTenant{"[[tenants]]\nname = \"t\"\nlisten = [\"127.0.0.1\"]\nlimits = { max_sessions = -1 }\n",
                  "max_sessions must be"},
        BadTenant{"[[tenants]]\nname = \"t\"\nlisten = [\"127.0.0.1\"]\nlimits = { max_connections = 1.5 }\n",
                  "max_connections must be"},
        BadTenant{"[[tenants]]\nname = \"t\"\nlisten = [\"127.0.0.1\"]\nlimits = { max_logging_in = 2000000 }\n",
                  "max_logging_in must be"},
        BadTenant{"[[tenants]]\nname = \"t\"\nlisten = [\"127.0.0.1\"]\nlimits = { max_login = 2 }\n",
                  "unknown key \"max_login\""},
        BadTenant{"[[tenants]]\nname = \"t\"\nlisten = [\"127.0.0.1\"]\nlimits = { payload_budget = \"lots\" }\n",
                  "payload_budget must be"},
        BadTenant{"[[tenants]]\nname = \"t\"\nlisten = [\"127.0.0.1\"]\n[[tenants]]\nname = \"t\"\nlisten = [\"127.0.0.2\"]\n",
                  "defined twice"},
        BadTenant{"[[targets]]\niqn = \"iqn.2026-11.org.example:x\"\ntenant = \"green\"\nluns = [\"mem:1M\"]\n",
                  "tenant \"green\" is not defined"},
        BadTenant{"[[targets]]\niqn = \"iqn.2026-11.org.example:x\"\ntenant = 3\nluns = [\"mem:1M\"]\n",
                  "tenant must be"}));

}  // namespace
}  // namespace iserkit::target

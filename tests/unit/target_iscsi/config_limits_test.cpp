// The [limits] table of the target's TOML configuration (target/README.md "Limits").
#include <gtest/gtest.h>

#include "iserkit/target/config.hpp"

namespace iserkit::target {
namespace {

using namespace std::chrono_literals;

TEST(ConfigLimits, DefaultsAreTheDocumentedOnes) {
  const ConnectionLimits l;
  EXPECT_EQ(l.login_timeout, 15s);
  EXPECT_EQ(l.idle_interval, 15s);
  EXPECT_EQ(l.ping_timeout, 30s);
  EXPECT_EQ(l.max_logging_in, 64u);
  EXPECT_EQ(l.fd_reserve, 64u);
  EXPECT_EQ(l.max_immediate_commands, 16u);
  EXPECT_EQ(l.connection_payload_bytes, 64u << 20);
  EXPECT_EQ(l.global_payload_bytes, 512u << 20);
  EXPECT_EQ(l.pool_idle_bytes, 64u << 20);
  EXPECT_EQ(l.shutdown_timeout, 10s);
  EXPECT_EQ(l.reinstate_timeout, 10s);
}

TEST(ConfigLimits, ParsesEveryKey) {
  auto c = parse_config_toml(
      "[limits]\nlogin_timeout = 2.5\nidle_interval = 0\nping_timeout = 3\nmax_logging_in = 8\nfd_reserve = 32\n"
      "max_immediate_commands = 4\nconnection_payload_budget = \"16M\"\nglobal_payload_budget = 1073741824\n"
      "pool_idle_cap = \"8M\"\nshutdown_timeout = 0.5\nreinstate_timeout = 1.5\n",
      "limits.toml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->limits.login_timeout, 2500ms);
  EXPECT_EQ(c->limits.idle_interval, 0ms);
  EXPECT_EQ(c->limits.ping_timeout, 3s);
  EXPECT_EQ(c->limits.max_logging_in, 8u);
  EXPECT_EQ(c->limits.fd_reserve, 32u);
  EXPECT_EQ(c->limits.max_immediate_commands, 4u);
  EXPECT_EQ(c->limits.connection_payload_bytes, 16u << 20);
  EXPECT_EQ(c->limits.global_payload_bytes, 1u << 30);
  EXPECT_EQ(c->limits.pool_idle_bytes, 8u << 20);
  EXPECT_EQ(c->limits.shutdown_timeout, 500ms);
  EXPECT_EQ(c->limits.reinstate_timeout, 1500ms);
}

TEST(ConfigAlua, PortalGroupStatesByTag) {
  auto c = parse_config_toml(
      "listen = [\"127.0.0.1:3260\", \"127.0.0.2:3260,tpgt=2\"]\n[alua]\n2 = \"standby\"\n1 = \"active/non-optimized\"\n",
      "alua.toml");
  ASSERT_TRUE(c) << c.error().message;
  ASSERT_EQ(c->listen.size(), 2u);
  EXPECT_EQ(c->listen[1].portal_group, 2);
  EXPECT_EQ(c->alua_states.at(2), AluaState::standby);
  EXPECT_EQ(c->alua_states.at(1), AluaState::active_non_optimized);
  for (const char* bad : {"[alua]\n2 = \"asleep\"\n", "[alua]\n0 = \"standby\"\n", "[alua]\nx = \"standby\"\n",
                          "alua = 3\n"}) {
    auto e = parse_config_toml(bad, "bad.toml");
    ASSERT_FALSE(e) << bad;
    EXPECT_NE(e.error().message.find("alua"), std::string::npos) << e.error().message;
  }
}

// Two gateways, one RBD image (target/README.md): each gateway lists the other's portal group.
TEST(ConfigAlua, PeerGatewayGroupsByTag) {
  auto c = parse_config_toml("listen = [\"127.0.0.1:3260,tpgt=2\"]\n[alua]\n2 = \"active/non-optimized\"\n"
                             "[alua_peers]\n1 = \"active/optimized\"\n",
                             "peers.toml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->alua_peers.size(), 1u);
  EXPECT_EQ(c->alua_peers.at(1), AluaState::active_optimized);
  EXPECT_EQ(c->alua_states.at(2), AluaState::active_non_optimized);
  for (const char* bad : {"[alua_peers]\n1 = \"asleep\"\n", "[alua_peers]\n0 = \"standby\"\n",
                          "[alua_peers]\n70000 = \"standby\"\n", "alua_peers = \"1=standby\"\n"}) {
    auto e = parse_config_toml(bad, "bad.toml");
    ASSERT_FALSE(e) << bad;
    EXPECT_NE(e.error().message.find("alua_peers"), std::string::npos) << e.error().message;
  }
}

// ALUA failover (target/README.md "ALUA failover"): the file the gateways lock.
TEST(ConfigAlua, LockFileIsAPath) {
  auto c = parse_config_toml("alua_lock = \"vol1.img\"\n[alua_peers]\n1 = \"standby\"\n", "lock.toml");
  ASSERT_TRUE(c) << c.error().message;
  ASSERT_TRUE(c->alua_lock);
  EXPECT_EQ(c->alua_lock->filename(), "vol1.img");
  EXPECT_EQ(c->alua_peers.at(1), AluaState::standby);
  auto none = parse_config_toml("listen = [\"127.0.0.1:3260\"]\n", "none.toml");
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->alua_lock);
  for (const char* bad : {"alua_lock = 3\n", "alua_lock = \"\"\n", "alua_lock = [\"a\"]\n"}) {
    auto e = parse_config_toml(bad, "bad.toml");
    ASSERT_FALSE(e) << bad;
    EXPECT_NE(e.error().message.find("alua_lock"), std::string::npos) << e.error().message;
  }
}

TEST(ConfigAlua, PortGroupsListServedThenPeerGroupsByTag) {
  const std::vector<ListenAddress> listen{{.host = "127.0.0.1", .port = 0, .portal_group = 3},
                                          {.host = "127.0.0.2", .port = 0, .portal_group = 3}};
  auto groups = make_port_groups(listen, {{3, AluaState::active_non_optimized}},
                                 {{1, AluaState::active_optimized}, {7, AluaState::standby}});
  ASSERT_TRUE(groups);
  ASSERT_EQ(groups->size(), 3u);  // two portals of one group are one target port group
  EXPECT_EQ((*groups)[0].id, 1);
  EXPECT_EQ((*groups)[0].state, AluaState::active_optimized);
  EXPECT_EQ((*groups)[0].relative_ports, std::vector<std::uint16_t>{1});
  EXPECT_EQ((*groups)[1].id, 3);
  EXPECT_EQ((*groups)[1].state, AluaState::active_non_optimized);
  EXPECT_EQ((*groups)[1].relative_ports, std::vector<std::uint16_t>{3});
  EXPECT_EQ((*groups)[2].id, 7);
  EXPECT_EQ((*groups)[2].state, AluaState::standby);
  // Without peers or states: the served group alone, active/optimized.
  auto alone = make_port_groups(listen, {}, {});
  ASSERT_TRUE(alone);
  ASSERT_EQ(alone->size(), 1u);
  EXPECT_EQ(alone->front().state, AluaState::active_optimized);
}

TEST(ConfigAlua, PortGroupsRefuseAPeerTagServedHereAndAStateForNoPortal) {
  const std::vector<ListenAddress> listen{{.host = "127.0.0.1", .port = 0, .portal_group = 2}};
  EXPECT_FALSE(make_port_groups(listen, {}, {{2, AluaState::active_optimized}}));
  EXPECT_FALSE(make_port_groups(listen, {{1, AluaState::standby}}, {}));
  EXPECT_FALSE(make_port_groups(listen, {}, {{0, AluaState::standby}}));
}

TEST(ConfigLimits, RefusesBadValuesWithTheKeyNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"[limits]\nlogin_timeout = 0\n", "limits.login_timeout"},
      {"[limits]\nping_timeout = -1\n", "limits.ping_timeout"},
      {"[limits]\nshutdown_timeout = \"soon\"\n", "limits.shutdown_timeout"},
      {"[limits]\nreinstate_timeout = 0\n", "limits.reinstate_timeout"},
      {"[limits]\nmax_logging_in = 0\n", "limits.max_logging_in"},
      {"[limits]\nfd_reserve = 2\n", "limits.fd_reserve"},
      {"[limits]\nmax_immediate_commands = 1.5\n", "limits.max_immediate_commands"},
      {"[limits]\nconnection_payload_budget = \"lots\"\n", "limits.connection_payload_budget"},
      {"[limits]\nlogin_timout = 3\n", "unknown key \"login_timout\""},
      {"limits = 3\n", "limits must be a table"},
  };
  for (const auto& [text, expected] : cases) {
    auto c = parse_config_toml(text, "bad.toml");
    ASSERT_FALSE(c) << text;
    EXPECT_NE(c.error().message.find(expected), std::string::npos) << c.error().message;
  }
}

}  // namespace
}  // namespace iserkit::target

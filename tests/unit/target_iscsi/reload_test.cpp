// plan_reload() (target/src/reload.hpp): what a SIGHUP reload of the configuration file changes,
// what it refuses (a removed or replaced LUN), which settings wait for a restart; and
// TargetRegistry::replace(), which swaps a target's node in one step.
#include "reload.hpp"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "target_node.hpp"

namespace iserkit::target {
namespace {

TargetConfig parse(const std::string& text) {
  auto c = parse_config_toml(text, "test.toml");
  EXPECT_TRUE(c.has_value()) << (c ? "" : c.error().message);
  return c ? *c : TargetConfig{};
}

// The [[targets]] entries of a configuration, each an IQN, its LUN specs (LUN 0 first) and its
// tenant if any: plan_reload compares configurations, so the tests say which targets and LUNs,
// not how TOML writes them (config_file_test and config_tenants_test parse written TOML).
struct ReloadTarget {
  std::string iqn;
  std::vector<std::string> luns;
  std::string tenant = {};
};
std::string reload_targets_toml(std::initializer_list<ReloadTarget> targets) {
  std::string text;
  for (const auto& t : targets) {
    text += "\n[[targets]]\niqn = \"" + t.iqn + "\"\nluns = [";
    for (std::size_t i = 0; i < t.luns.size(); ++i) text += (i == 0 ? "\"" : ", \"") + t.luns[i] + "\"";
    text += "]\n";
    if (!t.tenant.empty()) text += "tenant = \"" + t.tenant + "\"\n";
  }
  return text;
}

const std::string base =
    reload_targets_toml({{"iqn.2026-11.org.test:a", {"mem:16M"}}, {"iqn.2026-11.org.test:b", {"mem:8M"}}});

TEST(PlanReload, SameFileChangesNothing) {
  auto plan = plan_reload(parse(base), parse(base));
  ASSERT_TRUE(plan.has_value());
  EXPECT_TRUE(plan->empty());
  EXPECT_TRUE(plan->restart_needed.empty());
}

TEST(PlanReload, AddedRemovedAndGrownTargets) {
  auto plan = plan_reload(parse(base), parse(reload_targets_toml({{"iqn.2026-11.org.test:A", {"mem:16M", "mem:4M"}},
                                                                  {"iqn.2026-11.org.test:c", {"mem:1M"}}})));
  ASSERT_TRUE(plan.has_value()) << plan.error().message;
  ASSERT_EQ(plan->added.size(), 1u);
  EXPECT_EQ(plan->added[0].iqn, "iqn.2026-11.org.test:c");
  ASSERT_EQ(plan->removed.size(), 1u);
  EXPECT_EQ(plan->removed[0], "iqn.2026-11.org.test:b");
  ASSERT_EQ(plan->changed.size(), 1u);  // names compare case-insensitively (RFC 7143 §4.2.7.1)
  EXPECT_EQ(plan->changed[0].first_new_lun, 1u);
  EXPECT_FALSE(plan->changed[0].access_changed);
}

TEST(PlanReload, AclAndChapChangesAreAccessChanges) {
  for (const char* extra : {R"(allowed_initiators = ["iqn.2026-11.org.test:host"])",
                            R"(chap_users = [{ user = "u", secret = "secret-secret-1" }])", R"(alias = "new")",
                            R"(chap_algorithms = ["MD5"])"}) {
    auto plan = plan_reload(parse(base), parse(base + extra + "\n"));
    ASSERT_TRUE(plan.has_value()) << extra << ": " << plan.error().message;
    ASSERT_EQ(plan->changed.size(), 1u) << extra;
    EXPECT_EQ(plan->changed[0].definition.iqn, "iqn.2026-11.org.test:b");
    EXPECT_TRUE(plan->changed[0].access_changed) << extra;
    EXPECT_EQ(plan->changed[0].first_new_lun, 1u) << extra;  // no LUN added
  }
  // Another secret for the same user is a change too.
  const std::string one = base + R"(chap_users = [{ user = "u", secret = "secret-secret-1" }])" "\n";
  const std::string two = base + R"(chap_users = [{ user = "u", secret = "secret-secret-2" }])" "\n";
  auto plan = plan_reload(parse(one), parse(two));
  ASSERT_TRUE(plan.has_value());
  ASSERT_EQ(plan->changed.size(), 1u);
  EXPECT_TRUE(plan->changed[0].access_changed);
}

TEST(PlanReload, RemovedOrReplacedLunIsRefused) {
  auto replaced = plan_reload(parse(base), parse(reload_targets_toml({{"iqn.2026-11.org.test:a", {"mem:32M"}},
                                                                      {"iqn.2026-11.org.test:b", {"mem:8M"}}})));
  ASSERT_FALSE(replaced.has_value());
  EXPECT_NE(replaced.error().message.find("lun 0 changed"), std::string::npos) << replaced.error().message;
  EXPECT_NE(replaced.error().message.find("iqn.2026-11.org.test:a"), std::string::npos);

  auto two = parse(reload_targets_toml({{"iqn.2026-11.org.test:a", {"mem:16M", "/srv/one.img"}}}));
  auto fewer = plan_reload(two, parse(reload_targets_toml({{"iqn.2026-11.org.test:a", {"mem:16M"}}})));
  ASSERT_FALSE(fewer.has_value());
  EXPECT_NE(fewer.error().message.find("lun 1 removed"), std::string::npos) << fewer.error().message;
}

// Another configured identity is another logical unit: refused like a replaced LUN.
TEST(PlanReload, ChangedLunIdentityIsRefused) {
  auto changed = plan_reload(
      parse(base), parse(reload_targets_toml({{"iqn.2026-11.org.test:a", {"mem:16M,uuid=9bf074cc-cb20-4476-afe9-95d0ab4e2176"}},
                                              {"iqn.2026-11.org.test:b", {"mem:8M"}}})));
  ASSERT_FALSE(changed.has_value());
  EXPECT_NE(changed.error().message.find("lun 0 changed from mem to mem,uuid=9bf074cc-cb20-4476-afe9-95d0ab4e2176"),
            std::string::npos)
      << changed.error().message;
}

TEST(PlanReload, NewTargetNamedLikeTheCommandLineTargetIsRefused) {
  TargetConfig current = parse(base);
  current.iqn = "iqn.2026-11.org.test:cli";
  current.luns.push_back(LunSource{.memory = true, .size_bytes = 1 << 20});
  TargetConfig next = current;
  next.targets.push_back(TargetDefinition{.iqn = "iqn.2026-11.org.test:CLI", .luns = {current.luns[0]}});
  auto plan = plan_reload(current, next);
  ASSERT_FALSE(plan.has_value());
  EXPECT_NE(plan.error().message.find("--lun"), std::string::npos);
}

TEST(PlanReload, StartOnlySettingsAreNamed) {
  auto plan = plan_reload(parse(base), parse(std::string("threads = 4\nlisten = [\"127.0.0.1:3261\"]\n") + base +
                                             "[limits]\nlogin_timeout = 3\n"));
  ASSERT_TRUE(plan.has_value()) << plan.error().message;
  EXPECT_TRUE(plan->empty());
  EXPECT_EQ(plan->restart_needed, (std::vector<std::string>{"listen", "threads", "[limits]"}));
}

// Tenants are read at start: a reload may add a target to a running tenant, never to a new one,
// never move a target between tenants, and names a change of [[tenants]] as restart-only.
TEST(PlanReload, TenantsAreStartOnlyAndTargetsStayInTheirTenant) {
  const std::string tenants = R"(
[[tenants]]
name = "blue"
listen = ["127.0.0.1:3270"]
)";
  const std::string blue_target = reload_targets_toml({{"iqn.2026-11.org.test:blue", {"mem:1M"}, "blue"}});
  auto current = parse(tenants + base);
  auto joined = plan_reload(current, parse(tenants + base + blue_target));
  ASSERT_TRUE(joined.has_value()) << joined.error().message;
  ASSERT_EQ(joined->added.size(), 1u);
  EXPECT_EQ(joined->added[0].tenant, "blue");

  auto new_tenant = plan_reload(parse(base), parse(tenants + base + blue_target));
  ASSERT_FALSE(new_tenant.has_value());
  EXPECT_NE(new_tenant.error().message.find("tenant blue is not running"), std::string::npos)
      << new_tenant.error().message;

  auto with_blue = parse(tenants + base + blue_target);
  std::string moved = tenants + base + blue_target;
  moved.replace(moved.find("tenant = \"blue\""), std::string("tenant = \"blue\"").size(), "");
  auto move = plan_reload(with_blue, parse(moved));
  ASSERT_FALSE(move.has_value());
  EXPECT_NE(move.error().message.find("moving a target between tenants"), std::string::npos) << move.error().message;

  auto relimited = plan_reload(current, parse(tenants + "limits = { max_sessions = 2 }\n" + base));
  ASSERT_TRUE(relimited.has_value()) << relimited.error().message;
  EXPECT_TRUE(relimited->empty());
  EXPECT_EQ(relimited->restart_needed, (std::vector<std::string>{"[[tenants]]"}));
}

TEST(TargetRegistry, ReplaceSwapsTheNodeOfThatName) {
  TargetRegistry registry;
  auto node = std::make_shared<TargetNode>();
  node->name = "iqn.2026-11.org.test:a";
  node->dispatcher = std::make_shared<ScsiDispatcher>();
  ASSERT_TRUE(registry.add(node).has_value());
  auto next = std::make_shared<TargetNode>(*node);
  next->name = "iqn.2026-11.org.test:A";
  next->allowed_initiators = {"iqn.2026-11.org.test:host"};
  ASSERT_TRUE(registry.replace(next).has_value());
  EXPECT_EQ(registry.find("iqn.2026-11.org.test:a"), next);
  EXPECT_EQ(registry.nodes()->size(), 1u);
  EXPECT_EQ(registry.find("iqn.2026-11.org.test:a")->dispatcher, node->dispatcher);
  auto stranger = std::make_shared<TargetNode>(*node);
  stranger->name = "iqn.2026-11.org.test:none";
  EXPECT_FALSE(registry.replace(stranger).has_value());
  EXPECT_EQ(registry.nodes()->size(), 1u);
}

}  // namespace
}  // namespace iserkit::target

// Tenants on the target (target/README.md "Tenants"): a portal's tenant decides which targets a
// login may reach (others: 0x0203, as for an unknown name) and what SendTargets lists
// (RFC 7143 Appendix C, §11.13.5); TenantSessions caps a tenant's sessions; netns::run_in refuses
// what it cannot enter.
#include <gtest/gtest.h>

#include <set>

#include "iserkit/common/errors.hpp"
#include "iserkit/common/netns.hpp"
#include "login.hpp"
#include "tenant.hpp"
#include "target_node_helpers.hpp"

namespace iserkit::target {
namespace {

using iscsi::LoginStage;

constexpr const char* blue_vol = "iqn.2026-11.org.example:blue-vol";
constexpr const char* red_vol = "iqn.2026-11.org.example:red-vol";
constexpr const char* plain_vol = "iqn.2026-11.org.example:plain";

std::shared_ptr<TargetNode> node(const char* name, const char* tenant) {
  auto n = test::make_node(name);
  n->tenant = tenant;
  return n;
}

struct TenantRegistry : ::testing::Test {
  TenantRegistry() {
    EXPECT_TRUE(registry.add(node(blue_vol, "blue")));
    EXPECT_TRUE(registry.add(node(red_vol, "red")));
    EXPECT_TRUE(registry.add(node(plain_vol, "")));
    registry.set_portal_addresses({"10.0.0.1:3260", "192.168.100.1:3260", "192.168.100.2:3260", "192.168.200.1:3260"},
                                  {1, 1, 2, 1}, {"", "blue", "blue", "red"});
  }

  // One login (security stage, straight to full feature) to `target` on a portal of `tenant`.
  static std::uint16_t login_status(const TargetRegistry& r, const char* target, const char* tenant) {
    LoginMachine machine(r, TargetLoginOptions{.tenant = tenant});
    const auto step = test::login_to_full_feature(machine, LoginStage::security_negotiation,
                                                  {{"InitiatorName", "iqn.2026-11.org.test:init"},
                                                   {"TargetName", target},
                                                   {"SessionType", "Normal"},
                                                   {"AuthMethod", "None"}});
    return static_cast<std::uint16_t>(step.response.status_class << 8 | step.response.status_detail);
  }

  static std::set<std::string> values(const iscsi::TextPairs& pairs, std::string_view key) {
    std::set<std::string> out;
    for (const auto& p : pairs)
      if (p.key == key) out.insert(p.value);
    return out;
  }

  TargetRegistry registry;
};

TEST_F(TenantRegistry, LoginReachesOnlyThePortalTenantsTargets) {
  EXPECT_EQ(login_status(registry, blue_vol, "blue"), 0x0000);
  EXPECT_EQ(login_status(registry, red_vol, "red"), 0x0000);
  EXPECT_EQ(login_status(registry, plain_vol, ""), 0x0000);
  // Another tenant's target, or one of no tenant, is "not found" — the same answer as a name
  // that does not exist, so its existence is not revealed.
  const auto unknown = login_status(registry, "iqn.2026-11.org.example:nothing", "blue");
  EXPECT_EQ(unknown, 0x0203);
  EXPECT_EQ(login_status(registry, red_vol, "blue"), unknown);
  EXPECT_EQ(login_status(registry, plain_vol, "blue"), unknown);
  // Portals of no tenant never serve a tenant's target.
  EXPECT_EQ(login_status(registry, blue_vol, ""), 0x0203);
}

TEST_F(TenantRegistry, SendTargetsListsThePortalTenantsTargetsAndPortalsOnly) {
  const auto blue = send_targets(registry, "All", true, nullptr, "iqn.2026-11.org.test:init", "192.168.100.1:3260", 1,
                                 "blue");
  EXPECT_EQ(values(blue, "TargetName"), std::set<std::string>{blue_vol});
  EXPECT_EQ(values(blue, "TargetAddress"),
            (std::set<std::string>{"192.168.100.1:3260,1", "192.168.100.2:3260,2"}));
  const auto red = send_targets(registry, "All", true, nullptr, "iqn.2026-11.org.test:init", "192.168.200.1:3260", 1,
                                "red");
  EXPECT_EQ(values(red, "TargetName"), std::set<std::string>{red_vol});
  EXPECT_EQ(values(red, "TargetAddress"), std::set<std::string>{"192.168.200.1:3260,1"});
  const auto plain = send_targets(registry, "All", true, nullptr, "iqn.2026-11.org.test:init", "10.0.0.1:3260", 1, "");
  EXPECT_EQ(values(plain, "TargetName"), std::set<std::string>{plain_vol});
  EXPECT_EQ(values(plain, "TargetAddress"), std::set<std::string>{"10.0.0.1:3260,1"});
  // Asking for another tenant's target by name answers nothing, as for an unknown name.
  EXPECT_TRUE(send_targets(registry, red_vol, true, nullptr, "iqn.2026-11.org.test:init", "192.168.100.1:3260", 1, "blue")
                  .empty());
}

TEST(TenantSessions, CapsSessionsAndFreesThemOnClose) {
  TenantSessions sessions(2);
  EXPECT_TRUE(sessions.try_open());
  EXPECT_TRUE(sessions.try_open());
  EXPECT_FALSE(sessions.try_open());  // at the cap: refused, not counted
  EXPECT_EQ(sessions.open(), 2u);
  sessions.close();
  EXPECT_TRUE(sessions.try_open());
  EXPECT_EQ(sessions.open(), 2u);
}

TEST(TenantSessions, AReinstatementIsCountedAtTheCapAndTheCountSettlesWhenThePredecessorEnds) {
  TenantSessions sessions(1);
  ASSERT_TRUE(sessions.try_open());
  EXPECT_FALSE(sessions.try_open());  // a new session: refused
  sessions.open_replacing();          // reinstating the one open: counted over the cap
  EXPECT_EQ(sessions.open(), 2u);
  sessions.close();                   // the predecessor ended
  EXPECT_EQ(sessions.open(), 1u);
  EXPECT_FALSE(sessions.try_open());  // still at the cap for new sessions
}

TEST(TenantSessions, ZeroMeansNoCap) {
  TenantSessions sessions(0);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(sessions.try_open());
  EXPECT_EQ(sessions.open(), 1000u);
}

TEST(Netns, RefusesBadNamesAndMissingNamespacesWithoutRunning) {
  bool ran = false;
  auto mark = [&] { ran = true; };
  for (const char* bad : {"", ".", "..", "a/b", "../x"}) {
    auto r = netns::run_in(bad, mark);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error(), make_error_code(errc::invalid_argument)) << bad;
  }
  auto missing = netns::run_in("iserkit-no-such-namespace-7f3a", mark);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error(), std::make_error_code(std::errc::no_such_file_or_directory));
  EXPECT_FALSE(ran);
  EXPECT_EQ(netns::path_of("tnt-blue"), "/run/netns/tnt-blue");
}

}  // namespace
}  // namespace iserkit::target

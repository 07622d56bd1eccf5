// LoginThrottle: failed logins per source address, with an injected clock (no sleeping).
#include "login_throttle.hpp"

#include <gtest/gtest.h>

#include "login.hpp"
#include "target_node_helpers.hpp"

namespace iserkit::target {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct Throttle : ::testing::Test {
  LoginThrottleOptions options{.free_failures = 3, .base_delay = milliseconds(1000), .max_delay = milliseconds(8000),
                               .forget_after = seconds(60), .max_addresses = 4};
  LoginThrottle throttle{options};
  LoginThrottle::TimePoint t0{seconds(1000)};
};

TEST_F(Throttle, FreeFailuresCostNothing) {
  for (int i = 0; i < 3; ++i) EXPECT_EQ(throttle.record_failure("192.0.2.1", t0), milliseconds(0));
  EXPECT_EQ(throttle.blocked_for("192.0.2.1", t0), milliseconds(0));
}

TEST_F(Throttle, BlockDoublesUpToTheCap) {
  for (int i = 0; i < 3; ++i) throttle.record_failure("192.0.2.1", t0);
  EXPECT_EQ(throttle.record_failure("192.0.2.1", t0), milliseconds(1000));
  EXPECT_EQ(throttle.blocked_for("192.0.2.1", t0), milliseconds(1000));
  EXPECT_EQ(throttle.blocked_for("192.0.2.1", t0 + milliseconds(400)), milliseconds(600));
  EXPECT_EQ(throttle.blocked_for("192.0.2.1", t0 + milliseconds(1000)), milliseconds(0));  // the penalty is over
  auto t = t0 + seconds(1);
  EXPECT_EQ(throttle.record_failure("192.0.2.1", t), milliseconds(2000));
  EXPECT_EQ(throttle.record_failure("192.0.2.1", t), milliseconds(4000));
  EXPECT_EQ(throttle.record_failure("192.0.2.1", t), milliseconds(8000));
  EXPECT_EQ(throttle.record_failure("192.0.2.1", t), milliseconds(8000));  // capped
  for (int i = 0; i < 100; ++i) throttle.record_failure("192.0.2.1", t);  // no overflow of the doubling
  EXPECT_EQ(throttle.blocked_for("192.0.2.1", t), milliseconds(8000));
}

TEST_F(Throttle, OtherAddressesAreNotAffected) {
  for (int i = 0; i < 6; ++i) throttle.record_failure("192.0.2.1", t0);
  EXPECT_GT(throttle.blocked_for("192.0.2.1", t0).count(), 0);
  EXPECT_EQ(throttle.blocked_for("192.0.2.2", t0), milliseconds(0));
  EXPECT_EQ(throttle.blocked_for("2001:db8::1", t0), milliseconds(0));
}

TEST_F(Throttle, AnAddressIsForgottenAfterQuietTime) {
  for (int i = 0; i < 4; ++i) throttle.record_failure("192.0.2.1", t0);
  EXPECT_EQ(throttle.size(), 1u);
  EXPECT_EQ(throttle.blocked_for("192.0.2.1", t0 + seconds(61)), milliseconds(0));
  EXPECT_EQ(throttle.size(), 0u);
  // Counting starts over: three free failures again.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(throttle.record_failure("192.0.2.1", t0 + seconds(62)), milliseconds(0));
}

TEST_F(Throttle, TheTableIsBoundedWhateverTheNumberOfAddresses) {
  for (int i = 0; i < 10000; ++i) throttle.record_failure("10.0." + std::to_string(i / 256) + "." + std::to_string(i % 256), t0);
  EXPECT_LE(throttle.size(), options.max_addresses);
  // The most recently failing addresses are the ones kept.
  for (int i = 0; i < 4; ++i) throttle.record_failure("10.0.39.15", t0);
  EXPECT_GT(throttle.blocked_for("10.0.39.15", t0).count(), 0);
  EXPECT_LE(throttle.size(), options.max_addresses);
}

TEST_F(Throttle, AnAddressThatKeepsFailingStaysTracked) {
  for (int i = 0; i < 4; ++i) throttle.record_failure("192.0.2.1", t0);
  // Three other addresses fail; the repeat offender fails again and so is the most recent.
  for (const char* a : {"192.0.2.2", "192.0.2.3", "192.0.2.4"}) throttle.record_failure(a, t0);
  throttle.record_failure("192.0.2.1", t0);
  throttle.record_failure("192.0.2.5", t0);  // evicts 192.0.2.2, the least recently failed
  EXPECT_EQ(throttle.blocked_for("192.0.2.1", t0), milliseconds(2000));
}

TEST_F(Throttle, ZeroBaseDelayTurnsItOff) {
  throttle.set_options(LoginThrottleOptions{.base_delay = milliseconds(0)});
  for (int i = 0; i < 100; ++i) EXPECT_EQ(throttle.record_failure("192.0.2.1", t0), milliseconds(0));
  EXPECT_EQ(throttle.size(), 0u);
}

TEST(AddressOfPeer, StripsThePort) {
  EXPECT_EQ(address_of_peer("192.0.2.1:3260"), "192.0.2.1");
  EXPECT_EQ(address_of_peer("[2001:db8::1]:3260"), "2001:db8::1");
  EXPECT_EQ(address_of_peer("rdma-peer"), "rdma-peer");
}

TEST(LoginRefusal, ABlockedAddressGetsServiceUnavailableForItsFirstRequest) {
  TargetRegistry registry;
  auto node = test::make_node("iqn.2026-11.org.iserkit:unit");
  ASSERT_TRUE(registry.add(node));
  LoginMachine machine(registry, TargetLoginOptions{});
  machine.refuse_login(LoginStatus::service_unavailable, "too many failed logins");
  iscsi::LoginRequest r{.transit = true, .csg = iscsi::LoginStage::security_negotiation,
                        .nsg = iscsi::LoginStage::operational_negotiation, .itt = iscsi::Itt{3}};
  auto step = machine.on_pdu(iscsi::encode_bhs(r),
                             iscsi::encode_text({{"InitiatorName", "iqn.2026-11.org.test:i"},
                                                 {"TargetName", "iqn.2026-11.org.iserkit:unit"}, {"AuthMethod", "None"}}));
  EXPECT_EQ(step.action, LoginAction::send_then_close);
  EXPECT_EQ(step.response.status_class, 0x03);
  EXPECT_EQ(step.response.status_detail, 0x01);
  EXPECT_EQ(step.response.itt, iscsi::Itt{3});
  EXPECT_EQ(step.reason, "too many failed logins");
}

TEST(LoginRefusal, ALoginUnderWayIsRefusedOnceItsAddressIsBlocked) {
  // A connection opened before the block: its next request (the CHAP response) is refused unchecked.
  TargetRegistry registry;
  auto node = test::make_node("iqn.2026-11.org.iserkit:unit");
  node->auth.users = {{"alice", "alice-secret-123"}};
  ASSERT_TRUE(registry.add(node));
  LoginMachine machine(registry, TargetLoginOptions{});
  auto bhs = [] {
    return iscsi::encode_bhs(iscsi::LoginRequest{.csg = iscsi::LoginStage::security_negotiation,
                                                 .nsg = iscsi::LoginStage::security_negotiation, .itt = iscsi::Itt{3}});
  };
  auto s1 = machine.on_pdu(bhs(), iscsi::encode_text({{"InitiatorName", "iqn.2026-11.org.test:i"},
                                                      {"TargetName", "iqn.2026-11.org.iserkit:unit"},
                                                      {"AuthMethod", "CHAP"}}));
  ASSERT_EQ(s1.response.status_class, 0);
  machine.refuse_login(LoginStatus::service_unavailable, "blocked");
  auto s2 = machine.on_pdu(bhs(), iscsi::encode_text({{"CHAP_A", "7"}}));
  EXPECT_EQ(s2.action, LoginAction::send_then_close);
  EXPECT_EQ(s2.response.status_class, 0x03);
  EXPECT_EQ(s2.response.status_detail, 0x01);
}

}  // namespace
}  // namespace iserkit::target

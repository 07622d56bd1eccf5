// LoginMachine transcripts (RFC 7143 §6.3, §11.12, §11.13.5).
#include "login.hpp"
#include "target_node_helpers.hpp"

#include <gtest/gtest.h>

namespace iserkit::target {
namespace {

using iscsi::LoginStage;
constexpr const char* target_name = "iqn.2026-11.org.iserkit:unit";

struct LoginFixture : ::testing::Test {
  LoginFixture() {
    auto node = test::make_node(target_name);
    node->alias = "unit";
    EXPECT_TRUE(registry.add(node));
  }

  static iscsi::Bhs login_bhs(LoginStage csg, LoginStage nsg, bool transit, bool cont = false,
                              std::uint8_t version_min = 0) {
    iscsi::LoginRequest r{.transit = transit, .continue_ = cont, .csg = csg, .nsg = nsg, .version_min = version_min,
                          .isid = {std::byte{0x80}, std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4},
                                   std::byte{5}},
                          .itt = iscsi::Itt{7}, .cmd_sn = SerialNumber(100), .exp_stat_sn = SerialNumber(5)};
    return iscsi::encode_bhs(r);
  }

  LoginStep send(LoginStage csg, LoginStage nsg, bool transit, const iscsi::TextPairs& pairs) {
    const auto text = iscsi::encode_text(pairs);
    return machine.on_pdu(login_bhs(csg, nsg, transit), text);
  }

  static iscsi::TextPairs text_of(const LoginStep& step) { return iscsi::decode_text(step.text).value(); }
  static std::uint16_t status(const LoginStep& s) {
    return static_cast<std::uint16_t>(s.response.status_class << 8 | s.response.status_detail);
  }

  TargetRegistry registry;
  LoginMachine machine{registry, TargetLoginOptions{}};
  const iscsi::TextPairs security{{"InitiatorName", "iqn.2026-11.org.test:init"},
                                  {"TargetName", target_name},
                                  {"SessionType", "Normal"},
                                  {"AuthMethod", "CHAP,None"}};
};

TEST_F(LoginFixture, LoginRejectsWrongOpcodeBeforeLoginStarted) {
  iscsi::NopOut nop{.itt = iscsi::Itt{1}};
  auto step = machine.on_pdu(iscsi::encode_bhs(nop), {});
  // RFC 7143 §6.3: any PDU other than a Login Request first: the connection is dropped.
  EXPECT_EQ(step.action, LoginAction::close);
}

TEST_F(LoginFixture, LoginRejectsWrongOpcode) {
  auto first = send(LoginStage::security_negotiation, LoginStage::operational_negotiation, true, security);
  ASSERT_EQ(first.action, LoginAction::send);
  iscsi::ScsiCommand cmd{.itt = iscsi::Itt{9}};
  auto step = machine.on_pdu(iscsi::encode_bhs(cmd), {});
  EXPECT_EQ(step.action, LoginAction::send_then_close);
  EXPECT_EQ(status(step), 0x020b);  // Invalid during login
  EXPECT_EQ(step.response.itt, iscsi::Itt{9});
}

TEST_F(LoginFixture, LoginNegotiatesDigests) {
  auto pairs = security;
  pairs.erase(pairs.begin() + 3);  // no AuthMethod: start in the operational stage
  pairs.push_back({"HeaderDigest", "CRC32C,None"});
  pairs.push_back({"DataDigest", "None,CRC32C"});
  auto s = send(LoginStage::operational_negotiation, LoginStage::full_feature_phase, true, pairs);
  ASSERT_EQ(s.action, LoginAction::send_then_full_feature);
  auto t = text_of(s);
  EXPECT_EQ(*iscsi::find_value(t, "HeaderDigest"), "CRC32C");
  EXPECT_EQ(*iscsi::find_value(t, "DataDigest"), "None");
  EXPECT_TRUE(machine.result().parameters.header_digest_crc32c);
  EXPECT_FALSE(machine.result().parameters.data_digest_crc32c);
}

TEST_F(LoginFixture, LoginTargetNotFound) {
  auto pairs = security;
  pairs[1].value = "iqn.2026-11.org.iserkit:nope";
  auto s = send(LoginStage::security_negotiation, LoginStage::operational_negotiation, true, pairs);
  EXPECT_EQ(s.action, LoginAction::send_then_close);
  EXPECT_EQ(status(s), 0x0203);
}

TEST_F(LoginFixture, LoginMissingInitiatorName) {
  auto s = send(LoginStage::security_negotiation, LoginStage::operational_negotiation, true,
                {{"TargetName", target_name}, {"AuthMethod", "None"}});
  EXPECT_EQ(status(s), 0x0207);
  EXPECT_EQ(s.action, LoginAction::send_then_close);
}

TEST_F(LoginFixture, LoginMissingTargetNameInNormalSession) {
  auto s = send(LoginStage::security_negotiation, LoginStage::operational_negotiation, true,
                {{"InitiatorName", "iqn.x:y"}, {"AuthMethod", "None"}});
  EXPECT_EQ(status(s), 0x0207);
}

TEST_F(LoginFixture, LoginDiscoveryNeedsNoTargetName) {
  auto s = send(LoginStage::security_negotiation, LoginStage::full_feature_phase, true,
                {{"InitiatorName", "iqn.x:y"}, {"SessionType", "Discovery"}, {"AuthMethod", "None"}});
  EXPECT_EQ(s.action, LoginAction::send_then_full_feature);
  EXPECT_TRUE(machine.result().discovery);
}

TEST_F(LoginFixture, LoginUnsupportedVersion) {
  auto text = iscsi::encode_text(security);
  auto s = machine.on_pdu(login_bhs(LoginStage::security_negotiation, LoginStage::operational_negotiation, true,
                                    false, 1),
                          text);
  EXPECT_EQ(status(s), 0x0205);
}

TEST_F(LoginFixture, LoginChapOnlyIsAuthenticationFailure) {
  auto pairs = security;
  pairs[3].value = "CHAP";
  auto s = send(LoginStage::security_negotiation, LoginStage::operational_negotiation, true, pairs);
  EXPECT_EQ(status(s), 0x0201);
}

TEST_F(LoginFixture, LoginBadStageTransitionIsInitiatorError) {
  // NSG must be after CSG (RFC 7143 §11.12.3).
  auto s = send(LoginStage::operational_negotiation, LoginStage::security_negotiation, true, security);
  EXPECT_EQ(status(s), 0x0200);
}

TEST_F(LoginFixture, LoginTextAcrossPdusWithCBit) {
  const auto text = iscsi::encode_text(security);
  const std::size_t half = text.size() / 2;  // split in the middle of a pair
  auto s1 = machine.on_pdu(login_bhs(LoginStage::security_negotiation, LoginStage::security_negotiation, false, true),
                           std::span(text).first(half));
  EXPECT_EQ(s1.action, LoginAction::send);
  EXPECT_TRUE(s1.text.empty());
  EXPECT_FALSE(s1.response.transit);
  auto s2 = machine.on_pdu(login_bhs(LoginStage::security_negotiation, LoginStage::operational_negotiation, true),
                           std::span(text).subspan(half));
  EXPECT_EQ(status(s2), 0);
  EXPECT_TRUE(s2.response.transit);
  EXPECT_EQ(*iscsi::find_value(text_of(s2), "AuthMethod"), "None");
}

TEST_F(LoginFixture, LoginTransitAndContinueIsInitiatorError) {
  auto s = machine.on_pdu(login_bhs(LoginStage::security_negotiation, LoginStage::operational_negotiation, true, true),
                          iscsi::encode_text(security));
  EXPECT_EQ(status(s), 0x0200);
}

TEST_F(LoginFixture, LoginNonZeroTsihIsSessionDoesNotExist) {
  iscsi::LoginRequest r{.transit = true, .csg = LoginStage::security_negotiation,
                        .nsg = LoginStage::operational_negotiation, .tsih = 42, .itt = iscsi::Itt{1}};
  auto s = machine.on_pdu(iscsi::encode_bhs(r), iscsi::encode_text(security));
  EXPECT_EQ(status(s), 0x020a);
}

// --- Repeated keys (RFC 7143 §6.2: Login reject, initiator error 0x0200) -------------------------

struct RepeatedKeyFixture : LoginFixture {
  RepeatedKeyFixture() {
    auto node = test::make_node(acl_target);
    node->allowed_initiators = {allowed};
    EXPECT_TRUE(registry.add(node));
  }
  static constexpr const char* acl_target = "iqn.2026-11.org.iserkit:acl";
  static constexpr const char* allowed = "iqn.2026-11.org.test:allowed";
  static constexpr const char* other = "iqn.2026-11.org.test:other";
  const iscsi::TextPairs operational{{"MaxRecvDataSegmentLength", "65536"}, {"InitialR2T", "No"}};
};

TEST_F(RepeatedKeyFixture, InitiatorNameTwiceInOneRequestIsRefused) {
  // The ACL admits the first value; the second would have become the session's identity.
  auto s = send(LoginStage::security_negotiation, LoginStage::operational_negotiation, true,
                {{"InitiatorName", allowed}, {"InitiatorName", other}, {"TargetName", acl_target},
                 {"AuthMethod", "None"}});
  EXPECT_EQ(status(s), 0x0200);
  EXPECT_EQ(s.action, LoginAction::send_then_close);
  EXPECT_NE(s.reason.find("InitiatorName"), std::string::npos);
}

TEST_F(RepeatedKeyFixture, SameValueTwiceInOneRequestIsRefusedToo) {
  auto s = send(LoginStage::security_negotiation, LoginStage::operational_negotiation, true,
                {{"InitiatorName", allowed}, {"TargetName", acl_target}, {"AuthMethod", "None"},
                 {"AuthMethod", "None"}});
  EXPECT_EQ(status(s), 0x0200);
}

TEST_F(RepeatedKeyFixture, RepeatHiddenInALaterContinuedPduIsRefused) {
  // One Login Request split with the C bit: the second copy arrives in the last PDU.
  const auto first = iscsi::encode_text({{"InitiatorName", allowed}, {"TargetName", acl_target}});
  const auto second = iscsi::encode_text({{"AuthMethod", "None"}, {"InitiatorName", other}});
  auto s1 = machine.on_pdu(login_bhs(LoginStage::security_negotiation, LoginStage::security_negotiation, false, true),
                           first);
  ASSERT_EQ(s1.action, LoginAction::send);
  EXPECT_EQ(status(s1), 0);
  auto s2 = machine.on_pdu(login_bhs(LoginStage::security_negotiation, LoginStage::operational_negotiation, true),
                           second);
  EXPECT_EQ(status(s2), 0x0200);
  EXPECT_EQ(s2.action, LoginAction::send_then_close);
}

TEST_F(RepeatedKeyFixture, InitiatorNameChangedInALaterRequestIsRefused) {
  auto s1 = send(LoginStage::security_negotiation, LoginStage::operational_negotiation, true,
                 {{"InitiatorName", allowed}, {"TargetName", acl_target}, {"AuthMethod", "None"}});
  ASSERT_EQ(status(s1), 0);
  auto pairs = operational;
  pairs.push_back({"InitiatorName", other});
  auto s2 = send(LoginStage::operational_negotiation, LoginStage::full_feature_phase, true, pairs);
  EXPECT_EQ(status(s2), 0x0200);
  EXPECT_EQ(s2.action, LoginAction::send_then_close);
}

TEST_F(RepeatedKeyFixture, IdenticalDeclarationsRepeatedLikeLibiscsiAreAccepted) {
  // libiscsi sends InitiatorName, TargetName and SessionType again in its operational stage.
  const iscsi::TextPairs names{{"InitiatorName", allowed}, {"TargetName", acl_target}, {"SessionType", "Normal"}};
  auto first = names;
  first.push_back({"AuthMethod", "None"});
  auto s1 = send(LoginStage::security_negotiation, LoginStage::operational_negotiation, true, first);
  ASSERT_EQ(status(s1), 0);
  auto second = names;
  second.insert(second.end(), operational.begin(), operational.end());
  auto s2 = send(LoginStage::operational_negotiation, LoginStage::full_feature_phase, true, second);
  ASSERT_EQ(s2.action, LoginAction::send_then_full_feature);
  EXPECT_EQ(machine.result().initiator_name, allowed);
  EXPECT_EQ(machine.result().parameters.initiator_name, allowed);
}

TEST_F(RepeatedKeyFixture, NegotiatedKeyInTwoRequestsIsRefused) {
  auto s1 = send(LoginStage::operational_negotiation, LoginStage::operational_negotiation, false,
                 {{"InitiatorName", allowed}, {"TargetName", acl_target}, {"MaxBurstLength", "65536"}});
  ASSERT_EQ(status(s1), 0);
  auto s2 = send(LoginStage::operational_negotiation, LoginStage::full_feature_phase, true,
                 {{"MaxBurstLength", "65536"}});
  EXPECT_EQ(status(s2), 0x0200);
}

TEST_F(RepeatedKeyFixture, ChapKeySentAgainInALaterRequestIsRefused) {
  registry.find(acl_target)->auth.users.push_back({"user", "0123456789abcdef"});
  auto s1 = send(LoginStage::security_negotiation, LoginStage::security_negotiation, false,
                 {{"InitiatorName", allowed}, {"TargetName", acl_target}, {"AuthMethod", "CHAP"}, {"CHAP_A", "7"}});
  ASSERT_EQ(status(s1), 0);
  auto s2 = send(LoginStage::security_negotiation, LoginStage::security_negotiation, false, {{"CHAP_A", "7"}});
  EXPECT_EQ(status(s2), 0x0200);
}

TEST_F(RepeatedKeyFixture, ManyDistinctKeysAreCheckedAndTheRepeatFound) {
  // 64 KiB of distinct tiny keys with one repeat at the end (no quadratic scan; answer 0x0200).
  iscsi::TextPairs pairs{{"InitiatorName", allowed}, {"TargetName", acl_target}};
  for (int i = 0; i < 6000; ++i) pairs.push_back({"X" + std::to_string(i), "v"});
  pairs.push_back({"X17", "v"});
  const auto text = iscsi::encode_text(pairs);
  ASSERT_LT(text.size(), 64u * 1024);
  std::size_t offset = 0;
  LoginStep s;
  while (true) {
    const std::size_t n = std::min<std::size_t>(8192, text.size() - offset);
    const bool last = offset + n == text.size();
    s = machine.on_pdu(login_bhs(LoginStage::operational_negotiation, LoginStage::full_feature_phase, last, !last),
                       std::span(text).subspan(offset, n));
    offset += n;
    if (last) break;
    ASSERT_EQ(status(s), 0);
  }
  EXPECT_EQ(status(s), 0x0200);
  EXPECT_NE(s.reason.find("X17"), std::string::npos);
}

TEST_F(RepeatedKeyFixture, TheAclIsCheckedOnTheOnlyName) {
  auto s = send(LoginStage::security_negotiation, LoginStage::operational_negotiation, true,
                {{"InitiatorName", other}, {"TargetName", acl_target}, {"AuthMethod", "None"}});
  EXPECT_EQ(status(s), 0x0202);
  EXPECT_NE(s.reason.find(other), std::string::npos);
}

}  // namespace
}  // namespace iserkit::target

// The target's security stage: CHAP transcripts (RFC 7143 §12.1.3, RFC 1994 §4.1), ACLs
// (§11.13.5 status 0x0202) and discovery authentication. Responses are computed with
// iscsi::chap_response, itself checked against independent vectors (common/chap_test.cpp).
#include "login.hpp"
#include "target_node_helpers.hpp"

#include <gtest/gtest.h>

namespace iserkit::target {
namespace {

using iscsi::ChapAlgorithm;
using iscsi::LoginStage;
constexpr const char* target_name = "iqn.2026-11.org.iserkit:secure";
constexpr const char* initiator_name = "iqn.2026-11.org.test:init";
constexpr std::uint16_t auth_failure = 0x0201;

struct ChapLogin : ::testing::Test {
  ChapLogin() {
    node = test::make_node(target_name);
    node->auth.users = {{"alice", "alice-secret-123"}};
    node->auth.mutual = ChapCredential{"target", "target-secret-456"};
    EXPECT_TRUE(registry.add(node));
  }

  static iscsi::Bhs bhs(LoginStage csg, LoginStage nsg, bool transit) {
    iscsi::LoginRequest r{.transit = transit, .csg = csg, .nsg = nsg,
                          .isid = {std::byte{0x80}, std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}, std::byte{5}},
                          .itt = iscsi::Itt{7}, .cmd_sn = SerialNumber(1), .exp_stat_sn = SerialNumber(0)};
    return iscsi::encode_bhs(r);
  }
  LoginStep security(const iscsi::TextPairs& pairs, bool transit = true) {
    const auto text = iscsi::encode_text(pairs);
    return machine().on_pdu(bhs(LoginStage::security_negotiation, LoginStage::operational_negotiation, transit), text);
  }
  static iscsi::TextPairs text(const LoginStep& s) { return iscsi::decode_text(s.text).value(); }
  static std::string value(const LoginStep& s, std::string_view key) {
    auto t = text(s);
    const std::string* v = iscsi::find_value(t, key);
    return v != nullptr ? *v : std::string("<absent>");
  }
  static std::uint16_t status(const LoginStep& s) {
    return static_cast<std::uint16_t>(s.response.status_class << 8 | s.response.status_detail);
  }
  LoginMachine& machine() {
    if (!machine_) machine_.emplace(registry, TargetLoginOptions{});
    return *machine_;
  }

  iscsi::TextPairs first(std::string methods = "CHAP,None", bool discovery = false) const {
    iscsi::TextPairs p{{"InitiatorName", initiator_name}};
    if (discovery) {
      p.push_back({"SessionType", "Discovery"});
    } else {
      p.push_back({"SessionType", "Normal"});
      p.push_back({"TargetName", target_name});
    }
    p.push_back({"AuthMethod", methods});
    return p;
  }

  // Runs AuthMethod and CHAP_A; returns the target's CHAP_A/CHAP_I/CHAP_C step.
  LoginStep challenge(const std::string& algorithms = "7,8,6,5") {
    auto s1 = security(first());
    EXPECT_EQ(status(s1), 0);
    EXPECT_EQ(value(s1, "AuthMethod"), "CHAP");
    EXPECT_FALSE(s1.response.transit);  // RFC 7143 §6.3: no transit before CHAP is done
    auto s2 = security({{"CHAP_A", algorithms}});
    EXPECT_EQ(status(s2), 0);
    EXPECT_FALSE(s2.response.transit);
    return s2;
  }
  static iscsi::TextPairs answer(const LoginStep& c, const std::string& user, const std::string& secret) {
    const auto alg = iscsi::parse_chap_algorithm(value(c, "CHAP_A")).value();
    const auto id = iscsi::parse_chap_identifier(value(c, "CHAP_I")).value();
    const auto ch = iscsi::decode_chap_binary(value(c, "CHAP_C")).value();
    return {{"CHAP_N", user}, {"CHAP_R", iscsi::encode_chap_binary(iscsi::chap_response(alg, id, secret, ch))}};
  }

  TargetRegistry registry;
  std::shared_ptr<TargetNode> node;
  std::optional<LoginMachine> machine_;
};

TEST_F(ChapLogin, RightSecretAuthenticatesAndTransits) {
  auto c = challenge();
  // The initiator's first choice wins (SHA-256); the challenge is one digest long.
  EXPECT_EQ(value(c, "CHAP_A"), "7");
  EXPECT_EQ(iscsi::decode_chap_binary(value(c, "CHAP_C"))->size(), 32u);
  auto s3 = security(answer(c, "alice", "alice-secret-123"));
  EXPECT_EQ(status(s3), 0);
  EXPECT_TRUE(s3.response.transit);
  EXPECT_EQ(s3.response.nsg, LoginStage::operational_negotiation);
  EXPECT_EQ(value(s3, "CHAP_N"), "<absent>");  // one-way: the target does not answer
}

TEST_F(ChapLogin, AlgorithmFollowsTheInitiatorsOrderAmongAccepted) {
  EXPECT_EQ(value(challenge("6,7"), "CHAP_A"), "6");
}

TEST_F(ChapLogin, Md5IsNotAcceptedByDefault) {
  // Offered first, MD5 is skipped for the next algorithm the target accepts.
  EXPECT_EQ(value(challenge("5,7"), "CHAP_A"), "7");
}

TEST_F(ChapLogin, Md5OnlyIsRefusedByDefaultWithAReason) {
  security(first());
  auto s = security({{"CHAP_A", "5"}});
  EXPECT_EQ(status(s), auth_failure);
  EXPECT_EQ(s.action, LoginAction::send_then_close);
  EXPECT_NE(s.reason.find("MD5"), std::string::npos) << s.reason;
  EXPECT_NE(s.reason.find("chap_algorithms"), std::string::npos) << s.reason;
}

TEST_F(ChapLogin, Md5WhereConfigured) {
  node->auth.algorithms = {ChapAlgorithm::sha256, ChapAlgorithm::md5};
  auto c = challenge("5");
  EXPECT_EQ(value(c, "CHAP_A"), "5");
  EXPECT_EQ(iscsi::decode_chap_binary(value(c, "CHAP_C"))->size(), 16u);
  EXPECT_EQ(status(security(answer(c, "alice", "alice-secret-123"))), 0);
}

TEST_F(ChapLogin, AlgorithmSha3WhenOffered) {
  auto c = challenge("8,7");
  EXPECT_EQ(value(c, "CHAP_A"), "8");
  EXPECT_EQ(status(security(answer(c, "alice", "alice-secret-123"))), 0);
}

TEST_F(ChapLogin, AlgorithmNotAcceptedFails) {
  node->auth.algorithms = {ChapAlgorithm::sha256};
  security(first());
  EXPECT_EQ(status(security({{"CHAP_A", "5"}})), auth_failure);
}

TEST_F(ChapLogin, WrongSecretIsAuthenticationFailure) {
  auto c = challenge();
  auto s = security(answer(c, "alice", "wrong-secret-000"));
  EXPECT_EQ(status(s), auth_failure);
  EXPECT_EQ(s.action, LoginAction::send_then_close);
}

TEST_F(ChapLogin, UnknownUserIsAuthenticationFailure) {
  auto c = challenge();
  EXPECT_EQ(status(security(answer(c, "mallory", "alice-secret-123"))), auth_failure);
}

TEST_F(ChapLogin, MissingChapNIsAuthenticationFailure) {
  auto c = challenge();
  auto a = answer(c, "alice", "alice-secret-123");
  a.erase(a.begin());
  EXPECT_EQ(status(security(a)), auth_failure);
}

TEST_F(ChapLogin, ResponseBeforeChallengeIsRefused) {
  security(first());
  EXPECT_NE(status(security({{"CHAP_N", "alice"}, {"CHAP_R", "0x00"}})), 0);
}

TEST_F(ChapLogin, NoneOnlyIsRefusedWhenChapIsRequired) {
  EXPECT_EQ(status(security(first("None"))), auth_failure);
}

TEST_F(ChapLogin, SkippingTheSecurityStageIsRefused) {
  auto p = first();
  p.pop_back();
  const auto t = iscsi::encode_text(p);
  auto s = machine().on_pdu(bhs(LoginStage::operational_negotiation, LoginStage::full_feature_phase, true), t);
  EXPECT_EQ(status(s), auth_failure);
}

TEST_F(ChapLogin, TransitWithoutAuthMethodIsRefused) {
  auto p = first();
  p.pop_back();
  EXPECT_EQ(status(security(p)), auth_failure);
}

TEST_F(ChapLogin, MutualChapAnswersWithTheTargetSecret) {
  auto c = challenge();
  auto a = answer(c, "alice", "alice-secret-123");
  const std::vector<std::byte> mine(16, std::byte{0x5a});
  a.push_back({"CHAP_I", "17"});
  a.push_back({"CHAP_C", iscsi::encode_chap_binary(mine)});
  auto s = security(a);
  ASSERT_EQ(status(s), 0);
  EXPECT_EQ(value(s, "CHAP_N"), "target");
  const auto alg = iscsi::parse_chap_algorithm(value(c, "CHAP_A")).value();
  EXPECT_EQ(value(s, "CHAP_R"), iscsi::encode_chap_binary(iscsi::chap_response(alg, 17, "target-secret-456", mine)));
  EXPECT_TRUE(s.response.transit);
}

TEST_F(ChapLogin, ReflectedChallengeFails) {
  auto c = challenge();
  auto a = answer(c, "alice", "alice-secret-123");
  a.push_back({"CHAP_I", value(c, "CHAP_I")});
  a.push_back({"CHAP_C", value(c, "CHAP_C")});  // our own challenge sent back
  EXPECT_EQ(status(security(a)), auth_failure);
}

TEST_F(ChapLogin, MutualWithoutTargetCredentialFails) {
  node->auth.mutual.reset();
  auto c = challenge();
  auto a = answer(c, "alice", "alice-secret-123");
  a.push_back({"CHAP_I", "1"});
  a.push_back({"CHAP_C", "0x0102030405060708090a0b0c0d0e0f10"});
  EXPECT_EQ(status(security(a)), auth_failure);
}

TEST_F(ChapLogin, BadChapIdentifierIsInitiatorError) {
  auto c = challenge();
  auto a = answer(c, "alice", "alice-secret-123");
  a.push_back({"CHAP_I", "256"});
  a.push_back({"CHAP_C", "0x0102030405060708090a0b0c0d0e0f10"});
  EXPECT_EQ(status(security(a)), 0x0200);
}

TEST_F(ChapLogin, ChallengesAreFreshPerLogin) {
  auto c1 = value(challenge(), "CHAP_C");
  machine_.reset();
  auto c2 = value(challenge(), "CHAP_C");
  EXPECT_NE(c1, c2);
}

TEST_F(ChapLogin, AclRefusesOtherInitiators) {
  node->auth = {};
  node->allowed_initiators = {"iqn.2026-11.org.test:other"};
  EXPECT_EQ(status(security(first("None"))), 0x0202);
}

TEST_F(ChapLogin, AclAdmitsListedInitiatorCaseInsensitively) {
  node->auth = {};
  node->allowed_initiators = {"IQN.2026-11.org.test:INIT"};
  auto s = security(first("None"));
  EXPECT_EQ(status(s), 0);
  EXPECT_TRUE(s.response.transit);
}

TEST_F(ChapLogin, DiscoveryUsesItsOwnCredentials) {
  registry.set_discovery_auth(AuthConfig{.users = {{"disco", "discovery-secret"}}});
  auto s1 = security(first("CHAP,None", true));
  EXPECT_EQ(value(s1, "AuthMethod"), "CHAP");
  auto c = security({{"CHAP_A", "7"}});
  EXPECT_EQ(status(security(answer(c, "alice", "alice-secret-123"))), auth_failure);  // the node's user
}

TEST_F(ChapLogin, DiscoveryRightCredentials) {
  registry.set_discovery_auth(AuthConfig{.users = {{"disco", "discovery-secret"}}});
  security(first("CHAP", true));
  auto c = security({{"CHAP_A", "7"}});
  auto s = security(answer(c, "disco", "discovery-secret"));
  EXPECT_EQ(status(s), 0);
  EXPECT_TRUE(s.response.transit);
}

TEST_F(ChapLogin, DiscoveryWithoutAuthStaysOpen) {
  auto s = security(first("None", true));
  EXPECT_EQ(status(s), 0);
  EXPECT_EQ(value(s, "AuthMethod"), "None");
}

}  // namespace
}  // namespace iserkit::target

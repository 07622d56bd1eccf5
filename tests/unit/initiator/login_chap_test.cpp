// The initiator's security stage against scripted targets: CHAP one-way and mutual
// (RFC 7143 §12.1.3, RFC 1994 §4.1), algorithm choice, wrong/missing target responses, reflected
// challenges, and login redirects (RFC 7143 §11.13.5 class 1 with TargetAddress).
#include <gtest/gtest.h>

#include "chap_client.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/initiator/errors.hpp"
#include "login.hpp"
#include "initiator_rig.hpp"
#include "login_helpers.hpp"

using namespace iserkit;
using namespace iserkit::initiator;
using iscsi::ChapAlgorithm;
using iscsi::LoginStage;

namespace {

using test::isid;
using test::login_response;
const std::vector<std::byte> target_challenge(32, std::byte{0x42});

LoginConfig config(ChapOptions chap) {
  LoginConfig c = test::harness::default_login_config();
  c.options.security_stage = true;  // CHAP is the security stage's
  c.options.chap = std::move(chap);
  return c;
}

iscsi::LoginResponse security(bool transit) {
  return login_response(LoginStage::security_negotiation, LoginStage::operational_negotiation, transit);
}

std::string value(const iscsi::TextPairs& p, std::string_view k) {
  const std::string* v = iscsi::find_value(p, k);
  return v ? *v : "<absent>";
}
const LoginSend& send_of(const Result<LoginStep>& s) {
  EXPECT_TRUE(s.has_value()) << (s ? "" : s.error().message());
  return std::get<LoginSend>(*s);
}

ChapOptions one_way() { return ChapOptions{.user = "alice", .secret = "alice-secret-123"}; }
ChapOptions mutual() {
  auto o = one_way();
  o.target_secret = "target-secret-456";
  o.target_user = "target";
  return o;
}

struct Script {
  LoginMachine machine;
  explicit Script(ChapOptions o) : machine(config(std::move(o))) {}

  // AuthMethod=CHAP, then CHAP_A: returns the request that answers the target's challenge.
  LoginSend challenged(const std::string& algorithm = "7", std::uint8_t id = 9) {
    auto first = machine.start();
    EXPECT_EQ(value(first.text, "AuthMethod"), machine_auth_methods());
    auto s1 = machine.on_response(security(false), {{"AuthMethod", "CHAP"}});
    const auto& a = send_of(s1);
    EXPECT_FALSE(a.request.transit);
    EXPECT_EQ(value(a.text, "CHAP_A"), "7,8,6,5");
    auto s2 = machine.on_response(security(false), {{"CHAP_A", algorithm},
                                                     {"CHAP_I", std::to_string(id)},
                                                     {"CHAP_C", iscsi::encode_chap_binary(target_challenge)}});
    return send_of(s2);
  }
  std::string expected_auth = "CHAP,None";
  [[nodiscard]] std::string machine_auth_methods() const { return expected_auth; }
};

}  // namespace

TEST(LoginChap, OneWayResponseIsTheRfc1994Hash) {
  Script s(one_way());
  auto r = s.challenged("7", 9);
  EXPECT_TRUE(r.request.transit);  // nothing left for us to send: ask for the operational stage
  EXPECT_EQ(value(r.text, "CHAP_N"), "alice");
  EXPECT_EQ(value(r.text, "CHAP_R"),
            iscsi::encode_chap_binary(iscsi::chap_response(ChapAlgorithm::sha256, 9, "alice-secret-123", target_challenge)));
  EXPECT_EQ(value(r.text, "CHAP_C"), "<absent>");
  auto next = s.machine.on_response(security(true), {});
  EXPECT_EQ(send_of(next).request.csg, LoginStage::operational_negotiation);
}

TEST(LoginChap, EachAlgorithmTheTargetPicks) {
  for (auto [text, alg] : {std::pair{"5", ChapAlgorithm::md5}, std::pair{"6", ChapAlgorithm::sha1},
                           std::pair{"8", ChapAlgorithm::sha3_256}}) {
    Script s(one_way());
    auto r = s.challenged(text, 1);
    EXPECT_EQ(value(r.text, "CHAP_R"),
              iscsi::encode_chap_binary(iscsi::chap_response(alg, 1, "alice-secret-123", target_challenge)));
  }
}

TEST(LoginChap, AlgorithmWeDidNotOfferFails) {
  ChapOptions o = one_way();
  o.algorithms = {ChapAlgorithm::sha256};  // MD5 is still offered (RFC 7143 §12.1.3)
  LoginMachine m(config(o));
  m.start();
  auto a = m.on_response(security(false), {{"AuthMethod", "CHAP"}});
  EXPECT_EQ(value(send_of(a).text, "CHAP_A"), "7,5");
  auto r = m.on_response(security(false), {{"CHAP_A", "6"}, {"CHAP_I", "1"}, {"CHAP_C", "0x0102"}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), make_error_code(errc::negotiation_failed));
}

TEST(LoginChap, MalformedChallengeFails) {
  Script s(one_way());
  s.machine.start();
  (void)s.machine.on_response(security(false), {{"AuthMethod", "CHAP"}});
  auto r = s.machine.on_response(security(false), {{"CHAP_A", "5"}, {"CHAP_I", "300"}, {"CHAP_C", "0x0102"}});
  EXPECT_FALSE(r);
  Script t(one_way());
  t.machine.start();
  (void)t.machine.on_response(security(false), {{"AuthMethod", "CHAP"}});
  EXPECT_FALSE(t.machine.on_response(security(false), {{"CHAP_A", "5"}, {"CHAP_I", "1"}, {"CHAP_C", "nothex"}}));
}

TEST(LoginChap, MutualVerifiesTheTarget) {
  Script s(mutual());
  s.expected_auth = "CHAP";  // no None: the target must authenticate itself
  auto r = s.challenged("5", 3);
  EXPECT_TRUE(r.request.transit);
  const auto id = iscsi::parse_chap_identifier(value(r.text, "CHAP_I"));
  const auto ours = iscsi::decode_chap_binary(value(r.text, "CHAP_C"));
  ASSERT_TRUE(id && ours);
  EXPECT_EQ(ours->size(), 16u);  // one MD5 digest long
  EXPECT_NE(*ours, target_challenge);
  const auto good = iscsi::encode_chap_binary(iscsi::chap_response(ChapAlgorithm::md5, *id, "target-secret-456", *ours));
  auto done = s.machine.on_response(security(true), {{"CHAP_N", "target"}, {"CHAP_R", good}});
  EXPECT_EQ(send_of(done).request.csg, LoginStage::operational_negotiation);
}

namespace {
// A mutual CHAP login once the initiator sent its response and challenge: the target's answer
// as CHAP_N `name` and the response to the initiator's challenge computed with `secret`.
Result<LoginStep> mutual_target_answer(const std::string& name, const std::string& secret) {
  Script s(mutual());
  s.expected_auth = "CHAP";
  auto r = s.challenged("5", 3);
  const auto id = *iscsi::parse_chap_identifier(value(r.text, "CHAP_I"));
  const auto ours = *iscsi::decode_chap_binary(value(r.text, "CHAP_C"));
  const auto response = iscsi::encode_chap_binary(iscsi::chap_response(ChapAlgorithm::md5, id, secret, ours));
  return s.machine.on_response(security(true), {{"CHAP_N", name}, {"CHAP_R", response}});
}
}  // namespace

TEST(LoginChap, MutualWrongTargetResponseFails) {
  auto done = mutual_target_answer("target", "another-secret");
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error(), make_error_code(errc::authentication_failed));
}

TEST(LoginChap, MutualWrongTargetNameFails) {
  EXPECT_FALSE(mutual_target_answer("impostor", "target-secret-456"));
}

TEST(LoginChap, MutualTargetSkippingItsResponseFails) {
  Script s(mutual());
  s.expected_auth = "CHAP";
  s.challenged("5", 3);
  auto done = s.machine.on_response(security(true), {});
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error(), make_error_code(errc::authentication_failed));
}

TEST(LoginChap, MutualRefusesAuthMethodNone) {
  LoginMachine m(config(mutual()));
  EXPECT_EQ(value(m.start().text, "AuthMethod"), "CHAP");
  auto r = m.on_response(security(true), {{"AuthMethod", "None"}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), make_error_code(errc::authentication_failed));
}

TEST(LoginChap, OneWayAcceptsATargetThatNeedsNoAuthentication) {
  LoginMachine m(config(one_way()));
  m.start();
  auto r = m.on_response(security(true), {{"AuthMethod", "None"}});
  EXPECT_EQ(send_of(r).request.csg, LoginStage::operational_negotiation);
}

TEST(LoginChap, TargetTransitingBeforeChapEndsFails) {
  LoginMachine m(config(one_way()));
  m.start();
  (void)m.on_response(security(false), {{"AuthMethod", "CHAP"}});
  auto r = m.on_response(security(true), {});
  EXPECT_FALSE(r);
}

TEST(LoginChap, ChapWithoutCredentialsIsNotAccepted) {
  LoginMachine m(config({}));
  EXPECT_EQ(value(m.start().text, "AuthMethod"), "None");
  EXPECT_FALSE(m.on_response(security(false), {{"AuthMethod", "CHAP"}}));
}

TEST(ChapClient, OurChallengeNeverReflectsTheTargets) {
  // The client draws its mutual challenge until it differs from the target's (RFC 7143 §12.1.3);
  // with 16 random bytes a collision is practically impossible, so check many runs differ.
  auto o = mutual();
  for (int i = 0; i < 50; ++i) {
    ChapClient c(o);
    c.start();
    auto r = c.on_keys({{"CHAP_A", "5"}, {"CHAP_I", "1"}, {"CHAP_C", iscsi::encode_chap_binary(target_challenge)}});
    ASSERT_TRUE(r);
    EXPECT_NE(value(*r, "CHAP_C"), iscsi::encode_chap_binary(target_challenge));
    EXPECT_TRUE(c.responded());
    EXPECT_FALSE(c.done());
  }
}

namespace {
// A fresh login's answer to a redirect (status class 1, detail `detail`) in the security stage
// carrying `keys`.
Result<LoginStep> redirect_answer(std::uint8_t detail, const iscsi::TextPairs& keys) {
  LoginMachine m(config({}));
  m.start();
  return m.on_response(
      login_response(LoginStage::security_negotiation, LoginStage::security_negotiation, false, 1, detail), keys);
}

// A redirect with a TargetAddress: where the initiator goes, and whether for good (detail 2).
struct RedirectCase {
  std::string name;
  std::uint8_t detail;
  std::string target_address;
  std::string host;
  std::uint16_t port;
  bool permanent;
};

class LoginRedirectTo : public ::testing::TestWithParam<RedirectCase> {};
}  // namespace

TEST_P(LoginRedirectTo, TheAddressAndItsPermanence) {
  const RedirectCase& c = GetParam();
  auto r = redirect_answer(c.detail, {{"TargetAddress", c.target_address}});
  ASSERT_TRUE(r);
  const auto& redirect = std::get<LoginRedirect>(*r);
  EXPECT_EQ(redirect.host, c.host);
  EXPECT_EQ(redirect.port, c.port);
  EXPECT_EQ(redirect.permanent, c.permanent);
}

INSTANTIATE_TEST_SUITE_P(
    LoginRedirect, LoginRedirectTo,
    ::testing::Values(RedirectCase{"TemporaryRedirectWithTargetAddress", 1, "10.0.0.7:3261,1", "10.0.0.7", 3261, false},
                      RedirectCase{"PermanentRedirectToIpv6", 2, "[fd00::5]", "fd00::5", 3260, true}),
    [](const auto& info) { return info.param.name; });

TEST(LoginRedirect, RedirectWithoutAddressIsALoginError) {
  auto r = redirect_answer(1, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), make_login_error(1, 1));
  EXPECT_FALSE(redirect_answer(1, {{"TargetAddress", "[bad"}}));
}

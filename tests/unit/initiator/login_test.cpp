// The login state machine against scripted target responses (RFC 7143 §6.3, §11.12, §11.13).
#include "login.hpp"

#include <gtest/gtest.h>

#include "iserkit/common/errors.hpp"
#include "iserkit/initiator/errors.hpp"
#include "initiator_rig.hpp"
#include "login_helpers.hpp"

using namespace iserkit;
using namespace iserkit::initiator;
using iscsi::LoginStage;

namespace {

using test::isid;
using test::login_response;

LoginConfig config(bool security) {
  LoginConfig c = test::harness::default_login_config();
  c.options.security_stage = security;
  return c;
}

const std::string* value(const iscsi::TextPairs& p, std::string_view k) { return iscsi::find_value(p, k); }

}  // namespace

TEST(Login, SecurityThenOperationalThenFullFeature) {
  LoginMachine m(config(true));
  LoginSend first = m.start();
  EXPECT_EQ(first.request.csg, LoginStage::security_negotiation);
  EXPECT_EQ(first.request.nsg, LoginStage::operational_negotiation);
  EXPECT_TRUE(first.request.transit);
  EXPECT_EQ(first.request.isid, isid);
  EXPECT_EQ(first.request.tsih, 0);
  ASSERT_TRUE(value(first.text, "AuthMethod"));
  EXPECT_EQ(*value(first.text, "AuthMethod"), "None");
  EXPECT_EQ(*value(first.text, "SessionType"), "Normal");
  EXPECT_EQ(*value(first.text, "TargetName"), "iqn.2026-11.org.example:vol1");
  EXPECT_EQ(*value(first.text, "InitiatorName"), "iqn.2026-11.org.iserkit:test");
  EXPECT_EQ(value(first.text, "MaxBurstLength"), nullptr);  // operational keys wait for their stage

  auto step = m.on_response(login_response(LoginStage::security_negotiation, LoginStage::operational_negotiation, true),
                            {{"AuthMethod", "None"}, {"TargetPortalGroupTag", "1"}});
  ASSERT_TRUE(step);
  auto& op = std::get<LoginSend>(*step);
  EXPECT_EQ(op.request.csg, LoginStage::operational_negotiation);
  EXPECT_EQ(op.request.nsg, LoginStage::full_feature_phase);
  EXPECT_EQ(op.request.exp_stat_sn.value(), 41u);
  EXPECT_EQ(op.request.tsih, 0x1234);
  EXPECT_EQ(op.request.cmd_sn.value(), 1u);
  EXPECT_EQ(*value(op.text, "ImmediateData"), "Yes");
  EXPECT_EQ(*value(op.text, "InitialR2T"), "No");
  EXPECT_EQ(*value(op.text, "MaxRecvDataSegmentLength"), "1048576");  // SessionOptions default: 1 MiB Data-In PDUs
  EXPECT_EQ(*value(op.text, "ErrorRecoveryLevel"), "0");
  EXPECT_EQ(*value(op.text, "MaxConnections"), "1");
  EXPECT_EQ(*value(op.text, "HeaderDigest"), "None");

  auto fin = login_response(LoginStage::operational_negotiation, LoginStage::full_feature_phase, true);
  fin.stat_sn = SerialNumber(41);
  step = m.on_response(fin, {{"HeaderDigest", "None"},
                             {"DataDigest", "None"},
                             {"MaxConnections", "1"},
                             {"InitialR2T", "No"},
                             {"ImmediateData", "Yes"},
                             {"MaxRecvDataSegmentLength", "8192"},
                             {"MaxBurstLength", "262144"},
                             {"FirstBurstLength", "65536"},
                             {"DefaultTime2Wait", "2"},
                             {"DefaultTime2Retain", "0"},
                             {"MaxOutstandingR2T", "1"},
                             {"DataPDUInOrder", "Yes"},
                             {"DataSequenceInOrder", "Yes"},
                             {"ErrorRecoveryLevel", "0"}});
  ASSERT_TRUE(step) << step.error().message();
  auto& done = std::get<LoginDone>(*step);
  EXPECT_EQ(done.tsih, 0x1234);
  EXPECT_EQ(done.exp_stat_sn.value(), 42u);
  EXPECT_EQ(done.max_cmd_sn.value(), 32u);
  EXPECT_FALSE(done.parameters.initial_r2t);
  EXPECT_TRUE(done.parameters.immediate_data);
  EXPECT_EQ(done.parameters.max_burst_length, 262144u);
  EXPECT_EQ(done.parameters.first_burst_length, 65536u);
  EXPECT_EQ(done.parameters.target_max_recv_data_segment_length, 8192u);
  EXPECT_EQ(done.parameters.initiator_max_recv_data_segment_length, 1048576u);
}

TEST(Login, StraightToOperationalWithCrc32cDigests) {
  auto c = config(false);
  c.options.header_digest = Digest::crc32c;
  c.options.data_digest = Digest::crc32c;
  LoginMachine m(c);
  LoginSend first = m.start();
  EXPECT_EQ(first.request.csg, LoginStage::operational_negotiation);
  EXPECT_EQ(first.request.nsg, LoginStage::full_feature_phase);
  EXPECT_EQ(value(first.text, "AuthMethod"), nullptr);
  EXPECT_EQ(*value(first.text, "HeaderDigest"), "CRC32C,None");
  auto step = m.on_response(login_response(LoginStage::operational_negotiation, LoginStage::full_feature_phase, true),
                            {{"HeaderDigest", "CRC32C"}, {"DataDigest", "None"}});
  ASSERT_TRUE(step);
  auto& done = std::get<LoginDone>(*step);
  EXPECT_TRUE(done.parameters.header_digest_crc32c);
  EXPECT_FALSE(done.parameters.data_digest_crc32c);
}

TEST(Login, TargetThatDoesNotTransitGetsAnotherRound) {
  LoginMachine m(config(false));
  (void)m.start();
  // The target answers but stays in the stage and offers a key of its own.
  auto step = m.on_response(login_response(LoginStage::operational_negotiation, LoginStage::operational_negotiation, false),
                            {{"ImmediateData", "Yes"}, {"DefaultTime2Wait", "5"}});
  ASSERT_TRUE(step);
  auto& again = std::get<LoginSend>(*step);
  EXPECT_TRUE(again.request.transit);
  EXPECT_EQ(again.request.csg, LoginStage::operational_negotiation);
}

namespace {
// A fresh login (security stage first or not) started, then given `response` with `keys`.
Result<LoginStep> first_answer(bool security, const iscsi::LoginResponse& response, const iscsi::TextPairs& keys) {
  LoginMachine m(config(security));
  (void)m.start();
  return m.on_response(response, keys);
}
}  // namespace

TEST(Login, BadLoginStatusIsTypedErrorWithClassAndDetail) {
  auto r = login_response(LoginStage::security_negotiation, LoginStage::security_negotiation, false);
  r.status_class = 2;
  r.status_detail = 3;  // target not found
  auto step = first_answer(true, r, {});
  ASSERT_FALSE(step);
  EXPECT_EQ(step.error().category(), login_status_category());
  EXPECT_EQ(step.error().value(), 0x0203);
  EXPECT_NE(step.error().message().find("status=0x0203"), std::string::npos);
  EXPECT_NE(step.error().message().find("target not found"), std::string::npos);
  EXPECT_EQ(step.error(), make_login_error(2, 3));
  EXPECT_EQ(to_errno(step.error()), EACCES);
}

TEST(Login, ChapDemandedIsNegotiationFailure) {
  auto step = first_answer(true, login_response(LoginStage::security_negotiation, LoginStage::security_negotiation, false),
                           {{"AuthMethod", "CHAP"}});
  ASSERT_FALSE(step);
  EXPECT_EQ(step.error(), make_error_code(errc::negotiation_failed));
}

TEST(Login, MismatchedIttIsProtocolError) {
  auto r = login_response(LoginStage::security_negotiation, LoginStage::operational_negotiation, true);
  r.itt = iscsi::Itt{8};
  EXPECT_EQ(first_answer(true, r, {}).error(), make_error_code(errc::protocol_error));
}

TEST(Login, AnswerAboveOurMinOfferIsNegotiationFailure) {
  auto step = first_answer(false, login_response(LoginStage::operational_negotiation, LoginStage::full_feature_phase, true),
                           {{"MaxBurstLength", "99999999"}});
  ASSERT_FALSE(step);
  EXPECT_EQ(step.error(), make_error_code(errc::negotiation_failed));
}

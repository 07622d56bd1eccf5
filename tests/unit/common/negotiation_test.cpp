// Text negotiation (RFC 7143 §6.2, §13): result functions, declarations, bad answers.
#include "iserkit/iscsi/negotiation.hpp"

#include <gtest/gtest.h>

#include "iserkit/common/errors.hpp"

namespace iserkit::iscsi {
namespace {

NegotiationPolicy target_policy() {
  NegotiationPolicy p;
  p.wanted.initial_r2t = false;
  p.wanted.immediate_data = true;
  p.wanted.max_burst_length = 1048576;
  p.wanted.first_burst_length = 262144;
  p.wanted.max_outstanding_r2t = 8;
  p.wanted.target_max_recv_data_segment_length = 262144;
  p.header_digests = {"CRC32C", "None"};
  p.data_digests = {"None"};
  return p;
}

std::string answer(const TextPairs& pairs, std::string_view key) {
  const auto* v = find_value(pairs, key);
  return v ? *v : "<none>";
}

TEST(Negotiation, TableHasEveryRfc7143OperationalKey) {
  for (auto key : {"HeaderDigest", "DataDigest", "MaxConnections", "InitialR2T", "ImmediateData",
                   "MaxRecvDataSegmentLength", "MaxBurstLength", "FirstBurstLength", "DefaultTime2Wait",
                   "DefaultTime2Retain", "MaxOutstandingR2T", "DataPDUInOrder", "DataSequenceInOrder",
                   "ErrorRecoveryLevel", "SessionType", "InitiatorName", "TargetName", "TargetPortalGroupTag",
                   "RDMAExtensions", "InitiatorRecvDataSegmentLength", "TargetRecvDataSegmentLength"})
    EXPECT_NE(find_key(key), nullptr) << key;
}

TEST(Negotiation, ResponderAppliesResultFunctions) {
  Negotiation target(Role::target, target_policy());
  auto r = target.receive({{"HeaderDigest", "None,CRC32C"},
                           {"DataDigest", "CRC32C,None"},
                           {"InitialR2T", "Yes"},          // Or: Yes wins
                           {"ImmediateData", "Yes"},       // And: Yes && Yes
                           {"MaxBurstLength", "16776192"}, // Min
                           {"FirstBurstLength", "65536"},  // Min
                           {"DefaultTime2Wait", "0"},      // Max
                           {"MaxRecvDataSegmentLength", "131072"},
                           {"ErrorRecoveryLevel", "2"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(answer(*r, "HeaderDigest"), "None");  // the originator's order decides
  EXPECT_EQ(answer(*r, "DataDigest"), "None");
  EXPECT_EQ(answer(*r, "InitialR2T"), "Yes");
  EXPECT_EQ(answer(*r, "ImmediateData"), "Yes");
  EXPECT_EQ(answer(*r, "MaxBurstLength"), "1048576");
  EXPECT_EQ(answer(*r, "FirstBurstLength"), "65536");
  EXPECT_EQ(answer(*r, "DefaultTime2Wait"), "2");
  EXPECT_EQ(answer(*r, "ErrorRecoveryLevel"), "0");
  EXPECT_EQ(answer(*r, "MaxRecvDataSegmentLength"), "<none>");  // declarative: no answer
  const auto& p = target.parameters();
  EXPECT_FALSE(p.header_digest_crc32c);
  EXPECT_TRUE(p.initial_r2t);
  EXPECT_EQ(p.max_burst_length, 1048576u);
  EXPECT_EQ(p.initiator_max_recv_data_segment_length, 131072u);
  EXPECT_EQ(p.max_send_segment(Role::target), 131072u);
}

TEST(Negotiation, UnknownKeyIsNotUnderstoodAndBadValueRejected) {
  Negotiation target(Role::target, target_policy());
  auto r = target.receive({{"X-com.example.Foo", "1"}, {"MaxBurstLength", "100"}, {"InitialR2T", "Maybe"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(answer(*r, "X-com.example.Foo"), "NotUnderstood");
  EXPECT_EQ(answer(*r, "MaxBurstLength"), "Reject");  // below the 512 minimum
  EXPECT_EQ(answer(*r, "InitialR2T"), "Reject");
  EXPECT_EQ(target.parameters().max_burst_length, 262144u);  // default kept
}

TEST(Negotiation, ListWithNoCommonValueIsRejected) {
  Negotiation target(Role::target, target_policy());
  auto r = target.receive({{"DataDigest", "CRC32C"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(answer(*r, "DataDigest"), "Reject");
}

TEST(Negotiation, OriginatorAcceptsValidAnswers) {
  NegotiationPolicy p;
  p.wanted.max_burst_length = 1048576;
  p.wanted.initiator_max_recv_data_segment_length = 262144;
  p.header_digests = {"CRC32C", "None"};
  Negotiation initiator(Role::initiator, p);
  auto offers = initiator.offer({"HeaderDigest", "MaxBurstLength", "MaxRecvDataSegmentLength"});
  EXPECT_EQ(answer(offers, "HeaderDigest"), "CRC32C,None");
  EXPECT_EQ(answer(offers, "MaxRecvDataSegmentLength"), "262144");
  EXPECT_FALSE(initiator.all_answered());
  auto r = initiator.receive({{"HeaderDigest", "CRC32C"}, {"MaxBurstLength", "524288"},
                              {"MaxRecvDataSegmentLength", "65536"}, {"TargetPortalGroupTag", "1"}});
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->empty());
  EXPECT_TRUE(initiator.all_answered());
  const auto& q = initiator.parameters();
  EXPECT_TRUE(q.header_digest_crc32c);
  EXPECT_EQ(q.max_burst_length, 524288u);
  EXPECT_EQ(q.max_send_segment(Role::initiator), 65536u);
  EXPECT_EQ(q.max_recv_segment(Role::initiator), 262144u);
  EXPECT_EQ(q.target_portal_group_tag, 1);
}

TEST(Negotiation, OriginatorRefusesAnswerAboveMinOffer) {
  NegotiationPolicy p;
  p.wanted.max_burst_length = 65536;
  Negotiation initiator(Role::initiator, p);
  initiator.offer({"MaxBurstLength"});
  auto r = initiator.receive({{"MaxBurstLength", "1048576"}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), make_error_code(errc::negotiation_failed));
}

TEST(Negotiation, OriginatorRefusesListValueItDidNotOffer) {
  Negotiation initiator(Role::initiator, NegotiationPolicy{});
  initiator.offer({"HeaderDigest"});  // offers "None" only
  EXPECT_FALSE(initiator.receive({{"HeaderDigest", "CRC32C"}}));
}

TEST(Negotiation, AndOfferOfNoNeedsNoAnswer) {
  NegotiationPolicy p;
  p.wanted.immediate_data = false;
  p.wanted.initial_r2t = true;
  Negotiation initiator(Role::initiator, p);
  initiator.offer({"ImmediateData", "InitialR2T"});
  initiator.finish();  // RFC 7143 §6.2.1: the outcome is decided without a response
  EXPECT_FALSE(initiator.parameters().immediate_data);
  EXPECT_TRUE(initiator.parameters().initial_r2t);
  EXPECT_EQ(initiator.parameters().unsolicited_limit(), 0u);
}

TEST(Negotiation, RenegotiatingAKeyFails) {
  Negotiation target(Role::target, target_policy());
  ASSERT_TRUE(target.receive({{"MaxBurstLength", "65536"}}));
  EXPECT_FALSE(target.receive({{"MaxBurstLength", "65536"}}));
}

TEST(Negotiation, FinishClampsFirstBurstToMaxBurst) {
  NegotiationPolicy p;
  p.wanted.max_burst_length = 8192;
  p.wanted.first_burst_length = 65536;
  Negotiation target(Role::target, p);
  ASSERT_TRUE(target.receive({{"MaxBurstLength", "8192"}, {"FirstBurstLength", "65536"}}));
  target.finish();
  EXPECT_EQ(target.parameters().first_burst_length, 8192u);
}

TEST(Negotiation, HexNumbersAreAccepted) {
  Negotiation target(Role::target, target_policy());
  ASSERT_TRUE(target.receive({{"MaxRecvDataSegmentLength", "0x2000"}}));
  EXPECT_EQ(target.parameters().initiator_max_recv_data_segment_length, 8192u);
}

}  // namespace
}  // namespace iserkit::iscsi

// Key negotiation with RDMAExtensions (RFC 7145 §6): both roles, the per-role receive lengths, and
// MaxRecvDataSegmentLength being unused once RDMAExtensions=Yes (§6.2).
#include <gtest/gtest.h>

#include "iserkit/common/errors.hpp"
#include "iserkit/iscsi/negotiation.hpp"

namespace iserkit::iscsi {
namespace {

std::string answer(const TextPairs& pairs, std::string_view key) {
  const auto* v = find_value(pairs, key);
  return v ? *v : "<none>";
}

NegotiationPolicy iser_initiator() {
  NegotiationPolicy p;
  p.wanted.rdma_extensions = true;
  p.wanted.initiator_recv_data_segment_length = 8192;
  p.wanted.initiator_max_recv_data_segment_length = 262144;
  return p;
}

NegotiationPolicy iser_target(bool rdma) {
  NegotiationPolicy p;
  p.wanted.rdma_extensions = rdma;
  p.wanted.target_recv_data_segment_length = 16384;
  p.wanted.target_max_recv_data_segment_length = 262144;
  p.wanted.max_outstanding_unexpected_pdus = 16;
  p.header_digests = {"None", "CRC32C"};
  return p;
}

TEST(RdmaNegotiation, InitiatorOffersAndTargetAgrees) {
  Negotiation initiator(Role::initiator, iser_initiator());
  Negotiation target(Role::target, iser_target(true));
  auto offers = initiator.offer({"RDMAExtensions", "InitiatorRecvDataSegmentLength"});
  EXPECT_EQ(answer(offers, "RDMAExtensions"), "Yes");
  EXPECT_EQ(answer(offers, "InitiatorRecvDataSegmentLength"), "8192");
  auto answers = target.receive(offers);
  ASSERT_TRUE(answers);
  EXPECT_EQ(answer(*answers, "RDMAExtensions"), "Yes");                      // And: Yes && Yes
  EXPECT_EQ(answer(*answers, "InitiatorRecvDataSegmentLength"), "<none>");   // declarative
  auto declared = target.offer({"TargetRecvDataSegmentLength"});
  EXPECT_EQ(answer(declared, "TargetRecvDataSegmentLength"), "16384");
  answers->insert(answers->end(), declared.begin(), declared.end());
  ASSERT_TRUE(initiator.receive(*answers));
  initiator.finish();
  target.finish();
  for (const auto* p : {&initiator.parameters(), &target.parameters()}) {
    EXPECT_TRUE(p->rdma_extensions);
    EXPECT_EQ(p->initiator_recv_data_segment_length, 8192u);
    EXPECT_EQ(p->target_recv_data_segment_length, 16384u);
    // RFC 7145 §6.2: the control-PDU limits are the RDMA ones.
    EXPECT_EQ(p->max_send_segment(Role::initiator), 16384u);
    EXPECT_EQ(p->max_send_segment(Role::target), 8192u);
  }
}

TEST(RdmaNegotiation, TcpTargetAnswersNoAndMaxRecvDataSegmentLengthStays) {
  Negotiation target(Role::target, iser_target(false));
  auto answers = target.receive({{"RDMAExtensions", "Yes"}, {"MaxRecvDataSegmentLength", "65536"}});
  ASSERT_TRUE(answers);
  EXPECT_EQ(answer(*answers, "RDMAExtensions"), "No");
  target.finish();
  EXPECT_FALSE(target.parameters().rdma_extensions);
  EXPECT_EQ(target.parameters().initiator_max_recv_data_segment_length, 65536u);
}

TEST(RdmaNegotiation, MaxRecvDataSegmentLengthIsNotUsedWithRdmaExtensions) {
  // An initiator (open-iscsi does) still declares MaxRecvDataSegmentLength: it must not matter.
  Negotiation target(Role::target, iser_target(true));
  ASSERT_TRUE(target.receive({{"MaxRecvDataSegmentLength", "262144"},
                              {"RDMAExtensions", "Yes"},
                              {"HeaderDigest", "CRC32C,None"}}));
  target.offer({"TargetRecvDataSegmentLength", "MaxRecvDataSegmentLength"});
  target.finish();
  const auto& p = target.parameters();
  EXPECT_TRUE(p.rdma_extensions);
  // No InitiatorRecvDataSegmentLength declared: its default (8192) applies, not MaxRecvDataSegmentLength.
  EXPECT_EQ(p.initiator_max_recv_data_segment_length, 8192u);
  EXPECT_EQ(p.target_max_recv_data_segment_length, 16384u);
  // RFC 7145 §6.1: no digests on iSER, whatever was answered.
  EXPECT_FALSE(p.header_digest_crc32c);
}

TEST(RdmaNegotiation, ARoleCannotDeclareTheOthersReceiveLength) {
  // tgt answers InitiatorRecvDataSegmentLength as if it were a Min key; LIO declares both. Only the
  // side whose buffers a length describes decides it.
  Negotiation initiator(Role::initiator, iser_initiator());
  initiator.offer({"RDMAExtensions", "InitiatorRecvDataSegmentLength"});
  ASSERT_TRUE(initiator.receive({{"RDMAExtensions", "Yes"},
                                 {"InitiatorRecvDataSegmentLength", "262144"},
                                 {"TargetRecvDataSegmentLength", "4096"}}));
  initiator.finish();
  EXPECT_EQ(initiator.parameters().initiator_recv_data_segment_length, 8192u);
  EXPECT_EQ(initiator.parameters().target_recv_data_segment_length, 4096u);
}

TEST(RdmaNegotiation, RdmaLengthsProposedByThePeerAreAnsweredOnlyWhenAskedFor) {
  // LIO proposes both lengths when the initiator has not declared them. With answer_rdma_lengths
  // each gets one answer: the peer's own length echoed, ours stated for ours.
  auto policy = iser_initiator();
  policy.answer_rdma_lengths = true;
  Negotiation initiator(Role::initiator, policy);
  initiator.offer({"RDMAExtensions"});
  auto answers = initiator.receive({{"RDMAExtensions", "Yes"},
                                    {"InitiatorRecvDataSegmentLength", "262144"},
                                    {"TargetRecvDataSegmentLength", "0x1000"}});
  ASSERT_TRUE(answers);
  EXPECT_EQ(answer(*answers, "TargetRecvDataSegmentLength"), "0x1000");
  EXPECT_EQ(answer(*answers, "InitiatorRecvDataSegmentLength"), "8192");
  EXPECT_EQ(answers->size(), 2u);
  // A repeat of the declarations is not answered twice.
  auto again = initiator.receive({{"TargetRecvDataSegmentLength", "4096"}});
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->empty());
  initiator.finish();
  EXPECT_EQ(initiator.parameters().initiator_max_recv_data_segment_length, 8192u);
  EXPECT_EQ(initiator.parameters().target_max_recv_data_segment_length, 4096u);

  // Without the policy (the default, and our target's) declarations stay unanswered (RFC 7145 §6.4).
  Negotiation plain(Role::initiator, iser_initiator());
  plain.offer({"RDMAExtensions"});
  auto none = plain.receive({{"RDMAExtensions", "Yes"}, {"TargetRecvDataSegmentLength", "4096"}});
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
}

TEST(RdmaNegotiation, OurOwnDeclarationIsNotAnsweredWhenThePeerEchoesIt) {
  auto policy = iser_initiator();
  policy.answer_rdma_lengths = true;
  Negotiation initiator(Role::initiator, policy);
  initiator.offer({"RDMAExtensions", "InitiatorRecvDataSegmentLength"});
  auto answers = initiator.receive({{"RDMAExtensions", "Yes"}, {"InitiatorRecvDataSegmentLength", "8192"}});
  ASSERT_TRUE(answers);
  EXPECT_TRUE(answers->empty());
}

TEST(RdmaNegotiation, TargetAnswersRdmaExtensionsNoWhenNotOffered) {
  Negotiation initiator(Role::initiator, iser_initiator());
  initiator.offer({"RDMAExtensions", "MaxRecvDataSegmentLength"});
  ASSERT_TRUE(initiator.receive({{"RDMAExtensions", "No"}}));
  initiator.finish();
  EXPECT_FALSE(initiator.parameters().rdma_extensions);
  EXPECT_EQ(initiator.parameters().initiator_max_recv_data_segment_length, 262144u);
}

TEST(RdmaNegotiation, MaxOutstandingUnexpectedPdusIsMinimumWithZeroAsNoLimit) {
  Negotiation target(Role::target, iser_target(true));
  auto a = target.receive({{"MaxOutstandingUnexpectedPDUs", "0"}});
  ASSERT_TRUE(a);
  EXPECT_EQ(answer(*a, "MaxOutstandingUnexpectedPDUs"), "16");  // the peer has no limit: ours applies
  Negotiation other(Role::target, iser_target(true));
  a = other.receive({{"MaxOutstandingUnexpectedPDUs", "4"}});
  ASSERT_TRUE(a);
  EXPECT_EQ(answer(*a, "MaxOutstandingUnexpectedPDUs"), "4");
  EXPECT_EQ(other.parameters().max_outstanding_unexpected_pdus, 4u);
  // As originator: an answer above the offer breaks the Min rule.
  Negotiation initiator(Role::initiator, iser_target(true));
  initiator.offer({"MaxOutstandingUnexpectedPDUs"});
  EXPECT_EQ(initiator.receive({{"MaxOutstandingUnexpectedPDUs", "32"}}).error(),
            make_error_code(errc::negotiation_failed));
}

}  // namespace
}  // namespace iserkit::iscsi

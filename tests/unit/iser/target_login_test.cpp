// The target's login on an iSER connection (RFC 7145 §5.1, §6): RDMAExtensions required,
// TargetRecvDataSegmentLength declared instead of MaxRecvDataSegmentLength, no digests, InitialR2T.
#include <gtest/gtest.h>

#include "login.hpp"
#include "../target_iscsi/target_node_helpers.hpp"

namespace iserkit::target {
namespace {

using iscsi::LoginStage;
constexpr const char* target_name = "iqn.2026-11.org.iserkit:unit";

struct IserLogin : ::testing::Test {
  IserLogin() { EXPECT_TRUE(registry.add(test::make_node(target_name))); }
  LoginStep send(const iscsi::TextPairs& pairs) {
    return test::login_to_full_feature(machine, LoginStage::operational_negotiation, pairs);
  }
  static const std::string* value(const LoginStep& s, std::string_view k) {
    static iscsi::TextPairs keep;
    keep = iscsi::decode_text(s.text).value();
    return iscsi::find_value(keep, k);
  }
  TargetRegistry registry;
  LoginMachine machine{registry, TargetLoginOptions{.cmd_window_depth = 64, .rdma = true,
                                                    .rdma_recv_data_segment_length = 8192,
                                                    .max_outstanding_unexpected_pdus = 80}};
  iscsi::TextPairs names{{"InitiatorName", "iqn.2026-11.org.test:init"}, {"TargetName", target_name}};
};

TEST_F(IserLogin, LinuxStyleLoginGetsIserAnswers) {
  auto pairs = names;
  // What open-iscsi sends for an iser iface: RDMAExtensions with the usual keys, digests None,
  // and a MaxRecvDataSegmentLength that does not apply on iSER.
  pairs.insert(pairs.end(), {{"RDMAExtensions", "Yes"}, {"HeaderDigest", "CRC32C,None"}, {"InitialR2T", "No"},
                             {"ImmediateData", "Yes"}, {"MaxRecvDataSegmentLength", "262144"},
                             {"MaxOutstandingUnexpectedPDUs", "0"}});
  auto step = send(pairs);
  ASSERT_EQ(step.action, LoginAction::send_then_full_feature);
  EXPECT_EQ(*value(step, "RDMAExtensions"), "Yes");
  EXPECT_EQ(*value(step, "HeaderDigest"), "None");
  EXPECT_EQ(*value(step, "InitialR2T"), "Yes");  // Or: the target's Yes wins
  EXPECT_EQ(*value(step, "TargetRecvDataSegmentLength"), "8192");
  EXPECT_EQ(value(step, "MaxRecvDataSegmentLength"), nullptr);
  EXPECT_EQ(*value(step, "MaxOutstandingUnexpectedPDUs"), "80");
  const auto& p = machine.result().parameters;
  EXPECT_TRUE(p.rdma_extensions);
  EXPECT_EQ(p.target_max_recv_data_segment_length, 8192u);
  EXPECT_EQ(p.initiator_max_recv_data_segment_length, 8192u);  // IRDSL default, not the 262144
}

TEST_F(IserLogin, NoRdmaExtensionsOnAnIserConnectionIsRefused) {
  auto step = send(names);
  EXPECT_EQ(step.action, LoginAction::send_then_close);
  EXPECT_EQ(step.response.status_class, 2);
  EXPECT_EQ(step.response.status_detail, 7);  // missing parameter
}

TEST(TcpLogin, RdmaExtensionsAnsweredNoOverTcp) {
  TargetRegistry registry;
  ASSERT_TRUE(registry.add(test::make_node(target_name)));
  LoginMachine machine{registry, TargetLoginOptions{}};
  auto step = test::login_to_full_feature(machine, LoginStage::operational_negotiation,
                                          {{"InitiatorName", "iqn.2026-11.org.test:init"},
                                           {"TargetName", target_name},
                                           {"RDMAExtensions", "Yes"}});
  ASSERT_EQ(step.action, LoginAction::send_then_full_feature);
  auto pairs = iscsi::decode_text(step.text).value();
  EXPECT_EQ(*iscsi::find_value(pairs, "RDMAExtensions"), "No");
  EXPECT_NE(iscsi::find_value(pairs, "MaxRecvDataSegmentLength"), nullptr);
}

}  // namespace
}  // namespace iserkit::target

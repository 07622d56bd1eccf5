// The initiator's iSER pieces without a device: transport selection (iser://, --transport), the
// iSER login offers (RFC 7145 §6), and the per-task data descriptor an RDMA datamover prepares
// (datamover::TaskData: zero copy from registered memory, a counted bounce otherwise; TCP's costs
// nothing).
#include <gtest/gtest.h>

#include <new>
#include <vector>

#include "arena_pool.hpp"
#include "iserkit/common/copy_counter.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/datamover/iser_datamover.hpp"
#include "iserkit/initiator/session.hpp"
#include "login.hpp"

namespace iserkit::initiator {
namespace {

using datamover::Transport;

TEST(IserTransport, SelectionFollowsUrlAndPolicy) {
  Url tcp_url = *parse_url("iscsi://h/iqn.x:y/0");
  Url iser_url = *parse_url("iser://h/iqn.x:y/0");
  EXPECT_EQ(iser_url.transport, Transport::iser);
  EXPECT_EQ(select_transports(tcp_url, TransportPolicy::from_url), std::vector{Transport::tcp});
  EXPECT_EQ(select_transports(iser_url, TransportPolicy::from_url), std::vector{Transport::iser});
  EXPECT_EQ(select_transports(iser_url, TransportPolicy::tcp), std::vector{Transport::tcp});
  EXPECT_EQ(select_transports(tcp_url, TransportPolicy::iser), std::vector{Transport::iser});
  const auto automatic = select_transports(tcp_url, TransportPolicy::automatic);
  if (datamover::iser_built()) {
    EXPECT_EQ(automatic, (std::vector{Transport::iser, Transport::tcp}));  // iSER first, then TCP
  } else {
    EXPECT_EQ(automatic, std::vector{Transport::tcp});
  }
}

TEST(IserTransport, ParsePolicy) {
  EXPECT_EQ(parse_transport_policy("auto"), TransportPolicy::automatic);
  EXPECT_EQ(parse_transport_policy("iser"), TransportPolicy::iser);
  EXPECT_EQ(parse_transport_policy("tcp"), TransportPolicy::tcp);
  EXPECT_EQ(parse_transport_policy("url"), TransportPolicy::from_url);
  EXPECT_FALSE(parse_transport_policy("rdma"));
}

const std::string* value(const iscsi::TextPairs& p, std::string_view k) { return iscsi::find_value(p, k); }

LoginConfig iser_config() {
  LoginConfig c;
  c.initiator_name = "iqn.2026-11.org.iserkit:test";
  c.target_name = "iqn.2026-11.org.example:vol1";
  c.isid = {std::byte{0x80}, std::byte{1}, std::byte{2}, std::byte{3}, std::byte{0}, std::byte{1}};
  c.itt = iscsi::Itt{7};
  c.cmd_sn = SerialNumber(1);
  c.options.security_stage = false;
  c.options.iser_recv_data_segment_length = 8192;
  c.rdma = true;
  return c;
}

iscsi::LoginResponse final_response(const LoginConfig& c) {
  iscsi::LoginResponse r;
  r.transit = true;
  r.csg = iscsi::LoginStage::operational_negotiation;
  r.nsg = iscsi::LoginStage::full_feature_phase;
  r.isid = c.isid;
  r.itt = c.itt;
  r.tsih = 3;
  r.stat_sn = SerialNumber(1);
  r.exp_cmd_sn = SerialNumber(1);
  r.max_cmd_sn = SerialNumber(64);
  return r;
}

TEST(IserLogin, OffersRdmaExtensionsInsteadOfDigestsAndMaxRecvDataSegmentLength) {
  LoginMachine m(iser_config());
  auto first = m.start();
  EXPECT_EQ(*value(first.text, "RDMAExtensions"), "Yes");
  EXPECT_EQ(*value(first.text, "InitiatorRecvDataSegmentLength"), "8192");
  // Zero copy on our side: all write data is RDMA-read by the target.
  EXPECT_EQ(*value(first.text, "ImmediateData"), "No");
  EXPECT_EQ(*value(first.text, "InitialR2T"), "Yes");
  EXPECT_EQ(value(first.text, "MaxRecvDataSegmentLength"), nullptr);  // RFC 7145 §6.2: not used
  EXPECT_EQ(value(first.text, "HeaderDigest"), nullptr);              // RFC 7145 §6.1
  EXPECT_EQ(value(first.text, "DataDigest"), nullptr);
}

TEST(IserLogin, TargetAgreesAndLimitsComeFromTheRdmaKeys) {
  const auto c = iser_config();
  LoginMachine m(c);
  m.start();
  auto step = m.on_response(final_response(c), {{"RDMAExtensions", "Yes"},
                                                {"TargetRecvDataSegmentLength", "4096"},
                                                {"ImmediateData", "No"},
                                                {"InitialR2T", "Yes"},
                                                {"MaxRecvDataSegmentLength", "262144"}});
  ASSERT_TRUE(step);
  const auto& done = std::get<LoginDone>(*step);
  EXPECT_TRUE(done.parameters.rdma_extensions);
  EXPECT_EQ(done.parameters.max_send_segment(iscsi::Role::initiator), 4096u);  // TRDSL, not MRDSL
  EXPECT_EQ(done.parameters.max_recv_segment(iscsi::Role::initiator), 8192u);
  EXPECT_FALSE(done.parameters.immediate_data);
}

TEST(IserLogin, TargetWithoutRdmaExtensionsFailsTheLogin) {
  const auto c = iser_config();
  LoginMachine m(c);
  m.start();
  auto step = m.on_response(final_response(c), {{"RDMAExtensions", "No"}});
  ASSERT_FALSE(step);
  EXPECT_EQ(step.error(), make_error_code(errc::negotiation_failed));
}

TEST(IserLogin, DiscoverySessionNeedsNoRdmaExtensionsAnswer) {
  auto c = iser_config();
  c.discovery = true;
  LoginMachine m(c);
  auto first = m.start();
  EXPECT_EQ(*value(first.text, "SessionType"), "Discovery");
  // The target answers nothing for RDMAExtensions (as tgtd does in discovery): the text exchange
  // still runs, since no SCSI data will move.
  auto step = m.on_response(final_response(c), {{"TargetRecvDataSegmentLength", "8192"}});
  ASSERT_TRUE(step);
  EXPECT_TRUE(std::holds_alternative<LoginDone>(*step));
}

// LIO's isert (iscsi_target_parameters.c) over iSER: it answers our offers, echoes our
// InitiatorRecvDataSegmentLength, proposes its own TargetRecvDataSegmentLength as a negotiated
// number, and keeps T=0 ("No response for proposed key") until that proposal is answered.
iscsi::TextPairs lio_first_response_text() {
  return {{"MaxConnections", "1"},         {"TargetPortalGroupTag", "1"},
          {"MaxBurstLength", "262144"},    {"FirstBurstLength", "65536"},
          {"DefaultTime2Wait", "2"},       {"DefaultTime2Retain", "0"},
          {"MaxOutstandingR2T", "1"},      {"ErrorRecoveryLevel", "0"},
          {"RDMAExtensions", "Yes"},       {"InitiatorRecvDataSegmentLength", "8192"},
          {"TargetRecvDataSegmentLength", "8192"}, {"TargetAlias", "LIO Target"}};
}

iscsi::LoginResponse lio_partial_response(const LoginConfig& c) {
  auto r = final_response(c);
  r.transit = false;  // LIO withholds transit while a proposal of its own is unanswered
  r.nsg = iscsi::LoginStage::operational_negotiation;
  r.tsih = 0;
  return r;
}

std::size_t count_key(const iscsi::TextPairs& p, std::string_view k) {
  std::size_t n = 0;
  for (const auto& pair : p) n += pair.key == k ? 1 : 0;
  return n;
}

TEST(IserLogin, LioProposalOfTargetRecvDataSegmentLengthIsAnsweredThenLoginCompletes) {
  const auto c = iser_config();
  LoginMachine m(c);
  m.start();
  auto second = m.on_response(lio_partial_response(c), lio_first_response_text());
  ASSERT_TRUE(second);
  const auto* send = std::get_if<LoginSend>(&*second);
  ASSERT_NE(send, nullptr);
  EXPECT_TRUE(send->request.transit);
  EXPECT_EQ(send->request.csg, iscsi::LoginStage::operational_negotiation);
  // The answer LIO waits for, once; nothing else is offered again (a repeat is a protocol error to LIO).
  EXPECT_EQ(count_key(send->text, "TargetRecvDataSegmentLength"), 1u);
  EXPECT_EQ(*value(send->text, "TargetRecvDataSegmentLength"), "8192");
  EXPECT_EQ(value(send->text, "InitiatorRecvDataSegmentLength"), nullptr);  // ours, echoed by LIO
  EXPECT_EQ(value(send->text, "RDMAExtensions"), nullptr);
  EXPECT_EQ(value(send->text, "MaxBurstLength"), nullptr);

  auto done_step = m.on_response(final_response(c), {});
  ASSERT_TRUE(done_step);
  const auto* done = std::get_if<LoginDone>(&*done_step);
  ASSERT_NE(done, nullptr);
  EXPECT_TRUE(done->parameters.rdma_extensions);
  EXPECT_EQ(done->parameters.max_send_segment(iscsi::Role::initiator), 8192u);
  EXPECT_EQ(done->parameters.max_recv_segment(iscsi::Role::initiator), 8192u);
  EXPECT_EQ(done->parameters.max_burst_length, 262144u);
}

TEST(IserLogin, TargetRecvDataSegmentLengthAnswerEchoesTheTargetsOwnValue) {
  auto c = iser_config();
  c.options.iser_recv_data_segment_length = 16384;
  LoginMachine m(c);
  m.start();
  auto text = lio_first_response_text();
  for (auto& p : text) {
    if (p.key == "TargetRecvDataSegmentLength") p.value = "262144";
    if (p.key == "InitiatorRecvDataSegmentLength") p.value = "16384";
  }
  auto second = m.on_response(lio_partial_response(c), text);
  ASSERT_TRUE(second);
  const auto& send = std::get<LoginSend>(*second);
  // The length describes the target's buffers: we state the target's value back, not a default.
  EXPECT_EQ(*value(send.text, "TargetRecvDataSegmentLength"), "262144");
  auto done_step = m.on_response(final_response(c), {});
  ASSERT_TRUE(done_step);
  const auto& done = std::get<LoginDone>(*done_step);
  EXPECT_EQ(done.parameters.max_send_segment(iscsi::Role::initiator), 262144u);
  EXPECT_EQ(done.parameters.max_recv_segment(iscsi::Role::initiator), 16384u);
}

TEST(IserLogin, TargetThatDeclaresTargetRecvDataSegmentLengthWithTransitNeedsNoSecondRound) {
  // tgtd and iserkit-target declare it in the final response: the login ends there.
  const auto c = iser_config();
  LoginMachine m(c);
  m.start();
  auto step = m.on_response(final_response(c), {{"RDMAExtensions", "Yes"}, {"TargetRecvDataSegmentLength", "8192"}});
  ASSERT_TRUE(step);
  EXPECT_TRUE(std::holds_alternative<LoginDone>(*step));
}

using datamover::TaskData;
using test::ArenaPool;

TEST(TaskDataDescriptor, RegisteredMemoryIsAdvertisedWithoutCopy) {
  ArenaPool pool;
  auto lease = pool.allocate(8192);
  const auto before = copied_payload_bytes();
  auto t = TaskData::registered(pool, lease.bytes().subspan(4096, 4096), {});
  ASSERT_TRUE(t);
  ASSERT_TRUE(t->read_region());
  EXPECT_FALSE(t->write_region());
  EXPECT_EQ(t->read_region()->rkey, ArenaPool::rkey);
  EXPECT_EQ(t->read_region()->bytes.data(), lease.data() + 4096);  // the caller's own bytes
  EXPECT_EQ(t->data_in().data(), lease.data() + 4096);
  EXPECT_FALSE(t->bounced());
  t->finish(4096);
  EXPECT_EQ(copied_payload_bytes(), before);
}

TEST(TaskDataDescriptor, PlainMemoryGoesThroughACountedBounce) {
  ArenaPool pool;
  std::vector<std::byte> plain(1000, std::byte{7});
  const auto before = copied_payload_bytes();
  {
    auto t = TaskData::registered(pool, {}, plain);
    ASSERT_TRUE(t);
    ASSERT_TRUE(t->write_region());
    EXPECT_TRUE(t->bounced());
    EXPECT_NE(t->data_out().data(), plain.data());
    EXPECT_EQ(t->write_region()->bytes.data(), t->data_out().data());
    EXPECT_EQ(t->data_out()[999], std::byte{7});
    if (copy_counter_enabled) {
      EXPECT_EQ(copied_payload_bytes() - before, 1000u);
    }
  }
  std::vector<std::byte> sink(1000);
  auto t = TaskData::registered(pool, sink, {});
  ASSERT_TRUE(t);
  ASSERT_TRUE(t->read_region());
  EXPECT_NE(t->data_in().data(), sink.data());
  std::fill(t->data_in().begin(), t->data_in().end(), std::byte{9});  // "the target's RDMA Write"
  t->finish(800);  // underflow: only 800 bytes came
  EXPECT_EQ(sink[799], std::byte{9});
  EXPECT_EQ(sink[800], std::byte{0});
  t->finish(1000);  // at most once
  EXPECT_EQ(sink[800], std::byte{0});
  if (copy_counter_enabled) {
    EXPECT_EQ(copied_payload_bytes() - before, 1800u);
  }
}

TEST(TaskDataDescriptor, DirectIsTheCallersSpansAndNothingElse) {
  std::vector<std::byte> in(512);
  const std::vector<std::byte> out(256, std::byte{1});
  const auto before = copied_payload_bytes();
  auto t = TaskData::direct(in, out);
  EXPECT_EQ(t.data_in().data(), in.data());
  EXPECT_EQ(t.data_in().size(), 512u);
  EXPECT_EQ(t.data_out().data(), out.data());
  EXPECT_FALSE(t.read_region());
  EXPECT_FALSE(t.write_region());
  EXPECT_FALSE(t.bounced());
  t.finish(512);
  EXPECT_EQ(copied_payload_bytes(), before);
}

// A pool that cannot lease (registered memory exhausted): the preparation fails with a clear
// error and the caller's bytes are untouched.
class ExhaustedPool final : public BufferPool {
 public:
  PooledBuffer allocate(std::size_t) override { throw std::bad_alloc(); }

 private:
  void release(const Buffer&, std::size_t) noexcept override {}
};

TEST(TaskDataDescriptor, NoBounceBufferIsAnErrorNotACrash) {
  ExhaustedPool pool;
  std::vector<std::byte> plain(64, std::byte{3});
  auto t = TaskData::registered(pool, {}, plain);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error(), std::make_error_code(std::errc::not_enough_memory));
  EXPECT_EQ(plain[0], std::byte{3});
}

// A descriptor moves (e.g. out of prepare_task_data()) without losing its bounce buffer.
TEST(TaskDataDescriptor, MovingKeepsTheBounceBuffer) {
  ArenaPool pool;
  std::vector<std::byte> sink(100);
  auto t = TaskData::registered(pool, sink, {});
  ASSERT_TRUE(t);
  TaskData moved = std::move(*t);
  ASSERT_TRUE(moved.read_region());
  EXPECT_TRUE(moved.bounced());
  std::fill(moved.data_in().begin(), moved.data_in().end(), std::byte{4});
  moved.finish(100);
  EXPECT_EQ(sink[99], std::byte{4});
}

}  // namespace
}  // namespace iserkit::initiator

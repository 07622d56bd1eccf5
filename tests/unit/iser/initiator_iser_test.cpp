// The initiator's iSER pieces without a device: transport selection (iser://, --transport), the
// iSER login offers (RFC 7145 §6), and the per-task data descriptor an RDMA datamover prepares
// (datamover::TaskData: zero copy from registered memory, a counted bounce otherwise; TCP's costs
// nothing), and per-command STags (their release on completion and on a command timeout).
#include <gtest/gtest.h>

#include <new>
#include <vector>

#include "arena_pool.hpp"
#include "iserkit/common/copy_counter.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/datamover/iser_datamover.hpp"
#include "initiator_rig.hpp"
#include "iserkit/initiator/session.hpp"
#include "login.hpp"
#include "session_rig.hpp"

namespace iserkit::initiator {
namespace {

using namespace std::chrono_literals;

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
  LoginConfig c = test::harness::default_login_config();
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

// LIO's isert (iscsi_target_parameters.c) over iSER: it answers our offers (leaving out the And/Or
// answers our offers already decide), echoes the RDMA lengths we declared as an acceptor would,
// and names its portal group and alias. Had we not sent TargetRecvDataSegmentLength, it would
// have proposed it and kept T=0 until answered ("No response for proposed key").
iscsi::TextPairs lio_response_text() {
  return {{"MaxConnections", "1"},         {"TargetPortalGroupTag", "1"},
          {"MaxBurstLength", "262144"},    {"FirstBurstLength", "65536"},
          {"DefaultTime2Wait", "2"},       {"DefaultTime2Retain", "0"},
          {"MaxOutstandingR2T", "1"},      {"ErrorRecoveryLevel", "0"},
          {"RDMAExtensions", "Yes"},       {"InitiatorRecvDataSegmentLength", "8192"},
          {"TargetRecvDataSegmentLength", "8192"}, {"TargetAlias", "LIO Target"}};
}

TEST(IserLogin, DeclaresTargetRecvDataSegmentLengthSoLioTransitsInOneRound) {
  const auto c = iser_config();
  LoginMachine m(c);
  auto first = m.start();
  // What LIO needs answered before it sets T (open-iscsi and FreeBSD's iscsid send it too).
  EXPECT_EQ(*value(first.text, "TargetRecvDataSegmentLength"), "8192");
  auto step = m.on_response(final_response(c), lio_response_text());
  ASSERT_TRUE(step);
  const auto* done = std::get_if<LoginDone>(&*step);
  ASSERT_NE(done, nullptr);
  EXPECT_TRUE(done->parameters.rdma_extensions);
  EXPECT_EQ(done->parameters.max_send_segment(iscsi::Role::initiator), 8192u);
  EXPECT_EQ(done->parameters.max_recv_segment(iscsi::Role::initiator), 8192u);
  EXPECT_EQ(done->parameters.max_burst_length, 262144u);
  EXPECT_EQ(done->parameters.first_burst_length, 65536u);
}

TEST(IserLogin, LioEchoesInAPartialResponseGetNoSecondAnswer) {
  // A LIO that still withholds T (e.g. while CHAP or another key is pending) echoes our lengths:
  // they are ours, so the next request carries no TargetRecvDataSegmentLength of its own.
  const auto c = iser_config();
  LoginMachine m(c);
  m.start();
  auto partial = final_response(c);
  partial.transit = false;
  partial.nsg = iscsi::LoginStage::operational_negotiation;
  partial.tsih = 0;
  auto second = m.on_response(partial, lio_response_text());
  ASSERT_TRUE(second);
  const auto& send = std::get<LoginSend>(*second);
  EXPECT_TRUE(send.request.transit);
  EXPECT_EQ(value(send.text, "TargetRecvDataSegmentLength"), nullptr);
  EXPECT_EQ(value(send.text, "InitiatorRecvDataSegmentLength"), nullptr);
  auto done_step = m.on_response(final_response(c), {});
  ASSERT_TRUE(done_step);
  EXPECT_TRUE(std::holds_alternative<LoginDone>(*done_step));
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

// Per-command STags (iSER memory windows, RFC 7145 §9.2): the peer reaches a command's buffer
// only while it lives. A timed-out command's STag is given back (the iSER datamover invalidates
// it) before the caller gets its buffer back; the command is aborted with ABORT TASK and, since
// the buffer is no longer exposed (exposes_task_buffers false), the connection survives.
struct RecordingStagOwner final : datamover::StagOwner {
  std::vector<std::uint32_t> released;
  std::vector<bool> answered;  // per release: the command ended with its SCSI Response
  void release_stag(std::uint32_t slot, bool with_response) noexcept override {
    released.push_back(slot);
    answered.push_back(with_response);
  }
};

TEST(IserSessionStags, TimedOutCommandsStagIsReleasedAndTheConnectionSurvives) {
  SessionOptions o;
  o.command_timeout = 100ms;
  test::SessionRig rig(o, {}, datamover::Capabilities{.rdma_data = true, .exposes_task_buffers = false});
  auto owner = std::make_shared<RecordingStagOwner>();
  rig.dm->bind_stags_with(owner);
  iscsi::Itt silent_itt = iscsi::reserved_itt;
  Completion abort_answered;
  rig.dm->respond_with([&](test::FakeDatamover& d, const test::CapturedPdu& pdu) {
    if (const auto* c = pdu.as<iscsi::ScsiCommand>()) {
      if (c->read) {
        silent_itt = c->itt;  // never answered
      } else {
        d.push(test::response_for(*c));
      }
    } else if (const auto* t = pdu.as<iscsi::TaskManagementRequest>()) {
      EXPECT_EQ(t->function, iscsi::TaskManagementFunction::abort_task);
      EXPECT_EQ(t->referenced_task_tag, silent_itt);
      iscsi::TaskManagementResponse r;
      r.itt = t->itt;
      d.push(r);
      abort_answered.complete();
    }
  });
  std::vector<std::byte> buffer(512);
  std::vector<std::byte> payload(512, std::byte{1});
  rig.run([&]() -> Awaitable<void> {
    auto r = co_await rig.session->execute(test::read10(buffer));
    test::expect_error(r, make_error_code(errc::timeout));
    // The caller has its buffer back: its STag was given back by then, exactly once.
    EXPECT_EQ(owner->released, (std::vector<std::uint32_t>{1}));
    // Not answered: the target may still write into it, so its Local Invalidate is not delayed.
    EXPECT_EQ(owner->answered, (std::vector<bool>{false}));
    co_await abort_answered.wait();
    EXPECT_TRUE(rig.session->is_open());
    EXPECT_FALSE(rig.dm->closed());
    CommandRequest w;  // a WRITE(10) with data: a new STag, given back when it completes
    w.cdb.length = 10;
    w.cdb.bytes[0] = std::byte{0x2a};
    w.data_out = payload;
    auto again = co_await rig.session->execute(w);
    EXPECT_TRUE(again) << (again ? "" : again.error().message());
    EXPECT_EQ(owner->released, (std::vector<std::uint32_t>{1, 2}));
    EXPECT_EQ(owner->answered, (std::vector<bool>{false, true}));  // the write got its response
  });
  EXPECT_TRUE(abort_answered.done());
}

// A per-command STag (iSER memory window) replaces the pool's rkey in what the iSER header
// carries, survives a move, and is given back exactly once when the descriptor ends.
struct CountingStagOwner final : datamover::StagOwner {
  std::vector<std::uint32_t> released;
  std::vector<bool> answered;
  void release_stag(std::uint32_t slot, bool with_response) noexcept override {
    released.push_back(slot);
    answered.push_back(with_response);
  }
};

TEST(TaskDataDescriptor, PerCommandStagIsAdvertisedAndGivenBackOnce) {
  ArenaPool pool;
  auto lease = pool.allocate(4096);
  auto owner = std::make_shared<CountingStagOwner>();
  {
    auto t = TaskData::registered(pool, lease.bytes(), {});
    ASSERT_TRUE(t);
    EXPECT_EQ(t->read_stag(), ArenaPool::rkey);  // not bound yet: the pool's own
    EXPECT_FALSE(t->stags_bound());
    t->bind_stag(false, 0x777, datamover::StagLease(owner, 9));  // no write region: given back at once
    EXPECT_EQ(owner->released, (std::vector<std::uint32_t>{9}));
    EXPECT_EQ(owner->answered, (std::vector<bool>{false}));
    EXPECT_EQ(t->write_stag(), 0u);
    owner->released.clear();
    owner->answered.clear();
    t->bind_stag(true, 0xabc01, datamover::StagLease(owner, 3));
    EXPECT_TRUE(t->stags_bound());
    EXPECT_EQ(t->read_stag(), 0xabc01u);
    EXPECT_EQ(t->write_stag(), 0u);
    TaskData moved = std::move(*t);
    EXPECT_EQ(moved.read_stag(), 0xabc01u);
    EXPECT_TRUE(owner->released.empty());  // a move gives nothing back
  }
  EXPECT_EQ(owner->released, (std::vector<std::uint32_t>{3}));
  EXPECT_EQ(owner->answered, (std::vector<bool>{false}));  // never finished: not answered
}

// finish() (the command got its SCSI Response) makes the descriptor give its STags back as
// answered, also across a move; without it they go back unanswered.
TEST(TaskDataDescriptor, AFinishedCommandGivesItsStagBackAnswered) {
  ArenaPool pool;
  auto in = pool.allocate(4096);
  auto out = pool.allocate(4096);
  auto owner = std::make_shared<CountingStagOwner>();
  {
    auto t = TaskData::registered(pool, in.bytes(), {});
    ASSERT_TRUE(t);
    t->bind_stag(true, 0x101, datamover::StagLease(owner, 4));
    t->finish(4096);
    TaskData moved = std::move(*t);
    EXPECT_TRUE(owner->released.empty());
  }
  {
    auto t = TaskData::registered(pool, {}, out.bytes());
    ASSERT_TRUE(t);
    t->bind_stag(false, 0x202, datamover::StagLease(owner, 5));
  }
  EXPECT_EQ(owner->released, (std::vector<std::uint32_t>{4, 5}));
  EXPECT_EQ(owner->answered, (std::vector<bool>{true, false}));
}

}  // namespace
}  // namespace iserkit::initiator

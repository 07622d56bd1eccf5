// The Session driver (session.cpp) end to end in-process: a real Session over FakeDatamover, a
// scripted target answering through the fake's responder. Read, write with R2T, command timeout
// with ABORT TASK, connection loss, logout.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <utility>

#include "arena_pool.hpp"
#include "fake_datamover.hpp"
#include "iserkit/common/copy_counter.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/initiator/discovery.hpp"
#include "iserkit/iscsi/text.hpp"
#include "session_rig.hpp"

using namespace iserkit;
using namespace iserkit::initiator;
using namespace std::chrono_literals;
using test::CapturedPdu;
using test::FakeDatamover;
using test::ArenaPool;

// The driver rig and builders shared with session_driver_recovery_test.cpp (tests/unit/support).
using Rig = test::SessionRig;
using test::expect_error;
using test::expect_good;
using test::read10;
using test::response_for;

namespace {
/// Plays a target that answers a read with two Data-In PDUs of 4096 bytes each (0x10s, then
/// 0x11s), the second carrying GOOD status.
/// (The tests read 8192 bytes.)
void answer_read_in_two(FakeDatamover& d, const CapturedPdu& p) { test::answer_read(d, p, 4096, 0x10); }
}  // namespace

TEST(SessionDriver, ReadLandsInTheCallersBuffer) {
  Rig rig;
  rig.dm->respond_with(answer_read_in_two);
  std::vector<std::byte> buffer(8192);
  rig.run([&]() -> Awaitable<void> {
    auto r = co_await rig.session->execute(read10(buffer));
    expect_good(r);
  });
  EXPECT_EQ(buffer[0], std::byte{0x10});
  EXPECT_EQ(buffer[4095], std::byte{0x10});
  EXPECT_EQ(buffer[4096], std::byte{0x11});
  EXPECT_EQ(buffer[8191], std::byte{0x11});
  EXPECT_EQ(rig.session->stats().data_in_bytes_placed, 8192u);
}

// Session::start() (the bridge's fast path): when the way out is idle the command's PDU leaves
// from inside start() (no hop through the send loop: a posted handler and one more reactor poll
// per command at queue depth 1); when the datamover refuses an immediate send, the send loop
// sends it. Either way the callback hears the result once, never from inside start().
TEST(SessionDriver, AStartedCommandLeavesFromStartWhenTheWayOutIsIdle) {
  for (const bool at_once : {true, false}) {
    SCOPED_TRACE(at_once ? "the datamover takes it at once" : "the datamover refuses an immediate send");
    Rig rig;
    rig.dm->respond_with(answer_read_in_two);
    rig.dm->take_sends_at_once(at_once);
    std::vector<std::byte> buffer(8192);
    test::CountingCallback cb;
    rig.run([&]() -> Awaitable<void> {
      const std::size_t before = rig.dm->sent().size();
      EXPECT_TRUE(rig.session->start(read10(buffer), cb));
      EXPECT_EQ(cb.calls, 0) << "the callback ran inside start()";
      EXPECT_EQ(rig.dm->sent().size(), before + (at_once ? 1 : 0));
      co_await test::wait_until(rig.io, [&] { return cb.calls > 0; });
    });
    EXPECT_EQ(rig.dm->sent_at_once(), at_once ? 1u : 0u);
    EXPECT_EQ(cb.calls, 1);
    ASSERT_TRUE(cb.got) << cb.got.error().message();
    EXPECT_EQ(cb.got->status, scsi::Status::good);
    EXPECT_EQ(buffer[0], std::byte{0x10});
    EXPECT_EQ(buffer[8191], std::byte{0x11});
  }
}

TEST(SessionDriver, WriteAnswersR2tsWithTheRightBytes) {
  iscsi::OperationalParameters p;
  p.initial_r2t = true;
  p.immediate_data = false;
  p.max_burst_length = 8192;
  p.target_max_recv_data_segment_length = 4096;
  Rig rig({}, p);
  std::map<std::uint32_t, std::vector<std::byte>> received;  // BufferOffset → bytes
  std::vector<std::uint32_t> data_sns;
  rig.dm->respond_with([&](FakeDatamover& d, const CapturedPdu& pdu) {
    auto r2t = [&](iscsi::Itt itt, std::uint32_t sn) {
      iscsi::R2t r;
      r.itt = itt;
      r.ttt = iscsi::Ttt{100 + sn};
      r.r2t_sn = sn;
      r.buffer_offset = sn * 8192;
      r.desired_data_transfer_length = 8192;
      r.exp_cmd_sn = SerialNumber(2);
      r.max_cmd_sn = SerialNumber(65);
      d.push(r);
    };
    if (const auto* c = pdu.as<iscsi::ScsiCommand>(); c != nullptr && c->write) {
      EXPECT_TRUE(pdu.data.empty());  // ImmediateData=No
      r2t(c->itt, 0);
    } else if (const auto* o = pdu.as<iscsi::DataOut>()) {
      received[o->buffer_offset] = pdu.data;
      data_sns.push_back(o->data_sn);
      if (!o->final) return;
      if (o->ttt == iscsi::Ttt{100}) {
        r2t(o->itt, 1);
      } else {
        iscsi::ScsiResponse r;
        r.itt = o->itt;
        r.exp_cmd_sn = SerialNumber(2);
        r.max_cmd_sn = SerialNumber(65);
        d.push(r);
      }
    }
  });
  std::vector<std::byte> payload(16384);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(i * 13 + 1);
  rig.run([&]() -> Awaitable<void> {
    CommandRequest w;
    w.cdb.length = 10;
    w.cdb.bytes[0] = std::byte{0x2a};
    w.data_out = payload;
    auto r = co_await rig.session->execute(w);
    EXPECT_TRUE(r) << (r ? "" : r.error().message());
  });
  std::vector<std::byte> joined;
  for (auto& [offset, bytes] : received) {
    EXPECT_EQ(offset, joined.size());
    joined.insert(joined.end(), bytes.begin(), bytes.end());
  }
  EXPECT_EQ(joined, payload);
  EXPECT_EQ(data_sns, (std::vector<std::uint32_t>{0, 1, 0, 1}));  // two PDUs per 8 KiB burst
  EXPECT_EQ(rig.session->stats().r2ts_received, 2u);
}

TEST(SessionDriver, TimedOutCommandIsAbortedAndTheSessionStaysUsable) {
  SessionOptions o;
  o.command_timeout = 100ms;
  Rig rig(o);
  iscsi::Itt silent_itt = iscsi::reserved_itt;
  Completion abort_answered;
  rig.dm->respond_with([&](FakeDatamover& d, const CapturedPdu& pdu) {
    if (const auto* c = pdu.as<iscsi::ScsiCommand>()) {
      if (c->read) {
        silent_itt = c->itt;  // never answered
      } else {
        d.push(response_for(*c));
      }
    } else if (const auto* t = pdu.as<iscsi::TaskManagementRequest>()) {
      EXPECT_EQ(t->function, iscsi::TaskManagementFunction::abort_task);
      EXPECT_EQ(t->referenced_task_tag, silent_itt);
      EXPECT_EQ(t->ref_cmd_sn, SerialNumber(1));
      iscsi::TaskManagementResponse r;
      r.itt = t->itt;
      d.push(r);
      abort_answered.complete();
    }
  });
  std::vector<std::byte> buffer(512);
  rig.run([&]() -> Awaitable<void> {
    auto r = co_await rig.session->execute(read10(buffer));
    expect_error(r, make_error_code(errc::timeout));
    co_await abort_answered.wait();
    EXPECT_TRUE(rig.session->is_open());
    CommandRequest tur;
    tur.cdb.length = 6;  // TEST UNIT READY, no data
    auto again = co_await rig.session->execute(tur);
    EXPECT_TRUE(again) << (again ? "" : again.error().message());
  });
  EXPECT_TRUE(abort_answered.done());
}

TEST(SessionDriver, ConnectionLossFailsCommandsAndTheSession) {
  Rig rig;
  rig.dm->respond_with([](FakeDatamover& d, const CapturedPdu& pdu) {
    if (pdu.as<iscsi::ScsiCommand>()) d.push_error(make_error_code(errc::connection_closed));
  });
  std::vector<std::byte> buffer(512);
  rig.run([&]() -> Awaitable<void> {
    auto r = co_await rig.session->execute(read10(buffer));
    expect_error(r, make_error_code(errc::connection_closed));
    EXPECT_FALSE(rig.session->is_open());
    EXPECT_EQ(rig.session->error(), make_error_code(errc::connection_closed));
    auto later = co_await rig.session->execute(read10(buffer));
    expect_error(later, make_error_code(errc::connection_closed));
  });
  EXPECT_TRUE(rig.dm->closed());
}

TEST(SessionDriver, LogoutAfterTheCommandsInFlight) {
  Rig rig;
  rig.dm->respond_with([](FakeDatamover& d, const CapturedPdu& pdu) {
    if (const auto* c = pdu.as<iscsi::ScsiCommand>()) {
      d.push(response_for(*c));
    } else if (const auto* l = pdu.as<iscsi::LogoutRequest>()) {
      iscsi::LogoutResponse r;
      r.itt = l->itt;
      d.push(r);
    }
  });
  int done = 0;
  rig.run([&]() -> Awaitable<void> {
    CommandRequest tur;
    tur.cdb.length = 6;
    auto one = [&]() -> Awaitable<void> {
      auto r = co_await rig.session->execute(tur);
      EXPECT_TRUE(r);
      ++done;
    };
    asio::co_spawn(rig.io, one(), asio::detached);
    asio::co_spawn(rig.io, one(), asio::detached);
    co_await asio::post(rig.io, asio::use_awaitable);  // both commands submitted
    auto r = co_await rig.session->logout();
    EXPECT_TRUE(r) << (r ? "" : r.error().message());
    EXPECT_EQ(done, 2);
    EXPECT_FALSE(rig.session->is_open());
    auto after = co_await rig.session->logout();  // already logged out: success, nothing sent
    EXPECT_TRUE(after);
  });
  ASSERT_FALSE(rig.dm->sent().empty());
  EXPECT_NE(rig.dm->sent().back().as<iscsi::LogoutRequest>(), nullptr);
}

TEST(SessionDriver, TextRequestGathersContinuationsForDiscovery) {
  Rig rig;
  auto text_of = [](std::string_view s) {
    std::vector<std::byte> v(s.size() + 1);  // NUL-terminated key=value (RFC 7143 §6.1)
    std::memcpy(v.data(), s.data(), s.size());
    return v;
  };
  std::vector<iscsi::Ttt> request_ttts;
  rig.dm->respond_with([&](FakeDatamover& d, const CapturedPdu& pdu) {
    const auto* t = pdu.as<iscsi::TextRequest>();
    if (t == nullptr) return;
    request_ttts.push_back(t->ttt);
    iscsi::TextResponse r;
    r.itt = t->itt;
    if (t->ttt == iscsi::reserved_ttt) {
      r.final = false;  // more to come: the initiator must ask with the TTT
      r.ttt = iscsi::Ttt{9};
      d.push(r, text_of("TargetName=iqn.2026-01.test:a"));
    } else {
      r.final = true;
      auto tail = text_of("TargetName=iqn.2026-01.test:b");
      auto addr = text_of("TargetAddress=192.0.2.1:3261,2");
      tail.insert(tail.end(), addr.begin(), addr.end());
      d.push(r, tail);
    }
  });
  rig.run([&]() -> Awaitable<void> {
    auto request = iscsi::encode_text({{"SendTargets", "All"}});  // not inside the co_await (GCC 12)
    auto text = co_await SessionInternals::text_request(*rig.session, std::move(request));
    EXPECT_TRUE(text) << (text ? "" : text.error().message());
    if (!text) co_return;
    auto pairs = iscsi::decode_text(*text);
    EXPECT_TRUE(pairs);
    if (!pairs) co_return;
    auto targets = parse_send_targets(*pairs, Portal{.host = "198.51.100.7", .port = 3260, .portal_group_tag = 1});
    EXPECT_TRUE(targets);
    if (!targets) co_return;
    EXPECT_EQ(targets->size(), 2u);
    if (targets->size() == 2) {
      EXPECT_EQ((*targets)[0].name, "iqn.2026-01.test:a");
      EXPECT_EQ((*targets)[0].portals.at(0).host, "198.51.100.7");
      EXPECT_EQ((*targets)[1].portals.at(0).port, 3261);
    }
  });
  EXPECT_EQ(request_ttts, (std::vector<iscsi::Ttt>{iscsi::reserved_ttt, iscsi::Ttt{9}}));
}

// What FUSE reads (fuse_fs/lun_io.cpp) and the NBD bridge rely on: on an RDMA transport the
// datamover's TaskData advertises a buffer leased from Session::buffer_pool() as is (the SCSI
// Command carries the STag of the caller's own bytes: no copy); any other span goes through a
// registered bounce buffer, whose read data finish() copies back (one counted copy). The
// responder plays the target's RDMA Write into the advertised region.
TEST(SessionDriver, PoolBuffersNeedNoBounceOnRdmaTransports) {
  ArenaPool pool;  // outlives the rig's session
  Rig rig(Rig::Deferred{});
  auto fake = std::make_unique<FakeDatamover>(rig.io.get_executor(),
                                              datamover::Capabilities{.rdma_data = true, .exposes_task_buffers = true});
  fake->use_pool(pool);
  rig.start(std::move(fake), {});
  std::vector<std::optional<Buffer>> advertised;
  rig.dm->respond_with([&](FakeDatamover& d, const CapturedPdu& p) {
    const auto* c = p.as<iscsi::ScsiCommand>();
    if (c == nullptr) return;
    advertised.push_back(p.read_region);
    if (p.read_region) std::memset(p.read_region->bytes.data(), 0x5a, p.read_region->bytes.size());
    d.push(response_for(*c));
  });
  auto lease = pool.allocate(4096);
  std::vector<std::byte> plain(4096);
  std::uint64_t pooled_copies = 0, plain_copies = 0;
  rig.run([&]() -> Awaitable<void> {
    auto before = copied_payload_bytes();
    auto r = co_await rig.session->execute(read10(lease.bytes()));
    EXPECT_TRUE(r);
    pooled_copies = copied_payload_bytes() - before;
    before = copied_payload_bytes();
    r = co_await rig.session->execute(read10(plain));
    EXPECT_TRUE(r);
    plain_copies = copied_payload_bytes() - before;
  });
  ASSERT_EQ(advertised.size(), 2u);
  ASSERT_TRUE(advertised[0] && advertised[1]);
  EXPECT_EQ(advertised[0]->bytes.data(), lease.data());  // the caller's own bytes
  EXPECT_EQ(advertised[0]->rkey, ArenaPool::rkey);
  EXPECT_NE(advertised[1]->bytes.data(), plain.data());  // a bounce buffer in registered memory
  EXPECT_EQ(advertised[1]->rkey, ArenaPool::rkey);
  EXPECT_EQ(lease.data()[4095], std::byte{0x5a});
  EXPECT_EQ(plain[0], std::byte{0x5a});  // copied back from the bounce buffer
  EXPECT_EQ(plain[4095], std::byte{0x5a});
  EXPECT_EQ(pooled_copies, 0u);
  if (copy_counter_enabled) {
    EXPECT_EQ(plain_copies, 4096u);
  }
}

// Over a transport whose peer moves no data by itself (TCP) the command carries no STag region
// and the caller's spans are used as they are, wherever they live.
TEST(SessionDriver, DirectTransportsAdvertiseNothingAndCopyNothing) {
  Rig rig;
  std::vector<std::optional<Buffer>> advertised;
  rig.dm->respond_with([&](FakeDatamover& d, const CapturedPdu& p) {
    if (const auto* c = p.as<iscsi::ScsiCommand>()) {
      advertised.push_back(p.read_region);
      advertised.push_back(p.write_region);
      d.push(response_for(*c));
    }
  });
  std::vector<std::byte> plain(4096);
  std::uint64_t copies = 0;
  rig.run([&]() -> Awaitable<void> {
    const auto before = copied_payload_bytes();
    auto r = co_await rig.session->execute(read10(plain));
    EXPECT_TRUE(r);
    copies = copied_payload_bytes() - before;
  });
  ASSERT_EQ(advertised.size(), 2u);
  EXPECT_FALSE(advertised[0]);
  EXPECT_FALSE(advertised[1]);
  EXPECT_EQ(copies, 0u);
  EXPECT_EQ(rig.session->max_transfer_bytes(), 0u);  // no limit of the transport's own
}

// Session::max_transfer_bytes() is the datamover's capability (iSER: IserOptions::max_transfer_bytes
// from SessionOptions::iser_max_transfer_bytes), not a transport check in the session.
TEST(SessionDriver, MaxTransferBytesIsTheDatamoversCapability) {
  Rig rig({}, {}, datamover::Capabilities{.max_transfer_bytes = 65536});
  EXPECT_EQ(rig.session->max_transfer_bytes(), 65536u);
  rig.run([]() -> Awaitable<void> { co_return; });
}

// Session::unstated_max_transfer_bytes() too (iSER: IserOptions::unstated_max_transfer_bytes from
// SessionOptions::iser_unstated_max_transfer_bytes): no check of the transport in the session. A
// datamover that states none (TCP) leaves the target's silence meaning "no limit", whatever the
// session's iSER option says.
TEST(SessionDriver, UnstatedMaxTransferBytesIsTheDatamoversCapability) {
  {
    Rig rig({}, {}, datamover::Capabilities{.unstated_max_transfer_bytes = 512 * 1024});
    EXPECT_EQ(rig.session->unstated_max_transfer_bytes(), 512u * 1024);
    rig.run([]() -> Awaitable<void> { co_return; });
  }
  Rig rig;
  EXPECT_EQ(rig.session->unstated_max_transfer_bytes(), 0u);
  rig.run([]() -> Awaitable<void> { co_return; });
}

// Where the peer holds the task's buffers (exposes_task_buffers: iSER STags), a command timeout
// closes the connection, so the target can no longer RDMA into the buffer the caller got back.
// Per-command STags: the connection survives a timeout, but the caller gets its buffer back only
// after the target ended the task. A target that never answers the ABORT TASK gets the connection
// closed (nothing else stops its RDMA) before the caller hears errc::timeout.
TEST(SessionDriver, PerCommandStagsHoldTheTimedOutBufferUntilTheAbortEnds) {
  SessionOptions o;
  o.command_timeout = 50ms;
  o.login_timeout = 300ms;  // the ABORT TASK's own timeout
  Rig rig(o, {}, datamover::Capabilities{.rdma_data = true, .exposes_task_buffers = false});
  int aborts = 0;
  rig.dm->respond_with([&](FakeDatamover&, const CapturedPdu& p) {
    if (const auto* t = p.as<iscsi::TaskManagementRequest>(); t != nullptr) ++aborts;  // never answered
  });
  std::vector<std::byte> buffer(512);
  rig.run([&]() -> Awaitable<void> {
    auto r = co_await rig.session->execute(read10(buffer));  // never answered
    expect_error(r, make_error_code(errc::timeout));
    EXPECT_EQ(aborts, 1);
    EXPECT_FALSE(rig.session->is_open()) << "the caller got its buffer back while the connection was up";
    if (!rig.session->is_open()) {
      EXPECT_EQ(rig.session->error(), make_error_code(errc::connection_closed));
    }
  });
}

TEST(SessionDriver, PerCommandStagsKeepTheConnectionWhenTheAbortIsAnswered) {
  SessionOptions o;
  o.command_timeout = 50ms;
  Rig rig(o, {}, datamover::Capabilities{.rdma_data = true, .exposes_task_buffers = false});
  rig.dm->respond_with([&](FakeDatamover& d, const CapturedPdu& p) {
    const auto* t = p.as<iscsi::TaskManagementRequest>();
    if (t == nullptr) return;
    iscsi::TaskManagementResponse rsp;
    rsp.itt = t->itt;
    rsp.response = 0;  // function complete
    rsp.stat_sn = t->exp_stat_sn;
    rsp.exp_cmd_sn = t->cmd_sn + 1;
    rsp.max_cmd_sn = t->cmd_sn + 64;
    d.push(rsp);
  });
  std::vector<std::byte> buffer(512);
  rig.run([&]() -> Awaitable<void> {
    auto r = co_await rig.session->execute(read10(buffer));
    expect_error(r, make_error_code(errc::timeout));
    EXPECT_TRUE(rig.session->is_open());
  });
}

TEST(SessionDriver, TimeoutClosesTheConnectionWhenThePeerHoldsTheBuffers) {
  SessionOptions o;
  o.command_timeout = 50ms;
  Rig rig(o, {}, datamover::Capabilities{.exposes_task_buffers = true});
  std::vector<std::byte> buffer(512);
  rig.run([&]() -> Awaitable<void> {
    auto r = co_await rig.session->execute(read10(buffer));  // never answered
    expect_error(r, make_error_code(errc::timeout));
    EXPECT_FALSE(rig.session->is_open());  // ended by the timeout itself, before run() closes it
    if (!rig.session->is_open()) {
      EXPECT_EQ(rig.session->error(), make_error_code(errc::connection_closed));
    }
  });
}

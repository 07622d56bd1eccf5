// The target's Connection driver (target/src/connection.hpp) over a FakeDatamover
// (tests/unit/support/fake_datamover.hpp): no socket, the test plays the initiator. What is
// checked here is the driver's own work around the SessionEngine — the hand-off from the login
// phase to the engine, the writer carrying out the engine's ordered actions in order, drain()
// at shutdown, and a grant of the shared payload budget made on another thread reaching the
// connection's thread. The protocol rules themselves are session_engine_test.cpp's.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "connection.hpp"
#include "fake_datamover.hpp"
#include "iserkit/common/bytes.hpp"
#include "iserkit/iscsi/text.hpp"
#include "iserkit/target/backends.hpp"
#include "iserkit/target/logical_unit.hpp"

namespace iserkit::target {
namespace {

using namespace std::chrono_literals;
using iscsi::LoginStage;
constexpr const char* target_name = "iqn.2026-11.org.iserkit:connection";
constexpr std::uint32_t block = 512;

std::array<std::byte, 16> read10(std::uint32_t lba, std::uint16_t blocks) {
  std::array<std::byte, 16> cdb{};
  cdb[0] = std::byte{0x28};
  store_be32(&cdb[2], lba);
  cdb[7] = static_cast<std::byte>(blocks >> 8);
  cdb[8] = static_cast<std::byte>(blocks & 0xff);
  return cdb;
}

struct ConnectionDriver : ::testing::Test {
  ConnectionDriver() {
    auto node = std::make_shared<TargetNode>();
    node->name = target_name;
    node->dispatcher = std::make_shared<ScsiDispatcher>();
    dispatcher = node->dispatcher;
    auto memory = make_memory_backend({.size_bytes = 1 << 20, .block_size_bytes = block});
    // Block b holds the byte b (mod 256) throughout: a read's data tells which blocks it returned.
    std::vector<std::byte> pattern(1 << 20);
    for (std::size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<std::byte>((i / block) & 0xff);
    bool written = false;
    asio::co_spawn(io, memory->write(0, pattern, Fua::no), [&](std::exception_ptr e, Result<void> r) {
      written = !e && r.has_value();
    });
    EXPECT_TRUE(run_until([&] { return written; }));
    EXPECT_TRUE(node->dispatcher->add_logical_unit(0, std::make_shared<LogicalUnit>(memory, LogicalUnitOptions{}))
                    .has_value());
    EXPECT_TRUE(registry->add(node).has_value());
  }

  /// Makes the connection (over a fresh FakeDatamover) and starts run() on `io`.
  /// With `iser`, the fake plays the iSER datamover (RDMA data: Put_Data/Get_Data, no Data-In).
  void start(ConnectionLimits limits = {}, std::shared_ptr<SharedPayloadBudget> global = nullptr, bool iser = false) {
    auto dm = std::make_unique<test::FakeDatamover>(
        io.get_executor(), iser ? datamover::Capabilities{.rdma_data = true, .digests = false} : datamover::Capabilities{});
    if (iser) dm->play_transport(datamover::Transport::iser);
    fake = dm.get();
    limits.idle_interval = 0ms;  // no NOP-In pings: the tests count every PDU
    ConnectionHooks hooks;
    hooks.logged_in = [this] { ++logged_in; };
    hooks.closed = [this] { ++closed; };
    connection = std::make_shared<Connection>(std::move(dm), registry, TargetLoginOptions{.cmd_window_depth = 16},
                                              limits, std::move(hooks), std::move(global));
    asio::co_spawn(io, connection->run(), [this](std::exception_ptr e) {
      EXPECT_FALSE(e) << "run() threw";
      run_returned = true;
    });
  }

  /// A connection still running at the end of a test is closed and run() allowed to return, as
  /// the target does at shutdown: its coroutines hold the connection (each keeps a shared_ptr to
  /// it) and the fake datamover it owns holds their handlers, so without it the whole graph would
  /// outlive the test (LeakSanitizer reported it).
  void TearDown() override {
    if (connection && !run_returned) {
      connection->close();
      EXPECT_TRUE(run_until([&] { return run_returned; })) << "run() did not return after close()";
    }
  }

  /// Runs the loop until `done` holds (false after 5 s).
  bool run_until(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      io.restart();
      io.run_for(5ms);
    }
    return true;
  }
  /// Runs every handler ready now (and those they post) without waiting for more.
  void settle() {
    for (int i = 0; i < 20; ++i) {
      io.restart();
      io.run_for(2ms);
    }
  }

  /// The PDUs sent so far of type T.
  template <class T>
  std::vector<T> sent_of() const {
    std::vector<T> out;
    for (const auto& p : fake->sent())
      if (const T* t = p.as<T>()) out.push_back(*t);
    return out;
  }

  /// A one-PDU login to the full-feature phase; returns its Login Response. With `iser`, it offers
  /// RDMAExtensions=Yes (RFC 7145 §5.1), without which an iSER connection refuses the login.
  iscsi::LoginResponse login(bool iser = false) {
    iscsi::LoginRequest r{.transit = true, .csg = LoginStage::operational_negotiation,
                          .nsg = LoginStage::full_feature_phase,
                          .isid = {std::byte{0x80}, std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}, std::byte{5}},
                          .itt = iscsi::Itt{0x77}, .cmd_sn = SerialNumber(1), .exp_stat_sn = SerialNumber(0)};
    iscsi::TextPairs keys{{"InitiatorName", "iqn.2026-11.org.test:init"},
                          {"TargetName", target_name},
                          {"SessionType", "Normal"},
                          {"MaxRecvDataSegmentLength", "8192"},
                          {"ImmediateData", "Yes"},
                          {"InitialR2T", "No"}};
    if (iser) keys.push_back({"RDMAExtensions", "Yes"});
    const auto text = iscsi::encode_text(keys);
    fake->push(r, {text.begin(), text.end()});
    EXPECT_TRUE(run_until([&] { return !sent_of<iscsi::LoginResponse>().empty(); }));
    const auto response = sent_of<iscsi::LoginResponse>().back();
    cmd_sn = response.exp_cmd_sn;
    exp_stat_sn = response.stat_sn + 1;
    return response;
  }

  /// Sends a READ(10) of `blocks` blocks at `lba` with ITT `itt`.
  void read(std::uint32_t itt, std::uint32_t lba, std::uint16_t blocks) {
    iscsi::ScsiCommand c{.read = true, .lun = scsi::Lun::from_index(0), .itt = iscsi::Itt{itt},
                         .expected_data_transfer_length = blocks * block, .cmd_sn = cmd_sn,
                         .exp_stat_sn = exp_stat_sn, .cdb = read10(lba, blocks)};
    cmd_sn = cmd_sn + 1;
    fake->push(c);
  }

  /// Sends a command with no data with ITT `itt`: TEST UNIT READY unless `cdb` says otherwise.
  void no_data_command(std::uint32_t itt, const std::array<std::byte, 16>& cdb = {}) {
    fake->push(iscsi::ScsiCommand{.lun = scsi::Lun::from_index(0), .itt = iscsi::Itt{itt}, .cmd_sn = cmd_sn,
                                  .exp_stat_sn = exp_stat_sn, .cdb = cdb});
    cmd_sn = cmd_sn + 1;
  }

  /// The statuses sent for `itt` (SCSI Response, or Data-In with S).
  [[nodiscard]] int statuses_of(std::uint32_t itt) const {
    int n = 0;
    for (const auto& p : fake->sent()) {
      if (const auto* r = p.as<iscsi::ScsiResponse>(); r != nullptr && iscsi::to_u32(r->itt) == itt) ++n;
      if (const auto* d = p.as<iscsi::DataIn>(); d != nullptr && d->status_present && iscsi::to_u32(d->itt) == itt) ++n;
    }
    return n;
  }

  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::shared_ptr<TargetRegistry> registry = std::make_shared<TargetRegistry>();
  std::shared_ptr<ScsiDispatcher> dispatcher;  // the node's device server
  test::FakeDatamover* fake = nullptr;
  std::shared_ptr<Connection> connection;
  int logged_in = 0;
  int closed = 0;
  bool run_returned = false;
  SerialNumber cmd_sn;
  SerialNumber exp_stat_sn;
};

// Login hand-off: the login phase answers the Login Request, the hook hears of it, and the PDUs
// after it reach the SessionEngine (a NOP-Out is answered with a NOP-In).
TEST_F(ConnectionDriver, LoginHandsTheConnectionToTheEngine) {
  start();
  const auto response = login();
  EXPECT_EQ(response.status_class, 0);
  EXPECT_TRUE(response.transit);
  EXPECT_EQ(response.nsg, LoginStage::full_feature_phase);
  EXPECT_EQ(logged_in, 1);
  EXPECT_TRUE(connection->stats()->snapshot().logged_in);
  fake->push(iscsi::NopOut{.itt = iscsi::Itt{5}, .cmd_sn = cmd_sn, .exp_stat_sn = exp_stat_sn});
  ASSERT_TRUE(run_until([&] { return !sent_of<iscsi::NopIn>().empty(); }));
  const auto nop_in = sent_of<iscsi::NopIn>().front();
  EXPECT_EQ(iscsi::to_u32(nop_in.itt), 5u);
  EXPECT_EQ(nop_in.stat_sn, response.stat_sn + 1);  // the engine goes on from the login's StatSN
  EXPECT_FALSE(run_returned);
  fake->push_error(make_error_code(errc::connection_closed));
  ASSERT_TRUE(run_until([&] { return run_returned; }));
  EXPECT_EQ(closed, 1);
}

// A first PDU that is no Login Request: the connection closes without reaching the engine.
TEST_F(ConnectionDriver, AConnectionThatDoesNotLogInNeverReachesTheEngine) {
  start();
  fake->push(iscsi::NopOut{.itt = iscsi::Itt{5}, .cmd_sn = SerialNumber(1)});
  ASSERT_TRUE(run_until([&] { return run_returned; }));
  EXPECT_EQ(logged_in, 0);
  EXPECT_EQ(closed, 1);
  EXPECT_TRUE(fake->sent().empty());
  EXPECT_TRUE(fake->closed());
}

// Writer order: the engine's ordered actions leave in order — each read's Data-In PDUs in
// BufferOffset order before its status, and statuses numbered by StatSN in the order they leave.
TEST_F(ConnectionDriver, TheWriterSendsTheEnginesActionsInOrder) {
  start();
  login();
  // The new I_T nexus's unit attention (SAM-5 §5.14) goes to this first command.
  no_data_command(1);
  ASSERT_TRUE(run_until([&] { return statuses_of(1) == 1; }));
  // 16 KiB each: two Data-In PDUs of the initiator's 8192-byte MaxRecvDataSegmentLength.
  for (std::uint32_t itt = 10; itt < 18; ++itt) read(itt, (itt - 10) * 32, 32);
  ASSERT_TRUE(run_until([&] {
    for (std::uint32_t itt = 10; itt < 18; ++itt)
      if (statuses_of(itt) != 1) return false;
    return true;
  }));
  std::map<std::uint32_t, std::uint32_t> next_offset;  // by ITT
  std::map<std::uint32_t, bool> answered;
  std::optional<SerialNumber> last_stat_sn;
  for (const auto& p : fake->sent()) {
    if (const auto* d = p.as<iscsi::DataIn>()) {
      const std::uint32_t itt = iscsi::to_u32(d->itt);
      EXPECT_FALSE(answered[itt]) << "Data-In after the status of 0x" << std::hex << itt;
      EXPECT_EQ(d->buffer_offset, next_offset[itt]);
      next_offset[itt] += static_cast<std::uint32_t>(p.data.size());
      // Block (itt - 10) * 32 + k holds byte ((itt - 10) * 32 + k) mod 256.
      const std::uint32_t first_block = (itt - 10) * 32 + d->buffer_offset / block;
      ASSERT_FALSE(p.data.empty());
      EXPECT_EQ(p.data.front(), static_cast<std::byte>(first_block & 0xff));
      if (d->status_present) {
        answered[itt] = true;
        if (last_stat_sn) {
          EXPECT_EQ(d->stat_sn, *last_stat_sn + 1);
        }
        last_stat_sn = d->stat_sn;
      }
    } else if (const auto* r = p.as<iscsi::ScsiResponse>()) {
      answered[iscsi::to_u32(r->itt)] = true;
      if (last_stat_sn) {
        EXPECT_EQ(r->stat_sn, *last_stat_sn + 1);
      }
      last_stat_sn = r->stat_sn;
    }
  }
  for (std::uint32_t itt = 10; itt < 18; ++itt) EXPECT_EQ(next_offset[itt], 32 * block) << "itt " << itt;
  // Every budget was given back once its PDUs had left.
  EXPECT_EQ(connection->stats()->payload_budget_bytes.load(), 0u);
}

// iSER (issue 23 item 7): a read's RDMA Write (Put_Data) leaves in one send chain with its SCSI
// Response and with whatever else the pass queued behind it — never a put_data() of its own, which
// would wait for the write's completion before the response could be posted. Every Put_Data comes
// before its command's response in the same chain, and the reads that completed while a chain was
// on the wire leave together in the next one.
TEST_F(ConnectionDriver, OverIserReadDataAndTheirResponsesLeaveInOneChain) {
  start({}, nullptr, /*iser=*/true);
  login(/*iser=*/true);
  no_data_command(1);  // takes the new nexus's unit attention
  ASSERT_TRUE(run_until([&] { return statuses_of(1) == 1; }));
  const auto read_over_iser = [&](std::uint32_t itt) {
    iscsi::ScsiCommand c{.read = true, .lun = scsi::Lun::from_index(0), .itt = iscsi::Itt{itt},
                         .expected_data_transfer_length = 32 * block, .cmd_sn = cmd_sn,
                         .exp_stat_sn = exp_stat_sn, .cdb = read10((itt - 10) * 32, 32)};
    cmd_sn = cmd_sn + 1;
    // The initiator's read buffer: its key is the ITT, so a Put_Data tells whose it is.
    fake->push_with_peer_buffers(c, datamover::PeerBuffer{itt, 0x10000u * itt});
  };
  fake->hold_sends(true);
  read_over_iser(10);
  ASSERT_TRUE(run_until([&] { return !fake->chains().empty(); }));  // on the wire, held there
  for (std::uint32_t itt = 11; itt < 18; ++itt) read_over_iser(itt);
  settle();  // they complete and queue behind the held chain
  fake->hold_sends(false);
  fake->release_sends();
  ASSERT_TRUE(run_until([&] {
    for (std::uint32_t itt = 10; itt < 18; ++itt)
      if (statuses_of(itt) != 1) return false;
    return true;
  }));
  EXPECT_EQ(fake->put_data_calls(), 0u) << "an RDMA Write was posted on its own";
  std::set<std::uint32_t> put;
  for (const auto& chain : fake->chains()) {
    std::set<std::uint32_t> put_here;
    for (const auto& step : chain) {
      if (step.put) {
        EXPECT_EQ(step.bytes, 32u * block);
        EXPECT_TRUE(put.insert(step.key).second) << "itt " << step.key << " put twice";
        put_here.insert(step.key);
        continue;
      }
      const auto* r = fake->sent()[step.pdu].as<iscsi::ScsiResponse>();
      if (r == nullptr) continue;
      const std::uint32_t itt = iscsi::to_u32(r->itt);
      EXPECT_EQ(r->status, 0) << "itt " << itt;  // GOOD
      EXPECT_TRUE(put_here.contains(itt)) << "the response of itt " << itt << " is not after its Put_Data in its chain";
    }
  }
  EXPECT_EQ(put.size(), 8u);
  ASSERT_EQ(fake->chains().size(), 2u) << "the seven reads queued behind the held chain did not leave together";
  EXPECT_EQ(std::count_if(fake->chains()[1].begin(), fake->chains()[1].end(), [](const auto& e) { return e.put; }), 7);
  EXPECT_TRUE(sent_of<iscsi::DataIn>().empty()) << "Data-In over iSER";
  EXPECT_EQ(connection->stats()->payload_budget_bytes.load(), 0u);
}

// drain() (target shutdown): an Async Message asks for a logout; a command received before it
// (here waiting for the shared payload budget) is still answered, and then the connection closes.
TEST_F(ConnectionDriver, DrainAsksForALogoutAnswersWhatItHasThenCloses) {
  auto global = std::make_shared<SharedPayloadBudget>(16 * block, "unit");
  start({}, global);
  login();
  ASSERT_TRUE(global->request(global->next_id(), 16 * block, [] {}));  // full: the READ waits
  read(20, 0, 16);  // takes the unit attention: answered at once, without data
  read(21, 0, 16);
  ASSERT_TRUE(run_until([&] { return statuses_of(20) == 1 && global->queued() == 1; }));
  asio::post(io, [this] { connection->drain(3000ms); });
  ASSERT_TRUE(run_until([&] { return !sent_of<iscsi::AsyncMessage>().empty(); }));
  const auto async = sent_of<iscsi::AsyncMessage>().front();
  EXPECT_EQ(async.event, iscsi::AsyncEvent::logout_request);
  EXPECT_EQ(async.parameter3, 3);  // seconds to log out in (RFC 7143 §11.9.1)
  settle();
  EXPECT_FALSE(run_returned) << "closed with a command still to answer";
  global->release(16 * block);
  ASSERT_TRUE(run_until([&] { return run_returned; }));
  ASSERT_EQ(statuses_of(21), 1);
  // The READ's status leaves after the Async Message, next in StatSN order, and nothing after it.
  const auto& sent = fake->sent();
  ASSERT_FALSE(sent.empty());
  const auto* last = sent.back().as<iscsi::DataIn>();
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(iscsi::to_u32(last->itt), 21u);
  EXPECT_TRUE(last->status_present);
  EXPECT_EQ(last->stat_sn, async.stat_sn + 1);
  EXPECT_TRUE(fake->closed());
  EXPECT_EQ(closed, 1);
  EXPECT_EQ(global->used(), 0u);
}

// drain() before the login completed: the connection closes at once.
TEST_F(ConnectionDriver, DrainWhileLoggingInCloses) {
  start();
  settle();
  connection->drain(3000ms);
  ASSERT_TRUE(run_until([&] { return run_returned; }));
  EXPECT_EQ(logged_in, 0);
  EXPECT_TRUE(fake->sent().empty());
}

// The shared payload budget is full (another connection, on another thread, holds it): a READ
// waits; when that thread gives the bytes back, the grant (made on that thread) reaches the
// connection's thread and the READ is answered.
TEST_F(ConnectionDriver, ASharedBudgetGrantFromAnotherThreadStartsTheWaitingCommand) {
  auto global = std::make_shared<SharedPayloadBudget>(16 * block, "unit");
  start({}, global);
  login();
  no_data_command(1);  // takes the new nexus's unit attention
  ASSERT_TRUE(run_until([&] { return statuses_of(1) == 1; }));
  std::thread([&] { EXPECT_TRUE(global->request(global->next_id(), 16 * block, [] {})); }).join();
  read(20, 64, 16);
  settle();
  EXPECT_EQ(statuses_of(20), 0) << "answered while the shared budget was full";
  EXPECT_EQ(global->queued(), 1u);
  EXPECT_EQ(connection->stats()->payload_budget_bytes.load(), 16 * block);  // held at the connection level
  // The grant's callback runs on this other thread (SharedPayloadBudget::release()); only the
  // post it makes may touch the connection.
  std::thread([&] { global->release(16 * block); }).join();
  ASSERT_TRUE(run_until([&] { return statuses_of(20) == 1; }));
  std::uint32_t bytes = 0;
  for (const auto& p : fake->sent()) {
    const auto* d = p.as<iscsi::DataIn>();
    if (d == nullptr || iscsi::to_u32(d->itt) != 20) continue;
    bytes += static_cast<std::uint32_t>(p.data.size());
    EXPECT_EQ(p.data.front(), static_cast<std::byte>(64 + d->buffer_offset / block));  // blocks 64..79
  }
  EXPECT_EQ(bytes, 16 * block);
  ASSERT_TRUE(run_until([&] { return global->used() == 0; }));  // given back after the response
  EXPECT_EQ(connection->stats()->payload_budget_bytes.load(), 0u);
  fake->push_error(make_error_code(errc::connection_closed));
  ASSERT_TRUE(run_until([&] { return run_returned; }));
}

// The connection closes while its READ waits for the shared budget: the waiting request is
// withdrawn, and nothing is left held at either level.
TEST_F(ConnectionDriver, ClosingWithACommandWaitingForTheSharedBudgetLeavesNothingHeld) {
  auto global = std::make_shared<SharedPayloadBudget>(16 * block, "unit");
  start({}, global);
  login();
  ASSERT_TRUE(global->request(global->next_id(), 16 * block, [] {}));
  read(20, 0, 16);  // takes the unit attention: answered without data, no budget
  read(21, 0, 16);
  ASSERT_TRUE(run_until([&] { return statuses_of(20) == 1; }));
  settle();
  EXPECT_EQ(global->queued(), 1u);
  fake->push_error(make_error_code(errc::connection_closed));
  ASSERT_TRUE(run_until([&] { return run_returned; }));
  EXPECT_EQ(global->queued(), 0u);
  EXPECT_EQ(connection->stats()->payload_budget_bytes.load(), 0u);
  global->release(16 * block);
  EXPECT_EQ(global->used(), 0u);
}

// A successful Logout ends the I_T nexus before its response leaves (RFC 7143 §11.14, SAM-5
// §6.3.4): a RESERVE(6) the session held is gone by the time the initiator can read the Logout
// Response, so a command it sends next on another session does not meet it. (libiscsi's
// ALL.Sanitize.Reset, right after .Reservations logged out the holder, met it most runs.)
TEST_F(ConnectionDriver, ALogoutReleasesTheReservationBeforeItsResponseLeaves) {
  start();
  login();
  // The new nexus's unit attention goes to a TEST UNIT READY; then RESERVE(6).
  no_data_command(1);
  std::array<std::byte, 16> reserve6{};
  reserve6[0] = std::byte{0x16};
  no_data_command(2, reserve6);
  ASSERT_TRUE(run_until([&] { return statuses_of(1) == 1 && statuses_of(2) == 1; }));
  const auto responses = sent_of<iscsi::ScsiResponse>();
  ASSERT_EQ(responses.size(), 2u);
  ASSERT_EQ(responses.back().status, 0);  // GOOD: the reservation is held

  // Another initiator's nexus: past its own unit attention, a READ meets the reservation.
  const NexusId other = dispatcher->open_nexus("iqn.2026-11.org.test:other,i,0x800000000001");
  const auto read_cdb = read10(0, 1);
  auto plan = dispatcher->plan(other, scsi::Lun::from_index(0), read_cdb);
  if (plan.error) plan = dispatcher->plan(other, scsi::Lun::from_index(0), read_cdb);
  ASSERT_FALSE(plan.error);
  EXPECT_TRUE(plan.conflict);

  // The Logout Response is handed to the datamover and held "on the wire": the reservation must
  // already be gone.
  fake->hold_sends(true);
  fake->push(iscsi::LogoutRequest{.immediate = true, .reason = iscsi::LogoutReason::close_session,
                                  .itt = iscsi::Itt{3}, .cmd_sn = cmd_sn, .exp_stat_sn = exp_stat_sn});
  ASSERT_TRUE(run_until([&] { return fake->sends_waiting() == 1; }));
  EXPECT_TRUE(sent_of<iscsi::LogoutResponse>().empty());
  plan = dispatcher->plan(other, scsi::Lun::from_index(0), read_cdb);
  EXPECT_FALSE(plan.conflict) << "the reservation outlived the session until the Logout Response left";
  EXPECT_FALSE(plan.error);
  fake->hold_sends(false);
  fake->release_sends();
  ASSERT_TRUE(run_until([&] { return run_returned; }));
  ASSERT_EQ(sent_of<iscsi::LogoutResponse>().size(), 1u);
  EXPECT_EQ(closed, 1);
  dispatcher->close_nexus(other);
}

}  // namespace
}  // namespace iserkit::target

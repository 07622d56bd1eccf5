// Unit tests of the target's sans-I/O SessionEngine (target/src/session_engine.hpp): scripted PDUs
// in, actions (PDU batches, backend execution, budget releases, resets, close) out. The transcripts
// of a write with R2Ts, ABORT TASK and logout run on the ScriptedPeer harness in
// session_script_test.cpp (suite ScriptedTarget).
#include "session_engine.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "iserkit/common/bytes.hpp"
#include "iserkit/common/errors.hpp"
#include "session_engine_fixture.hpp"

namespace iserkit::target {
namespace {

using namespace engine_test;
using namespace std::chrono_literals;
using iscsi::Itt;
using iscsi::Ttt;

// ---- Reads: Data-In segmentation, DataSN, status in the last Data-In, one ordered batch ----

TEST_F(SessionEngineTest, ReadIsSegmentedIntoDataInWithStatusInTheLastInOneBatch) {
  config.params.initiator_max_recv_data_segment_length = 4096;
  config.params.max_burst_length = 8192;
  start();
  deliver(command(7, 1, cdb10(0x28, 20), 20 * block, true, false));
  ASSERT_EQ(executes.size(), 1u);
  EXPECT_EQ(engine->task(Itt{7})->life.state, TaskState::executing);
  const auto data = pattern(20 * block, 3);
  auto buf = engine->task_data(Itt{7});
  ASSERT_EQ(buf.size(), data.size());
  std::memcpy(buf.data(), data.data(), data.size());
  execute(Itt{7}, ScsiOutcome::good(20 * block));
  ASSERT_EQ(batches, 1u);  // Data-In and status leave together, in order
  ASSERT_EQ(sent.size(), 3u);  // 4096 + 4096 (burst 1) + 2048
  std::vector<std::byte> got;
  for (std::size_t i = 0; i < sent.size(); ++i) {
    const auto& d = sent[i].as<iscsi::DataIn>();
    EXPECT_EQ(d.data_sn, i);
    EXPECT_EQ(d.buffer_offset, got.size());
    got.insert(got.end(), sent[i].data.begin(), sent[i].data.end());
    EXPECT_EQ(d.status_present, i == 2);
  }
  EXPECT_TRUE(sent[1].as<iscsi::DataIn>().final);  // MaxBurstLength sequence ends
  EXPECT_FALSE(sent[0].as<iscsi::DataIn>().final);
  EXPECT_EQ(got, data);
  const auto& last = sent[2].as<iscsi::DataIn>();
  EXPECT_TRUE(last.final);
  EXPECT_EQ(last.stat_sn, SerialNumber(100));
  EXPECT_EQ(last.max_cmd_sn, SerialNumber(5));  // window opened again before the status left
  EXPECT_EQ(engine->task(Itt{7}), nullptr);
  // The budget comes back only after the batch that borrows the buffer.
  EXPECT_EQ(order, (std::vector<std::string>{"send", "release"}));
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].bytes, 20u * block);
  EXPECT_TRUE(released[0].granted);
}

// Ended tasks, their map nodes and action vectors are reused (no allocation per command in steady
// state): a reused task must start clean. A read of 20 blocks (3 Data-In, a budget), a TEST UNIT
// READY and a read of 4 blocks on the same ITT each behave as on a fresh engine.
TEST_F(SessionEngineTest, ReusedTasksStartClean) {
  config.params.initiator_max_recv_data_segment_length = 4096;
  start();
  for (std::uint32_t round = 0; round < 3; ++round) {
    const std::uint32_t sn = 1 + 3 * round;
    sent.clear();
    executes.clear();
    released.clear();
    deliver(command(7, sn, cdb10(0x28, 20), 20 * block, true, false));
    ASSERT_EQ(executes.size(), 1u);
    ASSERT_EQ(engine->task_data(Itt{7}).size(), 20u * block);
    execute(Itt{7}, ScsiOutcome::good(20 * block));
    ASSERT_EQ(sent.size(), 3u);
    EXPECT_EQ(sent[0].as<iscsi::DataIn>().data_sn, 0u);
    EXPECT_EQ(released.size(), 1u);

    sent.clear();
    deliver(tur(7, sn + 1));
    ASSERT_EQ(executes.size(), 2u);
    EXPECT_TRUE(engine->task_data(Itt{7}).empty());
    execute(Itt{7}, ScsiOutcome::good());
    ASSERT_EQ(sent.size(), 1u);
    ASSERT_TRUE(sent[0].is<iscsi::ScsiResponse>());
    const auto& r = sent[0].as<iscsi::ScsiResponse>();
    EXPECT_EQ(r.status, static_cast<std::uint8_t>(scsi::Status::good));
    EXPECT_FALSE(r.residual_underflow);
    EXPECT_FALSE(r.residual_overflow);
    EXPECT_TRUE(sent[0].data.empty());
    EXPECT_EQ(released.size(), 1u);  // no budget for a command without data

    sent.clear();
    deliver(command(7, sn + 2, cdb10(0x28, 4), 4 * block, true, false));
    ASSERT_EQ(executes.size(), 3u);
    ASSERT_EQ(engine->task_data(Itt{7}).size(), 4u * block);
    execute(Itt{7}, ScsiOutcome::good(4 * block));
    ASSERT_EQ(sent.size(), 1u);
    const auto& d = sent[0].as<iscsi::DataIn>();
    EXPECT_EQ(d.data_sn, 0u);
    EXPECT_TRUE(d.status_present);
    EXPECT_FALSE(d.residual_underflow);
    EXPECT_EQ(sent[0].data.size(), 4u * block);
  }
}

// A sent batch handed back (recycle_batch, as the connection's writer does) lends its vectors'
// capacity to the next batch: a response costs no vector allocation in steady state. The kept
// buffers are released at once.
TEST_F(SessionEngineTest, RecycledBatchVectorsServeTheNextBatch) {
  start();
  const void* first_storage = nullptr;
  for (std::uint32_t round = 0; round < 3; ++round) {
    deliver(command(10 + round, 1 + round, cdb10(0x28, 1), block, true, false));
    engine->on_task_executed(Itt{10 + round}, ScsiOutcome::good(block));
    auto actions = engine->take_actions();
    SendPdus* batch = nullptr;
    for (auto& a : actions)
      if (auto* b = std::get_if<SendPdus>(&a)) batch = b;
    ASSERT_NE(batch, nullptr);
    ASSERT_EQ(batch->pdus.size(), 1u);  // one Data-In with status
    ASSERT_EQ(batch->keep.size(), 1u);  // the task's buffer, kept until the batch is sent
    if (round == 0) {
      first_storage = batch->pdus.data();
    } else {
      EXPECT_EQ(static_cast<const void*>(batch->pdus.data()), first_storage) << "round " << round;
    }
    const std::size_t idle_before = pool.idle_bytes();
    engine->recycle_batch(std::move(*batch));
    EXPECT_GT(pool.idle_bytes(), idle_before) << "the kept task buffer went back to the pool";
    engine->recycle_actions(std::move(actions));
  }
}

TEST_F(SessionEngineTest, ShortReadReportsUnderflowResidual) {
  start();
  deliver(command(1, 1, inquiry(255), 255, true, false));
  ASSERT_EQ(executes.size(), 1u);
  execute(Itt{1}, ScsiOutcome::good(36));
  ASSERT_EQ(sent.size(), 1u);
  const auto& d = sent[0].as<iscsi::DataIn>();
  EXPECT_EQ(sent[0].data.size(), 36u);
  EXPECT_TRUE(d.residual_underflow);
  EXPECT_EQ(d.residual_count, 255u - 36u);
}

TEST_F(SessionEngineTest, FailedCommandGetsScsiResponseWithSense) {
  start();
  deliver(command(1, 1, cdb10(0x99, 0), 0, false, false));  // the plan rejects it
  EXPECT_TRUE(executes.empty());
  ASSERT_EQ(sent.size(), 1u);
  const auto& r = sent[0].as<iscsi::ScsiResponse>();
  EXPECT_EQ(r.status, static_cast<std::uint8_t>(scsi::Status::check_condition));
  EXPECT_EQ(sense_of(sent[0]).asc, 0x20);
}

// ---- CmdSN window, StatSN, immediate caps, ITT table ----

TEST_F(SessionEngineTest, CommandsOutsideTheWindowAreIgnoredAndMaxCmdSnOpensWhenTasksEnd) {
  start();  // window [1, 4]
  deliver(tur(1, 5));  // beyond MaxCmdSN
  deliver(tur(2, 0));  // below ExpCmdSN
  EXPECT_TRUE(sent.empty());
  EXPECT_TRUE(executes.empty());
  deliver(tur(3, 1));
  deliver(tur(4, 2));
  ASSERT_EQ(executes.size(), 2u);
  EXPECT_EQ(engine->window().exp_cmd_sn(), SerialNumber(3));
  EXPECT_EQ(engine->window().max_cmd_sn(), SerialNumber(4));
  execute(Itt{4}, ScsiOutcome::good());
  execute(Itt{3}, ScsiOutcome::good());
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].as<iscsi::ScsiResponse>().stat_sn, SerialNumber(100));
  EXPECT_EQ(sent[1].as<iscsi::ScsiResponse>().stat_sn, SerialNumber(101));
  EXPECT_EQ(sent[1].as<iscsi::ScsiResponse>().max_cmd_sn, SerialNumber(6));
  EXPECT_EQ(sent[1].as<iscsi::ScsiResponse>().exp_cmd_sn, SerialNumber(3));
}

TEST_F(SessionEngineTest, TooManyImmediateCommandsAreRejected) {
  start();  // max_immediate_commands = 2
  for (std::uint32_t itt = 1; itt <= 3; ++itt) {
    auto c = tur(itt, 1);
    c.immediate = true;
    deliver(c);
  }
  EXPECT_EQ(executes.size(), 2u);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].as<iscsi::Reject>().reason, iscsi::RejectReason::immediate_command_reject);
  EXPECT_EQ(engine->window().exp_cmd_sn(), SerialNumber(1));  // immediate: CmdSN not advanced
  execute(Itt{1}, ScsiOutcome::good());
  auto c = tur(4, 1);
  c.immediate = true;
  deliver(c);
  EXPECT_EQ(executes.size(), 3u);  // a slot freed
}

TEST_F(SessionEngineTest, DuplicateIttIsRejectedAndTheRunningTaskContinues) {
  start();
  deliver(tur(9, 1));
  deliver(tur(9, 2));
  ASSERT_EQ(sent.size(), 1u);
  const auto& rej = sent[0].as<iscsi::Reject>();
  EXPECT_EQ(rej.reason, iscsi::RejectReason::task_in_progress);
  EXPECT_EQ(sent[0].data.size(), iscsi::bhs_size);  // the rejected header
  EXPECT_EQ(rej.max_cmd_sn, SerialNumber(5));       // the rejected command's slot given back
  execute(Itt{9}, ScsiOutcome::good());
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_TRUE(sent[1].is<iscsi::ScsiResponse>());
}

// ---- Writes: R2T / Data-Out sequencing, placement, budget ----

TEST_F(SessionEngineTest, UnsolicitedDataWaitsInStagingUntilTheBudgetIsGranted) {
  config.params.initial_r2t = false;
  config.params.immediate_data = true;
  config.params.first_burst_length = 2048;
  start();
  grant_budget_now = false;
  const auto data = pattern(8 * block, 1);
  auto c = command(3, 1, cdb10(0x2a, 8), 8 * block, false, true);
  c.final = false;  // unsolicited Data-Out follows
  deliver(c, std::span(data).first(1024));
  EXPECT_TRUE(placed_last);
  ASSERT_EQ(requested.size(), 1u);
  EXPECT_EQ(requested[0].second, 8u * block);
  iscsi::DataOut d{.final = true, .lun = scsi::Lun::from_index(0), .itt = Itt{3}, .ttt = iscsi::reserved_ttt,
                   .data_sn = 0, .buffer_offset = 1024};
  deliver(d, std::span(data).subspan(1024, 1024));
  EXPECT_TRUE(sent.empty());  // no R2T before the budget
  EXPECT_EQ(engine->task(Itt{3})->life.state, TaskState::waiting_budget);
  engine->on_budget_granted(Itt{3});
  collect();
  ASSERT_EQ(sent.size(), 1u);
  const auto& r2t = sent[0].as<iscsi::R2t>();
  EXPECT_EQ(r2t.buffer_offset, 2048u);
  EXPECT_EQ(r2t.desired_data_transfer_length, 2048u);
  deliver(iscsi::DataOut{.final = true, .lun = scsi::Lun::from_index(0), .itt = Itt{3}, .ttt = r2t.ttt,
                         .buffer_offset = 2048},
          std::span(data).subspan(2048));
  ASSERT_EQ(executes.size(), 1u);
  auto buf = engine->task_data(Itt{3});
  EXPECT_TRUE(std::equal(buf.begin(), buf.end(), data.begin(), data.end()));
}

TEST_F(SessionEngineTest, OutOfOrderDataOutIsRejectedAndFailsTheTask) {
  config.params.initial_r2t = true;
  start();
  deliver(command(5, 1, cdb10(0x2a, 4), 4 * block, false, true));
  const auto r2t = sent.at(0).as<iscsi::R2t>();
  const auto data = pattern(block, 0);
  deliver(iscsi::DataOut{.lun = scsi::Lun::from_index(0), .itt = Itt{5}, .ttt = r2t.ttt, .data_sn = 3,
                         .buffer_offset = 0},
          data);
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[1].as<iscsi::Reject>().reason, iscsi::RejectReason::protocol_error);
  const auto& r = sent[2].as<iscsi::ScsiResponse>();
  EXPECT_EQ(r.status, static_cast<std::uint8_t>(scsi::Status::check_condition));
  EXPECT_EQ(sense_of(sent[2]).asc, 0x4b);
  EXPECT_TRUE(executes.empty());
  // A Data-Out for the ended task: Invalid PDU field.
  deliver(iscsi::DataOut{.lun = scsi::Lun::from_index(0), .itt = Itt{5}, .ttt = r2t.ttt}, data);
  EXPECT_EQ(sent.back().as<iscsi::Reject>().reason, iscsi::RejectReason::invalid_pdu_field);
}

TEST_F(SessionEngineTest, DataOutDigestErrorFailsTheTaskWithCrcSense) {
  start();
  deliver(command(5, 1, cdb10(0x2a, 4), 4 * block, false, true));
  const auto r2t = sent.at(0).as<iscsi::R2t>();
  deliver(iscsi::DataOut{.final = true, .lun = scsi::Lun::from_index(0), .itt = Itt{5}, .ttt = r2t.ttt},
          pattern(4 * block, 0), make_error_code(errc::data_digest_error));
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[1].as<iscsi::Reject>().reason, iscsi::RejectReason::data_digest_error);
  EXPECT_EQ(sense_of(sent[2]).asc, 0x47);
  EXPECT_EQ(sense_of(sent[2]).ascq, 0x05);
}

TEST_F(SessionEngineTest, ImmediateDataDigestErrorDiscardsTheCommandAndGivesItsSlotBack) {
  config.params.immediate_data = true;
  start();
  deliver(command(5, 1, cdb10(0x2a, 1), block, false, true), pattern(block, 0), make_error_code(errc::data_digest_error));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].as<iscsi::Reject>().reason, iscsi::RejectReason::data_digest_error);
  EXPECT_EQ(engine->task(Itt{5}), nullptr);
  EXPECT_EQ(engine->window().max_cmd_sn(), SerialNumber(5));
  ASSERT_EQ(released.size(), 1u);  // its buffer's budget comes back
}

TEST_F(SessionEngineTest, ImmediateDataOnAReadIsAProtocolError) {
  start();
  deliver(command(5, 1, cdb10(0x28, 1), block, true, false), pattern(16, 0));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].as<iscsi::Reject>().reason, iscsi::RejectReason::protocol_error);
  EXPECT_TRUE(executes.empty());
}

TEST_F(SessionEngineTest, ReadWaitsForItsBudget) {
  start();
  grant_budget_now = false;
  deliver(command(2, 1, cdb10(0x28, 2), 2 * block, true, false));
  EXPECT_TRUE(executes.empty());
  EXPECT_EQ(engine->task(Itt{2})->life.state, TaskState::waiting_budget);
  engine->on_budget_granted(Itt{2});
  collect();
  ASSERT_EQ(executes.size(), 1u);
  EXPECT_EQ(engine->task_data(Itt{2}).size(), 2u * block);
}

// ---- Text, NOP, idle ping ----

TEST_F(SessionEngineTest, TextRequestWithContinuationBothWays) {
  config.params.initiator_max_recv_data_segment_length = 512;
  start(true);
  for (int i = 0; i < 40; ++i) targets.push_back({"TargetName", "iqn.2026-01.test:target-" + std::to_string(i)});
  const auto whole = iscsi::encode_text({{"SendTargets", "All"}});
  const std::size_t half = whole.size() / 2;
  deliver(iscsi::TextRequest{.immediate = true, .final = false, .continue_ = true, .itt = Itt{1}},
          std::span(whole).first(half));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_FALSE(sent[0].as<iscsi::TextResponse>().final);
  EXPECT_TRUE(sent[0].data.empty());
  deliver(iscsi::TextRequest{.immediate = true, .itt = Itt{1}, .ttt = sent[0].as<iscsi::TextResponse>().ttt},
          std::span(whole).subspan(half));
  std::vector<std::byte> answer;
  while (true) {
    const auto& r = sent.back().as<iscsi::TextResponse>();
    EXPECT_LE(sent.back().data.size(), 512u);
    answer.insert(answer.end(), sent.back().data.begin(), sent.back().data.end());
    if (r.final) {
      EXPECT_EQ(r.ttt, iscsi::reserved_ttt);
      break;
    }
    EXPECT_TRUE(r.continue_);
    ASSERT_NE(r.ttt, iscsi::reserved_ttt);
    deliver(iscsi::TextRequest{.immediate = true, .itt = Itt{1}, .ttt = r.ttt});
  }
  EXPECT_GT(sent.size(), 3u);
  EXPECT_EQ(answer, iscsi::encode_text(targets));
}

TEST_F(SessionEngineTest, NopOutIsEchoedUnlessItWantsNoAnswer) {
  start();
  const auto ping = pattern(64, 4);
  deliver(iscsi::NopOut{.immediate = true, .itt = Itt{3}, .cmd_sn = SerialNumber(1)}, ping);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].as<iscsi::NopIn>().itt, Itt{3});
  EXPECT_EQ(sent[0].data, ping);
  deliver(iscsi::NopOut{.immediate = true, .itt = iscsi::reserved_itt, .cmd_sn = SerialNumber(1)});
  EXPECT_EQ(sent.size(), 1u);
}

TEST_F(SessionEngineTest, IdlePingAndCloseWhenUnanswered) {
  config.idle_interval = 1000ms;
  config.ping_timeout = 200ms;
  start();
  EXPECT_EQ(engine->next_deadline(), t0 + 1000ms);
  engine->on_timer(t0 + 500ms);
  collect();
  EXPECT_TRUE(sent.empty());
  engine->on_timer(t0 + 1000ms);
  collect();
  ASSERT_EQ(sent.size(), 1u);
  const auto& ping = sent[0].as<iscsi::NopIn>();
  EXPECT_EQ(ping.itt, iscsi::reserved_itt);
  EXPECT_NE(ping.ttt, iscsi::reserved_ttt);
  EXPECT_EQ(ping.stat_sn, SerialNumber(100));
  EXPECT_EQ(engine->stat_sn(), SerialNumber(100));  // not advanced
  EXPECT_EQ(engine->pings_sent(), 1u);
  EXPECT_EQ(engine->next_deadline(), t0 + 1200ms);
  // The answer resets the watch.
  deliver(iscsi::NopOut{.immediate = true, .itt = iscsi::reserved_itt, .ttt = ping.ttt}, {}, {}, t0 + 1100ms);
  EXPECT_EQ(engine->next_deadline(), t0 + 2100ms);
  engine->on_timer(t0 + 2100ms);
  engine->on_timer(t0 + 2300ms);
  collect();
  ASSERT_EQ(closes.size(), 1u);
  EXPECT_TRUE(engine->ended());
  EXPECT_EQ(engine->next_deadline(), std::nullopt);
}

// ---- Task management, logout, close ----

TEST_F(SessionEngineTest, LunResetAbortsThatLunsTasksOnlyAndResetsTheDevice) {
  config.params.initial_r2t = true;
  start();
  deliver(command(1, 1, cdb10(0x2a, 4), 4 * block, false, true));  // waits for Data-Out
  auto other = tur(2, 2);
  other.lun = scsi::Lun::from_index(1);
  deliver(other);
  ASSERT_EQ(executes.size(), 1u);
  deliver(iscsi::TaskManagementRequest{.immediate = true, .function = iscsi::TaskManagementFunction::logical_unit_reset,
                                       .lun = scsi::Lun::from_index(0), .itt = Itt{60}, .cmd_sn = SerialNumber(3)});
  ASSERT_EQ(resets.size(), 1u);
  EXPECT_EQ(resets[0].what, TaskManagement::logical_unit_reset);
  EXPECT_EQ(sent.back().as<iscsi::TaskManagementResponse>().response, 0);
  EXPECT_EQ(engine->task(Itt{1}), nullptr);
  ASSERT_NE(engine->task(Itt{2}), nullptr);
  EXPECT_EQ(engine->task(Itt{2})->life.state, TaskState::executing);
  // LUN that does not exist.
  deliver(iscsi::TaskManagementRequest{.immediate = true, .function = iscsi::TaskManagementFunction::abort_task_set,
                                       .lun = scsi::Lun::from_index(9), .itt = Itt{61}, .cmd_sn = SerialNumber(3)});
  EXPECT_EQ(sent.back().as<iscsi::TaskManagementResponse>().response, 2);
}

TEST_F(SessionEngineTest, LogoutForRecoveryIsRefused) {
  start();
  deliver(iscsi::LogoutRequest{.immediate = true, .reason = iscsi::LogoutReason::remove_connection_for_recovery,
                               .itt = Itt{9}});
  EXPECT_EQ(sent.at(0).as<iscsi::LogoutResponse>().response, 2);
  EXPECT_TRUE(closes.empty());
}

TEST_F(SessionEngineTest, CloseAbortsEverythingAndBudgetsComeBackWhenTheBackendReports) {
  start();
  deliver(command(1, 1, cdb10(0x28, 1), block, true, false));
  EXPECT_FALSE(engine->task(Itt{1})->plan.abort_requested);
  engine->on_closed();
  collect();
  ASSERT_EQ(closes.size(), 1u);
  EXPECT_TRUE(engine->task(Itt{1})->plan.abort_requested);  // the session's end aborts it
  EXPECT_TRUE(released.empty());
  execute(Itt{1}, ScsiOutcome::good(block));
  EXPECT_TRUE(sent.empty());
  EXPECT_EQ(released.size(), 1u);
  EXPECT_EQ(engine->task_count(), 0u);
}

// ---- Target shutdown: drain (begin_drain) ----

TEST_F(SessionEngineTest, DrainAsksForLogoutAnswersCommandsInFlightThenCloses) {
  start();
  deliver(command(1, 1, cdb10(0x28, 1), block, true, false));  // a READ on the backend
  deliver(command(2, 2, cdb10(0x2a, 1), block, false, true));  // a WRITE waiting for its Data-Out
  ASSERT_EQ(sent.size(), 1u);
  const auto r2t = sent[0].as<iscsi::R2t>();
  sent.clear();
  engine->begin_drain(7);
  collect();
  // RFC 7143 §11.9.1: AsyncEvent 1 (logout request), Parameter3 = seconds; StatSN advances.
  ASSERT_EQ(sent.size(), 1u);
  const auto& async = sent[0].as<iscsi::AsyncMessage>();
  EXPECT_EQ(async.event, iscsi::AsyncEvent::logout_request);
  EXPECT_EQ(async.parameter3, 7);
  EXPECT_EQ(async.stat_sn, SerialNumber(100));
  const SerialNumber max_before = async.max_cmd_sn;
  EXPECT_TRUE(closes.empty());
  // The read finishes and is answered; the window does not open again.
  execute(Itt{1}, ScsiOutcome::good(block));
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1].as<iscsi::DataIn>().max_cmd_sn, max_before);
  EXPECT_EQ(sent[1].as<iscsi::DataIn>().stat_sn, SerialNumber(101));
  EXPECT_TRUE(closes.empty());  // the write is still in progress
  // Its Data-Out arrives, it runs and is answered; then, and only then, the connection closes.
  const auto data = pattern(block, 9);
  deliver(iscsi::DataOut{.final = true, .lun = scsi::Lun::from_index(0), .itt = Itt{2}, .ttt = r2t.ttt,
                         .data_sn = 0, .buffer_offset = 0},
          data);
  ASSERT_EQ(executes.size(), 2u);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), engine->task_data(Itt{2}).begin()));
  EXPECT_TRUE(closes.empty());
  order.clear();
  execute(Itt{2}, ScsiOutcome::good());
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[2].as<iscsi::ScsiResponse>().status, 0);
  EXPECT_EQ(sent[2].as<iscsi::ScsiResponse>().max_cmd_sn, max_before);
  ASSERT_EQ(closes, std::vector<std::string>{"target shutting down"});
  EXPECT_EQ(order, (std::vector<std::string>{"release", "send", "close"}));  // the answer leaves before the close
  EXPECT_TRUE(engine->ended());
}

TEST_F(SessionEngineTest, DrainOfAnIdleSessionClosesAfterTheAsyncMessage) {
  start();
  engine->begin_drain(3);
  collect();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_TRUE(sent[0].is<iscsi::AsyncMessage>());
  ASSERT_EQ(closes.size(), 1u);
  EXPECT_EQ(order, (std::vector<std::string>{"send", "close"}));  // the Async Message goes out before the close
}

TEST_F(SessionEngineTest, DrainLetsALogoutEndTheSession) {
  start();
  deliver(tur(1, 1));
  engine->begin_drain(5);
  collect();
  sent.clear();
  deliver(iscsi::LogoutRequest{.immediate = true, .itt = Itt{9}, .cmd_sn = SerialNumber(2)});
  EXPECT_TRUE(closes.empty());  // the logout waits for the command, as without a drain
  execute(Itt{1}, ScsiOutcome::good());
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].as<iscsi::LogoutResponse>().response, 0);
  EXPECT_EQ(closes.size(), 1u);
}

TEST_F(SessionEngineTest, DrainOfADiscoverySessionClosesWithoutAsyncMessage) {
  start(true);
  engine->begin_drain(3);
  collect();
  EXPECT_TRUE(sent.empty());
  EXPECT_EQ(closes.size(), 1u);
}

// ---- iSER: the data moves by RDMA (RFC 7145 §7.3) ----

TEST_F(SessionEngineTest, IserReadIsPutThenStatusInAScsiResponse) {
  rdma = true;
  start();
  deliver_iser(command(4, 1, cdb10(0x28, 8), 8 * block, true, false),
               datamover::PeerBuffer{0x1234, 0x1000}, std::nullopt);
  ASSERT_EQ(executes.size(), 1u);
  execute(Itt{4}, ScsiOutcome::good(8 * block));
  ASSERT_EQ(puts.size(), 1u);
  EXPECT_EQ(puts[0].second, 8u * block);
  ASSERT_EQ(sent.size(), 1u);  // no Data-In
  EXPECT_EQ(sent[0].as<iscsi::ScsiResponse>().status, 0);
  EXPECT_EQ(order, (std::vector<std::string>{"put", "release", "send"}));
}

TEST_F(SessionEngineTest, IserWriteIsFetchedByRdmaReadAndWithoutWriteStagFails) {
  rdma = true;
  config.params.immediate_data = true;
  start();
  deliver_iser(command(4, 1, cdb10(0x2a, 8), 8 * block, false, true),
               std::nullopt, datamover::PeerBuffer{0x99, 0x2000});
  EXPECT_TRUE(sent.empty());  // no R2T
  ASSERT_EQ(gets.size(), 1u);
  EXPECT_EQ(gets[0].buffer_offset, 0u);
  EXPECT_EQ(gets[0].length, 8u * block);
  EXPECT_EQ(gets[0].source.key(), 0x99u);
  EXPECT_TRUE(executes.empty());
  engine->on_write_data(Itt{4}, {});
  collect();
  ASSERT_EQ(executes.size(), 1u);
  // No Write STag: CHECK CONDITION, DATA PHASE ERROR.
  deliver(command(5, 2, cdb10(0x2a, 8), 8 * block, false, true));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sense_of(sent[0]).asc, 0x4b);
}

TEST_F(SessionEngineTest, IserDataOutDuringTheRdmaReadFailsTheTaskOnlyAfterTheReadEnded) {
  // Found by fuzz_target_engine: a Data-Out (refused: on iSER the write data comes by RDMA Read)
  // failed the task at once, so it ended and its buffer went back to the pool while the RDMA Read
  // into that buffer was still under way.
  rdma = true;
  start();
  deliver_iser(command(4, 1, cdb10(0x2a, 8), 8 * block, false, true),
               std::nullopt, datamover::PeerBuffer{0x99, 0x2000});
  ASSERT_EQ(gets.size(), 1u);
  const auto data = pattern(block, 1);
  deliver(iscsi::DataOut{.final = true, .lun = scsi::Lun::from_index(0), .itt = Itt{4}, .ttt = iscsi::reserved_ttt,
                         .data_sn = 0, .buffer_offset = 0},
          data);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_TRUE(sent[0].is<iscsi::Reject>());
  // The task and its buffer stay until the RDMA Read ends; then CHECK CONDITION, and no execution.
  ASSERT_NE(engine->task(Itt{4}), nullptr);
  EXPECT_EQ(engine->task_data(Itt{4}).size(), 8u * block);
  EXPECT_TRUE(released.empty());
  engine->on_write_data(Itt{4}, {});
  collect();
  EXPECT_EQ(engine->task(Itt{4}), nullptr);
  EXPECT_TRUE(executes.empty());
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1].as<iscsi::ScsiResponse>().status, static_cast<std::uint8_t>(scsi::Status::check_condition));
  EXPECT_EQ(released.size(), 1u);
}

// ---- SNACK, unknown opcodes, discovery sessions ----

TEST_F(SessionEngineTest, SnackAndUnknownOpcodesAreRejected) {
  start();
  deliver(iscsi::SnackRequest{.itt = Itt{1}});
  EXPECT_EQ(sent.at(0).as<iscsi::Reject>().reason, iscsi::RejectReason::snack_reject);
  datamover::PduIn in;
  in.bhs[0] = std::byte{0x1e};  // no such initiator opcode
  engine->place(in.bhs, 0);
  engine->on_pdu(in, t0);
  collect();
  EXPECT_EQ(sent.at(1).as<iscsi::Reject>().reason, iscsi::RejectReason::command_not_supported);
}

TEST_F(SessionEngineTest, DiscoverySessionRefusesScsiCommandsAndTaskManagement) {
  start(true);
  deliver(tur(1, 1));
  deliver(iscsi::TaskManagementRequest{.immediate = true, .function = iscsi::TaskManagementFunction::abort_task_set,
                                       .lun = scsi::Lun::from_index(0), .itt = Itt{2}});
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].as<iscsi::Reject>().reason, iscsi::RejectReason::protocol_error);
  EXPECT_EQ(sent[1].as<iscsi::Reject>().reason, iscsi::RejectReason::protocol_error);
  EXPECT_TRUE(executes.empty());
}

// ---- Rules of the rule index (docs/architecture.md) that had no engine test ----

// RFC 7143 §11.17, §11.17.1: a Data-Out naming no task of the session is rejected with reason
// 0x09 (Invalid PDU field) and the Reject's data segment is the rejected PDU's whole header; the
// session goes on.
TEST_F(SessionEngineTest, DataOutForNoTaskIsRejectedWithItsHeader) {
  start();
  const iscsi::DataOut stray{.final = true, .lun = scsi::Lun::from_index(0), .itt = Itt{99}, .ttt = Ttt{5},
                             .data_sn = 0, .buffer_offset = 0};
  const auto payload = pattern(block, 3);
  deliver(stray, payload);
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_TRUE(sent[0].is<iscsi::Reject>());
  EXPECT_EQ(sent[0].as<iscsi::Reject>().reason, iscsi::RejectReason::invalid_pdu_field);
  auto header = iscsi::encode_bhs(stray);
  iscsi::set_lengths(header, 0, block);
  ASSERT_EQ(sent[0].data.size(), iscsi::bhs_size);
  EXPECT_EQ(std::memcmp(sent[0].data.data(), header.data(), iscsi::bhs_size), 0);
  EXPECT_TRUE(closes.empty());
  deliver(tur(1, 1));
  execute(Itt{1}, ScsiOutcome{});
  EXPECT_TRUE(sent.back().is<iscsi::ScsiResponse>());
}

// RFC 7143 §11.2.2.3: a CDB longer than 16 bytes arrives as the BHS's 16 bytes plus an Extended CDB
// AHS; the SCSI layer gets all of it, in order.
TEST_F(SessionEngineTest, ExtendedCdbAhsReachesTheDispatcherWhole) {
  std::vector<std::byte> seen;
  hooks.plan = [&seen](const scsi::Lun&, ConstByteSpan cdb) {
    seen.assign(cdb.begin(), cdb.end());
    return CommandPlan{};  // no data, runs
  };
  start();
  const auto cdb32 = pattern(32, 11);
  std::array<std::byte, 16> first{};
  std::memcpy(first.data(), cdb32.data(), 16);
  const std::array<iscsi::Ahs, 1> ahs{
      iscsi::Ahs{.type = iscsi::AhsType::extended_cdb, .specific = {cdb32.begin() + 16, cdb32.end()}}};
  datamover::PduIn in;
  in.bhs = iscsi::encode_bhs(command(3, 1, first, 0, false, false));
  in.ahs = iscsi::encode_ahs(ahs);
  iscsi::set_lengths(in.bhs, static_cast<std::uint8_t>(in.ahs.size() / 4), 0);
  EXPECT_TRUE(engine->place(in.bhs, 0).empty());  // with an AHS the header is taken in the payload phase
  engine->on_pdu(in, t0);
  collect();
  ASSERT_EQ(executes.size(), 1u);
  ASSERT_EQ(seen.size(), 32u);
  EXPECT_EQ(std::memcmp(seen.data(), cdb32.data(), 32), 0);
}

// RFC 7143 §11.3: a command that writes (WRITE(10) of 8 blocks) must carry the W bit; without it
// the task never runs and ends in CHECK CONDITION, ILLEGAL REQUEST, INVALID FIELD IN INFORMATION
// UNIT, with the whole EDTL as residual underflow (nothing was transferred).
TEST_F(SessionEngineTest, WriteWithoutTheWBitIsCheckCondition) {
  start();
  deliver(command(4, 1, cdb10(0x2a, 8), 8 * block, false, false));
  EXPECT_TRUE(executes.empty());
  EXPECT_TRUE(gets.empty());
  ASSERT_FALSE(sent.empty());
  ASSERT_TRUE(sent.back().is<iscsi::ScsiResponse>());
  const auto& r = sent.back().as<iscsi::ScsiResponse>();
  EXPECT_EQ(r.status, static_cast<std::uint8_t>(scsi::Status::check_condition));
  EXPECT_FALSE(std::any_of(sent.begin(), sent.end(), [](const Sent& s) { return s.is<iscsi::R2t>(); }));
  const auto sense = sense_of(sent.back());
  EXPECT_EQ(sense.key, scsi::SenseKey::illegal_request);
  EXPECT_EQ((scsi::AscPair{sense.asc, sense.ascq}), scsi::asc::invalid_field_in_information_unit);
}

}  // namespace
}  // namespace iserkit::target

// The initiator's sans-I/O SessionEngine driven with scripted target PDUs (RFC 7143 §4.2.2, §11).
// Time is injected (t0 + n ms): no sleeping, no timing assertions. The transcripts of reads,
// writes with R2T, task management, timeouts and logout run on the ScriptedPeer harness in
// session_script_test.cpp (same test names).
#include <gtest/gtest.h>

#include <cstring>

#include "iserkit/common/errors.hpp"
#include "engine_helpers.hpp"
#include "session_engine.hpp"

using namespace iserkit;
using namespace iserkit::initiator;
using namespace std::chrono_literals;

namespace {

const SessionEngine::TimePoint t0{};

std::vector<std::byte> bytes_of(std::string_view s) {
  std::vector<std::byte> v(s.size());
  std::memcpy(v.data(), s.data(), s.size());
  return v;
}

/// A decoded outgoing PDU with its data segment.
struct Sent {
  iscsi::PduHeader header;
  std::vector<std::byte> data;
  TaskId borrower = 0;
  iscsi::Bhs bhs{};
  template <class T>
  const T& as() const {
    return std::get<T>(header);
  }
  template <class T>
  bool is() const {
    return std::holds_alternative<T>(header);
  }
};

class Harness {
 public:
  explicit Harness(EngineConfig c = {}, EngineStart s = {.cmd_sn = SerialNumber(1),
                                                         .exp_cmd_sn = SerialNumber(1),
                                                         .max_cmd_sn = SerialNumber(64),
                                                         .exp_stat_sn = SerialNumber(10)})
      : engine(c, s, t0) {}

  SessionEngine engine;
  std::vector<Sent> sent;
  std::vector<TaskOutcome> done;
  std::optional<std::error_code> ended;
  std::optional<std::error_code> connection_lost;

  /// Collects the engine's actions.
  void drain() {
    auto a = engine.take_actions();
    for (auto& p : a.pdus) {
      auto h = iscsi::decode_bhs(p.pdu.bhs);
      ASSERT_TRUE(h);
      EXPECT_EQ(iscsi::data_segment_length_bytes(p.pdu.bhs), p.pdu.data.size());
      sent.push_back({*h, std::vector<std::byte>(p.pdu.data.begin(), p.pdu.data.end()), p.borrower, p.pdu.bhs});
    }
    for (auto& c : a.completions) done.push_back(std::move(c));
    if (a.ended) {
      EXPECT_FALSE(ended) << "the session may end only once";
      ended = a.ended;
    }
    if (a.connection_lost) connection_lost = a.connection_lost;
    engine.recycle_actions(std::move(a));  // as Session::Impl::apply() does: every test reuses them
  }
  std::vector<Sent> take_sent() {
    drain();
    return std::exchange(sent, {});
  }
  const TaskOutcome* outcome(TaskId id) {
    drain();
    const TaskOutcome* found = nullptr;
    for (const auto& o : done)
      if (o.id == id) {
        EXPECT_EQ(found, nullptr) << "task " << id << " completed twice";
        found = &o;
      }
    return found;
  }

  /// Delivers a target PDU; `data` goes through place() as the datamover would.
  void deliver(const iscsi::PduHeader& h, std::span<const std::byte> data = {}, std::error_code pdu_error = {},
               SessionEngine::TimePoint now = t0) {
    engine.on_pdu(test::placed_pdu(engine, h, data, scratch, pdu_error), now);
    drain();
  }

  TaskId submit(const ScsiSubmission& s, SessionEngine::TimePoint now = t0) {
    auto id = engine.submit(s, now);
    EXPECT_TRUE(id) << (id ? "" : id.error().message());
    drain();
    return id.value_or(0);
  }
  TaskId read(std::span<std::byte> buffer, std::chrono::milliseconds timeout = 0ms, SessionEngine::TimePoint now = t0) {
    return submit(test::cdb10_submission(0x28, buffer, {}, timeout), now);
  }
  TaskId write(std::span<const std::byte> buffer) { return submit(test::cdb10_submission(0x2a, {}, buffer)); }

 private:
  std::vector<std::byte> scratch;
};

iscsi::ScsiResponse good_response(iscsi::Itt itt, std::uint32_t stat_sn = 10, std::uint32_t max_cmd_sn = 64) {
  iscsi::ScsiResponse r;
  r.itt = itt;
  r.stat_sn = SerialNumber(stat_sn);
  r.exp_cmd_sn = SerialNumber(1);
  r.max_cmd_sn = SerialNumber(max_cmd_sn);
  return r;
}

/// A SCSI Response data segment: SenseLength 18, then fixed-format sense (response code 70h) with
/// `key` and ASC `asc` (RFC 7143 §11.4.7, SPC-5 §4.4.3).
std::vector<std::byte> sense_segment(std::uint8_t key, std::uint8_t asc) {
  std::vector<std::byte> data(20);
  data[1] = std::byte{18};
  data[2] = std::byte{0x70};
  data[4] = std::byte{key};
  data[9] = std::byte{10};
  data[14] = std::byte{asc};
  return data;
}

iscsi::DataIn data_in(iscsi::Itt itt, std::uint32_t data_sn, std::uint32_t offset) {
  iscsi::DataIn d;
  d.itt = itt;
  d.data_sn = data_sn;
  d.buffer_offset = offset;
  d.exp_cmd_sn = SerialNumber(1);
  d.max_cmd_sn = SerialNumber(64);
  return d;
}

}  // namespace

// ---- reads: Data-In placement, DataSN order, residuals, digest errors ----

// Ended tasks' map nodes and the action vectors are reused (no allocation per command in steady
// state): a reused task starts clean. Each round: a read completed with an underflow residual after
// two Data-In, then a read whose single Data-In (DataSN 0) carries the status with no residual.
TEST(SessionEngine, ReusedTasksStartClean) {
  Harness h;
  for (std::uint32_t round = 0; round < 3; ++round) {
    const auto stat_sn = SerialNumber(10 + 2 * round);
    std::vector<std::byte> buffer(8192);
    const TaskId first_id = h.read(buffer);
    auto sent = h.take_sent();
    ASSERT_EQ(sent.size(), 1u);
    const auto itt = sent[0].as<iscsi::ScsiCommand>().itt;
    std::vector<std::byte> part(4096, std::byte{0x11});
    h.deliver(data_in(itt, 0, 0), part);
    auto last = data_in(itt, 1, 4096);
    last.final = last.status_present = last.residual_underflow = true;
    last.residual_count = 4096;
    last.stat_sn = stat_sn;
    h.deliver(last, std::span<const std::byte>(part).first(0));
    const auto* o = h.outcome(first_id);
    ASSERT_NE(o, nullptr);
    EXPECT_EQ(o->result.residual_bytes, 4096u);

    std::vector<std::byte> second(4096);
    const TaskId second_id = h.read(second);
    sent = h.take_sent();
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_EQ(sent[0].as<iscsi::ScsiCommand>().expected_data_transfer_length, 4096u);
    auto only = data_in(sent[0].as<iscsi::ScsiCommand>().itt, 0, 0);
    only.final = only.status_present = true;
    only.stat_sn = stat_sn + 1;
    std::vector<std::byte> payload(4096, std::byte{0x22});
    h.deliver(only, payload);
    const auto* o2 = h.outcome(second_id);
    ASSERT_NE(o2, nullptr);
    EXPECT_FALSE(o2->error) << o2->error.message();
    EXPECT_EQ(o2->result.status, scsi::Status::good);
    EXPECT_EQ(o2->result.residual_bytes, 0u);
    EXPECT_EQ(second[4095], std::byte{0x22});
    EXPECT_EQ(h.engine.itts_in_use(), 0u);
  }
}

TEST(SessionEngine, OverflowResidualFromScsiResponse) {
  Harness h;
  std::vector<std::byte> buffer(512);
  const TaskId id = h.read(buffer);
  const auto itt = h.take_sent()[0].as<iscsi::ScsiCommand>().itt;
  auto r = good_response(itt);
  r.residual_overflow = true;
  r.residual_count = 100;
  h.deliver(r);
  const auto* o = h.outcome(id);
  ASSERT_NE(o, nullptr);
  EXPECT_TRUE(o->result.residual_overflow);
  EXPECT_EQ(o->result.residual_bytes, 100u);
}

TEST(SessionEngine, DataInOutsideTheBufferNeverLandsInIt) {
  Harness h;
  std::vector<std::byte> buffer(4096);
  const TaskId id = h.read(buffer);
  const auto itt = h.take_sent()[0].as<iscsi::ScsiCommand>().itt;
  std::vector<std::byte> seg(1024, std::byte{0xee});
  auto d = data_in(itt, 0, 3584);  // 3584 + 1024 > 4096
  auto bhs = iscsi::encode_bhs(d);
  EXPECT_TRUE(h.engine.place(bhs, 1024).empty());
  h.deliver(d, seg);
  const auto* o = h.outcome(id);
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->error, make_error_code(errc::protocol_error));
  for (auto b : buffer) ASSERT_EQ(b, std::byte{0});
}

TEST(SessionEngine, DataDigestErrorFailsOnlyThatTask) {
  Harness h;
  std::vector<std::byte> a(1024), b(1024);
  const TaskId first = h.read(a);
  const TaskId second = h.read(b);
  auto sent = h.take_sent();
  std::vector<std::byte> seg(1024, std::byte{3});
  h.deliver(data_in(sent[0].as<iscsi::ScsiCommand>().itt, 0, 0), seg, make_error_code(errc::data_digest_error));
  const auto* o = h.outcome(first);
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->error, make_error_code(errc::data_digest_error));
  EXPECT_EQ(h.outcome(second), nullptr);
  h.deliver(good_response(sent[1].as<iscsi::ScsiCommand>().itt));
  ASSERT_NE(h.outcome(second), nullptr);
  EXPECT_FALSE(h.outcome(second)->error);
}

TEST(SessionEngine, SenseDataFromScsiResponse) {
  Harness h;
  const TaskId id = h.read({});
  const auto itt = h.take_sent()[0].as<iscsi::ScsiCommand>().itt;
  auto r = good_response(itt);
  r.status = static_cast<std::uint8_t>(scsi::Status::check_condition);
  // ILLEGAL REQUEST, ASC 0x24 (INVALID FIELD IN CDB).
  h.deliver(r, sense_segment(0x05, 0x24));
  const auto* o = h.outcome(id);
  ASSERT_NE(o, nullptr);
  EXPECT_FALSE(o->error);
  EXPECT_EQ(o->result.status, scsi::Status::check_condition);
  ASSERT_TRUE(o->result.sense);
  EXPECT_EQ(o->result.sense->asc, 0x24);
}

// ---- the CmdSN window and ExpStatSN ----

TEST(SessionEngine, CommandsQueueWhileTheWindowIsClosedAndLeaveWhenMaxCmdSnOpensIt) {
  Harness h({}, {.cmd_sn = SerialNumber(1), .exp_cmd_sn = SerialNumber(1), .max_cmd_sn = SerialNumber(2),
                 .exp_stat_sn = SerialNumber(0)});
  const TaskId a = h.read({}), b = h.read({}), c = h.read({});
  auto sent = h.take_sent();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].as<iscsi::ScsiCommand>().cmd_sn, SerialNumber(1));
  EXPECT_EQ(sent[1].as<iscsi::ScsiCommand>().cmd_sn, SerialNumber(2));
  EXPECT_EQ(h.engine.state(a), TaskState::sent);
  EXPECT_EQ(h.engine.state(b), TaskState::sent);
  EXPECT_EQ(h.engine.state(c), TaskState::queued_for_window);
  EXPECT_EQ(h.engine.stats().commands_queued_for_window, 1u);

  // A response that does not move MaxCmdSN leaves the window closed.
  h.deliver(good_response(sent[0].as<iscsi::ScsiCommand>().itt, 0, 2));
  EXPECT_TRUE(h.take_sent().empty());
  EXPECT_EQ(h.engine.state(c), TaskState::queued_for_window);
  // An unsolicited NOP-In with MaxCmdSN = 3 opens it.
  iscsi::NopIn nop;
  nop.exp_cmd_sn = SerialNumber(2);
  nop.max_cmd_sn = SerialNumber(3);
  h.deliver(nop);
  sent = h.take_sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].as<iscsi::ScsiCommand>().cmd_sn, SerialNumber(3));
  EXPECT_EQ(h.engine.state(c), TaskState::sent);
}

TEST(SessionEngine, WindowAcrossTheSerialWrap) {
  Harness h({}, {.cmd_sn = SerialNumber(0xffffffffu), .exp_cmd_sn = SerialNumber(0xffffffffu),
                 .max_cmd_sn = SerialNumber(0), .exp_stat_sn = SerialNumber(0)});
  h.read({});
  h.read({});
  h.read({});
  auto sent = h.take_sent();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].as<iscsi::ScsiCommand>().cmd_sn, SerialNumber(0xffffffffu));
  EXPECT_EQ(sent[1].as<iscsi::ScsiCommand>().cmd_sn, SerialNumber(0));
  EXPECT_EQ(h.engine.commands_queued(), 1u);
}

TEST(SessionEngine, ExpStatSnFollowsStatSnAndIgnoresStaleValues) {
  Harness h;
  h.read({});
  h.read({});
  auto sent = h.take_sent();
  h.deliver(good_response(sent[0].as<iscsi::ScsiCommand>().itt, 20));
  h.deliver(good_response(sent[1].as<iscsi::ScsiCommand>().itt, 15));  // older StatSN: no step back
  EXPECT_EQ(h.engine.exp_stat_sn(), SerialNumber(21));
  h.read({});
  sent = h.take_sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].as<iscsi::ScsiCommand>().exp_stat_sn, SerialNumber(21));
}

TEST(SessionEngine, InFlightLimitHoldsCommandsBack) {
  EngineConfig c;
  c.max_commands_in_flight = 1;
  Harness h(c);
  const TaskId a = h.read({}), b = h.read({});
  auto sent = h.take_sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(h.engine.state(b), TaskState::queued_for_window);
  h.deliver(good_response(sent[0].as<iscsi::ScsiCommand>().itt));
  ASSERT_NE(h.outcome(a), nullptr);
  EXPECT_EQ(h.take_sent().size(), 1u);
  EXPECT_EQ(h.engine.state(b), TaskState::sent);
}

// ---- writes: immediate, unsolicited, R2T-solicited Data-Out ----

TEST(SessionEngine, R2tOutOfOrderOrOutsideTheTransferFailsTheTask) {
  EngineConfig c;
  c.limits = {.immediate_data = false, .initial_r2t = true, .first_burst_length = 8192,
              .max_burst_length = 8192, .max_send_segment_length = 8192};
  Harness h(c);
  std::vector<std::byte> payload(16384);
  const TaskId a = h.write(payload);
  const TaskId b = h.write(payload);
  auto sent = h.take_sent();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_TRUE(sent[0].data.empty());
  iscsi::R2t r2t;
  r2t.itt = sent[0].as<iscsi::ScsiCommand>().itt;
  r2t.r2t_sn = 1;  // R2TSN 0 never came
  r2t.desired_data_transfer_length = 4096;
  h.deliver(r2t);
  ASSERT_NE(h.outcome(a), nullptr);
  EXPECT_EQ(h.outcome(a)->error, make_error_code(errc::protocol_error));
  EXPECT_TRUE(h.take_sent().empty());  // no data for a bad R2T

  r2t.itt = sent[1].as<iscsi::ScsiCommand>().itt;
  r2t.r2t_sn = 0;
  r2t.buffer_offset = 12288;
  r2t.desired_data_transfer_length = 8192;  // past the end of the 16 KiB transfer
  h.deliver(r2t);
  ASSERT_NE(h.outcome(b), nullptr);
  EXPECT_EQ(h.outcome(b)->error, make_error_code(errc::protocol_error));
  EXPECT_TRUE(h.take_sent().empty());
}

// ---- Reject ----

TEST(SessionEngine, RejectOfAnOutstandingIttFailsThatTask) {
  Harness h;
  const TaskId a = h.read({}), b = h.read({});
  auto sent = h.take_sent();
  iscsi::Reject r;
  r.reason = iscsi::RejectReason::invalid_pdu_field;
  r.stat_sn = SerialNumber(30);
  r.exp_cmd_sn = SerialNumber(1);
  r.max_cmd_sn = SerialNumber(64);
  h.deliver(r, sent[1].bhs);
  ASSERT_NE(h.outcome(b), nullptr);
  EXPECT_EQ(h.outcome(b)->error, make_error_code(errc::protocol_error));
  EXPECT_EQ(h.outcome(a), nullptr);
  EXPECT_EQ(h.engine.exp_stat_sn(), SerialNumber(31));
  // A Reject naming no task we have, or too short to name one, changes nothing.
  iscsi::Bhs unknown = sent[1].bhs;
  h.deliver(r, unknown);
  h.deliver(r, std::span<const std::byte>(sent[0].bhs).first(20));
  EXPECT_EQ(h.outcome(a), nullptr);
  EXPECT_TRUE(h.engine.open());
}

// ---- task management ----

TEST(SessionEngine, RefusedTmfLeavesTasksAlone) {
  Harness h;
  const TaskId read = h.read({});
  const auto itt = h.take_sent()[0].as<iscsi::ScsiCommand>().itt;
  auto tmf = h.engine.submit_task_management(
      {.function = iscsi::TaskManagementFunction::abort_task, .referenced_task_tag = itt}, t0);
  ASSERT_TRUE(tmf);
  iscsi::TaskManagementResponse rsp;
  rsp.itt = h.take_sent()[0].as<iscsi::TaskManagementRequest>().itt;
  rsp.response = 5;  // function not supported
  h.deliver(rsp);
  ASSERT_NE(h.outcome(*tmf), nullptr);
  EXPECT_EQ(h.outcome(*tmf)->tmf_response, iscsi::TaskManagementResponseCode::function_not_supported);
  EXPECT_EQ(h.outcome(read), nullptr);
  EXPECT_EQ(h.engine.state(read), TaskState::sent);
}

TEST(SessionEngine, TimeoutWhileDataIsBeingReceivedWaitsForThePdu) {
  Harness h;
  std::vector<std::byte> buffer(4096);
  const TaskId id = h.read(buffer, 100ms);
  const auto itt = h.take_sent()[0].as<iscsi::ScsiCommand>().itt;
  auto d = data_in(itt, 0, 0);
  datamover::PduIn in;
  in.bhs = iscsi::encode_bhs(d);
  iscsi::set_lengths(in.bhs, 0, 1024);
  auto where = h.engine.place(in.bhs, 1024);
  ASSERT_EQ(where.size(), 1024u);
  h.engine.on_timer(t0 + 200ms);  // the datamover is still filling `where`
  EXPECT_EQ(h.outcome(id), nullptr);
  in.data = where;
  h.engine.on_pdu(in, t0 + 201ms);
  ASSERT_NE(h.outcome(id), nullptr);
  EXPECT_EQ(h.outcome(id)->error, make_error_code(errc::timeout));
  EXPECT_EQ(h.engine.state(id), TaskState::timed_out_aborting);
}

TEST(SessionEngine, TimeoutEndsTheSessionWhenTheTransportNeedsIt) {
  EngineConfig c;
  c.fail_session_on_timeout = true;  // iSER
  Harness h(c);
  const TaskId a = h.read({}, 50ms);
  const TaskId b = h.read({});
  h.take_sent();
  h.engine.on_timer(t0 + 50ms);
  ASSERT_NE(h.outcome(a), nullptr);
  EXPECT_EQ(h.outcome(a)->error, make_error_code(errc::timeout));
  test::expect_ended_with(h, make_error_code(errc::connection_closed), b, make_error_code(errc::connection_closed));
}

// Per-command STags (iSER): the connection survives a timeout, but the owner gets its buffer back
// only when the target has ended the task, since until then its RDMA may still reach the buffer.
EngineConfig holding_timeouts() {
  EngineConfig c;
  c.hold_timed_out_until_aborted = true;
  return c;
}

/// A read with a 100 ms timeout, timed out: returns the ABORT TASK the engine sent for it.
iscsi::TaskManagementRequest time_out_read(Harness& h, TaskId& id) {
  static std::vector<std::byte> buffer(4096);
  id = h.read(buffer, 100ms);
  const auto cmd = h.take_sent()[0].as<iscsi::ScsiCommand>();
  h.engine.on_timer(t0 + 100ms);
  const auto abort = h.take_sent()[0].as<iscsi::TaskManagementRequest>();
  EXPECT_EQ(abort.referenced_task_tag, cmd.itt);
  return abort;
}

void answer(Harness& h, const iscsi::TaskManagementRequest& abort, std::uint8_t response) {
  iscsi::TaskManagementResponse rsp;
  rsp.itt = abort.itt;
  rsp.response = response;
  h.deliver(rsp);
}

TEST(SessionEngine, HeldTimeoutReachesTheOwnerWhenTheAbortTaskIsAnswered) {
  Harness h(holding_timeouts());
  TaskId id = 0;
  const auto abort = time_out_read(h, id);
  EXPECT_EQ(h.outcome(id), nullptr) << "the owner heard the timeout before the target ended the task";
  EXPECT_EQ(h.engine.state(id), TaskState::timed_out_aborting);
  answer(h, abort, 1);  // task does not exist: the target moves no data for it either
  ASSERT_NE(h.outcome(id), nullptr);
  EXPECT_EQ(h.outcome(id)->error, make_error_code(errc::timeout));
  EXPECT_EQ(h.engine.itts_in_use(), 0u);
  EXPECT_TRUE(h.engine.open());
  EXPECT_FALSE(h.connection_lost);
  EXPECT_EQ(h.done.size(), 1u);
}

TEST(SessionEngine, HeldTimeoutClosesTheConnectionWhenTheAbortTaskTimesOut) {
  EngineConfig c = holding_timeouts();
  c.request_timeout = 1000ms;
  c.replacement_timeout = 10000ms;
  Harness h(c);
  std::vector<std::byte> buffer(4096);
  const TaskId id = h.read(buffer, 100ms);
  const TaskId other = h.read(buffer);
  h.take_sent();
  h.engine.on_timer(t0 + 100ms);
  EXPECT_EQ(h.outcome(id), nullptr);
  h.engine.on_timer(t0 + 1099ms);
  h.drain();
  EXPECT_EQ(h.outcome(id), nullptr);
  EXPECT_FALSE(h.connection_lost);
  h.engine.on_timer(t0 + 1100ms);  // the ABORT TASK is not answered in time
  h.drain();
  ASSERT_TRUE(h.connection_lost) << "only a closed connection stops the target's RDMA";
  ASSERT_NE(h.outcome(id), nullptr);
  EXPECT_EQ(h.outcome(id)->error, make_error_code(errc::timeout));
  // The other command is sent again on the next connection, not failed.
  EXPECT_EQ(h.outcome(other), nullptr);
  EXPECT_EQ(h.engine.state(other), TaskState::queued_for_window);
  EXPECT_EQ(h.engine.state(id), TaskState::done);
}

TEST(SessionEngine, HeldTimeoutEndsTheSessionWhenTheAbortTaskIsRefusedAndNoRecovery) {
  Harness h(holding_timeouts());
  TaskId id = 0;
  const auto abort = time_out_read(h, id);
  answer(h, abort, 5);  // function not supported: the task may still be running
  test::expect_ended_with(h, make_error_code(errc::connection_closed), id, make_error_code(errc::timeout));
}

// ---- resource limits ----

TEST(SessionEngine, FullIttTableIsAnErrorTheCallerSees) {
  EngineConfig c;
  c.max_commands_in_flight = 1;  // 2 * 1 + 8 = 10 ITTs
  Harness h(c);
  int accepted = 0;
  Result<TaskId> r;
  while ((r = h.engine.submit_task_management({.function = iscsi::TaskManagementFunction::abort_task_set}, t0)))
    ++accepted;
  EXPECT_EQ(accepted, 10);
  EXPECT_EQ(r.error(), std::make_error_code(std::errc::resource_unavailable_try_again));
  EXPECT_TRUE(h.engine.open());
  // SCSI commands do not fail: they queue until ITTs free up.
  const TaskId q = h.read({});
  EXPECT_EQ(h.engine.state(q), TaskState::queued_for_window);
}

TEST(SessionEngine, TooManyQueuedCommandsIsAnError) {
  EngineConfig c;
  c.max_commands_in_flight = 1;
  c.max_queued_commands = 2;
  Harness h(c);
  h.read({});
  h.read({});
  h.read({});  // one in flight, two queued
  ScsiSubmission s;
  auto r = h.engine.submit(s, t0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), std::make_error_code(std::errc::resource_unavailable_try_again));
}

TEST(SessionEngine, BidirectionalCommandsAreRefused) {
  Harness h;
  std::vector<std::byte> in(8), out(8);
  ScsiSubmission s;
  s.data_in = in;
  s.data_out = out;
  auto r = h.engine.submit(s, t0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), make_error_code(errc::invalid_argument));
}

// ---- NOP-Out / NOP-In ----

TEST(SessionEngine, NopInWithTttIsAnsweredWithItsData) {
  Harness h;
  iscsi::NopIn nop;
  nop.ttt = iscsi::Ttt{0x1234};
  nop.lun = scsi::Lun::from_index(3);
  nop.stat_sn = SerialNumber(99);  // not advanced by an unsolicited NOP-In (ITT reserved)
  auto ping = bytes_of("ping data");
  h.deliver(nop, ping);
  auto sent = h.take_sent();
  ASSERT_EQ(sent.size(), 1u);
  const auto out = sent[0].as<iscsi::NopOut>();
  EXPECT_EQ(out.ttt, iscsi::Ttt{0x1234});
  EXPECT_EQ(out.itt, iscsi::reserved_itt);
  EXPECT_EQ(out.lun, scsi::Lun::from_index(3));
  EXPECT_TRUE(out.immediate);
  EXPECT_EQ(sent[0].data, ping);
  EXPECT_EQ(sent[0].borrower, 0u);
  EXPECT_EQ(h.engine.exp_stat_sn(), SerialNumber(10));
  // TTT 0xffffffff: no answer.
  nop.ttt = iscsi::reserved_ttt;
  h.deliver(nop);
  EXPECT_TRUE(h.take_sent().empty());
}

TEST(SessionEngine, KeepalivePingsOnSilenceAndFailsWithoutAnswer) {
  EngineConfig c;
  c.nop_interval = 1000ms;
  c.nop_timeout = 500ms;
  Harness h(c);
  EXPECT_EQ(h.engine.next_deadline(), t0 + 1000ms);
  h.engine.on_timer(t0 + 1000ms);
  auto sent = h.take_sent();
  ASSERT_EQ(sent.size(), 1u);
  const auto ping = sent[0].as<iscsi::NopOut>();
  EXPECT_NE(ping.itt, iscsi::reserved_itt);
  EXPECT_EQ(h.engine.stats().pings_sent, 1u);
  iscsi::NopIn pong;
  pong.itt = ping.itt;
  pong.stat_sn = SerialNumber(10);
  h.deliver(pong, {}, {}, t0 + 1100ms);
  EXPECT_EQ(h.engine.stats().pings_answered, 1u);
  EXPECT_EQ(h.engine.itts_in_use(), 0u);
  EXPECT_EQ(h.engine.next_deadline(), t0 + 2100ms);
  h.engine.on_timer(t0 + 2100ms);
  ASSERT_EQ(h.take_sent().size(), 1u);
  EXPECT_EQ(h.engine.next_deadline(), t0 + 2600ms);
  h.engine.on_timer(t0 + 2600ms);
  h.drain();
  ASSERT_TRUE(h.ended);
  EXPECT_EQ(*h.ended, make_error_code(errc::timeout));
}

// ---- Async Messages ----

TEST(SessionEngine, AsyncLogoutRequestLogsOutWithinParameter3) {
  Harness h;
  iscsi::AsyncMessage a;
  a.event = iscsi::AsyncEvent::logout_request;
  a.parameter3 = 2;
  h.deliver(a);
  auto sent = h.take_sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].as<iscsi::LogoutRequest>().reason, iscsi::LogoutReason::close_session);
  EXPECT_FALSE(h.engine.accepting());
  EXPECT_EQ(h.engine.next_deadline(), t0 + 2000ms);
  h.engine.on_timer(t0 + 2000ms);  // no Logout Response in time
  h.drain();
  ASSERT_TRUE(h.ended);
  EXPECT_EQ(*h.ended, make_error_code(errc::session_closed));
  EXPECT_TRUE(h.done.empty());  // the session's own logout has no owner to tell
}

TEST(SessionEngine, AsyncDropConnectionFailsTheSession) {
  Harness h;
  const TaskId id = h.read({});
  iscsi::AsyncMessage a;
  a.event = iscsi::AsyncEvent::drop_connection;
  h.deliver(a);
  ASSERT_NO_FATAL_FAILURE(test::expect_ended_with(h, make_error_code(errc::connection_closed), id,
                                                  make_error_code(errc::connection_closed)));
  EXPECT_FALSE(h.engine.submit({}, t0));
}

TEST(SessionEngine, AsyncScsiEventIsOnlyLogged) {
  Harness h;
  iscsi::AsyncMessage a;
  a.event = iscsi::AsyncEvent::scsi_async_event;
  h.deliver(a);
  EXPECT_FALSE(h.ended);
  EXPECT_TRUE(h.engine.accepting());
}

// ---- Logout ----

TEST(SessionEngine, LogoutRefusedByTheTargetIsAnErrorAndStillEndsTheSession) {
  Harness h;
  auto logout = h.engine.logout(t0);
  auto sent = h.take_sent();
  ASSERT_EQ(sent.size(), 1u);
  iscsi::LogoutResponse rsp;
  rsp.itt = sent[0].as<iscsi::LogoutRequest>().itt;
  rsp.response = 3;  // cleanup failed
  h.deliver(rsp);
  ASSERT_NE(h.outcome(*logout), nullptr);
  EXPECT_EQ(h.outcome(*logout)->error, make_error_code(errc::protocol_error));
  EXPECT_TRUE(h.ended);
}

// ---- text requests ----

TEST(SessionEngine, TextResponseContinuationIsGathered) {
  Harness h;
  auto id = h.engine.submit_text(bytes_of(std::string("SendTargets=All") + '\0'), t0);
  ASSERT_TRUE(id);
  auto sent = h.take_sent();
  ASSERT_EQ(sent.size(), 1u);
  const auto req = sent[0].as<iscsi::TextRequest>();
  EXPECT_TRUE(req.final);
  EXPECT_EQ(req.ttt, iscsi::reserved_ttt);
  EXPECT_EQ(sent[0].data, bytes_of(std::string("SendTargets=All") + '\0'));

  iscsi::TextResponse part;
  part.itt = req.itt;
  part.final = false;
  part.continue_ = true;
  part.ttt = iscsi::Ttt{0x42};
  part.stat_sn = SerialNumber(10);
  auto first = bytes_of("TargetName=iqn.2026-01.test:a");
  h.deliver(part, first);
  EXPECT_EQ(h.outcome(*id), nullptr);
  sent = h.take_sent();
  ASSERT_EQ(sent.size(), 1u);
  const auto more = sent[0].as<iscsi::TextRequest>();
  EXPECT_EQ(more.ttt, iscsi::Ttt{0x42});  // RFC 7143 §11.11.2: echo the TTT
  EXPECT_EQ(more.itt, req.itt);
  EXPECT_EQ(more.exp_stat_sn, SerialNumber(11));
  EXPECT_TRUE(sent[0].data.empty());

  iscsi::TextResponse last;
  last.itt = req.itt;
  last.final = true;
  last.stat_sn = SerialNumber(11);
  auto second = bytes_of(std::string("bc") + '\0');
  h.deliver(last, second);
  const auto* o = h.outcome(*id);
  ASSERT_NE(o, nullptr);
  EXPECT_FALSE(o->error);
  EXPECT_EQ(o->text, bytes_of(std::string("TargetName=iqn.2026-01.test:abc") + '\0'));
}

TEST(SessionEngine, TextResponseWithDigestErrorFailsTheRequest) {
  Harness h;
  auto id = h.engine.submit_text(bytes_of("SendTargets=All"), t0);
  iscsi::TextResponse rsp;
  rsp.itt = h.take_sent()[0].as<iscsi::TextRequest>().itt;
  h.deliver(rsp, bytes_of("x"), make_error_code(errc::data_digest_error));
  ASSERT_NE(h.outcome(*id), nullptr);
  EXPECT_EQ(h.outcome(*id)->error, make_error_code(errc::data_digest_error));
}

// ---- session failure ----

TEST(SessionEngine, QueuedCommandEndsOnceWhenTheSessionFails) {
  // Regression: a command admitted to the window's queue and a session failure before it
  // resumed used to decrement the admission count twice.
  Harness h({}, {.cmd_sn = SerialNumber(1), .exp_cmd_sn = SerialNumber(1), .max_cmd_sn = SerialNumber(1),
                 .exp_stat_sn = SerialNumber(0)});
  const TaskId sent_one = h.read({});
  const TaskId queued = h.read({});
  EXPECT_EQ(h.engine.state(queued), TaskState::queued_for_window);
  EXPECT_EQ(h.take_sent().size(), 1u);
  h.engine.fail_session(make_error_code(errc::connection_closed));
  h.engine.fail_session(make_error_code(errc::connection_closed));  // twice: still once
  h.drain();
  ASSERT_NE(h.outcome(sent_one), nullptr);
  ASSERT_NE(h.outcome(queued), nullptr);
  EXPECT_EQ(h.outcome(queued)->error, make_error_code(errc::connection_closed));
  EXPECT_EQ(h.done.size(), 2u);
  EXPECT_EQ(h.engine.commands_queued(), 0u);
  EXPECT_EQ(h.engine.commands_holding_itt(), 0u);
  EXPECT_EQ(h.engine.itts_in_use(), 0u);
  // A window update after the failure sends nothing.
  iscsi::NopIn nop;
  nop.max_cmd_sn = SerialNumber(100);
  h.deliver(nop);
  EXPECT_TRUE(h.take_sent().empty());
  auto r = h.engine.submit({}, t0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), make_error_code(errc::connection_closed));
}

TEST(SessionEngine, FailureDuringAReceiveEndsThatTaskAfterTheReceive) {
  Harness h;
  std::vector<std::byte> buffer(1024);
  const TaskId id = h.read(buffer);
  const auto itt = h.take_sent()[0].as<iscsi::ScsiCommand>().itt;
  auto bhs = iscsi::encode_bhs(data_in(itt, 0, 0));
  ASSERT_FALSE(h.engine.place(bhs, 512).empty());
  h.engine.fail_session(make_error_code(errc::connection_closed));
  EXPECT_EQ(h.outcome(id), nullptr);  // the datamover may still write into the buffer
  h.engine.on_receive_ended();
  ASSERT_NE(h.outcome(id), nullptr);
  EXPECT_EQ(h.outcome(id)->error, make_error_code(errc::connection_closed));
}

TEST(SessionEngine, UnexpectedOpcodeFailsTheSession) {
  Harness h;
  iscsi::LoginResponse login;
  h.deliver(login);
  ASSERT_TRUE(h.ended);
  EXPECT_EQ(*h.ended, make_error_code(errc::protocol_error));
}

// RFC 7143 §11.4.3: a Response other than "Command Completed at Target" (here 0x01, Target Failure)
// makes the status invalid: the task fails with a protocol error and no SCSI status or sense is
// reported, even when the PDU carries CHECK CONDITION and sense bytes; the session goes on.
TEST(SessionEngine, TargetFailureFailsTheTaskWithoutAStatus) {
  Harness h;
  const TaskId id = h.read({});
  const TaskId next = h.read({});
  auto sent = h.take_sent();
  auto r = good_response(sent[0].as<iscsi::ScsiCommand>().itt);
  r.response = 0x01;
  r.status = static_cast<std::uint8_t>(scsi::Status::check_condition);
  h.deliver(r, sense_segment(0x05, 0x24));
  const auto* o = h.outcome(id);
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->error, make_error_code(errc::protocol_error));
  EXPECT_FALSE(o->result.sense.has_value());
  EXPECT_FALSE(h.ended);
  h.deliver(good_response(sent[1].as<iscsi::ScsiCommand>().itt, 11));
  ASSERT_NE(h.outcome(next), nullptr);
  EXPECT_FALSE(h.outcome(next)->error);
}

// RFC 7143 §11.12.8, §11.13: full feature phase goes on from the login's numbering: the first
// command carries the leading Login Request's CmdSN and the ExpStatSN after the final Login
// Response's StatSN, and the window is the one that response opened.
TEST(SessionEngine, FullFeaturePhaseStartsFromTheLoginsNumbering) {
  Harness h({}, {.cmd_sn = SerialNumber(77), .exp_cmd_sn = SerialNumber(77), .max_cmd_sn = SerialNumber(78),
                 .exp_stat_sn = SerialNumber(5)});
  h.read({});
  h.read({});
  h.read({});  // the window [77, 78] holds two
  auto sent = h.take_sent();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].as<iscsi::ScsiCommand>().cmd_sn, SerialNumber(77));
  EXPECT_EQ(sent[0].as<iscsi::ScsiCommand>().exp_stat_sn, SerialNumber(5));
  EXPECT_EQ(sent[1].as<iscsi::ScsiCommand>().cmd_sn, SerialNumber(78));
}

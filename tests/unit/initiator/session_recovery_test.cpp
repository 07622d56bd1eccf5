// SessionEngine recovery (RFC 7143 §6.3.5 session reinstatement at ErrorRecoveryLevel 0): a lost
// connection with a replacement timeout keeps the commands, the driver logs in again and the
// engine sends every interrupted command once more, in order; a re-issued SYNCHRONIZE CACHE
// waits for the re-issued writes; UNIT ATTENTION 29h after reinstatement is absorbed; past the
// replacement timeout everything fails with errc::session_lost — and with reconnect_after_give_up
// the session stays failed (new commands fail at once, none queued) until a later login makes it
// logged in again. Time is injected; no sleeping.
#include <gtest/gtest.h>

#include <array>
#include <map>

#include <cerrno>

#include "iserkit/common/errors.hpp"
#include "iserkit/initiator/errors.hpp"
#include "engine_helpers.hpp"
#include "session_engine.hpp"

using namespace iserkit;
using namespace iserkit::initiator;
using namespace std::chrono_literals;

namespace {

const SessionEngine::TimePoint t0{};

EngineConfig recovering_config(std::chrono::milliseconds replacement = 10s) {
  EngineConfig c;
  c.replacement_timeout = replacement;
  return c;
}

/// Numbering of a new connection's login: CmdSN starts again at 1 (a new session, TSIH 0).
EngineStart fresh_start(std::uint32_t max_cmd_sn = 64, std::uint32_t exp_stat_sn = 100) {
  return {.cmd_sn = SerialNumber(1),
          .exp_cmd_sn = SerialNumber(1),
          .max_cmd_sn = SerialNumber(max_cmd_sn),
          .exp_stat_sn = SerialNumber(exp_stat_sn)};
}

/// Drives the engine and keeps what it asked for: commands sent (decoded), completions, the end,
/// lost connections.
struct Rig {
  explicit Rig(EngineConfig c = recovering_config(), std::uint32_t max_cmd_sn = 64)
      : engine(c,
               {.cmd_sn = SerialNumber(1),
                .exp_cmd_sn = SerialNumber(1),
                .max_cmd_sn = SerialNumber(max_cmd_sn),
                .exp_stat_sn = SerialNumber(10)},
               t0) {}

  SessionEngine engine;
  std::vector<iscsi::PduHeader> sent;
  std::vector<std::size_t> sent_data_bytes;
  std::map<TaskId, std::vector<TaskOutcome>> done;
  std::optional<std::error_code> ended;
  std::vector<std::error_code> lost;
  std::vector<std::error_code> gave_up;

  void drain() {
    auto a = engine.take_actions();
    for (auto& p : a.pdus) {
      auto h = iscsi::decode_bhs(p.pdu.bhs);
      ASSERT_TRUE(h);
      sent.push_back(*h);
      sent_data_bytes.push_back(p.pdu.data.size());
    }
    for (auto& c : a.completions) done[c.id].push_back(std::move(c));
    if (a.connection_lost) lost.push_back(*a.connection_lost);
    if (a.gave_up) gave_up.push_back(*a.gave_up);
    if (a.ended) {
      EXPECT_FALSE(ended) << "the session may end only once";
      ended = a.ended;
    }
  }
  /// The SCSI Commands sent since the last call, in order.
  std::vector<iscsi::ScsiCommand> commands() {
    drain();
    std::vector<iscsi::ScsiCommand> out;
    for (const auto& h : sent)
      if (const auto* c = std::get_if<iscsi::ScsiCommand>(&h)) out.push_back(*c);
    sent.clear();
    sent_data_bytes.clear();
    return out;
  }
  /// The one outcome of `id` (fails the test when it completed more than once); null if none.
  const TaskOutcome* outcome(TaskId id) {
    drain();
    auto it = done.find(id);
    if (it == done.end()) return nullptr;
    EXPECT_EQ(it->second.size(), 1u) << "task " << id << " completed more than once";
    return &it->second.front();
  }

  TaskId submit(std::uint8_t opcode, std::span<std::byte> in, std::span<const std::byte> out,
                SessionEngine::TimePoint now = t0) {
    auto id = engine.submit(test::cdb10_submission(opcode, in, out), now);
    EXPECT_TRUE(id) << (id ? "" : id.error().message());
    drain();
    return id.value_or(0);
  }
  TaskId read(std::span<std::byte> buffer) { return submit(0x28, buffer, {}); }
  TaskId write(std::span<const std::byte> buffer) { return submit(0x2a, {}, buffer); }
  TaskId sync_cache() { return submit(0x35, {}, {}); }

  void deliver(const iscsi::PduHeader& h, std::span<const std::byte> data = {}, SessionEngine::TimePoint now = t0) {
    engine.on_pdu(test::placed_pdu(engine, h, data, scratch), now);
    drain();
  }
  void answer(const iscsi::ScsiCommand& c, std::span<const std::byte> sense = {}) {
    iscsi::ScsiResponse r;
    r.itt = c.itt;
    r.stat_sn = c.exp_stat_sn;
    r.exp_cmd_sn = c.cmd_sn + 1;
    r.max_cmd_sn = c.cmd_sn + 64;
    if (!sense.empty()) r.status = static_cast<std::uint8_t>(scsi::Status::check_condition);
    deliver(r, sense);
  }

 private:
  std::vector<std::byte> scratch;
};

/// A SCSI Response data segment: SenseLength + fixed-format sense (RFC 7143 §11.4.7).
std::vector<std::byte> sense_segment(scsi::SenseKey key, std::uint8_t asc, std::uint8_t ascq) {
  std::array<std::byte, 64> sense{};
  scsi::SenseData d;
  d.key = key;
  d.asc = asc;
  d.ascq = ascq;
  const std::size_t n = scsi::encode_sense(d, scsi::SenseFormat::fixed, sense);
  std::vector<std::byte> out(2 + n);
  out[1] = static_cast<std::byte>(n);
  for (std::size_t i = 0; i < n; ++i) out[2 + i] = sense[i];
  return out;
}

std::uint8_t opcode_of(const iscsi::ScsiCommand& c) { return static_cast<std::uint8_t>(c.cdb[0]); }

}  // namespace

TEST(SessionRecovery, ReplacementTimeoutFailsWaitingAndNewCommandsWithSessionLost) {
  Rig rig(recovering_config(5s));
  std::vector<std::byte> buf(512);
  const TaskId in_flight = rig.read(buf);
  rig.commands();
  rig.engine.connection_failed(make_error_code(errc::connection_closed), t0);
  const TaskId queued = rig.read(buf);
  rig.engine.on_timer(t0 + 4999ms);
  rig.drain();
  EXPECT_FALSE(rig.ended);
  EXPECT_EQ(rig.outcome(in_flight), nullptr);
  rig.engine.on_timer(t0 + 5s);
  rig.drain();
  ASSERT_TRUE(rig.ended);
  EXPECT_EQ(*rig.ended, make_error_code(errc::session_lost));
  for (TaskId id : {in_flight, queued}) {
    const TaskOutcome* o = rig.outcome(id);
    ASSERT_NE(o, nullptr);
    EXPECT_EQ(o->error, make_error_code(errc::session_lost));
  }
  ScsiSubmission s;
  s.cdb.length = 10;
  auto late = rig.engine.submit(s, t0 + 6s);
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error(), make_error_code(errc::session_lost));
  EXPECT_EQ(rig.engine.stats().gave_up, 1u);
  // A login that finishes after giving up changes nothing.
  rig.engine.on_reconnected(fresh_start(), WriteLimits{}, t0 + 7s);
  EXPECT_TRUE(rig.commands().empty());
  EXPECT_FALSE(rig.engine.recovering());
}

// open-iscsi's replacement_timeout with iscsid logging in for ever: past the timeout the waiting
// commands fail, new ones fail at once and are not queued, no deadline is left armed; a login
// that succeeds later makes the session serve commands again; the next loss gives up again.
TEST(SessionRecovery, PastTheReplacementTimeoutCommandsFailAtOnceUntilALoginSucceeds) {
  EngineConfig c = recovering_config(5s);
  c.reconnect_after_give_up = true;
  Rig rig(c);
  std::vector<std::byte> buf(512);
  const TaskId in_flight = rig.read(buf);
  ASSERT_EQ(rig.commands().size(), 1u);
  rig.engine.connection_failed(make_error_code(errc::connection_closed), t0);
  const TaskId queued = rig.read(buf);
  rig.engine.on_timer(t0 + 5s);
  rig.drain();
  EXPECT_FALSE(rig.ended) << "the session is failed, not ended";
  ASSERT_EQ(rig.gave_up.size(), 1u);
  EXPECT_EQ(rig.gave_up[0], make_error_code(errc::session_lost));
  for (TaskId id : {in_flight, queued}) {
    const TaskOutcome* o = rig.outcome(id);
    ASSERT_NE(o, nullptr);
    EXPECT_EQ(o->error, make_error_code(errc::session_lost));
  }
  EXPECT_TRUE(rig.engine.open());
  EXPECT_TRUE(rig.engine.accepting());
  EXPECT_TRUE(rig.engine.recovering());
  EXPECT_TRUE(rig.engine.failed());
  EXPECT_EQ(rig.engine.stats().gave_up, 1u);
  // Bounded while failed: nothing is queued, no task kept, no deadline armed (the driver's
  // back-off is the only timer).
  ScsiSubmission s;
  s.cdb.length = 10;
  s.data_in = buf;
  for (int i = 0; i < 3; ++i) {
    auto late = rig.engine.submit(s, t0 + 6s);
    ASSERT_FALSE(late);
    EXPECT_EQ(late.error(), make_error_code(errc::session_lost));
  }
  EXPECT_EQ(rig.engine.commands_queued(), 0u);
  EXPECT_EQ(rig.engine.itts_in_use(), 0u);
  EXPECT_EQ(rig.engine.next_deadline(), SessionEngine::TimePoint::max());
  rig.engine.on_timer(t0 + 60s);
  rig.drain();
  EXPECT_EQ(rig.gave_up.size(), 1u) << "gave up once per lost connection";
  EXPECT_TRUE(rig.commands().empty());

  // The target is back: a login succeeds, new commands are served.
  rig.engine.on_reconnected(fresh_start(), WriteLimits{}, t0 + 90s);
  EXPECT_FALSE(rig.engine.failed());
  EXPECT_FALSE(rig.engine.recovering());
  EXPECT_TRUE(rig.commands().empty()) << "the failed commands are not sent again";
  const TaskId fresh = rig.submit(0x28, buf, {}, t0 + 91s);
  auto sent = rig.commands();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].cmd_sn, SerialNumber(1));
  rig.answer(sent[0]);
  ASSERT_NE(rig.outcome(fresh), nullptr);
  EXPECT_FALSE(rig.outcome(fresh)->error);
  EXPECT_EQ(rig.engine.stats().recoveries, 1u);

  // Lost again: commands wait again for a whole replacement timeout, then fail again.
  const TaskId again = rig.read(buf);
  rig.commands();
  rig.engine.connection_failed(make_error_code(errc::connection_closed), t0 + 100s);
  rig.engine.on_timer(t0 + 104s);
  rig.drain();
  EXPECT_EQ(rig.outcome(again), nullptr) << "waits within the replacement timeout";
  EXPECT_FALSE(rig.engine.failed());
  rig.engine.on_timer(t0 + 105s);
  ASSERT_NE(rig.outcome(again), nullptr);
  EXPECT_EQ(rig.outcome(again)->error, make_error_code(errc::session_lost));
  EXPECT_EQ(rig.gave_up.size(), 2u);
  EXPECT_EQ(rig.engine.stats().gave_up, 2u);
  EXPECT_FALSE(rig.ended);
}

// A failed session (past the replacement timeout) that the caller logs out or closes ends there;
// a login finishing afterwards changes nothing.
TEST(SessionRecovery, LogoutOfAFailedSessionEndsIt) {
  EngineConfig c = recovering_config(1s);
  c.reconnect_after_give_up = true;
  Rig rig(c);
  rig.engine.connection_failed(make_error_code(errc::connection_closed), t0);
  rig.engine.on_timer(t0 + 1s);
  rig.drain();
  ASSERT_TRUE(rig.engine.failed());
  auto id = rig.engine.logout(t0 + 2s);
  EXPECT_FALSE(id);
  rig.drain();
  ASSERT_TRUE(rig.ended);
  EXPECT_EQ(*rig.ended, make_error_code(errc::session_closed));
  EXPECT_FALSE(rig.engine.failed());
  EXPECT_FALSE(rig.engine.recovering());
  rig.engine.on_reconnected(fresh_start(), WriteLimits{}, t0 + 3s);
  EXPECT_FALSE(rig.engine.open());
  EXPECT_TRUE(rig.commands().empty());
}

TEST(SessionRecovery, WithoutReplacementTimeoutALostConnectionEndsTheSession) {
  Rig rig(EngineConfig{});
  std::vector<std::byte> buf(512);
  const TaskId id = rig.read(buf);
  rig.engine.connection_failed(make_error_code(errc::connection_closed), t0);
  rig.drain();
  EXPECT_TRUE(rig.lost.empty());
  test::expect_ended_with(rig, make_error_code(errc::connection_closed), id, make_error_code(errc::connection_closed));
}

TEST(SessionRecovery, ReissuedSyncCacheWaitsForTheReissuedWritesBeforeIt) {
  Rig rig;
  std::vector<std::byte> w(4096, std::byte{1});
  const TaskId w1 = rig.write(w);
  const TaskId w2 = rig.write(w);
  const TaskId sync = rig.sync_cache();
  ASSERT_EQ(rig.commands().size(), 3u);
  rig.engine.connection_failed(make_error_code(errc::connection_closed), t0);
  rig.engine.on_reconnected(fresh_start(), WriteLimits{}, t0 + 1s);
  auto again = rig.commands();
  ASSERT_EQ(again.size(), 2u) << "SYNCHRONIZE CACHE must wait for the writes it covers";
  EXPECT_TRUE(again[0].write);
  EXPECT_TRUE(again[1].write);
  rig.answer(again[0]);
  EXPECT_TRUE(rig.commands().empty());
  EXPECT_EQ(rig.outcome(sync), nullptr);
  rig.answer(again[1]);
  auto then = rig.commands();
  ASSERT_EQ(then.size(), 1u);
  EXPECT_EQ(opcode_of(then[0]), 0x35);
  EXPECT_EQ(rig.outcome(sync), nullptr) << "acknowledged only after it ran on the new session";
  rig.answer(then[0]);
  for (TaskId id : {w1, w2, sync}) {
    ASSERT_NE(rig.outcome(id), nullptr);
    EXPECT_FALSE(rig.outcome(id)->error);
  }
}

TEST(SessionRecovery, UnitAttentionAfterReinstatementIsRetriedNotSurfaced) {
  Rig rig;
  std::vector<std::byte> buf(512);
  const TaskId id = rig.read(buf);
  rig.commands();
  rig.engine.connection_failed(make_error_code(errc::connection_closed), t0);
  rig.engine.on_reconnected(fresh_start(), WriteLimits{}, t0 + 1s);
  auto again = rig.commands();
  ASSERT_EQ(again.size(), 1u);
  // I_T NEXUS LOSS OCCURRED, then POWER ON OCCURRED: both absorbed.
  rig.answer(again[0], sense_segment(scsi::SenseKey::unit_attention, 0x29, 0x07));
  auto second = rig.commands();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(rig.outcome(id), nullptr);
  rig.answer(second[0], sense_segment(scsi::SenseKey::unit_attention, 0x29, 0x01));
  auto third = rig.commands();
  ASSERT_EQ(third.size(), 1u);
  EXPECT_NE(third[0].cmd_sn, second[0].cmd_sn);
  rig.answer(third[0]);
  const TaskOutcome* o = rig.outcome(id);
  ASSERT_NE(o, nullptr);
  EXPECT_FALSE(o->error);
  EXPECT_EQ(o->result.status, scsi::Status::good);
  EXPECT_EQ(rig.engine.stats().unit_attentions_absorbed, 2u);
  EXPECT_EQ(rig.engine.stats().unit_attentions, 2u) << "absorbed ones are counted as unit attentions too";

  // Other sense is the caller's, as before, and not a unit attention.
  const TaskId other = rig.read(buf);
  rig.answer(rig.commands().at(0), sense_segment(scsi::SenseKey::medium_error, 0x11, 0x00));
  ASSERT_NE(rig.outcome(other), nullptr);
  EXPECT_EQ(rig.outcome(other)->result.status, scsi::Status::check_condition);
  EXPECT_EQ(rig.engine.stats().unit_attentions, 2u);
}

TEST(SessionRecovery, UnitAttentionWithoutReinstatementReachesTheCaller) {
  Rig rig;
  std::vector<std::byte> buf(512);
  const TaskId id = rig.read(buf);
  rig.answer(rig.commands().at(0), sense_segment(scsi::SenseKey::unit_attention, 0x29, 0x00));
  const TaskOutcome* o = rig.outcome(id);
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->result.status, scsi::Status::check_condition);
  EXPECT_EQ(rig.engine.stats().unit_attentions_absorbed, 0u);
  EXPECT_EQ(rig.engine.stats().unit_attentions, 1u) << "counted even when it reaches the caller";
}

TEST(SessionRecovery, UnansweredPingAndAsyncDropRecoverInsteadOfEnding) {
  EngineConfig c = recovering_config();
  c.nop_interval = 1s;
  c.nop_timeout = 500ms;
  Rig rig(c);
  rig.engine.on_timer(t0 + 1s);  // ping
  rig.engine.on_timer(t0 + 1500ms);  // unanswered
  rig.drain();
  ASSERT_EQ(rig.lost.size(), 1u);
  EXPECT_EQ(rig.lost[0], make_error_code(errc::timeout));
  EXPECT_FALSE(rig.ended);
  rig.engine.on_reconnected(fresh_start(), WriteLimits{}, t0 + 2s);
  EXPECT_EQ(rig.engine.next_deadline(), t0 + 3s) << "keepalive starts over on the new connection";
  iscsi::AsyncMessage drop;
  drop.event = iscsi::AsyncEvent::drop_connection;
  rig.deliver(drop, {}, t0 + 2s);
  ASSERT_EQ(rig.lost.size(), 2u);
  EXPECT_FALSE(rig.ended);
  EXPECT_EQ(rig.engine.stats().connections_lost, 2u);
}

TEST(SessionRecovery, CallerLogoutWhileRecoveringEndsTheSession) {
  Rig rig;
  std::vector<std::byte> buf(512);
  const TaskId id = rig.read(buf);
  rig.engine.connection_failed(make_error_code(errc::connection_closed), t0);
  EXPECT_FALSE(rig.engine.logout(t0));
  rig.drain();
  test::expect_ended_with(rig, make_error_code(errc::session_closed), id, make_error_code(errc::session_closed));
}

TEST(SessionRecovery, TimedOutCommandIsNotSentAgain) {
  EngineConfig c = recovering_config();
  c.command_timeout = 100ms;
  Rig rig(c);
  std::vector<std::byte> buf(512);
  const TaskId id = rig.read(buf);
  rig.commands();
  rig.engine.on_timer(t0 + 100ms);  // timeout → ABORT TASK
  ASSERT_NE(rig.outcome(id), nullptr);
  EXPECT_EQ(rig.outcome(id)->error, make_error_code(errc::timeout));
  rig.engine.connection_failed(make_error_code(errc::connection_closed), t0 + 200ms);
  rig.engine.on_reconnected(fresh_start(), WriteLimits{}, t0 + 1s);
  rig.drain();
  EXPECT_TRUE(rig.commands().empty());
  EXPECT_EQ(rig.engine.itts_in_use(), 0u);
  EXPECT_EQ(rig.outcome(id)->error, make_error_code(errc::timeout));
}

TEST(SessionRecovery, SessionLostIsFatalAndAnIoErrorForFrontEnds) {
  const std::error_code lost = make_error_code(errc::session_lost);
  EXPECT_TRUE(is_fatal(lost));
  EXPECT_EQ(to_errno(lost), EIO);
  EXPECT_FALSE(lost.message().empty());
}

// The initiator's LoginMachine and SessionEngine against a scripted target (ScriptedPeer,
// tests/unit/engine_harness/): login (RFC 7143 §6.3, §11.12, §11.13), Data-In (§11.7), write
// data with immediate, unsolicited and R2T-solicited Data-Out (§11.7, §11.8), task management
// (§11.5, §11.6), logout (§11.14), recovery (§6.3.5); then the same transcripts with a failure
// injected at every step (Script::fail_at_every_step). Time is injected (t0 + n ms).
//
// To add a case: build a Script<InitiatorRig> from the pieces below (login(), read_4k(),
// write_with_r2t(), logout()) or new steps, run it on a rig, and if it is a whole exchange also
// run fail_at_every_step on it (tests/unit/engine_harness/README.md).
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cstring>

#include "initiator_rig.hpp"
#include "iserkit/common/errors.hpp"

using namespace iserkit;
using namespace iserkit::initiator;
using iserkit::test::harness::Check;
using iserkit::test::harness::Completed;
using iserkit::test::harness::ConnectionLost;
using iserkit::test::harness::InitiatorRig;
using iserkit::test::harness::LoggedIn;
using iserkit::test::harness::PeerPdu;
using iserkit::test::harness::SentPdu;
using iserkit::test::harness::SessionEnded;
using iserkit::test::harness::t0;
using iserkit::test::harness::Vars;
using namespace std::chrono_literals;
using iscsi::LoginStage;

namespace {

using Script = iserkit::test::harness::Script<InitiatorRig>;
using Action = InitiatorRig::Action;

using iserkit::test::harness::pattern;
using iserkit::test::harness::slice;

const std::string* value(const iscsi::TextPairs& p, std::string_view k) { return iscsi::find_value(p, k); }

/// A Login Response to the rig's login (ISID, ITT 7), TSIH 0x1234, window [1, 32].
iscsi::LoginResponse login_response(LoginStage csg, LoginStage nsg, bool transit, std::uint32_t stat_sn) {
  iscsi::LoginResponse r;
  r.transit = transit;
  r.csg = csg;
  r.nsg = nsg;
  r.isid = InitiatorRig::default_login_config().isid;
  r.itt = iscsi::Itt{7};
  r.tsih = 0x1234;
  r.stat_sn = SerialNumber(stat_sn);
  r.exp_cmd_sn = SerialNumber(1);
  r.max_cmd_sn = SerialNumber(32);
  return r;
}

/// The outcome of task `name` (a TaskId captured into Vars) with `error` (empty: success).
Script::Match completion(std::string name, std::error_code error = {}) {
  return [name, error](const Action& a, Vars& vars) -> std::string {
    const auto* c = std::get_if<Completed>(&a);
    if (c == nullptr) return "not a completion";
    Check check;
    check.eq("task", c->outcome.id, vars.get(name));
    check.eq("error", c->outcome.error.message(), error.message());
    return check.why();
  };
}
/// The session's end with `error`.
Script::Match session_ended(std::error_code error) {
  return [error](const Action& a, Vars&) -> std::string {
    const auto* e = std::get_if<SessionEnded>(&a);
    if (e == nullptr) return "not the end of the session";
    return e->error == error ? "" : "ended with " + e->error.message();
  };
}

/// The owner submits a READ(10) of `bytes` on LUN 0 (TaskId captured as `name`); its SCSI
/// Command goes out (ITT captured as "<name>.itt").
Script read_sent(const std::string& name, std::uint32_t bytes) {
  Script s;
  s.call("submit a READ of " + std::to_string(bytes) + " as " + name,
         [=](InitiatorRig& r, Vars& v) { v.set(name, r.read(name, bytes)); });
  s.expect_pdu<iscsi::ScsiCommand>("its SCSI Command", [=](const auto& h, const SentPdu&, Check& c, Vars& v) {
    c.eq("R", h.read, true).eq("EDTL", h.expected_data_transfer_length, bytes);
    v.set(name + ".itt", iscsi::to_u32(h.itt));
  });
  return s;
}

/// The target answers task `name` (its ITT captured as "<name>.itt") with GOOD, StatSN `stat_sn`,
/// window [`exp_cmd_sn`, `max_cmd_sn`]; the task completes without error.
Script good_response(const std::string& name, std::uint32_t stat_sn, std::uint32_t exp_cmd_sn,
                     std::uint32_t max_cmd_sn = 64) {
  Script s;
  s.receive("SCSI Response GOOD for " + name, [=](const Vars& v) {
    return PeerPdu{iscsi::ScsiResponse{.itt = v.itt(name + ".itt"), .stat_sn = SerialNumber(stat_sn),
                                       .exp_cmd_sn = SerialNumber(exp_cmd_sn), .max_cmd_sn = SerialNumber(max_cmd_sn)},
                   {}, {}};
  });
  s.expect(name + " completes", completion(name));
  return s;
}

/// Operational-stage login straight to full feature phase: ImmediateData=Yes, InitialR2T=No,
/// FirstBurstLength 8192, MaxBurstLength 16384, the target's MaxRecvDataSegmentLength 4096.
/// StatSN 40 → ExpStatSN 41; window [1, 32].
Script login() {
  Script s;
  s.expect_pdu<iscsi::LoginRequest>("Login Request, operational stage", [](const auto& h, const SentPdu& p, Check& c,
                                                                          Vars&) {
    c.eq("CSG", h.csg, LoginStage::operational_negotiation).eq("NSG", h.nsg, LoginStage::full_feature_phase);
    c.eq("T", h.transit, true).eq("ITT", h.itt, iscsi::Itt{7}).eq("CmdSN", h.cmd_sn, SerialNumber(1));
    auto text = iscsi::decode_text(p.data);
    c.is("text decodes", text.has_value());
    if (text) c.is("InitiatorName", value(*text, "InitiatorName") != nullptr);
  });
  s.receive("Login Response: full feature phase",
            PeerPdu{login_response(LoginStage::operational_negotiation, LoginStage::full_feature_phase, true, 40),
                    iscsi::encode_text({{"HeaderDigest", "None"},
                                        {"DataDigest", "None"},
                                        {"InitialR2T", "No"},
                                        {"ImmediateData", "Yes"},
                                        {"MaxRecvDataSegmentLength", "4096"},
                                        {"MaxBurstLength", "16384"},
                                        {"FirstBurstLength", "8192"},
                                        {"MaxOutstandingR2T", "1"},
                                        {"ErrorRecoveryLevel", "0"}}),
                    {}});
  s.expect_action<LoggedIn>("logged in", [](const LoggedIn& l, Check& c, Vars&) {
    c.eq("ImmediateData", l.parameters.immediate_data, true).eq("InitialR2T", l.parameters.initial_r2t, false);
    c.eq("FirstBurstLength", l.parameters.first_burst_length, 8192u);
    c.eq("MaxBurstLength", l.parameters.max_burst_length, 16384u);
  });
  return s;
}

/// A READ of 4096 bytes (CmdSN `cmd_sn`) answered by two Data-In, the last with status and an
/// underflow residual of 1024 (3072 bytes sent).
Script read_4k(std::uint32_t cmd_sn, std::uint32_t stat_sn) {
  Script s;
  s.call("submit READ(10) of 4096 bytes", [](InitiatorRig& r, Vars& v) { v.set("read", r.read("read", 4096)); });
  s.expect_pdu<iscsi::ScsiCommand>("SCSI Command: READ", [cmd_sn, stat_sn](const auto& h, const SentPdu& p, Check& c,
                                                                           Vars& v) {
    c.eq("R", h.read, true).eq("W", h.write, false).eq("F", h.final, true);
    c.eq("EDTL", h.expected_data_transfer_length, 4096u).eq("CmdSN", h.cmd_sn, SerialNumber(cmd_sn));
    c.eq("ExpStatSN", h.exp_stat_sn, SerialNumber(stat_sn)).eq("data", p.data.size(), 0u);
    v.set("read.itt", iscsi::to_u32(h.itt));
  });
  s.receive("Data-In 0: bytes 0..2047", [cmd_sn](const Vars& v) {
    return PeerPdu{iscsi::DataIn{.itt = v.itt("read.itt"), .exp_cmd_sn = SerialNumber(cmd_sn + 1),
                                 .max_cmd_sn = SerialNumber(cmd_sn + 32), .data_sn = 0, .buffer_offset = 0},
                   pattern(2048, 1), {}};
  });
  s.receive("Data-In 1: bytes 2048..3071, status GOOD, underflow 1024", [cmd_sn, stat_sn](const Vars& v) {
    return PeerPdu{iscsi::DataIn{.final = true, .residual_underflow = true, .status_present = true,
                                 .itt = v.itt("read.itt"), .stat_sn = SerialNumber(stat_sn),
                                 .exp_cmd_sn = SerialNumber(cmd_sn + 1), .max_cmd_sn = SerialNumber(cmd_sn + 32),
                                 .data_sn = 1, .buffer_offset = 2048, .residual_count = 1024},
                   slice(pattern(4096, 1), 2048, 1024), {}};
  });
  s.expect("the read completes", [](const Action& a, Vars& v) -> std::string {
    auto why = completion("read")(a, v);
    if (!why.empty()) return why;
    const auto& o = std::get<Completed>(a).outcome;
    Check c;
    c.eq("status", o.result.status, scsi::Status::good).eq("residual", o.result.residual_bytes, 1024u);
    return c.why();
  });
  return s;
}

/// A WRITE of 20000 bytes with ImmediateData=Yes, InitialR2T=No, FirstBurstLength 8192,
/// MaxBurstLength 16384 and segments of 4096: the command with 4096 immediate bytes, one
/// unsolicited Data-Out (4096..8191), then an R2T for the rest answered by three Data-Out
/// (DataSN 0..2), then GOOD.
Script write_with_r2t(std::uint32_t cmd_sn, std::uint32_t stat_sn) {
  Script s;
  s.call("submit WRITE(10) of 20000 bytes", [](InitiatorRig& r, Vars& v) { v.set("write", r.write("write", pattern(20000, 9))); });
  s.expect_pdu<iscsi::ScsiCommand>("SCSI Command: WRITE with 4096 immediate bytes", [cmd_sn](const auto& h,
                                                                                            const SentPdu& p, Check& c,
                                                                                            Vars& v) {
    c.eq("W", h.write, true).eq("F", h.final, false).eq("EDTL", h.expected_data_transfer_length, 20000u);
    c.eq("CmdSN", h.cmd_sn, SerialNumber(cmd_sn)).eq("immediate bytes", p.data.size(), 4096u);
    c.is("immediate data is the first 4096 bytes", p.data == slice(pattern(20000, 9), 0, 4096));
    v.set("write.itt", iscsi::to_u32(h.itt));
  });
  s.expect_pdu<iscsi::DataOut>("unsolicited Data-Out 4096..8191", [](const auto& h, const SentPdu& p, Check& c, Vars& v) {
    c.eq("ITT", h.itt, v.itt("write.itt")).eq("TTT", h.ttt, iscsi::reserved_ttt).eq("DataSN", h.data_sn, 0u);
    c.eq("BufferOffset", h.buffer_offset, 4096u).eq("F", h.final, true).eq("length", p.data.size(), 4096u);
  });
  s.receive("R2T 0 for 8192..19999", [cmd_sn](const Vars& v) {
    return PeerPdu{iscsi::R2t{.itt = v.itt("write.itt"), .ttt = iscsi::Ttt{0x77}, .exp_cmd_sn = SerialNumber(cmd_sn + 1),
                              .max_cmd_sn = SerialNumber(cmd_sn + 32), .r2t_sn = 0, .buffer_offset = 8192,
                              .desired_data_transfer_length = 11808},
                   {}, {}};
  });
  for (std::uint32_t i = 0; i < 3; ++i) {
    const std::uint32_t offset = 8192 + 4096 * i;
    s.expect_pdu<iscsi::DataOut>("solicited Data-Out " + std::to_string(i), [i, offset](const auto& h, const SentPdu& p,
                                                                                       Check& c, Vars& v) {
      const std::uint32_t length = std::min(4096u, 20000u - offset);
      c.eq("ITT", h.itt, v.itt("write.itt")).eq("TTT", h.ttt, iscsi::Ttt{0x77});
      c.eq("DataSN", h.data_sn, i).eq("BufferOffset", h.buffer_offset, offset).eq("F", h.final, i == 2);
      c.eq("length", p.data.size(), length);
      c.is("data from the buffer at BufferOffset", p.data == slice(pattern(20000, 9), offset, length));
    });
  }
  s.then(good_response("write", stat_sn, cmd_sn + 1, cmd_sn + 32));
  return s;
}

/// Logout (close the session) answered with "closed successfully".
Script logout(std::uint32_t cmd_sn, std::uint32_t exp_stat_sn) {
  Script s;
  s.call("logout", [](InitiatorRig& r, Vars& v) { v.set("logout", r.logout("logout")); });
  s.expect_pdu<iscsi::LogoutRequest>("Logout Request", [cmd_sn, exp_stat_sn](const auto& h, const SentPdu&, Check& c,
                                                                             Vars& v) {
    c.eq("I", h.immediate, true).eq("reason", h.reason, iscsi::LogoutReason::close_session);
    c.eq("CmdSN", h.cmd_sn, SerialNumber(cmd_sn)).eq("ExpStatSN", h.exp_stat_sn, SerialNumber(exp_stat_sn));
    v.set("logout.itt", iscsi::to_u32(h.itt));
  });
  s.receive("Logout Response: closed", [exp_stat_sn](const Vars& v) {
    return PeerPdu{iscsi::LogoutResponse{.response = 0, .itt = v.itt("logout.itt"), .stat_sn = SerialNumber(exp_stat_sn)},
                   {}, {}};
  });
  s.expect("the logout completes", completion("logout"));
  s.expect("the session ends", session_ended(make_error_code(errc::session_closed)));
  return s;
}

/// Login, one READ, one WRITE with R2T, logout: the whole life of a session.
Script whole_session() {
  Script s = login();
  s.then(read_4k(1, 41)).then(write_with_r2t(2, 42)).then(logout(3, 43));
  return s;
}

/// Timeouts set, so a jump of the clock has something to time out.
InitiatorRig::Options with_timeouts() {
  InitiatorRig::Options o;
  o.engine.command_timeout = 30s;
  o.engine.request_timeout = 15s;
  o.engine.nop_interval = 5s;
  o.engine.nop_timeout = 2s;
  return o;
}

}  // namespace

// ---- the transcripts ----

TEST(ScriptedInitiator, LoginReadWriteWithR2tLogout) {
  InitiatorRig rig;
  whole_session().run(rig);
  EXPECT_EQ(rig.read_data(1), [] {
    auto v = pattern(4096, 1);
    std::fill(v.begin() + 3072, v.end(), std::byte{0});
    return v;
  }());
  EXPECT_EQ(rig.engine()->stats().data_out_bytes_sent, 20000u);
}

// Converted from a hand-driven test: the read's Data-In land in the buffer, DataSN in order, the
// status and the underflow residual come with the last one.
TEST(SessionEngine, ReadPlacesDataInAndCompletesWithStatusAndResidual) {
  InitiatorRig::Options o;
  o.login = false;  // window [1, 64], ExpStatSN 10
  InitiatorRig rig(o);
  read_4k(1, 10).run(rig);
  const auto data = rig.read_data(1);
  ASSERT_EQ(data.size(), 4096u);
  EXPECT_TRUE(std::equal(data.begin(), data.begin() + 3072, pattern(4096, 1).begin()));
  EXPECT_EQ(data[3072], std::byte{0});
  EXPECT_EQ(rig.engine()->stats().data_in_bytes_placed, 3072u);
  EXPECT_EQ(rig.engine()->exp_stat_sn(), SerialNumber(11));
  EXPECT_EQ(rig.engine()->itts_in_use(), 0u);
}

TEST(SessionEngine, WriteSendsImmediateUnsolicitedAndSolicitedDataInOrder) {
  InitiatorRig::Options o;
  o.login = false;
  o.engine.limits = {.immediate_data = true, .initial_r2t = false, .first_burst_length = 8192,
                     .max_burst_length = 65536, .max_send_segment_length = 4096};
  InitiatorRig rig(o);
  write_with_r2t(1, 10).run(rig);
  EXPECT_EQ(rig.engine()->stats().data_out_bytes_sent, 20000u);
  EXPECT_EQ(rig.engine()->stats().r2ts_received, 1u);
}

TEST(SessionEngine, DataInOutOfOrderFailsTheTask) {
  InitiatorRig::Options o;
  o.login = false;
  InitiatorRig rig(o);
  Script s = read_sent("read", 8192);
  s.receive("Data-In with DataSN 1 before 0", [](const Vars& v) {
    return PeerPdu{iscsi::DataIn{.itt = v.itt("read.itt"), .max_cmd_sn = SerialNumber(64), .data_sn = 1}, pattern(1024, 1), {}};
  });
  s.expect("the read fails with a protocol error", completion("read", make_error_code(errc::protocol_error)));
  s.call("a task error, not a session error", [](InitiatorRig& r, Vars&) { EXPECT_TRUE(r.engine()->open()); });
  s.run(rig);
}

TEST(SessionEngine, LunResetCompleteEndsTheTasksOnThatLun) {
  InitiatorRig::Options o;
  o.login = false;
  InitiatorRig rig(o);
  Script s;
  s.call("a READ on LUN 0", [](InitiatorRig& r, Vars& v) { v.set("read", r.read("read", 0)); });
  s.expect_pdu<iscsi::ScsiCommand>("its command", [](const auto& h, const SentPdu&, Check& c, Vars&) {
    c.eq("LUN", h.lun, scsi::Lun::from_index(0));
  });
  s.call("a command on LUN 1", [](InitiatorRig& r, Vars& v) {
    ScsiSubmission other;
    other.lun = scsi::Lun::from_index(1);
    other.cdb.length = 6;
    v.set("other", r.submit("other", other));
  });
  s.expect_pdu<iscsi::ScsiCommand>("its command", [](const auto& h, const SentPdu&, Check& c, Vars&) {
    c.eq("LUN", h.lun, scsi::Lun::from_index(1));
  });
  s.call("LOGICAL UNIT RESET of LUN 0", [](InitiatorRig& r, Vars& v) {
    v.set("tmf", r.task_management("tmf", {.function = iscsi::TaskManagementFunction::logical_unit_reset,
                                           .lun = scsi::Lun::from_index(0)}));
  });
  s.expect_pdu<iscsi::TaskManagementRequest>("the TMF request", [](const auto& h, const SentPdu&, Check& c, Vars& v) {
    c.eq("I", h.immediate, true).eq("function", h.function, iscsi::TaskManagementFunction::logical_unit_reset);
    c.eq("CmdSN", h.cmd_sn, SerialNumber(3));  // immediate: the next CmdSN, not advanced
    v.set("tmf.itt", iscsi::to_u32(h.itt));
  });
  s.receive("TMF Response: function complete", [](const Vars& v) {
    return PeerPdu{iscsi::TaskManagementResponse{.response = 0, .itt = v.itt("tmf.itt"), .exp_cmd_sn = SerialNumber(3),
                                                 .max_cmd_sn = SerialNumber(64)},
                   {}, {}};
  });
  s.expect("the read on LUN 0 is aborted", completion("read", make_error_code(errc::task_aborted)));
  s.expect("then the TMF completes", [](const Action& a, Vars& v) -> std::string {
    auto why = completion("tmf")(a, v);
    if (!why.empty()) return why;
    return std::get<Completed>(a).outcome.tmf_response == iscsi::TaskManagementResponseCode::function_complete
               ? ""
               : "not function complete";
  });
  s.call("the command on LUN 1 is untouched", [](InitiatorRig& r, Vars& v) {
    EXPECT_EQ(r.engine()->state(v.get("other")), TaskState::sent);
    EXPECT_EQ(r.engine()->commands_holding_itt(), 1u);
  });
  s.run(rig);  // nothing more for the command on LUN 1 (strict: no action left)
}

TEST(SessionEngine, CommandTimeoutSendsAbortTaskAndKeepsTheIttUntilItsAnswer) {
  InitiatorRig::Options o;
  o.login = false;
  InitiatorRig rig(o);
  Script s;
  s.call("READ with a 100 ms timeout", [](InitiatorRig& r, Vars& v) { v.set("read", r.read("read", 4096, 100ms)); });
  s.expect_pdu<iscsi::ScsiCommand>("its command", [](const auto& h, const SentPdu&, Check&, Vars& v) {
    v.set("read.itt", iscsi::to_u32(h.itt));
    v.set("read.cmd_sn", h.cmd_sn.value());
  });
  s.at("99 ms: nothing yet", 99ms);
  s.at("100 ms: the timeout", 100ms);
  s.expect_pdu<iscsi::TaskManagementRequest>("ABORT TASK", [](const auto& h, const SentPdu&, Check& c, Vars& v) {
    c.eq("function", h.function, iscsi::TaskManagementFunction::abort_task);
    c.eq("RefTaskTag", h.referenced_task_tag, v.itt("read.itt"));
    c.eq("RefCmdSN", h.ref_cmd_sn, SerialNumber(static_cast<std::uint32_t>(v.get("read.cmd_sn"))));
    v.set("abort.itt", iscsi::to_u32(h.itt));
  });
  s.expect("the owner hears the timeout at once (TCP)", completion("read", make_error_code(errc::timeout)));
  s.call("the command's ITT is still reserved", [](InitiatorRig& r, Vars& v) {
    EXPECT_EQ(r.engine()->itts_in_use(), 2u);
    EXPECT_EQ(r.engine()->state(v.get("read")), TaskState::timed_out_aborting);
  });
  // Late Data-In for the aborted task goes to scratch: the rig freed the buffer at completion, so
  // a write into it would be a heap-use-after-free under ASan.
  s.receive("late Data-In", [](const Vars& v) {
    return PeerPdu{iscsi::DataIn{.itt = v.itt("read.itt"), .max_cmd_sn = SerialNumber(64)}, pattern(1024, 5), {}};
  });
  s.receive("TMF Response to the ABORT TASK", [](const Vars& v) {
    return PeerPdu{iscsi::TaskManagementResponse{.itt = v.itt("abort.itt"), .max_cmd_sn = SerialNumber(64)}, {}, {}};
  });
  s.call("the ITT is free again", [](InitiatorRig& r, Vars& v) {
    EXPECT_EQ(r.engine()->itts_in_use(), 0u);
    EXPECT_EQ(r.engine()->commands_holding_itt(), 0u);
    EXPECT_EQ(r.engine()->state(v.get("read")), TaskState::done);
  });
  s.run(rig);  // exactly one completion for the command, none for the session's own ABORT TASK
}

TEST(SessionEngine, LogoutWaitsForCommandsInFlightAndFailsQueuedOnes) {
  InitiatorRig::Options o;
  o.login = false;
  o.start = {.cmd_sn = SerialNumber(1), .exp_cmd_sn = SerialNumber(1), .max_cmd_sn = SerialNumber(1),
             .exp_stat_sn = SerialNumber(0)};
  InitiatorRig rig(o);
  Script s;
  s.call("two READs; the window holds one", [](InitiatorRig& r, Vars& v) {
    v.set("running", r.read("running", 0));
    v.set("queued", r.read("queued", 0));
  });
  s.expect_pdu<iscsi::ScsiCommand>("the first command", [](const auto& h, const SentPdu&, Check&, Vars& v) {
    v.set("running.itt", iscsi::to_u32(h.itt));
  });
  s.call("logout", [](InitiatorRig& r, Vars& v) { v.set("logout", r.logout("logout")); });
  s.expect("the queued command fails", completion("queued", make_error_code(errc::session_closed)));
  s.call("no new command, no second logout", [](InitiatorRig& r, Vars&) {
    EXPECT_FALSE(r.engine()->submit({}, r.now));
    EXPECT_FALSE(r.engine()->logout(r.now));
  });
  s.receive("the running command's response", [](const Vars& v) {
    return PeerPdu{iscsi::ScsiResponse{.itt = v.itt("running.itt"), .stat_sn = SerialNumber(0),
                                       .exp_cmd_sn = SerialNumber(2), .max_cmd_sn = SerialNumber(2)},
                   {}, {}};
  });
  s.expect_pdu<iscsi::LogoutRequest>("now the Logout Request", [](const auto& h, const SentPdu&, Check& c, Vars& v) {
    c.eq("I", h.immediate, true).eq("ExpStatSN", h.exp_stat_sn, SerialNumber(1));
    v.set("logout.itt", iscsi::to_u32(h.itt));
  });
  s.expect("and the command completes", completion("running"));
  s.receive("Logout Response", [](const Vars& v) {
    return PeerPdu{iscsi::LogoutResponse{.response = 0, .itt = v.itt("logout.itt")}, {}, {}};
  });
  s.expect("the logout completes", completion("logout"));
  s.expect("the session ends", session_ended(make_error_code(errc::session_closed)));
  s.run(rig);
}

TEST(SessionRecovery, InterruptedCommandsAreSentAgainInOrderAndCompleteOnce) {
  InitiatorRig::Options o;
  o.login = false;
  o.engine.replacement_timeout = 10s;
  o.start = {.cmd_sn = SerialNumber(1), .exp_cmd_sn = SerialNumber(1), .max_cmd_sn = SerialNumber(3),
             .exp_stat_sn = SerialNumber(10)};  // room for three commands: the fourth queues
  InitiatorRig rig(o);
  Script s;
  s.call("read a, write b, read c, read d", [](InitiatorRig& r, Vars& v) {
    v.set("a", r.read("a", 4096));
    v.set("b", r.write("b", std::vector<std::byte>(1024, std::byte{0x5b})));
    v.set("c", r.read("c", 8192));
    v.set("d", r.read("d", 512));
  });
  for (const char* name : {"a", "b", "c"})
    s.expect_pdu<iscsi::ScsiCommand>(std::string("command ") + name, [name](const auto& h, const SentPdu&, Check&, Vars& v) {
      v.set(std::string(name) + ".itt", iscsi::to_u32(h.itt));
    });
  s.then(good_response("a", 10, 2, 3));  // the window stays closed for d
  s.receive("c gets half its data", [](const Vars& v) {
    return PeerPdu{iscsi::DataIn{.itt = v.itt("c.itt"), .exp_cmd_sn = SerialNumber(2), .max_cmd_sn = SerialNumber(3)},
                   std::vector<std::byte>(4096, std::byte{0xee}), {}};
  });
  s.call("the connection fails", [](InitiatorRig& r, Vars&) { r.lose_connection(t0 + 1ms); });
  s.expect_action<ConnectionLost>("recovering, not ended", [](const ConnectionLost&, Check&, Vars&) {});
  s.call("callers see only delay; e waits", [](InitiatorRig& r, Vars& v) {
    EXPECT_TRUE(r.engine()->recovering());
    EXPECT_TRUE(r.engine()->accepting());
    EXPECT_EQ(r.engine()->itts_in_use(), 0u) << "the old connection's ITTs are gone";
    v.set("e", r.read("e", 512));
    EXPECT_EQ(r.engine()->next_deadline(), t0 + 1ms + 10s) << "the replacement timeout is the next deadline";
  });
  s.call("a new connection logs in", [](InitiatorRig& r, Vars&) {
    r.now = t0 + 500ms;
    r.reconnect({.cmd_sn = SerialNumber(1), .exp_cmd_sn = SerialNumber(1), .max_cmd_sn = SerialNumber(64),
                 .exp_stat_sn = SerialNumber(100)},
                WriteLimits{});
  });
  // The interrupted ones first, in their old order, then those never sent; numbered afresh.
  const std::pair<const char*, std::uint32_t> again[] = {{"b", 1024}, {"c", 8192}, {"d", 512}, {"e", 512}};
  for (std::uint32_t i = 0; i < 4; ++i) {
    const char* name = again[i].first;  // (not a structured binding: clang 14 cannot capture one)
    const std::uint32_t edtl = again[i].second;
    s.expect_pdu<iscsi::ScsiCommand>(std::string("again: ") + name, [name, edtl, i](const auto& h, const SentPdu&,
                                                                                   Check& c, Vars& v) {
      c.eq("EDTL", h.expected_data_transfer_length, edtl).eq("CmdSN", h.cmd_sn, SerialNumber(1 + i));
      c.eq("ExpStatSN", h.exp_stat_sn, SerialNumber(100));
      v.set(std::string(name) + ".itt2", iscsi::to_u32(h.itt));
    });
  }
  s.receive("c's data again from DataSN 0, with status", [](const Vars& v) {
    return PeerPdu{iscsi::DataIn{.final = true, .status_present = true, .itt = v.itt("c.itt2"),
                                 .stat_sn = SerialNumber(100), .exp_cmd_sn = SerialNumber(2),
                                 .max_cmd_sn = SerialNumber(70)},
                   std::vector<std::byte>(8192, std::byte{0x77}), {}};
  });
  s.expect("c completes", completion("c"));
  std::uint32_t stat_sn = 101;
  for (const char* name : {"b", "d", "e"}) {
    s.call(std::string("the new connection's ITT of ") + name, [name](InitiatorRig&, Vars& v) {
      v.set(std::string(name) + ".itt", v.get(std::string(name) + ".itt2"));
    });
    s.then(good_response(name, stat_sn++, 5, 70));
  }
  s.run(rig);
  EXPECT_EQ(rig.read_data(3)[0], std::byte{0x77});
  EXPECT_EQ(rig.read_data(3)[8191], std::byte{0x77});
  EXPECT_FALSE(rig.engine()->recovering());
  EXPECT_EQ(rig.engine()->stats().connections_lost, 1u);
  EXPECT_EQ(rig.engine()->stats().recoveries, 1u);
  EXPECT_EQ(rig.engine()->stats().commands_reissued, 2u);  // b and c; d and e went out for the first time
}

namespace {

/// With recovery on: the target asks for a logout (Async Message, Parameter3 5 s) while a READ
/// is in flight; a READ submitted then waits; the Logout Request leaves once the first READ
/// answered; after the Logout Response the session recovers, logs in again and sends the
/// waiting READ; then the caller logs out.
Script async_logout_then_reconnect() {
  Script s;
  s.call("a READ", [](InitiatorRig& r, Vars& v) { v.set("first", r.read("first", 512)); });
  s.expect_pdu<iscsi::ScsiCommand>("its command", [](const auto& h, const SentPdu&, Check&, Vars& v) {
    v.set("first.itt", iscsi::to_u32(h.itt));
  });
  s.receive("Async Message: logout requested within 5 s",
            PeerPdu{iscsi::AsyncMessage{.stat_sn = SerialNumber(10), .exp_cmd_sn = SerialNumber(1),
                                        .max_cmd_sn = SerialNumber(64), .event = iscsi::AsyncEvent::logout_request,
                                        .parameter3 = 5},
                    {}, {}});
  s.call("still accepting; a second READ waits", [](InitiatorRig& r, Vars& v) {
    if (!r.lenient) {
      EXPECT_TRUE(r.engine()->accepting());
    }
    v.set("waiting", r.read("waiting", 512));
  });
  s.receive("the first READ's response", [](const Vars& v) {
    return PeerPdu{iscsi::ScsiResponse{.itt = v.itt("first.itt"), .stat_sn = SerialNumber(11),
                                       .exp_cmd_sn = SerialNumber(2), .max_cmd_sn = SerialNumber(64)},
                   {}, {}};
  });  // then the Logout Request before the completion (one batch: PDUs first)
  s.expect_pdu<iscsi::LogoutRequest>("now the Logout Request", [](const auto& h, const SentPdu&, Check&, Vars& v) {
    v.set("logout.itt", iscsi::to_u32(h.itt));
  });
  s.expect("the first READ completes", completion("first"));
  s.receive("Logout Response", [](const Vars& v) {
    return PeerPdu{iscsi::LogoutResponse{.itt = v.itt("logout.itt"), .stat_sn = SerialNumber(12)}, {}, {}};
  });
  s.expect_action<ConnectionLost>("the session recovers instead of ending", [](const ConnectionLost&, Check&, Vars&) {});
  s.call("a new connection logs in", [](InitiatorRig& r, Vars&) {
    r.now = t0 + 1s;
    r.reconnect({.cmd_sn = SerialNumber(1), .exp_cmd_sn = SerialNumber(1), .max_cmd_sn = SerialNumber(64),
                 .exp_stat_sn = SerialNumber(100)},
                WriteLimits{});
  });
  s.expect_pdu<iscsi::ScsiCommand>("the waiting READ goes out", [](const auto& h, const SentPdu&, Check& c, Vars& v) {
    c.eq("CmdSN", h.cmd_sn, SerialNumber(1)).eq("ExpStatSN", h.exp_stat_sn, SerialNumber(100));
    v.set("waiting.itt", iscsi::to_u32(h.itt));
  });
  s.then(good_response("waiting", 100, 2));
  s.then(logout(2, 101));
  return s;
}

}  // namespace

TEST(SessionRecovery, AsyncLogoutRequestLogsOutThenReconnectsKeepingCommands) {
  InitiatorRig::Options o;
  o.login = false;
  o.engine.replacement_timeout = 10s;
  InitiatorRig rig(o);
  async_logout_then_reconnect().run(rig);
}

namespace {

/// Per-command STags (iSER, EngineConfig::hold_timed_out_until_aborted): a READ times out; its
/// ABORT TASK goes out; the owner hears the timeout only when the target answers "task does not
/// exist"; then a WRITE without R2T (InitialR2T=No, all unsolicited) and logout.
Script held_timeout() {
  Script s;
  s.call("READ with a 100 ms timeout", [](InitiatorRig& r, Vars& v) { v.set("read", r.read("read", 4096, 100ms)); });
  s.expect_pdu<iscsi::ScsiCommand>("its command", [](const auto& h, const SentPdu&, Check&, Vars& v) {
    v.set("read.itt", iscsi::to_u32(h.itt));
  });
  s.at("100 ms: the timeout", 100ms);
  s.expect_pdu<iscsi::TaskManagementRequest>("ABORT TASK, the owner not told yet",
                                             [](const auto& h, const SentPdu&, Check& c, Vars& v) {
                                               c.eq("function", h.function, iscsi::TaskManagementFunction::abort_task);
                                               c.eq("RefTaskTag", h.referenced_task_tag, v.itt("read.itt"));
                                               v.set("abort.itt", iscsi::to_u32(h.itt));
                                             });
  s.receive("TMF Response: task does not exist", [](const Vars& v) {
    return PeerPdu{iscsi::TaskManagementResponse{.response = 1, .itt = v.itt("abort.itt"), .exp_cmd_sn = SerialNumber(2),
                                                 .max_cmd_sn = SerialNumber(64)},
                   {}, {}};
  });
  s.expect("now the owner hears the timeout", completion("read", make_error_code(errc::timeout)));
  s.call("a WRITE of 4096", [](InitiatorRig& r, Vars& v) { v.set("write", r.write("write", pattern(4096, 2))); });
  s.expect_pdu<iscsi::ScsiCommand>("its command, data immediate", [](const auto& h, const SentPdu& p, Check& c, Vars& v) {
    c.eq("CmdSN", h.cmd_sn, SerialNumber(2)).eq("immediate bytes", p.data.size(), 4096u);
    v.set("write.itt", iscsi::to_u32(h.itt));
  });
  s.then(good_response("write", 10, 3));
  s.then(logout(3, 11));
  return s;
}

/// A target's NOP-In ping (TTT 0x1234) answered by a NOP-Out echoing its data; then a Text
/// Request (SendTargets=All) whose answer comes in two Text Responses (C bit, TTT 0x42: the
/// initiator asks for the rest with an empty Text Request, RFC 7143 §11.11.2); logout.
Script nop_and_text() {
  const std::vector<std::byte> ping = pattern(16, 3);
  const auto request = iscsi::encode_text({{"SendTargets", "All"}});
  const auto whole = iscsi::encode_text({{"TargetName", "iqn.2026-01.test:abc"}});
  Script s;
  s.receive("NOP-In ping with TTT 0x1234", PeerPdu{iscsi::NopIn{.ttt = iscsi::Ttt{0x1234}, .stat_sn = SerialNumber(10),
                                                                .exp_cmd_sn = SerialNumber(1), .max_cmd_sn = SerialNumber(64)},
                                                   ping, {}});
  s.expect_pdu<iscsi::NopOut>("NOP-Out echoing it", [ping](const auto& h, const SentPdu& p, Check& c, Vars&) {
    c.eq("TTT", h.ttt, iscsi::Ttt{0x1234}).eq("ITT", h.itt, iscsi::reserved_itt).eq("I", h.immediate, true);
    c.is("data echoed", p.data == ping);
  });
  s.call("a Text Request", [request](InitiatorRig& r, Vars& v) { v.set("text", r.text("text", request)); });
  s.expect_pdu<iscsi::TextRequest>("Text Request", [request](const auto& h, const SentPdu& p, Check& c, Vars& v) {
    c.eq("F", h.final, true).eq("TTT", h.ttt, iscsi::reserved_ttt).is("text", p.data == request);
    v.set("text.itt", iscsi::to_u32(h.itt));
  });
  s.receive("Text Response, first part (C)", [whole](const Vars& v) {
    return PeerPdu{iscsi::TextResponse{.final = false, .continue_ = true, .itt = v.itt("text.itt"),
                                       .ttt = iscsi::Ttt{0x42}, .stat_sn = SerialNumber(10)},
                   slice(whole, 0, 10), {}};
  });
  s.expect_pdu<iscsi::TextRequest>("empty Text Request for the rest", [](const auto& h, const SentPdu& p, Check& c, Vars& v) {
    c.eq("TTT", h.ttt, iscsi::Ttt{0x42}).eq("ITT", h.itt, v.itt("text.itt")).eq("data", p.data.size(), 0u);
  });
  s.receive("Text Response, last part", [whole](const Vars& v) {
    return PeerPdu{iscsi::TextResponse{.final = true, .itt = v.itt("text.itt"), .stat_sn = SerialNumber(11)},
                   slice(whole, 10, whole.size() - 10), {}};
  });
  s.expect_action<Completed>("the text request completes with the whole answer", [whole](const Completed& d, Check& c,
                                                                                          Vars& v) {
    c.eq("task", d.outcome.id, v.get("text")).eq("error", d.outcome.error.message(), std::error_code().message());
    c.is("the two parts gathered", d.outcome.text == whole);
  });
  s.then(logout(1, 12));
  return s;
}

InitiatorRig::Options holding_options() {
  InitiatorRig::Options o = with_timeouts();
  o.login = false;
  o.engine.hold_timed_out_until_aborted = true;
  o.engine.request_timeout = 1s;
  o.engine.limits = {.immediate_data = true, .initial_r2t = false, .first_burst_length = 65536,
                     .max_burst_length = 65536, .max_send_segment_length = 8192};
  return o;
}

}  // namespace

// ---- fail at every step ----

// Login, a READ, a WRITE with R2T and a logout, with each fault at each step (connection lost,
// malformed PDU, digest error, duplicated PDU, timers expired): the session ends or the login
// fails, nothing is sent afterwards, every command completes exactly once (with an error when the
// connection failed under it), nothing is held at the end.
TEST(ScriptedInitiator, WholeSessionFailsCleanlyAtEveryStep) {
  const Script s = whole_session();
  const std::size_t runs = s.fail_at_every_step([] { return std::make_unique<InitiatorRig>(with_timeouts()); });
  EXPECT_GE(runs, s.size());
}

// The same with recovery on (replacement timeout): a fault starts recovery instead of ending the
// session; the owner's close at teardown must still end every command once.
TEST(ScriptedInitiator, WholeSessionWithRecoveryFailsCleanlyAtEveryStep) {
  const Script s = whole_session();
  const std::size_t runs = s.fail_at_every_step([] {
    auto o = with_timeouts();
    o.engine.replacement_timeout = 10s;
    return std::make_unique<InitiatorRig>(o);
  });
  EXPECT_GE(runs, s.size());
}

// The harness itself: a script whose expectation is wrong fails, naming the step and what the
// engine did instead.
TEST(ScriptedInitiator, AWrongExpectationFailsNamingTheStep) {
  InitiatorRig::Options o;
  o.login = false;
  InitiatorRig rig(o);
  Script s;
  s.call("submit a READ", [](InitiatorRig& r, Vars&) { r.read("read", 512); });
  s.expect_pdu<iscsi::DataOut>("a Data-Out (wrong: it is a SCSI Command)", [](const auto&, const SentPdu&, Check&, Vars&) {});
  EXPECT_NONFATAL_FAILURE(s.run(rig), "step 1 (expect 'a Data-Out (wrong: it is a SCSI Command)'): saw sent scsi_command");
}

// The target asks for a logout while recovery is on, with each fault at each step.
TEST(ScriptedInitiator, AsyncLogoutAndReconnectFailsCleanlyAtEveryStep) {
  const Script s = async_logout_then_reconnect();
  const std::size_t runs = s.fail_at_every_step([] {
    auto o = with_timeouts();
    o.login = false;
    o.engine.replacement_timeout = 10s;
    return std::make_unique<InitiatorRig>(o);
  });
  EXPECT_GE(runs, s.size());
}

// iSER's held timeout (ABORT TASK answered before the owner hears), a WRITE, logout; then with
// each fault at each step: whatever happens, the timed-out READ reaches its owner exactly once.
TEST(ScriptedInitiator, HeldTimeoutFailsCleanlyAtEveryStep) {
  InitiatorRig rig(holding_options());
  const Script s = held_timeout();
  s.run(rig);
  const std::size_t runs = s.fail_at_every_step([] { return std::make_unique<InitiatorRig>(holding_options()); });
  EXPECT_GE(runs, s.size());
}

// A target's NOP-In ping and a Text Request answered in two parts, then logout; with each fault
// at each step (a late NOP-In after the connection dropped must not be answered).
TEST(ScriptedInitiator, NopInAndTextContinuationFailCleanlyAtEveryStep) {
  auto make = [] {
    InitiatorRig::Options o = with_timeouts();
    o.login = false;
    return std::make_unique<InitiatorRig>(o);
  };
  const Script s = nop_and_text();
  s.run(*make());
  const std::size_t runs = s.fail_at_every_step(make);
  EXPECT_GE(runs, s.size());
}

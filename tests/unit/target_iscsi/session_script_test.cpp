// The target's LoginMachine and SessionEngine against a scripted initiator (ScriptedPeer,
// tests/unit/engine_harness/): login (RFC 7143 §6.3, §11.12, §11.13), a WRITE with immediate data
// then R2T-solicited Data-Out (§11.7, §11.8), a READ as Data-In with the status in the last one
// (§11.7.4), ABORT TASK (§11.5), logout (§11.14); then the same transcripts with a failure
// injected at every step (Script::fail_at_every_step). The rig plays the backend: Executed
// actions are answered by complete() calls.
//
// To add a case: build a Script<TargetRig> from the pieces below (login(), write_with_r2t(),
// read_8_blocks(), logout()) or new steps, run it on a rig, and if it is a whole exchange also run
// fail_at_every_step on it (tests/unit/engine_harness/README.md).
#include <gtest/gtest.h>

#include <cstring>

#include "iserkit/common/bytes.hpp"
#include "iserkit/common/errors.hpp"
#include "target_rig.hpp"

namespace iserkit::target {
namespace {

using namespace std::chrono_literals;
using iserkit::test::harness::Check;
using iserkit::test::harness::Closed;
using iserkit::test::harness::Executed;
using iserkit::test::harness::FetchedWriteData;
using iserkit::test::harness::PeerPdu;
using iserkit::test::harness::PutData;
using iserkit::test::harness::Released;
using iserkit::test::harness::SentPdu;
using iserkit::test::harness::TargetLoggedIn;
using iserkit::test::harness::TargetRig;
using iserkit::test::harness::Vars;
using iscsi::Itt;
using iscsi::LoginStage;
using iscsi::Ttt;
using Script = iserkit::test::harness::Script<TargetRig>;
using Action = TargetRig::Action;
constexpr std::uint32_t block = TargetRig::block;

using iserkit::test::harness::pattern;
using iserkit::test::harness::slice;
constexpr auto cdb10 = &TargetRig::cdb10;

iscsi::ScsiCommand command(std::uint32_t itt, std::uint32_t cmd_sn, std::array<std::byte, 16> cdb, std::uint32_t edtl,
                           bool read, bool write) {
  return iscsi::ScsiCommand{.immediate = false, .final = true, .read = read, .write = write,
                            .lun = scsi::Lun::from_index(0), .itt = Itt{itt}, .expected_data_transfer_length = edtl,
                            .cmd_sn = SerialNumber(cmd_sn), .cdb = cdb};
}

const std::string* value(const iscsi::TextPairs& p, std::string_view k) { return iscsi::find_value(p, k); }

/// Checks of the rig's non-PDU actions, for Script::expect_action.
auto executed(std::uint32_t itt) {
  return [itt](const Executed& e, Check& c, Vars&) { c.eq("ITT", e.itt, Itt{itt}); };
}
auto released(std::uint32_t itt, std::uint64_t bytes) {
  return [itt, bytes](const Released& r, Check& c, Vars&) {
    c.eq("ITT", r.release.itt, Itt{itt}).eq("bytes", r.release.bytes, bytes).eq("granted", r.release.granted, true);
  };
}
auto closed() {
  return [](const Closed&, Check&, Vars&) {};
}

/// A step: write `itt`'s task buffer holds `data` (not checked on a lenient rig, which has failures
/// injected), then the backend says GOOD.
void data_in_place_then_good(Script& s, std::string what, std::uint32_t itt, std::vector<std::byte> data) {
  s.call(std::move(what), [itt, data = std::move(data)](TargetRig& r, Vars&) {
    if (!r.lenient) {
      EXPECT_EQ(r.task_data(Itt{itt}), data) << r.context;
    }
    r.complete(Itt{itt}, ScsiOutcome::good());
  });
}

/// The initiator's login request of stage `csg` (ISID 80 01 02 03 04 05, ITT 7, CmdSN 1,
/// ExpStatSN 100) carrying `pairs`.
PeerPdu login_request(LoginStage csg, LoginStage nsg, const iscsi::TextPairs& pairs) {
  iscsi::LoginRequest r{.transit = true, .csg = csg, .nsg = nsg,
                        .isid = {std::byte{0x80}, std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}, std::byte{5}},
                        .itt = Itt{7}, .cmd_sn = SerialNumber(1), .exp_stat_sn = SerialNumber(100)};
  return PeerPdu{r, iscsi::encode_text(pairs), {}};
}

/// Straight to the operational stage: ImmediateData=Yes, InitialR2T=Yes, FirstBurstLength 4096,
/// MaxBurstLength 4096, MaxOutstandingR2T 1, our MaxRecvDataSegmentLength 2048. The response has
/// StatSN 100; the session's first StatSN is 101, its window [1, 4].
Script login() {
  Script s;
  s.receive("Login Request: operational stage, to full feature phase",
            login_request(LoginStage::operational_negotiation, LoginStage::full_feature_phase,
                          {{"InitiatorName", "iqn.2026-11.org.test:init"},
                           {"TargetName", TargetRig::target_name},
                           {"SessionType", "Normal"},
                           {"MaxRecvDataSegmentLength", "2048"},
                           {"ImmediateData", "Yes"},
                           {"InitialR2T", "Yes"},
                           {"FirstBurstLength", "4096"},
                           {"MaxBurstLength", "4096"},
                           {"MaxOutstandingR2T", "1"}}));
  s.expect_pdu<iscsi::LoginResponse>("Login Response: success, full feature phase", [](const auto& h, const SentPdu& p,
                                                                                     Check& c, Vars&) {
    c.eq("status", h.status_class, 0).eq("T", h.transit, true).eq("NSG", h.nsg, LoginStage::full_feature_phase);
    c.eq("ITT", h.itt, Itt{7}).eq("StatSN", h.stat_sn, SerialNumber(100)).eq("ExpCmdSN", h.exp_cmd_sn, SerialNumber(1));
    c.is("TSIH set", h.tsih != 0);
    auto text = iscsi::decode_text(p.data);
    c.is("text decodes", text.has_value());
    if (text) {
      c.is("ImmediateData=Yes", value(*text, "ImmediateData") && *value(*text, "ImmediateData") == "Yes");
      c.is("MaxBurstLength=4096", value(*text, "MaxBurstLength") && *value(*text, "MaxBurstLength") == "4096");
    }
  });
  s.expect_action<TargetLoggedIn>("logged in", [](const TargetLoggedIn& l, Check& c, Vars&) {
    c.eq("ImmediateData", l.parameters.immediate_data, true).eq("InitialR2T", l.parameters.initial_r2t, true);
    c.eq("MaxBurstLength", l.parameters.max_burst_length, 4096u);
    c.eq("initiator MaxRecvDataSegmentLength", l.parameters.initiator_max_recv_data_segment_length, 2048u);
  });
  return s;
}

/// ITT 5: WRITE(10) of 16 blocks (8192 bytes) with 1024 immediate bytes; R2T 0 for 1024..5119
/// and, once its Data-Out is in, R2T 1 for 5120..8191 (MaxBurstLength 4096, MaxOutstandingR2T 1);
/// the data lands in the task buffer; the backend runs it; GOOD with StatSN `stat_sn`.
Script write_with_r2t(std::uint32_t cmd_sn, std::uint32_t stat_sn) {
  const auto data = pattern(16 * block, 9);
  Script s;
  s.receive("SCSI Command: WRITE with 1024 immediate bytes",
            PeerPdu{command(5, cmd_sn, cdb10(0x2a, 16), 16 * block, false, true), slice(data, 0, 1024), {}});
  const std::uint32_t r2t_offsets[] = {1024, 5120}, r2t_lengths[] = {4096, 3072};
  for (std::uint32_t n = 0; n < 2; ++n) {
    const std::uint32_t offset = r2t_offsets[n], length = r2t_lengths[n];
    s.expect_pdu<iscsi::R2t>("R2T " + std::to_string(n), [n, offset, length, stat_sn](const auto& h, const SentPdu&,
                                                                                    Check& c, Vars& v) {
      c.eq("ITT", h.itt, Itt{5}).eq("R2TSN", h.r2t_sn, n).eq("BufferOffset", h.buffer_offset, offset);
      c.eq("DesiredDataTransferLength", h.desired_data_transfer_length, length);
      c.eq("StatSN (not advanced)", h.stat_sn, SerialNumber(stat_sn));
      c.is("TTT set", h.ttt != iscsi::reserved_ttt);
      v.set("ttt" + std::to_string(n), iscsi::to_u32(h.ttt));
    });
    s.receive("Data-Out for R2T " + std::to_string(n), [n, offset, length, data](const Vars& v) {
      return PeerPdu{iscsi::DataOut{.final = true, .lun = scsi::Lun::from_index(0), .itt = Itt{5},
                                    .ttt = v.ttt("ttt" + std::to_string(n)), .data_sn = 0, .buffer_offset = offset},
                     slice(data, offset, length), {}};
    });
  }
  s.expect_action<Executed>("the backend runs it", executed(5));
  data_in_place_then_good(s, "the data landed in the task buffer; the backend says GOOD", 5, data);
  s.expect_action<Released>("its budget comes back (no PDU borrows a write's buffer)", released(5, 16 * block));
  s.expect_pdu<iscsi::ScsiResponse>("SCSI Response GOOD", [stat_sn](const auto& h, const SentPdu&, Check& c, Vars&) {
    c.eq("ITT", h.itt, Itt{5}).eq("status", h.status, 0).eq("StatSN", h.stat_sn, SerialNumber(stat_sn));
    c.eq("ExpDataSN (two R2Ts)", h.exp_data_sn, 2u).eq("U", h.residual_underflow, false).eq("O", h.residual_overflow, false);
  });
  return s;
}

/// ITT 6: READ(10) of 8 blocks (4096 bytes): two Data-In of 2048 (the initiator's
/// MaxRecvDataSegmentLength), the status in the last, both in one batch, then the budget.
Script read_8_blocks(std::uint32_t cmd_sn, std::uint32_t stat_sn) {
  const auto data = pattern(8 * block, 3);
  Script s;
  s.receive("SCSI Command: READ of 8 blocks", PeerPdu{command(6, cmd_sn, cdb10(0x28, 8), 8 * block, true, false), {}, {}});
  s.expect_action<Executed>("the backend runs it", executed(6));
  s.call("the backend reads 4096 bytes", [data](TargetRig& r, Vars&) {
    r.fill(Itt{6}, data);
    r.complete(Itt{6}, ScsiOutcome::good(8 * block));
  });
  for (std::uint32_t i = 0; i < 2; ++i)
    s.expect_pdu<iscsi::DataIn>("Data-In " + std::to_string(i), [i, data, stat_sn](const auto& h, const SentPdu& p,
                                                                                 Check& c, Vars& v) {
      c.eq("ITT", h.itt, Itt{6}).eq("DataSN", h.data_sn, i).eq("BufferOffset", h.buffer_offset, 2048 * i);
      c.eq("S", h.status_present, i == 1).eq("F", h.final, i == 1);
      c.is("data", p.data == slice(data, 2048 * i, 2048));
      if (i == 1) {
        c.eq("StatSN", h.stat_sn, SerialNumber(stat_sn)).eq("batch", p.batch, v.get("read.batch"));
      } else {
        v.set("read.batch", p.batch);
      }
    });
  s.expect_action<Released>("its budget comes back after the batch", released(6, 8 * block));
  return s;
}

/// Logout (ITT 9, CmdSN `cmd_sn`): "closed successfully" with StatSN `stat_sn`, then close.
Script logout(std::uint32_t cmd_sn, std::uint32_t stat_sn) {
  Script s;
  s.receive("Logout Request", PeerPdu{iscsi::LogoutRequest{.immediate = true, .itt = Itt{9}, .cmd_sn = SerialNumber(cmd_sn)}, {}, {}});
  s.expect_pdu<iscsi::LogoutResponse>("Logout Response", [stat_sn](const auto& h, const SentPdu&, Check& c, Vars&) {
    c.eq("response", h.response, 0).eq("ITT", h.itt, Itt{9}).eq("StatSN", h.stat_sn, SerialNumber(stat_sn));
  });
  s.expect_action<Closed>("then the connection closes", closed());
  return s;
}

/// Login, a WRITE with immediate data and R2Ts, a READ, logout: the whole life of a session.
Script whole_session() {
  Script s = login();
  s.then(write_with_r2t(1, 101)).then(read_8_blocks(2, 102)).then(logout(3, 103));
  return s;
}

/// ABORT TASK (ITT 50) of task `victim`, CmdSN `cmd_sn` (immediate), answered "function complete".
Script abort_task(std::uint32_t victim, std::uint32_t cmd_sn, std::uint32_t ref_cmd_sn) {
  Script s;
  s.receive("ABORT TASK of ITT " + std::to_string(victim),
            PeerPdu{iscsi::TaskManagementRequest{.immediate = true, .function = iscsi::TaskManagementFunction::abort_task,
                                                 .lun = scsi::Lun::from_index(0), .itt = Itt{50},
                                                 .referenced_task_tag = Itt{victim}, .cmd_sn = SerialNumber(cmd_sn),
                                                 .ref_cmd_sn = SerialNumber(ref_cmd_sn)},
                    {}, {}});
  return s;
}
auto tmf_response(std::uint8_t response) {
  return [response](const iscsi::TaskManagementResponse& h, const SentPdu&, Check& c, Vars&) {
    c.eq("ITT", h.itt, Itt{50}).eq("response", h.response, response);
  };
}

/// Login; a WRITE (ITT 5) waiting for the Data-Out its R2T asked for is aborted (not on the
/// backend: it ends at once, its budget comes back); a READ; logout.
Script write_aborted_then_read() {
  Script s = login();
  s.receive("SCSI Command: WRITE of 16 blocks, no immediate data",
            PeerPdu{command(5, 1, cdb10(0x2a, 16), 16 * block, false, true), {}, {}});
  s.expect_pdu<iscsi::R2t>("R2T 0", [](const auto& h, const SentPdu&, Check& c, Vars&) { c.eq("ITT", h.itt, Itt{5}); });
  s.then(abort_task(5, 2, 1));
  s.expect_action<Released>("the write's budget comes back", released(5, 16 * block));
  s.expect_pdu<iscsi::TaskManagementResponse>("function complete", tmf_response(0));
  s.then(read_8_blocks(2, 102)).then(logout(3, 103));  // the TMF Response took StatSN 101
  return s;
}

/// iSER (RDMA data phase, no login): a WRITE of 8 blocks fetched by one RDMA Read (ITT 4), a READ
/// put by one RDMA Write before its SCSI Response (ITT 6), a WRITE aborted under its RDMA Read
/// (ITT 7: the answer waits for the read to end), logout.
Script iser_session() {
  const auto data = pattern(8 * block, 4);
  Script s;
  s.receive("WRITE with a Write STag", PeerPdu{command(4, 1, cdb10(0x2a, 8), 8 * block, false, true), {}, {}, {},
                                               datamover::PeerBuffer{0x99, 0x2000}});
  s.expect_action<FetchedWriteData>("one RDMA Read of the whole write", [](const FetchedWriteData& g, Check& c, Vars&) {
    c.eq("ITT", g.get.itt, Itt{4}).eq("offset", g.get.buffer_offset, 0u).eq("length", g.get.length, 8 * block);
    c.eq("STag", g.get.source.key(), 0x99u);
  });
  s.call("the RDMA Read ends", [](TargetRig& r, Vars&) { r.write_data_done(Itt{4}); });
  s.expect_action<Executed>("the backend runs it", executed(4));
  s.call("the backend says GOOD", [](TargetRig& r, Vars&) { r.complete(Itt{4}, ScsiOutcome::good()); });
  s.expect_action<Released>("its budget comes back", released(4, 8 * block));
  s.expect_pdu<iscsi::ScsiResponse>("SCSI Response GOOD", [](const auto& h, const SentPdu&, Check& c, Vars&) {
    c.eq("ITT", h.itt, Itt{4}).eq("status", h.status, 0).eq("StatSN", h.stat_sn, SerialNumber(100));
  });
  s.receive("READ with a Read STag", PeerPdu{command(6, 2, cdb10(0x28, 8), 8 * block, true, false), {}, {},
                                             datamover::PeerBuffer{0x1234, 0x1000}, {}});
  s.expect_action<Executed>("the backend runs it", executed(6));
  s.call("the backend reads", [data](TargetRig& r, Vars&) {
    r.fill(Itt{6}, data);
    r.complete(Itt{6}, ScsiOutcome::good(8 * block));
  });
  s.expect_action<PutData>("one RDMA Write of the read data", [](const PutData& p, Check& c, Vars&) {
    c.eq("ITT", p.itt, Itt{6}).eq("bytes", p.bytes, 8 * block);
  });
  s.expect_action<Released>("its budget comes back", released(6, 8 * block));
  s.expect_pdu<iscsi::ScsiResponse>("then the status, no Data-In", [](const auto& h, const SentPdu&, Check& c, Vars&) {
    c.eq("ITT", h.itt, Itt{6}).eq("status", h.status, 0).eq("StatSN", h.stat_sn, SerialNumber(101));
  });
  s.receive("another WRITE", PeerPdu{command(7, 3, cdb10(0x2a, 8), 8 * block, false, true), {}, {}, {},
                                     datamover::PeerBuffer{0x98, 0x4000}});
  s.expect_action<FetchedWriteData>("its RDMA Read",
                                    [](const FetchedWriteData& g, Check& c, Vars&) { c.eq("ITT", g.get.itt, Itt{7}); });
  s.then(abort_task(7, 4, 3));
  s.call("the RDMA Read ends under the abort", [](TargetRig& r, Vars&) { r.write_data_done(Itt{7}); });
  s.expect_action<Released>("the write's budget comes back", released(7, 8 * block));
  s.expect_pdu<iscsi::TaskManagementResponse>("only now: function complete", tmf_response(0));
  s.then(logout(4, 103));  // the TMF Response took StatSN 102
  return s;
}

/// Payload budgets granted later (TargetRig::grant_budgets = false), ImmediateData=Yes,
/// InitialR2T=No, FirstBurstLength 2048: a WRITE (ITT 3) of 8 blocks whose immediate and
/// unsolicited data wait in the staging buffer until its budget is granted, then an R2T for the
/// rest; a READ (ITT 2) that waits for its budget before the backend; logout.
Script budgets_granted_later() {
  const auto data = pattern(8 * block, 1);
  Script s;
  auto write = command(3, 1, cdb10(0x2a, 8), 8 * block, false, true);
  write.final = false;  // unsolicited Data-Out follows
  s.receive("WRITE with 1024 immediate bytes", PeerPdu{write, slice(data, 0, 1024), {}});
  s.receive("unsolicited Data-Out 1024..2047",
            PeerPdu{iscsi::DataOut{.final = true, .lun = scsi::Lun::from_index(0), .itt = Itt{3},
                                   .ttt = iscsi::reserved_ttt, .data_sn = 0, .buffer_offset = 1024},
                    slice(data, 1024, 1024), {}});
  s.call("the write's budget is granted", [](TargetRig& r, Vars&) { r.grant(Itt{3}); });
  s.expect_pdu<iscsi::R2t>("R2T for 2048..4095", [](const auto& h, const SentPdu&, Check& c, Vars& v) {
    c.eq("ITT", h.itt, Itt{3}).eq("BufferOffset", h.buffer_offset, 2048u).eq("length", h.desired_data_transfer_length, 2048u);
    v.set("ttt", iscsi::to_u32(h.ttt));
  });
  s.receive("its Data-Out", [data](const Vars& v) {
    return PeerPdu{iscsi::DataOut{.final = true, .lun = scsi::Lun::from_index(0), .itt = Itt{3}, .ttt = v.ttt("ttt"),
                                  .data_sn = 0, .buffer_offset = 2048},
                   slice(data, 2048, 2048), {}};
  });
  s.expect_action<Executed>("the backend runs it", executed(3));
  data_in_place_then_good(s, "the staged and solicited data are all in place; GOOD", 3, data);
  s.expect_action<Released>("its budget comes back", released(3, 8 * block));
  s.expect_pdu<iscsi::ScsiResponse>("SCSI Response GOOD", [](const auto& h, const SentPdu&, Check& c, Vars&) {
    c.eq("ITT", h.itt, Itt{3}).eq("status", h.status, 0);
  });
  s.receive("READ of 2 blocks", PeerPdu{command(2, 2, cdb10(0x28, 2), 2 * block, true, false), {}, {}});
  s.call("its budget is granted", [](TargetRig& r, Vars&) { r.grant(Itt{2}); });
  s.expect_action<Executed>("only now the backend runs it", executed(2));
  s.call("the backend reads", [](TargetRig& r, Vars&) { r.complete(Itt{2}, ScsiOutcome::good(2 * block)); });
  s.expect_pdu<iscsi::DataIn>("Data-In with status", [](const auto& h, const SentPdu&, Check& c, Vars&) {
    c.eq("ITT", h.itt, Itt{2}).eq("S", h.status_present, true);
  });
  s.expect_action<Released>("its budget comes back", released(2, 2 * block));
  s.then(logout(3, 102));
  return s;
}

/// An idle watch, so a jump of the clock has something to do.
TargetRig::Options with_idle_watch() {
  TargetRig::Options o;
  o.engine.idle_interval = 5s;
  o.engine.ping_timeout = 2s;
  return o;
}

}  // namespace

// ---- the transcripts ----

TEST(ScriptedTarget, LoginWriteWithR2tReadLogout) {
  TargetRig rig;
  whole_session().run(rig);
}

// Converted from LoginFixture (login_test.cpp): the security stage (AuthMethod=None), then the operational stage
// to full feature phase; the target declares its own MaxRecvDataSegmentLength and answers
// ErrorRecoveryLevel 0, MaxConnections 1.
TEST(ScriptedTarget, LoginThroughSecurityAndOperationalStages) {
  TargetRig rig;
  Script s;
  s.receive("Login Request: security stage",
            login_request(LoginStage::security_negotiation, LoginStage::operational_negotiation,
                          {{"InitiatorName", "iqn.2026-11.org.test:init"},
                           {"TargetName", TargetRig::target_name},
                           {"SessionType", "Normal"},
                           {"AuthMethod", "CHAP,None"}}));
  s.expect_pdu<iscsi::LoginResponse>("security answer", [](const auto& h, const SentPdu& p, Check& c, Vars&) {
    c.eq("status", h.status_class, 0).eq("T", h.transit, true).eq("NSG", h.nsg, LoginStage::operational_negotiation);
    c.eq("StatSN", h.stat_sn, SerialNumber(100)).eq("ExpCmdSN", h.exp_cmd_sn, SerialNumber(1)).eq("TSIH", h.tsih, 0);
    auto t = iscsi::decode_text(p.data).value_or(iscsi::TextPairs{});
    c.is("AuthMethod=None", value(t, "AuthMethod") && *value(t, "AuthMethod") == "None");
    c.is("TargetPortalGroupTag=1", value(t, "TargetPortalGroupTag") && *value(t, "TargetPortalGroupTag") == "1");
  });
  s.receive("Login Request: operational stage",
            login_request(LoginStage::operational_negotiation, LoginStage::full_feature_phase,
                          {{"MaxRecvDataSegmentLength", "65536"}, {"InitialR2T", "No"}, {"ImmediateData", "Yes"},
                           {"MaxBurstLength", "16776192"}, {"FirstBurstLength", "262144"}, {"MaxOutstandingR2T", "4"},
                           {"ErrorRecoveryLevel", "2"}, {"MaxConnections", "4"}}));
  s.expect_pdu<iscsi::LoginResponse>("final answer", [](const auto& h, const SentPdu& p, Check& c, Vars&) {
    c.eq("status", h.status_class, 0).eq("NSG", h.nsg, LoginStage::full_feature_phase).eq("StatSN", h.stat_sn, SerialNumber(101));
    c.is("TSIH set", h.tsih != 0);
    auto t = iscsi::decode_text(p.data).value_or(iscsi::TextPairs{});
    c.is("our MaxRecvDataSegmentLength", value(t, "MaxRecvDataSegmentLength") && *value(t, "MaxRecvDataSegmentLength") == "262144");
    c.is("InitialR2T=No", value(t, "InitialR2T") && *value(t, "InitialR2T") == "No");
    c.is("ErrorRecoveryLevel=0", value(t, "ErrorRecoveryLevel") && *value(t, "ErrorRecoveryLevel") == "0");
    c.is("MaxConnections=1", value(t, "MaxConnections") && *value(t, "MaxConnections") == "1");
  });
  s.expect_action<TargetLoggedIn>("logged in", [](const TargetLoggedIn& l, Check& c, Vars&) {
    c.eq("initiator MRDSL", l.parameters.initiator_max_recv_data_segment_length, 65536u);
    c.eq("target MRDSL", l.parameters.target_max_recv_data_segment_length, 262144u);
    c.eq("MaxBurstLength", l.parameters.max_burst_length, 4u << 20).eq("FirstBurstLength", l.parameters.first_burst_length, 262144u);
    c.eq("MaxOutstandingR2T", l.parameters.max_outstanding_r2t, 4u).eq("InitialR2T", l.parameters.initial_r2t, false);
  });
  s.run(rig);
  ASSERT_NE(rig.engine(), nullptr);
  EXPECT_EQ(rig.engine()->stat_sn(), SerialNumber(102));
  EXPECT_EQ(rig.engine()->window().exp_cmd_sn(), SerialNumber(1));
}

// The target's Data-In carry the read, segmented at the initiator's MaxRecvDataSegmentLength,
// DataSN from 0, the status in the last, one batch; the budget comes back after it.
TEST(ScriptedTarget, ReadDataInCarryTheStatusInTheLastAndLeaveInOneBatch) {
  TargetRig::Options o;
  o.login = false;
  o.engine.params.initiator_max_recv_data_segment_length = 2048;
  TargetRig rig(o);
  read_8_blocks(1, 100).run(rig);
  EXPECT_EQ(rig.engine()->task_count(), 0u);
}

// Converted from SessionEngineTest (session_engine_test.cpp), as the next two.
TEST(ScriptedTarget, WriteSolicitsWithR2tsAndDataOutLandsInPlace) {
  TargetRig::Options o;
  o.login = false;
  o.engine.params.immediate_data = true;
  o.engine.params.initial_r2t = true;
  o.engine.params.max_burst_length = 4096;
  o.engine.params.max_outstanding_r2t = 1;
  TargetRig rig(o);
  write_with_r2t(1, 100).run(rig);
}

TEST(ScriptedTarget, AbortTaskAnswersAfterTheBackendFinishedAndSuppressesTheStatus) {
  TargetRig::Options o;
  o.login = false;
  TargetRig rig(o);
  Script s;
  s.receive("READ of one block", PeerPdu{command(1, 1, cdb10(0x28, 1), block, true, false), {}, {}});
  s.expect_action<Executed>("on the backend", executed(1));
  s.receive("ABORT TASK of it", PeerPdu{iscsi::TaskManagementRequest{
                                            .immediate = true, .function = iscsi::TaskManagementFunction::abort_task,
                                            .lun = scsi::Lun::from_index(0), .itt = Itt{50}, .referenced_task_tag = Itt{1},
                                            .cmd_sn = SerialNumber(2), .ref_cmd_sn = SerialNumber(1)},
                                        {}, {}});
  s.call("no answer while the backend runs it; the command hears of the abort", [](TargetRig& r, Vars&) {
    EXPECT_EQ(r.engine()->task(Itt{1})->life.state, TaskState::aborted_executing);
    EXPECT_TRUE(r.engine()->task(Itt{1})->plan.abort_requested);
  });
  s.call("the backend finishes", [](TargetRig& r, Vars&) { r.complete(Itt{1}, ScsiOutcome::good(block)); });
  s.expect_action<Released>("its budget comes back", released(1, block));
  s.expect_pdu<iscsi::TaskManagementResponse>("function complete, no status for the read",
                                              [](const auto& h, const SentPdu&, Check& c, Vars&) {
                                                c.eq("ITT", h.itt, Itt{50}).eq("response", h.response, 0);
                                              });
  s.receive("ABORT TASK of an unknown task, RefCmdSN outside the window",
            PeerPdu{iscsi::TaskManagementRequest{.immediate = true, .function = iscsi::TaskManagementFunction::abort_task,
                                                 .lun = scsi::Lun::from_index(0), .itt = Itt{51},
                                                 .referenced_task_tag = Itt{77}, .cmd_sn = SerialNumber(2),
                                                 .ref_cmd_sn = SerialNumber(100)},
                    {}, {}});
  s.expect_pdu<iscsi::TaskManagementResponse>("task does not exist", [](const auto& h, const SentPdu&, Check& c, Vars&) {
    c.eq("ITT", h.itt, Itt{51}).eq("response", h.response, 1);
  });
  s.run(rig);
  EXPECT_EQ(rig.engine()->task_count(), 0u);
}

TEST(ScriptedTarget, LogoutWaitsForCommandsInFlightThenCloses) {
  TargetRig::Options o;
  o.login = false;
  TargetRig rig(o);
  Script s;
  s.receive("TEST UNIT READY", PeerPdu{command(1, 1, {}, 0, false, false), {}, {}});
  s.expect_action<Executed>("on the backend", executed(1));
  s.receive("Logout Request", PeerPdu{iscsi::LogoutRequest{.immediate = true, .itt = Itt{9}, .cmd_sn = SerialNumber(2)}, {}, {}});
  s.call("nothing until the command ended", [](TargetRig& r, Vars&) { EXPECT_FALSE(r.engine()->ended()); });
  s.call("the backend finishes", [](TargetRig& r, Vars&) { r.complete(Itt{1}, ScsiOutcome::good()); });
  s.expect_pdu<iscsi::LogoutResponse>("Logout Response (no SCSI Response for the aborted command)",
                                      [](const auto& h, const SentPdu&, Check& c, Vars&) { c.eq("response", h.response, 0); });
  s.expect_action<Closed>("the connection closes", closed());
  s.run(rig);
  EXPECT_TRUE(rig.engine()->ended());
}

// ---- fail at every step ----

// Login, a WRITE with immediate data and R2Ts, a READ and a logout, with each fault at each step
// (connection lost, malformed PDU, digest error, duplicated PDU, timers expired): nothing is sent
// or executed after the close, no task runs twice, every task ends and every payload budget comes
// back exactly once.
TEST(ScriptedTarget, WholeSessionFailsCleanlyAtEveryStep) {
  const Script s = whole_session();
  const std::size_t runs = s.fail_at_every_step([] { return std::make_unique<TargetRig>(with_idle_watch()); });
  EXPECT_GE(runs, s.size());
}

// A WRITE aborted while waiting for its Data-Out, then a READ and logout, with each fault at
// each step.
TEST(ScriptedTarget, AbortedWriteThenReadFailsCleanlyAtEveryStep) {
  TargetRig rig(with_idle_watch());
  const Script s = write_aborted_then_read();
  s.run(rig);
  const std::size_t runs = s.fail_at_every_step([] { return std::make_unique<TargetRig>(with_idle_watch()); });
  EXPECT_GE(runs, s.size());
}

// iSER: RDMA Read for a write, RDMA Write for a read, an ABORT TASK under an RDMA Read, logout;
// then with each fault at each step (the backend and the RDMA completions still report after the
// close).
TEST(ScriptedTarget, IserWriteReadAbortLogoutFailsCleanlyAtEveryStep) {
  auto options = [] {
    TargetRig::Options o = with_idle_watch();
    o.login = false;
    o.rdma = true;
    return o;
  };
  TargetRig rig(options());
  const Script s = iser_session();
  s.run(rig);
  const std::size_t runs = s.fail_at_every_step([&] { return std::make_unique<TargetRig>(options()); });
  EXPECT_GE(runs, s.size());
}

// Budgets granted later, the staging buffer for unsolicited data, with each fault at each step:
// every budget request is released exactly once however the session ends.
TEST(ScriptedTarget, BudgetsGrantedLaterFailCleanlyAtEveryStep) {
  auto make = [] {
    TargetRig::Options o = with_idle_watch();
    o.login = false;
    o.engine.params.immediate_data = true;
    o.engine.params.initial_r2t = false;
    o.engine.params.first_burst_length = 2048;
    auto rig = std::make_unique<TargetRig>(o);
    rig->grant_budgets = false;
    return rig;
  };
  const Script s = budgets_granted_later();
  s.run(*make());
  const std::size_t runs = s.fail_at_every_step(make);
  EXPECT_GE(runs, s.size());
}

}  // namespace iserkit::target

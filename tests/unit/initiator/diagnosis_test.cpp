// Errors in words (iserkit/initiator/diagnosis.hpp): for each usual mistake — refused connection,
// unknown host, unknown target, wrong CHAP secret, no such LUN, read-only LUN, I/O past the end,
// a bad URL — the message says what happened, names the object (portal, target, LUN, bytes) and
// the next step, with the decoded sense (libsgutils2) and the documented exit status.
#include "iserkit/initiator/diagnosis.hpp"

#include <gtest/gtest.h>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/initiator/errors.hpp"

using namespace iserkit;
using namespace iserkit::initiator;

namespace {

constexpr const char* iqn = "iqn.2026-11.org.iserkit:target";

ErrorContext at_lun(std::uint16_t lun, Program program = Program::cli) {
  ErrorContext c;
  c.program = program;
  c.url = parse_url(std::string("iscsi://127.0.0.1:3260/") + iqn + "/" + std::to_string(lun)).value();
  return c;
}

std::error_code scsi_error(scsi::SenseKey key, scsi::AscPair pair) {
  scsi::ScsiResult r;
  r.status = scsi::Status::check_condition;
  r.sense = scsi::SenseData::make(key, pair);
  return make_scsi_error(r);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST(Diagnosis, RefusedConnectionNamesThePortalAndAsksWhetherTheTargetRuns) {
  for (const auto ec : {std::make_error_code(std::errc::connection_refused),
                        std::error_code(ECONNREFUSED, std::system_category()),
                        std::error_code(boost::system::error_code(asio::error::connection_refused))}) {
    const auto d = diagnose(ec, at_lun(0));
    EXPECT_EQ(d.what, "connection refused by 127.0.0.1:3260") << ec.category().name();
    EXPECT_TRUE(has(d.next_step, "is iserkit-target (or the iSCSI target) running there, and is the port right?"));
    EXPECT_EQ(d.exit_status, ExitStatus::unreachable);
  }
}

TEST(Diagnosis, UnknownHostSaysSo) {
  const auto d = diagnose(std::error_code(boost::system::error_code(asio::error::host_not_found)),
                          {.url = parse_url("iscsi://nosuch.invalid/iqn.x:y/0").value()});
  EXPECT_TRUE(has(d.what, "cannot resolve host name nosuch.invalid")) << d.what;
  EXPECT_EQ(d.exit_status, ExitStatus::unreachable);
}

TEST(Diagnosis, UnknownTargetListsWhatDiscoveryFound) {
  auto c = at_lun(0);
  c.url->target = "iqn.2026-11.org.example:typo";
  const auto ec = make_login_error(2, 3);
  EXPECT_TRUE(needs_target_list(ec));
  auto d = diagnose(ec, c);
  EXPECT_EQ(d.what, "target iqn.2026-11.org.example:typo unknown at portal 127.0.0.1:3260 (login rejected: "
                    "status=0x0203 target not found (initiator error))");
  EXPECT_EQ(d.next_step, "`iserkit discover iscsi://127.0.0.1` lists its targets");  // port 3260 is the default
  EXPECT_EQ(d.exit_status, ExitStatus::login);
  c.listed_targets = std::vector<std::string>{iqn, "iqn.2026-11.org.iserkit:other"};
  EXPECT_EQ(diagnose(ec, c).next_step, "discovery lists: iqn.2026-11.org.iserkit:target, iqn.2026-11.org.iserkit:other");
  c.listed_targets = std::vector<std::string>{};
  EXPECT_EQ(diagnose(ec, c).next_step, "discovery lists no target there");
  EXPECT_FALSE(needs_target_list(make_login_error(2, 1)));
}

TEST(Diagnosis, WrongChapSecretNamesTheUserAndTheChapFile) {
  auto c = at_lun(0);
  ChapOptions alice;
  alice.user = "alice";
  alice.secret = "wrong-secret-0000";
  c.chap = &alice;
  const auto d = diagnose(make_login_error(2, 1), c);
  EXPECT_TRUE(has(d.what, "CHAP secret refused for user 'alice' by iqn.2026-11.org.iserkit:target at 127.0.0.1:3260"))
      << d.what;
  EXPECT_TRUE(has(d.what, "status=0x0201 authentication failure"));
  EXPECT_TRUE(has(d.next_step, "check the user name and the secret (--chap-file")) << d.next_step;
  EXPECT_FALSE(has(d.text(), "wrong-secret-0000"));
  EXPECT_EQ(d.exit_status, ExitStatus::login);
  c.chap = nullptr;
  EXPECT_TRUE(has(diagnose(make_login_error(2, 1), c).what, "requires CHAP authentication"));
}

TEST(Diagnosis, AccessListAndMutualChap) {
  EXPECT_TRUE(has(diagnose(make_login_error(2, 2), at_lun(0)).what, "does not admit this initiator"));
  ChapOptions mutual;
  mutual.user = "alice";
  mutual.secret = "alice-secret-1234";
  mutual.target_secret = "target-secret-5678";
  auto c = at_lun(0);
  c.chap = &mutual;
  const auto d = diagnose(make_error_code(errc::authentication_failed), c);
  EXPECT_TRUE(has(d.what, "failed mutual CHAP"));
  EXPECT_TRUE(has(d.next_step, "target_username/target_secret"));
  EXPECT_EQ(d.exit_status, ExitStatus::login);
}

TEST(Diagnosis, NoSuchLunDecodesTheSenseAndPointsAtTheLunList) {
  const auto d = diagnose(scsi_error(scsi::SenseKey::illegal_request, scsi::asc::logical_unit_not_supported), at_lun(3));
  EXPECT_EQ(d.what, "LUN 3 does not exist on iqn.2026-11.org.iserkit:target (ILLEGAL REQUEST 25/00: Logical unit not "
                    "supported)");
  EXPECT_EQ(d.next_step, "`iserkit luns iscsi://127.0.0.1/iqn.2026-11.org.iserkit:target` lists its LUNs");
  EXPECT_EQ(d.exit_status, ExitStatus::lun);
}

TEST(Diagnosis, ReadOnlyLunNextStepFitsTheProgram) {
  const auto ec = scsi_error(scsi::SenseKey::data_protect, scsi::asc::write_protected);
  const auto cli = diagnose(ec, at_lun(0));
  EXPECT_EQ(cli.what, "the LUN is read-only: LUN 0 of iqn.2026-11.org.iserkit:target (DATA PROTECT 27/00: Write protected)");
  EXPECT_TRUE(has(cli.next_step, "make this one writable on the target"));
  EXPECT_EQ(cli.exit_status, ExitStatus::lun);
  EXPECT_TRUE(has(diagnose(ec, at_lun(0, Program::nbd)).next_step, "serve it with -r/--read-only"));
  EXPECT_TRUE(has(diagnose(ec, at_lun(0, Program::fuse)).next_step, "mount with -r/--read-only"));
}

TEST(Diagnosis, PastTheEndSaysTheCapacityAndWhatFits) {
  auto c = at_lun(0);
  c.offset_bytes = 16u << 20;
  c.length_bytes = 3;
  c.capacity_bytes = 16u << 20;
  auto d = diagnose_past_end("write", c);
  EXPECT_EQ(d.what, "write past the end: offset+length > capacity 16777216 bytes (offset 16777216 + length 3)");
  EXPECT_EQ(d.next_step, "offsets go up to 16777215");
  EXPECT_EQ(d.exit_status, ExitStatus::lun);
  c.offset_bytes = (16u << 20) - 1024;
  c.length_bytes = 4096;
  EXPECT_EQ(diagnose_past_end("read", c).next_step, "at most 1024 bytes fit from offset 16776192");
  // The same from the target's sense (LBA OUT OF RANGE).
  d = diagnose(scsi_error(scsi::SenseKey::illegal_request, scsi::asc::lba_out_of_range), c);
  EXPECT_TRUE(has(d.what, "offset+length > capacity 16777216 bytes (ILLEGAL REQUEST 21/00: Logical block address out of "
                          "range)")) << d.what;
  EXPECT_EQ(d.exit_status, ExitStatus::lun);
}

TEST(Diagnosis, OtherErrorsKeepTheirMessage) {
  const auto sense = diagnose(scsi_error(scsi::SenseKey::medium_error, {0x11, 0x00}), at_lun(1));
  EXPECT_TRUE(has(sense.what, "LUN 1 of iqn.2026-11.org.iserkit:target: CHECK CONDITION: sense=3/11/00 MEDIUM ERROR: "
                              "Unrecovered read error")) << sense.what;
  EXPECT_EQ(sense.exit_status, ExitStatus::failure);
  EXPECT_EQ(diagnose(make_error_code(errc::session_lost), at_lun(0)).exit_status, ExitStatus::gave_up);
  EXPECT_EQ(diagnose(make_error_code(errc::timeout), at_lun(0)).exit_status, ExitStatus::unreachable);
  EXPECT_EQ(diagnose(make_error_code(errc::protocol_error), at_lun(0)).what, "iSCSI protocol error");
}

TEST(Diagnosis, BadUrlSaysWhyAndTheForm) {
  auto d = diagnose_bad_url("iscsi:/bad", true);
  EXPECT_EQ(d.what, "bad URL: it does not start with iscsi:// or iser://");
  EXPECT_EQ(d.next_step, "want iscsi://[USER@]HOST[:PORT]/TARGET-IQN/LUN (or iser://…)");
  EXPECT_EQ(d.exit_status, ExitStatus::usage);
  EXPECT_EQ(diagnose_bad_url("iscsi://host/iqn.x:y/lun0", true).what, "bad URL: the LUN is not a number 0..16383");
  EXPECT_EQ(diagnose_bad_url("iscsi://host:99999/iqn.x:y/0", true).what, "bad URL: the port is not a number 1..65535");
  EXPECT_EQ(diagnose_bad_url("iscsi://host", true).what, "bad URL: it names no target");
  EXPECT_TRUE(has(diagnose_bad_url("iscsi://", false).next_step, "[/TARGET-IQN]"));
  EXPECT_EQ(url_problem("iscsi://host/iqn.x:y/0"), "");
  EXPECT_EQ(url_problem("iscsi://host/iqn.x:y/0/extra"), "there is more after the LUN");
}

TEST(Diagnosis, ExitStatusesAreTheDocumentedNumbers) {
  EXPECT_EQ(exit_code(ExitStatus::ok), 0);
  EXPECT_EQ(exit_code(ExitStatus::failure), 1);
  EXPECT_EQ(exit_code(ExitStatus::usage), 2);
  EXPECT_EQ(exit_code(ExitStatus::gave_up), 3);
  EXPECT_EQ(exit_code(ExitStatus::unreachable), 4);
  EXPECT_EQ(exit_code(ExitStatus::login), 5);
  EXPECT_EQ(exit_code(ExitStatus::lun), 6);
}

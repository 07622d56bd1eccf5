// The client half of sanitize_test.sh: SANITIZE (SBC-4 §5.30) through the project's initiator
// against a running iserkit-target (ISERKIT_TEST_URL; a paced 64M memory LUN). Starts an OVERWRITE
// with IMMED = 1, sees TEST UNIT READY answer NOT READY, LOGICAL UNIT NOT READY, SANITIZE IN
// PROGRESS (04h/1Bh) with a progress indication and REQUEST SENSE return it as data (SBC-4 §4.11),
// logs out, logs in with a new session and sees the operation still running (a lost session does
// not stop a sanitize).
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "iserkit/initiator/session.hpp"
#include "iserkit/scsi/sense.hpp"

#include "../../support/session_client.hpp"
#include "../raw_cdb_client.hpp"

using namespace iserkit;
using namespace iserkit::initiator;

namespace {

constexpr scsi::AscPair sanitize_in_progress{0x04, 0x1b};  // LOGICAL UNIT NOT READY, SANITIZE IN PROGRESS

using test::cdb_of;
using test::run;
using test::settle;  // TEST UNIT READY past the unit attentions; the last result

// The CDBs and the OVERWRITE parameter list, built outside the coroutines (GCC 12 rejects the
// array behind a braced list in a coroutine: "array used as initializer").
const scsi::Cdb overwrite_immed_cdb = cdb_of({0x48, 0x81, 0, 0, 0, 0, 0, 0, 5, 0});  // IMMED, OVERWRITE, 5 bytes
const scsi::Cdb request_sense_cdb = cdb_of({0x03, 0, 0, 0, 252});
const scsi::Cdb inquiry_cdb = cdb_of({0x12, 0, 0, 0, 36});
// One pass (OVERWRITE COUNT 1) of the one-byte INITIALIZATION PATTERN A5h.
const std::vector<std::byte> overwrite_list{std::byte{0x01}, std::byte{0}, std::byte{0}, std::byte{1}, std::byte{0xa5}};

void expect_sanitize_in_progress(const Result<scsi::ScsiResult>& r) {
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_EQ(r->status, scsi::Status::check_condition);
  ASSERT_TRUE(r->sense);
  EXPECT_EQ(r->sense->key, scsi::SenseKey::not_ready);
  EXPECT_EQ(r->sense->asc_pair(), sanitize_in_progress);
  ASSERT_TRUE(r->sense->sense_key_specific);
  EXPECT_EQ((*r->sense->sense_key_specific)[0] & 0x80, 0x80);  // SKSV: the progress indication
}

template <class Body>
void with_session(Body body) {
  test::with_session("ISERKIT_TEST_URL", "sanitize_test.sh", SessionOptions{}, body);
}

TEST(TargetSanitize, InProgressAcrossSessions) {
  with_session([](Session& s, scsi::Lun lun) -> Awaitable<void> {
    auto ready = co_await settle(s, lun);
    EXPECT_TRUE(ready && ready->status == scsi::Status::good);
    auto started = co_await run(s, lun, overwrite_immed_cdb, {}, overwrite_list);
    EXPECT_TRUE(started && started->status == scsi::Status::good);
    expect_sanitize_in_progress(co_await settle(s, lun));
    // REQUEST SENSE polls it: GOOD, the NOT READY sense as data.
    std::vector<std::byte> sense(252);
    auto polled = co_await run(s, lun, request_sense_cdb, sense);
    EXPECT_TRUE(polled && polled->status == scsi::Status::good);
    auto decoded = scsi::decode_sense(sense);
    EXPECT_TRUE(decoded && decoded->asc_pair() == sanitize_in_progress);
    // INQUIRY still answers.
    std::vector<std::byte> inquiry(36);
    auto inq = co_await run(s, lun, inquiry_cdb, inquiry);
    EXPECT_TRUE(inq && inq->status == scsi::Status::good);
  });
  // A new session (the first one logged out): still in progress.
  with_session([](Session& s, scsi::Lun lun) -> Awaitable<void> {
    expect_sanitize_in_progress(co_await settle(s, lun));
  });
}

}  // namespace

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

using namespace iserkit;
using namespace iserkit::initiator;

namespace {

constexpr scsi::AscPair sanitize_in_progress{0x04, 0x1b};  // LOGICAL UNIT NOT READY, SANITIZE IN PROGRESS

// The CDBs and the OVERWRITE parameter list, built outside the coroutines (GCC 12 rejects the
// array behind a braced list in a coroutine: "array used as initializer").
const std::vector<unsigned> test_unit_ready_cdb{0x00};
const std::vector<unsigned> overwrite_immed_cdb{0x48, 0x81, 0, 0, 0, 0, 0, 0, 5, 0};  // IMMED, OVERWRITE, 5 bytes
const std::vector<unsigned> request_sense_cdb{0x03, 0, 0, 0, 252};
const std::vector<unsigned> inquiry_cdb{0x12, 0, 0, 0, 36};
// One pass (OVERWRITE COUNT 1) of the one-byte INITIALIZATION PATTERN A5h.
const std::vector<std::byte> overwrite_list{std::byte{0x01}, std::byte{0}, std::byte{0}, std::byte{1}, std::byte{0xa5}};

// One command from its CDB bytes.
Awaitable<Result<scsi::ScsiResult>> run(Session& s, scsi::Lun lun, const std::vector<unsigned>& cdb_bytes,
                                        std::span<std::byte> in = {}, std::span<const std::byte> out = {}) {
  CommandRequest request;
  request.lun = lun;
  for (std::size_t i = 0; i < cdb_bytes.size(); ++i) request.cdb.bytes[i] = static_cast<std::byte>(cdb_bytes[i]);
  request.cdb.length = static_cast<std::uint8_t>(scsi::cdb_length_for(static_cast<std::uint8_t>(cdb_bytes[0])));
  request.data_in = in;
  request.data_out = out;
  co_return co_await s.execute(request);
}

// TEST UNIT READY until no unit attention is left (a new session starts with one); the last result.
Awaitable<Result<scsi::ScsiResult>> test_unit_ready(Session& s, scsi::Lun lun) {
  Result<scsi::ScsiResult> r;
  for (int i = 0; i < 10; ++i) {
    r = co_await run(s, lun, test_unit_ready_cdb);
    if (!r || !r->sense || r->sense->key != scsi::SenseKey::unit_attention) break;
  }
  co_return r;
}

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
  const char* text = std::getenv("ISERKIT_TEST_URL");
  if (text == nullptr) GTEST_SKIP() << "ISERKIT_TEST_URL not set (run through sanitize_test.sh)";
  auto url = parse_url(text);
  ASSERT_TRUE(url);
  asio::io_context io;
  const SessionOptions options;  // named: a braced temporary in the coroutine trips GCC 12
  bool finished = false;
  asio::co_spawn(
      io,
      [&]() -> Awaitable<void> {
        auto session = co_await Session::connect(io.get_executor(), *url, options);
        EXPECT_TRUE(session) << (session ? "" : session.error().message());
        if (!session) co_return;
        co_await body(**session, scsi::Lun::from_index(url->lun.value_or(0)));
        if ((*session)->is_open()) (void)co_await (*session)->logout();
        finished = true;
      },
      asio::detached);
  io.run();
  EXPECT_TRUE(finished);
}

TEST(TargetSanitize, InProgressAcrossSessions) {
  with_session([](Session& s, scsi::Lun lun) -> Awaitable<void> {
    auto ready = co_await test_unit_ready(s, lun);
    EXPECT_TRUE(ready && ready->status == scsi::Status::good);
    auto started = co_await run(s, lun, overwrite_immed_cdb, {}, overwrite_list);
    EXPECT_TRUE(started && started->status == scsi::Status::good);
    expect_sanitize_in_progress(co_await test_unit_ready(s, lun));
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
    expect_sanitize_in_progress(co_await test_unit_ready(s, lun));
  });
}

}  // namespace

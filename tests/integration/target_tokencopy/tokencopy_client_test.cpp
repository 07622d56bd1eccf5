// The client half of tokencopy_test.sh: token copy (SBC-4: POPULATE TOKEN, WRITE USING
// TOKEN, RECEIVE ROD TOKEN INFORMATION, the block device zero ROD token) through the project's
// initiator, raw CDBs over real iSCSI sessions, against running iserkit-target processes.
// ISERKIT_TEST_SOURCE_URL names LUN 0 of a target with two file LUNs in tenant blue;
// ISERKIT_TEST_PEER_URL LUN 0 of another blue target of the same process; ISERKIT_TEST_RED_URL a
// red target of that process; ISERKIT_TEST_OTHER_URL a target of another process.
// Writes a pattern into LUN 0, makes a token of two ranges of it, fetches it with RECEIVE ROD
// TOKEN INFORMATION, writes it into LUN 1 and into the peer target's LUN (another session: no
// session to the token's target is needed) and reads both back byte for byte; the red tenant and
// the other process answer TOKEN UNKNOWN; a copy with IMMED runs in the background and RECEIVE ROD
// TOKEN INFORMATION follows it; a write to a source block cancels a token (TOKEN
// CANCELLED); the block device zero ROD token writes zeroes. tokencopy_test.sh then checks the
// files themselves.
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <vector>

#include "iserkit/common/bytes.hpp"
#include "iserkit/initiator/session.hpp"
#include "iserkit/scsi/sense.hpp"

#include "../../support/session_client.hpp"
#include "../raw_cdb_client.hpp"

using namespace iserkit;
using namespace iserkit::initiator;

namespace {

using namespace test::copy;                       // bs, blocks, source_lba, destination_lba (in b.img)
constexpr std::uint64_t peer_lba = 20000;        // in the peer target's LUN (c.img)
constexpr std::uint64_t zero_lba = 5000;         // zeroes over the first 100 copied blocks of b.img
constexpr std::uint32_t zero_blocks = 100;
constexpr std::uint64_t cancel_lba = 50000;      // a token of LUN 0 cancelled by a write
constexpr std::uint64_t cancel_destination_lba = 30000;
constexpr std::uint64_t immed_lba = 60000;       // the background copy (IMMED = 1) into b.img
constexpr scsi::AscPair token_unknown{0x23, 0x04};
constexpr scsi::AscPair token_cancelled{0x23, 0x08};
// A vector, not std::array: GCC 12 rejects array locals in coroutine frames ("array used as initializer").
using Token = std::vector<std::byte>;

using test::cdb_of;
using test::run;
using test::rw16;
using test::settle;

// POPULATE TOKEN (83h/10h) or WRITE USING TOKEN (83h/11h): LIST IDENTIFIER, PARAMETER LIST LENGTH.
scsi::Cdb token_cdb(unsigned service_action, std::uint32_t list_id, std::size_t length) {
  scsi::Cdb c = cdb_of({0x83, service_action});
  store_be32(c.bytes.data() + 6, list_id);
  store_be32(c.bytes.data() + 10, static_cast<std::uint32_t>(length));
  return c;
}

scsi::Cdb rrti_cdb(std::uint32_t list_id) {
  scsi::Cdb c = cdb_of({0x84, 0x07});
  store_be32(c.bytes.data() + 2, list_id);
  store_be32(c.bytes.data() + 10, 1024);
  return c;
}

struct Range {
  std::uint64_t lba;
  std::uint32_t blocks;
};

// Range lists built outside the coroutines: GCC 12 rejects braced lists of them inside.
std::vector<Range> one_range(std::uint64_t lba, std::uint32_t n) { return {Range{lba, n}}; }
std::vector<Range> two_ranges(std::uint64_t lba, std::uint32_t n, std::uint64_t lba2, std::uint32_t n2) {
  return {Range{lba, n}, Range{lba2, n2}};
}

// SBC-4: the POPULATE TOKEN parameter list (no IMMED, no RTV, default timeout).
std::vector<std::byte> populate_list(const std::vector<Range>& ranges) {
  std::vector<std::byte> p(16 + 16 * ranges.size());
  store_be16(p.data(), static_cast<std::uint16_t>(p.size() - 2));
  store_be16(p.data() + 14, static_cast<std::uint16_t>(16 * ranges.size()));
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    store_be64(p.data() + 16 + 16 * i, ranges[i].lba);
    store_be32(p.data() + 24 + 16 * i, ranges[i].blocks);
  }
  return p;
}

// SBC-4: the WRITE USING TOKEN parameter list.
std::vector<std::byte> write_list(const Token& token, const std::vector<Range>& ranges) {
  std::vector<std::byte> p(536 + 16 * ranges.size());
  store_be16(p.data(), static_cast<std::uint16_t>(p.size() - 2));
  std::copy(token.begin(), token.end(), p.begin() + 16);
  store_be16(p.data() + 534, static_cast<std::uint16_t>(16 * ranges.size()));
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    store_be64(p.data() + 536 + 16 * i, ranges[i].lba);
    store_be32(p.data() + 544 + 16 * i, ranges[i].blocks);
  }
  return p;
}

bool has_sense(const Result<scsi::ScsiResult>& r, scsi::SenseKey key, scsi::AscPair pair) {
  return r && r->status == scsi::Status::check_condition && r->sense && r->sense->key == key && r->sense->asc_pair() == pair;
}

// POPULATE TOKEN of `ranges` with `list_id`, then the token from RECEIVE ROD TOKEN INFORMATION.
Awaitable<Token> make_token(Session& s, scsi::Lun lun, std::uint32_t list_id, const std::vector<Range>& ranges) {
  Token token(512);
  const auto list = populate_list(ranges);
  auto p = co_await run(s, lun, token_cdb(0x10, list_id, list.size()), {}, list);
  EXPECT_TRUE(p && p->status == scsi::Status::good) << (p && p->sense ? int(p->sense->asc) : -1);
  std::vector<std::byte> info(1024);
  auto r = co_await run(s, lun, rrti_cdb(list_id), info);
  EXPECT_TRUE(r && r->status == scsi::Status::good);
  EXPECT_EQ(load_u8(info.data() + 4) & 0x1f, 0x10);  // RESPONSE TO SERVICE ACTION: POPULATE TOKEN
  EXPECT_EQ(load_u8(info.data() + 5) & 0x7f, 0x01);  // completed without errors
  EXPECT_EQ(load_be32(info.data() + 32), 514u);     // one ROD token descriptor
  std::copy_n(info.begin() + 38, token.size(), token.begin());
  co_return token;
}

// WRITE USING TOKEN of `list` (LIST IDENTIFIER `list_id`) into `lun`, then READ (16) of `blocks`
// blocks at `lba` there must give `data` back (`what` says whose LUN does not when it does not).
Awaitable<void> expect_written_with_token(Session& s, scsi::Lun lun, std::uint32_t list_id,
                                          const std::vector<std::byte>& list, std::uint64_t lba,
                                          const std::vector<std::byte>& data, const char* what) {
  auto x = co_await run(s, lun, token_cdb(0x11, list_id, list.size()), {}, list);
  EXPECT_TRUE(x && x->status == scsi::Status::good) << (x && x->sense ? int(x->sense->asc) : -1);
  std::vector<std::byte> back(data.size());
  auto r = co_await run(s, lun, rw16(0x88, lba, blocks), back);
  EXPECT_TRUE(r && r->status == scsi::Status::good);
  EXPECT_TRUE(back == data) << what;
}

// `body(session)` in a session to the target in `variable`, once LUN 0's unit attentions are read.
template <class Body>
void with_session(const char* variable, Body body) {
  test::with_session(variable, "tokencopy_test.sh", SessionOptions{}, [&](Session& s, scsi::Lun) -> Awaitable<void> {
    (void)co_await settle(s, scsi::Lun::from_index(0));
    co_await body(s);
  });
}

std::vector<std::byte> pattern() {
  std::vector<std::byte> p(std::size_t{blocks} * bs);
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<std::byte>((i * 151 + i / bs + 7) & 0xff);
  return p;
}

TEST(TargetTokenCopy, PopulateWriteAcrossTargetsOfATenantOnly) {
  Token token(512);
  const auto lun0 = scsi::Lun::from_index(0);
  const auto lun1 = scsi::Lun::from_index(1);
  const auto data = pattern();
  with_session("ISERKIT_TEST_SOURCE_URL", [&](Session& s) -> Awaitable<void> {
    (void)co_await settle(s, lun1);
    auto w = co_await run(s, lun0, rw16(0x8a, source_lba, blocks), {}, data);
    EXPECT_TRUE(w && w->status == scsi::Status::good);
    // Two source ranges: the ROD is their concatenation.
    token = co_await make_token(s, lun0, 1, two_ranges(source_lba, 2000, source_lba + 2000, blocks - 2000));
    EXPECT_EQ(load_be32(token.data()), 0x00800002u);  // point in time, change vulnerable
    EXPECT_EQ(load_be16(token.data() + 6), 0x01f8);
    // Into LUN 1 as two destination ranges.
    const auto list = write_list(token, two_ranges(destination_lba, 1000, destination_lba + 1000, blocks - 1000));
    co_await expect_written_with_token(s, lun1, 2, list, destination_lba, data,
                                       "LUN 1 does not hold what the token represents");
    std::vector<std::byte> info(1024);
    auto i = co_await run(s, lun1, rrti_cdb(2), info);
    EXPECT_TRUE(i && i->status == scsi::Status::good);
    EXPECT_EQ(load_u8(info.data() + 4) & 0x1f, 0x11);
    EXPECT_EQ(load_be64(info.data() + 16), blocks);  // TRANSFER COUNT in logical blocks
    // IMMED = 1: GOOD at once, the copy in the background; RECEIVE ROD TOKEN INFORMATION reports
    // it in progress (11h) until it is done (01h).
    auto immed = write_list(token, one_range(immed_lba, blocks));
    store_u8(immed.data() + 2, 0x01);
    auto y = co_await run(s, lun1, token_cdb(0x11, 6, immed.size()), {}, immed);
    EXPECT_TRUE(y && y->status == scsi::Status::good) << (y && y->sense ? int(y->sense->asc) : -1);
    std::uint8_t state = 0x11;
    asio::steady_timer timer(co_await asio::this_coro::executor);
    for (int i = 0; i < 500 && state == 0x11; ++i) {
      auto q = co_await run(s, lun1, rrti_cdb(6), info);
      EXPECT_TRUE(q && q->status == scsi::Status::good);
      if (!q || q->status != scsi::Status::good) break;
      state = load_u8(info.data() + 5) & 0x7f;
      timer.expires_after(std::chrono::milliseconds(10));
      co_await timer.async_wait(asio::use_awaitable);
    }
    EXPECT_EQ(state, 0x01);
    EXPECT_EQ(load_be64(info.data() + 16), blocks);
    std::vector<std::byte> back(data.size());
    auto r2 = co_await run(s, lun1, rw16(0x88, immed_lba, blocks), back);
    EXPECT_TRUE(r2 && r2->status == scsi::Status::good);
    EXPECT_TRUE(back == data) << "the background copy did not write LUN 1";
  });
  // Another target of the tenant, a session of its own: the token is good there.
  with_session("ISERKIT_TEST_PEER_URL", [&](Session& s) -> Awaitable<void> {
    const auto list = write_list(token, one_range(peer_lba, blocks));
    co_await expect_written_with_token(s, lun0, 1, list, peer_lba, data, "the peer target's LUN does not hold the copy");
  });
  // Another tenant of the process, and another process: TOKEN UNKNOWN, nothing written.
  for (const char* variable : {"ISERKIT_TEST_RED_URL", "ISERKIT_TEST_OTHER_URL"}) {
    with_session(variable, [&](Session& s) -> Awaitable<void> {
      const auto list = write_list(token, one_range(peer_lba, blocks));
      auto x = co_await run(s, lun0, token_cdb(0x11, 1, list.size()), {}, list);
      EXPECT_TRUE(has_sense(x, scsi::SenseKey::illegal_request, token_unknown)) << variable;
    });
  }
  with_session("ISERKIT_TEST_SOURCE_URL", [&](Session& s) -> Awaitable<void> {
    (void)co_await settle(s, lun1);
    // A write to one block of a token's range cancels it: nothing more is copied with it.
    const Token doomed = co_await make_token(s, lun0, 3, one_range(cancel_lba, 16));
    std::vector<std::byte> one(bs, std::byte{0x42});
    auto w = co_await run(s, lun0, rw16(0x8a, cancel_lba + 5, 1), {}, one);
    EXPECT_TRUE(w && w->status == scsi::Status::good);
    const auto list = write_list(doomed, one_range(cancel_destination_lba, 16));
    auto x = co_await run(s, lun1, token_cdb(0x11, 4, list.size()), {}, list);
    EXPECT_TRUE(has_sense(x, scsi::SenseKey::illegal_request, token_cancelled));
    // The block device zero ROD token: zeroes over part of the copy.
    Token zero(512);
    store_be32(zero.data(), 0xffff0001);
    store_be16(zero.data() + 6, 0x01f8);
    const auto zl = write_list(zero, one_range(zero_lba, zero_blocks));
    auto z = co_await run(s, lun1, token_cdb(0x11, 5, zl.size()), {}, zl);
    EXPECT_TRUE(z && z->status == scsi::Status::good);
    std::vector<std::byte> back(std::size_t{zero_blocks} * bs, std::byte{1});
    auto r = co_await run(s, lun1, rw16(0x88, zero_lba, zero_blocks), back);
    EXPECT_TRUE(r && r->status == scsi::Status::good);
    EXPECT_TRUE(back == std::vector<std::byte>(back.size()));
  });
}

}  // namespace

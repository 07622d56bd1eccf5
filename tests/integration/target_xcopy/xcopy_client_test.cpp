// The client half of xcopy_test.sh: EXTENDED COPY (SPC-4 §6.4, LID1) through the project's
// initiator against running iserkit-target processes. ISERKIT_TEST_URL names LUN 0 of a target
// with two file LUNs (io_uring backend); ISERKIT_TEST_FOREIGN_URL LUN 0 of another target process.
// Writes a pattern into LUN 0, reads both LUNs' NAA designators from VPD 0x83, copies LUN 0 → LUN 1
// with one EXTENDED COPY (E4h CSCD descriptors, one 02h segment) and reads LUN 1 back; RECEIVE COPY
// RESULTS reports the copy completed with its byte count; a copy into the other target's LUN is
// COPY ABORTED, UNREACHABLE COPY TARGET while the initiator has no session there and leaves that
// LUN untouched, and succeeds once it is logged in there too.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "iserkit/common/bytes.hpp"
#include "iserkit/initiator/session.hpp"
#include "iserkit/scsi/inquiry.hpp"
#include "iserkit/scsi/sense.hpp"

#include "../../support/session_client.hpp"
#include "../raw_cdb_client.hpp"

using namespace iserkit;
using namespace iserkit::initiator;

namespace {

using namespace test::copy;  // bs, blocks, source_lba, destination_lba
constexpr std::uint64_t foreign_lba = 20000;  // where the copy into the other target goes
constexpr scsi::AscPair unreachable_copy_target{0x08, 0x04};

using test::cdb_of;
using test::run;
using test::rw16;
using test::settle;

scsi::Cdb extended_copy(std::uint32_t length) {
  scsi::Cdb c = cdb_of({0x83});
  store_be32(c.bytes.data() + 10, length);
  return c;
}

const scsi::Cdb vpd83_cdb = cdb_of({0x12, 0x01, 0x83, 0x01, 0x00});
const scsi::Cdb copy_status_cdb = [] {
  scsi::Cdb c = cdb_of({0x84, 0x00, 3});
  store_be32(c.bytes.data() + 10, 64);
  return c;
}();

// A parameter list (SPC-4 §6.4.3): LIST ID 3, LIST ID USAGE 00b (hold the status), two E4h CSCD
// descriptors (source, destination) and one 02h segment.
std::vector<std::byte> parameter_list(const std::vector<std::byte>& source_naa, const std::vector<std::byte>& destination_naa) {
  std::vector<std::byte> p(16 + 64 + 28);
  p[0] = std::byte{3};
  store_be16(p.data() + 2, 64);
  store_be32(p.data() + 8, 28);
  for (int i = 0; i < 2; ++i) {
    std::byte* d = p.data() + 16 + 32 * i;
    const auto& naa = i == 0 ? source_naa : destination_naa;
    d[0] = std::byte{0xe4};
    d[4] = std::byte{0x01};  // binary
    d[5] = std::byte{0x03};  // logical unit, NAA
    d[7] = static_cast<std::byte>(naa.size());
    std::copy(naa.begin(), naa.end(), d + 8);
    store_be24(d + 29, bs);
  }
  std::byte* s = p.data() + 16 + 64;
  s[0] = std::byte{0x02};
  store_be16(s + 2, 0x18);
  store_be16(s + 4, 0);
  store_be16(s + 6, 1);
  store_be16(s + 10, static_cast<std::uint16_t>(blocks));
  store_be64(s + 12, source_lba);
  store_be64(s + 20, destination_lba);
  return p;
}

// The LU's NAA designator from VPD 0x83, or empty.
Awaitable<std::vector<std::byte>> naa_of(Session& s, scsi::Lun lun) {
  std::vector<std::byte> page(256);
  auto r = co_await run(s, lun, vpd83_cdb, page);
  if (!r || r->status != scsi::Status::good) co_return std::vector<std::byte>{};
  auto ds = scsi::parse_device_identification(page);
  if (!ds) co_return std::vector<std::byte>{};
  for (const auto& d : *ds)
    if (d.type == scsi::DesignatorType::naa && d.association == scsi::Association::logical_unit) co_return d.value;
  co_return std::vector<std::byte>{};
}

// `body(session)` in a session to the target in `variable`.
template <class Body>
void with_session(const char* variable, Body body) {
  test::with_session(variable, "xcopy_test.sh", SessionOptions{},
                     [&](Session& s, scsi::Lun) -> Awaitable<void> { co_await body(s); });
}

TEST(TargetXcopy, CopiesBetweenFileLunsAndIntoAnotherTargetOnlyWhenLoggedInThere) {
  std::vector<std::byte> foreign_naa;
  with_session("ISERKIT_TEST_FOREIGN_URL", [&](Session& s) -> Awaitable<void> {
    (void)co_await settle(s, scsi::Lun::from_index(0));
    foreign_naa = co_await naa_of(s, scsi::Lun::from_index(0));
  });
  ASSERT_FALSE(foreign_naa.empty());
  with_session("ISERKIT_TEST_URL", [&](Session& s) -> Awaitable<void> {
    const auto lun0 = scsi::Lun::from_index(0);
    const auto lun1 = scsi::Lun::from_index(1);
    (void)co_await settle(s, lun0);
    (void)co_await settle(s, lun1);
    std::vector<std::byte> pattern(std::size_t{blocks} * bs);
    for (std::size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<std::byte>((i * 131 + i / bs) & 0xff);
    auto w = co_await run(s, lun0, rw16(0x8a, source_lba, blocks), {}, pattern);
    EXPECT_TRUE(w && w->status == scsi::Status::good);
    const auto naa0 = co_await naa_of(s, lun0);
    const auto naa1 = co_await naa_of(s, lun1);
    EXPECT_FALSE(naa0.empty());
    EXPECT_NE(naa0, naa1);
    const auto list = parameter_list(naa0, naa1);
    auto x = co_await run(s, lun0, extended_copy(static_cast<std::uint32_t>(list.size())), {}, list);
    EXPECT_TRUE(x && x->status == scsi::Status::good) << (x && x->sense ? int(x->sense->asc) : -1);
    std::vector<std::byte> back(pattern.size());
    auto r = co_await run(s, lun1, rw16(0x88, destination_lba, blocks), back);
    EXPECT_TRUE(r && r->status == scsi::Status::good);
    EXPECT_TRUE(back == pattern) << "LUN 1 does not hold what LUN 0 held";
    // SPC-4 §6.18.3: COPY STATUS of LIST ID 3: completed, one segment, every byte.
    std::vector<std::byte> status(64);
    auto cs = co_await run(s, lun0, copy_status_cdb, status);
    EXPECT_TRUE(cs && cs->status == scsi::Status::good);
    EXPECT_EQ(load_u8(status.data() + 4), 0x01);
    EXPECT_EQ(load_be16(status.data() + 5), 1);
    EXPECT_EQ(load_be32(status.data() + 8), std::uint32_t{blocks} * bs);
    // The other target's LU is in the same kind of process but not this session's: unreachable.
    const auto foreign = parameter_list(naa0, foreign_naa);
    auto f = co_await run(s, lun0, extended_copy(static_cast<std::uint32_t>(foreign.size())), {}, foreign);
    EXPECT_TRUE(f && f->status == scsi::Status::check_condition && f->sense &&
                f->sense->key == scsi::SenseKey::copy_aborted && f->sense->asc_pair() == unreachable_copy_target);
  });
  // With a session to the other target too (the same initiator logged in there), its LUN is
  // reachable: a copy from :one LUN 0 into it.
  with_session("ISERKIT_TEST_URL", [&](Session& s) -> Awaitable<void> {
    auto foreign_url = parse_url(std::getenv("ISERKIT_TEST_FOREIGN_URL"));
    EXPECT_TRUE(foreign_url);
    if (!foreign_url) co_return;
    const SessionOptions options;
    auto there = co_await Session::connect(co_await asio::this_coro::executor, *foreign_url, options);
    EXPECT_TRUE(there) << (there ? "" : there.error().message());
    if (!there) co_return;
    const auto lun0 = scsi::Lun::from_index(0);
    (void)co_await settle(s, lun0);
    (void)co_await settle(**there, lun0);
    const auto naa0 = co_await naa_of(s, lun0);
    auto list = parameter_list(naa0, foreign_naa);
    store_be64(list.data() + 16 + 64 + 20, foreign_lba);
    auto x = co_await run(s, lun0, extended_copy(static_cast<std::uint32_t>(list.size())), {}, list);
    EXPECT_TRUE(x && x->status == scsi::Status::good) << (x && x->sense ? int(x->sense->asc) : -1);
    std::vector<std::byte> source(std::size_t{blocks} * bs), copied(std::size_t{blocks} * bs);
    auto r1 = co_await run(s, lun0, rw16(0x88, source_lba, blocks), source);
    auto r2 = co_await run(**there, lun0, rw16(0x88, foreign_lba, blocks), copied);
    EXPECT_TRUE(r1 && r2 && r1->status == scsi::Status::good && r2->status == scsi::Status::good);
    EXPECT_TRUE(source == copied) << "the other target's LUN does not hold the copy";
    (void)co_await (*there)->logout();
  });
  // The refused copy never wrote the other target's LUN.
  with_session("ISERKIT_TEST_FOREIGN_URL", [&](Session& s) -> Awaitable<void> {
    (void)co_await settle(s, scsi::Lun::from_index(0));
    std::vector<std::byte> back(std::size_t{blocks} * bs, std::byte{1});
    auto r = co_await run(s, scsi::Lun::from_index(0), rw16(0x88, destination_lba, blocks), back);
    EXPECT_TRUE(r && r->status == scsi::Status::good);
    EXPECT_TRUE(back == std::vector<std::byte>(back.size()));
  });
}

}  // namespace

// Token copy of the target's SCSI layer (SBC-4; token_copy.hpp): POPULATE TOKEN and WRITE
// USING TOKEN parameter list parsing with their sense data, range checks, the ROD token format
// (SPC-4 §5.17) and its randomness, copies through a token (with OFFSET INTO ROD, across range
// boundaries, between LUs of one server and of two servers of one tenant), RECEIVE ROD TOKEN
// INFORMATION, the block device zero ROD token, the point in time change vulnerable semantics
// (a write to a source block cancels the token, also in the middle of a copy), inactivity timeouts
// on an injected clock, TOKEN DELETED, tenant isolation, the table's bounds, read-only LUs,
// reservations, abort between chunks, and what the device server advertises (REPORT SUPPORTED
// OPERATION CODES, the Third-party Copy VPD page's token descriptors).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <initializer_list>
#include <memory>
#include <vector>

#include "iserkit/scsi/cdb.hpp"
#include "iserkit/target/backends.hpp"
#include "iserkit/target/scsi_dispatcher.hpp"
#include "scsi/device_state.hpp"
#include "scsi/token_copy.hpp"
#include "test_support.hpp"

namespace iserkit::target {
namespace {

using scsi::Lun;
using scsi::SenseKey;
using scsi::Status;
using Token = std::array<std::byte, detail::rod_token_bytes>;

constexpr std::uint32_t bs = 512;
constexpr std::uint64_t lun_bytes = 64u << 20;

using test::raw;

scsi::Cdb token_cdb(unsigned service_action, std::uint32_t list_id, std::uint32_t length) {
  scsi::Cdb c = raw({0x83, service_action});
  store_be32(c.bytes.data() + 6, list_id);
  store_be32(c.bytes.data() + 10, length);
  return c;
}

scsi::Cdb rrti_cdb(std::uint32_t list_id, std::uint32_t allocation = 4096) {
  scsi::Cdb c = raw({0x84, 0x07});
  store_be32(c.bytes.data() + 2, list_id);
  store_be32(c.bytes.data() + 10, allocation);
  return c;
}

scsi::Cdb rw16(unsigned opcode, std::uint64_t lba, std::uint32_t blocks) { return test::lba16(opcode, lba, blocks); }

using Ranges = std::vector<detail::RangeDescriptor>;

void put_ranges(std::vector<std::byte>& p, std::size_t at, const Ranges& ranges) {
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    store_be64(p.data() + at + 16 * i, ranges[i].lba);
    store_be32(p.data() + at + 16 * i + 8, ranges[i].blocks);
  }
}

/// A POPULATE TOKEN parameter list (SBC-4).
std::vector<std::byte> populate_list(const Ranges& ranges, std::uint32_t timeout = 0, std::uint8_t flags = 0,
                                     std::uint32_t rod_type = 0) {
  std::vector<std::byte> p(16 + 16 * ranges.size());
  store_be16(p.data(), static_cast<std::uint16_t>(p.size() - 2));
  store_u8(p.data() + 2, flags);
  store_be32(p.data() + 4, timeout);
  store_be32(p.data() + 8, rod_type);
  store_be16(p.data() + 14, static_cast<std::uint16_t>(16 * ranges.size()));
  put_ranges(p, 16, ranges);
  return p;
}

/// A WRITE USING TOKEN parameter list (SBC-4).
std::vector<std::byte> write_list(const Token& token, const Ranges& ranges, std::uint64_t offset = 0, std::uint8_t flags = 0) {
  std::vector<std::byte> p(536 + 16 * ranges.size());
  store_be16(p.data(), static_cast<std::uint16_t>(p.size() - 2));
  store_u8(p.data() + 2, flags);
  store_be64(p.data() + 8, offset);
  std::copy(token.begin(), token.end(), p.begin() + 16);
  store_be16(p.data() + 534, static_cast<std::uint16_t>(16 * ranges.size()));
  put_ranges(p, 536, ranges);
  return p;
}

Token zero_token() {
  Token t{};
  store_be32(t.data(), detail::rod_type_block_device_zero);
  store_be16(t.data() + 6, 0x01f8);
  return t;
}

using test::HookedBackend;

void expect_sense(const ScsiOutcome& o, SenseKey key, scsi::AscPair pair) {
  ASSERT_EQ(o.status, Status::check_condition);
  ASSERT_TRUE(o.sense);
  EXPECT_EQ(o.sense->key, key);
  EXPECT_EQ(o.sense->asc_pair(), pair) << std::hex << int(o.sense->asc) << "/" << int(o.sense->ascq);
}

// --- Parsers ---

TEST(TokenParameters, PopulateTokenDecodesAndChecks) {
  auto ok = detail::parse_populate_token_parameters(populate_list({{10, 5}, {100, 7}}, 30, 0x03, 0x00800002));
  ASSERT_TRUE(ok);
  EXPECT_TRUE(ok->immed);
  EXPECT_TRUE(ok->rtv);
  EXPECT_EQ(ok->inactivity_seconds, 30u);
  ASSERT_EQ(ok->ranges.size(), 2u);
  EXPECT_EQ(ok->ranges[1].lba, 100u);
  EXPECT_EQ(ok->ranges[1].blocks, 7u);
  const auto sense_of = [](std::vector<std::byte> p) {
    auto r = detail::parse_populate_token_parameters(p);
    EXPECT_FALSE(r);
    return r ? scsi::SenseData{} : r.error();
  };
  EXPECT_EQ(sense_of(std::vector<std::byte>(15)).asc_pair(), scsi::asc::parameter_list_length_error);
  auto p = populate_list({{0, 1}});
  store_be16(p.data(), 200);  // DATA LENGTH past the list
  EXPECT_EQ(sense_of(p).asc_pair(), scsi::asc::parameter_list_length_error);
  p = populate_list({{0, 1}});
  store_be16(p.data() + 14, 32);  // descriptors past DATA LENGTH
  EXPECT_EQ(sense_of(p).asc_pair(), scsi::asc::parameter_list_length_error);
  auto s = sense_of(populate_list({{0, 1}}, detail::token_max_inactivity_seconds + 1));
  EXPECT_EQ(s.asc_pair(), scsi::asc::invalid_field_in_parameter_list);
  EXPECT_EQ(load_be16(reinterpret_cast<const std::byte*>(s.sense_key_specific->data() + 1)), 4);
  // RTV with a type it does not make: access upon reference, persistent, the zero token.
  for (std::uint32_t t : {0x00800000u, 0x00800003u, 0xffff0001u}) {
    s = sense_of(populate_list({{0, 1}}, 0, 0x02, t));
    EXPECT_EQ(s.asc_pair(), scsi::asc::invalid_field_in_parameter_list) << t;
  }
  // Without RTV the type is the copy manager's choice.
  EXPECT_TRUE(detail::parse_populate_token_parameters(populate_list({{0, 1}}, 0, 0x00, 0x12345678)));
  p = populate_list({{0, 1}, {2, 2}});
  store_be16(p.data() + 14, 24);  // not a multiple of 16
  EXPECT_EQ(sense_of(p).asc_pair(), scsi::asc::invalid_field_in_parameter_list);
  EXPECT_EQ(sense_of(populate_list({})).asc_pair(), scsi::asc::invalid_field_in_parameter_list);
  Ranges many(detail::token_max_range_descriptors + 1, {0, 1});
  EXPECT_EQ(sense_of(populate_list(many)).asc_pair(), (scsi::AscPair{0x26, 0x08}));  // TOO MANY SEGMENT DESCRIPTORS
  many.pop_back();
  EXPECT_TRUE(detail::parse_populate_token_parameters(populate_list(many)));
}

TEST(TokenParameters, WriteUsingTokenDecodesAndChecks) {
  Token t = zero_token();
  t[100] = std::byte{0x5a};
  auto ok = detail::parse_write_using_token_parameters(write_list(t, {{7, 3}}, 42, 0x02));
  ASSERT_TRUE(ok);
  EXPECT_FALSE(ok->immed);
  EXPECT_TRUE(ok->delete_token);
  EXPECT_EQ(ok->offset_into_rod, 42u);
  EXPECT_EQ(ok->token, t);
  ASSERT_EQ(ok->ranges.size(), 1u);
  EXPECT_EQ(ok->ranges[0].lba, 7u);
  EXPECT_FALSE(detail::parse_write_using_token_parameters(std::vector<std::byte>(551)));
  auto p = write_list(t, {{7, 3}});
  store_be16(p.data() + 534, 17);
  auto r = detail::parse_write_using_token_parameters(p);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().asc_pair(), scsi::asc::parameter_list_length_error);
  p = write_list(t, {{7, 3}, {20, 1}});
  store_be16(p.data() + 534, 8);
  r = detail::parse_write_using_token_parameters(p);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().asc_pair(), scsi::asc::invalid_field_in_parameter_list);
}

TEST(TokenParameters, RangeChecks) {
  auto total = detail::check_ranges({{0, 10}, {5, 10}, {90, 10}, {200, 0}}, 100, 1000, false, 16);
  ASSERT_TRUE(total);  // overlapping sources are fine; a zero-length range is no transfer
  EXPECT_EQ(*total, 30u);
  auto r = detail::check_ranges({{0, 10}, {95, 6}}, 100, 1000, false, 16);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().asc_pair(), scsi::asc::lba_out_of_range);
  EXPECT_EQ(r.error().information, 95u);
  r = detail::check_ranges({{0, 60}, {60, 41}}, 1000, 100, false, 16);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().asc_pair(), scsi::asc::invalid_field_in_parameter_list);
  r = detail::check_ranges({{0, 10}, {9, 2}}, 100, 1000, true, 536);  // a destination block twice
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().asc_pair(), scsi::asc::invalid_field_in_parameter_list);
  EXPECT_TRUE(detail::check_ranges({{0, 10}, {10, 2}}, 100, 1000, true, 536));
}

TEST(TokenParameters, RodTokenInformationEncoding) {
  detail::RodStatus s;
  s.service_action = 0x10;
  s.state = detail::RodStatus::State::completed;
  s.transfer_count_blocks = 77;
  s.segments_processed = 2;
  Token t{};
  t[0] = std::byte{0xab};
  t[511] = std::byte{0xcd};
  s.token = t;
  const auto d = detail::encode_rod_token_information(s);
  ASSERT_EQ(d.size(), 32u + 4 + 2 + 512);
  EXPECT_EQ(load_be32(d.data()), d.size() - 4);
  EXPECT_EQ(load_u8(d.data() + 4), 0x10);
  EXPECT_EQ(load_u8(d.data() + 5), 0x01);
  EXPECT_EQ(load_u8(d.data() + 15), 0xf1);
  EXPECT_EQ(load_be64(d.data() + 16), 77u);
  EXPECT_EQ(load_be16(d.data() + 24), 2);
  EXPECT_EQ(load_be32(d.data() + 32), 514u);
  EXPECT_EQ(d[38], std::byte{0xab});
  EXPECT_EQ(d[38 + 511], std::byte{0xcd});
  // With errors: the sense data is in the page, no token.
  detail::RodStatus e;
  e.service_action = 0x11;
  e.state = detail::RodStatus::State::completed_with_errors;
  e.sense = scsi::SenseData::make(SenseKey::copy_aborted, detail::token_cancelled);
  const auto de = detail::encode_rod_token_information(e);
  EXPECT_EQ(load_u8(de.data() + 12), 0x02);
  const std::size_t n = load_u8(de.data() + 13);
  ASSERT_EQ(n, 18u);
  EXPECT_EQ(load_u8(de.data() + 32 + 2) & 0x0f, 0x0a);
  EXPECT_EQ(load_u8(de.data() + 32 + 12), 0x23);
  EXPECT_EQ(load_u8(de.data() + 32 + 13), 0x08);
  EXPECT_EQ(load_be32(de.data() + 32 + n), 0u);
}

TEST(TokenParameters, RodStatusesPerNexusAndListId) {
  detail::RodStatuses statuses;
  ASSERT_TRUE(statuses.begin(1, 7, 0x11));
  // The same list id of the same nexus while it runs: OPERATION IN PROGRESS (begin() refuses).
  EXPECT_FALSE(statuses.begin(1, 7, 0x11));
  EXPECT_TRUE(statuses.begin(2, 7, 0x11));  // another nexus
  auto running = statuses.take(1, 7);
  ASSERT_TRUE(running);
  EXPECT_EQ(running->state, detail::RodStatus::State::in_progress);
  const auto d = detail::encode_rod_token_information(*running);
  EXPECT_EQ(load_u8(d.data() + 5), 0x10);  // in progress, foreground
  EXPECT_NE(load_be32(d.data() + 8), 0u);   // ESTIMATED STATUS UPDATE DELAY
  EXPECT_TRUE(statuses.take(1, 7));         // an unfinished status stays
  detail::RodStatus done;
  done.state = detail::RodStatus::State::completed;
  statuses.update(1, 7, done);
  EXPECT_TRUE(statuses.take(1, 7));
  EXPECT_FALSE(statuses.take(1, 7));  // handed out once
  // Bounded: the oldest finished status goes first.
  for (std::uint32_t i = 0; i < detail::rod_max_held_statuses + 10; ++i) {
    ASSERT_TRUE(statuses.begin(3, 100 + i, 0x10));
    statuses.update(3, 100 + i, done);
  }
  EXPECT_FALSE(statuses.take(3, 100));
  EXPECT_TRUE(statuses.take(3, 100 + detail::rod_max_held_statuses + 9));
  statuses.forget(2);
  EXPECT_FALSE(statuses.take(2, 7));
}

// --- Through the device server ---

class TokenCopy : public test::TwoUnitCopy {
 protected:
  TokenCopy() : TwoUnitCopy(lun_bytes, bs) {}
  void SetUp() override {
    store = std::make_shared<detail::TokenStore>([this] { return now; });
    ASSERT_NO_FATAL_FAILURE(add_units("TOKEN-"));
    use_store(dispatcher);
    open_nexuses("192.0.2.2");
  }

  void use_store(const ScsiDispatcher& d) { const_cast<ScsiDispatcher::State&>(d.internal_state()).tokens = store; }

  test::CommandRun populate(const std::vector<std::byte>& list, std::uint32_t list_id = 1, int lun = 0, NexusId from = {}) {
    return command(token_cdb(0x10, list_id, static_cast<std::uint32_t>(list.size())), list, from, lun);
  }
  test::CommandRun write_using(const std::vector<std::byte>& list, std::uint32_t list_id = 2, int lun = 1, NexusId from = {}) {
    return command(token_cdb(0x11, list_id, static_cast<std::uint32_t>(list.size())), list, from, lun);
  }
  /// POPULATE TOKEN then RECEIVE ROD TOKEN INFORMATION: the token.
  Token make_token(const Ranges& ranges, std::uint32_t timeout = 0, int lun = 0, NexusId from = {}) {
    auto r = populate(populate_list(ranges, timeout), 9, lun, from);
    EXPECT_EQ(r.outcome.status, Status::good);
    auto info = command(rrti_cdb(9), {}, from, lun);
    EXPECT_EQ(info.outcome.status, Status::good);
    Token t{};
    if (info.data_in.size() >= 32 + 4 + 2 + 512) std::copy_n(info.data_in.begin() + 38, 512, t.begin());
    return t;
  }
  std::chrono::steady_clock::time_point now{};
  std::shared_ptr<detail::TokenStore> store;
};

TEST_F(TokenCopy, PopulateThenWriteCopiesByteForByte) {
  write_pattern(0, 10, 3000, 1);
  write_pattern(0, 9000, 100, 2);
  // A ROD of two source ranges (3000 + 100 blocks) written into three destination ranges that
  // cut it elsewhere.
  auto r = populate(populate_list({{10, 3000}, {9000, 100}}), 1);
  ASSERT_EQ(r.outcome.status, Status::good);
  auto info = command(rrti_cdb(1));
  ASSERT_EQ(info.outcome.status, Status::good);
  ASSERT_EQ(info.data_in.size(), 32u + 4 + 2 + 512);
  EXPECT_EQ(load_u8(info.data_in.data() + 4), 0x10);   // RESPONSE TO SERVICE ACTION
  EXPECT_EQ(load_u8(info.data_in.data() + 5), 0x01);   // completed without errors
  EXPECT_EQ(load_be64(info.data_in.data() + 16), 3100u);
  Token token{};
  std::copy_n(info.data_in.begin() + 38, 512, token.begin());
  // The ROD token format (SPC-4 §5.17): type, length, the creator LU's NAA, the bytes represented.
  EXPECT_EQ(load_be32(token.data()), detail::rod_type_point_in_time_change_vulnerable);
  EXPECT_EQ(load_be16(token.data() + 6), 0x01f8);
  EXPECT_EQ(load_u8(token.data() + 16), 0xe4);
  const auto naa = units[0]->naa();
  EXPECT_TRUE(std::equal(naa.begin(), naa.end(), reinterpret_cast<const std::uint8_t*>(token.data() + 24)));
  EXPECT_EQ(load_be64(token.data() + 56), 3100u * bs);
  // A finished status is handed out once.
  expect_sense(command(rrti_cdb(1)).outcome, SenseKey::illegal_request, scsi::asc::invalid_field_in_cdb);

  auto w = write_using(write_list(token, {{500, 1000}, {3000, 2000}, {20000, 100}}), 2);
  ASSERT_EQ(w.outcome.status, Status::good);
  std::vector<std::byte> rod = read(0, 10, 3000);
  const auto tail = read(0, 9000, 100);
  rod.insert(rod.end(), tail.begin(), tail.end());
  std::vector<std::byte> written = read(1, 500, 1000);
  for (auto part : {read(1, 3000, 2000), read(1, 20000, 100)}) written.insert(written.end(), part.begin(), part.end());
  EXPECT_TRUE(written == rod);
  auto winfo = command(rrti_cdb(2), {}, {}, 1);
  ASSERT_EQ(winfo.outcome.status, Status::good);
  EXPECT_EQ(load_u8(winfo.data_in.data() + 4), 0x11);
  EXPECT_EQ(load_u8(winfo.data_in.data() + 5), 0x01);
  EXPECT_EQ(load_be64(winfo.data_in.data() + 16), 3100u);
  EXPECT_EQ(load_be16(winfo.data_in.data() + 24), 3);
  EXPECT_EQ(load_be32(winfo.data_in.data() + 32), 0u);  // no token in a WRITE USING TOKEN's information
  // The token is still valid: a second use, from OFFSET INTO ROD 2990 (across the range boundary).
  ASSERT_EQ(write_using(write_list(token, {{40000, 20}}, 2990), 3).outcome.status, Status::good);
  std::vector<std::byte> expected(rod.begin() + 2990 * bs, rod.begin() + 3010 * bs);
  EXPECT_EQ(read(1, 40000, 20), expected);
  // The ROD must cover the ranges from the offset.
  expect_sense(write_using(write_list(token, {{0, 11}}, 3090), 4).outcome, SenseKey::illegal_request,
               scsi::asc::invalid_field_in_parameter_list);
  expect_sense(write_using(write_list(token, {{0, 1}}, 3101), 4).outcome, SenseKey::illegal_request,
               scsi::asc::invalid_field_in_parameter_list);
}

TEST_F(TokenCopy, TokensAreRandom) {
  const Token a = make_token({{0, 8}});
  const Token b = make_token({{0, 8}});
  EXPECT_NE(a, b);
  // The identifier (8..15) and the random part (128..511) both differ.
  EXPECT_FALSE(std::equal(a.begin() + 8, a.begin() + 16, b.begin() + 8));
  EXPECT_FALSE(std::equal(a.begin() + 128, a.end(), b.begin() + 128));
  // One flipped bit of a real token is an unknown token.
  Token c = a;
  c[300] ^= std::byte{1};
  expect_sense(write_using(write_list(c, {{0, 8}})).outcome, SenseKey::illegal_request, detail::token_unknown);
  EXPECT_EQ(write_using(write_list(a, {{0, 8}})).outcome.status, Status::good);
}

TEST_F(TokenCopy, InvalidTokens) {
  Token t = make_token({{0, 8}});
  Token bad = t;
  store_be16(bad.data() + 6, 0x01f0);
  expect_sense(write_using(write_list(bad, {{0, 8}})).outcome, SenseKey::illegal_request, detail::invalid_token_length);
  bad = t;
  store_be32(bad.data(), detail::rod_type_access_upon_reference);
  expect_sense(write_using(write_list(bad, {{0, 8}})).outcome, SenseKey::illegal_request, detail::unsupported_token_type);
  Token random{};
  store_be32(random.data(), detail::rod_type_point_in_time_change_vulnerable);
  store_be16(random.data() + 6, 0x01f8);
  expect_sense(write_using(write_list(random, {{0, 8}})).outcome, SenseKey::illegal_request, detail::token_unknown);
  EXPECT_EQ(counting[1]->writes, 0);
}

TEST_F(TokenCopy, WriteToASourceBlockCancelsTheToken) {
  write_pattern(0, 0, 64, 3);
  const Token t = make_token({{0, 32}, {100, 32}});
  // Writes beside the ranges change nothing.
  write_pattern(0, 32, 68, 4);
  ASSERT_EQ(write_using(write_list(t, {{0, 64}})).outcome.status, Status::good);
  // One block inside, from another nexus: cancelled; nothing more is written.
  std::vector<std::byte> block(bs, std::byte{0x77});
  ASSERT_EQ(command(rw16(0x8a, 110, 1), block, other).outcome.status, Status::good);
  const int writes = counting[1]->writes;
  expect_sense(write_using(write_list(t, {{1000, 64}})).outcome, SenseKey::illegal_request, detail::token_cancelled);
  EXPECT_EQ(counting[1]->writes, writes);
  // WRITE SAME and UNMAP-style writers cancel too (anything that takes the range lock).
  const Token u = make_token({{200, 8}});
  ASSERT_EQ(command(raw({0x93, 0, 0, 0, 0, 0, 0, 0, 0, 200, 0, 0, 0, 1}), std::vector<std::byte>(bs)).outcome.status,
            Status::good);
  expect_sense(write_using(write_list(u, {{0, 8}})).outcome, SenseKey::illegal_request, detail::token_cancelled);
}

TEST_F(TokenCopy, WriteDuringTheCopyStopsItWithTokenCancelled) {
  constexpr std::uint32_t blocks = 8192;  // four 1 MiB chunks
  write_pattern(0, 0, blocks, 5);
  const auto before = read(0, 0, blocks);
  const Token t = make_token({{0, blocks}});
  auto* source = dispatcher.internal_state().unit(Lun::from_index(0));
  ASSERT_NE(source, nullptr);
  int reads = 0;
  hooked[0]->on_read = [&] {
    // A writer takes a range of the source (as a WRITE would) while the second chunk is read.
    if (++reads == 2) {
      ASSERT_TRUE(source->ranges.try_lock(blocks - 1, 1));
      source->ranges.unlock(blocks - 1, 1);
    }
  };
  const int writes = counting[1]->writes;
  auto w = write_using(write_list(t, {{0, blocks}}));
  hooked[0]->on_read = nullptr;
  expect_sense(w.outcome, SenseKey::copy_aborted, detail::token_cancelled);
  // The first chunk was written; the chunk read after the cancellation was not.
  EXPECT_EQ(counting[1]->writes - writes, 1);
  EXPECT_EQ(read(1, 0, 2048), std::vector<std::byte>(before.begin(), before.begin() + 2048 * bs));
  EXPECT_EQ(read(1, 2048, 1), std::vector<std::byte>(bs));
  auto info = command(rrti_cdb(2), {}, {}, 1);
  ASSERT_EQ(info.outcome.status, Status::good);
  EXPECT_EQ(load_u8(info.data_in.data() + 5), 0x02);  // completed with errors
  EXPECT_EQ(load_be64(info.data_in.data() + 16), 2048u);
  EXPECT_EQ(load_u8(info.data_in.data() + 32 + 12), 0x23);
}

TEST_F(TokenCopy, InactivityTimeoutOnTheInjectedClock) {
  const Token t = make_token({{0, 8}}, 5);
  now += std::chrono::seconds(4);
  ASSERT_EQ(write_using(write_list(t, {{0, 8}})).outcome.status, Status::good);  // used: the timeout starts again
  now += std::chrono::seconds(5);
  ASSERT_EQ(write_using(write_list(t, {{0, 8}})).outcome.status, Status::good);
  now += std::chrono::seconds(6);
  expect_sense(write_using(write_list(t, {{0, 8}})).outcome, SenseKey::illegal_request, detail::token_expired);
  expect_sense(write_using(write_list(t, {{0, 8}})).outcome, SenseKey::illegal_request, detail::token_unknown);
  EXPECT_EQ(store->size(), 0u);
  // INACTIVITY TIMEOUT 0: the default.
  const Token d = make_token({{0, 8}});
  now += std::chrono::seconds(detail::token_default_inactivity_seconds);
  ASSERT_EQ(write_using(write_list(d, {{0, 8}})).outcome.status, Status::good);
  now += std::chrono::seconds(detail::token_default_inactivity_seconds + 1);
  expect_sense(write_using(write_list(d, {{0, 8}})).outcome, SenseKey::illegal_request, detail::token_expired);
}

TEST_F(TokenCopy, DeleteTokenAndBlockDeviceZeroToken) {
  const Token t = make_token({{0, 8}});
  ASSERT_EQ(write_using(write_list(t, {{0, 8}}, 0, 0x02)).outcome.status, Status::good);  // DEL_TKN
  expect_sense(write_using(write_list(t, {{0, 8}})).outcome, SenseKey::illegal_request, detail::token_deleted);
  // The zero token needs no POPULATE TOKEN: zeroes over the ranges, nothing else touched.
  write_pattern(1, 100, 50, 6);
  const int zero_writes = counting[1]->zero_writes;
  ASSERT_EQ(write_using(write_list(zero_token(), {{110, 10}, {130, 5}})).outcome.status, Status::good);
  EXPECT_GT(counting[1]->zero_writes, zero_writes);
  EXPECT_EQ(read(1, 110, 10), std::vector<std::byte>(10 * bs));
  EXPECT_EQ(read(1, 130, 5), std::vector<std::byte>(5 * bs));
  EXPECT_NE(read(1, 120, 10), std::vector<std::byte>(10 * bs));
  EXPECT_NE(read(1, 109, 1), std::vector<std::byte>(bs));
}

TEST_F(TokenCopy, PlanAndCommandChecks) {
  // PARAMETER LIST LENGTH: 0 is nothing to do; too short or above the bound before any Data-Out.
  EXPECT_EQ(command(token_cdb(0x10, 1, 0)).outcome.status, Status::good);
  EXPECT_EQ(command(token_cdb(0x11, 1, 0), {}, {}, 1).outcome.status, Status::good);
  for (auto [sa, length] : {std::pair{0x10u, 31u}, std::pair{0x10u, 65538u}, std::pair{0x11u, 551u},
                            std::pair{0x11u, 65538u}}) {
    auto r = command(token_cdb(sa, 1, length));
    EXPECT_TRUE(r.plan.rejected());
    expect_sense(r.outcome, SenseKey::illegal_request, scsi::asc::parameter_list_length_error);
  }
  // 65 range descriptors: TOO MANY SEGMENT DESCRIPTORS (SBC-4 POPULATE TOKEN), not a length error.
  const Ranges many(detail::token_max_range_descriptors + 1, {0, 1});
  expect_sense(populate(populate_list(many)).outcome, SenseKey::illegal_request, (scsi::AscPair{0x26, 0x08}));
  expect_sense(write_using(write_list(zero_token(), many)).outcome, SenseKey::illegal_request, (scsi::AscPair{0x26, 0x08}));
  // Out of range sources and destinations.
  auto r = populate(populate_list({{lun_bytes / bs - 1, 2}}));
  expect_sense(r.outcome, SenseKey::illegal_request, scsi::asc::lba_out_of_range);
  const Token t = make_token({{0, 8}});
  expect_sense(write_using(write_list(t, {{lun_bytes / bs - 4, 8}})).outcome, SenseKey::illegal_request,
               scsi::asc::lba_out_of_range);
  // Overlapping destination ranges.
  expect_sense(write_using(write_list(t, {{0, 4}, {3, 4}})).outcome, SenseKey::illegal_request,
               scsi::asc::invalid_field_in_parameter_list);
  // IMMED: POPULATE TOKEN completes at once anyway (the token exists when the status goes out).
  ASSERT_EQ(populate(populate_list({{0, 8}}, 0, 0x01), 33).outcome.status, Status::good);
  auto info = command(rrti_cdb(33));
  ASSERT_EQ(info.outcome.status, Status::good);
  EXPECT_EQ(load_u8(info.data_in.data() + 5), 0x01);
  // RECEIVE ROD TOKEN INFORMATION of a list id never used, or another nexus's.
  expect_sense(command(rrti_cdb(12345)).outcome, SenseKey::illegal_request, scsi::asc::invalid_field_in_cdb);
  ASSERT_EQ(populate(populate_list({{0, 8}}), 44).outcome.status, Status::good);
  expect_sense(command(rrti_cdb(44), {}, other).outcome, SenseKey::illegal_request, scsi::asc::invalid_field_in_cdb);
  EXPECT_EQ(command(rrti_cdb(44)).outcome.status, Status::good);
}

TEST_F(TokenCopy, ReservationsAreHonoured) {
  const Token t = make_token({{0, 8}});
  // Another nexus holds RESERVE(6) on both LUs: POPULATE TOKEN (a read) and WRITE USING TOKEN conflict.
  ASSERT_EQ(command(raw({0x16}), {}, other, 0).outcome.status, Status::good);
  ASSERT_EQ(command(raw({0x16}), {}, other, 1).outcome.status, Status::good);
  EXPECT_EQ(populate(populate_list({{0, 8}})).outcome.status, Status::reservation_conflict);
  EXPECT_EQ(write_using(write_list(t, {{0, 8}})).outcome.status, Status::reservation_conflict);
  // The holder may; another nexus's token works for it (tokens are not bound to a nexus).
  EXPECT_EQ(write_using(write_list(t, {{0, 8}}), 5, 1, other).outcome.status, Status::good);
}

TEST_F(TokenCopy, AbortStopsBetweenChunks) {
  constexpr std::uint32_t blocks = 8192;
  const Token t = make_token({{0, blocks}});
  const auto list = write_list(t, {{0, blocks}});
  const auto cdb = token_cdb(0x11, 2, static_cast<std::uint32_t>(list.size()));
  const auto r = run_interrupted(cdb, list, Lun::from_index(1), [](CommandPlan& plan) { plan.abort_requested = true; });
  EXPECT_NE(r.outcome.status, Status::good);
  EXPECT_EQ(r.destination_writes, 2);
}

// Runs WRITE USING TOKEN with IMMED = 1 on LUN 1 and the io_context until idle (the background
// copy included); `during` runs before the source's second chunk is read.
struct BackgroundRun {
  bool returned_before_second_chunk = false;
  std::optional<detail::RodStatus> status_during;
  std::optional<ScsiOutcome> outcome;
};

TEST_F(TokenCopy, ImmedWritesInTheBackgroundAndReportsProgress) {
  constexpr std::uint32_t blocks = 8192;  // four 1 MiB chunks
  write_pattern(0, 0, blocks, 8);
  const auto before = read(0, 0, blocks);
  const Token t = make_token({{0, blocks}});
  const auto run_immed = [&](std::function<void()> during) {
    BackgroundRun out;
    const auto list = write_list(t, {{0, blocks}}, 0, 0x01);
    const auto cdb = token_cdb(0x11, 21, static_cast<std::uint32_t>(list.size()));
    CommandPlan plan = dispatcher.plan(nexus, Lun::from_index(1), cdb.span());
    EXPECT_FALSE(plan.rejected());
    std::vector<std::byte> buffer = list;
    int reads = 0;
    hooked[0]->on_read = [&] {
      if (++reads != 2) return;
      out.returned_before_second_chunk = out.outcome.has_value();
      out.status_during = dispatcher.internal_state().rod_statuses->take(nexus.value, 21);
      if (during) during();
    };
    asio::co_spawn(ctx, dispatcher.execute(nexus, Lun::from_index(1), cdb.span(), plan, buffer),
                   [&](std::exception_ptr, ScsiOutcome o) { out.outcome = o; });
    ctx.restart();
    ctx.run();
    hooked[0]->on_read = nullptr;
    return out;
  };
  auto r = run_immed(nullptr);
  ASSERT_TRUE(r.outcome);
  EXPECT_EQ(r.outcome->status, Status::good);
  EXPECT_TRUE(r.returned_before_second_chunk);  // GOOD went out before the copy was done
  ASSERT_TRUE(r.status_during);
  EXPECT_EQ(r.status_during->state, detail::RodStatus::State::in_progress_background);
  EXPECT_EQ(r.status_during->transfer_count_blocks, 2048u);
  auto info = command(rrti_cdb(21), {}, {}, 1);
  ASSERT_EQ(info.outcome.status, Status::good);
  EXPECT_EQ(load_u8(info.data_in.data() + 5), 0x01);
  EXPECT_EQ(load_be64(info.data_in.data() + 16), blocks);
  EXPECT_EQ(read(1, 0, blocks), before);
  // A logical unit reset stops a background copy into the LU at its next chunk.
  const int writes = counting[1]->writes;
  r = run_immed([&] { dispatcher.task_management(other, Lun::from_index(1), TaskManagement::logical_unit_reset); });
  ASSERT_TRUE(r.outcome);
  EXPECT_EQ(r.outcome->status, Status::good);
  EXPECT_EQ(counting[1]->writes - writes, 2);  // the chunk read when the reset came was written, no other
  (void)command(raw({0x00}), {}, nexus, 1);     // the reset's unit attention
  info = command(rrti_cdb(21), {}, {}, 1);
  ASSERT_EQ(info.outcome.status, Status::good);
  EXPECT_EQ(load_u8(info.data_in.data() + 5), 0x02);  // completed with errors
  EXPECT_EQ(load_be64(info.data_in.data() + 16), 4096u);
  EXPECT_EQ(load_u8(info.data_in.data() + 32 + 2) & 0x0f, 0x0a);  // COPY ABORTED
}

TEST_F(TokenCopy, TableBounds) {
  // token_max_per_nexus tokens per nexus, then INSUFFICIENT RESOURCES TO CREATE ROD TOKEN.
  for (std::size_t i = 0; i < detail::token_max_per_nexus; ++i)
    ASSERT_EQ(populate(populate_list({{0, 1}}), static_cast<std::uint32_t>(i)).outcome.status, Status::good) << i;
  expect_sense(populate(populate_list({{0, 1}}), 9999).outcome, SenseKey::copy_aborted,
               detail::insufficient_resources_to_create_rod_token);
  // Another nexus still may; expired tokens make room again.
  EXPECT_EQ(populate(populate_list({{0, 1}}), 1, 0, other).outcome.status, Status::good);
  now += std::chrono::seconds(detail::token_default_inactivity_seconds + 1);
  EXPECT_EQ(populate(populate_list({{0, 1}}), 9999).outcome.status, Status::good);
  // token_max_total for the whole table.
  std::vector<NexusId> many;
  while (store->size() < detail::token_max_total) {
    const NexusId n = dispatcher.open_nexus("iqn.test:m,i,0x" + std::to_string(many.size() + 10), {}, "192.0.2.9");
    many.push_back(n);
    (void)command(raw({0x00}), {}, n, 0);
    for (std::size_t i = 0; i < detail::token_max_per_nexus && store->size() < detail::token_max_total; ++i)
      ASSERT_EQ(populate(populate_list({{0, 1}}), static_cast<std::uint32_t>(i), 0, n).outcome.status, Status::good);
  }
  const NexusId last = dispatcher.open_nexus("iqn.test:z,i,0x1", {}, "192.0.2.9");
  (void)command(raw({0x00}), {}, last, 0);
  expect_sense(populate(populate_list({{0, 1}}), 1, 0, last).outcome, SenseKey::copy_aborted,
               detail::insufficient_resources_to_create_rod_token);
}

class TokenCopyReadOnly : public TokenCopy {
 protected:
  void SetUp() override {
    read_only_destination = true;
    TokenCopy::SetUp();
  }
};

TEST_F(TokenCopyReadOnly, ReadOnlyDestinationIsRefusedSourceIsFine) {
  const Token from_read_only = make_token({{0, 8}}, 0, 1);  // POPULATE TOKEN only reads
  const int writes = counting[1]->writes;
  expect_sense(write_using(write_list(from_read_only, {{0, 8}})).outcome, SenseKey::data_protect, scsi::asc::write_protected);
  expect_sense(write_using(write_list(zero_token(), {{0, 8}})).outcome, SenseKey::data_protect, scsi::asc::write_protected);
  EXPECT_EQ(counting[1]->writes, writes);
  EXPECT_EQ(write_using(write_list(from_read_only, {{0, 8}}), 2, 0).outcome.status, Status::good);
}

TEST_F(TokenCopy, TenantsAndServers) {
  // Two more device servers of the process: one in this server's tenant, one in another.
  auto domain = std::make_shared<CopyDomain>();
  const auto make_server = [&](const char* serial) {
    auto d = std::make_shared<ScsiDispatcher>();
    LogicalUnitOptions o;
    o.identity.serial = serial;
    EXPECT_TRUE(d->add_logical_unit(0, std::make_shared<LogicalUnit>(
                                            make_memory_backend({.size_bytes = lun_bytes, .block_size_bytes = bs}), o)));
    use_store(*d);
    return d;
  };
  auto same = make_server("SAME-0");
  auto foreign = make_server("FOREIGN-0");
  dispatcher.join_copy_domain(domain, "red");
  same->join_copy_domain(domain, "red");
  foreign->join_copy_domain(domain, "blue");
  auto self = std::shared_ptr<ScsiDispatcher>(&dispatcher, [](ScsiDispatcher*) {});
  domain->set("iqn.test:self", "red", self);
  domain->set("iqn.test:same", "red", same);
  domain->set("iqn.test:foreign", "blue", foreign);
  write_pattern(0, 0, 16, 7);
  const Token t = make_token({{0, 16}});
  // Any initiator of a server of the tenant may use it (no session to the token's target needed).
  const NexusId stranger = same->open_nexus("iqn.test:other-host,i,0x3", {}, "198.51.100.7");
  (void)test::run_command(ctx, *same, stranger, Lun{}, raw({0x00}));
  const auto list = write_list(t, {{64, 16}});
  auto w = test::run_command(ctx, *same, stranger, Lun{}, token_cdb(0x11, 1, static_cast<std::uint32_t>(list.size())), list);
  ASSERT_EQ(w.outcome.status, Status::good);
  auto back = test::run_command(ctx, *same, stranger, Lun{}, rw16(0x88, 64, 16));
  EXPECT_EQ(back.data_in, read(0, 0, 16));
  // Another tenant's server: unknown, exactly as a made-up token.
  const NexusId there = foreign->open_nexus("iqn.test:a,i,0x1", {}, "192.0.2.1");
  (void)test::run_command(ctx, *foreign, there, Lun{}, raw({0x00}));
  auto f = test::run_command(ctx, *foreign, there, Lun{}, token_cdb(0x11, 1, static_cast<std::uint32_t>(list.size())), list);
  expect_sense(f.outcome, SenseKey::illegal_request, detail::token_unknown);
  auto zero_there = test::run_command(ctx, *foreign, there, Lun{}, rw16(0x88, 64, 16));
  EXPECT_EQ(zero_there.data_in, std::vector<std::byte>(16 * bs));
  // A server that left the tenant's domain no longer reaches the token's unit; one that went away
  // takes its tokens with it.
  domain->erase("iqn.test:self");
  dispatcher.join_copy_domain(domain, "red");
  auto gone = test::run_command(ctx, *same, stranger, Lun{}, token_cdb(0x11, 1, static_cast<std::uint32_t>(list.size())), list);
  expect_sense(gone.outcome, SenseKey::illegal_request, detail::token_unknown);
  const Token from_same = [&] {
    const NexusId n = same->open_nexus("iqn.test:a,i,0x1", {}, "192.0.2.1");
    (void)test::run_command(ctx, *same, n, Lun{}, raw({0x00}));
    const auto pl = populate_list({{0, 4}});
    EXPECT_EQ(test::run_command(ctx, *same, n, Lun{}, token_cdb(0x10, 3, static_cast<std::uint32_t>(pl.size())), pl).outcome.status,
              Status::good);
    auto info = test::run_command(ctx, *same, n, Lun{}, rrti_cdb(3));
    Token out{};
    std::copy_n(info.data_in.begin() + 38, 512, out.begin());
    return out;
  }();
  const std::size_t before = store->size();
  same.reset();
  EXPECT_EQ(store->size(), before - 1);
  expect_sense(write_using(write_list(from_same, {{0, 4}})).outcome, SenseKey::illegal_request, detail::token_unknown);
}

TEST_F(TokenCopy, AdvertisedInSupportedOpcodesAndVpd) {
  expect_supported_as_standard({{0x83, 0x10}, {0x83, 0x11}, {0x84, 0x07}});
  auto page = command(raw({0x12, 0x01, 0x8f, 0x04, 0x00}));
  ASSERT_EQ(page.outcome.status, Status::good);
  bool limits = false, features = false, types = false;
  for (std::size_t at = 4; at + 4 <= page.data_in.size();) {
    const std::uint16_t type = load_be16(page.data_in.data() + at);
    const std::size_t length = load_be16(page.data_in.data() + at + 2);
    ASSERT_LE(at + 4 + length, page.data_in.size());
    const std::byte* d = page.data_in.data() + at;
    if (type == 0x0000) {  // Block Device ROD Limits
      limits = true;
      EXPECT_EQ(length, 32u);
      EXPECT_EQ(load_be16(d + 10), detail::token_max_range_descriptors);
      EXPECT_EQ(load_be32(d + 12), detail::token_max_inactivity_seconds);
      EXPECT_EQ(load_be32(d + 16), detail::token_default_inactivity_seconds);
      EXPECT_EQ(load_be64(d + 20), detail::token_max_bytes / bs);
    } else if (type == 0x0106) {  // ROD Token Features
      features = true;
      EXPECT_EQ(load_u8(d + 4), 0);  // REMOTE TOKENS: none
      EXPECT_EQ(load_be32(d + 24), detail::token_max_inactivity_seconds);
      EXPECT_EQ(load_be16(d + 34), 48);
      EXPECT_EQ(load_be64(d + 36 + 8), detail::token_max_bytes);  // MAXIMUM BYTES IN BLOCK ROD
    } else if (type == 0x0108) {  // Supported ROD Types
      types = true;
      EXPECT_EQ(load_be16(d + 6), 128);
      EXPECT_EQ(load_be32(d + 8), detail::rod_type_point_in_time_change_vulnerable);
      EXPECT_EQ(load_u8(d + 12), 0x03);
      EXPECT_EQ(load_be32(d + 8 + 64), detail::rod_type_block_device_zero);
      EXPECT_EQ(load_u8(d + 12 + 64), 0x02);
    }
    at += 4 + length;
  }
  EXPECT_TRUE(limits && features && types);
}

}  // namespace
}  // namespace iserkit::target

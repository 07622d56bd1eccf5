// TcpFramer (common/…/datamover/tcp_framer.hpp), the sans-I/O receive framing of iSCSI/TCP
// (RFC 7143 §11): a byte stream cut in every way gives the same PDUs; placed segments are read
// straight into the placement (the read-ahead is at most one BHS and never payload); oversize
// segments are drained or refused; digests are checked; scratch grows only with arriving bytes.
#include "iserkit/datamover/tcp_framer.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "../../support/framer_reads.hpp"
#include "iserkit/common/crc32c.hpp"
#include "iserkit/common/errors.hpp"

namespace iserkit::datamover {
namespace {

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(i * 31 + seed * 7 + 1);
  return v;
}

struct WirePdu {
  iscsi::Bhs bhs{};
  std::vector<std::byte> ahs;
  std::vector<std::byte> data;
};

/// A Data-Out PDU (ITT `itt`) with `data` and, when `ahs_words` > 0, an AHS area of that many words.
WirePdu data_out(std::uint32_t itt, std::vector<std::byte> data, std::uint8_t ahs_words = 0) {
  WirePdu p;
  p.data = std::move(data);
  p.ahs = pattern(std::size_t{ahs_words} * 4, itt);
  p.bhs = iscsi::encode_bhs(iscsi::DataOut{.final = true, .itt = iscsi::Itt{itt}});
  iscsi::set_lengths(p.bhs, ahs_words, static_cast<std::uint32_t>(p.data.size()));
  return p;
}

/// The PDU's bytes on the wire (RFC 7143 §11.1): BHS, AHS, [digest], data, padding, [digest].
void append(std::vector<std::byte>& wire, const WirePdu& p, bool header_digest, bool data_digest) {
  wire.insert(wire.end(), p.bhs.begin(), p.bhs.end());
  wire.insert(wire.end(), p.ahs.begin(), p.ahs.end());
  std::array<std::byte, 4> d{};
  if (header_digest) {
    store_digest(d.data(), crc32c_final(crc32c_update(crc32c_update(crc32c_init, p.bhs), p.ahs)));
    wire.insert(wire.end(), d.begin(), d.end());
  }
  if (p.data.empty()) return;
  wire.insert(wire.end(), p.data.begin(), p.data.end());
  const std::array<std::byte, 4> zeros{};
  const auto pad = iscsi::padding_for(static_cast<std::uint32_t>(p.data.size()));
  wire.insert(wire.end(), zeros.begin(), zeros.begin() + pad);
  if (data_digest) {
    auto crc = crc32c_update(crc32c_init, p.data);
    store_digest(d.data(), crc32c_final(crc32c_update(crc, std::span(zeros).first(pad))));
    wire.insert(wire.end(), d.begin(), d.end());
  }
}

/// Places segments of at most `target.size()` bytes at its start and remembers where each went.
struct IntoBuffer : DataPlacement {
  std::span<std::byte> target;
  int calls = 0;
  std::span<std::byte> place(const iscsi::Bhs&, std::uint32_t length) noexcept override {
    ++calls;
    return length <= target.size() ? target.first(length) : std::span<std::byte>{};
  }
};

/// What a reader of the stream saw: each PDU (copied out before the next call) or the error.
struct Received {
  std::vector<WirePdu> pdus;
  std::vector<std::error_code> pdu_errors;
  std::optional<std::error_code> stream_error;
  std::size_t most_wanted = 0;           // the largest want_bytes() seen
};

/// Feeds `wire` to `framer` in reads of at most `chunk` bytes (each read stops where the framer's
/// wants end, as a socket read does), until the bytes run out or the stream fails.
Received feed(TcpFramer& framer, std::span<const std::byte> wire, std::size_t chunk, IntoBuffer* placement) {
  Received got;
  std::size_t at = 0;
  while (true) {
    auto r = framer.next(placement);
    if (r) {
      if (!*r) {
        got.stream_error = r->error();
        return got;
      }
      PduIn& in = **r;
      got.pdus.push_back(WirePdu{.bhs = in.bhs, .ahs = in.ahs, .data = {in.data.begin(), in.data.end()}});
      got.pdu_errors.push_back(in.pdu_error);
      continue;
    }
    got.most_wanted = std::max(got.most_wanted, framer.want_bytes());
    if (at == wire.size()) return got;
    iserkit::test::read_into_framer(framer, wire, at, chunk);
  }
}

void expect_same(const std::vector<WirePdu>& want, const Received& got, const std::string& what) {
  ASSERT_EQ(got.pdus.size(), want.size()) << what;
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got.pdus[i].bhs, want[i].bhs) << what << " PDU " << i;
    EXPECT_EQ(got.pdus[i].ahs, want[i].ahs) << what << " PDU " << i;
    EXPECT_EQ(got.pdus[i].data, want[i].data) << what << " PDU " << i;
    EXPECT_FALSE(got.pdu_errors[i]) << what << " PDU " << i << ": " << got.pdu_errors[i].message();
  }
  EXPECT_FALSE(got.stream_error) << what;
}

TEST(TcpFramer, TheSamePdusUnderEverySegmentationWithAndWithoutDigests) {
  std::vector<WirePdu> pdus;
  for (std::uint32_t i = 0; i < 40; ++i) {
    const std::size_t len = i % 5 == 0 ? 0 : i % 5 == 1 ? 1 + i : i % 5 == 2 ? 4096 : i % 5 == 3 ? 48 : 70000 + i;
    pdus.push_back(data_out(i, pattern(len, i), static_cast<std::uint8_t>(i % 7 == 3 ? 2 : 0)));
  }
  for (const bool digests : {false, true}) {
    std::vector<std::byte> wire;
    for (const auto& p : pdus) append(wire, p, digests, digests);
    for (const std::size_t chunk : {std::size_t{1}, std::size_t{3}, std::size_t{47}, std::size_t{48},
                                    std::size_t{49}, std::size_t{4099}, wire.size()}) {
      for (const bool place : {false, true}) {
        TcpFramer framer;
        framer.set_digests(digests, digests);
        framer.set_max_recv_data_segment_length(1 << 20);
        std::vector<std::byte> landing(8192);  // places every segment up to 8 KiB; 70000-byte ones use scratch
        IntoBuffer placement;
        placement.target = landing;
        const auto got = feed(framer, wire, chunk, place ? &placement : nullptr);
        expect_same(pdus, got,
                    "digests=" + std::to_string(digests) + " chunk=" + std::to_string(chunk) + " place=" + std::to_string(place));
      }
    }
  }
}

// Zero copy: the read-ahead is at most one BHS, asked for only with a segment's last bytes, so a
// placed segment's first byte is always read straight into the placement, whatever came before.
TEST(TcpFramer, APlacedSegmentIsReadStraightIntoThePlacement) {
  std::vector<WirePdu> pdus;
  for (std::uint32_t i = 0; i < 30; ++i) pdus.push_back(data_out(i, pattern(i % 3 == 0 ? 0 : 100 + i * 37, i)));
  std::vector<std::byte> wire;
  for (const auto& p : pdus) append(wire, p, false, false);
  for (const std::size_t chunk : {std::size_t{5}, std::size_t{64}, wire.size()}) {
    TcpFramer framer;
    std::vector<std::byte> landing(4096);
    IntoBuffer placement;
    placement.target = landing;
    std::size_t at = 0;
    std::size_t placed_first_bytes = 0;
    std::size_t received = 0;
    while (received < pdus.size()) {
      auto r = framer.next(&placement);
      if (r) {
        ASSERT_TRUE(*r);
        const auto& want = pdus[received];
        EXPECT_EQ(std::vector<std::byte>((*r)->data.begin(), (*r)->data.end()), want.data);
        if (!want.data.empty()) {
          EXPECT_EQ((*r)->data.data(), landing.data());
        }
        ++received;
        continue;
      }
      // Nothing but the rest of a segment, its trailer and one BHS is ever asked for at once.
      const auto wants = framer.want();
      ASSERT_FALSE(wants.empty());
      if (wants.size() > 1) {
        EXPECT_LE(wants.back().size(), iscsi::bhs_size);
      }
      for (const auto& span : wants) {
        if (span.data() == landing.data()) ++placed_first_bytes;
      }
      ASSERT_LT(at, wire.size());
      iserkit::test::read_into_framer(framer, wire, at, chunk);
    }
    EXPECT_EQ(at, wire.size());
    EXPECT_EQ(placed_first_bytes, 20u) << "chunk=" << chunk << ": a placed segment's first byte came from elsewhere";
    EXPECT_FALSE(framer.has_staged_bytes());
  }
}

TEST(TcpFramer, AnOversizeSegmentIsDrainedAndTheNextPduIsIntact) {
  const std::vector<WirePdu> pdus{data_out(1, pattern(300000, 1)), data_out(2, pattern(100, 2))};
  std::vector<std::byte> wire;
  for (const auto& p : pdus) append(wire, p, false, true);
  TcpFramer framer;
  framer.set_digests(false, true);
  framer.set_max_recv_data_segment_length(8192);
  const auto got = feed(framer, wire, 10000, nullptr);
  ASSERT_EQ(got.pdus.size(), 2u);
  EXPECT_EQ(got.pdu_errors[0], make_error_code(errc::pdu_too_large));
  EXPECT_TRUE(got.pdus[0].data.empty());
  EXPECT_FALSE(got.pdu_errors[1]);
  EXPECT_EQ(got.pdus[1].data, pdus[1].data);
  EXPECT_LE(got.most_wanted, TcpFramer::max_scratch_step) << "the drain is bounded";
}

TEST(TcpFramer, AnOversizeSegmentRefusedUnreadEndsTheStream) {
  std::vector<std::byte> wire;
  append(wire, data_out(1, pattern(9000, 1)), false, false);
  append(wire, data_out(2, pattern(10, 2)), false, false);
  TcpFramer framer;
  framer.set_max_recv_data_segment_length(8192);
  framer.set_drain_oversize(false);
  const auto got = feed(framer, wire, wire.size(), nullptr);
  ASSERT_EQ(got.pdus.size(), 1u);
  EXPECT_EQ(got.pdu_errors[0], make_error_code(errc::pdu_too_large));
  ASSERT_TRUE(got.stream_error);
  EXPECT_EQ(*got.stream_error, make_error_code(errc::protocol_error));
}

TEST(TcpFramer, AHeaderDigestMismatchEndsTheStream) {
  std::vector<std::byte> wire;
  append(wire, data_out(1, pattern(10, 1)), true, false);
  wire[48] ^= std::byte{1};  // the header digest
  TcpFramer framer;
  framer.set_digests(true, false);
  const auto got = feed(framer, wire, 7, nullptr);
  EXPECT_TRUE(got.pdus.empty());
  ASSERT_TRUE(got.stream_error);
  EXPECT_EQ(*got.stream_error, make_error_code(errc::header_digest_error));
  // Later calls fail too: the boundaries cannot be trusted.
  auto again = framer.next(nullptr);
  ASSERT_TRUE(again);
  EXPECT_FALSE(*again);
}

TEST(TcpFramer, ADataDigestMismatchFailsThatPduOnly) {
  const std::vector<WirePdu> pdus{data_out(1, pattern(10, 1)), data_out(2, pattern(20, 2))};
  std::vector<std::byte> wire;
  for (const auto& p : pdus) append(wire, p, false, true);
  wire[48 + 3] ^= std::byte{0x40};  // a byte of the first segment
  TcpFramer framer;
  framer.set_digests(false, true);
  const auto got = feed(framer, wire, 13, nullptr);
  ASSERT_EQ(got.pdus.size(), 2u);
  EXPECT_EQ(got.pdu_errors[0], make_error_code(errc::data_digest_error));
  EXPECT_FALSE(got.pdu_errors[1]);
  EXPECT_EQ(got.pdus[1].data, pdus[1].data);
}

// A header announcing a long unplaced segment commits scratch only as its bytes arrive.
TEST(TcpFramer, ScratchGrowsWithTheArrivingBytesOnly) {
  std::vector<std::byte> wire;
  append(wire, data_out(1, pattern(4 << 20, 1)), false, false);
  TcpFramer framer;
  framer.set_max_recv_data_segment_length(16 << 20);
  // Only the header and one byte arrive.
  const auto got = feed(framer, std::span(wire).first(iscsi::bhs_size + 1), 1 << 20, nullptr);
  EXPECT_TRUE(got.pdus.empty());
  EXPECT_LE(got.most_wanted, TcpFramer::max_scratch_step + iscsi::bhs_size);
  // The rest arrives: the PDU is whole.
  const auto rest = feed(framer, std::span(wire).subspan(iscsi::bhs_size + 1), 1 << 20, nullptr);
  ASSERT_EQ(rest.pdus.size(), 1u);
  EXPECT_EQ(rest.pdus[0].data.size(), std::size_t{4} << 20);
}

}  // namespace
}  // namespace iserkit::datamover

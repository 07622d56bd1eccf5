// Fuzz target: the iSCSI/TCP receive framing (common/…/datamover/tcp_framer.hpp; RFC 7143 §11).
// Input: a settings byte (bit 0 header digest, bit 1 data digest, bit 2 drain oversize, bit 3
// place segments), a byte choosing MaxRecvDataSegmentLength (512 << (b % 12)), a byte seeding the
// read sizes, then the byte stream as a peer would send it, fed in reads of varying size.
// Invariants: while more bytes are needed the framer asks for some (1 to 3 spans), never more
// than one scratch step (or the rest of a placed segment) + trailer + one BHS; a whole PDU's AHS
// and data match its BHS lengths (unless the PDU carries pdu_error); a placed segment lies in the
// placement's buffer; after a stream error every call fails.
#include <algorithm>
#include <vector>

#include "../support/framer_reads.hpp"
#include "fuzz_support.hpp"
#include "iserkit/datamover/tcp_framer.hpp"

using namespace iserkit;
using namespace iserkit::datamover;

namespace {
struct Landing : DataPlacement {
  std::vector<std::byte> buffer = std::vector<std::byte>(16384);
  std::span<std::byte> place(const iscsi::Bhs& bhs, std::uint32_t length) noexcept override {
    // Every other PDU (by the low bit of its ITT) is placed, when it fits.
    if ((static_cast<std::uint8_t>(bhs[19]) & 1) != 0 || length > buffer.size()) return {};
    return std::span(buffer).first(length);
  }
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::Reader in(data, size);
  const std::uint8_t settings = in.u8();
  const std::uint32_t max_recv = 512u << (in.u8() % 12);
  unsigned step = in.u8() | 1u;
  const auto stream = in.rest();

  TcpFramer framer;
  framer.set_digests((settings & 1) != 0, (settings & 2) != 0);
  framer.set_drain_oversize((settings & 4) != 0);
  framer.set_max_recv_data_segment_length(max_recv);
  Landing landing;
  DataPlacement* placement = (settings & 8) != 0 ? &landing : nullptr;
  const std::size_t bound = std::max<std::size_t>(TcpFramer::max_scratch_step, max_recv) + 8 + iscsi::bhs_size;

  std::size_t at = 0;
  bool failed = false;
  for (int rounds = 0; rounds < 100000; ++rounds) {
    auto r = framer.next(placement);
    if (r) {
      if (!*r) {
        failed = true;
        auto again = framer.next(placement);
        FUZZ_CHECK(again && !*again);
        break;
      }
      const PduIn& pdu = **r;
      FUZZ_CHECK(pdu.ahs.size() == std::size_t{iscsi::total_ahs_length_words(pdu.bhs)} * 4);
      if (!pdu.pdu_error) {
        FUZZ_CHECK(pdu.data.size() == iscsi::data_segment_length_bytes(pdu.bhs));
        FUZZ_CHECK(pdu.data.size() <= max_recv);
      }
      if (!pdu.data.empty() && placement != nullptr && pdu.data.data() >= landing.buffer.data() &&
          pdu.data.data() < landing.buffer.data() + landing.buffer.size()) {
        FUZZ_CHECK(pdu.data.data() + pdu.data.size() <= landing.buffer.data() + landing.buffer.size());
      }
      continue;
    }
    const auto wants = framer.want();
    FUZZ_CHECK(!wants.empty() && wants.size() <= 3);
    FUZZ_CHECK(framer.want_bytes() > 0 && framer.want_bytes() <= bound);
    if (at == stream.size()) break;
    step = step * 1103515245u + 12345u;
    iserkit::test::read_into_framer(framer, stream, at, 1 + (step >> 16) % 700);
  }
  (void)failed;
  return 0;
}

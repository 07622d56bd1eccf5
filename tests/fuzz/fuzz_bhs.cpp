// Fuzz target: the iSCSI BHS of every opcode and the AHS area (common/…/iscsi/pdu.hpp;
// RFC 7143 §11.2, §11.2.1.5). Input: 48 BHS bytes, then the AHS area.
// Invariants: decode never fails for a known opcode in a way that re-encoding changes; encode is
// the inverse of decode up to reserved fields (decode → encode → decode → encode gives the same
// bytes and the same PDU kind, opcode and ITT); AHS segments lie within the area and survive
// encode → decode unchanged.
#include <algorithm>
#include <cstring>

#include "fuzz_support.hpp"
#include "iserkit/iscsi/pdu.hpp"

using namespace iserkit;
using namespace iserkit::iscsi;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::Reader in(data, size);
  Bhs bhs{};
  const auto head = in.bytes(bhs_size);
  std::copy(head.begin(), head.end(), bhs.begin());

  (void)opcode_name(raw_opcode(bhs));
  FUZZ_CHECK(padding_for(data_segment_length_bytes(bhs)) < 4);
  if (auto h = decode_bhs(bhs)) {
    const Bhs once = encode_bhs(*h);
    FUZZ_CHECK(raw_opcode(once) == raw_opcode(bhs));
    FUZZ_CHECK(total_ahs_length_words(once) == 0 && data_segment_length_bytes(once) == 0);
    auto again = decode_bhs(once);
    FUZZ_CHECK(again.has_value());
    FUZZ_CHECK(again->index() == h->index());
    FUZZ_CHECK(encode_bhs(*again) == once);
    // The ITT sits at the same place in every BHS (RFC 7143 §11.2.1.8) and survives re-encoding,
    // except in Reject and Async Message, whose ITT is always 0xffffffff (§11.17, §11.9).
    const bool reserved_itt_pdu = std::holds_alternative<Reject>(*h) || std::holds_alternative<AsyncMessage>(*h);
    FUZZ_CHECK(to_u32(itt_of(once)) == (reserved_itt_pdu ? 0xffffffffu : to_u32(itt_of(bhs))));
  }

  const auto area = in.rest();
  if (auto segments = decode_ahs(area)) {
    std::size_t total = 0;
    for (const auto& s : *segments) total += 4 + s.specific.size();
    FUZZ_CHECK(total <= area.size());
    const auto encoded = encode_ahs(*segments);
    FUZZ_CHECK(encoded.size() % 4 == 0);
    auto back = decode_ahs(encoded);
    FUZZ_CHECK(back.has_value() && back->size() == segments->size());
    for (std::size_t i = 0; i < back->size(); ++i) {
      FUZZ_CHECK((*back)[i].type == (*segments)[i].type);
      FUZZ_CHECK((*back)[i].specific == (*segments)[i].specific);
    }
  }
  return 0;
}

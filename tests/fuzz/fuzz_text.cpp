// Fuzz target: iSCSI text key=value decoding (common/…/iscsi/text.hpp; RFC 7143 §6.1) and what
// consumes decoded text: operational negotiation in both roles (iscsi/negotiation.hpp, §6.2, §13)
// and the initiator's SendTargets / TargetAddress parsing (initiator/…/discovery.hpp, Appendix C).
// Input: one text data segment.
// Invariants: keys are 1..63 bytes of the RFC text set, values at most 8192 bytes; decode →
// encode → decode is the identity; negotiation answers are themselves valid text.
#include <algorithm>

#include "fuzz_support.hpp"
#include "iserkit/initiator/discovery.hpp"
#include "iserkit/iscsi/negotiation.hpp"
#include "iserkit/iscsi/text.hpp"

using namespace iserkit;
using namespace iserkit::iscsi;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::Reader in(data, size);
  const auto segment = in.rest();
  auto pairs = decode_text(segment);
  if (!pairs) return 0;

  for (const auto& p : *pairs) {
    FUZZ_CHECK(!p.key.empty() && p.key.size() <= 63 && p.value.size() <= 8192);
    FUZZ_CHECK(p.key.find('=') == std::string::npos && p.key.find('\0') == std::string::npos);
    FUZZ_CHECK(p.value.find('\0') == std::string::npos);
    FUZZ_CHECK(find_value(*pairs, p.key) != nullptr);
  }
  const auto encoded = encode_text(*pairs);
  FUZZ_CHECK(encoded.size() <= segment.size() + 1);
  auto back = decode_text(encoded);
  FUZZ_CHECK(back.has_value() && *back == *pairs);

  // Both roles receive the pairs as a peer's offers (and answers to nothing outstanding).
  for (auto role : {Role::initiator, Role::target}) {
    Negotiation n(role, NegotiationPolicy{});
    if (auto answers = n.receive(*pairs)) {
      auto answer_text = decode_text(encode_text(*answers));
      FUZZ_CHECK(answer_text.has_value() && *answer_text == *answers);
    }
    n.finish();
    const auto& p = n.parameters();
    // finish() enforces FirstBurstLength ≤ MaxBurstLength (RFC 7143 §13.14).
    FUZZ_CHECK(p.first_burst_length <= p.max_burst_length);
  }
  // An initiator that offered every key it negotiates, answered by these pairs.
  {
    Negotiation n(Role::initiator, NegotiationPolicy{});
    (void)n.offer({"HeaderDigest", "DataDigest", "MaxConnections", "InitialR2T", "ImmediateData",
                   "MaxBurstLength", "FirstBurstLength", "MaxOutstandingR2T", "DataPDUInOrder",
                   "DataSequenceInOrder", "ErrorRecoveryLevel", "DefaultTime2Wait", "DefaultTime2Retain"});
    (void)n.receive(*pairs);
    n.finish();
  }

  const initiator::Portal portal{.host = "127.0.0.1", .port = 3260, .portal_group_tag = 1};
  if (auto targets = initiator::parse_send_targets(*pairs, portal)) {
    for (const auto& t : *targets) FUZZ_CHECK(!t.portals.empty());
  }
  for (const auto& p : *pairs) {
    if (auto portal_of = initiator::parse_target_address(p.value)) {
      FUZZ_CHECK(!portal_of->host.empty());
      FUZZ_CHECK(portal_of->host.size() <= p.value.size());
    }
  }
  return 0;
}

// Fuzz target: CHAP parsing on both ends (RFC 7143 §12.1.3, §6.1 binary values; RFC 1994):
// common/…/iscsi/chap.hpp (CHAP_A lists, CHAP_I, hex/base64 binary values), the target's
// ChapAuthenticator (target/src/chap_authenticator.hpp) and the initiator's ChapClient
// (initiator/src/chap_client.hpp). Input: a mode byte (0: the common parsers on the rest;
// 1: the target; 2: the initiator; bit 2: mutual CHAP configured), then records (16-bit length +
// text data segment) fed as successive key sets.
// Invariants: binary values decode to at most the given maximum and survive encode → decode;
// algorithm lists survive format → parse; neither end ever reports done() for a peer that cannot
// know the random challenge (target), or for mutual CHAP whose target response is unverifiable
// (initiator); answers are valid text.
#include "fuzz_support.hpp"
#include "iserkit/iscsi/chap.hpp"
#include "iserkit/iscsi/text.hpp"
#include "chap_authenticator.hpp"
#include "chap_client.hpp"

using namespace iserkit;
using namespace iserkit::iscsi;

namespace {

void common_parsers(std::string_view text) {
  if (auto bytes = decode_chap_binary(text, 64)) {
    FUZZ_CHECK(!bytes->empty() && bytes->size() <= 64);
    auto again = decode_chap_binary(encode_chap_binary(*bytes), 64);
    FUZZ_CHECK(again.has_value() && *again == *bytes);
  }
  (void)decode_chap_binary(text);
  if (auto id = parse_chap_identifier(text)) {
    auto again = parse_chap_identifier(std::to_string(*id));
    FUZZ_CHECK(again.has_value() && *again == *id);
  }
  if (auto list = parse_chap_algorithm_list(text)) {
    auto again = parse_chap_algorithm_list(format_chap_algorithm_list(*list));
    if (!list->empty()) FUZZ_CHECK(again.has_value() && *again == *list);
    const auto chosen = choose_chap_algorithm(*list, all_chap_algorithms);
    FUZZ_CHECK(chosen.has_value() == !list->empty());
  }
  if (auto a = parse_chap_algorithm(text)) FUZZ_CHECK(parse_chap_algorithm(chap_algorithm_name(*a)) == a);
}

// Feeds the remaining records to `chap` (either end) as successive key sets until one does not
// decode or is refused: every answer is valid text, and `still_holds(chap)` after each.
template <class Chap, class Check>
void feed_key_sets(fuzz::Reader& in, Chap& chap, Check still_holds) {
  while (!in.empty()) {
    auto keys = decode_text(in.record());
    if (!keys) return;
    auto answer = chap.on_keys(*keys);
    if (!answer) return;
    FUZZ_CHECK(decode_text(encode_text(*answer)) == *answer);
    FUZZ_CHECK(still_holds(chap));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* raw, std::size_t size) {
  fuzz::Reader in(raw, size);
  const std::uint8_t mode = in.u8();
  const bool mutual = (mode & 4) != 0;
  switch (mode & 3) {
    case 0:
      common_parsers(fuzz::as_text(in.rest()));
      return 0;
    case 1: {
      target::AuthConfig auth;
      auth.users = {{"alice", "alice-secret-123"}};
      if (mutual) auth.mutual = target::ChapCredential{"target", "target-secret-456"};
      target::ChapAuthenticator chap(auth);
      feed_key_sets(in, chap, [](const target::ChapAuthenticator& c) { return !c.done(); });
      return 0;
    }
    default: {
      initiator::ChapOptions options;
      options.user = "alice";
      options.secret = "alice-secret-123";
      if (mutual) options.target_secret = "target-secret-456";
      initiator::ChapClient chap(options);
      (void)chap.start();
      feed_key_sets(in, chap, [mutual](const initiator::ChapClient& c) { return !mutual || !c.done(); });
      return 0;
    }
  }
}

// Initiator-side CHAP exchange (RFC 7143 §12.1.3, RFC 1994 §4.1).
#include "chap_client.hpp"

#include <algorithm>

#include "iserkit/common/errors.hpp"

namespace iserkit::initiator {

namespace {

std::vector<iscsi::ChapAlgorithm> offered(const ChapOptions& o) {
  auto list = o.algorithms;
  // RFC 7143 §12.1.3: MD5 MUST be implemented and initiators MUST always offer it.
  if (std::find(list.begin(), list.end(), iscsi::ChapAlgorithm::md5) == list.end())
    list.push_back(iscsi::ChapAlgorithm::md5);
  return list;
}

}  // namespace

iscsi::TextPairs ChapClient::start() {
  state_ = State::wait_challenge;
  return {{"CHAP_A", iscsi::format_chap_algorithm_list(offered(options_))}};
}

Result<iscsi::TextPairs> ChapClient::on_keys(const iscsi::TextPairs& keys) {
  return iscsi::chap_round(state_, keys, [&]() -> Result<iscsi::TextPairs> {
    if (state_ == State::wait_challenge) return respond(keys);
    if (state_ == State::wait_target_response) return verify(keys);
    return fail(errc::negotiation_failed);  // idle: keys before start()
  });
}

Result<iscsi::TextPairs> ChapClient::respond(const iscsi::TextPairs& keys) {
  const std::string* a = iscsi::find_value(keys, "CHAP_A");
  const std::string* i = iscsi::find_value(keys, "CHAP_I");
  const std::string* c = iscsi::find_value(keys, "CHAP_C");
  if (a == nullptr || i == nullptr || c == nullptr) return fail(errc::negotiation_failed);
  // RFC 7143 §12.1.3: the target answers with one algorithm out of those we proposed.
  auto chosen = iscsi::parse_chap_algorithm_list(*a);
  const auto ours = offered(options_);
  if (!chosen || chosen->size() != 1 || std::find(ours.begin(), ours.end(), chosen->front()) == ours.end())
    return fail(errc::negotiation_failed);
  algorithm_ = chosen->front();
  auto id = iscsi::parse_chap_identifier(*i);
  if (!id) return fail(id.error());
  auto challenge = iscsi::decode_chap_binary(*c);
  if (!challenge) return fail(challenge.error());

  iscsi::TextPairs out{{"CHAP_N", options_.user},
                       {"CHAP_R", iscsi::encode_chap_binary(
                                      iscsi::chap_response(algorithm_, *id, options_.secret, *challenge))}};
  if (options_.mutual()) {
    // RFC 7143 §12.1.3: an originator MUST NOT reuse the responder's challenge for the other
    // direction: draw until ours differs from the target's.
    do {
      auto mine = iscsi::chap_random_bytes(iscsi::chap_challenge_size(algorithm_));
      auto mine_id = iscsi::chap_random_bytes(1);
      if (!mine || !mine_id) return fail(errc::authentication_failed);
      challenge_ = std::move(*mine);
      identifier_ = static_cast<std::uint8_t>((*mine_id)[0]);
    } while (challenge_ == *challenge);
    out.push_back({"CHAP_I", std::to_string(identifier_)});
    out.push_back({"CHAP_C", iscsi::encode_chap_binary(challenge_)});
    state_ = State::wait_target_response;
  } else {
    state_ = State::done;
  }
  return out;
}

Result<iscsi::TextPairs> ChapClient::verify(const iscsi::TextPairs& keys) {
  const std::string* n = iscsi::find_value(keys, "CHAP_N");
  const std::string* r = iscsi::find_value(keys, "CHAP_R");
  // RFC 7143 §12.1.3: if the target's authentication fails the initiator MUST end the login.
  if (n == nullptr || r == nullptr) return fail(errc::authentication_failed);
  if (!options_.target_user.empty() && *n != options_.target_user) return fail(errc::authentication_failed);
  auto got = iscsi::decode_chap_binary(*r);
  if (!got) return fail(errc::authentication_failed);
  const auto expected = iscsi::chap_response(algorithm_, identifier_, options_.target_secret, challenge_);
  if (!iscsi::chap_equal(expected, *got)) return fail(errc::authentication_failed);
  state_ = State::done;
  return iscsi::TextPairs{};
}

}  // namespace iserkit::initiator

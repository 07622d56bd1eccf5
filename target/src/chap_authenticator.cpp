// Target-side CHAP exchange (RFC 7143 §12.1.3, RFC 1994 §4.1).
#include "chap_authenticator.hpp"

#include <algorithm>

#include "iserkit/common/errors.hpp"

namespace iserkit::target {

Result<iscsi::TextPairs> ChapAuthenticator::on_keys(const iscsi::TextPairs& keys) {
  return iscsi::chap_round(state_, keys,
                           [&] { return state_ == State::wait_algorithm ? choose(keys) : verify(keys); });
}

Result<iscsi::TextPairs> ChapAuthenticator::choose(const iscsi::TextPairs& keys) {
  if (keys.empty()) return iscsi::TextPairs{};  // AuthMethod round; CHAP_A comes next
  const std::string* a = nullptr;
  for (const auto& [k, v] : keys) {
    if (k != "CHAP_A") return fail(errc::negotiation_failed);  // CHAP_N/R/I/C before the challenge
    a = &v;
  }
  auto offered = iscsi::parse_chap_algorithm_list(*a);
  if (!offered) return fail(offered.error());
  // RFC 7143 §12.1.3: the target answers with one of the algorithms the initiator proposed, in
  // the initiator's order of preference; if none is acceptable the login fails.
  auto chosen = iscsi::choose_chap_algorithm(*offered, auth_.algorithms);
  if (!chosen) {
    std::string theirs;
    for (auto alg : *offered) theirs += (theirs.empty() ? "" : ",") + std::string(iscsi::chap_algorithm_name(alg));
    std::string ours;
    for (auto alg : auth_.algorithms) ours += (ours.empty() ? "" : ",") + std::string(iscsi::chap_algorithm_name(alg));
    reason_ = "no CHAP algorithm in common: offered=" + theirs + " accepted=" + ours;
    const bool md5_offered = std::find(offered->begin(), offered->end(), iscsi::ChapAlgorithm::md5) != offered->end();
    if (md5_offered)
      reason_ += " (MD5 is accepted only where configured: chap_algorithms = [..., \"MD5\"] or --chap-algorithms;"
                 " libiscsi and QEMU offer MD5 only)";
    return fail(errc::authentication_failed);
  }
  algorithm_ = *chosen;
  auto id = iscsi::chap_random_bytes(1);
  auto challenge = iscsi::chap_random_bytes(iscsi::chap_challenge_size(algorithm_));
  if (!id || !challenge) return fail(errc::authentication_failed);
  identifier_ = static_cast<std::uint8_t>((*id)[0]);
  challenge_ = std::move(*challenge);
  state_ = State::wait_response;
  return iscsi::TextPairs{{"CHAP_A", std::to_string(static_cast<unsigned>(algorithm_))},
                          {"CHAP_I", std::to_string(identifier_)},
                          {"CHAP_C", iscsi::encode_chap_binary(challenge_)}};
}

Result<iscsi::TextPairs> ChapAuthenticator::verify(const iscsi::TextPairs& keys) {
  const std::string* name = iscsi::find_value(keys, "CHAP_N");
  const std::string* response = iscsi::find_value(keys, "CHAP_R");
  const std::string* their_id = iscsi::find_value(keys, "CHAP_I");
  const std::string* their_challenge = iscsi::find_value(keys, "CHAP_C");
  for (const auto& [k, v] : keys)
    if (k != "CHAP_N" && k != "CHAP_R" && k != "CHAP_I" && k != "CHAP_C") return fail(errc::negotiation_failed);
  // RFC 7143 §12.1.3: the initiator continues with CHAP_N and CHAP_R; both are required.
  if (name == nullptr || response == nullptr) return fail(errc::authentication_failed);
  auto r = iscsi::decode_chap_binary(*response);
  if (!r) return fail(r.error());
  // CHAP_I and CHAP_C come together or not at all (mutual CHAP).
  if ((their_id == nullptr) != (their_challenge == nullptr)) return fail(errc::negotiation_failed);

  // Check the response against every credential with that name, in constant time each.
  bool ok = false;
  for (const auto& u : auth_.users) {
    if (u.user != *name) continue;
    const auto expected = iscsi::chap_response(algorithm_, identifier_, u.secret, challenge_);
    ok = iscsi::chap_equal(expected, *r) || ok;
  }
  if (!ok) return fail(errc::authentication_failed);
  user_ = *name;

  iscsi::TextPairs answers;
  if (their_challenge != nullptr) {
    auto id = iscsi::parse_chap_identifier(*their_id);
    if (!id) return fail(id.error());
    auto challenge = iscsi::decode_chap_binary(*their_challenge);
    if (!challenge) return fail(challenge.error());
    // RFC 7143 §12.1.3: an originator MUST NOT reuse the responder's challenge for the other
    // direction; the responder MUST check for this and end the login (reflection attack).
    if (*challenge == challenge_) return fail(errc::authentication_failed);
    if (!auth_.mutual) return fail(errc::authentication_failed);  // no target credential to answer with
    const auto mine = iscsi::chap_response(algorithm_, *id, auth_.mutual->secret, *challenge);
    answers.push_back({"CHAP_N", auth_.mutual->user});
    answers.push_back({"CHAP_R", iscsi::encode_chap_binary(mine)});
  }
  state_ = State::done;
  return answers;
}

}  // namespace iserkit::target

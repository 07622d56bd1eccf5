// The target's side of a CHAP exchange in the security stage (RFC 7143 §12.1.3; RFC 1994):
//   initiator: CHAP_A=<list>            → target: CHAP_A=<chosen> CHAP_I=<id> CHAP_C=<challenge>
//   initiator: CHAP_N, CHAP_R [CHAP_I, CHAP_C for mutual] → target verifies; [CHAP_N, CHAP_R]
// Sans-I/O: LoginMachine feeds it the CHAP_* keys of each Login Request and sends the answers.
// Challenges come from OpenSSL's RAND_bytes, one digest long; responses are compared in constant
// time; a reflected challenge (the initiator's CHAP_C equal to ours) fails. Secrets never leave it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "iserkit/common/result.hpp"
#include "iserkit/iscsi/chap.hpp"
#include "iserkit/iscsi/text.hpp"
#include "iserkit/target/config.hpp"

namespace iserkit::target {

/// One CHAP exchange on one connection. Not thread-safe.
class ChapAuthenticator {
 public:
  /// `auth` must have users (required() is true) and must outlive the authenticator.
  explicit ChapAuthenticator(const AuthConfig& auth) : auth_(auth) {}

  /// Processes the CHAP_* pairs of one Login Request; returns the pairs to answer with.
  /// Errors (the login fails with status 0x0201, authentication failure):
  ///  - errc::authentication_failed: no acceptable CHAP_A, unknown CHAP_N, wrong CHAP_R, missing
  ///    CHAP_N/CHAP_R, mutual CHAP asked without a target credential, a reflected challenge;
  ///  - errc::negotiation_failed: a malformed value (CHAP_I not 0..255, CHAP_C/CHAP_R not a §6.1
  ///    binary value, a key out of turn).
  Result<iscsi::TextPairs> on_keys(const iscsi::TextPairs& keys);

  /// True once the initiator proved its identity (and, for mutual CHAP, the target answered).
  [[nodiscard]] bool done() const noexcept { return state_ == State::done; }
  /// The authenticated CHAP_N (empty until done()).
  [[nodiscard]] const std::string& user() const noexcept { return user_; }
  /// Why the exchange failed, for the log (e.g. only MD5 offered where MD5 is not configured);
  /// empty when the status says it all. Names algorithms and users, never secrets.
  [[nodiscard]] const std::string& failure_reason() const noexcept { return reason_; }
  /// The algorithm in use (valid after the first answer).
  [[nodiscard]] iscsi::ChapAlgorithm algorithm() const noexcept { return algorithm_; }

 private:
  enum class State { wait_algorithm, wait_response, done, failed };
  Result<iscsi::TextPairs> choose(const iscsi::TextPairs& keys);
  Result<iscsi::TextPairs> verify(const iscsi::TextPairs& keys);

  const AuthConfig& auth_;
  State state_ = State::wait_algorithm;
  iscsi::ChapAlgorithm algorithm_ = iscsi::ChapAlgorithm::md5;
  std::uint8_t identifier_ = 0;
  std::vector<std::byte> challenge_;
  std::string user_;
  std::string reason_;
};

}  // namespace iserkit::target

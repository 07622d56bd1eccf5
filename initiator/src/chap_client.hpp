// The initiator's side of a CHAP exchange in the security stage (RFC 7143 §12.1.3, RFC 1994):
//   → CHAP_A=<our list>      ← CHAP_A=<chosen> CHAP_I CHAP_C
//   → CHAP_N CHAP_R [CHAP_I CHAP_C: mutual]      ← [CHAP_N CHAP_R: mutual, verified here]
// Sans-I/O: LoginMachine feeds it the target's CHAP_* keys and sends what it returns. Our mutual
// challenge comes from RAND_bytes, is one digest long and never equals the target's (reflection);
// the target's response is compared in constant time. Secrets never leave this class.
#pragma once

#include <cstdint>
#include <vector>

#include "iserkit/common/result.hpp"
#include "iserkit/initiator/options.hpp"
#include "iserkit/iscsi/chap.hpp"
#include "iserkit/iscsi/text.hpp"

namespace iserkit::initiator {

/// One CHAP exchange. Not thread-safe. `options` must outlive it.
class ChapClient {
 public:
  explicit ChapClient(const ChapOptions& options) : options_(options) {}

  /// The first CHAP keys: CHAP_A with our algorithms in order of preference.
  iscsi::TextPairs start();

  /// Processes the target's CHAP_* keys; returns the keys to send next (maybe none).
  /// Errors:
  ///  - errc::negotiation_failed: an algorithm we did not offer, a malformed CHAP_I/CHAP_C/CHAP_R,
  ///    a challenge longer than 1024 bytes, keys out of turn;
  ///  - errc::authentication_failed: mutual CHAP and the target's CHAP_N or CHAP_R is wrong, or
  ///    missing.
  Result<iscsi::TextPairs> on_keys(const iscsi::TextPairs& keys);

  /// True once our response went out and — for mutual CHAP — the target's response was verified.
  [[nodiscard]] bool done() const noexcept { return state_ == State::done; }
  /// True once our CHAP_N/CHAP_R went out: the request carrying them may ask to leave the stage.
  [[nodiscard]] bool responded() const noexcept { return state_ == State::wait_target_response || done(); }
  /// The algorithm the target chose (valid once responded()).
  [[nodiscard]] iscsi::ChapAlgorithm algorithm() const noexcept { return algorithm_; }

 private:
  enum class State { idle, wait_challenge, wait_target_response, done, failed };
  Result<iscsi::TextPairs> respond(const iscsi::TextPairs& keys);
  Result<iscsi::TextPairs> verify(const iscsi::TextPairs& keys);

  const ChapOptions& options_;
  State state_ = State::idle;
  iscsi::ChapAlgorithm algorithm_ = iscsi::ChapAlgorithm::md5;
  std::uint8_t identifier_ = 0;           // ours, for mutual CHAP
  std::vector<std::byte> challenge_;      // ours, for mutual CHAP
};

}  // namespace iserkit::initiator

// CHAP for iSCSI, shared by the initiator and the target (RFC 7143 §12.1.3 "CHAP Considerations",
// RFC 1994 §4.1 response = H(identifier || secret || challenge)). Algorithms by their PPP CHAP
// numbers (IANA "PPP Authentication Algorithms"): 5 MD5, 6 SHA-1, 7 SHA-256, 8 SHA3-256, computed
// with OpenSSL's EVP. Binary values use the RFC 7143 §6.1 encodings ("0x" hex, "0b" base64).
// Layer 1: pure functions, except chap_random_bytes() which draws from OpenSSL's CSPRNG.
// Secrets pass through these functions only; nothing here logs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "iserkit/common/bytes.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/iscsi/text.hpp"

namespace iserkit::iscsi {

/// CHAP_A values (RFC 7143 §12.1.3; RFC 1994 §4.1 for 5; IANA PPP numbers for 6, 7, 8).
enum class ChapAlgorithm : std::uint8_t { md5 = 5, sha1 = 6, sha256 = 7, sha3_256 = 8 };

/// Every algorithm, strongest first by our own preference order: SHA-256, SHA3-256, SHA-1, MD5.
/// RFC 7143 §12.1.3: MD5 MUST be implemented and initiators MUST always offer it.
inline constexpr ChapAlgorithm all_chap_algorithms[] = {ChapAlgorithm::sha256, ChapAlgorithm::sha3_256,
                                                       ChapAlgorithm::sha1, ChapAlgorithm::md5};

/// Digest length in bytes: 16 (MD5), 20 (SHA-1), 32 (SHA-256, SHA3-256).
std::size_t chap_digest_size(ChapAlgorithm algorithm) noexcept;
/// "MD5", "SHA-1", "SHA-256", "SHA3-256".
std::string_view chap_algorithm_name(ChapAlgorithm algorithm) noexcept;
/// Parses one CHAP_A number or name ("7", "sha256", "SHA-256", "sha3-256", "md5", "sha1").
std::optional<ChapAlgorithm> parse_chap_algorithm(std::string_view text) noexcept;

/// Parses a CHAP_A list value ("7,8,6,5"). Numbers this implementation does not know are skipped
/// (RFC 7143 §6.2: the responder picks from what it supports). Errors: errc::negotiation_failed
/// for an empty list or an element that is not a number.
Result<std::vector<ChapAlgorithm>> parse_chap_algorithm_list(std::string_view value);
/// "7,8,6,5".
std::string format_chap_algorithm_list(std::span<const ChapAlgorithm> algorithms);
/// The first of `offered` (the originator's order of preference) that `accepted` contains.
std::optional<ChapAlgorithm> choose_chap_algorithm(std::span<const ChapAlgorithm> offered,
                                                   std::span<const ChapAlgorithm> accepted) noexcept;

/// RFC 1994 §4.1: H(identifier byte || secret || challenge). Returns chap_digest_size() bytes.
std::vector<std::byte> chap_response(ChapAlgorithm algorithm, std::uint8_t identifier, std::string_view secret,
                                     ConstByteSpan challenge);

/// The challenge length this implementation sends for `algorithm`: its digest size (16, 20 or 32
/// bytes), as RFC 1994 §2.3 suggests and as Linux LIO does. RFC 7143 §12.1.3.
std::size_t chap_challenge_size(ChapAlgorithm algorithm) noexcept;
/// Longest challenge accepted from a peer, bytes (RFC 7143 §12.1.3 bounds CHAP_C at 1024 bytes).
inline constexpr std::size_t chap_max_challenge_bytes = 1024;
/// Secrets shorter than this many bytes (96 bits) draw a warning: RFC 7143 §12.1.3 requires
/// IPsec below 96 random bits and implementations must support 128-bit secrets.
inline constexpr std::size_t chap_recommended_secret_bytes = 12;
/// Longest secret accepted, bytes (keeps the hash input bounded).
inline constexpr std::size_t chap_max_secret_bytes = 255;

/// `n` bytes from OpenSSL's RAND_bytes. Errors: errc::not_supported when the CSPRNG fails.
Result<std::vector<std::byte>> chap_random_bytes(std::size_t n);

/// Compares two responses in constant time for equal lengths (CRYPTO_memcmp); false for different
/// lengths. Use for every comparison of a CHAP_R against the expected value.
bool chap_equal(ConstByteSpan a, ConstByteSpan b) noexcept;

/// Encodes bytes as an RFC 7143 §6.1 hex binary value: "0x" and two lowercase digits per byte.
std::string encode_chap_binary(ConstByteSpan bytes);
/// Decodes an RFC 7143 §6.1 binary value: "0x"/"0X" hex (an odd digit count gets a leading 0) or
/// "0b"/"0B" base64. Errors: errc::negotiation_failed for anything else, an empty value, or more
/// than `max_bytes` bytes.
Result<std::vector<std::byte>> decode_chap_binary(std::string_view value, std::size_t max_bytes = chap_max_challenge_bytes);

/// Parses CHAP_I: a decimal or 0x-hex number 0..255 (RFC 7143 §12.1.3, RFC 1994 one-octet
/// identifier). Errors: errc::negotiation_failed.
Result<std::uint8_t> parse_chap_identifier(std::string_view value);

/// One round of a CHAP exchange, either side's: the CHAP keys of one Login PDU. `step` runs the
/// side's own state (answer the challenge, verify a response…) while the exchange is on; once it
/// is over, keys are out of turn (State::done: errc::negotiation_failed, none is fine) or the
/// exchange stays failed (State::failed: errc::authentication_failed). A failed round leaves
/// `state` at State::failed. State: the side's enum, with `done` and `failed`.
template <class State, class Step>
Result<TextPairs> chap_round(State& state, const TextPairs& keys, Step&& step) {
  Result<TextPairs> r = TextPairs{};
  if (state == State::failed) {
    r = fail(errc::authentication_failed);
  } else if (state != State::done) {
    r = step();
  } else if (!keys.empty()) {
    r = fail(errc::negotiation_failed);
  }
  if (!r) state = State::failed;
  return r;
}

}  // namespace iserkit::iscsi

// Text data segments: key=value pairs separated by NUL bytes, used by Login, Text and SendTargets
// (RFC 7143 §6.1 text format, §6.2 negotiation values "Reject", "Irrelevant", "NotUnderstood").
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "iserkit/common/bytes.hpp"
#include "iserkit/common/result.hpp"

namespace iserkit::iscsi {

/// One key=value pair as it appears in a text data segment.
struct TextPair {
  std::string key;
  std::string value;
  friend bool operator==(const TextPair&, const TextPair&) = default;
};
/// Key=value pairs in order; keys may repeat (SendTargets returns TargetName/TargetAddress runs).
using TextPairs = std::vector<TextPair>;

/// Encodes pairs as "key=value\0…" (no padding; the framer pads the data segment).
std::vector<std::byte> encode_text(const TextPairs& pairs);

/// Decodes a text data segment. Empty strings between NULs are skipped; trailing bytes without a
/// NUL terminator are accepted as the last pair (some initiators omit it). Returns
/// errc::malformed_pdu for a pair without '=', a key longer than 63 bytes or a value longer than
/// 8192 bytes (RFC 7143 §6.1), or characters outside the text set in a key.
Result<TextPairs> decode_text(ConstByteSpan data);

/// The first value for `key`, if present.
const std::string* find_value(const TextPairs& pairs, std::string_view key) noexcept;

/// RFC 7143 §6.2 special values.
inline constexpr std::string_view value_reject = "Reject";
inline constexpr std::string_view value_irrelevant = "Irrelevant";
inline constexpr std::string_view value_not_understood = "NotUnderstood";

}  // namespace iserkit::iscsi

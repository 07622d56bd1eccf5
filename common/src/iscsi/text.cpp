// Text key=value codec (RFC 7143 §6.1).
#include "iserkit/iscsi/text.hpp"

#include "iserkit/common/errors.hpp"

namespace iserkit::iscsi {
namespace {

// RFC 7143 §6.1: key names are made of letters, digits, '.', '-', '+', '@', '_'.
bool valid_key_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
         c == '+' || c == '@' || c == '_';
}

}  // namespace

std::vector<std::byte> encode_text(const TextPairs& pairs) {
  std::vector<std::byte> out;
  for (const auto& p : pairs) {
    for (char c : p.key) out.push_back(static_cast<std::byte>(c));
    out.push_back(static_cast<std::byte>('='));
    for (char c : p.value) out.push_back(static_cast<std::byte>(c));
    out.push_back(std::byte{0});
  }
  return out;
}

Result<TextPairs> decode_text(ConstByteSpan data) {
  TextPairs out;
  std::string_view all(reinterpret_cast<const char*>(data.data()), data.size());
  while (!all.empty()) {
    const auto nul = all.find('\0');
    const std::string_view item = all.substr(0, nul);
    all = nul == std::string_view::npos ? std::string_view{} : all.substr(nul + 1);
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) return fail(errc::malformed_pdu);
    const auto key = item.substr(0, eq);
    const auto value = item.substr(eq + 1);
    // RFC 7143 §6.1: keys up to 63 bytes, values up to 255 bytes except where a key says
    // otherwise (8192 for the largest, e.g. CHAP values and X- keys).
    if (key.size() > 63 || value.size() > 8192) return fail(errc::malformed_pdu);
    for (char c : key)
      if (!valid_key_char(c)) return fail(errc::malformed_pdu);
    out.push_back({std::string(key), std::string(value)});
  }
  return out;
}

const std::string* find_value(const TextPairs& pairs, std::string_view key) noexcept {
  for (const auto& p : pairs)
    if (p.key == key) return &p.value;
  return nullptr;
}

}  // namespace iserkit::iscsi

// iSCSI names (RFC 7143 §4.2.7) and CHAP user names (§12.1.3): see names.hpp.
#include "iserkit/iscsi/names.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace iserkit::iscsi {
namespace {

bool name_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == ':';
}

bool hex_digits(std::string_view s) noexcept {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  });
}

bool digits(std::string_view s) noexcept {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The first character `c` of `name` as a message shows it.
std::string shown_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u == ' ') return "a space";
  if (u < 0x20 || u >= 0x7f) return fmt::format("byte 0x{:02x}", u);
  return fmt::format("'{}'", c);
}

tl::expected<void, std::string> bad(std::string_view why) {
  return tl::unexpected(fmt::format("{}; {}", why, iscsi_name_forms));
}

}  // namespace

bool is_valid_iscsi_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > max_iscsi_name_bytes) return false;
  // RFC 7143 §4.2.7.4 (eui.: EUI-64, 16 hex digits) and §4.2.7.5 (naa.: 64- or 128-bit NAA).
  if (name.starts_with("eui.")) return name.size() == 20 && hex_digits(name.substr(4));
  if (name.starts_with("naa.")) {
    const auto hex = name.substr(4);
    return (hex.size() == 16 || hex.size() == 32) && hex_digits(hex);
  }
  // RFC 7143 §4.2.7.2: "iqn." + yyyy-mm + "." + reversed domain name [+ ":" + anything].
  if (!name.starts_with("iqn.") || name.size() < 13) return false;
  const auto date = name.substr(4, 7);
  if (!digits(date.substr(0, 4)) || date[4] != '-' || !digits(date.substr(5, 2)) || name[11] != '.') return false;
  const auto month = (date[5] - '0') * 10 + (date[6] - '0');
  if (month < 1 || month > 12) return false;
  const auto rest = name.substr(12);
  return !rest.empty() && std::all_of(rest.begin(), rest.end(), name_char);
}

tl::expected<void, std::string> check_iscsi_name(std::string_view name) {
  if (is_valid_iscsi_name(name)) return {};
  if (name.empty()) return bad("empty");
  if (name.size() > max_iscsi_name_bytes) return bad(fmt::format("{} bytes, more than 223", name.size()));
  if (name.starts_with("eui.")) return bad("eui. must be followed by exactly 16 hex digits");
  if (name.starts_with("naa.")) return bad("naa. must be followed by 16 or 32 hex digits");
  if (!name.starts_with("iqn.")) {
    if (name.size() >= 4 && (name.substr(0, 4) == "IQN." || name.substr(0, 4) == "EUI." || name.substr(0, 4) == "NAA."))
      return bad("the type prefix is lower case");
    return bad("no iqn., eui. or naa. prefix");
  }
  const auto date = name.substr(4, 7);
  if (name.size() < 12 || !digits(date.substr(0, 4)) || date[4] != '-' || !digits(date.substr(5, 2)) || name[11] != '.')
    return bad("iqn. must be followed by a date YYYY-MM and a '.'");
  const auto month = (date[5] - '0') * 10 + (date[6] - '0');
  if (month < 1 || month > 12) return bad(fmt::format("month {} is not 01..12", date.substr(5, 2)));
  const auto rest = name.substr(12);
  if (rest.empty()) return bad("nothing after the date (the naming authority's reversed domain name)");
  for (char c : rest) {
    if (c >= 'A' && c <= 'Z') return bad("upper case: iSCSI names are compared in their lower-case form; write it in lower case");
    if (!name_char(c)) return bad(fmt::format("{} cannot be in an iSCSI name", shown_char(c)));
  }
  return bad("not an iSCSI name");  // not reached: every rule above was checked
}

std::string fold_case(std::string_view name) {
  std::string out(name);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

tl::expected<void, std::string> check_chap_user(std::string_view name) {
  constexpr std::string_view forms = "want 1 to 255 bytes without control characters (RFC 7143 §12.1.3 CHAP_N)";
  if (name.empty()) return tl::unexpected(fmt::format("empty; {}", forms));
  if (name.size() > max_chap_user_bytes) return tl::unexpected(fmt::format("{} bytes; {}", name.size(), forms));
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return tl::unexpected(fmt::format("{} in the name; {}", shown_char(c), forms));
  }
  return {};
}

}  // namespace iserkit::iscsi

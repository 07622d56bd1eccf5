// Durations, sizes and enumerations for the command lines (see cli_values.hpp).
#include "iserkit/common/cli_values.hpp"

#include <array>
#include <cstdint>
#include <limits>
#include <span>

#include <fmt/format.h>

namespace iserkit::cli {
namespace {

constexpr std::string_view duration_forms =
    "want a number of seconds (30, 0.5) or a number with a unit: 500ms, 1.5s, 2m, 1h";
constexpr std::string_view size_forms =
    "want a number of bytes (4096) or a number with a binary suffix: 4K, 1M, 2G, 1T (K = 1024; KiB and KB mean "
    "the same)";

char lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

// Case-insensitive equality, '_' and '-' alike.
bool same_word(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = lower(a[i]), y = lower(b[i]);
    if (x == '_') x = '-';
    if (y == '_') y = '-';
    if (x != y) return false;
  }
  return true;
}

std::string lowered(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = lower(c);
  return out;
}

// What parse_duration() and parse_size() reject before the number ("" when neither): an empty
// text or a sign; the caller adds its forms.
std::string_view empty_or_signed(std::string_view text) noexcept {
  if (text.empty()) return "empty: ";
  if (text.front() == '-') return "negative: ";
  if (text.front() == '+') return "a sign: ";
  return {};
}

// Adds the decimal digits of `text` from `i` on to `value`, leaving `i` after the last one; false
// when the value would pass UINT64_MAX.
bool read_digits(std::string_view text, std::size_t& i, std::uint64_t& value) noexcept {
  for (; i < text.size() && is_digit(text[i]); ++i) {
    const auto d = static_cast<std::uint64_t>(text[i] - '0');
    if (value > (UINT64_MAX - d) / 10) return false;
    value = value * 10 + d;
  }
  return true;
}

// A unit of parse_duration() (milliseconds) or suffix of parse_size() (a shift), lowercase.
struct Unit {
  std::string_view name;
  std::uint64_t value;
};
constexpr std::array<Unit, 4> duration_units{{{"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}}};
constexpr std::array<Unit, 8> size_shifts{
    {{"", 0}, {"b", 0}, {"k", 10}, {"m", 20}, {"g", 30}, {"t", 40}, {"p", 50}, {"e", 60}}};

const Unit* find_unit(std::span<const Unit> units, std::string_view name) noexcept {
  for (const auto& u : units)
    if (u.name == name) return &u;
  return nullptr;
}

std::string shown(std::string_view text) {
  if (text.empty() || text.find_first_of(" \t") != std::string_view::npos) return fmt::format("\"{}\"", text);
  return std::string(text);
}

}  // namespace

bool is_bare_number(std::string_view text) noexcept {
  if (text.empty()) return false;
  bool dot = false, digit = false;
  for (char c : text) {
    if (is_digit(c)) {
      digit = true;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      return false;
    }
  }
  return digit;
}

Parsed<std::chrono::milliseconds> parse_duration(std::string_view text, BareUnit bare) {
  const auto bad = [&](std::string_view why) -> Parsed<std::chrono::milliseconds> {
    return tl::unexpected(fmt::format("{}{}", why, duration_forms));
  };
  if (const auto why = empty_or_signed(text); !why.empty()) return bad(why);
  std::size_t i = 0;
  std::uint64_t whole = 0;
  if (!read_digits(text, i, whole)) return bad("too large: ");
  bool any_digit = i > 0;
  // The fraction, to 9 digits (further digits are below a nanosecond and ignored).
  std::uint64_t fraction = 0, scale = 1;
  if (i < text.size() && text[i] == '.') {
    ++i;
    for (; i < text.size() && is_digit(text[i]); ++i) {
      any_digit = true;
      if (scale < 1'000'000'000) {
        fraction = fraction * 10 + static_cast<std::uint64_t>(text[i] - '0');
        scale *= 10;
      }
    }
  }
  if (!any_digit) return bad("not a number: ");
  const std::string unit = lowered(text.substr(i));
  std::uint64_t unit_ms = 0;
  if (unit.empty()) {
    unit_ms = bare == BareUnit::seconds ? 1000 : 1;
  } else if (const Unit* u = find_unit(duration_units, unit)) {
    unit_ms = u->value;
  } else {
    return bad(fmt::format("unknown unit \"{}\": ", text.substr(i)));
  }
  constexpr auto max_ms = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (whole > max_ms / unit_ms) return bad("too large: ");
  const std::uint64_t ms = whole * unit_ms + fraction * unit_ms / scale;  // fraction < scale ≤ 1e9, unit_ms ≤ 3.6e6
  if (ms > max_ms) return bad("too large: ");
  if (ms == 0 && (whole != 0 || fraction != 0)) return bad("below one millisecond: ");
  return std::chrono::milliseconds(static_cast<std::int64_t>(ms));
}

Parsed<std::uint64_t> parse_size(std::string_view text) {
  const auto bad = [&](std::string_view why) -> Parsed<std::uint64_t> {
    return tl::unexpected(fmt::format("{}{}", why, size_forms));
  };
  if (const auto why = empty_or_signed(text); !why.empty()) return bad(why);
  std::size_t i = 0;
  std::uint64_t value = 0;
  if (!read_digits(text, i, value)) return bad("too large: ");
  if (i == 0) return bad("not a number: ");
  if (i < text.size() && text[i] == '.') return bad("not a whole number: ");
  std::string suffix = lowered(text.substr(i));
  if (suffix.size() == 3 && suffix.ends_with("ib")) {
    suffix.resize(1);
  } else if (suffix.size() == 2 && suffix.back() == 'b') {
    suffix.resize(1);
  }
  const Unit* shift = find_unit(size_shifts, suffix);
  if (shift == nullptr) return bad(fmt::format("unknown suffix \"{}\": ", text.substr(i)));
  if (value > (UINT64_MAX >> shift->value)) return bad("too large: ");
  return value << shift->value;
}

std::string list_choices(std::span<const std::string_view> accepted) {
  std::string out;
  for (const auto& a : accepted) {
    if (!out.empty()) out += ", ";
    out += a;
  }
  return out;
}

Parsed<std::size_t> parse_choice(std::string_view text, std::span<const std::string_view> accepted) {
  for (std::size_t i = 0; i < accepted.size(); ++i)
    if (same_word(text, accepted[i])) return i;
  return tl::unexpected(fmt::format("want one of {}", list_choices(accepted)));
}

std::string option_message(std::string_view option, std::string_view text, std::string_view message) {
  return fmt::format("--{} {}: {}", option, shown(text), message);
}

std::chrono::milliseconds duration_option(std::string_view option, std::string_view text, std::chrono::milliseconds min,
                                          std::chrono::milliseconds max, BareUnit bare) {
  auto v = parse_duration(text, bare);
  if (!v) throw BadValue(option_message(option, text, v.error()));
  if (*v < min || *v > max) {
    const auto seconds = [](std::chrono::milliseconds d) {
      return d.count() % 1000 == 0 ? fmt::format("{}s", d.count() / 1000) : fmt::format("{}ms", d.count());
    };
    throw BadValue(option_message(option, text, fmt::format("want a duration from {} to {}", seconds(min), seconds(max))));
  }
  return *v;
}

std::uint64_t size_option(std::string_view option, std::string_view text, std::uint64_t min, std::uint64_t max) {
  auto v = parse_size(text);
  if (!v) throw BadValue(option_message(option, text, v.error()));
  if (*v < min || *v > max)
    throw BadValue(option_message(option, text, fmt::format("want a size from {} to {} bytes", min, max)));
  return *v;
}

std::string log_level_option(std::string_view text) {
  static constexpr std::array<std::string_view, 6> levels{"trace", "debug", "info", "warn", "error", "off"};
  auto i = parse_choice(text, levels);
  if (!i) throw BadValue(option_message("log-level", text, i.error()));
  return std::string(levels[*i]);
}

}  // namespace iserkit::cli

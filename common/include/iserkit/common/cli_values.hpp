// One grammar for the values the four programs (iserkit, iserkit-nbd, iserkit-fuse, iserkit-target)
// take on their command lines and in their configuration files (layer 0: pure functions, no I/O):
//  - durations: a decimal number of seconds ("30", "0.5"), or a number with a unit: "500ms",
//    "1.5s", "2m", "1h" (units are case-insensitive);
//  - sizes: a number of bytes ("4096"), or a number with a binary suffix: "4K", "1M", "2G", "1T",
//    "1P" (K = 1024; "KiB" and "KB" mean the same; case-insensitive);
//  - enumerations: one of a fixed list of words, compared case-insensitively ('_' and '-' alike).
// Every error message says what was given and lists what is accepted, so that a program can print
// "PROGRAM: --OPTION VALUE: MESSAGE" and nothing more.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tl/expected.hpp>

namespace iserkit::cli {

/// A parsed value, or a message saying what was wrong and what is accepted.
template <class T>
using Parsed = tl::expected<T, std::string>;

/// The unit of a duration written without one. Seconds everywhere; milliseconds only for the
/// deprecated millisecond options of `iserkit` (--timeout, --nop-interval, --nop-timeout).
enum class BareUnit { seconds, milliseconds };

/// Parses a duration: digits with an optional fraction ("30", "0.5", "1.25"), then an optional unit
/// "ms", "s", "m" (minutes) or "h" (case-insensitive); no sign, no spaces. A number without a unit
/// is in `bare` units. Returns milliseconds, rounded down; a non-zero duration below 1 ms is refused.
/// Errors: a message listing the accepted forms for an empty text, a sign, junk, an unknown unit,
/// or a value above about 292 million years (int64 milliseconds).
Parsed<std::chrono::milliseconds> parse_duration(std::string_view text, BareUnit bare = BareUnit::seconds);

/// True when `text` is a number without a unit ("5000", "1.5"): what BareUnit applies to.
bool is_bare_number(std::string_view text) noexcept;

/// Parses a size in bytes: digits, then an optional binary suffix K, M, G, T, P or E (powers of
/// 1024) optionally followed by "iB" or "B", or a lone "B" (case-insensitive). 0 is accepted (the
/// caller checks its own range). Errors: a message listing the accepted forms for an empty text,
/// a sign, a fraction, junk, an unknown suffix, or a value above 2^64 - 1.
Parsed<std::uint64_t> parse_size(std::string_view text);

/// The position of `text` in `accepted`, compared case-insensitively with '_' and '-' taken alike.
/// Errors: "want one of A, B, C" (the accepted words as written in `accepted`).
Parsed<std::size_t> parse_choice(std::string_view text, std::span<const std::string_view> accepted);

/// One word of an enumeration and the value it stands for.
template <class E>
struct Choice {
  std::string_view name;  ///< as the help and the error list it ("round-robin")
  E value;
};

/// Parses `text` as one of `choices` (parse_choice()). Errors: "want one of ..." listing every name.
template <class E>
Parsed<E> parse_enum(std::string_view text, std::initializer_list<Choice<E>> choices) {
  std::vector<std::string_view> names;
  for (const auto& c : choices) names.push_back(c.name);
  auto i = parse_choice(text, names);
  if (!i) return tl::unexpected(std::move(i.error()));
  return (choices.begin() + *i)->value;
}

/// "A, B, C": the accepted words of an enumeration, for help texts and messages.
std::string list_choices(std::span<const std::string_view> accepted);

/// Thrown by the *_option() helpers below; what() is "--OPTION VALUE: MESSAGE".
class BadValue : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// "--`option` `text`: `message`" (the text quoted when it is empty or holds a space).
std::string option_message(std::string_view option, std::string_view text, std::string_view message);

/// parse_duration() for option `option` (without the dashes), with a range check: the result must be
/// within [`min`, `max`]. Throws BadValue naming the option, the value and what is accepted.
std::chrono::milliseconds duration_option(std::string_view option, std::string_view text,
                                          std::chrono::milliseconds min = std::chrono::milliseconds(0),
                                          std::chrono::milliseconds max = std::chrono::hours(24 * 365),
                                          BareUnit bare = BareUnit::seconds);

/// parse_size() for option `option`, within [`min`, `max`] bytes. Throws BadValue.
std::uint64_t size_option(std::string_view option, std::string_view text, std::uint64_t min = 0,
                          std::uint64_t max = UINT64_MAX);

/// parse_enum() for option `option`. Throws BadValue listing the accepted words.
template <class E>
E enum_option(std::string_view option, std::string_view text, std::initializer_list<Choice<E>> choices) {
  auto v = parse_enum(text, choices);
  if (!v) throw BadValue(option_message(option, text, v.error()));
  return *v;
}

/// The log levels every program takes (--log-level): trace, debug, info, warn, error, off.
/// Returns the level's canonical lower-case name. Throws BadValue listing them.
std::string log_level_option(std::string_view text);

}  // namespace iserkit::cli

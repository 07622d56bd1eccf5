// Logging: spdlog behind a few project macros-free helpers. Secrets are never passed here.
// Strings that come from a peer (InitiatorName, TargetName, CHAP_N, any text key or value, a
// file name found on disk) are logged through log::escaped(), so a newline, a terminal escape or
// a megabyte-long name cannot forge log lines or flood the log.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace iserkit::log {
using spdlog::debug;
using spdlog::error;
using spdlog::info;
using spdlog::trace;
using spdlog::warn;

/// Sets the global level from a name: trace, debug, info, warn, error, off. Unknown names keep "info".
/// The first call also sends every log line to standard error (spdlog's default logger writes to
/// standard output, which the programs keep for data and JSON): every program calls this first.
void set_level(std::string_view level);

/// Sends every later log line to syslog(3) instead of standard error, keeping the level: for a
/// daemon that left its terminal (iserkit-fuse without -f). Lines carry `ident` and the PID,
/// facility LOG_DAEMON, and spdlog's level as the priority (warn → LOG_WARNING, …). Where
/// systemd-journald runs it owns /dev/log, so the lines land in the journal (`journalctl -t
/// ident`); without a syslog daemon they are dropped, as syslog(3) does. Call it once, after the
/// fork, from the thread that logs first.
void to_syslog(const std::string& ident);

/// Default bound on how many bytes of a peer string are logged.
inline constexpr std::size_t escaped_max_bytes = 256;

/// A peer-provided string to log escaped (see escape()). Holds a view: log it in the same
/// statement, before `text` goes away.
struct Escaped {
  std::string_view text;
  std::size_t max_bytes = escaped_max_bytes;
};

/// Wraps `text` for a log call: `log::info("login: initiator={}", log::escaped(name))`.
[[nodiscard]] constexpr Escaped escaped(std::string_view text,
                                        std::size_t max_bytes = escaped_max_bytes) noexcept {
  return Escaped{text, max_bytes};
}

/// The printable form of a peer string: printable ASCII (0x20..0x7e) is kept except '\', which
/// becomes "\\"; every other byte (control characters, DEL, bytes of UTF-8 sequences) becomes
/// "\xNN" with two lower-case hex digits. Only the first `max_bytes` bytes of `text` are
/// rendered; a longer text ends with the marker "...[+N bytes]" where N is the number left out.
[[nodiscard]] std::string escape(std::string_view text, std::size_t max_bytes = escaped_max_bytes);

}  // namespace iserkit::log

template <>
struct fmt::formatter<iserkit::log::Escaped> : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(const iserkit::log::Escaped& e, FormatContext& ctx) const -> decltype(ctx.out()) {
    return fmt::formatter<std::string_view>::format(iserkit::log::escape(e.text, e.max_bytes), ctx);
  }
};

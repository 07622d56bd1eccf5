// Log level selection for the executables, and the escaping of peer strings for logs.
#include "iserkit/common/log.hpp"

#include <syslog.h>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/syslog_sink.h>

namespace iserkit::log {

void set_level(std::string_view level) {
  auto l = spdlog::level::from_str(std::string(level));
  if (l == spdlog::level::off && level != "off") l = spdlog::level::info;
  // spdlog's default logger writes to standard output, which the programs use for data (`iserkit
  // read` without -o) and for JSON summaries: log lines go to standard error instead.
  static const bool on_stderr = [] {
    spdlog::set_default_logger(spdlog::stderr_color_mt("iserkit"));
    return true;
  }();
  (void)on_stderr;
  spdlog::set_level(l);
}

void to_syslog(const std::string& ident) {
  const auto level = spdlog::get_level();
  // The syslog sink sends the bare message: syslog adds the time, host, ident and PID itself.
  auto logger = spdlog::get("iserkit-syslog");
  if (!logger) logger = spdlog::syslog_logger_mt("iserkit-syslog", ident, LOG_PID, LOG_DAEMON);
  spdlog::set_default_logger(logger);
  spdlog::set_level(level);
}

std::string escape(std::string_view text, std::size_t max_bytes) {
  static constexpr char hex[] = "0123456789abcdef";
  const std::size_t shown = text.size() < max_bytes ? text.size() : max_bytes;
  std::string out;
  out.reserve(shown + 16);
  for (std::size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c <= 0x7e) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0x0f];
    }
  }
  if (shown < text.size()) out += fmt::format("...[+{} bytes]", text.size() - shown);
  return out;
}

}  // namespace iserkit::log

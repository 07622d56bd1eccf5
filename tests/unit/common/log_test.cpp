// log::escape / log::escaped: peer strings rendered safe for one log line.
#include "iserkit/common/log.hpp"

#include <sstream>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/sinks/syslog_sink.h>

namespace iserkit::log {
namespace {

TEST(LogEscape, PrintableAsciiIsKept) {
  EXPECT_EQ(escape("iqn.2026-11.org.example:host-1"), "iqn.2026-11.org.example:host-1");
  EXPECT_EQ(escape("a b=c,d"), "a b=c,d");
}

TEST(LogEscape, ControlCharactersBecomeHexEscapes) {
  EXPECT_EQ(escape("a\nb"), "a\\x0ab");
  EXPECT_EQ(escape("\r\t"), "\\x0d\\x09");
  EXPECT_EQ(escape(std::string_view("x\0y", 3)), "x\\x00y");
  EXPECT_EQ(escape("\x1b[31mred"), "\\x1b[31mred");
  EXPECT_EQ(escape("\x7f"), "\\x7f");
}

TEST(LogEscape, BackslashIsDoubledSoEscapesCannotBeForged) {
  // A peer sending the four characters \x0a must not look like an escaped newline.
  EXPECT_EQ(escape("\\x0a"), "\\\\x0a");
}

TEST(LogEscape, NonAsciiBytesAreEscaped) { EXPECT_EQ(escape("\xc3\xa9"), "\\xc3\\xa9"); }

TEST(LogEscape, LongValuesAreTruncatedWithAMarker) {
  const std::string long_name(1000, 'a');
  const std::string out = escape(long_name, 10);
  EXPECT_EQ(out, "aaaaaaaaaa...[+990 bytes]");
  EXPECT_EQ(escape(std::string(10, 'b'), 10), std::string(10, 'b'));  // exactly the bound: no marker
  EXPECT_LT(escape(std::string(100000, 'z')).size(), escaped_max_bytes + 32);
}

TEST(LogEscape, FormatsThroughFmtAndSpdlog) {
  EXPECT_EQ(fmt::format("initiator={}", escaped("evil\nINFO forged line")), "initiator=evil\\x0aINFO forged line");
  std::ostringstream sink_text;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(sink_text);
  spdlog::logger logger("escape-test", sink);
  logger.set_pattern("%v");
  logger.info("name={}", escaped("a\nb\rc"));
  logger.flush();
  EXPECT_EQ(sink_text.str(), "name=a\\x0ab\\x0dc\n");
}

// A daemonized program's lines go to syslog(3) (iserkit-fuse without -f), at the level it had.
TEST(LogToSyslog, TheDefaultLoggerWritesToSyslogAtTheSameLevel) {
  const auto before = spdlog::default_logger();
  const auto level = spdlog::get_level();
  spdlog::set_level(spdlog::level::warn);
  to_syslog("iserkit-log-test");
  const auto now = spdlog::default_logger();
  ASSERT_EQ(now->sinks().size(), 1u);
  EXPECT_NE(std::dynamic_pointer_cast<spdlog::sinks::syslog_sink_mt>(now->sinks()[0]), nullptr);
  EXPECT_EQ(now->level(), spdlog::level::warn);
  to_syslog("iserkit-log-test");  // a second call keeps the one logger
  EXPECT_EQ(spdlog::default_logger(), now);
  spdlog::set_default_logger(before);
  spdlog::set_level(level);
}

}  // namespace
}  // namespace iserkit::log

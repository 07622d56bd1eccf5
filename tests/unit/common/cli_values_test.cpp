// cli_values (common/cli_values.hpp): durations, sizes and enumerations as the four programs take
// them, and iscsi/names.hpp: iSCSI names (RFC 7143 §4.2.7) and CHAP user names (§12.1.3).
#include "iserkit/common/cli_values.hpp"
#include "iserkit/iscsi/names.hpp"

#include <gtest/gtest.h>

namespace {

using namespace iserkit::cli;
using std::chrono::milliseconds;

milliseconds ms(std::string_view text, BareUnit bare = BareUnit::seconds) { return parse_duration(text, bare).value(); }

TEST(Duration, BareNumberIsSeconds) {
  EXPECT_EQ(ms("30"), milliseconds(30'000));
  EXPECT_EQ(ms("0"), milliseconds(0));
  EXPECT_EQ(ms("0.5"), milliseconds(500));
  EXPECT_EQ(ms("1.25"), milliseconds(1250));
  EXPECT_EQ(ms("2."), milliseconds(2000));
  EXPECT_EQ(ms(".5"), milliseconds(500));
}

TEST(Duration, EverySuffixAnyCase) {
  EXPECT_EQ(ms("500ms"), milliseconds(500));
  EXPECT_EQ(ms("500MS"), milliseconds(500));
  EXPECT_EQ(ms("1.5s"), milliseconds(1500));
  EXPECT_EQ(ms("1.5S"), milliseconds(1500));
  EXPECT_EQ(ms("2m"), milliseconds(120'000));
  EXPECT_EQ(ms("2M"), milliseconds(120'000));
  EXPECT_EQ(ms("1h"), milliseconds(3'600'000));
  EXPECT_EQ(ms("0.5h"), milliseconds(1'800'000));
  EXPECT_EQ(ms("1.0009s"), milliseconds(1000));  // rounded down to the millisecond
}

TEST(Duration, BareMillisecondsForTheDeprecatedOptions) {
  EXPECT_EQ(ms("5000", BareUnit::milliseconds), milliseconds(5000));
  EXPECT_EQ(ms("5s", BareUnit::milliseconds), milliseconds(5000));
  EXPECT_TRUE(is_bare_number("5000"));
  EXPECT_TRUE(is_bare_number("1.5"));
  EXPECT_FALSE(is_bare_number("5s"));
  EXPECT_FALSE(is_bare_number(""));
  EXPECT_FALSE(is_bare_number("."));
}

// `parse` refuses every text of `bad`, each time with a message that names the accepted `forms`.
template <class Parse>
void expect_refused_naming(Parse parse, std::initializer_list<const char*> bad, std::string_view forms) {
  for (const char* text : bad) {
    auto r = parse(text);
    ASSERT_FALSE(r) << text;
    EXPECT_NE(r.error().find(forms), std::string::npos) << r.error();
  }
}

TEST(Duration, RefusedWithTheAcceptedForms) {
  ASSERT_NO_FATAL_FAILURE((expect_refused_naming([](std::string_view text) { return parse_duration(text); },
                                                 {"", "-1", "+1", "abc", "1x", "1 s", "1sec", ".", "s", "1.5.2",
                                                  "0.0001", "1e3"},
                                                 "500ms, 1.5s, 2m, 1h")));
  EXPECT_NE(parse_duration("-1").error().find("negative"), std::string::npos);
  EXPECT_NE(parse_duration("1x").error().find("unknown unit \"x\""), std::string::npos);
}

TEST(Duration, Overflow) {
  EXPECT_FALSE(parse_duration("99999999999999999999999"));
  EXPECT_FALSE(parse_duration("9223372036854775808ms"));
  EXPECT_TRUE(parse_duration("9223372036854775807ms"));
  EXPECT_FALSE(parse_duration("3000000000000000h"));
}

TEST(Size, EverySuffixAnyCase) {
  EXPECT_EQ(parse_size("4096").value(), 4096u);
  EXPECT_EQ(parse_size("0").value(), 0u);
  EXPECT_EQ(parse_size("7B").value(), 7u);
  EXPECT_EQ(parse_size("4K").value(), 4096u);
  EXPECT_EQ(parse_size("4k").value(), 4096u);
  EXPECT_EQ(parse_size("4KiB").value(), 4096u);
  EXPECT_EQ(parse_size("4kb").value(), 4096u);
  EXPECT_EQ(parse_size("1M").value(), 1u << 20);
  EXPECT_EQ(parse_size("64MiB").value(), 64u << 20);
  EXPECT_EQ(parse_size("2G").value(), 2ull << 30);
  EXPECT_EQ(parse_size("2g").value(), 2ull << 30);
  EXPECT_EQ(parse_size("1T").value(), 1ull << 40);
  EXPECT_EQ(parse_size("1P").value(), 1ull << 50);
  EXPECT_EQ(parse_size("15E").value(), 15ull << 60);
}

TEST(Size, RefusedWithTheAcceptedForms) {
  ASSERT_NO_FATAL_FAILURE((expect_refused_naming([](std::string_view text) { return parse_size(text); },
                                                 {"", "-1", "+4K", "M", "12Q", "1.5G", "4 K", "4KK", "4KiBB", "0x10",
                                                  "4Kib "},
                                                 "4K, 1M, 2G, 1T")));
  EXPECT_NE(parse_size("-1").error().find("negative"), std::string::npos);
  EXPECT_NE(parse_size("1.5G").error().find("whole"), std::string::npos);
}

TEST(Size, Overflow) {
  EXPECT_EQ(parse_size("18446744073709551615").value(), UINT64_MAX);
  EXPECT_FALSE(parse_size("18446744073709551616"));
  EXPECT_FALSE(parse_size("99999999999999999999"));
  EXPECT_FALSE(parse_size("16E"));
  EXPECT_FALSE(parse_size("20000000000T"));
}

enum class Digest { none, crc32c };

TEST(Enum, CaseInsensitive) {
  const auto parse = [](std::string_view t) { return parse_enum<Digest>(t, {{"none", Digest::none}, {"crc32c", Digest::crc32c}}); };
  EXPECT_EQ(parse("none").value(), Digest::none);
  EXPECT_EQ(parse("None").value(), Digest::none);
  EXPECT_EQ(parse("CRC32C").value(), Digest::crc32c);
  EXPECT_EQ(parse("CrC32c").value(), Digest::crc32c);
  auto bad = parse("foo");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "want one of none, crc32c");
  EXPECT_FALSE(parse(""));
  EXPECT_FALSE(parse("crc32"));
}

TEST(Enum, DashAndUnderscoreAlike) {
  static constexpr std::string_view names[] = {"failover", "round-robin"};
  EXPECT_EQ(parse_choice("round_robin", names).value(), 1u);
  EXPECT_EQ(parse_choice("ROUND-ROBIN", names).value(), 1u);
  EXPECT_FALSE(parse_choice("roundrobin", names));
}

TEST(Options, MessagesNameTheOptionTheValueAndWhatIsAccepted) {
  try {
    (void)log_level_option("verbos");
    FAIL();
  } catch (const BadValue& e) {
    EXPECT_STREQ(e.what(), "--log-level verbos: want one of trace, debug, info, warn, error, off");
  }
  EXPECT_EQ(log_level_option("WARN"), "warn");
  try {
    (void)enum_option<Digest>("header-digest", "foo", {{"none", Digest::none}, {"crc32c", Digest::crc32c}});
    FAIL();
  } catch (const BadValue& e) {
    EXPECT_STREQ(e.what(), "--header-digest foo: want one of none, crc32c");
  }
  EXPECT_THROW((void)duration_option("nop-timeout", "0", milliseconds(1)), BadValue);
  try {
    (void)duration_option("nop-timeout", "0", milliseconds(1), std::chrono::hours(24));
  } catch (const BadValue& e) {
    EXPECT_STREQ(e.what(), "--nop-timeout 0: want a duration from 1ms to 86400s");
  }
  EXPECT_EQ(duration_option("nop-timeout", "250ms", milliseconds(1)), milliseconds(250));
  EXPECT_EQ(size_option("offset", "1M"), 1u << 20);
  try {
    (void)size_option("offset", "");
  } catch (const BadValue& e) {
    EXPECT_NE(std::string(e.what()).find("--offset \"\": empty"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)size_option("iser-max-transfer", "1K", 4096), BadValue);
}

using iserkit::iscsi::check_chap_user;
using iserkit::iscsi::check_iscsi_name;
using iserkit::iscsi::is_valid_iscsi_name;

// (The target's export_dir.hpp serves this same function as target::is_valid_iscsi_name: its
// names are checked here, not again in export_dir_test.)
TEST(IscsiName, Formats) {
  for (const std::string& name : std::vector<std::string>{"iqn.2026-11.org.example:disk1", "iqn.2001-04.com.example",
                                                          "eui.02004567A425678D", "naa.52004567BA64678D",
                                                          "naa.52004567BA64678D52004567BA64678D",
                                                          "iqn.2026-11.o:" + std::string(223 - 14, 'a')})
    EXPECT_TRUE(is_valid_iscsi_name(name)) << name;
  EXPECT_TRUE(check_iscsi_name("iqn.2026-11.org.iserkit:target"));
  for (const std::string& name : std::vector<std::string>{"",
                                                          "iqn.2026-11.org.Example",  // not normalized
                                                          "iqn.2026-13.org.example", "iqn.26-11.org.example",
                                                          "iqn.2026-11.", "iqn.2026-11.org.example:a b",
                                                          "iqn.2026-11.org.example:a\nb", "eui.0200",
                                                          "iqn.2026-11.org.example:" + std::string(200, 'a')})
    EXPECT_FALSE(is_valid_iscsi_name(name)) << name;
}

TEST(IscsiName, RefusedWithWhyAndTheAcceptedFormats) {
  struct Case {
    std::string name;
    std::string why;
  };
  for (const auto& c : std::vector<Case>{{"my target", "no iqn., eui. or naa. prefix"},
                                         {"", "empty"},
                                         {"IQN.2026-11.org.example", "prefix is lower case"},
                                         {"iqn.2026-11.org.Example", "upper case"},
                                         {"iqn.2026-13.org.example", "month 13"},
                                         {"iqn.26-11.org.example", "date YYYY-MM"},
                                         {"iqn.2026-11.", "nothing after the date"},
                                         {"iqn.2026-11.org.example:a b", "a space"},
                                         {"iqn.2026-11.org.example:a\nb", "byte 0x0a"},
                                         {"iqn.2026-11.org.example:a_b", "'_'"},
                                         {"eui.0200", "16 hex digits"},
                                         {"eui.02004567A425678G", "16 hex digits"},
                                         {"naa.1234", "16 or 32"},
                                         {"iqn.2026-11.org.example:" + std::string(200, 'a'), "more than 223"}}) {
    auto r = check_iscsi_name(c.name);
    ASSERT_FALSE(r) << c.name;
    EXPECT_NE(r.error().find(c.why), std::string::npos) << c.name << ": " << r.error();
    EXPECT_NE(r.error().find("iqn.YYYY-MM.reversed.domain"), std::string::npos) << r.error();
    EXPECT_NE(r.error().find("eui."), std::string::npos) << r.error();
    EXPECT_NE(r.error().find("naa."), std::string::npos) << r.error();
  }
}

TEST(ChapUser, Rules) {
  EXPECT_TRUE(check_chap_user("alice"));
  EXPECT_TRUE(check_chap_user("iqn.2026-11.org.example:initiator"));
  EXPECT_TRUE(check_chap_user("Alice Smith"));
  EXPECT_TRUE(check_chap_user(std::string(255, 'a')));
  EXPECT_FALSE(check_chap_user(std::string(256, 'a')));
  EXPECT_FALSE(check_chap_user(""));
  auto r = check_chap_user(std::string("al\0ce", 5));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("byte 0x00"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("1 to 255 bytes without control characters"), std::string::npos) << r.error();
  EXPECT_FALSE(check_chap_user("a\tb"));
  EXPECT_FALSE(check_chap_user("a\x7f"));
}

}  // namespace

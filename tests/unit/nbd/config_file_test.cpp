// iserkit-nbd --config FILE (nbd_bridge/config_file.hpp): TOML keys become long options, the
// command line wins, unknown keys and wrong types are errors that name the file, line and key.
#include "nbd_bridge/config_file.hpp"

#include <gtest/gtest.h>

namespace iserkit::nbd {
namespace {

cxxopts::Options options() {
  cxxopts::Options o("iserkit-nbd", "test");
  o.add_options()("url", "URLs", cxxopts::value<std::vector<std::string>>())(
      "s,socket", "socket", cxxopts::value<std::string>())("r,read-only", "read-only")(
      "replacement-timeout", "seconds", cxxopts::value<double>()->default_value("120"))(
      "config", "file", cxxopts::value<std::string>())("h,help", "help");
  return o;
}

TEST(NbdConfigFile, KeysBecomeLongOptions) {
  auto o = options();
  const auto allowed = file_options(o, {"config", "help"});
  ASSERT_EQ(allowed.size(), 4u);
  auto args = config_arguments(R"(
url = ["iscsi://a/iqn.x:t/0", "iscsi://b/iqn.x:t/0"]
socket = "/run/v.sock"
read_only = true
replacement-timeout = 2.5
)", "v.toml", allowed, {});
  ASSERT_TRUE(args.has_value()) << args.error();
  // In key order (toml++ tables are sorted); the URLs keep the array's order.
  EXPECT_EQ(*args, (std::vector<std::string>{"--read-only", "--replacement-timeout=2.5", "--socket=/run/v.sock",
                                             "--url=iscsi://a/iqn.x:t/0", "--url=iscsi://b/iqn.x:t/0"}));
  auto integer = config_arguments("replacement-timeout = 7\nread-only = false\nurl = \"iscsi://a/t/0\"\n", "v.toml",
                                  allowed, {});
  ASSERT_TRUE(integer.has_value());
  EXPECT_EQ(*integer, (std::vector<std::string>{"--replacement-timeout=7", "--url=iscsi://a/t/0"}));
}

TEST(NbdConfigFile, CommandLineOptionsAreLeftOut) {
  auto o = options();
  auto args = config_arguments("socket = \"/a\"\nurl = \"iscsi://a/t/0\"\n", "v.toml", file_options(o, {}), {"socket"});
  ASSERT_TRUE(args.has_value());
  EXPECT_EQ(*args, (std::vector<std::string>{"--url=iscsi://a/t/0"}));
}

TEST(NbdConfigFile, BadFilesNameWhereAndWhat) {
  auto o = options();
  const auto allowed = file_options(o, {"config", "help"});
  struct Case {
    const char* text;
    const char* want;
  } cases[] = {
      {"sokcet = \"/a\"\n", "v.toml:1:1: unknown key sokcet"},
      {"config = \"other.toml\"\n", "unknown key config"},
      {"read-only = \"yes\"\n", "v.toml:1:13: read-only: expected true or false"},
      {"socket = 3.5\nsocket2 = 1\n", "unknown key socket2"},
      {"socket = [\"a\"]\n", "socket: expected a string or a number"},
      {"url = [1]\n", "url: expected an array of strings"},
      {"[socket]\npath = \"a\"\n", "socket: expected a string or a number"},
      {"url = \"unterminated\n", "v.toml:1:"},
  };
  for (const auto& c : cases) {
    auto args = config_arguments(c.text, "v.toml", allowed, {});
    ASSERT_FALSE(args.has_value()) << c.text;
    EXPECT_NE(args.error().find(c.want), std::string::npos) << c.text << " -> " << args.error();
  }
}

TEST(NbdConfigFile, ParseWithConfigFileLetsTheCommandLineWin) {
  auto o = options();
  const char* path = "/tmp/iserkit-nbd-config-test.toml";
  {
    FILE* f = std::fopen(path, "w");
    ASSERT_NE(f, nullptr);
    std::fputs("socket = \"/from/file\"\nreplacement-timeout = 3\nurl = \"iscsi://file/t/0\"\n", f);
    std::fclose(f);
  }
  const char* argv[] = {"iserkit-nbd", "--config", path, "--socket", "/from/cli"};
  auto args = parse_with_config_file(o, 5, argv);
  EXPECT_EQ(args["socket"].as<std::string>(), "/from/cli");
  EXPECT_EQ(args["replacement-timeout"].as<double>(), 3.0);
  EXPECT_EQ(args["url"].as<std::vector<std::string>>(), std::vector<std::string>{"iscsi://file/t/0"});
  std::remove(path);
  const char* missing[] = {"iserkit-nbd", "--config", "/nonexistent/iserkit.toml"};
  EXPECT_THROW(parse_with_config_file(o, 3, missing), std::runtime_error);
}

}  // namespace
}  // namespace iserkit::nbd

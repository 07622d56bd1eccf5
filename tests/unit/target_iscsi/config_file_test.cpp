// The --config TOML file (toml++): good files, bad files with clear errors, secrets never echoed.
#include "iserkit/target/config.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace iserkit::target {
namespace {

constexpr const char* good = R"(
listen = ["127.0.0.1:0", "[::1]:3261"]
block_size = 4096
threads = 2
ceph_conf = "/etc/ceph/other.conf"
ceph_id = "iscsi-gw"

[discovery]
chap_users = [{ user = "disco", secret = "discovery-secret" }]

[[targets]]
iqn = "iqn.2026-11.org.example:vol1"
alias = "vol1"
luns = ["mem:64M", "mem:1G", "rbd:rbd/vol1"]
allowed_initiators = ["iqn.2026-11.org.example:host1"]
chap_users = [{ user = "alice", secret = "alice-secret-123" }, { user = "bob", secret_env = "ISERKIT_TEST_BOB" }]
mutual = { user = "vol1", secret = "target-secret-456" }
chap_algorithms = ["SHA-256", "MD5"]

[[targets]]
iqn = "iqn.2026-11.org.example:open"
luns = ["disk.img", "other.img,uuid=9bf074cc-cb20-4476-afe9-95d0ab4e2176,serial=OLD-7"]
)";

TEST(ConfigFile, ParsesTargetsAclsAndCredentials) {
  ::setenv("ISERKIT_TEST_BOB", "bob-secret-7890", 1);
  TargetConfig base;
  base.listen.push_back({"10.0.0.1", 3260});
  auto c = parse_config_toml(good, "good.toml", base, "/srv");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->listen.size(), 3u);  // the flags' address plus the file's
  EXPECT_EQ(c->listen[2].host, "::1");
  EXPECT_EQ(c->block_size_bytes, 4096u);
  EXPECT_EQ(c->threads, 2u);
  ASSERT_EQ(c->discovery_auth.users.size(), 1u);
  EXPECT_EQ(c->discovery_auth.users[0].user, "disco");
  ASSERT_EQ(c->targets.size(), 2u);
  const auto& t = c->targets[0];
  EXPECT_EQ(t.iqn, "iqn.2026-11.org.example:vol1");
  EXPECT_EQ(t.alias, "vol1");
  ASSERT_EQ(t.luns.size(), 3u);
  EXPECT_TRUE(t.luns[1].memory);
  ASSERT_TRUE(t.luns[2].rbd);
  EXPECT_EQ(t.luns[2].rbd->image, "vol1");
  EXPECT_EQ(c->ceph_conf, "/etc/ceph/other.conf");
  EXPECT_EQ(c->ceph_id, "iscsi-gw");
  EXPECT_EQ(t.luns[1].size_bytes, 1ull << 30);
  EXPECT_EQ(t.allowed_initiators, std::vector<std::string>{"iqn.2026-11.org.example:host1"});
  ASSERT_EQ(t.auth.users.size(), 2u);
  EXPECT_EQ(t.auth.users[1].secret, "bob-secret-7890");
  ASSERT_TRUE(t.auth.mutual);
  EXPECT_EQ(t.auth.mutual->user, "vol1");
  EXPECT_EQ(t.auth.algorithms, (std::vector{iscsi::ChapAlgorithm::sha256, iscsi::ChapAlgorithm::md5}));
  EXPECT_TRUE(t.auth.required());
  const auto& open = c->targets[1];
  EXPECT_FALSE(open.auth.required());
  EXPECT_EQ(open.luns[0].path, std::filesystem::path("/srv/disk.img"));  // relative to the file
  EXPECT_TRUE(open.luns[0].identity.empty());
  // A LUN's identity options (docs/lu-identity.md), after its path.
  ASSERT_EQ(open.luns.size(), 2u);
  EXPECT_EQ(open.luns[1].path, std::filesystem::path("/srv/other.img"));
  ASSERT_TRUE(open.luns[1].identity.uuid);
  EXPECT_EQ(to_string(*open.luns[1].identity.uuid), "9bf074cc-cb20-4476-afe9-95d0ab4e2176");
  EXPECT_EQ(open.luns[1].identity.serial, "OLD-7");
}

struct Bad {
  const char* text;
  const char* expected;  // a piece of the message
};

class ConfigFileBad : public ::testing::TestWithParam<Bad> {};

TEST_P(ConfigFileBad, FailsWithAClearMessageAndNoSecret) {
  auto c = parse_config_toml(GetParam().text, "bad.toml");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find(GetParam().expected), std::string::npos) << c.error().message;
  EXPECT_EQ(c.error().message.find("s3cret-value"), std::string::npos) << c.error().message;
  EXPECT_EQ(c.error().message.rfind("bad.toml", 0), 0u) << c.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Files, ConfigFileBad,
    ::testing::Values(
        Bad{"listen = [\"127.0.0.1:0\"\n", "bad.toml:"},                                  // syntax
        Bad{"lissen = [\"127.0.0.1:0\"]\n", "unknown key \"lissen\""},
        Bad{"block_size = 1000\n", "block_size must be 512 or 4096"},
        Bad{"socket_io = \"kqueue\"\n", "socket_io must be \"auto\", \"uring\" or \"epoll\""},
        Bad{"socket_io = 1\n", "socket_io must be"},
        Bad{"listen = [\"127.0.0.1:99999\"]\n", "listen: bad address"},
        Bad{"[[targets]]\nluns = [\"mem:1M\"]\n", "\"iqn\" is missing"},
        // Names (RFC 7143 §4.2.7, §12.1.3): the shared validator, with what is accepted.
        Bad{"[[targets]]\niqn = \"my target\"\nluns = [\"mem:1M\"]\n", "no iqn., eui. or naa. prefix; want iqn.YYYY-MM"},
        Bad{"[[targets]]\niqn = \"iqn.2026-13.org.example:x\"\nluns = [\"mem:1M\"]\n", "month 13 is not 01..12"},
        Bad{"[[targets]]\niqn = \"iqn.2026-11.a:b\"\nluns = [\"mem:1M\"]\nallowed_initiators = [\"host one\"]\n",
            "allowed_initiators \"host one\": no iqn., eui. or naa. prefix"},
        Bad{"[[targets]]\niqn = \"iqn.2026-11.a:b\"\nluns = [\"mem:1M\"]\n"
            "chap_users = [{user=\"a\\tb\", secret=\"s3cret-value\"}]\n",
            "without control characters"},
        Bad{"[limits]\nlogin_timeout = \"5x\"\n", "limits.login_timeout must be seconds"},
        Bad{"[[targets]]\niqn = \"iqn.2026-11.a:b\"\n", "\"luns\" is missing"},
        Bad{"[[targets]]\niqn = \"iqn.2026-11.a:b\"\nluns = [\"mem:0\"]\n", "bad LUN"},
        Bad{"[[targets]]\niqn = \"iqn.2026-11.a:b\"\nluns = [\"mem:1M\"]\n[[targets]]\niqn = \"iqn.2026-11.a:b\"\nluns = [\"mem:1M\"]\n",
            "defined twice"},
        Bad{"[[targets]]\niqn = \"iqn.2026-11.a:b\"\nluns = [\"mem:1M\"]\nchap_user = [{user=\"a\", secret=\"s3cret-value\"}]\n",
            "unknown key \"chap_user\""},
        Bad{"[[targets]]\niqn = \"iqn.2026-11.a:b\"\nluns = [\"mem:1M\"]\nchap_users = [{secret=\"s3cret-value\"}]\n",
            "\"user\" (CHAP_N) is missing"},
        Bad{"[[targets]]\niqn = \"iqn.2026-11.a:b\"\nluns = [\"mem:1M\"]\nchap_users = [{user=\"a\"}]\n",
            "exactly one of secret"},
        Bad{"[[targets]]\niqn = \"iqn.2026-11.a:b\"\nluns = [\"mem:1M\"]\nchap_users = [{user=\"a\", secret_env=\"ISERKIT_UNSET_VAR\"}]\n",
            "ISERKIT_UNSET_VAR is not set"},
        Bad{"[[targets]]\niqn = \"iqn.2026-11.a:b\"\nluns = [\"mem:1M\"]\nchap_users = [{user=\"a\", secret=\"s3cret-value\"}]\n"
            "mutual = {user=\"t\", secret=\"s3cret-value\"}\n",
            "share a secret"},
        Bad{"[[targets]]\niqn = \"iqn.2026-11.a:b\"\nluns = [\"mem:1M\"]\nmutual = {user=\"t\", secret=\"s3cret-value\"}\n",
            "mutual needs chap_users"},
        Bad{"[[targets]]\niqn = \"iqn.2026-11.a:b\"\nluns = [\"mem:1M\"]\nchap_users = [{user=\"a\", secret=\"s3cret-value\"}]\n"
            "chap_algorithms = [\"SHA-512\"]\n",
            "unknown algorithm"},
        Bad{"[discovery]\nchap_users = \"x\"\n", "must be an array of tables"},
        Bad{"[login_throttle]\nbase_delay_ms = -1\n", "login_throttle.base_delay_ms must be an integer"},
        Bad{"[login_throttle]\nbase_delay_ms = 5000\nmax_delay_ms = 10\n", "max_delay_ms is below base_delay_ms"},
        Bad{"[login_throttle]\nfree = 3\n", "unknown key \"free\""},
        Bad{"ceph_conf = 3\n", "ceph_conf must be a path"},
        Bad{"ceph_id = \"\"\n", "ceph_id must be a client id"},
        Bad{"[[targets]]\niqn = \"iqn.2026-11.a:b\"\nluns = [\"rbd:novolume\"]\n", "bad LUN"},
        Bad{"[[targets]]\niqn = \"iqn.2026-11.a:b\"\nluns = [\"disk.img,uuid=nope\"]\n", ",uuid=UUID ,serial=TEXT ,naa=HEX"},
        Bad{"[[targets]]\niqn = \"iqn.2026-11.a:b\"\nluns = [\"mem:1M\"]\nchap_users = [{user=\"a\", secret_file=\"/nonexistent/s\"}]\n",
            "cannot read it"}));

TEST(ConfigFile, SocketIoKey) {
  // Absent: the default (auto); present: the file's word, over what the flags said.
  auto none = parse_config_toml("threads = 1\n", "a.toml");
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_EQ(none->limits.socket_io, SocketIo::automatic);
  TargetConfig flags;
  flags.limits.socket_io = SocketIo::epoll;
  auto uring = parse_config_toml("socket_io = \"uring\"\n", "b.toml", flags);
  ASSERT_TRUE(uring) << uring.error().message;
  EXPECT_EQ(uring->limits.socket_io, SocketIo::uring);
  auto kept = parse_config_toml("threads = 1\n", "c.toml", flags);
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->limits.socket_io, SocketIo::epoll);
}

TEST(ConfigFile, SecretFileAndWarnings) {
  const auto dir = std::filesystem::temp_directory_path() / ("iserkit-config-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir / "alice.secret") << "short\n";
  }
  std::filesystem::permissions(dir / "alice.secret", std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  auto c = parse_config_toml(
      "[[targets]]\niqn = \"iqn.2026-11.a:b\"\nluns = [\"mem:1M\"]\nchap_users = [{user=\"alice\", secret_file=\"alice.secret\"}]\n",
      "f.toml", {}, dir);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->targets[0].auth.users[0].secret, "short");  // line end stripped
  auto w = config_warnings(*c);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("shorter than 12 bytes"), std::string::npos);
  EXPECT_NE(w[0].find("alice"), std::string::npos);
  EXPECT_EQ(w[0].find("short\""), std::string::npos);  // names the user, not the secret
  std::filesystem::permissions(dir / "alice.secret", std::filesystem::perms::group_read, std::filesystem::perm_options::add);
  std::vector<std::string> file_warnings;
  ASSERT_TRUE(read_secret_file(dir / "alice.secret", &file_warnings));
  EXPECT_EQ(file_warnings.size(), 1u);
  std::filesystem::remove_all(dir);
}

// A secret_file without a line end (here /dev/zero, endless) is read only as far as a secret can
// reach, and refused as too long, instead of being read until memory runs out.
TEST(ConfigFile, SecretFileReadIsBounded) {
  auto secret = read_secret_file("/dev/zero");
  ASSERT_TRUE(secret) << secret.error().message;
  EXPECT_GT(secret->size(), iscsi::chap_max_secret_bytes);
  EXPECT_LE(secret->size(), iscsi::chap_max_secret_bytes + 2);
  auto c = parse_config_toml(
      "[[targets]]\niqn = \"iqn.2026-11.a:b\"\nluns = [\"mem:1M\"]\nchap_users = [{user=\"a\", secret_file=\"/dev/zero\"}]\n",
      "f.toml");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("1..255 bytes"), std::string::npos) << c.error().message;
}

// Found by fuzz_config: "block_size = 40e96" converted a float out of range to an integer inside
// toml++ (undefined behaviour, caught by UBSan). Integer settings take integers only.
TEST(ConfigFile, IntegerSettingsRefuseFloats) {
  for (const char* text : {"block_size = 40e96\n", "block_size = 4096.0\n", "threads = 1e300\n", "threads = 2.0\n"}) {
    auto c = parse_config_toml(text, "f.toml");
    EXPECT_FALSE(c) << text;
  }
  auto ok = parse_config_toml("block_size = 4096\nthreads = 2\n", "f.toml");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->block_size_bytes, 4096u);
  EXPECT_EQ(ok->threads, 2u);
}

TEST(ConfigFile, LimitsTakeDurationsAndSizesInTheProgramsGrammar) {
  auto c = parse_config_toml("[limits]\nlogin_timeout = \"500ms\"\nping_timeout = \"2m\"\nidle_interval = 1.5\n"
                             "pool_idle_cap = \"1G\"\n",
                             "d.toml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->limits.login_timeout, std::chrono::milliseconds(500));
  EXPECT_EQ(c->limits.ping_timeout, std::chrono::minutes(2));
  EXPECT_EQ(c->limits.idle_interval, std::chrono::milliseconds(1500));
  EXPECT_EQ(c->limits.pool_idle_bytes, 1ull << 30);
}

TEST(ConfigFile, MissingFileIsAnError) {
  auto c = load_config_file("/nonexistent/iserkit.toml");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("cannot read"), std::string::npos);
}

TEST(ConfigFile, LoginThrottleAndChapAlgorithmDefaults) {
  // Defaults: MD5 not accepted; throttling on.
  auto d = parse_config_toml("[[targets]]\niqn = \"iqn.2026-11.a:b\"\nluns = [\"mem:1M\"]\n"
                             "chap_users = [{user=\"a\", secret=\"0123456789abcdef\"}]\n", "d.toml");
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->targets[0].auth.algorithms, (std::vector{iscsi::ChapAlgorithm::sha256, iscsi::ChapAlgorithm::sha3_256,
                                                        iscsi::ChapAlgorithm::sha1}));
  EXPECT_EQ(d->login_throttle.free_failures, 10u);
  auto c = parse_config_toml("[login_throttle]\nfree_failures = 3\nbase_delay_ms = 250\nmax_delay_ms = 2000\n"
                             "forget_after_s = 30\nmax_addresses = 16\n", "t.toml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->login_throttle.free_failures, 3u);
  EXPECT_EQ(c->login_throttle.base_delay, std::chrono::milliseconds(250));
  EXPECT_EQ(c->login_throttle.max_delay, std::chrono::milliseconds(2000));
  EXPECT_EQ(c->login_throttle.forget_after, std::chrono::milliseconds(30000));
  EXPECT_EQ(c->login_throttle.max_addresses, 16u);
}

TEST(Config, ParsesChapAlgorithmLists) {
  EXPECT_EQ(parse_chap_algorithm_list("SHA-256,MD5").value(),
            (std::vector{iscsi::ChapAlgorithm::sha256, iscsi::ChapAlgorithm::md5}));
  EXPECT_FALSE(parse_chap_algorithm_list("SHA-256,,MD5"));
  EXPECT_FALSE(parse_chap_algorithm_list("SHA-512"));
  EXPECT_FALSE(parse_chap_algorithm_list(""));
}

}  // namespace
}  // namespace iserkit::target

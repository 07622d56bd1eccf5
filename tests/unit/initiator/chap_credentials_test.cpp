// --chap-file parsing and the permission check (like ssh's for private keys), libiscsi's
// LIBISCSI_CHAP_* variables, the precedence URL > command line > --chap-file > environment, the
// login hints and hiding a URL's secret in argv (chap_credentials.hpp).
#include "iserkit/initiator/chap_credentials.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "iserkit/common/errors.hpp"
#include "iserkit/initiator/errors.hpp"

namespace ik = iserkit::initiator;

namespace {

ik::ChapCredentials parsed(std::string_view text) {
  auto c = ik::parse_chap_file(text, "f");
  EXPECT_TRUE(c) << (c ? "" : c.error());
  return c ? *c : ik::ChapCredentials{};
}

std::string parse_error(std::string_view text) {
  auto c = ik::parse_chap_file(text, "f");
  EXPECT_FALSE(c);
  return c ? "" : c.error();
}

ik::Url url(std::string_view text) { return *ik::parse_url(text); }

}  // namespace

TEST(ChapFile, AllKeysCommentsBlanksAndQuotes) {
  const auto c = parsed("# CHAP for the lab\n\n  username = alice  \nsecret=\"a # not a comment \\\" \\\\ x\"\r\n"
                        "target_username = iqn.2026-11.org.example:t\ntarget_secret = another secret with blanks\n");
  EXPECT_EQ(c.user, "alice");
  EXPECT_EQ(c.secret, "a # not a comment \" \\ x");
  EXPECT_EQ(c.target_user, "iqn.2026-11.org.example:t");
  EXPECT_EQ(c.target_secret, "another secret with blanks");
}

TEST(ChapFile, SecretAloneIsAccepted) {
  const auto c = parsed("secret = only-the-secret-1234");
  EXPECT_FALSE(c.user);
  EXPECT_EQ(c.secret, "only-the-secret-1234");
}

TEST(ChapFile, ErrorsNameTheLineAndNeverTheValue) {
  EXPECT_EQ(parse_error("username = a\nnonsense\n"),
            "f:2: expected `key = value` (keys: username, secret, target_username, target_secret)");
  EXPECT_EQ(parse_error("password = hunter2-hunter2\n"),
            "f:1: unknown key `password` (keys: username, secret, target_username, target_secret)");
  EXPECT_EQ(parse_error("secret = s3cr3t-value-1\nsecret = s3cr3t-value-2\n"), "f:2: secret is set twice");
  EXPECT_EQ(parse_error("username =\n"), "f:1: username is empty");
  EXPECT_EQ(parse_error("secret = \"open-quote\n"), "f:1: secret: unterminated quoted value");
  EXPECT_EQ(parse_error("secret = \"x\" trailing\n"), "f:1: secret: text after the closing quote");
  EXPECT_EQ(parse_error("secret = \"bad \\n escape\"\n"),
            "f:1: secret: unknown escape in a quoted value (only \\\\ and \\\" are allowed)");
  EXPECT_EQ(parse_error("secret = a\x01" "b\n"), "f:1: secret: control character in the value");
  EXPECT_EQ(parse_error("secret = " + std::string(256, 'x') + "\n"), "f:1: secret is longer than 255 bytes");
  EXPECT_EQ(parse_error("# nothing\n\n"), "f: sets nothing (keys: username, secret, target_username, target_secret)");
  for (const auto& e : {parse_error("secret = s3cr3t-value-1\nsecret = s3cr3t-value-2\n"), parse_error("secret = \"x\" trailing\n")})
    EXPECT_EQ(e.find("s3cr3t"), std::string::npos) << e;
}

TEST(ChapFilePermissions, OwnerOnlyIsAcceptedLikeSsh) {
  EXPECT_FALSE(ik::secret_file_problem("p", S_IFREG | 0600, 1000, 1000));
  EXPECT_FALSE(ik::secret_file_problem("p", S_IFREG | 0400, 1000, 1000));
  EXPECT_FALSE(ik::secret_file_problem("p", S_IFREG | 0600, 0, 1000));  // root's file
  EXPECT_EQ(*ik::secret_file_problem("/e/c", S_IFREG | 0644, 1000, 1000),
            "/e/c: permissions 0644 are too open: a CHAP secrets file must be readable by its owner only (chmod 600 /e/c)");
  EXPECT_TRUE(ik::secret_file_problem("p", S_IFREG | 0640, 1000, 1000));
  EXPECT_TRUE(ik::secret_file_problem("p", S_IFREG | 0602, 1000, 1000));
  EXPECT_TRUE(ik::secret_file_problem("p", S_IFREG | 0610, 1000, 1000));  // group execute is access too
  EXPECT_EQ(*ik::secret_file_problem("p", S_IFREG | 0600, 1001, 1000),
            "p: owned by uid 1001, not by uid 1000 or root: refusing to use it (chown it)");
  EXPECT_EQ(*ik::secret_file_problem("p", S_IFIFO | 0600, 1000, 1000), "p: not a regular file (a CHAP secrets file must be one)");
}

class ChapFileOnDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/iserkit-chap-unit.XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  void write(const std::string& text, mode_t mode) {
    path_ = dir_ + "/chap";
    std::ofstream(path_) << text;
    ASSERT_EQ(::chmod(path_.c_str(), mode), 0);
  }
  std::string dir_;
  std::string path_;
};

TEST_F(ChapFileOnDisk, ReadsAFileOfMode0600) {
  write("username = alice\nsecret = alice-secret-1234\n", 0600);
  auto c = ik::read_chap_file(path_);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->user, "alice");
  EXPECT_EQ(c->secret, "alice-secret-1234");
}

TEST_F(ChapFileOnDisk, RefusesAFileOthersCanRead) {
  write("username = alice\nsecret = alice-secret-1234\n", 0644);
  auto c = ik::read_chap_file(path_);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().find("permissions 0644 are too open"), std::string::npos) << c.error();
  EXPECT_NE(c.error().find("chmod 600 " + path_), std::string::npos) << c.error();
  EXPECT_EQ(c.error().find("alice-secret"), std::string::npos);
}

TEST_F(ChapFileOnDisk, MissingFileAndParseErrorsNameThePath) {
  auto missing = ik::read_chap_file(dir_ + "/nope");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error(), dir_ + "/nope: cannot open: No such file or directory");
  write("user = alice\n", 0600);
  auto bad = ik::read_chap_file(path_);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().rfind(path_ + ":1: unknown key `user`", 0), 0u) << bad.error();
}

TEST(ChapEnvironment, LibiscsiNamesFirstThenTheOlderOnes) {
  ::setenv("LIBISCSI_CHAP_USERNAME", "envuser", 1);
  ::setenv("LIBISCSI_CHAP_PASSWORD", "env-secret-0001", 1);
  ::setenv("LIBISCSI_CHAP_TARGET_USERNAME", "envtarget", 1);
  ::setenv("ISERKIT_CHAP_TARGET_SECRET", "old-target-secret-1", 1);
  ::setenv("ISERKIT_CHAP_SECRET", "old-secret-0001", 1);
  auto c = ik::chap_from_environment();
  EXPECT_EQ(c.user, "envuser");
  EXPECT_EQ(c.secret, "env-secret-0001");
  EXPECT_EQ(c.target_user, "envtarget");
  EXPECT_EQ(c.target_secret, "old-target-secret-1");
  ::setenv("LIBISCSI_CHAP_TARGET_PASSWORD", "", 1);  // empty = unset
  EXPECT_EQ(ik::chap_from_environment().target_secret, "old-target-secret-1");
  ik::clear_chap_environment();
  EXPECT_EQ(std::getenv("LIBISCSI_CHAP_PASSWORD"), nullptr);
  EXPECT_EQ(std::getenv("ISERKIT_CHAP_SECRET"), nullptr);
  EXPECT_EQ(ik::chap_from_environment(), ik::ChapCredentials{});
}

TEST(ChapResolve, UrlThenCommandLineThenFileThenEnvironment) {
  ik::ChapSources s;
  s.environment = {.user = "env", .secret = "env-secret-0001", .target_user = "te", .target_secret = "env-target-0001"};
  s.file = {.user = "file", .secret = "file-secret-001", .target_user = "tf", .target_secret = "file-target-001"};
  s.command_line = {.user = std::nullopt, .secret = std::nullopt, .target_user = "tc", .target_secret = std::nullopt};
  auto r = ik::resolve_chap(url("iscsi://h/iqn.x:y/0"), s, {});
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->user, "file");
  EXPECT_EQ(r->secret, "file-secret-001");
  EXPECT_EQ(r->target_user, "tc");
  EXPECT_EQ(r->target_secret, "file-target-001");
  // The URL's user wins; the file's secret belongs to another user, so the environment's... neither
  // does it: no secret for the URL's user.
  auto other = ik::resolve_chap(url("iscsi://bob@h/iqn.x:y/0"), s, {});
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error(), "CHAP user 'bob' has no secret: put `secret = ...` in a --chap-file (mode 0600) or set "
                           "LIBISCSI_CHAP_PASSWORD (the --chap-file's secret is for user 'file')");
  // The URL's secret wins over every other source.
  auto u = ik::resolve_chap(url("iscsi://bob%url-secret-0001@h/iqn.x:y/0"), s, {});
  ASSERT_TRUE(u) << u.error();
  EXPECT_EQ(u->user, "bob");
  EXPECT_EQ(u->secret, "url-secret-0001");
  // A secret without a user name in its source serves the URL's user (libiscsi: user in the URL,
  // password in LIBISCSI_CHAP_PASSWORD).
  ik::ChapSources env_only;
  env_only.environment.secret = "env-secret-0001";
  auto e = ik::resolve_chap(url("iscsi://alice@h/iqn.x:y/0"), env_only, {});
  ASSERT_TRUE(e) << e.error();
  EXPECT_EQ(e->user, "alice");
  EXPECT_EQ(e->secret, "env-secret-0001");
  EXPECT_FALSE(e->mutual());
}

TEST(ChapResolve, KeepsTheAlgorithmsOfTheBase) {
  ik::ChapOptions base;
  base.algorithms = {iserkit::iscsi::ChapAlgorithm::md5};
  ik::ChapSources s;
  s.file = {.user = "a", .secret = "file-secret-001", .target_user = std::nullopt, .target_secret = std::nullopt};
  auto r = ik::resolve_chap(url("iscsi://h/iqn.x:y/0"), s, base);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->algorithms, base.algorithms);
}

TEST(ChapResolve, NothingMeansNoChap) {
  auto r = ik::resolve_chap(url("iscsi://h/iqn.x:y/0"), {}, {});
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->enabled());
  // The environment alone with a password but no user is ignored, as libiscsi ignores it.
  ik::ChapSources s;
  s.environment = {.user = std::nullopt, .secret = "env-secret-0001", .target_user = std::nullopt,
                   .target_secret = "env-target-0001"};
  auto e = ik::resolve_chap(url("iscsi://h/iqn.x:y/0"), s, {});
  ASSERT_TRUE(e);
  EXPECT_FALSE(e->enabled());
  EXPECT_FALSE(e->mutual());
}

TEST(ChapResolve, ClearErrorsForWhatIsMissing) {
  const auto err = [](const ik::ChapSources& s, std::string_view u = "iscsi://h/iqn.x:y/0") {
    auto r = ik::resolve_chap(url(u), s, {});
    return r ? std::string("(accepted)") : r.error();
  };
  ik::ChapSources user_only;
  user_only.file.user = "alice";
  EXPECT_EQ(err(user_only), "CHAP user 'alice' has no secret: put `secret = ...` in a --chap-file (mode 0600) or set "
                            "LIBISCSI_CHAP_PASSWORD");
  EXPECT_EQ(err({}, "iscsi://alice@h/iqn.x:y/0"), err(user_only));
  ik::ChapSources secret_only;
  secret_only.file.secret = "file-secret-001";
  EXPECT_EQ(err(secret_only), "a CHAP secret was given without a user name: add `username = ...` to the --chap-file, "
                              "put USER@ in the URL, or set LIBISCSI_CHAP_USERNAME");
  ik::ChapSources mutual_only;
  mutual_only.file.target_secret = "file-target-001";
  EXPECT_EQ(err(mutual_only).rfind("mutual CHAP (target_username/target_secret) needs one-way CHAP first", 0), 0u);
  ik::ChapSources no_target_secret;
  no_target_secret.file = {.user = "a", .secret = "file-secret-001", .target_user = "t", .target_secret = std::nullopt};
  EXPECT_EQ(err(no_target_secret).rfind("target_username is set but target_secret is not", 0), 0u);
  ik::ChapSources same;
  same.file = {.user = "a", .secret = "same-secret-0001", .target_user = std::nullopt, .target_secret = "same-secret-0001"};
  EXPECT_EQ(err(same).rfind("the CHAP secret and the target's secret are the same", 0), 0u);
  ik::ChapSources too_long;
  too_long.command_line = {.user = "a", .secret = std::string(256, 'x'), .target_user = std::nullopt, .target_secret = std::nullopt};
  EXPECT_EQ(err(too_long), "a CHAP secret is longer than 255 bytes");
}

TEST(ChapLoginHint, SaysWhatToDo) {
  ik::ChapOptions none;
  const auto auth_failure = ik::make_login_error(2, 1);
  EXPECT_NE(ik::chap_login_hint(auth_failure, none).find("the target requires CHAP authentication"), std::string::npos);
  ik::ChapOptions alice;
  alice.user = "alice";
  alice.secret = "alice-secret-1234";
  EXPECT_EQ(ik::chap_login_hint(auth_failure, alice),
            "the target refused CHAP user 'alice': check the user name and the secret (--chap-file, "
            "LIBISCSI_CHAP_PASSWORD or the URL)");
  alice.target_secret = "target-secret-5678";
  EXPECT_NE(ik::chap_login_hint(make_error_code(iserkit::errc::authentication_failed), alice).find("mutual CHAP"),
            std::string::npos);
  EXPECT_EQ(ik::chap_login_hint(ik::make_login_error(2, 2), alice), "");  // authorization: not CHAP
  EXPECT_EQ(ik::chap_login_hint(make_error_code(iserkit::errc::timeout), alice), "");
}

TEST(HideUrlSecret, OverwritesThePasswordInPlace) {
  std::string a = "iscsi://alice%s3cret@host:3260/iqn.x:y/0";
  EXPECT_TRUE(ik::hide_url_secret(a.data()));
  EXPECT_EQ(a, "iscsi://alice%******@host:3260/iqn.x:y/0");
  std::string b = "iser://u%p@[::1]/iqn.x:y/0";
  EXPECT_TRUE(ik::hide_url_secret(b.data()));
  EXPECT_EQ(b, "iser://u%*@[::1]/iqn.x:y/0");
  for (std::string c : {"iscsi://alice@host/iqn.x:y/0", "iscsi://host/iqn.x%y@z/0", "--offset=5", "http://u%p@h/",
                        "iscsi://alice%@host/"}) {
    const std::string before = c;
    EXPECT_FALSE(ik::hide_url_secret(c.data())) << before;
    EXPECT_EQ(c, before);
  }
  EXPECT_FALSE(ik::hide_url_secret(nullptr));
}

// What every front end runs before resolving CHAP: URL secrets hidden in argv (reported once
// each), the file read, the environment taken and, when asked, cleared.
TEST(GatherChapSources, HidesUrlSecretsReadsTheEnvironmentAndClearsItWhenAsked) {
  std::string program = "iserkit-nbd";
  std::string url = "iscsi://alice%s3cret@host/iqn.x:y/0";
  std::string plain = "--threads=2";
  std::vector<char*> argv{program.data(), url.data(), plain.data()};
  ::setenv("LIBISCSI_CHAP_USERNAME", "envuser", 1);
  ::setenv("LIBISCSI_CHAP_PASSWORD", "env-secret-0002", 1);
  int warned = 0;
  auto kept = ik::gather_chap_sources(static_cast<int>(argv.size()), argv.data(), std::nullopt, [&] { ++warned; },
                                      /*clear_environment=*/false);
  ASSERT_TRUE(kept) << kept.error();
  EXPECT_EQ(warned, 1);
  EXPECT_EQ(url, "iscsi://alice%******@host/iqn.x:y/0");
  EXPECT_EQ(kept->environment.user, std::optional<std::string>("envuser"));
  EXPECT_FALSE(kept->file.user);
  EXPECT_NE(::getenv("LIBISCSI_CHAP_PASSWORD"), nullptr) << "not cleared unless asked";
  auto cleared = ik::gather_chap_sources(static_cast<int>(argv.size()), argv.data(), std::nullopt, nullptr,
                                         /*clear_environment=*/true);
  ASSERT_TRUE(cleared);
  EXPECT_EQ(cleared->environment.secret, std::optional<std::string>("env-secret-0002"));
  EXPECT_EQ(::getenv("LIBISCSI_CHAP_USERNAME"), nullptr);
  EXPECT_EQ(::getenv("LIBISCSI_CHAP_PASSWORD"), nullptr);
  auto missing = ik::gather_chap_sources(1, argv.data(), std::string("/nonexistent/chap.conf"), nullptr, true);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("/nonexistent/chap.conf"), std::string::npos) << missing.error();
}

// A daemon's one set of credentials for all its URLs (iserkit-nbd's paths, iserkit-fuse's
// portals): every URL must resolve to the same user and secret; errors name the program.
TEST(DaemonChap, EveryUrlMustGiveTheSameUserAndSecret) {
  std::string program = "iserkit-nbd";
  std::vector<char*> argv{program.data()};
  const int argc = static_cast<int>(argv.size());
  auto same = ik::daemon_chap("iserkit-nbd", argc, argv.data(), std::nullopt,
                              {url("iscsi://alice%alice-secret-01@h1/iqn.x:y/0"),
                               url("iscsi://alice%alice-secret-01@h2/iqn.x:y/0")},
                              {});
  ASSERT_TRUE(same) << same.error();
  EXPECT_EQ(same->user, "alice");
  EXPECT_EQ(same->secret, "alice-secret-01");
  auto other = ik::daemon_chap("iserkit-fuse", argc, argv.data(), std::nullopt,
                               {url("iscsi://alice%alice-secret-01@h1/iqn.x:y/0"),
                                url("iscsi://bob%bob-secret-0001@h2/iqn.x:y/0")},
                               {});
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().rfind("iserkit-fuse: the URLs name different CHAP users or secrets", 0), 0u) << other.error();
  auto missing = ik::daemon_chap("iserkit-nbd", argc, argv.data(), std::string("/nonexistent/chap.conf"),
                                 {url("iscsi://h1/iqn.x:y/0")}, {});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().rfind("iserkit-nbd: --chap-file: ", 0), 0u) << missing.error();
}

// CHAP credentials for the front ends: --chap-file parsing and its permission check, libiscsi's
// environment variables, and the precedence between them and the URL (RFC 7143 §12.1.3).
#include "iserkit/initiator/chap_credentials.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "iserkit/common/errors.hpp"
#include "iserkit/initiator/errors.hpp"
#include "iserkit/iscsi/chap.hpp"

namespace iserkit::initiator {
namespace {

constexpr const char* env_user = "LIBISCSI_CHAP_USERNAME";
constexpr const char* env_secret = "LIBISCSI_CHAP_PASSWORD";
constexpr const char* env_target_user = "LIBISCSI_CHAP_TARGET_USERNAME";
constexpr const char* env_target_secret = "LIBISCSI_CHAP_TARGET_PASSWORD";
constexpr const char* env_old_secret = "ISERKIT_CHAP_SECRET";
constexpr const char* env_old_target_secret = "ISERKIT_CHAP_TARGET_SECRET";

// Where a secret may go, for the messages.
constexpr const char* where_secret =
    "put `secret = ...` in a --chap-file (mode 0600) or set LIBISCSI_CHAP_PASSWORD";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

// An unquoted value, or a double-quoted one with \\ and \" decoded; nullopt with `why` set.
std::optional<std::string> value_of(std::string_view raw, std::string& why) {
  if (raw.empty() || raw.front() != '"') return std::string(raw);
  std::string out;
  std::size_t i = 1;
  for (; i < raw.size() && raw[i] != '"'; ++i) {
    if (raw[i] == '\\') {
      if (i + 1 >= raw.size() || (raw[i + 1] != '\\' && raw[i + 1] != '"')) {
        why = "unknown escape in a quoted value (only \\\\ and \\\" are allowed)";
        return std::nullopt;
      }
      ++i;
    }
    out += raw[i];
  }
  if (i >= raw.size()) {
    why = "unterminated quoted value";
    return std::nullopt;
  }
  if (i + 1 != raw.size()) {
    why = "text after the closing quote";
    return std::nullopt;
  }
  return out;
}

}  // namespace

tl::expected<ChapCredentials, std::string> parse_chap_file(std::string_view text, std::string_view source) {
  ChapCredentials c;
  bool any = false;
  std::size_t line_number = 0;
  while (!text.empty()) {
    ++line_number;
    const auto eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    const auto at = [&](const std::string& what) {
      return tl::unexpected(std::string(source) + ":" + std::to_string(line_number) + ": " + what);
    };
    line = trim(line);
    if (line.empty() || line.front() == '#') continue;
    const auto eq = line.find('=');
    if (eq == std::string_view::npos) return at("expected `key = value` (keys: username, secret, target_username, target_secret)");
    const std::string_view key = trim(line.substr(0, eq));
    std::string why;
    auto value = value_of(trim(line.substr(eq + 1)), why);
    if (!value) return at(std::string(key) + ": " + why);
    std::optional<std::string>* field = nullptr;
    if (key == "username") field = &c.user;
    else if (key == "secret") field = &c.secret;
    else if (key == "target_username") field = &c.target_user;
    else if (key == "target_secret") field = &c.target_secret;
    else return at("unknown key `" + std::string(key) + "` (keys: username, secret, target_username, target_secret)");
    if (field->has_value()) return at(std::string(key) + " is set twice");
    if (value->empty()) return at(std::string(key) + " is empty");
    for (char ch : *value) {
      if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) return at(std::string(key) + ": control character in the value");
    }
    const bool is_secret = key == "secret" || key == "target_secret";
    if (is_secret && value->size() > iscsi::chap_max_secret_bytes)
      return at(std::string(key) + " is longer than " + std::to_string(iscsi::chap_max_secret_bytes) + " bytes");
    *field = std::move(*value);
    any = true;
  }
  if (!any) return tl::unexpected(std::string(source) + ": sets nothing (keys: username, secret, target_username, target_secret)");
  return c;
}

std::optional<std::string> secret_file_problem(std::string_view path, mode_t mode, uid_t owner, uid_t euid) {
  const std::string p(path);
  if (!S_ISREG(mode)) return p + ": not a regular file (a CHAP secrets file must be one)";
  if (owner != euid && owner != 0)
    return p + ": owned by uid " + std::to_string(owner) + ", not by uid " + std::to_string(euid) +
           " or root: refusing to use it (chown it)";
  if ((mode & 077) != 0) {
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", static_cast<unsigned>(mode & 07777));
    return p + ": permissions " + octal +
           " are too open: a CHAP secrets file must be readable by its owner only (chmod 600 " + p + ")";
  }
  return std::nullopt;
}

tl::expected<ChapCredentials, std::string> read_chap_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return tl::unexpected(path + ": cannot open: " + std::strerror(errno));
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return tl::unexpected(path + ": cannot stat: " + std::strerror(e));
  }
  if (auto problem = secret_file_problem(path, st.st_mode, st.st_uid, ::geteuid())) {
    ::close(fd);
    return tl::unexpected(*problem);
  }
  if (static_cast<std::uint64_t>(st.st_size) > chap_file_max_bytes) {
    ::close(fd);
    return tl::unexpected(path + ": larger than " + std::to_string(chap_file_max_bytes) + " bytes");
  }
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t r = ::read(fd, text.data() + got, text.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<std::size_t>(r);
  }
  ::close(fd);
  text.resize(got);
  auto parsed = parse_chap_file(text, path);
  // The text held secrets: clear it before the memory goes back to the allocator.
  std::fill(text.begin(), text.end(), '\0');
  return parsed;
}

ChapCredentials chap_from_environment() {
  ChapCredentials c;
  c.user = env(env_user);
  c.secret = env(env_secret);
  if (!c.secret) c.secret = env(env_old_secret);
  c.target_user = env(env_target_user);
  c.target_secret = env(env_target_secret);
  if (!c.target_secret) c.target_secret = env(env_old_target_secret);
  return c;
}

void clear_chap_environment() {
  for (const char* name : {env_user, env_secret, env_target_user, env_target_secret, env_old_secret, env_old_target_secret})
    ::unsetenv(name);
}

tl::expected<ChapSources, std::string> gather_chap_sources(int argc, char** argv,
                                                           const std::optional<std::string>& chap_file,
                                                           const std::function<void()>& on_url_secret,
                                                           bool clear_environment) {
  // The URLs were copied by the option parser: hide their secrets from ps and /proc/PID/cmdline.
  for (int i = 1; i < argc; ++i) {
    if (hide_url_secret(argv[i]) && on_url_secret) on_url_secret();
  }
  ChapSources sources;
  if (chap_file) {
    auto file = read_chap_file(*chap_file);
    if (!file) return tl::unexpected(file.error());
    sources.file = std::move(*file);
  }
  sources.environment = chap_from_environment();
  if (clear_environment) clear_chap_environment();
  return sources;
}

tl::expected<ChapOptions, std::string> resolve_chap(const Url& url, const ChapSources& sources, ChapOptions base) {
  const ChapCredentials* ordered[] = {&sources.command_line, &sources.file, &sources.environment};
  // The user: URL, command line, file, environment.
  std::string user = url.user;
  for (const auto* s : ordered) {
    if (user.empty() && s->user) user = *s->user;
  }
  // Our secret: the first source whose secret belongs to that user (names none or the same one).
  std::optional<std::string> secret;
  if (!url.password.empty()) secret = url.password;
  for (const auto* s : ordered) {
    if (secret || !s->secret) continue;
    if (!s->user || *s->user == user) secret = *s->secret;
  }
  std::optional<std::string> target_user;
  std::optional<std::string> target_secret;
  for (const auto* s : ordered) {
    if (!target_user && s->target_user) target_user = *s->target_user;
    if (!target_secret && s->target_secret) target_secret = *s->target_secret;
  }
  // What the environment alone sets without the rest is ignored, as libiscsi ignores it.
  const bool explicit_secret = !url.password.empty() || sources.command_line.secret || sources.file.secret;
  const bool explicit_mutual = sources.command_line.target_user || sources.command_line.target_secret ||
                               sources.file.target_user || sources.file.target_secret;
  if (user.empty()) {
    if (explicit_secret)
      return tl::unexpected(std::string("a CHAP secret was given without a user name: add `username = ...` to the "
                                        "--chap-file, put USER@ in the URL, or set LIBISCSI_CHAP_USERNAME"));
    if (explicit_mutual)
      return tl::unexpected(std::string("mutual CHAP (target_username/target_secret) needs one-way CHAP first: give a "
                                        "user and a secret (--chap-file with username and secret)"));
    base.user.clear();
    base.secret.clear();
    base.target_user.clear();
    base.target_secret.clear();
    return base;
  }
  if (!secret) {
    std::string why = "CHAP user '" + user + "' has no secret: " + where_secret;
    for (const auto* s : ordered) {
      if (s->secret && s->user && *s->user != user) {
        why += " (the ";
        why += s == &sources.file ? "--chap-file's" : s == &sources.environment ? "environment's" : "command line's";
        why += " secret is for user '" + *s->user + "')";
        break;
      }
    }
    return tl::unexpected(why);
  }
  if (secret->size() > iscsi::chap_max_secret_bytes || (target_secret && target_secret->size() > iscsi::chap_max_secret_bytes))
    return tl::unexpected("a CHAP secret is longer than " + std::to_string(iscsi::chap_max_secret_bytes) + " bytes");
  if (target_user && !target_secret) {
    if (explicit_mutual)
      return tl::unexpected(std::string("target_username is set but target_secret is not: mutual CHAP needs the "
                                        "target's secret (target_secret in the --chap-file or "
                                        "LIBISCSI_CHAP_TARGET_PASSWORD)"));
    target_user.reset();
  }
  // RFC 7143 §12.1.3: the same secret must not authenticate both the initiator and the target.
  if (target_secret && *target_secret == *secret)
    return tl::unexpected(std::string("the CHAP secret and the target's secret are the same: RFC 7143 §12.1.3 requires "
                                      "different secrets for the two directions"));
  base.user = user;
  base.secret = *secret;
  base.target_user = target_user.value_or(std::string());
  base.target_secret = target_secret.value_or(std::string());
  return base;
}

tl::expected<ChapOptions, std::string> daemon_chap(std::string_view program, int argc, char** argv,
                                                   const std::optional<std::string>& chap_file,
                                                   const std::vector<Url>& urls, ChapOptions base) {
  const std::string prefix = std::string(program) + ": ";
  auto sources = gather_chap_sources(
      argc, argv, chap_file,
      [&] {
        std::cerr << prefix << "warning: a URL holds a CHAP secret, which other users could see in ps; use "
                               "--chap-file or LIBISCSI_CHAP_PASSWORD\n";
      },
      /*clear_environment=*/true);
  if (!sources) return tl::unexpected(prefix + "--chap-file: " + sources.error());
  for (std::size_t i = 0; i < urls.size(); ++i) {
    auto resolved = resolve_chap(urls[i], *sources, base);
    if (!resolved) return tl::unexpected(prefix + resolved.error());
    if (i > 0 && (resolved->user != base.user || resolved->secret != base.secret))
      return tl::unexpected(prefix + "the URLs name different CHAP users or secrets; one set of credentials serves "
                                     "every URL");
    base = std::move(*resolved);
  }
  return base;
}

std::string chap_login_hint(std::error_code ec, const ChapOptions& chap) {
  // RFC 7143 §11.13.5: status 0x0201 = Authentication failure.
  if (ec.category() == login_status_category() && ec.value() == 0x0201) {
    if (!chap.enabled())
      return "the target requires CHAP authentication: give a user and a secret (--chap-file FILE with "
             "`username = ...` and `secret = ...`, mode 0600, or LIBISCSI_CHAP_USERNAME and LIBISCSI_CHAP_PASSWORD)";
    return "the target refused CHAP user '" + chap.user +
           "': check the user name and the secret (--chap-file, LIBISCSI_CHAP_PASSWORD or the URL)";
  }
  if (ec == errc::authentication_failed && chap.mutual())
    return "the target failed mutual CHAP: its name or answer does not match target_username/target_secret";
  return {};
}

bool hide_url_secret(char* argument) noexcept {
  if (argument == nullptr) return false;
  const std::string_view text(argument);
  const auto scheme = text.find("://");
  if (scheme == std::string_view::npos) return false;
  const std::string_view prefix = text.substr(0, scheme);
  if (prefix != "iscsi" && prefix != "iser") return false;
  const auto slash = text.find('/', scheme + 3);
  const auto at = text.rfind('@', slash == std::string_view::npos ? text.size() : slash);
  if (at == std::string_view::npos || at < scheme + 3) return false;
  const auto pct = text.find('%', scheme + 3);
  if (pct == std::string_view::npos || pct > at || pct + 1 == at) return false;
  std::memset(argument + pct + 1, '*', at - pct - 1);
  return true;
}

}  // namespace iserkit::initiator

// Where the front ends (iserkit, iserkit-nbd, iserkit-fuse) find CHAP credentials without a
// secret on the command line (RFC 7143 §12.1.3): a --chap-file the owner alone may read, and
// libiscsi's environment variables (LIBISCSI_CHAP_USERNAME, LIBISCSI_CHAP_PASSWORD,
// LIBISCSI_CHAP_TARGET_USERNAME, LIBISCSI_CHAP_TARGET_PASSWORD). Precedence, highest first (each
// field from the first source that sets it): the URL (iscsi://USER[%SECRET]@…) > the command
// line's --chap-user/--secret-file/--target-user/--target-secret-file > --chap-file > the
// environment. Messages never contain a secret. Layer 6 (public API).
//
// --chap-file format: UTF-8 text, one `key = value` per line; blank lines and lines starting with
// '#' are ignored. Keys: username, secret, target_username, target_secret (the last two: mutual
// CHAP). A value is everything after '=' with the surrounding blanks removed, or a double-quoted
// string (`\\` and `\"` are the only escapes), so a file of quoted values is also valid TOML.
//   username = alice
//   secret = "correct horse battery"
//   target_username = iqn.2026-11.org.example:storage
//   target_secret = another-long-secret
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <tl/expected.hpp>

#include "iserkit/initiator/options.hpp"
#include "iserkit/initiator/url.hpp"

namespace iserkit::initiator {

/// CHAP credentials from one source; a field the source does not set is nullopt.
struct ChapCredentials {
  std::optional<std::string> user;           ///< CHAP_N we send ("username")
  std::optional<std::string> secret;         ///< our secret, 1..255 bytes ("secret")
  std::optional<std::string> target_user;    ///< mutual CHAP: the CHAP_N the target must send ("target_username")
  std::optional<std::string> target_secret;  ///< mutual CHAP: the target's secret ("target_secret")
  friend bool operator==(const ChapCredentials&, const ChapCredentials&) = default;
};

/// The largest --chap-file read (bytes); a bigger file is refused.
inline constexpr std::size_t chap_file_max_bytes = 65536;

/// Parses --chap-file text (format in the file comment). `source` names the file in messages.
/// Returns the credentials, or a message "SOURCE:LINE: what" for: a line without '=', an unknown
/// or repeated key, an empty value, an unterminated quote or text after it, a control character, a
/// secret over 255 bytes, or a file that sets nothing. Values are never quoted in messages.
tl::expected<ChapCredentials, std::string> parse_chap_file(std::string_view text, std::string_view source);

/// Why a secrets file with this mode and owner must not be used, or nullopt when it may:
/// the file must be a regular file owned by `euid` or root with no group/other permission bits
/// (as ssh requires of private keys). `path` only names the file in the message, which says what to
/// do ("chmod 600 PATH").
std::optional<std::string> secret_file_problem(std::string_view path, mode_t mode, uid_t owner, uid_t euid);

/// Reads and parses a --chap-file after checking it with secret_file_problem() (on the open
/// descriptor, so the file checked is the file read). Errors: a message naming `path` (cannot
/// open, too open, larger than chap_file_max_bytes, or parse_chap_file()'s message).
tl::expected<ChapCredentials, std::string> read_chap_file(const std::string& path);

/// libiscsi's variables LIBISCSI_CHAP_USERNAME, LIBISCSI_CHAP_PASSWORD, LIBISCSI_CHAP_TARGET_USERNAME,
/// LIBISCSI_CHAP_TARGET_PASSWORD; ISERKIT_CHAP_SECRET and ISERKIT_CHAP_TARGET_SECRET (older names)
/// stand for the two passwords when libiscsi's are not set. Empty values count as unset.
ChapCredentials chap_from_environment();

/// Removes the variables chap_from_environment() reads from this process's environment, so
/// children (iserkit-nbd --run) do not inherit the secrets.
void clear_chap_environment();

/// The credentials of every source a front end has (see the file comment for the precedence).
struct ChapSources {
  ChapCredentials command_line;  ///< --chap-user, --secret-file, --target-user, --target-secret-file
  ChapCredentials file;          ///< --chap-file
  ChapCredentials environment;   ///< chap_from_environment()
};

/// What every front end does with its command line and environment before it resolves CHAP:
/// hides each URL secret in argv[1..argc) from ps and /proc/PID/cmdline (hide_url_secret();
/// `on_url_secret` is called once for each argument that held one, e.g. to warn), reads
/// `chap_file` when given (read_chap_file()), takes the LIBISCSI_CHAP_* variables
/// (chap_from_environment()) and, with `clear_environment`, removes them (clear_chap_environment()).
/// The command-line source is left empty for the caller. Errors: read_chap_file()'s message.
tl::expected<ChapSources, std::string> gather_chap_sources(int argc, char** argv,
                                                           const std::optional<std::string>& chap_file,
                                                           const std::function<void()>& on_url_secret,
                                                           bool clear_environment);

/// Merges `sources` with the URL's user and password into `base` (whose algorithms are kept).
/// A secret is taken from the first source that has one and either names no user or names the
/// chosen user. A lone secret or mutual setting in the environment is ignored (libiscsi does the
/// same); elsewhere it is an error.
/// Returns the options, or a message saying what is missing and where to put it: a user without a
/// secret, a secret without a user, mutual CHAP without one-way CHAP, target_username without
/// target_secret, a secret over 255 bytes, or the same secret for both directions (RFC 7143
/// §12.1.3 forbids it). Without any user the result has CHAP off (AuthMethod=None).
tl::expected<ChapOptions, std::string> resolve_chap(const Url& url, const ChapSources& sources, ChapOptions base);

/// The one set of CHAP credentials of a daemon that logs in to every URL of `urls` with it
/// (iserkit-nbd's paths, iserkit-fuse's portals) and is named `program`: gather_chap_sources()
/// with `chap_file`, a warning on stderr for a URL that holds a secret ("PROGRAM: warning: …") and
/// the environment's variables removed, then resolve_chap() for each URL, all of which must give
/// the same user and secret. Errors: a message for stderr that starts with "PROGRAM: ".
tl::expected<ChapOptions, std::string> daemon_chap(std::string_view program, int argc, char** argv,
                                                   const std::optional<std::string>& chap_file,
                                                   const std::vector<Url>& urls, ChapOptions base);

/// For a login error `ec`: a sentence telling the user what to do about CHAP, or "" when the error
/// has nothing to do with it. Login status 0x0201 (RFC 7143 §11.13.5) without a CHAP user means the
/// target wants CHAP; with one, that it refused the user or secret; errc::authentication_failed
/// with mutual CHAP means the target's answer did not match target_username/target_secret.
std::string chap_login_hint(std::error_code ec, const ChapOptions& chap);

/// Overwrites the password of an iscsi:// or iser:// URL argument in place with '*' (same length),
/// so /proc/PID/cmdline and ps no longer show it. Returns true when there was one.
/// Call after the argument was copied (parsed).
bool hide_url_secret(char* argument) noexcept;

}  // namespace iserkit::initiator

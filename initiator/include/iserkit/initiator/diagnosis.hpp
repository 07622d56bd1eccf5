// Errors in words for people: what happened, the object concerned (portal, target, LUN, byte
// range) and the next step, plus the exit status that goes with it. The one place where iserkit,
// iserkit-nbd and iserkit-fuse word the usual mistakes — a refused connection, an unknown target, a
// wrong CHAP secret, a LUN that does not exist, a read-only LUN, I/O past the end — so the three
// programs say the same thing the same way. Sense data is decoded with libsgutils2's tables
// (scsi/sense_text.hpp). Only error paths call this. Layer 6 (public API).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "iserkit/initiator/options.hpp"
#include "iserkit/initiator/url.hpp"

namespace iserkit::initiator {

/// The exit statuses of iserkit, iserkit-nbd and iserkit-fuse (their man pages, "EXIT STATUS").
/// Values are stable: scripts test them.
enum class ExitStatus : int {
  ok = 0,
  failure = 1,      ///< any other error: I/O, a local file, a mount, a SCSI error not below
  usage = 2,        ///< the command line: an unknown option, a bad value, a URL that does not parse
  gave_up = 3,      ///< a lost connection was not replaced within the replacement timeout
  unreachable = 4,  ///< the portal did not take the connection: refused, unreachable, unknown host, timeout
  login = 5,        ///< the target refused the login: unknown target, CHAP, not allowed (ACL), busy
  lun = 6,          ///< the LUN refused the request: no such LUN, read-only, past the end
};

/// Which program reports: the next step names that program's options.
enum class Program { cli, nbd, fuse };

/// What an error concerned; every part is optional and said when known.
struct ErrorContext {
  Program program = Program::cli;
  /// The portal (host:port), target and LUN. A password in it is never printed.
  std::optional<Url> url;
  /// The CHAP credentials the login used (for the CHAP next steps); not copied, may be null.
  const ChapOptions* chap = nullptr;
  std::optional<std::uint64_t> offset_bytes;    ///< start of the request, bytes
  std::optional<std::uint64_t> length_bytes;    ///< length of the request, bytes
  std::optional<std::uint64_t> capacity_bytes;  ///< the LUN's capacity, bytes (READ CAPACITY)
  /// The targets SendTargets listed at the portal, when the caller ran discovery after an unknown
  /// target (needs_target_list()); nullopt when it did not or discovery failed.
  std::optional<std::vector<std::string>> listed_targets;
};

/// An error in words.
struct Diagnosis {
  std::string what;       ///< what happened and to what, e.g. "LUN 3 does not exist on iqn.… (ILLEGAL REQUEST 25/00: …)"
  std::string next_step;  ///< what to do, e.g. "`iserkit luns iscsi://…` lists its LUNs"; may be empty
  ExitStatus exit_status = ExitStatus::failure;
  /// "what: next_step" (just `what` without a next step).
  [[nodiscard]] std::string text() const;
};

/// Words for `ec` as returned by Session::connect, discover(), LunHandle::open and the I/O calls:
/// socket errors (refused, unreachable, unknown host), errc::timeout, login status classes
/// (RFC 7143 §11.13.5: target not found, authentication, authorization), mutual CHAP
/// (errc::authentication_failed), errc::session_lost and SCSI errors (LOGICAL UNIT NOT SUPPORTED,
/// WRITE PROTECTED, LBA OUT OF RANGE; others with their sense in words). Anything else is
/// ec.message() with ExitStatus::failure. `ec` must be an error.
Diagnosis diagnose(std::error_code ec, const ErrorContext& context);

/// A request the caller refused before sending because it reaches past the end of the LUN:
/// "write past the end: offset+length > capacity N bytes" and how much fits.
/// `operation` is "read" or "write"; context needs offset_bytes, length_bytes and capacity_bytes.
Diagnosis diagnose_past_end(std::string_view operation, const ErrorContext& context);

/// A URL that does not parse: the reason (url_problem()) and the accepted form; ExitStatus::usage.
/// `with_lun`: whether the program wants a LUN in the URL (iserkit, iserkit-nbd) or a portal or
/// target (iserkit-fuse).
Diagnosis diagnose_bad_url(std::string_view text, bool with_lun);

/// True when `ec` says the target name is not known at the portal (login status 0x0203 or 0x0204):
/// the caller may run discovery and put its names in ErrorContext::listed_targets.
bool needs_target_list(std::error_code ec) noexcept;

/// The names in a discovery answer, for ErrorContext::listed_targets.
template <class Targets>
std::vector<std::string> target_names(const Targets& targets) {
  std::vector<std::string> names;
  for (const auto& t : targets) names.push_back(t.name);
  return names;
}

/// The process exit status for an ExitStatus.
constexpr int exit_code(ExitStatus s) noexcept { return static_cast<int>(s); }

}  // namespace iserkit::initiator

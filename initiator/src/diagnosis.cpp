// Errors in words (see diagnosis.hpp): socket errors, login status classes (RFC 7143 §11.13.5),
// mutual CHAP, SCSI sense (SPC-5 §4.4, texts from libsgutils2) → what happened, the object, the
// next step and the exit status.
#include "iserkit/initiator/diagnosis.hpp"

#include <cerrno>

#include "iserkit/common/errors.hpp"
#include "iserkit/common/past_end.hpp"
#include "iserkit/initiator/chap_credentials.hpp"
#include "iserkit/initiator/errors.hpp"
#include "iserkit/scsi/sense_text.hpp"

namespace iserkit::initiator {
namespace {

// RFC 7143 §11.13.5 status classes and the details used below.
constexpr int class_redirection = 1;
constexpr int class_initiator_error = 2;
constexpr int class_target_error = 3;
constexpr int detail_authentication_failure = 1;
constexpr int detail_authorization_failure = 2;
constexpr int detail_not_found = 3;
constexpr int detail_removed = 4;

std::string portal_text(const ErrorContext& c) {
  if (!c.url) return "the portal";
  const auto& host = c.url->host;
  const std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return h + ":" + std::to_string(c.url->port);
}

std::string target_text(const ErrorContext& c) {
  return c.url && !c.url->target.empty() ? c.url->target : std::string("the target");
}

std::string lun_text(const ErrorContext& c) {
  return c.url && c.url->lun ? "LUN " + std::to_string(*c.url->lun) : std::string("the LUN");
}

// The URL without LUN and password: what `iserkit discover` / `iserkit luns` take.
std::string url_without(const ErrorContext& c, bool keep_target) {
  if (!c.url) return "URL";
  Url u = *c.url;
  u.password.clear();
  u.lun.reset();
  if (!keep_target) u.target.clear();
  return format_url(u);
}

// The errno of a socket or system call failure, whichever category carries it (std's, or Boost's
// seen through std::error_code, named "system" / "generic").
std::optional<int> errno_of(std::error_code ec) {
  if (ec.category() == std::system_category() || ec.category() == std::generic_category()) return ec.value();
  const std::string_view name = ec.category().name();
  if (name == "system" || name == "generic") return ec.value();
  return std::nullopt;
}

Diagnosis unknown_target(std::error_code ec, const ErrorContext& c) {
  Diagnosis d{.what = "target " + target_text(c) + " unknown at portal " + portal_text(c) + " (" + ec.message() + ")",
              .next_step = {},
              .exit_status = ExitStatus::login};
  if (c.listed_targets && c.listed_targets->empty()) {
    d.next_step = "discovery lists no target there";
  } else if (c.listed_targets) {
    d.next_step = "discovery lists: ";
    for (std::size_t i = 0; i < c.listed_targets->size(); ++i) d.next_step += (i ? ", " : "") + (*c.listed_targets)[i];
  } else {
    d.next_step = "`iserkit discover " + url_without(c, false) + "` lists its targets";
  }
  return d;
}

Diagnosis login_refused(std::error_code ec, const ErrorContext& c) {
  const int status_class = (ec.value() >> 8) & 0xff;
  const int detail = ec.value() & 0xff;
  const std::string at = target_text(c) + " at " + portal_text(c);
  const std::string status = " (" + ec.message() + ")";
  const ChapOptions none;
  const ChapOptions& chap = c.chap != nullptr ? *c.chap : none;
  if (status_class == class_initiator_error && (detail == detail_not_found || detail == detail_removed))
    return unknown_target(ec, c);
  if (status_class == class_initiator_error && detail == detail_authentication_failure) {
    return {.what = (chap.enabled() ? "CHAP secret refused for user '" + chap.user + "' by " + at
                                    : at + " requires CHAP authentication") + status,
            .next_step = chap_login_hint(ec, chap),
            .exit_status = ExitStatus::login};
  }
  if (status_class == class_initiator_error && detail == detail_authorization_failure)
    return {.what = at + " does not admit this initiator" + status,
            .next_step = "the target's access list must name this InitiatorName (iserkit-target: allowed_initiators), "
                         "or log in with --initiator-name",
            .exit_status = ExitStatus::login};
  if (status_class == class_target_error)
    return {.what = at + " cannot take the login now" + status,
            .next_step = "try again later; the target's log says why",
            .exit_status = ExitStatus::login};
  if (status_class == class_redirection)
    return {.what = at + " redirected the login elsewhere and it failed there" + status,
            .next_step = {},
            .exit_status = ExitStatus::login};
  return {.what = "login to " + at + " refused" + status, .next_step = {}, .exit_status = ExitStatus::login};
}

std::string read_only_step(Program p) {
  switch (p) {
    case Program::nbd: return "serve it with -r/--read-only, or make it writable on the target";
    case Program::fuse: return "mount with -r/--read-only, or make it writable on the target";
    case Program::cli: break;
  }
  return "write to a writable LUN, or make this one writable on the target (iserkit-target: without --read-only)";
}

Diagnosis scsi_failure(std::error_code ec, const ErrorContext& c) {
  const std::string lun = lun_text(c) + " of " + target_text(c);
  const auto sense = sense_of(ec);
  if (!sense) return {.what = lun + ": " + ec.message(), .next_step = {}, .exit_status = ExitStatus::failure};
  const std::string words = " (" + scsi::sense_text(*sense) + ")";
  const auto pair = sense->asc_pair();
  if (sense->key == scsi::SenseKey::illegal_request && pair == scsi::asc::logical_unit_not_supported) {
    return {.what = lun_text(c) + " does not exist on " + target_text(c) + words,
            .next_step = "`iserkit luns " + url_without(c, true) + "` lists its LUNs",
            .exit_status = ExitStatus::lun};
  }
  if (sense->key == scsi::SenseKey::data_protect && pair == scsi::asc::write_protected) {
    return {.what = "the LUN is read-only: " + lun + words,
            .next_step = read_only_step(c.program),
            .exit_status = ExitStatus::lun};
  }
  if (sense->key == scsi::SenseKey::illegal_request && pair == scsi::asc::lba_out_of_range) {
    Diagnosis d{.what = "request past the end of " + lun + words, .next_step = {}, .exit_status = ExitStatus::lun};
    if (c.offset_bytes && c.capacity_bytes) {
      d.what = "past the end of " + lun + ": offset+length > capacity " + std::to_string(*c.capacity_bytes) + " bytes" + words;
      d.next_step = past_end_next_step(*c.offset_bytes, *c.capacity_bytes);
    }
    return d;
  }
  return {.what = lun + ": " + ec.message(), .next_step = {}, .exit_status = ExitStatus::failure};
}

}  // namespace

std::string Diagnosis::text() const { return next_step.empty() ? what : what + ": " + next_step; }

Diagnosis diagnose(std::error_code ec, const ErrorContext& c) {
  const std::string portal = portal_text(c);
  const std::string_view category = ec.category().name();
  if (category == "asio.netdb" || category == "asio.addrinfo") {
    return {.what = "cannot resolve host name " + (c.url ? c.url->host : std::string("of the portal")) + " (" +
                    ec.message() + ")",
            .next_step = "check the host in the URL",
            .exit_status = ExitStatus::unreachable};
  }
  if (const auto e = errno_of(ec)) {
    switch (*e) {
      case ECONNREFUSED:
        return {.what = "connection refused by " + portal,
                .next_step = "is iserkit-target (or the iSCSI target) running there, and is the port right? "
                             "(3260 unless the URL says HOST:PORT)",
                .exit_status = ExitStatus::unreachable};
      case EHOSTUNREACH:
      case ENETUNREACH:
        return {.what = "cannot reach " + portal + " (" + ec.message() + ")",
                .next_step = "check the address in the URL and the network path to it",
                .exit_status = ExitStatus::unreachable};
      case ETIMEDOUT:
        return {.what = portal + " did not answer (" + ec.message() + ")",
                .next_step = "check the address, the network and any firewall in between",
                .exit_status = ExitStatus::unreachable};
      case ECONNRESET:
      case ECONNABORTED:
      case EPIPE:
        return {.what = "the connection to " + portal + " was closed (" + ec.message() + ")",
                .next_step = "the target's log says why",
                .exit_status = ExitStatus::unreachable};
      default: break;
    }
  }
  if (ec == errc::timeout)
    return {.what = portal + " did not answer in time (" + target_text(c) + ")",
            .next_step = "check that the target runs and answers there",
            .exit_status = ExitStatus::unreachable};
  if (ec == errc::connection_closed)
    return {.what = "the connection to " + portal + " was closed",
            .next_step = "the target's log says why",
            .exit_status = ExitStatus::unreachable};
  if (ec == errc::session_lost)
    return {.what = "gave up on " + target_text(c) + " at " + portal +
                    ": no new connection within the replacement timeout",
            .next_step = "check the target; a longer --replacement-timeout rides through longer outages",
            .exit_status = ExitStatus::gave_up};
  if (ec.category() == login_status_category()) return login_refused(ec, c);
  if (ec == errc::authentication_failed) {
    const ChapOptions none;
    return {.what = target_text(c) + " at " + portal + " failed mutual CHAP",
            .next_step = chap_login_hint(ec, c.chap != nullptr ? *c.chap : none),
            .exit_status = ExitStatus::login};
  }
  if (is_scsi_error(ec)) return scsi_failure(ec, c);
  return {.what = ec.message(), .next_step = {}, .exit_status = ExitStatus::failure};
}

Diagnosis diagnose_past_end(std::string_view operation, const ErrorContext& c) {
  const std::uint64_t offset = c.offset_bytes.value_or(0);
  const std::uint64_t capacity = c.capacity_bytes.value_or(0);
  return {.what = past_end_text(operation, offset, c.length_bytes.value_or(0), capacity),
          .next_step = past_end_next_step(offset, capacity),
          .exit_status = ExitStatus::lun};
}

Diagnosis diagnose_bad_url(std::string_view text, bool with_lun) {
  std::string why = url_problem(text);
  if (why.empty()) why = "it names no target";
  return {.what = "bad URL: " + why,
          .next_step = with_lun ? "want iscsi://[USER@]HOST[:PORT]/TARGET-IQN/LUN (or iser://…)"
                                : "want iscsi://[USER@]HOST[:PORT][/TARGET-IQN] (or iser://…)",
          .exit_status = ExitStatus::usage};
}

bool needs_target_list(std::error_code ec) noexcept {
  if (ec.category() != login_status_category()) return false;
  return ec.value() == (class_initiator_error << 8 | detail_not_found) ||
         ec.value() == (class_initiator_error << 8 | detail_removed);
}

}  // namespace iserkit::initiator

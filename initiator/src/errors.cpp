// The initiator's error categories: SCSI status/sense (SAM-5 §5.3.1, SPC-5 §4.4) mapped to errno
// via scsi::errno_for, and login status class/detail (RFC 7143 §11.13.5).
#include "iserkit/initiator/errors.hpp"

#include <cerrno>
#include <cstdio>
#include <string>

#include "iserkit/common/errors.hpp"
#include "iserkit/scsi/errno_map.hpp"
#include "iserkit/scsi/sense_text.hpp"

namespace iserkit::initiator {
namespace {

std::string_view status_name(std::uint8_t s) {
  switch (static_cast<scsi::Status>(s)) {
    case scsi::Status::good: return "GOOD";
    case scsi::Status::check_condition: return "CHECK CONDITION";
    case scsi::Status::condition_met: return "CONDITION MET";
    case scsi::Status::busy: return "BUSY";
    case scsi::Status::reservation_conflict: return "RESERVATION CONFLICT";
    case scsi::Status::task_set_full: return "TASK SET FULL";
    case scsi::Status::aca_active: return "ACA ACTIVE";
    case scsi::Status::task_aborted: return "TASK ABORTED";
  }
  return "UNKNOWN STATUS";
}

// Bit 23 of the value flags "sense present" so NO SENSE 0/0/0 stays distinguishable.
constexpr int sense_present_bit = 1 << 23;

class ScsiCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "iserkit.scsi"; }
  std::string message(int v) const override {
    const auto status = static_cast<std::uint8_t>((v >> 24) & 0x7f);
    std::string s(status_name(status));
    if (v & sense_present_bit) {
      // "sense=K/ASC/ASCQ KEY: ASC text", the texts from libsgutils2's tables (scsi/sense_text.hpp).
      const auto key = static_cast<scsi::SenseKey>((v >> 16) & 0xf);
      const auto asc = static_cast<std::uint8_t>((v >> 8) & 0xff);
      const auto ascq = static_cast<std::uint8_t>(v & 0xff);
      char buf[32];
      std::snprintf(buf, sizeof buf, ": sense=%x/%02x/%02x ", (v >> 16) & 0xf, asc, ascq);
      s += buf;
      s += scsi::sense_key_text(key) + ": " + scsi::asc_ascq_text(asc, ascq);
    }
    return s;
  }
  std::error_condition default_error_condition(int v) const noexcept override {
    const auto status = static_cast<scsi::Status>((v >> 24) & 0x7f);
    std::optional<scsi::SenseData> sense;
    if (v & sense_present_bit) {
      scsi::SenseData d;
      d.key = static_cast<scsi::SenseKey>((v >> 16) & 0xf);
      d.asc = static_cast<std::uint8_t>((v >> 8) & 0xff);
      d.ascq = static_cast<std::uint8_t>(v & 0xff);
      sense = d;
    }
    const int e = scsi::errno_for(status, sense);
    return {e == 0 ? EIO : e, std::generic_category()};
  }
};

const char* login_class_name(int c) {
  switch (c) {
    case 1: return "redirection";
    case 2: return "initiator error";
    case 3: return "target error";
  }
  return "unknown class";
}

const char* login_detail_name(int c, int d) {
  // RFC 7143 §11.13.5 table.
  if (c == 1) return d == 1 ? "target moved temporarily" : d == 2 ? "target moved permanently" : "redirect";
  if (c == 2) {
    switch (d) {
      case 0: return "initiator error";
      case 1: return "authentication failure";
      case 2: return "authorization failure";
      case 3: return "target not found";
      case 4: return "target removed";
      case 5: return "unsupported version";
      case 6: return "too many connections";
      case 7: return "missing parameter";
      case 8: return "can't include in session";
      case 9: return "session type not supported";
      case 10: return "session does not exist";
      case 11: return "invalid during login";
    }
  }
  if (c == 3) {
    switch (d) {
      case 0: return "target error";
      case 1: return "service unavailable";
      case 2: return "out of resources";
    }
  }
  return "unknown detail";
}

class LoginCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "iserkit.login"; }
  std::string message(int v) const override {
    char buf[128];
    const int c = (v >> 8) & 0xff;
    const int d = v & 0xff;
    std::snprintf(buf, sizeof buf, "login rejected: status=0x%02x%02x %s (%s)", c, d, login_detail_name(c, d),
                  login_class_name(c));
    return buf;
  }
  std::error_condition default_error_condition(int) const noexcept override {
    return {EACCES, std::generic_category()};
  }
};

}  // namespace

const std::error_category& scsi_status_category() noexcept {
  static const ScsiCategory c;
  return c;
}

std::error_code make_scsi_error(const scsi::ScsiResult& result) noexcept {
  if (result.status == scsi::Status::good || result.status == scsi::Status::condition_met) return {};
  int v = (static_cast<int>(result.status) & 0x7f) << 24;
  if (result.sense) {
    v |= sense_present_bit | (static_cast<int>(result.sense->key) & 0xf) << 16 | result.sense->asc << 8 |
         result.sense->ascq;
  }
  return {v, scsi_status_category()};
}

Result<void> check(const scsi::ScsiResult& result) noexcept {
  if (auto ec = make_scsi_error(result)) return fail(ec);
  return {};
}

bool is_scsi_error(std::error_code ec) noexcept { return ec && ec.category() == scsi_status_category(); }

std::optional<scsi::Status> status_of(std::error_code ec) noexcept {
  if (!is_scsi_error(ec)) return std::nullopt;
  return static_cast<scsi::Status>((ec.value() >> 24) & 0x7f);
}

std::optional<scsi::SenseData> sense_of(std::error_code ec) noexcept {
  if (!is_scsi_error(ec) || !(ec.value() & sense_present_bit)) return std::nullopt;
  scsi::SenseData d;
  d.key = static_cast<scsi::SenseKey>((ec.value() >> 16) & 0xf);
  d.asc = static_cast<std::uint8_t>((ec.value() >> 8) & 0xff);
  d.ascq = static_cast<std::uint8_t>(ec.value() & 0xff);
  return d;
}

int to_errno(std::error_code ec) noexcept {
  if (!ec) return 0;
  if (ec.category() == std::generic_category() || ec.category() == std::system_category()) return ec.value();
  if (ec.category() == scsi_status_category() || ec.category() == login_status_category())
    return ec.default_error_condition().value();
  if (ec.category() == iserkit_category()) {
    switch (static_cast<errc>(ec.value())) {
      case errc::timeout: return ETIMEDOUT;
      case errc::connection_closed:
      case errc::session_closed: return ENOTCONN;
      case errc::invalid_argument: return EINVAL;
      case errc::not_supported: return EOPNOTSUPP;
      case errc::login_failed: return EACCES;
      case errc::task_aborted: return ECANCELED;
      default: return EIO;
    }
  }
  return EIO;
}

const std::error_category& login_status_category() noexcept {
  static const LoginCategory c;
  return c;
}

std::error_code make_login_error(std::uint8_t status_class, std::uint8_t status_detail) noexcept {
  return {status_class << 8 | status_detail, login_status_category()};
}

}  // namespace iserkit::initiator

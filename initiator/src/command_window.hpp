// The CmdSN window of a session (RFC 7143 §4.2.2.1), sans-I/O: which CmdSN the next non-immediate
// command gets, whether it may be sent, and how ExpCmdSN/MaxCmdSN from the target move the window.
// All comparisons use RFC 1982 serial arithmetic (SerialNumber), so the window works across 2^32.
#pragma once

#include <cstdint>

#include "iserkit/common/serial_number.hpp"

namespace iserkit::initiator {

class CommandWindow {
 public:
  CommandWindow() = default;

  /// Starts the window after login: the first command gets `next_cmd_sn` (the leading Login
  /// Request's CmdSN, RFC 7143 §11.12.8); the target's ExpCmdSN/MaxCmdSN come from the final Login
  /// Response.
  void reset(SerialNumber next_cmd_sn, SerialNumber exp_cmd_sn, SerialNumber max_cmd_sn) noexcept {
    next_ = next_cmd_sn;
    exp_ = exp_cmd_sn;
    max_ = max_cmd_sn;
  }

  /// Applies ExpCmdSN/MaxCmdSN from a target PDU. Returns true when the window grew.
  bool update(SerialNumber exp_cmd_sn, SerialNumber max_cmd_sn) noexcept {
    // RFC 7143 §4.2.2.1: if MaxCmdSN < ExpCmdSN - 1 (serial), both MUST be ignored.
    if (max_cmd_sn < SerialNumber(exp_cmd_sn.value() - 1)) return false;
    const std::uint32_t before = available();
    // The values only move forward; stale (reordered) updates are ignored.
    if (exp_cmd_sn > exp_) exp_ = exp_cmd_sn;
    if (max_cmd_sn > max_) max_ = max_cmd_sn;
    return available() > before;
  }

  /// How many non-immediate commands may be sent now: those with ExpCmdSN ≤ CmdSN ≤ MaxCmdSN.
  /// 0 when MaxCmdSN = ExpCmdSN - 1 (the target closed the window).
  [[nodiscard]] std::uint32_t available() const noexcept {
    // RFC 7143 §4.2.2.1: a command may be sent only if CmdSN ≤ MaxCmdSN (serial comparison).
    if (!(next_ <= max_)) return 0;
    return max_.distance_from(next_) + 1;
  }
  [[nodiscard]] bool is_open() const noexcept { return available() > 0; }

  /// Takes the next CmdSN. Precondition: is_open().
  SerialNumber take() noexcept {
    const SerialNumber sn = next_;
    ++next_;
    return sn;
  }

  /// The CmdSN the next non-immediate command will carry (immediate PDUs carry it unchanged).
  [[nodiscard]] SerialNumber next() const noexcept { return next_; }
  [[nodiscard]] SerialNumber exp_cmd_sn() const noexcept { return exp_; }
  [[nodiscard]] SerialNumber max_cmd_sn() const noexcept { return max_; }

 private:
  SerialNumber next_{1};
  SerialNumber exp_{1};
  SerialNumber max_{1};
};

}  // namespace iserkit::initiator

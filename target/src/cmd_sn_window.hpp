// CmdSnWindow: the target's command numbering window of one session (RFC 7143 §4.2.2.1, §3.2.2.1).
// Sans-I/O: decides whether a command's CmdSN is accepted or silently ignored, advances ExpCmdSN
// over contiguous CmdSNs, and opens MaxCmdSN by one each time a non-immediate command finishes, so
// at most `depth` non-immediate commands are ever outstanding on the session.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "iserkit/common/serial_number.hpp"

namespace iserkit::target {

/// Whether a command PDU is to be processed.
enum class Admission : std::uint8_t {
  accept,  ///< deliver it (CmdSN within the window, or an immediate command)
  ignore,  ///< RFC 7143 §4.2.2.1: outside [ExpCmdSN, MaxCmdSN]; silently ignore it
};

/// The session's CmdSN window. Not thread-safe (a session lives on one thread).
class CmdSnWindow {
 public:
  /// Starts with ExpCmdSN = `exp_cmd_sn` (the CmdSN of the leading login request) and room for
  /// `depth` (>= 1) outstanding non-immediate commands.
  CmdSnWindow(SerialNumber exp_cmd_sn, std::uint32_t depth) noexcept
      : exp_(exp_cmd_sn), max_(exp_cmd_sn + (depth - 1)) {}

  /// Checks a command's CmdSN and records it when accepted.
  /// Immediate commands are always accepted and do not advance ExpCmdSN (RFC 7143 §3.2.2.1).
  /// A non-immediate command is accepted iff ExpCmdSN <= CmdSN <= MaxCmdSN (serial arithmetic)
  /// and it is not a duplicate of one already accepted ahead of a gap. Every accepted
  /// non-immediate command must later be release()d exactly once.
  Admission admit(SerialNumber cmd_sn, bool immediate) noexcept {
    if (immediate) return Admission::accept;
    // RFC 7143 §4.2.2.1: the target MUST silently ignore any non-immediate command outside the range.
    if (cmd_sn < exp_ || cmd_sn > max_) return Admission::ignore;
    if (cmd_sn == exp_) {
      ++exp_;
      // Commands that arrived ahead of a gap are now contiguous.
      for (auto it = std::find(ahead_.begin(), ahead_.end(), exp_); it != ahead_.end();
           it = std::find(ahead_.begin(), ahead_.end(), exp_)) {
        ahead_.erase(it);
        ++exp_;
      }
      return Admission::accept;
    }
    if (std::find(ahead_.begin(), ahead_.end(), cmd_sn) != ahead_.end()) return Admission::ignore;
    ahead_.push_back(cmd_sn);
    return Admission::accept;
  }

  /// A non-immediate command accepted earlier has finished: MaxCmdSN advances by one, so MaxCmdSN
  /// never decreases (RFC 7143 §4.2.2.1 lets the initiator ignore a smaller value anyway).
  void release() noexcept { ++max_; }

  /// The next CmdSN expected (sent as ExpCmdSN).
  [[nodiscard]] SerialNumber exp_cmd_sn() const noexcept { return exp_; }
  /// The largest CmdSN the initiator may send now (sent as MaxCmdSN).
  [[nodiscard]] SerialNumber max_cmd_sn() const noexcept { return max_; }

 private:
  SerialNumber exp_;
  SerialNumber max_;
  std::vector<SerialNumber> ahead_;  // accepted CmdSNs above a gap (rare with one connection)
};

}  // namespace iserkit::target

// Receive-buffer accounting for iSER, sans-I/O (RFC 7145 §8 "buffer management": every
// control-type PDU lands in a receive buffer the peer posted beforehand; an RDMA SEND with no
// posted receive is a fatal RNR error). Two pieces:
//  - UnexpectedPduCredits: how many "unexpected" PDUs this side may have outstanding towards the
//    peer. A PDU is unexpected when the peer did not ask for it (a command, an immediate NOP-Out
//    ping, a target's NOP-In ping or Async Message); it stays outstanding until the answer to it
//    arrives, which proves the peer consumed and re-posted that receive buffer. Answers (responses,
//    a NOP-Out echoing a NOP-In) ride on buffers the peer posted for them and need no credit.
//    The limit is the peer's MaxOutstandingUnexpectedPDUs (RFC 5046 §6.7 / draft-ietf-ips-iser)
//    when negotiated, else what is known about the peer (Linux ib_iser: 4 for NOP-In/Async).
//  - classify(): which PDUs are unexpected and which answer one, by opcode and tags.
// Layer 2: no verbs, no Asio; the datamover drives it.
#pragma once

#include <cstdint>

#include "iserkit/iscsi/pdu.hpp"

namespace iserkit::iser {

/// How a PDU counts against the peer's receive buffers.
enum class PduClass : std::uint8_t {
  unexpected,  ///< needs a credit; outstanding until its answer arrives
  answer,      ///< answers an unexpected PDU of the peer's (returns nothing here)
  other,       ///< neither (e.g. Data-Out, R2T, Data-In: never sent over iSER by iserkit)
};

/// Classifies a PDU by who sends it. `from_initiator` is true for PDUs the initiator sends.
/// Initiator → target: SCSI Command, Task Management, Text, Logout, Login, SNACK and a NOP-Out
/// with a valid ITT are unexpected; a NOP-Out with ITT 0xffffffff and a TTT (an echo of the
/// target's NOP-In, RFC 7143 §11.18) is an answer. Target → initiator: a NOP-In with TTT ≠
/// 0xffffffff (a ping, RFC 7143 §11.19) and Async Message are unexpected; responses (SCSI
/// Response, TMF/Text/Login/Logout Response, NOP-In answering a NOP-Out, Reject) are answers.
PduClass classify(const iscsi::Bhs& bhs, bool from_initiator) noexcept;

/// Outstanding unexpected PDUs towards the peer. Not thread-safe (one per connection).
class UnexpectedPduCredits {
 public:
  /// `limit`: the number of unexpected PDUs the peer has posted receive buffers for; 0 = no limit
  /// (the peer bounds them another way, e.g. the CmdSN window).
  explicit UnexpectedPduCredits(std::uint32_t limit = 0) noexcept : limit_(limit) {}

  /// Changes the limit (after login, from the negotiated value). Outstanding PDUs stay counted.
  void set_limit(std::uint32_t limit) noexcept { limit_ = limit; }
  [[nodiscard]] std::uint32_t limit() const noexcept { return limit_; }
  /// Unexpected PDUs sent and not yet answered.
  [[nodiscard]] std::uint32_t outstanding() const noexcept { return outstanding_; }

  /// Takes a credit for one unexpected PDU. Returns false (and takes nothing) when the peer has no
  /// free receive buffer for it: the caller must wait for an answer first.
  [[nodiscard]] bool try_acquire() noexcept {
    if (limit_ != 0 && outstanding_ >= limit_) return false;
    ++outstanding_;
    return true;
  }
  /// An answer arrived: one unexpected PDU is no longer outstanding. Extra answers (e.g. a
  /// response to a PDU sent before accounting began) never drive the count below zero.
  void release() noexcept {
    if (outstanding_ > 0) --outstanding_;
  }

 private:
  std::uint32_t limit_;
  std::uint32_t outstanding_ = 0;
};

/// Receive buffers this side must post so the peer can never overrun it, for a connection that
/// allows `window` commands in flight (MaxCmdSN − ExpCmdSN + 1 on the target, the initiator's
/// command limit on the initiator) and `unexpected` unsolicited PDUs from the peer: every command
/// may bring one PDU (its command or its response), plus the unexpected ones, plus one for an
/// immediate PDU (NOP-Out/Logout/TMF or their answers) per `extra`.
[[nodiscard]] constexpr std::uint32_t receive_depth(std::uint32_t window, std::uint32_t unexpected,
                                                    std::uint32_t extra) noexcept {
  return window + unexpected + extra;
}

}  // namespace iserkit::iser

// Classification of iSCSI PDUs for iSER receive-buffer accounting (RFC 7145 §8; RFC 7143 §11).
#include "iserkit/iser/credits.hpp"

namespace iserkit::iser {

PduClass classify(const iscsi::Bhs& bhs, bool from_initiator) noexcept {
  using iscsi::Opcode;
  const auto op = static_cast<Opcode>(iscsi::raw_opcode(bhs));
  const bool itt_valid = iscsi::itt_of(bhs) != iscsi::reserved_itt;
  // The TTT sits at bytes 20..23 in NOP-Out and NOP-In (RFC 7143 §11.18, §11.19).
  const bool ttt_valid = load_be32(bhs.data() + 20) != 0xffffffffu;
  if (from_initiator) {
    switch (op) {
      case Opcode::scsi_command:
      case Opcode::task_management_request:
      case Opcode::text_request:
      case Opcode::logout_request:
      case Opcode::login_request:
      case Opcode::snack_request:
        return PduClass::unexpected;
      case Opcode::nop_out:
        // RFC 7143 §11.18.1: ITT 0xffffffff with a TTT answers the target's NOP-In.
        return itt_valid ? PduClass::unexpected : (ttt_valid ? PduClass::answer : PduClass::other);
      default:
        return PduClass::other;
    }
  }
  switch (op) {
    case Opcode::nop_in:
      // RFC 7143 §11.19.1: a NOP-In with a valid TTT asks for an answer (a target ping); one with a
      // valid ITT answers a NOP-Out.
      if (ttt_valid) return PduClass::unexpected;
      return itt_valid ? PduClass::answer : PduClass::other;
    case Opcode::async_message:
      return PduClass::unexpected;
    case Opcode::scsi_response:
    case Opcode::task_management_response:
    case Opcode::text_response:
    case Opcode::login_response:
    case Opcode::logout_response:
    case Opcode::reject:
      return PduClass::answer;
    default:
      return PduClass::other;
  }
}

}  // namespace iserkit::iser

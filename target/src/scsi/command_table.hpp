// The device server's command table: every command it implements, with its CDB USAGE DATA
// (SPC-5 §6.35.3: which CDB bits the device server looks at), whether it has a service action,
// and how it touches the medium for reservation conflict checks (SPC-5 §5.14.1 table 66, SBC-4
// table 13). REPORT SUPPORTED OPERATION CODES (SPC-5 §6.35) is generated from it, so the report
// cannot drift from what the dispatcher accepts.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "iserkit/scsi/opcodes.hpp"
#include "scsi/persistent_reservations.hpp"

namespace iserkit::target::detail {

/// Which logical units a command exists for.
enum class Availability : std::uint8_t {
  always,
  thin_only,  ///< only with logical block provisioning (UNMAP, GET LBA STATUS)
  block_erase,  ///< SANITIZE BLOCK ERASE: only when the backend deallocates to zeroes (block_erase_supported)
};

/// One row of the command table.
struct CommandInfo {
  scsi::Opcode opcode;
  std::uint16_t service_action;  ///< meaningful when has_service_action
  bool has_service_action;
  std::uint8_t cdb_length;       ///< bytes
  std::array<std::uint8_t, 16> usage;  ///< CDB USAGE DATA: byte 0 the opcode (or the SA in byte 1), then bit masks
  AccessKind access;
  Availability availability = Availability::always;
};

/// Every implemented command, in opcode order.
std::span<const CommandInfo> command_table() noexcept;

/// The row for `opcode` (and `service_action` when the opcode has service actions), or nullptr.
const CommandInfo* find_command(std::uint8_t opcode, std::uint16_t service_action) noexcept;

/// True if `opcode` is one with service actions in the table (MAINTENANCE IN, SERVICE ACTION IN,
/// PERSISTENT RESERVE IN/OUT, SANITIZE).
bool opcode_has_service_actions(std::uint8_t opcode) noexcept;

/// Service action of `cdb` for such opcodes (byte 1 bits 4:0), else 0.
std::uint16_t service_action_of(std::uint8_t opcode, std::uint8_t byte1) noexcept;

}  // namespace iserkit::target::detail

// Target-side parsers for the SBC-4 media-access CDBs beyond plain READ/WRITE, and for the SPC
// reservation CDBs: VERIFY (10)/(12)/(16) (§5.34-§5.36), WRITE AND VERIFY (10)/(12)/(16)
// (§5.45-§5.47), COMPARE AND WRITE (§5.3), ORWRITE (16) (§5.10), PRE-FETCH (10)/(16) (§5.11,
// §5.12), WRITE ATOMIC (16) (§5.48), GET LBA STATUS (§5.8), START STOP UNIT (§5.25), PERSISTENT
// RESERVE IN/OUT (SPC-5 §6.17, §6.18) and MODE SELECT (6)/(10) (SPC-5 §6.11, §6.12). Pure
// functions over byte spans; each checks only the CDB layout, never the medium.
#pragma once

#include <cstdint>

#include "iserkit/scsi/cdb.hpp"

namespace iserkit::scsi {

/// A decoded media-access CDB: READ/WRITE (any size) and the commands listed above.
struct BlockCdb {
  Opcode opcode = Opcode::read10;
  std::uint64_t lba = 0;       ///< first logical block
  std::uint32_t blocks = 0;    ///< logical blocks (READ/WRITE (6): 0 → 256; COMPARE AND WRITE: NUMBER OF LOGICAL BLOCKS)
  std::uint8_t protect = 0;    ///< RDPROTECT/WRPROTECT/VRPROTECT/ORPROTECT (3 bits)
  bool dpo = false;            ///< DPO
  bool fua = false;            ///< FUA
  std::uint8_t bytchk = 0;     ///< VERIFY: BYTCHK (2 bits); WRITE AND VERIFY: BYTCHK (1 bit)
  bool immed = false;          ///< PRE-FETCH: IMMED
  std::uint16_t atomic_boundary = 0;  ///< WRITE ATOMIC (16): ATOMIC BOUNDARY
  /// Byte index of the transfer length field (for INVALID FIELD IN CDB field pointers).
  std::uint16_t length_field_byte = 0;
};

/// Decodes any opcode named in this header's comment plus READ/WRITE 6/10/12/16.
/// Errors: INVALID COMMAND OPERATION CODE for another opcode or a CDB shorter than it needs.
SenseOr<BlockCdb> parse_block_cdb(ConstByteSpan cdb) noexcept;

/// GET LBA STATUS (SERVICE ACTION IN (16), service action 12h; SBC-4 §5.8).
struct GetLbaStatusCdb {
  std::uint64_t lba = 0;               ///< STARTING LOGICAL BLOCK ADDRESS
  std::uint32_t allocation_length = 0; ///< bytes
};
/// Decodes GET LBA STATUS. Errors: INVALID COMMAND OPERATION CODE for a short CDB, INVALID FIELD
/// IN CDB for another service action.
SenseOr<GetLbaStatusCdb> parse_get_lba_status_cdb(ConstByteSpan cdb) noexcept;

/// START STOP UNIT (SBC-4 §5.25).
struct StartStopUnitCdb {
  bool immed = false;
  std::uint8_t power_condition_modifier = 0;  ///< 4 bits
  std::uint8_t power_condition = 0;           ///< 4 bits
  bool no_flush = false;
  bool loej = false;  ///< load/eject
  bool start = false;
};
SenseOr<StartStopUnitCdb> parse_start_stop_unit_cdb(ConstByteSpan cdb) noexcept;

/// PERSISTENT RESERVE IN (SPC-5 §6.17).
struct PersistentReserveInCdb {
  std::uint8_t service_action = 0;     ///< 0 READ KEYS, 1 READ RESERVATION, 2 REPORT CAPABILITIES, 3 READ FULL STATUS
  std::uint16_t allocation_length = 0; ///< bytes
};
SenseOr<PersistentReserveInCdb> parse_persistent_reserve_in_cdb(ConstByteSpan cdb) noexcept;

/// PERSISTENT RESERVE OUT (SPC-5 §6.18).
struct PersistentReserveOutCdb {
  std::uint8_t service_action = 0;  ///< 0 REGISTER … 7 REGISTER AND MOVE (SPC-5 table 184)
  std::uint8_t scope = 0;           ///< 0 = logical unit
  std::uint8_t type = 0;            ///< reservation type (SPC-5 table 185)
  std::uint32_t parameter_list_length = 0;  ///< bytes
};
SenseOr<PersistentReserveOutCdb> parse_persistent_reserve_out_cdb(ConstByteSpan cdb) noexcept;

/// The basic PERSISTENT RESERVE OUT parameter list (SPC-5 §6.18.2, 24 bytes).
struct PersistentReserveOutParameters {
  std::uint64_t reservation_key = 0;
  std::uint64_t service_action_reservation_key = 0;
  bool spec_i_pt = false;
  bool all_tg_pt = false;
  bool aptpl = false;
};
/// Decodes the 24-byte basic parameter list. Errors: PARAMETER LIST LENGTH ERROR when shorter.
SenseOr<PersistentReserveOutParameters> parse_persistent_reserve_out_parameters(ConstByteSpan list) noexcept;

/// MODE SELECT (6)/(10) (SPC-5 §6.11, §6.12).
struct ModeSelectCdb {
  bool ten = false;                     ///< MODE SELECT (10)
  bool pf = false;                      ///< page format
  bool sp = false;                      ///< save pages
  std::uint16_t parameter_list_length = 0;  ///< bytes
};
SenseOr<ModeSelectCdb> parse_mode_select_cdb(ConstByteSpan cdb) noexcept;

}  // namespace iserkit::scsi

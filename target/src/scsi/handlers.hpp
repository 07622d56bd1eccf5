// Internal to the target's SCSI layer: the per-command planning and execution functions that
// dispatch.cpp's opcode switch calls. spc.cpp holds the SPC-5 commands (INQUIRY, REPORT LUNS,
// REQUEST SENSE, MODE SENSE, REPORT SUPPORTED OPERATION CODES), spc_state.cpp those that read or
// change shared LU state (MODE SELECT, RESERVE/RELEASE (6), PERSISTENT RESERVE IN/OUT), sbc.cpp
// the SBC-4 basics (READ, WRITE, READ CAPACITY, SYNCHRONIZE CACHE, UNMAP, WRITE SAME) and
// sbc_compare.cpp the rest (VERIFY, WRITE AND VERIFY, COMPARE AND WRITE, ORWRITE, PRE-FETCH,
// START STOP UNIT, GET LBA STATUS).
#pragma once

#include <vector>

#include "iserkit/scsi/cdb.hpp"
#include "iserkit/scsi/lun.hpp"
#include "iserkit/target/scsi_dispatcher.hpp"

namespace iserkit::target::detail {

struct UnitState;

/// Shorthands for the sense data the handlers produce.
scsi::SenseData illegal_request(scsi::AscPair pair) noexcept;
scsi::SenseData invalid_opcode() noexcept;
scsi::SenseData lba_out_of_range() noexcept;
scsi::SenseData write_protected() noexcept;

/// The check every plan_*() makes after its scsi::parse_*_cdb(): false, with the parser's sense
/// in plan.error, when `parsed` holds none (`if (!parsed_cdb(plan, x)) return;`).
template <class T>
bool parsed_cdb(CommandPlan& plan, const scsi::SenseOr<T>& parsed) noexcept {
  if (!parsed) plan.error = parsed.error();
  return parsed.has_value();
}

/// No protection information here: a CDB's RDPROTECT/WRPROTECT/VRPROTECT/ORPROTECT field (byte 1
/// bits 7-5; SBC-4 §5.16 table 71, §5.34 table 88) must be 0. False, with INVALID FIELD IN CDB
/// (byte 1 bit 7) in plan.error, when it is not.
inline bool protect_field_zero(CommandPlan& plan, std::uint8_t protect) noexcept {
  if (protect != 0) plan.error = scsi::SenseData::invalid_field_in_cdb(1, 7);
  return protect == 0;
}

/// Sets plan.direction/transfer_length_bytes for a data-in command of `allocation_length` bytes.
void plan_data_in(CommandPlan& plan, std::uint32_t allocation_length) noexcept;

/// Copies `data` (truncated to the allocation length = out.size()) to `out` and returns GOOD with
/// the number of bytes copied.
ScsiOutcome reply_data(ConstByteSpan data, ByteSpan out) noexcept;

/// True for commands that write the medium (they take the LU's range lock).
bool is_media_write(scsi::Opcode op) noexcept;

/// SBC-4 §4.5: [lba, lba + blocks) lies inside the medium; an LBA at or past the end is out of
/// range even with zero blocks.
bool in_range(const LogicalUnit& unit, std::uint64_t lba, std::uint64_t blocks) noexcept;

/// A backend error (errno, BlockBackend contract) → the status and sense the command ends with:
/// the one table of backend_errors.cpp (e.g. EIO → MEDIUM ERROR, ENOSPC → DATA PROTECT / SPACE
/// ALLOCATION FAILED WRITE PROTECT, ETIMEDOUT → BUSY). `writing` picks WRITE ERROR over
/// UNRECOVERED READ ERROR where the two differ.
ScsiOutcome backend_error_outcome(std::error_code ec, bool writing) noexcept;
/// GOOD for success, else backend_error_outcome().
ScsiOutcome outcome_of(const Result<void>& r, bool writing) noexcept;

// --- SPC-5 ---
void plan_inquiry(CommandPlan& plan, ConstByteSpan cdb) noexcept;
ScsiOutcome execute_inquiry(const CommandPlan& plan, ConstByteSpan cdb, ByteSpan out);
void plan_report_luns(CommandPlan& plan, ConstByteSpan cdb) noexcept;
ScsiOutcome execute_report_luns(const std::vector<scsi::Lun>& luns, ConstByteSpan cdb, ByteSpan out);
void plan_request_sense(CommandPlan& plan, ConstByteSpan cdb) noexcept;
/// REQUEST SENSE reports (and clears) the oldest pending unit attention of `nexus` (SAM-5 §5.14).
ScsiOutcome execute_request_sense(const CommandPlan& plan, UnitState* unit, std::uint64_t nexus, ConstByteSpan cdb,
                                  ByteSpan out);
void plan_mode_sense(CommandPlan& plan, ConstByteSpan cdb) noexcept;
ScsiOutcome execute_mode_sense(const CommandPlan& plan, ConstByteSpan cdb, ByteSpan out);
void plan_maintenance_in(CommandPlan& plan, ConstByteSpan cdb) noexcept;
ScsiOutcome execute_report_supported_opcodes(const CommandPlan& plan, ConstByteSpan cdb, ByteSpan out);
/// REPORT TARGET PORT GROUPS (SPC-5 §6.36): one descriptor per group of `groups`.
ScsiOutcome execute_report_target_port_groups(const PortGroupTable& groups, ConstByteSpan cdb, ByteSpan out);
/// SET TARGET PORT GROUPS (MAINTENANCE OUT, service action 0Ah; SPC-4 §6.45): only with a table
/// that has AluaTransitions (else INVALID COMMAND OPERATION CODE / INVALID FIELD IN CDB).
void plan_maintenance_out(CommandPlan& plan, ConstByteSpan cdb) noexcept;
/// Runs the parameter list through the table's AluaTransitions and waits (at most
/// stpg_timeout) for the states asked for (stpg.cpp).
Awaitable<ScsiOutcome> execute_set_target_port_groups(const PortGroupTable& groups, ConstByteSpan parameters);

// --- SPC-5, shared LU state (spc_state.cpp) ---
void plan_mode_select(CommandPlan& plan, ConstByteSpan cdb) noexcept;
ScsiOutcome execute_mode_select(const CommandPlan& plan, UnitState& unit, const ScsiDispatcher::State& state,
                                std::uint64_t nexus, ConstByteSpan cdb, ConstByteSpan parameters);
ScsiOutcome execute_reserve_release6(const CommandPlan& plan, UnitState& unit, std::uint64_t nexus);
void plan_persistent_reserve_in(CommandPlan& plan, ConstByteSpan cdb) noexcept;
ScsiOutcome execute_persistent_reserve_in(UnitState& unit, ConstByteSpan cdb, ByteSpan out);
void plan_persistent_reserve_out(CommandPlan& plan, ConstByteSpan cdb) noexcept;
ScsiOutcome execute_persistent_reserve_out(UnitState& unit, const ScsiDispatcher::State& state, const std::string& port,
                                           ConstByteSpan cdb, ConstByteSpan parameters);

// --- SBC-4 ---
void plan_read_write(CommandPlan& plan, ConstByteSpan cdb) noexcept;
void plan_read_capacity10(CommandPlan& plan) noexcept;
void plan_service_action_in16(CommandPlan& plan, ConstByteSpan cdb) noexcept;
void plan_synchronize_cache(CommandPlan& plan, ConstByteSpan cdb) noexcept;
void plan_unmap(CommandPlan& plan, ConstByteSpan cdb) noexcept;
void plan_write_same(CommandPlan& plan, ConstByteSpan cdb) noexcept;
ScsiOutcome execute_read_capacity10(const CommandPlan& plan, ByteSpan out) noexcept;
ScsiOutcome execute_read_capacity16(const CommandPlan& plan, ByteSpan out) noexcept;
Awaitable<ScsiOutcome> execute_read(const CommandPlan& plan, ByteSpan out);
Awaitable<ScsiOutcome> execute_write(const CommandPlan& plan, ConstByteSpan data);
Awaitable<ScsiOutcome> execute_synchronize_cache(const CommandPlan& plan);
Awaitable<ScsiOutcome> execute_unmap(const CommandPlan& plan, ConstByteSpan parameter_list);
Awaitable<ScsiOutcome> execute_write_same(const CommandPlan& plan, ConstByteSpan block);

// --- SBC-4 (sbc_compare.cpp) ---
/// VERIFY, WRITE AND VERIFY, COMPARE AND WRITE, ORWRITE, WRITE ATOMIC, PRE-FETCH.
void plan_block_command(CommandPlan& plan, ConstByteSpan cdb) noexcept;
void plan_start_stop_unit(CommandPlan& plan, ConstByteSpan cdb) noexcept;
/// READ DEFECT DATA (10)/(12): an empty defect list (virtual media have no defects).
void plan_read_defect_data(CommandPlan& plan, ConstByteSpan cdb) noexcept;
ScsiOutcome execute_read_defect_data(ConstByteSpan cdb, ByteSpan out);
Awaitable<ScsiOutcome> execute_verify(const CommandPlan& plan, ConstByteSpan data);
Awaitable<ScsiOutcome> execute_compare_and_write(const CommandPlan& plan, ConstByteSpan data);
Awaitable<ScsiOutcome> execute_orwrite(const CommandPlan& plan, ConstByteSpan data);
Awaitable<ScsiOutcome> execute_get_lba_status(const CommandPlan& plan, ConstByteSpan cdb, ByteSpan out);

}  // namespace iserkit::target::detail

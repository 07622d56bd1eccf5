// Internal to the target's SCSI layer: the per-command planning and execution functions that
// dispatch.cpp's opcode switch calls. spc.cpp holds the SPC-5 commands (INQUIRY, REPORT LUNS,
// REQUEST SENSE, MODE SENSE, REPORT SUPPORTED OPERATION CODES), sbc.cpp the SBC-4 ones (READ,
// WRITE, READ CAPACITY, SYNCHRONIZE CACHE, UNMAP, WRITE SAME).
#pragma once

#include <vector>

#include "iserkit/scsi/cdb.hpp"
#include "iserkit/scsi/lun.hpp"
#include "iserkit/target/scsi_dispatcher.hpp"

namespace iserkit::target::detail {

/// Shorthands for the sense data the handlers produce.
scsi::SenseData illegal_request(scsi::AscPair pair) noexcept;
scsi::SenseData invalid_opcode() noexcept;
scsi::SenseData lba_out_of_range() noexcept;
scsi::SenseData write_protected() noexcept;

/// Sets plan.direction/transfer_length_bytes for a data-in command of `allocation_length` bytes.
void plan_data_in(CommandPlan& plan, std::uint32_t allocation_length) noexcept;

/// Copies `data` (truncated to the allocation length = out.size()) to `out` and returns GOOD with
/// the number of bytes copied.
ScsiOutcome reply_data(ConstByteSpan data, ByteSpan out) noexcept;

// --- SPC-5 ---
void plan_inquiry(CommandPlan& plan, ConstByteSpan cdb) noexcept;
ScsiOutcome execute_inquiry(const CommandPlan& plan, ConstByteSpan cdb, ByteSpan out);
void plan_report_luns(CommandPlan& plan, ConstByteSpan cdb) noexcept;
ScsiOutcome execute_report_luns(const std::vector<scsi::Lun>& luns, ConstByteSpan cdb, ByteSpan out);
void plan_request_sense(CommandPlan& plan, ConstByteSpan cdb) noexcept;
ScsiOutcome execute_request_sense(const CommandPlan& plan, ConstByteSpan cdb, ByteSpan out);
void plan_mode_sense(CommandPlan& plan, ConstByteSpan cdb) noexcept;
ScsiOutcome execute_mode_sense(const CommandPlan& plan, ConstByteSpan cdb, ByteSpan out);
void plan_maintenance_in(CommandPlan& plan, ConstByteSpan cdb) noexcept;
ScsiOutcome execute_report_supported_opcodes(ConstByteSpan cdb, ByteSpan out);

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

}  // namespace iserkit::target::detail

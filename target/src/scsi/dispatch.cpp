// ScsiDispatcher: the device server's opcode switch (SAM-5 §5, SPC-5 §4.2.5 opcode table): routes
// each CDB to its SPC-5 or SBC-4 handler in two phases (plan, execute), answers INVALID COMMAND
// OPERATION CODE for anything unknown and LOGICAL UNIT NOT SUPPORTED for commands to an
// unconfigured LUN (SPC-5 §4.6.5: INQUIRY, REPORT LUNS and REQUEST SENSE still work there).
#include <algorithm>
#include <cassert>
#include <cstring>

#include "iserkit/common/errors.hpp"
#include "scsi/handlers.hpp"

namespace iserkit::target {

using scsi::Opcode;

namespace detail {

scsi::SenseData illegal_request(scsi::AscPair pair) noexcept {
  return scsi::SenseData::make(scsi::SenseKey::illegal_request, pair);
}
scsi::SenseData invalid_opcode() noexcept { return illegal_request(scsi::asc::invalid_command_operation_code); }
scsi::SenseData lba_out_of_range() noexcept { return illegal_request(scsi::asc::lba_out_of_range); }
scsi::SenseData write_protected() noexcept {
  return scsi::SenseData::make(scsi::SenseKey::data_protect, scsi::asc::write_protected);
}

void plan_data_in(CommandPlan& plan, std::uint32_t allocation_length) noexcept {
  plan.direction = DataDirection::from_target;
  plan.transfer_length_bytes = allocation_length;
}

ScsiOutcome reply_data(ConstByteSpan data, ByteSpan out) noexcept {
  const std::size_t n = std::min(data.size(), out.size());
  if (n != 0) std::memcpy(out.data(), data.data(), n);
  return ScsiOutcome::good(static_cast<std::uint32_t>(n));
}

}  // namespace detail

Result<void> ScsiDispatcher::add_logical_unit(std::uint16_t lun_index, std::shared_ptr<LogicalUnit> lu) {
  if (!lu || lun_index > 16383 || units_.contains(lun_index)) return fail(errc::invalid_argument);
  units_.emplace(lun_index, std::move(lu));
  return {};
}

std::vector<scsi::Lun> ScsiDispatcher::luns() const {
  std::vector<scsi::Lun> out;
  out.reserve(units_.size());
  for (const auto& [index, lu] : units_) out.push_back(scsi::Lun::from_index(index));
  return out;
}

const LogicalUnit* ScsiDispatcher::find(scsi::Lun lun) const noexcept {
  const auto index = lun.index();
  if (!index) return nullptr;
  const auto it = units_.find(*index);
  return it == units_.end() ? nullptr : it->second.get();
}

CommandPlan ScsiDispatcher::plan(scsi::Lun lun, ConstByteSpan cdb) const noexcept {
  CommandPlan p;
  if (cdb.empty()) {
    p.error = detail::invalid_opcode();
    return p;
  }
  const auto raw_opcode = static_cast<std::uint8_t>(cdb[0]);
  p.opcode = static_cast<Opcode>(raw_opcode);
  p.unit = find(lun);
  const std::size_t need = scsi::cdb_length_for(raw_opcode);
  if (need == 0 || cdb.size() < need) {
    p.error = detail::invalid_opcode();
    return p;
  }
  switch (p.opcode) {
    // SPC-5 §4.6.5: these three answer even when no logical unit exists at the LUN.
    case Opcode::inquiry: detail::plan_inquiry(p, cdb); break;
    case Opcode::report_luns: detail::plan_report_luns(p, cdb); break;
    case Opcode::request_sense: detail::plan_request_sense(p, cdb); break;
    default:
      if (p.unit == nullptr) {
        p.error = detail::illegal_request(scsi::asc::logical_unit_not_supported);
        return p;
      }
      switch (p.opcode) {
        case Opcode::test_unit_ready: break;
        case Opcode::mode_sense6:
        case Opcode::mode_sense10: detail::plan_mode_sense(p, cdb); break;
        case Opcode::maintenance_in: detail::plan_maintenance_in(p, cdb); break;
        case Opcode::read6: case Opcode::read10: case Opcode::read12: case Opcode::read16:
        case Opcode::write6: case Opcode::write10: case Opcode::write12: case Opcode::write16:
          detail::plan_read_write(p, cdb);
          break;
        case Opcode::read_capacity10: detail::plan_read_capacity10(p); break;
        case Opcode::service_action_in16: detail::plan_service_action_in16(p, cdb); break;
        case Opcode::synchronize_cache10:
        case Opcode::synchronize_cache16: detail::plan_synchronize_cache(p, cdb); break;
        case Opcode::unmap: detail::plan_unmap(p, cdb); break;
        case Opcode::write_same10:
        case Opcode::write_same16: detail::plan_write_same(p, cdb); break;
        default: p.error = detail::invalid_opcode(); break;
      }
  }
  if (p.error) {
    p.direction = DataDirection::none;
    p.transfer_length_bytes = 0;
  } else if (p.transfer_length_bytes == 0) {
    p.direction = DataDirection::none;
  }
  return p;
}

Awaitable<ScsiOutcome> ScsiDispatcher::execute(scsi::Lun lun, ConstByteSpan cdb, const CommandPlan& plan,
                                               ByteSpan data) const {
  (void)lun;
  if (plan.error) co_return ScsiOutcome::check_condition(*plan.error);  // misuse: report the planned error
  if (data.size() < plan.transfer_length_bytes) {
    // The transport gave fewer bytes than planned: never read or write past the buffer.
    co_return ScsiOutcome::check_condition(detail::illegal_request(scsi::asc::invalid_field_in_information_unit));
  }
  assert(plan.unit == find(lun));
  const ByteSpan buffer = data.first(plan.transfer_length_bytes);
  switch (plan.opcode) {
    case Opcode::inquiry: co_return detail::execute_inquiry(plan, cdb, buffer);
    case Opcode::report_luns: co_return detail::execute_report_luns(luns(), cdb, buffer);
    case Opcode::request_sense: co_return detail::execute_request_sense(plan, cdb, buffer);
    case Opcode::test_unit_ready: co_return ScsiOutcome::good();
    case Opcode::mode_sense6:
    case Opcode::mode_sense10: co_return detail::execute_mode_sense(plan, cdb, buffer);
    case Opcode::maintenance_in: co_return detail::execute_report_supported_opcodes(cdb, buffer);
    case Opcode::read6: case Opcode::read10: case Opcode::read12: case Opcode::read16:
      co_return co_await detail::execute_read(plan, buffer);
    case Opcode::write6: case Opcode::write10: case Opcode::write12: case Opcode::write16:
      co_return co_await detail::execute_write(plan, buffer);
    case Opcode::read_capacity10: co_return detail::execute_read_capacity10(plan, buffer);
    case Opcode::service_action_in16: co_return detail::execute_read_capacity16(plan, buffer);
    case Opcode::synchronize_cache10:
    case Opcode::synchronize_cache16: co_return co_await detail::execute_synchronize_cache(plan);
    case Opcode::unmap: co_return co_await detail::execute_unmap(plan, buffer);
    case Opcode::write_same10:
    case Opcode::write_same16: co_return co_await detail::execute_write_same(plan, buffer);
    default: co_return ScsiOutcome::check_condition(detail::invalid_opcode());
  }
}

}  // namespace iserkit::target

// SPC-5 commands that read or change the logical unit state shared by every I_T nexus: MODE
// SELECT (6)/(10) (§6.11, §6.12; only SWP of the control mode page §7.5.8 is changeable),
// RESERVE (6)/RELEASE (6) (SPC-2 §7.21, §7.19) and PERSISTENT RESERVE IN/OUT (§6.17, §6.18; the
// state machine is persistent_reservations.cpp). Each takes the LU's mutex for a short,
// non-suspending section.
#include <mutex>

#include "iserkit/scsi/block_cdb.hpp"
#include "scsi/device_state.hpp"
#include "scsi/handlers.hpp"

namespace iserkit::target::detail {

using scsi::Opcode;

namespace {

constexpr std::uint8_t caching_page = 0x08;
constexpr std::uint8_t control_page = 0x0a;

scsi::SenseData parameter_list_length_error() noexcept {
  return scsi::SenseData::make(scsi::SenseKey::illegal_request, scsi::asc::parameter_list_length_error);
}

// Queues `asc` for every open nexus except `except` (0 = none).
void tell_other_nexuses(UnitState& unit, const ScsiDispatcher::State& state, std::uint64_t except, scsi::AscPair asc) {
  for (auto id : state.all_nexuses())
    if (id != except) unit.add_unit_attention(id, asc);
}

}  // namespace

void plan_mode_select(CommandPlan& plan, ConstByteSpan cdb) noexcept {
  const auto m = scsi::parse_mode_select_cdb(cdb);
  if (!parsed_cdb(plan, m)) return;
  if (m->sp) {  // SPC-5 §6.11: no saved pages → INVALID FIELD IN CDB (SP)
    plan.error = scsi::SenseData::invalid_field_in_cdb(1, 0);
    return;
  }
  plan.direction = DataDirection::to_target;
  plan.transfer_length_bytes = m->parameter_list_length;
}

ScsiOutcome execute_mode_select(const CommandPlan& plan, UnitState& unit, const ScsiDispatcher::State& state,
                                std::uint64_t nexus, ConstByteSpan cdb, ConstByteSpan parameters) {
  (void)plan;
  const auto m = scsi::parse_mode_select_cdb(cdb);
  if (!m) return ScsiOutcome::check_condition(m.error());
  if (parameters.empty()) return ScsiOutcome::good();  // SPC-5 §6.11: length 0 transfers nothing
  // SPC-5 §7.5.5/§7.5.6: the mode parameter header (4 or 8 bytes) with the block descriptor length.
  const std::size_t header = m->ten ? 8 : 4;
  if (parameters.size() < header) return ScsiOutcome::check_condition(parameter_list_length_error());
  const std::size_t descriptors = m->ten ? load_be16(parameters.data() + 6) : load_u8(parameters.data() + 3);
  std::size_t pos = header + descriptors;
  if (pos > parameters.size()) return ScsiOutcome::check_condition(parameter_list_length_error());
  std::optional<bool> new_swp;
  while (pos < parameters.size()) {
    if (parameters.size() - pos < 2) return ScsiOutcome::check_condition(parameter_list_length_error());
    const std::uint8_t b0 = load_u8(parameters.data() + pos);
    const std::uint8_t code = b0 & 0x3f;
    const bool spf = (b0 & 0x40) != 0;
    // A sub_page format header is 4 bytes (its PAGE LENGTH is bytes 2-3), a page_0 one 2.
    if (spf && parameters.size() - pos < 4) return ScsiOutcome::check_condition(parameter_list_length_error());
    const std::size_t length = spf ? 4 + std::size_t{load_be16(parameters.data() + pos + 2)}
                                   : 2 + std::size_t{load_u8(parameters.data() + pos + 1)};
    if (pos + length > parameters.size()) return ScsiOutcome::check_condition(parameter_list_length_error());
    if (spf || (code != control_page && code != caching_page))
      return ScsiOutcome::check_condition(scsi::SenseData::invalid_field_in_parameter_list(static_cast<std::uint16_t>(pos)));
    // Only SWP (control page byte 4 bit 3) is changeable; other fields are not changed.
    if (code == control_page && length >= 5) new_swp = (load_u8(parameters.data() + pos + 4) & 0x08) != 0;
    pos += length;
  }
  if (new_swp) {
    std::lock_guard g(unit.mutex);
    if (unit.software_write_protect != *new_swp) {
      unit.software_write_protect = *new_swp;
      // SPC-5 §7.5.1: other I_T nexuses learn of changed mode parameters by a unit attention.
      tell_other_nexuses(unit, state, nexus, scsi::asc::mode_parameters_changed);
    }
  }
  return ScsiOutcome::good();
}

ScsiOutcome execute_reserve_release6(const CommandPlan& plan, UnitState& unit, std::uint64_t nexus) {
  std::lock_guard g(unit.mutex);
  if (plan.opcode == Opcode::reserve6) {
    // SPC-2 §7.21: a second RESERVE from the holder is no change; another nexus was refused in plan().
    if (unit.reserve6_holder && *unit.reserve6_holder != nexus) return ScsiOutcome::reservation_conflict();
    unit.reserve6_holder = nexus;
  } else if (unit.reserve6_holder == nexus) {
    // SPC-2 §7.19: RELEASE from a nexus that holds no reservation is GOOD with no effect.
    unit.reserve6_holder.reset();
  }
  return ScsiOutcome::good();
}

void plan_persistent_reserve_in(CommandPlan& plan, ConstByteSpan cdb) noexcept {
  const auto p = scsi::parse_persistent_reserve_in_cdb(cdb);
  if (!parsed_cdb(plan, p)) return;
  if (p->service_action > 3) {  // SPC-5 §6.17.1, table 175
    plan.error = scsi::SenseData::invalid_field_in_cdb(1, 4);
    return;
  }
  plan_data_in(plan, p->allocation_length);
}

ScsiOutcome execute_persistent_reserve_in(UnitState& unit, ConstByteSpan cdb, ByteSpan out) {
  const auto p = scsi::parse_persistent_reserve_in_cdb(cdb);
  if (!p) return ScsiOutcome::check_condition(p.error());
  std::optional<std::vector<std::byte>> data;
  {
    std::lock_guard g(unit.mutex);
    data = unit.persistent.in(p->service_action);
  }
  if (!data) return ScsiOutcome::check_condition(scsi::SenseData::invalid_field_in_cdb(1, 4));
  // SPC-5 §6.17.2: truncated to the allocation length; the lengths inside are not changed.
  return reply_data(*data, out);
}

void plan_persistent_reserve_out(CommandPlan& plan, ConstByteSpan cdb) noexcept {
  const auto p = scsi::parse_persistent_reserve_out_cdb(cdb);
  if (!parsed_cdb(plan, p)) return;
  // SPC-5 §6.18.3: with SPEC_I_PT 0 (the only form supported) the list is exactly 24 bytes.
  if (p->parameter_list_length != 24) {
    plan.error = parameter_list_length_error();
    return;
  }
  plan.direction = DataDirection::to_target;
  plan.transfer_length_bytes = p->parameter_list_length;
}

ScsiOutcome execute_persistent_reserve_out(UnitState& unit, const ScsiDispatcher::State& state, const std::string& port,
                                           ConstByteSpan cdb, ConstByteSpan parameters) {
  const auto c = scsi::parse_persistent_reserve_out_cdb(cdb);
  if (!c) return ScsiOutcome::check_condition(c.error());
  const auto params = scsi::parse_persistent_reserve_out_parameters(parameters);
  if (!params) return ScsiOutcome::check_condition(params.error());
  std::lock_guard g(unit.mutex);
  // REGISTER and MODE SELECT-like changes are refused while another nexus holds RESERVE(6)
  // (plan() answered RESERVATION CONFLICT already); here only the PR state machine runs.
  auto result = unit.persistent.out(port, *c, *params);
  for (const auto& ua : result.unit_attentions)
    for (auto id : state.nexuses_named(ua.initiator_port)) unit.add_unit_attention(id, ua.asc);
  // PREEMPT AND ABORT: tasks of the preempted nexuses are not aborted across sessions (a gap,
  // see target/README.md); their registrations are gone, so their next commands conflict.
  return ScsiOutcome{result.status, result.sense, 0};
}

}  // namespace iserkit::target::detail

// SET TARGET PORT GROUPS (MAINTENANCE OUT, service action 0Ah; SPC-4 §6.45): explicit ALUA. The
// parameter list names target port groups and the state each should take; this process's groups
// move together (one gateway is active/optimized, the others standby: target/README.md "ALUA
// failover"), so the list boils down to "make this gateway active" or "make it standby", which
// the table's AluaTransitions (the failover coordinator) carries out. The command completes once
// the states are there, or fails after stpg_timeout.
#include <algorithm>
#include <chrono>
#include <optional>

#include "iserkit/common/log.hpp"
#include "iserkit/scsi/alua.hpp"
#include "scsi/handlers.hpp"

namespace iserkit::target::detail {

namespace {

constexpr std::uint8_t set_target_port_groups_sa = 0x0a;
// Longest parameter list taken: 4 + 4 bytes per group; far more groups than a target has.
constexpr std::uint32_t max_stpg_parameter_list_bytes = 4 + 4 * 1024;
// How long the command waits for the hand-over (the active gateway drains its writes first).
constexpr std::chrono::seconds stpg_timeout{15};
constexpr std::chrono::milliseconds stpg_poll{20};

scsi::SenseData invalid_parameter(std::uint16_t byte) noexcept {
  return scsi::SenseData::invalid_field_in_parameter_list(byte);
}

}  // namespace

void plan_maintenance_out(CommandPlan& plan, ConstByteSpan cdb) noexcept {
  // SPC-4 §6.45.1: PARAMETER LIST LENGTH in bytes 6..9; 0 is no list, not an error.
  if ((load_u8(cdb.data() + 1) & 0x1f) != set_target_port_groups_sa || !plan.explicit_alua) {
    plan.error = plan.explicit_alua ? scsi::SenseData::invalid_field_in_cdb(1, 4) : invalid_opcode();
    return;
  }
  const std::uint32_t length = load_be32(cdb.data() + 6);
  if (length > max_stpg_parameter_list_bytes) {
    plan.error = scsi::SenseData::invalid_field_in_cdb(6, 7);
    return;
  }
  plan.direction = length == 0 ? DataDirection::none : DataDirection::to_target;
  plan.transfer_length_bytes = length;
}

Awaitable<ScsiOutcome> execute_set_target_port_groups(const PortGroupTable& table, ConstByteSpan parameters) {
  const auto transitions = table.transitions();
  if (!transitions) {
    // Gone (the target is stopping): the transition cannot be made.
    co_return ScsiOutcome::check_condition(
        scsi::SenseData::make(scsi::SenseKey::hardware_error, scsi::asc::set_target_port_groups_command_failed));
  }
  const auto list = scsi::parse_set_target_port_groups(parameters);
  if (!list) co_return ScsiOutcome::check_condition(illegal_request(scsi::asc::parameter_list_length_error));
  // Each descriptor says whether this gateway should be the active one: its own group
  // active/optimized or a peer's standby → yes; its own standby or a peer's active/optimized →
  // no. SPC-4 §6.45.2: an unknown group, a state not supported, or a combination that cannot be
  // had (two active gateways) → INVALID FIELD IN PARAMETER LIST.
  const auto groups = table.groups();
  std::optional<bool> want_active;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const auto& d = (*list)[i];
    const auto byte = static_cast<std::uint16_t>(4 + 4 * i);
    const bool known = std::any_of(groups.begin(), groups.end(), [&](const TargetPortGroup& g) { return g.id == d.id; });
    if (!known) co_return ScsiOutcome::check_condition(invalid_parameter(byte + 2));
    if (d.state != AluaState::active_optimized && d.state != AluaState::standby)
      co_return ScsiOutcome::check_condition(invalid_parameter(byte));
    const bool local = transitions->is_local(d.id);
    const bool active = local == (d.state == AluaState::active_optimized);
    if (want_active && *want_active != active) co_return ScsiOutcome::check_condition(invalid_parameter(byte));
    want_active = active;
  }
  if (!want_active) co_return ScsiOutcome::good();
  const AluaState goal = *want_active ? AluaState::active_optimized : AluaState::standby;
  auto settled = [&] {
    for (const auto& g : groups)
      if (transitions->is_local(g.id) && table.state(g.id) != goal) return false;
    return true;
  };
  if (settled()) co_return ScsiOutcome::good();
  log::info("alua: SET TARGET PORT GROUPS: this gateway to {}", to_string(goal));
  transitions->request(*want_active);
  asio::steady_timer timer(co_await asio::this_coro::executor);
  const auto deadline = std::chrono::steady_clock::now() + stpg_timeout;
  while (!settled()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      log::warn("alua: SET TARGET PORT GROUPS: this gateway is not {} after {} s", to_string(goal),
                stpg_timeout.count());
      // SPC-4 §6.45.1: the transition failed: HARDWARE ERROR, SET TARGET PORT GROUPS COMMAND FAILED.
      co_return ScsiOutcome::check_condition(
          scsi::SenseData::make(scsi::SenseKey::hardware_error, scsi::asc::set_target_port_groups_command_failed));
    }
    timer.expires_after(stpg_poll);
    boost::system::error_code ec;
    co_await timer.async_wait(use_awaitable_ec(ec));
  }
  co_return ScsiOutcome::good();
}

}  // namespace iserkit::target::detail

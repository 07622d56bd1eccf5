// ScsiDispatcher: the device server's command routing (SAM-5 §5, SPC-5 §4.2.5 opcode table): unit
// attention reporting (SAM-5 §5.14), reservation conflicts (SPC-5 §5.14.1, SPC-2 §5.5.1), then
// each CDB to its SPC-5 or SBC-4 handler in two phases (plan, execute); INVALID COMMAND OPERATION
// CODE for anything unknown and LOGICAL UNIT NOT SUPPORTED for commands to an unconfigured LUN
// (SPC-5 §4.6.5: INQUIRY, REPORT LUNS and REQUEST SENSE still work there). Also the nexus and task
// management entry points that change per-LU state.
#include <algorithm>
#include <cassert>
#include <cctype>
#include <cstring>

#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"
#include "scsi/command_table.hpp"
#include "scsi/device_state.hpp"
#include "scsi/extended_copy.hpp"
#include "scsi/handlers.hpp"
#include "scsi/sanitize.hpp"
#include "scsi/token_copy.hpp"

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
  // The transport allocates this many bytes before execute(): bound what a peer can ask for.
  plan.transfer_length_bytes = std::min(allocation_length, max_data_in_allocation_bytes);
}

ScsiOutcome reply_data(ConstByteSpan data, ByteSpan out) noexcept {
  const std::size_t n = std::min(data.size(), out.size());
  if (n != 0) std::memcpy(out.data(), data.data(), n);
  return ScsiOutcome::good(static_cast<std::uint32_t>(n));
}

bool is_media_write(Opcode op) noexcept {
  switch (op) {
    case Opcode::write6: case Opcode::write10: case Opcode::write12: case Opcode::write16:
    case Opcode::write_and_verify10: case Opcode::write_and_verify12: case Opcode::write_and_verify16:
    case Opcode::compare_and_write: case Opcode::orwrite16: case Opcode::write_atomic16:
    case Opcode::write_same10: case Opcode::write_same16:
      return true;
    default:
      return false;
  }
}

}  // namespace detail

bool shorten_transfer(CommandPlan& plan, std::uint32_t edtl_bytes) noexcept {
  if (edtl_bytes >= plan.transfer_length_bytes) return true;
  if (!plan.shortenable || plan.unit == nullptr) return false;
  const std::uint32_t bs = plan.unit->block_size_bytes();
  // RFC 7143 §11.4.5.1: the target may run the command on the data the initiator sends, reporting
  // the rest as overflow. Only whole blocks can be written.
  if (edtl_bytes % bs != 0) return false;
  plan.blocks = edtl_bytes / bs;
  plan.transfer_length_bytes = edtl_bytes;
  if (edtl_bytes == 0) plan.direction = DataDirection::none;
  return true;
}

std::optional<scsi::SenseData> check_data_out_length(const CommandPlan& plan, std::uint32_t edtl_bytes) noexcept {
  if (!plan.exact_data_out || plan.rejected() || edtl_bytes <= plan.transfer_length_bytes) return std::nullopt;
  // The CDB's length field disagrees with the data the initiator sends.
  const std::uint16_t field = plan.opcode == Opcode::compare_and_write                                 ? 13
                              : plan.opcode == Opcode::write_same10 || plan.opcode == Opcode::sanitize ? 7
                                                                                                        : 10;
  return scsi::SenseData::invalid_field_in_cdb(field);
}

ScsiDispatcher::ScsiDispatcher() : state_(std::make_unique<State>()) {
  state_->copy_manager = std::make_shared<detail::CopyManager>();
  state_->tokens = detail::TokenStore::process();
  state_->rod_statuses = std::make_shared<detail::RodStatuses>();
}
ScsiDispatcher::~ScsiDispatcher() {
  stop_background_operations();
  // Its ROD tokens go with the device server (they name its logical units and range locks).
  state_->tokens->drop_server(state_.get());
}

void ScsiDispatcher::stop_background_operations() noexcept {
  for (auto* u : state_->all_units()) {
    u->sanitize->stop.store(true);
    u->resets->fetch_add(1);  // background WRITE USING TOKEN copies stop at their next chunk
  }
}

Result<void> ScsiDispatcher::add_logical_unit(std::uint16_t lun_index, std::shared_ptr<LogicalUnit> lu) {
  if (!lu || lun_index > 16383) return fail(errc::invalid_argument);
  std::vector<detail::UnitState*> existing;
  {
    std::unique_lock lock(state_->units_mutex);
    if (state_->units.contains(lun_index)) return fail(errc::invalid_argument);
    auto unit = std::make_unique<detail::UnitState>();
    unit->unit = std::move(lu);
    unit->sanitize = std::make_shared<detail::SanitizeState>();
    state_->units.emplace(lun_index, std::move(unit));
    for (auto& [index, u] : state_->units) existing.push_back(u.get());
  }
  // SPC-5 §6.33 / SAM-5 §5.14: the LUN inventory changed: every nexus hears of it on every LU.
  const auto ids = state_->all_nexuses();
  for (auto* u : existing) {
    std::lock_guard g(u->mutex);
    for (auto id : ids) u->add_unit_attention(id, scsi::asc::reported_luns_data_has_changed);
  }
  return {};
}

std::vector<scsi::Lun> ScsiDispatcher::luns() const {
  std::shared_lock lock(state_->units_mutex);
  std::vector<scsi::Lun> out;
  out.reserve(state_->units.size());
  for (const auto& [index, lu] : state_->units) out.push_back(scsi::Lun::from_index(index));
  return out;
}

const LogicalUnit* ScsiDispatcher::find(scsi::Lun lun) const noexcept {
  auto* u = state_->unit(lun);
  return u == nullptr ? nullptr : u->unit.get();
}

NexusId ScsiDispatcher::open_nexus(std::string initiator_port_name, TargetPort port, std::string origin) {
  // ALUA state changes from before this nexus existed are not news to it (it reads the states).
  state_->note_port_group_changes();
  std::uint64_t id = 0;
  {
    std::lock_guard g(state_->nexus_mutex);
    id = state_->next_nexus++;
    state_->nexuses.emplace(id, std::move(initiator_port_name));
    state_->nexus_ports.emplace(id, port);
    state_->nexus_origins.emplace(id, std::move(origin));
  }
  // SAM-5 §5.14 / §6.3.1: a new I_T nexus first hears POWER ON, RESET, OR BUS DEVICE RESET OCCURRED.
  for (auto* u : state_->all_units()) {
    std::lock_guard g(u->mutex);
    u->unit_attentions[id] = {scsi::asc::power_on_reset_or_bus_device_reset};
  }
  return NexusId{id};
}

void ScsiDispatcher::close_nexus(NexusId nexus) noexcept {
  {
    std::lock_guard g(state_->nexus_mutex);
    if (state_->nexuses.erase(nexus.value) == 0) return;
    state_->nexus_ports.erase(nexus.value);
    state_->nexus_origins.erase(nexus.value);
  }
  state_->copy_manager->forget(nexus.value);  // SPC-4 §6.18.3: held copy statuses end with the nexus
  state_->rod_statuses->forget(nexus.value);  // so do ROD token information statuses (not the tokens)
  for (auto* u : state_->all_units()) {
    std::lock_guard g(u->mutex);
    u->unit_attentions.erase(nexus.value);
    // SPC-2 §5.5.1: an I_T nexus loss releases the RESERVE(6) reservation the nexus held.
    if (u->reserve6_holder == nexus.value) u->reserve6_holder.reset();
  }
}

Result<std::shared_ptr<PortGroupTable>> PortGroupTable::make(std::vector<TargetPortGroup> groups) {
  if (groups.empty()) return fail(errc::invalid_argument);
  std::vector<std::uint16_t> ids;
  std::vector<std::uint16_t> ports;
  for (const auto& g : groups) {
    if (g.id == 0 || std::find(ids.begin(), ids.end(), g.id) != ids.end()) return fail(errc::invalid_argument);
    if (!parse_alua_state(to_string(g.state))) return fail(errc::invalid_argument);  // only the four we run
    ids.push_back(g.id);
    for (auto p : g.relative_ports) {
      if (p == 0 || std::find(ports.begin(), ports.end(), p) != ports.end()) return fail(errc::invalid_argument);
      ports.push_back(p);
    }
  }
  return std::make_shared<PortGroupTable>(std::move(groups));
}

PortGroupTable::PortGroupTable(std::vector<TargetPortGroup> groups)
    : groups_(std::move(groups)), states_(std::make_unique<std::atomic<std::uint8_t>[]>(groups_.size())) {
  for (std::size_t i = 0; i < groups_.size(); ++i) states_[i].store(static_cast<std::uint8_t>(groups_[i].state));
}

std::vector<TargetPortGroup> PortGroupTable::groups() const {
  std::vector<TargetPortGroup> out = groups_;
  for (std::size_t i = 0; i < out.size(); ++i) out[i].state = static_cast<AluaState>(states_[i].load());
  return out;
}

AluaState PortGroupTable::state(std::uint16_t id) const noexcept {
  for (std::size_t i = 0; i < groups_.size(); ++i)
    if (groups_[i].id == id) return static_cast<AluaState>(states_[i].load());
  return AluaState::active_optimized;
}

bool PortGroupTable::set_states(const std::vector<std::pair<std::uint16_t, AluaState>>& states) noexcept {
  bool changed = false;
  for (const auto& [id, state] : states) {
    for (std::size_t i = 0; i < groups_.size(); ++i) {
      if (groups_[i].id != id) continue;
      if (states_[i].exchange(static_cast<std::uint8_t>(state)) != static_cast<std::uint8_t>(state)) changed = true;
    }
  }
  // Seq-cst (the exchanges above): a write that took its LBA range after this and then reads the
  // state sees the new one (quiesce_writes()).
  if (changed) generation_.fetch_add(1);
  return changed;
}

Result<void> ScsiDispatcher::set_port_groups(std::vector<TargetPortGroup> groups) {
  auto table = PortGroupTable::make(std::move(groups));
  if (!table) return fail(table.error());
  share_port_groups(std::move(*table));
  return {};
}

void ScsiDispatcher::share_port_groups(std::shared_ptr<PortGroupTable> table) noexcept {
  state_->seen_port_group_generation.store(table->generation());
  state_->port_groups = std::move(table);
}

std::vector<TargetPortGroup> ScsiDispatcher::port_groups() const { return state_->port_groups->groups(); }

Awaitable<void> ScsiDispatcher::quiesce_writes() const {
  for (auto* u : state_->all_units()) {
    // Every write holds its range across its ALUA check and its I/O: holding the whole medium
    // once means none accepted before is still running.
    { auto all = co_await detail::lock_range(u->ranges, 0, std::max<std::uint64_t>(u->unit->block_count(), 1)); }
    if (auto r = co_await u->unit->backend().flush(); !r)
      log::warn("alua: flush before the hand-over failed: {}", r.error().message());
  }
}

std::optional<AluaState> parse_alua_state(std::string_view name) noexcept {
  for (auto s : {AluaState::active_optimized, AluaState::active_non_optimized, AluaState::standby,
                 AluaState::unavailable})
    if (to_string(s) == name) return s;
  return std::nullopt;
}

void ScsiDispatcher::task_management(NexusId nexus, scsi::Lun lun, TaskManagement function) noexcept {
  (void)nexus;
  std::vector<detail::UnitState*> targets;
  scsi::AscPair ua = scsi::asc::bus_device_reset_function_occurred;
  if (function == TaskManagement::logical_unit_reset) {
    if (auto* u = state_->unit(lun)) targets.push_back(u);
  } else {
    targets = state_->all_units();
    ua = function == TaskManagement::target_cold_reset ? scsi::asc::power_on_occurred
                                                       : scsi::asc::power_on_reset_or_bus_device_reset;
  }
  const auto ids = state_->all_nexuses();
  for (auto* u : targets) {
    std::lock_guard g(u->mutex);
    // SAM-5 §6.3.3 (hard reset / logical unit reset): RESERVE(6) reservations are released,
    // persistent reservations stay; every I_T nexus gets a unit attention; background copies into
    // the LU (WRITE USING TOKEN with IMMED) stop.
    u->reserve6_holder.reset();
    u->resets->fetch_add(1);
    for (auto id : ids) u->add_unit_attention(id, ua);
  }
}

namespace {

// SPC-2 §5.5.1 (RESERVE(6) reservations): commands another nexus may still send.
bool allowed_under_reserve6(Opcode op) noexcept {
  switch (op) {
    case Opcode::inquiry: case Opcode::report_luns: case Opcode::request_sense: case Opcode::release6:
    case Opcode::maintenance_in:
      return true;
    default:
      return false;
  }
}

// SPC-5 §5.16.2.4.4/§5.16.2.4.5/§5.16.2.5: what a target port in the standby, unavailable or
// transitioning state still runs; anything else gets NOT READY, LOGICAL UNIT NOT ACCESSIBLE
// (04h/0Bh standby, 04h/0Ch unavailable, 04h/0Ah transitioning). Standby also answers READ
// CAPACITY (10) and (16), which SPC-5's standby list does not name: Linux's sd reads the capacity
// when it scans a path and again only on a rescan, so a standby path that refused it stays a
// 0-byte disk, and dm-multipath fails every I/O sent through it after a failover made it active
// (the lab's alua-multipathd scenario showed it; the kernel's own LIO target answers it too).
bool allowed_in_alua_state(AluaState state, Opcode op, ConstByteSpan cdb) noexcept {
  const bool rtpg = op == Opcode::maintenance_in && (load_u8(cdb.data() + 1) & 0x1f) == 0x0a;
  const bool stpg = op == Opcode::maintenance_out && (load_u8(cdb.data() + 1) & 0x1f) == 0x0a;
  const bool read_capacity16 = op == Opcode::service_action_in16 && (load_u8(cdb.data() + 1) & 0x1f) == 0x10;
  switch (state) {
    case AluaState::active_optimized:
    case AluaState::active_non_optimized: return true;
    case AluaState::standby:
      switch (op) {
        case Opcode::inquiry: case Opcode::report_luns: case Opcode::request_sense: case Opcode::mode_sense6:
        case Opcode::mode_sense10: case Opcode::mode_select6: case Opcode::mode_select10: case Opcode::maintenance_in:
        case Opcode::persistent_reserve_in: case Opcode::persistent_reserve_out: case Opcode::read_capacity10:
          return true;
        default:
          return stpg || read_capacity16;
      }
    case AluaState::unavailable:
      return op == Opcode::inquiry || op == Opcode::report_luns || op == Opcode::request_sense || rtpg || stpg;
    case AluaState::transitioning:
      return op == Opcode::inquiry || op == Opcode::report_luns || op == Opcode::request_sense || rtpg;
    default:
      return false;  // PortGroupTable lets no other state in
  }
  return false;
}

// The NOT READY sense of a port in `state` (which does not process the command).
scsi::SenseData not_accessible(AluaState state) noexcept {
  switch (state) {
    case AluaState::standby: return scsi::SenseData::make(scsi::SenseKey::not_ready, scsi::asc::target_port_in_standby_state);
    case AluaState::transitioning:
      return scsi::SenseData::make(scsi::SenseKey::not_ready, scsi::asc::asymmetric_access_state_transition);
    default: return scsi::SenseData::make(scsi::SenseKey::not_ready, scsi::asc::target_port_in_unavailable_state);
  }
}

}  // namespace

CommandPlan ScsiDispatcher::plan(NexusId nexus, scsi::Lun lun, ConstByteSpan cdb) const noexcept {
  CommandPlan p;
  if (cdb.empty()) {
    p.error = detail::invalid_opcode();
    return p;
  }
  const auto raw_opcode = static_cast<std::uint8_t>(cdb[0]);
  p.opcode = static_cast<Opcode>(raw_opcode);
  detail::UnitState* unit_state = state_->unit(lun);
  p.unit = unit_state == nullptr ? nullptr : unit_state->unit.get();
  const std::size_t need = scsi::cdb_length_for(raw_opcode);
  if (need == 0 || cdb.size() < need) {
    p.error = detail::invalid_opcode();
    return p;
  }
  // SPC-5 §5.16.2.6: the port groups' states changed since the last command here: ASYMMETRIC
  // ACCESS STATE CHANGED for every I_T nexus of every LU (before this command's own check).
  state_->note_port_group_changes();
  if (unit_state != nullptr) {
    std::lock_guard g(unit_state->mutex);
    p.software_write_protect = unit_state->software_write_protect;
    p.write_protected = p.unit->read_only() || unit_state->software_write_protect;
    // SBC-4 §4.6: when the medium was resized (an RBD image by `rbd resize`), every I_T nexus gets
    // CAPACITY DATA HAS CHANGED and READ CAPACITY reports the new size. Checked here, under the
    // LU's mutex, so exactly one command notices and raises it (one atomic load when unchanged).
    if (unit_state->unit->refresh_capacity()) {
      for (auto id : state_->all_nexuses()) unit_state->add_unit_attention(id, scsi::asc::capacity_data_has_changed);
    }
    auto ua = unit_state->unit_attentions.find(nexus.value);
    if (ua != unit_state->unit_attentions.end()) {
      auto& queue = ua->second;
      if (p.opcode == Opcode::report_luns) {
        // SPC-5 §6.33: REPORT LUNS clears REPORTED LUNS DATA HAS CHANGED for its nexus.
        std::erase(queue, scsi::asc::reported_luns_data_has_changed);
      }
      // SAM-5 §5.14: INQUIRY, REPORT LUNS and REQUEST SENSE neither report nor clear a unit
      // attention; any other command is terminated with it, and it is cleared.
      const bool exempt = p.opcode == Opcode::inquiry || p.opcode == Opcode::report_luns || p.opcode == Opcode::request_sense;
      if (!exempt && !queue.empty()) {
        p.error = scsi::SenseData::make(scsi::SenseKey::unit_attention, queue.front());
        queue.pop_front();
        return p;
      }
    }
    // ALUA (SPC-5 §5.16.2.4): the nexus's target port group decides what runs.
    p.port = state_->target_port(nexus);
    p.explicit_alua = state_->port_groups->explicit_transitions();
    if (const auto alua = state_->group_state(p.port.group); !allowed_in_alua_state(alua, p.opcode, cdb)) {
      p.error = not_accessible(alua);
      return p;
    }
    // SBC-4 §4.11: a sanitize operation in progress (or failed) refuses most commands.
    if (auto refused = unit_state->sanitize->refuses(p.opcode)) {
      p.error = *refused;
      return p;
    }
    // SPC-2 §5.5.1: while another nexus holds a RESERVE(6) reservation, everything but a few
    // commands conflicts.
    if (unit_state->reserve6_holder && *unit_state->reserve6_holder != nexus.value && !allowed_under_reserve6(p.opcode)) {
      p.conflict = true;
      return p;
    }
    // SPC-5 §5.14.3: RESERVE(6)/RELEASE(6) conflict with a persistent reservation.
    if ((p.opcode == Opcode::reserve6 || p.opcode == Opcode::release6) && unit_state->persistent.has_reservation()) {
      p.conflict = true;
      return p;
    }
    // Lock order: a unit's mutex, then the nexus table's (port_name); never the other way round.
    const auto* info = detail::find_command(raw_opcode, detail::service_action_of(raw_opcode, load_u8(cdb.data() + 1)));
    if (info != nullptr && unit_state->persistent.has_reservation() &&
        unit_state->persistent.conflicts(state_->port_name(nexus), info->access)) {
      p.conflict = true;
      return p;
    }
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
        case Opcode::test_unit_ready:
        case Opcode::reserve6:
        case Opcode::release6: break;
        case Opcode::mode_sense6:
        case Opcode::mode_sense10: detail::plan_mode_sense(p, cdb); break;
        case Opcode::mode_select6:
        case Opcode::mode_select10: detail::plan_mode_select(p, cdb); break;
        case Opcode::maintenance_in: detail::plan_maintenance_in(p, cdb); break;
        case Opcode::maintenance_out: detail::plan_maintenance_out(p, cdb); break;
        case Opcode::persistent_reserve_in: detail::plan_persistent_reserve_in(p, cdb); break;
        case Opcode::persistent_reserve_out: detail::plan_persistent_reserve_out(p, cdb); break;
        case Opcode::read6: case Opcode::read10: case Opcode::read12: case Opcode::read16:
        case Opcode::write6: case Opcode::write10: case Opcode::write12: case Opcode::write16:
          detail::plan_read_write(p, cdb);
          break;
        case Opcode::verify10: case Opcode::verify12: case Opcode::verify16:
        case Opcode::write_and_verify10: case Opcode::write_and_verify12: case Opcode::write_and_verify16:
        case Opcode::compare_and_write: case Opcode::orwrite16: case Opcode::write_atomic16:
        case Opcode::prefetch10: case Opcode::prefetch16:
          detail::plan_block_command(p, cdb);
          break;
        case Opcode::start_stop_unit: detail::plan_start_stop_unit(p, cdb); break;
        case Opcode::read_defect_data10:
        case Opcode::read_defect_data12: detail::plan_read_defect_data(p, cdb); break;
        case Opcode::read_capacity10: detail::plan_read_capacity10(p); break;
        case Opcode::service_action_in16: detail::plan_service_action_in16(p, cdb); break;
        case Opcode::synchronize_cache10:
        case Opcode::synchronize_cache16: detail::plan_synchronize_cache(p, cdb); break;
        case Opcode::unmap: detail::plan_unmap(p, cdb); break;
        case Opcode::sanitize: detail::plan_sanitize(p, cdb); break;
        case Opcode::extended_copy:
          // SBC-4: POPULATE TOKEN and WRITE USING TOKEN share the opcode.
          if (const auto sa = load_u8(cdb.data() + 1) & 0x1f;
              sa == detail::populate_token_sa || sa == detail::write_using_token_sa)
            detail::plan_token_command(p, cdb);
          else
            detail::plan_extended_copy(p, cdb);
          break;
        case Opcode::receive_copy_results:
          if ((load_u8(cdb.data() + 1) & 0x1f) == detail::receive_rod_token_information_sa)
            detail::plan_receive_rod_token_information(p, cdb);
          else
            detail::plan_receive_copy_results(p, cdb);
          break;
        case Opcode::write_same10:
        case Opcode::write_same16: detail::plan_write_same(p, cdb); break;
        default: p.error = detail::invalid_opcode(); break;
      }
  }
  if (p.rejected()) {
    p.direction = DataDirection::none;
    p.transfer_length_bytes = 0;
  } else if (p.transfer_length_bytes == 0) {
    p.direction = DataDirection::none;
  }
  return p;
}

namespace {
bool is_plain_read(Opcode op) noexcept {
  return op == Opcode::read6 || op == Opcode::read10 || op == Opcode::read12 || op == Opcode::read16;
}
bool is_plain_write(Opcode op) noexcept {
  return op == Opcode::write6 || op == Opcode::write10 || op == Opcode::write12 || op == Opcode::write16;
}
}  // namespace

// The same steps as execute() → execute_read()/execute_write() for these opcodes: the checks of
// execute()'s prelude, the range lock for a write (taken only if free), the backend transfer.
MediaIoStart ScsiDispatcher::start_media_io(scsi::Lun lun, const CommandPlan& plan, ByteSpan data, MediaIo& io) const {
  io.spliced = false;  // io.splice_pipe is the caller's (reads only); the backend sets it
  const bool reading = is_plain_read(plan.opcode);
  if (plan.rejected() || plan.blocks == 0 || (!reading && !is_plain_write(plan.opcode))) return MediaIoStart::unsupported;
  if (data.size() < plan.transfer_length_bytes) return MediaIoStart::unsupported;
  // A backend without the path (memory, RBD) costs no LU lookup and no range lock here.
  if (plan.unit == nullptr || !plan.unit->backend().capabilities().can_start_transfer) return MediaIoStart::unsupported;
  detail::UnitState* unit_state = state_->unit(lun);
  if (unit_state == nullptr || plan.unit != unit_state->unit.get()) return MediaIoStart::unsupported;
  const LogicalUnit& unit = *plan.unit;
  io.range_lock_ = nullptr;
  if (!reading) {
    // SBC-4 §5.3: a COMPARE AND WRITE holding an overlapping range makes this write wait: that is
    // execute()'s (it polls); here only a free range is taken.
    if (!unit_state->ranges.try_lock(plan.lba, plan.blocks)) return MediaIoStart::unsupported;
    io.range_lock_ = &unit_state->ranges;
    io.lba_ = plan.lba;
    io.blocks_ = plan.blocks;
    // SPC-5 §5.16.2.4: checked again with the range held (quiesce_writes() relies on it): a port
    // that left the active states since plan() writes nothing.
    if (const auto alua = state_->group_state(plan.port.group); !scsi::processes_io(alua)) {
      io.range_lock_->unlock(io.lba_, io.blocks_);
      io.range_lock_ = nullptr;
      io.outcome = ScsiOutcome::check_condition(not_accessible(alua));
      return MediaIoStart::completed;
    }
  }
  // As in execute(): checked with the range held, so a sanitize operation starting now waits for
  // this write (SBC-4 §4.11); one already under way answers through execute().
  if (unit_state->sanitize->refuses(plan.opcode)) {
    if (io.range_lock_ != nullptr) io.range_lock_->unlock(io.lba_, io.blocks_);
    io.range_lock_ = nullptr;
    return MediaIoStart::unsupported;
  }
  io.writing = !reading;
  io.offset_bytes = plan.lba * unit.block_size_bytes();
  io.data = data.data();
  io.length_bytes = plan.transfer_length_bytes;
  io.fua = plan.fua ? Fua::yes : Fua::no;  // SBC-4 §5.41
  const TransferStart started = unit.backend().start_transfer(io);
  if (started == TransferStart::started) return MediaIoStart::started;
  if (io.range_lock_ != nullptr) io.range_lock_->unlock(io.lba_, io.blocks_);
  if (started == TransferStart::unsupported) return MediaIoStart::unsupported;
  io.outcome = io.result ? ScsiOutcome::good(reading ? static_cast<std::uint32_t>(io.length_bytes) : 0)
                         : detail::outcome_of(io.result, !reading);
  return MediaIoStart::completed;
}

void MediaIo::transferred(Result<void> result) noexcept {
  if (range_lock_ != nullptr) {
    range_lock_->unlock(lba_, blocks_);
    range_lock_ = nullptr;
  }
  complete(result ? ScsiOutcome::good(writing ? 0 : static_cast<std::uint32_t>(length_bytes))
                  : detail::outcome_of(result, writing));
}

Awaitable<ScsiOutcome> ScsiDispatcher::execute(NexusId nexus, scsi::Lun lun, ConstByteSpan cdb, const CommandPlan& plan,
                                               ByteSpan data) const {
  if (plan.rejected()) co_return plan.early_outcome();  // misuse: report the planned answer
  if (data.size() < plan.transfer_length_bytes) {
    // The transport gave fewer bytes than planned: never read or write past the buffer.
    co_return ScsiOutcome::check_condition(detail::illegal_request(scsi::asc::invalid_field_in_information_unit));
  }
  detail::UnitState* unit_state = state_->unit(lun);
  assert(plan.unit == (unit_state == nullptr ? nullptr : unit_state->unit.get()));
  const ByteSpan buffer = data.first(plan.transfer_length_bytes);
  // SBC-4 §5.3: COMPARE AND WRITE is atomic; every other write to an overlapping range waits.
  std::optional<detail::RangeGuard> guard;
  if (unit_state != nullptr && detail::is_media_write(plan.opcode) && plan.blocks != 0) {
    guard.emplace(co_await detail::lock_range(unit_state->ranges, plan.lba, plan.blocks));
    // SPC-5 §5.16.2.4: checked again with the range held (quiesce_writes() relies on it).
    if (const auto alua = state_->group_state(plan.port.group); !scsi::processes_io(alua))
      co_return ScsiOutcome::check_condition(not_accessible(alua));
  }
  // SBC-4 §4.11: a sanitize operation may have started since plan(); a write that holds its range
  // here is one the operation waits for (execute_sanitize), any other stops now.
  if (unit_state != nullptr && plan.opcode != Opcode::sanitize) {
    if (auto refused = unit_state->sanitize->refuses(plan.opcode)) co_return ScsiOutcome::check_condition(*refused);
  }
  switch (plan.opcode) {
    case Opcode::inquiry: co_return detail::execute_inquiry(plan, cdb, buffer);
    case Opcode::report_luns: co_return detail::execute_report_luns(luns(), cdb, buffer);
    case Opcode::request_sense: co_return detail::execute_request_sense(plan, unit_state, nexus.value, cdb, buffer);
    case Opcode::test_unit_ready: co_return ScsiOutcome::good();
    case Opcode::mode_sense6:
    case Opcode::mode_sense10: co_return detail::execute_mode_sense(plan, cdb, buffer);
    case Opcode::mode_select6:
    case Opcode::mode_select10: co_return detail::execute_mode_select(plan, *unit_state, *state_, nexus.value, cdb, buffer);
    case Opcode::maintenance_in:
      if ((load_u8(cdb.data() + 1) & 0x1f) == 0x0a)
        co_return detail::execute_report_target_port_groups(*state_->port_groups, cdb, buffer);
      co_return detail::execute_report_supported_opcodes(plan, cdb, buffer);
    case Opcode::maintenance_out: {
      auto outcome = co_await detail::execute_set_target_port_groups(*state_->port_groups, buffer);
      if (outcome.status == scsi::Status::good) {
        // SPC-5 §5.16.2.6: after an explicit change, every I_T nexus but the one that asked for it
        // gets ASYMMETRIC ACCESS STATE CHANGED.
        state_->note_port_group_changes();
        for (auto* u : state_->all_units()) {
          std::lock_guard g(u->mutex);
          if (auto q = u->unit_attentions.find(nexus.value); q != u->unit_attentions.end())
            std::erase(q->second, scsi::asc::asymmetric_access_state_changed);
        }
      }
      co_return outcome;
    }
    case Opcode::reserve6:
    case Opcode::release6: co_return detail::execute_reserve_release6(plan, *unit_state, nexus.value);
    case Opcode::persistent_reserve_in: co_return detail::execute_persistent_reserve_in(*unit_state, cdb, buffer);
    case Opcode::persistent_reserve_out:
      co_return detail::execute_persistent_reserve_out(*unit_state, *state_, state_->port_name(nexus), cdb, buffer);
    case Opcode::read6: case Opcode::read10: case Opcode::read12: case Opcode::read16:
      co_return co_await detail::execute_read(plan, buffer);
    case Opcode::write6: case Opcode::write10: case Opcode::write12: case Opcode::write16:
    case Opcode::write_and_verify10: case Opcode::write_and_verify12: case Opcode::write_and_verify16:
    case Opcode::write_atomic16:
      co_return co_await detail::execute_write(plan, buffer);
    case Opcode::verify10: case Opcode::verify12: case Opcode::verify16:
      co_return co_await detail::execute_verify(plan, buffer);
    case Opcode::compare_and_write: co_return co_await detail::execute_compare_and_write(plan, buffer);
    case Opcode::orwrite16: co_return co_await detail::execute_orwrite(plan, buffer);
    case Opcode::prefetch10:
    case Opcode::prefetch16:
    case Opcode::start_stop_unit: co_return ScsiOutcome::good();
    case Opcode::read_defect_data10:
    case Opcode::read_defect_data12: co_return detail::execute_read_defect_data(cdb, buffer);
    case Opcode::read_capacity10: co_return detail::execute_read_capacity10(plan, buffer);
    case Opcode::service_action_in16:
      if ((load_u8(cdb.data() + 1) & 0x1f) == static_cast<std::uint8_t>(scsi::ServiceActionIn16::get_lba_status))
        co_return co_await detail::execute_get_lba_status(plan, cdb, buffer);
      co_return detail::execute_read_capacity16(plan, buffer);
    case Opcode::synchronize_cache10:
    case Opcode::synchronize_cache16: co_return co_await detail::execute_synchronize_cache(plan);
    case Opcode::unmap: {
      // UNMAP descriptors may be anywhere: hold the whole medium against COMPARE AND WRITE.
      auto all = co_await detail::lock_range(unit_state->ranges, 0, plan.unit->block_count());
      if (const auto alua = state_->group_state(plan.port.group); !scsi::processes_io(alua))
        co_return ScsiOutcome::check_condition(not_accessible(alua));
      // A sanitize that started while this waited has already drained the range: do not touch it.
      if (auto refused = unit_state->sanitize->refuses(plan.opcode)) co_return ScsiOutcome::check_condition(*refused);
      co_return co_await detail::execute_unmap(plan, buffer);
    }
    case Opcode::write_same10:
    case Opcode::write_same16: co_return co_await detail::execute_write_same(plan, buffer);
    case Opcode::extended_copy:
      switch (load_u8(cdb.data() + 1) & 0x1f) {
        case detail::populate_token_sa: co_return co_await detail::execute_populate_token(*state_, nexus, plan, cdb, buffer);
        case detail::write_using_token_sa:
          co_return co_await detail::execute_write_using_token(*state_, nexus, plan, cdb, buffer);
        default: co_return co_await detail::execute_extended_copy(*state_, nexus, plan, buffer);
      }
    case Opcode::receive_copy_results:
      if ((load_u8(cdb.data() + 1) & 0x1f) == detail::receive_rod_token_information_sa)
        co_return detail::execute_receive_rod_token_information(*state_, nexus, cdb, buffer);
      co_return detail::execute_receive_copy_results(*state_, nexus, plan, cdb, buffer);
    case Opcode::sanitize:
      co_return co_await detail::execute_sanitize(plan, unit_state->unit, unit_state->sanitize, unit_state->ranges, cdb,
                                                  buffer);
    default: co_return ScsiOutcome::check_condition(detail::invalid_opcode());
  }
}

// ---------------------------------------------------------------------------------------------
// State
// ---------------------------------------------------------------------------------------------

detail::UnitState* ScsiDispatcher::State::unit(scsi::Lun lun) const noexcept {
  const auto index = lun.index();
  if (!index) return nullptr;
  std::shared_lock lock(units_mutex);
  const auto it = units.find(*index);
  return it == units.end() ? nullptr : it->second.get();
}

std::vector<detail::UnitState*> ScsiDispatcher::State::all_units() const {
  std::shared_lock lock(units_mutex);
  std::vector<detail::UnitState*> out;
  for (const auto& [index, u] : units) out.push_back(u.get());
  return out;
}

TargetPort ScsiDispatcher::State::target_port(NexusId nexus) const {
  std::lock_guard g(nexus_mutex);
  const auto it = nexus_ports.find(nexus.value);
  return it == nexus_ports.end() ? TargetPort{} : it->second;
}

AluaState ScsiDispatcher::State::group_state(std::uint16_t id) const noexcept { return port_groups->state(id); }

void ScsiDispatcher::State::note_port_group_changes() const {
  const std::uint64_t now = port_groups->generation();
  std::uint64_t seen = seen_port_group_generation.load();
  if (now == seen || !seen_port_group_generation.compare_exchange_strong(seen, now)) return;
  const auto ids = all_nexuses();
  for (auto* u : all_units()) {
    std::lock_guard g(u->mutex);
    for (auto id : ids) u->add_unit_attention(id, scsi::asc::asymmetric_access_state_changed);
  }
}

std::string ScsiDispatcher::State::port_name(NexusId nexus) const {
  std::lock_guard g(nexus_mutex);
  const auto it = nexuses.find(nexus.value);
  return it == nexuses.end() ? std::string() : it->second;
}

std::vector<std::uint64_t> ScsiDispatcher::State::nexuses_named(const std::string& port) const {
  std::lock_guard g(nexus_mutex);
  std::vector<std::uint64_t> out;
  for (const auto& [id, name] : nexuses)
    if (name == port) out.push_back(id);
  return out;
}

namespace {
// The initiator name of an initiator port name "<name>,i,0x<ISID>" (SPC-5 §7.6.4.6).
std::string_view initiator_of(std::string_view port) noexcept {
  const auto at = port.rfind(",i,0x");
  return at == std::string_view::npos ? port : port.substr(0, at);
}
bool same_name(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}
}  // namespace

std::string ScsiDispatcher::State::origin(NexusId nexus) const {
  std::lock_guard g(nexus_mutex);
  const auto it = nexus_origins.find(nexus.value);
  return it == nexus_origins.end() ? std::string() : it->second;
}

std::optional<std::pair<std::uint64_t, std::string>> ScsiDispatcher::State::nexus_of_initiator(
    std::string_view initiator, std::string_view origin) const {
  if (initiator.empty() || origin.empty()) return std::nullopt;
  std::lock_guard g(nexus_mutex);
  for (const auto& [id, name] : nexuses) {
    if (!same_name(initiator_of(name), initiator)) continue;
    const auto o = nexus_origins.find(id);
    if (o != nexus_origins.end() && o->second == origin) return std::pair{id, name};
  }
  return std::nullopt;
}

void ScsiDispatcher::join_copy_domain(std::shared_ptr<const CopyDomain> domain, std::string tenant) {
  // A reload hands a serving dispatcher to the registry again (TargetRegistry::replace) with the
  // same domain and tenant (a reload never moves a target to another tenant): no write, no race
  // with a copy reading them.
  if (state_->copy_domain == domain && state_->copy_tenant == tenant) return;
  state_->copy_domain = std::move(domain);
  state_->copy_tenant = std::move(tenant);
}

void CopyDomain::set(std::string_view name, std::string tenant, const std::shared_ptr<ScsiDispatcher>& dispatcher) {
  std::lock_guard g(mutex_);
  std::erase_if(entries_, [&](const Entry& e) { return same_name(e.name, name); });
  entries_.push_back({std::string(name), std::move(tenant), dispatcher});
}

void CopyDomain::erase(std::string_view name) {
  std::lock_guard g(mutex_);
  std::erase_if(entries_, [&](const Entry& e) { return same_name(e.name, name); });
}

std::vector<std::shared_ptr<const ScsiDispatcher>> CopyDomain::servers_of(std::string_view tenant) const {
  std::lock_guard g(mutex_);
  std::vector<std::shared_ptr<const ScsiDispatcher>> out;
  for (const auto& e : entries_)
    if (e.tenant == tenant)
      if (auto d = e.dispatcher.lock()) out.push_back(std::move(d));
  return out;
}

std::vector<std::uint64_t> ScsiDispatcher::State::all_nexuses() const {
  std::lock_guard g(nexus_mutex);
  std::vector<std::uint64_t> out;
  for (const auto& [id, name] : nexuses) out.push_back(id);
  return out;
}

namespace detail {

void UnitState::add_unit_attention(std::uint64_t id, scsi::AscPair asc) {
  auto& queue = unit_attentions[id];
  if (std::find(queue.begin(), queue.end(), asc) != queue.end() || queue.size() >= 8) return;
  queue.push_back(asc);
}

bool RangeLock::try_lock(std::uint64_t lba, std::uint64_t blocks) {
  const std::uint64_t end = lba + blocks;
  {
    std::lock_guard g(mutex_);
    for (const auto& [b, e] : held_)
      if (lba < e && b < end) return false;
    held_.emplace_back(lba, end);
  }
  // A writer of [lba, end) from now on: the ROD tokens of these blocks are cancelled before a
  // byte changes (token_copy.hpp). After taking the range, so a token created meanwhile sees it
  // held (any_held()).
  watches_->written(lba, end);
  return true;
}

bool RangeLock::any_held(const std::vector<std::pair<std::uint64_t, std::uint64_t>>& ranges) {
  std::lock_guard g(mutex_);
  for (const auto& [b, e] : held_)
    for (const auto& [rb, re] : ranges)
      if (rb < e && b < re) return true;
  return false;
}

std::uint64_t WriteWatches::watch(std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges,
                                  std::shared_ptr<std::atomic<bool>> cancelled) {
  std::uint64_t low = UINT64_MAX, high = 0;
  for (const auto& [b, e] : ranges) {
    low = std::min(low, b);
    high = std::max(high, e);
  }
  std::lock_guard g(mutex_);
  const std::uint64_t id = next_id_++;
  watches_.push_back({id, low, high, std::move(ranges), std::move(cancelled)});
  any_.store(true);
  return id;
}

void WriteWatches::unwatch(std::uint64_t id) noexcept {
  std::lock_guard g(mutex_);
  std::erase_if(watches_, [&](const Watch& w) { return w.id == id; });
  any_.store(!watches_.empty());
}

void WriteWatches::written(std::uint64_t begin, std::uint64_t end) noexcept {
  if (!any_.load()) return;
  std::lock_guard g(mutex_);
  for (const auto& w : watches_) {
    if (!(begin < w.high && w.low < end)) continue;
    for (const auto& [b, e] : w.ranges) {
      if (begin < e && b < end) {
        w.cancelled->store(true);
        break;
      }
    }
  }
}

std::size_t WriteWatches::size() const {
  std::lock_guard g(mutex_);
  return watches_.size();
}

void RangeLock::unlock(std::uint64_t lba, std::uint64_t blocks) noexcept {
  std::lock_guard g(mutex_);
  const auto it = std::find(held_.begin(), held_.end(), std::pair{lba, lba + blocks});
  if (it != held_.end()) held_.erase(it);
}

Awaitable<RangeGuard> lock_range(RangeLock& lock, std::uint64_t lba, std::uint64_t blocks) {
  if (blocks == 0) blocks = 1;
  if (!lock.try_lock(lba, blocks)) {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    do {
      timer.expires_after(std::chrono::microseconds(100));
      boost::system::error_code ec;
      co_await timer.async_wait(use_awaitable_ec(ec));
    } while (!lock.try_lock(lba, blocks));
  }
  co_return RangeGuard(&lock, lba, blocks);
}

}  // namespace detail

}  // namespace iserkit::target

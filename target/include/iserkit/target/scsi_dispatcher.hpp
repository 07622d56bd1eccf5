// The target's SCSI layer (layer 4): the device server of one target node. It owns the node's LUN
// map, the per-logical-unit state shared by all I_T nexuses (unit attention queues, RESERVE(6) and
// persistent reservations, software write protect, the COMPARE AND WRITE range lock) and runs
// commands in two phases so the transport can reject a command before moving data and can place
// Data-Out directly into the buffer the command will use:
//
//   1. plan(nexus, lun, cdb): unit attention (SAM-5 §5.14), reservation conflict (SPC-5 §5.14.1),
//      then parse and validate (opcode known, fields, LBA range, write protection). No I/O, no
//      allocation that outlives the call. Says which way data flows and exactly how many bytes the
//      command wants to move, or gives the status for an immediate answer.
//   2. execute(nexus, lun, cdb, plan, data): run it (backend I/O), fill the data-in buffer, give
//      the status.
//
// The transport names each I_T nexus (SAM-5 §4.7) once with open_nexus() and ends it with
// close_nexus() (I_T nexus loss); task management functions that change device state go through
// task_management(). Implements SPC-5 (INQUIRY + VPD, REPORT LUNS, TEST UNIT READY, REQUEST
// SENSE, MODE SENSE/SELECT, REPORT SUPPORTED OPERATION CODES, PERSISTENT RESERVE IN/OUT,
// RESERVE/RELEASE (6), EXTENDED COPY (LID1), RECEIVE COPY RESULTS, VPD 0x8f) and SBC-4
// (READ/WRITE 6/10/12/16, VERIFY and WRITE AND VERIFY 10/12/16, COMPARE AND WRITE, ORWRITE (16),
// PRE-FETCH 10/16, READ CAPACITY 10/16, GET LBA STATUS, SYNCHRONIZE CACHE 10/16, UNMAP, WRITE SAME
// 10/16, START STOP UNIT, SANITIZE, VPD 0xb0-0xb2).
// Anything else: CHECK CONDITION, ILLEGAL REQUEST, INVALID COMMAND OPERATION CODE.
// Free of iSCSI types: no ITT, CmdSN, EDTL or PDU here; a nexus is an opaque id plus a name.
// The plan and outcome values are in command_plan.hpp (no Asio), which the transport's session
// engine includes instead of this header.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/bytes.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/scsi/alua.hpp"
#include "iserkit/scsi/lun.hpp"
#include "iserkit/scsi/opcodes.hpp"
#include "iserkit/scsi/sense.hpp"
#include "iserkit/target/block_backend.hpp"
#include "iserkit/target/command_plan.hpp"
#include "iserkit/target/logical_unit.hpp"

namespace iserkit::target {

/// Identifies one I_T nexus to the device server (SAM-5 §4.7). Opaque: obtained from
/// ScsiDispatcher::open_nexus(). The value 0 is the anonymous nexus used by the overloads without
/// a nexus: it never gets unit attentions and its initiator port name is empty.
struct NexusId {
  std::uint64_t value = 0;
  friend constexpr bool operator==(NexusId, NexusId) noexcept = default;
};

/// ALUA (SPC-5 §5.16.2.4): the asymmetric access state of a target port group: common's codec type (SPC-5 §6.36.2,
/// scsi/alua.hpp), so the target encodes and the initiator parses the same values. A target port
/// group here is in one of four: active/optimized (every command), active/non-optimized (every
/// command), standby (media access refused: NOT READY, 04h/0Bh) and unavailable (almost
/// everything refused: NOT READY, 04h/0Ch); set_port_groups() refuses the others.
using AluaState = scsi::AccessState;

/// Parses "active/optimized", "active/non-optimized", "standby" or "unavailable" (the names
/// scsi::to_string() gives, for configs and logs); nullopt for anything else, including the states
/// a target port group here cannot take.
std::optional<AluaState> parse_alua_state(std::string_view name) noexcept;

/// A target port group (SPC-5 §5.16.2, implicit ALUA): its identifier, its asymmetric access
/// state and the relative target port identifiers (non-zero) of the target ports in it.
struct TargetPortGroup {
  std::uint16_t id = 1;
  AluaState state = AluaState::active_optimized;
  std::vector<std::uint16_t> relative_ports{1};
};

/// What carries out SET TARGET PORT GROUPS (explicit ALUA, SPC-4 §6.45) for a PortGroupTable: the
/// gateway's failover coordinator (target/src/alua_failover.hpp), which moves this process's
/// groups between active/optimized and standby. Thread-safe.
class AluaTransitions {
 public:
  virtual ~AluaTransitions() = default;
  /// True when target port group `id` is one of this process's (false: a peer gateway's).
  [[nodiscard]] virtual bool is_local(std::uint16_t id) const noexcept = 0;
  /// Asks for this process's groups to become active/optimized (`active`) or standby. Returns at
  /// once; the table's states show when it is done (the device server that asked waits for
  /// them, bounded).
  virtual void request(bool active) noexcept = 0;
};

/// The target port groups (SPC-5 §5.16) of a process and their current asymmetric access states,
/// shared by every device server (ScsiDispatcher::share_port_groups): the ids and relative ports
/// are fixed when made, the states change (implicitly, by the failover coordinator; explicitly, by
/// SET TARGET PORT GROUPS through AluaTransitions). A change moves generation(): each device
/// server sharing the table then establishes ASYMMETRIC ACCESS STATE CHANGED (2Ah/06h, SPC-5
/// §5.16.2.6) for every I_T nexus of each of its logical units before the next command it plans.
/// Thread-safe; the states are atomics (read on every command).
class PortGroupTable {
 public:
  /// Errors: errc::invalid_argument for an empty list, a group id 0, a duplicate group id or
  /// relative port, a relative port 0, or a state other than the four AluaState names.
  static Result<std::shared_ptr<PortGroupTable>> make(std::vector<TargetPortGroup> groups);
  explicit PortGroupTable(std::vector<TargetPortGroup> groups);  ///< unchecked: use make()

  /// The groups with their current states.
  [[nodiscard]] std::vector<TargetPortGroup> groups() const;
  /// The state of group `id` (active/optimized for a group not listed).
  [[nodiscard]] AluaState state(std::uint16_t id) const noexcept;
  /// Sets the state of each listed group (unknown ids are ignored). Also takes transitioning.
  /// Returns true when a state changed (generation() moved).
  bool set_states(const std::vector<std::pair<std::uint16_t, AluaState>>& states) noexcept;
  /// Counts the state changes so far.
  [[nodiscard]] std::uint64_t generation() const noexcept { return generation_.load(std::memory_order_acquire); }
  /// Installs what runs SET TARGET PORT GROUPS (during setup; the table then claims explicit ALUA:
  /// TPGS 11b in standard INQUIRY). Without it the command is refused (implicit ALUA only). Held
  /// weakly (the coordinator holds the table): once it is gone the command fails.
  void set_transitions(const std::shared_ptr<AluaTransitions>& transitions) noexcept {
    transitions_ = transitions;
    explicit_ = transitions != nullptr;
  }
  /// What set_transitions() installed, or nullptr (never installed, or gone).
  [[nodiscard]] std::shared_ptr<AluaTransitions> transitions() const noexcept { return transitions_.lock(); }
  /// True once set_transitions() installed one (explicit ALUA is claimed).
  [[nodiscard]] bool explicit_transitions() const noexcept { return explicit_; }

 private:
  std::vector<TargetPortGroup> groups_;                    // states_ holds the states
  std::unique_ptr<std::atomic<std::uint8_t>[]> states_;   // per groups_ entry
  std::atomic<std::uint64_t> generation_{0};
  std::weak_ptr<AluaTransitions> transitions_;
  bool explicit_ = false;  // set during setup, then read only
};

/// Most bytes a command with an ALLOCATION LENGTH (INQUIRY, REPORT LUNS, MODE SENSE, GET LBA
/// STATUS, PERSISTENT RESERVE IN, …) plans to return: larger allocation lengths are cut to this, so
/// an initiator cannot make the target allocate up to 4 GiB for a REPORT LUNS (SPC-5 §4.2.5.6: the
/// device server returns at most the allocation length; less is a normal underflow residual). Every
/// such response of ours is shorter (REPORT LUNS of 16384 LUNs: 131080 bytes).
inline constexpr std::uint32_t max_data_in_allocation_bytes = 256 * 1024;

/// Backend errors turned into a SCSI status so far, in this process (all LUs, all threads).
struct BackendErrorCount {
  const char* error;    ///< errno name ("EIO", "ENOSPC", ...), or "other" for any error not in the table
  std::uint64_t count;  ///< errors seen
};
/// The backend error counts, one entry per errno the mapping table names plus "other" (metrics:
/// iserkit_target_backend_errors_total). Thread-safe.
std::vector<BackendErrorCount> backend_error_counts();

namespace detail {
class RangeLock;  // scsi/device_state.hpp
}

class ScsiDispatcher;

/// The device servers of one process that an EXTENDED COPY may reach besides its own (SPC-4
/// §5.17): one entry per target node, with the node's tenant. A copy reaches a logical unit of
/// another device server only when that server is in the copy's tenant and the issuing initiator
/// has an I_T nexus open to it from the same origin (open_nexus(): the same iSCSI name and the
/// same network address) — it logged in there, past that target's ACL and CHAP, on that tenant's
/// portals. Holds the servers weakly. Thread-safe.
class CopyDomain {
 public:
  /// Adds or replaces the entry of target `name` (case-insensitive).
  void set(std::string_view name, std::string tenant, const std::shared_ptr<ScsiDispatcher>& dispatcher);
  /// Removes the entry of target `name` (case-insensitive); unknown names are ignored.
  void erase(std::string_view name);
  /// The live device servers of `tenant` (empty: the targets of no tenant).
  [[nodiscard]] std::vector<std::shared_ptr<const ScsiDispatcher>> servers_of(std::string_view tenant) const;

 private:
  struct Entry {
    std::string name;
    std::string tenant;
    std::weak_ptr<const ScsiDispatcher> dispatcher;
  };
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
};

/// A plain READ or WRITE that ScsiDispatcher::start_media_io() started on the fast path: the
/// caller's object, alive until complete() ran. The dispatcher fills the BackendTransfer part.
class MediaIo : public BackendTransfer {
 public:
  /// With MediaIoStart::completed: the command's outcome (complete() is not called then).
  ScsiOutcome outcome;
  /// Called once after MediaIoStart::started, on the starting io_context's thread from its event
  /// loop (never from inside start_media_io()), with the outcome (backend errors mapped as by
  /// execute()).
  virtual void complete(ScsiOutcome outcome) noexcept = 0;

 protected:
  ~MediaIo() = default;

 private:
  friend class ScsiDispatcher;
  void transferred(Result<void> result) noexcept final;
  detail::RangeLock* range_lock_ = nullptr;  // writes: the LU's range lock, held until the transfer ended
  std::uint64_t lba_ = 0;
  std::uint64_t blocks_ = 0;
};

/// What ScsiDispatcher::start_media_io() did.
enum class MediaIoStart {
  unsupported,  ///< nothing: run execute() for this command
  started,      ///< under way: MediaIo::complete() follows
  completed,    ///< done at once: MediaIo::outcome holds the outcome
};

/// The device server of one target node: its LUN map, per-LU state and the command handlers.
///
/// Thread-safety: plan(), execute(), open_nexus(), close_nexus(), task_management() and
/// add_logical_unit() may be called concurrently from any number of threads (each session on its
/// own io_context thread); per-LU state is guarded by a mutex per LU, held only for short,
/// non-suspending sections.
class ScsiDispatcher {
 public:
  ScsiDispatcher();
  ~ScsiDispatcher();
  ScsiDispatcher(const ScsiDispatcher&) = delete;
  ScsiDispatcher& operator=(const ScsiDispatcher&) = delete;

  /// Adds logical unit `lu` at LUN index `lun_index` (0..16383; peripheral addressing below 256,
  /// flat space addressing above, see scsi::Lun::from_index). Every open nexus gets the unit
  /// attention REPORTED LUNS DATA HAS CHANGED (SPC-5 §6.33), cleared by its next REPORT LUNS.
  /// Errors: errc::invalid_argument if the index is taken, above 16383, or lu is null.
  Result<void> add_logical_unit(std::uint16_t lun_index, std::shared_ptr<LogicalUnit> lu);

  /// The LUNs in ascending index order (as REPORT LUNS lists them).
  [[nodiscard]] std::vector<scsi::Lun> luns() const;

  /// The logical unit at `lun`, or nullptr.
  [[nodiscard]] const LogicalUnit* find(scsi::Lun lun) const noexcept;

  /// Starts an I_T nexus (SAM-5 §4.7) named by its initiator port name (SPC-5 §7.6.4.6; for iSCSI
  /// "<InitiatorName>,i,0x<ISID>"). Every logical unit gets the unit attention POWER ON, RESET, OR
  /// BUS DEVICE RESET OCCURRED for it (SAM-5 §5.14). Returns the id to pass to plan()/execute().
  /// `port`: the target port the nexus goes through (its ALUA group decides which commands run;
  /// VPD 0x83 names it).
  /// `origin`: where the nexus comes from (the initiator's network address, without the port); an
  /// EXTENDED COPY reaches another target's LU only through a nexus there of the same initiator
  /// name and the same non-empty origin (CopyDomain).
  NexusId open_nexus(std::string initiator_port_name, TargetPort port = {}, std::string origin = {});

  /// The target port groups (ALUA, SPC-5 §5.16) REPORT TARGET PORT GROUPS lists and plan()
  /// enforces: a standby group's nexuses get NOT READY, LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN
  /// STANDBY STATE (04h/0Bh) for media access and most other commands (SPC-5 §5.16.2.4.4), an
  /// unavailable group's 04h/0Ch for all but INQUIRY, REPORT LUNS, REPORT TARGET PORT GROUPS, SET
  /// TARGET PORT GROUPS and REQUEST SENSE (§5.16.2.4.5), a transitioning group's 04h/0Ah for all
  /// but INQUIRY, REPORT LUNS, REPORT TARGET PORT GROUPS and REQUEST SENSE (§5.16.2.5). Default:
  /// group 1, active/optimized, relative port 1. A nexus whose group is not listed is treated as
  /// active/optimized. Call during setup, before any nexus is opened. A table of this server's
  /// own (fixed states); share_port_groups() shares one instead.
  /// Errors: as PortGroupTable::make().
  Result<void> set_port_groups(std::vector<TargetPortGroup> groups);
  /// Uses `table` (shared with the process's other device servers and its failover coordinator):
  /// its states apply from the next command on. Call during setup, before any nexus is opened.
  void share_port_groups(std::shared_ptr<PortGroupTable> table) noexcept;
  /// The groups with their current states.
  [[nodiscard]] std::vector<TargetPortGroup> port_groups() const;

  /// Waits until no write accepted so far is still running on any logical unit: every media
  /// write holds its LBA range from before its ALUA check until its backend I/O ended, so once the
  /// table says the writing ports are no longer active (standby or transitioning), every write
  /// this returns after was either finished or refused with NOT READY (SPC-5 §5.16.2.4). Then
  /// flushes every logical unit's backend (so a peer gateway reads what was acknowledged here).
  /// For the failover coordinator, before it releases its lock. Executor: any (polls on it).
  Awaitable<void> quiesce_writes() const;

  /// Ends an I_T nexus (I_T nexus loss, SAM-5 §6.3.4): drops its unit attentions and releases a
  /// RESERVE(6) reservation it holds (SPC-2 §5.5.1). Persistent reservations and registrations
  /// stay (SPC-5 §5.14.6). Unknown ids are ignored.
  void close_nexus(NexusId nexus) noexcept;

  /// The device-server side of a task management function from `nexus` for `lun` (ignored for the
  /// target-wide ones). See TaskManagement.
  void task_management(NexusId nexus, scsi::Lun lun, TaskManagement function) noexcept;

  /// Phase 1: checks `cdb` for `lun` from `nexus`: unit attention first (reported and cleared for
  /// every command but INQUIRY, REPORT LUNS and REQUEST SENSE, SAM-5 §5.14), then reservation
  /// conflicts, then the CDB itself.
  /// Parameters: `cdb`: the CDB as received (6..16 bytes or more; trailing bytes beyond the
  /// opcode's CDB length are ignored). `lun`: may name no logical unit: INQUIRY then reports
  /// peripheral qualifier 011b / type 0x1f, REPORT LUNS and REQUEST SENSE work, and anything else
  /// fails with LOGICAL UNIT NOT SUPPORTED (SPC-5 §4.6.5 / SAM-5 §5.9).
  /// Returns: the plan; `error` is set for UNIT ATTENTION, INVALID COMMAND OPERATION CODE, INVALID
  /// FIELD IN CDB, LBA OUT OF RANGE, WRITE PROTECTED, LOGICAL UNIT NOT SUPPORTED; `conflict` for a
  /// reservation conflict. Never touches the backend.
  [[nodiscard]] CommandPlan plan(NexusId nexus, scsi::Lun lun, ConstByteSpan cdb) const noexcept;
  /// plan() for the anonymous nexus.
  [[nodiscard]] CommandPlan plan(scsi::Lun lun, ConstByteSpan cdb) const noexcept { return plan(NexusId{}, lun, cdb); }

  /// Phase 2: runs a command whose plan was not rejected.
  /// Parameters: `nexus`, `lun`, `cdb`: the same as given to plan(). `plan`: the value plan()
  /// returned (possibly shortened). `data`: exactly plan.transfer_length_bytes bytes (empty when
  /// 0): for to_target the received Data-Out (read only); for from_target the buffer to fill.
  /// Returns: the outcome. Backend failures become CHECK CONDITION (MEDIUM ERROR / UNRECOVERED READ
  /// ERROR for reads, MEDIUM ERROR / WRITE ERROR for writes, DATA PROTECT / SPACE ALLOCATION FAILED
  /// for ENOSPC). Parameter list errors (UNMAP, PERSISTENT RESERVE OUT, MODE SELECT) and
  /// MISCOMPARE (VERIFY, COMPARE AND WRITE) are found here, after the data arrived. COMPARE AND
  /// WRITE is atomic against every other write to its range on the LU (a per-LU range lock).
  /// Preconditions and lifetime: `cdb` and `data` stay valid until the awaitable completes; the
  /// dispatcher outlives the call.
  /// Executor and thread: co_await it from a coroutine on the session's io_context; backend I/O
  /// (io_uring) is driven by that io_context (see backends.hpp). Never throws except bad_alloc.
  Awaitable<ScsiOutcome> execute(NexusId nexus, scsi::Lun lun, ConstByteSpan cdb, const CommandPlan& plan,
                                 ByteSpan data) const;
  /// execute() for the anonymous nexus.
  Awaitable<ScsiOutcome> execute(scsi::Lun lun, ConstByteSpan cdb, const CommandPlan& plan, ByteSpan data) const {
    return execute(NexusId{}, lun, cdb, plan, data);
  }

  /// Phase 2 on the fast path, for the commands most of the traffic is: READ and WRITE (6, 10, 12,
  /// 16) with blocks, on a backend with BlockBackend::start_transfer(), when nothing makes them
  /// wait (a write whose range a COMPARE AND WRITE holds, a sanitize) — without a coroutine frame
  /// or a posted completion. Otherwise MediaIoStart::unsupported and nothing was done: co_await
  /// execute() instead. Same outcomes as execute(). Parameters as for execute(); `io.executor`
  /// must be set by the caller (the io_context that runs it).
  MediaIoStart start_media_io(scsi::Lun lun, const CommandPlan& plan, ByteSpan data, MediaIo& io) const;

  /// Stops the device server's background operations (a sanitize operation, SBC-4 §4.11) at their
  /// next step: for target shutdown, so the io_contexts run out of work. A stopped sanitize leaves
  /// its logical unit in the sanitize failure mode (MEDIUM ERROR, SANITIZE COMMAND FAILED) for as
  /// long as this dispatcher lives; a restarted target starts without that state. Thread-safe.
  void stop_background_operations() noexcept;

  /// Lets this device server's EXTENDED COPY reach the logical units of the other servers of
  /// `domain` in `tenant` (see CopyDomain). Without it a copy reaches this server's logical units
  /// only. Call during setup (the target registry does, for every node it holds); calling it again
  /// with the same domain and tenant changes nothing and is safe while commands run.
  void join_copy_domain(std::shared_ptr<const CopyDomain> domain, std::string tenant);

  struct State;  ///< internal: LUN map, nexus names and per-LU state (scsi/device_state.hpp)

 private:
  std::unique_ptr<State> state_;

 public:
  /// Internal to the SCSI layer (the copy manager reads another server's state through it).
  [[nodiscard]] const State& internal_state() const noexcept { return *state_; }
};

}  // namespace iserkit::target

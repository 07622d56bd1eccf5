// Fuzz target: the target's sans-I/O session engine (target/src/session_engine.hpp) fed initiator
// PDUs (SCSI commands, Data-Out, text, TMF, NOP-Out, logout, SNACK, anything) in any order, timer
// steps, backend completions and closes, with its actions applied as the driver (connection.cpp)
// would, without I/O: SCSI commands run on the real ScsiDispatcher over two 256 KiB memory LUNs,
// payload budgets are the driver's own PayloadLedger (target/src/payload_ledger.hpp), its shared
// level a PayloadBudget whose grants arrive later, as the driver's posted ones do; RDMA Read/Write
// (the iSER data phase) are answered in place.
//
// Input: 4 configuration bytes, then steps until the input ends (at most 256):
//  - config[0]: bit 0 ImmediateData, bit 1 InitialR2T, bit 2 discovery session, bit 3 the iSER data
//    phase, bit 4 the idle watch (NOP-In after 100 ms, closed 50 ms later);
//  - config[1]: FirstBurstLength = 512 << (bits 0-2), MaxBurstLength = 512 << (bits 3-5);
//  - config[2]: the initiator's MaxRecvDataSegmentLength = 512 << (bits 0-2), MaxOutstandingR2T
//    1 + (bits 3-4), CmdSN window depth 1 + (bits 5-7);
//  - config[3]: payload budget 4096 << (bits 0-3) bytes, immediate commands at most 1 + (bits 4-5),
//    the shared (target-wide) budget (bits 6-7 = n): none (n = 0), or as large as the connection's,
//    with (n - 1) / 2 of it held by another connection until a step gives it back;
//  - step byte % 8: 0-3 an initiator PDU: a selector (bit 7: keep the raw opcode, else one of the 8
//    initiator opcodes), a flags byte (bit 0: CmdSN = ExpCmdSN + (flags >> 5); bit 1: ITT (or, for
//    a TMF, the referenced task) = one of the commands' ITTs picked by the next byte; bit 2: TTT =
//    one the engine sent; bit 3: a data digest error; bit 4: an AHS record follows), the 48-byte
//    BHS, [the AHS record], and a record with the data segment (placed through place() as the
//    datamover does);
//    4: on_timer after u16 ms (with the step's bit 3: at next_deadline(), as the driver's timer);
//    5: the oldest backend execution (ExecuteTask) or RDMA Read (GetWriteData; byte bit 0: fails)
//       completes; with byte bit 1, or when neither waits, the oldest shared-budget grant arrives;
//       with byte bit 2, the other connection gives its shared bytes back (grants follow later);
//    6: every pending execution, RDMA Read and shared-budget grant completes;
//    7: the connection closes (on_closed).
// At the end the connection closes and every pending completion arrives, as in the driver.
//
// Invariants: every PDU decodes; StatSN advances by one with each status-carrying PDU and is
// carried unchanged by R2T and unsolicited NOP-In; each command gets at most one status (SCSI
// Response or Data-In with S), none after it was aborted and none for an ITT with no task; Data-In
// segments fit the initiator's MaxRecvDataSegmentLength and the task's EDTL; R2Ts lie inside the
// EDTL and MaxBurstLength; nothing is sent after CloseConnection; the backend is asked only for
// ranges inside the LUN (the backend wrapper checks) and RDMA only inside the task buffer; a task
// holds a full buffer only under a granted budget of at least its size (unsolicited data waits in
// at most FirstBurstLength) and the bytes in task buffers never exceed the granted budget plus that
// staged data; tasks stay within window depth + immediate limit; every budget request
// ends with exactly one release, and at the end no task, budget byte (at either level) or pool
// buffer is held.
#include <algorithm>
#include <cstdlib>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "engine_fuzz_input.hpp"
#include "iserkit/common/asio.hpp"
#include "iserkit/common/bytes.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/target/backends.hpp"
#include "iserkit/target/logical_unit.hpp"
#include "iserkit/target/scsi_dispatcher.hpp"
#include "payload_budget.hpp"
#include "payload_ledger.hpp"
#include "session_engine.hpp"

using namespace iserkit;
using namespace iserkit::target;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t lu_size = 256 * 1024;
constexpr std::array<std::uint8_t, 8> initiator_opcodes = {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x10};

/// A BufferPool that counts its leases (every buffer must come back).
class CountingPool final : public BufferPool {
 public:
  PooledBuffer allocate(std::size_t bytes) override {
    auto* p = new std::byte[bytes == 0 ? 1 : bytes];
    ++leases_;
    bytes_ += bytes;
    return PooledBuffer(this, Buffer{.bytes = {p, bytes}}, bytes);
  }
  [[nodiscard]] std::size_t leases() const noexcept { return leases_; }
  /// Bytes leased now.
  [[nodiscard]] std::uint64_t bytes() const noexcept { return bytes_; }

 protected:
  void release(const Buffer& buffer, std::size_t) noexcept override {
    delete[] buffer.bytes.data();
    --leases_;
    bytes_ -= buffer.bytes.size();
  }

 private:
  std::size_t leases_ = 0;
  std::uint64_t bytes_ = 0;
};

/// The memory backend, checking that the SCSI layer asks only for ranges inside the LUN.
class CheckedBackend final : public BlockBackend {
 public:
  explicit CheckedBackend(std::shared_ptr<BlockBackend> inner) : inner_(std::move(inner)) {}
  const BackendCapabilities& capabilities() const noexcept override { return inner_->capabilities(); }
  Awaitable<Result<void>> read(std::uint64_t offset, ByteSpan out) override {
    check(offset, out.size());
    return inner_->read(offset, out);
  }
  Awaitable<Result<void>> write(std::uint64_t offset, ConstByteSpan data, Fua fua) override {
    check(offset, data.size());
    return inner_->write(offset, data, fua);
  }
  Awaitable<Result<void>> flush() override { return inner_->flush(); }
  Awaitable<Result<void>> discard(std::uint64_t offset, std::uint64_t length) override {
    check(offset, length);
    return inner_->discard(offset, length);
  }
  Awaitable<Result<void>> write_zeroes(std::uint64_t offset, std::uint64_t length, Fua fua) override {
    check(offset, length);
    return inner_->write_zeroes(offset, length, fua);
  }

 private:
  void check(std::uint64_t offset, std::uint64_t length) const {
    const auto& c = inner_->capabilities();
    FUZZ_CHECK(offset <= c.size_bytes && length <= c.size_bytes - offset);
    FUZZ_CHECK(offset % c.block_size_bytes == 0);
  }
  std::shared_ptr<BlockBackend> inner_;
};

bool carries_status(std::uint8_t opcode) {
  // RFC 7143 §4.2.2.2: these advance StatSN (NOP-In only when it answers a NOP-Out, Data-In only
  // with S: checked by the caller).
  return opcode == 0x21 || opcode == 0x22 || opcode == 0x24 || opcode == 0x26 || opcode == 0x3f;
}

/// The ledger's shared level: a PayloadBudget whose grants wait in `grants` until the harness
/// delivers them (the driver posts them to the connection's thread).
class SharedLevel final : public PayloadLedger::SharedLevel {
 public:
  /// `other_bytes`: held by another connection from the start, until other_gives().
  SharedLevel(std::uint64_t limit_bytes, std::uint64_t other_bytes) : budget(limit_bytes), other_(other_bytes) {
    if (other_ > 0) FUZZ_CHECK(budget.request(next_id_++, other_));
  }
  /// The other connection gives its bytes back; false when it held none.
  bool other_gives() {
    if (other_ == 0) return false;
    release(std::exchange(other_, 0));
    return true;
  }
  PayloadLedger::SharedAsk request(std::uint64_t hold, std::uint64_t bytes) override {
    const std::uint64_t id = next_id_++;
    if (budget.request(id, bytes)) return {.id = id, .granted = true};
    holds_[id] = hold;
    return {.id = id, .granted = false};
  }
  bool cancel(std::uint64_t shared_id) override {
    std::vector<std::uint64_t> granted;
    const bool was_queued = budget.cancel(shared_id, granted);
    if (was_queued) holds_.erase(shared_id);
    queue(granted);
    return was_queued;
  }
  void release(std::uint64_t bytes) override { queue(budget.release(bytes)); }

  PayloadBudget budget;
  std::deque<std::uint64_t> grants;  // ledger hold ids granted, not delivered yet

 private:
  void queue(const std::vector<std::uint64_t>& ids) {
    for (std::uint64_t id : ids) {
      auto it = holds_.find(id);
      FUZZ_CHECK(it != holds_.end());  // a grant for a request queued here
      grants.push_back(it->second);
      holds_.erase(it);
    }
  }
  std::map<std::uint64_t, std::uint64_t> holds_;  // shared id → ledger hold id, while queued
  std::uint64_t next_id_ = 1;
  std::uint64_t other_ = 0;
};

class Harness {
 public:
  Harness(SessionEngineConfig config, bool rdma, std::uint64_t budget_limit, std::uint64_t shared_limit,
          std::uint64_t shared_other, SessionEngine::TimePoint now)
      : config_(config),
        rdma_(rdma),
        shared_(shared_limit == 0 ? nullptr : std::make_unique<SharedLevel>(shared_limit, shared_other)),
        ledger_(budget_limit, shared_.get()),
        now_(now),
        expected_stat_sn_(config.stat_sn) {
    for (std::uint16_t index : {0, 1}) {
      LogicalUnitOptions o;
      o.identity.serial = "FUZZ" + std::to_string(index);
      o.max_transfer_bytes = 64 * 1024;
      auto memory = make_memory_backend({.size_bytes = lu_size, .block_size_bytes = 512});
      FUZZ_CHECK(dispatcher_.add_logical_unit(index, std::make_shared<LogicalUnit>(
                                                         std::make_shared<CheckedBackend>(memory), o)).has_value());
    }
    nexus_ = dispatcher_.open_nexus("iqn.2026-11.org.test:fuzz,i,0x800102030405");
    // A new nexus starts with a unit attention on each LU (SAM-5 §5.14); the initiator's first
    // TEST UNIT READY would take it. Taken here, so the inputs reach the data phase at once.
    const std::array<std::byte, 6> test_unit_ready{};
    for (std::uint16_t index : {0, 1}) (void)dispatcher_.plan(nexus_, scsi::Lun::from_index(index), test_unit_ready);
    SessionEngineHooks hooks;
    hooks.plan = [this](const scsi::Lun& lun, ConstByteSpan cdb) { return dispatcher_.plan(nexus_, lun, cdb); };
    hooks.lun_exists = [](const scsi::Lun& lun) {
      return lun == scsi::Lun::from_index(0) || lun == scsi::Lun::from_index(1);
    };
    hooks.send_targets = [](const std::string&) {
      return iscsi::TextPairs{{"TargetName", "iqn.2026-11.org.test:disk"}, {"TargetAddress", "127.0.0.1:3260,1"}};
    };
    hooks.request_budget = [this](iscsi::Itt itt, std::uint64_t bytes) { return request_budget(itt, bytes); };
    engine_ = std::make_unique<SessionEngine>(config, std::move(hooks), pool_, make_data_phase({.rdma_data = rdma}), now);
  }

  SessionEngine& engine() { return *engine_; }

  void advance(std::chrono::milliseconds d) { now_ += d; }

  /// An ITT of a command delivered earlier (selector picks), or nothing.
  std::optional<std::uint32_t> pick_itt(std::uint8_t selector) const {
    if (itts_.empty()) return std::nullopt;
    return itts_[selector % itts_.size()];
  }
  std::optional<std::uint32_t> pick_ttt(std::uint8_t selector) const {
    if (ttts_.empty()) return std::nullopt;
    return ttts_[selector % ttts_.size()];
  }

  /// An initiator PDU as the datamover hands it over: place() in the header phase, the data
  /// segment into the placed span (or scratch), then on_pdu().
  void deliver(iscsi::Bhs bhs, std::span<const std::byte> ahs, std::span<const std::byte> data, std::error_code pdu_error) {
    std::vector<std::byte> ahs_area(ahs.begin(), ahs.end());
    ahs_area.resize((ahs_area.size() + 3) / 4 * 4);
    if (ahs_area.size() > 255 * 4) ahs_area.resize(255 * 4);
    iscsi::set_lengths(bhs, static_cast<std::uint8_t>(ahs_area.size() / 4), static_cast<std::uint32_t>(data.size()));
    const std::uint8_t opcode = iscsi::raw_opcode(bhs);
    const std::uint32_t itt = load_be32(&bhs[16]);
    if (opcode == 0x01) {
      all_itts_.insert(itt);
      if (itt != 0xffffffffu && std::find(itts_.begin(), itts_.end(), itt) == itts_.end() && itts_.size() < 64)
        itts_.push_back(itt);
      // A new incarnation of this ITT may be answered once (a command reusing a running task's ITT
      // is refused, and the running one keeps its right to an answer).
      if (engine_->task(iscsi::Itt{itt}) == nullptr) {
        may_answer_.insert(itt);
        edtl_[itt] = load_be32(&bhs[20]);
      }
    }
    auto where = engine_->place(bhs, static_cast<std::uint32_t>(data.size()));
    datamover::PduIn in;
    in.bhs = bhs;
    in.ahs = std::move(ahs_area);
    in.pdu_error = pdu_error;
    if (!where.empty()) {
      FUZZ_CHECK(where.size() == data.size());
      FUZZ_CHECK(opcode == 0x01 || opcode == 0x05);  // only SCSI Command and Data-Out are placed
      std::copy(data.begin(), data.end(), where.begin());
      in.data = where;
    } else {
      scratch_.assign(data.begin(), data.end());
      in.data = scratch_;
    }
    if (rdma_ && opcode == 0x01) {
      // iSER: the command names the initiator's buffers (RFC 7145 §9.2).
      in.peer_read = datamover::PeerBuffer{0x1000, 0};
      in.peer_write = datamover::PeerBuffer{0x2000, 0};
    }
    engine_->on_pdu(in, now_);
    apply();
  }

  void timer(std::chrono::milliseconds step) {
    now_ += step;
    engine_->on_timer(now_);
    apply();
  }
  /// The driver's timer: fires at next_deadline(), if any.
  void timer_at_deadline() {
    if (auto d = engine_->next_deadline()) {
      FUZZ_CHECK(*d >= now_ - config_.idle_interval);  // never a deadline long past
      now_ = std::max(now_, *d);
      engine_->on_timer(now_);
      apply();
    }
  }

  void close() {
    engine_->on_closed();
    apply();
  }

  /// The oldest backend execution or RDMA Read finishes (`step` bit 0: the RDMA Read fails), or,
  /// with `step` bit 1 or when neither waits, the oldest shared-budget grant arrives; with `step`
  /// bit 2, the other connection gives its shared bytes back first.
  bool complete_one(std::uint8_t step) {
    const bool rdma_fails = (step & 1) != 0;
    if (shared_ && (step & 4) != 0 && shared_->other_gives()) return true;
    if (shared_ && !shared_->grants.empty() && ((step & 2) != 0 || (executions_.empty() && reads_.empty()))) {
      const std::uint64_t hold = shared_->grants.front();
      shared_->grants.pop_front();
      if (auto itt = ledger_.on_shared_grant(hold)) engine_->on_budget_granted(*itt);
      apply();
      return true;
    }
    if (!executions_.empty()) {
      const std::uint32_t itt = executions_.front();
      executions_.pop_front();
      execute(itt);
      return true;
    }
    if (!reads_.empty()) {
      const GetWriteData get = reads_.front();
      reads_.pop_front();
      const EngineTask* task = engine_->task(get.itt);
      FUZZ_CHECK(task != nullptr);  // the task waits for its RDMA Read
      auto buffer = task->buffer.bytes();
      FUZZ_CHECK(std::uint64_t{get.buffer_offset} + get.length <= buffer.size());
      std::fill_n(buffer.begin() + get.buffer_offset, get.length, std::byte{0x77});
      engine_->on_write_data(get.itt, rdma_fails ? make_error_code(errc::connection_closed) : std::error_code{});
      apply();
      return true;
    }
    return false;
  }

  void finish() {
    close();
    if (shared_) shared_->other_gives();
    while (complete_one(0)) {
    }
    FUZZ_CHECK(engine_->task_count() == 0);  // every task released
    FUZZ_CHECK(ledger_.holds() == 0);        // every budget request ended with one release
    FUZZ_CHECK(ledger_.connection_used() == 0 && ledger_.granted_bytes() == 0);
    if (shared_) FUZZ_CHECK(shared_->budget.used() == 0 && shared_->budget.queued() == 0);
    engine_.reset();
    FUZZ_CHECK(pool_.leases() == 0);  // no task buffer left behind
  }

 private:
  bool request_budget(iscsi::Itt itt, std::uint64_t bytes) {
    const bool now = ledger_.request(itt, bytes);
    check_budget();
    return now;
  }

  void check_budget() const {
    // PayloadBudget's rule at the connection level: within the limit, or one request above it alone.
    FUZZ_CHECK(ledger_.connection_used() <= ledger_.connection_limit() || ledger_.connection_holders() == 1);
    FUZZ_CHECK(ledger_.granted_bytes() <= ledger_.connection_used());
    if (shared_) FUZZ_CHECK(ledger_.granted_bytes() <= shared_->budget.used());
  }

  void release(const ReleaseBudget& r) {
    std::vector<iscsi::Itt> granted;
    const auto released = ledger_.release(r.itt, granted);
    FUZZ_CHECK(released.has_value());  // a release for a request made
    FUZZ_CHECK(r.bytes == released->bytes);
    if (r.granted) FUZZ_CHECK(released->granted);  // never claims bytes it was not given
    // As the connection does: the engine hears of each grant (it may have ended the task already).
    for (const iscsi::Itt itt : granted) engine_->on_budget_granted(itt);
  }

  void execute(std::uint32_t itt) {
    const EngineTask* task = engine_->task(iscsi::Itt{itt});
    FUZZ_CHECK(task != nullptr);  // a task on the backend stays until its completion
    FUZZ_CHECK(task->life.state == TaskState::executing || task->life.state == TaskState::aborted_executing);
    auto data = engine_->task_data(iscsi::Itt{itt});
    FUZZ_CHECK(data.size() <= task->buffer.size());
    if (task->plan.direction != DataDirection::none) FUZZ_CHECK(data.size() == task->plan.transfer_length_bytes);
    std::optional<ScsiOutcome> out;
    std::exception_ptr error;
    asio::co_spawn(io_, dispatcher_.execute(nexus_, task->command.lun, task->cdb(), task->plan, data),
                   [&](std::exception_ptr e, ScsiOutcome v) {
                     error = e;
                     if (!e) out = v;
                   });
    io_.restart();
    io_.run();
    FUZZ_CHECK(!error && out.has_value());
    engine_->on_task_executed(iscsi::Itt{itt}, *out);
    apply();
  }

  void check_pdu(const datamover::PduOut& pdu) {
    auto header = iscsi::decode_bhs(pdu.bhs);
    FUZZ_CHECK(header.has_value());
    if (std::getenv("ISERKIT_FUZZ_LOG") != nullptr)
      std::fprintf(stderr, "sent %s itt=0x%08x bytes=%zu\n", iscsi::opcode_name(iscsi::raw_opcode(pdu.bhs)).data(),
                   load_be32(&pdu.bhs[16]), pdu.data.size());
    FUZZ_CHECK(iscsi::data_segment_length_bytes(pdu.bhs) == pdu.data.size());
    const std::uint8_t opcode = iscsi::raw_opcode(pdu.bhs);
    const std::uint32_t itt = load_be32(&pdu.bhs[16]);
    const SerialNumber stat_sn(load_be32(&pdu.bhs[24]));
    bool status = carries_status(opcode);
    if (const auto* d = std::get_if<iscsi::DataIn>(&*header)) {
      FUZZ_CHECK(pdu.data.size() <= config_.params.initiator_max_recv_data_segment_length);
      FUZZ_CHECK(std::uint64_t{d->buffer_offset} + pdu.data.size() <= edtl_[itt]);
      status = d->status_present;
      if (!status) return;  // StatSN is not valid without S
      if (d->status_present) FUZZ_CHECK(may_answer_.erase(itt) == 1);  // one status per command
    } else if (const auto* r = std::get_if<iscsi::ScsiResponse>(&*header)) {
      (void)r;
      FUZZ_CHECK(may_answer_.erase(itt) == 1);
    } else if (const auto* r2t = std::get_if<iscsi::R2t>(&*header)) {
      FUZZ_CHECK(r2t->desired_data_transfer_length > 0);
      FUZZ_CHECK(r2t->desired_data_transfer_length <= config_.params.max_burst_length);
      FUZZ_CHECK(std::uint64_t{r2t->buffer_offset} + r2t->desired_data_transfer_length <= edtl_[itt]);
      remember_ttt(iscsi::to_u32(r2t->ttt));
    } else if (const auto* nop = std::get_if<iscsi::NopIn>(&*header)) {
      status = nop->itt != iscsi::reserved_itt;
      remember_ttt(iscsi::to_u32(nop->ttt));
    } else if (const auto* text = std::get_if<iscsi::TextResponse>(&*header)) {
      FUZZ_CHECK(pdu.data.size() <= config_.params.initiator_max_recv_data_segment_length);
      remember_ttt(iscsi::to_u32(text->ttt));
    }
    if (opcode == 0x32) return;  // Async Message: not produced here
    // RFC 7143 §4.2.2.2: StatSN numbers status in order; R2T and NOP-In pings carry it unchanged.
    FUZZ_CHECK(stat_sn == expected_stat_sn_);
    if (status) ++expected_stat_sn_;
  }

  void remember_ttt(std::uint32_t ttt) {
    if (ttt != 0xffffffffu && ttts_.size() < 64 && std::find(ttts_.begin(), ttts_.end(), ttt) == ttts_.end())
      ttts_.push_back(ttt);
  }

  void apply() {
    // Actions may produce more actions (budget grants): carry them out until none are left.
    for (int rounds = 0;; ++rounds) {
      FUZZ_CHECK(rounds < 10000);
      auto actions = engine_->take_actions();
      if (actions.empty()) break;
      for (auto& a : actions) {
        if (auto* batch = std::get_if<SendPdus>(&a)) {
          FUZZ_CHECK(!closed_);  // nothing is sent after CloseConnection
          for (const auto& p : batch->pdus) check_pdu(p);
        } else if (auto* ex = std::get_if<ExecuteTask>(&a)) {
          FUZZ_CHECK(!closed_);
          const EngineTask* task = engine_->task(ex->itt);
          FUZZ_CHECK(task != nullptr);
          FUZZ_CHECK(task->life.state == TaskState::executing || task->life.state == TaskState::aborted_executing);
          executions_.push_back(iscsi::to_u32(ex->itt));
        } else if (auto* get = std::get_if<GetWriteData>(&a)) {
          const EngineTask* task = engine_->task(get->itt);
          FUZZ_CHECK(task != nullptr);
          FUZZ_CHECK(std::uint64_t{get->buffer_offset} + get->length <= task->buffer.size());
          reads_.push_back(*get);
        } else if (auto* put = std::get_if<PutReadData>(&a)) {
          FUZZ_CHECK(put->bytes <= put->buffer.size());
          FUZZ_CHECK(put->bytes > 0);
        } else if (auto* rel = std::get_if<ReleaseBudget>(&a)) {
          release(*rel);
        } else if (auto* reset = std::get_if<DeviceReset>(&a)) {
          dispatcher_.task_management(nexus_, reset->lun, reset->what);
        } else if (std::holds_alternative<CloseConnection>(a)) {
          FUZZ_CHECK(!closed_);  // closed once
          closed_ = true;
        }
      }
    }
    check_tasks();
  }

  void check_tasks() {
    const auto& params = config_.params;
    FUZZ_CHECK(engine_->task_count() <= config_.cmd_window_depth + config_.max_immediate_commands);
    // Every task state and budget change is a row of task_transitions / budget_transitions and
    // lands on a row of task_lives (session_engine.hpp).
    FUZZ_CHECK(engine_->task_moves_refused() == 0);
    for (auto it = may_answer_.begin(); it != may_answer_.end();) {
      const EngineTask* t = engine_->task(iscsi::Itt{*it});
      // A task that ended without status, or was aborted, is answered no more.
      if (t == nullptr || t->life.state == TaskState::aborted_executing || t->life.state == TaskState::aborted_fetching) {
        it = may_answer_.erase(it);
        continue;
      }
      if (t->buffer) {
        if (budget_staging(t->life.budget)) {
          FUZZ_CHECK(t->buffer.size() <= params.first_burst_length);
        } else {
          // A full task buffer only under a granted budget that covers it.
          FUZZ_CHECK(t->life.budget == TaskBudget::granted);
          FUZZ_CHECK(t->buffer.size() <= t->budget_bytes);
        }
      }
      ++it;
    }
    // What the session holds in task buffers (the harness drops sent batches at once): the granted
    // budget, plus at most FirstBurstLength of unsolicited data per task still waiting for it.
    std::uint64_t staging = 0;
    for (std::uint32_t itt : all_itts_) {
      const EngineTask* t = engine_->task(iscsi::Itt{itt});
      if (t != nullptr && t->buffer && budget_staging(t->life.budget)) staging += t->buffer.size();
      // Every task is in a combination of task_lives (session_engine.hpp).
      if (t != nullptr) FUZZ_CHECK(task_life_row(t->life) != 0);
      // A task waits for its budget only while that budget is queued (session_engine.hpp).
      if (t != nullptr && t->life.state == TaskState::waiting_budget)
        FUZZ_CHECK(t->life.budget == TaskBudget::queued || t->life.budget == TaskBudget::queued_staging);
    }
    FUZZ_CHECK(pool_.bytes() <= ledger_.granted_bytes() + staging);
    if (closed_) FUZZ_CHECK(!engine_->next_deadline().has_value());  // a closed session needs no timer
    check_budget();
  }

  SessionEngineConfig config_;
  bool rdma_ = false;
  ScsiDispatcher dispatcher_;
  NexusId nexus_{};
  asio::io_context io_;
  CountingPool pool_;
  std::unique_ptr<SharedLevel> shared_;  // null: no shared level
  PayloadLedger ledger_;
  std::unique_ptr<SessionEngine> engine_;
  SessionEngine::TimePoint now_;
  SerialNumber expected_stat_sn_;
  std::deque<std::uint32_t> executions_;
  std::deque<GetWriteData> reads_;
  std::set<std::uint32_t> may_answer_;
  std::map<std::uint32_t, std::uint32_t> edtl_;  // ITT → EDTL of the command that made its task
  std::vector<std::uint32_t> itts_;
  std::set<std::uint32_t> all_itts_;  // every ITT a SCSI Command carried
  std::vector<std::uint32_t> ttts_;
  std::vector<std::byte> scratch_;
  bool closed_ = false;
};

}  // namespace

namespace {

// The 4 configuration bytes (see the top of this file) → a harness whose session is in full
// feature phase.
std::unique_ptr<Harness> start_harness(const std::array<std::uint8_t, 4>& c) {
  SessionEngineConfig config;
  auto& p = config.params;
  p.immediate_data = (c[0] & 1) != 0;
  p.initial_r2t = (c[0] & 2) != 0;
  config.discovery = (c[0] & 4) != 0;
  const bool rdma = (c[0] & 8) != 0;
  config.idle_interval = (c[0] & 16) != 0 ? 100ms : 0ms;
  config.ping_timeout = 50ms;
  p.max_burst_length = 512u << ((c[1] >> 3) & 7);
  p.first_burst_length = std::min(512u << (c[1] & 7), p.max_burst_length);
  p.initiator_max_recv_data_segment_length = 512u << (c[2] & 7);
  p.max_outstanding_r2t = 1 + ((c[2] >> 3) & 3);
  config.cmd_window_depth = 1 + (c[2] >> 5);
  config.max_immediate_commands = 1 + ((c[3] >> 4) & 3);
  config.exp_cmd_sn = SerialNumber(0xfffffff8u);  // the window wraps around 2^32 in most runs
  config.stat_sn = SerialNumber(0xfffffffcu);
  const std::uint64_t budget = 4096ull << (c[3] & 15);
  const unsigned shared = c[3] >> 6;
  const std::uint64_t shared_budget = shared == 0 ? 0 : budget;
  const std::uint64_t shared_other = shared == 0 ? 0 : budget / 2 * (shared - 1);  // none, half, all
  return std::make_unique<Harness>(config, rdma, budget, shared_budget, shared_other, SessionEngine::TimePoint{} + 1h);
}

// Steps 0-3: an initiator PDU. Arguments: selector, flags, ITT/TTT pick; the opcode is an
// initiator's, the I bit of the raw byte 0 kept; then [the AHS record] and the data segment record.
void pdu_step(Harness& h, fuzz::PduStep pdu, fuzz::Reader& in) {
  iscsi::Bhs& bhs = pdu.bhs;
  const std::uint8_t flags = pdu.args[1];
  const std::uint8_t pick = pdu.args[2];
  const auto ahs = (flags & 16) != 0 ? in.record() : std::span<const std::byte>{};
  const auto data = in.record();
  const std::uint8_t opcode = iscsi::raw_opcode(bhs);
  if ((flags & 1) != 0) store_be32(&bhs[24], (h.engine().window().exp_cmd_sn() + (flags >> 5)).value());
  if ((flags & 2) != 0) {
    if (auto itt = h.pick_itt(pick)) store_be32(&bhs[opcode == 0x02 ? 20 : 16], *itt);
  }
  if ((flags & 4) != 0) {
    if (auto ttt = h.pick_ttt(pick)) store_be32(&bhs[20], *ttt);
  }
  const std::error_code pdu_error = (flags & 8) != 0 ? make_error_code(errc::data_digest_error) : std::error_code{};
  h.deliver(bhs, ahs, data, pdu_error);
}

// Steps 4-7: time, backend and RDMA completions, the connection closing.
void other_step(Harness& h, std::uint8_t step, fuzz::Reader& in) {
  switch (step % 8) {
    case 4:
      if ((step & 8) != 0) h.timer_at_deadline();
      else h.timer(std::chrono::milliseconds(in.u16()));
      break;
    case 5: h.complete_one(in.u8()); break;
    case 6:
      while (h.complete_one(0)) {
      }
      break;
    default: h.close(); break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* raw, std::size_t size) {
  return fuzz::run_engine_input(raw, size, initiator_opcodes, 0x40, start_harness, pdu_step, other_step);
}

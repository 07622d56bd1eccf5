// Fuzz target: CDB parsing and the target's SCSI device server (target/…/scsi_dispatcher.hpp;
// SPC-5, SBC-4): plan() on arbitrary CDBs from two I_T nexuses, then — for plans that are not
// rejected — the transport's EDTL checks (check_data_out_length, shorten_transfer) and execute()
// over a 1 MiB memory LUN, so parameter lists (UNMAP, PERSISTENT RESERVE OUT, MODE SELECT, SET
// TARGET PORT GROUPS) and COMPARE AND WRITE data are parsed too. Input: a configuration byte (bit
// 0: read-only LU; bit 1: explicit ALUA: groups 1 (active/optimized, first nexus) and 2 (standby,
// second nexus) moved at once by a stand-in coordinator), then
// commands: a selector byte (bits 0-1: LUN index 0..3, of which 0 and 1 exist; bit 2: second
// nexus; bit 3: a task management function first; bit 4: skip execute; bit 5: splice the last ROD
// token a RECEIVE ROD TOKEN INFORMATION returned into a WRITE USING TOKEN's parameter list, so the
// token copy path runs with fuzzed ranges and offsets — the fuzzer cannot guess a random token), a
// CDB length byte (1..32), the CDB, a 32-bit EDTL, and a record with the Data-Out bytes (repeated
// to the length needed).
// Invariants: a plan without direction moves no bytes; a plan never moves more than twice the LU's
// maximum transfer or max_data_in_allocation_bytes (what the transport allocates up front); a
// shortened plan moves no more than the EDTL; execute() returns no more data-in than its buffer,
// and none with CHECK CONDITION.
#include <algorithm>
#include <array>
#include <exception>
#include <memory>
#include <optional>
#include <vector>

#include "fuzz_support.hpp"
#include "iserkit/common/asio.hpp"
#include "iserkit/common/bytes.hpp"
#include "iserkit/target/backends.hpp"
#include "iserkit/target/logical_unit.hpp"
#include "iserkit/target/scsi_dispatcher.hpp"

using namespace iserkit;
using namespace iserkit::target;

namespace {

constexpr std::uint64_t lu_size = 1u << 20;

ScsiOutcome run(asio::io_context& io, Awaitable<ScsiOutcome> a) {
  std::optional<ScsiOutcome> out;
  std::exception_ptr error;
  asio::co_spawn(io, std::move(a), [&](std::exception_ptr e, ScsiOutcome v) {
    error = e;
    if (!e) out = v;
  });
  io.restart();
  io.run();
  FUZZ_CHECK(!error);  // execute() never throws except bad_alloc
  FUZZ_CHECK(out.has_value());
  return *out;
}

// Moves group 1 (local) and 2 (a peer's) at once, as the failover coordinator does in the end
// (so SET TARGET PORT GROUPS never waits).
class InstantTransitions : public AluaTransitions {
 public:
  explicit InstantTransitions(PortGroupTable& table) : table_(table) {}
  bool is_local(std::uint16_t id) const noexcept override { return id == 1; }
  void request(bool active) noexcept override {
    table_.set_states({{1, active ? AluaState::active_optimized : AluaState::standby},
                       {2, active ? AluaState::standby : AluaState::active_optimized}});
  }

 private:
  PortGroupTable& table_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* raw, std::size_t size) {
  fuzz::Reader in(raw, size);
  const std::uint8_t config = in.u8();
  ScsiDispatcher dispatcher;
  for (std::uint16_t index : {0, 1}) {
    LogicalUnitOptions o;
    o.identity.serial = "FUZZ" + std::to_string(index);
    o.read_only = (config & 1) != 0 && index == 0;
    o.max_transfer_bytes = 256 * 1024;
    auto backend = make_memory_backend({.size_bytes = lu_size, .block_size_bytes = index == 0 ? 512u : 4096u,
                                        .read_only = false});
    FUZZ_CHECK(dispatcher.add_logical_unit(index, std::make_shared<LogicalUnit>(backend, o)).has_value());
  }
  const bool alua = (config & 2) != 0;
  std::shared_ptr<PortGroupTable> table;
  std::shared_ptr<InstantTransitions> transitions;
  if (alua) {
    table = *PortGroupTable::make({{.id = 1, .state = AluaState::active_optimized, .relative_ports = {1}},
                                   {.id = 2, .state = AluaState::standby, .relative_ports = {2}}});
    transitions = std::make_shared<InstantTransitions>(*table);
    table->set_transitions(transitions);
    dispatcher.share_port_groups(table);
  }
  const NexusId nexus[2] = {dispatcher.open_nexus("iqn.2026-11.org.test:a,i,0x800102030405"),
                            dispatcher.open_nexus("iqn.2026-11.org.test:b,i,0x800102030406",
                                                  alua ? TargetPort{.relative_port = 2, .group = 2} : TargetPort{})};
  asio::io_context io;
  std::optional<std::array<std::byte, 512>> token;  // the last ROD token returned (bit 5)

  for (int commands = 0; !in.empty() && commands < 64; ++commands) {
    const std::uint8_t selector = in.u8();
    const auto lun = scsi::Lun::from_index(selector & 3);
    const NexusId who = nexus[(selector >> 2) & 1];
    if ((selector & 8) != 0) {
      const std::uint8_t f = in.u8() % 3;
      dispatcher.task_management(who, lun, static_cast<TaskManagement>(f));
    }
    const std::size_t cdb_length = std::clamp<std::size_t>(in.u8(), 1, 32);
    const auto cdb_bytes = in.bytes(cdb_length);
    if (cdb_bytes.empty()) return 0;
    std::array<std::byte, 32> cdb_storage{};
    std::copy(cdb_bytes.begin(), cdb_bytes.end(), cdb_storage.begin());
    const ConstByteSpan cdb(cdb_storage.data(), cdb_bytes.size());
    const std::uint32_t edtl = static_cast<std::uint32_t>(in.u16()) << 16 | in.u16();
    const auto data_out = in.record();

    CommandPlan plan = dispatcher.plan(who, lun, cdb);
    if (plan.rejected()) continue;
    // A command without data moves no bytes (a data-in command with ALLOCATION LENGTH 0 keeps its
    // direction and moves none).
    if (plan.direction == DataDirection::none) FUZZ_CHECK(plan.transfer_length_bytes == 0);
    // What the transport allocates before execute() is bounded: media commands by the LU's maximum
    // transfer (twice for COMPARE AND WRITE), the rest by max_data_in_allocation_bytes.
    FUZZ_CHECK(plan.transfer_length_bytes <= std::max(2 * 256 * 1024u, max_data_in_allocation_bytes));
    if (plan.direction == DataDirection::to_target) {
      if (check_data_out_length(plan, edtl)) continue;
      if (edtl < plan.transfer_length_bytes) {
        if (!shorten_transfer(plan, edtl)) continue;
        FUZZ_CHECK(plan.transfer_length_bytes <= edtl);
      }
    }
    if ((selector & 16) != 0) continue;
    std::vector<std::byte> buffer(plan.transfer_length_bytes);
    if (plan.direction == DataDirection::to_target && !data_out.empty())
      for (std::size_t i = 0; i < buffer.size(); ++i) buffer[i] = data_out[i % data_out.size()];
    const auto opcode = static_cast<std::uint8_t>(cdb[0]);
    const auto service_action = cdb.size() > 1 ? static_cast<std::uint8_t>(cdb[1]) & 0x1f : 0;
    // SBC-4: the ROD TOKEN of WRITE USING TOKEN is bytes 16..527 of its parameter list.
    if ((selector & 32) != 0 && token && opcode == 0x83 && service_action == 0x11 && buffer.size() >= 16 + 512)
      std::copy(token->begin(), token->end(), buffer.begin() + 16);
    const ScsiOutcome outcome = run(io, dispatcher.execute(who, lun, cdb, plan, buffer));
    FUZZ_CHECK(outcome.data_length_bytes <= buffer.size());
    if (outcome.status != scsi::Status::good) FUZZ_CHECK(outcome.data_length_bytes == 0);
    // SPC-4: a POPULATE TOKEN's information ends with one ROD token descriptor (2 reserved
    // bytes, the token) after the 32-byte header, no sense data and its 4-byte length.
    if (opcode == 0x84 && service_action == 0x07 && outcome.status == scsi::Status::good &&
        outcome.data_length_bytes >= 38 + 512 && load_be32(buffer.data() + 32) == 514) {
      token.emplace();
      std::copy_n(buffer.begin() + 38, 512, token->begin());
    }
  }
  return 0;
}

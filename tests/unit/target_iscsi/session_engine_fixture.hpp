// The fixture of the target SessionEngine unit tests (session_engine_test.cpp,
// session_engine_table_test.cpp): a SessionEngine over a fake SCSI layer and a heap pool; PDUs go
// in through place() and on_pdu() as a datamover delivers them, and the actions that come out are
// sorted into the vectors below (sent PDUs, executions, releases, RDMA actions, resets, closes).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include "iserkit/common/bytes.hpp"
#include "iserkit/common/errors.hpp"
#include "session_engine.hpp"
#include "target_rig.hpp"

namespace iserkit::target::engine_test {

using namespace std::chrono_literals;
using iscsi::Itt;
using iscsi::Ttt;

inline constexpr std::uint32_t block = 512;

// The fake SCSI layer (READ(10)/WRITE(10) of 512-byte blocks, INQUIRY, TEST UNIT READY; LUNs 0
// and 1), its CDBs and data patterns: the ScriptedPeer harness's (tests/unit/engine_harness/).
inline constexpr auto fake_plan = &test::harness::TargetRig::plan;
inline constexpr auto cdb10 = &test::harness::TargetRig::cdb10;
using test::harness::pattern;

inline std::array<std::byte, 16> inquiry(std::uint16_t alloc) {
  std::array<std::byte, 16> c{};
  c[0] = std::byte{0x12};
  store_be16(&c[3], alloc);
  return c;
}

struct Sent {
  iscsi::PduHeader header;
  std::vector<std::byte> data;
  template <class T>
  [[nodiscard]] const T& as() const {
    return std::get<T>(header);
  }
  template <class T>
  [[nodiscard]] bool is() const {
    return std::holds_alternative<T>(header);
  }
};

class SessionEngineTest : public ::testing::Test {
 protected:
  using TimePoint = SessionEngine::TimePoint;

  void start(bool discovery = false) {
    if (!hooks.plan) hooks.plan = fake_plan;  // a test may bring its own SCSI layer
    hooks.lun_exists = [](const scsi::Lun& l) { return l == scsi::Lun::from_index(0) || l == scsi::Lun::from_index(1); };
    hooks.send_targets = [this](const std::string&) { return targets; };
    hooks.request_budget = [this](Itt itt, std::uint64_t bytes) {
      requested.emplace_back(itt, bytes);
      return grant_budget_now;
    };
    config.discovery = discovery;
    engine = std::make_unique<SessionEngine>(config, hooks, pool, make_data_phase({.rdma_data = rdma}), t0);
  }

  // Delivers one PDU as a datamover would: header phase (place), the data segment into the placed
  // span or scratch, then the payload phase.
  void deliver(const iscsi::PduHeader& header, ConstByteSpan data = {}, std::error_code pdu_error = {},
               TimePoint now = TimePoint{}) {
    datamover::PduIn in;
    in.bhs = iscsi::encode_bhs(header);
    iscsi::set_lengths(in.bhs, 0, static_cast<std::uint32_t>(data.size()));
    auto dest = engine->place(in.bhs, static_cast<std::uint32_t>(data.size()));
    placed_last = !dest.empty();
    if (!dest.empty()) {
      EXPECT_EQ(dest.size(), data.size());
      std::memcpy(dest.data(), data.data(), data.size());
      in.data = dest;
    } else {
      scratch.assign(data.begin(), data.end());
      in.data = scratch;
    }
    in.pdu_error = pdu_error;
    engine->on_pdu(in, now == TimePoint{} ? t0 : now);
    collect();
  }

  // Delivers a header-only PDU as the iSER datamover does, with the Read and Write STags that came
  // in its iSER header (RFC 7145 §7.3): nothing is placed, the data moves by RDMA.
  void deliver_iser(const iscsi::PduHeader& header, std::optional<datamover::PeerBuffer> peer_read,
                    std::optional<datamover::PeerBuffer> peer_write) {
    datamover::PduIn in;
    in.bhs = iscsi::encode_bhs(header);
    in.peer_read = peer_read;
    in.peer_write = peer_write;
    engine->place(in.bhs, 0);
    engine->on_pdu(in, t0);
    collect();
  }

  // Hands the vector back as Connection::pump() does, so every test runs with recycled actions.
  void collect() {
    auto actions = engine->take_actions();
    collect_from(actions);
    engine->recycle_actions(std::move(actions));
  }

  void collect_from(std::vector<EngineAction>& actions) {
    for (auto& a : actions) {
      if (auto* batch = std::get_if<SendPdus>(&a)) {
        ++batches;
        order.push_back("send");
        for (auto& p : batch->pdus) {
          auto h = iscsi::decode_bhs(p.bhs);
          ASSERT_TRUE(h.has_value());
          sent.push_back({*h, std::vector<std::byte>(p.data.begin(), p.data.end())});
        }
      } else if (auto* ex = std::get_if<ExecuteTask>(&a)) {
        executes.push_back(ex->itt);
      } else if (auto* get = std::get_if<GetWriteData>(&a)) {
        gets.push_back(*get);
      } else if (auto* put = std::get_if<PutReadData>(&a)) {
        puts.emplace_back(put->itt, put->bytes);
        order.push_back("put");
      } else if (auto* rel = std::get_if<ReleaseBudget>(&a)) {
        released.push_back(*rel);
        order.push_back("release");
      } else if (auto* reset = std::get_if<DeviceReset>(&a)) {
        resets.push_back(*reset);
      } else if (auto* c = std::get_if<CloseConnection>(&a)) {
        closes.push_back(c->reason);
        order.push_back("close");
      }
    }
  }

  void execute(Itt itt, const ScsiOutcome& outcome) {
    engine->on_task_executed(itt, outcome);
    collect();
  }

  iscsi::ScsiCommand command(std::uint32_t itt, std::uint32_t cmd_sn, std::array<std::byte, 16> cdb, std::uint32_t edtl,
                             bool read, bool write) {
    return iscsi::ScsiCommand{.immediate = false, .final = true, .read = read, .write = write,
                              .lun = scsi::Lun::from_index(0), .itt = Itt{itt}, .expected_data_transfer_length = edtl,
                              .cmd_sn = SerialNumber(cmd_sn), .cdb = cdb};
  }
  iscsi::ScsiCommand tur(std::uint32_t itt, std::uint32_t cmd_sn) { return command(itt, cmd_sn, {}, 0, false, false); }

  static scsi::SenseData sense_of(const Sent& s) {
    EXPECT_GE(s.data.size(), 2u + 14u);
    return scsi::SenseData{.key = static_cast<scsi::SenseKey>(static_cast<std::uint8_t>(s.data[2 + 2]) & 0x0f),
                           .asc = static_cast<std::uint8_t>(s.data[2 + 12]),
                           .ascq = static_cast<std::uint8_t>(s.data[2 + 13])};
  }

  HeapBufferPool pool;
  SessionEngineConfig config{.exp_cmd_sn = SerialNumber(1), .stat_sn = SerialNumber(100), .cmd_window_depth = 4,
                             .max_immediate_commands = 2};
  SessionEngineHooks hooks;
  std::unique_ptr<SessionEngine> engine;
  TimePoint t0 = TimePoint{} + 1h;
  bool grant_budget_now = true;
  bool rdma = false;  // the iSER data phase
  iscsi::TextPairs targets;
  std::vector<std::pair<Itt, std::uint64_t>> requested;
  std::vector<Sent> sent;
  std::size_t batches = 0;
  std::vector<Itt> executes;
  std::vector<ReleaseBudget> released;
  std::vector<GetWriteData> gets;
  std::vector<std::pair<Itt, std::uint32_t>> puts;
  std::vector<std::string> order;
  std::vector<DeviceReset> resets;
  std::vector<std::string> closes;
  std::vector<std::byte> scratch;
  bool placed_last = false;
};

}  // namespace iserkit::target::engine_test

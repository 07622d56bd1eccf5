// Multipath's driver (multipath.cpp) in-process: real Sessions over FakeDatamovers (one per path)
// whose responder plays one logical unit with two target port groups (SPC-5 §5.16): ALUA sense
// moves a command to the other path and re-reads REPORT TARGET PORT GROUPS; a SYNCHRONIZE CACHE is
// sent only after the writes before it completed on both paths; a path whose connection drops
// has its command sent on the other path and is reinstated.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "arena_pool.hpp"
#include "fake_datamover.hpp"
#include "iserkit/common/copy_counter.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/scsi/alua.hpp"
#include "iserkit/scsi/inquiry.hpp"
#include "multipath_internal.hpp"
#include "session_start.hpp"

using namespace iserkit;
using namespace iserkit::initiator;
using namespace std::chrono_literals;
using test::CapturedPdu;
using test::FakeDatamover;
using scsi::AccessState;

namespace {

std::vector<std::byte> port_designator_value(std::uint16_t id) {
  return {std::byte{0}, std::byte{0}, static_cast<std::byte>(id >> 8), static_cast<std::byte>(id & 0xff)};
}

// One logical unit behind two target ports; port i is in target port group i + 1.
struct FakeUnit {
  std::vector<AccessState> states{AccessState::active_optimized, AccessState::active_non_optimized};
  std::vector<int> unit_attentions{0, 0};  // 2Ah/06h still to report, per path
  std::vector<bool> hold{false, false};    // keep answers back (released by release())
  std::vector<std::function<void()>> held;
  std::vector<std::pair<std::size_t, std::uint8_t>> received;  // (path, opcode), in arrival order
  std::vector<FakeDatamover*> dm{nullptr, nullptr};
  std::vector<int> connects{0, 0};
  std::vector<bool> refuse{false, false};  // logins on the path fail (its portal is away)
  std::vector<std::uint32_t> stat_sn{1, 1};
  std::vector<std::uint8_t> naa_last{7, 7};  // last byte of the unit's NAA, per path (differs = another unit)
  // Paths played as iSER: their session's datamover answers transport() iser, registers command
  // buffers in pools[path] (TaskData::registered, bouncing what lies outside) and caps commands at
  // iser_max bytes. One pool per RDMA device: two pools = two devices.
  std::vector<bool> iser{false, false};
  std::vector<BufferPool*> pools{nullptr, nullptr};
  std::uint32_t iser_max = 8u << 20;

  void release() {
    auto h = std::move(held);
    held.clear();
    for (auto& f : h) f();
  }
  [[nodiscard]] std::size_t count(std::size_t path, std::uint8_t op) const {
    return static_cast<std::size_t>(std::count(received.begin(), received.end(), std::pair{path, op}));
  }
  [[nodiscard]] std::size_t index_of(std::uint8_t op) const {
    for (std::size_t k = 0; k < received.size(); ++k)
      if (received[k].second == op) return k;
    return received.size();
  }

  void answer(std::size_t path, FakeDatamover& d, const iscsi::ScsiCommand& c, std::uint8_t status,
              std::optional<scsi::SenseData> sense, std::vector<std::byte> data = {}) {
    const SerialNumber stat(stat_sn[path]++);
    if (!data.empty() && status == 0) {
      iscsi::DataIn in;
      in.itt = c.itt;
      in.final = in.status_present = true;
      in.stat_sn = stat;
      in.exp_cmd_sn = c.cmd_sn + 1;
      in.max_cmd_sn = c.cmd_sn + 64;
      if (data.size() > c.expected_data_transfer_length) data.resize(c.expected_data_transfer_length);
      if (data.size() < c.expected_data_transfer_length) {
        in.residual_underflow = true;
        in.residual_count = c.expected_data_transfer_length - static_cast<std::uint32_t>(data.size());
      }
      d.push(in, std::move(data));
      return;
    }
    iscsi::ScsiResponse r;
    r.itt = c.itt;
    r.status = status;
    r.stat_sn = stat;
    r.exp_cmd_sn = c.cmd_sn + 1;
    r.max_cmd_sn = c.cmd_sn + 64;
    std::vector<std::byte> segment;
    if (sense) {
      std::array<std::byte, 64> buf{};
      const std::size_t n = scsi::encode_sense(*sense, scsi::SenseFormat::fixed, buf);
      segment.resize(2 + n);
      store_be16(segment.data(), static_cast<std::uint16_t>(n));
      std::copy_n(buf.begin(), n, segment.begin() + 2);
    }
    d.push(r, std::move(segment));
  }

  void respond(std::size_t path, FakeDatamover& d, const CapturedPdu& p) {
    const auto* c = p.as<iscsi::ScsiCommand>();
    if (c == nullptr) return;
    const auto op = static_cast<std::uint8_t>(c->cdb[0]);
    received.emplace_back(path, op);
    const iscsi::ScsiCommand cmd = *c;
    if (op == 0x12) {  // INQUIRY: answered in every state (SPC-5 §5.16.2.4.4)
      if ((static_cast<std::uint8_t>(cmd.cdb[1]) & 1) == 0) {
        answer(path, d, cmd, 0, std::nullopt, scsi::encode_standard_inquiry({.tpgs = 1}));
        return;
      }
      const std::vector<scsi::Designator> ds{
          {.type = scsi::DesignatorType::naa, .association = scsi::Association::logical_unit,
           .value = {std::byte{0x60}, std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}, std::byte{5},
                     std::byte{6}, static_cast<std::byte>(naa_last[path])}},
          {.type = scsi::DesignatorType::relative_target_port, .association = scsi::Association::target_port,
           .value = port_designator_value(static_cast<std::uint16_t>(path + 1))},
          {.type = scsi::DesignatorType::target_port_group, .association = scsi::Association::target_port,
           .value = port_designator_value(static_cast<std::uint16_t>(path + 1))}};
      answer(path, d, cmd, 0, std::nullopt, scsi::encode_vpd_page(0x83, scsi::encode_designators(ds)));
      return;
    }
    if (op == 0xa3) {  // REPORT TARGET PORT GROUPS (SPC-5 §6.36.2)
      std::vector<std::byte> data(4);
      for (std::uint16_t g = 0; g < 2; ++g) {
        const std::uint16_t id = g + 1;
        const std::array<std::byte, 12> desc{static_cast<std::byte>(states[g]), std::byte{0x0f}, std::byte{0},
                                             static_cast<std::byte>(id), std::byte{0}, std::byte{0}, std::byte{0},
                                             std::byte{1}, std::byte{0}, std::byte{0}, std::byte{0},
                                             static_cast<std::byte>(id)};
        data.insert(data.end(), desc.begin(), desc.end());
      }
      store_be32(data.data(), static_cast<std::uint32_t>(data.size() - 4));
      answer(path, d, cmd, 0, std::nullopt, std::move(data));
      return;
    }
    if (unit_attentions[path] > 0) {
      --unit_attentions[path];
      answer(path, d, cmd, 0x02, scsi::SenseData{.key = scsi::SenseKey::unit_attention, .asc = 0x2a, .ascq = 0x06});
      return;
    }
    if (states[path] == AccessState::standby) {
      answer(path, d, cmd, 0x02, scsi::SenseData{.key = scsi::SenseKey::not_ready, .asc = 0x04, .ascq = 0x0b});
      return;
    }
    if (states[path] == AccessState::transitioning) {
      answer(path, d, cmd, 0x02, scsi::SenseData{.key = scsi::SenseKey::not_ready, .asc = 0x04, .ascq = 0x0a});
      return;
    }
    auto good = [this, path, &d, cmd] { answer(path, d, cmd, 0, std::nullopt); };
    if (hold[path]) {
      held.push_back(good);
    } else {
      good();
    }
  }
};

Awaitable<Result<std::shared_ptr<Session>>> fake_connect(FakeUnit& unit, Url url, SessionOptions options) {
  const std::size_t i = url.host == "p0" ? 0 : 1;
  ++unit.connects[i];
  if (unit.refuse[i]) co_return fail(std::errc::connection_refused);
  unit.stat_sn[i] = 1;
  auto ex = co_await asio::this_coro::executor;
  datamover::Capabilities caps;
  if (unit.iser[i]) caps = {.rdma_data = true, .max_transfer_bytes = unit.iser_max};
  auto fake = std::make_unique<FakeDatamover>(ex, caps);
  if (unit.iser[i]) {
    fake->play_transport(datamover::Transport::iser);
    fake->use_pool(*unit.pools[i]);
  }
  unit.dm[i] = fake.get();
  fake->respond_with([&unit, i](FakeDatamover& d, const CapturedPdu& p) { unit.respond(i, d, p); });
  co_return start_session(ex, std::move(fake), std::move(options), iscsi::OperationalParameters{}, "iqn.2026-01.test:t",
                          EngineStart{.cmd_sn = SerialNumber(1),
                                      .exp_cmd_sn = SerialNumber(1),
                                      .max_cmd_sn = SerialNumber(64),
                                      .exp_stat_sn = SerialNumber(1)});
}

CommandRequest command(std::uint8_t opcode, std::span<const std::byte> out = {}) {
  CommandRequest r;
  r.lun = scsi::Lun::from_index(0);
  r.cdb.length = opcode < 0x20 ? 6 : 10;
  r.cdb.bytes[0] = static_cast<std::byte>(opcode);
  if (opcode == 0x2a) r.cdb.bytes[8] = std::byte{1};  // WRITE (10) of one block
  r.data_out = out;
  return r;
}

Awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  t.expires_after(d);
  boost::system::error_code ec;
  co_await t.async_wait(use_awaitable_ec(ec));
}

struct Rig {
  asio::io_context io;
  FakeUnit unit;
  std::vector<PathEvent> events;
  // The event's path's state read through paths() inside on_event (what a status file shows).
  std::vector<PathStatus::State> states_at_event;
  Multipath* device = nullptr;
  bool open_without_refused_paths = false;
  std::vector<datamover::Transport> schemes{datamover::Transport::tcp, datamover::Transport::tcp};  // iscsi:// or iser://
  TransportPolicy transport = TransportPolicy::from_url;
  std::error_code open_error;  // set when open failed (the body then does not run)

  template <class Body>
  void run(MultipathPolicy policy, Body body, bool expect_open = true) {
    MultipathOptions o;
    o.policy = policy;
    o.open_without_refused_paths = open_without_refused_paths;
    o.session.nop_interval = std::chrono::hours(1);
    o.session.transport = transport;
    o.reinstate_delay_min = 10ms;
    o.reinstate_delay_max = 20ms;
    o.on_event = [this](const PathEvent& e) {
      events.push_back(e);
      if (device != nullptr && e.path < device->paths().size()) states_at_event.push_back(device->paths()[e.path].state);
    };
    bool finished = false;
    asio::co_spawn(
        io,
        [&]() -> Awaitable<void> {
          PathConnector connect = [this](const Url& url, SessionOptions so) { return fake_connect(unit, url, std::move(so)); };
          std::vector<Url> urls(2);
          urls[0].host = "p0";
          urls[1].host = "p1";
          urls[0].target = urls[1].target = "iqn.2026-01.test:t";
          urls[0].transport = schemes[0];
          urls[1].transport = schemes[1];
          auto mp = co_await open_multipath(io.get_executor(), urls, scsi::Lun::from_index(0), o, connect);
          EXPECT_EQ(bool(mp), expect_open) << (mp ? "" : mp.error().message());
          if (!mp) {
            open_error = mp.error();
            finished = true;
            co_return;
          }
          device = mp->get();
          co_await body(**mp);
          device = nullptr;
          (*mp)->close();
          finished = true;
        },
        asio::detached);
    io.run_for(20s);
    EXPECT_TRUE(finished) << "the test body did not finish";
  }
};

}  // namespace

TEST(MultipathDriver, AluaStandbySenseMovesTheCommandAndStateChangedRereadsTheStates) {
  Rig rig;
  rig.run(MultipathPolicy::failover, [&](Multipath& mp) -> Awaitable<void> {
    EXPECT_EQ(mp.paths()[0].access_state, AccessState::active_optimized);
    EXPECT_EQ(mp.paths()[1].access_state, AccessState::active_non_optimized);
    EXPECT_EQ(mp.paths()[1].target_port_group, std::optional<std::uint16_t>(2));
    // Group 1 goes to standby behind our back: path 0 answers NOT READY 04h/0Bh.
    rig.unit.states[0] = AccessState::standby;
    auto r = co_await mp.execute(command(0x00));
    EXPECT_TRUE(r && r->status == scsi::Status::good);
    EXPECT_EQ(rig.unit.count(0, 0x00), 1u);
    EXPECT_EQ(rig.unit.count(1, 0x00), 1u);  // sent again on the non-optimized path
    EXPECT_EQ(mp.paths()[0].access_state, AccessState::standby);
    EXPECT_EQ(mp.stats().alua_retries, 1u);
    EXPECT_GE(mp.stats().alua_refreshes, 2u);
    // Group 1 comes back; path 1 reports ASYMMETRIC ACCESS STATE CHANGED: the states are read
    // again and the command goes to the optimized path.
    rig.unit.states[0] = AccessState::active_optimized;
    rig.unit.unit_attentions[1] = 1;
    r = co_await mp.execute(command(0x00));
    EXPECT_TRUE(r && r->status == scsi::Status::good);
    EXPECT_EQ(rig.unit.count(1, 0x00), 2u);
    EXPECT_EQ(rig.unit.count(0, 0x00), 2u);
    EXPECT_EQ(mp.paths()[0].access_state, AccessState::active_optimized);
    EXPECT_EQ(mp.stats().alua_retries, 2u);
  });
}

// A gateway failover (target/README.md "ALUA failover"): the active group goes transitioning
// (the gateway drains), then standby, and the other gateway's group becomes active/optimized with
// ASYMMETRIC ACCESS STATE CHANGED on its nexus. The command waits through it without failing and
// completes on the new active path soon after the change: the states are re-read after 100 ms,
// 200 ms, … (not only every second) while no path is usable.
TEST(MultipathDriver, AGatewayFailoverIsFollowedSoonAfterTheStatesMove) {
  Rig rig;
  rig.unit.states = {AccessState::active_optimized, AccessState::standby};
  rig.run(MultipathPolicy::failover, [&](Multipath& mp) -> Awaitable<void> {
    EXPECT_EQ(mp.paths()[1].access_state, AccessState::standby);
    rig.unit.states[0] = AccessState::transitioning;
    auto self = mp.shared_from_this();
    asio::steady_timer flip(rig.io);
    flip.expires_after(150ms);
    flip.async_wait([&](boost::system::error_code) {
      rig.unit.states = {AccessState::standby, AccessState::active_optimized};
      rig.unit.unit_attentions[1] = 1;
    });
    const std::vector<std::byte> block(512, std::byte{1});
    const auto start = std::chrono::steady_clock::now();
    auto r = co_await mp.execute(command(0x2a, block));
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_TRUE(r && r->status == scsi::Status::good);
    EXPECT_EQ(rig.unit.count(0, 0x2a), 1u);  // refused once with 04h/0Ah (not processed)
    EXPECT_EQ(rig.unit.count(1, 0x2a), 2u);  // the attention, then done
    EXPECT_EQ(mp.paths()[0].access_state, AccessState::standby);
    EXPECT_EQ(mp.paths()[1].access_state, AccessState::active_optimized);
    EXPECT_LT(took, 800ms) << "the states were not re-read soon after the change";
    EXPECT_GE(took, 150ms);
  });
}

TEST(MultipathDriver, AFlushIsSentOnlyAfterTheWritesBeforeItCompletedOnBothPaths) {
  Rig rig;
  rig.unit.states[1] = AccessState::active_optimized;
  rig.run(MultipathPolicy::round_robin, [&](Multipath& mp) -> Awaitable<void> {
    rig.unit.hold = {true, true};
    const std::vector<std::byte> block(512, std::byte{0x5a});
    int writes_done = 0;
    auto self = mp.shared_from_this();
    for (int k = 0; k < 2; ++k) {
      asio::co_spawn(rig.io, self->execute(command(0x2a, block)), [&](std::exception_ptr, Result<scsi::ScsiResult> r) {
        EXPECT_TRUE(r);
        ++writes_done;
      });
    }
    bool flushed = false;
    asio::co_spawn(rig.io, self->execute(command(0x35)), [&](std::exception_ptr, Result<scsi::ScsiResult> r) {
      EXPECT_TRUE(r && r->status == scsi::Status::good);
      flushed = true;
    });
    co_await sleep_for(100ms);
    EXPECT_EQ(rig.unit.count(0, 0x2a) + rig.unit.count(1, 0x2a), 2u);
    EXPECT_EQ(rig.unit.count(0, 0x2a), 1u);  // round-robin: one write per path
    EXPECT_EQ(rig.unit.index_of(0x35), rig.unit.received.size()) << "the flush left before the writes completed";
    EXPECT_EQ(mp.stats().flushes_held, 1u);
    rig.unit.hold = {false, false};
    rig.unit.release();
    for (int i = 0; i < 100 && !flushed; ++i) co_await sleep_for(10ms);
    EXPECT_TRUE(flushed);
    EXPECT_EQ(writes_done, 2);
    EXPECT_LT(rig.unit.index_of(0x35), rig.unit.received.size());
  });
}

TEST(MultipathDriver, ALostPathsCommandGoesToTheOtherPathAndThePathIsReinstated) {
  Rig rig;
  rig.run(MultipathPolicy::failover, [&](Multipath& mp) -> Awaitable<void> {
    rig.unit.hold[0] = true;
    auto self = mp.shared_from_this();
    std::optional<Result<scsi::ScsiResult>> result;
    asio::co_spawn(rig.io, self->execute(command(0x00)),
                   [&](std::exception_ptr, Result<scsi::ScsiResult> r) { result = std::move(r); });
    co_await sleep_for(50ms);
    EXPECT_EQ(rig.unit.count(0, 0x00), 1u);
    EXPECT_FALSE(result);
    rig.unit.held.clear();  // the answer is lost with the connection
    rig.unit.hold[0] = false;
    rig.unit.dm[0]->push_error(make_error_code(errc::connection_closed));
    for (int i = 0; i < 100 && !result; ++i) co_await sleep_for(10ms);
    EXPECT_TRUE(result && *result && (*result)->status == scsi::Status::good);
    EXPECT_EQ(rig.unit.count(1, 0x00), 1u);  // sent again on path 1
    EXPECT_EQ(mp.stats().path_retries, 1u);
    for (int i = 0; i < 100 && mp.paths()[0].state != PathStatus::State::up; ++i) co_await sleep_for(10ms);
    EXPECT_EQ(mp.paths()[0].state, PathStatus::State::up);
    EXPECT_EQ(rig.unit.connects[0], 2);
    EXPECT_EQ(mp.paths()[0].reinstatements, 1u);
    const bool down = std::any_of(rig.events.begin(), rig.events.end(), [](const PathEvent& e) {
      return e.kind == PathEvent::Kind::path_down && e.path == 0;
    });
    const bool up = std::any_of(rig.events.begin(), rig.events.end(), [](const PathEvent& e) {
      return e.kind == PathEvent::Kind::path_up && e.path == 0;
    });
    EXPECT_TRUE(down && up);
    // Observers asking paths() from on_event see the change already (iserkit-nbd's stats file is
    // written there): not up at path_down, up at path_up.
    EXPECT_EQ(rig.states_at_event.size(), rig.events.size());
    for (std::size_t k = 0; k < rig.events.size() && k < rig.states_at_event.size(); ++k) {
      if (rig.events[k].kind == PathEvent::Kind::path_down) {
        EXPECT_NE(rig.states_at_event[k], PathStatus::State::up);
      }
      if (rig.events[k].kind == PathEvent::Kind::path_up) {
        EXPECT_EQ(rig.states_at_event[k], PathStatus::State::up);
      }
    }
    // Back on the optimized path (failover prefers its group over path 1's non-optimized one).
    auto r = co_await mp.execute(command(0x00));
    EXPECT_TRUE(r);
    EXPECT_EQ(rig.unit.count(0, 0x00), 2u);
  });
}

// Where a failed path's reinstatement stands (issue 24 item 6: the state visible, as for a single
// session): down with the logins tried and the next one announced while its portal refuses; up
// with no attempt pending once one succeeds.
TEST(MultipathDriver, ADownPathShowsItsReinstatingLoginsUntilItIsUpAgain) {
  Rig rig;
  rig.run(MultipathPolicy::failover, [&](Multipath& mp) -> Awaitable<void> {
    EXPECT_EQ(mp.paths()[0].reinstate_attempts, 0u);
    EXPECT_FALSE(mp.paths()[0].next_attempt);
    rig.unit.refuse[0] = true;
    rig.unit.dm[0]->push_error(make_error_code(errc::connection_closed));
    co_await sleep_for(5ms);
    auto moved = co_await mp.execute(command(0x00));  // fails on path 0 (its session ended): path 1
    EXPECT_TRUE(moved);
    // Sampled between two logins: while a login runs no next one is announced yet.
    for (int i = 0; i < 200 && (mp.paths()[0].reinstate_attempts < 3 || !mp.paths()[0].next_attempt); ++i)
      co_await sleep_for(5ms);
    const PathStatus down = mp.paths()[0];
    EXPECT_EQ(down.state, PathStatus::State::down);
    EXPECT_GE(down.reinstate_attempts, 3u);
    EXPECT_TRUE(down.next_attempt.has_value()) << "the loop waits between logins (the fake fails at once)";
    if (down.next_attempt) {
      EXPECT_LE(*down.next_attempt - std::chrono::steady_clock::now(), 20ms) << "beyond reinstate_delay_max";
    }
    EXPECT_EQ(mp.paths()[1].reinstate_attempts, 0u);
    rig.unit.refuse[0] = false;
    for (int i = 0; i < 200 && mp.paths()[0].state != PathStatus::State::up; ++i) co_await sleep_for(5ms);
    const PathStatus up = mp.paths()[0];
    EXPECT_EQ(up.state, PathStatus::State::up);
    EXPECT_EQ(up.reinstate_attempts, 0u);
    EXPECT_FALSE(up.next_attempt);
  });
}

TEST(MultipathDriver, APathToAnotherLogicalUnitFailsTheOpenOrIsLeftOutWhenAsked) {
  {
    Rig rig;
    rig.unit.naa_last[1] = 8;  // path 1 leads to another logical unit
    rig.run(MultipathPolicy::round_robin, [](Multipath&) -> Awaitable<void> { co_return; }, false);
    EXPECT_EQ(rig.open_error, make_error_code(errc::invalid_argument));
  }
  Rig rig;
  rig.unit.naa_last[1] = 8;
  rig.open_without_refused_paths = true;
  rig.run(MultipathPolicy::round_robin, [&](Multipath& mp) -> Awaitable<void> {
    EXPECT_EQ(mp.paths()[0].state, PathStatus::State::up);
    EXPECT_EQ(mp.paths()[1].state, PathStatus::State::refused);
    for (int k = 0; k < 4; ++k) {
      auto r = co_await mp.execute(command(0x00));
      EXPECT_TRUE(r && r->status == scsi::Status::good);
    }
    // Round-robin, but never on the refused path; and it is not reinstated.
    EXPECT_EQ(rig.unit.count(0, 0x00), 4u);
    EXPECT_EQ(rig.unit.count(1, 0x00), 0u);
    co_await sleep_for(50ms);  // several reinstate delays
    EXPECT_EQ(rig.unit.connects[1], 1);
    EXPECT_EQ(mp.paths()[1].state, PathStatus::State::refused);
  });
}

// Issue 24 item 3: a TCP path and an iSER path to one unit. The device opens (it used to refuse
// any iSER URL), leases from the iSER path's registered pool even though the TCP path logged in
// first, and caps commands at the iSER limit before any iSER session exists (a LunHandle reads the
// limits once). Round-robin sends one write per path, both without a copy: the TCP path takes the
// registered memory as it is, the iSER path finds it registered.
TEST(MultipathDriver, ATcpAndAnIserPathOpenAndShareTheIserPathsPoolWithoutCopies) {
  Rig rig;
  test::ArenaPool device;
  rig.unit.states[1] = AccessState::active_optimized;
  rig.unit.iser = {false, true};
  rig.unit.pools = {nullptr, &device};
  rig.unit.iser_max = 1u << 20;
  rig.schemes = {datamover::Transport::tcp, datamover::Transport::iser};
  rig.run(MultipathPolicy::round_robin, [&](Multipath& mp) -> Awaitable<void> {
    EXPECT_EQ(&mp.buffer_pool(), static_cast<BufferPool*>(&device));
    // the options' iSER limits (8 MiB, 512 KiB), then the session's own 1 MiB once it logged in
    EXPECT_EQ(mp.max_transfer_bytes(), 1u << 20);
    EXPECT_EQ(mp.unstated_max_transfer_bytes(), 512u * 1024);
    auto block = mp.buffer_pool().allocate(512);
    std::fill(block.bytes().begin(), block.bytes().end(), std::byte{0x5a});
    const auto before = copied_payload_bytes();
    for (int k = 0; k < 2; ++k) {
      auto r = co_await mp.execute(command(0x2a, block.bytes()));
      EXPECT_TRUE(r && r->status == scsi::Status::good);
    }
    EXPECT_EQ(rig.unit.count(0, 0x2a), 1u);
    EXPECT_EQ(rig.unit.count(1, 0x2a), 1u);
    EXPECT_EQ(copied_payload_bytes() - before, 0u);
    EXPECT_EQ(mp.paths()[1].data_out_bytes, 512u);
  });
}

// Two iSER paths on two RDMA devices (two pools): the first path's pool is the device's; a buffer
// from it goes as it is on its own device's path and is bounced (copied once, counted) through the
// other device's pool on the other path — correct data, one copy, never an unregistered STag.
TEST(MultipathDriver, IserPathsOnTwoDevicesEachRegisterWhatTheySendAndBounceTheOthersMemory) {
  Rig rig;
  test::ArenaPool device0;
  test::ArenaPool device1(33, 44);
  rig.unit.states[1] = AccessState::active_optimized;
  rig.unit.iser = {true, true};
  rig.unit.pools = {&device0, &device1};
  rig.transport = TransportPolicy::iser;  // iscsi:// URLs, iSER wanted by the options
  rig.run(MultipathPolicy::round_robin, [&](Multipath& mp) -> Awaitable<void> {
    EXPECT_EQ(&mp.buffer_pool(), static_cast<BufferPool*>(&device0));
    EXPECT_EQ(mp.max_transfer_bytes(), 8u << 20);
    auto block = mp.buffer_pool().allocate(4096);
    const auto before = copied_payload_bytes();
    const auto leased_on_1 = device1.leased();
    for (int k = 0; k < 2; ++k) {
      auto r = co_await mp.execute(command(0x2a, block.bytes()));
      EXPECT_TRUE(r && r->status == scsi::Status::good);
    }
    EXPECT_EQ(rig.unit.count(0, 0x2a), 1u);
    EXPECT_EQ(rig.unit.count(1, 0x2a), 1u);
    EXPECT_EQ(copied_payload_bytes() - before, 4096u);  // path 1's bounce only
    EXPECT_EQ(device1.leased(), leased_on_1);           // the bounce buffer went back
  });
}

// TCP paths only: no transfer limit and the shared heap pool, as before.
TEST(MultipathDriver, TcpPathsAloneHaveNoTransferLimit) {
  Rig rig;
  rig.run(MultipathPolicy::failover, [&](Multipath& mp) -> Awaitable<void> {
    EXPECT_EQ(mp.max_transfer_bytes(), 0u);
    EXPECT_EQ(mp.unstated_max_transfer_bytes(), 0u);
    EXPECT_EQ(&mp.buffer_pool(), static_cast<BufferPool*>(&HeapBufferPool::shared()));
    co_return;
  });
}

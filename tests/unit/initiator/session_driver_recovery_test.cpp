// The Session driver's recovery end to end in-process: a real Session over FakeDatamover whose
// connection dies with a command in flight; the Reconnector hands it a new FakeDatamover (after a
// failed attempt), the lost one having been reset (Datamover::abort), the command is sent again
// there and completes once; events reach the
// callback. Without a new connection within the replacement timeout the command fails with
// errc::session_lost and the callback hears "gave up"; the session then keeps logging in with its
// bounded back-off, fails new commands at once, and serves again once a login succeeds (or, with
// reconnect_after_give_up off, has ended).
#include <gtest/gtest.h>

#include <new>
#include <utility>

#include "arena_pool.hpp"
#include "fake_datamover.hpp"
#include "iserkit/common/errors.hpp"
#include "session_rig.hpp"

using namespace iserkit;
using namespace iserkit::initiator;
using namespace std::chrono_literals;
using test::CapturedPdu;
using test::FakeDatamover;
using test::fresh_login;
using test::expect_error;
using test::expect_good;
using test::read10;
using test::CountingCallback;
using test::wait_until;

namespace {

/// Plays a target that answers every read with one Data-In of 0x42 bytes carrying the status.
void answer_reads(FakeDatamover& d, const CapturedPdu& p) { test::answer_read(d, p, 0, 0x42); }

std::size_t commands_in(const FakeDatamover& d) {
  std::size_t n = 0;
  for (const auto& p : d.sent()) n += p.as<iscsi::ScsiCommand>() != nullptr;
  return n;
}

// The shared driver rig (tests/unit/support/session_rig.hpp) with a Reconnector: the first
// connection dies as soon as a command is on it; reconnecting fails `fail_first_attempts` times
// (or always), then hands over a second FakeDatamover that answers reads.
// What the rig counts; a base before SessionRig, so it outlives the session that reports into it.
struct RecoveryRecord {
  int commands_on_first = 0;
  int aborts_of_first = 0;  // the lost connection reset (Datamover::abort), not closed
  FakeDatamover* second = nullptr;
  int attempts = 0;
  bool target_down = false;  // logins fail while set (the target is away)
  std::vector<SessionEvent> events;
};

struct RecoveryRig : RecoveryRecord, test::SessionRig {
  explicit RecoveryRig(std::chrono::milliseconds replacement, int fail_first_attempts, bool never_reconnect = false,
                       bool reconnect_after_give_up = true, std::chrono::milliseconds delay_min = 1ms,
                       std::chrono::milliseconds delay_max = 4ms)
      : SessionRig(Deferred{}) {
    SessionOptions options;
    options.replacement_timeout = replacement;
    options.reconnect_after_give_up = reconnect_after_give_up;
    options.reconnect_delay_min = delay_min;
    options.reconnect_delay_max = delay_max;
    options.on_event = [this](const SessionEvent& e) { events.push_back(e); };
    auto fake = std::make_unique<FakeDatamover>(io.get_executor());
    fake->count_aborts_in(&aborts_of_first);
    // Counted here: the session frees the lost connection's datamover once its loop has returned,
    // so the first datamover (`dm`) must not be read after the session recovered.
    fake->respond_with([this](FakeDatamover& d, const CapturedPdu& p) {
      if (p.as<iscsi::ScsiCommand>() == nullptr) return;
      ++commands_on_first;
      d.push_error(make_error_code(errc::connection_closed));
    });
    Reconnector reconnect = [this, fail_first_attempts, never_reconnect]() -> Awaitable<Result<Reconnected>> {
      ++attempts;
      if (never_reconnect || target_down || attempts <= fail_first_attempts)
        co_return fail(std::errc::connection_refused);
      auto f = std::make_unique<FakeDatamover>(io.get_executor());
      second = f.get();
      second->respond_with(answer_reads);
      co_return Reconnected{.datamover = std::move(f), .parameters = {}, .start = fresh_login(7)};
    };
    start(std::move(fake), std::move(options), {}, std::move(reconnect));
  }
};

}  // namespace

TEST(SessionDriverRecovery, CommandInFlightIsSentAgainOnTheNewConnectionAndCompletesOnce) {
  RecoveryRig rig(10s, /*fail_first_attempts=*/1);
  std::vector<std::byte> buffer(4096);
  rig.run([&]() -> Awaitable<void> {
    auto r = co_await rig.session->execute(read10(buffer));
    expect_good(r);
    EXPECT_TRUE(rig.session->is_open());
    EXPECT_FALSE(rig.session->recovering());
    // The new connection serves the next command directly.
    auto again = co_await rig.session->execute(read10(buffer));
    EXPECT_TRUE(again) << (again ? "" : again.error().message());
  });
  EXPECT_EQ(rig.commands_on_first, 1);
  // Reset before the command went out again: nothing queued on it can reach the target later.
  EXPECT_EQ(rig.aborts_of_first, 1);
  ASSERT_NE(rig.second, nullptr);
  EXPECT_EQ(commands_in(*rig.second), 2u);
  EXPECT_EQ(buffer[0], std::byte{0x42});
  EXPECT_EQ(rig.attempts, 2);
  ASSERT_EQ(rig.events.size(), 2u);
  EXPECT_EQ(rig.events[0].kind, SessionEvent::Kind::connection_lost);
  EXPECT_EQ(rig.events[1].kind, SessionEvent::Kind::recovered);
  EXPECT_EQ(rig.events[1].attempts, 2u);
  const SessionStats& s = rig.session->stats();
  EXPECT_EQ(s.connections_lost, 1u);
  EXPECT_EQ(s.reconnect_attempts, 2u);
  EXPECT_EQ(s.recoveries, 1u);
  EXPECT_EQ(s.commands_reissued, 1u);
}

TEST(SessionDriverRecovery, NoNewConnectionWithinTheReplacementTimeoutFailsWithSessionLost) {
  RecoveryRig rig(200ms, 0, /*never_reconnect=*/true, /*reconnect_after_give_up=*/false);
  std::vector<std::byte> buffer(512);
  rig.run([&]() -> Awaitable<void> {
    auto r = co_await rig.session->execute(read10(buffer));
    expect_error(r, make_error_code(errc::session_lost));
    auto late = co_await rig.session->execute(read10(buffer));
    expect_error(late, make_error_code(errc::session_lost));
    EXPECT_FALSE(rig.session->is_open());
    EXPECT_EQ(rig.session->state(), SessionState::ended);
  });
  EXPECT_GE(rig.attempts, 1);
  ASSERT_EQ(rig.events.size(), 2u);
  EXPECT_EQ(rig.events[0].kind, SessionEvent::Kind::connection_lost);
  EXPECT_EQ(rig.events[1].kind, SessionEvent::Kind::gave_up);
  EXPECT_EQ(rig.events[1].error, make_error_code(errc::session_lost));
  EXPECT_EQ(rig.session->stats().gave_up, 1u);
}

// Issue 24 item 6: past the replacement timeout the session does not give up for good. The
// command that waited fails with session_lost, new ones fail at once (not queued), the state is
// failed with the attempts and the next one visible; logins go on in the background, spaced by
// the bounded back-off; once the target is back a login succeeds and new commands are served by
// the same Session, which is logged in again.
TEST(SessionDriverRecovery, AfterTheReplacementTimeoutLoginsGoOnAndANewCommandIsServed) {
  RecoveryRig rig(50ms, 0);
  rig.target_down = true;
  std::vector<std::byte> buffer(4096);
  rig.run([&]() -> Awaitable<void> {
    auto r = co_await rig.session->execute(read10(buffer));
    expect_error(r, make_error_code(errc::session_lost));
    EXPECT_TRUE(rig.session->is_open());
    EXPECT_EQ(rig.session->state(), SessionState::failed);
    const auto before = std::chrono::steady_clock::now();
    auto late = co_await rig.session->execute(read10(buffer));
    expect_error(late, make_error_code(errc::session_lost));
    EXPECT_LT(std::chrono::steady_clock::now() - before, 50ms) << "a command while failed must fail at once";
    // The logins go on past the replacement timeout, each failure visible.
    const int at_give_up = rig.attempts;
    co_await wait_until(rig.io, [&] { return rig.attempts >= at_give_up + 5; });
    EXPECT_GE(rig.attempts, at_give_up + 5) << "no login after the replacement timeout";
    const ReconnectStatus st = rig.session->reconnect_status();
    EXPECT_GE(st.attempts, 5u);
    EXPECT_EQ(st.last_error, std::make_error_code(std::errc::connection_refused));
    EXPECT_EQ(rig.session->state(), SessionState::failed);
    // The target is back.
    rig.target_down = false;
    co_await wait_until(rig.io, [&] { return rig.session->state() == SessionState::logged_in; });
    EXPECT_EQ(rig.session->state(), SessionState::logged_in);
    EXPECT_FALSE(rig.session->reconnect_status().next_attempt);
    auto served = co_await rig.session->execute(read10(buffer));
    expect_good(served);
    EXPECT_EQ(buffer[0], std::byte{0x42});
  });
  ASSERT_NE(rig.second, nullptr);
  EXPECT_EQ(commands_in(*rig.second), 1u) << "the commands that failed are not sent again";
  ASSERT_EQ(rig.events.size(), 3u);
  EXPECT_EQ(rig.events[0].kind, SessionEvent::Kind::connection_lost);
  EXPECT_EQ(rig.events[1].kind, SessionEvent::Kind::gave_up);
  EXPECT_EQ(rig.events[1].error, make_error_code(errc::session_lost));
  EXPECT_EQ(rig.events[2].kind, SessionEvent::Kind::recovered);
  const SessionStats& s = rig.session->stats();
  EXPECT_EQ(s.gave_up, 1u);
  EXPECT_EQ(s.recoveries, 1u);
  EXPECT_EQ(s.commands_reissued, 0u);
}

// The back-off stays bounded by reconnect_delay_max after the replacement timeout: no faster
// (no busy loop) and no slower (the target is noticed within about one delay).
TEST(SessionDriverRecovery, LoginsAfterTheReplacementTimeoutAreSpacedByTheBoundedBackOff) {
  test::SessionRig rig(test::SessionRig::Deferred{});
  SessionOptions options;
  options.replacement_timeout = 20ms;
  options.reconnect_delay_min = 5ms;
  options.reconnect_delay_max = 20ms;
  std::vector<std::chrono::steady_clock::time_point> tried;
  Reconnector reconnect = [&tried]() -> Awaitable<Result<Reconnected>> {
    tried.push_back(std::chrono::steady_clock::now());
    co_return fail(std::errc::connection_refused);
  };
  auto fake = std::make_unique<FakeDatamover>(rig.io.get_executor());
  fake->respond_with([](FakeDatamover& d, const CapturedPdu& p) {
    if (p.as<iscsi::ScsiCommand>() != nullptr) d.push_error(make_error_code(errc::connection_closed));
  });
  rig.start(std::move(fake), std::move(options), {}, std::move(reconnect));
  std::vector<std::byte> buffer(512);
  rig.run([&]() -> Awaitable<void> {
    auto r = co_await rig.session->execute(read10(buffer));
    expect_error(r, make_error_code(errc::session_lost));
    co_await wait_until(rig.io, [&] { return tried.size() >= 12; });
    const auto next = rig.session->reconnect_status().next_attempt;
    if (next) {
      EXPECT_LE(*next - std::chrono::steady_clock::now(), 20ms);
    }
  });
  ASSERT_GE(tried.size(), 12u);
  // From the sixth attempt on the delay is at its cap: jittered between half of it and all of it.
  for (std::size_t i = 6; i < tried.size(); ++i) {
    EXPECT_GE(tried[i] - tried[i - 1], 10ms) << "attempt " << i << " came too soon: the back-off is not bounded below";
  }
}

// reconnect_now(): iserkit-nbd --threads N has one session per loop to one target; when one of
// them logs in again the others are told, and a login that waits out a long back-off starts at
// once instead of leaving its loop's clients with EIO for up to reconnect_delay_max.
TEST(SessionDriverRecovery, ReconnectNowCutsTheBackOffShort) {
  RecoveryRig rig(20ms, 0, /*never_reconnect=*/false, /*reconnect_after_give_up=*/true, /*delay_min=*/60s,
                  /*delay_max=*/60s);
  rig.target_down = true;
  std::vector<std::byte> buffer(4096);
  rig.run([&]() -> Awaitable<void> {
    rig.session->reconnect_now();  // logged in: nothing to hurry
    auto r = co_await rig.session->execute(read10(buffer));
    expect_error(r, make_error_code(errc::session_lost));
    EXPECT_EQ(rig.session->state(), SessionState::failed);
    EXPECT_EQ(rig.attempts, 0) << "the first login waits for at least half of reconnect_delay_min";
    EXPECT_TRUE(rig.session->reconnect_status().next_attempt);
    // The target is back, but the session would wait 30-60 s for its next login.
    rig.target_down = false;
    co_await wait_until(rig.io, [&] { return rig.attempts > 0; }, 100ms);
    EXPECT_EQ(rig.attempts, 0) << "a login started without reconnect_now()";
    rig.session->reconnect_now();
    co_await wait_until(rig.io, [&] { return rig.session->state() == SessionState::logged_in; }, 5000ms);
    EXPECT_EQ(rig.session->state(), SessionState::logged_in);
    EXPECT_EQ(rig.attempts, 1);
    auto served = co_await rig.session->execute(read10(buffer));
    expect_good(served);
    rig.session->reconnect_now();  // logged in again: no effect
  });
  ASSERT_EQ(rig.events.size(), 3u);
  EXPECT_EQ(rig.events[2].kind, SessionEvent::Kind::recovered);
}

// Session::start() (the fast path without a coroutine frame): the same recovery as execute(): a
// command in flight when the connection dies is sent again on the new one and its callback hears
// the result once, from the session's event processing (never inside start()); a session past
// the replacement timeout refuses a start at once with session_lost.

TEST(SessionDriverRecovery, AStartedCommandIsSentAgainAfterAReconnectAndCompletesOnce) {
  RecoveryRig rig(10s, /*fail_first_attempts=*/1);
  std::vector<std::byte> buffer(4096);
  CountingCallback cb;
  rig.run([&]() -> Awaitable<void> {
    auto started = rig.session->start(read10(buffer), cb);
    EXPECT_TRUE(started) << (started ? "" : started.error().message());
    EXPECT_EQ(cb.calls, 0) << "the callback ran inside start()";
    co_await wait_until(rig.io, [&] { return cb.calls > 0; });
  });
  EXPECT_EQ(cb.calls, 1);
  ASSERT_TRUE(cb.got) << cb.got.error().message();
  EXPECT_EQ(cb.got->status, scsi::Status::good);
  EXPECT_EQ(buffer[0], std::byte{0x42});
  EXPECT_EQ(rig.commands_on_first, 1);
  ASSERT_NE(rig.second, nullptr);
  EXPECT_EQ(commands_in(*rig.second), 1u);
  EXPECT_EQ(rig.session->stats().commands_reissued, 1u);
}

TEST(SessionDriverRecovery, AStartPastTheReplacementTimeoutFailsAtOnce) {
  RecoveryRig rig(50ms, 0);
  rig.target_down = true;
  std::vector<std::byte> buffer(512);
  CountingCallback first, late;
  rig.run([&]() -> Awaitable<void> {
    EXPECT_TRUE(rig.session->start(read10(buffer), first));
    co_await wait_until(rig.io, [&] { return first.calls > 0; });
    EXPECT_EQ(rig.session->state(), SessionState::failed);
    auto r = rig.session->start(read10(buffer), late);
    EXPECT_FALSE(r);
    if (!r) {
      EXPECT_EQ(r.error(), make_error_code(errc::session_lost));
    }
  });
  EXPECT_EQ(first.calls, 1);
  EXPECT_FALSE(first.got);
  if (!first.got) {
    EXPECT_EQ(first.got.error(), make_error_code(errc::session_lost));
  }
  EXPECT_EQ(late.calls, 0);
}

TEST(SessionDriverRecovery, WithoutAReconnectorALostConnectionFailsAtOnce) {
  test::SessionRig rig;
  rig.dm->respond_with([](FakeDatamover& d, const CapturedPdu& p) {
    if (p.as<iscsi::ScsiCommand>() != nullptr) d.push_error(make_error_code(errc::connection_closed));
  });
  std::vector<std::byte> buffer(512);
  rig.run([&]() -> Awaitable<void> {
    auto r = co_await rig.session->execute(read10(buffer));
    expect_error(r, make_error_code(errc::connection_closed));
  });
}

// iSER recovery (exposes_task_buffers): a re-issued command carries task data prepared again by
// the NEW connection's datamover (its STags), and the lost connection's descriptor (its bounce
// buffer in the old pool) is released before the command completes. ArenaPool plays each
// connection's registered pool with its own keys (another protection domain).
namespace {

constexpr datamover::Capabilities iser_like{.rdma_data = true, .exposes_task_buffers = true};

/// Plays the target of an RDMA transport for reads: writes 0x42 into the advertised read region
/// (the RDMA Write of RFC 7145 §7.3.5), then answers GOOD.
void rdma_read_answer(FakeDatamover& d, const CapturedPdu& p) {
  const auto* c = p.as<iscsi::ScsiCommand>();
  if (c == nullptr || !c->read) return;
  if (p.read_region) std::fill(p.read_region->bytes.begin(), p.read_region->bytes.end(), std::byte{0x42});
  iscsi::ScsiResponse r;
  r.itt = c->itt;
  r.stat_sn = c->exp_stat_sn;
  r.exp_cmd_sn = c->cmd_sn + 1;
  r.max_cmd_sn = c->cmd_sn + 64;
  d.push(r);
}

/// A registered pool with no memory left: every lease fails (std::bad_alloc).
struct ExhaustedPool final : BufferPool {
  PooledBuffer allocate(std::size_t) override { throw std::bad_alloc(); }

 private:
  void release(const Buffer&, std::size_t) noexcept override {}
};

/// What the iSER rig records; a base listed before SessionRig, so it outlives the session.
struct IserRecoveryRecord {
  test::ArenaPool first_pool{11, 22};
  test::ArenaPool second_pool{33, 44};
  ExhaustedPool exhausted_pool;
  std::vector<std::optional<Buffer>> first_regions;
  std::vector<std::optional<Buffer>> second_regions;
  std::size_t first_pool_leases_when_reissued = 99;
  FakeDatamover* second = nullptr;
};

struct IserRecoveryRig : IserRecoveryRecord, test::SessionRig {
  /// `same_device`: the new connection is on the same RDMA device (one protection domain, so the
  /// same registered pool); otherwise on another one (its own pool and keys). `exhausted`: the new
  /// connection's pool has no memory for a bounce buffer.
  explicit IserRecoveryRig(bool same_device = false, bool exhausted = false) : SessionRig(Deferred{}) {
    SessionOptions options;
    options.replacement_timeout = 10s;
    options.reconnect_delay_min = 1ms;
    options.reconnect_delay_max = 2ms;
    auto fake = std::make_unique<FakeDatamover>(io.get_executor(), iser_like);
    fake->use_pool(first_pool);
    // The first connection dies as soon as a command is on it (after its STags were captured).
    fake->respond_with([this](FakeDatamover& d, const CapturedPdu& p) {
      if (p.as<iscsi::ScsiCommand>() == nullptr) return;
      first_regions.push_back(p.read_region);
      d.push_error(make_error_code(errc::connection_closed));
    });
    Reconnector reconnect = [this, same_device, exhausted]() -> Awaitable<Result<Reconnected>> {
      auto f = std::make_unique<FakeDatamover>(io.get_executor(), iser_like);
      if (exhausted) {
        f->use_pool(exhausted_pool);
      } else {
        f->use_pool(same_device ? first_pool : second_pool);
      }
      f->respond_with([this](FakeDatamover& d, const CapturedPdu& p) {
        if (p.as<iscsi::ScsiCommand>() != nullptr) {
          second_regions.push_back(p.read_region);
          first_pool_leases_when_reissued = first_pool.leased();  // before the answer
        }
        rdma_read_answer(d, p);
      });
      second = f.get();
      co_return Reconnected{.datamover = std::move(f),
                            .parameters = {},
                            .start = fresh_login()};
    };
    start(std::move(fake), std::move(options), {}, std::move(reconnect));
  }
};

}  // namespace

TEST(SessionDriverRecovery, IserReissuedCommandGetsTaskDataOfTheNewConnection) {
  IserRecoveryRig rig;
  std::vector<std::byte> buffer(4096);  // the caller's own memory: bounced on either connection
  rig.run([&]() -> Awaitable<void> {
    auto r = co_await rig.session->execute(read10(buffer));
    EXPECT_TRUE(r) << (r ? "" : r.error().message());
  });
  ASSERT_EQ(rig.first_regions.size(), 1u);
  ASSERT_EQ(rig.second_regions.size(), 1u);
  ASSERT_TRUE(rig.first_regions[0] && rig.second_regions[0]);
  EXPECT_EQ(rig.first_regions[0]->rkey, 22u);   // the first connection's STag
  EXPECT_EQ(rig.second_regions[0]->rkey, 44u);  // prepared again: the new connection's STag
  EXPECT_NE(rig.second_regions[0]->bytes.data(), rig.first_regions[0]->bytes.data());
  EXPECT_EQ(rig.first_pool_leases_when_reissued, 0u) << "the lost connection's task data was not released";
  EXPECT_EQ(rig.second_pool.leased(), 0u);
  EXPECT_EQ(buffer[0], std::byte{0x42});  // the new bounce buffer's data reached the caller
  EXPECT_EQ(buffer[4095], std::byte{0x42});
  EXPECT_EQ(rig.session->stats().recoveries, 1u);
}

// A buffer leased from Session::buffer_pool() before the loss stays valid and, when the new
// connection's datamover has it registered (the same device: one protection domain per device),
// is advertised in place again — no bounce on either connection.
TEST(SessionDriverRecovery, IserPoolBufferStaysValidAndZeroCopyAcrossTheReconnect) {
  IserRecoveryRig rig(/*same_device=*/true);
  rig.run([&]() -> Awaitable<void> {
    EXPECT_EQ(&rig.session->buffer_pool(), &rig.first_pool);
    auto lease = rig.session->buffer_pool().allocate(4096);
    auto r = co_await rig.session->execute(read10(lease.bytes()));
    EXPECT_TRUE(r) << (r ? "" : r.error().message());
    EXPECT_EQ(lease.data()[0], std::byte{0x42});  // RDMA-written in place: no bounce
    EXPECT_EQ(rig.first_pool.leased(), 1u);       // only the caller's lease
    EXPECT_EQ(&rig.session->buffer_pool(), &rig.first_pool);
  });
  ASSERT_EQ(rig.first_regions.size(), 1u);
  ASSERT_EQ(rig.second_regions.size(), 1u);
  ASSERT_TRUE(rig.first_regions[0] && rig.second_regions[0]);
  // Both connections advertised the caller's own bytes.
  EXPECT_EQ(rig.first_regions[0]->bytes.data(), rig.second_regions[0]->bytes.data());
  EXPECT_EQ(rig.second_regions[0]->rkey, 22u);
  EXPECT_EQ(rig.session->stats().commands_reissued, 1u);
}

// The new connection cannot prepare the re-issued command's buffers (no bounce memory in its
// pool): that command fails with not_enough_memory instead of going out with the lost
// connection's STags; the session itself recovered and stays usable.
TEST(SessionDriverRecovery, IserReissuedCommandWhoseBuffersCannotBePreparedFails) {
  IserRecoveryRig rig(/*same_device=*/false, /*exhausted=*/true);
  std::vector<std::byte> buffer(4096);
  rig.run([&]() -> Awaitable<void> {
    auto r = co_await rig.session->execute(read10(buffer));
    EXPECT_FALSE(r);
    if (!r) {
      EXPECT_EQ(r.error(), std::make_error_code(std::errc::not_enough_memory));
    }
    EXPECT_TRUE(rig.session->is_open());
  });
  EXPECT_TRUE(rig.second_regions.empty()) << "a command went out on the new connection";
  EXPECT_EQ(rig.first_pool.leased(), 0u);
}

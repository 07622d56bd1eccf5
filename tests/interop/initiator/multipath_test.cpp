// Multipath against the real iserkit-target (run through multipath_interop.sh, which sets the
// ISERKIT_MP_* URLs): two portal groups to one LUN are one device; a path to another target's LUN
// is refused; an ALUA standby group is not used; a path cut (through a TCP forwarder in this
// process) moves I/O to the other path, comes back and is used again; all paths cut fails commands
// with errc::session_lost after the device's replacement timeout, and they work again once a path
// returns. Every write is read back and compared.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "iserkit/common/errors.hpp"
#include "iserkit/initiator/lun.hpp"
#include "iserkit/initiator/multipath.hpp"

using namespace iserkit;
using namespace iserkit::initiator;
using namespace std::chrono_literals;
using asio::ip::tcp;

namespace {

std::optional<Url> env_url(const char* name) {
  const char* u = std::getenv(name);
  if (u == nullptr) return std::nullopt;
  auto url = parse_url(u);
  return url ? std::optional<Url>(*url) : std::nullopt;
}

// Built outside the coroutines: GCC 12 miscompiles a braced list in a coroutine ("array used as
// initializer").
std::vector<Url> env_urls(const char* a, const char* b) { return {*env_url(a), *env_url(b)}; }
std::vector<Url> two(const Url& a, const Url& b) { return {a, b}; }

Awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  t.expires_after(d);
  boost::system::error_code ec;
  co_await t.async_wait(use_awaitable_ec(ec));
}

// A TCP forwarder standing in for one network path: cut() drops its connections and refuses new
// ones (the peer sees the connection end), restore() lets them through again.
class Forwarder : public std::enable_shared_from_this<Forwarder> {
 public:
  Forwarder(asio::io_context& io, tcp::endpoint to) : acceptor_(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)), to_(to) {}
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  void start() { asio::co_spawn(acceptor_.get_executor(), accept_loop(shared_from_this()), asio::detached); }
  void cut() {
    enabled_ = false;
    for (auto& w : sockets_)
      if (auto s = w.lock()) {
        boost::system::error_code ec;
        s->close(ec);
      }
    sockets_.clear();
  }
  void restore() { enabled_ = true; }
  void stop() {
    cut();
    boost::system::error_code ec;
    acceptor_.close(ec);
  }

 private:
  Awaitable<void> accept_loop(std::shared_ptr<Forwarder> self) {
    while (acceptor_.is_open()) {
      boost::system::error_code ec;
      auto down = std::make_shared<tcp::socket>(co_await acceptor_.async_accept(use_awaitable_ec(ec)));
      if (ec) break;
      if (!enabled_) continue;  // closed as it goes out of scope
      auto up = std::make_shared<tcp::socket>(acceptor_.get_executor());
      co_await up->async_connect(to_, use_awaitable_ec(ec));
      if (ec) continue;
      sockets_.push_back(down);
      sockets_.push_back(up);
      asio::co_spawn(acceptor_.get_executor(), pump(self, down, up), asio::detached);
      asio::co_spawn(acceptor_.get_executor(), pump(self, up, down), asio::detached);
    }
  }
  static Awaitable<void> pump(std::shared_ptr<Forwarder> self, std::shared_ptr<tcp::socket> from,
                              std::shared_ptr<tcp::socket> to) {
    std::vector<std::byte> buf(256 * 1024);
    while (true) {
      boost::system::error_code ec;
      const std::size_t n = co_await from->async_read_some(asio::buffer(buf), use_awaitable_ec(ec));
      if (ec) break;
      co_await asio::async_write(*to, asio::buffer(buf.data(), n), use_awaitable_ec(ec));
      if (ec) break;
    }
    boost::system::error_code ignored;
    from->close(ignored);
    to->close(ignored);
    (void)self;
  }

  tcp::acceptor acceptor_;
  tcp::endpoint to_;
  bool enabled_ = true;
  std::vector<std::weak_ptr<tcp::socket>> sockets_;
};

// Runs `body` on a fresh io_context; fails the test if it did not finish.
template <class Body>
void run(Body body) {
  asio::io_context io;
  bool finished = false;
  asio::co_spawn(
      io,
      [&]() -> Awaitable<void> {
        co_await body(io);
        finished = true;
      },
      asio::detached);
  io.run_for(60s);
  EXPECT_TRUE(finished) << "the test body did not finish within 60 s";
}

std::vector<std::byte> pattern(std::size_t bytes, unsigned seed) {
  std::vector<std::byte> v(bytes);
  for (std::size_t i = 0; i < bytes; ++i) v[i] = static_cast<std::byte>((i * 131 + seed * 7 + (i >> 9)) & 0xff);
  return v;
}

// Writes `blocks` at `lba` with a pattern from `seed`, reads them back and compares.
Awaitable<bool> write_and_verify(LunHandle& lun, std::uint64_t lba, std::uint32_t blocks, unsigned seed) {
  const std::size_t bytes = std::size_t{blocks} * lun.info().capacity.block_size_bytes;
  const auto data = pattern(bytes, seed);
  auto w = co_await lun.write({.lba = lba, .blocks = blocks}, data);
  EXPECT_TRUE(w) << "write lba=" << lba << ": " << (w ? "" : w.error().message());
  if (!w) co_return false;
  std::vector<std::byte> back(bytes);
  auto r = co_await lun.read({.lba = lba, .blocks = blocks}, back);
  EXPECT_TRUE(r) << "read lba=" << lba << ": " << (r ? "" : r.error().message());
  if (!r) co_return false;
  EXPECT_EQ(std::memcmp(back.data(), data.data(), bytes), 0) << "data differs at lba " << lba;
  co_return std::memcmp(back.data(), data.data(), bytes) == 0;
}

#define REQUIRE_URLS(...)                                                                    \
  for (const char* n : {__VA_ARGS__})                                                        \
    if (!env_url(n)) GTEST_SKIP() << n << " not set (run through multipath_interop.sh)";

MultipathOptions fast_options(MultipathPolicy policy) {
  MultipathOptions o;
  o.policy = policy;
  o.session.nop_interval = 200ms;
  o.session.nop_timeout = 1000ms;
  o.session.reconnect_delay_min = 50ms;
  o.session.reconnect_delay_max = 200ms;
  o.path_replacement_timeout = 500ms;
  o.reinstate_delay_min = 100ms;
  o.reinstate_delay_max = 400ms;
  o.replacement_timeout = 10s;
  return o;
}

/// The two paths of ISERKIT_MP_URL1/2, each through a Forwarder on 127.0.0.1 that a test can cut
/// and restore; url1/url2 lead to the forwarders.
struct ForwardedPaths {
  std::shared_ptr<Forwarder> link1, link2;
  Url url1, url2;
};
ForwardedPaths forwarded_paths(asio::io_context& io) {
  ForwardedPaths f{nullptr, nullptr, *env_url("ISERKIT_MP_URL1"), *env_url("ISERKIT_MP_URL2")};
  f.link1 = std::make_shared<Forwarder>(io, tcp::endpoint(asio::ip::make_address(f.url1.host), f.url1.port));
  f.link2 = std::make_shared<Forwarder>(io, tcp::endpoint(asio::ip::make_address(f.url2.host), f.url2.port));
  f.link1->start();
  f.link2->start();
  f.url1.host = f.url2.host = "127.0.0.1";
  f.url1.port = f.link1->port();
  f.url2.port = f.link2->port();
  return f;
}

// Multipath::open over `urls`, then LunHandle::open of the device's LUN 0, each expected to succeed
// (a failure fails the test with its message): `mp` is null when the device did not open, `lun`
// empty when its LUN did not.
struct MultipathDevice {
  std::shared_ptr<Multipath> mp;
  std::optional<LunHandle> lun;
};
Awaitable<MultipathDevice> open_multipath_device(asio::io_context& io, std::vector<Url> urls, MultipathOptions options) {
  MultipathDevice d;
  auto mp = co_await Multipath::open(io.get_executor(), std::move(urls), scsi::Lun::from_index(0), std::move(options));
  EXPECT_TRUE(mp) << (mp ? "" : mp.error().message());
  if (!mp) co_return d;
  d.mp = *mp;
  auto lun = co_await LunHandle::open(d.mp, scsi::Lun::from_index(0));
  EXPECT_TRUE(lun) << (lun ? "" : lun.error().message());
  if (lun) d.lun.emplace(std::move(*lun));
  co_return d;
}

}  // namespace

TEST(Multipath, TwoPortalGroupsToOneLunAreOneDeviceRoundRobin) {
  REQUIRE_URLS("ISERKIT_MP_URL1", "ISERKIT_MP_URL2");
  run([](asio::io_context& io) -> Awaitable<void> {
    auto [mp, lun] = co_await open_multipath_device(io, env_urls("ISERKIT_MP_URL1", "ISERKIT_MP_URL2"),
                                                    fast_options(MultipathPolicy::round_robin));
    if (!mp) co_return;
    if (lun) {
      EXPECT_EQ(lun->session(), nullptr);  // a multipath handle has no single session
      for (unsigned k = 0; k < 8; ++k) { const bool ok_ = static_cast<bool>(co_await write_and_verify(*lun, k * 64, 64, k)); EXPECT_TRUE(ok_); }
      { const bool ok_ = static_cast<bool>(co_await lun->synchronize_cache()); EXPECT_TRUE(ok_); }
    }
    const auto paths = mp->paths();
    EXPECT_EQ(paths.size(), 2u);
    for (const auto& p : paths) {
      EXPECT_EQ(p.state, PathStatus::State::up) << p.url;
      EXPECT_EQ(p.access_state, scsi::AccessState::active_optimized);
      EXPECT_GT(p.commands, 4u) << "round-robin sent (almost) nothing on " << p.url;
    }
    EXPECT_EQ(paths[0].target_port_group, std::optional<std::uint16_t>(1));
    EXPECT_EQ(paths[1].target_port_group, std::optional<std::uint16_t>(2));
    co_await mp->logout();
  });
}

TEST(Multipath, APathToAnotherTargetsLunIsRefused) {
  REQUIRE_URLS("ISERKIT_MP_URL1", "ISERKIT_MP_OTHER_URL");
  run([](asio::io_context& io) -> Awaitable<void> {
    auto mp = co_await Multipath::open(io.get_executor(), env_urls("ISERKIT_MP_URL1", "ISERKIT_MP_OTHER_URL"),
                                       scsi::Lun::from_index(0), fast_options(MultipathPolicy::failover));
    EXPECT_FALSE(mp);
    if (!mp) {
      EXPECT_EQ(mp.error(), make_error_code(errc::invalid_argument)) << mp.error().message();
    }
    if (mp) co_await (*mp)->logout();
  });
}

TEST(Multipath, AnAluaStandbyGroupIsNotUsed) {
  REQUIRE_URLS("ISERKIT_MP_STANDBY_URL1", "ISERKIT_MP_ACTIVE_URL2");
  run([](asio::io_context& io) -> Awaitable<void> {
    // The standby path is listed first: failover would take it if ALUA were ignored.
    auto [mp, lun] = co_await open_multipath_device(io, env_urls("ISERKIT_MP_STANDBY_URL1", "ISERKIT_MP_ACTIVE_URL2"),
                                                    fast_options(MultipathPolicy::failover));
    if (!mp) co_return;
    if (lun) { const bool ok_ = static_cast<bool>(co_await write_and_verify(*lun, 8, 16, 3)); EXPECT_TRUE(ok_); }
    const auto paths = mp->paths();
    EXPECT_EQ(paths[0].access_state, scsi::AccessState::standby);
    EXPECT_EQ(paths[1].access_state, scsi::AccessState::active_optimized);
    EXPECT_EQ(paths[0].commands, 0u);
    EXPECT_GT(paths[1].commands, 0u);
    co_await mp->logout();
  });
}

TEST(Multipath, ACutPathFailsOverAndIsUsedAgainOnceItComesBack) {
  REQUIRE_URLS("ISERKIT_MP_URL1", "ISERKIT_MP_URL2");
  run([](asio::io_context& io) -> Awaitable<void> {
    auto [link1, link2, url1, url2] = forwarded_paths(io);
    std::vector<PathEvent> events;
    auto options = fast_options(MultipathPolicy::failover);
    options.on_event = [&](const PathEvent& e) { events.push_back(e); };
    auto [mp, lun] = co_await open_multipath_device(io, two(url1, url2), options);
    if (!lun) co_return;
    { const bool ok_ = static_cast<bool>(co_await write_and_verify(*lun, 0, 32, 1)); EXPECT_TRUE(ok_); }
    EXPECT_EQ(mp->paths()[1].commands, 0u);  // failover: path 0 only

    link1->cut();  // I/O moves to path 1
    for (unsigned k = 1; k < 6; ++k) { const bool ok_ = static_cast<bool>(co_await write_and_verify(*lun, k * 32, 32, k + 10)); EXPECT_TRUE(ok_); }
    EXPECT_GT(mp->paths()[1].commands, 0u);
    EXPECT_NE(mp->paths()[0].state, PathStatus::State::up);
    link1->restore();  // path 0 is reinstated in the background
    for (int i = 0; i < 100 && mp->paths()[0].state != PathStatus::State::up; ++i) co_await sleep_for(50ms);
    EXPECT_EQ(mp->paths()[0].state, PathStatus::State::up);
    const auto before = mp->paths()[0].commands;
    link2->cut();  // and back to path 0
    for (unsigned k = 6; k < 10; ++k) { const bool ok_ = static_cast<bool>(co_await write_and_verify(*lun, k * 32, 32, k + 20)); EXPECT_TRUE(ok_); }
    EXPECT_GT(mp->paths()[0].commands, before);
    { const bool ok_ = static_cast<bool>(co_await lun->synchronize_cache()); EXPECT_TRUE(ok_); }
    // Every block written before and after the faults reads back as written.
    for (unsigned k = 1; k < 10; ++k) {
      std::vector<std::byte> back(32 * 512);
      { const bool ok_ = static_cast<bool>(co_await lun->read({.lba = k * 32, .blocks = 32}, back)); EXPECT_TRUE(ok_); }
      const auto expect = pattern(back.size(), k < 6 ? k + 10 : k + 20);
      EXPECT_EQ(std::memcmp(back.data(), expect.data(), back.size()), 0) << "lba " << k * 32;
    }
    const auto& st = mp->stats();
    EXPECT_GE(st.path_downs, 2u);
    EXPECT_GE(st.path_ups, 1u);
    bool saw_down = false, saw_up = false;
    for (const auto& e : events) {
      saw_down |= e.kind == PathEvent::Kind::path_down && e.path == 0;
      saw_up |= e.kind == PathEvent::Kind::path_up && e.path == 0;
    }
    EXPECT_TRUE(saw_down && saw_up) << "events: path 0 down and up again";
    co_await mp->logout();
    link1->stop();
    link2->stop();
  });
}

TEST(Multipath, NoPathForTheReplacementTimeoutFailsCommandsThenAReturningPathServesAgain) {
  REQUIRE_URLS("ISERKIT_MP_URL1", "ISERKIT_MP_URL2");
  run([](asio::io_context& io) -> Awaitable<void> {
    auto [link1, link2, url1, url2] = forwarded_paths(io);
    auto options = fast_options(MultipathPolicy::round_robin);
    options.replacement_timeout = 1500ms;
    auto [mp, lun] = co_await open_multipath_device(io, two(url1, url2), options);
    if (!lun) co_return;
    link1->cut();
    link2->cut();
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::byte> buf(512);
    auto r = co_await lun->read({.lba = 0, .blocks = 1}, buf);
    const auto waited = std::chrono::steady_clock::now() - start;
    EXPECT_FALSE(r);
    if (!r) {
      EXPECT_EQ(r.error(), make_error_code(errc::session_lost)) << r.error().message();
    }
    // Bounded: the paths' own replacement timeout (0.5 s) plus the device's (1.5 s), with slack.
    EXPECT_LT(waited, 10s);
    EXPECT_TRUE(mp->gave_up());
    EXPECT_EQ(mp->stats().gave_up, 1u);
    // As a single session past its replacement timeout (issue 24 item 6): a new command fails at
    // once, it does not wait, while the paths are reinstated in the background.
    const auto again_start = std::chrono::steady_clock::now();
    auto again = co_await lun->read({.lba = 0, .blocks = 1}, buf);
    EXPECT_FALSE(again);
    EXPECT_LT(std::chrono::steady_clock::now() - again_start, 1s) << "a command after giving up waited";
    link2->restore();
    for (int i = 0; i < 100 && !mp->any_path_usable(); ++i) co_await sleep_for(50ms);
    EXPECT_TRUE(mp->any_path_usable());
    { const bool ok_ = static_cast<bool>(co_await write_and_verify(*lun, 100, 8, 5)); EXPECT_TRUE(ok_); }
    co_await mp->logout();
    link1->stop();
    link2->stop();
  });
}

TEST(Multipath, AFlushIsAnsweredOnlyAfterEveryEarlierWriteOnEitherPath) {
  REQUIRE_URLS("ISERKIT_MP_URL1", "ISERKIT_MP_URL2");
  run([](asio::io_context& io) -> Awaitable<void> {
    // Not a structured binding: spawn_writes below captures mp (clang before 16 cannot).
    auto device = co_await open_multipath_device(io, env_urls("ISERKIT_MP_URL1", "ISERKIT_MP_URL2"),
                                                 fast_options(MultipathPolicy::round_robin));
    auto& mp = device.mp;
    auto& lun = device.lun;
    if (!lun) co_return;
    // 16 writes of 256 KiB spread over both paths, not awaited; then a flush.
    constexpr int writes = 16;
    int done = 0;
    const auto data = pattern(256 * 1024, 9);
    // The writes go straight to the device, one WRITE (16) command each (through LunHandle a
    // write's completion reaches its caller some posted steps after the device saw it complete,
    // which is later than the flush may be answered). `done` counts as each command returns.
    const std::uint32_t blocks = lun->info().max_transfer_blocks == 0 ? 512 : std::min<std::uint32_t>(512, lun->info().max_transfer_blocks);
    auto spawn_writes = [&] {
      for (int k = 0; k < writes; ++k) {
        asio::co_spawn(io, [](Multipath& m, std::uint64_t lba, std::uint32_t n, std::span<const std::byte> d, int& count) -> Awaitable<void> {
                         CommandRequest req{.lun = scsi::Lun::from_index(0),
                                            .cdb = scsi::write16({.lba = lba, .blocks = n}),
                                            .data_out = d.first(std::size_t{n} * 512)};
                         auto r = co_await m.execute(req);
                         // A path's first command may meet its UNIT ATTENTION (power on): send it again.
                         for (int tries = 0; tries < 3 && r && r->sense && r->sense->key == scsi::SenseKey::unit_attention; ++tries)
                           r = co_await m.execute(req);
                         EXPECT_TRUE(r && r->status == scsi::Status::good)
                             << (r ? "status " + std::to_string(int(r->status)) : r.error().message());
                         ++count;
                       }(*mp, 2048 + std::uint64_t(k) * 512, blocks, data, done),
                       asio::detached);
      }
    };
    // A first round, awaited, lets each path meet its UNIT ATTENTION (power on), so no command of
    // the measured round is sent a second time after the flush.
    spawn_writes();
    while (done < writes) co_await sleep_for(5ms);
    done = 0;
    const std::uint64_t before = mp->stats().commands;
    spawn_writes();
    // Every write must have reached the device before the flush is issued.
    for (int i = 0; i < 1000 && mp->stats().commands - before < std::uint64_t(writes); ++i) co_await sleep_for(1ms);
    EXPECT_GE(mp->stats().commands - before, std::uint64_t(writes));
    auto flushed = co_await lun->synchronize_cache();
    EXPECT_TRUE(flushed);
    EXPECT_EQ(done, writes) << "the flush was answered before every earlier write completed";
    // Whether the flush had to wait depends on timing (the path selector's unit tests prove the
    // holding itself); what must hold is that it was not answered before the writes.
    if (mp->stats().flushes_held == 0) std::fprintf(stderr, "note: every write had completed before the flush\n");
    while (done < writes) co_await sleep_for(10ms);
    co_await mp->logout();
  });
}

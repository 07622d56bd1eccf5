// Interop (our initiator's C++ API against a real target started by run_with_target.sh, which sets
// ISERKIT_TEST_URL): many commands in flight with checksummed data, the CmdSN window closing under
// load, write zeroes and flush, and connection loss failing every command in flight.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>

#include "iserkit/common/completion.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/initiator/errors.hpp"
#include "iserkit/initiator/lun.hpp"
#include "iserkit/initiator/session.hpp"

using namespace iserkit;
using namespace iserkit::initiator;

namespace {

struct Env {
  Url url;
  std::string kind;
};

std::optional<Env> env() {
  const char* u = std::getenv("ISERKIT_TEST_URL");
  if (u == nullptr) return std::nullopt;
  auto url = parse_url(u);
  if (!url) return std::nullopt;
  const char* k = std::getenv("TARGET_KIND");
  return Env{*url, k ? k : ""};
}

// Runs `body` as a coroutine on a fresh io_context with an open session and LUN.
template <class Body>
void with_lun(SessionOptions options, Body body) {
  auto e = env();
  if (!e) GTEST_SKIP() << "ISERKIT_TEST_URL not set (run through run_with_target.sh)";
  asio::io_context io;
  bool finished = false;
  asio::co_spawn(
      io,
      [&]() -> Awaitable<void> {
        auto session = co_await Session::connect(io.get_executor(), e->url, options);
        EXPECT_TRUE(session) << (session ? "" : session.error().message());
        if (!session) co_return;
        auto lun = co_await LunHandle::open(*session, scsi::Lun::from_index(e->url.lun.value_or(0)));
        EXPECT_TRUE(lun) << (lun ? "" : lun.error().message());
        if (lun) co_await body(**session, *lun);
        if ((*session)->is_open()) {
          auto r = co_await (*session)->logout();
          EXPECT_TRUE(r) << (r ? "" : r.error().message());
        }
        finished = true;
      },
      asio::detached);
  io.run();
  EXPECT_TRUE(finished);
}

// Runs `count` jobs with at most `depth` in flight; job(i) is a coroutine.
template <class Job>
Awaitable<void> run_jobs(std::size_t count, std::size_t depth, Job job) {
  auto ex = co_await asio::this_coro::executor;
  std::size_t next = 0;
  std::size_t running = 0;
  Completion all_done;
  auto worker = [&]() -> Awaitable<void> {
    while (next < count) co_await job(next++);
    if (--running == 0) all_done.complete();
  };
  running = std::min(depth, count);
  const std::size_t n = running;
  for (std::size_t i = 0; i < n; ++i) asio::co_spawn(ex, worker(), asio::detached);
  if (n > 0) co_await all_done.wait();
}

}  // namespace

TEST(InitiatorInterop, SixtyFourCommandsInFlightWithChecksums) {
  with_lun({}, [](Session& session, LunHandle& lun) -> Awaitable<void> {
    const std::uint32_t bs = lun.info().capacity.block_size_bytes;
    const std::size_t region = 64 * 1024;  // 64 KiB per command
    const std::size_t regions = 512;       // 32 MiB
    EXPECT_LE(regions * region, lun.info().capacity.size_bytes());
    if (regions * region > lun.info().capacity.size_bytes()) co_return;
    std::vector<std::byte> data(regions * region);
    std::mt19937_64 rng(42);
    for (std::size_t i = 0; i < data.size(); i += 8) {
      const auto v = rng();
      std::memcpy(&data[i], &v, 8);
    }
    const auto blocks = static_cast<std::uint32_t>(region / bs);
    std::size_t failures = 0;
    co_await run_jobs(regions, 64, [&](std::size_t i) -> Awaitable<void> {
      auto r = co_await lun.write({.lba = i * blocks, .blocks = blocks}, std::span(data).subspan(i * region, region));
      if (!r) {
        ++failures;
        ADD_FAILURE() << "write " << i << ": " << r.error().message();
      }
    });
    EXPECT_EQ(failures, 0u);
    EXPECT_GE(session.stats().max_in_flight_seen, 32u) << "commands were not actually concurrent";
    std::vector<std::byte> back(data.size());
    co_await run_jobs(regions, 64, [&](std::size_t i) -> Awaitable<void> {
      // Reads go in reverse order to mix offsets.
      const std::size_t j = regions - 1 - i;
      auto r = co_await lun.read({.lba = j * blocks, .blocks = blocks}, std::span(back).subspan(j * region, region));
      if (!r) ADD_FAILURE() << "read " << j << ": " << r.error().message();
    });
    EXPECT_TRUE(std::memcmp(data.data(), back.data(), data.size()) == 0) << "data read back differs";
    EXPECT_GE(session.stats().data_in_bytes_placed, data.size());
    // Mixed reads and writes at once on disjoint regions.
    std::vector<std::byte> mixed(data.size());
    co_await run_jobs(regions, 64, [&](std::size_t i) -> Awaitable<void> {
      if (i % 2 == 0) {
        auto r = co_await lun.read({.lba = i * blocks, .blocks = blocks}, std::span(mixed).subspan(i * region, region));
        if (!r) ADD_FAILURE() << "mixed read " << i << ": " << r.error().message();
      } else {
        auto r = co_await lun.write({.lba = i * blocks, .blocks = blocks, .fua = true},
                                    std::span(data).subspan((i - 1) * region, region));
        if (!r) ADD_FAILURE() << "mixed write " << i << ": " << r.error().message();
      }
    });
    for (std::size_t i = 0; i < regions; i += 2)
      EXPECT_TRUE(std::memcmp(&mixed[i * region], &data[i * region], region) == 0) << "region " << i;
    co_await run_jobs(regions / 2, 64, [&](std::size_t k) -> Awaitable<void> {
      const std::size_t i = 2 * k + 1;
      auto r = co_await lun.read({.lba = i * blocks, .blocks = blocks}, std::span(mixed).subspan(i * region, region));
      if (!r) ADD_FAILURE() << "verify read " << i << ": " << r.error().message();
      EXPECT_TRUE(std::memcmp(&mixed[i * region], &data[(i - 1) * region], region) == 0) << "region " << i;
    });
  });
}

// One LunHandle::write/read larger than a command may carry (the 8 MiB default cap, or the target's
// MAXIMUM TRANSFER LENGTH if smaller) is split into commands that are all in flight together and
// all finished before the call returns: 40 MiB out and back, checksummed, with at least two
// commands seen in flight at once, and again with the session limited to 2 commands in flight
// (the split must queue behind the limit, not fail).
TEST(InitiatorInterop, LargeTransferSplitsIntoConcurrentCommands) {
  for (const std::uint32_t limit : {128u, 2u}) {
    SessionOptions options;
    options.max_commands_in_flight = limit;
    with_lun(options, [limit](Session& session, LunHandle& lun) -> Awaitable<void> {
      const std::uint32_t bs = lun.info().capacity.block_size_bytes;
      const std::size_t size = 40u << 20;
      EXPECT_LE(size, lun.info().capacity.size_bytes());
      if (size > lun.info().capacity.size_bytes()) co_return;
      EXPECT_LT(std::size_t{lun.info().max_transfer_blocks} * bs, size) << "the transfer would not be split";
      std::vector<std::byte> data(size);
      std::mt19937_64 rng(limit);
      for (std::size_t i = 0; i < data.size(); i += 8) {
        const auto v = rng();
        std::memcpy(&data[i], &v, 8);
      }
      const auto blocks = static_cast<std::uint32_t>(size / bs);
      auto w = co_await lun.write({.lba = 0, .blocks = blocks}, data);
      EXPECT_TRUE(w) << (w ? "" : w.error().message());
      std::vector<std::byte> back(size);
      auto r = co_await lun.read({.lba = 0, .blocks = blocks}, back);
      EXPECT_TRUE(r) << (r ? "" : r.error().message());
      EXPECT_TRUE(data == back) << "read back differs (limit " << limit << ")";
      EXPECT_GE(session.stats().max_in_flight_seen, 2u) << "the chunks went one at a time";
      EXPECT_LE(session.stats().max_in_flight_seen, limit);
    });
  }
}

TEST(InitiatorInterop, ClosedCmdSnWindowQueuesCommands) {
  // More commands than the target's window (tgtd opens 128): the session must queue the rest until
  // MaxCmdSN advances, never sending outside the window (the target would drop such commands and
  // the test would hang and time out).
  with_lun({.max_commands_in_flight = 1000}, [](Session& session, LunHandle& lun) -> Awaitable<void> {
    const std::uint32_t bs = lun.info().capacity.block_size_bytes;
    const std::size_t n = 1000;
    std::vector<std::byte> buf(n * bs);
    std::size_t ok = 0;
    co_await run_jobs(n, n, [&](std::size_t i) -> Awaitable<void> {
      auto r = co_await lun.read({.lba = i, .blocks = 1}, std::span(buf).subspan(i * bs, bs));
      if (r) {
        ++ok;
      } else {
        ADD_FAILURE() << "read " << i << ": " << r.error().message();
      }
    });
    EXPECT_EQ(ok, n);
    const auto& st = session.stats();
    std::cout << "window: commands queued for the CmdSN window=" << st.commands_queued_for_window
              << " max in flight=" << st.max_in_flight_seen << "\n";
    if (std::string(std::getenv("TARGET_KIND") ? std::getenv("TARGET_KIND") : "") == "tgtd") {
      EXPECT_GT(st.commands_queued_for_window, 0u) << "tgtd's window did not close under 1000 commands";
    }
  });
}

TEST(InitiatorInterop, WriteZeroesFlushAndUnalignedBytes) {
  with_lun({}, [](Session&, LunHandle& lun) -> Awaitable<void> {
    const std::uint32_t bs = lun.info().capacity.block_size_bytes;
    std::vector<std::byte> ones(64 * bs, std::byte{0xab});
    EXPECT_TRUE(co_await lun.write({.lba = 1000, .blocks = 64}, ones));
    auto z = co_await lun.write_zeroes({.lba = 1010, .blocks = 20, .may_unmap = false});
    if (!z && is_scsi_error(z.error())) {
      std::cout << "write zeroes not supported here: " << z.error().message() << "\n";
    } else {
      EXPECT_TRUE(z) << z.error().message();
      std::vector<std::byte> back(64 * bs);
      EXPECT_TRUE(co_await lun.read({.lba = 1000, .blocks = 64}, back));
      for (std::size_t i = 0; i < back.size(); ++i) {
        const bool zero = i >= 10 * bs && i < 30 * bs;
        if (back[i] != (zero ? std::byte{0} : std::byte{0xab})) {
          ADD_FAILURE() << "byte " << i << " wrong after write zeroes";
          break;
        }
      }
    }
    auto f = co_await lun.synchronize_cache();
    EXPECT_TRUE(f) << f.error().message();
    // Byte-level helpers with odd offsets.
    std::vector<std::byte> msg(777);
    for (std::size_t i = 0; i < msg.size(); ++i) msg[i] = static_cast<std::byte>(i * 7 + 1);
    EXPECT_TRUE(co_await lun.write_bytes(std::uint64_t{2000} * bs + 13, msg));
    std::vector<std::byte> back(msg.size() + 2);
    EXPECT_TRUE(co_await lun.read_bytes(std::uint64_t{2000} * bs + 12, back));
    EXPECT_TRUE(std::memcmp(back.data() + 1, msg.data(), msg.size()) == 0);
    // Out of range is rejected before anything is sent.
    std::vector<std::byte> one(bs);
    auto bad = co_await lun.read({.lba = lun.info().capacity.blocks, .blocks = 1}, one);
    EXPECT_EQ(bad.error(), make_error_code(errc::invalid_argument));
    auto luns = co_await report_luns(*lun.session());
    EXPECT_TRUE(luns) << luns.error().message();
  });
}

TEST(InitiatorInterop, ConnectionLossFailsEveryCommandInFlight) {
  with_lun({}, [](Session& session, LunHandle& lun) -> Awaitable<void> {
    const std::uint32_t bs = lun.info().capacity.block_size_bytes;
    const std::size_t n = 64;
    const std::uint32_t blocks = (256 * 1024) / bs;
    std::vector<std::byte> buf(n * blocks * bs);
    std::size_t closed = 0, ok = 0, started = 0;
    auto ex = co_await asio::this_coro::executor;
    // Close the connection once all commands were issued.
    asio::co_spawn(
        ex,
        [&]() -> Awaitable<void> {
          while (started < n) {
            asio::steady_timer t(ex);
            t.expires_after(std::chrono::microseconds(100));
            co_await t.async_wait(asio::use_awaitable);
          }
          session.close();
        },
        asio::detached);
    co_await run_jobs(n, n, [&](std::size_t i) -> Awaitable<void> {
      ++started;
      auto r = co_await lun.read({.lba = i * blocks, .blocks = blocks},
                                 std::span(buf).subspan(i * blocks * bs, blocks * bs));
      if (r) {
        ++ok;
      } else if (r.error() == make_error_code(errc::connection_closed)) {
        ++closed;
      } else {
        ADD_FAILURE() << "unexpected error: " << r.error().message();
      }
    });
    EXPECT_EQ(ok + closed, n);
    EXPECT_GT(closed, 0u);
    EXPECT_FALSE(session.is_open());
    std::vector<std::byte> one(bs);
    auto after = co_await lun.read({.lba = 0, .blocks = 1}, one);
    EXPECT_FALSE(after);
    if (!after) {
      EXPECT_EQ(after.error(), make_error_code(errc::connection_closed));
    }
  });
}

// The ALUA failover coordinator (target/src/alua_failover.hpp): two coordinators on one lock file
// in this process stand in for two gateways (OFD locks of two open file descriptions conflict
// even in one process). Exactly one is active; SET TARGET PORT GROUPS (request()) moves it, after
// the active one drained its writes; closing the active one's lock file — and the death of a
// process holding it, SIGKILL included — lets the standby one take over at its next poll.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "alua_failover.hpp"
#include "iserkit/common/asio.hpp"

namespace iserkit::target {
namespace {

using namespace std::chrono_literals;
namespace offsets = alua_lock_offsets;

class TempFile {
 public:
  TempFile() {
    std::string t = (std::filesystem::temp_directory_path() / "iserkit-alua-XXXXXX").string();
    const int fd = ::mkstemp(t.data());
    EXPECT_GE(fd, 0);
    ::close(fd);
    path_ = t;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

TEST(LockFile, TwoDescriptionsConflictAndClosingReleases) {
  TempFile f;
  auto a = LockFile::open(f.path());
  auto b = LockFile::open(f.path());
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(a->try_lock(offsets::election));
  EXPECT_TRUE(a->try_lock(offsets::election));  // again: still ours
  EXPECT_FALSE(a->locked_by_other(offsets::election));
  EXPECT_TRUE(b->locked_by_other(offsets::election));
  EXPECT_FALSE(b->try_lock(offsets::election));
  EXPECT_TRUE(b->try_lock(offsets::request));  // other bytes are other locks
  a->unlock(offsets::election);
  EXPECT_TRUE(b->try_lock(offsets::election));
  {
    auto c = LockFile::open(f.path());
    ASSERT_TRUE(c);
    EXPECT_FALSE(c->try_lock(offsets::election));
  }
  std::optional<LockFile> held(std::move(*b));
  held.reset();  // closed: every lock of the description goes
  EXPECT_TRUE(a->try_lock(offsets::election));
}

TEST(LockFile, TheKernelDropsTheLockOfAKilledProcess) {
  TempFile f;
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto l = LockFile::open(f.path());
    const char ok = l && l->try_lock(offsets::election) ? 'y' : 'n';
    (void)!::write(ready[1], &ok, 1);
    ::pause();
    ::_exit(0);
  }
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, 'y');
  auto l = LockFile::open(f.path());
  ASSERT_TRUE(l);
  EXPECT_TRUE(l->locked_by_other(offsets::election));
  EXPECT_FALSE(l->try_lock(offsets::election));
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(l->try_lock(offsets::election));  // no timer: gone with the process
  ::close(ready[0]);
  ::close(ready[1]);
}

// One gateway: its group (1 or 2) local, the other a peer; its own table, as in its own process.
struct Gateway {
  Gateway(const std::filesystem::path& lock, std::uint16_t mine, std::uint16_t peer, int* quiesces) {
    table = *PortGroupTable::make({{.id = 1, .state = AluaState::active_optimized, .relative_ports = {1}},
                                   {.id = 2, .state = AluaState::active_optimized, .relative_ports = {2}}});
    auto f = AluaFailover::open({.lock_path = lock, .local_groups = {mine}, .peer_groups = {peer},
                                 .poll_interval = 10ms, .yield_hold_off = 0ms, .request_timeout = 1000ms},
                                table, [quiesces]() -> Awaitable<void> {
                                  ++*quiesces;
                                  co_return;
                                });
    EXPECT_TRUE(f);
    failover = *f;
    table->set_transitions(failover);
    self = mine;
    other = peer;
  }
  AluaState mine() const { return table->state(self); }
  AluaState peers() const { return table->state(other); }
  std::shared_ptr<PortGroupTable> table;
  std::shared_ptr<AluaFailover> failover;
  std::uint16_t self = 0, other = 0;
};

class AluaFailoverTest : public ::testing::Test {
 protected:
  void step(Gateway& g) {
    asio::co_spawn(io_, g.failover->step(), asio::detached);
    io_.restart();
    io_.run();
  }
  TempFile file_;
  asio::io_context io_;
  int quiesces_a_ = 0, quiesces_b_ = 0;
};

TEST_F(AluaFailoverTest, EverythingIsStandbyUntilTheLockIsHeldThenExactlyOneIsActive) {
  Gateway a(file_.path(), 1, 2, &quiesces_a_);
  Gateway b(file_.path(), 2, 1, &quiesces_b_);
  // Nothing is active before an election: no write goes anywhere.
  EXPECT_EQ(a.mine(), AluaState::standby);
  EXPECT_EQ(a.peers(), AluaState::standby);
  const auto before = a.table->generation();
  step(a);
  EXPECT_TRUE(a.failover->active());
  EXPECT_EQ(a.mine(), AluaState::active_optimized);
  EXPECT_GT(a.table->generation(), before);  // → ASYMMETRIC ACCESS STATE CHANGED on its nexuses
  step(b);
  step(b);
  EXPECT_FALSE(b.failover->active());
  EXPECT_EQ(b.mine(), AluaState::standby);
  EXPECT_EQ(b.peers(), AluaState::active_optimized);  // learnt from A's marker
  EXPECT_EQ(a.peers(), AluaState::standby);
}

TEST_F(AluaFailoverTest, SetTargetPortGroupsOnTheStandbyGatewayMovesTheActiveOneAfterItDrained) {
  Gateway a(file_.path(), 1, 2, &quiesces_a_);
  Gateway b(file_.path(), 2, 1, &quiesces_b_);
  step(a);
  step(b);
  b.failover->request(true);  // SET TARGET PORT GROUPS on B: group 2 active/optimized
  step(b);                    // B asks (the request lock) but cannot take the election yet
  EXPECT_FALSE(b.failover->active());
  step(a);  // A sees the request: transitioning, drain, release, standby
  EXPECT_EQ(quiesces_a_, 1);
  EXPECT_FALSE(a.failover->active());
  EXPECT_EQ(a.mine(), AluaState::standby);
  step(b);
  EXPECT_TRUE(b.failover->active());
  EXPECT_EQ(b.mine(), AluaState::active_optimized);
  EXPECT_EQ(b.peers(), AluaState::standby);
  step(a);
  EXPECT_EQ(a.peers(), AluaState::active_optimized);
  EXPECT_FALSE(a.failover->active());
}

TEST_F(AluaFailoverTest, SetTargetPortGroupsOnTheActiveGatewayHandsOverToThePeer) {
  Gateway a(file_.path(), 1, 2, &quiesces_a_);
  Gateway b(file_.path(), 2, 1, &quiesces_b_);
  step(a);
  step(b);
  a.failover->request(false);  // SET TARGET PORT GROUPS on A: group 1 standby
  step(a);
  EXPECT_EQ(quiesces_a_, 1);
  EXPECT_EQ(a.mine(), AluaState::standby);
  step(b);
  EXPECT_TRUE(b.failover->active());
}

TEST_F(AluaFailoverTest, AfterHandingOverTheGatewayStaysOffTheElectionForTheHoldOff) {
  Gateway a(file_.path(), 1, 2, &quiesces_a_);
  auto f = AluaFailover::open({.lock_path = file_.path(), .local_groups = {1}, .peer_groups = {2},
                               .poll_interval = 10ms, .yield_hold_off = 60s},
                              a.table, nullptr);
  ASSERT_TRUE(f);
  asio::co_spawn(io_, (*f)->step(), asio::detached);
  io_.restart();
  io_.run();
  ASSERT_TRUE((*f)->active());
  (*f)->request(false);
  for (int i = 0; i < 3; ++i) {
    asio::co_spawn(io_, (*f)->step(), asio::detached);
    io_.restart();
    io_.run();
  }
  EXPECT_FALSE((*f)->active());  // nobody took it, but the hold-off has not passed
  (*f)->request(true);           // asked again: the hold-off does not apply
  asio::co_spawn(io_, (*f)->step(), asio::detached);
  io_.restart();
  io_.run();
  EXPECT_TRUE((*f)->active());
}

TEST_F(AluaFailoverTest, WhenTheActiveGatewayGoesTheStandbyTakesOverAtItsNextPoll) {
  Gateway b(file_.path(), 2, 1, &quiesces_b_);
  {
    Gateway a(file_.path(), 1, 2, &quiesces_a_);
    step(a);
    step(b);
    EXPECT_FALSE(b.failover->active());
  }  // A's lock file is closed, as when its process dies
  step(b);
  EXPECT_TRUE(b.failover->active());
  EXPECT_EQ(b.mine(), AluaState::active_optimized);
  EXPECT_EQ(quiesces_a_, 0);  // a dead gateway drains nothing; its writes died with it
}

TEST_F(AluaFailoverTest, RunPollsUntilStopped) {
  Gateway a(file_.path(), 1, 2, &quiesces_a_);
  bool ended = false;
  asio::co_spawn(io_, [&]() -> Awaitable<void> {
    co_await a.failover->run();
    ended = true;
  }, asio::detached);
  io_.run_for(50ms);
  EXPECT_TRUE(a.failover->active());
  a.failover->stop();
  io_.run_for(200ms);
  EXPECT_TRUE(ended);
  EXPECT_TRUE(a.failover->active());  // the lock stays held until the object goes
}

}  // namespace
}  // namespace iserkit::target

// ALUA failover between gateways through OFD locks on a shared file (alua_failover.hpp; SPC-5
// §5.16.2, SPC-4 §6.45).
#include "alua_failover.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <utility>

#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"

namespace iserkit::target {

// ---- LockFile ----

Result<LockFile> LockFile::open(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return fail(std::error_code(errno, std::system_category()));
  return LockFile(fd);
}

LockFile::LockFile(LockFile&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}

LockFile::~LockFile() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {
struct flock one_byte(short type, std::uint64_t offset) noexcept {
  struct flock f {};
  f.l_type = type;
  f.l_whence = SEEK_SET;
  f.l_start = static_cast<off_t>(offset);
  f.l_len = 1;
  f.l_pid = 0;  // fcntl(2): must be 0 for OFD locks
  return f;
}
}  // namespace

bool LockFile::try_lock(std::uint64_t offset) noexcept {
  struct flock f = one_byte(F_WRLCK, offset);
  return ::fcntl(fd_, F_OFD_SETLK, &f) == 0;
}

void LockFile::unlock(std::uint64_t offset) noexcept {
  struct flock f = one_byte(F_UNLCK, offset);
  (void)::fcntl(fd_, F_OFD_SETLK, &f);
}

bool LockFile::locked_by_other(std::uint64_t offset) const noexcept {
  struct flock f = one_byte(F_WRLCK, offset);
  if (::fcntl(fd_, F_OFD_GETLK, &f) != 0) return false;
  return f.l_type != F_UNLCK;  // our own locks never conflict with us
}

// ---- AluaFailover ----

Result<std::shared_ptr<AluaFailover>> AluaFailover::open(AluaFailoverOptions options,
                                                         std::shared_ptr<PortGroupTable> table, Quiesce quiesce) {
  if (options.local_groups.empty() || !table) return fail(errc::invalid_argument);
  auto lock = LockFile::open(options.lock_path);
  if (!lock) return fail(lock.error());
  return std::make_shared<AluaFailover>(std::move(options), std::move(table), std::move(quiesce), std::move(*lock));
}

AluaFailover::AluaFailover(AluaFailoverOptions options, std::shared_ptr<PortGroupTable> table, Quiesce quiesce,
                           LockFile lock)
    : options_(std::move(options)), table_(std::move(table)), quiesce_(std::move(quiesce)), lock_(std::move(lock)) {
  std::vector<std::pair<std::uint16_t, AluaState>> all;
  for (auto g : options_.local_groups) all.emplace_back(g, AluaState::standby);
  for (auto g : options_.peer_groups) all.emplace_back(g, AluaState::standby);
  table_->set_states(all);
}

bool AluaFailover::is_local(std::uint16_t id) const noexcept {
  return std::find(options_.local_groups.begin(), options_.local_groups.end(), id) != options_.local_groups.end();
}

void AluaFailover::request(bool active) noexcept { want_.store(active ? want_active : want_standby); }

void AluaFailover::stop() noexcept { stopping_.store(true); }

void AluaFailover::set_local(AluaState state) {
  std::vector<std::pair<std::uint16_t, AluaState>> states;
  for (auto g : options_.local_groups) states.emplace_back(g, state);
  table_->set_states(states);
}

Awaitable<void> AluaFailover::run() {
  timer_ = std::make_unique<asio::steady_timer>(co_await asio::this_coro::executor);
  while (!stopping_.load()) {
    co_await step();
    timer_->expires_after(options_.poll_interval);
    boost::system::error_code ec;
    co_await timer_->async_wait(use_awaitable_ec(ec));
  }
}

void AluaFailover::become_active() {
  for (auto g : options_.local_groups) {
    // Only an election holder takes markers, and the election has one holder: these are free
    // unless another process serves the same tag (a configuration error, logged).
    if (!lock_.try_lock(alua_lock_offsets::marker(g)))
      log::error("alua: target port group {} is marked active by another process too: two gateways use tpgt={}", g, g);
  }
  if (holding_request_) lock_.unlock(alua_lock_offsets::request);
  holding_request_ = asking_ = false;
  want_.store(none);
  active_.store(true);
  std::vector<std::pair<std::uint16_t, AluaState>> states;
  for (auto g : options_.local_groups) states.emplace_back(g, AluaState::active_optimized);
  for (auto g : options_.peer_groups) states.emplace_back(g, AluaState::standby);
  table_->set_states(states);
  log::warn("alua: this gateway is active (holds the lock on {}): its target port groups are active/optimized",
            options_.lock_path.string());
}

Awaitable<void> AluaFailover::hand_over(const char* why) {
  log::warn("alua: handing over ({}): target port groups transitioning, draining writes", why);
  const auto started = std::chrono::steady_clock::now();
  set_local(AluaState::transitioning);
  // SPC-5 §5.16.2.5: commands now get NOT READY 04h/0Ah; writes already accepted finish (and are
  // flushed) before the lock goes, so the next gateway reads everything acknowledged here.
  if (quiesce_) co_await quiesce_();
  for (auto g : options_.local_groups) lock_.unlock(alua_lock_offsets::marker(g));
  lock_.unlock(alua_lock_offsets::election);
  active_.store(false);
  want_.store(none);
  hold_off_until_ = std::chrono::steady_clock::now() + options_.yield_hold_off;
  set_local(AluaState::standby);
  log::warn("alua: handed over after {} ms: this gateway is standby",
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count());
}

Awaitable<void> AluaFailover::step() {
  if (stopping_.load()) co_return;
  const auto now = std::chrono::steady_clock::now();
  const int want = want_.load();
  if (active_.load()) {
    if (want == want_standby) {
      co_await hand_over("SET TARGET PORT GROUPS");
    } else if (lock_.locked_by_other(alua_lock_offsets::request)) {
      co_await hand_over("a peer gateway asked for it");
    } else if (want == want_active) {
      want_.store(none);  // already there
    }
    co_return;
  }
  if (want == want_standby) want_.store(none);  // already there; the election rules still apply
  const bool asked = want == want_active;
  if (asked) {
    if (!asking_) {
      asking_ = true;
      asked_since_ = now;
    }
    if (now - asked_since_ > options_.request_timeout) {
      log::warn("alua: the active gateway did not hand over within {} ms", options_.request_timeout.count());
      if (holding_request_) lock_.unlock(alua_lock_offsets::request);
      holding_request_ = asking_ = false;
      want_.store(none);
      co_return;
    }
    // Another standby gateway may be asking too: one request at a time; this one retries.
    if (!holding_request_) holding_request_ = lock_.try_lock(alua_lock_offsets::request);
  }
  if ((asked || now >= hold_off_until_) && lock_.try_lock(alua_lock_offsets::election)) {
    become_active();
    co_return;
  }
  // Standby: a peer group is active/optimized while its gateway holds its marker.
  std::vector<std::pair<std::uint16_t, AluaState>> peers;
  for (auto g : options_.peer_groups)
    peers.emplace_back(g, lock_.locked_by_other(alua_lock_offsets::marker(g)) ? AluaState::active_optimized
                                                                               : AluaState::standby);
  table_->set_states(peers);
}

}  // namespace iserkit::target

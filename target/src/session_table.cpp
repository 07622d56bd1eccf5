// SessionTable and SessionEnd (session_table.hpp): session reinstatement, RFC 7143 §6.3.5.
#include "session_table.hpp"

#include <cctype>
#include <utility>

namespace iserkit::target {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

SessionKey SessionKey::make(std::string_view initiator_name, const std::array<std::byte, 6>& isid,
                            std::string_view target_name, std::uint16_t portal_group) {
  return SessionKey{.initiator = lower(initiator_name), .isid = isid, .target = lower(target_name),
                    .portal_group = portal_group};
}

void SessionEnd::set() {
  std::vector<std::function<void()>> callbacks;
  {
    std::lock_guard lock(mutex_);
    if (set_) return;
    set_ = true;
    callbacks.swap(callbacks_);
  }
  for (auto& f : callbacks) f();
}

void SessionEnd::on_set(std::function<void()> f) {
  {
    std::lock_guard lock(mutex_);
    if (!set_) {
      callbacks_.push_back(std::move(f));
      return;
    }
  }
  f();
}

bool SessionEnd::is_set() const {
  std::lock_guard lock(mutex_);
  return set_;
}

Awaitable<void> SessionEnd::wait() {
  if (is_set()) co_return;
  co_await asio::async_initiate<const asio::use_awaitable_t<>&, void()>(
      [this](auto handler) {
        // The handler resumes the coroutine; it is posted to its own executor, never run inline
        // on the thread that calls set().
        auto shared = std::make_shared<decltype(handler)>(std::move(handler));
        on_set([shared] {
          auto ex = asio::get_associated_executor(*shared);
          asio::post(ex, std::move(*shared));
        });
      },
      asio::use_awaitable);
}

Awaitable<bool> SessionEnd::wait_for(std::chrono::milliseconds bound) {
  if (is_set()) co_return true;
  auto ex = co_await asio::this_coro::executor;
  auto timer = std::make_shared<asio::steady_timer>(ex, bound);
  // set() cancels the wait from whatever thread it runs on, through the waiter's own executor;
  // the cancel can only run once this coroutine is suspended in async_wait below (one thread).
  // The callback holds the timer weakly: a wait that timed out leaves no timer behind in this
  // latch (which may outlive the waiter's io_context), only an expired weak pointer.
  on_set([weak = std::weak_ptr<asio::steady_timer>(timer), ex] {
    asio::post(ex, [weak] {
      if (auto t = weak.lock()) t->cancel();
    });
  });
  boost::system::error_code ec;
  co_await timer->async_wait(use_awaitable_ec(ec));
  co_return is_set();
}

std::optional<SessionTable::Entry> SessionTable::replace(const SessionKey& key, Entry entry) {
  std::lock_guard lock(mutex_);
  auto it = sessions_.find(key);
  if (it == sessions_.end()) {
    sessions_.emplace(key, std::move(entry));
    return std::nullopt;
  }
  Entry old = std::move(it->second);
  it->second = std::move(entry);
  return old;
}

void SessionTable::remove(const SessionKey& key, std::uint64_t id) {
  std::lock_guard lock(mutex_);
  auto it = sessions_.find(key);
  if (it != sessions_.end() && it->second.id == id) sessions_.erase(it);
}

void SessionTable::finish(const SessionKey& key, std::uint64_t id, std::shared_ptr<SessionEnd> ended,
                          std::shared_ptr<SessionEnd> predecessor) {
  if (predecessor && !predecessor->is_set()) {
    predecessor->on_set([this, key, id, ended = std::move(ended)] {
      remove(key, id);
      ended->set();
    });
    return;
  }
  remove(key, id);
  ended->set();
}

std::size_t SessionTable::size() const {
  std::lock_guard lock(mutex_);
  return sessions_.size();
}

std::optional<std::uint16_t> SessionTable::tsih(const SessionKey& key) const {
  std::lock_guard lock(mutex_);
  auto it = sessions_.find(key);
  if (it == sessions_.end()) return std::nullopt;
  return it->second.tsih;
}

}  // namespace iserkit::target

// SessionTable: the target's live normal sessions by their identity, for session reinstatement
// (RFC 7143 §6.3.5, §6.4 at ErrorRecoveryLevel 0). A leading login with TSIH 0 that carries the
// InitiatorName and ISID of a live session of the same target node ends that session first: its
// connection is closed, its tasks are aborted (a task on the backend runs to completion: a write
// the old session had acknowledged stays done, one it had not may or may not be done) and its
// buffers and budgets are given back; only then does the new login get its final Login Response.
// So no task of the old session can touch the LU after the new session started.
// (LIO does the same in iscsi_check_for_session_reinstatement(): stop the old session, wait for
// its completion, then go on with the login.)
//
// SessionEnd is the cross-thread "this session has ended" latch the new login waits on: sessions
// live on different I/O threads. The wait is bounded (ConnectionLimits::reinstate_timeout): a
// backend that never completes one of the old session's commands would otherwise hold the new
// login until the login timeout. A login that gives up is refused with a retryable status, and it
// keeps standing for the session it could not end (SessionTable::finish()), so the next login
// still waits for that one.
// THREADING: every member is thread-safe.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "iserkit/common/asio.hpp"

namespace iserkit::target {

/// The identity a reinstating login matches: the I_T nexus, i.e. the initiator port (InitiatorName
/// + ISID) and the target port (TargetName + portal group tag) (RFC 7143 §4.4.1 SSID = ISID + TPGT,
/// §6.3.5; names compared case-insensitively, RFC 3722). The same ISID through another portal
/// group is another session (a multipath initiator may use one ISID on every path).
struct SessionKey {
  std::string initiator;            ///< InitiatorName, lower-cased
  std::array<std::byte, 6> isid{};  ///< ISID as on the wire
  std::string target;               ///< TargetName, lower-cased
  std::uint16_t portal_group = 1;   ///< target portal group tag

  /// Builds a key, folding both names to lower case.
  static SessionKey make(std::string_view initiator_name, const std::array<std::byte, 6>& isid,
                         std::string_view target_name, std::uint16_t portal_group = 1);
  friend bool operator<(const SessionKey& a, const SessionKey& b) noexcept {
    return std::tie(a.initiator, a.isid, a.target, a.portal_group) <
           std::tie(b.initiator, b.isid, b.target, b.portal_group);
  }
  friend bool operator==(const SessionKey& a, const SessionKey& b) noexcept = default;
};

/// A one-shot latch: set() once the session has wholly ended (connection closed, every task ended,
/// budgets released, I_T nexus closed). Thread-safe; waiters may be on any executor.
class SessionEnd {
 public:
  /// Marks the session ended and runs every callback given to on_set() (on this thread).
  void set();
  /// Runs `f` at set(), or now when set() already ran. `f` must be cheap (post work elsewhere).
  void on_set(std::function<void()> f);
  [[nodiscard]] bool is_set() const;
  /// Suspends the calling coroutine until set() (resumed on its own executor).
  Awaitable<void> wait();
  /// Suspends the calling coroutine until set() or until `bound` has passed, whichever is first
  /// (resumed on its own executor, which must be run by one thread). Returns is_set().
  Awaitable<bool> wait_for(std::chrono::milliseconds bound);

 private:
  mutable std::mutex mutex_;
  bool set_ = false;
  std::vector<std::function<void()>> callbacks_;
};

/// The live normal sessions, one per SessionKey.
class SessionTable {
 public:
  /// A registered session: `close` ends it (called from any thread; it posts to the session's own
  /// executor), `ended` is set when it has wholly ended.
  struct Entry {
    std::uint64_t id = 0;  ///< unique per connection (caller's choice, non-zero)
    std::uint16_t tsih = 0;
    std::function<void()> close;
    std::shared_ptr<SessionEnd> ended;
  };

  /// Registers `entry` under `key` and returns the session it replaces, if one was registered:
  /// the caller must close() it and wait for its `ended` before answering its own login.
  std::optional<Entry> replace(const SessionKey& key, Entry entry);
  /// Removes the entry of `key` if it is still session `id` (a later login may have replaced it).
  void remove(const SessionKey& key, std::uint64_t id);
  /// Session `id` registered under `key` has ended (its connection's run() is over): removes its
  /// entry (as remove()) and sets `ended`. With a `predecessor` that has not ended yet — the
  /// session this one replaced and gave up waiting for — both happen only once the predecessor
  /// has ended (in its set(), on its thread): a login that replaces this session meanwhile waits
  /// for the predecessor too, so no older session's command can reach the LU after a newer
  /// session started (RFC 7143 §6.3.5). The table must outlive the predecessor's set().
  void finish(const SessionKey& key, std::uint64_t id, std::shared_ptr<SessionEnd> ended,
              std::shared_ptr<SessionEnd> predecessor = nullptr);
  /// Sessions registered (for tests and logs).
  [[nodiscard]] std::size_t size() const;
  /// The TSIH registered under `key`, if any.
  [[nodiscard]] std::optional<std::uint16_t> tsih(const SessionKey& key) const;

 private:
  mutable std::mutex mutex_;
  std::map<SessionKey, Entry> sessions_;
};

}  // namespace iserkit::target

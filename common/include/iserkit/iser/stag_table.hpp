// Per-command STags over memory windows (RFC 7145 §9.2, §7.3.1): the life of each window an iSER
// initiator binds over its registered pool so that the target can reach a command's buffer only
// while that command lives. Layer 2, sans-I/O: it decides; the datamover posts the verbs work
// requests (Bind MW, Local Invalidate) and reports their completions and any Send with Invalidate
// (RFC 7145 §5.1: the peer invalidates the STag named in the SCSI Response's SEND).
//
// A window's state:  free ──acquire()──▶ bound ──release()──▶ invalidating ──invalidated()──▶ free
//                                           │                                         ▲
//                                           └─remote_invalidated()─▶ peer_invalidated ─┘ (release())
// Every bind gets a fresh rkey (the low 8 "key" bits advance, as ibv_inc_rkey() does), so an STag
// the peer kept from an earlier command names no window any more.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "iserkit/iser/header.hpp"

namespace iserkit::iser {

/// The next rkey of a memory window: same index (upper 24 bits), key byte + 1 mod 256
/// (libibverbs ibv_inc_rkey()).
[[nodiscard]] constexpr std::uint32_t next_stag(std::uint32_t rkey) noexcept {
  return (rkey & 0xffffff00u) | ((rkey + 1u) & 0xffu);
}

/// Whether the target may end a command with Send with Invalidate of its STag: the initiator did
/// not set "Send with Invalidate not supported" in its CM REQ private data and the target did not
/// set "not used" in its REP (Linux include/scsi/iser.h ISER_SEND_W_INV_NOT_SUP,
/// ISERT_SEND_W_INV_NOT_USED). Absent private data means the Linux default: not supported / used.
[[nodiscard]] constexpr bool send_with_invalidate_agreed(const std::optional<CmRequest>& request,
                                                         const std::optional<CmReply>& reply) noexcept {
  return request && !request->send_with_invalidate_not_supported && reply && !reply->send_with_invalidate_not_used;
}

/// The windows of one connection and the state of each (see the diagram above). Not thread-safe
/// (one connection, one executor).
class StagTable {
 public:
  enum class State : std::uint8_t { free, bound, peer_invalidated, invalidating };
  /// What release() asks of the caller.
  enum class Release : std::uint8_t {
    invalidate,  ///< post a Local Invalidate of rkey(slot), then call invalidated(slot)
    reusable,    ///< the peer already invalidated it: the window is free again
    ignored,     ///< the slot was not held (a double release, or an index out of range)
    deferred,    ///< its Bind MW has not completed yet: bind_completed() gives the answer
  };
  struct Bound {
    std::uint32_t slot;  ///< the window's index
    std::uint32_t rkey;  ///< the STag to bind it with and send in the iSER header
  };

  /// One window per element of `rkeys`: its rkey as allocated (ibv_alloc_mw()).
  explicit StagTable(std::vector<std::uint32_t> rkeys);

  /// Takes a free window and gives it a fresh rkey (next_stag()); nullopt when every window is
  /// in use (the caller fails the command, nothing changed).
  [[nodiscard]] std::optional<Bound> acquire() noexcept;
  /// The command that held `slot` ended: a bound window must be invalidated (Release::invalidate);
  /// one the peer invalidated is free at once. While the window's Bind MW completion has not been
  /// seen, the answer waits for it (Release::deferred): a Local Invalidate is only ever posted for
  /// a window seen bound, because Linux rxe (6.1 and today) dereferences NULL when it invalidates
  /// a type 2 window that is not bound (docs/iser.md).
  Release release(std::uint32_t slot) noexcept;
  /// The Bind MW of `slot` completed, `ok` or not. Returns what a release() that came meanwhile
  /// now asks (invalidate or reusable), else Release::ignored. A failed bind leaves the window out
  /// of use for good (its connection is failing).
  Release bind_completed(std::uint32_t slot, bool ok) noexcept;
  /// The Local Invalidate of `slot` completed (successfully or flushed): the window is free.
  void invalidated(std::uint32_t slot) noexcept;
  /// A received SEND carried "invalidate `rkey`" (IBV_WC_WITH_INV). True when that is the current
  /// rkey of a bound window (now peer_invalidated); false for an rkey this table does not hold
  /// bound (stale, unknown, already invalidated): the caller treats that as a protocol error.
  bool remote_invalidated(std::uint32_t rkey) noexcept;

  [[nodiscard]] State state(std::uint32_t slot) const noexcept { return slots_.at(slot).state; }
  [[nodiscard]] std::uint32_t rkey(std::uint32_t slot) const noexcept { return slots_.at(slot).rkey; }
  [[nodiscard]] std::size_t size() const noexcept { return slots_.size(); }
  [[nodiscard]] std::size_t free_count() const noexcept { return free_.size(); }
  /// The window whose current rkey is `rkey` (any state), if any.
  [[nodiscard]] std::optional<std::uint32_t> find(std::uint32_t rkey) const noexcept;

 private:
  struct Slot {
    std::uint32_t rkey;
    State state = State::free;
    bool bind_pending = false;     // Bind MW posted, its completion not seen yet
    bool release_waiting = false;  // release() came while bind_pending
  };
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_;  // a stack: reuse the most recently freed window
};

}  // namespace iserkit::iser

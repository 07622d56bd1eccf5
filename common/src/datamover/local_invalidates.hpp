// LocalInvalidates: the Local Invalidates an iSER initiator owes for memory windows whose commands
// ended (per-command STags, RFC 7145 §9.2), gathered per loop pass so that those of one pass leave
// in one chain of work requests (issue 23 item 7) instead of one ibv_post_send each.
//
// The StagTable decides *whether* a window needs a Local Invalidate (never one the peer invalidated
// with Send with Invalidate, never one whose Bind MW was not seen complete, never one whose bind
// failed); this decides *when* it is posted:
// - a command that ended without its SCSI Response (timeout, abort, a lost connection: the target
//   may still be working on its buffer), no send pass, or the pass not held: at once (with whatever
//   is queued, in one chain), as before;
// - a command that ended with its response while the pass is held (a receive burst: the responses
//   of several commands are being handled): queued. The connection puts the queued ones at the
//   head of the next chain it posts (take(): the SENDs and Bind MWs of a sender already running in
//   the pass, or the chain posted before a sender waits for a free window), and whatever is left
//   goes out as one chain when the pass ends (flush_pass()).
// A queued window stays in the StagTable's `invalidating` state, so it is not bound again before
// its invalidate was posted and completed.
//
// What the delay exposes: the window stays open (the target can still reach the command's buffer
// through the STag it was given) until the queued invalidate executes, while the session already
// handed the buffer back to its caller at the command's end. That was already so before: a Local
// Invalidate posted at once executes asynchronously too (the buffer was never held until its
// completion), so per-command STags never promised "no access once the caller has the buffer";
// they promise that an STag names one command's buffer only, never a later binding (fresh rkey per
// bind, reuse only after the invalidate completed). The delay adds the rest of the current pass,
// which holds no waits (a hold ends before any wait other than the transport's, common/send_pass.hpp)
// and, on the initiator, lasts only while received PDUs are already in user space. Only answered
// commands are delayed: a target that follows the protocol has finished with the window before the
// command's SCSI Response arrives (its RDMA Writes precede the response on the RC QP; its RDMA
// Reads completed before it answered), so only a target breaking the protocol could use the
// longer window, and it could use the old one as well. A command that timed out or was aborted,
// whose target may legitimately still write, is invalidated at once.
//
// Single-threaded: the connection's executor, which must be the one thread running the pass's
// io_context (iserkit-nbd's loops). No verbs here: the connection posts (the `post` callback).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "iserkit/common/send_pass.hpp"

namespace iserkit::datamover::rdma {

class LocalInvalidates final : private SendPass::Flusher {
 public:
  /// Posts the Local Invalidates of `slots` (window indexes, in this order) as one chain.
  using Post = std::function<void(std::span<const std::uint32_t> slots)>;

  explicit LocalInvalidates(Post post) : post_(std::move(post)) {}
  LocalInvalidates(const LocalInvalidates&) = delete;
  LocalInvalidates& operator=(const LocalInvalidates&) = delete;
  ~LocalInvalidates() = default;  // a queue still deferred is forgotten by the pass (Flusher)

  /// Joins the loop's send pass (null: none; every invalidate is posted at once).
  void set_pass(SendPass* pass) noexcept { pass_ = pass; }

  /// Window `slot` must be invalidated (StagTable::Release::invalidate). `answered`: its command
  /// ended with its SCSI Response (StagOwner::release_stag()). Answered while the pass is held:
  /// queued (the first of a pass arms the pass-end flush). Otherwise posted now, together with
  /// whatever is queued (one chain, queued ones first).
  void add(std::uint32_t slot, bool answered) {
    if (answered && pass_ != nullptr && pass_->defer(*this)) {
      queued_.push_back(slot);
      return;
    }
    queued_.push_back(slot);
    flush();
  }

  /// For the head of a chain about to be posted: appends every queued slot (in queuing order) to
  /// `out` and forgets them. The pass-end flush then has nothing left to post.
  void take(std::vector<std::uint32_t>& out) {
    out.insert(out.end(), queued_.begin(), queued_.end());
    queued_.clear();
  }

  /// Posts what is queued now, as one chain (the pass ended, or a sender is about to wait for a
  /// window that only these invalidates can free).
  void flush() {
    if (queued_.empty()) return;
    flushing_.clear();
    std::swap(flushing_, queued_);  // post_ may add() again (a nested release): kept apart
    post_(flushing_);
    flushing_.clear();
  }

  /// The connection failed: nothing queued is posted (its QP is in the error state; the windows
  /// stay out of use).
  void drop() noexcept { queued_.clear(); }

  [[nodiscard]] std::size_t queued() const noexcept { return queued_.size(); }

 private:
  void flush_pass() override { flush(); }

  Post post_;
  SendPass* pass_ = nullptr;
  std::vector<std::uint32_t> queued_;
  std::vector<std::uint32_t> flushing_;  // flush()'s batch (capacity kept)
};

}  // namespace iserkit::datamover::rdma

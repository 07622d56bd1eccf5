// SendPass: the "pass" of one event loop, for batching sends (issue 23 item 3, docs/performance.md).
//
// An io_uring loop reaps every completion that is ready, lets the engines react, and only then
// submits what they produced, so the PDUs and NBD replies that became ready together leave in one
// gather write per socket. Under Asio the same effect needs to know when the input that already
// arrived has been processed. A receive loop knows that: its datamover (or NBD stream) read more
// than the PDU it returned (the lookahead holds the next header), so more work is already here.
// While it knows so it *holds* the pass; senders that see the pass held queue their output and
// *defer* a Flusher; when the last hold is released every deferred Flusher runs once, in the order
// deferred. A holder releases with release_later(): a posted handler, so the work it already
// started (posted coroutine resumptions) runs before the flush.
//
// Rules for holders: hold only while input is already buffered in user space, and release before
// any wait other than the socket read (flow control, budgets), or the output that wait needs is
// never flushed. At queue depth 1 nothing is ever buffered, so nothing is held or deferred and
// sends go out at once (no added latency, no added post).
//
// One SendPass per execution context (an Asio service): the context must be run by one thread
// (iserkit-nbd's and iserkit-target's event loops are). Not thread-safe. Layer 0.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/handler_memory.hpp"

namespace iserkit {

/// The pass of one single-threaded event loop (see the file comment).
class SendPass : public asio::detail::execution_context_service_base<SendPass> {
 public:
  /// Something that queued output while the pass was held and writes it when the pass ends.
  class Flusher {
   public:
    Flusher(const Flusher&) = delete;
    Flusher& operator=(const Flusher&) = delete;
    /// Writes what was queued (called once per defer(), on the loop's thread, pass not held).
    virtual void flush_pass() = 0;

   protected:
    Flusher() = default;
    /// A deferred flusher that dies first is forgotten (its flush_pass() never runs).
    ~Flusher() {
      if (armed_in_ != nullptr) armed_in_->forget(*this);
    }

   private:
    friend class SendPass;
    SendPass* armed_in_ = nullptr;
  };

  explicit SendPass(asio::execution_context& context) : execution_context_service_base(context) {}

  /// The pass of `executor`'s execution context (created on first use; one lookup under Asio's
  /// service mutex: keep the reference).
  static SendPass& of(const asio::any_io_executor& executor) {
    return asio::use_service<SendPass>(asio::query(executor, asio::execution::context));
  }

  /// Opens (or nests) a hold: senders defer until every hold is released.
  void hold() noexcept { ++depth_; }

  /// Ends one hold now; when it was the last, runs every deferred flusher (in deferral order,
  /// flushers deferred meanwhile included).
  void release() {
    if (depth_ == 0) return;
    if (--depth_ != 0) return;
    while (depth_ == 0 && !armed_.empty()) {
      Flusher* f = armed_.front();
      armed_.erase(armed_.begin());
      f->armed_in_ = nullptr;
      f->flush_pass();
    }
  }

  /// Ends one hold after the handlers already queued on `executor` ran (asio::post): the work the
  /// holder started in this pass joins the batch.
  void release_later(const asio::any_io_executor& executor) {
    // No allocation per release in the usual case of one pending release.
    post_with_memory(executor, release_memory_, [this] { release(); });
  }

  /// True while a hold is open.
  [[nodiscard]] bool held() const noexcept { return depth_ > 0; }

  /// When the pass is held: arms `f` (once, however often called before the pass ends) and
  /// returns true: the caller queues its output and leaves the write to flush_pass(). When not
  /// held: returns false, the caller writes now.
  bool defer(Flusher& f) {
    if (depth_ == 0) return false;
    if (f.armed_in_ == nullptr) {
      f.armed_in_ = this;
      armed_.push_back(&f);
    }
    return true;
  }

  /// Flushers deferred and not yet run (for tests).
  [[nodiscard]] std::size_t deferred() const noexcept { return armed_.size(); }

 private:
  void shutdown() override {
    for (Flusher* f : armed_) f->armed_in_ = nullptr;
    armed_.clear();
  }
  void forget(Flusher& f) noexcept {
    armed_.erase(std::remove(armed_.begin(), armed_.end(), &f), armed_.end());
    f.armed_in_ = nullptr;
  }

  std::size_t depth_ = 0;
  std::vector<Flusher*> armed_;
  HandlerMemory release_memory_;  // release_later()'s posted function (one pending at a time)
};

}  // namespace iserkit

// EmptySocketGuess: whether a socket that has just given a whole PDU or NBD request is empty now.
//
// A receive loop that got a whole unit (an iSCSI PDU, an NBD request header) reads again on its
// own thread without blocking while its last read came back full, so a burst is processed without
// a posted completion per unit (docs/performance-fast-path.md, "Batching per pass"). At queue depth 1 that
// read always finds the socket empty (EAGAIN), and then Asio's async read tries once more before
// it waits: two system calls find out the same thing. Where the units come one per wake-up, this
// guess says to leave the finding out to Asio's read alone, once `runs_of_one_to_start` wake-ups
// in a row brought one unit each; one own read in `probe_every` is still tried so that a burst
// which starts while skipping is seen (a run of two units ends the guess). Asio 1.74's epoll reactor has no cheaper way to wait: async_wait costs an epoll_ctl.
// Layer 0; not thread-safe (one per receive loop).
#pragma once

namespace iserkit {

/// See the file comment. "Run": the units a receive loop got since it last waited in Asio.
class EmptySocketGuess {
 public:
  /// Of the own reads the guess would skip, one in this many is tried anyway.
  static constexpr unsigned probe_every = 8;
  /// Runs of exactly one unit in a row before the guess starts (a burst that trickles in one unit
  /// per wake-up now and then must not lose its batching).
  static constexpr unsigned runs_of_one_to_start = 4;

  /// A unit is complete and the loop is about to read the next one's first bytes with a
  /// non-blocking read of its own: false = skip that read (the socket is probably empty).
  [[nodiscard]] bool worth_reading() noexcept {
    if (run_ != 1 || runs_of_one_ < runs_of_one_to_start) return true;
    if (++skipped_ < probe_every) return false;
    skipped_ = 0;
    return true;
  }
  /// A whole unit arrived (after a wait, or read on the loop's own thread).
  void unit() noexcept { ++run_; }
  /// The loop starts an Asio read (which may wait): the run ends. A run without a whole unit (the
  /// rest of a payload was waited for) leaves the guess as it was.
  void waiting() noexcept {
    if (run_ == 1) {
      if (runs_of_one_ < runs_of_one_to_start) ++runs_of_one_;
    } else if (run_ > 1) {
      runs_of_one_ = 0;
      skipped_ = 0;
    }
    run_ = 0;
  }

 private:
  unsigned run_ = 0;
  unsigned runs_of_one_ = 0;  // runs of one unit in a row (counted up to runs_of_one_to_start)
  unsigned skipped_ = 0;
};

}  // namespace iserkit

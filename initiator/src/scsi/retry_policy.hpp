// RetryPolicy: which finished SCSI commands LunHandle sends again, and after how long. Sans-I/O.
//  - CHECK CONDITION with UNIT ATTENTION: SAM-5 §5.14 — the unit reports the attention condition
//    instead of processing the command, so sending it once more is safe: retried once, at once.
//  - BUSY and TASK SET FULL (SAM-5 §5.3.1): the command was not processed; retried with a doubling
//    back-off (10 ms, 20 ms, … capped at 1 s), at most `busy_retries` times.
// Everything else (GOOD, other sense keys, RESERVATION CONFLICT, TASK ABORTED) is final.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>

#include "iserkit/common/backoff.hpp"
#include "iserkit/scsi/sense.hpp"

namespace iserkit::initiator {

class RetryPolicy {
 public:
  struct Limits {
    unsigned unit_attention_retries = 1;
    unsigned busy_retries = 6;
    std::chrono::milliseconds first_backoff{10};
    std::chrono::milliseconds max_backoff{1000};
  };

  RetryPolicy() = default;
  explicit RetryPolicy(Limits limits) : limits_(limits) {}

  /// For a command that finished with `result`: the delay before sending it again, or nullopt
  /// when the result is final. Counts the attempts of one command; use one policy per command.
  std::optional<std::chrono::milliseconds> next(const scsi::ScsiResult& result) noexcept {
    if (result.status == scsi::Status::check_condition && result.sense &&
        result.sense->key == scsi::SenseKey::unit_attention) {
      if (unit_attentions_ >= limits_.unit_attention_retries) return std::nullopt;
      ++unit_attentions_;
      return std::chrono::milliseconds(0);
    }
    if (result.status == scsi::Status::busy || result.status == scsi::Status::task_set_full) {
      if (busy_ >= limits_.busy_retries) return std::nullopt;
      const auto delay = busy_backoff_.delay();
      busy_backoff_.failed();
      ++busy_;
      return delay;
    }
    return std::nullopt;
  }

 private:
  Limits limits_;
  // first_backoff doubling, at most max_backoff (a first_backoff above it waits max_backoff).
  Backoff busy_backoff_{std::min(limits_.first_backoff, limits_.max_backoff), limits_.max_backoff};
  unsigned unit_attentions_ = 0;
  unsigned busy_ = 0;
};

}  // namespace iserkit::initiator

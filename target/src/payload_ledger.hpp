// PayloadLedger: the target's two-level payload budget of one connection (target/README.md
// "Limits"): every task buffer (a READ's Data-In source, a WRITE's Data-Out destination) is held
// under a grant of its connection's budget and then of the budget it shares with other connections
// (target-wide, or its tenant's). Used by the connection driver (connection.cpp) and by the target
// engine's fuzzer (tests/fuzz/fuzz_target_engine.cpp), so the rules the fuzzer checks are the ones
// the driver runs.
//
// Pure: no I/O, no Asio, no threads, no clock. THREAD SAFETY: a ledger is not thread-safe; it is
// used on its connection's thread only. The shared level is reached through the SharedLevel port;
// the target's port is a SharedPayloadBudget (payload_budget.hpp), which takes its own mutex, and a
// grant it makes on another connection's thread is posted back to this connection's thread before
// it reaches on_shared_grant().
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "iserkit/iscsi/pdu.hpp"
#include "payload_budget.hpp"

namespace iserkit::target {

/// The payload budget of one connection, at two levels. Bound enforced (bytes): the bytes of
/// the connection's granted holds never exceed `connection_limit_bytes`, and those of every
/// connection sharing a SharedLevel never exceed that level's limit — except that one request
/// larger than a limit is granted once nothing else is held at that level (it runs alone), so no
/// request waits forever. A hold is granted when both levels granted it, in request order at each
/// level (PayloadBudget: first come, first served). Each hold is ended by exactly one release()
/// (SessionEngineHooks::request_budget, ReleaseBudget). Not thread-safe (see the file comment).
class PayloadLedger {
 public:
  /// What SharedLevel::request() answers.
  struct SharedAsk {
    std::uint64_t id = 0;  ///< the request's id at the shared level, for cancel()
    bool granted = false;  ///< granted now; otherwise on_shared_grant() follows later
  };

  /// The budget shared with other connections. Called on the ledger's thread only; an
  /// implementation used by several connections synchronises itself.
  class SharedLevel {
   public:
    virtual ~SharedLevel() = default;
    /// Asks for `bytes` (bytes) for the ledger's hold `hold`. When not granted now, the ledger's
    /// owner calls on_shared_grant(hold) once the bytes are granted — on the ledger's thread, and
    /// never from inside a call of the ledger.
    virtual SharedAsk request(std::uint64_t hold, std::uint64_t bytes) = 0;
    /// Withdraws queued request `shared_id`: true when withdrawn; false when it was granted
    /// already (its on_shared_grant() is on its way).
    virtual bool cancel(std::uint64_t shared_id) = 0;
    /// Gives back `bytes` of a granted request.
    virtual void release(std::uint64_t bytes) = 0;
  };

  /// What release() ended.
  struct Released {
    std::uint64_t bytes = 0;  ///< the hold's size in bytes
    bool granted = false;     ///< it was granted at both levels (else it was withdrawn while waiting)
  };

  /// `connection_limit_bytes`: the connection's budget (0 is treated as 1, as PayloadBudget);
  /// `shared`: the shared level, or null for none. `shared` must outlive the ledger.
  PayloadLedger(std::uint64_t connection_limit_bytes, SharedLevel* shared) noexcept
      : connection_(connection_limit_bytes), shared_(shared) {}

  /// Asks for `bytes` for task `itt` (a task may hold several requests; they end oldest first).
  /// True: granted at both levels now. False: it waits; the ITT is reported later by release()
  /// or on_shared_grant() once granted, or the request is withdrawn by the task's release().
  bool request(iscsi::Itt itt, std::uint64_t bytes);

  /// Ends the oldest outstanding request of task `itt`: gives its bytes back, or withdraws it if it
  /// still waits. Appends to `granted` the ITTs of requests granted at both levels because of it,
  /// in request order. std::nullopt (nothing done) when `itt` has no outstanding request.
  std::optional<Released> release(iscsi::Itt itt, std::vector<iscsi::Itt>& granted);

  /// The shared level granted hold `hold` (SharedLevel::request()'s argument). Returns the ITT
  /// granted at both levels now; std::nullopt when the hold was released meanwhile (the ledger
  /// then gives the bytes back to the shared level itself) or is unknown.
  std::optional<iscsi::Itt> on_shared_grant(std::uint64_t hold);

  /// Bytes held at the connection level now (granted, or waiting for the shared level).
  [[nodiscard]] std::uint64_t connection_used() const noexcept { return connection_.used(); }
  /// The connection's limit in bytes.
  [[nodiscard]] std::uint64_t connection_limit() const noexcept { return connection_.limit(); }
  /// Requests holding bytes at the connection level now (a test of the "runs alone" rule).
  [[nodiscard]] std::size_t connection_holders() const noexcept { return connection_holders_; }
  /// Bytes of the requests granted at both levels now: what task buffers may hold.
  [[nodiscard]] std::uint64_t granted_bytes() const noexcept { return granted_bytes_; }
  /// Requests not ended yet, plus released ones whose shared grant is still on its way.
  [[nodiscard]] std::size_t holds() const noexcept { return holds_.size(); }

 private:
  struct Hold {
    iscsi::Itt itt{0};
    std::uint64_t bytes = 0;
    std::uint64_t shared_id = 0;
    enum class State : std::uint8_t {
      waiting_connection,  ///< queued at the connection level
      waiting_shared,      ///< held at the connection level, queued at the shared level
      granted,             ///< held at both levels
      abandoned,           ///< released while its shared grant was on its way (gives it back)
    } state{};
  };
  using Holds = std::map<std::uint64_t, Hold>;

  /// Hold `it` got the connection level: asks the shared one. True when granted at both.
  bool ask_shared(Holds::iterator it);
  void set_granted(Hold& hold) noexcept;
  std::vector<std::uint64_t>& ids_of(std::uint32_t itt);
  void erase_hold(Holds::iterator it);

  PayloadBudget connection_;
  SharedLevel* shared_;
  Holds holds_;                                                 // by hold id
  std::unordered_map<std::uint32_t, std::vector<std::uint64_t>> ids_by_itt_;  // oldest first
  // Nodes of the two maps above kept for reuse: no allocation per command in steady state.
  static constexpr std::size_t max_spare_nodes = 256;
  std::vector<Holds::node_type> spare_holds_;
  std::vector<decltype(ids_by_itt_)::node_type> spare_ids_;
  std::uint64_t next_id_ = 1;
  std::size_t connection_holders_ = 0;
  std::uint64_t granted_bytes_ = 0;
};

}  // namespace iserkit::target

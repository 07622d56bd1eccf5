// TargetStats and ConnectionStats: the counters behind iserkit-target's --status-socket (JSON) and
// --metrics (Prometheus), target/README.md "Status and metrics". Plain data, no I/O (layer 2
// helpers): the data path bumps relaxed atomics — no lock per command — and the status and metrics
// readers load them from any thread. The one lock (ConnectionStats::identity_mutex) is taken once
// at login by the connection and once per status query or scrape by the reader.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "iserkit/iscsi/pdu.hpp"
#include "iserkit/scsi/opcodes.hpp"
#include "iserkit/scsi/sense.hpp"

namespace iserkit::target {

/// What a SCSI command is counted as: `read` (READ(6/10/12/16)), `write` (WRITE(6/10/12/16), WRITE
/// AND VERIFY, WRITE SAME, COMPARE AND WRITE), everything else `other`.
enum class OpKind : std::uint8_t { read, write, other };
inline constexpr std::size_t op_kind_count = 3;
inline constexpr std::array<const char*, op_kind_count> op_kind_names = {"read", "write", "other"};

/// The kind of the command whose CDB starts with `opcode` (byte 0 of the CDB, SBC-4 §5).
OpKind op_kind(std::uint8_t opcode) noexcept;

/// A Prometheus-style histogram of durations in seconds, fixed buckets, relaxed atomics.
class LatencyHistogram {
 public:
  /// Upper bounds of the buckets in seconds (cumulative; +Inf is implied).
  static constexpr std::array<double, 14> bounds_seconds = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                            0.01,    0.025,  0.05,    0.1,    0.25,   1,     10};
  /// Counts one observation of `d`.
  void observe(std::chrono::nanoseconds d) noexcept;
  /// Observations per bucket (not cumulative; the last is above every bound).
  [[nodiscard]] std::array<std::uint64_t, bounds_seconds.size() + 1> buckets() const noexcept;
  [[nodiscard]] std::uint64_t count() const noexcept { return count_.load(std::memory_order_relaxed); }
  /// Sum of every observation, in seconds.
  [[nodiscard]] double sum_seconds() const noexcept {
    return static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9;
  }

 private:
  std::array<std::atomic<std::uint64_t>, bounds_seconds.size() + 1> buckets_{};
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> sum_ns_{0};
};

/// True for CHECK CONDITION with sense key UNIT ATTENTION (SAM-5 §5.14): counted apart from errors.
inline bool is_unit_attention(scsi::Status status, const std::optional<scsi::SenseData>& sense) noexcept {
  return status == scsi::Status::check_condition && sense && sense->key == scsi::SenseKey::unit_attention;
}

/// Why a login failed (metric label "reason"): from the Login Response status (RFC 7143
/// §11.13.5), plus `timeout` (not complete within the login timeout), `throttled` (0x0301 because
/// the source address failed too often, login_throttle.hpp) and `not_login` (the first PDU was
/// not a Login Request).
enum class LoginFailure : std::uint8_t {
  authentication,        ///< 0x0201
  authorization,         ///< 0x0202 (the target's ACL)
  target_not_found,      ///< 0x0203
  target_removed,        ///< 0x0204
  unsupported_version,   ///< 0x0205
  too_many_connections,  ///< 0x0206
  missing_parameter,     ///< 0x0207
  session_type,          ///< 0x0208, 0x0209
  session_not_found,     ///< 0x020a
  invalid_request,       ///< 0x0200, 0x020b and other initiator errors
  service_unavailable,   ///< 0x0301 (e.g. the reinstated session did not end in time)
  out_of_resources,      ///< 0x0302 (e.g. a tenant's session cap)
  target_error,          ///< 0x0300 and other target errors
  throttled,
  timeout,
  not_login,
};
inline constexpr std::size_t login_failure_count = 16;
/// The label of each LoginFailure, in enum order.
extern const std::array<const char*, login_failure_count> login_failure_names;
/// The reason of a Login Response with status `status_class`/`status_detail` (class != 0).
LoginFailure login_failure_of(std::uint8_t status_class, std::uint8_t status_detail) noexcept;

/// Counters of the whole target (every connection, every thread). Relaxed atomics.
struct TargetStats {
  std::array<std::atomic<std::uint64_t>, op_kind_count> commands{};  ///< SCSI commands executed, by kind
  /// Payload bytes moved by commands that ended GOOD: Data-In for reads, Data-Out for writes.
  std::array<std::atomic<std::uint64_t>, op_kind_count> bytes{};
  /// Time from a command reaching the device server (its Data-Out received) to its outcome.
  std::array<LatencyHistogram, op_kind_count> latency{};
  /// CHECK CONDITION responses by sense key (index = SPC-5 sense key 0..15), but for UNIT
  /// ATTENTION: counted apart (unit_attentions), the target's news rather than an error.
  std::array<std::atomic<std::uint64_t>, 16> sense_keys{};
  std::atomic<std::uint64_t> unit_attentions{0};  ///< CHECK CONDITION with UNIT ATTENTION (SAM-5 §5.14)
  std::atomic<std::uint64_t> busy{0};                  ///< BUSY / TASK SET FULL responses
  std::atomic<std::uint64_t> reservation_conflicts{0};  ///< RESERVATION CONFLICT responses
  /// Reject PDUs sent, by reason code (RFC 7143 §11.17.1; index = the code, 0..15).
  std::array<std::atomic<std::uint64_t>, 16> rejects{};
  /// Task Management Function Requests received, by function (RFC 7143 §11.5.1; index 1..8).
  std::array<std::atomic<std::uint64_t>, 16> task_management{};
  std::array<std::atomic<std::uint64_t>, login_failure_count> login_failures{};  ///< by LoginFailure
  std::atomic<std::uint64_t> logins{0};  ///< logins that reached the full-feature phase
  /// READ Data-In bytes handed to the socket by splice from the page cache, never through a
  /// user-space buffer (data_in_pipes.hpp).
  std::atomic<std::uint64_t> spliced_data_in_bytes{0};

  /// Counts the response status of one SCSI command (GOOD is not counted; UNIT ATTENTION goes to
  /// unit_attentions, not to sense_keys).
  void count_status(scsi::Status status, const std::optional<scsi::SenseData>& sense) noexcept;
  void count_reject(iscsi::RejectReason reason) noexcept {
    rejects[static_cast<std::size_t>(reason) & 15].fetch_add(1, std::memory_order_relaxed);
  }
  void count_task_management(iscsi::TaskManagementFunction f) noexcept {
    task_management[static_cast<std::size_t>(f) & 15].fetch_add(1, std::memory_order_relaxed);
  }
  void count_login_failure(LoginFailure why) noexcept {
    login_failures[static_cast<std::size_t>(why)].fetch_add(1, std::memory_order_relaxed);
  }
};

/// One connection (= one session at MaxConnections=1) as the status shows it. The identity is
/// written once, at the end of login; the counters by the connection's thread.
struct ConnectionStats {
  struct Identity {
    bool logged_in = false;
    bool discovery = false;
    std::string initiator;  ///< InitiatorName
    std::string isid;       ///< ISID, 12 hex digits
    std::uint16_t tsih = 0;
    std::uint16_t cid = 0;
    std::string target;  ///< TargetName ("" for discovery)
    std::string since;   ///< UTC, ISO 8601: when the login completed
  };
  // Set at construction, never changed.
  std::string peer;       ///< the initiator's address:port
  std::string portal;     ///< the local address:port
  std::string transport;  ///< "tcp" or "iser"
  std::string tenant;     ///< the portal's tenant; "" = none

  mutable std::mutex identity_mutex;
  Identity identity;  ///< guarded by identity_mutex

  std::array<std::atomic<std::uint64_t>, op_kind_count> commands{};
  std::array<std::atomic<std::uint64_t>, op_kind_count> bytes{};
  std::atomic<std::uint64_t> errors{0};               ///< responses other than GOOD and UNIT ATTENTION
  std::atomic<std::uint64_t> unit_attentions{0};      ///< CHECK CONDITION with UNIT ATTENTION
  std::atomic<std::uint64_t> payload_budget_bytes{0};  ///< payload bytes held now (connection budget)

  /// A copy of the identity (takes identity_mutex).
  [[nodiscard]] Identity snapshot() const {
    std::lock_guard lock(identity_mutex);
    return identity;
  }
};

}  // namespace iserkit::target

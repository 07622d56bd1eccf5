// TargetStats helpers (target_stats.hpp).
#include "target_stats.hpp"

#include <algorithm>

namespace iserkit::target {

OpKind op_kind(std::uint8_t opcode) noexcept {
  switch (opcode) {
    case 0x08: case 0x28: case 0xa8: case 0x88:  // READ(6/10/12/16)
      return OpKind::read;
    case 0x0a: case 0x2a: case 0xaa: case 0x8a:  // WRITE(6/10/12/16)
    case 0x2e: case 0xae: case 0x8e:             // WRITE AND VERIFY(10/12/16)
    case 0x41: case 0x93:                        // WRITE SAME(10/16)
    case 0x89:                                   // COMPARE AND WRITE
      return OpKind::write;
    default:
      return OpKind::other;
  }
}

void LatencyHistogram::observe(std::chrono::nanoseconds d) noexcept {
  const double seconds = static_cast<double>(d.count()) / 1e9;
  const auto bucket = static_cast<std::size_t>(
      std::lower_bound(bounds_seconds.begin(), bounds_seconds.end(), seconds) - bounds_seconds.begin());
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<std::uint64_t>(std::max<std::int64_t>(0, d.count())), std::memory_order_relaxed);
}

std::array<std::uint64_t, LatencyHistogram::bounds_seconds.size() + 1> LatencyHistogram::buckets() const noexcept {
  std::array<std::uint64_t, bounds_seconds.size() + 1> out{};
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = buckets_[i].load(std::memory_order_relaxed);
  return out;
}

const std::array<const char*, login_failure_count> login_failure_names = {
    "authentication",   "authorization",     "target_not_found",    "target_removed",
    "unsupported_version", "too_many_connections", "missing_parameter", "session_type",
    "session_not_found", "invalid_request",   "service_unavailable", "out_of_resources",
    "target_error",     "throttled",         "timeout",             "not_login"};

LoginFailure login_failure_of(std::uint8_t status_class, std::uint8_t status_detail) noexcept {
  if (status_class == 0x02) {
    switch (status_detail) {
      case 0x01: return LoginFailure::authentication;
      case 0x02: return LoginFailure::authorization;
      case 0x03: return LoginFailure::target_not_found;
      case 0x04: return LoginFailure::target_removed;
      case 0x05: return LoginFailure::unsupported_version;
      case 0x06: return LoginFailure::too_many_connections;
      case 0x07: return LoginFailure::missing_parameter;
      case 0x08: case 0x09: return LoginFailure::session_type;
      case 0x0a: return LoginFailure::session_not_found;
      default: return LoginFailure::invalid_request;
    }
  }
  if (status_class == 0x03) {
    if (status_detail == 0x01) return LoginFailure::service_unavailable;
    if (status_detail == 0x02) return LoginFailure::out_of_resources;
  }
  return LoginFailure::target_error;
}

void TargetStats::count_status(scsi::Status status, const std::optional<scsi::SenseData>& sense) noexcept {
  switch (status) {
    case scsi::Status::good:
    case scsi::Status::condition_met:
      return;
    case scsi::Status::busy:
    case scsi::Status::task_set_full:
      busy.fetch_add(1, std::memory_order_relaxed);
      return;
    case scsi::Status::reservation_conflict:
      reservation_conflicts.fetch_add(1, std::memory_order_relaxed);
      return;
    default:
      if (is_unit_attention(status, sense)) {
        unit_attentions.fetch_add(1, std::memory_order_relaxed);
      } else if (sense) {
        sense_keys[static_cast<std::size_t>(sense->key) & 15].fetch_add(1, std::memory_order_relaxed);
      }
      return;
  }
}

}  // namespace iserkit::target

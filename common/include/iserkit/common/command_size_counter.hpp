// The largest-command counter: the largest data transfer (bytes of a SCSI command's Data-In or
// Data-Out, i.e. its transfer length in bytes, not logical blocks) a process has carried, one figure per
// transport (iSCSI/TCP and iSER). iserkit-target records every command it executes and prints the
// figures at exit, so a test can prove that commands above a size (iSER: 512 KiB, ib_iser's default
// max_sectors) really arrived over a transport, not only that the data was right. One relaxed
// atomic compare-exchange loop per command. Layer 0.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace iserkit {

/// Which transport carried a command (the counter's index).
enum class CommandTransport : std::uint8_t { tcp = 0, iser = 1 };

namespace detail {
inline std::atomic<std::uint64_t>& largest_command_counter(CommandTransport t) noexcept {
  static std::atomic<std::uint64_t> counters[2]{};
  return counters[static_cast<std::size_t>(t) & 1u];
}
}  // namespace detail

/// Records a command that moved `bytes` bytes of payload (its transfer length in bytes) over `t`.
/// Thread-safe; keeps the maximum.
inline void note_command_bytes(CommandTransport t, std::uint64_t bytes) noexcept {
  auto& c = detail::largest_command_counter(t);
  std::uint64_t seen = c.load(std::memory_order_relaxed);
  while (bytes > seen && !c.compare_exchange_weak(seen, bytes, std::memory_order_relaxed)) {
  }
}

/// The largest transfer length in bytes recorded over `t` so far (0: none).
inline std::uint64_t largest_command_bytes(CommandTransport t) noexcept {
  return detail::largest_command_counter(t).load(std::memory_order_relaxed);
}

}  // namespace iserkit

// The payload copy counter: bytes of SCSI payload (block data) that iserkit's own code copied in
// user space on the data path. Every such copy goes through copy_payload() (or calls
// count_payload_copy() beside its memcpy), so a test can assert "0 bytes copied" for a transfer.
// Kernel copies (socket read/write) are not ours and are not counted. Control data (text keys,
// sense data, PDU headers) is not payload and is not counted.
//
// Compiled in when ISERKIT_COPY_COUNTER is defined (the root CMake's option, ON by default): one
// relaxed atomic add per copy, nothing else. Without it the functions do nothing and the counter
// reads 0. Layer 0.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace iserkit {

namespace detail {
inline std::atomic<std::uint64_t>& payload_copy_counter() noexcept {
  static std::atomic<std::uint64_t> counter{0};
  return counter;
}
}  // namespace detail

/// True when the counter is compiled in.
inline constexpr bool copy_counter_enabled =
#ifdef ISERKIT_COPY_COUNTER
    true;
#else
    false;
#endif

/// Records that `bytes` bytes of payload were copied. Thread-safe.
inline void count_payload_copy(std::size_t bytes) noexcept {
#ifdef ISERKIT_COPY_COUNTER
  detail::payload_copy_counter().fetch_add(bytes, std::memory_order_relaxed);
#else
  (void)bytes;
#endif
}

/// memcpy of `bytes` bytes of payload, counted.
inline void copy_payload(void* dest, const void* src, std::size_t bytes) noexcept {
  if (bytes == 0) return;
  std::memcpy(dest, src, bytes);
  count_payload_copy(bytes);
}

/// Bytes of payload copied by this process so far (0 when the counter is compiled out).
inline std::uint64_t copied_payload_bytes() noexcept {
  return detail::payload_copy_counter().load(std::memory_order_relaxed);
}

}  // namespace iserkit

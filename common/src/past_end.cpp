// Words for a request past the end of a logical unit (see past_end.hpp).
#include "iserkit/common/past_end.hpp"

namespace iserkit {

std::string past_end_text(std::string_view operation, std::uint64_t offset_bytes, std::uint64_t length_bytes,
                          std::uint64_t capacity_bytes) {
  return std::string(operation) + " past the end: offset+length > capacity " + std::to_string(capacity_bytes) +
         " bytes (offset " + std::to_string(offset_bytes) + " + length " + std::to_string(length_bytes) + ")";
}

std::string past_end_next_step(std::uint64_t offset_bytes, std::uint64_t capacity_bytes) {
  if (offset_bytes >= capacity_bytes) {
    if (capacity_bytes == 0) return "the LUN holds no bytes";
    return "offsets go up to " + std::to_string(capacity_bytes - 1);
  }
  return "at most " + std::to_string(capacity_bytes - offset_bytes) + " bytes fit from offset " +
         std::to_string(offset_bytes);
}

}  // namespace iserkit

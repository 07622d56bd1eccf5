// The words for a request that reaches past the end of a logical unit, shared by the initiator's
// diagnosis (iserkit, iserkit-fuse: initiator/diagnosis.hpp) and the NBD server (iserkit-nbd),
// which refuses such requests before they reach the initiator. Error paths only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace iserkit {

/// "<operation> past the end: offset+length > capacity N bytes", e.g. operation "write".
/// Units: bytes.
std::string past_end_text(std::string_view operation, std::uint64_t offset_bytes, std::uint64_t length_bytes,
                          std::uint64_t capacity_bytes);

/// What fits: "at most R bytes fit from offset O" or, for an offset at or past the end, "offsets
/// go up to N-1". Units: bytes.
std::string past_end_next_step(std::uint64_t offset_bytes, std::uint64_t capacity_bytes);

}  // namespace iserkit

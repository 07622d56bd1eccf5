// `iserkit copy SRC-URL DST-URL`: the copy itself, as one coroutine on the CLI's io_context. It
// logs in (one session when both URLs name the same target, else one per target, both with the
// same initiator name), opens both LUNs, checks the ranges, and copies either with EXTENDED COPY
// (LID1, SPC-4 §6.4; initiator/copy.hpp) — the target moves the data, nothing crosses the network
// but the commands — or with READ + WRITE through a buffer from the source session's pool
// (registered memory on iSER). Method `automatic` probes EXTENDED COPY (3PC, VPD 0x8f, NAA
// designators) and runs its first command; a probe that says no or a first command the copy
// manager declines (initiator::extended_copy_refused()) falls back to READ + WRITE with the
// reason recorded. A failure after data moved is not retried another way: the outcome says how
// far the copy got. Reporting (words, JSON, exit status) is the CLI's (iserkit_cli.cpp). Layer 6.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <system_error>

#include "iserkit/common/asio.hpp"
#include "iserkit/initiator/options.hpp"
#include "iserkit/initiator/url.hpp"

namespace iserkit::cli {

/// `--method`: how to copy.
enum class CopyMethod {
  automatic,   ///< EXTENDED COPY when the target offers it for these LUNs, else READ + WRITE
  xcopy,       ///< EXTENDED COPY only; fail when it cannot be used
  read_write,  ///< READ + WRITE through the initiator
};

/// What `iserkit copy` was asked to do. Offsets and lengths in bytes.
struct CopyArguments {
  initiator::Url source;
  initiator::Url destination;
  std::uint64_t source_offset_bytes = 0;
  std::optional<std::uint64_t> length_bytes;  ///< nullopt: to the end of the source
  std::uint64_t destination_offset_bytes = 0;
  CopyMethod method = CopyMethod::automatic;
  /// Bytes one EXTENDED COPY moves at most (also within the target's VPD 0x8f limits).
  std::uint64_t xcopy_command_bytes = 64u << 20;
  /// Bytes one READ/WRITE pair moves in the READ + WRITE method.
  std::size_t read_write_chunk_bytes = 4u << 20;
};

/// Where the copy stopped.
enum class CopyStage {
  login_source,       ///< Session::connect to the source's target failed
  open_source,        ///< LunHandle::open of the source LUN failed
  login_destination,  ///< … of the destination's target
  open_destination,
  source_range,       ///< the range passes the end of the source (nothing copied)
  destination_range,  ///< the range passes the end of the destination (nothing copied)
  unusable_xcopy,     ///< --method xcopy, and EXTENDED COPY cannot be used (nothing copied)
  copy,               ///< a command of the copy failed (copied_bytes says how far it got)
  flush,              ///< SYNCHRONIZE CACHE of the destination failed after the copy
  done,               ///< success
};

/// How the copy went.
struct CopyOutcome {
  CopyStage stage = CopyStage::login_source;
  std::error_code error;           ///< empty when stage == done (and for unusable_xcopy)
  std::string failed_command;      ///< "EXTENDED COPY", "READ", "WRITE", "SYNCHRONIZE CACHE" at stage copy/flush
  std::string method;              ///< "xcopy" or "read-write": the method that moved (or was moving) the data
  std::string fallback_reason;     ///< why EXTENDED COPY was not used (empty when it was, or not tried)
  std::uint64_t source_capacity_bytes = 0;
  std::uint64_t destination_capacity_bytes = 0;
  std::uint32_t block_size_bytes = 0;  ///< the source's
  std::uint64_t length_bytes = 0;      ///< bytes to copy (resolved)
  std::uint64_t copied_bytes = 0;      ///< bytes known copied, from the start of the range
  std::uint64_t commands = 0;          ///< EXTENDED COPY or READ + WRITE commands that completed
  std::uint64_t xcopy_command_max_bytes = 0;  ///< bytes per EXTENDED COPY used (0 when not used)
  /// Payload bytes the sessions moved over the network (Data-In placed + Data-Out sent, every
  /// command including the probes): about 0 for EXTENDED COPY, twice the length for READ + WRITE.
  std::uint64_t network_payload_bytes = 0;
  bool one_session = false;  ///< both LUNs were reached through one session
};

/// Runs the copy on `ex` (both sessions live there). `progress` hears (bytes copied so far, bytes
/// to copy): once with 0 when the copy starts, then after each command (on `ex`'s thread). Never
/// throws; every failure is in the outcome.
Awaitable<CopyOutcome> run_copy(asio::any_io_executor ex, CopyArguments args, initiator::SessionOptions options,
                                std::function<void(std::uint64_t, std::uint64_t)> progress);

}  // namespace iserkit::cli

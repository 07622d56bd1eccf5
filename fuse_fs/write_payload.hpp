// Where WRITE payload comes from in the FUSE view: the --splice-writes policy (fuse_fs/README.md
// "Write payload"). Splicing requests from /dev/fuse (FUSE_CAP_SPLICE_READ) lets a WRITE's payload
// be read(2) straight into a session-pool buffer — registered memory on iSER, so no bounce copy —
// but costs a system call per request (and a kernel copy for O_DIRECT writes) and buys nothing
// over TCP. libfuse decides it once per mount, at init, before any session exists, so "auto"
// decides from the portal URLs: splice when some session may run over iSER. Pure; no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "iserkit/initiator/options.hpp"
#include "iserkit/initiator/url.hpp"

namespace iserkit::fuse_fs {

/// The --splice-writes policy.
enum class SpliceWrites : std::uint8_t {
  never,      ///< libfuse reads every request into its own buffer; WRITEs go from there
  always,     ///< splice every request; WRITE payload of a page or more goes into session-pool buffers
  automatic,  ///< splice when some portal's session may run over iSER (see splice_wanted())
};

/// Parses a --splice-writes value: "never", "always" or "auto" (exactly, lower case); nullopt for
/// anything else.
std::optional<SpliceWrites> parse_splice_writes(std::string_view text) noexcept;

/// The policy's name as --splice-writes takes it ("never", "always", "auto").
std::string_view to_string(SpliceWrites mode) noexcept;

/// Whether a mount of `portals`, logging in with transport `policy`, asks libfuse to splice:
/// always → true; never → false; automatic → true when select_transports() names iSER for at
/// least one of the URLs (an iser:// URL, or a policy that tries iSER), else false (all TCP).
bool splice_wanted(SpliceWrites mode, const std::vector<initiator::Url>& portals,
                   initiator::TransportPolicy policy);

}  // namespace iserkit::fuse_fs

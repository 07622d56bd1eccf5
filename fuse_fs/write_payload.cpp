// The --splice-writes policy (write_payload.hpp; fuse_fs/README.md "Write payload").
#include "fuse_fs/write_payload.hpp"

#include <algorithm>

#include "iserkit/initiator/session.hpp"

namespace iserkit::fuse_fs {

std::optional<SpliceWrites> parse_splice_writes(std::string_view text) noexcept {
  if (text == "never") return SpliceWrites::never;
  if (text == "always") return SpliceWrites::always;
  if (text == "auto") return SpliceWrites::automatic;
  return std::nullopt;
}

std::string_view to_string(SpliceWrites mode) noexcept {
  switch (mode) {
    case SpliceWrites::never: return "never";
    case SpliceWrites::always: return "always";
    case SpliceWrites::automatic: return "auto";
  }
  return "auto";
}

bool splice_wanted(SpliceWrites mode, const std::vector<initiator::Url>& portals, initiator::TransportPolicy policy) {
  switch (mode) {
    case SpliceWrites::never: return false;
    case SpliceWrites::always: return true;
    case SpliceWrites::automatic: break;
  }
  // Over TCP a write from libfuse's own buffer costs no copy of ours; only iSER needs registered
  // memory, and libfuse must be told at init, for the whole mount.
  return std::any_of(portals.begin(), portals.end(), [policy](const initiator::Url& url) {
    const auto wires = initiator::select_transports(url, policy);
    return std::find(wires.begin(), wires.end(), datamover::Transport::iser) != wires.end();
  });
}

}  // namespace iserkit::fuse_fs

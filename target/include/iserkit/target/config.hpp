// Target configuration (layer 6 front end): what iserkit-target's flags describe — portals, target
// nodes, LUNs, negotiation limits — and the parsers for the flag syntaxes. Portals are TCP
// (RFC 7143 §4.2.6 network portals); names follow RFC 7143 §4.2.7 (iqn. format).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "iserkit/common/result.hpp"

namespace iserkit::target {

/// A TCP address to listen on.
struct ListenAddress {
  std::string host;          ///< numeric IPv4/IPv6 address or host name, without brackets
  std::uint16_t port = 3260; ///< 0 = any free port
};

/// Parses "HOST:PORT", "[V6]:PORT", "HOST" or "[V6]" (port 3260 when absent; 0 allowed).
/// Errors: errc::invalid_argument for an empty host, a bad port or unbalanced brackets.
Result<ListenAddress> parse_listen_address(std::string_view text);

/// Parses a size with an optional binary suffix: "4096", "64K", "64M", "2G", "1T" (also "64MiB",
/// "64MB" meaning the same binary units). Returns bytes.
/// Errors: errc::invalid_argument for anything else or 0.
Result<std::uint64_t> parse_size(std::string_view text);

/// One LUN's source as given to --lun.
struct LunSource {
  bool memory = false;           ///< "mem:SIZE": a sparse in-memory LUN
  std::uint64_t size_bytes = 0;  ///< memory LUNs only
  std::filesystem::path path;    ///< a regular file or block device (must exist)
};

/// Parses a --lun value: "mem:SIZE" or a path. Errors: errc::invalid_argument for a bad size.
Result<LunSource> parse_lun_source(std::string_view text);

/// Everything iserkit-target needs to start.
struct TargetConfig {
  std::string iqn = "iqn.2026-11.org.iserkit:target";  ///< target name, or the base name with export_dir
  std::string alias = "iserkit";                       ///< TargetAlias (RFC 7143 §13.6)
  std::vector<ListenAddress> listen;                   ///< empty = 0.0.0.0:3260
  std::vector<LunSource> luns;                         ///< LUNs of target `iqn`, lun0, lun1, … in order
  /// Each subdirectory is a target "<iqn>:<name>"; each regular file or block device in it a LUN,
  /// sorted by name (lun0, lun1, …).
  std::optional<std::filesystem::path> export_dir;
  bool read_only = false;
  std::uint32_t block_size_bytes = 512;  ///< 512 or 4096
  unsigned threads = 1;                  ///< I/O threads, each with its own io_context
  // Negotiation (RFC 7143 §13): what the target offers or accepts. Bytes unless noted.
  std::uint32_t max_recv_data_segment_length = 262144;
  std::uint32_t first_burst_length = 262144;
  std::uint32_t max_burst_length = 4u << 20;
  std::uint32_t max_outstanding_r2t = 8;  ///< count
  std::uint32_t cmd_window_depth = 128;   ///< commands outstanding per session
  /// Also serve iSER (RFC 7145) on every listen address (an RDMA CM listener on the same address
  /// and port) when iserkit was built with iSER and the host has an RDMA device.
  bool iser = true;
};

}  // namespace iserkit::target

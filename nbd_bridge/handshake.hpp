// Server side of the NBD fixed-newstyle handshake (option haggling), layer 6: sends the greeting,
// checks the client flags, answers NBD_OPT_EXPORT_NAME, ABORT, LIST, INFO, GO, STRUCTURED_REPLY and
// LIST/SET_META_CONTEXT (`base:allocation` only), STARTTLS (when TLS is on: the stream turns to TLS
// and the option haggling goes on inside it), and NBD_REP_ERR_UNSUP for everything else, until the
// client enters transmission or leaves.
// Oldstyle negotiation is never offered.
// Spec: NBD proto.md "Newstyle negotiation", "Fixed newstyle negotiation", "Termination of the
// session during option haggling", "Option types", "Option reply types", "Size constraints",
// "Metadata querying", "TLS support", "NBD_OPT_STARTTLS".
#pragma once

#include <cstddef>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/result.hpp"
#include "nbd_bridge/export.hpp"
#include "nbd_bridge/protocol.hpp"
#include "nbd_bridge/request_check.hpp"
#include "nbd_bridge/stream.hpp"
#include "nbd_bridge/tls.hpp"

namespace iserkit::nbd {

/// Server policy for the handshake.
struct HandshakeOptions {
  bool force_read_only = false;              ///< advertise NBD_FLAG_READ_ONLY whatever the export says
  std::uint32_t max_payload_cap_bytes = 32u << 20;  ///< upper bound on the advertised maximum payload
  std::size_t max_options = 256;             ///< options accepted before the server gives up (DoS guard)
  std::size_t max_option_bytes = 64 * 1024;  ///< longer option data ⇒ hard disconnect (DoS guard)
  TlsMode tls_mode = TlsMode::off;           ///< whether NBD_OPT_STARTTLS is accepted or required
  std::shared_ptr<const TlsContext> tls;     ///< the credentials; set whenever tls_mode is not off
  /// The whole handshake (greeting, option haggling, a TLS handshake) must end within this of the
  /// accept, else the connection is closed (qemu-nbd's --handshake-limit); zero: no limit. Without
  /// it a client that connects and says nothing holds one of Server's max_connections for good.
  std::chrono::milliseconds limit{10000};
};

/// What the server does with an option before acting on it, given the TLS policy.
enum class TlsGate {
  proceed,       ///< handle the option
  tls_required,  ///< answer NBD_REP_ERR_TLS_REQD and read the next option
  disconnect,    ///< NBD_OPT_EXPORT_NAME before TLS under `require`: no error reply exists, so close
};

/// The gate for `option` (proto.md "TLS support", FORCEDTLS): under TlsMode::require and before TLS
/// is on, every option other than NBD_OPT_STARTTLS and NBD_OPT_ABORT is refused with
/// NBD_REP_ERR_TLS_REQD, and NBD_OPT_EXPORT_NAME ends the session; otherwise proceed.
TlsGate tls_gate(std::uint32_t option, TlsMode mode, bool tls_active) noexcept;

/// The answer to NBD_OPT_STARTTLS carrying `data_bytes` of option data (proto.md NBD_OPT_STARTTLS):
/// NBD_REP_ERR_UNSUP when TLS is off; NBD_REP_ERR_INVALID with data or when TLS is already on;
/// otherwise NBD_REP_ACK (the TLS handshake follows at once).
OptionReply starttls_reply(TlsMode mode, bool tls_active, std::size_t data_bytes) noexcept;

/// What the handshake agreed on; the transmission phase runs with it.
struct Negotiated {
  TransmissionParams params;
  BlockSize block_size;       ///< as advertised (or the defaults when the client did not ask)
  bool used_export_name = false;  ///< entered transmission through NBD_OPT_EXPORT_NAME (not GO)
};

/// The transmission flags for `info` (proto.md "Transmission flags"): HAS_FLAGS always; READ_ONLY when
/// the export or the server says so; SEND_FLUSH/FUA/TRIM/WRITE_ZEROES/CAN_MULTI_CONN from the
/// capabilities (TRIM and WRITE_ZEROES only when writable); SEND_DF when structured replies were
/// negotiated (this server always sends READ data in one chunk).
std::uint16_t transmission_flags_for(const ExportInfo& info, bool force_read_only, bool structured_replies) noexcept;

/// The NBD_INFO_BLOCK_SIZE values for `info`, with the maximum payload capped at `cap_bytes` and the
/// preferred size kept ≤ the maximum (proto.md "Size constraints").
BlockSize block_size_for(const ExportInfo& info, std::uint32_t cap_bytes) noexcept;

/// Runs the server side of the handshake on `stream` (which NBD_OPT_STARTTLS turns to TLS).
///
/// Returns the negotiated parameters once the client has entered the transmission phase
/// (NBD_OPT_GO acknowledged, or NBD_OPT_EXPORT_NAME answered). Errors — in every case the caller
/// closes the connection:
/// - errc::connection_closed: the client sent NBD_OPT_ABORT (answered with NBD_REP_ACK) or closed;
/// - errc::nbd_protocol_error: bad option magic, unknown client flags, an oversize option, too many
///   options, or NBD_OPT_EXPORT_NAME for an unknown export or before TLS under TlsMode::require
///   (proto.md: the server MUST then terminate);
/// - Stream::start_tls() errors: the TLS handshake timed out or failed (bad certificate or PSK);
/// - any socket error.
/// Export names accepted: "" (the default export) and info.name.
/// Executor: runs on the socket's executor; `stream` and `info` must outlive the awaitable.
Awaitable<Result<Negotiated>> run_server_handshake(Stream& stream, const ExportInfo& info,
                                                   const HandshakeOptions& options);

}  // namespace iserkit::nbd

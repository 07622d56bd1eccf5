// TLS for the NBD server (layer 6) with GnuTLS: X.509 certificates or pre-shared keys, as qemu-nbd
// and nbdkit offer them (`--tls=off|on|require`, `--tls-certificates DIR`, `--tls-psk FILE`,
// `--tls-verify-peer`). TlsContext holds the credentials (loaded once at start, shared by every
// connection); TlsSession is one connection's GnuTLS session over the non-blocking socket, driven
// by Asio readiness waits (GnuTLS pushes and pulls on the descriptor itself).
// Spec: NBD proto.md "TLS support", "NBD_OPT_STARTTLS"; RFC 8446 (TLS 1.3), RFC 4279 (TLS-PSK);
// psktool(1) for the key file format (`username:hexkey`, one a line).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

#include "nbd_bridge/stream.hpp"

namespace iserkit::nbd {

/// Whether and how TLS is offered (names as in qemu-nbd / nbdkit `--tls`). `require` is proto.md's
/// FORCEDTLS; `on` lets each client choose (SELECTIVETLS with no export that needs TLS).
enum class TlsMode {
  off,      ///< NBD_OPT_STARTTLS gets NBD_REP_ERR_UNSUP
  on,       ///< STARTTLS accepted; plain-text clients are served too
  require,  ///< every option but STARTTLS and ABORT gets NBD_REP_ERR_TLS_REQD until TLS is on
};

/// Parses "off", "on" or "require"; nullopt otherwise.
std::optional<TlsMode> parse_tls_mode(std::string_view text) noexcept;

/// Where the credentials come from. Exactly one of certificates_dir and psk_file is set when the
/// mode is not off.
struct TlsSettings {
  TlsMode mode = TlsMode::off;
  /// X.509: DIR/server-cert.pem and DIR/server-key.pem (required), DIR/ca-cert.pem (required with
  /// verify_peer: the CA the client certificates must chain to) — qemu's and nbdkit's names.
  std::string certificates_dir;
  std::string psk_file;       ///< TLS-PSK: psktool's `username:hexkey` lines
  bool verify_peer = false;   ///< X.509 only: require a client certificate signed by ca-cert.pem
  /// A TLS handshake that has not finished this long after NBD_OPT_STARTTLS was acknowledged is
  /// abandoned and the connection closed (a stalled or slow peer holds nothing longer).
  std::chrono::milliseconds handshake_timeout{10000};
};

/// One entry of a PSK file.
struct PskEntry {
  std::string username;        ///< the PSK identity the client presents
  std::vector<std::byte> key;  ///< the key bytes (hex-decoded)
};

/// Parses a psktool key file: one `username:hexkey` a line (empty lines and lines starting with
/// '#' are skipped). Errors (a message naming the line): no ':', an empty username, a key that is
/// empty, of odd length or not hexadecimal, a username given twice, no entry at all.
tl::expected<std::vector<PskEntry>, std::string> parse_psk_file(std::string_view text);

/// Loaded credentials, shared by every connection. Thread-safe after create().
class TlsContext {
 public:
  /// Loads the credentials `settings` names. Errors: a message naming the file and GnuTLS's reason
  /// (missing or unreadable file, a key that does not match the certificate, a bad PSK line), or
  /// that neither or both of certificates_dir and psk_file are set.
  static tl::expected<std::shared_ptr<TlsContext>, std::string> create(const TlsSettings& settings);

  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;
  ~TlsContext();

  [[nodiscard]] const TlsSettings& settings() const noexcept { return settings_; }

  /// The PSK identities of the key file, in the file's order (empty with X.509).
  [[nodiscard]] const std::vector<std::string>& psk_identities() const noexcept { return psk_identities_; }

  struct Credentials;  // GnuTLS handles (tls.cpp)
  [[nodiscard]] const Credentials& credentials() const noexcept { return *credentials_; }

 private:
  TlsContext(TlsSettings settings, std::unique_ptr<Credentials> credentials);
  TlsSettings settings_;
  std::unique_ptr<Credentials> credentials_;
  std::vector<std::string> psk_identities_;
};

/// One connection's TLS session (server side). Created by handshake(); used through Stream.
/// Executor: the socket's; at most one read and one write outstanding at once.
class TlsSession {
 public:
  /// Runs the server handshake on `socket` (made non-blocking), bounded by the context's handshake
  /// timeout. Errors as Stream::start_tls().
  static Awaitable<Result<std::unique_ptr<TlsSession>>> handshake(Socket& socket, const TlsContext& context);

  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;
  ~TlsSession();

  /// Reads exactly out.size() plaintext bytes. Errors as Stream::read_exact().
  Awaitable<boost::system::error_code> read_exact(Socket& socket, ByteSpan out);
  /// Writes every byte of `buffers` as TLS records (small buffers are gathered into one record of
  /// up to 16 KiB; larger ones go to GnuTLS in place). Errors as Stream::write_all().
  Awaitable<boost::system::error_code> write_all(Socket& socket, std::span<const asio::const_buffer> buffers);
  /// Sends a close_notify alert if the socket takes it at once; never waits.
  void bye() noexcept;

  struct Impl;

 private:
  explicit TlsSession(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace iserkit::nbd

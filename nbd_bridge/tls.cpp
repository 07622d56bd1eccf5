// GnuTLS server sessions for the NBD bridge (see tls.hpp).
// Spec: NBD proto.md "TLS support"; RFC 8446; RFC 4279; psktool(1) key file format.
#include "nbd_bridge/tls.hpp"

#include <gnutls/gnutls.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"

namespace iserkit::nbd {
namespace {

/// The largest plaintext of one TLS record (RFC 8446 §5.1).
constexpr std::size_t max_record_bytes = 16 * 1024;

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// GnuTLS pushes and pulls on the descriptor itself; MSG_NOSIGNAL keeps a closed peer from
/// raising SIGPIPE in programs that do not ignore it.
ssize_t push(gnutls_transport_ptr_t fd, const void* data, std::size_t size) {
  return ::send(static_cast<int>(reinterpret_cast<std::intptr_t>(fd)), data, size, MSG_NOSIGNAL);
}
ssize_t pull(gnutls_transport_ptr_t fd, void* data, std::size_t size) {
  return ::recv(static_cast<int>(reinterpret_cast<std::intptr_t>(fd)), data, size, 0);
}

/// A GnuTLS failure as the Asio error the transmission loop understands (see Stream).
boost::system::error_code asio_error(int rc, const char* what) {
  if (rc == 0 || rc == GNUTLS_E_PREMATURE_TERMINATION) return asio::error::eof;
  if (rc == GNUTLS_E_PUSH_ERROR || rc == GNUTLS_E_PULL_ERROR) return asio::error::connection_reset;
  log::info("nbd: tls: {}: {}", what, gnutls_strerror(rc));
  return asio::error::connection_aborted;
}

/// Waits until the socket is ready in the direction GnuTLS was blocked on.
Awaitable<boost::system::error_code> wait_ready(Socket& socket, gnutls_session_t session) {
  boost::system::error_code ec;
  const auto direction = gnutls_record_get_direction(session) == 1 ? Socket::wait_write : Socket::wait_read;
  co_await socket.async_wait(direction, use_awaitable_ec(ec));
  co_return ec;
}

}  // namespace

std::optional<TlsMode> parse_tls_mode(std::string_view text) noexcept {
  if (text == "off") return TlsMode::off;
  if (text == "on") return TlsMode::on;
  if (text == "require") return TlsMode::require;
  return std::nullopt;
}

tl::expected<std::vector<PskEntry>, std::string> parse_psk_file(std::string_view text) {
  std::vector<PskEntry> entries;
  std::size_t line_number = 0;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    const std::size_t colon = line.find(':');
    const auto bad = [&](std::string_view why) {
      return tl::unexpected(fmt::format("line {}: {} (want username:hexkey, as psktool writes)", line_number, why));
    };
    if (colon == std::string_view::npos) return bad("no ':'");
    const std::string_view username = line.substr(0, colon);
    const std::string_view hex = line.substr(colon + 1);
    if (username.empty()) return bad("empty username");
    if (hex.empty()) return bad("empty key");
    if (hex.size() % 2 != 0) return bad("the key has an odd number of hex digits");
    PskEntry entry{.username = std::string(username), .key = {}};
    entry.key.reserve(hex.size() / 2);
    for (std::size_t i = 0; i < hex.size(); i += 2) {
      const int high = hex_value(hex[i]), low = hex_value(hex[i + 1]);
      if (high < 0 || low < 0) return bad("the key is not hexadecimal");
      entry.key.push_back(static_cast<std::byte>(high * 16 + low));
    }
    for (const auto& other : entries) {
      if (other.username == entry.username) return bad(fmt::format("username '{}' given twice", entry.username));
    }
    entries.push_back(std::move(entry));
  }
  if (entries.empty()) return tl::unexpected(std::string("no username:hexkey line"));
  return entries;
}

struct TlsContext::Credentials {
  gnutls_certificate_credentials_t x509 = nullptr;
  gnutls_psk_server_credentials_t psk = nullptr;
  std::map<std::string, std::vector<std::byte>, std::less<>> keys;  // PSK identity → key
  bool verify_peer = false;
  ~Credentials() {
    if (x509 != nullptr) gnutls_certificate_free_credentials(x509);
    if (psk != nullptr) gnutls_psk_free_server_credentials(psk);
  }
};

namespace {

/// GnuTLS asks for the key of a PSK identity; the session's pointer is its Credentials.
int psk_key_for(gnutls_session_t session, const char* username, gnutls_datum_t* key) {
  const auto* credentials = static_cast<const TlsContext::Credentials*>(gnutls_session_get_ptr(session));
  const auto found = credentials->keys.find(std::string_view(username));
  if (found == credentials->keys.end()) {
    log::warn("nbd: tls: unknown PSK identity: username={}", log::escaped(username));
    return -1;
  }
  key->data = static_cast<unsigned char*>(gnutls_malloc(found->second.size()));
  if (key->data == nullptr) return -1;
  std::memcpy(key->data, found->second.data(), found->second.size());
  key->size = static_cast<unsigned>(found->second.size());
  return 0;
}

}  // namespace

TlsContext::TlsContext(TlsSettings settings, std::unique_ptr<Credentials> credentials)
    : settings_(std::move(settings)), credentials_(std::move(credentials)) {}

TlsContext::~TlsContext() = default;

tl::expected<std::shared_ptr<TlsContext>, std::string> TlsContext::create(const TlsSettings& settings) {
  if (settings.certificates_dir.empty() == settings.psk_file.empty()) {
    return tl::unexpected(std::string("TLS needs exactly one of --tls-certificates DIR and --tls-psk FILE"));
  }
  if (settings.verify_peer && settings.certificates_dir.empty()) {
    return tl::unexpected(std::string("--tls-verify-peer needs --tls-certificates (X.509)"));
  }
  auto credentials = std::make_unique<Credentials>();
  std::vector<std::string> identities;
  credentials->verify_peer = settings.verify_peer;
  if (!settings.psk_file.empty()) {
    std::ifstream in(settings.psk_file);
    if (!in) return tl::unexpected(fmt::format("{}: {}", settings.psk_file, std::strerror(errno)));
    std::ostringstream text;
    text << in.rdbuf();
    auto entries = parse_psk_file(text.str());
    if (!entries) return tl::unexpected(fmt::format("{}: {}", settings.psk_file, entries.error()));
    for (auto& entry : *entries) {
      identities.push_back(entry.username);
      credentials->keys.emplace(std::move(entry.username), std::move(entry.key));
    }
    if (int rc = gnutls_psk_allocate_server_credentials(&credentials->psk); rc < 0) {
      return tl::unexpected(fmt::format("gnutls: {}", gnutls_strerror(rc)));
    }
    gnutls_psk_set_server_credentials_function(credentials->psk, psk_key_for);
    gnutls_psk_set_server_known_dh_params(credentials->psk, GNUTLS_SEC_PARAM_MEDIUM);
  } else {
    const std::filesystem::path dir(settings.certificates_dir);
    const std::string cert = (dir / "server-cert.pem").string(), key = (dir / "server-key.pem").string(),
                      ca = (dir / "ca-cert.pem").string();
    for (const std::string& file : {cert, key}) {
      if (std::ifstream probe(file); !probe) return tl::unexpected(fmt::format("{}: {}", file, std::strerror(errno)));
    }
    if (int rc = gnutls_certificate_allocate_credentials(&credentials->x509); rc < 0) {
      return tl::unexpected(fmt::format("gnutls: {}", gnutls_strerror(rc)));
    }
    if (std::filesystem::exists(ca)) {
      if (int rc = gnutls_certificate_set_x509_trust_file(credentials->x509, ca.c_str(), GNUTLS_X509_FMT_PEM);
          rc < 0) {
        return tl::unexpected(fmt::format("{}: {}", ca, gnutls_strerror(rc)));
      }
    } else if (settings.verify_peer) {
      return tl::unexpected(fmt::format("{}: missing (--tls-verify-peer checks client certificates against it)", ca));
    }
    if (int rc = gnutls_certificate_set_x509_key_file(credentials->x509, cert.c_str(), key.c_str(),
                                                      GNUTLS_X509_FMT_PEM);
        rc < 0) {
      return tl::unexpected(fmt::format("{}, {}: {}", cert, key, gnutls_strerror(rc)));
    }
    gnutls_certificate_set_known_dh_params(credentials->x509, GNUTLS_SEC_PARAM_MEDIUM);
  }
  auto context = std::shared_ptr<TlsContext>(new TlsContext(settings, std::move(credentials)));
  context->psk_identities_ = std::move(identities);
  return context;
}

struct TlsSession::Impl {
  gnutls_session_t session = nullptr;
  std::vector<std::byte> staging;  // small reply pieces gathered into one record
  ~Impl() {
    if (session != nullptr) gnutls_deinit(session);
  }
};

TlsSession::TlsSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TlsSession::~TlsSession() = default;

Awaitable<Result<std::unique_ptr<TlsSession>>> TlsSession::handshake(Socket& socket, const TlsContext& context) {
  auto impl = std::make_unique<Impl>();
  const auto& credentials = context.credentials();
  if (int rc = gnutls_init(&impl->session, GNUTLS_SERVER | GNUTLS_NONBLOCK); rc < 0) {
    log::warn("nbd: tls: gnutls_init: {}", gnutls_strerror(rc));
    co_return fail(std::errc::not_enough_memory);
  }
  gnutls_session_t session = impl->session;
  int rc = 0;
  if (credentials.psk != nullptr) {
    gnutls_session_set_ptr(session, const_cast<TlsContext::Credentials*>(&credentials));
    rc = gnutls_credentials_set(session, GNUTLS_CRD_PSK, credentials.psk);
    // PSK key exchanges are not in GnuTLS's default priorities.
    if (rc >= 0) rc = gnutls_set_default_priority_append(session, "+ECDHE-PSK:+DHE-PSK:+PSK", nullptr, 0);
  } else {
    rc = gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, credentials.x509);
    if (rc >= 0) rc = gnutls_set_default_priority(session);
    if (rc >= 0 && credentials.verify_peer) {
      gnutls_certificate_server_set_request(session, GNUTLS_CERT_REQUIRE);
      gnutls_session_set_verify_cert(session, nullptr, 0);  // chain to ca-cert.pem, checked in the handshake
    }
  }
  if (rc < 0) {
    log::warn("nbd: tls: session set-up: {}", gnutls_strerror(rc));
    co_return fail(std::errc::protocol_error);
  }
  boost::system::error_code ec;
  socket.non_blocking(true, ec);
  if (ec) co_return fail(std::error_code(ec.value(), std::system_category()));
  gnutls_transport_set_ptr(session, reinterpret_cast<gnutls_transport_ptr_t>(static_cast<std::intptr_t>(socket.native_handle())));
  gnutls_transport_set_push_function(session, push);
  gnutls_transport_set_pull_function(session, pull);

  // The deadline: the timer cancels the socket's wait; `live` keeps a late timer from cancelling
  // the transmission phase's waits once the handshake is over.
  auto live = std::make_shared<bool>(true);
  asio::steady_timer timer(socket.get_executor(), context.settings().handshake_timeout);
  bool timed_out = false;
  timer.async_wait([live, &socket, &timed_out](const boost::system::error_code& timer_ec) {
    if (timer_ec || !*live) return;
    timed_out = true;
    boost::system::error_code ignored;
    socket.cancel(ignored);
  });
  for (;;) {
    rc = gnutls_handshake(session);
    if (rc == GNUTLS_E_SUCCESS) break;
    if (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED) {
      ec = co_await wait_ready(socket, session);
      if (timed_out) break;
      if (ec) break;
      continue;
    }
    if (gnutls_error_is_fatal(rc) == 0) continue;  // a warning alert: go on
    break;
  }
  *live = false;
  timer.cancel();
  if (timed_out) {
    log::info("nbd: tls: handshake not finished within {} ms: dropping the client",
              context.settings().handshake_timeout.count());
    co_return fail(std::errc::timed_out);
  }
  if (ec) co_return fail(make_error_code(errc::connection_closed));
  if (rc != GNUTLS_E_SUCCESS) {
    if (rc == GNUTLS_E_PREMATURE_TERMINATION || rc == GNUTLS_E_PULL_ERROR || rc == GNUTLS_E_PUSH_ERROR) {
      log::info("nbd: tls: the client left during the handshake: {}", gnutls_strerror(rc));
      co_return fail(make_error_code(errc::connection_closed));
    }
    std::string detail;
    if (rc == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
      gnutls_datum_t text{};
      if (gnutls_certificate_verification_status_print(gnutls_session_get_verify_cert_status(session),
                                                       GNUTLS_CRT_X509, &text, 0) >= 0) {
        detail = fmt::format(" ({})", reinterpret_cast<const char*>(text.data));
        gnutls_free(text.data);
      }
    }
    log::warn("nbd: tls: handshake failed: {}{}", gnutls_strerror(rc), detail);
    // Tell the client why (best effort, never waits): e.g. unknown_psk_identity, bad_certificate.
    (void)gnutls_alert_send_appropriate(session, rc);
    co_return fail(std::errc::permission_denied);
  }
  char* description = gnutls_session_get_desc(session);
  log::debug("nbd: tls: handshake done: {}", description != nullptr ? description : "?");
  gnutls_free(description);
  co_return std::unique_ptr<TlsSession>(new TlsSession(std::move(impl)));
}

Awaitable<boost::system::error_code> TlsSession::read_exact(Socket& socket, ByteSpan out) {
  gnutls_session_t session = impl_->session;
  while (!out.empty()) {
    const ssize_t n = gnutls_record_recv(session, out.data(), out.size());
    if (n > 0) {
      out = out.subspan(static_cast<std::size_t>(n));
      continue;
    }
    if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) {
      if (auto ec = co_await wait_ready(socket, session)) co_return ec;
      continue;
    }
    if (n < 0 && gnutls_error_is_fatal(static_cast<int>(n)) == 0) continue;  // warning alert, rehandshake request
    co_return asio_error(static_cast<int>(n), "read");
  }
  co_return boost::system::error_code{};
}

Awaitable<boost::system::error_code> TlsSession::write_all(Socket& socket, std::span<const asio::const_buffer> buffers) {
  gnutls_session_t session = impl_->session;
  // Sends [data, data + size) completely; GnuTLS wants the same arguments again after E_AGAIN.
  auto send = [&](const std::byte* data, std::size_t size) -> Awaitable<boost::system::error_code> {
    while (size > 0) {
      const ssize_t n = gnutls_record_send(session, data, std::min(size, max_record_bytes));
      if (n > 0) {
        data += n;
        size -= static_cast<std::size_t>(n);
        continue;
      }
      if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) {
        if (auto ec = co_await wait_ready(socket, session)) co_return ec;
        continue;
      }
      co_return asio_error(static_cast<int>(n), "write");
    }
    co_return boost::system::error_code{};
  };
  auto& staging = impl_->staging;
  staging.clear();
  for (const asio::const_buffer& buffer : buffers) {
    const auto* data = static_cast<const std::byte*>(buffer.data());
    std::size_t size = buffer.size();
    while (size > 0) {
      if (staging.empty() && size >= max_record_bytes) {
        // Whole records straight from the caller's buffer (READ data): no staging copy.
        const std::size_t whole = size - size % max_record_bytes;
        if (auto ec = co_await send(data, whole)) co_return ec;
        data += whole;
        size -= whole;
        continue;
      }
      const std::size_t take = std::min(size, max_record_bytes - staging.size());
      staging.insert(staging.end(), data, data + take);
      data += take;
      size -= take;
      if (staging.size() == max_record_bytes) {
        if (auto ec = co_await send(staging.data(), staging.size())) co_return ec;
        staging.clear();
      }
    }
  }
  if (!staging.empty()) {
    if (auto ec = co_await send(staging.data(), staging.size())) co_return ec;
    staging.clear();
  }
  co_return boost::system::error_code{};
}

void TlsSession::bye() noexcept {
  // Non-blocking: GNUTLS_E_AGAIN means the alert did not fit now; the socket closes anyway.
  (void)gnutls_bye(impl_->session, GNUTLS_SHUT_WR);
}

}  // namespace iserkit::nbd

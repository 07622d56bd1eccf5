// NBD TLS policy (nbd_bridge/tls.*, handshake.*): the option gate and the STARTTLS answer of each
// --tls mode (proto.md "TLS support": FORCEDTLS answers NBD_REP_ERR_TLS_REQD), the psktool key
// file parser, credential loading errors, and a Server with --tls=require / off driven over a
// socketpair by a raw client (TLS_REQD for LIST/INFO/GO, INVALID for STARTTLS with data, the
// connection closed on EXPORT_NAME before TLS, UNSUP for STARTTLS when TLS is off).
// The TLS handshake itself is tested against libnbd in tests/integration/chain/tls_test.sh.
#include "nbd_bridge/tls.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>

#include "nbd_bridge/handshake.hpp"
#include "nbd_bridge/memory_export.hpp"
#include "nbd_bridge/server.hpp"

namespace iserkit::nbd {
namespace {

constexpr std::uint32_t opt(Option o) { return static_cast<std::uint32_t>(o); }

TEST(TlsGate, RequireRefusesEveryOptionButStarttlsAndAbortBeforeTls) {
  for (Option o : {Option::list, Option::info, Option::go, Option::structured_reply, Option::list_meta_context,
                   Option::set_meta_context, Option::peek_export, Option::extended_headers}) {
    EXPECT_EQ(tls_gate(opt(o), TlsMode::require, false), TlsGate::tls_required) << name_of(o);
  }
  EXPECT_EQ(tls_gate(0x7777, TlsMode::require, false), TlsGate::tls_required);  // unknown options too
  EXPECT_EQ(tls_gate(opt(Option::starttls), TlsMode::require, false), TlsGate::proceed);
  EXPECT_EQ(tls_gate(opt(Option::abort), TlsMode::require, false), TlsGate::proceed);
  EXPECT_EQ(tls_gate(opt(Option::export_name), TlsMode::require, false), TlsGate::disconnect);
}

TEST(TlsGate, EverythingProceedsOnceTlsIsOnOrWhenNotRequired) {
  for (Option o : {Option::list, Option::go, Option::export_name, Option::starttls}) {
    EXPECT_EQ(tls_gate(opt(o), TlsMode::require, true), TlsGate::proceed) << name_of(o);
    EXPECT_EQ(tls_gate(opt(o), TlsMode::on, false), TlsGate::proceed) << name_of(o);
    EXPECT_EQ(tls_gate(opt(o), TlsMode::off, false), TlsGate::proceed) << name_of(o);
  }
}

TEST(StarttlsReply, ByModeDataAndState) {
  EXPECT_EQ(starttls_reply(TlsMode::off, false, 0), OptionReply::err_unsup);
  EXPECT_EQ(starttls_reply(TlsMode::on, false, 0), OptionReply::ack);
  EXPECT_EQ(starttls_reply(TlsMode::require, false, 0), OptionReply::ack);
  EXPECT_EQ(starttls_reply(TlsMode::require, false, 4), OptionReply::err_invalid);  // STARTTLS takes no data
  EXPECT_EQ(starttls_reply(TlsMode::on, true, 0), OptionReply::err_invalid);        // TLS already on
}

TEST(TlsMode, Parse) {
  EXPECT_EQ(parse_tls_mode("off"), TlsMode::off);
  EXPECT_EQ(parse_tls_mode("on"), TlsMode::on);
  EXPECT_EQ(parse_tls_mode("require"), TlsMode::require);
  EXPECT_FALSE(parse_tls_mode("yes"));
  EXPECT_FALSE(parse_tls_mode(""));
}

TEST(PskFile, ParsesPsktoolLines) {
  auto entries = parse_psk_file("# keys\nalice:00ff10\r\n\nbob:ABcd\n");
  ASSERT_TRUE(entries) << entries.error();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].username, "alice");
  EXPECT_EQ((*entries)[0].key, (std::vector<std::byte>{std::byte{0x00}, std::byte{0xff}, std::byte{0x10}}));
  EXPECT_EQ((*entries)[1].username, "bob");
  EXPECT_EQ((*entries)[1].key, (std::vector<std::byte>{std::byte{0xab}, std::byte{0xcd}}));
}

TEST(PskFile, BadLinesAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"alice\n", "line 1: no ':'"},
      {"alice:00\n:00\n", "line 2: empty username"},
      {"alice:\n", "line 1: empty key"},
      {"alice:abc\n", "line 1: the key has an odd number"},
      {"alice:zz\n", "line 1: the key is not hexadecimal"},
      {"alice:00\nalice:11\n", "line 2: username 'alice' given twice"},
      {"# nothing\n\n", "no username:hexkey line"},
  };
  for (const auto& [text, want] : cases) {
    auto entries = parse_psk_file(text);
    ASSERT_FALSE(entries) << text;
    EXPECT_NE(entries.error().find(want), std::string::npos) << entries.error();
  }
}

std::string write_temp(const std::string& text) {
  char path[] = "/tmp/iserkit-tls-unit.XXXXXX";
  const int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
  return path;
}

TEST(TlsContext, CredentialErrorsNameTheProblem) {
  auto neither = TlsContext::create({.mode = TlsMode::on});
  ASSERT_FALSE(neither);
  EXPECT_NE(neither.error().find("exactly one of"), std::string::npos);
  auto both = TlsContext::create({.mode = TlsMode::on, .certificates_dir = "/nonexistent", .psk_file = "/x"});
  ASSERT_FALSE(both);
  auto verify_psk = TlsContext::create({.mode = TlsMode::on, .psk_file = "/x", .verify_peer = true});
  ASSERT_FALSE(verify_psk);
  EXPECT_NE(verify_psk.error().find("--tls-verify-peer"), std::string::npos);
  auto no_dir = TlsContext::create({.mode = TlsMode::on, .certificates_dir = "/nonexistent/pki"});
  ASSERT_FALSE(no_dir);
  EXPECT_NE(no_dir.error().find("/nonexistent/pki/server-cert.pem"), std::string::npos) << no_dir.error();
  const std::string bad = write_temp("alice:0g\n");
  const std::string good = write_temp("bob:00\nalice:11\n");
  auto psk = TlsContext::create({.mode = TlsMode::on, .psk_file = good});
  std::remove(good.c_str());
  ASSERT_TRUE(psk) << psk.error();
  EXPECT_EQ((*psk)->psk_identities(), (std::vector<std::string>{"bob", "alice"}));
  auto bad_psk = TlsContext::create({.mode = TlsMode::on, .psk_file = bad});
  std::remove(bad.c_str());
  ASSERT_FALSE(bad_psk);
  EXPECT_NE(bad_psk.error().find(bad + ": line 1"), std::string::npos) << bad_psk.error();
}

// A raw fixed-newstyle client on a blocking socket.
struct RawClient {
  int fd;
  bool read_all(void* out, std::size_t n) {
    auto* p = static_cast<char*>(out);
    while (n > 0) {
      const ssize_t r = ::recv(fd, p, n, 0);
      if (r <= 0) return false;
      p += r;
      n -= static_cast<std::size_t>(r);
    }
    return true;
  }
  static void put32(std::vector<unsigned char>& b, std::uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<unsigned char>(v >> s));
  }
  void greet() {
    std::array<unsigned char, 18> greeting{};
    ASSERT_TRUE(read_all(greeting.data(), greeting.size()));
    std::vector<unsigned char> flags;
    put32(flags, 3);  // NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES
    ASSERT_EQ(::send(fd, flags.data(), flags.size(), 0), 4);
  }
  void send_option(std::uint32_t option, std::string_view data = {}) {
    std::vector<unsigned char> b{'I', 'H', 'A', 'V', 'E', 'O', 'P', 'T'};
    put32(b, option);
    put32(b, static_cast<std::uint32_t>(data.size()));
    b.insert(b.end(), data.begin(), data.end());
    ASSERT_EQ(::send(fd, b.data(), b.size(), MSG_NOSIGNAL), static_cast<ssize_t>(b.size()));
  }
  /// The reply type of the next option reply to `option` (its data skipped); 0 when the server closed.
  std::uint32_t reply_type(std::uint32_t option) {
    std::array<unsigned char, 20> h{};
    if (!read_all(h.data(), h.size())) return 0;
    auto be32 = [&](int at) {
      return std::uint32_t{h[at]} << 24 | std::uint32_t{h[at + 1]} << 16 | std::uint32_t{h[at + 2]} << 8 | h[at + 3];
    };
    EXPECT_EQ(be32(8), option);
    std::vector<char> data(be32(16));
    if (!data.empty() && !read_all(data.data(), data.size())) return 0;
    return be32(12);
  }
  bool closed_by_server() {
    char byte;
    return ::recv(fd, &byte, 1, 0) == 0;
  }
};

constexpr std::uint32_t reply(OptionReply r) { return static_cast<std::uint32_t>(r); }

// Runs a Server with `options` on one end of a socketpair and `client` on the other.
void with_server(ServerOptions options, const std::function<void(RawClient&)>& client) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  asio::io_context io;
  auto exported = std::make_shared<MemoryExport>(MemoryExportOptions{.size_bytes = 1 << 20, .name = "disk"});
  Server server(io, exported, std::move(options));
  ASSERT_TRUE(server.serve_connected(fds[0]));
  std::thread thread([&] { io.run(); });
  RawClient raw{fds[1]};
  client(raw);
  ::close(fds[1]);
  thread.join();  // the connection ends once the client closed; then io.run() returns
}

std::shared_ptr<const TlsContext> psk_context(TlsMode mode) {
  const std::string file = write_temp("alice:000102030405060708090a0b0c0d0e0f\n");
  auto context = TlsContext::create({.mode = mode, .psk_file = file});
  std::remove(file.c_str());
  EXPECT_TRUE(context) << context.error();
  return context ? *context : nullptr;
}

TEST(TlsServer, RequireAnswersTlsReqdUntilStarttlsAndClosesOnExportName) {
  with_server({.tls_mode = TlsMode::require, .tls = psk_context(TlsMode::require)}, [](RawClient& c) {
    c.greet();
    c.send_option(opt(Option::list));
    EXPECT_EQ(c.reply_type(opt(Option::list)), reply(OptionReply::err_tls_reqd));
    c.send_option(opt(Option::structured_reply));
    EXPECT_EQ(c.reply_type(opt(Option::structured_reply)), reply(OptionReply::err_tls_reqd));
    const std::string go_data("\0\0\0\0\0\0", 6);  // name length 0, no information requests
    c.send_option(opt(Option::go), go_data);
    EXPECT_EQ(c.reply_type(opt(Option::go)), reply(OptionReply::err_tls_reqd));
    c.send_option(opt(Option::starttls), "x");
    EXPECT_EQ(c.reply_type(opt(Option::starttls)), reply(OptionReply::err_invalid));
    // NBD_OPT_EXPORT_NAME has no error reply: the server closes.
    c.send_option(opt(Option::export_name), "disk");
    EXPECT_TRUE(c.closed_by_server());
  });
}

TEST(TlsServer, OffAnswersStarttlsUnsupAndServesPlainText) {
  with_server({}, [](RawClient& c) {
    c.greet();
    c.send_option(opt(Option::starttls));
    EXPECT_EQ(c.reply_type(opt(Option::starttls)), reply(OptionReply::err_unsup));
    c.send_option(opt(Option::list));
    EXPECT_EQ(c.reply_type(opt(Option::list)), reply(OptionReply::server));
    EXPECT_EQ(c.reply_type(opt(Option::list)), reply(OptionReply::ack));
    c.send_option(opt(Option::abort));
    EXPECT_EQ(c.reply_type(opt(Option::abort)), reply(OptionReply::ack));
  });
}

TEST(TlsServer, StarttlsAckThenAPeerThatSendsGarbageIsDropped) {
  with_server({.tls_mode = TlsMode::on, .tls = psk_context(TlsMode::on)}, [](RawClient& c) {
    c.greet();
    c.send_option(opt(Option::starttls));
    EXPECT_EQ(c.reply_type(opt(Option::starttls)), reply(OptionReply::ack));
    // Not a TLS record: the handshake fails and the server closes (after at most an alert).
    const std::string garbage(64, 'G');
    ASSERT_EQ(::send(c.fd, garbage.data(), garbage.size(), MSG_NOSIGNAL), 64);
    char buffer[256];
    ssize_t r;
    while ((r = ::recv(c.fd, buffer, sizeof buffer, 0)) > 0) {
    }
    // EOF, or a reset when the server closed with garbage still unread: either way it let go.
    EXPECT_TRUE(r == 0 || errno == ECONNRESET) << std::strerror(errno);
  });
}

}  // namespace
}  // namespace iserkit::nbd

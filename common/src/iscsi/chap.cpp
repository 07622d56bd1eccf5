// CHAP computations (RFC 1994 §4.1, RFC 7143 §12.1.3, §6.1 binary encodings) over OpenSSL EVP.
#include "iserkit/iscsi/chap.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cctype>
#include <charconv>
#include <memory>

#include "iserkit/common/errors.hpp"

namespace iserkit::iscsi {
namespace {

const EVP_MD* evp_for(ChapAlgorithm a) noexcept {
  switch (a) {
    case ChapAlgorithm::md5: return EVP_md5();
    case ChapAlgorithm::sha1: return EVP_sha1();
    case ChapAlgorithm::sha256: return EVP_sha256();
    case ChapAlgorithm::sha3_256: return EVP_sha3_256();
  }
  return nullptr;
}

int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int base64_digit(char c) noexcept {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

std::size_t chap_digest_size(ChapAlgorithm a) noexcept {
  switch (a) {
    case ChapAlgorithm::md5: return 16;
    case ChapAlgorithm::sha1: return 20;
    case ChapAlgorithm::sha256: return 32;
    case ChapAlgorithm::sha3_256: return 32;
  }
  return 0;
}

std::size_t chap_challenge_size(ChapAlgorithm a) noexcept { return chap_digest_size(a); }

std::string_view chap_algorithm_name(ChapAlgorithm a) noexcept {
  switch (a) {
    case ChapAlgorithm::md5: return "MD5";
    case ChapAlgorithm::sha1: return "SHA-1";
    case ChapAlgorithm::sha256: return "SHA-256";
    case ChapAlgorithm::sha3_256: return "SHA3-256";
  }
  return "unknown";
}

std::optional<ChapAlgorithm> parse_chap_algorithm(std::string_view text) noexcept {
  std::uint32_t n = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec == std::errc{} && p == text.data() + text.size()) {
    if (n >= 5 && n <= 8) return static_cast<ChapAlgorithm>(n);
    return std::nullopt;
  }
  std::string s;
  for (char c : text)
    if (c != '-' && c != '_') s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s == "md5") return ChapAlgorithm::md5;
  if (s == "sha1") return ChapAlgorithm::sha1;
  if (s == "sha256") return ChapAlgorithm::sha256;
  if (s == "sha3256") return ChapAlgorithm::sha3_256;
  return std::nullopt;
}

Result<std::vector<ChapAlgorithm>> parse_chap_algorithm_list(std::string_view value) {
  std::vector<ChapAlgorithm> out;
  if (value.empty()) return fail(errc::negotiation_failed);
  while (true) {
    const auto comma = value.find(',');
    const std::string_view item = value.substr(0, comma);
    std::uint32_t n = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), n);
    if (item.empty() || ec != std::errc{} || p != item.data() + item.size()) return fail(errc::negotiation_failed);
    if (n >= 5 && n <= 8) out.push_back(static_cast<ChapAlgorithm>(n));
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return out;
}

std::string format_chap_algorithm_list(std::span<const ChapAlgorithm> algorithms) {
  std::string s;
  for (auto a : algorithms) {
    if (!s.empty()) s += ',';
    s += std::to_string(static_cast<unsigned>(a));
  }
  return s;
}

std::optional<ChapAlgorithm> choose_chap_algorithm(std::span<const ChapAlgorithm> offered,
                                                   std::span<const ChapAlgorithm> accepted) noexcept {
  for (auto a : offered)
    for (auto b : accepted)
      if (a == b) return a;
  return std::nullopt;
}

std::vector<std::byte> chap_response(ChapAlgorithm algorithm, std::uint8_t identifier, std::string_view secret,
                                     ConstByteSpan challenge) {
  std::vector<std::byte> out(chap_digest_size(algorithm));
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  unsigned length = 0;
  // RFC 1994 §4.1: the Response Value is the one-way hash over the Identifier, followed by the
  // secret, followed by the Challenge Value.
  const unsigned char id = identifier;
  const bool ok = ctx && EVP_DigestInit_ex(ctx.get(), evp_for(algorithm), nullptr) == 1 &&
                  EVP_DigestUpdate(ctx.get(), &id, 1) == 1 &&
                  EVP_DigestUpdate(ctx.get(), secret.data(), secret.size()) == 1 &&
                  EVP_DigestUpdate(ctx.get(), challenge.data(), challenge.size()) == 1 &&
                  EVP_DigestFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(out.data()), &length) == 1 &&
                  length == out.size();
  if (!ok) out.clear();  // never matches an expected value (chap_equal compares lengths)
  return out;
}

Result<std::vector<std::byte>> chap_random_bytes(std::size_t n) {
  std::vector<std::byte> out(n);
  if (n > 0 && RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1)
    return fail(errc::not_supported);
  return out;
}

bool chap_equal(ConstByteSpan a, ConstByteSpan b) noexcept {
  if (a.size() != b.size() || a.empty()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string encode_chap_binary(ConstByteSpan bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s = "0x";
  s.reserve(2 + bytes.size() * 2);
  for (auto b : bytes) {
    const auto v = static_cast<unsigned>(b);
    s += digits[v >> 4];
    s += digits[v & 0xf];
  }
  return s;
}

Result<std::vector<std::byte>> decode_chap_binary(std::string_view value, std::size_t max_bytes) {
  std::vector<std::byte> out;
  if (value.size() < 3 || value[0] != '0') return fail(errc::negotiation_failed);
  const char kind = static_cast<char>(std::tolower(static_cast<unsigned char>(value[1])));
  std::string_view body = value.substr(2);
  if (kind == 'x') {
    // RFC 7143 §6.1: hex-constant; an odd number of digits has an implied leading zero.
    if ((body.size() + 1) / 2 > max_bytes) return fail(errc::negotiation_failed);
    std::size_t i = 0;
    if (body.size() % 2 == 1) {
      const int d = hex_digit(body[0]);
      if (d < 0) return fail(errc::negotiation_failed);
      out.push_back(static_cast<std::byte>(d));
      i = 1;
    }
    for (; i < body.size(); i += 2) {
      const int hi = hex_digit(body[i]);
      const int lo = hex_digit(body[i + 1]);
      if (hi < 0 || lo < 0) return fail(errc::negotiation_failed);
      out.push_back(static_cast<std::byte>(hi << 4 | lo));
    }
    return out;
  }
  if (kind == 'b') {
    // RFC 7143 §6.1: base64-constant (RFC 4648 alphabet, '=' padding).
    while (!body.empty() && body.back() == '=') body.remove_suffix(1);
    if (body.size() * 3 / 4 > max_bytes || body.size() % 4 == 1) return fail(errc::negotiation_failed);
    std::uint32_t acc = 0;
    int bits = 0;
    for (char c : body) {
      const int d = base64_digit(c);
      if (d < 0) return fail(errc::negotiation_failed);
      acc = (acc << 6) | static_cast<std::uint32_t>(d);
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        out.push_back(static_cast<std::byte>((acc >> bits) & 0xff));
      }
    }
    if (out.empty()) return fail(errc::negotiation_failed);
    return out;
  }
  return fail(errc::negotiation_failed);
}

Result<std::uint8_t> parse_chap_identifier(std::string_view value) {
  std::uint32_t n = 0;
  int base = 10;
  if (value.size() > 2 && value[0] == '0' && (value[1] == 'x' || value[1] == 'X')) {
    value.remove_prefix(2);
    base = 16;
  }
  auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n, base);
  if (value.empty() || ec != std::errc{} || p != value.data() + value.size() || n > 255)
    return fail(errc::negotiation_failed);
  return static_cast<std::uint8_t>(n);
}

}  // namespace iserkit::iscsi

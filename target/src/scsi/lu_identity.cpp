// LU identity: UUIDs (RFC 9562 §4, §5.4 version 4, §5.5 version 5) and the designators derived
// from them (SPC-5 §7.7.6.6 NAA IEEE Registered Extended, §7.7.15 unit serial number). See
// docs/lu-identity.md for the scheme and why.
#include "iserkit/target/lu_identity.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <system_error>

#include <openssl/evp.h>
#include <sys/random.h>

#include "iserkit/common/errors.hpp"

namespace iserkit::target {
namespace {

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Parses an even number of hex digits into bytes; false on a non-hex digit.
bool parse_hex(std::string_view text, std::uint8_t* out) noexcept {
  for (std::size_t i = 0; i + 1 < text.size(); i += 2) {
    const int hi = hex_value(text[i]);
    const int lo = hex_value(text[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i / 2] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  return true;
}

std::string hex(const std::uint8_t* data, std::size_t size) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (std::size_t i = 0; i < size; ++i) {
    out += digits[data[i] >> 4];
    out += digits[data[i] & 0xf];
  }
  return out;
}

// RFC 9562 §4.1, §4.2: the version in the high nibble of octet 6, the variant 10b in the two high
// bits of octet 8.
void set_version_and_variant(Uuid& u, unsigned version) noexcept {
  u.bytes[6] = static_cast<std::uint8_t>((u.bytes[6] & 0x0f) | (version << 4));
  u.bytes[8] = static_cast<std::uint8_t>((u.bytes[8] & 0x3f) | 0x80);
}

}  // namespace

Result<Uuid> parse_uuid(std::string_view text) {
  std::string digits;
  if (text.size() == 36) {
    // RFC 9562 §4: 8-4-4-4-12 hex digits.
    for (std::size_t i = 0; i < text.size(); ++i) {
      const bool hyphen_here = i == 8 || i == 13 || i == 18 || i == 23;
      if (hyphen_here != (text[i] == '-')) return fail(errc::invalid_argument);
      if (!hyphen_here) digits += text[i];
    }
  } else if (text.size() == 32) {
    digits = text;
  } else {
    return fail(errc::invalid_argument);
  }
  Uuid u;
  if (!parse_hex(digits, u.bytes.data())) return fail(errc::invalid_argument);
  if (u == Uuid{}) return fail(errc::invalid_argument);  // the nil UUID names nothing
  return u;
}

std::string to_string(const Uuid& uuid) {
  const std::string h = hex(uuid.bytes.data(), uuid.bytes.size());
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" + h.substr(20);
}

Result<Uuid> random_uuid() {
  Uuid u;
  std::size_t got = 0;
  while (got < u.bytes.size()) {
    const ssize_t n = ::getrandom(u.bytes.data() + got, u.bytes.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(std::error_code(errno, std::generic_category()));
    }
    got += static_cast<std::size_t>(n);
  }
  set_version_and_variant(u, 4);  // RFC 9562 §5.4
  return u;
}

Uuid name_based_uuid(std::string_view name) {
  // RFC 9562 §5.5: SHA-1 over the namespace UUID's 16 bytes, then the name; the first 16 bytes of
  // the digest with version 5 and the variant set.
  static const Uuid space = *parse_uuid(lu_uuid_namespace);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx, EVP_sha1(), nullptr) == 1 &&
                  EVP_DigestUpdate(ctx, space.bytes.data(), space.bytes.size()) == 1 &&
                  EVP_DigestUpdate(ctx, name.data(), name.size()) == 1 && EVP_DigestFinal_ex(ctx, digest, &length) == 1;
  EVP_MD_CTX_free(ctx);
  // SHA-1 is part of every libcrypto build; failing here means the library is broken.
  if (!ok || length < 16) std::abort();
  Uuid u;
  std::copy(digest, digest + 16, u.bytes.begin());
  set_version_and_variant(u, 5);
  return u;
}

std::array<std::uint8_t, 16> naa_from_uuid(const Uuid& uuid) {
  // The UUID's 128 bits, most significant first, without the version (bits 48..51) and the
  // variant (bits 64..65): 122 bits that vary between UUIDs. The first 100 fill the designator.
  std::array<std::uint8_t, 16> out{};
  out[0] = static_cast<std::uint8_t>(0x60 | (naa_local_company_id >> 20));  // NAA 6h
  out[1] = static_cast<std::uint8_t>(naa_local_company_id >> 12);
  out[2] = static_cast<std::uint8_t>(naa_local_company_id >> 4);
  out[3] = static_cast<std::uint8_t>((naa_local_company_id & 0xf) << 4);
  unsigned put = 28;  // next bit of `out` to fill (0 = the most significant bit of out[0])
  for (unsigned bit = 0; bit < 128 && put < 128; ++bit) {
    if ((bit >= 48 && bit < 52) || bit == 64 || bit == 65) continue;
    const unsigned value = (uuid.bytes[bit / 8] >> (7 - bit % 8)) & 1u;
    out[put / 8] = static_cast<std::uint8_t>(out[put / 8] | (value << (7 - put % 8)));
    ++put;
  }
  return out;
}

std::string unit_serial_from_uuid(const Uuid& uuid) { return hex(uuid.bytes.data(), uuid.bytes.size()); }

Result<std::vector<std::uint8_t>> parse_naa_designator(std::string_view text) {
  if (text.size() > 4 && (text.substr(0, 4) == "naa." || text.substr(0, 4) == "NAA.")) text.remove_prefix(4);
  if (text.size() != 16 && text.size() != 32) return fail(errc::invalid_argument);
  std::vector<std::uint8_t> out(text.size() / 2);
  if (!parse_hex(text, out.data())) return fail(errc::invalid_argument);
  // SPC-5 §7.7.6.6.1: NAA 2h, 3h and 5h designators are 8 bytes long, NAA 6h is 16.
  const unsigned naa = out[0] >> 4;
  const bool fits = out.size() == 8 ? (naa == 2 || naa == 3 || naa == 5) : naa == 6;
  if (!fits) return fail(errc::invalid_argument);
  return out;
}

Result<void> check_unit_serial(std::string_view serial) {
  if (serial.empty() || serial.size() > max_unit_serial_bytes) return fail(errc::invalid_argument);
  for (char c : serial) {
    if (c < 0x20 || c > 0x7e || c == ',') return fail(errc::invalid_argument);
  }
  return {};
}

}  // namespace iserkit::target

// Sense data encode/decode: fixed format (SPC-5 §4.4.3) and descriptor format (SPC-5 §4.4.2) with
// the information (§4.4.2.2) and sense-key specific (§4.4.2.4) descriptors; ScsiResult::check().
#include "iserkit/scsi/sense.hpp"

#include <cassert>
#include <cerrno>
#include <cstring>

#include "iserkit/common/errors.hpp"
#include "iserkit/scsi/errno_map.hpp"

namespace iserkit::scsi {
namespace {

constexpr std::uint8_t fixed_current = 0x70;
constexpr std::uint8_t fixed_deferred = 0x71;
constexpr std::uint8_t descriptor_current = 0x72;
constexpr std::uint8_t descriptor_deferred = 0x73;
constexpr std::uint8_t information_descriptor = 0x00;
constexpr std::uint8_t sense_key_specific_descriptor = 0x02;

SenseData with_field_pointer(AscPair pair, bool in_cdb, std::uint16_t byte_index, std::optional<std::uint8_t> bit) {
  SenseData s = SenseData::make(SenseKey::illegal_request, pair);
  // SPC-5 §4.4.2.4.2, table 54: SKSV | C/D | BPV | BIT POINTER, then the 16-bit FIELD POINTER.
  std::uint8_t b0 = 0x80;
  if (in_cdb) b0 |= 0x40;
  if (bit) b0 |= static_cast<std::uint8_t>(0x08 | (*bit & 0x07));
  s.sense_key_specific = std::array<std::uint8_t, 3>{b0, static_cast<std::uint8_t>(byte_index >> 8),
                                                     static_cast<std::uint8_t>(byte_index)};
  return s;
}

}  // namespace

SenseData SenseData::invalid_field_in_cdb(std::uint16_t byte_index, std::optional<std::uint8_t> bit) noexcept {
  return with_field_pointer(asc::invalid_field_in_cdb, true, byte_index, bit);
}

SenseData SenseData::invalid_field_in_parameter_list(std::uint16_t byte_index) noexcept {
  return with_field_pointer(asc::invalid_field_in_parameter_list, false, byte_index, std::nullopt);
}

std::size_t encode_sense(const SenseData& sense, SenseFormat format, ByteSpan out) noexcept {
  assert(out.size() >= max_sense_size_bytes);
  std::byte* p = out.data();
  const auto key = static_cast<std::uint8_t>(static_cast<std::uint8_t>(sense.key) & 0x0f);
  if (format == SenseFormat::fixed) {
    std::memset(p, 0, fixed_sense_size_bytes);
    std::uint8_t b0 = sense.deferred ? fixed_deferred : fixed_current;
    // SPC-5 §4.4.3: VALID = 1 only when INFORMATION holds the whole value (it is 4 bytes here).
    if (sense.information && *sense.information <= 0xffffffffu) {
      b0 |= 0x80;
      store_be32(p + 3, static_cast<std::uint32_t>(*sense.information));
    }
    store_u8(p, b0);
    store_u8(p + 2, key);
    store_u8(p + 7, fixed_sense_size_bytes - 8);  // ADDITIONAL SENSE LENGTH: n - 7
    store_u8(p + 12, sense.asc);
    store_u8(p + 13, sense.ascq);
    if (sense.sense_key_specific) {
      for (std::size_t i = 0; i < 3; ++i) store_u8(p + 15 + i, (*sense.sense_key_specific)[i]);
    }
    return fixed_sense_size_bytes;
  }
  std::memset(p, 0, 8);
  store_u8(p, sense.deferred ? descriptor_deferred : descriptor_current);
  store_u8(p + 1, key);
  store_u8(p + 2, sense.asc);
  store_u8(p + 3, sense.ascq);
  std::size_t n = 8;
  if (sense.information) {
    std::memset(p + n, 0, 12);
    store_u8(p + n, information_descriptor);
    store_u8(p + n + 1, 0x0a);
    store_u8(p + n + 2, 0x80);  // VALID (SPC-5 §4.4.2.2: shall be 1)
    store_be64(p + n + 4, *sense.information);
    n += 12;
  }
  if (sense.sense_key_specific) {
    std::memset(p + n, 0, 8);
    store_u8(p + n, sense_key_specific_descriptor);
    store_u8(p + n + 1, 0x06);
    for (std::size_t i = 0; i < 3; ++i) store_u8(p + n + 4 + i, (*sense.sense_key_specific)[i]);
    n += 8;
  }
  store_u8(p + 7, static_cast<std::uint8_t>(n - 8));  // ADDITIONAL SENSE LENGTH
  return n;
}

Result<SenseData> decode_sense(ConstByteSpan bytes) noexcept {
  if (bytes.empty()) return fail(errc::malformed_pdu);
  const std::byte* p = bytes.data();
  const std::uint8_t code = load_u8(p) & 0x7f;
  SenseData s;
  if (code == fixed_current || code == fixed_deferred) {
    if (bytes.size() < 3) return fail(errc::malformed_pdu);
    s.deferred = code == fixed_deferred;
    s.key = static_cast<SenseKey>(load_u8(p + 2) & 0x0f);
    if (bytes.size() >= 7 && (load_u8(p) & 0x80) != 0) s.information = load_be32(p + 3);
    // Only trust bytes that the ADDITIONAL SENSE LENGTH covers (SPC-5 §4.4.3).
    const std::size_t total = bytes.size() >= 8 ? std::min<std::size_t>(bytes.size(), 8u + load_u8(p + 7)) : bytes.size();
    if (total >= 14) {
      s.asc = load_u8(p + 12);
      s.ascq = load_u8(p + 13);
    }
    if (total >= 18 && (load_u8(p + 15) & 0x80) != 0) {
      s.sense_key_specific = std::array<std::uint8_t, 3>{load_u8(p + 15), load_u8(p + 16), load_u8(p + 17)};
    }
    return s;
  }
  if (code == descriptor_current || code == descriptor_deferred) {
    if (bytes.size() < 2) return fail(errc::malformed_pdu);
    s.deferred = code == descriptor_deferred;
    s.key = static_cast<SenseKey>(load_u8(p + 1) & 0x0f);
    if (bytes.size() >= 4) {
      s.asc = load_u8(p + 2);
      s.ascq = load_u8(p + 3);
    }
    if (bytes.size() < 8) return s;
    const std::size_t total = std::min<std::size_t>(bytes.size(), 8u + load_u8(p + 7));
    std::size_t off = 8;
    while (off + 2 <= total) {
      const std::uint8_t type = load_u8(p + off);
      const std::size_t len = 2u + load_u8(p + off + 1);
      if (off + len > total) break;  // truncated descriptor: ignore it
      if (type == information_descriptor && len >= 12 && (load_u8(p + off + 2) & 0x80) != 0) {
        s.information = load_be64(p + off + 4);
      } else if (type == sense_key_specific_descriptor && len >= 8 && (load_u8(p + off + 4) & 0x80) != 0) {
        s.sense_key_specific =
            std::array<std::uint8_t, 3>{load_u8(p + off + 4), load_u8(p + off + 5), load_u8(p + off + 6)};
      }
      off += len;
    }
    return s;
  }
  return fail(errc::malformed_pdu);
}

Result<void> ScsiResult::check() const noexcept {
  const int e = errno_for(status, sense);
  if (e == 0) return {};
  return fail(std::error_code(e, std::generic_category()));
}

}  // namespace iserkit::scsi

// Sense data (SPC-5 §4.4): encode and decode fixed format (response codes 0x70/0x71, §4.4.3) and
// descriptor format (0x72/0x73, §4.4.2, with the information descriptor of §4.4.2.2), plus
// ScsiResult, the outcome of one SCSI command as seen by a client: status, sense, residual. Pure
// functions over byte spans, shared by the initiator (parses) and the target (builds).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <system_error>

#include "iserkit/common/bytes.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/scsi/opcodes.hpp"

namespace iserkit::scsi {

/// The content of sense data, independent of its wire format. SPC-5 §4.4.
struct SenseData {
  SenseKey key = SenseKey::no_sense;  ///< SENSE KEY
  std::uint8_t asc = 0;               ///< ADDITIONAL SENSE CODE
  std::uint8_t ascq = 0;              ///< ADDITIONAL SENSE CODE QUALIFIER
  /// INFORMATION field (e.g. the first bad LBA for a medium error); sets VALID in fixed format.
  std::optional<std::uint64_t> information;
  /// SENSE-KEY SPECIFIC bytes 15..17 of fixed format (SKSV bit included in the first byte),
  /// e.g. the field pointer for INVALID FIELD IN CDB (SPC-5 §4.4.2.4.2). nullopt = not present.
  std::optional<std::array<std::uint8_t, 3>> sense_key_specific;
  bool deferred = false;  ///< deferred error (response code 0x71/0x73) rather than current

  /// Sense data for `key` and `pair`, no information field.
  static constexpr SenseData make(SenseKey key, AscPair pair) noexcept {
    SenseData s;
    s.key = key;
    s.asc = pair.asc;
    s.ascq = pair.ascq;
    return s;
  }
  /// The ASC/ASCQ as one pair.
  [[nodiscard]] constexpr AscPair asc_pair() const noexcept { return {asc, ascq}; }

  /// ILLEGAL REQUEST / INVALID FIELD IN CDB with a field pointer to CDB byte `byte_index` (and bit
  /// `bit`, 0..7) (SPC-5 §4.4.2.4.2: SKSV=1, C/D=1, BPV=1).
  static SenseData invalid_field_in_cdb(std::uint16_t byte_index, std::optional<std::uint8_t> bit = {}) noexcept;
  /// ILLEGAL REQUEST / INVALID FIELD IN PARAMETER LIST with a field pointer (C/D=0).
  static SenseData invalid_field_in_parameter_list(std::uint16_t byte_index) noexcept;

  friend bool operator==(const SenseData&, const SenseData&) noexcept = default;
};

/// Which sense data format to produce (SPC-5 §4.4.1). The target uses fixed unless the D_SENSE bit
/// of the control mode page (SPC-5 §7.5.8) asks for descriptor format.
enum class SenseFormat : std::uint8_t { fixed, descriptor };

/// Size in bytes of fixed-format sense as iserkit emits it (ADDITIONAL SENSE LENGTH = 10).
inline constexpr std::size_t fixed_sense_size_bytes = 18;
/// Largest sense data iserkit emits (descriptor format with information + sense-key-specific).
inline constexpr std::size_t max_sense_size_bytes = 8 + 12 + 8;
/// Sense data is at most 252 bytes (SPC-5 §4.4.1).
inline constexpr std::size_t sense_size_limit_bytes = 252;

/// Encodes `sense` in `format` into `out`.
/// Returns: the number of bytes written (18 for fixed; 8 + descriptors for descriptor format).
/// Preconditions: `out.size() >= max_sense_size_bytes`.
/// Fixed format carries only the low 32 bits of `information`; when it does not fit, VALID is 0
/// (SPC-5 §4.4.3). Spec: SPC-5 §4.4.2, §4.4.3.
std::size_t encode_sense(const SenseData& sense, SenseFormat format, ByteSpan out) noexcept;

/// Decodes fixed (0x70/0x71) or descriptor (0x72/0x73) sense data. Truncated sense is accepted as
/// long as the key (and ASC/ASCQ when the additional length covers them) can be read.
/// Returns: the sense, or errc::malformed_pdu if the buffer is empty, too short for the key, or
/// the response code is not one of the four above. Spec: SPC-5 §4.4.
Result<SenseData> decode_sense(ConstByteSpan bytes) noexcept;

/// The outcome of one SCSI command seen from the application client (SAM-5 §5.1): status,
/// autosense, and residual. Carries no transport (iSCSI) fields.
struct ScsiResult {
  Status status = Status::good;
  std::optional<SenseData> sense;     ///< present with CHECK CONDITION when the device sent sense
  std::uint32_t residual_bytes = 0;   ///< bytes not transferred (underflow) or not asked (overflow)
  bool residual_overflow = false;     ///< true: residual counts bytes the command wanted beyond EDTL

  /// Success when status is GOOD (or CONDITION MET); otherwise an error code from the sense → errno
  /// table (errno_map.hpp) in std::generic_category(), e.g. EROFS for WRITE PROTECTED.
  [[nodiscard]] Result<void> check() const noexcept;
};

}  // namespace iserkit::scsi

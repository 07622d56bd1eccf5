// LU identity: the name of a logical unit and the designators derived from it — the unit serial
// number (VPD 0x80, SPC-5 §7.7.15), the NAA IEEE Registered Extended designator and the T10 vendor
// ID based designator (VPD 0x83, SPC-5 §7.7.6). The name is a UUID (RFC 9562); where it
// comes from (a user xattr on the backing file, the RBD image, the configuration) is decided by
// the target (target/src/lu_identity_store.hpp). Design and reasons: docs/lu-identity.md.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "iserkit/common/result.hpp"

namespace iserkit::target {

/// A 128-bit UUID (RFC 9562), its 16 bytes in network order (as the text form reads).
struct Uuid {
  std::array<std::uint8_t, 16> bytes{};
  friend auto operator<=>(const Uuid&, const Uuid&) = default;
};

/// Parses a UUID: the canonical 8-4-4-4-12 form ("23a4e823-ba11-4ae3-b5ad-d63509376dae") or the
/// same 32 hex digits without hyphens; either case. The nil UUID (all zero) is refused: it names
/// nothing. Errors: errc::invalid_argument for anything else.
Result<Uuid> parse_uuid(std::string_view text);

/// The canonical lowercase form, 36 characters (RFC 9562 §4).
std::string to_string(const Uuid& uuid);

/// A new random UUID, version 4 (RFC 9562 §5.4), from getrandom(2).
/// Errors: the errno of getrandom (in practice none: it blocks only before the pool is seeded).
Result<Uuid> random_uuid();

/// The name-based UUID, version 5 (RFC 9562 §5.5: SHA-1 of a namespace UUID and the name), of
/// `name` in iserkit's own namespace for LU names (lu_uuid_namespace). The same name gives the
/// same UUID in every process and on every host.
Uuid name_based_uuid(std::string_view name);

/// iserkit's namespace UUID for name_based_uuid() (a fixed random v4 UUID chosen once).
inline constexpr std::string_view lu_uuid_namespace = "23a4e823-ba11-4ae3-b5ad-d63509376dae";

/// IEEE COMPANY_ID in the NAA IEEE Registered Extended designators derived from a UUID: 02-49-53
/// ("IS"). Its first octet has the U/L bit set and the SLAP bits Y=Z=0: a value in the IEEE 802c
/// Administratively Assigned Identifier quadrant, which the IEEE never assigns as an OUI (U/L = 0)
/// or CID (ELI quadrant), so no registered vendor's designator can equal ours.
inline constexpr std::uint32_t naa_local_company_id = 0x024953;

/// The NAA IEEE Registered Extended designator (NAA 6h, 16 bytes; SPC-5 §7.7.6.6) of `uuid`:
/// NAA 6h, COMPANY_ID naa_local_company_id, then the UUID's bits with its version and variant
/// bits left out (122 bits), the first 100 of them as VENDOR SPECIFIC IDENTIFIER (36 bits) and
/// VENDOR SPECIFIC IDENTIFIER EXTENSION (64 bits).
std::array<std::uint8_t, 16> naa_from_uuid(const Uuid& uuid);

/// The unit serial number (VPD 0x80 PRODUCT SERIAL NUMBER) of `uuid`: its 32 lowercase hex
/// digits without hyphens.
std::string unit_serial_from_uuid(const Uuid& uuid);

/// Parses an NAA designator given in the configuration: 16 hex digits (NAA 2h IEEE Extended,
/// 3h Locally Assigned or 5h IEEE Registered: 8 bytes) or 32 hex digits (NAA 6h IEEE Registered
/// Extended: 16 bytes), optionally prefixed "naa." (the form Linux shows in /sys/.../wwid); either
/// case. Returns the designator's bytes. Errors: errc::invalid_argument for another length, a
/// non-hex digit, or an NAA field that does not match the length (SPC-5 §7.7.6.6.1).
Result<std::vector<std::uint8_t>> parse_naa_designator(std::string_view text);

/// Most bytes of a unit serial number: 247, so that the T10 vendor ID based designator (8 bytes of
/// vendor plus the serial) fits its one-byte DESIGNATOR LENGTH (SPC-5 §7.7.6.1).
inline constexpr std::size_t max_unit_serial_bytes = 247;

/// Checks a unit serial number given in the configuration: 1..max_unit_serial_bytes of printable
/// ASCII (20h..7Eh; SPC-5 §7.7.15), without ',' (the separator of the --lun options).
/// Errors: errc::invalid_argument.
Result<void> check_unit_serial(std::string_view serial);

}  // namespace iserkit::target

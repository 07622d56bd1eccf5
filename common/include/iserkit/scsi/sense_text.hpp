// Sense data in words (SPC-5 §4.4, Annex D): the sense key and ASC/ASCQ texts of libsgutils2
// (Debian libsgutils2-dev, sg3_utils' tables, kept up to date with T10's list), so every program
// says "ILLEGAL REQUEST 25/00: Logical unit not supported" rather than a number. Only error paths
// call these; nothing on the data path formats text.
#pragma once

#include <cstdint>
#include <string>

#include "iserkit/scsi/opcodes.hpp"
#include "iserkit/scsi/sense.hpp"

namespace iserkit::scsi {

/// The sense key's name in capitals as SPC-5 §4.4.4 table 49 spells it, e.g. "ILLEGAL REQUEST".
/// Source: libsgutils2's sg_get_sense_key_str(). Every value 0..15 has a name (9: "VENDOR
/// SPECIFIC(9)"); values above 15 are masked to 4 bits.
std::string sense_key_text(SenseKey key);

/// The ADDITIONAL SENSE CODE and QUALIFIER in words, e.g. "Logical unit not supported" for
/// 25h/00h, "Write protected" for 27h/00h. Source: libsgutils2's sg_get_asc_ascq_str() (SPC-5
/// Annex D); a pair not in its table reads like "vendor specific ASC=80, ASCQ=01 (hex)".
std::string asc_ascq_text(std::uint8_t asc, std::uint8_t ascq);

/// One line for sense data: "<KEY> <ASC>/<ASCQ>: <ASC text>", e.g.
/// "DATA PROTECT 27/00: Write protected" (ASC and ASCQ as two hex digits each).
std::string sense_text(const SenseData& sense);

}  // namespace iserkit::scsi

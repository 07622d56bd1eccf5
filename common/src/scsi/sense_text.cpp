// Sense data in words (SPC-5 §4.4.4 sense keys, Annex D ASC/ASCQ) from libsgutils2's tables.
#include "iserkit/scsi/sense_text.hpp"

#include <scsi/sg_lib.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <string_view>

namespace iserkit::scsi {

std::string sense_key_text(SenseKey key) {
  std::array<char, 64> buffer{};
  sg_get_sense_key_str(static_cast<int>(static_cast<std::uint8_t>(key) & 0x0f), static_cast<int>(buffer.size()),
                       buffer.data());
  // libsgutils2 writes "Illegal Request"; SPC-5 and every log reader know it as ILLEGAL REQUEST.
  std::string text(buffer.data());
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

std::string asc_ascq_text(std::uint8_t asc, std::uint8_t ascq) {
  std::array<char, 160> buffer{};
  sg_get_asc_ascq_str(asc, ascq, static_cast<int>(buffer.size()), buffer.data());
  std::string_view text(buffer.data());
  // Entries of the table come as "Additional sense: <text>"; the prefix says nothing here.
  constexpr std::string_view prefix = "Additional sense: ";
  if (text.starts_with(prefix)) text.remove_prefix(prefix.size());
  return std::string(text);
}

std::string sense_text(const SenseData& sense) {
  char codes[16];
  std::snprintf(codes, sizeof codes, " %02x/%02x: ", sense.asc, sense.ascq);
  return sense_key_text(sense.key) + codes + asc_ascq_text(sense.asc, sense.ascq);
}

}  // namespace iserkit::scsi

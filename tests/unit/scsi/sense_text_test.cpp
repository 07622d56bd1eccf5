// Sense data in words (iserkit/scsi/sense_text.hpp): the sense key and ASC/ASCQ texts come from
// libsgutils2's tables (SPC-5 §4.4.4, Annex D), and the SCSI error category uses them.
#include "iserkit/scsi/sense_text.hpp"

#include <gtest/gtest.h>

using namespace iserkit::scsi;

TEST(SenseText, KeysInCapitalsAsSpcSpellsThem) {
  EXPECT_EQ(sense_key_text(SenseKey::illegal_request), "ILLEGAL REQUEST");
  EXPECT_EQ(sense_key_text(SenseKey::data_protect), "DATA PROTECT");
  EXPECT_EQ(sense_key_text(SenseKey::unit_attention), "UNIT ATTENTION");
  EXPECT_EQ(sense_key_text(SenseKey::no_sense), "NO SENSE");
}

TEST(SenseText, AscAscqFromTheTable) {
  EXPECT_EQ(asc_ascq_text(0x25, 0x00), "Logical unit not supported");
  EXPECT_EQ(asc_ascq_text(0x27, 0x00), "Write protected");
  EXPECT_EQ(asc_ascq_text(0x21, 0x00), "Logical block address out of range");
  EXPECT_EQ(asc_ascq_text(0x2a, 0x09), "Capacity data has changed");
}

TEST(SenseText, UnknownPairIsStillText) {
  const auto text = asc_ascq_text(0x80, 0x01);
  EXPECT_NE(text.find("80"), std::string::npos) << text;
  EXPECT_NE(text.find("01"), std::string::npos) << text;
}

TEST(SenseText, OneLine) {
  EXPECT_EQ(sense_text(SenseData::make(SenseKey::illegal_request, asc::logical_unit_not_supported)),
            "ILLEGAL REQUEST 25/00: Logical unit not supported");
  EXPECT_EQ(sense_text(SenseData::make(SenseKey::data_protect, asc::write_protected)),
            "DATA PROTECT 27/00: Write protected");
}

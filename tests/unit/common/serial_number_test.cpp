// RFC 1982 serial number comparisons with SERIAL_BITS = 32.
#include "iserkit/common/serial_number.hpp"

#include <gtest/gtest.h>

namespace iserkit {
namespace {

TEST(SerialNumber, OrdinaryComparison) {
  EXPECT_LT(SerialNumber(1), SerialNumber(2));
  EXPECT_GT(SerialNumber(2), SerialNumber(1));
  EXPECT_LE(SerialNumber(5), SerialNumber(5));
  EXPECT_FALSE(SerialNumber(5) < SerialNumber(5));
}

TEST(SerialNumber, WrapsAroundAt2To32) {
  EXPECT_LT(SerialNumber(0xffffffffu), SerialNumber(0));
  EXPECT_LT(SerialNumber(0xfffffff0u), SerialNumber(0x10));
  EXPECT_GT(SerialNumber(3), SerialNumber(0xfffffffeu));
  EXPECT_EQ((SerialNumber(0xffffffffu) + 2).value(), 1u);
  EXPECT_EQ(SerialNumber(1).distance_from(SerialNumber(0xffffffffu)), 2u);
}

TEST(SerialNumber, ExactlyHalfApartIsUndefinedSoNeitherIsLess) {
  // RFC 1982 §3.2: i1 and i2 2^31 apart compare as undefined.
  EXPECT_FALSE(SerialNumber(0) < SerialNumber(0x80000000u));
  EXPECT_FALSE(SerialNumber(0x80000000u) < SerialNumber(0));
}

TEST(SerialNumber, JustUnderHalfIsStillGreater) {
  EXPECT_LT(SerialNumber(0), SerialNumber(0x7fffffffu));
  EXPECT_GT(SerialNumber(0), SerialNumber(0x80000001u));
}

}  // namespace
}  // namespace iserkit

// Text key=value codec (RFC 7143 §6.1).
#include "iserkit/iscsi/text.hpp"

#include <gtest/gtest.h>

namespace iserkit::iscsi {
namespace {

std::vector<std::byte> bytes_of(std::string_view s) { return {as_bytes(s).begin(), as_bytes(s).end()}; }

TEST(Text, EncodesNulTerminatedPairs) {
  const auto out = encode_text({{"InitiatorName", "iqn.x"}, {"SessionType", "Normal"}});
  EXPECT_EQ(out, bytes_of(std::string_view("InitiatorName=iqn.x\0SessionType=Normal\0", 39)));
}

TEST(Text, DecodesAndKeepsRepeatedKeysInOrder) {
  auto r = decode_text(bytes_of(std::string_view("TargetName=a\0TargetAddress=1:3260,1\0TargetName=b\0", 50)));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[2].value, "b");
  EXPECT_EQ(*find_value(*r, "TargetAddress"), "1:3260,1");
  EXPECT_EQ(find_value(*r, "Nope"), nullptr);
}

TEST(Text, AcceptsMissingFinalNulAndEmptyValue) {
  auto r = decode_text(bytes_of(std::string_view("A=\0B=2", 6)));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].value, "");
  EXPECT_EQ((*r)[1].value, "2");
}

TEST(Text, RejectsPairWithoutEquals) { EXPECT_FALSE(decode_text(bytes_of(std::string_view("Oops\0", 5)))); }
TEST(Text, RejectsBadKeyCharacters) { EXPECT_FALSE(decode_text(bytes_of(std::string_view("a b=1\0", 6)))); }
TEST(Text, RejectsOverlongKey) { EXPECT_FALSE(decode_text(bytes_of(std::string(64, 'K') + "=1"))); }

}  // namespace
}  // namespace iserkit::iscsi

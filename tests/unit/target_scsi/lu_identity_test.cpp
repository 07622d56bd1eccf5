// LU identity (target/include/iserkit/target/lu_identity.hpp, docs/lu-identity.md): UUID text
// forms (RFC 9562 §4), version 4 and version 5 UUIDs (§5.4, §5.5; the v5 vectors computed with
// Python's uuid.uuid5), the NAA IEEE Registered Extended designator derived from a UUID (SPC-5
// §7.7.6.6; vectors computed independently in Python), configured NAA designators and serials.
#include "iserkit/target/lu_identity.hpp"

#include <gtest/gtest.h>

#include <set>

namespace iserkit::target {
namespace {

TEST(Uuid, ParsesAndFormatsTheCanonicalForm) {
  auto u = parse_uuid("9BF074CC-cb20-4476-AFE9-95d0ab4e2176");
  ASSERT_TRUE(u);
  EXPECT_EQ(to_string(*u), "9bf074cc-cb20-4476-afe9-95d0ab4e2176");
  EXPECT_EQ(u->bytes[0], 0x9b);
  EXPECT_EQ(u->bytes[15], 0x76);
  auto bare = parse_uuid("9bf074cccb204476afe995d0ab4e2176");
  ASSERT_TRUE(bare);
  EXPECT_EQ(*bare, *u);
  EXPECT_EQ(unit_serial_from_uuid(*u), "9bf074cccb204476afe995d0ab4e2176");
}

TEST(Uuid, RefusesWhatIsNoUuid) {
  for (const char* bad : {"", "9bf074cc-cb20-4476-afe9-95d0ab4e217", "9bf074cc-cb20-4476-afe9-95d0ab4e21766",
                          "9bf074cccb20-4476-afe9-95d0ab4e2176-", "9bf074cc-cb20-4476-afe9_95d0ab4e2176",
                          "9bf074cc-cb20-4476-afe9-95d0ab4e217g", "00000000-0000-0000-0000-000000000000",
                          "{9bf074cc-cb20-4476-afe9-95d0ab4e2176}"}) {
    EXPECT_FALSE(parse_uuid(bad)) << bad;
  }
}

TEST(Uuid, RandomUuidsAreVersion4AndDistinct) {
  std::set<Uuid> seen;
  for (int i = 0; i < 1000; ++i) {
    auto u = random_uuid();
    ASSERT_TRUE(u);
    EXPECT_EQ(u->bytes[6] >> 4, 4);       // RFC 9562 §5.4: version 4
    EXPECT_EQ(u->bytes[8] & 0xc0, 0x80);  // variant 10b
    EXPECT_TRUE(seen.insert(*u).second);
    EXPECT_EQ(*parse_uuid(to_string(*u)), *u);
  }
}

TEST(Uuid, NameBasedUuidsAreVersion5InIserkitsNamespace) {
  // python3 -c 'import uuid; print(uuid.uuid5(uuid.UUID("23a4e823-ba11-4ae3-b5ad-d63509376dae"), NAME))'
  EXPECT_EQ(to_string(name_based_uuid("storage:rbd:x/1/abc")), "712a721f-3a19-5c76-a6b4-3ab255887806");
  const auto a = name_based_uuid("host-file:3d1219c7c4c5404aaa1f6d2a48adfda4:254:0:1234");
  EXPECT_EQ(a, name_based_uuid("host-file:3d1219c7c4c5404aaa1f6d2a48adfda4:254:0:1234"));
  EXPECT_NE(a, name_based_uuid("host-file:3d1219c7c4c5404aaa1f6d2a48adfda4:254:0:1235"));
  EXPECT_EQ(a.bytes[6] >> 4, 5);
  EXPECT_EQ(a.bytes[8] & 0xc0, 0x80);
}

std::string hex(const std::array<std::uint8_t, 16>& bytes) {
  std::string out;
  for (auto b : bytes) out += "0123456789abcdef"[b >> 4], out += "0123456789abcdef"[b & 0xf];
  return out;
}

TEST(NaaFromUuid, IsNaa6WithTheLocalCompanyIdAnd100BitsOfTheUuid) {
  // Vectors: int(kept[:100]) with kept = the UUID's bits without 48..51 and 64..65, in Python.
  EXPECT_EQ(hex(naa_from_uuid(*parse_uuid("9bf074cc-cb20-4476-afe9-95d0ab4e2176"))), "60249539bf074cccb20476bfa65742ad");
  EXPECT_EQ(hex(naa_from_uuid(*parse_uuid("79c94a78-3e64-45d4-8f8a-256534ce3612"))), "602495379c94a783e645d43e289594d3");
  const auto naa = naa_from_uuid(*parse_uuid("ffffffff-ffff-4fff-bfff-ffffffffffff"));
  EXPECT_EQ(hex(naa), "6024953fffffffffffffffffffffffff");
  // The company id is in the IEEE 802c AAI quadrant: U/L bit 1, I/G bit 0, SLAP Y = Z = 0.
  EXPECT_EQ((naa_local_company_id >> 16) & 0x0f, 0x2u);
}

TEST(NaaFromUuid, UuidsThatDifferOnlyInVersionOrVariantGiveTheSameNaa) {
  // Those bits are constant among the UUIDs we make, so they carry nothing; the rest does.
  auto a = *parse_uuid("9bf074cc-cb20-4476-afe9-95d0ab4e2176");
  auto b = a;
  b.bytes[6] = static_cast<std::uint8_t>((b.bytes[6] & 0x0f) | 0x50);
  EXPECT_EQ(naa_from_uuid(a), naa_from_uuid(b));
  auto c = a;
  c.bytes[5] ^= 1;  // bit 47
  EXPECT_NE(naa_from_uuid(a), naa_from_uuid(c));
}

TEST(NaaDesignator, ParsesConfiguredValues) {
  auto six = parse_naa_designator("naa.6001405ABCDEF0123456789abcdef012");
  ASSERT_TRUE(six);
  ASSERT_EQ(six->size(), 16u);
  EXPECT_EQ((*six)[0], 0x60);
  EXPECT_EQ((*six)[15], 0x12);
  for (const char* eight : {"2000001122334455", "3fffffffffffffff", "5000c50012345678"}) {
    auto v = parse_naa_designator(eight);
    ASSERT_TRUE(v) << eight;
    EXPECT_EQ(v->size(), 8u);
  }
  for (const char* bad : {"", "naa.", "600140", "1000001122334455", "6000001122334455", "4000001122334455",
                          "30000011223344556677889900112233", "5000c5001234567g", "naa.naa.5000c50012345678"}) {
    EXPECT_FALSE(parse_naa_designator(bad)) << bad;
  }
}

TEST(UnitSerial, PrintableAsciiWithoutCommaUpTo247Bytes) {
  EXPECT_TRUE(check_unit_serial("A"));
  EXPECT_TRUE(check_unit_serial("SN 0001-~"));
  EXPECT_TRUE(check_unit_serial(std::string(247, 'x')));
  EXPECT_FALSE(check_unit_serial(""));
  EXPECT_FALSE(check_unit_serial(std::string(248, 'x')));
  EXPECT_FALSE(check_unit_serial("a,b"));
  EXPECT_FALSE(check_unit_serial("tab\there"));
  EXPECT_FALSE(check_unit_serial("caf\xc3\xa9"));
}

}  // namespace
}  // namespace iserkit::target

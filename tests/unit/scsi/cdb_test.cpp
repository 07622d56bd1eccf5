// CDB builders ↔ target-side parsers (SBC-4 §5, SPC-5 §6): round trips for every READ/WRITE
// variant and the other commands, fixed byte layouts, limits, and UNMAP parameter list checks.
#include <gtest/gtest.h>

#include <vector>

#include "iserkit/scsi/cdb.hpp"

namespace iserkit::scsi {
namespace {

int byte(const Cdb& c, std::size_t i) { return static_cast<int>(c.bytes[i]); }

struct RwCase {
  const char* name;
  Result<Cdb> (*build)(const ReadWriteOptions&);
  Opcode opcode;
  std::uint64_t max_lba;
  std::uint32_t max_blocks;
  bool flags;
};

Result<Cdb> r16(const ReadWriteOptions& o) { return read16(o); }
Result<Cdb> w16(const ReadWriteOptions& o) { return write16(o); }

const RwCase rw_cases[] = {
    {"read6", read6, Opcode::read6, 0x1fffff, 256, false},
    {"read10", read10, Opcode::read10, 0xffffffffu, 0xffff, true},
    {"read12", read12, Opcode::read12, 0xffffffffu, 0xffffffffu, true},
    {"read16", r16, Opcode::read16, ~0ull, 0xffffffffu, true},
    {"write6", write6, Opcode::write6, 0x1fffff, 256, false},
    {"write10", write10, Opcode::write10, 0xffffffffu, 0xffff, true},
    {"write12", write12, Opcode::write12, 0xffffffffu, 0xffffffffu, true},
    {"write16", w16, Opcode::write16, ~0ull, 0xffffffffu, true},
};

TEST(Cdb, ReadWriteRoundTripEveryVariant) {
  for (const auto& c : rw_cases) {
    SCOPED_TRACE(c.name);
    for (std::uint64_t lba : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{0x12345}, c.max_lba}) {
      for (std::uint32_t blocks : {1u, 7u, c.max_blocks}) {
        for (bool fua : {false, true}) {
          if (fua && !c.flags) continue;
          const auto cdb = c.build({.lba = lba, .blocks = blocks, .fua = fua, .dpo = fua});
          ASSERT_TRUE(cdb);
          EXPECT_EQ(cdb->opcode(), c.opcode);
          const auto p = parse_read_write_cdb(cdb->span());
          ASSERT_TRUE(p);
          EXPECT_EQ(p->opcode, c.opcode);
          EXPECT_EQ(p->lba, lba);
          EXPECT_EQ(p->blocks, blocks);
          EXPECT_EQ(p->fua, fua);
          EXPECT_EQ(p->dpo, fua);
          EXPECT_EQ(p->protect, 0);
          EXPECT_EQ(p->is_write(), c.name[0] == 'w');
        }
      }
    }
    if (c.max_lba != ~0ull) {
      EXPECT_FALSE(c.build({.lba = c.max_lba + 1, .blocks = 1}));
    }
  }
}

TEST(Cdb, Read6Encodes256AsZero) {
  const auto cdb = read6({.lba = 0x1abcde, .blocks = 256});
  ASSERT_TRUE(cdb);
  EXPECT_EQ(cdb->size(), 6u);
  EXPECT_EQ(byte(*cdb, 1), 0x1a);
  EXPECT_EQ(byte(*cdb, 2), 0xbc);
  EXPECT_EQ(byte(*cdb, 3), 0xde);
  EXPECT_EQ(byte(*cdb, 4), 0);
  EXPECT_FALSE(read6({.lba = 0, .blocks = 257}));
  EXPECT_FALSE(read6({.lba = 0, .blocks = 1, .fua = true}));
  EXPECT_FALSE(read10({.lba = 0, .blocks = 0x10000}));
}

TEST(Cdb, Write16Layout) {
  const Cdb c = write16({.lba = 0x0102030405060708ull, .blocks = 0x0a0b0c0d, .fua = true});
  EXPECT_EQ(c.size(), 16u);
  EXPECT_EQ(byte(c, 0), 0x8a);
  EXPECT_EQ(byte(c, 1), 0x08);
  EXPECT_EQ(byte(c, 2), 0x01);
  EXPECT_EQ(byte(c, 9), 0x08);
  EXPECT_EQ(byte(c, 10), 0x0a);
  EXPECT_EQ(byte(c, 13), 0x0d);
}

TEST(Cdb, ParseRejectsShortAndForeign) {
  const Cdb c = read16({.lba = 1, .blocks = 1});
  const auto p = parse_read_write_cdb(c.span().first(10));
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().asc_pair(), asc::invalid_command_operation_code);
  EXPECT_FALSE(parse_read_write_cdb(inquiry({}).span()));
}

TEST(Cdb, ProtectFieldDecoded) {
  Cdb c = read10({.lba = 0, .blocks = 1}).value();
  c.bytes[1] = std::byte{0x20};
  EXPECT_EQ(parse_read_write_cdb(c.span())->protect, 1);
}

TEST(Cdb, CdbLengthByGroup) {
  EXPECT_EQ(cdb_length_for(0x12), 6u);
  EXPECT_EQ(cdb_length_for(0x28), 10u);
  EXPECT_EQ(cdb_length_for(0x5a), 10u);
  EXPECT_EQ(cdb_length_for(0x88), 16u);
  EXPECT_EQ(cdb_length_for(0xa0), 12u);
  EXPECT_EQ(cdb_length_for(0x7f), 0u);
  EXPECT_EQ(cdb_length_for(0xc0), 0u);
}

TEST(Cdb, SynchronizeCacheRoundTrip) {
  const auto a = synchronize_cache10({.lba = 100, .blocks = 8, .immed = true});
  ASSERT_TRUE(a);
  const auto pa = parse_synchronize_cache_cdb(a->span());
  ASSERT_TRUE(pa);
  EXPECT_EQ(pa->lba, 100u);
  EXPECT_EQ(pa->blocks, 8u);
  EXPECT_TRUE(pa->immed);
  const auto pb = parse_synchronize_cache_cdb(synchronize_cache16({.lba = 1ull << 40, .blocks = 0}).span());
  ASSERT_TRUE(pb);
  EXPECT_EQ(pb->lba, 1ull << 40);
  EXPECT_EQ(pb->blocks, 0u);
  EXPECT_FALSE(pb->immed);
}

TEST(Cdb, WriteSameRoundTripAndChecks) {
  const auto p16 = parse_write_same_cdb(write_same16({.lba = 5, .blocks = 9, .unmap = true, .ndob = true}).span());
  ASSERT_TRUE(p16);
  EXPECT_EQ(p16->lba, 5u);
  EXPECT_EQ(p16->blocks, 9u);
  EXPECT_TRUE(p16->unmap);
  EXPECT_TRUE(p16->ndob);
  const auto p10 = parse_write_same_cdb(write_same10({.lba = 7, .blocks = 3, .unmap = false}).value().span());
  ASSERT_TRUE(p10);
  EXPECT_EQ(p10->opcode, Opcode::write_same10);
  EXPECT_FALSE(p10->unmap);
  EXPECT_FALSE(write_same10({.ndob = true}));
  // ANCHOR without UNMAP is invalid (SBC-4 §5.50).
  Cdb bad = write_same16({.lba = 0, .blocks = 1});
  bad.bytes[1] = std::byte{0x10};
  const auto e = parse_write_same_cdb(bad.span());
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().asc_pair(), asc::invalid_field_in_cdb);
}

TEST(Cdb, UnmapParameterListRoundTrip) {
  const std::vector<UnmapDescriptor> ds{{.lba = 1, .blocks = 2}, {.lba = 1ull << 33, .blocks = 0xffff}};
  const auto list = unmap_parameter_list(ds);
  ASSERT_EQ(list.size(), 8u + 32u);
  EXPECT_EQ(load_be16(list.data()), 38);
  EXPECT_EQ(load_be16(list.data() + 2), 32);
  const auto parsed = parse_unmap_parameter_list(list);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(*parsed, ds);
  const Cdb c = unmap({.parameter_list_length_bytes = 40});
  const auto u = parse_unmap_cdb(c.span());
  ASSERT_TRUE(u);
  EXPECT_EQ(u->parameter_list_length_bytes, 40);
}

TEST(Cdb, UnmapParameterListValidation) {
  auto list = unmap_parameter_list(std::vector<UnmapDescriptor>{{.lba = 1, .blocks = 2}});
  // 1..7 bytes: PARAMETER LIST LENGTH ERROR.
  auto e = parse_unmap_parameter_list(ConstByteSpan(list.data(), 4));
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().asc_pair(), asc::parameter_list_length_error);
  // Header says more descriptor data than was sent.
  e = parse_unmap_parameter_list(ConstByteSpan(list.data(), 16));
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().asc_pair(), asc::parameter_list_length_error);
  // Empty list: no descriptors, no error.
  EXPECT_TRUE(parse_unmap_parameter_list({})->empty());
  // A descriptor length that is not a multiple of 16: the incomplete descriptor is ignored.
  store_be16(list.data() + 2, 15);
  EXPECT_TRUE(parse_unmap_parameter_list(list)->empty());
}

TEST(Cdb, InquiryChecks) {
  const auto q = parse_inquiry_cdb(inquiry({.evpd = true, .page_code = 0x83, .allocation_length = 1000}).span());
  ASSERT_TRUE(q);
  EXPECT_TRUE(q->evpd);
  EXPECT_EQ(q->page_code, 0x83);
  EXPECT_EQ(q->allocation_length, 1000);
  const auto e = parse_inquiry_cdb(inquiry({.evpd = false, .page_code = 0x80}).span());
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().asc_pair(), asc::invalid_field_in_cdb);
  ASSERT_TRUE(e.error().sense_key_specific);
  EXPECT_EQ((*e.error().sense_key_specific)[2], 2);  // field pointer: byte 2
}

TEST(Cdb, ReadCapacity16AndReportLuns) {
  const auto rc = parse_read_capacity16_cdb(read_capacity16({.allocation_length = 32}).span());
  ASSERT_TRUE(rc);
  EXPECT_EQ(*rc, 32u);
  Cdb wrong = read_capacity16();
  wrong.bytes[1] = std::byte{0x12};
  EXPECT_FALSE(parse_read_capacity16_cdb(wrong.span()));
  const auto rl = parse_report_luns_cdb(report_luns({.select_report = 2, .allocation_length = 64}).span());
  ASSERT_TRUE(rl);
  EXPECT_EQ(rl->select_report, 2);
  EXPECT_EQ(rl->allocation_length, 64u);
  EXPECT_FALSE(parse_report_luns_cdb(report_luns({.select_report = 3}).span()));
  EXPECT_FALSE(parse_report_luns_cdb(report_luns({.allocation_length = 3}).span()));
}

TEST(Cdb, ModeSenseAndRequestSense) {
  const auto m6 = parse_mode_sense_cdb(mode_sense6({.page_code = 0x08, .dbd = true, .allocation_length = 200}).value().span());
  ASSERT_TRUE(m6);
  EXPECT_FALSE(m6->ten);
  EXPECT_EQ(m6->page_code, 0x08);
  EXPECT_TRUE(m6->dbd);
  EXPECT_EQ(m6->allocation_length, 200);
  const auto m10 = parse_mode_sense_cdb(
      mode_sense10({.page_code = 0x3f, .subpage_code = 0xff, .pc = ModePageControl::changeable, .llbaa = true,
                    .allocation_length = 4000})
          .span());
  ASSERT_TRUE(m10);
  EXPECT_TRUE(m10->ten);
  EXPECT_TRUE(m10->llbaa);
  EXPECT_EQ(m10->pc, ModePageControl::changeable);
  EXPECT_EQ(m10->subpage_code, 0xff);
  EXPECT_EQ(m10->allocation_length, 4000);
  EXPECT_FALSE(mode_sense6({.allocation_length = 256}));
  const auto rs = parse_request_sense_cdb(request_sense({.descriptor_format = true, .allocation_length = 96}).span());
  ASSERT_TRUE(rs);
  EXPECT_TRUE(rs->descriptor_format);
  EXPECT_EQ(rs->allocation_length, 96);
  EXPECT_EQ(test_unit_ready().size(), 6u);
  EXPECT_EQ(byte(read_capacity10(), 0), 0x25);
}

}  // namespace
}  // namespace iserkit::scsi

// The target's SCSI device server (scsi_dispatcher.hpp) over a MemoryBackend: plan/execute for
// INQUIRY + VPD (SPC-5 §6.6, §7.7; SBC-4 §6.6), READ CAPACITY (SBC-4 §5.20/§5.21), REPORT LUNS
// (SPC-5 §6.33), MODE SENSE (SPC-5 §6.13/§6.14), REQUEST SENSE, READ/WRITE round trips, UNMAP,
// WRITE SAME, SYNCHRONIZE CACHE, and the error paths: LBA OUT OF RANGE without backend I/O,
// INVALID COMMAND OPERATION CODE, DATA PROTECT on read-only LUNs, LOGICAL UNIT NOT SUPPORTED.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "iserkit/scsi/cdb.hpp"
#include "iserkit/scsi/inquiry.hpp"
#include "iserkit/target/backends.hpp"
#include "iserkit/target/scsi_dispatcher.hpp"
#include "test_support.hpp"

namespace iserkit::target {
namespace {

using scsi::Lun;

class Dispatcher : public ::testing::Test {
 protected:
  void SetUp() override { add(0, 16u << 20, false); }

  test::CountingBackend& add(std::uint16_t index, std::uint64_t size, bool read_only, std::uint32_t bs = 512) {
    auto counting = std::make_shared<test::CountingBackend>(
        make_memory_backend({.size_bytes = size, .block_size_bytes = bs, .read_only = read_only}));
    LogicalUnitOptions o;
    o.identity.serial = "SN" + std::to_string(index);
    EXPECT_TRUE(dispatcher_.add_logical_unit(index, std::make_shared<LogicalUnit>(counting, o)));
    backends_.push_back(counting);
    return *counting;
  }

  // plan + (if no error) execute; `data` is the Data-Out for to_target commands.
  struct Run {
    CommandPlan plan;
    ScsiOutcome outcome;
    std::vector<std::byte> data_in;
  };
  Run run(const scsi::Cdb& cdb, std::vector<std::byte> data_out = {}, std::uint16_t lun = 0) {
    Run r;
    r.plan = dispatcher_.plan(Lun::from_index(lun), cdb.span());
    if (r.plan.error) {
      r.outcome = ScsiOutcome::check_condition(*r.plan.error);
      return r;
    }
    std::vector<std::byte> buffer(r.plan.transfer_length_bytes);
    if (r.plan.direction == DataDirection::to_target) {
      EXPECT_EQ(data_out.size(), buffer.size());
      buffer = data_out;
    }
    r.outcome = test::run(ctx_, dispatcher_.execute(Lun::from_index(lun), cdb.span(), r.plan, buffer));
    if (r.plan.direction == DataDirection::from_target) {
      buffer.resize(r.outcome.data_length_bytes);
      r.data_in = std::move(buffer);
    }
    return r;
  }

  static void expect_sense(const Run& r, scsi::SenseKey key, scsi::AscPair pair) {
    EXPECT_EQ(r.outcome.status, scsi::Status::check_condition);
    ASSERT_TRUE(r.outcome.sense);
    EXPECT_EQ(r.outcome.sense->key, key);
    EXPECT_EQ(r.outcome.sense->asc_pair(), pair);
  }

  asio::io_context ctx_;
  ScsiDispatcher dispatcher_;
  std::vector<std::shared_ptr<test::CountingBackend>> backends_;
};

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 7 + seed) & 0xff);
  return v;
}

TEST_F(Dispatcher, TestUnitReady) {
  const auto r = run(scsi::test_unit_ready());
  EXPECT_EQ(r.outcome.status, scsi::Status::good);
  EXPECT_EQ(r.plan.direction, DataDirection::none);
  expect_sense(run(scsi::test_unit_ready(), {}, 9), scsi::SenseKey::illegal_request,
               scsi::asc::logical_unit_not_supported);
}

TEST_F(Dispatcher, StandardInquiry) {
  const auto r = run(scsi::inquiry({.allocation_length = 255}));
  EXPECT_EQ(r.plan.transfer_length_bytes, 255u);
  EXPECT_EQ(r.plan.direction, DataDirection::from_target);
  ASSERT_EQ(r.outcome.status, scsi::Status::good);
  EXPECT_EQ(r.outcome.data_length_bytes, 96u);
  const auto d = scsi::parse_standard_inquiry(r.data_in);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->qualifier, scsi::PeripheralQualifier::connected);
  EXPECT_EQ(d->type, scsi::PeripheralType::direct_access_block);
  EXPECT_EQ(d->vendor, "ISERKIT");
  EXPECT_EQ(d->product, "VIRTUAL-DISK");
  EXPECT_EQ(d->version, 0x06);  // SPC-4
  // SAM-5, SPC-4, SBC-3 (libiscsi checks the VPD 0xb0 length against an SBC-3 claim), iSCSI.
  EXPECT_EQ(d->version_descriptors, (std::vector<std::uint16_t>{0x00a0, 0x0460, 0x04c0, 0x0960}));
}

TEST_F(Dispatcher, InquiryAllocationLengthTruncates) {
  const auto r = run(scsi::inquiry({.allocation_length = 10}));
  EXPECT_EQ(r.plan.transfer_length_bytes, 10u);
  EXPECT_EQ(r.outcome.data_length_bytes, 10u);
  const auto zero = run(scsi::inquiry({.allocation_length = 0}));
  EXPECT_EQ(zero.plan.direction, DataDirection::none);
  EXPECT_EQ(zero.outcome.status, scsi::Status::good);
  EXPECT_EQ(zero.outcome.data_length_bytes, 0u);
}

TEST_F(Dispatcher, InquiryMissingLun) {
  const auto r = run(scsi::inquiry({}), {}, 7);
  ASSERT_EQ(r.outcome.status, scsi::Status::good);
  const auto d = scsi::parse_standard_inquiry(r.data_in);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->qualifier, scsi::PeripheralQualifier::not_supported);
  EXPECT_EQ(d->type, scsi::PeripheralType::unknown_or_none);
  EXPECT_EQ(static_cast<int>(r.data_in[0]), 0x7f);
}

TEST_F(Dispatcher, InquiryInvalidFields) {
  expect_sense(run(scsi::inquiry({.evpd = false, .page_code = 0x83})), scsi::SenseKey::illegal_request,
               scsi::asc::invalid_field_in_cdb);
  expect_sense(run(scsi::inquiry({.evpd = true, .page_code = 0x99})), scsi::SenseKey::illegal_request,
               scsi::asc::invalid_field_in_cdb);
}

// The LU identity (docs/lu-identity.md): serial, NAA and T10 designator of VPD 0x80/0x83 all come
// from the unit's UUID; a configured serial or NAA replaces the derived one, the T10 designator
// follows the serial.
std::vector<scsi::Designator> lu_designators(const std::vector<std::byte>& page) {
  auto ds = scsi::parse_device_identification(page);
  EXPECT_TRUE(ds);
  std::vector<scsi::Designator> out;
  if (ds)
    for (auto& d : *ds)
      if (d.association == scsi::Association::logical_unit) out.push_back(d);
  return out;
}

std::string text_of(const scsi::Designator& d) {
  return std::string(reinterpret_cast<const char*>(d.value.data()), d.value.size());
}

TEST(LogicalUnitIdentityVpd, SerialNaaAndT10DeriveFromTheUuid) {
  asio::io_context ctx;
  ScsiDispatcher dispatcher;
  LogicalUnitOptions o;
  o.identity.uuid = *parse_uuid("9bf074cc-cb20-4476-afe9-95d0ab4e2176");
  ASSERT_TRUE(dispatcher.add_logical_unit(0, std::make_shared<LogicalUnit>(make_memory_backend({.size_bytes = 1u << 20}), o)));
  auto vpd = [&](std::uint8_t page) {
    const auto cdb = scsi::inquiry({.evpd = true, .page_code = page, .allocation_length = 512});
    const auto plan = dispatcher.plan(Lun::from_index(0), cdb.span());
    EXPECT_FALSE(plan.error);
    std::vector<std::byte> buffer(plan.transfer_length_bytes);
    const auto outcome = test::run(ctx, dispatcher.execute(Lun::from_index(0), cdb.span(), plan, buffer));
    buffer.resize(outcome.data_length_bytes);
    return buffer;
  };
  EXPECT_EQ(*scsi::parse_unit_serial_number(vpd(0x80)), "9bf074cccb204476afe995d0ab4e2176");
  const auto ds = lu_designators(vpd(0x83));
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_EQ(ds[0].type, scsi::DesignatorType::naa);
  EXPECT_EQ(scsi::designator_text(ds[0]), "naa 60249539bf074cccb20476bfa65742ad");  // computed independently (Python)
  EXPECT_EQ(ds[1].type, scsi::DesignatorType::t10_vendor_id);
  EXPECT_EQ(text_of(ds[1]), "ISERKIT 9bf074cccb204476afe995d0ab4e2176");
}

TEST(LogicalUnitIdentityVpd, ConfiguredSerialAndNaaWin) {
  const auto uuid = *parse_uuid("9bf074cc-cb20-4476-afe9-95d0ab4e2176");
  LogicalUnitOptions o;
  o.identity.uuid = uuid;
  o.identity.serial = "LEGACY-0001";
  o.identity.naa = *parse_naa_designator("naa.6001405abcdef0123456789abcdef012");
  LogicalUnit unit(make_memory_backend({.size_bytes = 1u << 20}), o);
  EXPECT_EQ(unit.serial(), "LEGACY-0001");
  ASSERT_EQ(unit.naa().size(), 16u);
  EXPECT_EQ(unit.naa()[0], 0x60);
  EXPECT_EQ(unit.naa()[1], 0x01);
  EXPECT_EQ(unit.uuid(), uuid);
  // Two units with only different UUIDs differ in serial and NAA; the same UUID gives the same.
  LogicalUnitOptions a, b, c;
  a.identity.uuid = uuid;
  b.identity.uuid = *parse_uuid("79c94a78-3e64-45d4-8f8a-256534ce3612");
  c.identity.uuid = uuid;
  LogicalUnit ua(make_memory_backend({.size_bytes = 1u << 20}), a), ub(make_memory_backend({.size_bytes = 1u << 20}), b),
      uc(make_memory_backend({.size_bytes = 1u << 20}), c);
  EXPECT_NE(ua.serial(), ub.serial());
  EXPECT_FALSE(std::equal(ua.naa().begin(), ua.naa().end(), ub.naa().begin(), ub.naa().end()));
  EXPECT_EQ(ua.serial(), uc.serial());
  EXPECT_TRUE(std::equal(ua.naa().begin(), ua.naa().end(), uc.naa().begin(), uc.naa().end()));
}

TEST(LogicalUnitIdentityVpd, WithoutUuidTheNameComesFromVendorProductSerial) {
  LogicalUnitOptions o;
  o.identity.serial = "SN0";
  LogicalUnit one(make_memory_backend({.size_bytes = 1u << 20}), o), two(make_memory_backend({.size_bytes = 1u << 20}), o);
  EXPECT_EQ(one.uuid(), two.uuid());
  EXPECT_EQ(one.uuid(), name_based_uuid("unit:ISERKIT\nVIRTUAL-DISK\nSN0"));
  o.identity.serial = "SN1";
  LogicalUnit three(make_memory_backend({.size_bytes = 1u << 20}), o);
  EXPECT_NE(one.uuid(), three.uuid());
}

TEST_F(Dispatcher, VpdPages) {
  auto r = run(scsi::inquiry({.evpd = true, .page_code = 0x00}));
  EXPECT_EQ(*scsi::parse_supported_vpd_pages(r.data_in), (std::vector<std::uint8_t>{0x00, 0x80, 0x83, 0x8f, 0xb0, 0xb1, 0xb2}));
  r = run(scsi::inquiry({.evpd = true, .page_code = 0x80}));
  EXPECT_EQ(*scsi::parse_unit_serial_number(r.data_in), "SN0");
  r = run(scsi::inquiry({.evpd = true, .page_code = 0x83}));
  const auto ds = scsi::parse_device_identification(r.data_in);
  ASSERT_TRUE(ds);
  ASSERT_EQ(ds->size(), 4u);  // two of the LU, then the target port and its group (ALUA)
  EXPECT_EQ((*ds)[0].type, scsi::DesignatorType::naa);
  ASSERT_EQ((*ds)[0].value.size(), 16u);
  EXPECT_EQ(static_cast<int>((*ds)[0].value[0]) >> 4, 6);  // NAA IEEE Registered Extended
  EXPECT_EQ((*ds)[1].type, scsi::DesignatorType::t10_vendor_id);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*ds)[1].value.data()), (*ds)[1].value.size()), "ISERKIT SN0");
  EXPECT_EQ((*ds)[2].type, scsi::DesignatorType::relative_target_port);
  EXPECT_EQ((*ds)[2].association, scsi::Association::target_port);
  EXPECT_EQ((*ds)[3].type, scsi::DesignatorType::target_port_group);
  r = run(scsi::inquiry({.evpd = true, .page_code = 0xb0}));
  const auto bl = scsi::parse_block_limits(r.data_in);
  ASSERT_TRUE(bl);
  EXPECT_EQ(bl->maximum_transfer_length, (32u << 20) / 512);
  EXPECT_EQ(bl->maximum_compare_and_write_length, 255);
  EXPECT_EQ(bl->maximum_atomic_transfer_length, bl->maximum_transfer_length);
  EXPECT_EQ(bl->maximum_unmap_block_descriptor_count, 256u);
  EXPECT_GT(bl->maximum_unmap_lba_count, 0u);
  EXPECT_FALSE(bl->wsnz);  // WRITE SAME with 0 blocks writes to the end
  r = run(scsi::inquiry({.evpd = true, .page_code = 0xb1}));
  EXPECT_EQ(scsi::parse_block_device_characteristics(r.data_in)->medium_rotation_rate, 1);
  r = run(scsi::inquiry({.evpd = true, .page_code = 0xb2}));
  const auto lbp = scsi::parse_logical_block_provisioning(r.data_in);
  ASSERT_TRUE(lbp);
  EXPECT_TRUE(lbp->lbpu);
  EXPECT_TRUE(lbp->lbpws);
  EXPECT_TRUE(lbp->lbpws10);
  EXPECT_EQ(lbp->lbprz, 1);
}

TEST_F(Dispatcher, ReadCapacity) {
  auto r = run(scsi::read_capacity10());
  const auto c10 = scsi::parse_read_capacity10(r.data_in);
  ASSERT_TRUE(c10);
  EXPECT_EQ(c10->last_lba, (16u << 20) / 512 - 1);
  EXPECT_EQ(c10->block_length_bytes, 512u);
  r = run(scsi::read_capacity16({.allocation_length = 32}));
  const auto c16 = scsi::parse_read_capacity16(r.data_in);
  ASSERT_TRUE(c16);
  EXPECT_EQ(c16->last_lba, (16u << 20) / 512 - 1);
  EXPECT_TRUE(c16->lbpme);
  EXPECT_TRUE(c16->lbprz);
  // Allocation length below 32 truncates.
  r = run(scsi::read_capacity16({.allocation_length = 12}));
  EXPECT_EQ(r.outcome.data_length_bytes, 12u);
}

TEST_F(Dispatcher, ReadCapacity10SaturatesOnHugeLun) {
  add(1, 3ull << 40, false);  // 3 TiB sparse: more than 2^32 blocks of 512 bytes
  auto r = run(scsi::read_capacity10(), {}, 1);
  EXPECT_EQ(scsi::parse_read_capacity10(r.data_in)->last_lba, 0xffffffffu);
  r = run(scsi::read_capacity16(), {}, 1);
  EXPECT_EQ(scsi::parse_read_capacity16(r.data_in)->last_lba, (3ull << 40) / 512 - 1);
}

TEST_F(Dispatcher, ReportLuns) {
  add(5, 1u << 20, false);
  auto r = run(scsi::report_luns({.select_report = 0, .allocation_length = 512}), {}, 3);  // from a LUN without LU
  ASSERT_EQ(r.outcome.status, scsi::Status::good);
  EXPECT_EQ(*scsi::parse_report_luns(r.data_in), (std::vector<Lun>{Lun::from_index(0), Lun::from_index(5)}));
  r = run(scsi::report_luns({.select_report = 1, .allocation_length = 512}));
  EXPECT_TRUE(scsi::parse_report_luns(r.data_in)->empty());
  r = run(scsi::report_luns({.select_report = 0, .allocation_length = 16}));
  EXPECT_EQ(r.outcome.data_length_bytes, 16u);
  EXPECT_EQ(*scsi::report_luns_full_size(r.data_in), 24u);
  expect_sense(run(scsi::report_luns({.select_report = 7})), scsi::SenseKey::illegal_request,
               scsi::asc::invalid_field_in_cdb);
}

// Found by fuzz_dispatcher: the plan of a REPORT LUNS with ALLOCATION LENGTH 0xffffffff asked the
// transport for a 4 GiB buffer. Allocation lengths are cut to max_data_in_allocation_bytes; the
// answer is unchanged (the whole LUN list, shorter than any allocation length it was cut to).
TEST_F(Dispatcher, HugeAllocationLengthPlansABoundedBuffer) {
  add(5, 1u << 20, false);
  const auto cdb = scsi::report_luns({.select_report = 0, .allocation_length = 0xffffffffu});
  const CommandPlan plan = dispatcher_.plan(Lun::from_index(0), cdb.span());
  ASSERT_FALSE(plan.rejected());
  EXPECT_EQ(plan.direction, DataDirection::from_target);
  EXPECT_EQ(plan.transfer_length_bytes, max_data_in_allocation_bytes);
  const auto r = run(cdb);
  ASSERT_EQ(r.outcome.status, scsi::Status::good);
  EXPECT_EQ(*scsi::parse_report_luns(r.data_in), (std::vector<Lun>{Lun::from_index(0), Lun::from_index(5)}));
  // A small allocation length is kept as it is.
  EXPECT_EQ(dispatcher_.plan(Lun::from_index(0), scsi::report_luns({.allocation_length = 16}).span())
                .transfer_length_bytes, 16u);
}

TEST_F(Dispatcher, RequestSenseReportsNoSense) {
  const auto r = run(scsi::request_sense({.allocation_length = 252}));
  ASSERT_EQ(r.outcome.status, scsi::Status::good);
  EXPECT_EQ(r.data_in.size(), 18u);
  const auto s = scsi::decode_sense(r.data_in);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->key, scsi::SenseKey::no_sense);
  const auto missing = run(scsi::request_sense({}), {}, 4);
  EXPECT_EQ(scsi::decode_sense(missing.data_in)->asc_pair(), scsi::asc::logical_unit_not_supported);
}

TEST_F(Dispatcher, ModeSense6AllPages) {
  const auto r = run(scsi::mode_sense6({.page_code = 0x3f, .allocation_length = 255}).value());
  ASSERT_EQ(r.outcome.status, scsi::Status::good);
  const auto& d = r.data_in;
  ASSERT_EQ(d.size(), 4u + 8u + 20u + 12u);
  EXPECT_EQ(static_cast<int>(d[0]), static_cast<int>(d.size() - 1));
  EXPECT_EQ(static_cast<int>(d[2]), 0x10);  // DPOFUA, not WP
  EXPECT_EQ(static_cast<int>(d[3]), 8);     // one short block descriptor
  EXPECT_EQ(load_be32(d.data() + 4), (16u << 20) / 512);
  EXPECT_EQ(load_be24(d.data() + 9), 512u);
  EXPECT_EQ(static_cast<int>(d[12]), 0x08);  // caching page
  EXPECT_EQ(static_cast<int>(d[32]), 0x0a);  // control page
}

TEST_F(Dispatcher, ModeSenseReadOnlyDbdAndLongLba) {
  add(2, 1u << 20, true);
  auto r = run(scsi::mode_sense6({.page_code = 0x08, .dbd = true}).value(), {}, 2);
  ASSERT_EQ(r.data_in.size(), 4u + 20u);
  EXPECT_EQ(static_cast<int>(r.data_in[2]) & 0x80, 0x80);  // WP
  EXPECT_EQ(static_cast<int>(r.data_in[3]), 0);
  r = run(scsi::mode_sense10({.page_code = 0x0a, .llbaa = true, .allocation_length = 512}));
  ASSERT_EQ(r.data_in.size(), 8u + 16u + 12u);
  EXPECT_EQ(load_be16(r.data_in.data() + 6), 16);
  EXPECT_EQ(load_be64(r.data_in.data() + 8), (16u << 20) / 512);
  expect_sense(run(scsi::mode_sense6({.page_code = 0x1c}).value()), scsi::SenseKey::illegal_request,
               scsi::asc::invalid_field_in_cdb);
  expect_sense(run(scsi::mode_sense10({.pc = scsi::ModePageControl::saved})), scsi::SenseKey::illegal_request,
               scsi::asc::saving_parameters_not_supported);
}

TEST_F(Dispatcher, ReadWriteRoundTripEveryVariant) {
  using Builder = Result<scsi::Cdb> (*)(const scsi::ReadWriteOptions&);
  const Builder writes[] = {scsi::write6, scsi::write10, scsi::write12,
                            [](const scsi::ReadWriteOptions& o) -> Result<scsi::Cdb> { return scsi::write16(o); }};
  const Builder reads[] = {scsi::read6, scsi::read10, scsi::read12,
                           [](const scsi::ReadWriteOptions& o) -> Result<scsi::Cdb> { return scsi::read16(o); }};
  for (unsigned w = 0; w < 4; ++w) {
    for (unsigned rd = 0; rd < 4; ++rd) {
      const std::uint64_t lba = 100 + 10 * (4 * w + rd);
      const auto data = pattern(4 * 512, 4 * w + rd);
      const auto wr = run(writes[w]({.lba = lba, .blocks = 4}).value(), data);
      ASSERT_EQ(wr.outcome.status, scsi::Status::good);
      EXPECT_EQ(wr.plan.direction, DataDirection::to_target);
      EXPECT_EQ(wr.plan.transfer_length_bytes, 2048u);
      const auto r = run(reads[rd]({.lba = lba, .blocks = 4}).value());
      ASSERT_EQ(r.outcome.status, scsi::Status::good);
      EXPECT_EQ(r.data_in, data);
    }
  }
}

TEST_F(Dispatcher, Read6ZeroMeans256Blocks) {
  scsi::Cdb c = scsi::read6({.lba = 0, .blocks = 1}).value();
  c.bytes[4] = std::byte{0};
  const auto p = dispatcher_.plan(Lun::from_index(0), c.span());
  ASSERT_FALSE(p.error);
  EXPECT_EQ(p.transfer_length_bytes, 256u * 512u);
}

TEST_F(Dispatcher, ZeroLengthReadWriteIsGoodWithoutIo) {
  const auto r = run(scsi::read10({.lba = 5, .blocks = 0}).value());
  EXPECT_EQ(r.outcome.status, scsi::Status::good);
  EXPECT_EQ(r.plan.direction, DataDirection::none);
  const auto w = run(scsi::write16({.lba = 5, .blocks = 0}));
  EXPECT_EQ(w.outcome.status, scsi::Status::good);
  EXPECT_EQ(backends_[0]->total(), 0);
}

TEST_F(Dispatcher, OutOfRangeLbaNeverReachesBackend) {
  const std::uint64_t blocks = (16u << 20) / 512;
  const scsi::Cdb cases[] = {
      scsi::read10({.lba = blocks, .blocks = 1}).value(),
      scsi::read16({.lba = blocks - 1, .blocks = 2}),
      scsi::read16({.lba = ~0ull, .blocks = 1}),
      scsi::write10({.lba = blocks - 3, .blocks = 4}).value(),
      scsi::read10({.lba = blocks + 1, .blocks = 0}).value(),  // 0 blocks past the end: still out of range
      scsi::synchronize_cache16({.lba = blocks + 5}),
      scsi::write_same16({.lba = blocks, .blocks = 1}),
  };
  for (const auto& c : cases) {
    const auto r = run(c, {});
    expect_sense(r, scsi::SenseKey::illegal_request, scsi::asc::lba_out_of_range);
    EXPECT_EQ(r.plan.direction, DataDirection::none);
    EXPECT_EQ(r.plan.transfer_length_bytes, 0u);
  }
  EXPECT_EQ(backends_[0]->total(), 0);
  // The last block is in range.
  EXPECT_EQ(run(scsi::read16({.lba = blocks - 1, .blocks = 1})).outcome.status, scsi::Status::good);
}

TEST_F(Dispatcher, UnknownOpcodes) {
  for (std::uint8_t op : {0x04 /* FORMAT UNIT: not implemented */, 0xc0 /* vendor */, 0x7f /* variable */,
                          0x8c /* READ ATTRIBUTE */, 0x1e /* PREVENT ALLOW MEDIUM REMOVAL */}) {
    std::vector<std::byte> cdb(16);
    cdb[0] = std::byte{op};
    const auto p = dispatcher_.plan(Lun::from_index(0), cdb);
    ASSERT_TRUE(p.error) << int(op);
    EXPECT_EQ(p.error->key, scsi::SenseKey::illegal_request);
    EXPECT_EQ(p.error->asc_pair(), scsi::asc::invalid_command_operation_code);
  }
  // A CDB shorter than its group's length.
  const std::vector<std::byte> short_cdb{std::byte{0x88}, {}, {}, {}, {}, {}};
  EXPECT_EQ(dispatcher_.plan(Lun::from_index(0), short_cdb).error->asc_pair(), scsi::asc::invalid_command_operation_code);
}

TEST_F(Dispatcher, WriteToReadOnlyIsDataProtect) {
  auto& ro = add(3, 1u << 20, true);
  for (const auto& c : {scsi::write10({.lba = 0, .blocks = 1}).value(), scsi::write16({.lba = 0, .blocks = 1}),
                        scsi::write_same16({.lba = 0, .blocks = 1})}) {
    const auto r = run(c, {}, 3);
    expect_sense(r, scsi::SenseKey::data_protect, scsi::asc::write_protected);
  }
  EXPECT_EQ(ro.total(), 0);
  EXPECT_EQ(run(scsi::read10({.lba = 0, .blocks = 1}).value(), {}, 3).outcome.status, scsi::Status::good);
}

TEST_F(Dispatcher, ProtectFieldIsInvalid) {
  scsi::Cdb c = scsi::read10({.lba = 0, .blocks = 1}).value();
  c.bytes[1] = std::byte{0x20};  // RDPROTECT = 1
  expect_sense(run(c), scsi::SenseKey::illegal_request, scsi::asc::invalid_field_in_cdb);
}

TEST_F(Dispatcher, FuaReachesBackend) {
  run(scsi::write16({.lba = 0, .blocks = 1, .fua = true}), pattern(512, 1));
  run(scsi::write10({.lba = 1, .blocks = 1}).value(), pattern(512, 2));
  EXPECT_EQ(backends_[0]->writes, 2);
  EXPECT_EQ(backends_[0]->fua_writes, 1);
}

TEST_F(Dispatcher, SynchronizeCacheFlushes) {
  EXPECT_EQ(run(scsi::synchronize_cache10({}).value()).outcome.status, scsi::Status::good);
  EXPECT_EQ(run(scsi::synchronize_cache16({.lba = 8, .blocks = 8})).outcome.status, scsi::Status::good);
  EXPECT_EQ(backends_[0]->flushes, 2);
}

TEST_F(Dispatcher, UnmapDiscardsAndReadsZero) {
  run(scsi::write16({.lba = 0, .blocks = 16}), pattern(16 * 512, 5));
  const auto list = scsi::unmap_parameter_list(std::vector<scsi::UnmapDescriptor>{{.lba = 2, .blocks = 4}, {.lba = 10, .blocks = 0}});
  const auto r = run(scsi::unmap({.parameter_list_length_bytes = static_cast<std::uint16_t>(list.size())}), list);
  ASSERT_EQ(r.outcome.status, scsi::Status::good);
  EXPECT_EQ(r.plan.transfer_length_bytes, list.size());
  EXPECT_EQ(backends_[0]->discards, 1);  // the zero-length descriptor is skipped
  const auto rd = run(scsi::read16({.lba = 0, .blocks = 16}));
  const auto expected = pattern(16 * 512, 5);
  EXPECT_TRUE(std::equal(rd.data_in.begin(), rd.data_in.begin() + 1024, expected.begin()));
  EXPECT_TRUE(std::all_of(rd.data_in.begin() + 1024, rd.data_in.begin() + 3072, [](std::byte b) { return b == std::byte{0}; }));
  EXPECT_TRUE(std::equal(rd.data_in.begin() + 3072, rd.data_in.end(), expected.begin() + 3072));
}

TEST_F(Dispatcher, UnmapMergesDescriptorsThatTouchOrOverlap) {
  run(scsi::write16({.lba = 0, .blocks = 64}), pattern(64 * 512, 7));
  // One descriptor per block for LBAs 9..0 (in reverse), an overlapping pair 20..27 and 24..31,
  // and a lone range at 40: three discards, and exactly those blocks read back as zeroes.
  std::vector<scsi::UnmapDescriptor> list_in;
  for (std::uint64_t lba = 10; lba-- > 0;) list_in.push_back({.lba = lba, .blocks = 1});
  list_in.push_back({.lba = 20, .blocks = 8});
  list_in.push_back({.lba = 24, .blocks = 8});
  list_in.push_back({.lba = 40, .blocks = 2});
  const auto list = scsi::unmap_parameter_list(list_in);
  const auto r = run(scsi::unmap({.parameter_list_length_bytes = static_cast<std::uint16_t>(list.size())}), list);
  ASSERT_EQ(r.outcome.status, scsi::Status::good);
  EXPECT_EQ(backends_[0]->discards, 3);
  const auto rd = run(scsi::read16({.lba = 0, .blocks = 64}));
  const auto expected = pattern(64 * 512, 7);
  for (std::uint64_t lba = 0; lba < 64; ++lba) {
    const bool unmapped = lba < 10 || (lba >= 20 && lba < 32) || (lba >= 40 && lba < 42);
    const auto* got = rd.data_in.data() + lba * 512;
    if (unmapped) {
      EXPECT_TRUE(std::all_of(got, got + 512, [](std::byte b) { return b == std::byte{0}; })) << "LBA " << lba;
    } else {
      EXPECT_TRUE(std::equal(got, got + 512, expected.begin() + static_cast<std::ptrdiff_t>(lba * 512))) << "LBA " << lba;
    }
  }
}

TEST_F(Dispatcher, UnmapValidation) {
  const std::uint64_t blocks = (16u << 20) / 512;
  // Out of range in the second descriptor: LBA OUT OF RANGE and nothing is discarded.
  auto list = scsi::unmap_parameter_list(std::vector<scsi::UnmapDescriptor>{{.lba = 0, .blocks = 1}, {.lba = blocks - 1, .blocks = 2}});
  auto r = run(scsi::unmap({.parameter_list_length_bytes = static_cast<std::uint16_t>(list.size())}), list);
  expect_sense(r, scsi::SenseKey::illegal_request, scsi::asc::lba_out_of_range);
  EXPECT_EQ(backends_[0]->discards, 0);
  // Parameter list of 4 bytes.
  std::vector<std::byte> tiny(4);
  r = run(scsi::unmap({.parameter_list_length_bytes = 4}), tiny);
  expect_sense(r, scsi::SenseKey::illegal_request, scsi::asc::parameter_list_length_error);
  // Too many descriptors (limit 256).
  std::vector<scsi::UnmapDescriptor> many(257, {.lba = 0, .blocks = 1});
  list = scsi::unmap_parameter_list(many);
  r = run(scsi::unmap({.parameter_list_length_bytes = static_cast<std::uint16_t>(list.size())}), list);
  expect_sense(r, scsi::SenseKey::illegal_request, scsi::asc::invalid_field_in_parameter_list);
  // Length 0: nothing to do.
  r = run(scsi::unmap({.parameter_list_length_bytes = 0}));
  EXPECT_EQ(r.outcome.status, scsi::Status::good);
  EXPECT_EQ(backends_[0]->discards, 0);
}

TEST_F(Dispatcher, WriteSame) {
  const auto block = pattern(512, 9);
  auto r = run(scsi::write_same16({.lba = 20, .blocks = 3}), block);
  ASSERT_EQ(r.outcome.status, scsi::Status::good);
  const auto rd = run(scsi::read16({.lba = 20, .blocks = 3}));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::equal(block.begin(), block.end(), rd.data_in.begin() + 512 * i));
  // Zero block with UNMAP: discard.
  r = run(scsi::write_same10({.lba = 20, .blocks = 2, .unmap = true}).value(), std::vector<std::byte>(512));
  ASSERT_EQ(r.outcome.status, scsi::Status::good);
  EXPECT_EQ(backends_[0]->discards, 1);
  // NDOB: no data-out, zeroes.
  r = run(scsi::write_same16({.lba = 22, .blocks = 1, .ndob = true}));
  ASSERT_EQ(r.outcome.status, scsi::Status::good);
  EXPECT_EQ(r.plan.direction, DataDirection::none);
  EXPECT_EQ(backends_[0]->zero_writes, 1);
  const auto z = run(scsi::read16({.lba = 20, .blocks = 3}));
  EXPECT_TRUE(std::all_of(z.data_in.begin(), z.data_in.end(), [](std::byte b) { return b == std::byte{0}; }));
  // NUMBER OF LOGICAL BLOCKS 0 (WSNZ = 0): from the LBA through the last block (SBC-4 §5.50).
  const std::uint64_t last = (16u << 20) / 512 - 1;
  r = run(scsi::write_same16({.lba = last - 1, .blocks = 0}), block);
  ASSERT_EQ(r.outcome.status, scsi::Status::good);
  EXPECT_EQ(r.plan.blocks, 2u);
  const auto tail = run(scsi::read16({.lba = last - 1, .blocks = 2}));
  EXPECT_TRUE(std::equal(block.begin(), block.end(), tail.data_in.begin() + 512));
}

TEST_F(Dispatcher, ReportSupportedOpcodesOneCommand) {
  std::vector<std::byte> cdb(12);
  cdb[0] = std::byte{0xa3};
  cdb[1] = std::byte{0x0c};
  cdb[2] = std::byte{0x01};
  cdb[3] = std::byte{0x28};  // READ (10)
  store_be32(cdb.data() + 6, 512);
  auto p = dispatcher_.plan(Lun::from_index(0), cdb);
  ASSERT_FALSE(p.error);
  std::vector<std::byte> buf(p.transfer_length_bytes);
  auto o = test::run(ctx_, dispatcher_.execute(Lun::from_index(0), cdb, p, buf));
  ASSERT_EQ(o.status, scsi::Status::good);
  EXPECT_EQ(static_cast<int>(buf[1]) & 0x07, 3);  // supported
  EXPECT_EQ(load_be16(buf.data() + 2), 10);
  EXPECT_EQ(static_cast<int>(buf[4]), 0x28);
  EXPECT_EQ(static_cast<int>(buf[5]) & 0x18, 0x18);  // DPO and FUA usable
}

TEST_F(Dispatcher, ShortBufferIsRejected) {
  const scsi::Cdb c = scsi::write10({.lba = 0, .blocks = 2}).value();
  const auto p = dispatcher_.plan(Lun::from_index(0), c.span());
  std::vector<std::byte> half(512);
  const auto o = test::run(ctx_, dispatcher_.execute(Lun::from_index(0), c.span(), p, half));
  EXPECT_EQ(o.status, scsi::Status::check_condition);
  EXPECT_EQ(o.sense->asc_pair(), scsi::asc::invalid_field_in_information_unit);
  EXPECT_EQ(backends_[0]->total(), 0);
}

TEST_F(Dispatcher, AddLogicalUnitRejectsDuplicates) {
  auto lu = std::make_shared<LogicalUnit>(make_memory_backend({.size_bytes = 1 << 20}), LogicalUnitOptions{});
  EXPECT_FALSE(dispatcher_.add_logical_unit(0, lu));
  EXPECT_FALSE(dispatcher_.add_logical_unit(16384, lu));
  EXPECT_FALSE(dispatcher_.add_logical_unit(1, nullptr));
  EXPECT_TRUE(dispatcher_.add_logical_unit(300, lu));
  EXPECT_NE(dispatcher_.find(Lun::from_index(300)), nullptr);
}

}  // namespace
}  // namespace iserkit::target

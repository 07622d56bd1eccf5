// The copy manager of the target's SCSI layer (SPC-4 §5.17, LID1): EXTENDED COPY parameter list
// parsing and its limits with their sense data (SPC-4 §6.4.3, §6.4.5, §6.4.6.5), copies between two
// logical units of one device server with the data checked and the chunks counted, overlapping
// copies on one LU, what is refused before any byte is written (LBA ranges, unreachable copy
// targets: an unknown designator or another target's LU, write protection, reservations), copies
// into another target of the process only within a tenant and where the initiator is logged in, abort
// between chunks, RECEIVE COPY RESULTS (COPY STATUS per I_T nexus and LIST IDENTIFIER, OPERATING
// PARAMETERS, SPC-4 §6.18), the 3PC bit of standard INQUIRY, REPORT SUPPORTED OPERATION CODES and
// the Third-party Copy VPD page (SPC-4 §7.8.17).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <memory>
#include <vector>

#include "iserkit/scsi/cdb.hpp"
#include "iserkit/scsi/inquiry.hpp"
#include "iserkit/target/backends.hpp"
#include "iserkit/target/scsi_dispatcher.hpp"
#include "scsi/extended_copy.hpp"
#include "test_support.hpp"

namespace iserkit::target {
namespace {

using detail::ExtendedCopyParameters;
using scsi::Lun;
using scsi::SenseKey;
using scsi::Status;

constexpr std::uint32_t bs = 512;
constexpr std::uint64_t lun_bytes = 64u << 20;  // sparse: a 32 MiB segment fits
constexpr std::uint64_t lun_blocks = lun_bytes / bs;

using test::raw;

scsi::Cdb extended_copy(std::uint32_t parameter_list_length, unsigned service_action = 0) {
  scsi::Cdb c = raw({0x83, service_action});
  store_be32(c.bytes.data() + 10, parameter_list_length);
  return c;
}

scsi::Cdb receive_copy_results(unsigned service_action, std::uint8_t list_id, std::uint32_t allocation = 1024) {
  scsi::Cdb c = raw({0x84, service_action, list_id});
  store_be32(c.bytes.data() + 10, allocation);
  return c;
}

scsi::Cdb rw16(unsigned opcode, std::uint64_t lba, std::uint32_t blocks) { return test::lba16(opcode, lba, blocks); }

/// An identification CSCD descriptor (E4h) naming `naa` (SPC-4 §6.4.5.1), a block device of `block` bytes.
std::vector<std::byte> cscd(std::span<const std::uint8_t> naa, std::uint32_t block = bs, std::uint8_t type = 0xe4) {
  std::vector<std::byte> d(32);
  d[0] = std::byte(type);
  d[4] = std::byte(0x01);  // CODE SET binary
  d[5] = std::byte(0x03);  // ASSOCIATION logical unit, DESIGNATOR TYPE NAA
  d[7] = std::byte(naa.size());
  std::copy(naa.begin(), naa.end(), reinterpret_cast<std::uint8_t*>(d.data() + 8));
  store_be24(d.data() + 29, block);
  return d;
}

/// A block to block segment descriptor (02h, SPC-4 §6.4.6.5).
std::vector<std::byte> segment(std::uint16_t source, std::uint16_t destination, std::uint16_t blocks, std::uint64_t source_lba,
                               std::uint64_t destination_lba, std::uint8_t type = 0x02) {
  std::vector<std::byte> d(28);
  d[0] = std::byte(type);
  store_be16(d.data() + 2, 0x18);
  store_be16(d.data() + 4, source);
  store_be16(d.data() + 6, destination);
  store_be16(d.data() + 10, blocks);
  store_be64(d.data() + 12, source_lba);
  store_be64(d.data() + 20, destination_lba);
  return d;
}

/// A parameter list: the header (SPC-4 §6.4.3.1) with LIST ID and LIST ID USAGE, then the descriptors.
std::vector<std::byte> parameter_list(const std::vector<std::vector<std::byte>>& cscds,
                                      const std::vector<std::vector<std::byte>>& segments, std::uint8_t list_id = 1,
                                      std::uint8_t usage = 0x3) {
  std::vector<std::byte> p(16);
  p[0] = std::byte(list_id);
  p[1] = std::byte(usage << 3);
  std::size_t cscd_bytes = 0, segment_bytes = 0;
  for (const auto& d : cscds) {
    p.insert(p.end(), d.begin(), d.end());
    cscd_bytes += d.size();
  }
  for (const auto& d : segments) {
    p.insert(p.end(), d.begin(), d.end());
    segment_bytes += d.size();
  }
  store_be16(p.data() + 2, static_cast<std::uint16_t>(cscd_bytes));
  store_be32(p.data() + 8, static_cast<std::uint32_t>(segment_bytes));
  return p;
}

void expect_sense(const scsi::SenseOr<ExtendedCopyParameters>& r, scsi::AscPair pair) {
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().key, SenseKey::illegal_request);
  EXPECT_EQ(r.error().asc_pair(), pair);
}

const std::array<std::uint8_t, 16> naa_a{0x60, 0x24, 0x95, 0x30, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};

TEST(ExtendedCopyParameters, DecodesIdentificationAndBlockSegments) {
  const auto list = parameter_list({cscd(naa_a), cscd(naa_a)}, {segment(0, 1, 100, 7, 900)}, 9, 0x0);
  auto p = detail::parse_extended_copy_parameters(list);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->list_id, 9);
  EXPECT_EQ(p->usage, detail::ListIdUsage::hold);
  ASSERT_EQ(p->cscds.size(), 2u);
  EXPECT_EQ(p->cscds[1].offset, 48);
  EXPECT_EQ(p->cscds[0].designator_type, 3);
  EXPECT_EQ(p->cscds[0].association, 0);
  EXPECT_TRUE(std::equal(naa_a.begin(), naa_a.end(), p->cscds[0].designator.begin(), p->cscds[0].designator.end()));
  EXPECT_EQ(p->cscds[0].block_length_bytes, bs);
  ASSERT_EQ(p->segments.size(), 1u);
  EXPECT_EQ(p->segments[0].offset, 80);
  EXPECT_EQ(p->segments[0].source, 0);
  EXPECT_EQ(p->segments[0].destination, 1);
  EXPECT_EQ(p->segments[0].blocks, 100);
  EXPECT_EQ(p->segments[0].source_lba, 7u);
  EXPECT_EQ(p->segments[0].destination_lba, 900u);
}

TEST(ExtendedCopyParameters, LengthsAndLimits) {
  using namespace detail;
  const auto good = parameter_list({cscd(naa_a)}, {segment(0, 0, 1, 0, 1)});
  // SPC-4 §6.4.3.1: a header shorter than 16 bytes or lists past the parameter list length.
  expect_sense(parse_extended_copy_parameters(std::span(good).first(15)), scsi::asc::parameter_list_length_error);
  expect_sense(parse_extended_copy_parameters(std::span(good).first(good.size() - 1)), scsi::asc::parameter_list_length_error);
  expect_sense(parse_extended_copy_parameters(std::span(good).first(16 + 31)), scsi::asc::parameter_list_length_error);
  // LIST ID USAGE 01b is reserved.
  auto reserved = good;
  reserved[1] = std::byte{0x08};
  expect_sense(parse_extended_copy_parameters(reserved), scsi::asc::invalid_field_in_parameter_list);
  // No inline data is offered (MAXIMUM INLINE DATA LENGTH 0).
  auto with_inline = good;
  store_be32(with_inline.data() + 12, 4);
  with_inline.resize(with_inline.size() + 4);
  expect_sense(parse_extended_copy_parameters(with_inline), inline_data_length_exceeded);
  // Counts: one CSCD and one segment descriptor past the maxima.
  std::vector<std::vector<std::byte>> cscds(xcopy_max_cscd_descriptors + 1, cscd(naa_a));
  expect_sense(parse_extended_copy_parameters(parameter_list(cscds, {segment(0, 0, 1, 0, 1)})), too_many_target_descriptors);
  cscds.pop_back();
  EXPECT_TRUE(parse_extended_copy_parameters(parameter_list(cscds, {segment(0, 0, 1, 0, 1)})));
  std::vector<std::vector<std::byte>> segments(xcopy_max_segment_descriptors + 1, segment(0, 0, 1, 0, 1));
  expect_sense(parse_extended_copy_parameters(parameter_list({cscd(naa_a)}, segments)), too_many_segment_descriptors);
  segments.pop_back();
  EXPECT_TRUE(parse_extended_copy_parameters(parameter_list({cscd(naa_a)}, segments)));
  // Descriptor lists longer than MAXIMUM DESCRIPTOR LIST LENGTH.
  std::vector<std::vector<std::byte>> many(40, segment(0, 0, 1, 0, 1));
  expect_sense(parse_extended_copy_parameters(parameter_list({cscd(naa_a)}, many)), scsi::asc::parameter_list_length_error);
}

TEST(ExtendedCopyParameters, UnsupportedDescriptors) {
  using namespace detail;
  // Fibre Channel N_Port_Name (E0h) and a stream-to-stream segment (03h) are not offered.
  expect_sense(parse_extended_copy_parameters(parameter_list({cscd(naa_a, bs, 0xe0)}, {segment(0, 0, 1, 0, 1)})),
               unsupported_target_descriptor_type_code);
  expect_sense(parse_extended_copy_parameters(parameter_list({cscd(naa_a, bs, 0x12)}, {segment(0, 0, 1, 0, 1)})),
               unsupported_target_descriptor_type_code);
  expect_sense(parse_extended_copy_parameters(parameter_list({cscd(naa_a)}, {segment(0, 0, 1, 0, 1, 0x03)})),
               unsupported_segment_descriptor_type_code);
  // A copy target that is no block device.
  auto tape = cscd(naa_a);
  tape[1] = std::byte{0x01};
  auto r = parse_extended_copy_parameters(parameter_list({tape}, {segment(0, 0, 1, 0, 1)}));
  expect_sense(r, scsi::asc::invalid_field_in_parameter_list);
  // A 02h descriptor with another DESCRIPTOR LENGTH.
  auto odd = segment(0, 0, 1, 0, 1);
  store_be16(odd.data() + 2, 0x14);
  expect_sense(parse_extended_copy_parameters(parameter_list({cscd(naa_a)}, {odd})), scsi::asc::invalid_field_in_parameter_list);
}

TEST(ExtendedCopyParameters, OperatingParametersAndCopyStatusEncoding) {
  const auto op = detail::encode_operating_parameters(bs);
  ASSERT_EQ(op.size(), 46u);
  EXPECT_EQ(load_be32(op.data()), 42u);
  EXPECT_EQ(load_be16(op.data() + 8), detail::xcopy_max_cscd_descriptors);
  EXPECT_EQ(load_be16(op.data() + 10), detail::xcopy_max_segment_descriptors);
  EXPECT_EQ(load_be32(op.data() + 12), detail::xcopy_max_descriptor_list_bytes);
  EXPECT_EQ(load_be32(op.data() + 16), detail::xcopy_max_segment_bytes);
  EXPECT_EQ(load_be32(op.data() + 20), 0u);  // no inline data
  EXPECT_EQ(load_be16(op.data() + 34), detail::xcopy_max_concurrent_copies);
  EXPECT_EQ(load_u8(op.data() + 37), 9);  // 2^9 = 512-byte blocks
  EXPECT_EQ(load_u8(op.data() + 43), 2);
  EXPECT_EQ(load_u8(op.data() + 44), 0x02);
  EXPECT_EQ(load_u8(op.data() + 45), 0xe4);
  const auto cs = detail::encode_copy_status({.state = detail::CopyStatus::State::completed, .segments_processed = 3,
                                              .bytes_transferred = 4096});
  ASSERT_EQ(cs.size(), 12u);
  EXPECT_EQ(load_be32(cs.data()), 8u);
  EXPECT_EQ(load_u8(cs.data() + 4), 0x01);
  EXPECT_EQ(load_be16(cs.data() + 5), 3);
  EXPECT_EQ(load_be32(cs.data() + 8), 4096u);
}

using test::HookedBackend;

class ExtendedCopy : public test::TwoUnitCopy {
 protected:
  ExtendedCopy() : TwoUnitCopy(lun_bytes, bs) {}
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(add_units("XCOPY-"));
    open_nexuses({});
  }

  test::CommandRun copy(const std::vector<std::byte>& list, NexusId from = {}) {
    return command(extended_copy(static_cast<std::uint32_t>(list.size())), list, from);
  }
  std::vector<std::byte> cscd_of(int lun) { return cscd(units[lun]->naa()); }
};

TEST_F(ExtendedCopy, CopiesBetweenTwoLogicalUnitsInBoundedChunks) {
  constexpr std::uint32_t blocks = 5000;  // 2.44 MiB: three 1 MiB chunks
  write_pattern(0, 10, blocks, 3);
  const auto before = read(0, 10, blocks);
  const int reads = counting[0]->reads, writes = counting[1]->writes;
  auto r = copy(parameter_list({cscd_of(0), cscd_of(1)}, {segment(0, 1, blocks, 10, 2000)}));
  ASSERT_EQ(r.outcome.status, Status::good);
  EXPECT_EQ(counting[0]->reads - reads, 3);
  EXPECT_EQ(counting[1]->writes - writes, 3);
  EXPECT_EQ(read(1, 2000, blocks), before);
  // Blocks around the destination were not touched.
  EXPECT_EQ(read(1, 1999, 1), std::vector<std::byte>(bs));
  EXPECT_EQ(read(1, 2000 + blocks, 1), std::vector<std::byte>(bs));
}

TEST_F(ExtendedCopy, SeveralSegmentsAndZeroLengthAndEmptyList) {
  write_pattern(0, 0, 8, 1);
  write_pattern(1, 100, 8, 2);
  auto r = copy(parameter_list({cscd_of(0), cscd_of(1)},
                               {segment(0, 1, 8, 0, 50), segment(1, 0, 8, 100, 60), segment(0, 1, 0, 0, 0)}));
  ASSERT_EQ(r.outcome.status, Status::good);
  EXPECT_EQ(read(1, 50, 8), read(0, 0, 8));
  EXPECT_EQ(read(0, 60, 8), read(1, 100, 8));
  // SPC-4 §6.4.1: PARAMETER LIST LENGTH 0 is not an error.
  EXPECT_EQ(command(extended_copy(0)).outcome.status, Status::good);
}

TEST_F(ExtendedCopy, OverlappingRangesOnOneUnitCopyLikeMemmove) {
  constexpr std::uint32_t blocks = 4096;  // two chunks; destination 1000 blocks above the source
  write_pattern(0, 0, blocks, 5);
  const auto before = read(0, 0, blocks);
  ASSERT_EQ(copy(parameter_list({cscd_of(0)}, {segment(0, 0, blocks, 0, 1000)})).outcome.status, Status::good);
  EXPECT_EQ(read(0, 1000, blocks), before);
  write_pattern(0, 5000, blocks, 6);
  const auto second = read(0, 5000, blocks);
  ASSERT_EQ(copy(parameter_list({cscd_of(0)}, {segment(0, 0, blocks, 5000, 4000)})).outcome.status, Status::good);
  EXPECT_EQ(read(0, 4000, blocks), second);
}

TEST_F(ExtendedCopy, PlanChecksServiceActionAndParameterListLength) {
  auto lid4 = command(extended_copy(32, 0x01));
  ASSERT_TRUE(lid4.outcome.sense);
  EXPECT_EQ(lid4.outcome.sense->asc_pair(), scsi::asc::invalid_field_in_cdb);
  for (std::uint32_t n : {8u, 16u + detail::xcopy_max_descriptor_list_bytes + 1, 0xffffffffu}) {
    auto p = dispatcher.plan(nexus, Lun{}, extended_copy(n).span());
    ASSERT_TRUE(p.error) << n;
    EXPECT_EQ(p.error->asc_pair(), scsi::asc::parameter_list_length_error);
    EXPECT_EQ(p.transfer_length_bytes, 0u);  // refused before any Data-Out is asked for
  }
}

TEST_F(ExtendedCopy, OutOfRangeOnEitherSideWritesNothing) {
  const int writes0 = counting[0]->writes, writes1 = counting[1]->writes;
  // The first segment is fine, the second runs past the destination's end: nothing is copied.
  auto r = copy(parameter_list({cscd_of(0), cscd_of(1)},
                               {segment(0, 1, 8, 0, 0), segment(0, 1, 8, 0, lun_blocks - 4)}));
  EXPECT_EQ(r.outcome.status, Status::check_condition);
  ASSERT_TRUE(r.outcome.sense);
  EXPECT_EQ(r.outcome.sense->key, SenseKey::copy_aborted);
  ASSERT_TRUE(r.outcome.sense->sense_key_specific);
  EXPECT_EQ((*r.outcome.sense->sense_key_specific)[0], 0xa0);  // SKSV, SD: a segment pointer
  EXPECT_EQ((*r.outcome.sense->sense_key_specific)[2], 16 + 64 + 28);
  r = copy(parameter_list({cscd_of(0), cscd_of(1)}, {segment(0, 1, 8, lun_blocks - 1, 0)}));
  EXPECT_EQ(r.outcome.sense->key, SenseKey::copy_aborted);
  EXPECT_EQ(counting[0]->writes, writes0);
  EXPECT_EQ(counting[1]->writes, writes1);
  // A segment above MAXIMUM SEGMENT LENGTH.
  r = copy(parameter_list({cscd_of(0), cscd_of(1)}, {segment(0, 1, 0xffff, 0, 0)}));
  EXPECT_EQ(r.outcome.status, Status::good);  // 65535 × 512 bytes is below 32 MiB
  EXPECT_EQ(counting[1]->writes - writes1, 32);
}

TEST_F(ExtendedCopy, UnreachableCopyTargets) {
  // A designator no logical unit of this target has.
  auto r = copy(parameter_list({cscd_of(0), cscd(naa_a)}, {segment(0, 1, 1, 0, 0)}));
  ASSERT_TRUE(r.outcome.sense);
  EXPECT_EQ(r.outcome.sense->key, SenseKey::copy_aborted);
  EXPECT_EQ(r.outcome.sense->asc_pair(), detail::unreachable_copy_target);
  // A logical unit of another target (another device server: another target node, another
  // tenant) is never reached, though it is in the same process.
  ScsiDispatcher elsewhere;
  LogicalUnitOptions o;
  o.identity.serial = "OTHER-TARGET";
  auto foreign_backend = std::make_shared<test::CountingBackend>(make_memory_backend({.size_bytes = lun_bytes, .block_size_bytes = bs}));
  auto foreign = std::make_shared<LogicalUnit>(foreign_backend, o);
  ASSERT_TRUE(elsewhere.add_logical_unit(0, foreign));
  r = copy(parameter_list({cscd_of(0), cscd(foreign->naa())}, {segment(0, 1, 1, 0, 0)}));
  EXPECT_EQ(r.outcome.sense->asc_pair(), detail::unreachable_copy_target);
  r = copy(parameter_list({cscd(foreign->naa()), cscd_of(0)}, {segment(0, 1, 1, 0, 0)}));
  EXPECT_EQ(r.outcome.sense->asc_pair(), detail::unreachable_copy_target);
  EXPECT_EQ(foreign_backend->total(), 0);
  // A CSCD DESCRIPTOR ID past the list.
  r = copy(parameter_list({cscd_of(0)}, {segment(0, 1, 1, 0, 0)}));
  EXPECT_EQ(r.outcome.sense->key, SenseKey::copy_aborted);
  EXPECT_EQ(r.outcome.sense->asc_pair(), detail::copy_target_device_not_reachable);
  // The LU ID TYPE field is ignored (SPC-4), a wrong DISK BLOCK LENGTH is not.
  auto lu_id_type = cscd_of(1);
  lu_id_type[1] = std::byte{0xc0};
  EXPECT_EQ(copy(parameter_list({cscd_of(0), lu_id_type}, {segment(0, 1, 1, 0, 0)})).outcome.status, Status::good);
  r = copy(parameter_list({cscd_of(0), cscd(units[1]->naa(), 4096)}, {segment(0, 1, 1, 0, 0)}));
  EXPECT_EQ(r.outcome.sense->asc_pair(), scsi::asc::invalid_field_in_parameter_list);
}

TEST_F(ExtendedCopy, AnotherTargetOfTheProcessOnlyWhereTheInitiatorIsLoggedIn) {
  // Another target node of the process (its own device server) in the copy domain.
  auto domain = std::make_shared<CopyDomain>();
  auto other = std::make_shared<ScsiDispatcher>();
  auto backend = std::make_shared<test::CountingBackend>(make_memory_backend({.size_bytes = lun_bytes, .block_size_bytes = bs}));
  LogicalUnitOptions o;
  o.identity.serial = "OTHER-0";
  auto unit = std::make_shared<LogicalUnit>(backend, o);
  ASSERT_TRUE(other->add_logical_unit(0, unit));
  domain->set("iqn.test:other", "", other);
  dispatcher.join_copy_domain(domain, "");
  write_pattern(0, 0, 64, 9);
  const auto list = parameter_list({cscd_of(0), cscd(unit->naa())}, {segment(0, 1, 64, 0, 10)});
  const auto unreachable = [&] {
    auto r = copy(list);
    return r.outcome.sense && r.outcome.sense->key == SenseKey::copy_aborted &&
           r.outcome.sense->asc_pair() == detail::unreachable_copy_target;
  };
  // The initiator is not logged in to the other target: unreachable.
  EXPECT_TRUE(unreachable());
  // Another initiator logged in there does not make it reachable.
  const NexusId stranger = other->open_nexus("iqn.test:b,i,0x9", {}, "192.0.2.1");
  EXPECT_TRUE(unreachable());
  // Nor does the same name from another address (initiator names are not secret).
  const NexusId impostor = other->open_nexus("iqn.test:a,i,0x1", {}, "192.0.2.66");
  EXPECT_TRUE(unreachable());
  other->close_nexus(impostor);
  EXPECT_EQ(backend->total(), 0);
  // The same initiator from the same address (another session, ISID and case) logged in there: copied.
  const NexusId same = other->open_nexus("IQN.Test:A,i,0x7", {}, "192.0.2.1");
  ASSERT_EQ(copy(list).outcome.status, Status::good);
  for (auto n : {same, stranger}) (void)test::run_command(ctx, *other, n, Lun{}, raw({0x00}));
  auto back = test::run_command(ctx, *other, same, Lun{}, rw16(0x88, 10, 64));
  ASSERT_EQ(back.outcome.status, Status::good);
  EXPECT_EQ(back.data_in, read(0, 0, 64));
  // Reservations there are checked through the initiator's nexus there.
  ASSERT_EQ(test::run_command(ctx, *other, stranger, Lun{}, raw({0x16})).outcome.status, Status::good);
  EXPECT_EQ(copy(list).outcome.status, Status::reservation_conflict);
  ASSERT_EQ(test::run_command(ctx, *other, stranger, Lun{}, raw({0x17})).outcome.status, Status::good);
  // Another tenant's target is never reached, logged in or not; nor one that left the domain.
  domain->set("iqn.test:other", "blue", other);
  EXPECT_TRUE(unreachable());
  domain->set("iqn.test:other", "", other);
  ASSERT_EQ(copy(list).outcome.status, Status::good);
  domain->erase("IQN.TEST:OTHER");
  EXPECT_TRUE(unreachable());
  // The initiator's session there ended: unreachable again.
  domain->set("iqn.test:other", "", other);
  other->close_nexus(same);
  EXPECT_TRUE(unreachable());
}

TEST_F(ExtendedCopy, ReservationsOfTheCopyTargetsAreHonoured) {
  // Another nexus holds RESERVE(6) on LU 1: copying into it (or out of it) conflicts, even though
  // the command is addressed to LU 0.
  ASSERT_EQ(command(raw({0x16}), {}, other, 1).outcome.status, Status::good);
  const int writes = counting[1]->writes;
  EXPECT_EQ(copy(parameter_list({cscd_of(0), cscd_of(1)}, {segment(0, 1, 1, 0, 0)})).outcome.status,
            Status::reservation_conflict);
  EXPECT_EQ(copy(parameter_list({cscd_of(0), cscd_of(1)}, {segment(1, 0, 1, 0, 0)})).outcome.status,
            Status::reservation_conflict);
  EXPECT_EQ(counting[1]->writes, writes);
  // The holder may copy.
  EXPECT_EQ(copy(parameter_list({cscd_of(0), cscd_of(1)}, {segment(0, 1, 1, 0, 0)}), other).outcome.status, Status::good);
}

TEST_F(ExtendedCopy, AbortStopsBetweenChunks) {
  constexpr std::uint32_t blocks = 8192;  // four chunks
  const auto list = parameter_list({cscd_of(0), cscd_of(1)}, {segment(0, 1, blocks, 0, 0)});
  const auto cdb = extended_copy(static_cast<std::uint32_t>(list.size()));
  // The transport sets the flag while execute() runs (ABORT TASK, a reset, the session's end).
  const auto r = run_interrupted(cdb, list, Lun{}, [](CommandPlan& plan) { plan.abort_requested = true; });
  EXPECT_NE(r.outcome.status, Status::good);
  EXPECT_EQ(r.destination_writes, 2);  // the chunk under way finished, no other started
}

// A LOGICAL UNIT RESET of the destination from another I_T nexus (whose session engine knows
// nothing of this task) stops the copy between chunks as well (SAM-5 §6.3.3).
TEST_F(ExtendedCopy, ALogicalUnitResetFromAnotherNexusStopsTheCopy) {
  constexpr std::uint32_t blocks = 8192;  // four chunks
  const auto list = parameter_list({cscd_of(0), cscd_of(1)}, {segment(0, 1, blocks, 0, 0)});
  const auto cdb = extended_copy(static_cast<std::uint32_t>(list.size()));
  const auto r = run_interrupted(cdb, list, Lun{}, [&](CommandPlan&) {
    (void)dispatcher.task_management(other, Lun::from_index(1), TaskManagement::logical_unit_reset);
  });
  EXPECT_NE(r.outcome.status, Status::good);
  EXPECT_EQ(r.destination_writes, 2);  // the chunk under way finished, no other started
  // A copy that starts after the reset runs to its end.
  std::vector<std::byte> again = list;
  CommandPlan plan2 = dispatcher.plan(nexus, Lun{}, cdb.span());
  EXPECT_EQ(test::run(ctx, dispatcher.execute(nexus, Lun{}, cdb.span(), plan2, again)).status, Status::good);
}

// A backend error in the middle of a segment ends the copy with COPY ABORTED (SPC-4 §6.4.3), the
// backend's additional sense code kept and the failing segment pointed at.
TEST_F(ExtendedCopy, ABackendErrorIsReportedAsCopyAbortedWithTheSegment) {
  const auto list = parameter_list({cscd_of(0), cscd_of(1)}, {segment(0, 1, 8, 0, 0), segment(0, 1, 8, 8, 8)});
  hooked[0]->fail_reads = true;
  auto r = copy(list);
  hooked[0]->fail_reads = false;
  ASSERT_EQ(r.outcome.status, Status::check_condition);
  ASSERT_TRUE(r.outcome.sense);
  EXPECT_EQ(r.outcome.sense->key, SenseKey::copy_aborted);
  EXPECT_NE(r.outcome.sense->asc, 0);  // the backend's (a read error), not NO ADDITIONAL SENSE
  ASSERT_TRUE(r.outcome.sense->sense_key_specific);
  const auto& sks = *r.outcome.sense->sense_key_specific;
  EXPECT_EQ(sks[0], 0xa0);  // SKSV, SD: the field pointer is in the parameter list
  EXPECT_GT((sks[1] << 8) | sks[2], 0);  // the first segment descriptor's offset
}

TEST_F(ExtendedCopy, ReceiveCopyResultsCopyStatusPerNexusAndListId) {
  // Nothing held yet: INVALID FIELD IN CDB (the LIST IDENTIFIER, byte 2).
  auto none = command(receive_copy_results(0x00, 5));
  ASSERT_TRUE(none.outcome.sense);
  EXPECT_EQ(none.outcome.sense->asc_pair(), scsi::asc::invalid_field_in_cdb);
  ASSERT_EQ(copy(parameter_list({cscd_of(0), cscd_of(1)}, {segment(0, 1, 16, 0, 0), segment(0, 1, 8, 0, 100)}, 5, 0x0))
                .outcome.status,
            Status::good);
  // Another nexus does not see it.
  EXPECT_EQ(command(receive_copy_results(0x00, 5), {}, other).outcome.status, Status::check_condition);
  auto status = command(receive_copy_results(0x00, 5));
  ASSERT_EQ(status.outcome.status, Status::good);
  ASSERT_EQ(status.data_in.size(), 12u);
  EXPECT_EQ(load_u8(status.data_in.data() + 4), 0x01);  // completed without errors
  EXPECT_EQ(load_be16(status.data_in.data() + 5), 2);
  EXPECT_EQ(load_be32(status.data_in.data() + 8), 24u * bs);
  // Handed out once.
  EXPECT_EQ(command(receive_copy_results(0x00, 5)).outcome.status, Status::check_condition);
  // A failed copy is held as completed with errors; LIST ID USAGE 11b holds nothing.
  (void)copy(parameter_list({cscd_of(0), cscd_of(1)}, {segment(0, 1, 8, 0, lun_blocks)}, 6, 0x2));
  status = command(receive_copy_results(0x00, 6));
  ASSERT_EQ(status.outcome.status, Status::good);
  EXPECT_EQ(load_u8(status.data_in.data() + 4), 0x02);
  ASSERT_EQ(copy(parameter_list({cscd_of(0), cscd_of(1)}, {segment(0, 1, 8, 0, 0)}, 7, 0x3)).outcome.status, Status::good);
  EXPECT_EQ(command(receive_copy_results(0x00, 7)).outcome.status, Status::check_condition);
}

TEST_F(ExtendedCopy, ReceiveCopyResultsOperatingParametersAndAdvertising) {
  auto op = command(receive_copy_results(0x03, 0));
  ASSERT_EQ(op.outcome.status, Status::good);
  EXPECT_EQ(op.data_in, detail::encode_operating_parameters(bs));
  // RECEIVE DATA and FAILED SEGMENT DETAILS are not offered.
  for (unsigned sa : {0x01u, 0x04u}) EXPECT_EQ(command(receive_copy_results(sa, 0)).outcome.status, Status::check_condition);
  // Standard INQUIRY: 3PC = 1 (SPC-4 §6.6.2).
  auto inquiry = command(raw({0x12, 0, 0, 0, 96}));
  ASSERT_EQ(inquiry.outcome.status, Status::good);
  auto parsed = scsi::parse_standard_inquiry(inquiry.data_in);
  ASSERT_TRUE(parsed);
  EXPECT_TRUE(parsed->third_party_copy);
  // REPORT SUPPORTED OPERATION CODES lists EXTENDED COPY (LID1) and both RECEIVE COPY RESULTS.
  expect_supported_as_standard({{0x83, 0x00}, {0x84, 0x00}, {0x84, 0x03}});
}

TEST_F(ExtendedCopy, ThirdPartyCopyVpdPage) {
  // Listed in VPD 0x00, in ascending order.
  auto pages = command(raw({0x12, 0x01, 0x00, 0, 255}));
  ASSERT_EQ(pages.outcome.status, Status::good);
  const auto list = scsi::parse_supported_vpd_pages(pages.data_in);
  ASSERT_TRUE(list);
  EXPECT_NE(std::find(list->begin(), list->end(), 0x8f), list->end());
  EXPECT_TRUE(std::is_sorted(list->begin(), list->end()));
  auto page = command(raw({0x12, 0x01, 0x8f, 0x04, 0x00}));
  ASSERT_EQ(page.outcome.status, Status::good);
  ASSERT_GE(page.data_in.size(), 4u);
  EXPECT_EQ(load_u8(page.data_in.data() + 1), 0x8f);
  ASSERT_EQ(load_be16(page.data_in.data() + 2) + 4u, page.data_in.size());
  // Walk the third-party copy descriptors (SPC-4 §7.8.17): each a multiple of 4 bytes.
  std::vector<std::uint16_t> types;
  for (std::size_t at = 4; at < page.data_in.size();) {
    ASSERT_LE(at + 4, page.data_in.size());
    const std::uint16_t type = load_be16(page.data_in.data() + at);
    const std::size_t length = load_be16(page.data_in.data() + at + 2);
    EXPECT_EQ(length % 4, 0u) << type;
    ASSERT_LE(at + 4 + length, page.data_in.size());
    const std::byte* d = page.data_in.data() + at;
    if (type == 0x0001) {  // Supported Commands
      // EXTENDED COPY 00h, 10h, 11h (token copy); RECEIVE COPY RESULTS 00h, 03h, 07h.
      EXPECT_EQ(load_u8(d + 4), 10);
      EXPECT_EQ(load_u8(d + 5), 0x83);
      EXPECT_EQ(load_u8(d + 6), 3);
      EXPECT_EQ(load_u8(d + 10), 0x84);
      EXPECT_EQ(load_u8(d + 11), 3);
    } else if (type == 0x0004) {  // Parameter Data
      EXPECT_EQ(load_be16(d + 8), detail::xcopy_max_cscd_descriptors);
      EXPECT_EQ(load_be16(d + 10), detail::xcopy_max_segment_descriptors);
      EXPECT_EQ(load_be32(d + 12), detail::xcopy_max_descriptor_list_bytes);
    } else if (type == 0x0008) {  // Supported Descriptors
      EXPECT_EQ(load_u8(d + 4), 2);
      EXPECT_EQ(load_u8(d + 5), 0x02);
      EXPECT_EQ(load_u8(d + 6), 0xe4);
    } else if (type == 0x8001) {  // General Copy Operations
      EXPECT_EQ(load_be32(d + 12), detail::xcopy_max_segment_bytes);
      EXPECT_EQ(load_u8(d + 16), 9);
    }
    types.push_back(type);
    at += 4 + length;
  }
  // 0000h, 0106h and 0108h are token copy's (token_copy_test.cpp).
  EXPECT_EQ(types, (std::vector<std::uint16_t>{0x0000, 0x0001, 0x0004, 0x0008, 0x000c, 0x0106, 0x0108, 0x8001}));
}

class ExtendedCopyReadOnly : public ExtendedCopy {
 protected:
  void SetUp() override {
    read_only_destination = true;
    ExtendedCopy::SetUp();
  }
};

TEST_F(ExtendedCopyReadOnly, ReadOnlyDestinationIsRefusedSourceIsFine) {
  auto r = copy(parameter_list({cscd_of(0), cscd_of(1)}, {segment(0, 1, 8, 0, 0)}));
  ASSERT_TRUE(r.outcome.sense);
  EXPECT_EQ(r.outcome.sense->key, SenseKey::data_protect);
  EXPECT_EQ(r.outcome.sense->asc_pair(), scsi::asc::write_protected);
  EXPECT_EQ(copy(parameter_list({cscd_of(0), cscd_of(1)}, {segment(1, 0, 8, 0, 0)})).outcome.status, Status::good);
}

}  // namespace
}  // namespace iserkit::target

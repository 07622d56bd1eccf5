// initiator/copy.hpp over a fake unit: probe_extended_copy() reads 3PC, VPD 0x8f and both NAA
// designators and says why not when one is missing; extended_copy_blocks() sends one EXTENDED COPY
// (LID1) to the source with the LUs' NAA designators and the range split into 02h segments within
// the page's limits (SPC-4 §6.4.3, §6.4.5.1, §6.4.6.5); extended_copy_refused() tells a declined
// copy from a failed one.
#include <gtest/gtest.h>

#include <memory>

#include "fake_lun_channel.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/initiator/copy.hpp"
#include "iserkit/initiator/errors.hpp"

using namespace iserkit;
using namespace iserkit::initiator;

namespace {

// A unit with LUN 0 and LUN 1 (each its own NAA) and a copy manager: INQUIRY 3PC, VPD 0x83 and
// 0x8f and EXTENDED COPY are answered here, everything else by a FakeLunChannel.
class XcopyChannel final : public CommandChannel {
 public:
  explicit XcopyChannel(asio::any_io_executor ex) : disk_(ex, {}) {}
  bool third_party_copy = true;
  bool has_tpc_page = true;
  bool has_naa = true;
  scsi::ThirdPartyCopyLimits limits{.extended_copy_lid1 = true, .block_to_block = true, .identification_cscd = true,
                                    .max_cscd_descriptors = 8, .max_segment_descriptors = 4,
                                    .max_descriptor_list_bytes = 1024, .max_segment_bytes = 100 * 512,
                                    .data_segment_granularity_log2 = 9};
  std::optional<scsi::SenseData> xcopy_sense;  ///< answer EXTENDED COPY with this
  std::vector<std::vector<std::byte>> lists;   ///< every EXTENDED COPY parameter list
  std::vector<scsi::Lun> xcopy_luns;           ///< the LU each went to

  Awaitable<Result<scsi::ScsiResult>> execute(const CommandRequest& r) override {
    const auto* c = r.cdb.bytes.data();
    const std::uint8_t op = load_u8(c);
    if (op == 0x12 && (load_u8(c + 1) & 1) == 0) {
      scsi::StandardInquiry s{.third_party_copy = third_party_copy, .vendor = "FAKE", .product = "LUN", .revision = "1"};
      co_return reply(scsi::encode_standard_inquiry(s), r.data_in);
    }
    if (op == 0x12 && load_u8(c + 2) == 0x83) {
      std::vector<scsi::Designator> ids;
      if (has_naa) {
        const auto index = static_cast<std::uint8_t>(r.lun.index().value_or(0));
        ids.push_back({.value = {std::byte{0x60}, std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}, std::byte{5},
                                 std::byte{6}, std::byte{7}, std::byte{8}, std::byte{9}, std::byte{10}, std::byte{11},
                                 std::byte{12}, std::byte{13}, std::byte{14}, std::byte{index}}});
      }
      co_return reply(scsi::encode_vpd_page(0x83, scsi::encode_designators(ids)), r.data_in);
    }
    if (op == 0x12 && load_u8(c + 2) == 0x8f) {
      if (!has_tpc_page) co_return scsi::ScsiResult{.status = scsi::Status::check_condition,
                                                   .sense = scsi::SenseData::invalid_field_in_cdb(2)};
      co_return reply(scsi::encode_third_party_copy_vpd(limits), r.data_in);
    }
    if (op == 0x83) {
      EXPECT_EQ(load_be32(c + 10), r.data_out.size());
      lists.emplace_back(r.data_out.begin(), r.data_out.end());
      xcopy_luns.push_back(r.lun);
      if (xcopy_sense) co_return scsi::ScsiResult{.status = scsi::Status::check_condition, .sense = xcopy_sense};
      co_return scsi::ScsiResult{};
    }
    co_return co_await disk_.execute(r);
  }
  [[nodiscard]] BufferPool& buffer_pool() const noexcept override { return disk_.buffer_pool(); }
  [[nodiscard]] std::uint32_t max_transfer_bytes() const noexcept override { return 0; }
  [[nodiscard]] asio::any_io_executor executor() const override { return disk_.executor(); }

 private:
  static scsi::ScsiResult reply(std::span<const std::byte> data, std::span<std::byte> in) {
    const std::size_t n = std::min(data.size(), in.size());
    std::memcpy(in.data(), data.data(), n);
    return {.residual_bytes = static_cast<std::uint32_t>(in.size() - n)};
  }
  test::FakeLunChannel disk_;
};

struct Rig {
  asio::io_context io;
  std::shared_ptr<XcopyChannel> channel = std::make_shared<XcopyChannel>(io.get_executor());
  LunHandle source = open(0);
  LunHandle destination = open(1);
  LunHandle open(std::uint16_t index) {
    auto h = test::run_sync(io, LunHandle::open(channel, scsi::Lun::from_index(index)));
    EXPECT_TRUE(h);
    return *h;
  }
  ExtendedCopyProbe probe(std::uint64_t cap = 0) {
    return test::run_sync(io, probe_extended_copy(source, destination, cap));
  }
};

TEST(ExtendedCopyProbe, PlansWithBothDesignatorsAndTheLimits) {
  Rig rig;
  auto plan = rig.probe();
  ASSERT_TRUE(plan) << plan.error();
  EXPECT_EQ(plan->block_size_bytes, 512u);
  EXPECT_EQ(plan->source_naa.back(), std::byte{0});
  EXPECT_EQ(plan->destination_naa.back(), std::byte{1});
  EXPECT_EQ(plan->command.max_segment_blocks, 100u);  // MAXIMUM SEGMENT LENGTH 51200 bytes
  EXPECT_EQ(plan->command.max_segments, 4);
  EXPECT_EQ(rig.probe(512 * 150)->command.max_command_blocks(), 100u);  // a cap of 150 blocks: one segment
}

TEST(ExtendedCopyProbe, SaysWhyNot) {
  Rig rig;
  rig.channel->third_party_copy = false;
  EXPECT_NE(rig.probe().error().find("3PC"), std::string::npos);
  rig.channel->third_party_copy = true;
  rig.channel->has_tpc_page = false;
  EXPECT_NE(rig.probe().error().find("0x8f"), std::string::npos);
  rig.channel->has_tpc_page = true;
  rig.channel->limits.extended_copy_lid1 = false;
  EXPECT_NE(rig.probe().error().find("LID1"), std::string::npos);
  rig.channel->limits.extended_copy_lid1 = true;
  rig.channel->limits.identification_cscd = false;
  EXPECT_NE(rig.probe().error().find("E4h"), std::string::npos);
  rig.channel->limits.identification_cscd = true;
  rig.channel->has_naa = false;
  EXPECT_NE(rig.probe().error().find("NAA"), std::string::npos);
  EXPECT_TRUE(rig.channel->lists.empty());  // the probe never copies
}

TEST(ExtendedCopyBlocks, OneCommandToTheSourceSplitIntoSegments) {
  Rig rig;
  auto plan = rig.probe();
  ASSERT_TRUE(plan);
  auto r = test::run_sync(rig.io, extended_copy_blocks(rig.source, *plan, 1000, 50, 250));
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_EQ(rig.channel->lists.size(), 1u);
  EXPECT_EQ(rig.channel->xcopy_luns[0], scsi::Lun::from_index(0));
  const auto& p = rig.channel->lists[0];
  ASSERT_EQ(p.size(), 16u + 64u + 3 * 28u);
  EXPECT_EQ(load_be32(p.data() + 8), 3u * 28u);
  EXPECT_EQ(p[16 + 8 + 15], std::byte{0});   // CSCD 0: the source's NAA
  EXPECT_EQ(p[48 + 8 + 15], std::byte{1});   // CSCD 1: the destination's
  const std::uint16_t blocks[] = {100, 100, 50};
  for (int i = 0; i < 3; ++i) {
    const std::byte* s = p.data() + 80 + 28 * i;
    EXPECT_EQ(load_be16(s + 10), blocks[i]);
    EXPECT_EQ(load_be64(s + 12), 1000u + 100u * static_cast<unsigned>(i));
    EXPECT_EQ(load_be64(s + 20), 50u + 100u * static_cast<unsigned>(i));
  }
  // More than one command carries (4 segments of 100 blocks): refused before sending.
  auto big = test::run_sync(rig.io, extended_copy_blocks(rig.source, *plan, 0, 0, 401));
  EXPECT_EQ(big.error(), make_error_code(errc::invalid_argument));
  EXPECT_EQ(rig.channel->lists.size(), 1u);
}

TEST(ExtendedCopyBlocks, ASenseComesBackAsAScsiError) {
  Rig rig;
  auto plan = rig.probe();
  ASSERT_TRUE(plan);
  rig.channel->xcopy_sense = scsi::SenseData::make(scsi::SenseKey::copy_aborted, {0x08, 0x04});
  auto r = test::run_sync(rig.io, extended_copy_blocks(rig.source, *plan, 0, 0, 10));
  ASSERT_FALSE(r);
  EXPECT_TRUE(extended_copy_refused(r.error()));
}

TEST(ExtendedCopyRefused, DeclinedIsNotFailed) {
  const auto with = [](scsi::SenseKey key, std::uint8_t asc, std::uint8_t ascq) {
    return make_scsi_error({.status = scsi::Status::check_condition, .sense = scsi::SenseData::make(key, {asc, ascq})});
  };
  EXPECT_TRUE(extended_copy_refused(with(scsi::SenseKey::illegal_request, 0x20, 0x00)));
  EXPECT_TRUE(extended_copy_refused(with(scsi::SenseKey::copy_aborted, 0x08, 0x04)));
  EXPECT_TRUE(extended_copy_refused(with(scsi::SenseKey::copy_aborted, 0x0d, 0x02)));
  EXPECT_FALSE(extended_copy_refused(with(scsi::SenseKey::copy_aborted, 0x0d, 0x01)));  // a device failed mid-copy
  EXPECT_FALSE(extended_copy_refused(with(scsi::SenseKey::medium_error, 0x11, 0x00)));
  EXPECT_FALSE(extended_copy_refused(make_error_code(errc::connection_closed)));
}

}  // namespace

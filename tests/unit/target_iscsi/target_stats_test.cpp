// TargetStats helpers (target/src/target_stats.hpp): the command kinds, the login failure reasons
// from Login Response statuses (RFC 7143 §11.13.5), the latency histogram's buckets, and which
// SCSI statuses count as errors (and that UNIT ATTENTION is not one of them).
#include "target_stats.hpp"

#include <gtest/gtest.h>

namespace iserkit::target {
namespace {

TEST(TargetStats, OpKindByOpcode) {
  EXPECT_EQ(op_kind(0x28), OpKind::read);   // READ(10)
  EXPECT_EQ(op_kind(0x88), OpKind::read);   // READ(16)
  EXPECT_EQ(op_kind(0x2a), OpKind::write);  // WRITE(10)
  EXPECT_EQ(op_kind(0x93), OpKind::write);  // WRITE SAME(16)
  EXPECT_EQ(op_kind(0x89), OpKind::write);  // COMPARE AND WRITE
  EXPECT_EQ(op_kind(0x12), OpKind::other);  // INQUIRY
  EXPECT_EQ(op_kind(0x35), OpKind::other);  // SYNCHRONIZE CACHE(10)
}

TEST(TargetStats, LoginFailureReasons) {
  EXPECT_EQ(login_failure_of(0x02, 0x01), LoginFailure::authentication);
  EXPECT_EQ(login_failure_of(0x02, 0x02), LoginFailure::authorization);
  EXPECT_EQ(login_failure_of(0x02, 0x03), LoginFailure::target_not_found);
  EXPECT_EQ(login_failure_of(0x02, 0x0b), LoginFailure::invalid_request);
  EXPECT_EQ(login_failure_of(0x03, 0x01), LoginFailure::service_unavailable);
  EXPECT_EQ(login_failure_of(0x03, 0x02), LoginFailure::out_of_resources);
  EXPECT_EQ(login_failure_of(0x03, 0x00), LoginFailure::target_error);
  EXPECT_STREQ(login_failure_names[static_cast<std::size_t>(LoginFailure::target_not_found)], "target_not_found");
  EXPECT_STREQ(login_failure_names[static_cast<std::size_t>(LoginFailure::not_login)], "not_login");
}

TEST(TargetStats, HistogramBuckets) {
  LatencyHistogram h;
  h.observe(std::chrono::microseconds(30));   // <= 50 µs: bucket 0
  h.observe(std::chrono::microseconds(100));  // exactly 100 µs: bucket 1 (upper bounds are inclusive)
  h.observe(std::chrono::milliseconds(3));    // <= 5 ms: bucket 6
  h.observe(std::chrono::seconds(20));        // above 10 s: the last bucket
  const auto b = h.buckets();
  EXPECT_EQ(b[0], 1u);
  EXPECT_EQ(b[1], 1u);
  EXPECT_EQ(b[6], 1u);
  EXPECT_EQ(b.back(), 1u);
  EXPECT_EQ(h.count(), 4u);
  EXPECT_NEAR(h.sum_seconds(), 20.00313, 1e-9);
}

TEST(TargetStats, StatusCounting) {
  TargetStats s;
  s.count_status(scsi::Status::good, std::nullopt);
  s.count_status(scsi::Status::check_condition,
                 scsi::SenseData::make(scsi::SenseKey::medium_error, scsi::asc::unrecovered_read_error));
  s.count_status(scsi::Status::busy, std::nullopt);
  s.count_status(scsi::Status::reservation_conflict, std::nullopt);
  s.count_reject(iscsi::RejectReason::protocol_error);
  s.count_task_management(iscsi::TaskManagementFunction::logical_unit_reset);
  EXPECT_EQ(s.sense_keys[3].load(), 1u);
  std::uint64_t other_keys = 0;
  for (std::size_t k = 0; k < 16; ++k)
    if (k != 3) other_keys += s.sense_keys[k].load();
  EXPECT_EQ(other_keys, 0u);  // GOOD counted nowhere
  EXPECT_EQ(s.busy.load(), 1u);
  EXPECT_EQ(s.reservation_conflicts.load(), 1u);
  EXPECT_EQ(s.rejects[0x04].load(), 1u);
  EXPECT_EQ(s.task_management[5].load(), 1u);
  EXPECT_EQ(s.unit_attentions.load(), 0u);
}

TEST(TargetStats, UnitAttentionIsCountedApartFromErrors) {
  TargetStats s;
  const auto power_on = scsi::SenseData::make(scsi::SenseKey::unit_attention, scsi::asc::power_on_reset_or_bus_device_reset);
  const auto resized = scsi::SenseData::make(scsi::SenseKey::unit_attention, scsi::asc::capacity_data_has_changed);
  EXPECT_TRUE(is_unit_attention(scsi::Status::check_condition, power_on));
  EXPECT_FALSE(is_unit_attention(scsi::Status::good, power_on));
  EXPECT_FALSE(is_unit_attention(scsi::Status::check_condition, std::nullopt));
  EXPECT_FALSE(is_unit_attention(scsi::Status::check_condition,
                                 scsi::SenseData::make(scsi::SenseKey::not_ready, scsi::AscPair{0x04, 0x0b})));
  s.count_status(scsi::Status::check_condition, power_on);
  s.count_status(scsi::Status::check_condition, resized);
  EXPECT_EQ(s.unit_attentions.load(), 2u);
  for (std::size_t k = 0; k < 16; ++k) EXPECT_EQ(s.sense_keys[k].load(), 0u) << "sense key " << k;
}

}  // namespace
}  // namespace iserkit::target

// The sense → errno table (errno_map.cpp): each documented row, status codes, fallbacks.
#include <gtest/gtest.h>

#include <cerrno>

#include "iserkit/scsi/errno_map.hpp"

namespace iserkit::scsi {
namespace {

int e(SenseKey key, AscPair pair) { return errno_for(SenseData::make(key, pair)); }

TEST(ErrnoMap, Statuses) {
  EXPECT_EQ(errno_for(Status::good, std::nullopt), 0);
  EXPECT_EQ(errno_for(Status::condition_met, std::nullopt), 0);
  EXPECT_EQ(errno_for(Status::busy, std::nullopt), EBUSY);
  EXPECT_EQ(errno_for(Status::task_set_full, std::nullopt), EBUSY);
  EXPECT_EQ(errno_for(Status::reservation_conflict, std::nullopt), EBADE);
  EXPECT_EQ(errno_for(Status::task_aborted, std::nullopt), ECANCELED);
  EXPECT_EQ(errno_for(Status::check_condition, std::nullopt), EIO);
}

TEST(ErrnoMap, SenseRows) {
  EXPECT_EQ(e(SenseKey::data_protect, asc::space_allocation_failed_write_protect), ENOSPC);
  EXPECT_EQ(e(SenseKey::data_protect, asc::write_protected), EROFS);
  EXPECT_EQ(e(SenseKey::illegal_request, asc::invalid_command_operation_code), EOPNOTSUPP);
  EXPECT_EQ(e(SenseKey::illegal_request, asc::lba_out_of_range), EINVAL);
  EXPECT_EQ(e(SenseKey::illegal_request, asc::invalid_field_in_cdb), EINVAL);
  EXPECT_EQ(e(SenseKey::illegal_request, asc::logical_unit_not_supported), ENXIO);
  EXPECT_EQ(e(SenseKey::medium_error, asc::unrecovered_read_error), EIO);
  EXPECT_EQ(e(SenseKey::medium_error, asc::write_error), EIO);
  EXPECT_EQ(e(SenseKey::not_ready, asc::medium_not_present), ENOMEDIUM);
  EXPECT_EQ(e(SenseKey::unit_attention, asc::power_on_reset_or_bus_device_reset), EAGAIN);
  EXPECT_EQ(e(SenseKey::recovered_error, asc::no_additional_sense), 0);
  EXPECT_EQ(e(SenseKey::miscompare, asc::miscompare_during_verify), EILSEQ);
}

}  // namespace
}  // namespace iserkit::scsi

// SCSI status/sense error category (SAM-5 §5.3, SPC-5 §4.4) and its errno mapping.
#include "iserkit/initiator/errors.hpp"

#include <gtest/gtest.h>

#include <cerrno>

#include "iserkit/common/errors.hpp"

using namespace iserkit;
using namespace iserkit::initiator;

TEST(ScsiErrors, GoodIsNoError) {
  scsi::ScsiResult r;
  EXPECT_FALSE(make_scsi_error(r));
  EXPECT_TRUE(check(r));
}

TEST(ScsiErrors, CheckConditionKeepsSenseAndMapsToErrno) {
  scsi::ScsiResult r;
  r.status = scsi::Status::check_condition;
  r.sense = scsi::SenseData::make(scsi::SenseKey::data_protect, scsi::asc::write_protected);
  auto ec = make_scsi_error(r);
  ASSERT_TRUE(ec);
  EXPECT_TRUE(is_scsi_error(ec));
  EXPECT_EQ(status_of(ec), scsi::Status::check_condition);
  auto s = sense_of(ec);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->key, scsi::SenseKey::data_protect);
  EXPECT_EQ(s->asc, 0x27);
  EXPECT_EQ(ec, std::errc::read_only_file_system);
  EXPECT_EQ(to_errno(ec), EROFS);
  // The sense key and ASC/ASCQ in words, from libsgutils2's tables.
  EXPECT_EQ(ec.message(), "CHECK CONDITION: sense=7/27/00 DATA PROTECT: Write protected");
}

TEST(ScsiErrors, NoSuchLunInWords) {
  scsi::ScsiResult r;
  r.status = scsi::Status::check_condition;
  r.sense = scsi::SenseData::make(scsi::SenseKey::illegal_request, scsi::asc::logical_unit_not_supported);
  EXPECT_EQ(make_scsi_error(r).message(), "CHECK CONDITION: sense=5/25/00 ILLEGAL REQUEST: Logical unit not supported");
}

TEST(ScsiErrors, BusyWithoutSense) {
  scsi::ScsiResult r;
  r.status = scsi::Status::busy;
  auto ec = make_scsi_error(r);
  EXPECT_FALSE(sense_of(ec));
  EXPECT_EQ(to_errno(ec), EBUSY);
  EXPECT_EQ(ec.message(), "BUSY");
}

TEST(ScsiErrors, TransportErrorsToErrno) {
  EXPECT_EQ(to_errno(make_error_code(errc::timeout)), ETIMEDOUT);
  EXPECT_EQ(to_errno(make_error_code(errc::connection_closed)), ENOTCONN);
  EXPECT_EQ(to_errno(make_error_code(errc::protocol_error)), EIO);
  EXPECT_FALSE(is_scsi_error(make_error_code(errc::timeout)));
}

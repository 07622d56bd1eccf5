// is_fatal(): which errors end a connection.
#include "iserkit/common/errors.hpp"

#include <gtest/gtest.h>

#include "iserkit/common/asio.hpp"

namespace iserkit {
namespace {

TEST(Errors, ConnectionLevelErrorsAreFatal) {
  EXPECT_TRUE(is_fatal(make_error_code(errc::header_digest_error)));
  EXPECT_TRUE(is_fatal(make_error_code(errc::connection_closed)));
  EXPECT_TRUE(is_fatal(make_error_code(errc::protocol_error)));
  EXPECT_TRUE(is_fatal(std::error_code(ECONNRESET, std::system_category())));
  // What Asio hands the datamover, converted as the datamovers convert it.
  const boost::system::error_code refused = boost::asio::error::connection_refused;
  EXPECT_TRUE(is_fatal(std::error_code(refused)));
  const boost::system::error_code eof = boost::asio::error::eof;
  EXPECT_TRUE(is_fatal(std::error_code(eof)));
}

TEST(Errors, PerCommandErrorsAreNot) {
  EXPECT_FALSE(is_fatal({}));
  EXPECT_FALSE(is_fatal(make_error_code(errc::data_digest_error)));
  EXPECT_FALSE(is_fatal(make_error_code(errc::pdu_too_large)));
  EXPECT_FALSE(is_fatal(make_error_code(errc::scsi_error)));
  EXPECT_FALSE(is_fatal(std::make_error_code(std::errc::io_error)));  // an errno from SCSI sense
}

TEST(Errors, MessagesAreReadable) {
  EXPECT_EQ(make_error_code(errc::pdu_too_large).message(), "data segment longer than negotiated");
  EXPECT_STREQ(iserkit_category().name(), "iserkit");
}

}  // namespace
}  // namespace iserkit

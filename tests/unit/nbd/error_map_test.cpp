// errno → NBD error map (nbd_bridge/error_map). Spec: NBD proto.md "Error values".
#include "nbd_bridge/error_map.hpp"

#include <gtest/gtest.h>

#include <cerrno>

#include "iserkit/common/errors.hpp"

namespace iserkit::nbd {
namespace {

std::error_code e(std::errc value) { return std::make_error_code(value); }

TEST(NbdErrorMap, SuccessIsZero) { EXPECT_EQ(to_nbd_error({}), NbdError::ok); }

TEST(NbdErrorMap, ErrnoTable) {
  EXPECT_EQ(to_nbd_error(e(std::errc::operation_not_permitted)), NbdError::perm);
  EXPECT_EQ(to_nbd_error(e(std::errc::read_only_file_system)), NbdError::perm);
  EXPECT_EQ(to_nbd_error(e(std::errc::io_error)), NbdError::io);
  EXPECT_EQ(to_nbd_error(e(std::errc::not_enough_memory)), NbdError::nomem);
  EXPECT_EQ(to_nbd_error(e(std::errc::invalid_argument)), NbdError::inval);
  EXPECT_EQ(to_nbd_error(e(std::errc::no_space_on_device)), NbdError::nospc);
  // proto.md: EDQUOT and EFBIG SHOULD map to NBD_ENOSPC
  EXPECT_EQ(to_nbd_error(std::error_code(EDQUOT, std::generic_category())), NbdError::nospc);
  EXPECT_EQ(to_nbd_error(e(std::errc::file_too_large)), NbdError::nospc);
  EXPECT_EQ(to_nbd_error(std::error_code(ESHUTDOWN, std::system_category())), NbdError::shutdown);
  EXPECT_EQ(to_nbd_error(e(std::errc::bad_address)), NbdError::inval);  // anything else
}

// proto.md: NBD_ENOTSUP only for FAST_ZERO, NBD_EOVERFLOW only for DF.
TEST(NbdErrorMap, NotsupAndOverflowDependOnFlags) {
  EXPECT_EQ(to_nbd_error(e(std::errc::not_supported)), NbdError::inval);
  EXPECT_EQ(to_nbd_error(e(std::errc::operation_not_supported), command_flag::fast_zero), NbdError::notsup);
  EXPECT_EQ(to_nbd_error(e(std::errc::value_too_large)), NbdError::inval);
  EXPECT_EQ(to_nbd_error(e(std::errc::value_too_large), command_flag::df), NbdError::overflow);
}

// Issue 11: a target that went away is an I/O error, never "invalid argument".
TEST(NbdErrorMap, TransportErrorsAreIoErrors) {
  for (int value : {ENOTCONN, ECONNRESET, ECONNREFUSED, ECONNABORTED, EPIPE, ETIMEDOUT, EHOSTUNREACH, ENETUNREACH,
                    ENETDOWN, ECANCELED})
    EXPECT_EQ(to_nbd_error(std::error_code(value, std::generic_category())), NbdError::io) << value;
  EXPECT_EQ(to_nbd_error(make_error_code(errc::session_lost)), NbdError::io);
}

TEST(NbdErrorMap, OtherCategoriesNeverMapToSuccess) {
  EXPECT_NE(to_nbd_error(make_error_code(errc::timeout)), NbdError::ok);
  EXPECT_NE(to_nbd_error(make_error_code(errc::scsi_error)), NbdError::ok);
}

TEST(NbdErrorMap, InverseMap) {
  EXPECT_EQ(to_errc(NbdError::nospc), std::errc::no_space_on_device);
  EXPECT_EQ(to_errc(NbdError::perm), std::errc::operation_not_permitted);
  EXPECT_EQ(to_errc(static_cast<NbdError>(1234)), std::errc::invalid_argument);
}

}  // namespace
}  // namespace iserkit::nbd

// Request validation and handshake-derived parameters (nbd_bridge/request_check, handshake pure
// helpers). Spec: NBD proto.md "Request types", "Command flags", "Size constraints", "Error values".
#include "nbd_bridge/request_check.hpp"

#include <gtest/gtest.h>

#include "nbd_bridge/handshake.hpp"

namespace iserkit::nbd {
namespace {

namespace tf = transmission_flag;

TransmissionParams writable() {
  return {.size_bytes = 1 << 20,
          .transmission_flags = tf::has_flags | tf::send_flush | tf::send_fua | tf::send_trim | tf::send_write_zeroes,
          .structured_replies = false,
          .min_block_size_bytes = 1,
          .max_payload_bytes = 32u << 20};
}

RequestHeader request(Command command, std::uint64_t offset, std::uint32_t length, std::uint16_t flags = 0) {
  return {.flags = flags, .type = static_cast<std::uint16_t>(command), .cookie = 1, .offset_bytes = offset,
          .length_bytes = length};
}

TEST(NbdRequestCheck, InRangeRequestsPass) {
  const auto p = writable();
  EXPECT_TRUE(check_request(request(Command::read, 0, 4096), p).ok());
  EXPECT_TRUE(check_request(request(Command::write, (1 << 20) - 512, 512, command_flag::fua), p).ok());
  EXPECT_TRUE(check_request(request(Command::flush, 0, 0), p).ok());
  EXPECT_TRUE(check_request(request(Command::trim, 0, 1 << 20), p).ok());
  EXPECT_TRUE(check_request(request(Command::write_zeroes, 4096, 4096, command_flag::no_hole), p).ok());
  EXPECT_TRUE(check_request(request(Command::read, 1 << 20, 0), p).ok());  // empty read at the end
  EXPECT_TRUE(check_request(request(Command::read, 0, 512, command_flag::fua), p).ok());  // FUA accepted anywhere
}

// proto.md "Error values": ENOSPC for writes past the end, EINVAL for reads and trims.
TEST(NbdRequestCheck, PastTheEnd) {
  const auto p = writable();
  EXPECT_EQ(check_request(request(Command::read, 1 << 20, 1), p).error, NbdError::inval);
  EXPECT_EQ(check_request(request(Command::trim, (1 << 20) - 1, 2), p).error, NbdError::inval);
  EXPECT_EQ(check_request(request(Command::write, (1 << 20) - 1, 2), p).error, NbdError::nospc);
  EXPECT_EQ(check_request(request(Command::write_zeroes, 1 << 21, 1), p).error, NbdError::nospc);
  // offset + length overflowing 64 bits must not wrap around into range
  EXPECT_EQ(check_request(request(Command::read, UINT64_MAX - 10, 100), p).error, NbdError::inval);
  EXPECT_EQ(check_request(request(Command::write, UINT64_MAX, 1), p).error, NbdError::nospc);
}

TEST(NbdRequestCheck, ReadOnlyGetsEperm) {
  auto p = writable();
  p.transmission_flags = tf::has_flags | tf::read_only | tf::send_flush;
  EXPECT_EQ(check_request(request(Command::write, 0, 512), p).error, NbdError::perm);
  EXPECT_EQ(check_request(request(Command::trim, 0, 512), p).error, NbdError::perm);
  EXPECT_EQ(check_request(request(Command::write_zeroes, 0, 512), p).error, NbdError::perm);
  EXPECT_TRUE(check_request(request(Command::read, 0, 512), p).ok());
  EXPECT_TRUE(check_request(request(Command::flush, 0, 0), p).ok());
}

TEST(NbdRequestCheck, UnknownCommandsAndFlags) {
  const auto p = writable();
  EXPECT_EQ(check_request(request(static_cast<Command>(42), 0, 0), p).error, NbdError::inval);
  EXPECT_EQ(check_request(request(Command::block_status, 0, 512), p).error, NbdError::inval);  // no context
  EXPECT_EQ(check_request(request(Command::read, 0, 512, 0x8000), p).error, NbdError::inval);
  EXPECT_EQ(check_request(request(Command::write, 0, 512, command_flag::no_hole), p).error, NbdError::inval);
  EXPECT_EQ(check_request(request(Command::write_zeroes, 0, 512, command_flag::fast_zero), p).error, NbdError::inval);
  EXPECT_EQ(check_request(request(Command::read, 0, 512, command_flag::df), p).error, NbdError::inval);
  EXPECT_EQ(check_request(request(Command::flush, 0, 1), p).error, NbdError::inval);
}

TEST(NbdRequestCheck, DfNeedsStructuredRepliesAndSendDf) {
  auto p = writable();
  p.structured_replies = true;
  p.transmission_flags |= tf::send_df;
  EXPECT_TRUE(check_request(request(Command::read, 0, 512, command_flag::df), p).ok());
  EXPECT_EQ(check_request(request(Command::write, 0, 512, command_flag::df), p).error, NbdError::inval);
}

TEST(NbdRequestCheck, NotAdvertisedCommands) {
  auto p = writable();
  p.transmission_flags = tf::has_flags;
  EXPECT_EQ(check_request(request(Command::flush, 0, 0), p).error, NbdError::inval);
  EXPECT_EQ(check_request(request(Command::trim, 0, 512), p).error, NbdError::inval);
  EXPECT_EQ(check_request(request(Command::write_zeroes, 0, 512), p).error, NbdError::inval);
  EXPECT_EQ(check_request(request(Command::write, 0, 512, command_flag::fua), p).error, NbdError::inval);
  EXPECT_TRUE(check_request(request(Command::cache, 0, 512), p).ok());
}

TEST(NbdRequestCheck, AlignmentAndMaximumPayload) {
  auto p = writable();
  p.min_block_size_bytes = 512;
  p.max_payload_bytes = 1 << 16;
  EXPECT_EQ(check_request(request(Command::read, 1, 512), p).error, NbdError::inval);
  EXPECT_EQ(check_request(request(Command::write, 512, 100), p).error, NbdError::inval);
  EXPECT_EQ(check_request(request(Command::read, 0, (1 << 16) + 512), p).error, NbdError::inval);
  EXPECT_EQ(check_request(request(Command::write, 0, (1 << 16) + 512), p).error, NbdError::inval);
  // payload-less commands may exceed the maximum payload (proto.md "Size constraints")
  EXPECT_TRUE(check_request(request(Command::trim, 0, 1 << 19), p).ok());
  EXPECT_TRUE(check_request(request(Command::write_zeroes, 0, 1 << 19), p).ok());
}

TEST(NbdHandshakeHelpers, TransmissionFlagsFromExportInfo) {
  ExportInfo info{.size_bytes = 1,
                  .can_flush = true,
                  .can_fua = true,
                  .can_trim = true,
                  .can_write_zeroes = true,
                  .can_multi_conn = true};
  EXPECT_EQ(transmission_flags_for(info, false, false),
            tf::has_flags | tf::send_flush | tf::send_fua | tf::send_trim | tf::send_write_zeroes | tf::can_multi_conn);
  EXPECT_EQ(transmission_flags_for(info, true, true),
            tf::has_flags | tf::read_only | tf::send_flush | tf::send_fua | tf::can_multi_conn | tf::send_df);
  EXPECT_EQ(transmission_flags_for(ExportInfo{}, false, false), tf::has_flags);
}

TEST(NbdHandshakeHelpers, BlockSizesAreCappedAndConsistent) {
  ExportInfo info{.min_block_size_bytes = 512, .preferred_block_size_bytes = 4096, .max_block_size_bytes = 1u << 30};
  auto sizes = block_size_for(info, 32u << 20);
  EXPECT_EQ(sizes.minimum_bytes, 512u);
  EXPECT_EQ(sizes.preferred_bytes, 4096u);
  EXPECT_EQ(sizes.maximum_payload_bytes, 32u << 20);
  info.max_block_size_bytes = 1024;  // smaller than preferred: preferred shrinks to fit
  sizes = block_size_for(info, 32u << 20);
  EXPECT_EQ(sizes.preferred_bytes, 1024u);
  EXPECT_GE(sizes.maximum_payload_bytes, sizes.preferred_bytes);
}

}  // namespace
}  // namespace iserkit::nbd

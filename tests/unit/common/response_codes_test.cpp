// The typed response codes (response_codes.hpp) are the wire bytes of RFC 7143 §11.4.3, §11.6.1
// and §11.15.1: encoding a PDU with them puts the same byte on the wire, decoding reads it back,
// and a value the enum does not name survives the round trip.
#include <gtest/gtest.h>

#include "iserkit/iscsi/response_codes.hpp"

using namespace iserkit;
using namespace iserkit::iscsi;

namespace {

// RFC 7143 §11.4, §11.6, §11.15: the Response field is byte 2 of the BHS; the SCSI Response's
// Status is byte 3.
constexpr std::size_t response_byte = 2;
constexpr std::size_t status_byte = 3;

TEST(ResponseCodes, ScsiResponseAndStatusAreTheWireBytes) {
  ScsiResponse r;
  r.response = to_wire(ScsiResponseCode::target_failure);
  r.status = to_wire(scsi::Status::task_set_full);
  const Bhs bhs = encode_bhs(r);
  EXPECT_EQ(bhs[response_byte], std::byte{0x01});
  EXPECT_EQ(bhs[status_byte], std::byte{0x28});
  auto back = decode_bhs_as<ScsiResponse>(bhs);
  ASSERT_TRUE(back);
  EXPECT_EQ(response_of(*back), ScsiResponseCode::target_failure);
  EXPECT_EQ(status_of(*back), scsi::Status::task_set_full);
}

// Each code of `table` puts its byte in a `Pdu`'s Response field and decodes back to itself.
template <class Pdu, class Code>
void expect_wire_bytes(std::initializer_list<std::pair<Code, std::uint8_t>> table) {
  for (const auto& [code, byte] : table) {
    Pdu r;
    r.response = to_wire(code);
    const Bhs bhs = encode_bhs(r);
    EXPECT_EQ(bhs[response_byte], std::byte{byte});
    auto back = decode_bhs_as<Pdu>(bhs);
    ASSERT_TRUE(back);
    EXPECT_EQ(response_of(*back), code);
  }
}

TEST(ResponseCodes, TaskManagementResponseCodesAreTheWireBytes) {
  expect_wire_bytes<TaskManagementResponse, TaskManagementResponseCode>({
      {TaskManagementResponseCode::function_complete, 0},
      {TaskManagementResponseCode::task_does_not_exist, 1},
      {TaskManagementResponseCode::lun_does_not_exist, 2},
      {TaskManagementResponseCode::task_still_allegiant, 3},
      {TaskManagementResponseCode::task_reassignment_not_supported, 4},
      {TaskManagementResponseCode::function_not_supported, 5},
      {TaskManagementResponseCode::function_authorization_failed, 6},
      {TaskManagementResponseCode::function_rejected, 255},
  });
}

TEST(ResponseCodes, LogoutResponseCodesAreTheWireBytes) {
  expect_wire_bytes<LogoutResponse, LogoutResponseCode>({
      {LogoutResponseCode::closed_successfully, 0},
      {LogoutResponseCode::cid_not_found, 1},
      {LogoutResponseCode::connection_recovery_not_supported, 2},
      {LogoutResponseCode::cleanup_failed, 3},
  });
}

TEST(ResponseCodes, UnnamedValuesSurviveDecoding) {
  // A vendor-specific SCSI Response code (0x80-0xff) is not a named enumerator but stays as sent.
  ScsiResponse r;
  r.response = 0x85;
  auto back = decode_bhs_as<ScsiResponse>(encode_bhs(r));
  ASSERT_TRUE(back);
  EXPECT_EQ(to_wire(response_of(*back)), 0x85);
  EXPECT_NE(response_of(*back), ScsiResponseCode::command_completed);
}

TEST(ResponseCodes, OnlyCompleteOrNoSuchTaskEndAnAbortedTask) {
  EXPECT_TRUE(abort_task_ended(TaskManagementResponseCode::function_complete));
  EXPECT_TRUE(abort_task_ended(TaskManagementResponseCode::task_does_not_exist));
  EXPECT_FALSE(abort_task_ended(TaskManagementResponseCode::lun_does_not_exist));
  EXPECT_FALSE(abort_task_ended(TaskManagementResponseCode::function_not_supported));
  EXPECT_FALSE(abort_task_ended(TaskManagementResponseCode::function_rejected));
}

}  // namespace

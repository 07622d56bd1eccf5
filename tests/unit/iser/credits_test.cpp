// Receive-buffer accounting for iSER (RFC 7145 §8): PDU classes and unexpected-PDU credits.
#include "iserkit/iser/credits.hpp"

#include <gtest/gtest.h>

namespace iserkit::iser {
namespace {

iscsi::Bhs bhs_of(iscsi::Opcode op, std::uint32_t itt, std::uint32_t ttt = 0xffffffff) {
  iscsi::Bhs b{};
  b[0] = static_cast<std::byte>(op);
  store_be32(b.data() + 16, itt);
  store_be32(b.data() + 20, ttt);
  return b;
}

TEST(IserCredits, InitiatorRequestsAreUnexpected) {
  using iscsi::Opcode;
  for (auto op : {Opcode::scsi_command, Opcode::task_management_request, Opcode::text_request,
                  Opcode::logout_request, Opcode::login_request})
    EXPECT_EQ(classify(bhs_of(op, 1), true), PduClass::unexpected) << static_cast<int>(op);
  EXPECT_EQ(classify(bhs_of(Opcode::nop_out, 5), true), PduClass::unexpected);  // a ping with ITT
  // RFC 7143 §11.18: ITT 0xffffffff + TTT answers the target's NOP-In: no credit needed.
  EXPECT_EQ(classify(bhs_of(Opcode::nop_out, 0xffffffff, 0x10), true), PduClass::answer);
  EXPECT_EQ(classify(bhs_of(Opcode::data_out, 1, 2), true), PduClass::other);
}

TEST(IserCredits, TargetPingsAndAsyncAreUnexpectedResponsesAreAnswers) {
  using iscsi::Opcode;
  EXPECT_EQ(classify(bhs_of(Opcode::nop_in, 0xffffffff, 0x20), false), PduClass::unexpected);
  EXPECT_EQ(classify(bhs_of(Opcode::async_message, 0xffffffff), false), PduClass::unexpected);
  EXPECT_EQ(classify(bhs_of(Opcode::nop_in, 7, 0xffffffff), false), PduClass::answer);
  for (auto op : {Opcode::scsi_response, Opcode::task_management_response, Opcode::text_response,
                  Opcode::login_response, Opcode::logout_response, Opcode::reject})
    EXPECT_EQ(classify(bhs_of(op, 3), false), PduClass::answer) << static_cast<int>(op);
  EXPECT_EQ(classify(bhs_of(Opcode::data_in, 3), false), PduClass::other);
}

TEST(IserCredits, NeverMoreUnexpectedPdusThanPostedReceives) {
  UnexpectedPduCredits credits(4);  // the peer posted 4 receives for unexpected PDUs
  int sent = 0;
  for (int i = 0; i < 10; ++i)
    if (credits.try_acquire()) ++sent;
  EXPECT_EQ(sent, 4);
  EXPECT_EQ(credits.outstanding(), 4u);
  EXPECT_FALSE(credits.try_acquire());
}

TEST(IserCredits, CreditsComeBackAsAnswersArrive) {
  UnexpectedPduCredits credits(2);
  ASSERT_TRUE(credits.try_acquire());
  ASSERT_TRUE(credits.try_acquire());
  ASSERT_FALSE(credits.try_acquire());
  credits.release();  // one response arrived: the peer re-posted that buffer
  EXPECT_EQ(credits.outstanding(), 1u);
  EXPECT_TRUE(credits.try_acquire());
  EXPECT_FALSE(credits.try_acquire());
  credits.release();
  credits.release();
  credits.release();  // a stray extra answer never makes credits out of nothing
  EXPECT_EQ(credits.outstanding(), 0u);
  EXPECT_TRUE(credits.try_acquire());
  EXPECT_TRUE(credits.try_acquire());
  EXPECT_FALSE(credits.try_acquire());
}

TEST(IserCredits, ZeroMeansNoLimitAndLimitCanShrinkAfterLogin) {
  UnexpectedPduCredits credits;
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(credits.try_acquire());
  credits.set_limit(1000);  // negotiated MaxOutstandingUnexpectedPDUs: already at the limit
  EXPECT_FALSE(credits.try_acquire());
  credits.release();
  EXPECT_TRUE(credits.try_acquire());
}

TEST(IserCredits, ReceiveDepth) {
  static_assert(receive_depth(128, 4, 4) == 136);
  EXPECT_EQ(receive_depth(1, 0, 0), 1u);
}

}  // namespace
}  // namespace iserkit::iser

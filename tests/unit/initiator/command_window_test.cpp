// The CmdSN window (RFC 7143 §4.2.2.1) with RFC 1982 comparisons, including wraparound at 2^32.
#include "command_window.hpp"

#include <gtest/gtest.h>

using iserkit::SerialNumber;
using iserkit::initiator::CommandWindow;

TEST(CommandWindow, OpensAndCloses) {
  CommandWindow w;
  w.reset(SerialNumber(10), SerialNumber(10), SerialNumber(12));
  EXPECT_EQ(w.available(), 3u);
  EXPECT_EQ(w.take().value(), 10u);
  EXPECT_EQ(w.take().value(), 11u);
  EXPECT_EQ(w.take().value(), 12u);
  EXPECT_FALSE(w.is_open());  // CmdSN 13 > MaxCmdSN 12: never sent
  EXPECT_EQ(w.available(), 0u);
  // The target completes two commands and opens the window by two.
  EXPECT_TRUE(w.update(SerialNumber(12), SerialNumber(14)));
  EXPECT_EQ(w.available(), 2u);
}

TEST(CommandWindow, ZeroWindowWhenMaxIsExpMinusOne) {
  CommandWindow w;
  w.reset(SerialNumber(5), SerialNumber(5), SerialNumber(4));  // MaxCmdSN = ExpCmdSN - 1: closed
  EXPECT_FALSE(w.is_open());
  EXPECT_TRUE(w.update(SerialNumber(5), SerialNumber(5)));
  EXPECT_EQ(w.available(), 1u);
}

TEST(CmdSnWindow, CmdSnAboveMaxIsIgnored) {
  CommandWindow w;
  w.reset(SerialNumber(100), SerialNumber(100), SerialNumber(110));
  // RFC 7143 §4.2.2.1: MaxCmdSN < ExpCmdSN - 1 → both ignored.
  EXPECT_FALSE(w.update(SerialNumber(200), SerialNumber(150)));
  EXPECT_EQ(w.exp_cmd_sn().value(), 100u);
  EXPECT_EQ(w.max_cmd_sn().value(), 110u);
  // Stale (smaller) values never shrink the window.
  EXPECT_FALSE(w.update(SerialNumber(90), SerialNumber(95)));
  EXPECT_EQ(w.max_cmd_sn().value(), 110u);
  EXPECT_EQ(w.available(), 11u);
}

TEST(CommandWindow, WrapsAroundTwoToThe32) {
  CommandWindow w;
  w.reset(SerialNumber(0xfffffffe), SerialNumber(0xfffffffe), SerialNumber(1));
  EXPECT_EQ(w.available(), 4u);  // 0xfffffffe, 0xffffffff, 0, 1
  EXPECT_EQ(w.take().value(), 0xfffffffeu);
  EXPECT_EQ(w.take().value(), 0xffffffffu);
  EXPECT_EQ(w.take().value(), 0u);
  EXPECT_EQ(w.take().value(), 1u);
  EXPECT_FALSE(w.is_open());
  EXPECT_TRUE(w.update(SerialNumber(0), SerialNumber(3)));
  EXPECT_EQ(w.available(), 2u);
  // An update from before the wrap is stale under RFC 1982 and is ignored.
  EXPECT_FALSE(w.update(SerialNumber(0xfffffff0), SerialNumber(0xfffffff8)));
  EXPECT_EQ(w.max_cmd_sn().value(), 3u);
}

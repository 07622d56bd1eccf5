// CmdSnWindow (RFC 7143 §4.2.2.1).
#include "cmd_sn_window.hpp"

#include <gtest/gtest.h>

namespace iserkit::target {
namespace {

TEST(CmdSnWindow, InWindowAdvancesExpCmdSn) {
  CmdSnWindow w(SerialNumber(10), 4);
  EXPECT_EQ(w.max_cmd_sn(), SerialNumber(13));
  EXPECT_EQ(w.admit(SerialNumber(10), false), Admission::accept);
  EXPECT_EQ(w.exp_cmd_sn(), SerialNumber(11));
  EXPECT_EQ(w.max_cmd_sn(), SerialNumber(13));  // one outstanding
  w.release();
  EXPECT_EQ(w.max_cmd_sn(), SerialNumber(14));
}

TEST(CmdSnWindow, CmdSnAboveMaxIsIgnored) {
  CmdSnWindow w(SerialNumber(10), 4);
  EXPECT_EQ(w.admit(SerialNumber(14), false), Admission::ignore);
  EXPECT_EQ(w.exp_cmd_sn(), SerialNumber(10));
}

TEST(CmdSnWindow, CmdSnBelowExpIsIgnored) {
  CmdSnWindow w(SerialNumber(10), 4);
  EXPECT_EQ(w.admit(SerialNumber(10), false), Admission::accept);
  EXPECT_EQ(w.admit(SerialNumber(10), false), Admission::ignore);  // a duplicate
  EXPECT_EQ(w.admit(SerialNumber(9), false), Admission::ignore);
}

TEST(CmdSnWindow, ImmediateIsAcceptedAndDoesNotAdvance) {
  CmdSnWindow w(SerialNumber(10), 4);
  EXPECT_EQ(w.admit(SerialNumber(500), true), Admission::accept);
  EXPECT_EQ(w.exp_cmd_sn(), SerialNumber(10));
}

TEST(CmdSnWindow, FullWindowIgnoresUntilRelease) {
  CmdSnWindow w(SerialNumber(0), 2);
  EXPECT_EQ(w.admit(SerialNumber(0), false), Admission::accept);
  EXPECT_EQ(w.admit(SerialNumber(1), false), Admission::accept);
  EXPECT_EQ(w.admit(SerialNumber(2), false), Admission::ignore);
  w.release();
  EXPECT_EQ(w.admit(SerialNumber(2), false), Admission::accept);
}

TEST(CmdSnWindow, OutOfOrderFillsGap) {
  CmdSnWindow w(SerialNumber(10), 8);
  EXPECT_EQ(w.admit(SerialNumber(12), false), Admission::accept);
  EXPECT_EQ(w.exp_cmd_sn(), SerialNumber(10));
  EXPECT_EQ(w.admit(SerialNumber(12), false), Admission::ignore);
  EXPECT_EQ(w.admit(SerialNumber(11), false), Admission::accept);
  EXPECT_EQ(w.admit(SerialNumber(10), false), Admission::accept);
  EXPECT_EQ(w.exp_cmd_sn(), SerialNumber(13));
}

TEST(CmdSnWindow, WrapsAroundSerialSpace) {
  CmdSnWindow w(SerialNumber(0xfffffffeu), 4);
  EXPECT_EQ(w.admit(SerialNumber(0xfffffffeu), false), Admission::accept);
  EXPECT_EQ(w.admit(SerialNumber(0xffffffffu), false), Admission::accept);
  EXPECT_EQ(w.admit(SerialNumber(0), false), Admission::accept);
  EXPECT_EQ(w.exp_cmd_sn(), SerialNumber(1));
  EXPECT_EQ(w.admit(SerialNumber(2), false), Admission::ignore);  // MaxCmdSN is 1
}

}  // namespace
}  // namespace iserkit::target

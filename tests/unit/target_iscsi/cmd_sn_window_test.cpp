// CmdSnWindow (RFC 7143 §4.2.2.1), table-driven: each scenario opens a window (ExpCmdSN, depth)
// and runs its steps, checking every admission, ExpCmdSN and MaxCmdSN where a step says so.
#include "cmd_sn_window.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace iserkit::target {
namespace {

struct Step {
  enum class Do { admit, release, exp_cmd_sn, max_cmd_sn } what;
  std::uint32_t sn = 0;  // the CmdSN admitted, or the ExpCmdSN/MaxCmdSN expected
  bool immediate = false;
  Admission want = Admission::accept;
};

Step admit(std::uint32_t sn, Admission want) { return {.what = Step::Do::admit, .sn = sn, .want = want}; }
Step immediate(std::uint32_t sn, Admission want) {
  return {.what = Step::Do::admit, .sn = sn, .immediate = true, .want = want};
}
Step release() { return {.what = Step::Do::release}; }
Step exp_is(std::uint32_t sn) { return {.what = Step::Do::exp_cmd_sn, .sn = sn}; }
Step max_is(std::uint32_t sn) { return {.what = Step::Do::max_cmd_sn, .sn = sn}; }

struct Scenario {
  std::string name;
  std::uint32_t exp_cmd_sn;
  std::uint32_t depth;
  std::vector<Step> steps;
};

constexpr auto accept = Admission::accept;
constexpr auto ignore = Admission::ignore;

std::vector<Scenario> scenarios() {
  return {
      {"InWindowAdvancesExpCmdSn", 10, 4,
       {max_is(13), admit(10, accept), exp_is(11), max_is(13) /* one outstanding */, release(), max_is(14)}},
      {"CmdSnAboveMaxIsIgnored", 10, 4, {admit(14, ignore), exp_is(10)}},
      {"CmdSnBelowExpIsIgnored", 10, 4, {admit(10, accept), admit(10, ignore) /* a duplicate */, admit(9, ignore)}},
      {"ImmediateIsAcceptedAndDoesNotAdvance", 10, 4, {immediate(500, accept), exp_is(10)}},
      {"FullWindowIgnoresUntilRelease", 0, 2,
       {admit(0, accept), admit(1, accept), admit(2, ignore), release(), admit(2, accept)}},
      {"OutOfOrderFillsGap", 10, 8,
       {admit(12, accept), exp_is(10), admit(12, ignore), admit(11, accept), admit(10, accept), exp_is(13)}},
      {"WrapsAroundSerialSpace", 0xfffffffeu, 4,
       {admit(0xfffffffeu, accept), admit(0xffffffffu, accept), admit(0, accept), exp_is(1),
        admit(2, ignore) /* MaxCmdSN is 1 */}},
  };
}

class CmdSnWindowTable : public ::testing::TestWithParam<Scenario> {};

TEST_P(CmdSnWindowTable, Steps) {
  const Scenario& s = GetParam();
  CmdSnWindow w(SerialNumber(s.exp_cmd_sn), s.depth);
  for (std::size_t i = 0; i < s.steps.size(); ++i) {
    const Step& step = s.steps[i];
    SCOPED_TRACE("step " + std::to_string(i));
    switch (step.what) {
      case Step::Do::admit: EXPECT_EQ(w.admit(SerialNumber(step.sn), step.immediate), step.want); break;
      case Step::Do::release: w.release(); break;
      case Step::Do::exp_cmd_sn: EXPECT_EQ(w.exp_cmd_sn(), SerialNumber(step.sn)); break;
      case Step::Do::max_cmd_sn: EXPECT_EQ(w.max_cmd_sn(), SerialNumber(step.sn)); break;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(CmdSnWindow, CmdSnWindowTable, ::testing::ValuesIn(scenarios()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace iserkit::target

// Shared by the initiator's LoginMachine tests (login_test.cpp, login_chap_test.cpp): a Login
// Response from the target of the scripted login (whose LoginConfig is the engine harness's
// default_login_config(): ISID 80 01 02 03 00 01, ITT 7).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "login.hpp"

namespace iserkit::test {

inline constexpr std::array<std::byte, 6> isid{std::byte{0x80}, std::byte{1}, std::byte{2},
                                               std::byte{3},    std::byte{0}, std::byte{1}};

/// The target's Login Response for the stage `csg` → `nsg` (TSIH 0x1234, StatSN 40, CmdSN
/// window 1..32), with the status class and detail given (0/0: success).
inline iscsi::LoginResponse login_response(iscsi::LoginStage csg, iscsi::LoginStage nsg, bool transit,
                                           std::uint8_t status_class = 0, std::uint8_t detail = 0) {
  iscsi::LoginResponse r;
  r.transit = transit;
  r.csg = csg;
  r.nsg = nsg;
  r.isid = isid;
  r.itt = iscsi::Itt{7};
  r.tsih = 0x1234;
  r.stat_sn = SerialNumber(40);
  r.exp_cmd_sn = SerialNumber(1);
  r.max_cmd_sn = SerialNumber(32);
  r.status_class = status_class;
  r.status_detail = detail;
  return r;
}

}  // namespace iserkit::test

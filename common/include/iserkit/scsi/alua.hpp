// Asymmetric logical unit access (ALUA), both ends: the REPORT TARGET PORT GROUPS CDB builder and
// parser and the parameter data encoder and parser (SPC-5 §6.36), the asymmetric access states (SPC-5 §5.16.2.4),
// the SET TARGET PORT GROUPS CDB and parameter list (SPC-4 §6.45), the sense data that tell of them (SPC-5 §5.16.2.4, §5.16.2.6: NOT READY 04h/0Ah transitioning,
// 04h/0Bh standby, 04h/0Ch unavailable; UNIT ATTENTION 2Ah/06h ASYMMETRIC ACCESS STATE CHANGED),
// and the target-port designators of VPD 0x83 (SPC-5 §7.7.6.5 relative target port, §7.7.6.6
// target port group). Layer 1 (pure codecs); the initiator parses what the target encodes here.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "iserkit/common/bytes.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/scsi/cdb.hpp"
#include "iserkit/scsi/inquiry.hpp"
#include "iserkit/scsi/sense.hpp"

namespace iserkit::scsi {

/// ASYMMETRIC ACCESS STATE of a target port group (SPC-5 §6.36.2, table 272).
enum class AccessState : std::uint8_t {
  active_optimized = 0x0,
  active_non_optimized = 0x1,
  standby = 0x2,
  unavailable = 0x3,
  logical_block_dependent = 0x4,
  offline = 0xe,
  transitioning = 0xf,
};

/// "active/optimized", "active/non-optimized", "standby", "unavailable", "lba-dependent",
/// "offline", "transitioning", or "unknown" for a reserved value.
std::string_view to_string(AccessState state) noexcept;

/// True for the states in which a port processes reads and writes (SPC-5 §5.16.2.4.2,
/// §5.16.2.4.3; logical block dependent is treated as non-optimized).
constexpr bool processes_io(AccessState s) noexcept {
  return s == AccessState::active_optimized || s == AccessState::active_non_optimized ||
         s == AccessState::logical_block_dependent;
}

/// Options of REPORT TARGET PORT GROUPS (MAINTENANCE IN, service action 0Ah; SPC-5 §6.36.1).
struct ReportTargetPortGroupsOptions {
  bool extended_header = false;          ///< PARAMETER DATA FORMAT 001b (an 8-byte header)
  std::uint32_t allocation_length = 1024;  ///< bytes
};
/// The 12-byte REPORT TARGET PORT GROUPS CDB.
Cdb report_target_port_groups(const ReportTargetPortGroupsOptions& o = {}) noexcept;

/// Parses a REPORT TARGET PORT GROUPS CDB (SPC-5 §6.36.1); the caller has checked the opcode
/// (MAINTENANCE IN) and service action (0Ah) and that `cdb` has 12 bytes.
/// Errors: errc::invalid_argument for a PARAMETER DATA FORMAT other than 000b and 001b (the
/// target answers INVALID FIELD IN CDB, byte 1 bit 7).
Result<ReportTargetPortGroupsOptions> parse_report_target_port_groups_cdb(ConstByteSpan cdb);

/// One target port group descriptor of the REPORT TARGET PORT GROUPS parameter data.
struct TargetPortGroupDescriptor {
  std::uint16_t id = 0;                      ///< TARGET PORT GROUP
  AccessState state = AccessState::active_optimized;
  bool preferred = false;                    ///< PREF
  std::vector<std::uint16_t> relative_ports;  ///< RELATIVE TARGET PORT IDENTIFIER of each port
  friend bool operator==(const TargetPortGroupDescriptor&, const TargetPortGroupDescriptor&) = default;
};

/// Parses REPORT TARGET PORT GROUPS parameter data (SPC-5 §6.36.2; either header format). Data cut
/// short by the allocation length yields the groups that fit whole.
/// Errors: errc::protocol_error when the data is shorter than its header or a descriptor's port
/// count runs past RETURN DATA LENGTH.
Result<std::vector<TargetPortGroupDescriptor>> parse_report_target_port_groups(ConstByteSpan data);

/// SUPPORTED states bits of a target port group descriptor (SPC-5 §6.36.2, byte 1).
struct SupportedAccessStates {
  static constexpr std::uint8_t active_optimized = 0x01;      ///< AO_SUP
  static constexpr std::uint8_t active_non_optimized = 0x02;  ///< AN_SUP
  static constexpr std::uint8_t standby = 0x04;               ///< S_SUP
  static constexpr std::uint8_t unavailable = 0x08;           ///< U_SUP
  static constexpr std::uint8_t transitioning = 0x80;         ///< T_SUP
};

/// How encode_report_target_port_groups() lays the parameter data out.
struct ReportTargetPortGroupsFormat {
  bool extended_header = false;  ///< PARAMETER DATA FORMAT 001b: the 8-byte header (transition time 0 = unknown)
  /// SUPPORTED bits of every descriptor (SupportedAccessStates, ORed).
  std::uint8_t supported_states = 0;
};
/// Encodes REPORT TARGET PORT GROUPS parameter data (SPC-5 §6.36.2): RETURN DATA LENGTH (the bytes
/// after it), the extended header when asked, then per group an 8-byte descriptor (PREF, state,
/// SUPPORTED bits, TARGET PORT GROUP, STATUS CODE 0) and 4 bytes per relative target port (at most
/// 255 ports per group: the count is one byte). Whole: the caller cuts it to the allocation length.
std::vector<std::byte> encode_report_target_port_groups(const std::vector<TargetPortGroupDescriptor>& groups,
                                                        const ReportTargetPortGroupsFormat& format);

/// One set target port group descriptor of the SET TARGET PORT GROUPS parameter list (SPC-5
/// §6.47.2): the state the application client asks target port group `id` to take.
struct SetTargetPortGroup {
  std::uint16_t id = 0;  ///< TARGET PORT GROUP
  AccessState state = AccessState::active_optimized;
  friend bool operator==(const SetTargetPortGroup&, const SetTargetPortGroup&) = default;
};
/// The SET TARGET PORT GROUPS parameter list (SPC-4 §6.45.2): 4 reserved bytes, then 4 bytes per
/// group (state in byte 0 bits 3..0, TARGET PORT GROUP in bytes 2..3).
std::vector<std::byte> encode_set_target_port_groups(const std::vector<SetTargetPortGroup>& groups);
/// The 12-byte SET TARGET PORT GROUPS CDB (MAINTENANCE OUT, service action 0Ah; SPC-4 §6.45.1)
/// for a parameter list of `parameter_list_length` bytes.
Cdb set_target_port_groups(std::uint32_t parameter_list_length) noexcept;
/// Parses a SET TARGET PORT GROUPS parameter list (SPC-4 §6.45.2), as the target receives it.
/// An empty list (0 bytes) is no descriptor.
/// Errors: errc::invalid_argument when the list is 1..3 bytes long or its descriptors are not
/// whole (length − 4 not a multiple of 4): the target answers PARAMETER LIST LENGTH ERROR.
Result<std::vector<SetTargetPortGroup>> parse_set_target_port_groups(ConstByteSpan data);

/// What a command's result says about the access state of the port it went through.
enum class AluaCondition {
  none,           ///< nothing about ALUA
  state_changed,  ///< UNIT ATTENTION 2Ah/06h ASYMMETRIC ACCESS STATE CHANGED: re-read the states
  transitioning,  ///< NOT READY 04h/0Ah: the port's group is changing state
  standby,        ///< NOT READY 04h/0Bh: the port is in standby
  unavailable,    ///< NOT READY 04h/0Ch: the port is unavailable
};
/// Classifies a CHECK CONDITION's sense (SPC-5 §5.16.2.4.4–§5.16.2.4.6, §5.16.2.6); `none` for
/// any other result. A command that ends like this was not processed and may be sent again.
AluaCondition alua_condition(const ScsiResult& result) noexcept;

/// The designators with association "logical unit" (SPC-5 table 487) — the ones that are the same
/// through every target port of one logical unit — in page order.
std::vector<Designator> logical_unit_designators(const std::vector<Designator>& all);
/// The TARGET PORT GROUP of the target port group designator (type 5h, association target port),
/// nullopt when the page has none.
std::optional<std::uint16_t> target_port_group_of(const std::vector<Designator>& all) noexcept;
/// The RELATIVE TARGET PORT IDENTIFIER of the relative target port designator (type 4h,
/// association target port), nullopt when the page has none.
std::optional<std::uint16_t> relative_target_port_of(const std::vector<Designator>& all) noexcept;

}  // namespace iserkit::scsi

// SCSI numbers shared by the initiator and the target: operation codes (SPC-5 §4.2.5, SBC-4 §5),
// status codes (SAM-5 §5.3), sense keys (SPC-5 §4.4.8, table 49) and the ASC/ASCQ pairs iserkit
// produces or interprets (SPC-5 Annex D). Numbers only: no parsing here.
#pragma once

#include <cstdint>

namespace iserkit::scsi {

/// SCSI operation codes (byte 0 of a CDB). SPC-5 Annex E.3, SBC-4 §5.
enum class Opcode : std::uint8_t {
  test_unit_ready = 0x00,          ///< SPC-5 §6.47
  request_sense = 0x03,            ///< SPC-5 §6.39
  read6 = 0x08,                    ///< SBC-4 §5.15
  write6 = 0x0a,                   ///< SBC-4 §5.40
  inquiry = 0x12,                  ///< SPC-5 §6.6
  mode_select6 = 0x15,             ///< SPC-5 §6.11
  reserve6 = 0x16,                 ///< SPC-2 §7.21 (obsolete in SPC-5, still used)
  release6 = 0x17,                 ///< SPC-2 §7.19
  mode_sense6 = 0x1a,              ///< SPC-5 §6.13
  start_stop_unit = 0x1b,          ///< SBC-4 §5.25
  prevent_allow_medium_removal = 0x1e,  ///< SPC-5 §6.16 (SBC-4)
  read_capacity10 = 0x25,          ///< SBC-4 §5.20
  read10 = 0x28,                   ///< SBC-4 §5.16
  write10 = 0x2a,                  ///< SBC-4 §5.41
  write_and_verify10 = 0x2e,       ///< SBC-4 §5.45
  verify10 = 0x2f,                 ///< SBC-4 §5.34
  prefetch10 = 0x34,               ///< SBC-4 §5.11
  synchronize_cache10 = 0x35,      ///< SBC-4 §5.27
  read_defect_data10 = 0x37,       ///< SBC-4 §5.19
  write_same10 = 0x41,             ///< SBC-4 §5.49
  unmap = 0x42,                    ///< SBC-4 §5.32
  sanitize = 0x48,                 ///< SBC-4 §5.24
  mode_select10 = 0x55,            ///< SPC-5 §6.12
  mode_sense10 = 0x5a,             ///< SPC-5 §6.14
  persistent_reserve_in = 0x5e,    ///< SPC-5 §6.17
  persistent_reserve_out = 0x5f,   ///< SPC-5 §6.18
  extended_copy = 0x83,            ///< SPC-4 §6.4 EXTENDED COPY (LID1: service action 00h)
  receive_copy_results = 0x84,     ///< SPC-4 §6.18 RECEIVE COPY RESULTS (LID1)
  read16 = 0x88,                   ///< SBC-4 §5.18
  compare_and_write = 0x89,        ///< SBC-4 §5.3
  write16 = 0x8a,                  ///< SBC-4 §5.43
  orwrite16 = 0x8b,                ///< SBC-4 §5.10
  write_and_verify16 = 0x8e,       ///< SBC-4 §5.47
  verify16 = 0x8f,                 ///< SBC-4 §5.36
  prefetch16 = 0x90,               ///< SBC-4 §5.12
  synchronize_cache16 = 0x91,      ///< SBC-4 §5.28
  write_same16 = 0x93,             ///< SBC-4 §5.50
  write_atomic16 = 0x9c,           ///< SBC-4 §5.48
  service_action_in16 = 0x9e,      ///< SPC-5 / SBC-4: READ CAPACITY (16) is service action 0x10
  report_luns = 0xa0,              ///< SPC-5 §6.33
  maintenance_in = 0xa3,           ///< SPC-5: REPORT SUPPORTED OPERATION CODES etc.
  maintenance_out = 0xa4,          ///< SPC-5: SET TARGET PORT GROUPS (service action 0Ah) etc.
  read12 = 0xa8,                   ///< SBC-4 §5.17
  write12 = 0xaa,                  ///< SBC-4 §5.42
  write_and_verify12 = 0xae,       ///< SBC-4 §5.46
  read_defect_data12 = 0xb7,       ///< SBC-4 §5.20
  verify12 = 0xaf,                 ///< SBC-4 §5.35
};

/// Service actions of SERVICE ACTION IN (16) (SBC-4 §5.21, §5.22).
enum class ServiceActionIn16 : std::uint8_t {
  read_capacity16 = 0x10,          ///< SBC-4 §5.21
  get_lba_status = 0x12,           ///< SBC-4 §5.8
};

/// SCSI status codes (SAM-5 §5.3.1, table 39). Status is data, not an error.
enum class Status : std::uint8_t {
  good = 0x00,
  check_condition = 0x02,
  condition_met = 0x04,
  busy = 0x08,
  reservation_conflict = 0x18,
  task_set_full = 0x28,
  aca_active = 0x30,
  task_aborted = 0x40,
};

/// Sense keys (SPC-5 §4.4.8, table 49).
enum class SenseKey : std::uint8_t {
  no_sense = 0x0,
  recovered_error = 0x1,
  not_ready = 0x2,
  medium_error = 0x3,
  hardware_error = 0x4,
  illegal_request = 0x5,
  unit_attention = 0x6,
  data_protect = 0x7,
  blank_check = 0x8,
  vendor_specific = 0x9,
  copy_aborted = 0xa,
  aborted_command = 0xb,
  volume_overflow = 0xd,
  miscompare = 0xe,
  completed = 0xf,
};

/// An additional sense code and its qualifier (SPC-5 §4.4.9, Annex D).
struct AscPair {
  std::uint8_t asc = 0;   ///< ADDITIONAL SENSE CODE
  std::uint8_t ascq = 0;  ///< ADDITIONAL SENSE CODE QUALIFIER
  friend constexpr bool operator==(AscPair, AscPair) noexcept = default;
};

/// The ASC/ASCQ pairs iserkit uses by name (SPC-5 Annex D, table D.1).
namespace asc {
inline constexpr AscPair no_additional_sense{0x00, 0x00};
inline constexpr AscPair write_error{0x0c, 0x00};
inline constexpr AscPair unrecovered_read_error{0x11, 0x00};
inline constexpr AscPair parameter_list_length_error{0x1a, 0x00};
inline constexpr AscPair invalid_command_operation_code{0x20, 0x00};
inline constexpr AscPair lba_out_of_range{0x21, 0x00};
inline constexpr AscPair invalid_field_in_cdb{0x24, 0x00};
inline constexpr AscPair logical_unit_not_supported{0x25, 0x00};
inline constexpr AscPair invalid_field_in_parameter_list{0x26, 0x00};
inline constexpr AscPair write_protected{0x27, 0x00};
inline constexpr AscPair space_allocation_failed_write_protect{0x27, 0x07};
inline constexpr AscPair power_on_reset_or_bus_device_reset{0x29, 0x00};
inline constexpr AscPair parameters_changed{0x2a, 0x00};
inline constexpr AscPair capacity_data_has_changed{0x2a, 0x09};  ///< UNIT ATTENTION after a resize (SBC-4 §4.6)
inline constexpr AscPair medium_not_present{0x3a, 0x00};
inline constexpr AscPair logical_unit_not_ready_cause_not_reportable{0x04, 0x00};
inline constexpr AscPair internal_target_failure{0x44, 0x00};
inline constexpr AscPair miscompare_during_verify{0x1d, 0x00};
inline constexpr AscPair saving_parameters_not_supported{0x39, 0x00};
inline constexpr AscPair command_sequence_error{0x2c, 0x00};
inline constexpr AscPair invalid_field_in_information_unit{0x0e, 0x03};  ///< e.g. Data-Out longer/shorter than the CDB says
inline constexpr AscPair logical_block_address_out_of_range = lba_out_of_range;
inline constexpr AscPair invalid_release_of_persistent_reservation{0x26, 0x04};
inline constexpr AscPair power_on_occurred{0x29, 0x01};
inline constexpr AscPair scsi_bus_reset_occurred{0x29, 0x02};
inline constexpr AscPair bus_device_reset_function_occurred{0x29, 0x03};
inline constexpr AscPair i_t_nexus_loss_occurred{0x29, 0x07};
inline constexpr AscPair mode_parameters_changed{0x2a, 0x01};
inline constexpr AscPair reservations_preempted{0x2a, 0x03};
inline constexpr AscPair reservations_released{0x2a, 0x04};
inline constexpr AscPair registrations_preempted{0x2a, 0x05};
inline constexpr AscPair reported_luns_data_has_changed{0x3f, 0x0e};
inline constexpr AscPair medium_removal_prevented{0x53, 0x02};
inline constexpr AscPair asymmetric_access_state_changed{0x2a, 0x06};  ///< UNIT ATTENTION (SPC-5 §5.16.2.6)
inline constexpr AscPair asymmetric_access_state_transition{0x04, 0x0a};  ///< NOT READY: transitioning
inline constexpr AscPair target_port_in_standby_state{0x04, 0x0b};        ///< NOT READY: standby
inline constexpr AscPair target_port_in_unavailable_state{0x04, 0x0c};    ///< NOT READY: unavailable
inline constexpr AscPair set_target_port_groups_command_failed{0x67, 0x0a};  ///< HARDWARE ERROR (SPC-4 §6.45)
}  // namespace asc

/// Peripheral device types (SPC-5 §6.6.2, table 149) that iserkit reports or recognises.
enum class PeripheralType : std::uint8_t {
  direct_access_block = 0x00,  ///< SBC disk
  sequential_access = 0x01,
  cd_dvd = 0x05,
  enclosure_services = 0x0d,
  well_known_lu = 0x1e,
  unknown_or_none = 0x1f,      ///< with qualifier 011b: "no logical unit here"
};

/// Peripheral qualifiers (SPC-5 §6.6.2, table 148).
enum class PeripheralQualifier : std::uint8_t {
  connected = 0b000,        ///< a logical unit of this type is accessible
  not_connected = 0b001,    ///< supported but not currently connected
  not_supported = 0b011,    ///< the target cannot support a logical unit at this LUN
};

}  // namespace iserkit::scsi

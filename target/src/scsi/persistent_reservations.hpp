// PersistentReservations: the persistent reservation state of one logical unit and its state
// machine (SPC-5 §5.14 "Reservations", §6.17 PERSISTENT RESERVE IN, §6.18 PERSISTENT RESERVE OUT).
// Sans-I/O and free of iSCSI types: I_T nexuses are named by their initiator port name (for iSCSI
// "<InitiatorName>,i,0x<ISID>", SPC-5 §7.6.4.6) since registrations outlive the nexus that made
// them (SPC-5 §5.14.6: a registration survives I_T nexus loss). One target port (relative target
// port 1): ALL_TG_PT is accepted and means the same as 0. APTPL (persist through power loss) is
// not supported (PTPL_C = 0). Not thread-safe: the dispatcher guards it with the unit's mutex.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "iserkit/common/bytes.hpp"
#include "iserkit/scsi/block_cdb.hpp"
#include "iserkit/scsi/sense.hpp"

namespace iserkit::target {

/// Reservation types (SPC-5 §6.18.4, table 185).
enum class PrType : std::uint8_t {
  write_exclusive = 0x1,
  exclusive_access = 0x3,
  write_exclusive_registrants_only = 0x5,
  exclusive_access_registrants_only = 0x6,
  write_exclusive_all_registrants = 0x7,
  exclusive_access_all_registrants = 0x8,
};

/// How a command touches the medium, for reservation conflict checks (SPC-5 §5.14.1 table 66,
/// SBC-4 §4.17 table 13).
enum class AccessKind : std::uint8_t {
  unrestricted,  ///< allowed under every reservation (INQUIRY, TEST UNIT READY, READ CAPACITY, PRIN, …)
  read,          ///< reads the medium or its state (READ, VERIFY, PRE-FETCH, GET LBA STATUS, MODE SENSE)
  write,         ///< changes the medium or the device state (WRITE, UNMAP, MODE SELECT, SYNCHRONIZE CACHE, …)
};

/// A unit attention the state machine asks the device server to establish (SPC-5 §5.14.11).
struct PrUnitAttention {
  std::string initiator_port;  ///< the I_T nexus (by initiator port name) that gets it
  scsi::AscPair asc;           ///< RESERVATIONS PREEMPTED / RELEASED, REGISTRATIONS PREEMPTED
};

/// The result of one PERSISTENT RESERVE OUT service action.
struct PrOutResult {
  scsi::Status status = scsi::Status::good;  ///< GOOD, RESERVATION CONFLICT or CHECK CONDITION
  std::optional<scsi::SenseData> sense;      ///< with CHECK CONDITION
  std::vector<PrUnitAttention> unit_attentions;
  /// PREEMPT AND ABORT: the initiator ports whose tasks the transport should abort (SPC-5 §5.14.11.2.5).
  std::vector<std::string> abort_ports;
};

/// Persistent reservation state of one logical unit.
class PersistentReservations {
 public:
  /// Runs one PERSISTENT RESERVE OUT service action from `port` (SPC-5 §6.18): REGISTER (0),
  /// RESERVE (1), RELEASE (2), CLEAR (3), PREEMPT (4), PREEMPT AND ABORT (5), REGISTER AND IGNORE
  /// EXISTING KEY (6). REGISTER AND MOVE (7) and unknown actions → INVALID FIELD IN CDB; SCOPE other
  /// than LU_SCOPE, or an unknown TYPE → INVALID FIELD IN CDB; SPEC_I_PT or APTPL → INVALID FIELD IN
  /// PARAMETER LIST; a key mismatch → RESERVATION CONFLICT.
  PrOutResult out(const std::string& port, const scsi::PersistentReserveOutCdb& cdb,
                  const scsi::PersistentReserveOutParameters& params);

  /// True if a command of `kind` from `port` conflicts with the reservation (SPC-5 §5.14.1).
  [[nodiscard]] bool conflicts(const std::string& port, AccessKind kind) const;

  /// PERSISTENT RESERVE IN data for service action `service_action` (0..3), untruncated.
  /// `transport_id_of` is not needed: READ FULL STATUS builds iSCSI TransportIDs (SPC-5 §7.6.4.6,
  /// FORMAT CODE 01b) from the port names. Returns nullopt for an unknown service action.
  [[nodiscard]] std::optional<std::vector<std::byte>> in(std::uint8_t service_action) const;

  /// Registration and reservation state, for RESERVE(6) interplay and tests.
  [[nodiscard]] bool has_reservation() const noexcept { return reservation_.has_value(); }
  [[nodiscard]] bool has_registrations() const noexcept { return !registrations_.empty(); }
  [[nodiscard]] bool is_registered(const std::string& port) const noexcept { return find(port) != nullptr; }
  [[nodiscard]] bool is_holder(const std::string& port) const noexcept;
  [[nodiscard]] std::uint32_t generation() const noexcept { return generation_; }
  [[nodiscard]] std::optional<PrType> reservation_type() const noexcept {
    return reservation_ ? std::optional<PrType>(reservation_->type) : std::nullopt;
  }

 private:
  struct Registration {
    std::string port;
    std::uint64_t key = 0;
  };
  struct Reservation {
    std::string holder;  ///< empty for the all-registrants types
    PrType type = PrType::write_exclusive;
  };

  [[nodiscard]] const Registration* find(const std::string& port) const noexcept;
  PrOutResult do_register(const std::string& port, const scsi::PersistentReserveOutParameters& p, bool ignore_existing);
  PrOutResult do_reserve(const std::string& port, PrType type);
  PrOutResult do_release(const std::string& port, PrType type);
  PrOutResult do_clear(const std::string& port);
  PrOutResult do_preempt(const std::string& port, std::uint64_t sark, PrType type, bool abort);
  void unregister(const std::string& port, PrOutResult& result);
  void remove_registration(const std::string& port);

  std::vector<Registration> registrations_;  // in registration order (READ KEYS lists them so)
  std::optional<Reservation> reservation_;
  std::uint32_t generation_ = 0;  // PRGENERATION (SPC-5 §6.17.2)
};

/// True for the "all registrants" types, whose holder is every registrant (SPC-5 §5.14.7).
[[nodiscard]] bool is_all_registrants(PrType type) noexcept;

}  // namespace iserkit::target

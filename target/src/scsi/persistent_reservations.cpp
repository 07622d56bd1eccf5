// PersistentReservations: SPC-5 §5.14 persistent reservations of one logical unit — registration
// (§5.14.7), reservation (§5.14.9), release (§5.14.11.1), clear (§5.14.11.6), preempt
// (§5.14.11.4/5) — and the PERSISTENT RESERVE IN data formats (§6.17.2-§6.17.5).
#include "scsi/persistent_reservations.hpp"

#include <algorithm>

namespace iserkit::target {
namespace {

using scsi::SenseData;

constexpr std::uint8_t lu_scope = 0;

PrOutResult conflict() { return PrOutResult{.status = scsi::Status::reservation_conflict}; }
PrOutResult check(const SenseData& sense) { return PrOutResult{.status = scsi::Status::check_condition, .sense = sense}; }

bool valid_type(std::uint8_t t) noexcept {
  switch (t) {
    case 0x1: case 0x3: case 0x5: case 0x6: case 0x7: case 0x8: return true;
    default: return false;
  }
}

bool registrants_only(PrType t) noexcept {
  return t == PrType::write_exclusive_registrants_only || t == PrType::exclusive_access_registrants_only;
}

bool exclusive_access(PrType t) noexcept {
  return t == PrType::exclusive_access || t == PrType::exclusive_access_registrants_only ||
         t == PrType::exclusive_access_all_registrants;
}

// SPC-5 §7.6.4.6: iSCSI TransportID, FORMAT CODE 01b (initiator port name with ISID), PROTOCOL
// IDENTIFIER 5; the name is NUL-terminated and padded to a multiple of four bytes.
std::vector<std::byte> iscsi_transport_id(const std::string& port) {
  std::size_t name_length = port.size() + 1;
  name_length = (name_length + 3) & ~std::size_t{3};
  if (name_length < 20) name_length = 20;  // a TransportID is at least 24 bytes
  std::vector<std::byte> id(4 + name_length);
  store_u8(id.data(), 0x40 | 0x05);
  store_be16(id.data() + 2, static_cast<std::uint16_t>(name_length));
  std::copy_n(reinterpret_cast<const std::byte*>(port.data()), port.size(), id.data() + 4);
  return id;
}

}  // namespace

bool is_all_registrants(PrType type) noexcept {
  return type == PrType::write_exclusive_all_registrants || type == PrType::exclusive_access_all_registrants;
}

const PersistentReservations::Registration* PersistentReservations::find(const std::string& port) const noexcept {
  for (const auto& r : registrations_)
    if (r.port == port) return &r;
  return nullptr;
}

bool PersistentReservations::is_holder(const std::string& port) const noexcept {
  if (!reservation_) return false;
  // SPC-5 §5.14.10: with an all-registrants type every registrant holds the reservation.
  if (is_all_registrants(reservation_->type)) return is_registered(port);
  return reservation_->holder == port;
}

bool PersistentReservations::conflicts(const std::string& port, AccessKind kind) const {
  if (!reservation_ || kind == AccessKind::unrestricted || is_holder(port)) return false;
  const PrType type = reservation_->type;
  // SPC-5 table 66: registrants of the registrants-only and all-registrants types have full
  // access; everyone else may read only under the write-exclusive types.
  if ((registrants_only(type) || is_all_registrants(type)) && is_registered(port)) return false;
  if (kind == AccessKind::read) return exclusive_access(type);
  return true;
}

void PersistentReservations::remove_registration(const std::string& port) {
  registrations_.erase(std::remove_if(registrations_.begin(), registrations_.end(),
                                      [&](const Registration& r) { return r.port == port; }),
                       registrations_.end());
}

void PersistentReservations::unregister(const std::string& port, PrOutResult& result) {
  const bool was_holder = reservation_ && !is_all_registrants(reservation_->type) && reservation_->holder == port;
  remove_registration(port);
  if (was_holder) {
    // SPC-5 §5.14.11.2.3: unregistering the holder releases the reservation; for the
    // registrants-only types the other registrants get RESERVATIONS RELEASED.
    const PrType type = reservation_->type;
    reservation_.reset();
    if (registrants_only(type))
      for (const auto& r : registrations_) result.unit_attentions.push_back({r.port, scsi::asc::reservations_released});
  } else if (reservation_ && is_all_registrants(reservation_->type) && registrations_.empty()) {
    reservation_.reset();  // SPC-5 §5.14.11.2.3: the last registrant of an all-registrants reservation
  }
}

PrOutResult PersistentReservations::out(const std::string& port, const scsi::PersistentReserveOutCdb& cdb,
                                        const scsi::PersistentReserveOutParameters& params) {
  // SPC-5 §6.18.3: SPEC_I_PT and APTPL are optional; not supported here (REPORT CAPABILITIES says so).
  if (params.spec_i_pt) return check(SenseData::invalid_field_in_parameter_list(20));
  if (params.aptpl) return check(SenseData::invalid_field_in_parameter_list(20));
  switch (cdb.service_action) {
    case 0x0: return do_register(port, params, false);
    case 0x6: return do_register(port, params, true);
    case 0x3: {
      const auto* reg = find(port);
      if (reg == nullptr || reg->key != params.reservation_key) return conflict();
      return do_clear(port);
    }
    case 0x1:
    case 0x2:
    case 0x4:
    case 0x5: {
      if (cdb.scope != lu_scope) return check(SenseData::invalid_field_in_cdb(2, 7));
      const bool type_needed = cdb.service_action != 0x2 || reservation_.has_value();
      if (type_needed && !valid_type(cdb.type)) return check(SenseData::invalid_field_in_cdb(2, 3));
      // SPC-5 §5.14.7: only a registered I_T nexus with the matching key may reserve, release or preempt.
      const auto* reg = find(port);
      if (reg == nullptr || reg->key != params.reservation_key) return conflict();
      const auto type = static_cast<PrType>(cdb.type);
      if (cdb.service_action == 0x1) return do_reserve(port, type);
      if (cdb.service_action == 0x2) return do_release(port, type);
      return do_preempt(port, params.service_action_reservation_key, type, cdb.service_action == 0x5);
    }
    default:
      return check(SenseData::invalid_field_in_cdb(1, 4));
  }
}

PrOutResult PersistentReservations::do_register(const std::string& port, const scsi::PersistentReserveOutParameters& p,
                                                bool ignore_existing) {
  PrOutResult result;
  auto it = std::find_if(registrations_.begin(), registrations_.end(), [&](const Registration& r) { return r.port == port; });
  if (it == registrations_.end()) {
    // SPC-5 §5.14.7: an unregistered nexus must give RESERVATION KEY 0 (unless IGNORE).
    if (!ignore_existing && p.reservation_key != 0) return conflict();
    if (p.service_action_reservation_key == 0) return result;  // nothing to do; PRGENERATION unchanged
    registrations_.push_back({port, p.service_action_reservation_key});
    ++generation_;
    return result;
  }
  if (!ignore_existing && it->key != p.reservation_key) return conflict();
  if (p.service_action_reservation_key == 0) {
    unregister(port, result);
  } else {
    it->key = p.service_action_reservation_key;
  }
  ++generation_;
  return result;
}

PrOutResult PersistentReservations::do_reserve(const std::string& port, PrType type) {
  if (!reservation_) {
    reservation_ = Reservation{is_all_registrants(type) ? std::string() : port, type};
    return {};
  }
  // SPC-5 §5.14.9: the holder reserving again with the same type and scope is no change;
  // anything else conflicts.
  if (is_holder(port) && reservation_->type == type) return {};
  return conflict();
}

PrOutResult PersistentReservations::do_release(const std::string& port, PrType type) {
  PrOutResult result;
  // SPC-5 §5.14.11.2.2: no reservation, or a nexus that does not hold it: GOOD, nothing changes.
  if (!reservation_ || !is_holder(port)) return result;
  if (reservation_->type != type)
    return check(SenseData::make(scsi::SenseKey::illegal_request, scsi::asc::invalid_release_of_persistent_reservation));
  const PrType released = reservation_->type;
  reservation_.reset();
  // SPC-5 §5.14.11.2.2: releasing a registrants-only or all-registrants reservation gives the other
  // registrants RESERVATIONS RELEASED.
  if (registrants_only(released) || is_all_registrants(released))
    for (const auto& r : registrations_)
      if (r.port != port) result.unit_attentions.push_back({r.port, scsi::asc::reservations_released});
  return result;
}

PrOutResult PersistentReservations::do_clear(const std::string& port) {
  PrOutResult result;
  // SPC-5 §5.14.11.6: every other registrant gets RESERVATIONS PREEMPTED.
  for (const auto& r : registrations_)
    if (r.port != port) result.unit_attentions.push_back({r.port, scsi::asc::reservations_preempted});
  registrations_.clear();
  reservation_.reset();
  ++generation_;
  return result;
}

PrOutResult PersistentReservations::do_preempt(const std::string& port, std::uint64_t sark, PrType type, bool abort) {
  PrOutResult result;
  auto remove_key = [&](std::uint64_t key) {
    std::vector<std::string> removed;
    for (const auto& r : registrations_)
      if (r.key == key && r.port != port) removed.push_back(r.port);
    for (const auto& p : removed) {
      remove_registration(p);
      result.unit_attentions.push_back({p, scsi::asc::registrations_preempted});
      if (abort) result.abort_ports.push_back(p);
    }
    return !removed.empty();
  };
  if (reservation_ && is_all_registrants(reservation_->type)) {
    // SPC-5 §5.14.11.4.4: SERVICE ACTION RESERVATION KEY 0 preempts the whole all-registrants
    // reservation: every other registration goes, this nexus reserves with the new type.
    if (sark == 0) {
      std::vector<std::string> others;
      for (const auto& r : registrations_)
        if (r.port != port) others.push_back(r.port);
      for (const auto& p : others) {
        remove_registration(p);
        result.unit_attentions.push_back({p, scsi::asc::registrations_preempted});
        if (abort) result.abort_ports.push_back(p);
      }
      reservation_ = Reservation{is_all_registrants(type) ? std::string() : port, type};
      ++generation_;
      return result;
    }
    remove_key(sark);
    ++generation_;
    return result;
  }
  const Registration* holder = reservation_ ? find(reservation_->holder) : nullptr;
  if (holder != nullptr && holder->key == sark) {
    // SPC-5 §5.14.11.4.3: preempting the holder: its registrations (and all others with that key)
    // go, and this nexus gets the reservation with the given type and scope.
    const std::string old_holder = holder->port;
    remove_key(sark);
    const PrType old_type = reservation_->type;
    reservation_ = Reservation{is_all_registrants(type) ? std::string() : port, type};
    if (old_type != type || old_holder == port) {
      for (const auto& r : registrations_)
        if (r.port != port) result.unit_attentions.push_back({r.port, scsi::asc::reservations_released});
    }
    ++generation_;
    return result;
  }
  // SPC-5 §5.14.11.4.2/.3: no reservation, or the key is not the holder's: only registrations go.
  // A zero key is invalid here; a key nobody has is a conflict.
  if (sark == 0) return check(SenseData::invalid_field_in_parameter_list(8));
  if (!remove_key(sark)) return conflict();
  ++generation_;
  return result;
}

std::optional<std::vector<std::byte>> PersistentReservations::in(std::uint8_t service_action) const {
  std::vector<std::byte> data;
  switch (service_action) {
    case 0x0: {  // SPC-5 §6.17.2 READ KEYS
      data.resize(8 + 8 * registrations_.size());
      store_be32(data.data(), generation_);
      store_be32(data.data() + 4, static_cast<std::uint32_t>(8 * registrations_.size()));
      for (std::size_t i = 0; i < registrations_.size(); ++i) store_be64(data.data() + 8 + 8 * i, registrations_[i].key);
      return data;
    }
    case 0x1: {  // SPC-5 §6.17.3 READ RESERVATION
      data.resize(reservation_ ? 24 : 8);
      store_be32(data.data(), generation_);
      if (reservation_) {
        store_be32(data.data() + 4, 16);
        const Registration* holder = is_all_registrants(reservation_->type) ? nullptr : find(reservation_->holder);
        // SPC-5 §6.17.3.1: the all-registrants types report RESERVATION KEY 0.
        store_be64(data.data() + 8, holder != nullptr ? holder->key : 0);
        store_u8(data.data() + 21, static_cast<std::uint8_t>((lu_scope << 4) | static_cast<std::uint8_t>(reservation_->type)));
      }
      return data;
    }
    case 0x2: {  // SPC-5 §6.17.4 REPORT CAPABILITIES
      data.resize(8);
      store_be16(data.data(), 8);
      store_u8(data.data() + 2, 0x04);  // ATP_C: ALL_TG_PT accepted; CRH, SIP_C, PTPL_C 0
      store_u8(data.data() + 3, 0x80);  // TMV: the type mask is valid; ALLOW COMMANDS 000b
      // PERSISTENT RESERVATION TYPE MASK: WR_EX_AR, EX_AC_RO, WR_EX_RO, EX_AC, WR_EX; EX_AC_AR.
      store_u8(data.data() + 4, 0x80 | 0x40 | 0x20 | 0x08 | 0x02);
      store_u8(data.data() + 5, 0x01);
      return data;
    }
    case 0x3: {  // SPC-5 §6.17.5 READ FULL STATUS
      data.resize(8);
      store_be32(data.data(), generation_);
      for (const auto& r : registrations_) {
        const auto id = iscsi_transport_id(r.port);
        std::vector<std::byte> d(24);
        store_be64(d.data(), r.key);
        const bool holder = is_holder(r.port);
        store_u8(d.data() + 12, holder ? 0x01 : 0x00);  // R_HOLDER; ALL_TG_PT 0 (one target port)
        if (holder) store_u8(d.data() + 13, static_cast<std::uint8_t>((lu_scope << 4) | static_cast<std::uint8_t>(reservation_->type)));
        store_be16(d.data() + 18, 1);  // RELATIVE TARGET PORT IDENTIFIER
        store_be32(d.data() + 20, static_cast<std::uint32_t>(id.size()));
        d.insert(d.end(), id.begin(), id.end());
        data.insert(data.end(), d.begin(), d.end());
      }
      store_be32(data.data() + 4, static_cast<std::uint32_t>(data.size() - 8));
      return data;
    }
    default:
      return std::nullopt;
  }
}

}  // namespace iserkit::target

// PersistentReservations on its own (SPC-5 §5.14, §6.17, §6.18): registration rules, reserve /
// release / clear / preempt, the access table for all six reservation types (SPC-5 table 66),
// unit attentions to other registrants and the PERSISTENT RESERVE IN data formats.
#include <gtest/gtest.h>

#include "scsi/persistent_reservations.hpp"

namespace iserkit::target {
namespace {

using scsi::PersistentReserveOutCdb;
using scsi::PersistentReserveOutParameters;
using scsi::Status;

const std::string a = "iqn.2026-11.test:a,i,0x000000000001";
const std::string b = "iqn.2026-11.test:b,i,0x000000000002";
const std::string c = "iqn.2026-11.test:c,i,0x000000000003";

class Pr : public ::testing::Test {
 protected:
  PrOutResult out(const std::string& port, std::uint8_t sa, std::uint64_t key, std::uint64_t sark = 0,
                  std::uint8_t type = 0, std::uint8_t scope = 0, bool aptpl = false) {
    return pr_.out(port, PersistentReserveOutCdb{.service_action = sa, .scope = scope, .type = type, .parameter_list_length = 24},
                   PersistentReserveOutParameters{.reservation_key = key, .service_action_reservation_key = sark, .aptpl = aptpl});
  }
  PrOutResult reg(const std::string& port, std::uint64_t key) { return out(port, 0x6, 0, key); }
  PrOutResult reserve(const std::string& port, std::uint64_t key, PrType t) { return out(port, 0x1, key, 0, static_cast<std::uint8_t>(t)); }
  PrOutResult release(const std::string& port, std::uint64_t key, PrType t) { return out(port, 0x2, key, 0, static_cast<std::uint8_t>(t)); }
  std::vector<std::uint64_t> keys() const {
    const auto d = pr_.in(0x0);
    std::vector<std::uint64_t> k;
    for (std::size_t i = 0; i < load_be32(d->data() + 4) / 8; ++i) k.push_back(load_be64(d->data() + 8 + 8 * i));
    return k;
  }

  // `r` queued exactly one unit attention, with `asc`, for `port` where one is named.
  static void expect_one_unit_attention(const PrOutResult& r, scsi::AscPair asc, const std::string* port = nullptr) {
    ASSERT_EQ(r.unit_attentions.size(), 1u);
    if (port != nullptr) {
      EXPECT_EQ(r.unit_attentions[0].initiator_port, *port);
    }
    EXPECT_EQ(r.unit_attentions[0].asc, asc);
  }

  PersistentReservations pr_;
};

TEST_F(Pr, RegisterRules) {
  // SPC-5 §5.14.7: an unregistered nexus must give RESERVATION KEY 0 with REGISTER.
  EXPECT_EQ(out(a, 0x0, 0x99, 0x11).status, Status::reservation_conflict);
  EXPECT_EQ(pr_.generation(), 0u);
  EXPECT_EQ(out(a, 0x0, 0, 0x11).status, Status::good);
  EXPECT_EQ(pr_.generation(), 1u);
  // Changing the key needs the current one.
  EXPECT_EQ(out(a, 0x0, 0x12, 0x13).status, Status::reservation_conflict);
  EXPECT_EQ(out(a, 0x0, 0x11, 0x13).status, Status::good);
  // REGISTER AND IGNORE EXISTING KEY does not.
  EXPECT_EQ(reg(a, 0x14).status, Status::good);
  EXPECT_EQ(reg(b, 0x21).status, Status::good);
  EXPECT_EQ(keys(), (std::vector<std::uint64_t>{0x14, 0x21}));
  // Registering key 0 unregisters.
  EXPECT_EQ(reg(a, 0).status, Status::good);
  EXPECT_EQ(keys(), (std::vector<std::uint64_t>{0x21}));
  EXPECT_FALSE(pr_.is_registered(a));
  // An unregistered nexus registering key 0 changes nothing.
  const auto gen = pr_.generation();
  EXPECT_EQ(reg(c, 0).status, Status::good);
  EXPECT_EQ(pr_.generation(), gen);
}

TEST_F(Pr, ReserveNeedsMatchingRegistration) {
  EXPECT_EQ(reserve(a, 0x1, PrType::write_exclusive).status, Status::reservation_conflict);
  reg(a, 0x1);
  EXPECT_EQ(reserve(a, 0x2, PrType::write_exclusive).status, Status::reservation_conflict);
  const auto gen = pr_.generation();
  EXPECT_EQ(reserve(a, 0x1, PrType::write_exclusive).status, Status::good);
  EXPECT_EQ(pr_.generation(), gen);  // RESERVE does not bump PRGENERATION
  // Same holder, same type: no change; another type: conflict.
  EXPECT_EQ(reserve(a, 0x1, PrType::write_exclusive).status, Status::good);
  EXPECT_EQ(reserve(a, 0x1, PrType::exclusive_access).status, Status::reservation_conflict);
  reg(b, 0x2);
  EXPECT_EQ(reserve(b, 0x2, PrType::write_exclusive).status, Status::reservation_conflict);
}

TEST_F(Pr, InvalidFields) {
  reg(a, 0x1);
  auto r = out(a, 0x1, 0x1, 0, 0x1, /*scope=*/1);
  EXPECT_EQ(r.status, Status::check_condition);
  EXPECT_EQ(r.sense->asc_pair(), scsi::asc::invalid_field_in_cdb);
  r = out(a, 0x1, 0x1, 0, /*type=*/0x2);
  EXPECT_EQ(r.sense->asc_pair(), scsi::asc::invalid_field_in_cdb);
  r = out(a, 0x6, 0, 0x5, 0, 0, /*aptpl=*/true);
  EXPECT_EQ(r.sense->asc_pair(), scsi::asc::invalid_field_in_parameter_list);
  r = out(a, 0x7, 0x1, 0x2);  // REGISTER AND MOVE: not supported
  EXPECT_EQ(r.sense->asc_pair(), scsi::asc::invalid_field_in_cdb);
}

struct AccessCase {
  PrType type;
  bool registered_reads, registered_writes, unregistered_reads, unregistered_writes;
};

TEST_F(Pr, AccessTableForEveryType) {
  // SPC-5 table 66 (as libiscsi's ProutReserve.Access* tests check it).
  const AccessCase cases[] = {
      {PrType::write_exclusive, true, false, true, false},
      {PrType::exclusive_access, false, false, false, false},
      {PrType::write_exclusive_registrants_only, true, true, true, false},
      {PrType::exclusive_access_registrants_only, true, true, false, false},
      {PrType::write_exclusive_all_registrants, true, true, true, false},
      {PrType::exclusive_access_all_registrants, true, true, false, false},
  };
  for (const auto& k : cases) {
    PersistentReservations fresh;
    pr_ = fresh;
    reg(a, 0xa);
    reg(b, 0xb);
    ASSERT_EQ(reserve(a, 0xa, k.type).status, Status::good);
    EXPECT_FALSE(pr_.conflicts(a, AccessKind::read));
    EXPECT_FALSE(pr_.conflicts(a, AccessKind::write));
    EXPECT_EQ(!pr_.conflicts(b, AccessKind::read), k.registered_reads) << int(k.type);
    EXPECT_EQ(!pr_.conflicts(b, AccessKind::write), k.registered_writes) << int(k.type);
    EXPECT_EQ(!pr_.conflicts(c, AccessKind::read), k.unregistered_reads) << int(k.type);
    EXPECT_EQ(!pr_.conflicts(c, AccessKind::write), k.unregistered_writes) << int(k.type);
    EXPECT_FALSE(pr_.conflicts(c, AccessKind::unrestricted));
  }
}

TEST_F(Pr, ReleaseRules) {
  reg(a, 0xa);
  reg(b, 0xb);
  ASSERT_EQ(reserve(a, 0xa, PrType::exclusive_access_registrants_only).status, Status::good);
  // A non-holder's RELEASE is GOOD and changes nothing.
  EXPECT_EQ(release(b, 0xb, PrType::exclusive_access_registrants_only).status, Status::good);
  EXPECT_TRUE(pr_.has_reservation());
  // Wrong type from the holder: INVALID RELEASE OF PERSISTENT RESERVATION.
  auto r = release(a, 0xa, PrType::write_exclusive);
  EXPECT_EQ(r.status, Status::check_condition);
  EXPECT_EQ(r.sense->asc_pair(), scsi::asc::invalid_release_of_persistent_reservation);
  r = release(a, 0xa, PrType::exclusive_access_registrants_only);
  EXPECT_EQ(r.status, Status::good);
  EXPECT_FALSE(pr_.has_reservation());
  // Registrants-only: the other registrants hear RESERVATIONS RELEASED.
  expect_one_unit_attention(r, scsi::asc::reservations_released, &b);
}

TEST_F(Pr, UnregisteringTheHolder) {
  reg(a, 0xa);
  reg(b, 0xb);
  ASSERT_EQ(reserve(a, 0xa, PrType::write_exclusive_registrants_only).status, Status::good);
  auto r = reg(a, 0);
  EXPECT_FALSE(pr_.has_reservation());  // the holder's reservation goes with its registration
  ASSERT_NO_FATAL_FAILURE(expect_one_unit_attention(r, scsi::asc::reservations_released));
  // All registrants: the reservation stays until the last registrant leaves.
  reg(a, 0xa);
  ASSERT_EQ(reserve(a, 0xa, PrType::exclusive_access_all_registrants).status, Status::good);
  reg(a, 0);
  EXPECT_TRUE(pr_.has_reservation());
  EXPECT_TRUE(pr_.is_holder(b));
  reg(b, 0);
  EXPECT_FALSE(pr_.has_reservation());
}

TEST_F(Pr, ClearRemovesEverything) {
  reg(a, 0xa);
  reg(b, 0xb);
  reserve(a, 0xa, PrType::exclusive_access);
  const auto gen = pr_.generation();
  EXPECT_EQ(out(b, 0x3, 0xbad).status, Status::reservation_conflict);
  const auto r = out(b, 0x3, 0xb);
  EXPECT_EQ(r.status, Status::good);
  EXPECT_FALSE(pr_.has_reservation());
  EXPECT_FALSE(pr_.has_registrations());
  EXPECT_EQ(pr_.generation(), gen + 1);
  expect_one_unit_attention(r, scsi::asc::reservations_preempted, &a);
}

TEST_F(Pr, PreemptRegistrationWithoutReservation) {
  reg(a, 0xa);
  reg(b, 0xb);
  const auto gen = pr_.generation();
  // libiscsi ProutPreempt.RemoveRegistration: b preempts a's key; PRGENERATION + 1.
  auto r = out(b, 0x4, 0xb, 0xa, static_cast<std::uint8_t>(PrType::exclusive_access));
  EXPECT_EQ(r.status, Status::good);
  EXPECT_EQ(keys(), (std::vector<std::uint64_t>{0xb}));
  EXPECT_EQ(pr_.generation(), gen + 1);
  ASSERT_NO_FATAL_FAILURE(expect_one_unit_attention(r, scsi::asc::registrations_preempted));
  // A key nobody holds conflicts; key 0 without an all-registrants reservation is invalid.
  EXPECT_EQ(out(b, 0x4, 0xb, 0x77, 0x3).status, Status::reservation_conflict);
  EXPECT_EQ(out(b, 0x4, 0xb, 0, 0x3).sense->asc_pair(), scsi::asc::invalid_field_in_parameter_list);
}

TEST_F(Pr, PreemptTheHolder) {
  reg(a, 0xa);
  reg(b, 0xb);
  reserve(a, 0xa, PrType::write_exclusive);
  auto r = out(b, 0x5, 0xb, 0xa, static_cast<std::uint8_t>(PrType::exclusive_access));  // PREEMPT AND ABORT
  EXPECT_EQ(r.status, Status::good);
  EXPECT_TRUE(pr_.is_holder(b));
  EXPECT_EQ(pr_.reservation_type(), PrType::exclusive_access);
  EXPECT_FALSE(pr_.is_registered(a));
  EXPECT_EQ(r.abort_ports, (std::vector<std::string>{a}));
  // All-registrants reservation preempted with key 0: everyone else goes.
  reg(a, 0xa);
  reg(c, 0xc);
  ASSERT_EQ(release(b, 0xb, PrType::exclusive_access).status, Status::good);
  ASSERT_EQ(reserve(a, 0xa, PrType::write_exclusive_all_registrants).status, Status::good);
  r = out(c, 0x4, 0xc, 0, static_cast<std::uint8_t>(PrType::write_exclusive));
  EXPECT_EQ(r.status, Status::good);
  EXPECT_EQ(keys(), (std::vector<std::uint64_t>{0xc}));
  EXPECT_TRUE(pr_.is_holder(c));
  EXPECT_EQ(pr_.reservation_type(), PrType::write_exclusive);
}

TEST_F(Pr, PersistentReserveInFormats) {
  // READ RESERVATION without a reservation: 8 bytes, ADDITIONAL LENGTH 0.
  auto d = pr_.in(0x1);
  ASSERT_EQ(d->size(), 8u);
  EXPECT_EQ(load_be32(d->data() + 4), 0u);
  reg(a, 0x1122334455667788ull);
  reserve(a, 0x1122334455667788ull, PrType::write_exclusive_registrants_only);
  d = pr_.in(0x1);
  ASSERT_EQ(d->size(), 24u);
  EXPECT_EQ(load_be32(d->data() + 4), 16u);
  EXPECT_EQ(load_be64(d->data() + 8), 0x1122334455667788ull);
  EXPECT_EQ(load_u8(d->data() + 21), 0x05);  // scope 0, type 5
  // REPORT CAPABILITIES: length 8, TMV, the six types.
  d = pr_.in(0x2);
  ASSERT_EQ(d->size(), 8u);
  EXPECT_EQ(load_be16(d->data()), 8u);
  EXPECT_EQ(load_u8(d->data() + 3) & 0x80, 0x80);
  EXPECT_EQ(load_u8(d->data() + 4), 0xea);
  EXPECT_EQ(load_u8(d->data() + 5), 0x01);
  // READ FULL STATUS: one descriptor with R_HOLDER and an iSCSI TransportID naming the port.
  d = pr_.in(0x3);
  ASSERT_GE(d->size(), 8u + 24u + 24u);
  EXPECT_EQ(load_u8(d->data() + 8 + 12) & 0x01, 0x01);
  EXPECT_EQ(load_u8(d->data() + 8 + 24), 0x45);  // FORMAT CODE 01b, PROTOCOL IDENTIFIER 5 (iSCSI)
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(d->data() + 8 + 28)), a);
  EXPECT_FALSE(pr_.in(0x4));
}

}  // namespace
}  // namespace iserkit::target

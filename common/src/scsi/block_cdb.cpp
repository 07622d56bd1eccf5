// Target-side parsers for SBC-4 media-access CDBs (VERIFY, WRITE AND VERIFY, COMPARE AND WRITE,
// ORWRITE, PRE-FETCH, WRITE ATOMIC, GET LBA STATUS, START STOP UNIT) and SPC-5 PERSISTENT RESERVE
// IN/OUT and MODE SELECT CDBs. Byte offsets follow the SBC-4/SPC-5 CDB tables cited per case.
#include "iserkit/scsi/block_cdb.hpp"

namespace iserkit::scsi {
namespace {

SenseData invalid_opcode() noexcept { return SenseData::make(SenseKey::illegal_request, asc::invalid_command_operation_code); }

}  // namespace

SenseOr<BlockCdb> parse_block_cdb(ConstByteSpan cdb) noexcept {
  if (cdb.empty()) return tl::unexpected(invalid_opcode());
  const std::byte* p = cdb.data();
  BlockCdb r;
  r.opcode = static_cast<Opcode>(load_u8(p));
  const std::size_t need = cdb_length_for(load_u8(p));
  if (need == 0 || cdb.size() < need) return tl::unexpected(invalid_opcode());
  const std::uint8_t b1 = load_u8(p + 1);
  switch (r.opcode) {
    case Opcode::read6:
    case Opcode::write6:
    case Opcode::read10:
    case Opcode::write10:
    case Opcode::read12:
    case Opcode::write12:
    case Opcode::read16:
    case Opcode::write16: {
      auto rw = parse_read_write_cdb(cdb);
      if (!rw) return tl::unexpected(rw.error());
      r.lba = rw->lba;
      r.blocks = rw->blocks;
      r.protect = rw->protect;
      r.dpo = rw->dpo;
      r.fua = rw->fua;
      const bool six = r.opcode == Opcode::read6 || r.opcode == Opcode::write6;
      const bool ten = r.opcode == Opcode::read10 || r.opcode == Opcode::write10;
      const bool twelve = r.opcode == Opcode::read12 || r.opcode == Opcode::write12;
      r.length_field_byte = six ? 4 : ten ? 7 : twelve ? 6 : 10;
      return r;
    }
    // SBC-4 §5.34/§5.45 (10-byte): LBA bytes 2-5, length bytes 7-8.
    case Opcode::verify10:
    case Opcode::write_and_verify10:
    case Opcode::prefetch10:
      r.lba = load_be32(p + 2);
      r.blocks = load_be16(p + 7);
      r.length_field_byte = 7;
      break;
    // SBC-4 §5.35/§5.46 (12-byte): LBA bytes 2-5, length bytes 6-9.
    case Opcode::verify12:
    case Opcode::write_and_verify12:
      r.lba = load_be32(p + 2);
      r.blocks = load_be32(p + 6);
      r.length_field_byte = 6;
      break;
    // SBC-4 §5.36/§5.47/§5.10/§5.12 (16-byte): LBA bytes 2-9, length bytes 10-13.
    case Opcode::verify16:
    case Opcode::write_and_verify16:
    case Opcode::orwrite16:
    case Opcode::prefetch16:
      r.lba = load_be64(p + 2);
      r.blocks = load_be32(p + 10);
      r.length_field_byte = 10;
      break;
    // SBC-4 §5.3, table 29: NUMBER OF LOGICAL BLOCKS is byte 13.
    case Opcode::compare_and_write:
      r.lba = load_be64(p + 2);
      r.blocks = load_u8(p + 13);
      r.length_field_byte = 13;
      break;
    // SBC-4 §5.48: ATOMIC BOUNDARY bytes 10-11, TRANSFER LENGTH bytes 12-13.
    case Opcode::write_atomic16:
      r.lba = load_be64(p + 2);
      r.atomic_boundary = load_be16(p + 10);
      r.blocks = load_be16(p + 12);
      r.length_field_byte = 12;
      break;
    default:
      return tl::unexpected(invalid_opcode());
  }
  if (r.opcode == Opcode::prefetch10 || r.opcode == Opcode::prefetch16) {
    r.immed = (b1 & 0x02) != 0;
    return r;
  }
  r.protect = static_cast<std::uint8_t>(b1 >> 5);
  r.dpo = (b1 & 0x10) != 0;
  const bool verify = r.opcode == Opcode::verify10 || r.opcode == Opcode::verify12 || r.opcode == Opcode::verify16 ||
                      r.opcode == Opcode::write_and_verify10 || r.opcode == Opcode::write_and_verify12 ||
                      r.opcode == Opcode::write_and_verify16;
  if (verify) {
    r.bytchk = static_cast<std::uint8_t>((b1 >> 1) & 0x03);
  } else {
    r.fua = (b1 & 0x08) != 0;
  }
  return r;
}

SenseOr<GetLbaStatusCdb> parse_get_lba_status_cdb(ConstByteSpan cdb) noexcept {
  if (cdb.size() < 16 || load_u8(cdb.data()) != static_cast<std::uint8_t>(Opcode::service_action_in16))
    return tl::unexpected(invalid_opcode());
  const std::byte* p = cdb.data();
  if ((load_u8(p + 1) & 0x1f) != static_cast<std::uint8_t>(ServiceActionIn16::get_lba_status))
    return tl::unexpected(SenseData::invalid_field_in_cdb(1, 4));
  return GetLbaStatusCdb{.lba = load_be64(p + 2), .allocation_length = load_be32(p + 10)};
}

SenseOr<StartStopUnitCdb> parse_start_stop_unit_cdb(ConstByteSpan cdb) noexcept {
  if (cdb.size() < 6 || load_u8(cdb.data()) != static_cast<std::uint8_t>(Opcode::start_stop_unit))
    return tl::unexpected(invalid_opcode());
  const std::byte* p = cdb.data();
  const std::uint8_t b4 = load_u8(p + 4);
  // SBC-4 §5.25, table 120.
  return StartStopUnitCdb{.immed = (load_u8(p + 1) & 0x01) != 0,
                          .power_condition_modifier = static_cast<std::uint8_t>(load_u8(p + 3) & 0x0f),
                          .power_condition = static_cast<std::uint8_t>(b4 >> 4),
                          .no_flush = (b4 & 0x04) != 0,
                          .loej = (b4 & 0x02) != 0,
                          .start = (b4 & 0x01) != 0};
}

SenseOr<PersistentReserveInCdb> parse_persistent_reserve_in_cdb(ConstByteSpan cdb) noexcept {
  if (cdb.size() < 10 || load_u8(cdb.data()) != static_cast<std::uint8_t>(Opcode::persistent_reserve_in))
    return tl::unexpected(invalid_opcode());
  const std::byte* p = cdb.data();
  return PersistentReserveInCdb{.service_action = static_cast<std::uint8_t>(load_u8(p + 1) & 0x1f),
                                .allocation_length = load_be16(p + 7)};
}

SenseOr<PersistentReserveOutCdb> parse_persistent_reserve_out_cdb(ConstByteSpan cdb) noexcept {
  if (cdb.size() < 10 || load_u8(cdb.data()) != static_cast<std::uint8_t>(Opcode::persistent_reserve_out))
    return tl::unexpected(invalid_opcode());
  const std::byte* p = cdb.data();
  const std::uint8_t b2 = load_u8(p + 2);
  return PersistentReserveOutCdb{.service_action = static_cast<std::uint8_t>(load_u8(p + 1) & 0x1f),
                                 .scope = static_cast<std::uint8_t>(b2 >> 4),
                                 .type = static_cast<std::uint8_t>(b2 & 0x0f),
                                 .parameter_list_length = load_be32(p + 5)};
}

SenseOr<PersistentReserveOutParameters> parse_persistent_reserve_out_parameters(ConstByteSpan list) noexcept {
  // SPC-5 §6.18.3, table 187: 24 bytes.
  if (list.size() < 24) return tl::unexpected(SenseData::make(SenseKey::illegal_request, asc::parameter_list_length_error));
  const std::byte* p = list.data();
  const std::uint8_t b20 = load_u8(p + 20);
  return PersistentReserveOutParameters{.reservation_key = load_be64(p),
                                        .service_action_reservation_key = load_be64(p + 8),
                                        .spec_i_pt = (b20 & 0x08) != 0,
                                        .all_tg_pt = (b20 & 0x04) != 0,
                                        .aptpl = (b20 & 0x01) != 0};
}

SenseOr<ModeSelectCdb> parse_mode_select_cdb(ConstByteSpan cdb) noexcept {
  if (cdb.empty()) return tl::unexpected(invalid_opcode());
  const std::byte* p = cdb.data();
  const auto op = static_cast<Opcode>(load_u8(p));
  ModeSelectCdb m;
  if (op == Opcode::mode_select6 && cdb.size() >= 6) {
    m.parameter_list_length = load_u8(p + 4);
  } else if (op == Opcode::mode_select10 && cdb.size() >= 10) {
    m.ten = true;
    m.parameter_list_length = load_be16(p + 7);
  } else {
    return tl::unexpected(invalid_opcode());
  }
  m.pf = (load_u8(p + 1) & 0x10) != 0;
  m.sp = (load_u8(p + 1) & 0x01) != 0;
  return m;
}

}  // namespace iserkit::scsi

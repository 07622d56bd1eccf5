// CDB builders and parsers: SPC-5 §4.2 (CDB formats, group codes), §6.6 INQUIRY, §6.13/§6.14 MODE
// SENSE, §6.33 REPORT LUNS, §6.39 REQUEST SENSE, §6.47 TEST UNIT READY; SBC-4 §5.15-§5.18 READ,
// §5.40-§5.43 WRITE, §5.20/§5.21 READ CAPACITY, §5.27/§5.28 SYNCHRONIZE CACHE, §5.32 UNMAP,
// §5.49/§5.50 WRITE SAME.
#include "iserkit/scsi/cdb.hpp"

#include "iserkit/common/errors.hpp"

namespace iserkit::scsi {
namespace {

Cdb start(Opcode op, std::uint8_t length) noexcept {
  Cdb c;
  c.length = length;
  store_u8(c.bytes.data(), static_cast<std::uint8_t>(op));
  return c;
}

std::byte* at(Cdb& c, std::size_t i) noexcept { return c.bytes.data() + i; }

// Byte 1 of READ/WRITE (10/12/16): xxxPROTECT(7..5) DPO(4) FUA(3).
std::uint8_t rw_flags(const ReadWriteOptions& o) noexcept {
  return static_cast<std::uint8_t>((o.dpo ? 0x10 : 0) | (o.fua ? 0x08 : 0));
}

Result<Cdb> rw6(Opcode op, const ReadWriteOptions& o) noexcept {
  if (o.lba > 0x1fffff || o.blocks == 0 || o.blocks > 256 || o.fua || o.dpo) return fail(errc::invalid_argument);
  Cdb c = start(op, 6);
  store_u8(at(c, 1), static_cast<std::uint8_t>((o.lba >> 16) & 0x1f));
  store_be16(at(c, 2), static_cast<std::uint16_t>(o.lba));
  store_u8(at(c, 4), static_cast<std::uint8_t>(o.blocks == 256 ? 0 : o.blocks));  // SBC-4 §5.15: 0 = 256
  return c;
}

Result<Cdb> rw10(Opcode op, const ReadWriteOptions& o) noexcept {
  if (o.lba > 0xffffffffu || o.blocks > 0xffff) return fail(errc::invalid_argument);
  Cdb c = start(op, 10);
  store_u8(at(c, 1), rw_flags(o));
  store_be32(at(c, 2), static_cast<std::uint32_t>(o.lba));
  store_be16(at(c, 7), static_cast<std::uint16_t>(o.blocks));
  return c;
}

Result<Cdb> rw12(Opcode op, const ReadWriteOptions& o) noexcept {
  if (o.lba > 0xffffffffu) return fail(errc::invalid_argument);
  Cdb c = start(op, 12);
  store_u8(at(c, 1), rw_flags(o));
  store_be32(at(c, 2), static_cast<std::uint32_t>(o.lba));
  store_be32(at(c, 6), o.blocks);
  return c;
}

Cdb rw16(Opcode op, const ReadWriteOptions& o) noexcept {
  Cdb c = start(op, 16);
  store_u8(at(c, 1), rw_flags(o));
  store_be64(at(c, 2), o.lba);
  store_be32(at(c, 10), o.blocks);
  return c;
}

SenseData invalid_opcode() noexcept {
  return SenseData::make(SenseKey::illegal_request, asc::invalid_command_operation_code);
}

// The CDB must be at least as long as its opcode's group says; otherwise the device server cannot
// have received it whole. Reported as an invalid opcode, the most neutral sense available.
bool long_enough(ConstByteSpan cdb, std::size_t need) noexcept { return cdb.size() >= need; }

}  // namespace

std::size_t cdb_length_for(std::uint8_t opcode) noexcept {
  switch (opcode >> 5) {  // SPC-5 §4.2.5.1, table 11: GROUP CODE
    case 0: return 6;
    case 1:
    case 2: return 10;
    case 4: return 16;
    case 5: return 12;
    default: return 0;  // 3: variable length / reserved; 6, 7: vendor specific
  }
}

Result<Cdb> read6(const ReadWriteOptions& o) noexcept { return rw6(Opcode::read6, o); }
Result<Cdb> read10(const ReadWriteOptions& o) noexcept { return rw10(Opcode::read10, o); }
Result<Cdb> read12(const ReadWriteOptions& o) noexcept { return rw12(Opcode::read12, o); }
Cdb read16(const ReadWriteOptions& o) noexcept { return rw16(Opcode::read16, o); }
Result<Cdb> write6(const ReadWriteOptions& o) noexcept { return rw6(Opcode::write6, o); }
Result<Cdb> write10(const ReadWriteOptions& o) noexcept { return rw10(Opcode::write10, o); }
Result<Cdb> write12(const ReadWriteOptions& o) noexcept { return rw12(Opcode::write12, o); }
Cdb write16(const ReadWriteOptions& o) noexcept { return rw16(Opcode::write16, o); }

Result<Cdb> synchronize_cache10(const SynchronizeCacheOptions& o) noexcept {
  if (o.lba > 0xffffffffu || o.blocks > 0xffff) return fail(errc::invalid_argument);
  Cdb c = start(Opcode::synchronize_cache10, 10);
  store_u8(at(c, 1), o.immed ? 0x02 : 0);
  store_be32(at(c, 2), static_cast<std::uint32_t>(o.lba));
  store_be16(at(c, 7), static_cast<std::uint16_t>(o.blocks));
  return c;
}

Cdb synchronize_cache16(const SynchronizeCacheOptions& o) noexcept {
  Cdb c = start(Opcode::synchronize_cache16, 16);
  store_u8(at(c, 1), o.immed ? 0x02 : 0);
  store_be64(at(c, 2), o.lba);
  store_be32(at(c, 10), o.blocks);
  return c;
}

Cdb unmap(const UnmapOptions& o) noexcept {
  Cdb c = start(Opcode::unmap, 10);
  store_u8(at(c, 1), o.anchor ? 0x01 : 0);
  store_be16(at(c, 7), o.parameter_list_length_bytes);
  return c;
}

std::vector<std::byte> unmap_parameter_list(std::span<const UnmapDescriptor> descriptors) {
  const std::size_t n = 8 + 16 * descriptors.size();
  std::vector<std::byte> out(n);
  store_be16(out.data(), static_cast<std::uint16_t>(n - 2));      // UNMAP DATA LENGTH
  store_be16(out.data() + 2, static_cast<std::uint16_t>(n - 8));  // UNMAP BLOCK DESCRIPTOR DATA LENGTH
  std::byte* p = out.data() + 8;
  for (const auto& d : descriptors) {
    store_be64(p, d.lba);
    store_be32(p + 8, d.blocks);
    p += 16;
  }
  return out;
}

Result<Cdb> write_same10(const WriteSameOptions& o) noexcept {
  if (o.lba > 0xffffffffu || o.blocks > 0xffff || o.ndob) return fail(errc::invalid_argument);
  Cdb c = start(Opcode::write_same10, 10);
  store_u8(at(c, 1), static_cast<std::uint8_t>((o.anchor ? 0x10 : 0) | (o.unmap ? 0x08 : 0)));
  store_be32(at(c, 2), static_cast<std::uint32_t>(o.lba));
  store_be16(at(c, 7), static_cast<std::uint16_t>(o.blocks));
  return c;
}

Cdb write_same16(const WriteSameOptions& o) noexcept {
  Cdb c = start(Opcode::write_same16, 16);
  store_u8(at(c, 1), static_cast<std::uint8_t>((o.anchor ? 0x10 : 0) | (o.unmap ? 0x08 : 0) | (o.ndob ? 0x01 : 0)));
  store_be64(at(c, 2), o.lba);
  store_be32(at(c, 10), o.blocks);
  return c;
}

Cdb inquiry(const InquiryOptions& o) noexcept {
  Cdb c = start(Opcode::inquiry, 6);
  store_u8(at(c, 1), o.evpd ? 0x01 : 0);
  store_u8(at(c, 2), o.page_code);
  store_be16(at(c, 3), o.allocation_length);
  return c;
}

Cdb read_capacity10() noexcept { return start(Opcode::read_capacity10, 10); }

Cdb read_capacity16(const ReadCapacity16Options& o) noexcept {
  Cdb c = start(Opcode::service_action_in16, 16);
  store_u8(at(c, 1), static_cast<std::uint8_t>(ServiceActionIn16::read_capacity16));
  store_be32(at(c, 10), o.allocation_length);
  return c;
}

Cdb report_luns(const ReportLunsOptions& o) noexcept {
  Cdb c = start(Opcode::report_luns, 12);
  store_u8(at(c, 2), o.select_report);
  store_be32(at(c, 6), o.allocation_length);
  return c;
}

Cdb test_unit_ready() noexcept { return start(Opcode::test_unit_ready, 6); }

Cdb request_sense(const RequestSenseOptions& o) noexcept {
  Cdb c = start(Opcode::request_sense, 6);
  store_u8(at(c, 1), o.descriptor_format ? 0x01 : 0);
  store_u8(at(c, 4), o.allocation_length);
  return c;
}

namespace {
std::uint8_t page_byte(const ModeSenseOptions& o) noexcept {
  return static_cast<std::uint8_t>((static_cast<std::uint8_t>(o.pc) << 6) | (o.page_code & 0x3f));
}
}  // namespace

Result<Cdb> mode_sense6(const ModeSenseOptions& o) noexcept {
  if (o.allocation_length > 255 || o.llbaa) return fail(errc::invalid_argument);
  Cdb c = start(Opcode::mode_sense6, 6);
  store_u8(at(c, 1), o.dbd ? 0x08 : 0);
  store_u8(at(c, 2), page_byte(o));
  store_u8(at(c, 3), o.subpage_code);
  store_u8(at(c, 4), static_cast<std::uint8_t>(o.allocation_length));
  return c;
}

Cdb mode_sense10(const ModeSenseOptions& o) noexcept {
  Cdb c = start(Opcode::mode_sense10, 10);
  store_u8(at(c, 1), static_cast<std::uint8_t>((o.llbaa ? 0x10 : 0) | (o.dbd ? 0x08 : 0)));
  store_u8(at(c, 2), page_byte(o));
  store_u8(at(c, 3), o.subpage_code);
  store_be16(at(c, 7), o.allocation_length);
  return c;
}

// ---------------------------------------------------------------------------------------------
// Parsers
// ---------------------------------------------------------------------------------------------

bool ReadWriteCdb::is_write() const noexcept {
  return opcode == Opcode::write6 || opcode == Opcode::write10 || opcode == Opcode::write12 ||
         opcode == Opcode::write16;
}

SenseOr<ReadWriteCdb> parse_read_write_cdb(ConstByteSpan cdb) noexcept {
  if (cdb.empty()) return tl::unexpected(invalid_opcode());
  const std::byte* p = cdb.data();
  ReadWriteCdb r;
  r.opcode = static_cast<Opcode>(load_u8(p));
  switch (r.opcode) {
    case Opcode::read6:
    case Opcode::write6:
      if (!long_enough(cdb, 6)) return tl::unexpected(invalid_opcode());
      r.lba = load_be24(p + 1) & 0x1fffff;
      r.blocks = load_u8(p + 4);
      if (r.blocks == 0) r.blocks = 256;  // SBC-4 §5.15/§5.40: 0 means 256 blocks
      return r;
    case Opcode::read10:
    case Opcode::write10:
      if (!long_enough(cdb, 10)) return tl::unexpected(invalid_opcode());
      r.lba = load_be32(p + 2);
      r.blocks = load_be16(p + 7);
      break;
    case Opcode::read12:
    case Opcode::write12:
      if (!long_enough(cdb, 12)) return tl::unexpected(invalid_opcode());
      r.lba = load_be32(p + 2);
      r.blocks = load_be32(p + 6);
      break;
    case Opcode::read16:
    case Opcode::write16:
      if (!long_enough(cdb, 16)) return tl::unexpected(invalid_opcode());
      r.lba = load_be64(p + 2);
      r.blocks = load_be32(p + 10);
      break;
    default:
      return tl::unexpected(invalid_opcode());
  }
  const std::uint8_t b1 = load_u8(p + 1);
  r.protect = static_cast<std::uint8_t>(b1 >> 5);
  r.dpo = (b1 & 0x10) != 0;
  r.fua = (b1 & 0x08) != 0;
  return r;
}

SenseOr<SynchronizeCacheCdb> parse_synchronize_cache_cdb(ConstByteSpan cdb) noexcept {
  if (cdb.empty()) return tl::unexpected(invalid_opcode());
  const std::byte* p = cdb.data();
  SynchronizeCacheCdb s;
  const auto op = static_cast<Opcode>(load_u8(p));
  if (op == Opcode::synchronize_cache10 && long_enough(cdb, 10)) {
    s.lba = load_be32(p + 2);
    s.blocks = load_be16(p + 7);
  } else if (op == Opcode::synchronize_cache16 && long_enough(cdb, 16)) {
    s.lba = load_be64(p + 2);
    s.blocks = load_be32(p + 10);
  } else {
    return tl::unexpected(invalid_opcode());
  }
  s.immed = (load_u8(p + 1) & 0x02) != 0;
  return s;
}

SenseOr<WriteSameCdb> parse_write_same_cdb(ConstByteSpan cdb) noexcept {
  if (cdb.empty()) return tl::unexpected(invalid_opcode());
  const std::byte* p = cdb.data();
  WriteSameCdb w;
  w.opcode = static_cast<Opcode>(load_u8(p));
  const std::uint8_t b1 = load_u8(p + 1);
  if (w.opcode == Opcode::write_same10 && long_enough(cdb, 10)) {
    w.lba = load_be32(p + 2);
    w.blocks = load_be16(p + 7);
    // WRITE SAME (10) byte 1 bits 0..2 are reserved/obsolete: no NDOB (SBC-4 §5.49).
    if ((b1 & 0x01) != 0) return tl::unexpected(SenseData::invalid_field_in_cdb(1, 0));
  } else if (w.opcode == Opcode::write_same16 && long_enough(cdb, 16)) {
    w.lba = load_be64(p + 2);
    w.blocks = load_be32(p + 10);
    w.ndob = (b1 & 0x01) != 0;
  } else {
    return tl::unexpected(invalid_opcode());
  }
  w.protect = static_cast<std::uint8_t>(b1 >> 5);
  w.anchor = (b1 & 0x10) != 0;
  w.unmap = (b1 & 0x08) != 0;
  // SBC-4 §5.50, table 124: ANCHOR = 1 with UNMAP = 0 is an invalid combination.
  if (w.anchor && !w.unmap) return tl::unexpected(SenseData::invalid_field_in_cdb(1, 4));
  return w;
}

SenseOr<UnmapCdb> parse_unmap_cdb(ConstByteSpan cdb) noexcept {
  if (cdb.empty() || static_cast<Opcode>(load_u8(cdb.data())) != Opcode::unmap || !long_enough(cdb, 10))
    return tl::unexpected(invalid_opcode());
  UnmapCdb u;
  u.anchor = (load_u8(cdb.data() + 1) & 0x01) != 0;
  u.parameter_list_length_bytes = load_be16(cdb.data() + 7);
  return u;
}

SenseOr<std::vector<UnmapDescriptor>> parse_unmap_parameter_list(ConstByteSpan list) {
  std::vector<UnmapDescriptor> out;
  if (list.empty()) return out;
  // SBC-4 §5.32.1: a PARAMETER LIST LENGTH of 1..7 is a PARAMETER LIST LENGTH ERROR.
  if (list.size() < 8) return tl::unexpected(SenseData::make(SenseKey::illegal_request, asc::parameter_list_length_error));
  const std::byte* p = list.data();
  const std::size_t data_length = load_be16(p);
  const std::size_t descriptor_length = load_be16(p + 2);
  // The header's lengths must fit inside what was transferred (SBC-4 §5.32.2).
  if (data_length + 2 > list.size() || descriptor_length + 8 > list.size())
    return tl::unexpected(SenseData::make(SenseKey::illegal_request, asc::parameter_list_length_error));
  // SBC-4 §5.32.2: an incomplete last descriptor (length not a multiple of 16) is ignored.
  const std::size_t count = descriptor_length / 16;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::byte* d = p + 8 + 16 * i;
    out.push_back(UnmapDescriptor{load_be64(d), load_be32(d + 8)});
  }
  return out;
}

SenseOr<InquiryCdb> parse_inquiry_cdb(ConstByteSpan cdb) noexcept {
  if (cdb.size() < 6 || static_cast<Opcode>(load_u8(cdb.data())) != Opcode::inquiry)
    return tl::unexpected(invalid_opcode());
  const std::byte* p = cdb.data();
  InquiryCdb q;
  const std::uint8_t b1 = load_u8(p + 1);
  q.evpd = (b1 & 0x01) != 0;
  q.page_code = load_u8(p + 2);
  q.allocation_length = load_be16(p + 3);
  // SPC-5 §6.6.1: CMDDT (obsolete bit 1) set is an invalid field.
  if ((b1 & 0x02) != 0) return tl::unexpected(SenseData::invalid_field_in_cdb(1, 1));
  // SPC-5 §6.6.1: EVPD = 0 with a non-zero PAGE CODE → INVALID FIELD IN CDB.
  if (!q.evpd && q.page_code != 0) return tl::unexpected(SenseData::invalid_field_in_cdb(2));
  return q;
}

SenseOr<std::uint32_t> parse_read_capacity16_cdb(ConstByteSpan cdb) noexcept {
  if (cdb.size() < 16 || static_cast<Opcode>(load_u8(cdb.data())) != Opcode::service_action_in16)
    return tl::unexpected(invalid_opcode());
  if ((load_u8(cdb.data() + 1) & 0x1f) != static_cast<std::uint8_t>(ServiceActionIn16::read_capacity16))
    return tl::unexpected(SenseData::invalid_field_in_cdb(1, 4));
  return load_be32(cdb.data() + 10);
}

SenseOr<ReportLunsCdb> parse_report_luns_cdb(ConstByteSpan cdb) noexcept {
  if (cdb.size() < 12 || static_cast<Opcode>(load_u8(cdb.data())) != Opcode::report_luns)
    return tl::unexpected(invalid_opcode());
  ReportLunsCdb r;
  r.select_report = load_u8(cdb.data() + 2);
  r.allocation_length = load_be32(cdb.data() + 6);
  switch (r.select_report) {
    case 0x00: case 0x01: case 0x02: case 0x10: case 0x11: case 0x12: break;
    default: return tl::unexpected(SenseData::invalid_field_in_cdb(2));
  }
  // SPC-5 §6.33.1: an ALLOCATION LENGTH below 4 → INVALID FIELD IN CDB.
  if (r.allocation_length < 4) return tl::unexpected(SenseData::invalid_field_in_cdb(6));
  return r;
}

SenseOr<RequestSenseCdb> parse_request_sense_cdb(ConstByteSpan cdb) noexcept {
  if (cdb.size() < 6 || static_cast<Opcode>(load_u8(cdb.data())) != Opcode::request_sense)
    return tl::unexpected(invalid_opcode());
  RequestSenseCdb r;
  r.descriptor_format = (load_u8(cdb.data() + 1) & 0x01) != 0;
  r.allocation_length = load_u8(cdb.data() + 4);
  return r;
}

SenseOr<ModeSenseCdb> parse_mode_sense_cdb(ConstByteSpan cdb) noexcept {
  if (cdb.empty()) return tl::unexpected(invalid_opcode());
  const std::byte* p = cdb.data();
  ModeSenseCdb m;
  const auto op = static_cast<Opcode>(load_u8(p));
  if (op == Opcode::mode_sense6 && cdb.size() >= 6) {
    m.allocation_length = load_u8(p + 4);
  } else if (op == Opcode::mode_sense10 && cdb.size() >= 10) {
    m.ten = true;
    m.llbaa = (load_u8(p + 1) & 0x10) != 0;
    m.allocation_length = load_be16(p + 7);
  } else {
    return tl::unexpected(invalid_opcode());
  }
  m.dbd = (load_u8(p + 1) & 0x08) != 0;
  m.pc = static_cast<ModePageControl>(load_u8(p + 2) >> 6);
  m.page_code = load_u8(p + 2) & 0x3f;
  m.subpage_code = load_u8(p + 3);
  return m;
}

}  // namespace iserkit::scsi

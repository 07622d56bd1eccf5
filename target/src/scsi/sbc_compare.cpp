// SBC-4 commands beyond plain READ/WRITE: VERIFY (10)/(12)/(16) (§5.34-§5.36), WRITE AND VERIFY
// (10)/(12)/(16) (§5.45-§5.47), COMPARE AND WRITE (§5.3), ORWRITE (16) (§5.10), PRE-FETCH
// (10)/(16) (§5.11, §5.12), WRITE ATOMIC (16) (§5.48), START STOP UNIT (§5.25) and GET LBA
// STATUS (§5.8), READ DEFECT DATA (10)/(12) (§5.19, §5.20). WRITE ATOMIC is a write under the LU's range lock: atomic against every other
// write and COMPARE AND WRITE (SBC-4 §4.29); reads are not held off. Ranges are checked
// in the plan phase; miscompares are found in execute, after the Data-Out arrived. COMPARE AND
// WRITE goes to the backend's atomic compare_and_write() when it has one (RBD); otherwise it runs
// under the LU's range lock (taken by the dispatcher), so no other write to its blocks through this
// target can come between its read and its write.
#include <algorithm>
#include <cstring>
#include <vector>

#include "iserkit/scsi/block_cdb.hpp"
#include "scsi/handlers.hpp"

namespace iserkit::target::detail {

using scsi::Opcode;

namespace {

/// Largest COMPARE AND WRITE in logical blocks (VPD 0xb0 MAXIMUM COMPARE AND WRITE LENGTH).
constexpr std::uint32_t max_compare_and_write_blocks = 255;

bool is_verify(Opcode op) noexcept { return op == Opcode::verify10 || op == Opcode::verify12 || op == Opcode::verify16; }
bool is_write_and_verify(Opcode op) noexcept {
  return op == Opcode::write_and_verify10 || op == Opcode::write_and_verify12 || op == Opcode::write_and_verify16;
}

scsi::SenseData miscompare_at(std::uint64_t offset_bytes) noexcept {
  // SBC-4 §5.3.2 / §5.34: MISCOMPARE, MISCOMPARE DURING VERIFY OPERATION; INFORMATION = offset of
  // the first byte that differs, from the start of the Data-Out buffer.
  auto s = scsi::SenseData::make(scsi::SenseKey::miscompare, scsi::asc::miscompare_during_verify);
  s.information = offset_bytes;
  return s;
}

std::optional<std::size_t> first_difference(ConstByteSpan a, ConstByteSpan b) noexcept {
  const auto [pa, pb] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  if (pa == a.end()) return std::nullopt;
  return static_cast<std::size_t>(pa - a.begin());
}

}  // namespace

void plan_block_command(CommandPlan& plan, ConstByteSpan cdb) noexcept {
  const auto b = scsi::parse_block_cdb(cdb);
  if (!parsed_cdb(plan, b)) return;
  const LogicalUnit& unit = *plan.unit;
  const std::uint32_t bs = unit.block_size_bytes();
  if (!protect_field_zero(plan, b->protect)) return;  // VRPROTECT/WRPROTECT/ORPROTECT
  const bool writes = !is_verify(b->opcode) && b->opcode != Opcode::prefetch10 && b->opcode != Opcode::prefetch16;
  if (is_verify(b->opcode) && b->bytchk == 2) {  // SBC-4 table 89: 10b is reserved
    plan.error = scsi::SenseData::invalid_field_in_cdb(1, 2);
    return;
  }
  if (is_write_and_verify(b->opcode) && b->bytchk > 1) {  // SBC-4 §5.45: only 00b and 01b
    plan.error = scsi::SenseData::invalid_field_in_cdb(1, 2);
    return;
  }
  if (b->opcode == Opcode::compare_and_write && b->blocks > max_compare_and_write_blocks) {
    // SBC-4 §5.3.1: above MAXIMUM COMPARE AND WRITE LENGTH → INVALID FIELD IN CDB.
    plan.error = scsi::SenseData::invalid_field_in_cdb(13);
    return;
  }
  if (b->opcode == Opcode::write_atomic16 && b->atomic_boundary != 0) {
    // SBC-4 §5.48: MAXIMUM ATOMIC BOUNDARY SIZE is 0, so ATOMIC BOUNDARY must be 0.
    plan.error = scsi::SenseData::invalid_field_in_cdb(10);
    return;
  }
  if (!in_range(unit, b->lba, b->blocks)) {
    plan.error = lba_out_of_range();
    return;
  }
  const bool moves_blocks = writes || (is_verify(b->opcode) && b->bytchk == 1);
  const std::uint64_t data_blocks = b->opcode == Opcode::compare_and_write ? 2ull * b->blocks : b->blocks;
  if (moves_blocks && ((unit.max_transfer_blocks() != 0 && b->blocks > unit.max_transfer_blocks()) ||
                       data_blocks * bs > 0xffffffffull)) {
    plan.error = scsi::SenseData::invalid_field_in_cdb(b->length_field_byte);
    return;
  }
  if (writes && plan.write_protected) {
    plan.error = write_protected();
    return;
  }
  plan.lba = b->lba;
  plan.blocks = b->blocks;
  plan.fua = b->fua;
  plan.bytchk = b->bytchk;
  plan.exact_data_out = b->opcode == Opcode::compare_and_write;
  if (b->blocks == 0) return;  // SBC-4: zero blocks is not an error; nothing moves
  if (writes) {
    plan.direction = DataDirection::to_target;
    plan.transfer_length_bytes = static_cast<std::uint32_t>(data_blocks * bs);
    plan.shortenable = is_write_and_verify(b->opcode);
  } else if (is_verify(b->opcode) && b->bytchk != 0) {
    // SBC-4 table 89: BYTCHK 01b compares every block; 11b compares one block against each.
    plan.direction = DataDirection::to_target;
    plan.transfer_length_bytes = b->bytchk == 1 ? static_cast<std::uint32_t>(data_blocks * bs) : bs;
  }
}

void plan_start_stop_unit(CommandPlan& plan, ConstByteSpan cdb) noexcept {
  const auto s = scsi::parse_start_stop_unit_cdb(cdb);
  if (!parsed_cdb(plan, s)) return;
  // SBC-4 §5.25: power conditions other than START_VALID (0h) and the standard ones are reserved.
  if (s->power_condition != 0 && s->power_condition != 1 && s->power_condition != 2 && s->power_condition != 3 &&
      s->power_condition != 7 && s->power_condition != 0xa && s->power_condition != 0xb) {
    plan.error = scsi::SenseData::invalid_field_in_cdb(4, 7);
  }
  // The medium is not removable (RMB = 0): LOEJ and START need no action, the unit is always ready.
}

void plan_read_defect_data(CommandPlan& plan, ConstByteSpan cdb) noexcept {
  // SBC-4 §5.19 (10): ALLOCATION LENGTH bytes 7-8; §5.20 (12): bytes 6-9.
  const bool twelve = plan.opcode == Opcode::read_defect_data12;
  plan_data_in(plan, twelve ? load_be32(cdb.data() + 6) : load_be16(cdb.data() + 7));
}

ScsiOutcome execute_read_defect_data(ConstByteSpan cdb, ByteSpan out) {
  const bool twelve = static_cast<Opcode>(load_u8(cdb.data())) == Opcode::read_defect_data12;
  // The header echoes the requested DEFECT LIST FORMAT; PLISTV/GLISTV 0 and DEFECT LIST LENGTH 0:
  // a virtual medium has no defect lists (SBC-4 §5.19.2 table 97, §5.20.2 table 100).
  const std::uint8_t format = load_u8(cdb.data() + (twelve ? 1 : 2)) & 0x07;
  std::array<std::byte, 8> header{};
  store_u8(header.data() + 1, format);
  return reply_data(ConstByteSpan(header.data(), twelve ? 8 : 4), out);
}

Awaitable<ScsiOutcome> execute_verify(const CommandPlan& plan, ConstByteSpan data) {
  if (plan.blocks == 0) co_return ScsiOutcome::good();
  const LogicalUnit& unit = *plan.unit;
  const std::uint64_t bs = unit.block_size_bytes();
  // Read the medium in pieces of at most 1 MiB: with BYTCHK 00b this is the medium verification
  // itself (an unreadable block fails), otherwise the data to compare against.
  const std::uint64_t total = plan.blocks * bs;
  std::vector<std::byte> medium(std::min<std::uint64_t>(total, 1u << 20));
  for (std::uint64_t done = 0; done < total;) {
    const std::uint64_t n = std::min<std::uint64_t>(medium.size(), total - done);
    auto r = co_await unit.backend().read(plan.lba * bs + done, ByteSpan(medium.data(), n));
    if (!r) co_return outcome_of(r, false);
    if (plan.bytchk == 1) {
      if (auto at = first_difference(data.subspan(done, n), ConstByteSpan(medium.data(), n)))
        co_return ScsiOutcome::check_condition(miscompare_at(done + *at));
    } else if (plan.bytchk == 3) {
      for (std::uint64_t off = 0; off < n; off += bs) {
        if (auto at = first_difference(data.first(bs), ConstByteSpan(medium.data() + off, bs)))
          co_return ScsiOutcome::check_condition(miscompare_at(*at));
      }
    }
    done += n;
  }
  co_return ScsiOutcome::good();
}

Awaitable<ScsiOutcome> execute_compare_and_write(const CommandPlan& plan, ConstByteSpan data) {
  if (plan.blocks == 0) co_return ScsiOutcome::good();  // SBC-4 §5.3.1: zero blocks is no error
  const LogicalUnit& unit = *plan.unit;
  const std::uint64_t length = plan.blocks * unit.block_size_bytes();
  const std::uint64_t offset = plan.lba * unit.block_size_bytes();
  const Fua fua = plan.fua ? Fua::yes : Fua::no;
  // SBC-4 §5.3.2: the first half of the Data-Out is the verify data, the second the write data.
  // A backend that can compare and write atomically itself (RBD: in the cluster, so two gateways
  // cannot interleave) does; otherwise read, compare and write here, under the LU's range lock.
  auto atomic = co_await unit.backend().compare_and_write(offset, data.first(length), data.subspan(length, length), fua);
  if (atomic) {
    if (atomic->mismatch_offset_bytes) co_return ScsiOutcome::check_condition(miscompare_at(*atomic->mismatch_offset_bytes));
    co_return ScsiOutcome::good();
  }
  if (atomic.error() != std::errc::operation_not_supported) co_return backend_error_outcome(atomic.error(), true);
  std::vector<std::byte> medium(length);
  auto r = co_await unit.backend().read(offset, medium);
  if (!r) co_return outcome_of(r, false);
  if (auto at = first_difference(data.first(length), medium)) co_return ScsiOutcome::check_condition(miscompare_at(*at));
  auto w = co_await unit.backend().write(offset, data.subspan(length, length), fua);
  co_return outcome_of(w, true);
}

Awaitable<ScsiOutcome> execute_orwrite(const CommandPlan& plan, ConstByteSpan data) {
  if (plan.blocks == 0) co_return ScsiOutcome::good();
  const LogicalUnit& unit = *plan.unit;
  const std::uint64_t length = plan.blocks * unit.block_size_bytes();
  const std::uint64_t offset = plan.lba * unit.block_size_bytes();
  std::vector<std::byte> medium(length);
  auto r = co_await unit.backend().read(offset, medium);
  if (!r) co_return outcome_of(r, false);
  // SBC-4 §5.10: the new contents are the bitwise OR of the medium and the Data-Out.
  for (std::size_t i = 0; i < medium.size(); ++i) medium[i] |= data[i];
  co_return outcome_of(co_await unit.backend().write(offset, medium, plan.fua ? Fua::yes : Fua::no), true);
}

Awaitable<ScsiOutcome> execute_get_lba_status(const CommandPlan& plan, ConstByteSpan cdb, ByteSpan out) {
  (void)cdb;
  const LogicalUnit& unit = *plan.unit;
  const std::uint64_t bs = unit.block_size_bytes();
  // SBC-4 §5.8.2: an 8-byte header, then LBA status descriptors of 16 bytes, the first starting
  // at the requested LBA. Fill as many as the allocation length holds (at least one is computed).
  const std::size_t wanted = std::max<std::size_t>(1, out.size() >= 8 ? (out.size() - 8) / 16 : 0);
  const std::size_t max_descriptors = std::min<std::size_t>(wanted, 64);
  std::vector<std::byte> data(8);
  std::uint64_t lba = plan.lba;
  for (std::size_t n = 0; n < max_descriptors && lba < unit.block_count(); ++n) {
    const std::uint64_t left_bytes = (unit.block_count() - lba) * bs;
    auto extent = co_await unit.backend().allocation(lba * bs, std::min<std::uint64_t>(left_bytes, 0xffffffffull * bs));
    if (!extent) co_return backend_error_outcome(extent.error(), false);
    // A block is mapped if any byte of it is: round mapped runs up, holes down.
    std::uint64_t blocks = extent->allocated ? (extent->length_bytes + bs - 1) / bs : extent->length_bytes / bs;
    bool allocated = extent->allocated;
    if (blocks == 0) {  // a hole smaller than a block: the block holds data
      blocks = 1;
      allocated = true;
    }
    blocks = std::min<std::uint64_t>(blocks, unit.block_count() - lba);
    std::array<std::byte, 16> d{};
    store_be64(d.data(), lba);
    store_be32(d.data() + 8, static_cast<std::uint32_t>(blocks));
    store_u8(d.data() + 12, allocated ? 0x0 : 0x1);  // PROVISIONING STATUS: 0 mapped, 1 deallocated
    if (!data.empty() && data.size() > 8) {
      // Merge with the previous descriptor when the state is the same (holes may be split).
      std::byte* prev = data.data() + data.size() - 16;
      if (load_u8(prev + 12) == load_u8(d.data() + 12) && load_be64(prev) + load_be32(prev + 8) == lba &&
          std::uint64_t{load_be32(prev + 8)} + blocks <= 0xffffffffull) {
        store_be32(prev + 8, static_cast<std::uint32_t>(load_be32(prev + 8) + blocks));
        lba += blocks;
        --n;
        continue;
      }
    }
    data.insert(data.end(), d.begin(), d.end());
    lba += blocks;
  }
  store_be32(data.data(), static_cast<std::uint32_t>(data.size() - 4));  // PARAMETER DATA LENGTH: n - 3
  co_return reply_data(data, out);
}

}  // namespace iserkit::target::detail

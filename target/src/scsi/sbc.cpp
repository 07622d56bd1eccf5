// SBC-4 commands of the target's device server: READ/WRITE (6)/(10)/(12)/(16) (§5.15-§5.18,
// §5.40-§5.43), READ CAPACITY (10)/(16) (§5.20, §5.21), SYNCHRONIZE CACHE (10)/(16) (§5.27,
// §5.28), UNMAP (§5.32) and WRITE SAME (10)/(16) (§5.49, §5.50). Every LBA range is checked in the
// plan phase (LBA OUT OF RANGE, SBC-4 §4.5) so the backend never sees an out-of-range request.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "iserkit/scsi/block_cdb.hpp"
#include "iserkit/scsi/inquiry.hpp"
#include "scsi/handlers.hpp"

namespace iserkit::target::detail {

using scsi::Opcode;

// SBC-4 §4.5: the range [lba, lba + blocks) must lie inside the medium; an LBA at or past the end
// is out of range even with zero blocks (libiscsi's *_0blocks tests check this).
bool in_range(const LogicalUnit& unit, std::uint64_t lba, std::uint64_t blocks) noexcept {
  const std::uint64_t count = unit.block_count();
  return lba < count && blocks <= count - lba;
}

namespace {

bool all_zero(ConstByteSpan data) noexcept {
  return std::all_of(data.begin(), data.end(), [](std::byte b) { return b == std::byte{0}; });
}

}  // namespace

void plan_read_write(CommandPlan& plan, ConstByteSpan cdb) noexcept {
  const auto rw = scsi::parse_read_write_cdb(cdb);
  if (!parsed_cdb(plan, rw)) return;
  const LogicalUnit& unit = *plan.unit;
  if (!protect_field_zero(plan, rw->protect)) return;  // RDPROTECT/WRPROTECT
  if (!in_range(unit, rw->lba, rw->blocks)) {
    plan.error = lba_out_of_range();
    return;
  }
  // SBC-4 §6.6.4: a TRANSFER LENGTH above MAXIMUM TRANSFER LENGTH → INVALID FIELD IN CDB.
  const std::uint64_t bytes = std::uint64_t{rw->blocks} * unit.block_size_bytes();
  if ((unit.max_transfer_blocks() != 0 && rw->blocks > unit.max_transfer_blocks()) || bytes > 0xffffffffu) {
    const std::uint16_t field = rw->opcode == Opcode::read6 || rw->opcode == Opcode::write6 ? 4
                                : rw->opcode == Opcode::read10 || rw->opcode == Opcode::write10 ? 7
                                : rw->opcode == Opcode::read12 || rw->opcode == Opcode::write12 ? 6
                                                                                                : 10;
    plan.error = scsi::SenseData::invalid_field_in_cdb(field);
    return;
  }
  if (rw->is_write() && plan.write_protected) {
    plan.error = write_protected();
    return;
  }
  plan.lba = rw->lba;
  plan.blocks = rw->blocks;
  plan.fua = rw->fua;
  plan.shortenable = rw->is_write();
  plan.direction = rw->is_write() ? DataDirection::to_target : DataDirection::from_target;
  plan.transfer_length_bytes = static_cast<std::uint32_t>(bytes);
}

void plan_read_capacity10(CommandPlan& plan) noexcept { plan_data_in(plan, scsi::read_capacity10_size_bytes); }

void plan_service_action_in16(CommandPlan& plan, ConstByteSpan cdb) noexcept {
  if ((load_u8(cdb.data() + 1) & 0x1f) == static_cast<std::uint8_t>(scsi::ServiceActionIn16::get_lba_status)) {
    const auto g = scsi::parse_get_lba_status_cdb(cdb);
    if (!parsed_cdb(plan, g)) return;
    // SBC-4 §5.8: GET LBA STATUS exists with logical block provisioning management only.
    if (!plan.unit->thin()) {
      plan.error = scsi::SenseData::invalid_field_in_cdb(1, 4);
      return;
    }
    if (g->lba >= plan.unit->block_count()) {
      plan.error = lba_out_of_range();
      return;
    }
    plan.lba = g->lba;
    plan_data_in(plan, g->allocation_length);
    return;
  }
  const auto allocation = scsi::parse_read_capacity16_cdb(cdb);
  if (!parsed_cdb(plan, allocation)) return;
  plan_data_in(plan, *allocation);
}

void plan_synchronize_cache(CommandPlan& plan, ConstByteSpan cdb) noexcept {
  const auto s = scsi::parse_synchronize_cache_cdb(cdb);
  if (!parsed_cdb(plan, s)) return;
  // SBC-4 §5.27: NUMBER OF LOGICAL BLOCKS 0 means "through the last LBA".
  const std::uint64_t blocks = s->blocks == 0 && s->lba < plan.unit->block_count()
                                   ? plan.unit->block_count() - s->lba
                                   : s->blocks;
  if (!in_range(*plan.unit, s->lba, blocks)) {
    plan.error = lba_out_of_range();
    return;
  }
  plan.lba = s->lba;
  plan.blocks = blocks;
}

void plan_unmap(CommandPlan& plan, ConstByteSpan cdb) noexcept {
  const auto u = scsi::parse_unmap_cdb(cdb);
  if (!parsed_cdb(plan, u)) return;
  if (plan.write_protected) {
    plan.error = write_protected();
    return;
  }
  // SBC-4 §5.32: UNMAP exists only with logical block provisioning (LBPU = 1).
  if (!plan.unit->thin()) {
    plan.error = invalid_opcode();
    return;
  }
  if (u->anchor) {  // ANC_SUP = 0 → ANCHOR = 1 is an invalid field (SBC-4 §5.32.1)
    plan.error = scsi::SenseData::invalid_field_in_cdb(1, 0);
    return;
  }
  plan.direction = DataDirection::to_target;
  plan.transfer_length_bytes = u->parameter_list_length_bytes;
}

void plan_write_same(CommandPlan& plan, ConstByteSpan cdb) noexcept {
  const auto w = scsi::parse_write_same_cdb(cdb);
  if (!parsed_cdb(plan, w)) return;
  const LogicalUnit& unit = *plan.unit;
  if (!protect_field_zero(plan, w->protect)) return;  // WRPROTECT
  if (w->anchor) {  // ANC_SUP = 0
    plan.error = scsi::SenseData::invalid_field_in_cdb(1, 4);
    return;
  }
  // SBC-4 §5.50 (WSNZ = 0): NUMBER OF LOGICAL BLOCKS 0 means "through the last LBA"; more than
  // MAXIMUM WRITE SAME LENGTH blocks → INVALID FIELD IN CDB (checked only for an in-range request).
  const std::uint16_t blocks_field = w->opcode == Opcode::write_same10 ? 7 : 10;
  std::uint64_t blocks = w->blocks;
  if (blocks == 0 && w->lba < unit.block_count()) blocks = unit.block_count() - w->lba;
  if (unit.options().max_unmap_blocks != 0 && blocks > unit.options().max_unmap_blocks && in_range(unit, w->lba, blocks)) {
    plan.error = scsi::SenseData::invalid_field_in_cdb(blocks_field);
    return;
  }
  if (!in_range(unit, w->lba, blocks)) {
    plan.error = lba_out_of_range();
    return;
  }
  if (plan.write_protected) {
    plan.error = write_protected();
    return;
  }
  plan.lba = w->lba;
  plan.blocks = blocks;
  plan.unmap = w->unmap;
  plan.ndob = w->ndob;
  plan.exact_data_out = true;
  if (!w->ndob) {
    plan.direction = DataDirection::to_target;
    plan.transfer_length_bytes = unit.block_size_bytes();
  }
}

ScsiOutcome execute_read_capacity10(const CommandPlan& plan, ByteSpan out) noexcept {
  const LogicalUnit& unit = *plan.unit;
  std::array<std::byte, scsi::read_capacity10_size_bytes> data{};
  // SBC-4 §5.20.2: a last LBA above FFFFFFFEh is reported as FFFFFFFFh ("use READ CAPACITY (16)").
  const std::uint64_t last = unit.block_count() == 0 ? 0 : unit.block_count() - 1;
  scsi::encode_read_capacity10({.last_lba = static_cast<std::uint32_t>(std::min<std::uint64_t>(last, 0xffffffffu)),
                                .block_length_bytes = unit.block_size_bytes()},
                               data);
  return reply_data(data, out);
}

ScsiOutcome execute_read_capacity16(const CommandPlan& plan, ByteSpan out) noexcept {
  const LogicalUnit& unit = *plan.unit;
  std::array<std::byte, scsi::read_capacity16_size_bytes> data{};
  scsi::ReadCapacity16Data d;
  d.last_lba = unit.block_count() == 0 ? 0 : unit.block_count() - 1;
  d.block_length_bytes = unit.block_size_bytes();
  d.lbpme = unit.thin();
  // Physical blocks of 4 KiB (the page and file system block size behind every backend): 512-byte
  // LUNs report 8 logical blocks per physical block (SBC-4 §5.21.2).
  for (std::uint32_t n = 4096 / unit.block_size_bytes(); n > 1; n >>= 1) ++d.logical_blocks_per_physical_block_exponent;
  d.lbprz = unit.thin() && unit.backend().capabilities().discard_zeroes;
  scsi::encode_read_capacity16(d, data);
  return reply_data(data, out);
}

Awaitable<ScsiOutcome> execute_read(const CommandPlan& plan, ByteSpan out) {
  if (plan.blocks == 0) co_return ScsiOutcome::good();  // SBC-4: TRANSFER LENGTH 0 is not an error
  const LogicalUnit& unit = *plan.unit;
  auto r = co_await unit.backend().read(plan.lba * unit.block_size_bytes(), out);
  if (!r) co_return outcome_of(r, false);
  co_return ScsiOutcome::good(static_cast<std::uint32_t>(out.size()));
}

Awaitable<ScsiOutcome> execute_write(const CommandPlan& plan, ConstByteSpan data) {
  if (plan.blocks == 0) co_return ScsiOutcome::good();
  const LogicalUnit& unit = *plan.unit;
  // SBC-4 §5.41: FUA = 1 → the data is on the medium before GOOD status.
  auto r = co_await unit.backend().write(plan.lba * unit.block_size_bytes(), data, plan.fua ? Fua::yes : Fua::no);
  co_return outcome_of(r, true);
}

Awaitable<ScsiOutcome> execute_synchronize_cache(const CommandPlan& plan) {
  // The backend flushes whole files; the range was only validated. IMMED is honoured by waiting
  // (allowed: SBC-4 §5.27 lets the device server complete the flush before returning).
  auto r = co_await plan.unit->backend().flush();
  co_return outcome_of(r, true);
}

Awaitable<ScsiOutcome> execute_unmap(const CommandPlan& plan, ConstByteSpan parameter_list) {
  const LogicalUnit& unit = *plan.unit;
  const auto descriptors = scsi::parse_unmap_parameter_list(parameter_list);
  if (!descriptors) co_return ScsiOutcome::check_condition(descriptors.error());
  // SBC-4 §5.32.2: more descriptors than MAXIMUM UNMAP BLOCK DESCRIPTOR COUNT, or more blocks than
  // MAXIMUM UNMAP LBA COUNT → INVALID FIELD IN PARAMETER LIST; any range outside the medium →
  // LBA OUT OF RANGE. All are checked before anything is unmapped.
  if (descriptors->size() > unit.options().max_unmap_descriptors)
    co_return ScsiOutcome::check_condition(scsi::SenseData::invalid_field_in_parameter_list(2));
  for (std::size_t i = 0; i < descriptors->size(); ++i) {
    const auto& d = (*descriptors)[i];
    if (unit.options().max_unmap_blocks != 0 && d.blocks > unit.options().max_unmap_blocks)
      co_return ScsiOutcome::check_condition(scsi::SenseData::invalid_field_in_parameter_list(static_cast<std::uint16_t>(8 + 16 * i + 8)));
    if (d.blocks != 0 && !in_range(unit, d.lba, d.blocks)) co_return ScsiOutcome::check_condition(lba_out_of_range());
  }
  // Ranges that touch or overlap are merged first (unmapping is idempotent, so the result is the
  // same): initiators send one descriptor per block (libiscsi's Unmap.Simple sends up to 256), and
  // each backend discard is a round trip (a Ceph RBD discard is an OSD operation).
  struct Range {
    std::uint64_t lba, blocks;
  };
  std::vector<Range> ranges;
  ranges.reserve(descriptors->size());
  for (const auto& d : *descriptors) {
    if (d.blocks != 0) ranges.push_back({d.lba, d.blocks});
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.lba < b.lba; });
  std::vector<Range> merged;
  for (const Range& r : ranges) {
    if (!merged.empty() && r.lba <= merged.back().lba + merged.back().blocks) {
      merged.back().blocks = std::max(merged.back().blocks, r.lba + r.blocks - merged.back().lba);
    } else {
      merged.push_back(r);
    }
  }
  const std::uint64_t bs = unit.block_size_bytes();
  for (const Range& m : merged) {
    auto r = co_await unit.backend().discard(m.lba * bs, m.blocks * bs);
    if (!r) co_return outcome_of(r, true);
  }
  co_return ScsiOutcome::good();
}

Awaitable<ScsiOutcome> execute_write_same(const CommandPlan& plan, ConstByteSpan block) {
  const LogicalUnit& unit = *plan.unit;
  const std::uint64_t bs = unit.block_size_bytes();
  const std::uint64_t offset = plan.lba * bs;
  const std::uint64_t length = plan.blocks * bs;
  BlockBackend& backend = unit.backend();
  // SBC-4 §4.7.3.5 / §5.50: with UNMAP = 1 on a thin LU the blocks are unmapped (the Data-Out
  // block is not written; libiscsi and LIO treat the request so); they then read back as zeroes
  // (LBPRZ = 1), so only when the backend's discard zeroes.
  if (plan.unmap && unit.thin() && backend.capabilities().discard_zeroes) {
    co_return outcome_of(co_await backend.discard(offset, length), true);
  }
  if (plan.ndob || all_zero(block)) {
    co_return outcome_of(co_await backend.write_zeroes(offset, length, Fua::no), true);
  }
  // A backend that repeats the block itself (RBD: rbd_aio_writesame) gets the one block; otherwise
  // (or when it declines these sizes) replicate the block into a buffer of up to 1 MiB and write
  // it repeatedly.
  if (auto r = co_await backend.write_same(offset, length, block.first(bs), Fua::no);
      r || r.error() != std::errc::operation_not_supported) {
    co_return outcome_of(r, true);
  }
  const std::uint64_t chunk_blocks = std::min<std::uint64_t>(plan.blocks, (1u << 20) / bs);
  std::vector<std::byte> buffer(chunk_blocks * bs);
  for (std::uint64_t i = 0; i < chunk_blocks; ++i) std::memcpy(buffer.data() + i * bs, block.data(), bs);
  std::uint64_t done = 0;
  while (done < length) {
    const std::uint64_t n = std::min<std::uint64_t>(buffer.size(), length - done);
    auto r = co_await backend.write(offset + done, ConstByteSpan(buffer.data(), n), Fua::no);
    if (!r) co_return outcome_of(r, true);
    done += n;
  }
  co_return ScsiOutcome::good();
}

}  // namespace iserkit::target::detail

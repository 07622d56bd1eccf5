// FakeLunChannel: a CommandChannel that answers the commands LunHandle::open(), LunExport and the
// FUSE view send (TEST UNIT READY, INQUIRY + VPD 0x00/0xb0, READ CAPACITY (16), MODE SENSE (6)/(10),
// READ/WRITE (10)/(16), SYNCHRONIZE CACHE (10)/(16), GET LBA STATUS) from an in-memory disk with a
// per-block provisioning map, and records every READ/WRITE it ran (LBA, blocks, FUA bit), every
// SYNCHRONIZE CACHE (its CDB's LBA and block count) and how many GET LBA STATUS it answered.
// Test double for unit tests of the front ends and of LunHandle's splitting; SBC-4/SPC-5 layouts
// come from the real codecs in common/scsi.
#pragma once

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "iserkit/common/bytes.hpp"
#include "iserkit/initiator/command_channel.hpp"
#include "iserkit/scsi/inquiry.hpp"

namespace iserkit::test {

/// What the fake unit reports.
struct FakeLunOptions {
  std::uint64_t blocks = 2048;
  std::uint32_t block_size_bytes = 512;
  /// DEVICE-SPECIFIC PARAMETER DPOFUA in MODE SENSE; empty = MODE SENSE is rejected (ILLEGAL REQUEST).
  std::optional<bool> dpofua = true;
  /// MODE SENSE (10) rejected as an unknown opcode (only (6) works).
  bool mode_sense10_unsupported = false;
  /// VPD 0xb0 MAXIMUM TRANSFER LENGTH in logical blocks; empty = no 0xb0 page.
  std::optional<std::uint32_t> maximum_transfer_length_blocks;
  /// CommandChannel::max_transfer_bytes() (the transport's cap; 0 = none).
  std::uint32_t transport_max_transfer_bytes = 0;
  /// CommandChannel::unstated_max_transfer_bytes() (0 = none).
  std::uint32_t transport_unstated_max_transfer_bytes = 0;
  /// WRITE with FUA fails with INVALID FIELD IN CDB when the unit has no DPOFUA (as LIO does).
  bool reject_fua_without_dpofua = true;
  /// READ CAPACITY (16) LBPME and LBPRZ (SBC-4 §5.20.2).
  bool thin = false;
  bool unmapped_reads_zero = false;
  /// GET LBA STATUS ends in ILLEGAL REQUEST (INVALID FIELD IN CDB) even on a thin unit.
  bool reject_get_lba_status = false;
  /// Most descriptors one GET LBA STATUS answer holds, and most blocks one descriptor covers
  /// (a run longer than that is split over several descriptors: a fragmented-looking unit).
  std::size_t lba_status_max_descriptors = 64;
  std::uint64_t lba_status_max_run_blocks = 0xffffffff;
};

/// One READ or WRITE the fake ran.
struct FakeTransfer {
  bool write = false;
  std::uint64_t lba = 0;
  std::uint32_t blocks = 0;
  bool fua = false;
  std::size_t bytes = 0;  ///< size of the data buffer the command carried
};

/// One SYNCHRONIZE CACHE the fake ran, as its CDB gave it.
struct FakeFlush {
  std::uint8_t opcode = 0;  ///< 0x35 (10) or 0x91 (16)
  std::uint64_t lba = 0;
  std::uint32_t blocks = 0;  ///< NUMBER OF LOGICAL BLOCKS; 0 = through the last LBA
};

class FakeLunChannel final : public initiator::CommandChannel {
 public:
  FakeLunChannel(asio::any_io_executor executor, FakeLunOptions options)
      : executor_(std::move(executor)),
        options_(options),
        disk_(options.blocks * options.block_size_bytes),
        mapped_(options.blocks, true) {}

  Awaitable<Result<scsi::ScsiResult>> execute(const initiator::CommandRequest& request) override {
    co_return run(request);
  }
  [[nodiscard]] BufferPool& buffer_pool() const noexcept override { return pool_; }
  [[nodiscard]] std::uint32_t max_transfer_bytes() const noexcept override {
    return options_.transport_max_transfer_bytes;
  }
  [[nodiscard]] std::uint32_t unstated_max_transfer_bytes() const noexcept override {
    return options_.transport_unstated_max_transfer_bytes;
  }
  [[nodiscard]] asio::any_io_executor executor() const override { return executor_; }

  [[nodiscard]] const std::vector<FakeTransfer>& transfers() const noexcept { return transfers_; }
  [[nodiscard]] std::vector<std::byte>& disk() noexcept { return disk_; }
  [[nodiscard]] const std::vector<FakeFlush>& flushes() const noexcept { return flushes_; }
  /// Which blocks are mapped (all at first; a WRITE maps what it writes). GET LBA STATUS answers
  /// mapped (0h) or deallocated (1h) from it.
  [[nodiscard]] std::vector<bool>& mapped() noexcept { return mapped_; }
  /// GET LBA STATUS commands answered (or refused).
  [[nodiscard]] std::size_t lba_status_commands() const noexcept { return lba_status_commands_; }

 private:
  static scsi::ScsiResult check(scsi::SenseData sense) {
    return {.status = scsi::Status::check_condition, .sense = sense};
  }
  static scsi::ScsiResult reply(std::span<const std::byte> data, std::span<std::byte> in) {
    const std::size_t n = std::min(data.size(), in.size());
    std::memcpy(in.data(), data.data(), n);
    return {.residual_bytes = static_cast<std::uint32_t>(in.size() - n)};
  }

  scsi::ScsiResult run(const initiator::CommandRequest& r) {
    const auto* c = r.cdb.bytes.data();
    const std::uint8_t op = load_u8(c);
    const auto invalid_opcode = check(scsi::SenseData::invalid_field_in_cdb(0));
    switch (op) {
      case 0x00:  // TEST UNIT READY
        return {};
      case 0x12: {  // INQUIRY
        if ((load_u8(c + 1) & 1) == 0) {
          scsi::StandardInquiry s{.vendor = "FAKE", .product = "LUN", .revision = "1"};
          return reply(scsi::encode_standard_inquiry(s), r.data_in);
        }
        const std::uint8_t page = load_u8(c + 2);
        if (page == 0x00) {
          std::vector<std::byte> pages{std::byte{0x00}};
          if (options_.maximum_transfer_length_blocks) pages.push_back(std::byte{0xb0});
          return reply(scsi::encode_vpd_page(0x00, pages), r.data_in);
        }
        if (page == 0xb0 && options_.maximum_transfer_length_blocks) {
          scsi::BlockLimits b{.maximum_transfer_length = *options_.maximum_transfer_length_blocks};
          return reply(scsi::encode_block_limits(b), r.data_in);
        }
        return check(scsi::SenseData::invalid_field_in_cdb(2));
      }
      case 0x9e: {  // SERVICE ACTION IN (16)
        if ((load_u8(c + 1) & 0x1f) == 0x12) return get_lba_status(load_be64(c + 2), r.data_in);
        // READ CAPACITY (16)
        std::array<std::byte, scsi::read_capacity16_size_bytes> d{};
        scsi::encode_read_capacity16({.last_lba = options_.blocks - 1,
                                      .block_length_bytes = options_.block_size_bytes,
                                      .lbpme = options_.thin,
                                      .lbprz = options_.unmapped_reads_zero},
                                     d);
        return reply(d, r.data_in);
      }
      case 0x1a:
      case 0x5a: {  // MODE SENSE (6)/(10): header only (DBD), then whatever page bytes fit
        const bool ten = op == 0x5a;
        if (!options_.dpofua || (ten && options_.mode_sense10_unsupported)) return invalid_opcode;
        std::vector<std::byte> d(ten ? 8 : 4);
        const std::uint8_t device_specific = *options_.dpofua ? 0x10 : 0x00;
        store_u8(d.data() + (ten ? 3 : 2), device_specific);
        if (ten) store_be16(d.data(), static_cast<std::uint16_t>(d.size() - 2));
        else store_u8(d.data(), static_cast<std::uint8_t>(d.size() - 1));
        return reply(d, r.data_in);
      }
      case 0x28:
      case 0x2a:
      case 0x88:
      case 0x8a: {
        const bool sixteen = op >= 0x88;
        const bool write = op == 0x2a || op == 0x8a;
        FakeTransfer t{.write = write,
                       .lba = sixteen ? load_be64(c + 2) : load_be32(c + 2),
                       .blocks = sixteen ? load_be32(c + 10) : load_be16(c + 7),
                       .fua = (load_u8(c + 1) & 0x08) != 0,
                       .bytes = write ? r.data_out.size() : r.data_in.size()};
        transfers_.push_back(t);
        // SBC-4 §5.43: FUA on a unit without DPOFUA support; LIO answers INVALID FIELD IN CDB.
        if (t.fua && write && options_.reject_fua_without_dpofua && !(options_.dpofua && *options_.dpofua))
          return check(scsi::SenseData::invalid_field_in_cdb(1, 3));
        const std::size_t offset = t.lba * options_.block_size_bytes;
        const std::size_t n = std::size_t{t.blocks} * options_.block_size_bytes;
        if (t.bytes != n || offset + n > disk_.size()) return check(scsi::SenseData::invalid_field_in_cdb(2));
        if (write) {
          std::memcpy(disk_.data() + offset, r.data_out.data(), n);
          std::fill_n(mapped_.begin() + static_cast<std::ptrdiff_t>(t.lba), t.blocks, true);
        }
        else std::memcpy(r.data_in.data(), disk_.data() + offset, n);
        return {};
      }
      case 0x35:    // SYNCHRONIZE CACHE (10)
      case 0x91: {  // SYNCHRONIZE CACHE (16)
        const bool sixteen = op == 0x91;
        flushes_.push_back({.opcode = op,
                            .lba = sixteen ? load_be64(c + 2) : load_be32(c + 2),
                            .blocks = sixteen ? load_be32(c + 10) : load_be16(c + 7)});
        return {};
      }
      default:
        return invalid_opcode;
    }
  }

  // SBC-4 §5.8: an 8-byte header (PARAMETER DATA LENGTH = n - 3), then 16-byte descriptors from `lba`.
  scsi::ScsiResult get_lba_status(std::uint64_t lba, std::span<std::byte> in) {
    ++lba_status_commands_;
    if (!options_.thin || options_.reject_get_lba_status) return check(scsi::SenseData::invalid_field_in_cdb(1));
    if (lba >= options_.blocks) return check(scsi::SenseData::invalid_field_in_cdb(2));
    std::vector<std::byte> d(8);
    while (lba < options_.blocks && (d.size() - 8) / 16 < options_.lba_status_max_descriptors) {
      std::uint64_t end = lba;
      while (end < options_.blocks && mapped_[end] == mapped_[lba] && end - lba < options_.lba_status_max_run_blocks) ++end;
      std::array<std::byte, 16> one{};
      store_be64(one.data(), lba);
      store_be32(one.data() + 8, static_cast<std::uint32_t>(end - lba));
      store_u8(one.data() + 12, mapped_[lba] ? 0x0 : 0x1);
      d.insert(d.end(), one.begin(), one.end());
      lba = end;
    }
    store_be32(d.data(), static_cast<std::uint32_t>(d.size() - 4));
    return reply(d, in);
  }

  asio::any_io_executor executor_;
  FakeLunOptions options_;
  mutable HeapBufferPool pool_;
  std::vector<std::byte> disk_;
  std::vector<FakeTransfer> transfers_;
  std::vector<FakeFlush> flushes_;
  std::vector<bool> mapped_;
  std::size_t lba_status_commands_ = 0;
};

/// Runs `aw` on `io` until nothing is left to run, and returns its result (the tests' way to call
/// a coroutine of a front end over this fake, which answers every command at once).
template <class T>
T run_sync(asio::io_context& io, Awaitable<T> aw) {
  std::optional<T> out;
  asio::co_spawn(io, [&]() -> Awaitable<void> { out.emplace(co_await std::move(aw)); }, asio::detached);
  io.run();
  io.restart();
  return std::move(*out);
}

}  // namespace iserkit::test

// LogicalUnit: derives the reported identity (serial number, SPC-5 §7.7.15; NAA IEEE Registered
// Extended designator, §7.7.6.6; both from the unit's UUID, docs/lu-identity.md) and limits
// (SBC-4 §6.6.4) of one logical unit from its backend and options.
#include "iserkit/target/logical_unit.hpp"

#include <cassert>
#include <utility>

namespace iserkit::target {

LogicalUnit::LogicalUnit(std::shared_ptr<BlockBackend> backend, LogicalUnitOptions options)
    : backend_(std::move(backend)), options_(std::move(options)) {
  assert(backend_);
  const auto& caps = backend_->capabilities();
  block_size_ = caps.block_size_bytes;
  block_count_.store(backend_->size_bytes() / block_size_, std::memory_order_release);
  read_only_ = options_.read_only || caps.read_only;
  thin_ = caps.can_discard && !read_only_;
  // docs/lu-identity.md: every designator of the unit derives from one name, its UUID; a
  // configured serial or NAA designator replaces the derived one.
  const auto& id = options_.identity;
  uuid_ = id.uuid ? *id.uuid : name_based_uuid("unit:" + id.vendor + "\n" + id.product + "\n" + id.serial);
  if (id.naa.empty()) {
    const auto naa = naa_from_uuid(uuid_);
    naa_.assign(naa.begin(), naa.end());
  } else {
    naa_ = id.naa;
  }
  serial_ = id.serial.empty() ? unit_serial_from_uuid(uuid_) : id.serial;
  std::uint32_t max_blocks = options_.max_transfer_bytes / block_size_;
  if (caps.max_io_bytes != 0) {
    const std::uint32_t backend_max = caps.max_io_bytes / block_size_;
    if (max_blocks == 0 || backend_max < max_blocks) max_blocks = backend_max;
  }
  max_transfer_blocks_ = max_blocks;
}

bool LogicalUnit::refresh_capacity() noexcept {
  const std::uint64_t now = backend_->size_bytes() / block_size_;
  if (block_count_.load(std::memory_order_acquire) == now) return false;
  block_count_.store(now, std::memory_order_release);
  return true;
}

LogicalUnitStats& unit_stats(const LogicalUnit& unit) noexcept { return unit.stats(); }

}  // namespace iserkit::target

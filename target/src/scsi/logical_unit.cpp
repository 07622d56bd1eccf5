// LogicalUnit: derives the reported identity (serial number, NAA locally assigned designator,
// SPC-5 §7.7.6.6.4) and limits (SBC-4 §6.6.4) of one logical unit from its backend and options.
#include "iserkit/target/logical_unit.hpp"

#include <cassert>
#include <cstdio>
#include <string_view>
#include <utility>

namespace iserkit::target {
namespace {

// FNV-1a, 64 bits: a stable, dependency-free hash for deriving identifiers.
std::uint64_t fnv1a(std::string_view s, std::uint64_t h = 0xcbf29ce484222325ull) noexcept {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

LogicalUnit::LogicalUnit(std::shared_ptr<BlockBackend> backend, LogicalUnitOptions options)
    : backend_(std::move(backend)), options_(std::move(options)) {
  assert(backend_);
  const auto& caps = backend_->capabilities();
  block_size_ = caps.block_size_bytes;
  block_count_.store(backend_->size_bytes() / block_size_, std::memory_order_release);
  read_only_ = options_.read_only || caps.read_only;
  thin_ = caps.can_discard && !read_only_;
  const auto& id = options_.identity;
  if (id.naa_locally_assigned) {
    naa_ = *id.naa_locally_assigned;
  } else {
    naa_ = fnv1a(id.serial, fnv1a(id.product, fnv1a(id.vendor)));
  }
  // SPC-5 §7.7.6.6.4: NAA field 3h (locally assigned) in the top nibble, 60 bits of value.
  naa_ = (naa_ & 0x0fffffffffffffffull) | 0x3000000000000000ull;
  if (id.serial.empty()) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(naa_));
    serial_ = buf;
  } else {
    serial_ = id.serial;
  }
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

}  // namespace iserkit::target

// The Initiator Task Tag table (RFC 7143 §11.2.1.8): maps ITTs to tasks in flight. Fixed-size
// slot array with a free list (no allocation per command); the high 16 bits of an ITT are a
// generation so a late PDU for a retired ITT never finds a new task in the same slot.
#pragma once

#include <cstdint>
#include <vector>

#include "iserkit/iscsi/pdu.hpp"

namespace iserkit::initiator {

template <class Task>
class IttTable {
 public:
  /// `capacity` slots, 1..65535.
  explicit IttTable(std::uint32_t capacity) : slots_(capacity) {
    free_.reserve(capacity);
    for (std::uint32_t i = capacity; i > 0; --i) free_.push_back(i - 1);
  }

  /// Registers `task`; returns its ITT, or reserved_itt when the table is full.
  iscsi::Itt insert(Task* task) noexcept {
    if (free_.empty()) return iscsi::reserved_itt;
    const std::uint32_t index = free_.back();
    free_.pop_back();
    Slot& s = slots_[index];
    ++s.generation;
    // RFC 7143 §11.2.1.8: 0xffffffff is reserved; generation 0xffff with index 0xffff would make it.
    if (s.generation == 0xffff && index == 0xffff) s.generation = 0;
    s.task = task;
    ++size_;
    return iscsi::Itt{(std::uint32_t{s.generation} << 16) | index};
  }

  /// The task for `itt`, or nullptr when it is unknown or retired.
  [[nodiscard]] Task* find(iscsi::Itt itt) const noexcept {
    const std::uint32_t v = iscsi::to_u32(itt);
    const std::uint32_t index = v & 0xffff;
    if (index >= slots_.size()) return nullptr;
    const Slot& s = slots_[index];
    return (s.task != nullptr && s.generation == (v >> 16)) ? s.task : nullptr;
  }

  /// Retires `itt` (no-op when unknown).
  void erase(iscsi::Itt itt) noexcept {
    const std::uint32_t v = iscsi::to_u32(itt);
    const std::uint32_t index = v & 0xffff;
    if (index >= slots_.size()) return;
    Slot& s = slots_[index];
    if (s.task == nullptr || s.generation != (v >> 16)) return;
    s.task = nullptr;
    free_.push_back(index);
    --size_;
  }

  /// Calls f(Task*) for every task in flight (f may not insert or erase).
  template <class F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_)
      if (s.task != nullptr) f(s.task);
  }

  [[nodiscard]] std::uint32_t size() const noexcept { return size_; }
  [[nodiscard]] bool full() const noexcept { return free_.empty(); }

 private:
  struct Slot {
    Task* task = nullptr;
    std::uint16_t generation = 0;
  };
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_;
  std::uint32_t size_ = 0;
};

}  // namespace iserkit::initiator

// Fifo: a first-in first-out queue on one ring of slots that grows and never shrinks, so a queue
// whose length moves up and down in steady state allocates nothing once it has reached its high
// water mark. std::deque frees and allocates a node each time its front or back crosses a node
// boundary, and libstdc++'s nodes are 512 bytes: a deque of elements larger than that (a PDU
// with its BHS and buffer list, an NBD reply, an engine action) allocates once per push_back.
// Measured: one heap allocation per request at 4 KiB QD1 in iserkit-nbd (docs/performance.md,
// "Allocations per request"). Storage is Boost's circular_buffer; growth doubles it. Layer 0.
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>

#include <boost/circular_buffer.hpp>

namespace iserkit {

/// FIFO queue of T on a growing ring (see the file comment). Not thread-safe. Iteration and
/// operator[] go from the front (the oldest element) to the back.
template <typename T>
class Fifo {
 public:
  using value_type = T;

  /// Appends `value` at the back; doubles the ring (moving the elements) when it is full.
  /// Throws std::bad_alloc when the ring cannot grow.
  void push_back(T value) {
    if (ring_.full()) ring_.set_capacity(std::max<std::size_t>(initial_capacity, 2 * ring_.capacity()));
    ring_.push_back(std::move(value));
  }
  /// Removes the front element (the queue must not be empty).
  void pop_front() { ring_.pop_front(); }
  /// The oldest element (the queue must not be empty).
  [[nodiscard]] T& front() { return ring_.front(); }
  [[nodiscard]] const T& front() const { return ring_.front(); }
  /// The newest element (the queue must not be empty).
  [[nodiscard]] T& back() { return ring_.back(); }
  [[nodiscard]] const T& back() const { return ring_.back(); }
  /// The i-th element from the front (i < size()).
  [[nodiscard]] T& operator[](std::size_t i) { return ring_[i]; }
  [[nodiscard]] const T& operator[](std::size_t i) const { return ring_[i]; }
  [[nodiscard]] bool empty() const noexcept { return ring_.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return ring_.size(); }
  /// Slots allocated (the high water mark, rounded up to a power of two times initial_capacity).
  [[nodiscard]] std::size_t capacity() const noexcept { return ring_.capacity(); }
  /// Destroys every element; keeps the slots.
  void clear() noexcept { ring_.clear(); }

  [[nodiscard]] auto begin() { return ring_.begin(); }
  [[nodiscard]] auto end() { return ring_.end(); }
  [[nodiscard]] auto begin() const { return ring_.begin(); }
  [[nodiscard]] auto end() const { return ring_.end(); }

  /// Slots of the first growth.
  static constexpr std::size_t initial_capacity = 8;

 private:
  boost::circular_buffer<T> ring_;
};

}  // namespace iserkit

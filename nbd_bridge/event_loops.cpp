// The bridge's extra event loops and their sessions' ISIDs (event_loops.hpp).
#include "nbd_bridge/event_loops.hpp"

#include <cassert>
#include <random>

namespace iserkit::nbd {

std::vector<std::array<std::byte, 6>> loop_isids(std::size_t count) {
  assert(count >= 1 && count <= 0xffff);
  std::random_device random;
  const std::uint32_t bc = random();
  // Qualifiers first, first + 1, …: distinct by construction (a random ISID per session could
  // collide). Never zero, as the initiator's own random ISIDs.
  const std::uint16_t first = static_cast<std::uint16_t>(random() | 1u);
  std::vector<std::array<std::byte, 6>> out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    std::uint16_t d = static_cast<std::uint16_t>(first + i);
    if (d == 0) d = static_cast<std::uint16_t>(first + count);  // the one wrap-around value; unused by the others
    std::array<std::byte, 6> isid{};
    isid[0] = std::byte{0x80};  // T = 10b: random; A reserved
    isid[1] = static_cast<std::byte>(bc >> 16);
    isid[2] = static_cast<std::byte>(bc >> 8);
    isid[3] = static_cast<std::byte>(bc);
    isid[4] = static_cast<std::byte>(d >> 8);
    isid[5] = static_cast<std::byte>(d);
    out.push_back(isid);
  }
  return out;
}

EventLoops::EventLoops(std::size_t count) {
  assert(count >= 1);
  for (std::size_t i = 1; i < count; ++i) workers_.push_back(std::make_unique<Worker>());
}

EventLoops::~EventLoops() { shutdown(); }

asio::io_context& EventLoops::io(std::size_t index) noexcept {
  assert(index < size());
  return index == 0 ? main_ : workers_[index - 1]->io;
}

void EventLoops::start() {
  for (auto& w : workers_) {
    if (!w->thread.joinable()) w->thread = std::thread([io = &w->io] { io->run(); });
  }
}

void EventLoops::stop_and_join() {
  for (auto& w : workers_) {
    w->guard.reset();
    w->io.stop();
  }
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
}

void EventLoops::shutdown() {
  stop_and_join();
  main_.stop();
  // Phase 1 on every loop before phase 2 (destruction) on any: a destroyed handler of one loop
  // may close a socket or cancel a timer whose service belongs to another.
  main_.destroy_handlers();
  for (auto& w : workers_) w->io.destroy_handlers();
}

}  // namespace iserkit::nbd

// StagTable: the lifecycle of per-command memory windows (see iser/stag_table.hpp).
#include "iserkit/iser/stag_table.hpp"

#include <utility>

namespace iserkit::iser {

StagTable::StagTable(std::vector<std::uint32_t> rkeys) {
  slots_.reserve(rkeys.size());
  free_.reserve(rkeys.size());
  for (auto rkey : rkeys) slots_.push_back({.rkey = rkey});
  for (std::size_t i = slots_.size(); i > 0; --i) free_.push_back(static_cast<std::uint32_t>(i - 1));
}

std::optional<StagTable::Bound> StagTable::acquire() noexcept {
  if (free_.empty()) return std::nullopt;
  const std::uint32_t slot = free_.back();
  free_.pop_back();
  Slot& s = slots_[slot];
  s.rkey = next_stag(s.rkey);
  s.state = State::bound;
  s.bind_pending = true;
  s.release_waiting = false;
  return Bound{.slot = slot, .rkey = s.rkey};
}

StagTable::Release StagTable::release(std::uint32_t slot) noexcept {
  if (slot >= slots_.size()) return Release::ignored;
  Slot& s = slots_[slot];
  if (s.bind_pending && (s.state == State::bound || s.state == State::peer_invalidated)) {
    if (s.release_waiting) return Release::ignored;  // a double release
    s.release_waiting = true;
    return Release::deferred;
  }
  switch (s.state) {
    case State::bound:
      s.state = State::invalidating;
      return Release::invalidate;
    case State::peer_invalidated:
      s.state = State::free;
      free_.push_back(slot);
      return Release::reusable;
    case State::free:
    case State::invalidating:
      break;
  }
  return Release::ignored;
}

StagTable::Release StagTable::bind_completed(std::uint32_t slot, bool ok) noexcept {
  if (slot >= slots_.size() || !slots_[slot].bind_pending) return Release::ignored;
  Slot& s = slots_[slot];
  s.bind_pending = false;
  const bool waiting = std::exchange(s.release_waiting, false);
  if (!ok) {
    // Never bound: nothing to invalidate, and not free either (the connection is failing).
    s.state = State::invalidating;
    return Release::ignored;
  }
  return waiting ? release(slot) : Release::ignored;
}

void StagTable::invalidated(std::uint32_t slot) noexcept {
  if (slot >= slots_.size() || slots_[slot].state != State::invalidating) return;
  slots_[slot].state = State::free;
  free_.push_back(slot);
}

bool StagTable::remote_invalidated(std::uint32_t rkey) noexcept {
  const auto slot = find(rkey);
  if (!slot || slots_[*slot].state != State::bound) return false;
  slots_[*slot].state = State::peer_invalidated;
  return true;
}

std::optional<std::uint32_t> StagTable::find(std::uint32_t rkey) const noexcept {
  // Windows are few (one per command in flight); rkeys carry their index in the upper 24 bits on
  // most devices, but that is not a rule, so this searches.
  for (std::size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].rkey == rkey) return static_cast<std::uint32_t>(i);
  return std::nullopt;
}

}  // namespace iserkit::iser

// PayloadLedger (payload_ledger.hpp): the two-level payload budget of one connection.
#include "payload_ledger.hpp"

#include <utility>

namespace iserkit::target {

bool PayloadLedger::request(iscsi::Itt itt, std::uint64_t bytes) {
  const std::uint64_t id = next_id_++;
  Holds::iterator it;
  if (spare_holds_.empty()) {
    it = holds_.emplace(id, Hold{.itt = itt, .bytes = bytes}).first;
  } else {
    auto node = std::move(spare_holds_.back());
    spare_holds_.pop_back();
    node.key() = id;
    node.mapped() = Hold{.itt = itt, .bytes = bytes};
    it = holds_.insert(std::move(node)).position;
  }
  ids_of(iscsi::to_u32(itt)).push_back(id);
  if (!connection_.request(id, bytes)) {
    it->second.state = Hold::State::waiting_connection;
    return false;
  }
  ++connection_holders_;
  return ask_shared(it);
}

bool PayloadLedger::ask_shared(Holds::iterator it) {
  Hold& hold = it->second;
  if (shared_ == nullptr) {
    set_granted(hold);
    return true;
  }
  hold.state = Hold::State::waiting_shared;
  const SharedAsk ask = shared_->request(it->first, hold.bytes);
  hold.shared_id = ask.id;
  if (!ask.granted) return false;
  set_granted(hold);
  return true;
}

void PayloadLedger::set_granted(Hold& hold) noexcept {
  hold.state = Hold::State::granted;
  granted_bytes_ += hold.bytes;
}

std::optional<PayloadLedger::Released> PayloadLedger::release(iscsi::Itt itt, std::vector<iscsi::Itt>& granted) {
  auto by_itt = ids_by_itt_.find(iscsi::to_u32(itt));
  if (by_itt == ids_by_itt_.end() || by_itt->second.empty()) return std::nullopt;
  const std::uint64_t id = by_itt->second.front();
  by_itt->second.erase(by_itt->second.begin());
  if (by_itt->second.empty()) {
    auto node = ids_by_itt_.extract(by_itt);  // kept with its vector's capacity
    if (spare_ids_.size() < max_spare_nodes) spare_ids_.push_back(std::move(node));
  }
  auto it = holds_.find(id);
  if (it == holds_.end()) return std::nullopt;
  Hold& hold = it->second;
  const Released out{.bytes = hold.bytes, .granted = hold.state == Hold::State::granted};
  std::vector<std::uint64_t> promoted;  // granted at the connection level now (no allocation when none)
  bool erase = true;
  switch (hold.state) {
    case Hold::State::abandoned:  // not listed under its ITT any more: not reached
      return out;
    case Hold::State::waiting_connection:
      connection_.cancel(id, promoted);
      break;
    case Hold::State::waiting_shared:
      // Held at the connection level already. A shared grant already on its way is given back
      // when it arrives (on_shared_grant()).
      if (!shared_->cancel(hold.shared_id)) {
        hold.state = Hold::State::abandoned;
        erase = false;
      }
      --connection_holders_;
      promoted = connection_.release(hold.bytes);
      break;
    case Hold::State::granted:
      if (shared_ != nullptr) shared_->release(hold.bytes);
      granted_bytes_ -= hold.bytes;
      --connection_holders_;
      promoted = connection_.release(hold.bytes);
      break;
  }
  if (erase) erase_hold(it);
  for (const std::uint64_t next : promoted) {
    auto waiting = holds_.find(next);
    if (waiting == holds_.end() || waiting->second.state != Hold::State::waiting_connection) continue;
    ++connection_holders_;
    if (ask_shared(waiting)) granted.push_back(waiting->second.itt);
  }
  return out;
}

std::optional<iscsi::Itt> PayloadLedger::on_shared_grant(std::uint64_t hold) {
  auto it = holds_.find(hold);
  if (it == holds_.end()) return std::nullopt;
  switch (it->second.state) {
    case Hold::State::waiting_shared:
      set_granted(it->second);
      return it->second.itt;
    case Hold::State::abandoned:
      shared_->release(it->second.bytes);  // the task ended while the grant was on its way
      erase_hold(it);
      return std::nullopt;
    case Hold::State::waiting_connection:
    case Hold::State::granted:
      break;
  }
  return std::nullopt;
}

std::vector<std::uint64_t>& PayloadLedger::ids_of(std::uint32_t itt) {
  if (auto it = ids_by_itt_.find(itt); it != ids_by_itt_.end()) return it->second;
  if (spare_ids_.empty()) return ids_by_itt_[itt];
  auto node = std::move(spare_ids_.back());
  spare_ids_.pop_back();
  node.key() = itt;
  node.mapped().clear();
  return ids_by_itt_.insert(std::move(node)).position->second;
}

void PayloadLedger::erase_hold(Holds::iterator it) {
  auto node = holds_.extract(it);
  if (spare_holds_.size() < max_spare_nodes) spare_holds_.push_back(std::move(node));
}

}  // namespace iserkit::target

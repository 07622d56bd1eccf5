// TargetRegistry and the SendTargets text answer (RFC 7143 Appendix C, §13.3, §13.8, §13.9).
#include "target_node.hpp"

#include <algorithm>
#include <cctype>

#include "iserkit/common/errors.hpp"

namespace iserkit::target {

bool same_iscsi_name(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

bool TargetNode::allows(std::string_view initiator_name) const noexcept {
  if (allowed_initiators.empty()) return true;
  return std::any_of(allowed_initiators.begin(), allowed_initiators.end(),
                     [&](const std::string& n) { return same_iscsi_name(n, initiator_name); });
}

Result<void> TargetRegistry::add(std::shared_ptr<TargetNode> node) {
  if (!node || node->name.empty() || !node->dispatcher) return fail(errc::invalid_argument);
  std::lock_guard lock(mutex_);
  for (const auto& n : *nodes_)
    if (same_iscsi_name(n->name, node->name)) return fail(errc::invalid_argument);
  auto next = std::make_shared<NodeList>(*nodes_);
  join_copy_domain(*node);
  next->push_back(std::move(node));
  nodes_ = std::move(next);
  return {};
}

void TargetRegistry::join_copy_domain(TargetNode& node) {
  // EXTENDED COPY between targets of this process: only within a tenant, and only into targets
  // the initiator is logged in to (CopyDomain).
  copy_domain_->set(node.name, node.tenant, node.dispatcher);
  node.dispatcher->join_copy_domain(copy_domain_, node.tenant);
}

Result<void> TargetRegistry::replace(std::shared_ptr<TargetNode> node) {
  if (!node || node->name.empty() || !node->dispatcher) return fail(errc::invalid_argument);
  std::lock_guard lock(mutex_);
  auto next = std::make_shared<NodeList>(*nodes_);
  const auto it =
      std::find_if(next->begin(), next->end(), [&](const auto& n) { return same_iscsi_name(n->name, node->name); });
  if (it == next->end()) return fail(errc::invalid_argument);
  join_copy_domain(*node);
  *it = std::move(node);
  nodes_ = std::move(next);
  return {};
}

std::shared_ptr<TargetNode> TargetRegistry::remove(std::string_view name) {
  std::lock_guard lock(mutex_);
  auto next = std::make_shared<NodeList>(*nodes_);
  const auto it = std::find_if(next->begin(), next->end(), [&](const auto& n) { return same_iscsi_name(n->name, name); });
  if (it == next->end()) return nullptr;
  auto removed = *it;
  copy_domain_->erase(removed->name);
  next->erase(it);
  nodes_ = std::move(next);
  return removed;
}

std::shared_ptr<TargetNode> TargetRegistry::find(std::string_view name) const {
  for (const auto& n : *nodes())
    if (same_iscsi_name(n->name, name)) return n;
  return nullptr;
}

std::shared_ptr<const TargetRegistry::NodeList> TargetRegistry::nodes() const {
  std::lock_guard lock(mutex_);
  return nodes_;
}

std::uint16_t TargetRegistry::allocate_tsih() const noexcept {
  // RFC 7143 §11.12.6: TSIH 0 is reserved for "new session" in a Login Request.
  std::uint16_t v = next_tsih_.fetch_add(1, std::memory_order_relaxed);
  while (v == 0) v = next_tsih_.fetch_add(1, std::memory_order_relaxed);
  return v;
}

iscsi::TextPairs send_targets(const TargetRegistry& registry, std::string_view value, bool discovery_session,
                              const TargetNode* session_target, std::string_view initiator_name,
                              std::string_view local_address, std::uint16_t local_portal_group,
                              std::string_view tenant) {
  iscsi::TextPairs out;
  const auto& addresses = registry.portal_addresses();
  auto list = [&](const TargetNode& node) {
    // Only targets of this portal's tenant, and only targets this initiator may log in to (its
    // ACL admits the session's InitiatorName).
    if (node.tenant != tenant || !node.allows(initiator_name)) return;
    out.push_back({"TargetName", node.name});
    if (!local_address.empty())
      out.push_back({"TargetAddress", std::string(local_address) + "," + std::to_string(local_portal_group)});
    for (std::size_t i = 0; i < addresses.size(); ++i)
      if (addresses[i] != local_address && registry.portal_tenant(i) == tenant)
        out.push_back({"TargetAddress", addresses[i] + "," + std::to_string(registry.portal_tag(i))});
  };
  if (!discovery_session) {
    // RFC 7143 Appendix C: in a normal session SendTargets reports only the session's target.
    if (session_target != nullptr &&
        (value.empty() || value == "All" || same_iscsi_name(value, session_target->name)))
      list(*session_target);
    return out;
  }
  if (value == "All") {
    for (const auto& n : *registry.nodes()) list(*n);
  } else if (auto n = registry.find(value)) {
    list(*n);
  }
  return out;
}

}  // namespace iserkit::target

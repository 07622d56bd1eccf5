// TargetNode and TargetRegistry: the iSCSI target nodes this process serves (RFC 7143 §4.2.7 iSCSI
// names, §4.2.6 portal groups) and the SendTargets answer built from them (RFC 7143 Appendix C,
// §13.3 SendTargets, §13.8 TargetAddress). Sans-I/O.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>
#include <utility>

#include "iserkit/iscsi/text.hpp"
#include "iserkit/target/config.hpp"
#include "iserkit/target/scsi_dispatcher.hpp"
#include "login_throttle.hpp"
#include "session_table.hpp"
#include "target_stats.hpp"

namespace iserkit::target {

/// One iSCSI target node: a name, an alias and the SCSI device server with its LUNs.
struct TargetNode {
  std::string name;   ///< iSCSI qualified name (iqn.…), compared case-insensitively per RFC 3722 stringprep
  std::string alias;  ///< TargetAlias (RFC 7143 §13.6); may be empty
  std::shared_ptr<ScsiDispatcher> dispatcher;  ///< never null
  /// Initiator names allowed to log in (case-insensitive); empty = any (RFC 7143 §11.13.5 0x0202).
  std::vector<std::string> allowed_initiators;
  /// CHAP required to log in to this node when auth.required() (RFC 7143 §12.1.3).
  AuthConfig auth;
  /// The tenant whose portals serve this node (TargetDefinition::tenant); empty = the portals of
  /// no tenant.
  std::string tenant;

  /// True when `initiator_name` may log in (the ACL is empty or lists it).
  [[nodiscard]] bool allows(std::string_view initiator_name) const noexcept;
};

/// The set of target nodes and the portal group they share. Nodes may be added and removed while
/// connections use the registry (a rescan of --export-rbd): add(), remove(), find() and nodes()
/// are thread-safe, and nodes() is a snapshot. A removed node lives on in the sessions logged in
/// to it; only new logins and SendTargets stop seeing it. Portal addresses and discovery auth are
/// set before serving; the TSIH counter, the login throttle and the session table are thread-safe.
class TargetRegistry {
 public:
  using NodeList = std::vector<std::shared_ptr<TargetNode>>;

  /// Adds a node. Errors: errc::invalid_argument for an empty name, a null dispatcher or a duplicate name.
  Result<void> add(std::shared_ptr<TargetNode> node);
  /// Puts `node` in the place of the node with the same name (case-insensitive), in one step: a
  /// login at that moment finds either the old or the new node, never none (a configuration
  /// reload changing a target's ACL or CHAP users). Errors: errc::invalid_argument for an empty
  /// name or a null dispatcher, or when no node has that name.
  Result<void> replace(std::shared_ptr<TargetNode> node);
  /// Removes the node named `name` (case-insensitive) and returns it, or nullptr when there is none.
  std::shared_ptr<TargetNode> remove(std::string_view name);

  /// The node named `name` (case-insensitive), or nullptr.
  [[nodiscard]] std::shared_ptr<TargetNode> find(std::string_view name) const;
  /// The nodes as they are now (never null; later add()/remove() do not change this snapshot).
  [[nodiscard]] std::shared_ptr<const NodeList> nodes() const;

  /// The portal addresses ("ip:port", IPv6 in brackets) advertised besides the connection's own.
  /// `tags`: the portal group tag of each address (RFC 7143 §13.9), in the same order; missing = 1.
  /// `tenants`: the tenant of each address (empty string = none), in the same order; missing =
  /// none. SendTargets on a tenant's portal lists only that tenant's addresses.
  void set_portal_addresses(std::vector<std::string> addresses, std::vector<std::uint16_t> tags = {},
                            std::vector<std::string> tenants = {}) {
    portal_addresses_ = std::move(addresses);
    portal_tags_ = std::move(tags);
    portal_tags_.resize(portal_addresses_.size(), 1);
    portal_tenants_ = std::move(tenants);
    portal_tenants_.resize(portal_addresses_.size());
  }
  [[nodiscard]] const std::vector<std::string>& portal_addresses() const noexcept { return portal_addresses_; }
  /// The portal group tag of portal_addresses()[i].
  [[nodiscard]] std::uint16_t portal_tag(std::size_t i) const noexcept { return portal_tags_.at(i); }
  /// The tenant of portal_addresses()[i] (empty: none).
  [[nodiscard]] const std::string& portal_tenant(std::size_t i) const noexcept { return portal_tenants_.at(i); }

  /// Authentication of discovery sessions (SessionType=Discovery).
  void set_discovery_auth(AuthConfig auth) { discovery_auth_ = std::move(auth); }
  [[nodiscard]] const AuthConfig& discovery_auth() const noexcept { return discovery_auth_; }

  /// A fresh non-zero TSIH (RFC 7143 §11.12.6). Thread-safe.
  std::uint16_t allocate_tsih() const noexcept;

  /// Failed logins counted per source address on the portals of `tenant` (empty: the portals of
  /// no tenant, or a tenant without a table of its own). Each tenant has its own table
  /// (add_tenant_throttle), so one tenant's failures never block another tenant's initiators —
  /// tenants' overlays may use the same addresses — nor push their entries out. Thread-safe.
  [[nodiscard]] LoginThrottle& login_throttle(std::string_view tenant = {}) const noexcept {
    if (!tenant.empty())
      for (const auto& [name, throttle] : tenant_throttles_)
        if (name == tenant) return *throttle;
    return *login_throttle_;
  }
  /// Gives tenant `name` a login throttle of its own with `options` (at setup, before any login:
  /// the list is not guarded).
  void add_tenant_throttle(std::string name, LoginThrottleOptions options) {
    tenant_throttles_.emplace_back(std::move(name), std::make_shared<LoginThrottle>(options));
  }

  /// The live normal sessions by InitiatorName + ISID + target, for session reinstatement
  /// (RFC 7143 §6.3.5; session_table.hpp). Thread-safe; shared by every connection.
  [[nodiscard]] SessionTable& sessions() const noexcept { return *sessions_; }

  /// The target-wide counters (target_stats.hpp: relaxed atomics; any thread).
  [[nodiscard]] TargetStats& stats() const noexcept { return *stats_; }

 private:
  void join_copy_domain(TargetNode& node);  // under mutex_

  mutable std::mutex mutex_;  // guards nodes_ (the pointer; each list is immutable once published)
  std::shared_ptr<CopyDomain> copy_domain_ = std::make_shared<CopyDomain>();  // EXTENDED COPY between nodes
  std::shared_ptr<const NodeList> nodes_ = std::make_shared<const NodeList>();
  std::vector<std::string> portal_addresses_;
  std::vector<std::uint16_t> portal_tags_;
  std::vector<std::string> portal_tenants_;
  AuthConfig discovery_auth_;
  mutable std::atomic<std::uint16_t> next_tsih_{1};
  std::shared_ptr<LoginThrottle> login_throttle_ = std::make_shared<LoginThrottle>();
  std::vector<std::pair<std::string, std::shared_ptr<LoginThrottle>>> tenant_throttles_;
  std::shared_ptr<SessionTable> sessions_ = std::make_shared<SessionTable>();
  std::shared_ptr<TargetStats> stats_ = std::make_shared<TargetStats>();
};

/// Builds the answer to SendTargets=`value` (RFC 7143 Appendix C): "All" lists every node (only
/// allowed in a discovery session), an iSCSI name lists that node, an empty value lists the
/// session's own target (`session_target`, normal sessions). In a normal session only the
/// session's own target is ever listed. Only nodes whose ACL admits `initiator_name` (the
/// InitiatorName of the asking session, TargetNode::allows) are listed: a target the initiator
/// may not log in to is not disclosed. Each node gets TargetName followed by TargetAddress
/// pairs "`address`,tpgt": first `local_address` (the portal the request came in on, in portal
/// group `local_portal_group`), then the registry's other portal addresses with their own tags.
/// `tenant`: the tenant of the portal the request came in on (empty: none); only nodes of that
/// tenant and portal addresses of that tenant are listed (target/README.md "Tenants").
iscsi::TextPairs send_targets(const TargetRegistry& registry, std::string_view value, bool discovery_session,
                              const TargetNode* session_target, std::string_view initiator_name,
                              std::string_view local_address, std::uint16_t local_portal_group = 1,
                              std::string_view tenant = {});

/// Case-insensitive comparison of iSCSI names (RFC 7143 §4.2.7.1: names are case-folded).
bool same_iscsi_name(std::string_view a, std::string_view b) noexcept;

}  // namespace iserkit::target

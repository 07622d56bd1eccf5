// plan_reload(): the difference between the running target configuration and the file read again
// on SIGHUP (target/README.md "Reloading").
#include "reload.hpp"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "target_node.hpp"

namespace iserkit::target {
namespace {

bool same_credential(const std::optional<ChapCredential>& a, const std::optional<ChapCredential>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a || (a->user == b->user && a->secret == b->secret);
}

bool same_auth(const AuthConfig& a, const AuthConfig& b) {
  if (a.users.size() != b.users.size() || a.algorithms != b.algorithms || !same_credential(a.mutual, b.mutual))
    return false;
  for (std::size_t i = 0; i < a.users.size(); ++i)
    if (a.users[i].user != b.users[i].user || a.users[i].secret != b.users[i].secret) return false;
  return true;
}

bool same_listen(const std::vector<ListenAddress>& a, const std::vector<ListenAddress>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const ListenAddress& x, const ListenAddress& y) {
    return x.host == y.host && x.port == y.port && x.portal_group == y.portal_group;
  });
}

bool same_limits(const ConnectionLimits& a, const ConnectionLimits& b) {
  auto tie = [](const ConnectionLimits& l) {
    return std::tie(l.login_timeout, l.reinstate_timeout, l.idle_interval, l.ping_timeout, l.max_logging_in,
                    l.fd_reserve, l.max_immediate_commands, l.connection_payload_bytes, l.global_payload_bytes,
                    l.pool_idle_bytes, l.shutdown_timeout);
  };
  return tie(a) == tie(b);
}

bool same_throttle(const LoginThrottleOptions& a, const LoginThrottleOptions& b) {
  return std::tie(a.free_failures, a.base_delay, a.max_delay, a.forget_after, a.max_addresses) ==
         std::tie(b.free_failures, b.base_delay, b.max_delay, b.forget_after, b.max_addresses);
}

bool same_tenants(const std::vector<TenantDefinition>& a, const std::vector<TenantDefinition>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name || a[i].netns != b[i].netns || !same_listen(a[i].listen, b[i].listen) ||
        a[i].limits.max_sessions != b[i].limits.max_sessions || a[i].limits.payload_bytes != b[i].limits.payload_bytes ||
        a[i].limits.max_connections != b[i].limits.max_connections ||
        a[i].limits.max_logging_in != b[i].limits.max_logging_in)
      return false;
  return true;
}

const TargetDefinition* find_target(const std::vector<TargetDefinition>& targets, std::string_view name) {
  for (const auto& t : targets)
    if (same_iscsi_name(t.iqn, name)) return &t;
  return nullptr;
}

}  // namespace

bool same_lun_source(const LunSource& a, const LunSource& b) {
  if (a.identity != b.identity) return false;  // another identity is another logical unit
  if (a.memory != b.memory || a.rbd.has_value() != b.rbd.has_value()) return false;
  if (a.memory) return a.size_bytes == b.size_bytes;
  if (a.rbd) return a.rbd->pool == b.rbd->pool && a.rbd->image == b.rbd->image;
  return a.path == b.path;
}

tl::expected<ReloadPlan, ConfigError> plan_reload(const TargetConfig& current, const TargetConfig& next) {
  ReloadPlan plan;
  for (const auto& t : next.targets) {
    const TargetDefinition* old = find_target(current.targets, t.iqn);
    if (old == nullptr) {
      if (!current.luns.empty() && same_iscsi_name(t.iqn, current.iqn))
        return tl::unexpected(ConfigError{fmt::format("target {}: the command line's --lun target has this name", t.iqn)});
      // Tenants (their portals, namespaces and limits) are read at start: a new target may join a
      // running tenant only.
      if (!t.tenant.empty() && std::none_of(current.tenants.begin(), current.tenants.end(),
                                            [&](const TenantDefinition& d) { return d.name == t.tenant; }))
        return tl::unexpected(ConfigError{fmt::format(
            "target {}: tenant {} is not running: a new tenant needs a restart", t.iqn, t.tenant)});
      plan.added.push_back(t);
      continue;
    }
    // Moving a target to another tenant would leave its sessions on the old tenant's network.
    if (t.tenant != old->tenant)
      return tl::unexpected(ConfigError{fmt::format(
          "target {}: tenant changed from \"{}\" to \"{}\": moving a target between tenants needs a restart",
          t.iqn, old->tenant, t.tenant)});
    // LUNs only grow: a removed or replaced LUN would vanish under the sessions using it.
    if (t.luns.size() < old->luns.size())
      return tl::unexpected(ConfigError{fmt::format(
          "target {}: lun {} removed: removing a LUN needs a restart (sessions may be using it)", t.iqn, t.luns.size())});
    for (std::size_t i = 0; i < old->luns.size(); ++i)
      if (!same_lun_source(old->luns[i], t.luns[i]))
        return tl::unexpected(ConfigError{fmt::format("target {}: lun {} changed from {} to {}: changing a LUN needs a "
                                                      "restart (sessions may be using it)",
                                                      t.iqn, i, old->luns[i].display(), t.luns[i].display())});
    ReloadPlan::Changed change{.definition = t, .first_new_lun = old->luns.size()};
    change.access_changed = t.alias != old->alias || t.allowed_initiators != old->allowed_initiators ||
                            !same_auth(t.auth, old->auth);
    if (change.access_changed || change.first_new_lun < t.luns.size()) plan.changed.push_back(std::move(change));
  }
  for (const auto& t : current.targets)
    if (find_target(next.targets, t.iqn) == nullptr) plan.removed.push_back(t.iqn);

  // Everything else is read at start only.
  auto note = [&](bool same, const char* what) {
    if (!same) plan.restart_needed.emplace_back(what);
  };
  note(same_listen(current.listen, next.listen), "listen");
  note(same_tenants(current.tenants, next.tenants), "[[tenants]]");
  note(current.threads == next.threads, "threads");
  note(current.block_size_bytes == next.block_size_bytes, "block_size");
  note(current.read_only == next.read_only, "read_only");
  note(current.ceph_conf == next.ceph_conf && current.ceph_id == next.ceph_id, "ceph_conf/ceph_id");
  note(current.export_rbd == next.export_rbd && current.rbd_rescan_interval == next.rbd_rescan_interval,
       "export_rbd/rbd_rescan_interval");
  note(current.status_socket == next.status_socket, "status_socket");
  note(current.metrics == next.metrics, "metrics");
  note(current.alua_states == next.alua_states, "[alua]");
  note(current.alua_peers == next.alua_peers, "[alua_peers]");
  note(current.alua_lock == next.alua_lock, "alua_lock");
  note(same_auth(current.discovery_auth, next.discovery_auth), "[discovery]");
  note(same_limits(current.limits, next.limits), "[limits]");
  note(same_throttle(current.login_throttle, next.login_throttle), "[login_throttle]");
  note(current.max_recv_data_segment_length == next.max_recv_data_segment_length &&
           current.first_burst_length == next.first_burst_length &&
           current.max_burst_length == next.max_burst_length &&
           current.max_outstanding_r2t == next.max_outstanding_r2t,
       "negotiation limits");
  return plan;
}

}  // namespace iserkit::target

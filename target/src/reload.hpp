// Reloading iserkit-target's configuration file on SIGHUP (target/README.md "Reloading"): which
// targets, LUNs, ACLs and CHAP users change between the running configuration and the file as it
// is now. Sans-I/O: plan_reload() compares two TargetConfigs; TargetServer applies the plan
// (target/src/portal.cpp), opening every new backend before it changes anything, so a reload that
// fails anywhere leaves the running configuration as it was.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "iserkit/target/config.hpp"

namespace iserkit::target {

/// What a reload changes in the targets of the configuration file ([[targets]]).
struct ReloadPlan {
  /// Targets in the new file only: built and registered (new logins and SendTargets see them).
  std::vector<TargetDefinition> added;
  /// Names of targets in the running configuration only: no longer listed by SendTargets, new
  /// logins to them are refused (0x0203, not found); sessions logged in keep them until they end.
  std::vector<std::string> removed;
  /// A target in both, with LUNs appended or its alias, ACL or CHAP settings changed.
  struct Changed {
    TargetDefinition definition;  ///< as the new file has it
    std::size_t first_new_lun = 0;  ///< LUN numbers definition.luns[first_new_lun..] are new
    bool access_changed = false;    ///< alias, allowed_initiators or auth differ
  };
  std::vector<Changed> changed;
  /// Settings outside [[targets]] that differ but are read at start only ("listen", "threads",
  /// "[limits]", …): logged, applied at the next restart.
  std::vector<std::string> restart_needed;

  /// True when the plan changes nothing that the reload can apply.
  [[nodiscard]] bool empty() const noexcept { return added.empty() && removed.empty() && changed.empty(); }
};

/// Compares the running configuration `current` with `next` (the flags' configuration with the
/// file read again, load_config_file()). LUNs may only be appended to a target: a LUN that is
/// removed or whose source changed (another path, size or image) would pull a logical unit away
/// from logged-in sessions, so it is refused (restart for that). A new target named like a
/// command-line target (`current.iqn` with --lun) is refused too.
/// Errors: ConfigError{"target NAME: lun N: ..."} or {"target NAME: ..."} saying what and why.
tl::expected<ReloadPlan, ConfigError> plan_reload(const TargetConfig& current, const TargetConfig& next);

/// True when two LUN sources name the same storage (memory LUN of the same size, the same RBD
/// image, or the same path) with the same configured identity (LuIdentityOverride).
[[nodiscard]] bool same_lun_source(const LunSource& a, const LunSource& b);

}  // namespace iserkit::target

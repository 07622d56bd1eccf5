// Fuzz target: the target's TOML configuration (target/src/config_file.cpp, parse_config_toml;
// the format is in target/README.md), parsed from a string as `iserkit-target --config` would,
// and the size parser (common/cli_values.hpp) and LUN-source parser (target/…/config.hpp) it uses. Input: the file's text.
// Relative paths resolve under a folder that does not exist.
// Invariants: a parse either fails with a message or gives targets that each
// have a name and at least one LUN, and credentials with a user and a 1..255-byte secret.
#include "fuzz_support.hpp"
#include "iserkit/common/cli_values.hpp"
#include "iserkit/target/config.hpp"

using namespace iserkit;
using namespace iserkit::target;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* raw, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(raw), size);
  if (auto bytes = cli::parse_size(text)) FUZZ_CHECK(cli::parse_size(std::to_string(*bytes)).value() == *bytes);
  (void)parse_lun_source(text);

  auto config = parse_config_toml(text, "fuzz.toml", TargetConfig{}, "/nonexistent-iserkit-fuzz");
  if (!config) {
    FUZZ_CHECK(!config.error().message.empty());
    return 0;
  }
  auto check_auth = [](const AuthConfig& auth) {
    for (const auto& c : auth.users) FUZZ_CHECK(!c.user.empty() && !c.secret.empty() && c.secret.size() <= 255);
    if (auth.mutual) FUZZ_CHECK(!auth.mutual->user.empty() && !auth.mutual->secret.empty());
  };
  check_auth(config->discovery_auth);
  for (const auto& t : config->targets) {
    FUZZ_CHECK(!t.iqn.empty());
    FUZZ_CHECK(!t.luns.empty());
    check_auth(t.auth);
  }
  (void)config_warnings(*config);
  return 0;
}

// iserkit-target's TOML configuration file (toml++): portals, targets, LUNs, ACLs of initiator
// names, CHAP credentials and mutual secrets, discovery authentication (RFC 7143 §12.1.3), plus
// secret files and the weak-configuration warnings. Layer 6 (configuration boundary: toml++'s
// exceptions are caught here and become ConfigError). Error messages name keys, never values.
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "iserkit/common/cli_values.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/iscsi/names.hpp"
#include "iserkit/target/config.hpp"

namespace iserkit::target {
namespace {

using Error = tl::unexpected<ConfigError>;

std::string where(std::string_view source, const toml::node& node) {
  const auto& b = node.source().begin;
  if (b.line == 0) return std::string(source);
  return std::string(source) + ":" + std::to_string(b.line) + ":" + std::to_string(b.column);
}

Error error_at(std::string_view source, const toml::node& node, const std::string& what) {
  return Error(ConfigError{where(source, node) + ": " + what});
}

// Rejects keys outside `allowed` (a misspelt "chap_user" must not silently disable CHAP).
std::optional<Error> check_keys(std::string_view source, const toml::table& table, const std::set<std::string>& allowed,
                                std::string_view context) {
  for (auto&& [key, value] : table) {
    if (!allowed.contains(std::string(key.str())))
      return error_at(source, value, "unknown key \"" + std::string(key.str()) + "\" in " + std::string(context));
  }
  return std::nullopt;
}

struct Parser {
  std::string_view source;
  std::filesystem::path base_dir;

  std::filesystem::path resolve(const std::string& p) const {
    std::filesystem::path path(p);
    return path.is_relative() ? base_dir / path : path;
  }

  tl::expected<std::vector<std::string>, ConfigError> strings(const toml::node& node, std::string_view key) const {
    const auto* array = node.as_array();
    if (array == nullptr) return error_at(source, node, std::string(key) + " must be an array of strings");
    std::vector<std::string> out;
    for (const auto& element : *array) {
      auto v = element.value<std::string>();
      if (!v || element.type() != toml::node_type::string)
        return error_at(source, element, std::string(key) + " must be an array of strings");
      out.push_back(*v);
    }
    return out;
  }

  // { user = "...", secret = "..." | secret_file = "..." | secret_env = "..." }
  tl::expected<ChapCredential, ConfigError> credential(const toml::node& node, std::string_view key) const {
    const auto* table = node.as_table();
    if (table == nullptr) return error_at(source, node, std::string(key) + " must be a table {user, secret}");
    if (auto e = check_keys(source, *table, {"user", "secret", "secret_file", "secret_env"}, key)) return *e;
    ChapCredential c;
    auto user = (*table)["user"].value<std::string>();
    if (!user || user->empty()) return error_at(source, node, std::string(key) + ": \"user\" (CHAP_N) is missing");
    if (auto ok = iscsi::check_chap_user(*user); !ok)
      return error_at(source, node, std::string(key) + ": \"user\" (CHAP_N): " + ok.error());
    c.user = *user;
    const int sources = int{table->contains("secret")} + int{table->contains("secret_file")} +
                        int{table->contains("secret_env")};
    if (sources != 1)
      return error_at(source, node,
                      std::string(key) + " user \"" + c.user + "\": give exactly one of secret, secret_file, secret_env");
    if (auto s = (*table)["secret"].value<std::string>()) {
      c.secret = *s;
    } else if (auto f = (*table)["secret_file"].value<std::string>()) {
      auto secret = read_secret_file(resolve(*f));
      if (!secret) return error_at(source, node, std::string(key) + " user \"" + c.user + "\": " + secret.error().message);
      c.secret = std::move(*secret);
    } else if (auto v = (*table)["secret_env"].value<std::string>()) {
      const char* value = std::getenv(v->c_str());
      if (value == nullptr || *value == '\0')
        return error_at(source, node,
                        std::string(key) + " user \"" + c.user + "\": environment variable " + *v + " is not set");
      c.secret = value;
    } else {
      return error_at(source, node, std::string(key) + " user \"" + c.user + "\": the secret must be a string");
    }
    if (c.secret.empty() || c.secret.size() > iscsi::chap_max_secret_bytes)
      return error_at(source, node, std::string(key) + " user \"" + c.user + "\": the secret must be 1..255 bytes");
    return c;
  }

  // chap_users, mutual, chap_algorithms of a [discovery] or [[targets]] table.
  std::optional<Error> auth(const toml::table& table, AuthConfig& out, std::string_view context) const {
    if (const auto* node = table.get("chap_users")) {
      const auto* array = node->as_array();
      if (array == nullptr) return error_at(source, *node, std::string(context) + ".chap_users must be an array of tables");
      for (const auto& element : *array) {
        auto c = credential(element, std::string(context) + ".chap_users");
        if (!c) return Error(c.error());
        out.users.push_back(std::move(*c));
      }
    }
    if (const auto* node = table.get("mutual")) {
      auto c = credential(*node, std::string(context) + ".mutual");
      if (!c) return Error(c.error());
      out.mutual = std::move(*c);
    }
    if (const auto* node = table.get("chap_algorithms")) {
      auto names = strings(*node, "chap_algorithms");
      if (!names) return Error(names.error());
      out.algorithms.clear();
      for (const auto& n : *names) {
        auto a = iscsi::parse_chap_algorithm(n);
        if (!a) return error_at(source, *node, "chap_algorithms: unknown algorithm \"" + n + "\" (MD5, SHA-1, SHA-256, SHA3-256)");
        out.algorithms.push_back(*a);
      }
      if (out.algorithms.empty()) return error_at(source, *node, "chap_algorithms is empty");
    }
    if (out.mutual && !out.required())
      return error_at(source, table, std::string(context) + ": mutual needs chap_users (mutual CHAP follows one-way CHAP)");
    // RFC 7143 §12.1.3: a secret used to authenticate initiators MUST NOT be used to
    // authenticate targets, and the other way round.
    if (out.mutual)
      for (const auto& u : out.users)
        if (u.secret == out.mutual->secret)
          return error_at(source, table, std::string(context) + ": user \"" + u.user +
                                             "\" and the mutual credential share a secret (RFC 7143 §12.1.3 forbids it)");
    return std::nullopt;
  }

  // [login_throttle]: free_failures, base_delay_ms, max_delay_ms, forget_after_s, max_addresses.
  std::optional<Error> login_throttle(const toml::node& node, LoginThrottleOptions& out) const {
    const auto* table = node.as_table();
    if (table == nullptr) return error_at(source, node, "login_throttle must be a table ([login_throttle])");
    if (auto e = check_keys(source, *table,
                            {"free_failures", "base_delay_ms", "max_delay_ms", "forget_after_s", "max_addresses"},
                            "[login_throttle]"))
      return *e;
    auto number = [&](const char* key, std::int64_t max, auto apply) -> std::optional<Error> {
      const auto* n = table->get(key);
      if (n == nullptr) return std::nullopt;
      auto v = n->value<std::int64_t>();
      if (!v || n->type() != toml::node_type::integer || *v < 0 || *v > max)
        return error_at(source, *n,
                        "login_throttle." + std::string(key) + " must be an integer 0.." + std::to_string(max));
      apply(*v);
      return std::nullopt;
    };
    using std::chrono::milliseconds;
    if (auto e = number("free_failures", 1000000, [&](std::int64_t v) { out.free_failures = static_cast<unsigned>(v); }))
      return e;
    if (auto e = number("base_delay_ms", 3600000, [&](std::int64_t v) { out.base_delay = milliseconds(v); })) return e;
    if (auto e = number("max_delay_ms", 86400000, [&](std::int64_t v) { out.max_delay = milliseconds(v); })) return e;
    if (auto e = number("forget_after_s", 86400 * 7, [&](std::int64_t v) { out.forget_after = milliseconds(v * 1000); }))
      return e;
    if (auto e = number("max_addresses", 1000000, [&](std::int64_t v) { out.max_addresses = static_cast<std::size_t>(v); }))
      return e;
    if (out.max_delay < out.base_delay)
      return error_at(source, node, "login_throttle: max_delay_ms is below base_delay_ms");
    return std::nullopt;
  }

  // A list of strings `key` of `table` (the table at `node`) that must be there and hold one at
  // least: a target's "luns", a tenant's "listen". `owner` ("target IQN", "tenant NAME") starts the
  // messages.
  struct RequiredStrings {
    const toml::node* node;  ///< the array, for messages about one of its values
    std::vector<std::string> values;
  };
  tl::expected<RequiredStrings, ConfigError> required_strings(const toml::node& node, const toml::table& table,
                                                              std::string_view key, const std::string& owner) const {
    const auto* array = table.get(key);
    if (array == nullptr) return error_at(source, node, fmt::format("{}: \"{}\" is missing", owner, key));
    auto values = strings(*array, key);
    if (!values) return tl::unexpected(values.error());
    if (values->empty()) return error_at(source, *array, fmt::format("{}: \"{}\" is empty", owner, key));
    return RequiredStrings{.node = array, .values = std::move(*values)};
  }

  tl::expected<TargetDefinition, ConfigError> target(const toml::node& node) const {
    const auto* table = node.as_table();
    if (table == nullptr) return error_at(source, node, "targets must be an array of tables ([[targets]])");
    if (auto e = check_keys(source, *table,
                            {"iqn", "alias", "luns", "allowed_initiators", "chap_users", "mutual", "chap_algorithms", "tenant"},
                            "[[targets]]"))
      return *e;
    TargetDefinition t;
    auto iqn = (*table)["iqn"].value<std::string>();
    if (!iqn || iqn->empty()) return error_at(source, node, "[[targets]]: \"iqn\" is missing");
    if (auto ok = iscsi::check_iscsi_name(iscsi::fold_case(*iqn)); !ok)  // compared case-folded (RFC 3722)
      return error_at(source, *table->get("iqn"), "[[targets]]: iqn \"" + log::escape(*iqn) + "\": " + ok.error());
    t.iqn = *iqn;
    t.alias = (*table)["alias"].value_or(std::string{});
    auto luns = required_strings(node, *table, "luns", "target " + t.iqn);
    if (!luns) return tl::unexpected(luns.error());
    for (const auto& l : luns->values) {
      auto s = parse_lun_source(l);
      if (!s) return error_at(source, *luns->node, "target " + t.iqn + ": bad LUN \"" + l + "\" (a path, mem:SIZE or rbd:POOL/IMAGE, optionally followed by ,uuid=UUID ,serial=TEXT ,naa=HEX)");
      if (!s->memory && !s->rbd) s->path = resolve(s->path.string());
      t.luns.push_back(std::move(*s));
    }
    if (const auto* acl = table->get("allowed_initiators")) {
      auto names = strings(*acl, "allowed_initiators");
      if (!names) return tl::unexpected(names.error());
      for (const auto& n : *names)
        if (auto ok = iscsi::check_iscsi_name(iscsi::fold_case(n)); !ok)
          return error_at(source, *acl, "target " + t.iqn + ": allowed_initiators \"" + log::escape(n) + "\": " + ok.error());
      t.allowed_initiators = std::move(*names);
    }
    if (auto e = auth(*table, t.auth, "target " + t.iqn)) return *e;
    if (const auto* n = table->get("tenant")) {
      auto v = n->value_exact<std::string>();
      if (!v || v->empty()) return error_at(source, *n, "target " + t.iqn + ": tenant must be a tenant's name");
      t.tenant = *v;
    }
    return t;
  }

  // [[tenants]]: name, netns, listen, limits = { max_sessions, payload_budget, max_connections,
  // max_logging_in }.
  tl::expected<TenantDefinition, ConfigError> tenant(const toml::node& node) const {
    const auto* table = node.as_table();
    if (table == nullptr) return error_at(source, node, "tenants must be an array of tables ([[tenants]])");
    if (auto e = check_keys(source, *table, {"name", "netns", "listen", "limits"}, "[[tenants]]")) return *e;
    TenantDefinition t;
    const auto* name = table->get("name");
    auto v = name != nullptr ? name->value_exact<std::string>() : std::nullopt;
    if (!v) return error_at(source, node, "[[tenants]]: \"name\" is missing");
    if (!valid_tenant_name(*v))
      return error_at(source, *name, "[[tenants]]: name must be 1..64 bytes of a-z, A-Z, 0-9, '-', '_', '.'");
    t.name = *v;
    if (const auto* n = table->get("netns")) {
      // A name under /run/netns: never a path, never "." or "..".
      auto ns = n->value_exact<std::string>();
      if (!ns || !valid_tenant_name(*ns) || *ns == "." || *ns == "..")
        return error_at(source, *n, "tenant " + t.name + ": netns must be a namespace name under /run/netns "
                                    "(1..64 bytes of a-z, A-Z, 0-9, '-', '_', '.')");
      t.netns = *ns;
    }
    auto listen = required_strings(node, *table, "listen", "tenant " + t.name);
    if (!listen) return tl::unexpected(listen.error());
    for (const auto& l : listen->values) {
      auto a = parse_listen_address(l);
      if (!a)
        return error_at(source, *listen->node, "tenant " + t.name + ": listen: bad address \"" + l +
                                             "\" (HOST:PORT or [IPV6]:PORT, optionally ,tpgt=N)");
      t.listen.push_back(*a);
    }
    if (const auto* n = table->get("limits")) {
      const auto* limits = n->as_table();
      if (limits == nullptr) return error_at(source, *n, "tenant " + t.name + ": limits must be a table");
      if (auto e = check_keys(source, *limits, {"max_sessions", "payload_budget", "max_connections", "max_logging_in"},
                              "tenant " + t.name + " limits"))
        return *e;
      // Counts 0..1000000 (0 = no cap of the tenant's own).
      for (auto [key, out] : {std::pair<const char*, std::uint32_t*>{"max_sessions", &t.limits.max_sessions},
                              {"max_connections", &t.limits.max_connections},
                              {"max_logging_in", &t.limits.max_logging_in}}) {
        const auto* m = limits->get(key);
        if (m == nullptr) continue;
        auto count = m->value_exact<std::int64_t>();
        if (!count || *count < 0 || *count > 1000000)
          return error_at(source, *m, "tenant " + t.name + ": limits." + key + " must be an integer 0..1000000");
        *out = static_cast<std::uint32_t>(*count);
      }
      if (const auto* b = limits->get("payload_budget")) {
        std::optional<std::uint64_t> bytes;
        if (auto i = b->value_exact<std::int64_t>(); i && *i > 0) bytes = static_cast<std::uint64_t>(*i);
        if (auto text = b->value_exact<std::string>())
          if (auto parsed = cli::parse_size(*text); parsed && *parsed > 0) bytes = *parsed;
        if (!bytes)
          return error_at(source, *b, "tenant " + t.name + ": limits.payload_budget must be a size (bytes, or \"64M\")");
        t.limits.payload_bytes = *bytes;
      }
    }
    return t;
  }

  static bool valid_tenant_name(std::string_view name) {
    return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
             c == '.';
    });
  }

  // [limits]: timeouts in seconds (integer or float), counts, sizes as bytes or "64M" strings.
  std::optional<tl::unexpected<ConfigError>> limits(const toml::node& node, ConnectionLimits& out) const {
    const auto* table = node.as_table();
    if (table == nullptr) return error_at(source, node, "limits must be a table ([limits])");
    if (auto e = check_keys(source, *table,
                            {"login_timeout", "idle_interval", "ping_timeout", "max_logging_in", "fd_reserve",
                             "max_immediate_commands", "connection_payload_budget", "global_payload_budget",
                             "pool_idle_cap", "shutdown_timeout", "reinstate_timeout"},
                            "[limits]"))
      return *e;
    auto seconds = [&](const char* key, std::chrono::milliseconds& value, bool zero_ok) -> std::optional<tl::unexpected<ConfigError>> {
      const auto* n = table->get(key);
      if (n == nullptr) return std::nullopt;
      // A number of seconds, or a duration string in the programs' grammar ("500ms", "2m").
      std::optional<std::chrono::milliseconds> ms;
      if (auto text = n->value_exact<std::string>()) {
        if (auto d = cli::parse_duration(*text)) ms = *d;
      } else if (auto v = n->value<double>(); v && *v >= 0 && *v <= 86400) {
        ms = std::chrono::milliseconds(static_cast<std::int64_t>(*v * 1000));
      }
      if (!ms || *ms > std::chrono::hours(24) || (!zero_ok && ms->count() == 0))
        return error_at(source, *n, std::string("limits.") + key + " must be seconds, " + (zero_ok ? "0" : "above 0") +
                                        "..86400 (a number, or a string such as \"500ms\", \"1.5s\", \"2m\")");
      value = *ms;
      return std::nullopt;
    };
    auto count = [&](const char* key, std::uint32_t& value, std::int64_t min) -> std::optional<tl::unexpected<ConfigError>> {
      const auto* n = table->get(key);
      if (n == nullptr) return std::nullopt;
      auto v = n->value<std::int64_t>();
      if (!v || *v < min || *v > 1000000 || n->type() != toml::node_type::integer)
        return error_at(source, *n, std::string("limits.") + key + " must be an integer " + std::to_string(min) + "..1000000");
      value = static_cast<std::uint32_t>(*v);
      return std::nullopt;
    };
    auto size = [&](const char* key, std::uint64_t& value) -> std::optional<tl::unexpected<ConfigError>> {
      const auto* n = table->get(key);
      if (n == nullptr) return std::nullopt;
      std::optional<std::uint64_t> bytes;
      if (auto i = n->value<std::int64_t>(); i && n->type() == toml::node_type::integer && *i > 0) bytes = *i;
      if (auto t = n->value<std::string>()) {
        if (auto parsed = cli::parse_size(*t); parsed && *parsed > 0) bytes = *parsed;
      }
      if (!bytes) return error_at(source, *n, std::string("limits.") + key + " must be a size (bytes, or \"64M\")");
      value = *bytes;
      return std::nullopt;
    };
    if (auto e = seconds("login_timeout", out.login_timeout, false)) return e;
    if (auto e = seconds("idle_interval", out.idle_interval, true)) return e;
    if (auto e = seconds("ping_timeout", out.ping_timeout, false)) return e;
    if (auto e = count("max_logging_in", out.max_logging_in, 1)) return e;
    if (auto e = count("fd_reserve", out.fd_reserve, 16)) return e;
    if (auto e = count("max_immediate_commands", out.max_immediate_commands, 1)) return e;
    if (auto e = size("connection_payload_budget", out.connection_payload_bytes)) return e;
    if (auto e = size("global_payload_budget", out.global_payload_bytes)) return e;
    if (auto e = size("pool_idle_cap", out.pool_idle_bytes)) return e;
    if (auto e = seconds("shutdown_timeout", out.shutdown_timeout, true)) return e;
    if (auto e = seconds("reinstate_timeout", out.reinstate_timeout, false)) return e;
    return std::nullopt;
  }

  // The array of tables `key` ([[targets]], [[tenants]]) of `root`, when there is one: each table
  // read by `read` and appended to `out`; one whose `name` another already has is an error (`what`
  // names the kind in the message).
  template <class T>
  std::optional<Error> named_tables(const toml::table& root, std::string_view key, std::string_view what,
                                    tl::expected<T, ConfigError> (Parser::*read)(const toml::node&) const,
                                    std::string T::*name, std::vector<T>& out) const {
    const auto* node = root.get(key);
    if (node == nullptr) return std::nullopt;
    const auto* array = node->as_array();
    if (array == nullptr)
      return error_at(source, *node, fmt::format("{} must be an array of tables ([[{}]])", key, key));
    for (const auto& element : *array) {
      auto t = (this->*read)(element);
      if (!t) return Error(t.error());
      for (const auto& other : out)
        if (other.*name == (*t).*name)
          return error_at(source, element, fmt::format("{} {} is defined twice", what, (*t).*name));
      out.push_back(std::move(*t));
    }
    return std::nullopt;
  }

  tl::expected<TargetConfig, ConfigError> parse(const toml::table& root, TargetConfig config) const {
    if (auto e = check_keys(source, root,
                            {"listen", "block_size", "read_only", "threads", "socket_io", "discovery", "targets", "tenants", "limits", "login_throttle", "alua", "alua_peers", "alua_lock",
                             "ceph_conf", "ceph_id", "export_rbd", "rbd_rescan_interval", "status_socket", "metrics"},
                            "the top level"))
      return *e;
    if (const auto* node = root.get("listen")) {
      auto list = strings(*node, "listen");
      if (!list) return tl::unexpected(list.error());
      for (const auto& l : *list) {
        auto a = parse_listen_address(l);
        if (!a) return error_at(source, *node, "listen: bad address \"" + l + "\" (HOST:PORT or [IPV6]:PORT, optionally ,tpgt=N)");
        config.listen.push_back(*a);
      }
    }
    // [alua] and [alua_peers]: portal group tag = "state" (ALUA, SPC-5 §5.16.2.4); the peers are
    // other gateways' groups (TargetConfig::alua_peers).
    for (const char* section : {"alua", "alua_peers"}) {
      const auto* node = root.get(section);
      if (node == nullptr) continue;
      auto& states = std::string_view(section) == "alua" ? config.alua_states : config.alua_peers;
      const auto* table = node->as_table();
      if (table == nullptr)
        return error_at(source, *node, std::string(section) + " must be a table ([" + section + "], \"TPGT\" = \"STATE\")");
      for (const auto& [key, value] : *table) {
        const std::string k(key.str());
        unsigned long tag = 0;
        if (!k.empty() && k.size() <= 5 && std::all_of(k.begin(), k.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
          tag = std::stoul(k);
        const auto name = value.value<std::string>();
        const auto state = name ? parse_alua_state(*name) : std::nullopt;
        if (tag == 0 || tag > 65535 || !state)
          return error_at(source, value, std::string(section) + "." + k +
                                             ": expected a portal group tag 1..65535 = \"active/optimized\", "
                                             "\"active/non-optimized\", \"standby\" or \"unavailable\"");
        states[static_cast<std::uint16_t>(tag)] = *state;
      }
    }
    // value_exact: an integer only. value<int64_t>() also converts floats, and a float out of
    // range ("block_size = 40e96") is undefined behaviour inside toml++ (found by fuzz_config).
    if (const auto* node = root.get("block_size")) {
      auto v = node->value_exact<std::int64_t>();
      if (!v || (*v != 512 && *v != 4096)) return error_at(source, *node, "block_size must be 512 or 4096");
      config.block_size_bytes = static_cast<std::uint32_t>(*v);
    }
    if (const auto* node = root.get("alua_lock")) {
      auto v = node->value_exact<std::string>();
      if (!v || v->empty()) return error_at(source, *node, "alua_lock must be a path (the file the gateways lock)");
      config.alua_lock = resolve(*v);
    }
    if (const auto* node = root.get("ceph_conf")) {
      auto v = node->value_exact<std::string>();
      if (!v || v->empty()) return error_at(source, *node, "ceph_conf must be a path");
      config.ceph_conf = resolve(*v);
    }
    if (const auto* node = root.get("export_rbd")) {
      auto v = node->value_exact<std::string>();
      if (!v || v->empty()) return error_at(source, *node, "export_rbd must be a pool name");
      config.export_rbd = *v;
    }
    if (const auto* node = root.get("rbd_rescan_interval")) {
      auto v = node->value_exact<std::int64_t>();
      if (!v || *v < 0 || *v > 86400) return error_at(source, *node, "rbd_rescan_interval must be 0..86400 seconds");
      config.rbd_rescan_interval = std::chrono::seconds(*v);
    }
    if (const auto* node = root.get("status_socket")) {
      auto v = node->value_exact<std::string>();
      if (!v || v->empty()) return error_at(source, *node, "status_socket must be the path of a Unix socket");
      config.status_socket = resolve(*v).string();
    }
    if (const auto* node = root.get("metrics")) {
      auto v = node->value_exact<std::string>();
      if (!v || v->empty() || v->rfind(':') == std::string::npos)
        return error_at(source, *node, "metrics must be HOST:PORT, e.g. \"127.0.0.1:9101\"");
      config.metrics = *v;
    }
    if (const auto* node = root.get("ceph_id")) {
      auto v = node->value_exact<std::string>();
      if (!v || v->empty()) return error_at(source, *node, "ceph_id must be a client id such as \"admin\"");
      config.ceph_id = *v;
    }
    if (const auto* node = root.get("read_only")) {
      auto v = node->value<bool>();
      if (!v || node->type() != toml::node_type::boolean) return error_at(source, *node, "read_only must be true or false");
      config.read_only = *v;
    }
    if (const auto* node = root.get("threads")) {
      auto v = node->value_exact<std::int64_t>();
      if (!v || *v < 1 || *v > 256) return error_at(source, *node, "threads must be 1..256");
      config.threads = static_cast<unsigned>(*v);
    }
    if (const auto* node = root.get("limits")) {
      if (auto e = limits(*node, config.limits)) return *e;
    }
    if (const auto* node = root.get("socket_io")) {
      const auto v = node->value_exact<std::string>();
      const auto mode = parse_socket_io(v ? std::string_view(*v) : std::string_view());
      if (!mode) return error_at(source, *node, "socket_io must be \"auto\", \"uring\" or \"epoll\"");
      config.limits.socket_io = *mode;
    }
    if (const auto* node = root.get("discovery")) {
      const auto* table = node->as_table();
      if (table == nullptr) return error_at(source, *node, "discovery must be a table ([discovery])");
      if (auto e = check_keys(source, *table, {"chap_users", "mutual", "chap_algorithms"}, "[discovery]")) return *e;
      if (auto e = auth(*table, config.discovery_auth, "discovery")) return *e;
    }
    if (const auto* node = root.get("login_throttle")) {
      if (auto e = login_throttle(*node, config.login_throttle)) return *e;
    }
    if (auto e = named_tables(root, "targets", "target", &Parser::target, &TargetDefinition::iqn, config.targets))
      return *e;
    if (auto e = named_tables(root, "tenants", "tenant", &Parser::tenant, &TenantDefinition::name, config.tenants))
      return *e;
    // Every tenant a target names exists (a typo must not leave a target on no portal).
    if (const auto* node = root.get("targets"); node != nullptr && node->as_array() != nullptr) {
      const auto& array = *node->as_array();
      for (std::size_t i = 0; i < array.size(); ++i) {
        const auto& name = config.targets[config.targets.size() - array.size() + i].tenant;
        if (name.empty()) continue;
        if (std::none_of(config.tenants.begin(), config.tenants.end(), [&](const auto& t) { return t.name == name; }))
          return error_at(source, array[i], "target " + config.targets[config.targets.size() - array.size() + i].iqn +
                                                ": tenant \"" + name + "\" is not defined in [[tenants]]");
      }
    }
    return config;
  }
};

}  // namespace

tl::expected<TargetConfig, ConfigError> parse_config_toml(std::string_view text, std::string_view source,
                                                          TargetConfig base, const std::filesystem::path& base_dir) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    // The description names the syntax problem; the offending text itself is not echoed.
    const auto& b = e.source().begin;
    return Error(ConfigError{std::string(source) + ":" + std::to_string(b.line) + ":" + std::to_string(b.column) +
                             ": " + std::string(e.description())});
  }
  return Parser{source, base_dir}.parse(root, std::move(base));
}

tl::expected<TargetConfig, ConfigError> load_config_file(const std::filesystem::path& path, TargetConfig base) {
  std::ifstream in(path);
  if (!in) return Error(ConfigError{path.string() + ": cannot read the file"});
  std::stringstream text;
  text << in.rdbuf();
  return parse_config_toml(text.str(), path.string(), std::move(base), path.parent_path().empty() ? "." : path.parent_path());
}

tl::expected<std::string, ConfigError> read_secret_file(const std::filesystem::path& path,
                                                        std::vector<std::string>* warnings) {
  std::ifstream in(path);
  if (!in) return Error(ConfigError{"secret file " + path.string() + ": cannot read it"});
  // Only as much of the first line as a secret can hold (plus "\r" and one byte to tell "too
  // long"): a secret_file naming /dev/zero or a huge file must not be read to the end.
  std::string line;
  for (char c = 0; line.size() < iscsi::chap_max_secret_bytes + 2 && in.get(c) && c != '\n';) line.push_back(c);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.empty()) return Error(ConfigError{"secret file " + path.string() + ": empty"});
  struct stat st {};
  if (warnings != nullptr && ::stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0)
    warnings->push_back("secret file " + path.string() + " is readable by group or others (chmod 600 it)");
  return line;
}

std::vector<std::string> config_warnings(const TargetConfig& config) {
  std::vector<std::string> out;
  auto check = [&](const AuthConfig& auth, const std::string& where) {
    auto weak = [&](const ChapCredential& c, std::string_view role) {
      // RFC 7143 §12.1.3: secrets under 96 random bits need IPsec.
      if (c.secret.size() < iscsi::chap_recommended_secret_bytes)
        out.push_back(where + ": " + std::string(role) + " \"" + c.user + "\" has a secret shorter than 12 bytes "
                      "(RFC 7143 §12.1.3 recommends at least 96 random bits, 128 preferred)");
    };
    for (const auto& u : auth.users) weak(u, "CHAP user");
    if (auth.mutual) weak(*auth.mutual, "mutual user");
  };
  check(config.auth, "quick targets");
  check(config.discovery_auth, "discovery");
  for (const auto& t : config.targets) check(t.auth, "target " + t.iqn);
  return out;
}

}  // namespace iserkit::target

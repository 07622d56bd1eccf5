// iserkit-nbd --config FILE: TOML keys → long options (toml++).
#include "nbd_bridge/config_file.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <toml++/toml.h>

namespace iserkit::nbd {
namespace {

std::string where(std::string_view source, const toml::source_region& r) {
  return fmt::format("{}:{}:{}", source, r.begin.line, r.begin.column);
}

// A scalar value as option text, or nothing when the type is not a string or a number.
std::optional<std::string> scalar_text(const toml::node& node) {
  if (auto s = node.as_string()) return s->get();
  if (auto i = node.as_integer()) return std::to_string(i->get());
  if (auto f = node.as_floating_point()) return fmt::format("{}", f->get());
  return std::nullopt;
}

}  // namespace

std::vector<FileOption> file_options(const cxxopts::Options& options, const std::set<std::string>& excluded) {
  std::vector<FileOption> out;
  for (const auto& group : options.groups())
    for (const auto& o : options.group_help(group).options) {
      if (o.l.empty() || excluded.contains(o.l.front())) continue;
      out.push_back(FileOption{.name = o.l.front(), .boolean = o.is_boolean, .container = o.is_container});
    }
  return out;
}

tl::expected<std::vector<std::string>, std::string> config_arguments(std::string_view text, std::string_view source,
                                                                     const std::vector<FileOption>& allowed,
                                                                     const std::set<std::string>& given) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return tl::unexpected(fmt::format("{}: {}", where(source, e.source()), e.description()));
  }
  std::vector<std::string> args;
  for (const auto& [key, node] : root) {
    std::string name(key.str());
    std::replace(name.begin(), name.end(), '_', '-');
    const auto option = std::find_if(allowed.begin(), allowed.end(), [&](const FileOption& o) { return o.name == name; });
    const std::string at = where(source, node.source());
    if (option == allowed.end())
      return tl::unexpected(fmt::format("{}: unknown key {} (keys are the long options of --help)",
                                        where(source, key.source()), key.str()));
    if (given.contains(name)) continue;  // the command line set it
    if (option->boolean) {
      auto b = node.as_boolean();
      if (!b) return tl::unexpected(fmt::format("{}: {}: expected true or false", at, name));
      if (b->get()) args.push_back("--" + name);
      continue;
    }
    if (option->container) {
      if (auto array = node.as_array()) {
        for (const auto& item : *array) {
          auto s = item.as_string();
          if (!s) return tl::unexpected(fmt::format("{}: {}: expected an array of strings", at, name));
          args.push_back("--" + name + "=" + s->get());
        }
        continue;
      }
    }
    auto value = scalar_text(node);
    if (!value)
      return tl::unexpected(fmt::format("{}: {}: expected a {}", at, name,
                                        option->container ? "string or an array of strings" : "string or a number"));
    args.push_back("--" + name + "=" + *value);
  }
  return args;
}

cxxopts::ParseResult parse_with_config_file(cxxopts::Options& options, int argc, const char* const* argv) {
  auto first = options.parse(argc, argv);
  if (!first.count("config")) return first;
  const auto path = first["config"].as<std::string>();
  std::ifstream in(path);
  if (!in) throw std::runtime_error("--config " + path + ": cannot read the file");
  std::ostringstream text;
  text << in.rdbuf();
  const auto allowed = file_options(options, {"config", "help", "version"});
  std::set<std::string> given;
  for (const auto& o : allowed)
    if (first.count(o.name)) given.insert(o.name);
  auto extra = config_arguments(text.str(), path, allowed, given);
  if (!extra) throw std::runtime_error("--config " + extra.error());
  std::vector<const char*> combined{argv[0]};
  for (const auto& a : *extra) combined.push_back(a.c_str());
  for (int i = 1; i < argc; ++i) combined.push_back(argv[i]);
  return options.parse(static_cast<int>(combined.size()), combined.data());
}

}  // namespace iserkit::nbd

// iserkit-nbd --config FILE (layer 6 front end): a TOML file whose keys are the program's long
// options, so a service (iserkit-nbd@.service, one file per volume in /etc/iserkit/volumes/) can
// hold what the command line would. Options given on the command line win over the file's.
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <cxxopts.hpp>
#include <tl/expected.hpp>

namespace iserkit::nbd {

/// One long option the file may set.
struct FileOption {
  std::string name;        ///< long option name as in --help ("replacement-timeout")
  bool boolean = false;    ///< a flag: the key takes true or false
  bool container = false;  ///< repeatable (the URL list): a string or an array of strings
};

/// The long options of `options` a configuration file may set: all but `excluded` (e.g. config,
/// help, version).
std::vector<FileOption> file_options(const cxxopts::Options& options, const std::set<std::string>& excluded);

/// Reads the TOML text `text` (named `source` in errors) and returns command-line arguments
/// ("--name=VALUE", "--flag") for each key, leaving out the options in `given` (the command line
/// set them). Keys are the long option names; '_' may stand for '-' ("read_only"). Values: a flag
/// takes a boolean (false adds nothing), the repeatable options a string or an array of strings,
/// the others a string, an integer or a float.
/// Errors: a message "SOURCE:LINE:COLUMN: what" for a syntax error, an unknown key (a misspelt key
/// must not be ignored), a table, or a value of the wrong type.
tl::expected<std::vector<std::string>, std::string> config_arguments(std::string_view text, std::string_view source,
                                                                     const std::vector<FileOption>& allowed,
                                                                     const std::set<std::string>& given);

/// Parses `argc`/`argv` with `options`; when `--config FILE` is among them, reads FILE
/// (config_arguments(), `allowed` = file_options(options, {config, help, version})) and parses
/// again with the file's arguments before the command line's, so the command line wins.
/// Throws cxxopts exceptions for bad options and std::runtime_error("--config FILE: ...") for an
/// unreadable or bad file.
cxxopts::ParseResult parse_with_config_file(cxxopts::Options& options, int argc, const char* const* argv);

}  // namespace iserkit::nbd

// Logging: spdlog behind a few project macros-free helpers. Secrets are never passed here.
#pragma once

#include <spdlog/spdlog.h>

namespace iserkit::log {
using spdlog::debug;
using spdlog::error;
using spdlog::info;
using spdlog::trace;
using spdlog::warn;

/// Sets the global level from a name: trace, debug, info, warn, error, off. Unknown names keep "info".
void set_level(std::string_view level);
}  // namespace iserkit::log

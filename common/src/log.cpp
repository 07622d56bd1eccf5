// Log level selection for the executables.
#include "iserkit/common/log.hpp"

namespace iserkit::log {

void set_level(std::string_view level) {
  auto l = spdlog::level::from_str(std::string(level));
  if (l == spdlog::level::off && level != "off") l = spdlog::level::info;
  spdlog::set_level(l);
}

}  // namespace iserkit::log

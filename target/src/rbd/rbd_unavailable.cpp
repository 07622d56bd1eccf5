// open_rbd_backend() in a build without librbd (WITH_RBD=OFF): every rbd: LUN fails to open with
// "not supported", so the rest of the target still serves its other LUNs.
#include "iserkit/common/errors.hpp"
#include "iserkit/target/backends.hpp"

namespace iserkit::target {

Result<std::shared_ptr<BlockBackend>> open_rbd_backend(const RbdBackendOptions&) {
  return fail(std::make_error_code(std::errc::not_supported));
}

Result<std::vector<std::string>> list_rbd_images(const RbdBackendOptions&) {
  return fail(std::make_error_code(std::errc::not_supported));
}

bool rbd_backend_available() noexcept { return false; }

}  // namespace iserkit::target

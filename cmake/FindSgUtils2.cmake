# Finds libsgutils2 (Debian libsgutils2-dev, from sg3_utils): its sense key and ASC/ASCQ text
# tables (sg_get_sense_key_str, sg_get_asc_ascq_str in <scsi/sg_lib.h>) word the SCSI errors of
# every iserkit program (common/src/scsi/sense_text.cpp). Debian ships no pkg-config file for it.
# Defines the imported target SgUtils2::SgUtils2. Installed beside iserkitConfig.cmake, which
# finds it again for programs that link the static libraries.
find_path(SGUTILS2_INCLUDE_DIR scsi/sg_lib.h)
find_library(SGUTILS2_LIBRARY sgutils2)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(SgUtils2 REQUIRED_VARS SGUTILS2_LIBRARY SGUTILS2_INCLUDE_DIR)
if(SgUtils2_FOUND AND NOT TARGET SgUtils2::SgUtils2)
  add_library(SgUtils2::SgUtils2 UNKNOWN IMPORTED)
  set_target_properties(SgUtils2::SgUtils2 PROPERTIES IMPORTED_LOCATION "${SGUTILS2_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${SGUTILS2_INCLUDE_DIR}")
endif()
mark_as_advanced(SGUTILS2_INCLUDE_DIR SGUTILS2_LIBRARY)

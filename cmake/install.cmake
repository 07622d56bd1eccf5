# Install rules (GNUInstallDirs), included from the top-level CMakeLists.txt after every
# subdirectory. What goes where (packaging/README.md has the package split):
#   programs      iserkit, iserkit-nbd, iserkit-fuse → bin; iserkit-target (a daemon) → sbin
#   library       libiserkit_initiator.a + libiserkit_common.a → lib (static: packaging/README.md)
#   headers       include/iserkit/{initiator,common,iscsi,scsi,datamover,iser}/*.hpp
#   CMake config  lib/cmake/iserkit/iserkitConfig.cmake: find_package(iserkit) → iserkit::initiator
#                 (and FindSgUtils2.cmake: libsgutils2 has no pkg-config file)
#   pkg-config    lib/pkgconfig/iserkit.pc
#   man pages     share/man/man{1,5,8} (packaging/man/CMakeLists.txt, when its tool is installed)
include(CMakePackageConfigHelpers)

foreach(program iserkit iserkit-nbd iserkit-fuse)
  if(TARGET ${program})
    install(TARGETS ${program} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT programs)
  endif()
endforeach()
if(TARGET iserkit-target)
  install(TARGETS iserkit-target RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR} COMPONENT programs)
endif()

if(NOT TARGET iserkit_initiator)
  return()
endif()

# Consumers see iserkit::initiator (and iserkit::common, which it links).
set_target_properties(iserkit_common PROPERTIES EXPORT_NAME common)
set_target_properties(iserkit_initiator PROPERTIES EXPORT_NAME initiator)
install(TARGETS iserkit_common iserkit_initiator EXPORT iserkitTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The initiator's public headers and the layer 0–3 headers they include (common/include holds
# only public headers; internal ones live in */src).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/common/include/ ${PROJECT_SOURCE_DIR}/initiator/include/
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev FILES_MATCHING PATTERN "*.hpp")

set(ISERKIT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/iserkit)
install(EXPORT iserkitTargets NAMESPACE iserkit:: DESTINATION ${ISERKIT_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/iserkitConfig.cmake.in
  ${PROJECT_BINARY_DIR}/iserkitConfig.cmake INSTALL_DESTINATION ${ISERKIT_CMAKE_DIR})
# 0.x: minor versions may change the API, so only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/iserkitConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/iserkitConfig.cmake ${PROJECT_BINARY_DIR}/iserkitConfigVersion.cmake
  ${CMAKE_CURRENT_LIST_DIR}/FindSgUtils2.cmake DESTINATION ${ISERKIT_CMAKE_DIR} COMPONENT dev)

# pkg-config: the static libraries and what they link (Requires are .pc names Debian ships).
set(ISERKIT_PC_REQUIRES "spdlog fmt libcrypto libisal")
if(WITH_SYSTEMD)
  string(APPEND ISERKIT_PC_REQUIRES " libsystemd")
endif()
if(WITH_ISER)
  string(APPEND ISERKIT_PC_REQUIRES " libibverbs librdmacm")
endif()
set(ISERKIT_PC_CFLAGS "-DBOOST_ASIO_NO_DEPRECATED")
if(ISERKIT_COPY_COUNTER)
  string(APPEND ISERKIT_PC_CFLAGS " -DISERKIT_COPY_COUNTER=1")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/iserkit.pc.in ${PROJECT_BINARY_DIR}/iserkit.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/iserkit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

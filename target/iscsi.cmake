# iSCSI side of the target (layers 2, 3-glue and 6): login state machine, CmdSN window, write data
# sequencer, connection/session handling, TCP portals (library iserkit_target) and the
# iserkit-target executable. Included by target/CMakeLists.txt.

# The session engine and its data phase (layer 2, sans-I/O), with the write sequencer, the payload
# ledger and the statistics they use: an object library whose include graph has no Asio
# (cmake/engine_no_asio.hpp, force-included, stops the build if any header it reaches includes
# Boost.Asio). Its objects go into iserkit_target; fuzz_target_engine links it alone.
add_library(iserkit_target_engine OBJECT
  ${CMAKE_CURRENT_SOURCE_DIR}/src/data_phase.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/payload_ledger.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/session_engine.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/target_stats.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/write_sequencer.cpp)
add_library(iserkit::target_engine ALIAS iserkit_target_engine)
target_include_directories(iserkit_target_engine
  PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include
  PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
target_link_libraries(iserkit_target_engine PUBLIC iserkit::target_scsi iserkit::common)
target_compile_options(iserkit_target_engine PRIVATE -include ${PROJECT_SOURCE_DIR}/cmake/engine_no_asio.hpp)

add_library(iserkit_target STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/src/alua_failover.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/chap_authenticator.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/config.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/config_file.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/export_dir.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/connection.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/data_in_pipes.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/login.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/login_throttle.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/lu_identity_store.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/portal.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/reload.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/session_table.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/target_node.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/target_status.cpp
  $<TARGET_OBJECTS:iserkit_target_engine>)
add_library(iserkit::target ALIAS iserkit_target)
target_include_directories(iserkit_target
  PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include
  PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
# toml++ (Debian libtomlplusplus-dev): the --config file.
find_package(tomlplusplus REQUIRED)
target_link_libraries(iserkit_target PUBLIC iserkit::target_scsi iserkit::common PRIVATE tomlplusplus::tomlplusplus nlohmann_json::nlohmann_json iserkit::daemon_metrics)

add_executable(iserkit-target ${CMAKE_CURRENT_SOURCE_DIR}/main.cpp)
target_link_libraries(iserkit-target PRIVATE iserkit::target iserkit::daemon_metrics cxxopts::cxxopts)
# Export nothing from the executable (target/exports.map says why: librados's own Boost.Asio).
target_link_options(iserkit-target PRIVATE -Wl,--version-script=${CMAKE_CURRENT_SOURCE_DIR}/exports.map)
set_target_properties(iserkit-target PROPERTIES LINK_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/exports.map)

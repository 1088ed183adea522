# Packaging and integration (docs/install.md), included last by the
# top-level CMakeLists.txt, once every library target exists:
#   - the tenon:: alias targets, the same names find_package gives;
#   - tenon-run, in the build tree (bin/tenon-run) and installed;
#   - with TENON_INSTALL: install rules for the headers, libtenon.so.0,
#     libtenon.a, libtenon-override.a and the user variants, the CMake
#     package (find_package(tenon CONFIG)) and tenon.pc.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The variant libraries (libtenon-NAME.so) given to users, when the build
# has them: installed, and offered by tenon-run --variant NAME. A new
# variant is one more name here. libtenon-locked.so and the zero-cost
# yardsticks are benchmark instruments and stay out.
set(TENON_USER_VARIANTS secure percpu latency trace valgrind)

add_library(tenon::tenon ALIAS tenon)
add_library(tenon::static ALIAS tenon_static)
add_library(tenon::override ALIAS tenon_override)
# The layer headers (<tenon/layer.hpp>, <tenon/mass_pool.hpp>) are C++20.
target_compile_features(tenon_static INTERFACE cxx_std_20)
set_target_properties(tenon_static PROPERTIES EXPORT_NAME static)
set_target_properties(tenon_override PROPERTIES EXPORT_NAME override)

set(_tenon_variant_targets "")
foreach(_v IN LISTS TENON_USER_VARIANTS)
  if(TARGET tenon-${_v})
    list(APPEND _tenon_variant_targets tenon-${_v})
  endif()
endforeach()

# tenon-run: tools/tenon-run.in with its library directories filled in
# (configure_file for the @VARS@, then file(GENERATE) for the generator
# expressions that name where the build put each library).
function(tenon_generate_run output libdirs)
  set(TENON_RUN_LIBDIRS "${libdirs}")
  set(TENON_RUN_DEFAULT_LIB "$<TARGET_SONAME_FILE_NAME:tenon>")
  configure_file(${PROJECT_SOURCE_DIR}/tools/tenon-run.in ${output}.in @ONLY)
  file(GENERATE OUTPUT ${output} INPUT ${output}.in
       FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
endfunction()

set(_tenon_build_libdirs "$<TARGET_FILE_DIR:tenon>")
foreach(_t IN LISTS _tenon_variant_targets)
  string(APPEND _tenon_build_libdirs ":$<TARGET_FILE_DIR:${_t}>")
endforeach()
tenon_generate_run(${PROJECT_BINARY_DIR}/bin/tenon-run "${_tenon_build_libdirs}")

if(NOT TENON_INSTALL)
  return()
endif()

# Include directories: the build tree's for targets built here, the install
# tree's for the exported package. Every header a composition needs (the
# engines' headers too) is under include/tenon/.
set(_tenon_pc_cflags "")
function(tenon_map_include_dirs target)
  get_target_property(dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
  if(NOT dirs)
    return()
  endif()
  set(mapped "")
  set(cflags "")
  foreach(d IN LISTS dirs)
    if(d MATCHES "^\\$<")
      list(APPEND mapped "${d}")
    elseif(d STREQUAL "${PROJECT_SOURCE_DIR}/include")
      list(APPEND mapped "$<BUILD_INTERFACE:${d}>" "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
      list(APPEND cflags "-I\${includedir}")
    else()
      list(APPEND mapped "$<BUILD_INTERFACE:${d}>")
    endif()
  endforeach()
  set_property(TARGET ${target} PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${mapped}")
  list(APPEND _tenon_pc_cflags ${cflags})
  list(REMOVE_DUPLICATES _tenon_pc_cflags)
  set(_tenon_pc_cflags "${_tenon_pc_cflags}" PARENT_SCOPE)
endfunction()
foreach(_t tenon tenon_static tenon_override)
  tenon_map_include_dirs(${_t})
endforeach()

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/tenon DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(TARGETS tenon tenon_static tenon_override EXPORT tenonTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
# Preload-only libraries: no soname version, not in the CMake package.
foreach(_t IN LISTS _tenon_variant_targets)
  install(TARGETS ${_t} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endforeach()

set(_tenon_cmakedir ${CMAKE_INSTALL_LIBDIR}/cmake/tenon)
install(EXPORT tenonTargets NAMESPACE tenon:: DESTINATION ${_tenon_cmakedir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tenonConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tenonConfig.cmake INSTALL_DESTINATION ${_tenon_cmakedir})
# 0.x: a minor version may break the API, so only x.y.* satisfy x.y.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tenonConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tenonConfig.cmake ${PROJECT_BINARY_DIR}/tenonConfigVersion.cmake
  DESTINATION ${_tenon_cmakedir})

# tenon.pc, relocatable: its prefix is found from where the file lies.
file(RELATIVE_PATH _tenon_pc_up ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(TENON_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  string(REGEX REPLACE "/$" "" _tenon_pc_up "${_tenon_pc_up}")
  set(TENON_PC_PREFIX "\${pcfiledir}/${_tenon_pc_up}")
endif()
list(JOIN _tenon_pc_cflags " " TENON_PC_CFLAGS)
set(TENON_PC_LIBS_PRIVATE "-pthread")
foreach(_l IN LISTS CMAKE_DL_LIBS)
  string(APPEND TENON_PC_LIBS_PRIVATE " -l${_l}")
endforeach()
configure_file(${PROJECT_SOURCE_DIR}/cmake/tenon.pc.in ${PROJECT_BINARY_DIR}/tenon.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tenon.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# tenon-run, finding the libraries relative to itself.
file(RELATIVE_PATH _tenon_bin_to_lib ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
tenon_generate_run(${PROJECT_BINARY_DIR}/install/tenon-run "${_tenon_bin_to_lib}")
install(PROGRAMS ${PROJECT_BINARY_DIR}/install/tenon-run DESTINATION ${CMAKE_INSTALL_BINDIR})

# libtenon-valgrind.so's suppressions for valgrind (docs/install.md).
if(TARGET tenon-valgrind)
  install(FILES ${PROJECT_SOURCE_DIR}/tools/tenon-valgrind.supp DESTINATION ${CMAKE_INSTALL_DATADIR}/tenon)
endif()

install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/CHANGELOG.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR})

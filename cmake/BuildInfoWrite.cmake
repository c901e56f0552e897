# Writes ladder/build_info.h (cmake -P, from cmake/BuildInfo.cmake before every build): the
# version and backends CMake configured, and the commit the tree is at now. configure_file leaves
# the header alone (and its users unbuilt) while its text is unchanged.
#
#   cmake -DLADDER_SOURCE_DIR=... -DLADDER_BUILD_VERSION=... -DLADDER_BUILD_BACKENDS=...
#         -DLADDER_BUILD_INFO_IN=build_info.h.in -DLADDER_BUILD_INFO_OUT=.../build_info.h
#         -P BuildInfoWrite.cmake
foreach(_var LADDER_SOURCE_DIR LADDER_BUILD_VERSION LADDER_BUILD_BACKENDS LADDER_BUILD_INFO_IN
             LADDER_BUILD_INFO_OUT)
  if(NOT DEFINED ${_var})
    message(FATAL_ERROR "BuildInfoWrite.cmake: -D${_var}=... is required")
  endif()
endforeach()

set(LADDER_GIT_COMMIT "unknown")
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS "${LADDER_SOURCE_DIR}/.git")
  execute_process(
    COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
    WORKING_DIRECTORY ${LADDER_SOURCE_DIR}
    OUTPUT_VARIABLE _commit OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _rc ERROR_QUIET)
  if(_rc EQUAL 0 AND _commit)
    set(LADDER_GIT_COMMIT "${_commit}")
    execute_process(
      COMMAND ${GIT_EXECUTABLE} diff --quiet HEAD --
      WORKING_DIRECTORY ${LADDER_SOURCE_DIR}
      RESULT_VARIABLE _dirty ERROR_QUIET)
    if(_dirty EQUAL 1)
      string(APPEND LADDER_GIT_COMMIT "-dirty")
    endif()
  endif()
endif()
configure_file(${LADDER_BUILD_INFO_IN} ${LADDER_BUILD_INFO_OUT} @ONLY)

# ladder::build_info: a generated header, ladder/build_info.h, saying what this build is: the
# project version, the git commit it was configured from and the kernel backends built in (CPU
# always; CUDA with its architectures; HIP with its offload targets). `ladder --version` prints
# it and the agent reports it in its inventory, so a report says which build measured what.
#
# The commit is read when CMake configures (`git rev-parse`), "unknown" outside a git checkout
# (a source tarball) or without git; a tree with uncommitted changes to tracked files adds
# "-dirty". Rerun CMake (scripts/package.sh always does) after committing to refresh it.
# Include after kernels/ (the backends are read from the ladder_kernels target).
if(TARGET ladder_build_info)
  return()
endif()

set(LADDER_GIT_COMMIT "unknown")
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS "${PROJECT_SOURCE_DIR}/.git")
  execute_process(
    COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    OUTPUT_VARIABLE _ladder_commit OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _ladder_git_rc ERROR_QUIET)
  if(_ladder_git_rc EQUAL 0 AND _ladder_commit)
    set(LADDER_GIT_COMMIT "${_ladder_commit}")
    execute_process(
      COMMAND ${GIT_EXECUTABLE} diff --quiet HEAD --
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
      RESULT_VARIABLE _ladder_dirty ERROR_QUIET)
    if(_ladder_dirty EQUAL 1)
      string(APPEND LADDER_GIT_COMMIT "-dirty")
    endif()
  endif()
endif()

# Backends: "cpu", then "cuda 13.0 sm_80 sm_90a compute_90" (machine code per sm_XX, PTX per
# compute_XX, which the driver compiles for newer GPUs) or "hip gfx90a gfx1030".
set(_ladder_backends "cpu")
if(LADDER_CUDA AND TARGET ladder_kernels)
  get_target_property(_archs ladder_kernels CUDA_ARCHITECTURES)
  set(_cuda "cuda")
  # CUDA was enabled in kernels/'s scope: ask for the toolkit's version here.
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_VERSION_MAJOR)
    string(APPEND _cuda " ${CUDAToolkit_VERSION_MAJOR}.${CUDAToolkit_VERSION_MINOR}")
  endif()
  foreach(_arch IN LISTS _archs)
    if(_arch MATCHES "^([0-9]+[af]?)-real$")
      string(APPEND _cuda " sm_${CMAKE_MATCH_1}")
    elseif(_arch MATCHES "^([0-9]+[af]?)-virtual$")
      string(APPEND _cuda " compute_${CMAKE_MATCH_1}")
    elseif(_arch MATCHES "^[0-9]+[af]?$")
      string(APPEND _cuda " sm_${_arch} compute_${_arch}")
    else()
      string(APPEND _cuda " ${_arch}")
    endif()
  endforeach()
  list(APPEND _ladder_backends "${_cuda}")
elseif(LADDER_HIP)
  string(REPLACE ";" " " _hip_archs "${LADDER_HIP_ARCHS}")
  list(APPEND _ladder_backends "hip ${_hip_archs}")
endif()
string(REPLACE ";" ", " LADDER_BUILD_BACKENDS "${_ladder_backends}")

set(LADDER_BUILD_VERSION "${PROJECT_VERSION}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/build_info.h.in
               ${PROJECT_BINARY_DIR}/generated/ladder/build_info.h @ONLY)
add_library(ladder_build_info INTERFACE)
add_library(ladder::build_info ALIAS ladder_build_info)
target_include_directories(ladder_build_info INTERFACE ${PROJECT_BINARY_DIR}/generated)

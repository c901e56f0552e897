# ladder::build_info: a generated header, ladder/build_info.h, saying what this build is: the
# project version, the git commit it was built from and the kernel backends built in (CPU
# always; CUDA with its architectures; HIP with its offload targets). `ladder --version` prints
# it and the agent reports it in its inventory, so a report says which build measured what.
#
# The commit is read before every build (cmake/BuildInfoWrite.cmake, a target that always runs
# and rewrites the header only when its text changes), so a build says what it was built from,
# not what the tree was when CMake last configured: "unknown" outside a git checkout (a source
# tarball) or without git; "-dirty" where tracked files differ from the commit.
# Include after kernels/ (the backends are read from the ladder_kernels target).
if(TARGET ladder_build_info)
  return()
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

set(_ladder_build_info_h ${PROJECT_BINARY_DIR}/generated/ladder/build_info.h)
set(_ladder_build_info_args
    -DLADDER_SOURCE_DIR=${PROJECT_SOURCE_DIR}
    -DLADDER_BUILD_VERSION=${PROJECT_VERSION}
    -DLADDER_BUILD_BACKENDS=${LADDER_BUILD_BACKENDS}
    -DLADDER_BUILD_INFO_IN=${CMAKE_CURRENT_LIST_DIR}/build_info.h.in
    -DLADDER_BUILD_INFO_OUT=${_ladder_build_info_h}
    -P ${CMAKE_CURRENT_LIST_DIR}/BuildInfoWrite.cmake)
# Once now, so the header exists from the start, then before every build.
execute_process(COMMAND ${CMAKE_COMMAND} ${_ladder_build_info_args} COMMAND_ERROR_IS_FATAL ANY)
add_custom_target(ladder_build_info_header
  COMMAND ${CMAKE_COMMAND} ${_ladder_build_info_args}
  BYPRODUCTS ${_ladder_build_info_h}
  VERBATIM)
add_library(ladder_build_info INTERFACE)
add_library(ladder::build_info ALIAS ladder_build_info)
# (An interface library's dependencies are its users': each waits for the header.)
add_dependencies(ladder_build_info ladder_build_info_header)
target_include_directories(ladder_build_info INTERFACE ${PROJECT_BINARY_DIR}/generated)

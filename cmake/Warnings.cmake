# One interface target carries the project's warning flags; every ladder target links it.
add_library(ladder_warnings INTERFACE)
add_library(ladder::warnings ALIAS ladder_warnings)
target_compile_options(ladder_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unused-parameter>
  # Checks ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED on absl::Mutex (GCC has no such check).
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:Clang>>:-Wthread-safety>)
if(LADDER_WERROR)
  target_compile_options(ladder_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()

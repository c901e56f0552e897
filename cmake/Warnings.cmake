# One interface target carries the project's warning flags; every ladder target links it.
add_library(ladder_warnings INTERFACE)
add_library(ladder::warnings ALIAS ladder_warnings)
target_compile_options(ladder_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unused-parameter>)
if(LADDER_WERROR)
  target_compile_options(ladder_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()

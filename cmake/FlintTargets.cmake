# Helpers that give every flint target the same warnings and options.

function(flint_set_options target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align
    -Woverloaded-virtual -Wimplicit-fallthrough
    -Wno-missing-field-initializers)
  if(FLINT_NATIVE AND NOT FLINT_FUZZ_ONLY)
    target_compile_options(${target} PRIVATE -march=native)
  endif()
endfunction()

# flint_library(NAME SOURCES ... DEPS ...): one layer of the engine.
function(flint_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  flint_set_options(${name})
endfunction()

# flint_test(NAME SOURCES ... DEPS ...): a GoogleTest executable registered with ctest.
function(flint_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  target_compile_definitions(${name} PRIVATE
    FLINT_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    FLINT_NPM_DIR="${FLINT_NPM_DIR}"
    FLINT_TEST_CACHE_DIR="${PROJECT_BINARY_DIR}/test-cache")
  flint_set_options(${name})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT ${ARG_TIMEOUT})
endfunction()

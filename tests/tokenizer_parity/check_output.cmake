# Runs a command and requires its stdout to be exactly EXPECTED (plus one "\n" if NEWLINE is
# true), which PASS_REGULAR_EXPRESSION cannot check (ctest adds a newline to the output).
#   cmake -DCOMMAND=prog|arg|... -DEXPECTED=text -DNEWLINE=0|1 -P check_output.cmake
string(REPLACE "|" ";" command "${COMMAND}")
execute_process(COMMAND ${command} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
set(want "${EXPECTED}")
if(NEWLINE)
  string(APPEND want "\n")
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${command} exited with ${rc}")
endif()
if(NOT out STREQUAL want)
  message(FATAL_ERROR "${command}\nprinted   [${out}]\nexpected  [${want}]")
endif()

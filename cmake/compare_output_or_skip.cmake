# As compare_output.cmake, but EXE exiting with 77 (what it needs cannot
# run here: zk_run without java or ZooKeeper) is a skip: its reason is
# printed after "SKIPPED:" (the test's SKIP_REGULAR_EXPRESSION).
string(REPLACE "|" ";" args "${ARGS}")
execute_process(COMMAND ${EXE} ${args} OUTPUT_VARIABLE out ERROR_VARIABLE err
  RESULT_VARIABLE rc)
if(rc EQUAL 77)
  message("SKIPPED: ${err}")
  return()
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${EXE} exited with ${rc}\n${err}")
endif()
file(READ ${EXPECTED} want)
if(NOT out STREQUAL want)
  message(FATAL_ERROR "output differs from ${EXPECTED}:\n--- got ---\n${out}--- want ---\n${want}")
endif()

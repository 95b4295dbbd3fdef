# Run EXE and compare its standard output, byte for byte, with EXPECTED.
execute_process(COMMAND ${EXE} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${EXE} exited with ${rc}")
endif()
file(READ ${EXPECTED} want)
if(NOT out STREQUAL want)
  message(FATAL_ERROR "output differs from ${EXPECTED}:\n--- got ---\n${out}--- want ---\n${want}")
endif()

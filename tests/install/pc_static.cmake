# A static link the pkg-config way: install the build tree BUILD into a
# scratch prefix, then cc SRC/consumer_source.c with
# `pkg-config --static --cflags --libs resil`, the static library in place
# of -lresil, and run it. Fails when resil.pc's Libs.private misses a
# library the static archive needs (the ZooKeeper client, pthread, ...).
set(prefix ${BUILD}/install-pc-static/prefix)
file(REMOVE_RECURSE ${BUILD}/install-pc-static)
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${prefix}
  RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install failed")
endif()
file(GLOB_RECURSE pc ${prefix}/resil.pc)
file(GLOB_RECURSE archive ${prefix}/libresil.a)
get_filename_component(pcdir ${pc} DIRECTORY)
set(ENV{PKG_CONFIG_PATH} ${pcdir})
execute_process(COMMAND pkg-config --static --cflags --libs resil
  OUTPUT_VARIABLE flags RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config --static resil failed")
endif()
separate_arguments(flags)
list(TRANSFORM flags REPLACE "^-lresil$" "${archive}")
execute_process(COMMAND cc ${SRC}/consumer_source.c ${flags}
  -o ${BUILD}/install-pc-static/consumer RESULT_VARIABLE rc
  ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cc with pkg-config --static flags failed: ${flags}\n${err}")
endif()
execute_process(COMMAND ${BUILD}/install-pc-static/consumer RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "static pkg-config consumer exited ${rc}")
endif()

# The ~~~c block of PAGE must be FILE, byte for byte: a program that a page
# shows besides its one doc program (cmake/doc_programs.cmake takes one a
# page) lives in examples/, is built and run there, and this keeps the
# page's copy of it true. One ~~~c block a page.
file(READ ${PAGE} text)
file(READ ${FILE} want)
string(FIND "${text}" "\n~~~c\n" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${PAGE}: no ~~~c block")
endif()
math(EXPR at "${at} + 6")
string(SUBSTRING "${text}" ${at} -1 rest)
string(FIND "${rest}" "\n~~~\n" end)
if(end EQUAL -1)
  message(FATAL_ERROR "${PAGE}: the ~~~c block is not closed")
endif()
math(EXPR end "${end} + 1")
string(SUBSTRING "${rest}" 0 ${end} got)
if(NOT got STREQUAL want)
  message(FATAL_ERROR "${PAGE}'s ~~~c block differs from ${FILE}")
endif()

# The installed package builds a consumer with find_package(loom) and with pkg-config (in plain
# builds: a sanitizer or fuzzer build's library needs its runtime, which a consumer does not link).
if(NOT LOOM_SANITIZE AND NOT LOOM_FUZZ)
  add_test(NAME install COMMAND bash ${CMAKE_SOURCE_DIR}/tests/install/check-install.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
endif()
if(LOOM_CUDA)
  # every library function the CUDA module calls is exported by the command line and by libloom.so
  add_test(NAME cuda-module-symbols COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cuda-module-symbols.sh
    $<TARGET_FILE:loom-cuda> $<TARGET_FILE:loom-cli> $<TARGET_FILE:loom-shared>)
endif()
# the static library's global symbols: loom_* or an internal subsystem marker; the shared library's exports: the LOOM_API declarations (tests/library-symbols.sh)
add_test(NAME library-symbols COMMAND bash ${CMAKE_SOURCE_DIR}/tests/library-symbols.sh $<TARGET_FILE:loom> $<TARGET_FILE:loom-shared> ${CMAKE_SOURCE_DIR}/include)

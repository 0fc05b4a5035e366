# gguf-tests.cmake -- extra sources of the GGUF tests (the malformed-file generator).
target_sources(test-gguf-corpus PRIVATE ${CMAKE_SOURCE_DIR}/tests/gguf/gguf-gen.c)

# gguf-tests.cmake -- the GGUF tests' extra parts: the malformed-file generator's source, and a
# scripted check of `loom info` on the shared model (text, JSON, errors).
target_sources(test-gguf-corpus PRIVATE ${CMAKE_SOURCE_DIR}/tests/gguf/gguf-gen.c)

add_test(NAME gguf-info
  COMMAND ${CMAKE_COMMAND} -DLOOM_BIN=$<TARGET_FILE:loom-cli>
          -DMODEL=${LOOM_SHARED_MODELS}/stories260K-llamacpp.gguf
          -DROUNDTRIP=${CMAKE_BINARY_DIR}/gguf-roundtrip/mixed-32.gguf -DTMPDIR=${CMAKE_BINARY_DIR}
          -P ${CMAKE_SOURCE_DIR}/tests/gguf/check-info.cmake)
# test-gguf writes the round-trip file this test reads
set_tests_properties(gguf-info PROPERTIES DEPENDS test-gguf SKIP_REGULAR_EXPRESSION "skipped:" TIMEOUT 120)

# an interrupted streamed write removes its temporary file
add_test(NAME gguf-writer-signal COMMAND bash ${CMAKE_SOURCE_DIR}/tests/gguf/writer-signal.sh $<TARGET_FILE:loom-cli>)
set_tests_properties(gguf-writer-signal PROPERTIES TIMEOUT 120)

# llama-tests.cmake -- scripted checks of the model tools: `loom gen-model` refusing impossible sizes, its byte-level vocabulary, --vocab-from, and `loom chat` through a pipe.
add_test(NAME gen-model-size COMMAND bash ${CMAKE_SOURCE_DIR}/tests/llama/gen-model-size.sh $<TARGET_FILE:loom-cli>)
set_tests_properties(gen-model-size PROPERTIES TIMEOUT 120)
add_test(NAME gen-model-vocab COMMAND bash ${CMAKE_SOURCE_DIR}/tests/llama/gen-model-vocab.sh $<TARGET_FILE:loom-cli>)
set_tests_properties(gen-model-vocab PROPERTIES TIMEOUT 120)
add_test(NAME chat COMMAND bash ${CMAKE_SOURCE_DIR}/tests/llama/chat.sh $<TARGET_FILE:loom-cli> ${CMAKE_BINARY_DIR}/e2e/stories260K.gguf ${LOOM_SHARED_MODELS})
set_tests_properties(chat PROPERTIES FIXTURES_REQUIRED stories260K TIMEOUT 300)
add_test(NAME gen-model-vocab-from COMMAND bash ${CMAKE_SOURCE_DIR}/tests/llama/gen-model-vocab-from.sh $<TARGET_FILE:loom-cli> ${LOOM_SHARED_MODELS})
set_tests_properties(gen-model-vocab-from PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)

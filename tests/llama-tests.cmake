# llama-tests.cmake -- scripted checks of the model tools: `loom gen-model` refusing impossible sizes, its byte-level vocabulary, and `loom quantize`.
add_test(NAME gen-model-size COMMAND bash ${CMAKE_SOURCE_DIR}/tests/llama/gen-model-size.sh $<TARGET_FILE:loom-cli>)
set_tests_properties(gen-model-size PROPERTIES TIMEOUT 120)
add_test(NAME gen-model-vocab COMMAND bash ${CMAKE_SOURCE_DIR}/tests/llama/gen-model-vocab.sh $<TARGET_FILE:loom-cli>)
set_tests_properties(gen-model-vocab PROPERTIES TIMEOUT 120)
add_test(NAME quantize-cli COMMAND bash ${CMAKE_SOURCE_DIR}/tests/llama/quantize-cli.sh $<TARGET_FILE:loom-cli>)
set_tests_properties(quantize-cli PROPERTIES TIMEOUT 120)

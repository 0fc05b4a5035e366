# llama-tests.cmake -- scripted checks of the model tools: `loom gen-model` refusing impossible sizes.
add_test(NAME gen-model-size COMMAND bash ${CMAKE_SOURCE_DIR}/tests/llama/gen-model-size.sh $<TARGET_FILE:loom-cli>)
set_tests_properties(gen-model-size PROPERTIES TIMEOUT 120)

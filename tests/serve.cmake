# `loom serve` tests (only where it is built): raw HTTP with curl, and the official openai npm client
# (which `make test` installs into ${CMAKE_BINARY_DIR}/npm; skipped without it), and the chat page in
# headless Chromium (skipped without it). Loopback only.
if(LOOM_SERVE)
  set(SERVE_MODEL ${LOOM_SHARED_MODELS}/stories260K-llamacpp.gguf)
  add_test(NAME serve-curl COMMAND bash ${CMAKE_SOURCE_DIR}/tests/serve/curl.sh $<TARGET_FILE:loom-cli> ${SERVE_MODEL})
  set_tests_properties(serve-curl PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
  add_test(NAME serve-openai COMMAND bash ${CMAKE_SOURCE_DIR}/tests/serve/openai.sh $<TARGET_FILE:loom-cli> ${SERVE_MODEL} ${CMAKE_BINARY_DIR}/npm)
  set_tests_properties(serve-openai PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
  add_test(NAME serve-page COMMAND bash ${CMAKE_SOURCE_DIR}/tests/serve/page.sh $<TARGET_FILE:loom-cli> ${SERVE_MODEL} ${CMAKE_BINARY_DIR}/serve-page.png)
  set_tests_properties(serve-page PROPERTIES TIMEOUT 180 SKIP_RETURN_CODE 77)
endif()

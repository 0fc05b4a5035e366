# The installed package builds a consumer with find_package(loom) and with pkg-config.
add_test(NAME install COMMAND bash ${CMAKE_SOURCE_DIR}/tests/install/check-install.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})

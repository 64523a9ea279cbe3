# Adds the llama.cpp tree named by GGML_RS_LLAMA_CPP_DIR and, with GGML_RS_REPLACE, builds its
# ggml-base without ggml-backend.cpp and ggml-alloc.c, linked to this library instead.
# The upstream tree is not edited: only the ggml-base target is adjusted from here.

# what we need from the tree (the defaults of a standalone build, minus what needs the network)
set(BUILD_SHARED_LIBS      ON  CACHE BOOL "")
set(GGML_NATIVE            OFF CACHE BOOL "")
set(GGML_RPC               ON  CACHE BOOL "")
set(LLAMA_BUILD_COMMON     ON  CACHE BOOL "")
set(LLAMA_BUILD_TESTS      ON  CACHE BOOL "")
set(LLAMA_BUILD_TOOLS      ON  CACHE BOOL "")
set(LLAMA_BUILD_EXAMPLES   ON  CACHE BOOL "")
set(LLAMA_BUILD_SERVER     OFF CACHE BOOL "")
set(LLAMA_BUILD_APP        OFF CACHE BOOL "")
set(LLAMA_OPENSSL          OFF CACHE BOOL "")
set(LLAMA_TESTS_INSTALL    OFF CACHE BOOL "")
set(LLAMA_TOOLS_INSTALL    OFF CACHE BOOL "")
# what a standalone llama.cpp build turns on for ggml
set(GGML_LLAMAFILE_DEFAULT   ON)
set(GGML_CUDA_GRAPHS_DEFAULT ON)

add_subdirectory(${GGML_RS_LLAMA_CPP_DIR} llama.cpp EXCLUDE_FROM_ALL)

if (GGML_RS_REPLACE)
    if (NOT GGML_RS_BUILD_RUST)
        message(FATAL_ERROR "GGML_RS_REPLACE needs GGML_RS_BUILD_RUST")
    endif()
    get_target_property(_ggml_base_sources ggml-base SOURCES)
    list(FILTER _ggml_base_sources EXCLUDE REGEX "(^|/)ggml-backend\\.cpp$")
    list(FILTER _ggml_base_sources EXCLUDE REGEX "(^|/)ggml-alloc\\.c$")
    set_property(TARGET ggml-base PROPERTY SOURCES ${_ggml_base_sources})
    if (BUILD_SHARED_LIBS)
        target_link_libraries(ggml-base PUBLIC ggml-rs)
    else()
        target_link_libraries(ggml-base PUBLIC ggml-rs-static)
        set_property(TARGET ggml-rs-static APPEND PROPERTY INTERFACE_LINK_LIBRARIES ggml-base)
    endif()
    add_dependencies(ggml-base ggml-rs-cargo)
    message(STATUS "ggml-rs: ggml-base is built without ggml-backend.cpp/ggml-alloc.c, linked to ${GGML_RS_SHARED_LIB}")
else()
    message(STATUS "ggml-rs: ggml-base is upstream's own (reference build)")
endif()

# the programs the project's checks run; `cmake --build . --target ggml-rs-programs` builds them all
set(GGML_RS_UPSTREAM_PROGRAMS
    llama-simple llama-bench llama-imatrix ggml-rpc-server
    test-backend-ops test-opt test-alloc test-tiled-mulmat test-rpc-multi-server
    test-llama-archs test-save-load-state test-recurrent-state-rollback test-backend-sampler
    test-thread-safety test-state-restore-fragmented test-autorelease test-model-load-cancel)
add_custom_target(ggml-rs-programs DEPENDS ${GGML_RS_UPSTREAM_PROGRAMS})
# the targets CTest runs, built by `all` in the project's own directories (c_tests/, drivers/)

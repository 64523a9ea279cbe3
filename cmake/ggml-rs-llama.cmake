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

if (GGML_RS_CPU_RUST)
    # "ours only": no upstream backend library at all (the RPC client is one)
    set(GGML_RPC OFF CACHE BOOL "" FORCE)
endif()

add_subdirectory(${GGML_RS_LLAMA_CPP_DIR} llama.cpp EXCLUDE_FROM_ALL)

# extra compile flags of llama.cpp's own libraries (libllama, llama-common[-base]; not ggml, not the
# programs): empty by default, as the tree builds them. The aarch64 builds (scripts/aarch64.sh)
# pass -O0: stock and ours share these libraries there, the checks under qemu compare ggml's
# results, and llama-common was most of that build.
set(GGML_RS_LLAMA_OWN_FLAGS "" CACHE STRING "extra compile flags of libllama and llama-common")
if (GGML_RS_LLAMA_OWN_FLAGS)
    separate_arguments(_llama_own_flags UNIX_COMMAND "${GGML_RS_LLAMA_OWN_FLAGS}")
    foreach(_t llama llama-common-base llama-common)
        if (TARGET ${_t})
            target_compile_options(${_t} PRIVATE ${_llama_own_flags})
        endif()
    endforeach()
endif()

include(ggml-rs-replace)

# The Rust CPU backend in place of upstream's ggml-cpu. GGML_CPU stays ON, so the tree configures
# as usual (GGML_USE_CPU: ggml's registry calls ggml_backend_cpu_reg(); the CPU tests such as
# test-barrier, test-rope, test-quantize-fns are added), but ggml links libggml_rs_cpu.so instead
# of the ggml-cpu target, which nothing links any more and so is never built (the tree was added
# EXCLUDE_FROM_ALL). Programs that call ggml-cpu.h's functions get ours through ggml's link
# interface.
if (GGML_RS_CPU_RUST)
    if (NOT GGML_RS_BUILD_RUST OR NOT BUILD_SHARED_LIBS)
        message(FATAL_ERROR "GGML_RS_CPU_RUST needs GGML_RS_BUILD_RUST and BUILD_SHARED_LIBS")
    endif()
    foreach(_prop LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
        get_target_property(_libs ggml ${_prop})
        if (_libs)
            list(REMOVE_ITEM _libs ggml-cpu)
            set_property(TARGET ggml PROPERTY ${_prop} ${_libs})
        endif()
    endforeach()
    target_link_libraries(ggml PUBLIC ggml-rs-cpu)
    # what ggml-cpu's link interface gave its users
    target_compile_definitions(ggml INTERFACE GGML_BACKEND_SHARED)
    message(STATUS "ggml-rs: ggml is linked to the Rust CPU backend ${GGML_RS_CPU_SHARED_LIB}, not to upstream's ggml-cpu")
endif()

# the programs the project's checks run; `cmake --build . --target ggml-rs-programs` builds them all
set(GGML_RS_UPSTREAM_PROGRAMS
    llama-simple llama-bench llama-imatrix llama-quantize ggml-rpc-server
    test-backend-ops test-opt test-alloc test-tiled-mulmat test-rpc-multi-server
    test-llama-archs test-save-load-state test-recurrent-state-rollback test-backend-sampler
    test-thread-safety test-state-restore-fragmented test-autorelease test-model-load-cancel)
add_custom_target(ggml-rs-programs DEPENDS ${GGML_RS_UPSTREAM_PROGRAMS})
# the targets CTest runs, built by `all` in the project's own directories (c_tests/, drivers/)

# Adds the plain ggml tree named by GGML_RS_GGML_DIR (another ABI profile's tree, such as
# stable-diffusion.cpp's ggml 0.9.8) with its own tests and, with GGML_RS_REPLACE, builds its
# ggml-base without ggml-backend.cpp and ggml-alloc.c, linked to the library built for
# GGML_RS_PROFILE. The upstream tree is not edited: only the ggml-base target is adjusted.

if (NOT GGML_RS_PROFILE)
    message(FATAL_ERROR "GGML_RS_GGML_DIR needs GGML_RS_PROFILE (the tree's ggml version, a profile of scripts/pin.env)")
endif()

set(BUILD_SHARED_LIBS  ON  CACHE BOOL "")
set(GGML_NATIVE        OFF CACHE BOOL "")
set(GGML_BUILD_TESTS   ON  CACHE BOOL "")
set(GGML_BUILD_EXAMPLES OFF CACHE BOOL "")

# The tree's users compile all of ggml with the profile's GGML_MAX_NAME (stable-diffusion.cpp's
# CMakeLists.txt: add_definitions(-DGGML_MAX_NAME=128)); ggml_tensor's size depends on it, so the
# tree, its tests and ours are compiled with it too.
add_compile_definitions(GGML_MAX_NAME=${GGML_RS_MAX_NAME})

add_subdirectory(${GGML_RS_GGML_DIR} ggml)

include(ggml-rs-replace)

# the tree's test programs the project's checks run (`cmake --build . --target ggml-rs-programs`)
set(GGML_RS_UPSTREAM_PROGRAMS)
foreach(_t test-backend-ops test-opt test-arange test-cont test-conv-transpose test-conv-transpose-1d test-conv1d
           test-conv1d-dw-c1 test-conv1d-dw-c2 test-conv2d test-conv2d-dw test-customop test-dup test-interpolate
           test-pad-reflect-1d test-pool test-quantize-fns test-rel-pos test-roll test-timestep_embedding)
    if (TARGET ${_t})
        list(APPEND GGML_RS_UPSTREAM_PROGRAMS ${_t})
    endif()
endforeach()
add_custom_target(ggml-rs-programs DEPENDS ${GGML_RS_UPSTREAM_PROGRAMS})

# Builds the Rust library with cargo and exposes it as imported targets:
#   ggml-rs::ggml-rs         the shared library (libggml_rs.so)
#   ggml-rs::ggml-rs-static  the static library (libggml_rs.a)
#   ggml-rs::ggml-rs-cpu     the Rust CPU backend (libggml_rs_cpu.so), built when something links it
# cargo is run on every build; it is incremental, so an unchanged tree costs a second.
find_program(CARGO cargo HINTS $ENV{HOME}/.cargo/bin REQUIRED)

if (DEFINED ENV{CARGO_TARGET_DIR})
    set(GGML_RS_CARGO_TARGET_DIR $ENV{CARGO_TARGET_DIR})
elseif (GGML_RS_PROFILE)
    # another ABI profile: its own target dir, so the default build's library stays
    set(GGML_RS_CARGO_TARGET_DIR ${GGML_RS_ROOT}/target/${GGML_RS_PROFILE_FEATURE})
else()
    set(GGML_RS_CARGO_TARGET_DIR ${GGML_RS_ROOT}/target)
endif()
set(GGML_RS_CARGO_FEATURES "")
if (GGML_RS_PROFILE)
    set(GGML_RS_CARGO_FEATURES --features ${GGML_RS_PROFILE_FEATURE})
endif()

if (GGML_RS_CARGO_PROFILE STREQUAL "dev")
    set(GGML_RS_CARGO_OUT ${GGML_RS_CARGO_TARGET_DIR}/debug)
else()
    set(GGML_RS_CARGO_OUT ${GGML_RS_CARGO_TARGET_DIR}/${GGML_RS_CARGO_PROFILE})
endif()

set(GGML_RS_SHARED_LIB ${GGML_RS_CARGO_OUT}/libggml_rs.so)
set(GGML_RS_STATIC_LIB ${GGML_RS_CARGO_OUT}/libggml_rs.a)

add_custom_target(ggml-rs-cargo ALL
    COMMAND ${CMAKE_COMMAND} -E env CARGO_TARGET_DIR=${GGML_RS_CARGO_TARGET_DIR}
            ${CARGO} build --lib --profile ${GGML_RS_CARGO_PROFILE} ${GGML_RS_CARGO_FEATURES} --manifest-path ${GGML_RS_ROOT}/Cargo.toml
    BYPRODUCTS ${GGML_RS_SHARED_LIB} ${GGML_RS_STATIC_LIB}
    WORKING_DIRECTORY ${GGML_RS_ROOT}
    COMMENT "cargo build (ggml-rs, ${GGML_RS_CARGO_PROFILE})"
    USES_TERMINAL)

add_library(ggml-rs SHARED IMPORTED GLOBAL)
set_target_properties(ggml-rs PROPERTIES
    IMPORTED_LOCATION ${GGML_RS_SHARED_LIB}
    IMPORTED_SONAME libggml_rs.so
    INTERFACE_INCLUDE_DIRECTORIES ${GGML_RS_INCLUDE_DIR})
add_dependencies(ggml-rs ggml-rs-cargo)
add_library(ggml-rs::ggml-rs ALIAS ggml-rs)

add_library(ggml-rs-static STATIC IMPORTED GLOBAL)
set_target_properties(ggml-rs-static PROPERTIES
    IMPORTED_LOCATION ${GGML_RS_STATIC_LIB}
    INTERFACE_INCLUDE_DIRECTORIES ${GGML_RS_INCLUDE_DIR}
    INTERFACE_LINK_LIBRARIES "pthread;dl;m")
add_dependencies(ggml-rs-static ggml-rs-cargo)
add_library(ggml-rs::ggml-rs-static ALIAS ggml-rs-static)

# the Rust CPU backend: the drop-in for upstream's libggml-cpu (GGML_RS_CPU_RUST)
set(GGML_RS_CPU_SHARED_LIB ${GGML_RS_CARGO_OUT}/libggml_rs_cpu.so)
add_custom_target(ggml-rs-cpu-cargo
    COMMAND ${CMAKE_COMMAND} -E env CARGO_TARGET_DIR=${GGML_RS_CARGO_TARGET_DIR}
            ${CARGO} build --lib -p ggml-rs-cpu --profile ${GGML_RS_CARGO_PROFILE} --manifest-path ${GGML_RS_ROOT}/Cargo.toml
    BYPRODUCTS ${GGML_RS_CPU_SHARED_LIB}
    WORKING_DIRECTORY ${GGML_RS_ROOT}
    COMMENT "cargo build (ggml-rs-cpu, ${GGML_RS_CARGO_PROFILE})"
    USES_TERMINAL)
add_library(ggml-rs-cpu SHARED IMPORTED GLOBAL)
set_target_properties(ggml-rs-cpu PROPERTIES
    IMPORTED_LOCATION ${GGML_RS_CPU_SHARED_LIB}
    IMPORTED_SONAME libggml_rs_cpu.so)
add_dependencies(ggml-rs-cpu ggml-rs-cpu-cargo)
add_library(ggml-rs::ggml-rs-cpu ALIAS ggml-rs-cpu)

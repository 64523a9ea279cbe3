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

# Cross-compiling (a CMake toolchain file, e.g. scripts/aarch64.sh's): cargo builds for the Rust
# target triple GGML_RS_CARGO_TARGET (default: aarch64-unknown-linux-gnu when the toolchain says
# Linux on aarch64; empty, i.e. the host, otherwise), linked by the toolchain's C compiler, into
# <target dir>/<triple>/<profile>. A native build passes no --target: nothing changes there.
set(_ggml_rs_cargo_target_default "")
if (CMAKE_CROSSCOMPILING AND CMAKE_SYSTEM_NAME STREQUAL "Linux" AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
    set(_ggml_rs_cargo_target_default aarch64-unknown-linux-gnu)
endif()
set(GGML_RS_CARGO_TARGET "${_ggml_rs_cargo_target_default}" CACHE STRING "Rust target triple cargo builds for (empty: the host)")
set(GGML_RS_CARGO_TARGET_ARGS "")
set(GGML_RS_CARGO_ENV "")
set(GGML_RS_CARGO_OUT_DIR ${GGML_RS_CARGO_TARGET_DIR})
if (GGML_RS_CARGO_TARGET)
    set(GGML_RS_CARGO_TARGET_ARGS --target ${GGML_RS_CARGO_TARGET})
    string(TOUPPER "${GGML_RS_CARGO_TARGET}" _triple_upper)
    string(REPLACE "-" "_" _triple_upper "${_triple_upper}")
    string(REPLACE "-" "_" _triple_lower "${GGML_RS_CARGO_TARGET}")
    set(GGML_RS_CARGO_ENV CARGO_TARGET_${_triple_upper}_LINKER=${CMAKE_C_COMPILER} CC_${_triple_lower}=${CMAKE_C_COMPILER})
    set(GGML_RS_CARGO_OUT_DIR ${GGML_RS_CARGO_TARGET_DIR}/${GGML_RS_CARGO_TARGET})
endif()
if (GGML_RS_PROFILE)
    set(GGML_RS_CARGO_FEATURES --features ${GGML_RS_PROFILE_FEATURE})
endif()

if (GGML_RS_CARGO_PROFILE STREQUAL "dev")
    set(GGML_RS_CARGO_OUT ${GGML_RS_CARGO_OUT_DIR}/debug)
else()
    set(GGML_RS_CARGO_OUT ${GGML_RS_CARGO_OUT_DIR}/${GGML_RS_CARGO_PROFILE})
endif()

set(GGML_RS_SHARED_LIB ${GGML_RS_CARGO_OUT}/libggml_rs.so)
set(GGML_RS_STATIC_LIB ${GGML_RS_CARGO_OUT}/libggml_rs.a)

add_custom_target(ggml-rs-cargo ALL
    COMMAND ${CMAKE_COMMAND} -E env CARGO_TARGET_DIR=${GGML_RS_CARGO_TARGET_DIR} ${GGML_RS_CARGO_ENV}
            ${CARGO} build --lib --profile ${GGML_RS_CARGO_PROFILE} ${GGML_RS_CARGO_FEATURES} ${GGML_RS_CARGO_TARGET_ARGS} --manifest-path ${GGML_RS_ROOT}/Cargo.toml
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
    COMMAND ${CMAKE_COMMAND} -E env CARGO_TARGET_DIR=${GGML_RS_CARGO_TARGET_DIR} ${GGML_RS_CARGO_ENV}
            ${CARGO} build --lib -p ggml-rs-cpu --profile ${GGML_RS_CARGO_PROFILE} ${GGML_RS_CARGO_TARGET_ARGS} --manifest-path ${GGML_RS_ROOT}/Cargo.toml
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

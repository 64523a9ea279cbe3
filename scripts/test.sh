#!/usr/bin/env bash
# The whole test suite, from a fresh machine with the Rust toolchain (what .ci/run runs):
#   1. Rust: formatting, clippy, unit and property tests of every crate (planner on random graphs,
#      residency, header drift)
#   2. the pinned upstream tree, built as is (reference) and with our library; the Rust CPU
#      backend's numeric core (crates/ggml-rs-cpu) against the reference build's libraries
#   3. the ABI test (symbols, signatures, layouts, our headers on their own)
#   4. the C tests (CTest) with our library; upstream must fail the scenarios of its bugs
#   5. upstream's own programs on our library: test-alloc, test-opt, test-backend-ops
#   6. upstream llama.cpp's own tests on our library: every architecture (dense, MoE, recurrent,
#      encoder-decoder) against CPU and through a save/load round trip, state save/load and
#      rollback, backend sampling, threads, imatrix (eval callback) identical to upstream
#   7. processes: rpc-servers on loopback + local CPU (scheduler test, test-backend-ops test
#      mode against the RPC backend, every architecture on RPC and on the meta device, llama with
#      layers on a server, tensors split across two servers)
#   8. llama.cpp drop-in: the same logits (bit for bit) and text as upstream for a matrix of
#      settings, link-time and LD_PRELOAD
#   9. LD_PRELOAD into any process: programs without ggml start as usual; a C client and
#      llama-cpp-python that dlopen libllama (RTLD_LOCAL) get the same tokens and logits, on ggml-rs
#  10. the Python package (python/): installed into a clean venv as a user would, its pytest suite
#      (seed scenarios of both allocators, two schedulers in two threads, misuse, the memory plan
#      report against the tensors' places) on our build
#  11. the memory plan report (GGML_RS_ALLOC_REPORT): the reports of a llama graph and of C graphs
#      equal the places read back from their tensors, every report of the C scenarios is sound
#      (no live overlap), and the SVG renders in headless Chromium
#  12. the Rust API (crates/ggml-rs-api): its bindgen declarations against the pinned headers, its
#      doc-tests (the lifetime rules as compile_fail tests), tests and example on the stock build's
#      libraries with our library loaded first; upstream alone must fail the seed scenario
#  13. the Rust CPU backend (libggml_rs_cpu.so): its ABI against ggml-cpu.h, as a module beside
#      upstream's native CPU (C test, test-backend-ops test -b RSCPU: 0 FAIL), and "ours only"
#      (build rscpu: our core + our CPU backend, no upstream backend library in the process):
#      test-barrier, test-rope, test-quantize-fns, test-opt; whole models against upstream's native
#      CPU (scripts/cpu_compare.sh): 64 greedy tokens, every position's top token and logits,
#      llama-perplexity within 0.1%; on an AVX-512 machine all ten tiny / medium models (f32, f16,
#      q8_0, q4_0, q4_K) with logits identical to upstream native's (error <= 1e-9), with flash
#      attention off and on (llama.cpp's default), and on the long prompt (its tiled attention)
#      and 300 tokens (its KV split) too
#  14. the image job: stable-diffusion.cpp (its own ggml, 0.9.8) on a random-weight Flux.2-klein:
#      stock is deterministic (run to run, -t 1 / -t 2), and the image is byte-identical with
#      ggml-base linked to our library built with the 0.9.8 ABI profile and with that library in
#      LD_PRELOAD (SKIP, naming why, while the profile does not exist)
#  15. the Rust CUDA backend (libggml_rs_cuda.so), without a GPU: builds with no CUDA toolkit, its
#      host-side unit tests (kernel cache keys, launch shapes, op dispatch, zero-device registry,
#      the no-driver path), every kernel of kernels/ compiled to PTX for sm_90 by NVRTC (the
#      pinned wheel, scripts/cuda-nvrtc.sh), the module loaded by upstream's loader on our core
#      (one log line, ggml-cuda.h exported, zero devices), the GPU check's carry prepared; the GPU
#      parts are scripts/gpu-check.sh's
#  16. the ABI profile 0.9.8 (stable-diffusion.cpp's ggml): its Rust checks, that tree built as is
#      and with the library built for it, its ABI test, the seed scenarios (upstream 0.9.8 fails
#      them), its own ggml tests (ctest, grad/support -b CPU against the reference, test-opt)
#  17. the abi-0-26-0 profile (ggml 0.26.0 of llama-cpp-sys-2): symbols, layouts, the C tests and
#      test-alloc on it; a Rust program using llama-cpp-2 gets the same tokens and logits on ours
#  18. aarch64 (scripts/aarch64.sh): the Rust CPU backend's NEON kernel sets cross-built and run
#      under qemu-user: the crate's tests at scalar / neon / dotprod, its kernels against upstream's
#      aarch64 build bit for bit, test-backend-ops -b RSCPU, and a tiny model's text stock vs ours
#  19. an AVX2-only x86 CPU (qemu-x86_64 -cpu max: AVX2 + FMA + F16C, no AVX-512): the crate's
#      tests and test-backend-ops -b RSCPU on the avx2 set with no AVX-512 in the machine
#
# Usage: scripts/test.sh [--list] [STEP...]: no STEP runs them all; a STEP is a number ("13") or a
# word of a step's title ("aarch64"), and runs that step alone after the set-up and the two builds
# of step 2 every step needs (cached: seconds once built). --list lists the steps.
# Environment: GGML_RS_FUZZ_ITERS (scheduler fuzz graphs, default 300), GGML_RS_PLAN_FUZZ
# (planner fuzz graphs, default 3000), GGML_RS_QUICK=1 (fewer settings), GGML_RS_JOBS (build jobs
# and test-backend-ops workers, default: the cores).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# the steps' titles, in order (the step lines of scripts/steps/)
step_titles() { grep -h -E '^step "' "$ROOT"/scripts/steps/[0-9][0-9]-*.sh | sed -E 's/^step "(.*)"$/\1/'; }

for arg in "$@"; do
    case "$arg" in
        --list) step_titles; exit 0 ;;
        -*) sed -n '/^# Usage/,/^# Environment/p' "${BASH_SOURCE[0]}"; exit 2 ;;
        *)
            step_titles | awk -v w="$arg" \
                'BEGIN {n = 0} (w ~ /^[0-9]+$/ && index($0, w ". ") == 1) || (w !~ /^[0-9]+$/ && index(tolower($0), tolower(w))) {n++} END {exit n == 0}' \
                || { echo "no step matches '$arg'; the steps (scripts/test.sh --list):"; step_titles | sed 's/^/  /'; exit 2; }
            STEPS_WANTED+=("$arg")
            ;;
    esac
done

FUZZ_ITERS=${GGML_RS_FUZZ_ITERS:-300}
PLAN_FUZZ=${GGML_RS_PLAN_FUZZ:-3000}
# test-backend-ops's workers (-j): each takes its own pair of backends and runs cases one after the
# other; a case's set-up, reference and comparison run on one thread, so one worker a core keeps
# the machine busy (GGML_RS_JOBS caps it, as it caps the builds)
TBO_JOBS=${GGML_RS_JOBS:-$(nproc)}
T=$(mktemp -d)
PROMPT="Once upon a time there was a little model that generated random text"
PROMPT_WORDS="the quick brown fox jumps over the lazy dog $PROMPT"
# the logs stay when a check failed (their folder is named last), and go when all passed
trap 'stop_rpc_server; if [ "$FAILED" = 0 ]; then rm -rf "$T"; else echo "the logs of this run: $T"; fi' EXIT

step "set-up"
setup_tools || exit 1
make_models || exit 1
# the browser of step 11 (Debian's chromium); its check says so if it could not be installed
"$ROOT/scripts/upstream.sh" deps-browser || echo "chromium could not be installed (apt)"

# the steps, in order (scripts/steps/NN-*.sh): each defines its checks and runs them where
# selected; a later step may use what an earlier one defined (paths, functions)
for f in "$ROOT"/scripts/steps/[0-9][0-9]-*.sh; do
    # shellcheck source=/dev/null
    source "$f"
done

summary

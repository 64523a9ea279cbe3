# step 11 of scripts/test.sh (sourced by it, after the set-up: lib.sh's check/step, the
# paths and $T are set; scripts/test.sh 11 runs this step alone)

step "11. the memory plan report"
# a llama graph: the medium model evaluates a prompt through a C client of the stock build with
# our library preloaded (c_tests/report_llama.c reads back every tensor's place from the eval
# callback); the last allocation's report must hold them all at their places, and every report
# of the run must be sound (boxes inside the plan, no two live tensors sharing bytes)
report_llama() {
    local prog=$T/report_llama model=$MODELS/medium-q8_0.gguf
    cc -O1 -Wall -Wextra -Werror -o "$prog" "$ROOT/c_tests/report_llama.c" -I"$TREE/include" -I"$TREE/ggml/include" \
        -L"$BUILD_STOCK/bin" -lllama -lggml-base -Wl,-rpath,"$BUILD_STOCK/bin" || return 1
    if [ ! -f "$model" ]; then
        "$("$ROOT/scripts/pyenv.sh" | tail -n1)" "$ROOT/scripts/gen_model.py" --size medium --type q8_0 --seed 1 --out "$model" >&2 || return 1
    fi
    GGML_RS_ALLOC_REPORT="$T/report-llama" LD_PRELOAD="$LIB" "$prog" "$model" "$PROMPT" "$T/report-llama.tsv" 2> "$T/report-llama.err" \
        || { tail -n 3 "$T/report-llama.err"; return 1; }
    python3 "$ROOT/scripts/check_report.py" check "$T/report-llama" --readback "$T/report-llama.tsv" --min-files 2
}
check "memory plan report: a llama graph (medium model, LD_PRELOAD): boxes = the tensors' places, no live overlap" report_llama
# C graphs (c_tests/report_graphs.c): the graph allocator on the CPU (views, in-place ops), a
# second graph reading the first one's result (carried), two buffer types, the scheduler over the
# fake device and the CPU (splits, copies); each report must hold the places read back from the
# tensors
report_graphs() {
    local prog=$T/report_graphs
    cc -O1 -Wall -Wextra -Werror -o "$prog" "$ROOT/c_tests/report_graphs.c" "$ROOT/c_tests/fake_backend.c" -I"$ROOT/c_tests" \
        -I"$TREE/ggml/include" -I"$TREE/ggml/src" -L"$BUILD_STOCK/bin" -lggml-base -lggml-cpu -lggml -lm -Wl,-rpath,"$BUILD_STOCK/bin" || return 1
    mkdir -p "$T/report-graphs"
    LD_PRELOAD="$LIB" "$prog" "$T/report-graphs" || return 1
    python3 "$ROOT/scripts/check_report.py" pairs "$T/report-graphs" --min-files 4
}
check "memory plan report: C graphs (gallocr, a carried result, two buffer types, scheduler): boxes = the tensors' places" report_graphs
# C test graphs: every plan of the allocator and scheduler scenarios and of 50 random graphs of
# each fuzz test (reserves, replans, results carried between graphs, two backends' buffers, the
# scheduler's copies and keep-alive markers)
report_c_tests() {
    local t
    for t in test_alloc_scenarios test_sched_scenarios test_alloc_fuzz test_sched_fuzz; do
        (cd "$T" && GGML_RS_FUZZ_ITERS=50 GGML_RS_ALLOC_REPORT="$T/report-$t" LD_PRELOAD="$LIB" "$BUILD_OURS/c_tests/$t" > "$T/report-$t.log" 2>&1) \
            || { tail -n 3 "$T/report-$t.log"; return 1; }
        printf '%s: ' "$t"
        python3 "$ROOT/scripts/check_report.py" check "$T/report-$t" --min-files 10 || return 1
    done
}
check "memory plan report: every plan of the C allocator and scheduler scenarios and fuzz tests is sound" report_c_tests
# the SVG in a real browser: a PNG of the expected size, not blank, with the boxes drawn (node and
# input colours on more than the legend's pixels)
report_svg() {
    local svg
    command -v chromium > /dev/null || { echo "chromium is not installed (scripts/upstream.sh deps-browser could not install it)"; return 1; }
    svg=$(ls "$T"/report-llama/*-sched-alloc.svg 2> /dev/null | tail -n1)
    [ -n "$svg" ] || { echo "no report of the llama graph (the check above failed)"; return 1; }
    timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1600,700 \
        --screenshot="$T/report.png" "file://$svg" > "$T/chromium.log" 2>&1 || { tail -n 3 "$T/chromium.log"; return 1; }
    python3 "$ROOT/scripts/check_report.py" png "$T/report.png" 1600 700 --expect-colors 54a24b,4c78a8
}
check "memory plan report: the SVG renders in headless Chromium (1600x700, boxes drawn)" report_svg

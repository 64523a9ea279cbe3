# with_progress LABEL LOG COMMAND...: runs COMMAND with its output in LOG and, every 15 s while it
# runs, prints one line through the caller's `log`: ninja's progress ([done/total] lines) as the
# percentage, an estimate of the time left (from the pace so far; ccache hits make early estimates
# pessimistic) and the current target; or the crate cargo compiles; or, for test-backend-ops, how
# many cases are done and the last one. Sourced by scripts/upstream.sh and scripts/aarch64.sh.
with_progress() {
    local label=$1 out=$2 pid t0=$SECONDS shown=$SECONDS line left
    shift 2
    "$@" >"$out" 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        sleep 1
        [ $((SECONDS - shown)) -lt 15 ] && continue
        shown=$SECONDS
        line=$(grep -a -E '^\[[0-9]+/[0-9]+\]|^ *Compiling |\): ' "$out" | tail -n 1 | sed 's/\x1b\[[0-9;]*m//g' || true)
        if [[ $line =~ ^\[([0-9]+)/([0-9]+)\]\ (.*)$ ]]; then
            left=$(( (SECONDS - t0) * (BASH_REMATCH[2] - BASH_REMATCH[1]) / (BASH_REMATCH[1] > 0 ? BASH_REMATCH[1] : 1) ))
            line="${BASH_REMATCH[1]}/${BASH_REMATCH[2]} ($((100 * BASH_REMATCH[1] / BASH_REMATCH[2]))%), about $((left / 60)) min $((left % 60)) s left; ${BASH_REMATCH[3]}"
        elif [[ $line == *"): "* ]]; then
            line="$(grep -a -c '): ' "$out") cases done; ${line# *}"
        fi
        log "$label ($((SECONDS - t0)) s): $(cut -c1-110 <<< "${line:-configuring}")"
    done
    wait "$pid"
}

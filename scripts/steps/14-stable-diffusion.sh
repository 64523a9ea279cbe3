# step 14 of scripts/test.sh (sourced by it, after the set-up: lib.sh's check/step, the
# paths and $T are set; scripts/test.sh 14 runs this step alone)

step "14. stable-diffusion.cpp: the image job"
sd_setup() { "$ROOT/scripts/upstream.sh" build sd-stock && make_sd_model; }
check "stable-diffusion.cpp: sd-cli (stock) built, the Flux.2-klein model generated" sd_setup
# the comparisons below mean something only if upstream itself gives the same bytes every time
sd_deterministic() {
    sd_image "$SD_BUILD_STOCK/bin" "$T/sd-a.png" 2 && sd_image "$SD_BUILD_STOCK/bin" "$T/sd-b.png" 2 &&
        sd_image "$SD_BUILD_STOCK/bin" "$T/sd-c.png" 1 || return 1
    sha256sum "$T/sd-a.png" | cut -c1-16
    cmp "$T/sd-a.png" "$T/sd-b.png" && cmp "$T/sd-a.png" "$T/sd-c.png"
}
check "image job: stock sd-cli is deterministic (two runs and -t 1: byte-identical PNGs)" sd_deterministic
if why=$(sd_profile_missing); then
    skip "image job: sd-ours (link-time) byte-identical to stock" "$why"
    skip "image job: stock with our library in LD_PRELOAD byte-identical" "$why"
else
    check "stable-diffusion.cpp: sd-ours built (libggml_rs --features $SD_PROFILE)" "$ROOT/scripts/upstream.sh" build sd-ours
    # ggml-base of sd-ours has none of the two files' functions and takes them from our library
    sd_ours_linked() {
        local base=$SD_BUILD_OURS/bin/libggml-base.so
        # grep reads all of ldd's output (with -q it would stop at the match, ldd could then die of
        # SIGPIPE and pipefail fail the check: it did once in a rehearsal)
        ldd "$base" | grep -F "$SD_LIB" > /dev/null || { echo "libggml-base.so is not linked to $SD_LIB"; ldd "$base"; return 1; }
        if nm -D --defined-only "$base" | grep -wE 'ggml_backend_sched_new|ggml_gallocr_new|ggml_backend_tensor_set'; then
            echo "libggml-base.so still defines functions of ggml-backend.cpp/ggml-alloc.c"
            return 1
        fi
    }
    check "sd-ours: libggml-base.so without the two files, linked to the profile's libggml_rs.so" sd_ours_linked
    sd_same() { # label, bin dir, then environment for sd-cli
        local label=$1 bin=$2
        shift 2
        env "$@" bash -c "source '$ROOT/scripts/lib.sh' && sd_image '$bin' '$T/sd-$label.png'" || return 1
        cmp "$T/sd-a.png" "$T/sd-$label.png" || return 1
        paste -d'|' <(grep 'compute buffer size' "$T/sd-a.log" | sed 's/.* - //') \
                    <(grep 'compute buffer size' "$T/sd-$label.log" | sed 's/.* - //') | sed 's/|/ | /'
    }
    check "image job: sd-ours (link-time) byte-identical to stock" sd_same ours "$SD_BUILD_OURS/bin"
    # stable-diffusion.cpp allocates with ggml_gallocr directly (no scheduler): the memory plan
    # reports of our allocator show that the preloaded library did the work
    sd_preload() {
        rm -rf "$T/sd-report"
        sd_same preload "$SD_BUILD_STOCK/bin" GGML_RS_ALLOC_REPORT="$T/sd-report" LD_PRELOAD="$SD_LIB" || return 1
        local n
        n=$(find "$T/sd-report" -name '*.json' 2>/dev/null | wc -l)
        echo "$n plans reported by our allocator"
        [ "$n" -gt 0 ] || { echo "no memory plan report: our allocator did not run"; return 1; }
    }
    check "image job: stock with our library in LD_PRELOAD byte-identical, our allocator used" sd_preload
fi

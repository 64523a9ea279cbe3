# step 4 of scripts/test.sh (sourced by it, after the set-up: lib.sh's check/step, the
# paths and $T are set; scripts/test.sh 4 runs this step alone)

step "4. C tests"
check "ctest (our build)" bash -o pipefail -c "cd '$BUILD_OURS' && GGML_RS_FUZZ_ITERS=$FUZZ_ITERS ctest --output-on-failure -R '^(test_|abi_)' 2>&1 | tail -n 15"
check "ctest (reference build, tests that hold for upstream)" bash -o pipefail -c "cd '$BUILD_STOCK' && ctest --output-on-failure -R '^test_backend_core$' 2>&1 | tail -n 5"
# the scenarios that reproduce upstream's bugs must fail on upstream, else they test nothing
upstream_fails() {
    local prog=$1 bad=0
    shift
    for t in "$@"; do
        if timeout 120 "$BUILD_STOCK/c_tests/$prog" "$t" > "$T/u.log" 2>&1; then
            echo "upstream passes $prog $t: the scenario does not reproduce the bug"
            bad=1
        else
            echo "upstream fails $prog $t: $(grep -m1 -o 'CHECK(.*' "$T/u.log" | cut -c1-110)"
        fi
    done
    return $bad
}
ALLOC_SEED_SCENARIOS=(
    test_tensor_from_an_earlier_allocation_is_not_external test_forward_backward_graphs_sharing_tensors test_same_counts_different_topology_is_planned_anew test_result_carried_over_to_the_next_graph
    test_lost_result_is_a_named_error test_carried_result_survives_buffer_growth test_result_lost_to_reallocation_is_a_named_error test_replay_notices_every_change
    test_replay_notices_a_changed_shape_or_op test_result_lost_to_reallocation_at_the_same_address_is_a_named_error test_input_carried_into_the_next_graph)
check "upstream fails the allocator scenarios of its bugs" upstream_fails test_alloc_scenarios "${ALLOC_SEED_SCENARIOS[@]}"
check "upstream fails the allocator fuzz (changed graphs replayed by position)" upstream_fails test_alloc_fuzz random_graphs
SCHED_SEED_SCENARIOS=(
    test_reset_alloc_loop_one_copy test_reset_alloc_loop_four_copies_with_events test_reset_alloc_loop_four_copies_without_events test_compute_honours_its_graph_argument test_result_read_by_the_next_graph
    test_input_carried_into_the_next_graph test_input_carried_into_the_next_graph_two_backends test_graph_placed_in_a_freed_compute_buffer test_result_in_a_freed_compute_buffer_is_named test_unlisted_source_on_a_remote_device_is_copied)
check "upstream fails the scheduler scenarios of its bugs" upstream_fails test_sched_scenarios "${SCHED_SEED_SCENARIOS[@]}"
# misuse and failure: upstream leaves tensors in freed buffers, allocates sources it never computes
# (crashes when they are read through a view), computes a graph a reserve or split took the
# memory of (a crash after split_graph), and does not try a refused compute buffer again in a
# scheduler with several backends
MISUSE_SCENARIOS=(
    test_failed_ctx_alloc_leaves_nothing_in_freed_memory test_unlisted_source_named_by_gallocr test_unlisted_source_via_a_view_named_by_gallocr test_unlisted_source_named_by_sched_one_backend
    test_unlisted_source_named_by_sched_two_backends test_reserve_between_alloc_and_compute_refused test_split_graph_between_alloc_and_compute_refused test_transient_buffer_failure_tried_again_once)
check "upstream fails the misuse scenarios" upstream_fails test_misuse "${MISUSE_SCENARIOS[@]}"

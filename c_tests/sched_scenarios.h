// What test_sched_scenarios.c and sched_across_graphs.c (one program) share: the context every
// scenario builds its graphs in, and the scenarios of the second file that main runs.
#pragma once

struct ggml_context * new_ctx(void);

void test_input_carried_into_the_next_graph(void);
void test_input_carried_into_the_next_graph_two_backends(void);
void test_graph_placed_in_a_freed_compute_buffer(void);
void test_result_in_a_freed_compute_buffer_is_named(void);
void test_unlisted_source_on_a_remote_device_is_copied(void);
void test_realloc_debug_counts_real_reallocations(void);
void test_reserved_buffer_holds_every_smaller_shape(void);

// The extensions of ggml-rs (include/ggml-rs.h), declared for tests that are compiled against
// upstream's headers (ours and upstream's ggml-backend.h cannot both be included).
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ggml-alloc.h"
#include "ggml-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ggml_rs_abi_entry {
    const char * type_name;
    const char * field;
    int64_t value;
    int64_t align;
};

// weak: the same tests also link against upstream's library, where these are NULL
#define GGML_RS_EXT __attribute__((weak))
GGML_RS_EXT const char * ggml_rs_version(void);
GGML_RS_EXT const struct ggml_rs_abi_entry * ggml_rs_abi_describe(size_t * n);
GGML_RS_EXT bool ggml_rs_gallocr_plan_stats(ggml_gallocr_t galloc, int buffer_id, size_t * planned, size_t * lower_bound);
GGML_RS_EXT void ggml_rs_gallocr_counters(ggml_gallocr_t galloc, uint64_t * n_plans, uint64_t * n_replays);
GGML_RS_EXT void ggml_rs_sched_counters(ggml_backend_sched_t sched, uint64_t * n_splits, uint64_t * n_repeats);
GGML_RS_EXT size_t ggml_rs_sched_dump_plan(ggml_backend_sched_t sched, struct ggml_cgraph * graph, int format, char * buf, size_t size);
GGML_RS_EXT bool ggml_rs_gallocr_write_report(ggml_gallocr_t galloc, const char * path, int format);
GGML_RS_EXT bool ggml_rs_sched_write_report(ggml_backend_sched_t sched, const char * path, int format);

#ifdef __cplusplus
}
#endif

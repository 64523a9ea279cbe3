// A second backend for tests on a CPU-only machine: a "device" whose buffers are host memory
// but declare themselves non-host, so that the scheduler and the copy paths treat them as device
// memory (splits, copies between backends, slow-path copies). Its graphs are computed by an
// upstream CPU backend working directly on that memory.
//
// Counters let tests check what actually happened (copies, computes, events).
#pragma once

#include "ggml.h"
#include "ggml-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

struct fake_stats {
    int buffers_alloc;
    int buffers_free;
    int set_calls;
    int get_calls;
    int memset_calls;
    int cpy_calls;         // buffer cpy_tensor accepted
    int graph_computes;
    int nodes_computed;
    int events_recorded;
    int events_waited;
    int events_synced;
    int init_tensor_calls;
    int buffers_refused;   // allocations made to fail (fake_backend_fail_allocs)
};

typedef bool (*fake_supports_op_fn)(const struct ggml_tensor * op);

struct fake_options {
    const char * name;           // backend/device name (default "FAKE")
    size_t alignment;            // default 32
    size_t max_size;             // 0: unlimited
    bool events;                 // provide events (needed for pipeline parallelism tests)
    fake_supports_op_fn supports_op; // NULL: everything the CPU backend supports
    fake_supports_op_fn offload_op;  // NULL: never asks for offload
    // memory nobody else can read, as a remote device's (an rpc-server): the buffers are
    // mprotect'ed PROT_NONE except while the fake itself reads or writes them (tensor get/set,
    // memset, copies, clear, graph compute), so another backend that reads them directly
    // crashes (SIGSEGV) instead of quietly reading device memory as if it were host memory
    bool remote;
    // each buffer allocation first takes a few blocks the size of a `struct ggml_backend_buffer`
    // and fills them with 0xA5 (kept until the backend is freed): the struct of a buffer freed
    // just before (glibc hands back the newest freed block of a size first) is then garbage at
    // once, as it may be after any free, so a stale tensor->buffer read crashes instead of
    // reading the old, still intact values
    bool scribble_freed_buffers;
};

// Creates the fake backend (and its device and buffer type). Free with ggml_backend_free.
ggml_backend_t fake_backend_new(const struct fake_options * opts);
ggml_backend_buffer_type_t fake_backend_buft(ggml_backend_t backend);
struct fake_stats * fake_backend_stats(ggml_backend_t backend);
bool fake_backend_is(ggml_backend_t backend);
// Makes the buffer type fail on demand: of the next buffer allocations, `after` succeed, then
// `count` fail (the allocation returns NULL, as a device out of memory does), then all succeed.
void fake_backend_fail_allocs(ggml_backend_t backend, int after, int count);

#ifdef __cplusplus
}
#endif

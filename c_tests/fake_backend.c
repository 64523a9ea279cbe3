// See fake_backend.h. Written against upstream's ggml-backend-impl.h (the interface every
// backend implements), as a third-party backend would be.
#include "fake_backend.h"

#include "ggml-backend-impl.h"
#include "ggml-cpu.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fake_ctx {
    struct fake_options opts;
    char name[64];
    struct fake_stats stats;
    ggml_backend_t cpu;
    struct ggml_backend_buffer_type buft;
    struct ggml_backend_device device;
    struct ggml_backend backend;
    ggml_guid guid;
    int allocs_before_failing; // fake_backend_fail_allocs
    int allocs_to_fail;
};

struct fake_buffer {
    struct fake_ctx * ctx;
    void * mem;
};

static struct fake_ctx * ctx_of_buft(ggml_backend_buffer_type_t buft) { return (struct fake_ctx *) buft->context; }

// buffer

static void fb_free(ggml_backend_buffer_t buf) {
    struct fake_buffer * fb = (struct fake_buffer *) buf->context;
    fb->ctx->stats.buffers_free++;
    free(fb->mem);
    free(fb);
}

static void * fb_base(ggml_backend_buffer_t buf) {
    struct fake_buffer * fb = (struct fake_buffer *) buf->context;
    uintptr_t p = (uintptr_t) fb->mem;
    size_t a = fb->ctx->opts.alignment;
    return (void *) ((p + a - 1) / a * a);
}

static enum ggml_status fb_init_tensor(ggml_backend_buffer_t buf, struct ggml_tensor * t) {
    ((struct fake_buffer *) buf->context)->ctx->stats.init_tensor_calls++;
    (void) t;
    return GGML_STATUS_SUCCESS;
}

static void fb_memset(ggml_backend_buffer_t buf, struct ggml_tensor * t, uint8_t v, size_t off, size_t size) {
    ((struct fake_buffer *) buf->context)->ctx->stats.memset_calls++;
    memset((char *) t->data + off, v, size);
}

static void fb_set(ggml_backend_buffer_t buf, struct ggml_tensor * t, const void * data, size_t off, size_t size) {
    ((struct fake_buffer *) buf->context)->ctx->stats.set_calls++;
    memcpy((char *) t->data + off, data, size);
}

static void fb_get(ggml_backend_buffer_t buf, const struct ggml_tensor * t, void * data, size_t off, size_t size) {
    ((struct fake_buffer *) buf->context)->ctx->stats.get_calls++;
    memcpy(data, (const char *) t->data + off, size);
}

// copies only between fake buffers (like a device-to-device copy); anything else is declined
static bool fb_cpy(ggml_backend_buffer_t buf, const struct ggml_tensor * src, struct ggml_tensor * dst) {
    struct fake_buffer * fb = (struct fake_buffer *) buf->context;
    ggml_backend_buffer_t sb = src->view_src ? src->view_src->buffer : src->buffer;
    if (sb == NULL || sb->buft != &fb->ctx->buft) {
        return false;
    }
    fb->ctx->stats.cpy_calls++;
    memcpy(dst->data, src->data, ggml_nbytes(src));
    return true;
}

static void fb_clear(ggml_backend_buffer_t buf, uint8_t v) {
    struct fake_buffer * fb = (struct fake_buffer *) buf->context;
    memset(fb->mem, v, buf->size + fb->ctx->opts.alignment);
}

static const struct ggml_backend_buffer_i fake_buffer_i = {
    /* .free_buffer   = */ fb_free,
    /* .get_base      = */ fb_base,
    /* .init_tensor   = */ fb_init_tensor,
    /* .memset_tensor = */ fb_memset,
    /* .set_tensor    = */ fb_set,
    /* .get_tensor    = */ fb_get,
    /* .set_tensor_2d = */ NULL,
    /* .get_tensor_2d = */ NULL,
    /* .cpy_tensor    = */ fb_cpy,
    /* .clear         = */ fb_clear,
    /* .reset         = */ NULL,
};

// buffer type

static const char * fbt_name(ggml_backend_buffer_type_t buft) { return ctx_of_buft(buft)->name; }

static ggml_backend_buffer_t fbt_alloc(ggml_backend_buffer_type_t buft, size_t size) {
    struct fake_ctx * ctx = ctx_of_buft(buft);
    if (ctx->allocs_to_fail > 0 && ctx->allocs_before_failing-- <= 0) {
        ctx->allocs_to_fail--;
        ctx->stats.buffers_refused++;
        return NULL;
    }
    struct fake_buffer * fb = (struct fake_buffer *) calloc(1, sizeof(*fb));
    fb->ctx = ctx;
    fb->mem = calloc(1, size + ctx->opts.alignment);
    ctx->stats.buffers_alloc++;
    return ggml_backend_buffer_init(buft, fake_buffer_i, fb, size);
}

static size_t fbt_alignment(ggml_backend_buffer_type_t buft) { return ctx_of_buft(buft)->opts.alignment; }

static size_t fbt_max_size(ggml_backend_buffer_type_t buft) {
    size_t m = ctx_of_buft(buft)->opts.max_size;
    return m ? m : SIZE_MAX;
}

static bool fbt_is_host(ggml_backend_buffer_type_t buft) { (void) buft; return false; }

// device

static struct fake_ctx * ctx_of_dev(ggml_backend_dev_t dev) { return (struct fake_ctx *) dev->context; }

static const char * fd_name(ggml_backend_dev_t dev) { return ctx_of_dev(dev)->name; }
static const char * fd_desc(ggml_backend_dev_t dev) { (void) dev; return "fake device for tests"; }
static void fd_memory(ggml_backend_dev_t dev, size_t * free_, size_t * total) { (void) dev; *free_ = 1u << 30; *total = 1u << 30; }
static enum ggml_backend_dev_type fd_type(ggml_backend_dev_t dev) { (void) dev; return GGML_BACKEND_DEVICE_TYPE_GPU; }

static void fd_props(ggml_backend_dev_t dev, struct ggml_backend_dev_props * props) {
    props->name = fd_name(dev);
    props->description = fd_desc(dev);
    fd_memory(dev, &props->memory_free, &props->memory_total);
    props->type = GGML_BACKEND_DEVICE_TYPE_GPU;
    props->caps.events = ctx_of_dev(dev)->opts.events;
}

static ggml_backend_t fd_init(ggml_backend_dev_t dev, const char * params) { (void) params; return &ctx_of_dev(dev)->backend; }
static ggml_backend_buffer_type_t fd_buft(ggml_backend_dev_t dev) { return &ctx_of_dev(dev)->buft; }

static bool fd_supports_op(ggml_backend_dev_t dev, const struct ggml_tensor * op) {
    struct fake_ctx * ctx = ctx_of_dev(dev);
    if (ctx->opts.supports_op && !ctx->opts.supports_op(op)) {
        return false;
    }
    return ggml_backend_supports_op(ctx->cpu, op);
}

static bool fd_supports_buft(ggml_backend_dev_t dev, ggml_backend_buffer_type_t buft) { return buft == &ctx_of_dev(dev)->buft; }

static bool fd_offload_op(ggml_backend_dev_t dev, const struct ggml_tensor * op) {
    struct fake_ctx * ctx = ctx_of_dev(dev);
    return ctx->opts.offload_op && ctx->opts.offload_op(op);
}

static ggml_backend_event_t fd_event_new(ggml_backend_dev_t dev) {
    ggml_backend_event_t e = (ggml_backend_event_t) calloc(1, sizeof(*e));
    e->device = dev;
    return e;
}

static void fd_event_free(ggml_backend_dev_t dev, ggml_backend_event_t e) { (void) dev; free(e); }
static void fd_event_sync(ggml_backend_dev_t dev, ggml_backend_event_t e) { (void) e; ctx_of_dev(dev)->stats.events_synced++; }

// backend

static struct fake_ctx * ctx_of_backend(ggml_backend_t b) { return (struct fake_ctx *) b->context; }

static const char * fk_name(ggml_backend_t b) { return ctx_of_backend(b)->name; }

static void fk_free(ggml_backend_t b) {
    struct fake_ctx * ctx = ctx_of_backend(b);
    ggml_backend_free(ctx->cpu);
    free(ctx);
}

static enum ggml_status fk_compute(ggml_backend_t b, struct ggml_cgraph * g) {
    struct fake_ctx * ctx = ctx_of_backend(b);
    ctx->stats.graph_computes++;
    ctx->stats.nodes_computed += ggml_graph_n_nodes(g);
    return ggml_backend_graph_compute(ctx->cpu, g);
}

static void fk_event_record(ggml_backend_t b, ggml_backend_event_t e) { (void) e; ctx_of_backend(b)->stats.events_recorded++; }
static void fk_event_wait(ggml_backend_t b, ggml_backend_event_t e) { (void) e; ctx_of_backend(b)->stats.events_waited++; }

ggml_backend_t fake_backend_new(const struct fake_options * opts) {
    struct fake_ctx * ctx = (struct fake_ctx *) calloc(1, sizeof(*ctx));
    if (opts) {
        ctx->opts = *opts;
    }
    if (ctx->opts.alignment == 0) {
        ctx->opts.alignment = 32;
    }
    snprintf(ctx->name, sizeof(ctx->name), "%s", ctx->opts.name ? ctx->opts.name : "FAKE");
    ctx->cpu = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(ctx->cpu, 1);

    ctx->buft.iface.get_name = fbt_name;
    ctx->buft.iface.alloc_buffer = fbt_alloc;
    ctx->buft.iface.get_alignment = fbt_alignment;
    ctx->buft.iface.get_max_size = fbt_max_size;
    ctx->buft.iface.is_host = fbt_is_host;
    ctx->buft.device = &ctx->device;
    ctx->buft.context = ctx;

    ctx->device.iface.get_name = fd_name;
    ctx->device.iface.get_description = fd_desc;
    ctx->device.iface.get_memory = fd_memory;
    ctx->device.iface.get_type = fd_type;
    ctx->device.iface.get_props = fd_props;
    ctx->device.iface.init_backend = fd_init;
    ctx->device.iface.get_buffer_type = fd_buft;
    ctx->device.iface.supports_op = fd_supports_op;
    ctx->device.iface.supports_buft = fd_supports_buft;
    ctx->device.iface.offload_op = fd_offload_op;
    if (ctx->opts.events) {
        ctx->device.iface.event_new = fd_event_new;
        ctx->device.iface.event_free = fd_event_free;
        ctx->device.iface.event_synchronize = fd_event_sync;
    }
    ctx->device.context = ctx;

    ctx->backend.guid = &ctx->guid;
    ctx->backend.iface.get_name = fk_name;
    ctx->backend.iface.free = fk_free;
    ctx->backend.iface.graph_compute = fk_compute;
    if (ctx->opts.events) {
        ctx->backend.iface.event_record = fk_event_record;
        ctx->backend.iface.event_wait = fk_event_wait;
    }
    ctx->backend.device = &ctx->device;
    ctx->backend.context = ctx;
    return &ctx->backend;
}

ggml_backend_buffer_type_t fake_backend_buft(ggml_backend_t backend) { return &ctx_of_backend(backend)->buft; }
struct fake_stats * fake_backend_stats(ggml_backend_t backend) { return &ctx_of_backend(backend)->stats; }
bool fake_backend_is(ggml_backend_t backend) { return backend && backend->iface.get_name == fk_name; }

void fake_backend_fail_allocs(ggml_backend_t backend, int after, int count) {
    struct fake_ctx * ctx = ctx_of_backend(backend);
    ctx->allocs_before_failing = after;
    ctx->allocs_to_fail = count;
}

// See fake_backend.h. Written against upstream's ggml-backend-impl.h (the interface every
// backend implements), as a third-party backend would be.
#include "fake_backend.h"

#include "ggml-backend-impl.h"
#include "ggml-cpu.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FAKE_MAX_BUFFERS 256
#define FAKE_SCRIBBLES 4

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
    // opts.remote: the live buffers, unprotected while the fake works on them
    struct fake_buffer * live[FAKE_MAX_BUFFERS];
    int n_live;
    int n_open; // nesting of fake_open/fake_close
    // opts.scribble_freed_buffers: the blocks taken
    void ** scribbles;
    int n_scribbles;
};

struct fake_buffer {
    struct fake_ctx * ctx;
    void * mem;
    size_t mapped; // opts.remote: the length of the mapping at mem
};

// opts.remote: the fake's own accesses to its memory happen between fake_open and fake_close
static void fake_protect(struct fake_ctx * ctx, int prot) {
    for (int i = 0; i < ctx->n_live; i++) {
        if (mprotect(ctx->live[i]->mem, ctx->live[i]->mapped, prot) != 0) {
            perror("fake backend: mprotect");
            abort();
        }
    }
}

static void fake_open(struct fake_ctx * ctx) {
    if (ctx->opts.remote && ctx->n_open++ == 0) {
        fake_protect(ctx, PROT_READ | PROT_WRITE);
    }
}

static void fake_close(struct fake_ctx * ctx) {
    if (ctx->opts.remote && --ctx->n_open == 0) {
        fake_protect(ctx, PROT_NONE);
    }
}

static struct fake_ctx * ctx_of_buf(ggml_backend_buffer_t buf) { return ((struct fake_buffer *) buf->context)->ctx; }

static struct fake_ctx * ctx_of_buft(ggml_backend_buffer_type_t buft) { return (struct fake_ctx *) buft->context; }

// buffer

static void fb_free(ggml_backend_buffer_t buf) {
    struct fake_buffer * fb = (struct fake_buffer *) buf->context;
    struct fake_ctx * ctx = fb->ctx;
    ctx->stats.buffers_free++;
    if (ctx->opts.remote) {
        for (int i = 0; i < ctx->n_live; i++) {
            if (ctx->live[i] == fb) {
                ctx->live[i] = ctx->live[--ctx->n_live];
                break;
            }
        }
        munmap(fb->mem, fb->mapped);
    } else {
        free(fb->mem);
    }
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
    struct fake_ctx * ctx = ctx_of_buf(buf);
    ctx->stats.memset_calls++;
    fake_open(ctx);
    memset((char *) t->data + off, v, size);
    fake_close(ctx);
}

static void fb_set(ggml_backend_buffer_t buf, struct ggml_tensor * t, const void * data, size_t off, size_t size) {
    struct fake_ctx * ctx = ctx_of_buf(buf);
    ctx->stats.set_calls++;
    fake_open(ctx);
    memcpy((char *) t->data + off, data, size);
    fake_close(ctx);
}

static void fb_get(ggml_backend_buffer_t buf, const struct ggml_tensor * t, void * data, size_t off, size_t size) {
    struct fake_ctx * ctx = ctx_of_buf(buf);
    ctx->stats.get_calls++;
    fake_open(ctx);
    memcpy(data, (const char *) t->data + off, size);
    fake_close(ctx);
}

// copies only between fake buffers (like a device-to-device copy); anything else is declined
static bool fb_cpy(ggml_backend_buffer_t buf, const struct ggml_tensor * src, struct ggml_tensor * dst) {
    struct fake_buffer * fb = (struct fake_buffer *) buf->context;
    ggml_backend_buffer_t sb = src->view_src ? src->view_src->buffer : src->buffer;
    if (sb == NULL || sb->buft != &fb->ctx->buft) {
        return false;
    }
    fb->ctx->stats.cpy_calls++;
    fake_open(fb->ctx);
    memcpy(dst->data, src->data, ggml_nbytes(src));
    fake_close(fb->ctx);
    return true;
}

static void fb_clear(ggml_backend_buffer_t buf, uint8_t v) {
    struct fake_buffer * fb = (struct fake_buffer *) buf->context;
    fake_open(fb->ctx);
    memset(fb->mem, v, buf->size + fb->ctx->opts.alignment);
    fake_close(fb->ctx);
}

static const struct ggml_backend_buffer_i fake_buffer_i = {
    /* .free_buffer   = */ fb_free,
    /* .get_base      = */ fb_base,
    /* .init_tensor   = */ fb_init_tensor,
    /* .memset_tensor = */ fb_memset,
    /* .set_tensor    = */ fb_set,
    /* .get_tensor    = */ fb_get,
#ifndef GGML_RS_ABI_0_9_8 // (newer than ggml 0.9.8)
    /* .set_tensor_2d = */ NULL,
    /* .get_tensor_2d = */ NULL,
#endif
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
    if (ctx->opts.scribble_freed_buffers) {
        ctx->scribbles = (void **) realloc(ctx->scribbles, (ctx->n_scribbles + FAKE_SCRIBBLES) * sizeof(void *));
        for (int i = 0; i < FAKE_SCRIBBLES; i++) {
            void * p = malloc(sizeof(struct ggml_backend_buffer));
            memset(p, 0xA5, sizeof(struct ggml_backend_buffer));
            ctx->scribbles[ctx->n_scribbles++] = p;
        }
    }
    struct fake_buffer * fb = (struct fake_buffer *) calloc(1, sizeof(*fb));
    fb->ctx = ctx;
    if (ctx->opts.remote) {
        if (ctx->n_live == FAKE_MAX_BUFFERS) {
            fprintf(stderr, "fake backend: more than %d remote buffers\n", FAKE_MAX_BUFFERS);
            abort();
        }
        size_t page = (size_t) sysconf(_SC_PAGESIZE);
        fb->mapped = (size + ctx->opts.alignment + page - 1) / page * page;
        fb->mem = mmap(NULL, fb->mapped, ctx->n_open > 0 ? PROT_READ | PROT_WRITE : PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (fb->mem == MAP_FAILED) {
            perror("fake backend: mmap");
            abort();
        }
        ctx->live[ctx->n_live++] = fb;
    } else {
        fb->mem = calloc(1, size + ctx->opts.alignment);
    }
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
    for (int i = 0; i < ctx->n_scribbles; i++) {
        free(ctx->scribbles[i]);
    }
    free(ctx->scribbles);
    ggml_backend_free(ctx->cpu);
    free(ctx);
}

static enum ggml_status fk_compute(ggml_backend_t b, struct ggml_cgraph * g) {
    struct fake_ctx * ctx = ctx_of_backend(b);
    ctx->stats.graph_computes++;
    ctx->stats.nodes_computed += ggml_graph_n_nodes(g);
    fake_open(ctx);
    enum ggml_status status = ggml_backend_graph_compute(ctx->cpu, g);
    fake_close(ctx);
    return status;
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

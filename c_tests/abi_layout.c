// Compiled against the pinned upstream headers (including the private ggml-impl.h and
// ggml-backend-impl.h): every struct size, alignment and field offset, and every constant the
// library reports through ggml_rs_abi_describe(), must equal upstream's. Also the other way
// round: every struct and field listed here must be reported by the library. Built for an ABI
// profile (README "Profiles"), it is compiled against that version's headers with its
// GGML_RS_ABI_<version> defined, which leaves out what that version does not have.
#include "ggml_rs_ext.h"

#include "ggml-alloc.h"
#include "ggml-backend-impl.h"
#include "ggml-backend.h"
#include "ggml-impl.h"
#include "ggml.h"

#include <stdalign.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

struct expected {
    const char * type_name;
    const char * field; // NULL: the struct itself
    long long value;    // offset, size or constant value
    long long align;
    int seen;
};

#define S(T) { #T, NULL, (long long) sizeof(struct T), (long long) alignof(struct T), 0 }
#define F(T, f) { #T, #f, (long long) offsetof(struct T, f), 0, 0 }
#define C(name) { "const", #name, (long long) (name), 0, 0 }

static struct expected table[] = {
    S(ggml_tallocr), F(ggml_tallocr, buffer), F(ggml_tallocr, base), F(ggml_tallocr, alignment), F(ggml_tallocr, offset),
    S(ggml_backend_graph_copy), F(ggml_backend_graph_copy, buffer), F(ggml_backend_graph_copy, ctx_allocated),
    F(ggml_backend_graph_copy, ctx_unallocated), F(ggml_backend_graph_copy, graph),
    S(ggml_backend_dev_caps), F(ggml_backend_dev_caps, async), F(ggml_backend_dev_caps, host_buffer),
    F(ggml_backend_dev_caps, buffer_from_host_ptr), F(ggml_backend_dev_caps, events),
#ifndef GGML_RS_ABI_0_9_8
    F(ggml_backend_dev_caps, mmap_support),
#endif

    S(ggml_backend_dev_props), F(ggml_backend_dev_props, name), F(ggml_backend_dev_props, description),
    F(ggml_backend_dev_props, memory_free), F(ggml_backend_dev_props, memory_total), F(ggml_backend_dev_props, type),
    F(ggml_backend_dev_props, device_id), F(ggml_backend_dev_props, caps),
    S(ggml_backend_feature), F(ggml_backend_feature, name), F(ggml_backend_feature, value),
#ifndef GGML_RS_ABI_0_9_8
    S(ggml_backend_meta_split_state), F(ggml_backend_meta_split_state, axis), F(ggml_backend_meta_split_state, ne),
    F(ggml_backend_meta_split_state, nr), F(ggml_backend_meta_split_state, n_segments),
#endif
    S(ggml_backend_buffer_type_i), F(ggml_backend_buffer_type_i, get_name), F(ggml_backend_buffer_type_i, alloc_buffer),
    F(ggml_backend_buffer_type_i, get_alignment), F(ggml_backend_buffer_type_i, get_max_size),
    F(ggml_backend_buffer_type_i, get_alloc_size), F(ggml_backend_buffer_type_i, is_host),
#if GGML_BACKEND_API_VERSION >= 3
    // ggml 0.26.0 (the abi-0-26-0 profile): the list entries
    F(ggml_backend_buffer_type_i, alloc_buffer_n), F(ggml_backend_buffer_type_i, get_alloc_size_n),
#endif
    S(ggml_backend_buffer_type), F(ggml_backend_buffer_type, iface), F(ggml_backend_buffer_type, device), F(ggml_backend_buffer_type, context),
    S(ggml_backend_buffer_i), F(ggml_backend_buffer_i, free_buffer), F(ggml_backend_buffer_i, get_base), F(ggml_backend_buffer_i, init_tensor),
    F(ggml_backend_buffer_i, memset_tensor), F(ggml_backend_buffer_i, set_tensor), F(ggml_backend_buffer_i, get_tensor),
#ifndef GGML_RS_ABI_0_9_8
    F(ggml_backend_buffer_i, set_tensor_2d), F(ggml_backend_buffer_i, get_tensor_2d),
#endif
    F(ggml_backend_buffer_i, cpy_tensor),
    F(ggml_backend_buffer_i, clear), F(ggml_backend_buffer_i, reset),
    S(ggml_backend_buffer), F(ggml_backend_buffer, iface), F(ggml_backend_buffer, buft), F(ggml_backend_buffer, context),
    F(ggml_backend_buffer, size), F(ggml_backend_buffer, usage),
#ifndef GGML_RS_ABI_0_9_8
    S(ggml_backend_graph_optimize_params), F(ggml_backend_graph_optimize_params, add_alloc_dep), F(ggml_backend_graph_optimize_params, user_data),
#endif
    S(ggml_backend_i), F(ggml_backend_i, get_name), F(ggml_backend_i, free), F(ggml_backend_i, set_tensor_async),
    F(ggml_backend_i, get_tensor_async),
#ifndef GGML_RS_ABI_0_9_8
    F(ggml_backend_i, set_tensor_2d_async), F(ggml_backend_i, get_tensor_2d_async),
#endif
    F(ggml_backend_i, cpy_tensor_async), F(ggml_backend_i, synchronize), F(ggml_backend_i, graph_plan_create),
    F(ggml_backend_i, graph_plan_free), F(ggml_backend_i, graph_plan_update), F(ggml_backend_i, graph_plan_compute),
    F(ggml_backend_i, graph_compute), F(ggml_backend_i, event_record), F(ggml_backend_i, event_wait), F(ggml_backend_i, graph_optimize),
    S(ggml_backend), F(ggml_backend, guid), F(ggml_backend, iface), F(ggml_backend, device), F(ggml_backend, context),
    S(ggml_backend_event), F(ggml_backend_event, device), F(ggml_backend_event, context),
    S(ggml_backend_device_i), F(ggml_backend_device_i, get_name), F(ggml_backend_device_i, get_description),
    F(ggml_backend_device_i, get_memory), F(ggml_backend_device_i, get_type), F(ggml_backend_device_i, get_props),
    F(ggml_backend_device_i, init_backend), F(ggml_backend_device_i, get_buffer_type), F(ggml_backend_device_i, get_host_buffer_type),
    F(ggml_backend_device_i, buffer_from_host_ptr), F(ggml_backend_device_i, supports_op), F(ggml_backend_device_i, supports_buft),
    F(ggml_backend_device_i, offload_op), F(ggml_backend_device_i, event_new), F(ggml_backend_device_i, event_free),
    F(ggml_backend_device_i, event_synchronize),
    S(ggml_backend_device), F(ggml_backend_device, iface), F(ggml_backend_device, reg), F(ggml_backend_device, context),
    S(ggml_backend_reg_i), F(ggml_backend_reg_i, get_name), F(ggml_backend_reg_i, get_device_count), F(ggml_backend_reg_i, get_device),
    F(ggml_backend_reg_i, get_proc_address),
    S(ggml_backend_reg), F(ggml_backend_reg, api_version), F(ggml_backend_reg, iface), F(ggml_backend_reg, context),
    S(ggml_tensor), F(ggml_tensor, type), F(ggml_tensor, buffer), F(ggml_tensor, ne), F(ggml_tensor, nb), F(ggml_tensor, op),
    F(ggml_tensor, op_params), F(ggml_tensor, flags), F(ggml_tensor, src), F(ggml_tensor, view_src), F(ggml_tensor, view_offs),
    F(ggml_tensor, data), F(ggml_tensor, name), F(ggml_tensor, extra), F(ggml_tensor, padding),
    S(ggml_cgraph), F(ggml_cgraph, size), F(ggml_cgraph, n_nodes), F(ggml_cgraph, n_leafs), F(ggml_cgraph, nodes), F(ggml_cgraph, grads),
    F(ggml_cgraph, grad_accs), F(ggml_cgraph, leafs), F(ggml_cgraph, use_counts), F(ggml_cgraph, visited_hash_set),
    F(ggml_cgraph, order),
#ifndef GGML_RS_ABI_0_9_8
    F(ggml_cgraph, uid),
#endif
    S(ggml_hash_set), F(ggml_hash_set, size), F(ggml_hash_set, used), F(ggml_hash_set, keys),
    S(ggml_init_params), F(ggml_init_params, mem_size), F(ggml_init_params, mem_buffer), F(ggml_init_params, no_alloc),
    C(GGML_BACKEND_API_VERSION),
    C(GGML_OP_NONE), C(GGML_OP_ADD), C(GGML_OP_ADD_ID), C(GGML_OP_ADD1), C(GGML_OP_SUB), C(GGML_OP_MUL), C(GGML_OP_DIV),
    C(GGML_OP_SQR), C(GGML_OP_SQRT), C(GGML_OP_LOG), C(GGML_OP_CUMSUM), C(GGML_OP_SILU_BACK), C(GGML_OP_RMS_NORM),
    C(GGML_OP_RMS_NORM_BACK), C(GGML_OP_MUL_MAT), C(GGML_OP_MUL_MAT_ID), C(GGML_OP_SCALE), C(GGML_OP_RESHAPE), C(GGML_OP_VIEW),
    C(GGML_OP_PERMUTE), C(GGML_OP_TRANSPOSE), C(GGML_OP_DIAG_MASK_INF), C(GGML_OP_DIAG_MASK_ZERO), C(GGML_OP_SOFT_MAX),
    C(GGML_OP_SOFT_MAX_BACK), C(GGML_OP_ROPE), C(GGML_OP_ROPE_BACK), C(GGML_OP_CLAMP), C(GGML_OP_ARGSORT), C(GGML_OP_TOP_K),
    C(GGML_OP_FILL), C(GGML_OP_FLASH_ATTN_EXT), C(GGML_OP_UNARY), C(GGML_OP_COUNT),
    C(GGML_TENSOR_FLAG_INPUT), C(GGML_TENSOR_FLAG_OUTPUT), C(GGML_TENSOR_FLAG_PARAM), C(GGML_TENSOR_FLAG_LOSS), C(GGML_TENSOR_FLAG_COMPUTE),
    C(GGML_STATUS_ALLOC_FAILED), C(GGML_STATUS_FAILED), C(GGML_STATUS_SUCCESS), C(GGML_STATUS_ABORTED),
    C(GGML_LOG_LEVEL_DEBUG), C(GGML_LOG_LEVEL_INFO), C(GGML_LOG_LEVEL_WARN), C(GGML_LOG_LEVEL_ERROR), C(GGML_LOG_LEVEL_CONT),
    C(GGML_BACKEND_BUFFER_USAGE_ANY), C(GGML_BACKEND_BUFFER_USAGE_WEIGHTS), C(GGML_BACKEND_BUFFER_USAGE_COMPUTE),
    C(GGML_BACKEND_DEVICE_TYPE_CPU),
    C(GGML_MAX_DIMS), C(GGML_MAX_SRC), C(GGML_MAX_NAME), C(GGML_MAX_OP_PARAMS), C(TENSOR_ALIGNMENT),
};

int main(void) {
    if (!ggml_rs_abi_describe) {
        printf("not linked against ggml-rs: nothing to compare\n");
        return 77;
    }
    size_t n = 0;
    const struct ggml_rs_abi_entry * e = ggml_rs_abi_describe(&n);
    const size_t n_expected = sizeof(table) / sizeof(table[0]);
    int failures = 0, structs = 0, fields = 0, consts = 0;
    for (size_t i = 0; i < n; i++) {
        struct expected * x = NULL;
        for (size_t k = 0; k < n_expected; k++) {
            bool same_field = (e[i].field == NULL && table[k].field == NULL) ||
                              (e[i].field != NULL && table[k].field != NULL && strcmp(e[i].field, table[k].field) == 0);
            if (strcmp(e[i].type_name, table[k].type_name) == 0 && same_field) {
                x = &table[k];
            }
        }
        if (x == NULL) {
            // library-only constants (its own configuration) are not in upstream's headers
            if (strcmp(e[i].type_name, "const") == 0 && strncmp(e[i].field, "GGML_SCHED_", 11) == 0) {
                continue;
            }
            printf("FAIL: the library reports %s.%s, which this test does not know\n", e[i].type_name, e[i].field ? e[i].field : "(size)");
            failures++;
            continue;
        }
        x->seen = 1;
        if (x->value != e[i].value || (x->field == NULL && x->align != e[i].align)) {
            printf("FAIL: %s.%s: upstream %lld (align %lld), ggml-rs %lld (align %lld)\n", x->type_name, x->field ? x->field : "(size)",
                   x->value, x->align, (long long) e[i].value, (long long) e[i].align);
            failures++;
        }
        if (strcmp(x->type_name, "const") == 0) {
            consts++;
        } else if (x->field == NULL) {
            structs++;
        } else {
            fields++;
        }
    }
    for (size_t k = 0; k < n_expected; k++) {
        if (!table[k].seen) {
            printf("FAIL: the library does not report %s.%s\n", table[k].type_name, table[k].field ? table[k].field : "(size)");
            failures++;
        }
    }
    printf("layouts checked %d structs, %d fields, %d constants against the pinned headers: %s\n", structs, fields, consts,
           failures ? "MISMATCH" : "all equal");
    printf("%s, with ggml-base's %s type table\n", ggml_rs_version(), ggml_type_name(GGML_TYPE_F32));
    return failures ? 1 : 0;
}

// report_llama: reads back where a llama.cpp graph's tensors really are, to check the memory plan
// report (GGML_RS_ALLOC_REPORT) against them. Loads MODEL, evaluates PROMPT with one
// llama_decode (2 threads), and from the scheduler's eval callback writes, for every node and
// every tensor it reads (through views to their sources), one line per tensor in a compute
// buffer:
//
//   ADDRESS<TAB>BUFFER TYPE<TAB>OFFSET<TAB>NBYTES<TAB>NAME   OFFSET = data - ggml_backend_buffer_get_base(buffer)
//
// to OUT. The callback answers "no" to every node (nothing is observed), so the compute runs as
// usual; it is asked about every node after the graph is allocated, which is when the places are
// final. scripts/check_report.py compares OUT with the last report of the run.
//
//   report_llama MODEL PROMPT OUT

#include "ggml-backend.h"
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE * out;
static long n_lines;

static void record(struct ggml_tensor * t, int depth) {
    if (!t || depth > 2) {
        return;
    }
    if (t->buffer && t->data && ggml_backend_buffer_get_usage(t->buffer) == GGML_BACKEND_BUFFER_USAGE_COMPUTE) {
        const char * base = (const char *) ggml_backend_buffer_get_base(t->buffer);
        fprintf(out, "%p\t%s\t%zu\t%zu\t%s\n", (void *) t, ggml_backend_buft_name(ggml_backend_buffer_get_type(t->buffer)), (size_t) ((const char *) t->data - base), ggml_nbytes(t), t->name);
        n_lines++;
    }
    record(t->view_src, depth + 1);
}

static bool observe(struct ggml_tensor * t, bool ask, void * user_data) {
    (void) user_data;
    if (ask) {
        record(t, 0);
        for (int j = 0; j < GGML_MAX_SRC; j++) {
            record(t->src[j], 0);
        }
    }
    return false;
}

int main(int argc, char ** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODEL PROMPT OUT\n", argv[0]);
        return 2;
    }
    out = fopen(argv[3], "w");
    if (!out) {
        perror(argv[3]);
        return 2;
    }
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "report_llama: cannot load %s\n", argv[1]);
        return 1;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = 64;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.cb_eval = observe;
    struct llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "report_llama: cannot make a context\n");
        return 1;
    }
    const struct llama_vocab * vocab = llama_model_get_vocab(model);
    llama_token tokens[64];
    const int n = llama_tokenize(vocab, argv[2], (int) strlen(argv[2]), tokens, 64, true, false);
    if (n <= 0) {
        fprintf(stderr, "report_llama: cannot tokenize the prompt (%d)\n", n);
        return 1;
    }
    if (llama_decode(ctx, llama_batch_get_one(tokens, n)) != 0) {
        fprintf(stderr, "report_llama: llama_decode failed\n");
        return 1;
    }
    fclose(out);
    printf("%d tokens, %ld tensor places read back\n", n, n_lines);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}

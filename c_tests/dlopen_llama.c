// dlopen_llama: a llama.cpp client that links nothing of llama.cpp or ggml and loads libllama
// at run time with dlopen(RTLD_LOCAL), as Python's ctypes (llama-cpp-python) does. It exists to
// run with ggml-rs in LD_PRELOAD: the preloaded library must start inert in a process that has
// no ggml-base, then take over once libllama (and with it libggml-base) has been dlopened.
//
//   dlopen_llama LIBLLAMA MODEL PROMPT N_GEN
//
// Evaluates the prompt, generates N_GEN tokens greedily (argmax, one per llama_decode), and
// prints to stdout the generated token ids, an FNV-1a hash of the raw logits of every step and
// the text; scripts/test.sh compares a run with the preload against one without.
// Only llama.h's types are used (for the function pointer types): nothing is linked.

#include "llama.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void * lib;

static void * need(const char * name) {
    void * p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "dlopen_llama: %s not found in libllama: %s\n", name, dlerror());
        exit(2);
    }
    return p;
}

// a pointer to libllama's function NAME, of NAME's type in llama.h
#define FN(name) __typeof__(name) * const p_##name = (__typeof__(name) *) need(#name)

static uint64_t fnv1a64(const void * data, size_t n) {
    const unsigned char * p = data;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * 0x100000001b3ull;
    }
    return h;
}

int main(int argc, char ** argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s LIBLLAMA MODEL PROMPT N_GEN\n", argv[0]);
        return 2;
    }
    const char * prompt = argv[3];
    const int n_gen = atoi(argv[4]);

    lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen_llama: %s\n", dlerror());
        return 2;
    }
    FN(llama_backend_init);
    FN(llama_backend_free);
    FN(llama_model_default_params);
    FN(llama_context_default_params);
    FN(llama_model_load_from_file);
    FN(llama_model_free);
    FN(llama_init_from_model);
    FN(llama_free);
    FN(llama_model_get_vocab);
    FN(llama_vocab_n_tokens);
    FN(llama_vocab_is_eog);
    FN(llama_tokenize);
    FN(llama_token_to_piece);
    FN(llama_batch_get_one);
    FN(llama_decode);
    FN(llama_get_logits_ith);

    p_llama_backend_init();
    struct llama_model * model = p_llama_model_load_from_file(argv[2], p_llama_model_default_params());
    if (!model) {
        fprintf(stderr, "dlopen_llama: cannot load %s\n", argv[2]);
        return 1;
    }
    const struct llama_vocab * vocab = p_llama_model_get_vocab(model);
    const int n_vocab = p_llama_vocab_n_tokens(vocab);

    const int n_prompt_max = (int) strlen(prompt) + 8;
    llama_token * tokens = malloc(sizeof(llama_token) * (size_t) (n_prompt_max + n_gen));
    const int n_prompt = p_llama_tokenize(vocab, prompt, (int32_t) strlen(prompt), tokens, n_prompt_max, true, false);
    if (n_prompt <= 0) {
        fprintf(stderr, "dlopen_llama: tokenization failed (%d)\n", n_prompt);
        return 1;
    }

    struct llama_context_params cparams = p_llama_context_default_params();
    cparams.n_ctx = (uint32_t) (n_prompt + n_gen + 8);
    cparams.n_batch = cparams.n_ctx;
    cparams.n_threads = 2;
    cparams.n_threads_batch = 2;
    cparams.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;  // "auto" would probe the device
    struct llama_context * ctx = p_llama_init_from_model(model, cparams);
    if (!ctx) {
        fprintf(stderr, "dlopen_llama: cannot create a context\n");
        return 1;
    }

    printf("prompt_tokens %d\n", n_prompt);
    struct llama_batch batch = p_llama_batch_get_one(tokens, n_prompt);
    int n_done = 0;
    char text[65536] = "";
    size_t text_len = 0;
    while (n_done < n_gen) {
        if (p_llama_decode(ctx, batch) != 0) {
            fprintf(stderr, "dlopen_llama: llama_decode failed at step %d\n", n_done);
            return 1;
        }
        const float * logits = p_llama_get_logits_ith(ctx, -1);
        llama_token best = 0;
        for (int i = 1; i < n_vocab; i++) {
            if (logits[i] > logits[best]) {
                best = i;
            }
        }
        printf("step %d token %d logits_fnv1a64=%016llx\n", n_done, best,
               (unsigned long long) fnv1a64(logits, sizeof(float) * (size_t) n_vocab));
        n_done++;
        if (p_llama_vocab_is_eog(vocab, best)) {
            break;
        }
        char piece[256];
        const int n = p_llama_token_to_piece(vocab, best, piece, sizeof(piece), 0, false);
        if (n > 0 && text_len + (size_t) n < sizeof(text)) {
            memcpy(text + text_len, piece, (size_t) n);
            text_len += (size_t) n;
            text[text_len] = '\0';
        }
        tokens[n_prompt + n_done - 1] = best;
        batch = p_llama_batch_get_one(&tokens[n_prompt + n_done - 1], 1);
    }
    printf("text: %s\n", text);

    p_llama_free(ctx);
    p_llama_model_free(model);
    p_llama_backend_free();
    free(tokens);
    dlclose(lib);
    return 0;
}

// llama-compare: byte-stable output for comparing two builds of llama.cpp/ggml on one model.
//
// Evaluates a prompt with logits for every position, then generates greedily (argmax, one token
// per llama_decode), and prints to stdout:
//
//   prompt_tokens <n>: <id> <id> ...
//   pos <i> logits_fnv1a64=<16 hex digits>      one line per evaluated position, in order
//   generated_tokens <n>: <id> <id> ...
//   text: <prompt + generated text: \n, \r, \\ escaped; control bytes, invalid UTF-8 as \xNN>
//
// Nothing on stdout depends on the batch settings, so runs with different -b/-ub/--vary-batch
// can be diffed directly (logit hashes may legitimately differ between ubatch sizes, since the
// CPU backend picks different matmul paths; the generated tokens should not; flash attention
// on/off may change both). llama's own log goes to stderr (warnings and errors only, all with -v).
//
// --nodes FILE writes, for the prompt's decodes, every graph node the backends compute, in order:
// "<i> <name> <op> <type> <ne0>x<ne1>x<ne2>x<ne3> <FNV-1a of its bytes>", so two builds' files
// show the first node whose bytes differ (scripts/cpu_compare.sh --nodes). The eval callback makes
// the scheduler compute node by node there, so the run's own output is produced without it.
//
// Only llama.h (and the ggml headers it includes) is used, so the program builds against any tree
// with the pinned API.

#include "llama.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Options {
    std::string model;
    std::string prompt     = "Hello world";
    int         n_gen      = 16;
    int         n_ctx      = 0;  // 0: just enough for prompt + generation
    int         n_batch    = 512;
    int         n_ubatch   = 512;
    int         n_threads  = 2;
    std::string flash_attn = "off";  // explicit by default: "auto" would probe the device
    std::string cache_type_k;        // -ctk / -ctv: the KV cache's types by ggml name (default f16)
    std::string cache_type_v;
    std::string logits_path;
    std::string nodes_path;          // --nodes: the prompt's graph nodes and their hashes
    bool        vary_batch = false;
    bool        verbose    = false;
    std::string rpc;                 // rpc-server endpoints host:port[,host:port]; empty: CPU only
    int         n_gpu_layers = 0;    // layers offloaded to the RPC devices (or --dev's)
    std::string dev;                 // a device of a backend module to offload to (GGML_BACKEND_PATH, e.g. CUDA0)
    bool        split_tensor = false; // split the offloaded layers' tensors across the devices (meta device)
};

void usage(FILE * to, const char * argv0) {
    std::fprintf(to,
        "usage: %s -m MODEL [-p PROMPT] [-n N_GEN] [-c N_CTX] [-b N_BATCH] [-ub N_UBATCH]\n"
        "       [-fa on|off|auto] [-ctk TYPE] [-ctv TYPE] [-t THREADS] [--logits FILE] [--vary-batch] [-v]\n"
        "       [--rpc HOST:PORT[,HOST:PORT...] -ngl N [-sm layer|tensor]] [--dev NAME -ngl N]\n"
        "\n"
        "  -m MODEL        GGUF model (loaded on the CPU only)\n"
        "  -p PROMPT       prompt text, tokenized with BOS (default \"Hello world\")\n"
        "  -n N_GEN        tokens to generate greedily (default 16; stops early only at EOG)\n"
        "  -c N_CTX        context size (default 0: prompt + N_GEN)\n"
        "  -b N_BATCH      logical batch size; the prompt is fed in chunks of at most this (default 512)\n"
        "  -ub N_UBATCH    physical batch size (default 512)\n"
        "  -fa MODE        flash attention: on, off or auto (default off)\n"
        "  -ctk, -ctv TYPE the KV cache's K / V type, a ggml type name (q8_0, q4_0, ...; default f16)\n"
        "  -t THREADS      threads for generation and batch processing (default 2)\n"
        "  --logits FILE   also write every evaluated position's logits, raw float32, in order\n"
        "  --nodes FILE    write every node of the prompt's graphs: index, name, op, type, shape,\n"
        "                  FNV-1a of its bytes (a separate context: the run's output is unchanged)\n"
        "  --vary-batch    feed the prompt in chunks of 1, 3, 7, then the rest (capped at N_BATCH)\n"
        "  -v              pass llama's full log through to stderr\n"
        "  --rpc HOST:PORT offload to the devices of rpc-servers (ggml-rpc-server), comma separated\n"
        "  -ngl N          layers offloaded to the RPC devices or --dev (default 0)\n"
        "  --dev NAME      offload to this device of the backends ggml_backend_load_all finds\n"
        "                  (GGML_BACKEND_PATH: a module such as libggml_rs_cuda.so, device CUDA0)\n"
        "  -sm MODE        layer: whole layers per device (default); tensor: tensors split across\n"
        "                  the devices (ggml's meta device, tensor parallelism)\n",
        argv0);
}

// the ggml type named `name` (ggml_type_name's spelling), or -1
int type_by_name(const std::string & name) {
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        const char * n = ggml_type_name((ggml_type) t);
        if (n && name == n) {
            return t;
        }
    }
    return -1;
}

bool parse_int(const char * s, int min_value, int & out) {
    char * end = nullptr;
    errno = 0;
    const long v = std::strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min_value || v > 1000000000L) {
        return false;
    }
    out = (int) v;
    return true;
}

// Returns 0 on success, 2 on a usage error (message already printed), -1 for --help.
int parse_args(int argc, char ** argv, Options & o) {
    if (argc < 2) {
        usage(stderr, argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            return -1;
        }
        if (a == "--vary-batch") { o.vary_batch = true; continue; }
        if (a == "-v" || a == "--verbose") { o.verbose = true; continue; }

        if (i + 1 >= argc) {
            std::fprintf(stderr, "error: %s needs a value\n", a.c_str());
            return 2;
        }
        const char * v = argv[++i];
        bool ok = true;
        if      (a == "-m")                    { o.model = v; }
        else if (a == "-p")                    { o.prompt = v; }
        else if (a == "-n")                    { ok = parse_int(v, 0, o.n_gen); }
        else if (a == "-c")                    { ok = parse_int(v, 0, o.n_ctx); }
        else if (a == "-b")                    { ok = parse_int(v, 1, o.n_batch); }
        else if (a == "-ub")                   { ok = parse_int(v, 1, o.n_ubatch); }
        else if (a == "-t")                    { ok = parse_int(v, 1, o.n_threads); }
        else if (a == "-fa")                   { o.flash_attn = v; ok = o.flash_attn == "on" || o.flash_attn == "off" || o.flash_attn == "auto"; }
        else if (a == "-ctk")                  { o.cache_type_k = v; ok = type_by_name(v) >= 0; }
        else if (a == "-ctv")                  { o.cache_type_v = v; ok = type_by_name(v) >= 0; }
        else if (a == "--logits")              { o.logits_path = v; }
        else if (a == "--nodes")               { o.nodes_path = v; }
        else if (a == "--rpc")                 { o.rpc = v; }
        else if (a == "--dev")                 { o.dev = v; }
        else if (a == "-ngl")                  { ok = parse_int(v, 0, o.n_gpu_layers); }
        else if (a == "-sm")                   { o.split_tensor = std::string(v) == "tensor"; ok = o.split_tensor || std::string(v) == "layer"; }
        else {
            std::fprintf(stderr, "error: unknown argument %s\n", a.c_str());
            return 2;
        }
        if (!ok) {
            std::fprintf(stderr, "error: invalid value for %s: '%s'\n", a.c_str(), v);
            return 2;
        }
    }
    if (o.model.empty()) {
        std::fprintf(stderr, "error: -m MODEL is required\n");
        return 2;
    }
    return 0;
}

// llama's log: warnings and errors (and their continuations) to stderr, unless verbose.
// Static: the callback stays installed until the process exits.
struct LogFilter {
    bool verbose = false;
    bool showing = false;  // whether the message that GGML_LOG_LEVEL_CONT continues was shown
};
LogFilter g_log_filter;

void log_to_stderr(enum ggml_log_level level, const char * text, void * user_data) {
    auto * f = static_cast<LogFilter *>(user_data);
    if (level != GGML_LOG_LEVEL_CONT) {
        f->showing = f->verbose || level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR;
    }
    if (f->showing) {
        std::fputs(text, stderr);
    }
}

uint64_t fnv1a64(const void * data, size_t n) {
    const auto * p = static_cast<const unsigned char *>(data);
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

// First index of the maximum: ties go to the lowest id, so the choice is deterministic.
llama_token argmax(const float * logits, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) {
        if (logits[i] > logits[best]) {
            best = i;
        }
    }
    return best;
}

// Length of the valid UTF-8 sequence starting at s[i] (no overlongs, surrogates or > U+10FFFF),
// or 0 if the byte there does not start one.
size_t utf8_len(const std::string & s, size_t i) {
    const auto b = [&](size_t k) { return (unsigned char) s[i + k]; };
    const unsigned char c = b(0);
    size_t n;
    unsigned char lo = 0x80, hi = 0xbf;  // allowed range of the second byte
    if      (c < 0x80)              return 1;
    else if (c >= 0xc2 && c <= 0xdf) n = 2;
    else if (c >= 0xe0 && c <= 0xef) { n = 3; if (c == 0xe0) lo = 0xa0; if (c == 0xed) hi = 0x9f; }
    else if (c >= 0xf0 && c <= 0xf4) { n = 4; if (c == 0xf0) lo = 0x90; if (c == 0xf4) hi = 0x8f; }
    else                            return 0;
    if (i + n > s.size() || b(1) < lo || b(1) > hi) return 0;
    for (size_t k = 2; k < n; k++) {
        if (b(k) < 0x80 || b(k) > 0xbf) return 0;
    }
    return n;
}

// Keeps the text line one line of valid UTF-8, so that diff and grep treat the output as text:
// \n, \r and \\ are escaped, other control bytes and bytes outside valid UTF-8 (random models emit
// lone byte-fallback tokens) become \xNN.
std::string escape(const std::string & s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        const unsigned char c = (unsigned char) s[i];
        const size_t n = utf8_len(s, i);
        if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\\') {
            out += "\\\\";
        } else if (n == 0 || c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\x%02x", c);
            out += buf;
        } else {
            out.append(s, i, n);
            i += n;
            continue;
        }
        i++;
    }
    return out;
}

std::string token_text(const llama_vocab * vocab, llama_token t) {
    std::string piece(32, '\0');
    int n = llama_token_to_piece(vocab, t, &piece[0], (int32_t) piece.size(), 0, false);
    if (n < 0) {  // buffer too small: -n is the size needed
        piece.resize((size_t) -n);
        n = llama_token_to_piece(vocab, t, &piece[0], (int32_t) piece.size(), 0, false);
    }
    piece.resize(n > 0 ? (size_t) n : 0);
    return piece;
}

std::string join_ids(const std::vector<llama_token> & ids) {
    std::string s;
    for (const llama_token t : ids) {
        s += ' ';
        s += std::to_string(t);
    }
    return s;
}

// --nodes: the eval callback's state, one line per computed node
struct NodeDump {
    FILE *                     out = nullptr;
    long                       index = 0;
    std::vector<unsigned char> bytes;
};

bool dump_node(struct ggml_tensor * t, bool ask, void * user) {
    if (ask) {
        return true;  // every node
    }
    NodeDump & d = *static_cast<NodeDump *>(user);
    const size_t n = ggml_nbytes(t);
    d.bytes.resize(n);
    ggml_backend_tensor_get(t, d.bytes.data(), 0, n);
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char c : d.bytes) {
        h = (h ^ c) * 0x100000001b3ull;
    }
    std::fprintf(d.out, "%ld %s %s %s %" PRId64 "x%" PRId64 "x%" PRId64 "x%" PRId64 " %016" PRIx64 "\n", d.index++, t->name,
                 ggml_op_desc(t), ggml_type_name(t->type), t->ne[0], t->ne[1], t->ne[2], t->ne[3], h);
    return true;
}

// --nodes: the prompt again, in a context of its own whose eval callback writes every node
bool dump_prompt_nodes(llama_model * model, llama_context_params cparams, const std::vector<llama_token> & prompt,
                       const std::vector<int> & chunks, const std::string & path) {
    NodeDump d;
    d.out = std::fopen(path.c_str(), "w");
    if (!d.out) {
        std::fprintf(stderr, "error: cannot open %s: %s\n", path.c_str(), std::strerror(errno));
        return false;
    }
    cparams.cb_eval           = dump_node;
    cparams.cb_eval_user_data = &d;
    llama_context * ctx = llama_init_from_model(model, cparams);
    bool ok = ctx != nullptr;
    size_t pos = 0;
    for (const int k : chunks) {
        if (!ok) {
            break;
        }
        std::vector<llama_token> tokens(prompt.begin() + pos, prompt.begin() + pos + k);
        ok = llama_decode(ctx, llama_batch_get_one(tokens.data(), k)) == 0;
        pos += k;
    }
    if (ctx) {
        llama_free(ctx);
    }
    ok = std::fclose(d.out) == 0 && ok;
    if (!ok) {
        std::fprintf(stderr, "error: --nodes: the prompt's decode in a dumping context failed (%s)\n", path.c_str());
    }
    return ok;
}

// Owns the backend and the llama objects so that every exit path frees them.
struct Session {
    llama_model *   model = nullptr;
    llama_context * ctx   = nullptr;
    llama_batch     batch = {};
    bool            has_batch = false;
    FILE *          logits_file = nullptr;

    Session() { llama_backend_init(); }
    Session(const Session &) = delete;
    Session & operator=(const Session &) = delete;
    ~Session() {
        if (logits_file) std::fclose(logits_file);
        if (has_batch)   llama_batch_free(batch);
        if (ctx)         llama_free(ctx);
        if (model)       llama_model_free(model);
        llama_backend_free();
    }
};

struct Runner {
    Runner(const Options & o, Session & sess)
        : opt(o), s(sess), vocab(llama_model_get_vocab(sess.model)), n_vocab(llama_vocab_n_tokens(vocab)) {}

    const Options &          opt;
    Session &                s;
    const llama_vocab *      vocab;
    int                      n_vocab;
    std::vector<std::string> pos_lines;    // printed after the prompt tokens, in order
    std::vector<float>       last_logits;  // the newest evaluated row

    // Decodes tokens [0, n) at positions pos0.. with logits for all of them, and records each row.
    bool decode(const llama_token * tokens, int n, int pos0) {
        llama_batch & b = s.batch;
        b.n_tokens = n;
        for (int i = 0; i < n; i++) {
            b.token[i]     = tokens[i];
            b.pos[i]       = pos0 + i;
            b.n_seq_id[i]  = 1;
            b.seq_id[i][0] = 0;
            b.logits[i]    = 1;
        }
        const int32_t rc = llama_decode(s.ctx, b);
        if (rc != 0) {
            std::fprintf(stderr, "error: llama_decode failed with %d (positions %d..%d)\n", rc, pos0, pos0 + n - 1);
            return false;
        }
        for (int i = 0; i < n; i++) {
            const float * row = llama_get_logits_ith(s.ctx, i);
            if (!row) {
                std::fprintf(stderr, "error: no logits for position %d\n", pos0 + i);
                return false;
            }
            const size_t bytes = (size_t) n_vocab * sizeof(float);
            for (int j = 0; j < n_vocab; j++) {
                if (!std::isfinite(row[j])) {
                    std::fprintf(stderr, "warning: non-finite logit at position %d, token %d\n", pos0 + i, j);
                    break;
                }
            }
            char line[64];
            std::snprintf(line, sizeof(line), "pos %d logits_fnv1a64=%016" PRIx64, pos0 + i, fnv1a64(row, bytes));
            pos_lines.emplace_back(line);
            if (s.logits_file && std::fwrite(row, 1, bytes, s.logits_file) != bytes) {
                std::fprintf(stderr, "error: writing %s: %s\n", opt.logits_path.c_str(), std::strerror(errno));
                return false;
            }
            if (i == n - 1) {
                last_logits.assign(row, row + n_vocab);
            }
        }
        return true;
    }
};

// The prompt's chunk sizes: n_batch-sized, or with --vary-batch 1, 3, 7, then the rest, so that
// the scheduler sees a different batch shape on each of the first calls.
std::vector<int> prompt_chunks(int n_prompt, const Options & o) {
    std::vector<int> chunks;
    const int ramp[] = {1, 3, 7};
    int done = 0;
    if (o.vary_batch) {
        for (const int r : ramp) {
            if (done >= n_prompt) break;
            const int k = std::min({r, n_prompt - done, o.n_batch});
            chunks.push_back(k);
            done += k;
        }
    }
    while (done < n_prompt) {
        const int k = std::min(o.n_batch, n_prompt - done);
        chunks.push_back(k);
        done += k;
    }
    return chunks;
}

int run(const Options & opt) {
    g_log_filter.verbose = opt.verbose;
    llama_log_set(log_to_stderr, &g_log_filter);

    Session s;

    llama_model_params mparams = llama_model_default_params();
    std::vector<ggml_backend_dev_t> devices;  // empty offload list: the CPU only
    if (!opt.rpc.empty()) {
        // register the servers' devices the way llama's --rpc does, then offload to them
        ggml_backend_reg_t rpc_reg = ggml_backend_reg_by_name("RPC");
        using add_server_fn = ggml_backend_reg_t (*)(const char *);
        auto add_server = rpc_reg ? (add_server_fn) ggml_backend_reg_get_proc_address(rpc_reg, "ggml_backend_rpc_add_server") : nullptr;
        size_t start = 0;
        while (start <= opt.rpc.size()) {
            size_t end = opt.rpc.find(',', start);
            if (end == std::string::npos) {
                end = opt.rpc.size();
            }
            const std::string endpoint = opt.rpc.substr(start, end - start);
            ggml_backend_reg_t server = add_server ? add_server(endpoint.c_str()) : nullptr;
            if (!server || ggml_backend_reg_dev_count(server) == 0) {
                std::fprintf(stderr, "error: cannot reach rpc-server %s\n", endpoint.c_str());
                return 1;
            }
            ggml_backend_register(server);
            devices.push_back(ggml_backend_reg_dev_get(server, 0));
            start = end + 1;
        }
    }
    if (!opt.dev.empty()) {
        // the backend modules (GGML_BACKEND_PATH), then the device by name
        ggml_backend_load_all();
        ggml_backend_dev_t dev = ggml_backend_dev_by_name(opt.dev.c_str());
        if (!dev) {
            std::fprintf(stderr, "error: no device %s (is its module in GGML_BACKEND_PATH?)\n", opt.dev.c_str());
            return 1;
        }
        devices.push_back(dev);
    }
    devices.push_back(nullptr);
    mparams.devices      = devices.data();
    mparams.n_gpu_layers = opt.rpc.empty() && opt.dev.empty() ? 0 : opt.n_gpu_layers;
    mparams.split_mode   = opt.split_tensor ? LLAMA_SPLIT_MODE_TENSOR : LLAMA_SPLIT_MODE_LAYER;
    s.model = llama_model_load_from_file(opt.model.c_str(), mparams);
    if (!s.model) {
        std::fprintf(stderr, "error: cannot load model %s\n", opt.model.c_str());
        return 1;
    }

    Runner r(opt, s);

    // tokenize with BOS (add_special); the prompt is plain text (no special-token parsing)
    std::vector<llama_token> prompt(opt.prompt.size() + 8);
    int n_prompt = llama_tokenize(r.vocab, opt.prompt.data(), (int32_t) opt.prompt.size(),
                                  prompt.data(), (int32_t) prompt.size(), true, false);
    if (n_prompt < 0) {
        prompt.resize((size_t) -n_prompt);
        n_prompt = llama_tokenize(r.vocab, opt.prompt.data(), (int32_t) opt.prompt.size(),
                                  prompt.data(), (int32_t) prompt.size(), true, false);
    }
    if (n_prompt <= 0) {
        std::fprintf(stderr, "error: the prompt tokenized to no tokens\n");
        return 1;
    }
    prompt.resize((size_t) n_prompt);

    // positions evaluated: the prompt, then every generated token but the last
    const int n_eval = n_prompt + std::max(opt.n_gen - 1, 0);
    const int n_ctx  = opt.n_ctx > 0 ? opt.n_ctx : n_eval;
    if (n_eval > n_ctx) {
        std::fprintf(stderr, "error: -c %d is too small for %d prompt tokens + %d generated\n",
                     n_ctx, n_prompt, opt.n_gen);
        return 1;
    }

    llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx           = (uint32_t) n_ctx;
    cparams.n_batch         = (uint32_t) opt.n_batch;
    cparams.n_ubatch        = (uint32_t) opt.n_ubatch;
    cparams.n_threads       = opt.n_threads;
    cparams.n_threads_batch = opt.n_threads;
    cparams.flash_attn_type = opt.flash_attn == "on"  ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                            : opt.flash_attn == "off" ? LLAMA_FLASH_ATTN_TYPE_DISABLED
                                                      : LLAMA_FLASH_ATTN_TYPE_AUTO;
    cparams.no_perf         = true;
    if (!opt.cache_type_k.empty()) {
        cparams.type_k = (ggml_type) type_by_name(opt.cache_type_k);
    }
    if (!opt.cache_type_v.empty()) {
        cparams.type_v = (ggml_type) type_by_name(opt.cache_type_v);
    }
    s.ctx = llama_init_from_model(s.model, cparams);
    if (!s.ctx) {
        std::fprintf(stderr, "error: cannot create a context (n_ctx %d, n_batch %d, n_ubatch %d)\n",
                     n_ctx, opt.n_batch, opt.n_ubatch);
        return 1;
    }

    s.batch     = llama_batch_init(opt.n_batch, 0, 1);
    s.has_batch = true;

    if (!opt.logits_path.empty()) {
        s.logits_file = std::fopen(opt.logits_path.c_str(), "wb");
        if (!s.logits_file) {
            std::fprintf(stderr, "error: cannot open %s: %s\n", opt.logits_path.c_str(), std::strerror(errno));
            return 1;
        }
    }

    int pos = 0;
    for (const int k : prompt_chunks(n_prompt, opt)) {
        if (!r.decode(prompt.data() + pos, k, pos)) {
            return 1;
        }
        pos += k;
    }

    std::vector<llama_token> generated;
    std::string gen_text;
    while ((int) generated.size() < opt.n_gen) {
        const llama_token t = argmax(r.last_logits.data(), r.n_vocab);
        generated.push_back(t);
        if (llama_vocab_is_eog(r.vocab, t)) {
            break;
        }
        gen_text += token_text(r.vocab, t);
        if ((int) generated.size() == opt.n_gen) {
            break;  // the last token's logits are not needed
        }
        if (!r.decode(&t, 1, pos)) {
            return 1;
        }
        pos++;
    }

    if (s.logits_file) {
        const int rc = std::fclose(s.logits_file);
        s.logits_file = nullptr;
        if (rc != 0) {
            std::fprintf(stderr, "error: closing %s: %s\n", opt.logits_path.c_str(), std::strerror(errno));
            return 1;
        }
    }

    if (!opt.nodes_path.empty() && !dump_prompt_nodes(s.model, cparams, prompt, prompt_chunks(n_prompt, opt), opt.nodes_path)) {
        return 1;
    }

    // all of stdout in one go, after everything succeeded
    std::string out;
    out += "prompt_tokens " + std::to_string(prompt.size()) + ":" + join_ids(prompt) + "\n";
    for (const std::string & line : r.pos_lines) {
        out += line;
        out += '\n';
    }
    out += "generated_tokens " + std::to_string(generated.size()) + ":" + join_ids(generated) + "\n";
    out += "text: " + escape(opt.prompt + gen_text) + "\n";
    if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0) {
        std::fprintf(stderr, "error: writing stdout: %s\n", std::strerror(errno));
        return 1;
    }
    return 0;
}

}  // namespace

int main(int argc, char ** argv) {
    Options opt;
    const int rc = parse_args(argc, argv, opt);
    if (rc < 0) {
        usage(stdout, argv[0]);
        return 0;
    }
    if (rc != 0) {
        if (argc >= 2) {
            std::fprintf(stderr, "(%s -h for help)\n", argv[0]);
        }
        return rc;
    }
    return run(opt);
}

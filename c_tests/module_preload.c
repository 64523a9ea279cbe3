// LD_PRELOAD shim: loads the backend module named by GGML_RS_BACKEND_MODULE (as GGML_BACKEND_PATH
// does, through ggml_backend_load) before main() runs, for unmodified upstream programs that pick
// a device by name before, or without, calling ggml_backend_load_all (test-llama-archs -b RSCPU).
#include "ggml-backend.h"

#include <stdio.h>
#include <stdlib.h>

__attribute__((constructor)) static void load_backend_module(void) {
    const char * path = getenv("GGML_RS_BACKEND_MODULE");
    if (path == NULL || path[0] == 0) {
        return;
    }
    if (ggml_backend_load(path) == NULL) {
        fprintf(stderr, "module_preload: ggml_backend_load(%s) failed\n", path);
        exit(1);
    }
}

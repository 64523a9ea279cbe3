// LD_PRELOAD shim: registers the devices of the rpc-server named by GGML_RS_RPC_SERVER before
// main() runs, so an unmodified upstream program (test-backend-ops) sees an RPC device, as llama
// programs do with --rpc.
#include "ggml-backend.h"
#include "ggml-rpc.h"

#include <stdio.h>
#include <stdlib.h>

__attribute__((constructor)) static void register_rpc_server(void) {
    const char * endpoint = getenv("GGML_RS_RPC_SERVER");
    if (endpoint == NULL || endpoint[0] == 0) {
        return;
    }
    ggml_backend_reg_t reg = ggml_backend_rpc_add_server(endpoint);
    if (reg == NULL) {
        fprintf(stderr, "rpc_preload: cannot reach rpc-server %s\n", endpoint);
        exit(1);
    }
    ggml_backend_register(reg);
}

// Does AMX work in this process? Exit 0 when a tile configuration loads and a tile can be
// zeroed, 2 when the kernel refuses the tile state, a signal when the instructions fault.
//
// scripts/upstream.sh runs it before configuring the native build: GGML_NATIVE=ON compiles
// ggml-cpu's AMX kernels whenever the CPU advertises AMX, and ggml then uses them whenever the
// kernel grants the tile state (arch_prctl). Some virtual machines advertise AMX and grant it,
// but fault on the first LDTILECFG (general protection): every quantized MUL_MAT of that
// build crashes. There the native build is made without AMX (the rest of -march=native kept).
//
// Build: cc -O1 -mamx-tile scripts/amx_probe.c -o amx_probe
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define REQUEST_XCOMP_PERM 0x1023 // arch_prctl: ask for an extended state component
#define XTILEDATA 18              // the AMX tile data state component

// the 64-byte tile configuration of palette 1
struct tile_config {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t bytes_per_row[16];
    uint8_t rows[16];
};

int main(void) {
    if (syscall(SYS_arch_prctl, REQUEST_XCOMP_PERM, XTILEDATA) != 0) {
        return 2;
    }
    _Alignas(64) struct tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    cfg.bytes_per_row[0] = 64;
    cfg.rows[0] = 16;
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_release();
    return 0;
}

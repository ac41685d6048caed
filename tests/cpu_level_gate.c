/*
 * cpu_level_gate LEVEL PROGRAM [ARG...]: runs PROGRAM with CORRAL_CPU=LEVEL when this CPU has
 * that dispatch level, and otherwise exits 77, which CTest reports as skipped
 * (tests/CMakeLists.txt). The engine runs a level the CPU lacks at the highest it has, so
 * without the gate a `.avx512` test on an AVX2 machine would repeat the `.avx2` one and be
 * counted as a pass of code it never ran. Likewise `avx512-vdpbf16ps` is skipped on a CPU
 * that runs vdpbf16ps at `avx512` already (cpu_prefers_vdpbf16ps).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "corral/error.h"
#include "cpu.h"

enum { SKIPPED = 77 };

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: cpu_level_gate LEVEL PROGRAM [ARG...]\n");
        return 2;
    }
    corral_error err = {{0}};
    /* a CPU that takes vdpbf16ps at avx512 by itself would repeat that level */
    if (strcmp(argv[1], "avx512-vdpbf16ps") == 0 && cpu_force_level("avx512", &err) &&
        cpu_prefers_vdpbf16ps()) {
        printf("skipped: this CPU takes vdpbf16ps at level avx512 already\n");
        return SKIPPED;
    }
    if (!cpu_force_level(argv[1], &err)) {
        printf("skipped: %s\n", err.message);
        return SKIPPED;
    }
    if (setenv("CORRAL_CPU", argv[1], 1) != 0) {
        perror("setenv");
        return 2;
    }
    execv(argv[2], argv + 2);
    perror(argv[2]);
    return 2;
}

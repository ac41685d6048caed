/*
 * CPU feature detection and the dispatch level every kernel table is chosen by.
 * The level is detected once from CPUID (never from build flags) and can be lowered, not
 * raised, by CORRAL_CPU=scalar|avx2|avx512 or cpu_force_level (the --cpu option);
 * avx512-novnni is the AVX-512 level with VNNI (and BF16) turned off, as a CPU without them
 * runs it, and avx512-vdpbf16ps the AVX-512 level with BF16 rows through vdpbf16ps on any CPU
 * that has AVX512_BF16, Intel's included (cpu_prefers_vdpbf16ps).
 */
#ifndef CORRAL_ENGINE_CPU_H
#define CORRAL_ENGINE_CPU_H

#include <stdbool.h>
#include <stddef.h>

#include "corral/error.h"

enum cpu_level {
    CPU_LEVEL_SCALAR = 0, /* portable C */
    CPU_LEVEL_AVX2 = 1,   /* AVX2 + FMA + F16C */
    CPU_LEVEL_AVX512 = 2, /* AVX-512 F/BW/VL/DQ (+ VNNI when cpu_has_avx512_vnni) */
    CPU_LEVEL_COUNT
};

/* Highest level this CPU supports. */
enum cpu_level cpu_detected_level(void);

/* Level kernels should use now: the detected one, lowered by CORRAL_CPU or cpu_force_level. */
enum cpu_level cpu_active_level(void);

/* AVX-512 VNNI (vpdpbusd) is usable and not turned off; only meaningful when the active
 * level is AVX512. */
bool cpu_has_avx512_vnni(void);

/* AVX512_BF16 (vdpbf16ps) likewise; level avx512-novnni turns it off too. */
bool cpu_has_avx512_bf16(void);

/*
 * Whether BF16 rows go through the vdpbf16ps kernels (dot and tiles alike, so that a prompt's
 * results and a step's keep the same bits) rather than the FMA ones on weights widened to F32:
 * at the avx512 level where cpu_has_avx512_bf16 and cpu_vendor_prefers_vdpbf16ps, and at
 * level avx512-vdpbf16ps.
 */
bool cpu_prefers_vdpbf16ps(void);

/* That choice by the vendor string of CPUID leaf 0 (12 characters): every vendor's but
 * Intel's ("GenuineIntel"). Public for its test. */
bool cpu_vendor_prefers_vdpbf16ps(const char vendor[12]);

/*
 * Lower the active level to the named one ("scalar", "avx2", "avx512-novnni", "avx512",
 * "avx512-vdpbf16ps"). Fails for an unknown name or a level this CPU cannot run.
 */
bool cpu_force_level(const char *name, corral_error *err);

const char *cpu_level_name(enum cpu_level level);

/* The name of the kernels run now: the active level's, or the avx512 variant in force
 * (avx512-novnni also where the CPU itself lacks VNNI). */
const char *cpu_active_level_name(void);

/*
 * Whether a packed 1-token kernel, which reads its weights as one sequential stream, should
 * also request the lines ahead in software. Yes on Intel, on AMD before Zen 4 and on Zen 5,
 * where the hardware prefetchers alone keep too few lines in flight while the core computes
 * (on Zen 5 the K-quant and IQ4_XS streams from memory read far slower without); no on
 * Zen 4 (family 0x19), whose hardware prefetchers stream such a run faster alone (the
 * software requests only compete with them). CORRAL_PREFETCH=0|1 overrides, to measure
 * either way on any CPU. The _for form decides for a vendor and CPUID leaf 1 signature.
 */
bool cpu_prefetch_single_stream(void);
bool cpu_prefetch_single_stream_for(bool amd, unsigned int signature);

/*
 * The same choice for the packed 1-token F16 and BF16 streams at the AVX-512 level, which
 * compute little per line: off on Zen 4 and on Zen 5 alike (their steps ran slower with the
 * requests on Zen 5, unlike the quant streams), on elsewhere (on Intel the hardware
 * prefetchers alone kept these reads well below the memory's rate). CORRAL_PREFETCH=0|1
 * overrides it too.
 */
bool cpu_prefetch_float_stream(void);
bool cpu_prefetch_float_stream_for(bool amd, unsigned int signature);

/*
 * How far ahead (bytes) the packed AVX2 1-token kernels ask for their weights when they do:
 * 16 KiB on AMD before Zen 4, 8 KiB elsewhere. The distance is the same 8 KiB for every
 * tile of several tokens and at the AVX-512 level, where it was tuned (into L2, farther
 * than L1's fill buffers allow; shorter or longer distances read slower on Intel and on a
 * Zen 4). On a Zen 3 the 1-token AVX2 K-quant stream keeps up better 16 KiB ahead (its
 * memory is slower against a slower core, so more must be in flight); the legacy types and
 * 2 threads read the same either way, and prompts (compute-bound tiles) slower, so tiles
 * keep 8 KiB. Zen 2 and older are unmeasured.
 */
size_t cpu_one_token_prefetch_bytes(void);

/* That choice for a CPU: amd says whether it is an AMD, signature is its CPUID leaf 1 EAX.
 * Public for its test. */
size_t cpu_prefetch_bytes_for(bool amd, unsigned int signature);

/*
 * How far ahead (bytes) the packed AVX-512 1-token K-quant kernels ask for their weights when
 * they do (cpu_prefetch_single_stream): 4 KiB on Zen 5 and later AMD cores, whose 1-token
 * Q4_K and Q6_K streams used 3% and 1-3% less CPU time a token that way than 8 KiB ahead,
 * and 8 KiB (X86_PREFETCH_BYTES) elsewhere, where it was tuned. Zen 5's other quant streams
 * read the same at 4 KiB (Q4_0, Q8_0) or slower (IQ4_XS), so they keep 8 KiB.
 */
size_t cpu_k_quant_prefetch_bytes(void);
size_t cpu_k_quant_prefetch_bytes_for(bool amd, unsigned int signature);

/*
 * Whether those requests go into L1 (prefetcht0) rather than L2: yes on Zen 5 and later AMD
 * cores, whose 1-token Q6_K stream took 10% less CPU time a token so and Q4_K_M's 5%; no
 * elsewhere (on Intel an L1 request holds one of the core's few L1 fill buffers until its
 * line arrives, which capped the lines in flight; X86_PREFETCH_BYTES). Zen 5's Q4_0 reads
 * no faster into L1, so the other types keep L2.
 */
bool cpu_k_quant_prefetch_l1(void);
bool cpu_k_quant_prefetch_l1_for(bool amd, unsigned int signature);

/* Bytes of L2 cache per core as the OS reports it (sysconf, from CPUID), or 1 MiB when it
 * reports none. */
size_t cpu_l2_bytes(void);

/*
 * Whether the weights of one packed matrix call (the rows of a task, all its token tiles)
 * outgrow L2, so that each tile after the first streams them from farther out again: more
 * than three quarters of cpu_l2_bytes(), the rest left to the activations. The kernels ask
 * for a tile's lines in software only on the first tile or when this says so.
 */
bool cpu_outgrows_l2(size_t bytes);

/*
 * Whether an AMD CPU of this signature (CPUID leaf 1 EAX: family, model, stepping) is Zen 4
 * or later, the cores whose prefetchers need no software help. By family and model rather
 * than by AVX-512, which a hypervisor may hide on a Zen 4: family 0x19 models 0x10-0x1f
 * (Genoa), 0x60-0x7f (Raphael, Phoenix) and 0xa0-0xaf (Bergamo, Siena) are Zen 4, its models
 * 0x00-0x0f and 0x20-0x5f Zen 3; family 0x1a (Zen 5) and later are taken to be like Zen 4,
 * unmeasured. Public for its test.
 */
bool cpu_signature_is_zen4_or_later(unsigned int signature);

#endif

/*
 * Runtime CPU feature and vendor detection (CPUID + XGETBV) and the active dispatch level.
 * The active level is read on every kernel-table lookup, so it is cached after the first call.
 */
#include "cpu.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define CORRAL_X86 1
#endif

static int detected = -1;
static bool avx512_vnni, avx512_bf16, vendor_prefers_vdpbf16ps;
static int active = -1;
/* "avx512-novnni": the AVX-512 level as a CPU without VNNI (and so without the later BF16
 * instructions) runs it, so that its kernel tables are tested on CPUs that have them */
static bool vnni_off;
/* "avx512-vdpbf16ps": the AVX-512 level with BF16 rows through vdpbf16ps whatever the vendor,
 * so that those kernels are tested on an Intel CPU, which does not take them by itself */
static bool vdpbf16ps_forced;

/* CPUID leaf 0's vendor string (12 characters, no terminator); false where there is none. */
static bool read_vendor(char vendor[12])
{
#ifdef CORRAL_X86
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx))
        return false;
    memcpy(vendor, &ebx, 4);
    memcpy(vendor + 4, &edx, 4);
    memcpy(vendor + 8, &ecx, 4);
    return true;
#else
    (void)vendor;
    return false;
#endif
}

#ifdef CORRAL_X86
static unsigned long long read_xcr0(void)
{
    unsigned int eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}
#endif

static void detect(void)
{
    int level = CPU_LEVEL_SCALAR;
    char vendor[12];
    vendor_prefers_vdpbf16ps = read_vendor(vendor) && cpu_vendor_prefers_vdpbf16ps(vendor);
#ifdef CORRAL_X86
    unsigned int eax, ebx, ecx, edx;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
        bool osxsave = ecx & bit_OSXSAVE;
        bool fma = ecx & bit_FMA, f16c = ecx & bit_F16C, avx = ecx & bit_AVX;
        unsigned long long xcr0 = osxsave ? read_xcr0() : 0;
        bool ymm_state = (xcr0 & 0x6) == 0x6;
        bool zmm_state = (xcr0 & 0xe6) == 0xe6;
        if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) {
            bool avx2 = ebx & bit_AVX2;
            if (avx && avx2 && fma && f16c && ymm_state)
                level = CPU_LEVEL_AVX2;
            bool avx512 = (ebx & bit_AVX512F) && (ebx & bit_AVX512BW) && (ebx & bit_AVX512VL) &&
                          (ebx & bit_AVX512DQ);
            if (level == CPU_LEVEL_AVX2 && avx512 && zmm_state) {
                level = CPU_LEVEL_AVX512;
                avx512_vnni = ecx & bit_AVX512VNNI;
                /* AVX512_BF16: leaf 7, sub-leaf 1 (when leaf 7's EAX says it exists), EAX bit 5 */
                if (eax >= 1 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx))
                    avx512_bf16 = eax & (1u << 5);
            }
        }
    }
#endif
    detected = level;
}

enum cpu_level cpu_detected_level(void)
{
    if (detected < 0)
        detect();
    return (enum cpu_level)detected;
}

bool cpu_has_avx512_vnni(void)
{
    cpu_active_level(); /* reads CORRAL_CPU, which may turn VNNI off */
    return cpu_detected_level() == CPU_LEVEL_AVX512 && avx512_vnni && !vnni_off;
}

bool cpu_has_avx512_bf16(void)
{
    cpu_active_level(); /* reads CORRAL_CPU, which may turn the extensions off */
    return cpu_detected_level() == CPU_LEVEL_AVX512 && avx512_bf16 && !vnni_off;
}

bool cpu_vendor_prefers_vdpbf16ps(const char vendor[12])
{
    /* Intel cores issue vdpbf16ps at a small fraction of their FMA rate, so its two products
     * a lane per instruction lose to widening the weights to F32 for the FMAs; AMD's Zen 4 and
     * 5 issue it as fast as an FMA, where it doubles the products. */
    return memcmp(vendor, "GenuineIntel", 12) != 0;
}

bool cpu_prefers_vdpbf16ps(void)
{
    return cpu_active_level() == CPU_LEVEL_AVX512 && cpu_has_avx512_bf16() &&
           (vendor_prefers_vdpbf16ps || vdpbf16ps_forced);
}

const char *cpu_level_name(enum cpu_level level)
{
    static const char *const names[CPU_LEVEL_COUNT] = {"scalar", "avx2", "avx512"};
    return level < CPU_LEVEL_COUNT ? names[level] : "unknown";
}

static const char NO_VNNI_NAME[] = "avx512-novnni";
static const char VDPBF16PS_NAME[] = "avx512-vdpbf16ps";

static int level_from_name(const char *name)
{
    if (strcmp(name, NO_VNNI_NAME) == 0 || strcmp(name, VDPBF16PS_NAME) == 0)
        return CPU_LEVEL_AVX512;
    for (int level = 0; level < CPU_LEVEL_COUNT; level++)
        if (strcmp(name, cpu_level_name((enum cpu_level)level)) == 0)
            return level;
    return -1;
}

/* Whether this CPU has the instructions a level name asks for beyond its level. */
static bool runs_name_extras(const char *name)
{
    return strcmp(name, VDPBF16PS_NAME) != 0 || avx512_bf16;
}

/* Sets the kernel choices a level name makes beyond its level. */
static void choose_name_extras(const char *name)
{
    vnni_off = strcmp(name, NO_VNNI_NAME) == 0;
    vdpbf16ps_forced = strcmp(name, VDPBF16PS_NAME) == 0;
}

const char *cpu_active_level_name(void)
{
    enum cpu_level level = cpu_active_level();
    if (level == CPU_LEVEL_AVX512 && !cpu_has_avx512_vnni())
        return NO_VNNI_NAME;
    if (level == CPU_LEVEL_AVX512 && vdpbf16ps_forced)
        return VDPBF16PS_NAME;
    return cpu_level_name(level);
}

bool cpu_force_level(const char *name, corral_error *err)
{
    int level = level_from_name(name);
    if (level < 0) {
        corral_error_set(err,
                         "unknown CPU level '%s' (expected scalar, avx2, avx512-novnni, avx512 or "
                         "avx512-vdpbf16ps)",
                         name);
        return false;
    }
    if (level > (int)cpu_detected_level()) {
        corral_error_set(err, "this CPU cannot run level '%s' (it supports up to '%s')", name,
                         cpu_level_name(cpu_detected_level()));
        return false;
    }
    if (!runs_name_extras(name)) {
        corral_error_set(err, "this CPU cannot run level '%s' (it lacks AVX512_BF16)", name);
        return false;
    }
    active = level;
    choose_name_extras(name);
    return true;
}

enum cpu_level cpu_active_level(void)
{
    if (active < 0) {
        int level = (int)cpu_detected_level();
        const char *env = getenv("CORRAL_CPU");
        if (env && *env) {
            int wanted = level_from_name(env);
            /* An unknown or too-high request keeps the detected level; the CLI reports it. */
            if (wanted >= 0 && wanted <= level && runs_name_extras(env)) {
                level = wanted;
                choose_name_extras(env);
            }
        }
        active = level;
    }
    return (enum cpu_level)active;
}

bool cpu_signature_is_zen4_or_later(unsigned int signature)
{
    unsigned int family = (signature >> 8) & 0xf, model = (signature >> 4) & 0xf;
    if (family == 0xf) {
        family += (signature >> 20) & 0xff;
        model |= ((signature >> 16) & 0xf) << 4;
    }
    if (family != 0x19)
        return family > 0x19;
    return (model >= 0x10 && model <= 0x1f) || (model >= 0x60 && model <= 0x7f) ||
           (model >= 0xa0 && model <= 0xaf);
}

/* Whether this CPU is an AMD (or Hygon: Zen cores), and then its signature (CPUID leaf 1). */
static bool amd_signature(unsigned int *signature)
{
#ifdef CORRAL_X86
    char vendor[12];
    if (!read_vendor(vendor))
        return false;
    if (memcmp(vendor, "AuthenticAMD", 12) != 0 && memcmp(vendor, "HygonGenuine", 12) != 0)
        return false;
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
        return false;
    *signature = eax;
    return true;
#else
    (void)signature;
    return false;
#endif
}

/* A CPUID leaf 1 signature's family, the extended family added where the base is 0xf. */
static unsigned int cpu_family(unsigned int signature)
{
    unsigned int family = (signature >> 8) & 0xf;
    return family == 0xf ? family + ((signature >> 20) & 0xff) : family;
}

bool cpu_prefetch_single_stream_for(bool amd, unsigned int signature)
{
    return !(amd && cpu_family(signature) == 0x19 && cpu_signature_is_zen4_or_later(signature));
}

bool cpu_prefetch_float_stream_for(bool amd, unsigned int signature)
{
    return !(amd && cpu_signature_is_zen4_or_later(signature));
}

/* A choice read once: CORRAL_PREFETCH where set, else decide(vendor, signature). Kernels on
 * every pool thread ask; each computes the same answer, so a relaxed cache. */
static bool prefetch_choice(_Atomic int *cached, bool (*decide)(bool, unsigned int))
{
    int prefetch = atomic_load_explicit(cached, memory_order_relaxed);
    if (prefetch < 0) {
        const char *env = getenv("CORRAL_PREFETCH");
        if (env && (strcmp(env, "0") == 0 || strcmp(env, "1") == 0))
            prefetch = env[0] == '1';
        else {
            unsigned int signature = 0;
            bool amd = amd_signature(&signature);
            prefetch = decide(amd, signature);
        }
        atomic_store_explicit(cached, prefetch, memory_order_relaxed);
    }
    return prefetch;
}

bool cpu_prefetch_single_stream(void)
{
    static _Atomic int cached = -1;
    return prefetch_choice(&cached, cpu_prefetch_single_stream_for);
}

bool cpu_prefetch_float_stream(void)
{
    static _Atomic int cached = -1;
    return prefetch_choice(&cached, cpu_prefetch_float_stream_for);
}

size_t cpu_prefetch_bytes_for(bool amd, unsigned int signature)
{
    return amd && !cpu_signature_is_zen4_or_later(signature) ? 16384 : 8192;
}

/* A distance read once: decide(vendor, signature). Kernels on every pool thread ask; each
 * computes the same answer, so a relaxed cache. */
static size_t distance_choice(_Atomic size_t *cached, size_t (*decide)(bool, unsigned int))
{
    size_t bytes = atomic_load_explicit(cached, memory_order_relaxed);
    if (bytes == 0) {
        unsigned int signature = 0;
        bool amd = amd_signature(&signature);
        bytes = decide(amd, signature);
        atomic_store_explicit(cached, bytes, memory_order_relaxed);
    }
    return bytes;
}

size_t cpu_one_token_prefetch_bytes(void)
{
    static _Atomic size_t cached = 0;
    return distance_choice(&cached, cpu_prefetch_bytes_for);
}

/* Zen 5 and later AMD cores' 1-token K-quant distance; into L1 where it is the choice */
enum { ZEN5_K_QUANT_PREFETCH_BYTES = 4096 };

size_t cpu_k_quant_prefetch_bytes_for(bool amd, unsigned int signature)
{
    return amd && cpu_family(signature) >= 0x1a ? ZEN5_K_QUANT_PREFETCH_BYTES : 8192;
}

size_t cpu_k_quant_prefetch_bytes(void)
{
    static _Atomic size_t cached = 0;
    return distance_choice(&cached, cpu_k_quant_prefetch_bytes_for);
}

bool cpu_k_quant_prefetch_l1_for(bool amd, unsigned int signature)
{
    return cpu_k_quant_prefetch_bytes_for(amd, signature) == ZEN5_K_QUANT_PREFETCH_BYTES;
}

bool cpu_k_quant_prefetch_l1(void)
{
    return cpu_k_quant_prefetch_bytes() == ZEN5_K_QUANT_PREFETCH_BYTES;
}

size_t cpu_l2_bytes(void)
{
    long bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return bytes > 0 ? (size_t)bytes : 1024 * 1024;
}

bool cpu_outgrows_l2(size_t bytes)
{
    /* asked on every call of a prompt's matrices: sysconf may run CPUID, which traps to the
     * hypervisor in a VM, so once; every thread computes the same */
    static _Atomic size_t cached_limit;
    size_t limit = atomic_load_explicit(&cached_limit, memory_order_relaxed);
    if (limit == 0) {
        limit = cpu_l2_bytes() / 4 * 3;
        atomic_store_explicit(&cached_limit, limit, memory_order_relaxed);
    }
    return bytes > limit;
}

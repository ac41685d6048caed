/*
 * CPU identification: the CPUID signatures of AMD cores map to the right generation for the
 * software-prefetch choices (cpu_signature_is_zen4_or_later, cpu_prefetch_bytes_for,
 * cpu_prefetch_single_stream_for: off on Zen 4 alone; cpu_prefetch_float_stream_for: off on
 * Zen 4 and later), extended
 * family and model included; the prefetch choice follows CORRAL_PREFETCH when it is set;
 * a packed matrix call's rows count as resident in L2 up to three quarters of it; and BF16 rows
 * take vdpbf16ps by vendor at avx512 and wherever level avx512-vdpbf16ps is asked for.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "cpu.h"

/* CPUID leaf 1 EAX for a family (base 0xf plus extended) and model (extended << 4 | base). */
static unsigned int signature(unsigned int family, unsigned int model, unsigned int stepping)
{
    unsigned int base_family = family >= 0xf ? 0xf : family;
    unsigned int ext_family = family >= 0xf ? family - 0xf : 0;
    return (ext_family << 20) | ((model >> 4) << 16) | (base_family << 8) | ((model & 0xf) << 4) |
           stepping;
}

static void test_zen_generations(void **state)
{
    (void)state;
    /* the signature of a Zen 3 development machine, as its kernel read it */
    assert_int_equal(signature(0x19, 0x01, 1), 0x00a00f11);
    assert_false(cpu_signature_is_zen4_or_later(0x00a00f11)); /* Milan, family 25 model 1 */
    assert_false(cpu_signature_is_zen4_or_later(signature(0x19, 0x21, 0))); /* Vermeer */
    assert_false(cpu_signature_is_zen4_or_later(signature(0x19, 0x50, 0))); /* Cezanne */
    assert_true(cpu_signature_is_zen4_or_later(signature(0x19, 0x11, 1)));  /* Genoa, model 17 */
    assert_true(cpu_signature_is_zen4_or_later(signature(0x19, 0x61, 2)));  /* Raphael */
    assert_true(cpu_signature_is_zen4_or_later(signature(0x19, 0x74, 1)));  /* Phoenix */
    assert_true(cpu_signature_is_zen4_or_later(signature(0x19, 0xa0, 0)));  /* Bergamo */
    assert_true(cpu_signature_is_zen4_or_later(signature(0x1a, 0x02, 0)));  /* Zen 5 */
    assert_false(cpu_signature_is_zen4_or_later(signature(0x17, 0x31, 0))); /* Zen 2 */
    assert_false(cpu_signature_is_zen4_or_later(signature(0x18, 0x00, 0))); /* Hygon Dhyana */
    assert_false(cpu_signature_is_zen4_or_later(signature(0x10, 0x04, 0))); /* K10 */
}

static void test_one_token_prefetch_distance(void **state)
{
    (void)state;
    /* 16 KiB ahead on the AMD cores before Zen 4, 8 KiB on later ones and on other vendors */
    assert_int_equal(cpu_prefetch_bytes_for(true, 0x00a00f11), 16384);             /* Milan */
    assert_int_equal(cpu_prefetch_bytes_for(true, signature(0x17, 0x31, 0)), 16384); /* Zen 2 */
    assert_int_equal(cpu_prefetch_bytes_for(true, signature(0x19, 0x11, 1)), 8192);  /* Genoa */
    assert_int_equal(cpu_prefetch_bytes_for(true, signature(0x1a, 0x02, 0)), 8192);  /* Zen 5 */
    /* an Intel signature that would read as Zen 3 were it an AMD's */
    assert_int_equal(cpu_prefetch_bytes_for(false, 0x00a00f11), 8192);
    size_t bytes = cpu_one_token_prefetch_bytes();
    assert_true(bytes == 8192 || bytes == 16384);
    assert_int_equal(cpu_one_token_prefetch_bytes(), bytes);
}

static void test_k_quant_prefetch_distance(void **state)
{
    (void)state;
    /* 4 KiB ahead on Zen 5 and later AMD cores, 8 KiB before them and on other vendors */
    assert_int_equal(cpu_k_quant_prefetch_bytes_for(true, signature(0x1a, 0x02, 0)), 4096);
    assert_int_equal(cpu_k_quant_prefetch_bytes_for(true, signature(0x1a, 0x44, 0)), 4096);
    assert_int_equal(cpu_k_quant_prefetch_bytes_for(true, signature(0x19, 0x11, 1)), 8192);
    assert_int_equal(cpu_k_quant_prefetch_bytes_for(true, 0x00a00f11), 8192); /* Milan */
    assert_int_equal(cpu_k_quant_prefetch_bytes_for(false, signature(0x1a, 0x02, 0)), 8192);
    size_t bytes = cpu_k_quant_prefetch_bytes();
    assert_true(bytes == 4096 || bytes == 8192);
    assert_int_equal(cpu_k_quant_prefetch_bytes(), bytes);
    /* and into L1 there alone */
    assert_true(cpu_k_quant_prefetch_l1_for(true, signature(0x1a, 0x02, 0)));
    assert_false(cpu_k_quant_prefetch_l1_for(true, signature(0x19, 0x11, 1)));
    assert_false(cpu_k_quant_prefetch_l1_for(true, 0x00a00f11));
    assert_false(cpu_k_quant_prefetch_l1_for(false, signature(0x1a, 0x02, 0)));
    assert_true(cpu_k_quant_prefetch_l1() == (bytes == 4096));
}

static void test_single_stream_prefetch_choice(void **state)
{
    (void)state;
    /* off on Zen 4 alone: on before it, on Zen 5, and on other vendors */
    assert_true(cpu_prefetch_single_stream_for(true, 0x00a00f11));              /* Milan */
    assert_true(cpu_prefetch_single_stream_for(true, signature(0x17, 0x31, 0))); /* Zen 2 */
    assert_false(cpu_prefetch_single_stream_for(true, signature(0x19, 0x11, 1))); /* Genoa */
    assert_false(cpu_prefetch_single_stream_for(true, signature(0x19, 0x61, 2))); /* Raphael */
    assert_false(cpu_prefetch_single_stream_for(true, signature(0x19, 0xa0, 0))); /* Bergamo */
    assert_true(cpu_prefetch_single_stream_for(true, signature(0x1a, 0x02, 0)));  /* Zen 5 */
    assert_true(cpu_prefetch_single_stream_for(true, signature(0x1a, 0x44, 0)));  /* Granite Ridge */
    /* an Intel signature that would read as Zen 4 were it an AMD's */
    assert_true(cpu_prefetch_single_stream_for(false, signature(0x19, 0x11, 1)));
    /* the F16 / BF16 streams: off on Zen 4 and Zen 5, on before them and on other vendors */
    assert_true(cpu_prefetch_float_stream_for(true, 0x00a00f11));               /* Milan */
    assert_false(cpu_prefetch_float_stream_for(true, signature(0x19, 0x11, 1))); /* Genoa */
    assert_false(cpu_prefetch_float_stream_for(true, signature(0x1a, 0x02, 0))); /* Zen 5 */
    assert_true(cpu_prefetch_float_stream_for(false, signature(0x19, 0x11, 1)));
}

static void test_prefetch_follows_environment(void **state)
{
    (void)state;
    /* CTest sets CORRAL_PREFETCH for this program; the choice is read once and kept */
    const char *env = getenv("CORRAL_PREFETCH");
    if (!env)
        skip();
    assert_int_equal(cpu_prefetch_single_stream(), env[0] == '1');
    assert_int_equal(cpu_prefetch_single_stream(), env[0] == '1');
    assert_int_equal(cpu_prefetch_float_stream(), env[0] == '1');
}

static void test_l2_residency(void **state)
{
    (void)state;
    /* a call's rows stay resident up to three quarters of L2, the rest left to activations */
    size_t l2 = cpu_l2_bytes();
    assert_true(l2 > 0);
    assert_false(cpu_outgrows_l2(0));
    assert_false(cpu_outgrows_l2(l2 / 2));
    assert_false(cpu_outgrows_l2(l2 / 4 * 3));
    assert_true(cpu_outgrows_l2(l2 / 4 * 3 + 1));
    assert_true(cpu_outgrows_l2(l2));
}

/* Whether CPUID leaf 0 names Intel, read here apart from cpu.c. */
static bool vendor_is_intel(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx))
        return false;
    return ebx == 0x756e6547 && edx == 0x49656e69 && ecx == 0x6c65746e; /* "Genu" "ineI" "ntel" */
#else
    return false;
#endif
}

static void test_bf16_kernels_by_vendor(void **state)
{
    (void)state;
    assert_false(cpu_vendor_prefers_vdpbf16ps("GenuineIntel"));
    assert_true(cpu_vendor_prefers_vdpbf16ps("AuthenticAMD"));
    assert_true(cpu_vendor_prefers_vdpbf16ps("HygonGenuine"));
    corral_error err = {{0}};
    if (cpu_detected_level() < CPU_LEVEL_AVX512) {
        assert_false(cpu_force_level("avx512-vdpbf16ps", &err));
        assert_false(cpu_prefers_vdpbf16ps());
        return;
    }
    assert_true(cpu_force_level("avx512", &err));
    bool bf16 = cpu_has_avx512_bf16();
    /* the FMA kernels on Intel, vdpbf16ps on any other CPU that has it */
    assert_int_equal(cpu_prefers_vdpbf16ps(), bf16 && !vendor_is_intel());
    assert_string_equal(cpu_active_level_name(), cpu_has_avx512_vnni() ? "avx512" : "avx512-novnni");
    /* the forcing level runs wherever the instruction exists, and takes it there */
    assert_int_equal(cpu_force_level("avx512-vdpbf16ps", &err), bf16);
    if (bf16) {
        assert_true(cpu_prefers_vdpbf16ps());
        assert_string_equal(cpu_active_level_name(), "avx512-vdpbf16ps");
    } else {
        assert_non_null(strstr(err.message, "AVX512_BF16"));
    }
    /* the levels below never do */
    assert_true(cpu_force_level("avx512-novnni", &err));
    assert_false(cpu_prefers_vdpbf16ps());
    assert_true(cpu_force_level("avx2", &err));
    assert_false(cpu_prefers_vdpbf16ps());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zen_generations),
        cmocka_unit_test(test_one_token_prefetch_distance),
        cmocka_unit_test(test_k_quant_prefetch_distance),
        cmocka_unit_test(test_single_stream_prefetch_choice),
        cmocka_unit_test(test_prefetch_follows_environment),
        cmocka_unit_test(test_l2_residency),
        cmocka_unit_test(test_bf16_kernels_by_vendor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Scores over a quantized key cache (attention_q8.h) at the active level: the query's
 * rounding against its definition, and block_attention_scores on Q8_0 and Q4_0 tiles bit for
 * bit against the scalar kernel and within float rounding of the same sums in double, on
 * every byte value, head widths of 32 to 576, 1 to 17 heads (one, two and three passes) and
 * tile counts around each kernel's pass.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "attention_q8.h"
#include "blocks.h"
#include "cpu.h"
#include "quant.h"

static uint32_t rng = 17;

static uint32_t next_u32(void)
{
    rng = rng * 1664525u + 1013904223u;
    return rng >> 8;
}

/* A uniform value in [-1, 1). */
static float uniform(void)
{
    return (float)next_u32() / (float)(1u << 23) - 1.0f;
}

/* Each block: scale = max |x| / 127, |q| <= 127, q * scale within scale / 2 of x, give or
 * take the roundings of the scale (an ulp of it, times up to 127) and of x over it (2^-24 of
 * up to 127 steps), sum = the sum of q; a block of scale 0 is all zeros. */
static void check_rounding(const float *x, size_t n_heads, size_t dk)
{
    static attention_q8_room room;
    attention_q8_query query = attention_q8_round(x, n_heads, dk, room.q, room.scale, room.sum);
    assert_int_equal(query.n_heads, n_heads);
    assert_int_equal(query.head_dim, dk);
    for (size_t b = 0; b < n_heads * dk / 32; b++) {
        float max = 0.0f;
        int32_t sum = 0;
        for (size_t j = 0; j < 32; j++)
            max = fmaxf(max, fabsf(x[32 * b + j]));
        if (query.scale[b] != max / 127.0f)
            fail_msg("block %zu: scale %.9g, want %.9g", b, (double)query.scale[b],
                     (double)(max / 127.0f));
        for (size_t j = 0; j < 32; j++) {
            int8_t v = query.q[32 * b + j];
            if (query.scale[b] == 0.0f)
                assert_int_equal(v, 0);
            double scale = query.scale[b], ulp = nextafterf(query.scale[b], INFINITY) - scale;
            double err = fabs((double)v * scale - x[32 * b + j]);
            if (v < -127 || !(err <= scale * (0.5 + 1e-5) + 127.0 * ulp))
                fail_msg("block %zu component %zu: %g rounds to %d * %.9g", b, j,
                         (double)x[32 * b + j], v, (double)query.scale[b]);
            sum += v;
        }
        assert_int_equal(query.sum[b], sum);
    }
}

static void test_query_rounding_follows_its_definition(void **state)
{
    (void)state;
    enum { DK = 96, HEADS = 3 };
    static float x[HEADS * DK];
    for (size_t i = 0; i < HEADS * DK; i++)
        x[i] = uniform() * 4.0f;
    for (size_t j = 0; j < 32; j++) {
        x[j] = 0.0f;                              /* a block of zeros */
        x[32 + j] = j == 7 ? -1e-30f : 0.0f;      /* one tiny value */
        x[64 + j] = (float)j - 15.5f;             /* halves, the tie cases */
        x[96 + j] = j % 2 ? 3e30f : -3e30f;       /* near the float range */
        x[160 + j] = j == 3 ? 1e-44f : 0.0f;      /* a scale that underflows to 0 */
        x[192 + j] = j == 9 ? -1e-37f : 1e-39f;   /* a scale under the normal floats */
    }
    x[128] = -0.0f;
    check_rounding(x, HEADS, DK);
    check_rounding(x, 1, 32);
}

/* Random key tiles: every byte value in the quants, f16 scales of any sign up to about 1. */
static void random_tiles(corral_kv_type type, uint8_t *tiles, size_t n_tiles, size_t dk)
{
    size_t tile_bytes = kv_key_tile_bytes(type, dk), scale_bytes = dk / 32 * KV_KEY_TILE * 2;
    for (size_t t = 0; t < n_tiles; t++) {
        uint8_t *tile = tiles + t * tile_bytes;
        for (size_t i = 0; i < scale_bytes / 2; i++)
            ((uint16_t *)tile)[i] = quant_f32_to_f16(uniform() * 0.05f);
        for (size_t i = scale_bytes; i < tile_bytes; i++)
            tile[i] = (uint8_t)next_u32();
    }
}

/* The integer value of component d of the cell in lane `lane` of a quantized tile. */
static int key_quant(corral_kv_type type, const uint8_t *tile, size_t dk, size_t d, size_t lane)
{
    const uint8_t *quants = tile + dk / 32 * KV_KEY_TILE * 2;
    if (type == CORRAL_KV_Q8_0)
        return (int8_t)quants[d * KV_KEY_TILE + lane];
    size_t b = d / 32, j = d % 32;
    uint8_t pair = quants[(16 * b + j % 16) * KV_KEY_TILE + lane];
    return (j < 16 ? pair & 0x0f : pair >> 4) - 8;
}

/*
 * n_heads heads of dk against n_tiles tiles through block_attention_scores at the active
 * level: the scalar kernel's bits (heads rounded and scored a pass at a time, as the
 * dispatcher does), and each score within float rounding of the same sums in double
 * (catches the scalar kernel reading the wrong quant or scale).
 */
static void check_scores(corral_kv_type type, size_t dk, size_t n_heads, size_t n_tiles,
                         float gain)
{
    size_t tile_bytes = kv_key_tile_bytes(type, dk), n_cells = n_tiles * KV_KEY_TILE;
    size_t ld = n_cells + 3; /* rows further apart than the cells, as a chunk's are */
    uint8_t *tiles = malloc(n_tiles * tile_bytes);
    float *q = malloc(n_heads * dk * sizeof *q);
    float *got = malloc(n_heads * ld * sizeof *got), *want = malloc(n_heads * ld * sizeof *want);
    static attention_q8_room room;
    assert_true(tiles && q && got && want);
    random_tiles(type, tiles, n_tiles, dk);
    for (size_t i = 0; i < n_heads * dk; i++)
        q[i] = uniform() * gain;
    block_attention_scores(type, tiles, n_tiles, dk, q, n_heads, got, ld,
                           (attention_next){NULL, 0});
    size_t per_pass = attention_q8_heads(dk);
    for (size_t h0 = 0; h0 < n_heads; h0 += per_pass) {
        size_t n = n_heads - h0 < per_pass ? n_heads - h0 : per_pass;
        attention_q8_query query = attention_q8_round(q + h0 * dk, n, dk, room.q, room.scale,
                                                      room.sum);
        attention_q8_scores(type, tiles, n_tiles, &query, want + h0 * ld, ld);
        for (size_t h = 0; h < n; h++)
            for (size_t c = 0; c < n_cells; c++) {
                const uint8_t *tile = tiles + c / KV_KEY_TILE * tile_bytes;
                size_t lane = c % KV_KEY_TILE;
                double sum = 0.0, magnitude = 0.0;
                for (size_t b = 0; b < dk / 32; b++) {
                    long dot = 0;
                    for (size_t j = 0; j < 32; j++)
                        dot += (long)query.q[h * dk + 32 * b + j] *
                               key_quant(type, tile, dk, 32 * b + j, lane);
                    double term = (double)dot * query.scale[h * dk / 32 + b] *
                                  quant_f16_to_f32(((const uint16_t *)tile)[b * KV_KEY_TILE + lane]);
                    sum += term;
                    magnitude += fabs(term);
                }
                float scalar = want[(h0 + h) * ld + c];
                /* each block's scale product and fused add round once: (blocks + 1) *
                 * 2^-24 of the terms' magnitude at most */
                double bound = ldexp((double)(dk / 32 + 1), -24) * magnitude;
                if (!(fabs(scalar - sum) <= bound))
                    fail_msg("%s: scalar score %zu of head %zu is %.9g, want %.9g",
                             corral_kv_type_name(type), c, h0 + h, (double)scalar, sum);
            }
    }
    for (size_t h = 0; h < n_heads; h++)
        if (memcmp(got + h * ld, want + h * ld, n_cells * sizeof *got) != 0)
            fail_msg("%s: %s tiles, head dim %zu, %zu heads, %zu tiles: head %zu's scores differ "
                     "from the scalar kernel's", cpu_level_name(cpu_active_level()),
                     corral_kv_type_name(type), dk, n_heads, n_tiles, h);
    free(tiles);
    free(q);
    free(got);
    free(want);
}

static void test_scores_match_the_scalar_kernel_bit_for_bit(void **state)
{
    (void)state;
    const corral_kv_type types[] = {CORRAL_KV_Q8_0, CORRAL_KV_Q4_0};
    const size_t dims[] = {32, 64, 96, 128, 256, 576};
    const size_t tile_counts[] = {1, 2, 3, 4, 5, 7, 9};
    for (size_t k = 0; k < 2; k++)
        for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
            for (size_t heads = 1; heads <= 9; heads++)
                for (size_t t = 0; t < sizeof tile_counts / sizeof tile_counts[0]; t++)
                    check_scores(types[k], dims[d], heads, tile_counts[t], 1.0f);
    /* queries of any size; heads past two passes */
    for (size_t k = 0; k < 2; k++) {
        check_scores(types[k], 64, 4, 6, 1e-20f);
        check_scores(types[k], 64, 4, 6, 1e20f);
        check_scores(types[k], 64, 17, 3, 1.0f);
        check_scores(types[k], 128, 32, 2, 1.0f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_query_rounding_follows_its_definition),
        cmocka_unit_test(test_scores_match_the_scalar_kernel_bit_for_bit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

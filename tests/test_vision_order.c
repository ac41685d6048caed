/*
 * The vision tower's steps in llama.cpp's order (vision_order.h) give the same bits at every
 * level this CPU has: the softmax (with masked entries, exponentials that end subnormal, zero
 * or past the float range), SiLU times gate, the scores of queries against tiled keys and
 * both product orders, over lengths around the 8-, 16- and 64-element steps. test_vision
 * checks the portable results against llama.cpp's own.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cpu.h"
#include "vision_order.h"

static const size_t lengths[] = {1,  2,  7,  8,  9,  15, 16, 17,  24,  31,  32,  33,
                                 47, 63, 64, 65, 72, 80, 100, 127, 128, 129, 200, 588};

static uint32_t rng = 12345;

static float uniform(float lo, float hi)
{
    rng = rng * 1664525u + 1013904223u;
    return lo + (hi - lo) * (float)(rng >> 8) / (float)(1u << 24);
}

static void fill(float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = uniform(lo, hi);
}

/* Each level the CPU has, from scalar up: runs step(level) after forcing it. */
static const char *const level_names[] = {"scalar", "avx2", "avx512"};

static size_t n_levels(void)
{
    return (size_t)cpu_detected_level() + 1;
}

static void force(size_t level)
{
    corral_error err = {0};
    assert_true(cpu_force_level(level_names[level], &err));
}

static void same_bits(const float *got, const float *want, size_t n, const char *what,
                      size_t level, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof *got) != 0)
            fail_msg("%s at %s, length %zu, element %zu: %.9g, scalar %.9g", what,
                     level_names[level], len, i, (double)got[i], (double)want[i]);
}

static void test_softmax(void **state)
{
    (void)state;
    float x[600], want[600], got[600];
    for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
        size_t n = lengths[k];
        for (int spread = 0; spread < 3; spread++) {
            /* spread 2 reaches 150 below the maximum: subnormal and zero exponentials */
            fill(x, n, spread == 0 ? -3.0f : -150.0f, spread == 2 ? 3.0f : 40.0f);
            if (n > 3)
                x[n / 3] = -INFINITY;
            double sums[3];
            for (size_t level = 0; level < n_levels(); level++) {
                force(level);
                memcpy(level ? got : want, x, n * sizeof *x);
                sums[level] = vision_softmax_row(level ? got : want, n, 0.25f);
                if (level) {
                    same_bits(got, want, n, "softmax", level, n);
                    assert_memory_equal(&sums[level], &sums[0], sizeof sums[0]);
                }
            }
        }
    }
}

static void test_swiglu(void **state)
{
    (void)state;
    float x[600], g[600], want[600], got[600];
    for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
        size_t n = lengths[k];
        /* past -88 the exponential of -x leaves the normal range, past -133 the float one */
        fill(x, n, -140.0f, 20.0f);
        fill(g, n, -2.0f, 2.0f);
        for (size_t level = 0; level < n_levels(); level++) {
            force(level);
            memcpy(level ? got : want, x, n * sizeof *x);
            vision_swiglu_row(level ? got : want, g, n);
            if (level)
                same_bits(got, want, n, "swiglu", level, n);
        }
    }
}

static void test_scores(void **state)
{
    (void)state;
    static const size_t keys[] = {1, 15, 16, 17, 33, 48};
    static const size_t dims[] = {8, 16, 72, 80, 130};
    enum { NQ = 3 };
    for (size_t a = 0; a < sizeof keys / sizeof keys[0]; a++)
        for (size_t b = 0; b < sizeof dims / sizeof dims[0]; b++) {
            size_t n = keys[a], d = dims[b];
            size_t tile_floats = vision_key_tiles(n) * VISION_KEY_TILE * d;
            float *q = malloc(NQ * d * sizeof *q), *tiles = malloc(tile_floats * sizeof *tiles);
            float *want = malloc(NQ * n * sizeof *want), *got = malloc(NQ * n * sizeof *got);
            assert_true(q && tiles && want && got);
            fill(q, NQ * d, -1.0f, 1.0f);
            fill(tiles, tile_floats, -1.0f, 1.0f);
            /* the portable scores are the vector dot of each query with each key */
            for (size_t j = 0; j < n; j++) {
                float key[130];
                for (size_t c = 0; c < d; c++)
                    key[c] = tiles[(j / VISION_KEY_TILE * d + c) * VISION_KEY_TILE +
                                   j % VISION_KEY_TILE];
                for (size_t i = 0; i < NQ; i++)
                    want[i * n + j] = vision_vec_dot(q + i * d, key, d);
            }
            for (size_t level = 0; level < n_levels(); level++) {
                force(level);
                vision_scores(q, NQ, tiles, n, d, got);
                same_bits(got, want, NQ * n, "scores", level, d);
            }
            free(q);
            free(tiles);
            free(want);
            free(got);
        }
}

static void test_products(void **state)
{
    (void)state;
    /* 1040: the matrix order's spans of 512 elements, the last one partial */
    static const size_t widths[] = {16, 32, 48, 64, 72, 128, 200, 588, 1040};
    /* more than the matrix order's blocks of 16 rows and 16 tokens, partial ones too */
    enum { ROWS = 37, TOKENS = 19 };
    for (size_t a = 0; a < sizeof widths / sizeof widths[0]; a++)
        for (int matrix = 0; matrix < 2; matrix++) {
            size_t n_in = widths[a];
            if (matrix && n_in % 16 != 0)
                continue;
            float *w = malloc(ROWS * n_in * sizeof *w), *x = malloc(TOKENS * n_in * sizeof *x);
            float want[TOKENS * ROWS], got[TOKENS * ROWS];
            assert_true(w && x);
            fill(w, ROWS * n_in, -1.0f, 1.0f);
            fill(x, TOKENS * n_in, -1.0f, 1.0f);
            for (size_t t = 0; t < TOKENS; t++)
                for (size_t r = 0; r < ROWS; r++)
                    want[t * ROWS + r] = matrix ? vision_dot16(w + r * n_in, x + t * n_in, n_in)
                                                : vision_vec_dot(w + r * n_in, x + t * n_in, n_in);
            for (size_t level = 0; level < n_levels(); level++) {
                force(level);
                memset(got, 0, sizeof got);
                /* rows 1.. of ROWS, every token: the kernels' partial tiles and blocks */
                vision_matmul_rows(w, n_in, 1, ROWS, x, TOKENS, got, ROWS, matrix);
                for (size_t t = 0; t < TOKENS; t++)
                    same_bits(got + t * ROWS + 1, want + t * ROWS + 1, ROWS - 1,
                              matrix ? "matrix-order product" : "vector-dot product", level,
                              n_in);
            }
            free(w);
            free(x);
        }
}

/*
 * The vector dot's rest, with a pair whose two ways differ: -(1 + 2^-22) and then
 * (1 + 2^-23)^2 = 1 + 2^-22 + 2^-46 give 2^-46 when the last product is fused, 0 when it is
 * rounded first. Of 2 elements both are FMAs (fewer than 8 remain); of 8 all are rounded
 * products added in order; of 9 the first 8 are, the ninth an FMA.
 */
static void test_vec_dot_rest(void **state)
{
    (void)state;
    const float first = -(1.0f + 0x1p-22f), last = 1.0f + 0x1p-23f;
    float x[9] = {0}, y[9] = {0};
    x[0] = first;
    y[0] = 1.0f;
    x[1] = y[1] = last;
    assert_true(vision_vec_dot(x, y, 2) == 0x1p-46f);
    x[1] = y[1] = 0.0f;
    x[7] = y[7] = last;
    assert_true(vision_vec_dot(x, y, 8) == 0.0f);
    x[7] = y[7] = 0.0f;
    x[8] = y[8] = last;
    assert_true(vision_vec_dot(x, y, 9) == 0x1p-46f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vec_dot_rest), cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_swiglu),       cmocka_unit_test(test_scores),
        cmocka_unit_test(test_products),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

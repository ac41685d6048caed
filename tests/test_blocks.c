/*
 * Blocks with a vector version per level (blocks.h): the attention softmax, attention itself
 * over key tiles and value rows of every cache type, and SwiGLU at the active level against
 * double precision, on long rows, ragged tails, a single value, equal values, underflowing
 * terms and saturated gates.
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

/* The largest scale * x exactly, each weight e^(scale * x - max) within 1e-6 relative (or
 * 1e-12 absolute, for terms near zero) of it in double, and their sum within 1e-6 relative. */
static void check_softmax_exp(const float *x, size_t n, float scale)
{
    float *got = malloc(n * sizeof *got);
    assert_non_null(got);
    for (size_t i = 0; i < n; i++)
        got[i] = x[i];
    float got_max;
    double got_sum = block_softmax_exp(got, n, scale, &got_max);
    float max = -INFINITY;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        max = fmaxf(max, x[i] * scale);
    if (got_max != max)
        fail_msg("%s: n=%zu, max is %.9g, want %.9g", cpu_level_name(cpu_active_level()), n,
                 (double)got_max, (double)max);
    for (size_t i = 0; i < n; i++) {
        double want = exp((double)(x[i] * scale) - max);
        double err = fabs((double)got[i] - want);
        sum += want;
        if (!(err <= 1e-6 * want || err <= 1e-12))
            fail_msg("%s: n=%zu, element %zu is %.9g, e^(x - max) %.9g",
                     cpu_level_name(cpu_active_level()), n, i, (double)got[i], want);
    }
    if (!(fabs(got_sum - sum) <= 1e-6 * sum))
        fail_msg("%s: n=%zu, sum is %.12g, want %.12g", cpu_level_name(cpu_active_level()), n,
                 got_sum, sum);
    free(got);
}

static void test_softmax_matches_double_precision(void **state)
{
    (void)state;
    enum { N = 4099 };
    static float x[N];
    uint32_t rng = 5;
    for (size_t i = 0; i < N; i++) {
        rng = rng * 1664525u + 1013904223u;
        x[i] = (float)((int)(rng >> 8) % 200001 - 100000) / 1000.0f; /* -100..100 */
    }
    const size_t lengths[] = {1, 2, 15, 16, 17, 100, 1024, N};
    for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
        check_softmax_exp(x, lengths[k], 0.125f);
        check_softmax_exp(x, lengths[k], 1.0f);
    }
    /* equal values: every weight exactly 1 */
    float same[64], max;
    for (int i = 0; i < 64; i++)
        same[i] = 3.5f;
    assert_true(block_softmax_exp(same, 64, 0.5f, &max) == 64.0);
    assert_true(max == 1.75f);
    for (int i = 0; i < 64; i++)
        assert_true(same[i] == 1.0f);
    /* one term dominates: the others underflow to (near) zero, not NaN */
    float spread[33];
    for (int i = 0; i < 33; i++)
        spread[i] = i == 20 ? 1000.0f : -1000.0f;
    assert_true(block_softmax_exp(spread, 33, 1.0f, &max) == 1.0);
    for (int i = 0; i < 33; i++)
        assert_true(i == 20 ? spread[i] == 1.0f : spread[i] >= 0.0f && spread[i] < 1e-30f);
}

static uint32_t attention_rng = 3;

/* A uniform value in [-1, 1). */
static float uniform(void)
{
    attention_rng = attention_rng * 1664525u + 1013904223u;
    return (float)(attention_rng >> 8) / (float)(1u << 23) - 1.0f;
}

/*
 * n uniform values times `gain` as a cache of `type` stores them: into bytes (F32, F16, or
 * Q8_0 / Q4_0 blocks made by ggml's reference quantizer), and into exact, the values those
 * bytes stand for.
 */
static void cache_values(corral_kv_type type, size_t n, float gain, uint8_t *bytes, float *exact)
{
    for (size_t i = 0; i < n; i++)
        exact[i] = uniform() * gain;
    if (type == CORRAL_KV_F32) {
        memcpy(bytes, exact, n * sizeof(float));
        return;
    }
    if (type == CORRAL_KV_F16) {
        for (size_t i = 0; i < n; i++) {
            ((uint16_t *)bytes)[i] = quant_f32_to_f16(exact[i]);
            exact[i] = quant_f16_to_f32(((uint16_t *)bytes)[i]);
        }
        return;
    }
    const quant_ops *ops =
        quant_ops_get(type == CORRAL_KV_Q8_0 ? TENSOR_TYPE_Q8_0 : TENSOR_TYPE_Q4_0,
                      CPU_LEVEL_SCALAR);
    ops->quantize(exact, bytes, n);
    ops->dequantize(bytes, exact, n);
}

/*
 * A cell's keys (dk values as cache_values made them, in `bytes`) into lane `lane` of a key
 * tile, as blocks.h lays tiles out: F32 / F16 rows of components; Q8_0 / Q4_0 scale rows,
 * then a row per int8 component or per byte of two nibbles (ggml's block bytes as they are).
 */
static void put_key(corral_kv_type type, const uint8_t *bytes, size_t dk, uint8_t *tile,
                    size_t lane)
{
    if (type == CORRAL_KV_F32 || type == CORRAL_KV_F16) {
        size_t elem = type == CORRAL_KV_F32 ? 4 : 2;
        for (size_t d = 0; d < dk; d++)
            memcpy(tile + (d * KV_KEY_TILE + lane) * elem, bytes + d * elem, elem);
        return;
    }
    size_t n_blocks = dk / 32, n_quants = type == CORRAL_KV_Q8_0 ? 32 : 16;
    size_t block_bytes = 2 + n_quants;
    uint8_t *quants = tile + n_blocks * KV_KEY_TILE * 2;
    for (size_t b = 0; b < n_blocks; b++) {
        const uint8_t *block = bytes + b * block_bytes;
        memcpy(tile + (b * KV_KEY_TILE + lane) * 2, block, 2);
        for (size_t j = 0; j < n_quants; j++)
            quants[(b * n_quants + j) * KV_KEY_TILE + lane] = block[2 + j];
    }
}

/*
 * Chunk `chunk` of a call just computed into scratch and part: each row's weights, largest
 * score and sum have the bits of the chunk's scores as block_attention_scores gives them for
 * the chunk's tiles and the queries as given, softmaxed row by row. On a quantized cache that
 * call rounds the queries itself, as every chunk once did: the queries rounded once for all
 * the chunks of a call score as they did, in every chunk and from any first head.
 */
static void check_chunk_weights(corral_kv_type type, const attention_shape *shape,
                                const float *q, const uint8_t *tiles, size_t chunk,
                                const float *scratch, const float *part)
{
    size_t group = shape->n_heads, rows = shape->n_queries * group, dk = shape->head_dim_k;
    size_t from = chunk * ATTENTION_CHUNK_CELLS, to = from + ATTENTION_CHUNK_CELLS;
    size_t cells_end = shape->first_lane + shape->n_cells; /* the first query's */
    size_t last_end = cells_end + shape->n_queries - 1, end = last_end < to ? last_end : to;
    float *scores = malloc(rows * ATTENTION_CHUNK_CELLS * sizeof *scores);
    assert_true(scores);
    block_attention_scores(type, tiles + from / KV_KEY_TILE * kv_key_tile_bytes(type, dk),
                           (end - from + KV_KEY_TILE - 1) / KV_KEY_TILE, dk, q, rows, scores,
                           ATTENTION_CHUNK_CELLS, (attention_next){NULL, 0});
    size_t lo = from > shape->first_lane ? from : shape->first_lane;
    for (size_t r = 0; r < rows; r++) {
        size_t row_end = cells_end + r / group, hi = row_end < to ? row_end : to;
        if (hi <= lo)
            continue; /* the query's cells end before the chunk */
        float *p = scores + r * ATTENTION_CHUNK_CELLS + (lo - from), max, scale = shape->scale;
        if (shape->softcap > 0.0f)
            block_softcap(p, hi - lo, shape->softcap);
        if (shape->alibi) {
            float slope = shape->alibi[r % group];
            double query = (double)(shape->alibi_query + r / group);
            for (size_t k = 0; k < hi - lo; k++)
                p[k] = p[k] * scale + slope * -(float)fabs((double)(lo + k - shape->first_lane) - query);
            scale = 1.0f;
        }
        float sum = (float)block_softmax_exp(p, hi - lo, scale, &max);
        if (memcmp(p, scratch + r * ATTENTION_CHUNK_CELLS + (lo - from), (hi - lo) * sizeof *p) ||
            memcmp(&max, part + r, sizeof max) || memcmp(&sum, part + rows + r, sizeof sum))
            fail_msg("%s: %s cache, %zu queries of %zu heads: chunk %zu row %zu's weights "
                     "differ from its scores'", cpu_level_name(cpu_active_level()),
                     corral_kv_type_name(type), shape->n_queries, group, chunk, r);
    }
    free(scores);
}

/*
 * The chunks' states computed one by one, last chunk first as threads might finish them, and
 * then folded in order, give exactly the bits of block_attention: what lets forward_attention
 * share a token's chunks among threads. q: the queries' heads in one run.
 */
static void check_chunks_fold_to_the_same_bits(corral_kv_type type, const attention_shape *shape,
                                               const float *q, const uint8_t *tiles,
                                               const uint8_t *first_row, const float *want,
                                               size_t ld_want)
{
    size_t n_chunks = attention_chunks(shape), state_floats = attention_state_floats(shape);
    size_t outputs = shape->n_heads * shape->head_dim_v;
    float *parts = malloc(n_chunks * state_floats * sizeof *parts);
    float *scratch = malloc(attention_scratch_floats(shape) * sizeof *scratch);
    float *state = malloc(state_floats * sizeof *state);
    float *out = malloc(shape->n_queries * outputs * sizeof *out);
    assert_true(parts && scratch && state && out);
    attention_query query = attention_query_prepare(type, shape, q, scratch);
    for (size_t c = n_chunks; c-- > 0;) {
        block_attention_chunk(type, shape, &query, tiles, first_row, c, scratch,
                              parts + c * state_floats);
        check_chunk_weights(type, shape, q, tiles, c, scratch, parts + c * state_floats);
    }
    attention_state_clear(shape, state);
    for (size_t c = 0; c < n_chunks; c++)
        attention_state_fold(shape, state, parts + c * state_floats, c);
    attention_state_finish(shape, state, out, outputs);
    for (size_t i = 0; i < shape->n_queries; i++)
        assert_memory_equal(out + i * outputs, want + i * ld_want, outputs * sizeof *out);
    free(parts);
    free(scratch);
    free(state);
    free(out);
}

/*
 * Query head q (dk floats) as attention_q8_round rounds it for a quantized cache's keys, back
 * in floats: scale times q, block by block. *error: the largest over key vectors `keys` (n of
 * dk) of sum over d of |q_d - rounded_d| * |key_d|, what the rounding can move a score by.
 */
static void rounded_query(const float *q, size_t dk, const float *keys, size_t n, float *rounded,
                          double *error)
{
    static attention_q8_room room;
    attention_q8_query query = attention_q8_round(q, 1, dk, room.q, room.scale, room.sum);
    for (size_t d = 0; d < dk; d++)
        rounded[d] = (float)query.q[d] * query.scale[d / 32];
    double most = 0.0;
    for (size_t c = 0; c < n; c++) {
        double e = 0.0;
        for (size_t d = 0; d < dk; d++)
            e += fabs((double)q[d] - rounded[d]) * fabs((double)keys[c * dk + d]);
        most = fmax(most, e);
    }
    *error = most;
}

/*
 * block_attention of n_queries queries at consecutive positions over a cache (keys in tiles,
 * values in rows) whose first query sees n_cells cells from lane first_lane, against attention
 * in double on the values the cache holds (a quantized cache's dequantized ones): every output
 * within 1e-6 of it. Values are in [-1, 1]; the float sums (up to 4099 weighted values, 256
 * products per score) came within 1.1e-7 at every level. With several queries, each query's
 * outputs have exactly the bits it gets alone, queries and outputs a row apart.
 *
 * A quantized cache's keys are scored against the query rounded to int8 blocks
 * (attention_q8.h), so there the double reference takes the rounded query, and the same 1e-6
 * holds (the integer sums are exact; what is left is the float steps'). Against the query as
 * it was, each score moves by at most E = scale * the rounded_query error, each weight
 * p_c = e^(s_c) / sum e^(s) by a factor within e^(+-2E), so each output by at most
 * (e^(2E) - 1) * max |value| = (e^(2E) - 1): that bound (plus the 1e-6) is checked too.
 */
static void check_attention_alibi(corral_kv_type type, size_t n_heads, size_t dk, size_t dv,
                                  size_t first_lane, size_t n_cells, size_t n_queries,
                                  float softcap, const float *alibi)
{
    float scale = 1.0f / sqrtf((float)dk);
    /* ALiBi: the first query at the last cell it sees, as a causal batch's */
    attention_shape shape = {n_heads, n_queries, n_cells, dk, dv, first_lane, scale, softcap,
                             NULL, alibi, n_cells - 1};
    size_t total = first_lane + n_cells + n_queries - 1;
    size_t n_tiles = (total + KV_KEY_TILE - 1) / KV_KEY_TILE;
    size_t tile_bytes = kv_key_tile_bytes(type, dk), row_bytes = kv_value_row_bytes(type, dv);
    size_t key_bytes = kv_value_row_bytes(type, dk); /* a cell's keys before they are tiled */
    /* rows wider than a query's heads, as a batch's rows hold every KV head's */
    size_t ld_q = n_heads * dk + 5, ld_out = n_heads * dv + 3;
    float *keys = malloc(total * dk * sizeof *keys), *values = malloc(total * dv * sizeof *values);
    float *q = calloc(n_queries, ld_q * sizeof *q), *out = calloc(n_queries, ld_out * sizeof *out);
    float *alone = malloc(n_heads * dv * sizeof *alone);
    float *run = malloc(n_queries * ld_q * sizeof *run);
    uint8_t *tiles = calloc(n_tiles, tile_bytes), *rows = malloc(total * row_bytes);
    uint8_t *cell_keys = malloc(key_bytes);
    float *scratch = malloc(attention_scratch_floats(&shape) * sizeof *scratch);
    double *p = malloc((n_cells + n_queries) * sizeof *p);
    float *rounded = malloc(dk * sizeof *rounded);
    assert_true(keys && values && q && out && alone && run && tiles && rows && cell_keys &&
                scratch && p && rounded);
    for (size_t c = 0; c < total; c++) {
        /* scores up to about 8 at scale 1/sqrt(dk) */
        cache_values(type, dk, 2.0f, cell_keys, keys + c * dk);
        put_key(type, cell_keys, dk, tiles + c / KV_KEY_TILE * tile_bytes, c % KV_KEY_TILE);
        cache_values(type, dv, 1.0f, rows + c * row_bytes, values + c * dv);
    }
    for (size_t i = 0; i < n_queries; i++)
        for (size_t j = 0; j < n_heads * dk; j++)
            q[i * ld_q + j] = run[i * n_heads * dk + j] = uniform();
    const uint8_t *first_row = rows + first_lane * row_bytes;
    block_attention(type, &shape, q, ld_q, tiles, first_row, scratch, out, ld_out);
    check_chunks_fold_to_the_same_bits(type, &shape, run, tiles, first_row, out, ld_out);
    for (size_t i = 0; i < n_queries; i++) {
        attention_shape one = shape;
        one.n_queries = 1;
        one.n_cells = n_cells + i;
        one.alibi_query = shape.alibi_query + i;
        block_attention(type, &one, q + i * ld_q, 0, tiles, first_row, scratch, alone, 0);
        if (memcmp(alone, out + i * ld_out, n_heads * dv * sizeof *alone) != 0)
            fail_msg("%s: %s cache, %zu heads, %zu cells from lane %zu: query %zu of %zu differs "
                     "from its attention alone", cpu_level_name(cpu_active_level()),
                     corral_kv_type_name(type), n_heads, n_cells, first_lane, i, n_queries);
    }
    for (size_t i = 0; i < n_queries; i++)
        for (size_t h = 0; h < n_heads; h++) {
            size_t seen = n_cells + i;
            /* the query as the kernels score it, then as it was */
            for (int as_given = 0; as_given < (kv_type_quantized(type) ? 2 : 1); as_given++) {
                const float *qh = q + i * ld_q + h * dk;
                double bound = 1e-6;
                if (kv_type_quantized(type)) {
                    double error;
                    rounded_query(qh, dk, keys + first_lane * dk, seen, rounded, &error);
                    if (!as_given)
                        qh = rounded;
                    else /* the softcap only shrinks differences */
                        bound += expm1(2.0 * scale * error);
                }
                double max = -INFINITY, sum = 0.0;
                for (size_t c = 0; c < seen; c++) {
                    double s = 0.0;
                    for (size_t d = 0; d < dk; d++)
                        s += (double)qh[d] * keys[(first_lane + c) * dk + d];
                    if (softcap > 0.0f)
                        s = softcap * tanh(s / softcap);
                    p[c] = s * scale;
                    if (alibi) /* query i sees up to its own cell, the last */
                        p[c] -= alibi[h] * (double)(seen - 1 - c);
                    max = fmax(max, p[c]);
                }
                for (size_t c = 0; c < seen; c++) {
                    p[c] = exp(p[c] - max);
                    sum += p[c];
                }
                for (size_t j = 0; j < dv; j++) {
                    double want = 0.0;
                    for (size_t c = 0; c < seen; c++)
                        want += p[c] / sum * values[(first_lane + c) * dv + j];
                    float got = out[i * ld_out + h * dv + j];
                    if (!(fabs(got - want) <= bound))
                        fail_msg("%s: %s cache, %zu heads, dims %zu/%zu, %zu cells from lane "
                                 "%zu, cap %g: query %zu head %zu output %zu is %.9g, want %.9g "
                                 "(within %g, query %s)",
                                 cpu_level_name(cpu_active_level()), corral_kv_type_name(type),
                                 n_heads, dk, dv, seen, first_lane, (double)softcap, i, h, j,
                                 (double)got, want, bound, as_given ? "as given" : "rounded");
                }
            }
        }
    free(keys);
    free(values);
    free(q);
    free(out);
    free(alone);
    free(run);
    free(tiles);
    free(rows);
    free(cell_keys);
    free(scratch);
    free(p);
    free(rounded);
}

static void check_attention(corral_kv_type type, size_t n_heads, size_t dk, size_t dv,
                            size_t first_lane, size_t n_cells, size_t n_queries, float softcap)
{
    check_attention_alibi(type, n_heads, dk, dv, first_lane, n_cells, n_queries, softcap, NULL);
}

static void test_attention_matches_double_precision(void **state)
{
    (void)state;
    /* the group sizes of the bench/ shapes (4, 7) and past the kernels' head passes (9);
     * head dims of the arch fixtures (16, 24, 32), of real models (64, 96, 128, 256) and one
     * that is not a multiple of 8; the quantized types take those that are whole blocks */
    const corral_kv_type types[] = {CORRAL_KV_F32, CORRAL_KV_F16, CORRAL_KV_Q8_0, CORRAL_KV_Q4_0};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        corral_kv_type type = types[k];
        check_attention(type, 4, 64, 64, 0, 4099, 1, 0.0f);
        check_attention(type, 7, 64, 64, 5, 1000, 1, 0.0f);
        check_attention(type, 9, 32, 32, 15, 33, 1, 0.0f);
        check_attention(type, 2, 32, 32, 1, 17, 1, 5.0f);
        check_attention(type, 1, 96, 96, 3, 1, 1, 0.0f);
        check_attention(type, 3, 128, 128, 0, 300, 1, 0.0f);
        check_attention(type, 2, 256, 256, 7, 129, 1, 0.0f);
        check_attention(type, 2, 64, 128, 9, 40, 1, 0.0f);
        /* a first chunk that the cells fill exactly, and one they leave by a single cell */
        check_attention(type, 4, 64, 64, 15, ATTENTION_CHUNK_CELLS - 15, 1, 0.0f);
        check_attention(type, 4, 64, 64, 15, ATTENTION_CHUNK_CELLS - 14, 1, 0.0f);
        /* queries together: the group of 4 over three chunks; queries that end one cell
         * before a chunk, exactly at its end and one and two cells into the next (which
         * the first two do not reach); 27 heads; a soft-cap; a first query with one cell;
         * 256-wide heads, whose values the avx512 kernel makes F32 32 cells at a time */
        check_attention(type, 4, 64, 64, 0, 2100, 4, 0.0f);
        check_attention(type, 7, 64, 64, 5, ATTENTION_CHUNK_CELLS - 6, 4, 0.0f);
        check_attention(type, 9, 32, 32, 15, 33, 3, 0.0f);
        check_attention(type, 2, 32, 32, 1, 17, 2, 5.0f);
        check_attention(type, 1, 96, 96, 3, 1, 4, 0.0f);
        check_attention(type, 2, 256, 256, 7, 129, 8, 0.0f);
        if (kv_type_quantized(type))
            continue;
        check_attention(type, 9, 16, 16, 15, 33, 1, 0.0f);
        check_attention(type, 1, 24, 24, 3, 1, 1, 0.0f);
        check_attention(type, 5, 20, 12, 2, 70, 1, 0.0f);
        check_attention(type, 5, 20, 12, 2, 70, 4, 0.0f);
    }
}

/* ALiBi's distance bias (jina-bert-v2), per head of the group: scores over several chunks,
 * from a first cell inside a tile, several queries, and each cache type. */
static void test_attention_alibi_matches_double_precision(void **state)
{
    (void)state;
    static const float slopes[4] = {0.5f, 0.25f, 0.0625f, 0.0078125f};
    const corral_kv_type types[] = {CORRAL_KV_F32, CORRAL_KV_F16, CORRAL_KV_Q8_0, CORRAL_KV_Q4_0};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        check_attention_alibi(types[k], 4, 64, 64, 5, 1100, 3, 0.0f, slopes);
        check_attention_alibi(types[k], 2, 32, 32, 0, 13, 1, 0.0f, slopes + 2);
    }
}

static void test_swiglu_matches_double_precision(void **state)
{
    (void)state;
    enum { N = 1043 };
    static float gate[N], up[N], got[N];
    uint32_t rng = 11;
    for (size_t i = 0; i < N; i++) {
        rng = rng * 1664525u + 1013904223u;
        gate[i] = (float)((int)(rng >> 8) % 40001 - 20000) / 1000.0f; /* -20..20 */
        rng = rng * 1664525u + 1013904223u;
        up[i] = (float)((int)(rng >> 8) % 2001 - 1000) / 100.0f;
    }
    gate[0] = -200.0f; /* e^200 overflows: silu is -0 */
    gate[1] = 200.0f;
    gate[2] = 0.0f;
    for (size_t i = 0; i < N; i++)
        got[i] = gate[i];
    block_swiglu(got, up, N);
    for (size_t i = 0; i < N; i++) {
        double g = gate[i], want = g / (1.0 + exp(-g)) * up[i];
        double err = fabs((double)got[i] - want);
        if (!(err <= 2e-6 * fabs(want) || err <= 1e-30))
            fail_msg("%s: swiglu(%g, %g) is %.9g, want %.9g", cpu_level_name(cpu_active_level()),
                     g, (double)up[i], (double)got[i], want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_softmax_matches_double_precision),
        cmocka_unit_test(test_attention_matches_double_precision),
        cmocka_unit_test(test_attention_alibi_matches_double_precision),
        cmocka_unit_test(test_swiglu_matches_double_precision),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

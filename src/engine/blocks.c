/*
 * Shared forward-pass blocks (see blocks.h). Plain loops: they are a small share of the time
 * next to the matrix kernels, and the compiler vectorises what it can.
 */
#include "blocks.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "attention_q8.h"
#include "cpu.h"
#include "quant_legacy.h"

void block_rmsnorm(const float *x, const float *weight, size_t n, float eps, float *out)
{
    /* ggml's sum of float squares in double, over eight running sums: one sum was a chain
     * of dependent adds as long as the row, on the calling thread while the others wait,
     * several times a layer; double keeps the order's effect far below float's rounding */
    enum { SUMS = 8 };
    double sums[SUMS] = {0};
    size_t i = 0;
    for (; i + SUMS <= n; i += SUMS)
        for (size_t j = 0; j < SUMS; j++)
            sums[j] += (double)(x[i + j] * x[i + j]);
    for (; i < n; i++)
        sums[0] += (double)(x[i] * x[i]);
    double sum = 0.0;
    for (size_t j = 0; j < SUMS; j++)
        sum += sums[j];
    float mean = (float)(sum / (double)n);
    float scale = 1.0f / sqrtf(mean + eps);
    for (size_t i = 0; i < n; i++)
        out[i] = weight ? x[i] * scale * weight[i] : x[i] * scale;
}

void block_layernorm(const float *x, const float *weight, const float *bias, size_t n,
                     float eps, float *out)
{
    /* ggml_norm: mean and variance summed in double, then scale, weight and bias as three
     * float operations (ggml_mul and ggml_add follow the norm) */
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += (double)x[i];
    float mean = (float)(sum / (double)n);
    double sum2 = 0.0;
    for (size_t i = 0; i < n; i++) {
        float v = x[i] - mean;
        sum2 += (double)(v * v);
    }
    float scale = 1.0f / sqrtf((float)(sum2 / (double)n) + eps);
    for (size_t i = 0; i < n; i++)
        out[i] = (x[i] - mean) * scale * weight[i] + (bias ? bias[i] : 0.0f);
}

/*
 * The per-pair divisors: rope_freqs, or LongRoPE's long factors when the context is longer
 * than the original one and its short factors otherwise. The choice is made once per context,
 * as llama.cpp makes it from its context length (an original length of 0 stands for the
 * trained one there too).
 */
static const float *rope_factors(const corral_model *model, uint32_t n_ctx)
{
    const hparams *hp = &model->hp;
    if (model->rope_freqs)
        return model->rope_freqs;
    uint32_t n_ctx_orig = hp->n_ctx_orig ? hp->n_ctx_orig : hp->n_ctx_train;
    return n_ctx > n_ctx_orig ? model->rope_factors_long : model->rope_factors_short;
}

rope_params rope_params_make(const corral_model *model, uint32_t variant, uint32_t n_ctx)
{
    const hparams *hp = &model->hp;
    const rope_variant *rv = &model->rope[variant];
    uint32_t n_rot = rv->n_rot ? rv->n_rot : hp->n_rot;
    float magnitude = rv->attn_factor > 0.0f ? rv->attn_factor : 1.0f;
    return (rope_params){
        .mode = model->arch->rope,
        .n_rot = n_rot,
        .theta_scale = powf(rv->freq_base, -2.0f / (float)n_rot),
        .freq_scale = rv->freq_scale,
        .freq_factors = rv->no_freq_factors ? NULL : rope_factors(model, n_ctx),
        .yarn = rv->yarn,
        .mscale = rv->yarn ? rv->yarn_mscale : magnitude,
        .corr_low = rv->yarn_corr_low,
        .corr_high = rv->yarn_corr_high,
    };
}

/* YaRN's share of the extrapolated angle for pair i: 1 below the ramp, 0 above it. */
static float yarn_ramp(const rope_params *rp, uint32_t i)
{
    float span = rp->corr_high - rp->corr_low;
    float y = ((float)i - rp->corr_low) / (span > 0.001f ? span : 0.001f);
    return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

void rope_cache(const rope_params *rp, float pos, float *cos_sin)
{
    float theta = pos;
    for (uint32_t i = 0; i < rp->n_rot / 2; i++) {
        float factor = rp->freq_factors ? rp->freq_factors[i] : 1.0f;
        float extrapolated = theta / factor;
        float angle = rp->freq_scale * extrapolated;
        if (rp->yarn) {
            float mix = yarn_ramp(rp, i);
            angle = angle * (1.0f - mix) + extrapolated * mix;
        }
        cos_sin[2 * i] = cosf(angle) * rp->mscale;
        cos_sin[2 * i + 1] = sinf(angle) * rp->mscale;
        theta *= rp->theta_scale;
    }
}

void rope_apply(const rope_params *rp, const float *cos_sin, float *x, size_t n_heads,
                size_t head_dim)
{
    size_t half = rp->n_rot / 2;
    for (size_t h = 0; h < n_heads; h++) {
        float *v = x + h * head_dim;
        for (size_t i = 0; i < half; i++) {
            float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
            size_t a = rp->mode == ROPE_NORMAL ? 2 * i : i;
            size_t b = rp->mode == ROPE_NORMAL ? 2 * i + 1 : i + half;
            float x0 = v[a], x1 = v[b];
            v[a] = x0 * c - x1 * s;
            v[b] = x0 * s + x1 * c;
        }
    }
}

void block_swiglu(float *x, const float *y, size_t n)
{
    enum cpu_level level = cpu_active_level();
    if (level >= CPU_LEVEL_AVX512) {
        block_swiglu_avx512(x, y, n);
        return;
    }
    if (level >= CPU_LEVEL_AVX2) {
        block_swiglu_avx2(x, y, n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] / (1.0f + expf(-x[i])) * y[i];
}

void block_swiglu_oai(float *x, const float *y, size_t n, float alpha, float limit)
{
    for (size_t i = 0; i < n; i++) {
        float g = fminf(x[i], limit), u = fminf(fmaxf(y[i], -limit), limit);
        x[i] = g / (1.0f + expf(alpha * -g)) * (u + 1.0f);
    }
}

/* gelu_tanh(x) of every fp16 x, rounded to fp16: what ggml's CPU backend tabulates. */
static uint16_t gelu_f16_table[1 << 16];
static pthread_once_t gelu_f16_once = PTHREAD_ONCE_INIT;

static void build_gelu_f16_table(void)
{
    const float sqrt_2_over_pi = 0.79788456080286535587989211986876f;
    const float coef_a = 0.044715f;
    for (uint32_t h = 0; h < (1u << 16); h++) {
        float x = quant_f16_to_f32((uint16_t)h);
        /* 1 + a x x as one FMA: ggml's x86 build is compiled for FMA and contracts it (of
         * the 65536 entries, that of x = -1.99902344 differs) */
        float gelu = 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * x * fmaf(coef_a * x, x, 1.0f)));
        gelu_f16_table[h] = quant_f32_to_f16(gelu);
    }
}

void block_geglu_prepare(void)
{
    pthread_once(&gelu_f16_once, build_gelu_f16_table);
}

const uint16_t *block_gelu_f16_table(void)
{
    block_geglu_prepare();
    return gelu_f16_table;
}

static float gelu_f16(float x)
{
    if (x <= -10.0f)
        return 0.0f;
    if (x >= 10.0f)
        return x;
    return quant_f16_to_f32(gelu_f16_table[quant_f32_to_f16(x)]);
}

void block_geglu(float *x, const float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = gelu_f16(x[i]) * y[i];
}

void block_gelu(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = gelu_f16(x[i]);
}

void block_relu_sqr(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i] > 0.0f ? x[i] : 0.0f;
        x[i] = v * v;
    }
}

void block_softcap(float *x, size_t n, float cap)
{
    float inv = 1.0f / cap;
    for (size_t i = 0; i < n; i++)
        x[i] = tanhf(x[i] * inv) * cap;
}

double block_softmax_exp(float *x, size_t n, float scale, float *max_out)
{
    enum cpu_level level = cpu_active_level();
    if (level >= CPU_LEVEL_AVX512)
        return block_softmax_exp_avx512(x, n, scale, max_out);
    if (level >= CPU_LEVEL_AVX2)
        return block_softmax_exp_avx2(x, n, scale, max_out);
    float max = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        x[i] *= scale;
        max = x[i] > max ? x[i] : max;
    }
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += (double)x[i];
    }
    *max_out = max;
    return sum;
}

kv_key_layout kv_key_layout_of(corral_kv_type type, size_t head_dim)
{
    switch (type) {
    case CORRAL_KV_F32: return (kv_key_layout){0, head_dim, sizeof(float)};
    case CORRAL_KV_F16: return (kv_key_layout){0, head_dim, sizeof(uint16_t)};
    case CORRAL_KV_Q8_0: return (kv_key_layout){head_dim / QUANT_QK32, head_dim, 1};
    case CORRAL_KV_Q4_0: return (kv_key_layout){head_dim / QUANT_QK32, head_dim / 2, 1};
    }
    abort(); /* not a corral_kv_type */
}

_Static_assert(sizeof(block_q8_0) == 34 && sizeof(block_q4_0) == 18, "kv_value_row_bytes");

bool kv_type_fits(corral_kv_type type, size_t head_dim)
{
    return type == CORRAL_KV_F32 || type == CORRAL_KV_F16 ||
           (head_dim % QUANT_QK32 == 0 && head_dim <= ATTENTION_Q8_COMPONENTS);
}

/* Component d of the cell in lane `lane` of an F32 or F16 key tile (of that layout). */
static float key_at(corral_kv_type type, kv_key_layout layout, const uint8_t *tile, size_t d,
                    size_t lane)
{
    const uint8_t *at = tile + kv_key_lane_offset(layout, d, lane);
    return type == CORRAL_KV_F32 ? *(const float *)at : quant_f16_to_f32(*(const uint16_t *)at);
}

void block_attention_scores(corral_kv_type type, const void *tiles, size_t n_tiles,
                            size_t head_dim, const float *q, size_t n_heads, float *scores,
                            size_t ld_scores, attention_next next)
{
    if (kv_type_quantized(type)) {
        block_attention_scores_quantized(type, tiles, n_tiles, head_dim, q, n_heads, scores,
                                         ld_scores, next);
        return;
    }
    enum cpu_level level = cpu_active_level();
    if (level >= CPU_LEVEL_AVX512) {
        block_attention_scores_avx512(type, tiles, n_tiles, head_dim, q, n_heads, scores,
                                      ld_scores, next);
        return;
    }
    if (level >= CPU_LEVEL_AVX2) {
        block_attention_scores_avx2(type, tiles, n_tiles, head_dim, q, n_heads, scores,
                                    ld_scores, next);
        return;
    }
    kv_key_layout layout = kv_key_layout_of(type, head_dim);
    size_t tile_bytes = kv_key_tile_bytes(type, head_dim);
    for (size_t t = 0; t < n_tiles; t++)
        for (size_t h = 0; h < n_heads; h++) {
            const uint8_t *tile = (const uint8_t *)tiles + t * tile_bytes;
            float acc[KV_KEY_TILE] = {0};
            for (size_t d = 0; d < head_dim; d++)
                for (size_t lane = 0; lane < KV_KEY_TILE; lane++)
                    acc[lane] += q[h * head_dim + d] * key_at(type, layout, tile, d, lane);
            for (size_t lane = 0; lane < KV_KEY_TILE; lane++)
                scores[h * ld_scores + t * KV_KEY_TILE + lane] = acc[lane];
        }
}

void block_attention_values(corral_kv_type type, const void *values, size_t n, size_t n_cells,
                            const float *p, size_t ld_p, size_t n_heads, float *out,
                            attention_next next)
{
    enum cpu_level level = cpu_active_level();
    if (level >= CPU_LEVEL_AVX512) {
        block_attention_values_avx512(type, values, n, n_cells, p, ld_p, n_heads, out, next);
        return;
    }
    if (level >= CPU_LEVEL_AVX2) {
        block_attention_values_avx2(type, values, n, n_cells, p, ld_p, n_heads, out, next);
        return;
    }
    size_t row_bytes = kv_value_row_bytes(type, n);
    for (size_t c = 0; c < n_cells; c++)
        for (size_t h = 0; h < n_heads; h++)
            for (size_t i = 0; i < n; i++)
                out[h * n + i] += p[h * ld_p + c] *
                                  kv_value_at(type, (const uint8_t *)values + c * row_bytes, i);
}

/* Query i's cells end at lane first_lane + n_cells + i, counted from the first cell's tile. */
static size_t query_lanes_end(const attention_shape *shape, size_t query)
{
    return shape->first_lane + shape->n_cells + query;
}

/* Whether query i has cells in chunk `chunk`. */
static bool query_reaches(const attention_shape *shape, size_t query, size_t chunk)
{
    return query_lanes_end(shape, query) > chunk * ATTENTION_CHUNK_CELLS;
}

/* Query i's cells in chunk `chunk`, which it reaches (from the first cell in chunk 0). */
static size_t query_chunk_cells(const attention_shape *shape, size_t query, size_t chunk)
{
    size_t from = chunk * ATTENTION_CHUNK_CELLS, end = query_lanes_end(shape, query);
    size_t to = end - from < ATTENTION_CHUNK_CELLS ? end : from + ATTENTION_CHUNK_CELLS;
    return to - from - (chunk == 0 ? shape->first_lane : 0);
}

size_t attention_chunks(const attention_shape *shape)
{
    size_t lanes_end = query_lanes_end(shape, shape->n_queries - 1);
    size_t n_tiles = (lanes_end + KV_KEY_TILE - 1) / KV_KEY_TILE;
    return (n_tiles + ATTENTION_CHUNK_TILES - 1) / ATTENTION_CHUNK_TILES;
}

size_t attention_state_floats(const attention_shape *shape)
{
    return shape->n_queries * shape->n_heads * (2 + shape->head_dim_v);
}

/* The floats of scratch that hold the rounded queries: their int8 components, then per
 * block a scale and a sum (head_dim_k a multiple of 32 where a cache is quantized). */
static size_t rounded_query_floats(const attention_shape *shape)
{
    size_t components = shape->n_queries * shape->n_heads * shape->head_dim_k;
    return (components + sizeof(float) - 1) / sizeof(float) + 2 * (components / 32);
}

size_t attention_scratch_floats(const attention_shape *shape)
{
    size_t rows = shape->n_queries * shape->n_heads;
    return rows * ATTENTION_CHUNK_CELLS + rounded_query_floats(shape) +
           2 * attention_state_floats(shape) + rows * shape->head_dim_k;
}

attention_query attention_query_prepare(corral_kv_type type, const attention_shape *shape,
                                        const float *q, float *scratch)
{
    attention_query query = {.q = q};
    if (kv_type_quantized(type)) {
        size_t rows = shape->n_queries * shape->n_heads, dk = shape->head_dim_k;
        float *room = scratch + rows * ATTENTION_CHUNK_CELLS;
        float *scale = room + (rows * dk + sizeof(float) - 1) / sizeof(float);
        int32_t *sum = (int32_t *)(scale + rows * dk / 32);
        query.rounded = attention_q8_round(q, rows, dk, (int8_t *)room, scale, sum);
    }
    return query;
}

size_t attention_next_max_bytes(void)
{
    static _Atomic size_t cached; /* 0 until the first call; every thread computes the same */
    size_t max = atomic_load_explicit(&cached, memory_order_relaxed);
    if (max == 0) {
        max = cpu_l2_bytes() / 8;
        max = max < 128 * 1024 ? max : 128 * 1024;
        atomic_store_explicit(&cached, max, memory_order_relaxed);
    }
    return max;
}

/* The next phase's memory, its first attention_next_max_bytes() (see blocks.h). */
static attention_next next_phase(const uint8_t *bytes, size_t n_bytes)
{
    size_t max = attention_next_max_bytes();
    return (attention_next){bytes, n_bytes < max ? n_bytes : max};
}

void block_attention_chunk(corral_kv_type type, const attention_shape *shape,
                           const attention_query *query, const uint8_t *key_tiles,
                           const uint8_t *values, size_t chunk, float *scores, float *part)
{
    size_t group = shape->n_heads, n_queries = shape->n_queries, n_heads = n_queries * group;
    size_t dk = shape->head_dim_k, dv = shape->head_dim_v;
    size_t tile_bytes = kv_key_tile_bytes(type, dk), row_bytes = kv_value_row_bytes(type, dv);
    /* lanes counted from the first cell's tile: the chunk's, and the first cell's */
    size_t from = chunk * ATTENTION_CHUNK_CELLS, chunk_end = from + ATTENTION_CHUNK_CELLS;
    size_t skip = chunk == 0 ? shape->first_lane : 0;
    size_t first = 0; /* the first query with cells here: those before end before the chunk */
    while (!query_reaches(shape, first, chunk))
        first++;
    size_t last_end = query_lanes_end(shape, n_queries - 1);
    size_t to = last_end < chunk_end ? last_end : chunk_end;
    size_t n_tiles = (to - from + KV_KEY_TILE - 1) / KV_KEY_TILE;
    const uint8_t *chunk_values = values + (from + skip - shape->first_lane) * row_bytes;
    attention_next values_next = next_phase(chunk_values, (to - from - skip) * row_bytes);
    size_t h0 = first * group; /* the first head with cells here */
    const uint8_t *chunk_tiles = key_tiles + from / KV_KEY_TILE * tile_bytes;
    if (kv_type_quantized(type)) {
        attention_q8_query rounded = attention_q8_query_part(&query->rounded, h0, n_heads - h0);
        attention_q8_scores_rounded(type, chunk_tiles, n_tiles, &rounded,
                                    scores + h0 * ATTENTION_CHUNK_CELLS, ATTENTION_CHUNK_CELLS,
                                    values_next);
    } else {
        block_attention_scores(type, chunk_tiles, n_tiles, dk, query->q + h0 * dk,
                               n_heads - h0, scores + h0 * ATTENTION_CHUNK_CELLS,
                               ATTENTION_CHUNK_CELLS, values_next);
    }
    float *max = part, *sum = part + n_heads, *out = part + 2 * n_heads;
    for (size_t h = h0; h < n_heads; h++) {
        float *p = scores + h * ATTENTION_CHUNK_CELLS + skip;
        size_t n = query_chunk_cells(shape, h / group, chunk);
        /* ggml caps the raw products, then scales them inside its softmax */
        if (shape->softcap > 0.0f)
            block_softcap(p, n, shape->softcap);
        float scale = shape->scale;
        if (shape->alibi) {
            /* ggml's order: the scaled product, then the slope times the distance added */
            float slope = shape->alibi[h % group];
            size_t cell = from + skip - shape->first_lane, query = shape->alibi_query + h / group;
            for (size_t k = 0; k < n; k++, cell++) {
                size_t distance = cell > query ? cell - query : query - cell;
                p[k] = p[k] * scale + slope * -(float)distance;
            }
            scale = 1.0f;
        }
        sum[h] = (float)block_softmax_exp(p, n, scale, &max[h]);
    }
    /* the next chunk's key tiles, while this one's values are read */
    size_t next_to = last_end - to > ATTENTION_CHUNK_CELLS ? to + ATTENTION_CHUNK_CELLS : last_end;
    size_t next_tiles = (next_to - to + KV_KEY_TILE - 1) / KV_KEY_TILE;
    attention_next keys_next =
        next_phase(key_tiles + to / KV_KEY_TILE * tile_bytes, next_tiles * tile_bytes);
    /* the cells all these queries see, for all their heads at once; then each query's own */
    for (size_t i = h0 * dv; i < n_heads * dv; i++)
        out[i] = 0.0f;
    size_t shared = query_chunk_cells(shape, first, chunk);
    const float *p = scores + skip;
    block_attention_values(type, chunk_values, dv, shared, p + h0 * ATTENTION_CHUNK_CELLS,
                           ATTENTION_CHUNK_CELLS, n_heads - h0, out + h0 * dv, keys_next);
    for (size_t i = first + 1; i < n_queries; i++)
        block_attention_values(type, chunk_values + shared * row_bytes, dv,
                               query_chunk_cells(shape, i, chunk) - shared,
                               p + i * group * ATTENTION_CHUNK_CELLS + shared,
                               ATTENTION_CHUNK_CELLS, group, out + i * group * dv,
                               (attention_next){NULL, 0});
}

void attention_state_clear(const attention_shape *shape, float *state)
{
    size_t n_heads = shape->n_queries * shape->n_heads;
    for (size_t h = 0; h < n_heads; h++)
        state[h] = -INFINITY;
    for (size_t i = n_heads; i < attention_state_floats(shape); i++)
        state[i] = 0.0f;
}

void attention_state_fold(const attention_shape *shape, float *state, const float *part,
                          size_t chunk)
{
    size_t n_heads = shape->n_queries * shape->n_heads, dv = shape->head_dim_v;
    float *sum = state + n_heads, *out = state + 2 * n_heads;
    const float *part_sum = part + n_heads, *part_out = part + 2 * n_heads;
    for (size_t h = 0; h < n_heads; h++) {
        if (!query_reaches(shape, h / shape->n_heads, chunk))
            continue;
        float max = state[h] > part[h] ? state[h] : part[h];
        /* an empty state has max -inf and weight 0: the first fold copies part's sums */
        float keep = expf(state[h] - max), add = expf(part[h] - max);
        state[h] = max;
        sum[h] = sum[h] * keep + part_sum[h] * add;
        for (size_t i = h * dv; i < (h + 1) * dv; i++)
            out[i] = out[i] * keep + part_out[i] * add;
    }
}

void attention_state_finish(const attention_shape *shape, const float *state, float *out,
                            size_t ld_out)
{
    size_t group = shape->n_heads, n_heads = shape->n_queries * group, dv = shape->head_dim_v;
    for (size_t h = 0; h < n_heads; h++) {
        float inv = 1.0f / state[n_heads + h];
        if (shape->sinks) {
            /* the sink's weight joins the sum, both taken relative to the larger of the
             * scores' maximum and the sink, as ggml's softmax does */
            float sink = shape->sinks[h % group], max = state[h];
            float top = sink > max ? sink : max, keep = expf(max - top);
            inv = keep / (state[n_heads + h] * keep + expf(sink - top));
        }
        float *head_out = out + h / group * ld_out + h % group * dv;
        for (size_t i = 0; i < dv; i++)
            head_out[i] = state[2 * n_heads + h * dv + i] * inv;
    }
}

void block_attention(corral_kv_type type, const attention_shape *shape, const float *q,
                     size_t ld_q, const uint8_t *key_tiles, const uint8_t *values, float *scratch,
                     float *out, size_t ld_out)
{
    size_t rows = shape->n_queries * shape->n_heads;
    size_t query_floats = shape->n_heads * shape->head_dim_k;
    float *scores = scratch;
    float *part = scratch + rows * ATTENTION_CHUNK_CELLS + rounded_query_floats(shape);
    float *state = part + attention_state_floats(shape);
    /* the queries' heads in one run, as the score kernels take them (one query's already
     * are) */
    const float *queries = q;
    if (shape->n_queries > 1) {
        float *run = state + attention_state_floats(shape);
        for (size_t i = 0; i < shape->n_queries; i++)
            memcpy(run + i * query_floats, q + i * ld_q, query_floats * sizeof *q);
        queries = run;
    }
    attention_query query = attention_query_prepare(type, shape, queries, scratch);
    attention_state_clear(shape, state);
    for (size_t c = 0; c < attention_chunks(shape); c++) {
        block_attention_chunk(type, shape, &query, key_tiles, values, c, scores, part);
        attention_state_fold(shape, state, part, c);
    }
    attention_state_finish(shape, state, out, ld_out);
}

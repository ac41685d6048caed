/*
 * The shared building blocks of every forward pass, on plain float arrays: RMSNorm,
 * LayerNorm, RoPE, softmax, SwiGLU, GeGLU, GELU, soft-capping, and attention of a group of
 * query heads over a cached sequence. Their arithmetic follows ggml's CPU kernels (double
 * accumulators where ggml has them, the same RoPE angle recurrence, GELU through fp16) so
 * logits match llama.cpp closely.
 */
#ifndef CORRAL_ENGINE_BLOCKS_H
#define CORRAL_ENGINE_BLOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* out[i] = x[i] / rms(x) * weight[i] (weight NULL: 1); out may alias x. */
void block_rmsnorm(const float *x, const float *weight, size_t n, float eps, float *out);
/* LayerNorm: out[i] = (x[i] - mean(x)) / sqrt(var(x) + eps) * weight[i] + bias[i] (bias may
 * be NULL: none); out may alias x. */
void block_layernorm(const float *x, const float *weight, const float *bias, size_t n,
                     float eps, float *out);

/* Per-pair cos/sin for position pos (n_rot/2 pairs), ggml's angle recurrence. */
typedef struct rope_params {
    enum rope_mode mode;
    uint32_t n_rot;
    float theta_scale;       /* base^(-2/n_rot) */
    float freq_scale;
    const float *freq_factors; /* NULL or n_rot/2 divisors */
    /* YaRN (rope_variant): pairs below corr_low keep the extrapolated angle, pairs above
     * corr_high the interpolated one, a linear ramp between */
    bool yarn;
    float corr_low, corr_high;
    /* cos/sin times this: YaRN's magnitude, or rope.scaling.attn_factor (usually 1) */
    float mscale;
} rope_params;

/* A rope variant's parameters in a context of n_ctx positions a sequence (which picks
 * LongRoPE's factors). */
rope_params rope_params_make(const corral_model *model, uint32_t variant, uint32_t n_ctx);
void rope_cache(const rope_params *rp, float pos, float *cos_sin /* n_rot floats */);
/* Rotate n_heads heads of width head_dim (laid out back to back) with a rope_cache row. */
void rope_apply(const rope_params *rp, const float *cos_sin, float *x, size_t n_heads,
                size_t head_dim);

/* In place: x = silu(x) * y. At the avx2 and avx512 levels through block_swiglu_avx2 /
 * _avx512 (the softmax's vector exp): results differ from the scalar level by rounding only. */
void block_swiglu(float *x, const float *y, size_t n);
void block_swiglu_avx2(float *x, const float *y, size_t n);
void block_swiglu_avx512(float *x, const float *y, size_t n);
/* In place, gpt-oss's clamped variant: g = min(x, limit), u = clamp(y, -limit, limit),
 * x = g * sigmoid(alpha * g) * (u + 1), with ggml's arithmetic. */
void block_swiglu_oai(float *x, const float *y, size_t n, float alpha, float limit);

/* Build the fp16 GELU table block_geglu reads (idempotent, thread-safe). */
void block_geglu_prepare(void);
/* In place: x = gelu_tanh(x) * y, with ggml's CPU arithmetic: x rounded to fp16 and its GELU
 * read from a table of fp16 results (|x| >= 10 short-cuts to 0 or x). */
void block_geglu(float *x, const float *y, size_t n);
/* In place: x = gelu_tanh(x), the same way (ggml's GELU op; bert's FFN). */
void block_gelu(float *x, size_t n);
/* That table (built on first use): the fp16 GELU of each fp16 bit pattern, for a GPU to
 * read as the CPU does. */
const uint16_t *block_gelu_f16_table(void);

/* In place: x = relu(x)² (nemotron's FFN, nemotron_h's experts). */
void block_relu_sqr(float *x, size_t n);

/* In place: x = cap * tanh(x / cap) (gemma2's logit soft-capping). */
void block_softcap(float *x, size_t n, float cap);

/*
 * The unnormalised softmax: in place x = e^(scale * x - max), max being the largest scale * x,
 * stored in *max; returns the sum of the results, in double as ggml's soft_max_ext keeps it.
 * At the avx2 and avx512 levels through block_softmax_exp_avx2 / _avx512, whose vector exp is
 * within 2 ulp of expf: results differ from the scalar level by rounding only.
 */
double block_softmax_exp(float *x, size_t n, float scale, float *max);
double block_softmax_exp_avx2(float *x, size_t n, float scale, float *max);
double block_softmax_exp_avx512(float *x, size_t n, float scale, float *max);

/*
 * Cached keys are stored in tiles of KV_KEY_TILE consecutive cells of one KV head, as rows
 * of KV_KEY_TILE lanes, lane l holding cell l of the tile: a query then scores a whole tile
 * with one vector product per component, and no horizontal sums. An F32 or F16 tile is
 * head_dim rows, row d holding component d. A Q8_0 or Q4_0 tile (ggml's blocks of 32
 * components, corral_kv_type) begins with head_dim / 32 rows of f16 scales, row b holding
 * every cell's scale of block b; then come the quants: Q8_0 head_dim rows of int8, row d
 * holding component d; Q4_0 head_dim / 2 rows of bytes, row 16 b + j holding component
 * 32 b + j in its low nibble and 32 b + j + 16 in its high one, each as q + 8 (ggml's order
 * within a block). Either way a cell is one lane of every row, so cells move row by row.
 */
enum { KV_KEY_TILE = 16 };

typedef struct kv_key_layout {
    size_t scale_rows; /* rows of KV_KEY_TILE f16 scales, first */
    size_t rows;       /* rows of KV_KEY_TILE values after them */
    size_t lane_bytes; /* bytes of one lane of those rows */
} kv_key_layout;

kv_key_layout kv_key_layout_of(corral_kv_type type, size_t head_dim);

/* A key tile's bytes per component: 16 lanes of F32, F16, Q8_0 (a byte and a 32nd of a
 * scale row) or Q4_0 (half a byte and the same). */
static inline size_t kv_key_bytes_per_component(corral_kv_type type)
{
    switch (type) {
    case CORRAL_KV_F32: return KV_KEY_TILE * sizeof(float);
    case CORRAL_KV_F16: return KV_KEY_TILE * sizeof(uint16_t);
    case CORRAL_KV_Q8_0: return KV_KEY_TILE + KV_KEY_TILE * sizeof(uint16_t) / 32;
    case CORRAL_KV_Q4_0: return KV_KEY_TILE / 2 + KV_KEY_TILE * sizeof(uint16_t) / 32;
    }
    return 0; /* not a corral_kv_type */
}

static inline size_t kv_key_tile_bytes(corral_kv_type type, size_t head_dim)
{
    return head_dim * kv_key_bytes_per_component(type);
}

/* Byte offset of row r (scale rows counted first), lane `lane`, in a tile of that layout. */
static inline size_t kv_key_lane_offset(kv_key_layout layout, size_t r, size_t lane)
{
    if (r < layout.scale_rows)
        return (r * KV_KEY_TILE + lane) * sizeof(uint16_t);
    return layout.scale_rows * KV_KEY_TILE * sizeof(uint16_t) +
           ((r - layout.scale_rows) * KV_KEY_TILE + lane) * layout.lane_bytes;
}

static inline bool kv_type_quantized(corral_kv_type type)
{
    return type == CORRAL_KV_Q8_0 || type == CORRAL_KV_Q4_0;
}

/*
 * `call` with `constant` a constant of type's value, case by case: the vector kernels' tests
 * of the type then fold away where they inline.
 */
#define KV_TYPE_SWITCH(type, constant, call)                                                  \
    switch (type) {                                                                           \
    case CORRAL_KV_F32: { const corral_kv_type constant = CORRAL_KV_F32; call; break; }        \
    case CORRAL_KV_F16: { const corral_kv_type constant = CORRAL_KV_F16; call; break; }        \
    case CORRAL_KV_Q8_0: { const corral_kv_type constant = CORRAL_KV_Q8_0; call; break; }      \
    case CORRAL_KV_Q4_0: { const corral_kv_type constant = CORRAL_KV_Q4_0; call; break; }      \
    }

/* Whether a type can cache heads of head_dim components: the quantized ones need whole
 * blocks of 32, and at most 8192 of them (attention_q8.h rounds a query head at a time). */
bool kv_type_fits(corral_kv_type type, size_t head_dim);

/*
 * Cached values are rows of n components per cell: F32, F16, or Q8_0 / Q4_0 blocks laid out
 * as in a GGUF tensor (34 / 18 bytes: an f16 scale, then 32 int8 / 16 bytes of two nibbles).
 * kv_value_row_bytes(type, i) is also where component i's block begins, i a multiple of 32.
 */
static inline size_t kv_value_row_bytes(corral_kv_type type, size_t n)
{
    switch (type) {
    case CORRAL_KV_F32: return n * sizeof(float);
    case CORRAL_KV_F16: return n * sizeof(uint16_t);
    case CORRAL_KV_Q8_0: return n / 32 * 34;
    case CORRAL_KV_Q4_0: return n / 32 * 18;
    }
    return 0; /* not a corral_kv_type */
}

/* Component i of a value row, exactly (a quantized one: its scale times its q). */
static inline float kv_value_at(corral_kv_type type, const uint8_t *row, size_t i)
{
    if (type == CORRAL_KV_F32)
        return ((const float *)row)[i];
    if (type == CORRAL_KV_F16)
        return quant_f16_to_f32(((const uint16_t *)row)[i]);
    const uint8_t *block = row + kv_value_row_bytes(type, i - i % 32);
    float scale = quant_f16_to_f32(*(const uint16_t *)block);
    size_t j = i % 32;
    if (type == CORRAL_KV_Q8_0)
        return scale * (float)(int8_t)block[2 + j];
    uint8_t pair = block[2 + j % 16]; /* Q4_0: components j and j + 16 */
    return scale * (float)((j < 16 ? pair & 0x0f : pair >> 4) - 8);
}

/*
 * The memory the next phase of a token's attention will read (a chunk's value rows while its
 * scores are computed, the next chunk's key tiles while its values are): the vector kernels
 * ask L2 for it a line at a time, spread over their own run, so that the two streams overlap
 * the products instead of following them. A hint: no bytes, or the scalar level, read nothing.
 */
typedef struct attention_next {
    const void *bytes;
    size_t n_bytes; /* at most attention_next_max_bytes() */
} attention_next;

/*
 * At most this much of the next phase is asked for, leaving L2 room for the phase being read
 * (a chunk's keys or values on 64-wide F16 heads, which is where the gain was): an eighth of
 * the core's L2, and no more than 128 KiB. Asking for more evicts the phase being read on a
 * core with a small L2 (a Zen 3's 512 KiB read slower than asking for nothing), and less
 * gave up the gain on a 1 MiB L2. MQA1B's 512 KiB on 256-wide heads was no faster asked
 * whole or in part.
 */
size_t attention_next_max_bytes(void);

/* attention_next as a kernel walks it: per step of its loop, per_step lines asked of L2. */
typedef struct attention_next_stream {
    uintptr_t at, end;
    size_t per_step;
} attention_next_stream;

static inline attention_next_stream attention_next_start(attention_next next, size_t steps)
{
    size_t lines = (next.n_bytes + 63) / 64;
    attention_next_stream s = {(uintptr_t)next.bytes, (uintptr_t)next.bytes + next.n_bytes, 0};
    s.per_step = steps > 0 ? (lines + steps - 1) / steps : 0;
    return s;
}

static inline __attribute__((always_inline)) void attention_next_step(attention_next_stream *s)
{
    for (size_t i = 0; i < s->per_step && s->at < s->end; i++, s->at += 64)
        __builtin_prefetch((const void *)s->at, 0, 2); /* locality 2: prefetcht1, into L2 */
}

/*
 * scores[h * ld_scores + c] = q_h . key c for the n_heads query heads in q (head_dim floats
 * each) and the KV_KEY_TILE * n_tiles cells of n_tiles consecutive key tiles of a type. On
 * F32 and F16 tiles each score is summed over the components in order, lane by lane, of q
 * times the key's exact value, whatever the level: the levels differ by rounding (fused
 * multiply-adds) only. On Q8_0 and Q4_0 tiles the query is rounded to int8 blocks first and
 * the products are integers (attention_q8.h): the same bits at every level. The avx2 and
 * avx512 versions take F32 and F16 tiles only.
 */
void block_attention_scores(corral_kv_type type, const void *tiles, size_t n_tiles,
                            size_t head_dim, const float *q, size_t n_heads, float *scores,
                            size_t ld_scores, attention_next next);
void block_attention_scores_avx2(corral_kv_type type, const void *tiles, size_t n_tiles,
                                 size_t head_dim, const float *q, size_t n_heads, float *scores,
                                 size_t ld_scores, attention_next next);
void block_attention_scores_avx512(corral_kv_type type, const void *tiles, size_t n_tiles,
                                   size_t head_dim, const float *q, size_t n_heads,
                                   float *scores, size_t ld_scores, attention_next next);

/*
 * out[h * n + i] += sum over cells c < n_cells of p[h * ld_p + c] * value i of cell c, for
 * the n_heads rows of p and n_cells value rows of n values each (kv_value_row_bytes apart):
 * every head against each value row as it is read. Each output is summed onto what out held,
 * over the cells in order, of weights times exact values, whatever the level: the levels
 * differ by rounding (fused multiply-adds) only, and two calls over cells [0, a) and [a, b)
 * give the bits of one over [0, b).
 */
void block_attention_values(corral_kv_type type, const void *values, size_t n, size_t n_cells,
                            const float *p, size_t ld_p, size_t n_heads, float *out,
                            attention_next next);
void block_attention_values_avx2(corral_kv_type type, const void *values, size_t n,
                                 size_t n_cells, const float *p, size_t ld_p, size_t n_heads,
                                 float *out, attention_next next);
void block_attention_values_avx512(corral_kv_type type, const void *values, size_t n,
                                   size_t n_cells, const float *p, size_t ld_p, size_t n_heads,
                                   float *out, attention_next next);

/*
 * One attention call: a group of query heads that share one KV head, for n_queries queries
 * at consecutive positions of one sequence (the tokens of a prompt), which see the same first
 * cell: query i sees n_cells + i cells. The queries share every key tile and value row they
 * read, and each query gets the bits it would alone.
 */
typedef struct attention_shape {
    size_t n_heads;            /* query heads of the group, consecutive in q and out */
    size_t n_queries;          /* at least 1 */
    size_t n_cells;            /* cached positions the first query sees */
    size_t head_dim_k, head_dim_v;
    size_t first_lane;         /* the first cell's place in its key tile */
    float scale, softcap;
    /* per head of the group, a learned logit that joins the softmax's denominator only
     * (gpt-oss's attention sinks): weights sum to less than 1; NULL: none */
    const float *sinks;
    /* per head of the group, ALiBi's slope (jina-bert-v2): each score gains
     * -slope * |the query's position - the cell's| after the scale; query i sits alibi_query
     * + i cells after the first. NULL: none */
    const float *alibi;
    size_t alibi_query;
} attention_shape;

/*
 * Query heads rounded to int8 blocks of 32 for a quantized cache's keys (attention_q8.h): per
 * head its head_dim components in q, per head and block a scale and the sum of the block's
 * components.
 */
typedef struct attention_q8_query {
    const int8_t *q;
    const float *scale;
    const int32_t *sum;
    size_t n_heads, head_dim;
} attention_q8_query;

/*
 * An attention call's queries as its chunks take them: q, the n_queries * n_heads rows of
 * head_dim_k in order, and for a quantized cache the same rows rounded (attention_q8_round),
 * once for all the chunks.
 */
typedef struct attention_query {
    const float *q;
    attention_q8_query rounded;
} attention_query;

/*
 * Attention runs over the cells in chunks of ATTENTION_CHUNK_TILES key tiles, the first chunk
 * starting with the first cell's tile, and folds the chunks' softmax states in order (an
 * online softmax): the same bits whether one thread took all of a token's chunks or several
 * threads shared them. A chunk's scores (32 KiB for 8 heads) stay in cache while the softmax
 * passes over them; chunks of 16 tiles, which switch between runs of keys and of values four
 * times as often, were slower.
 */
enum { ATTENTION_CHUNK_TILES = 64, ATTENTION_CHUNK_CELLS = ATTENTION_CHUNK_TILES * KV_KEY_TILE };

/* The chunks of the last query (the others have as many or fewer). */
size_t attention_chunks(const attention_shape *shape);
/*
 * The softmax state of a call over some cells, n_queries * n_heads * (2 + head_dim_v) floats,
 * the heads of all queries in order: per head the largest scaled score, then per head the sum
 * of the weights e^(scaled score - largest), then per head the sum of the weights times the
 * value rows.
 */
size_t attention_state_floats(const attention_shape *shape);
/* The scratch block_attention takes: a chunk's scores, the rounded queries, two states and
 * the queries. */
size_t attention_scratch_floats(const attention_shape *shape);

/*
 * The queries q (the rows in order) of a call of a cache type as block_attention_chunk takes
 * them; a quantized cache's are rounded into scratch (attention_scratch_floats(shape)) past
 * the chunk scores, which block_attention_chunk then takes from scratch's start.
 */
attention_query attention_query_prepare(corral_kv_type type, const attention_shape *shape,
                                        const float *q, float *scratch);

/*
 * Chunk `chunk` of the attention of a group of query heads sharing one KV head (grouped-query
 * attention) as a softmax state, in part: the scores are scale * cap(K.q), cap being the
 * soft-cap when softcap > 0, on a cache of any type. Keys are the key tiles from the one
 * holding the first cell; values are the value rows of head_dim_v from the first cell's. The
 * values' products run in F32 on the cache's exact values, and so do the scores of F32 and
 * F16 keys; quantized keys are scored in integers against the rounded query
 * (block_attention_scores, _values),
 * every key and value read once for the whole group and all its queries: on a 1B Llama at
 * depth 4096 a token reads 134 MB of cache. query: attention_query_prepare's; scores:
 * n_queries * n_heads * ATTENTION_CHUNK_CELLS floats. The heads of a query whose cells end
 * before the chunk are left as they were in part.
 */
void block_attention_chunk(corral_kv_type type, const attention_shape *shape,
                           const attention_query *query, const uint8_t *key_tiles,
                           const uint8_t *values, size_t chunk, float *scores, float *part);
/* An empty state; then state = state and part (chunk `chunk`'s), part's cells following
 * state's, for the queries whose cells reach that chunk. */
void attention_state_clear(const attention_shape *shape, float *state);
void attention_state_fold(const attention_shape *shape, float *state, const float *part,
                          size_t chunk);
/* Query i's n_heads * head_dim_v outputs, out + i * ld_out = softmax-weighted values of the
 * state (with the shape's sinks in the denominator). */
void attention_state_finish(const attention_shape *shape, const float *state, float *out,
                            size_t ld_out);

/*
 * The whole attention of the group, its chunks folded in order, into out: per query and head
 * softmax(scale * cap(K.q)) . V. Query i's heads are at q + i * ld_q (n_heads * head_dim_k
 * floats) and its outputs at out + i * ld_out. Each head gets the result it would alone, and
 * a query's result depends on its cells only, not on the queries it came with, the batch nor
 * the threads. scratch: attention_scratch_floats(shape) floats.
 */
void block_attention(corral_kv_type type, const attention_shape *shape, const float *q,
                     size_t ld_q, const uint8_t *key_tiles, const uint8_t *values, float *scratch,
                     float *out, size_t ld_out);

#endif

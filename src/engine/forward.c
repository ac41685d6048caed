/*
 * The batch-level steps of a block (forward.h) and the block shapes built from them.
 * Steps work on the micro-batch in the context: matrix products and attention run on the
 * thread pool, everything else is a plain loop over the tokens. No allocation here.
 */
#include "forward.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "delta_net.h"
#include "lora.h"
#include "moe.h"
#include "quant_legacy.h"

/* a task's rows are whole groups of a packed matrix */
_Static_assert(MATMUL_TASK_ROWS % QUANT_PACK_ROWS == 0, "tasks split packed row groups");

/* ---- matrix multiplication on the pool ---- */

enum { MAX_PRODUCTS = 3 };

/* How the input x of a job becomes activation rows and their packed-kernel sums. */
typedef struct quantize_job {
    const quant_ops *ops, *packed_ops; /* packed_ops: NULL when no product is packed */
    const float *x;
    size_t n_in;
    void *act, *sums;
} quantize_job;

/* Tokens [t0, t0 + n) of x into act and sums, which hold those tokens' rows only. */
static void quantize_tokens(const quantize_job *job, size_t t0, size_t n, void *act, void *sums)
{
    quant_quantize_activations(job->ops, job->x + t0 * job->n_in, job->n_in, n, act);
    if (job->packed_ops)
        quant_prepare_packed_act(job->packed_ops, act, job->n_in, n, sums);
}

static void quantize_task(void *arg, size_t t, size_t thread)
{
    (void)thread;
    const quantize_job *job = arg;
    quantize_tokens(job, t, 1, (char *)job->act + t * quant_act_row_bytes(job->ops->type, job->n_in),
                    (char *)job->sums + t * quant_packed_sums_bytes(job->n_in));
}

/* What a job does after its products: nothing, or, for a feed-forward's gate and up, the
 * gated activation gate = act(gate) * up. */
enum job_gate { GATE_NONE, GATE_SWIGLU, GATE_GEGLU };

static void gated_activation(enum job_gate gate, float *x, const float *up, size_t n)
{
    if (gate == GATE_GEGLU)
        block_geglu(x, up, n);
    else
        block_swiglu(x, up, n);
}

/* Products sharing one quantized input; part p owns tasks [first[p], first[p + 1]), except
 * in a gated job, whose task k owns the rows of task k of both products. */
typedef struct matmul_job {
    const matrix_product *products;
    size_t n_products;
    size_t first[MAX_PRODUCTS + 1];
    enum job_gate gate;
    quantize_job input;
    size_t n_tokens;
    /* not NULL: each thread quantizes the input into its own thread_act (forward.h),
     * once per job, numbered `number` */
    thread_act *thread_acts;
    uint64_t number;
    size_t act_bytes; /* one activation row of the input's type */
} matmul_job;

/* y rows [begin, end) of one product for n_tokens activation rows (act_bytes apart): one
 * task's block. A packed block goes straight to its kernel: a 1-token step runs thousands of
 * tasks, and working out the row sizes again in each (two divisions and the ops look-up of
 * quant_matmul_packed_rows) was a visible share of its non-streaming time. */
static void multiply_rows(const matrix_product *product, size_t begin, size_t end,
                          const void *act, size_t act_bytes, const void *sums, size_t n_tokens)
{
    const weight *w = product->w;
    assert(begin % MATMUL_TASK_ROWS == 0 && end - begin <= MATMUL_TASK_ROWS);
    if (product->packed) {
        assert((end - begin) % QUANT_PACK_ROWS == 0 && w->ops->matmul_packed);
        w->ops->matmul_packed(w->n_in,
                              (const char *)product->packed +
                                  begin / MATMUL_TASK_ROWS * product->block_bytes,
                              (end - begin) / QUANT_PACK_ROWS, act, act_bytes, sums, n_tokens,
                              product->y + begin, w->n_out);
    } else {
        quant_matmul_rows(w->ops, w->data, w->n_in, begin, end, act, n_tokens, product->y,
                          w->n_out);
    }
}

static void matmul_task(void *arg, size_t task, size_t thread)
{
    const matmul_job *job = arg;
    const void *act = job->input.act, *sums = job->input.sums;
    if (job->thread_acts) {
        thread_act *mine = &job->thread_acts[thread];
        if (mine->job != job->number) {
            quantize_tokens(&job->input, 0, job->n_tokens, mine->act, mine->sums);
            mine->job = job->number;
        }
        act = mine->act;
        sums = mine->sums;
    }
    if (job->gate != GATE_NONE) {
        /* the rows of gate and up this thread has just written, while they are in its cache */
        const matrix_product *gate = &job->products[0], *up = &job->products[1];
        size_t begin = task * MATMUL_TASK_ROWS, n_out = gate->w->n_out;
        size_t end = begin + MATMUL_TASK_ROWS < n_out ? begin + MATMUL_TASK_ROWS : n_out;
        multiply_rows(gate, begin, end, act, job->act_bytes, sums, job->n_tokens);
        multiply_rows(up, begin, end, act, job->act_bytes, sums, job->n_tokens);
        for (size_t t = 0; t < job->n_tokens; t++)
            gated_activation(job->gate, gate->y + t * n_out + begin, up->y + t * n_out + begin,
                             end - begin);
        return;
    }
    size_t p = 0;
    while (task >= job->first[p + 1])
        p++;
    size_t begin = (task - job->first[p]) * MATMUL_TASK_ROWS, n_out = job->products[p].w->n_out;
    size_t end = begin + MATMUL_TASK_ROWS < n_out ? begin + MATMUL_TASK_ROWS : n_out;
    multiply_rows(&job->products[p], begin, end, act, job->act_bytes, sums, job->n_tokens);
}

/* Products [0, n) share x's activation type: quantize once (or once per thread, for a small
 * batch), one pool job for all rows. A gated job's two products have the same shape. */
static void matmul_shared_input(corral_context *ctx, const matrix_product *products, size_t n,
                                const float *x, size_t n_tokens, enum job_gate gate)
{
    const weight *w0 = products[0].w;
    matmul_job job = {.products = products,
                      .n_products = n,
                      .gate = gate,
                      .input = {w0->ops, NULL, x, w0->n_in, ctx->act, ctx->act_sums},
                      .n_tokens = n_tokens,
                      .act_bytes = quant_act_row_bytes(w0->ops->type, w0->n_in)};
    for (size_t p = 0; p < n; p++) {
        if (products[p].packed)
            job.input.packed_ops = products[p].w->ops;
        job.first[p + 1] =
            job.first[p] + (products[p].w->n_out + MATMUL_TASK_ROWS - 1) / MATMUL_TASK_ROWS;
    }
    if (n_tokens <= THREAD_ACT_TOKENS) {
        job.thread_acts = ctx->thread_acts;
        job.number = ++ctx->act_jobs;
    } else {
        threadpool_run(ctx->pool, n_tokens, quantize_task, &job.input);
    }
    threadpool_run(ctx->pool, gate != GATE_NONE ? job.first[1] : job.first[n], matmul_task, &job);
}

void forward_matmul(corral_context *ctx, const matrix_product *products, size_t n_products,
                    const float *x, size_t n_tokens)
{
    size_t first = 0;
    while (first < n_products) {
        const weight *w = products[first].w;
        size_t end = first + 1;
        while (end < n_products && end - first < MAX_PRODUCTS &&
               products[end].w->n_in == w->n_in &&
               products[end].w->ops->quantize_act == w->ops->quantize_act)
            end++;
        matmul_shared_input(ctx, products + first, end - first, x, n_tokens, GATE_NONE);
        first = end;
    }
    lora_apply(ctx, products, n_products, x, n_tokens);
}

static matrix_product layer_product(const corral_context *ctx, uint32_t il,
                                    enum layer_matrix which, const weight *w, float *y)
{
    size_t slot = (size_t)il * LM_COUNT + which;
    return (matrix_product){w, ctx->packed[slot], ctx->packed_block_bytes[slot], y};
}

matrix_product forward_layer_product(const corral_context *ctx, uint32_t il,
                                     enum layer_matrix which, const weight *w, float *y)
{
    return layer_product(ctx, il, which, w, y);
}

/* ---- elementwise steps ---- */

void forward_rmsnorm(corral_context *ctx, const weight *w, const float *in, float *out)
{
    size_t E = ctx->model->hp.n_embd;
    for (size_t t = 0; t < ctx->n_tokens; t++)
        block_rmsnorm(in + t * E, w->data, E, ctx->model->hp.norm_eps, out + t * E);
}

void forward_layernorm(corral_context *ctx, const weight *w, const weight *b, const float *in,
                       float *out)
{
    size_t E = ctx->model->hp.n_embd;
    for (size_t t = 0; t < ctx->n_tokens; t++)
        block_layernorm(in + t * E, w->data, b->data, E, ctx->model->hp.norm_eps, out + t * E);
}

void forward_norm(corral_context *ctx, const weight *w, const weight *b, const float *in,
                  float *out)
{
    if (ctx->model->arch->tensors & ARCH_LAYER_NORM)
        forward_layernorm(ctx, w, b, in, out);
    else
        forward_rmsnorm(ctx, w, in, out);
}

void forward_residual(corral_context *ctx)
{
    size_t n = ctx->n_tokens * ctx->model->hp.n_embd;
    float scale = ctx->model->hp.residual_scale;
    if (scale != 1.0f) {
        for (size_t i = 0; i < n; i++)
            ctx->x[i] += ctx->xn[i] * scale;
        return;
    }
    for (size_t i = 0; i < n; i++)
        ctx->x[i] += ctx->xn[i];
}

static void add_bias(float *y, const weight *bias, size_t n_tokens)
{
    if (!bias->data)
        return;
    const float *b = bias->data;
    for (size_t t = 0; t < n_tokens; t++)
        for (size_t i = 0; i < bias->n_in; i++)
            y[t * bias->n_in + i] += b[i];
}

/*
 * A cell's keys as they sit in their tiles (blocks.h): where a quantized block's scale and
 * quants go. ggml's reference quantizers make the blocks (a Q4_0 block's byte j already
 * holds components j and j + 16), so a quantized cache holds what ggml's would.
 */
static const quant_ops *kv_quant_ops(corral_kv_type type)
{
    return quant_ops_get(type == CORRAL_KV_Q8_0 ? TENSOR_TYPE_Q8_0 : TENSOR_TYPE_Q4_0,
                         CPU_LEVEL_SCALAR);
}

/* The block of 32 components at `from` into lane `lane` of a tile of a quantized type (ops,
 * kv_quant_ops): a scale row, then a row per quant byte of the block. */
static void scatter_key_block(const quant_ops *ops, kv_key_layout layout, uint8_t *tile,
                              size_t b, size_t lane, const float *from)
{
    block_q8_0 block; /* the larger of the two */
    ops->quantize(from, &block, QUANT_QK32);
    size_t n_quants = layout.rows / layout.scale_rows;
    const uint8_t *bytes = (const uint8_t *)&block;
    memcpy(tile + kv_key_lane_offset(layout, b, lane), bytes, sizeof(uint16_t));
    for (size_t j = 0; j < n_quants; j++)
        tile[kv_key_lane_offset(layout, layout.scale_rows + b * n_quants + j, lane)] =
            bytes[sizeof(uint16_t) + j];
}

/* That block back out of the tile, dequantized. */
static void gather_key_block(const quant_ops *ops, kv_key_layout layout, const uint8_t *tile,
                             size_t b, size_t lane, float *to)
{
    block_q8_0 block;
    size_t n_quants = layout.rows / layout.scale_rows;
    uint8_t *bytes = (uint8_t *)&block;
    memcpy(bytes, tile + kv_key_lane_offset(layout, b, lane), sizeof(uint16_t));
    for (size_t j = 0; j < n_quants; j++)
        bytes[sizeof(uint16_t) + j] =
            tile[kv_key_lane_offset(layout, layout.scale_rows + b * n_quants + j, lane)];
    ops->dequantize(&block, to, QUANT_QK32);
}

void kv_write_key(const corral_context *ctx, uint32_t layer, uint32_t seq, uint32_t cell,
                  const float *k)
{
    const layer_weights *l = &ctx->model->layers[layer];
    size_t dk = l->head_dim_k, lane = cell % KV_KEY_TILE;
    kv_key_layout layout = kv_key_layout_of(ctx->kv_type, dk);
    const quant_ops *ops = kv_type_quantized(ctx->kv_type) ? kv_quant_ops(ctx->kv_type) : NULL;
    for (size_t head = 0; head < l->n_head_kv; head++) {
        uint8_t *tile = kv_key_tile(ctx, layer, seq, head, cell);
        const float *from = k + head * dk;
        if (ops) {
            for (size_t b = 0; b < layout.scale_rows; b++)
                scatter_key_block(ops, layout, tile, b, lane, from + b * QUANT_QK32);
            continue;
        }
        for (size_t d = 0; d < dk; d++) {
            uint8_t *at = tile + kv_key_lane_offset(layout, d, lane);
            if (ctx->kv_type == CORRAL_KV_F16)
                *(uint16_t *)at = quant_f32_to_f16(from[d]);
            else
                *(float *)at = from[d];
        }
    }
}

void kv_read_key(const corral_context *ctx, uint32_t layer, uint32_t seq, uint32_t cell, float *k)
{
    const layer_weights *l = &ctx->model->layers[layer];
    size_t dk = l->head_dim_k, lane = cell % KV_KEY_TILE;
    kv_key_layout layout = kv_key_layout_of(ctx->kv_type, dk);
    const quant_ops *ops = kv_type_quantized(ctx->kv_type) ? kv_quant_ops(ctx->kv_type) : NULL;
    for (size_t head = 0; head < l->n_head_kv; head++) {
        const uint8_t *tile = kv_key_tile(ctx, layer, seq, head, cell);
        float *to = k + head * dk;
        if (ops) {
            for (size_t b = 0; b < layout.scale_rows; b++)
                gather_key_block(ops, layout, tile, b, lane, to + b * QUANT_QK32);
            continue;
        }
        for (size_t d = 0; d < dk; d++) {
            const uint8_t *at = tile + kv_key_lane_offset(layout, d, lane);
            to[d] = ctx->kv_type == CORRAL_KV_F16 ? quant_f16_to_f32(*(const uint16_t *)at)
                                                  : *(const float *)at;
        }
    }
}

void kv_write_value(const corral_context *ctx, uint32_t layer, uint32_t seq, uint32_t cell,
                    const float *v)
{
    const layer_weights *l = &ctx->model->layers[layer];
    size_t dv = l->head_dim_v;
    const quant_ops *ops = kv_type_quantized(ctx->kv_type) ? kv_quant_ops(ctx->kv_type) : NULL;
    for (size_t head = 0; head < l->n_head_kv; head++) {
        uint8_t *row = kv_value(ctx, layer, seq, head, cell);
        const float *from = v + head * dv;
        if (ops)
            ops->quantize(from, row, dv);
        else if (ctx->kv_type == CORRAL_KV_F16)
            for (size_t i = 0; i < dv; i++)
                ((uint16_t *)row)[i] = quant_f32_to_f16(from[i]);
        else
            memcpy(row, from, dv * sizeof(float));
    }
}

void kv_move_cells(const corral_context *ctx, uint32_t layer, uint32_t seq, uint32_t dst,
                   uint32_t src, uint32_t n)
{
    assert(dst <= src);
    const layer_weights *l = &ctx->model->layers[layer];
    kv_key_layout layout = kv_key_layout_of(ctx->kv_type, l->head_dim_k);
    for (size_t head = 0; head < l->n_head_kv; head++) {
        /* upwards (dst <= src), a run of cells that stays within one tile at both ends at a
         * time: a memmove per tile row, each cell's bytes moved as they are */
        for (uint32_t c = 0, run; c < n; c += run) {
            uint32_t to_lane = (dst + c) % KV_KEY_TILE, from_lane = (src + c) % KV_KEY_TILE;
            run = KV_KEY_TILE - (to_lane > from_lane ? to_lane : from_lane);
            run = run < n - c ? run : n - c;
            uint8_t *to = kv_key_tile(ctx, layer, seq, head, dst + c);
            const uint8_t *from = kv_key_tile(ctx, layer, seq, head, src + c);
            for (size_t r = 0; r < layout.scale_rows + layout.rows; r++) {
                size_t lane_bytes = r < layout.scale_rows ? sizeof(uint16_t) : layout.lane_bytes;
                memmove(to + kv_key_lane_offset(layout, r, to_lane),
                        from + kv_key_lane_offset(layout, r, from_lane), run * lane_bytes);
            }
        }
        memmove(kv_value(ctx, layer, seq, head, dst), kv_value(ctx, layer, seq, head, src),
                (size_t)n * ctx->kv[layer].value_row_bytes);
    }
}

/*
 * ---- attention on the pool: one task per (group of tokens, KV head), its query heads
 * together; or, when a batch has fewer (token, KV head) pairs than the pool has threads, one
 * token a group and `splits` tasks each ----
 */

typedef struct attention_job {
    corral_context *ctx;
    uint32_t layer;
    size_t splits; /* tasks per (group, KV head); 1: each task folds its chunks itself */
} attention_job;

/* One (group, KV head) pair's attention call: its shape, queries, cache and outputs. */
typedef struct attention_call {
    attention_shape shape;
    const float *q;
    const uint8_t *key_tiles, *values;
    float *out;
    size_t ld_q, ld_out; /* floats from a token's queries and outputs to the next's */
} attention_call;

/* The first cell token t sees on a layer: its window's, or the first the cache holds. */
static uint32_t first_visible(const corral_context *ctx, uint32_t layer, size_t t)
{
    uint32_t pos = ctx->tok_pos[t], window = ctx->kv[layer].window;
    uint32_t first = window && pos >= window ? pos - window + 1 : 0;
    if (window && ctx->model->layers[layer].chunked)
        first = pos - pos % window; /* its chunk's first position, inside the window */
    uint32_t base = kv_base(ctx, layer, ctx->tok_seq[t]);
    return first > base ? first : base;
}

/* ctx->attn_groups for a layer: runs of up to `most` tokens of one sequence at consecutive
 * positions that see the same first cell. Returns the number of groups. */
static size_t group_tokens(corral_context *ctx, uint32_t layer, size_t most)
{
    size_t n_groups = 0;
    uint32_t last_first = 0; /* the first cell token t - 1 sees */
    for (size_t t = 0; t < ctx->n_tokens; t++) {
        uint32_t first = first_visible(ctx, layer, t);
        bool joins = n_groups > 0 && t - ctx->attn_groups[n_groups - 1] < most &&
                     ctx->tok_seq[t] == ctx->tok_seq[t - 1] &&
                     ctx->tok_pos[t] == ctx->tok_pos[t - 1] + 1 && first == last_first;
        if (!joins)
            ctx->attn_groups[n_groups++] = (uint32_t)t;
        last_first = first;
    }
    ctx->attn_groups[n_groups] = (uint32_t)ctx->n_tokens;
    return n_groups;
}

static attention_call attention_call_of(const corral_context *ctx, uint32_t layer, size_t pair)
{
    const hparams *hp = &ctx->model->hp;
    const layer_weights *l = &ctx->model->layers[layer];
    size_t dk = l->head_dim_k, dv = l->head_dim_v;
    size_t g = pair / l->n_head_kv, kv_head = pair % l->n_head_kv;
    size_t t = ctx->attn_groups[g], n_queries = ctx->attn_groups[g + 1] - t;
    size_t n_head = l->n_head, group = n_head / l->n_head_kv, h = kv_head * group;
    uint32_t seq = ctx->tok_seq[t];
    /* visible keys: [first, last], of which the cache holds those from base on; the last is
     * the token's own position, its image's last for a bidirectional image, and without
     * causality (an encoder, whose batch is one whole input at positions 0..n-1) the input's */
    uint32_t base = kv_base(ctx, layer, seq), first = first_visible(ctx, layer, t);
    uint32_t last = hp->causal ? ctx->tok_last[t] : (uint32_t)ctx->n_tokens - 1;
    if (!hp->causal && l->sliding) {
        /* an encoder's sliding layer sees n_swa / 2 positions either side (gemma-embedding,
         * as llama.cpp's symmetric window); its queries are one a call (forward_attend) */
        uint32_t pos = ctx->tok_pos[t], half = hp->n_swa / 2;
        first = pos - first > half ? pos - half : first;
        last = last - pos > half ? pos + half : last;
    }
    const float *sinks = l->attn_sinks.data; /* the group's from h on */
    const float *alibi = ctx->model->alibi_slopes;
    return (attention_call){
        .shape = {group, n_queries, (size_t)(last - first) + 1, dk, dv,
                  (first - base) % KV_KEY_TILE, hp->kq_scale, hp->attn_softcap,
                  sinks ? sinks + h : NULL, alibi ? alibi + h : NULL,
                  ctx->tok_pos[t] - first},
        .q = ctx->q + (t * n_head + h) * dk,
        .key_tiles = kv_key_tile(ctx, layer, seq, kv_head, first - base),
        .values = kv_value(ctx, layer, seq, kv_head, first - base),
        .out = ctx->attn + (t * n_head + h) * dv,
        .ld_q = n_head * dk,
        .ld_out = n_head * dv,
    };
}

/* A shared pair's chunk states in attn_parts (forward.h), state_floats each. */
static float *attention_parts_of(const corral_context *ctx, size_t pair, size_t state_floats)
{
    return ctx->attn_parts + pair * ctx->attn_max_chunks * state_floats;
}

static void attention_task(void *arg, size_t task, size_t thread)
{
    const attention_job *job = arg;
    const corral_context *ctx = job->ctx;
    float *scratch = ctx->attn_scratch + thread * ctx->attn_scratch_floats;
    if (job->splits == 1) {
        attention_call call = attention_call_of(ctx, job->layer, task);
        block_attention(ctx->kv_type, &call.shape, call.q, call.ld_q, call.key_tiles,
                        call.values, scratch, call.out, call.ld_out);
        return;
    }
    /* this task's share of the pair's chunks (one token's), each chunk's state kept for the
     * fold */
    size_t pair = task / job->splits, share = task % job->splits;
    attention_call call = attention_call_of(ctx, job->layer, pair);
    size_t n_chunks = attention_chunks(&call.shape);
    size_t state_floats = attention_state_floats(&call.shape);
    float *parts = attention_parts_of(ctx, pair, state_floats);
    attention_query query = attention_query_prepare(ctx->kv_type, &call.shape, call.q, scratch);
    for (size_t c = share * n_chunks / job->splits; c < (share + 1) * n_chunks / job->splits; c++)
        block_attention_chunk(ctx->kv_type, &call.shape, &query, call.key_tiles, call.values, c,
                              scratch, parts + c * state_floats);
}

/* The pairs' shared chunks folded in order: the bits block_attention gives on one thread. */
static void attention_fold_parts(corral_context *ctx, uint32_t layer, size_t n_pairs)
{
    float *state = ctx->attn_scratch;
    for (size_t pair = 0; pair < n_pairs; pair++) {
        attention_call call = attention_call_of(ctx, layer, pair);
        size_t state_floats = attention_state_floats(&call.shape);
        const float *parts = attention_parts_of(ctx, pair, state_floats);
        attention_state_clear(&call.shape, state);
        for (size_t c = 0; c < attention_chunks(&call.shape); c++)
            attention_state_fold(&call.shape, state, parts + c * state_floats, c);
        attention_state_finish(&call.shape, state, call.out, call.ld_out);
    }
}

/* The norm of x's n values in spans as wide as the norm's weight: per head, or all at once.
 * A weight of several rows has one per span (head), and so has a bias. LayerNorm where the
 * family's norms are LayerNorms (Command R+ without biases, jina-bert-v2 with), else
 * RMSNorm. */
static void norm_spans(float *x, size_t n, const weight *norm, const weight *bias, float eps,
                       bool layer_norm)
{
    for (size_t at = 0, span = 0; at < n; at += norm->n_in, span++) {
        const float *w = (const float *)norm->data + (norm->n_out > 1 ? span * norm->n_in : 0);
        const float *b = bias->data ? (const float *)bias->data + (w - (const float *)norm->data)
                                    : NULL;
        if (layer_norm)
            block_layernorm(x + at, w, b, norm->n_in, eps, x + at);
        else
            block_rmsnorm(x + at, w, norm->n_in, eps, x + at);
    }
}

/* mistral3's attention temperature for a position: q grows by steps of attn_temp_floor
 * positions, computed in double as llama.cpp does. */
float attention_temperature(const hparams *hp, uint32_t pos)
{
    float from = (float)pos + hp->attn_temp_offset;
    double steps = floor((double)(from / (float)hp->attn_temp_floor));
    return (float)(log(steps + 1.0) * hp->attn_temp_scale + 1.0);
}

/* RMSNorm of q and k, RoPE, and q's scales, for token t. */
static void position_qk(corral_context *ctx, const layer_weights *l, size_t t)
{
    const hparams *hp = &ctx->model->hp;
    size_t dk = l->head_dim_k, n_head = l->n_head;
    float *q = ctx->q + t * n_head * dk, *k = ctx->k + t * l->n_head_kv * dk;
    if (l->q_norm.data) {
        bool layer_norm = ctx->model->arch->tensors & ARCH_LAYER_NORM;
        norm_spans(q, n_head * dk, &l->q_norm, &l->q_norm_b, hp->norm_eps, layer_norm);
        norm_spans(k, l->n_head_kv * dk, &l->k_norm, &l->k_norm_b, hp->norm_eps, layer_norm);
    }
    if (!l->no_rope) {
        const rope_params *rope = &ctx->rope[l->rope_variant];
        const float *cs = ctx->rope_cs[l->rope_variant] + t * hp->n_rot;
        rope_apply(rope, cs, q, n_head, dk);
        rope_apply(rope, cs, k, l->n_head_kv, dk);
    }
    if (l->l2_qk) { /* an RMSNorm without weights: each head scaled to unit RMS */
        for (size_t h = 0; h < n_head; h++)
            block_rmsnorm(q + h * dk, NULL, dk, hp->norm_eps, q + h * dk);
        for (size_t h = 0; h < l->n_head_kv; h++)
            block_rmsnorm(k + h * dk, NULL, dk, hp->norm_eps, k + h * dk);
    }
    if (hp->q_scale != 1.0f)
        for (size_t i = 0; i < n_head * dk; i++)
            q[i] *= hp->q_scale;
    if (hp->attn_temp_scale != 0.0f && !l->no_attn_temp) {
        float temperature = attention_temperature(hp, ctx->tok_pos[t]);
        for (size_t i = 0; i < n_head * dk; i++)
            q[i] *= temperature;
    }
}

/* ctx->attn's heads multiplied by softplus of their gates in ctx->gate (ARCH_ATTN_OUT_GATE): a
 * gate per head scales the head's head_dim_v values, a gate per element its value. */
static void gate_attention_output(corral_context *ctx, const layer_weights *l)
{
    size_t width = (size_t)l->n_head * l->head_dim_v, n_gates = l->attn_gate.n_out;
    size_t span = width / n_gates; /* head_dim_v, or 1 */
    for (size_t t = 0; t < ctx->n_tokens; t++) {
        float *out = ctx->attn + t * width;
        const float *gate = ctx->gate + t * n_gates;
        for (size_t g = 0; g < n_gates; g++) {
            float factor = delta_net_softplus(gate[g]);
            for (size_t i = g * span; i < (g + 1) * span; i++)
                out[i] *= factor;
        }
    }
}

void forward_attention(corral_context *ctx, uint32_t il)
{
    const layer_weights *l = &ctx->model->layers[il];
    size_t n = ctx->n_tokens;
    /* laguna's output gate reads the attention's input, as q, k and v do */
    const matrix_product qkv[] = {layer_product(ctx, il, LM_WQ, &l->wq, ctx->q),
                                  layer_product(ctx, il, LM_WK, &l->wk, ctx->k),
                                  layer_product(ctx, il, LM_WV, &l->wv, ctx->v),
                                  {&l->attn_gate, NULL, 0, ctx->gate}};
    forward_matmul(ctx, qkv, l->attn_gate.data ? 4 : 3, ctx->xn, n);
    add_bias(ctx->q, &l->bq, n);
    add_bias(ctx->k, &l->bk, n);
    add_bias(ctx->v, &l->bv, n);
    for (size_t t = 0; t < n; t++)
        position_qk(ctx, l, t);
    forward_attend(ctx, il);
    if (l->attn_gate.data)
        gate_attention_output(ctx, l);
    const matrix_product wo = layer_product(ctx, il, LM_WO, &l->wo, ctx->xn);
    forward_matmul(ctx, &wo, 1, ctx->attn, n);
    add_bias(ctx->xn, &l->bo, n);
}

void forward_attend(corral_context *ctx, uint32_t il)
{
    const hparams *hp = &ctx->model->hp;
    const layer_weights *l = &ctx->model->layers[il];
    size_t n = ctx->n_tokens;
    size_t k_width = (size_t)l->n_head_kv * l->head_dim_k;
    size_t v_width = (size_t)l->n_head_kv * l->head_dim_v;
    for (size_t t = 0; t < n && !l->kv_shared; t++) {
        uint32_t seq = ctx->tok_seq[t], cell = ctx->tok_pos[t] - kv_base(ctx, il, seq);
        kv_write_key(ctx, il, seq, cell, ctx->k + t * k_width);
        kv_write_value(ctx, il, seq, cell, ctx->v + t * v_width);
    }
    /* a pair has one task unless the (token, KV head) pairs are fewer than the threads, as
     * in the decoding step of a model with one KV head; tokens group while the pairs stay at
     * least as many as the threads */
    size_t n_threads = threadpool_size(ctx->pool), most = n * l->n_head_kv / n_threads;
    most = most < ATTENTION_GROUP_TOKENS ? most : ATTENTION_GROUP_TOKENS;
    if (!hp->causal || ctx->bidirectional)
        most = 1; /* a call's queries see one more cell each: only causal tokens group */
    size_t n_pairs = group_tokens(ctx, il, most > 1 ? most : 1) * l->n_head_kv;
    attention_job job = {ctx, il, 1};
    if (ctx->attn_parts && n_pairs < n_threads)
        job.splits = (n_threads + n_pairs - 1) / n_pairs;
    threadpool_run(ctx->pool, n_pairs * job.splits, attention_task, &job);
    if (job.splits > 1)
        attention_fold_parts(ctx, il, n_pairs);
}

/* An FFN without a gate: down(act(up(x) + b)) + b, one product at a time; act is GELU (bert,
 * falcon) or ReLU² (nemotron). */
static void forward_ffn_ungated(corral_context *ctx, uint32_t il)
{
    const corral_model *m = ctx->model;
    const layer_weights *l = &m->layers[il];
    size_t n = ctx->n_tokens;
    const matrix_product up = layer_product(ctx, il, LM_UP, &l->ffn_up, ctx->up);
    forward_matmul(ctx, &up, 1, ctx->xn, n);
    add_bias(ctx->up, &l->ffn_up_b, n);
    if (m->arch->ffn == FFN_RELU_SQR)
        block_relu_sqr(ctx->up, n * l->n_ff);
    else
        block_gelu(ctx->up, n * l->n_ff);
    const matrix_product down = layer_product(ctx, il, LM_DOWN, &l->ffn_down, ctx->xn);
    forward_matmul(ctx, &down, 1, ctx->up, n);
    add_bias(ctx->xn, &l->ffn_down_b, n);
}

void forward_ffn(corral_context *ctx, uint32_t il)
{
    const corral_model *m = ctx->model;
    const layer_weights *l = &m->layers[il];
    if (l->ffn_gate_inp.data) {
        forward_moe(ctx, il);
        return;
    }
    if (ffn_ungated(m->arch->ffn)) {
        forward_ffn_ungated(ctx, il);
        return;
    }
    forward_ffn_dense(ctx, il);
}

void forward_ffn_dense(corral_context *ctx, uint32_t il)
{
    const corral_model *m = ctx->model;
    const layer_weights *l = &m->layers[il];
    size_t n = ctx->n_tokens;
    const matrix_product gate_up[] = {layer_product(ctx, il, LM_GATE, &l->ffn_gate, ctx->gate),
                                      layer_product(ctx, il, LM_UP, &l->ffn_up, ctx->up)};
    enum job_gate gate = m->arch->ffn == FFN_GEGLU ? GATE_GEGLU : GATE_SWIGLU;
    /* One job computes both and the activation, each task on the rows it has just written,
     * where a separate job for the activation read half of them from the other core and
     * cost a pool round per layer. Matrices of two activation types, which no llama.cpp
     * recipe writes, take two jobs and the activation on this thread, and so do adapted
     * ones, whose adapter terms must be added before the activation. */
    if (l->ffn_gate.ops->quantize_act == l->ffn_up.ops->quantize_act && !l->ffn_gate.lora &&
        !l->ffn_up.lora) {
        matmul_shared_input(ctx, gate_up, 2, ctx->xn, n, gate);
    } else {
        forward_matmul(ctx, gate_up, 2, ctx->xn, n);
        gated_activation(gate, ctx->gate, ctx->up, n * l->ffn_gate.n_out);
    }
    const matrix_product down = layer_product(ctx, il, LM_DOWN, &l->ffn_down, ctx->xn);
    forward_matmul(ctx, &down, 1, ctx->gate, n);
    add_bias(ctx->xn, &l->ffn_down_b, n); /* jina-bert-v2's; the decoders' gated FFNs have none */
}

/* ---- block shapes ---- */

void layer_pre_norm(corral_context *ctx, uint32_t il)
{
    const layer_weights *l = &ctx->model->layers[il];
    forward_norm(ctx, &l->attn_norm, &l->attn_norm_b, ctx->x, ctx->xn);
    forward_attention(ctx, il);
    forward_residual(ctx);
    forward_norm(ctx, &l->ffn_norm, &l->ffn_norm_b, ctx->x, ctx->xn);
    forward_ffn(ctx, il);
    forward_residual(ctx);
}

void layer_pre_norm_hybrid(corral_context *ctx, uint32_t il, layer_mixer recurrent,
                           layer_mixer attention)
{
    const layer_weights *l = &ctx->model->layers[il];
    forward_norm(ctx, &l->attn_norm, &l->attn_norm_b, ctx->x, ctx->xn);
    (l->recurrent ? recurrent : attention)(ctx, il);
    forward_residual(ctx);
    forward_norm(ctx, &l->ffn_norm, &l->ffn_norm_b, ctx->x, ctx->xn);
    forward_ffn(ctx, il);
    forward_residual(ctx);
}

void layer_sandwich_norm(corral_context *ctx, uint32_t il)
{
    const layer_weights *l = &ctx->model->layers[il];
    forward_rmsnorm(ctx, &l->attn_norm, ctx->x, ctx->xn);
    forward_attention(ctx, il);
    forward_rmsnorm(ctx, &l->post_attn_norm, ctx->xn, ctx->xn);
    forward_residual(ctx);
    forward_rmsnorm(ctx, &l->ffn_norm, ctx->x, ctx->xn);
    forward_ffn(ctx, il);
    forward_rmsnorm(ctx, &l->post_ffn_norm, ctx->xn, ctx->xn);
    forward_residual(ctx);
}

void layer_post_norm(corral_context *ctx, uint32_t il)
{
    const layer_weights *l = &ctx->model->layers[il];
    size_t bytes = ctx->n_tokens * ctx->model->hp.n_embd * sizeof(float);
    memcpy(ctx->xn, ctx->x, bytes);
    forward_attention(ctx, il);
    forward_residual(ctx);
    forward_layernorm(ctx, &l->attn_out_norm, &l->attn_out_norm_b, ctx->x, ctx->x);
    memcpy(ctx->xn, ctx->x, bytes);
    forward_ffn(ctx, il);
    forward_residual(ctx);
    forward_layernorm(ctx, &l->layer_out_norm, &l->layer_out_norm_b, ctx->x, ctx->x);
}

/* Attention and FFN both on one normed input, each added to the residual; the order of the
 * two additions is the family's in llama.cpp, which its bits depend on. A layer with
 * attn_norm_2 (falcon-40b, FFN first) gives the attention that norm of x instead. */
static void parallel_branches(corral_context *ctx, uint32_t il, bool ffn_first)
{
    const layer_weights *l = &ctx->model->layers[il];
    size_t bytes = ctx->n_tokens * ctx->model->hp.n_embd * sizeof(float);
    assert(ffn_first || !l->attn_norm_2.data);
    forward_norm(ctx, &l->attn_norm, &l->attn_norm_b, ctx->x, ctx->xn);
    if (l->attn_norm_2.data)
        forward_norm(ctx, &l->attn_norm_2, &l->attn_norm_2_b, ctx->x, ctx->branch);
    else
        memcpy(ctx->branch, ctx->xn, bytes);
    if (ffn_first)
        forward_ffn(ctx, il);
    else
        forward_attention(ctx, il);
    forward_residual(ctx);
    memcpy(ctx->xn, ctx->branch, bytes);
    if (ffn_first)
        forward_attention(ctx, il);
    else
        forward_ffn(ctx, il);
    forward_residual(ctx);
}

/* cohere2, command-r, phi2: llama.cpp adds the FFN's output first, then the attention's. */
void layer_parallel(corral_context *ctx, uint32_t il)
{
    parallel_branches(ctx, il, true);
}

void layer_normed_branches(corral_context *ctx, uint32_t il)
{
    const layer_weights *l = &ctx->model->layers[il];
    size_t bytes = ctx->n_tokens * ctx->model->hp.n_embd * sizeof(float);
    memcpy(ctx->xn, ctx->x, bytes);
    forward_attention(ctx, il);
    forward_rmsnorm(ctx, &l->post_attn_norm, ctx->xn, ctx->xn);
    forward_residual(ctx);
    memcpy(ctx->xn, ctx->x, bytes);
    forward_ffn(ctx, il);
    forward_rmsnorm(ctx, &l->post_ffn_norm, ctx->xn, ctx->xn);
    forward_residual(ctx);
}

void layer_pre_norm_or_parallel(corral_context *ctx, uint32_t il)
{
    const layer_weights *l = &ctx->model->layers[il];
    if (l->ffn_norm.data)
        layer_pre_norm(ctx, il);
    else
        parallel_branches(ctx, il, false);
}

/*
 * Vision towers' ViT blocks on the Vulkan device (gpu_vision.h). Each block is recorded from
 * the op table (vk_ops.h) in the CPU's order (vision.c's layer_block). The attention has no
 * causal mask: the keys and values go to a cache of max_rows cells, sequence 0 holding every
 * row at its own cell and, for blocks made for padding rows, sequence 1 the rows that are
 * not padding first; a row that is not padding reads all of sequence 0, a padding row only
 * the first cells of sequence 1 (vk_attention_shape's last_at), which is the CPU's mask
 * without a mask shader.
 * A windowed block's row reads the cells of its window in sequence 0 (first_at, last_at),
 * the window's rows being together. A clipped linear clamps its input where it is, as
 * vision.c's layer_product does.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blocks.h"
#include "tensor_type.h"
#include "gpu_vision.h"
#include "vk_ops.h"

typedef struct vk_vision_weight {
    vk_buffer b;
    uint32_t type, n_in;
    size_t row_bytes;
} vk_vision_weight;

enum { W_LN1, W_LN1_B, W_LN2, W_LN2_B, W_Q, W_BQ, W_K, W_BK, W_V, W_BV, W_O, W_BO, W_UP,
       W_UP_B, W_DOWN, W_DOWN_B, W_GATE, W_GATE_B, W_Q_NORM, W_K_NORM, W_ATTN_POST, W_FFN_POST,
       W_OUT_SCALE, W_COUNT };

/* The attention's tokens, in words of query_tokens: per row its (sequence, cell), then per
 * row the last cell it reads (every row, or the padding's mask), then the first and last
 * cells of its window. */
enum { TOKEN_WORDS = 5 };

typedef struct vk_vision_block {
    vk_vision_weight w[W_COUNT]; /* an absent bias: no buffer */
    float attn_gate, ffn_gate;   /* 1 where the layer has no gate */
    bool clipped;                /* the clipped linears' bounds (vision_layer.clamp) */
    float clamp[VISION_CLAMP_LINEARS][4];
} vk_vision_block;

struct gpu_vision {
    vk_device *dev;
    vision_hparams hp;
    uint32_t n_blocks, max_rows;
    bool padding; /* the cache has sequence 1, for runs with padding rows */
    vk_vision_block *blocks;
    vk_commands cmd;
    bool cmd_made;
    vk_buffer x, xn, q, k, v, attn, ff, ff2, quants, scales, k_cache, v_cache, gelu_table;
    /* host-visible: the queries' tokens (TOKEN_WORDS), the two stores', the rotary angles */
    vk_buffer query_tokens, store_all, store_real, rope;
    vk_buffer ones; /* a head's width of ones: the weight of the values' norm */
    vk_vision_weight none; /* an absent bias */
    /* this run's: the blocks that do not attend fully read their windows; the queries and
     * keys turn; the rest of gpu_vision_rows */
    bool windowed, turned, rope_adjacent, rope_halves, v_norm;
    float kq_scale;
};

/* A block's weights in W_* order. */
static void block_weights(const vision_layer *l, const weight *out[W_COUNT])
{
    const weight *w[W_COUNT] = {&l->ln1, &l->ln1_b, &l->ln2, &l->ln2_b, &l->wq, &l->bq,
                                &l->wk,  &l->bk,    &l->wv,  &l->bv,    &l->wo, &l->bo,
                                &l->up,  &l->up_b,  &l->down, &l->down_b, &l->gate,
                                &l->gate_b, &l->q_norm, &l->k_norm, &l->attn_post_norm,
                                &l->ffn_post_norm, &l->out_scale};
    memcpy(out, w, sizeof w);
}

static bool is_matrix(int i)
{
    return i == W_Q || i == W_K || i == W_V || i == W_O || i == W_UP || i == W_DOWN ||
           i == W_GATE;
}

bool gpu_vision_supports(const vision_hparams *hp, const vision_layer *l)
{
    bool gated = hp->ffn == VISION_FFN_SWIGLU || hp->ffn == VISION_FFN_GEGLU_QUICK;
    if ((hp->norm != VISION_LAYER_NORM && hp->norm != VISION_RMS_NORM) ||
        (hp->ffn != VISION_FFN_GELU && hp->ffn != VISION_FFN_GELU_ERF &&
         hp->ffn != VISION_FFN_GELU_QUICK && !gated) ||
        hp->n_head == 0 || hp->n_embd % hp->n_head != 0 ||
        (hp->n_embd / hp->n_head) % 2 != 0 || (!gated && (l->gate.data || l->gate_b.data)))
        return false;
    const weight *w[W_COUNT];
    block_weights(l, w);
    for (int i = 0; i < W_COUNT; i++) {
        bool required = (is_matrix(i) && (i != W_GATE || gated)) || i == W_LN1 || i == W_LN2;
        if (!w[i]->data) {
            if (required)
                return false;
        } else if (is_matrix(i) ? !vk_type_supported(w[i]->type)
                                : w[i]->type != TENSOR_TYPE_F32) {
            return false;
        }
    }
    const weight *head_norms[] = {&l->q_norm, &l->k_norm};
    for (size_t i = 0; i < 2; i++)
        if (head_norms[i]->data && head_norms[i]->n_in != hp->n_embd / hp->n_head)
            return false;
    if ((l->attn_post_norm.data && l->attn_post_norm.n_in != hp->n_embd) ||
        (l->ffn_post_norm.data && l->ffn_post_norm.n_in != hp->n_embd) ||
        (l->out_scale.data && l->out_scale.n_in != 1 && l->out_scale.n_in != hp->n_embd))
        return false;
    const weight *gates[] = {&l->attn_out_gate, &l->ffn_out_gate};
    for (size_t i = 0; i < 2; i++)
        if (gates[i]->data && gates[i]->type != TENSOR_TYPE_F32)
            return false;
    return true;
}

/* Bytes of a weight on the device: its rows. */
static uint64_t weight_bytes(const weight *w)
{
    return w->data ? (uint64_t)w->row_bytes * (w->n_out ? w->n_out : 1) : 0;
}

enum { N_SCRATCH = 12 };

/* The scratch of runs of max_rows, in gpu_vision's order from x to v_cache (ff2: SwiGLU's
 * up, else none; the caches' second sequence for padding only). */
static void scratch_sizes(const vision_hparams *hp, uint32_t max_rows, bool padding,
                          uint64_t out[N_SCRATCH])
{
    uint64_t rows = max_rows, E = hp->n_embd, F = hp->n_ff, wide = E > F ? E : F;
    uint64_t row = rows * E * sizeof(float), ff = rows * F * sizeof(float);
    uint64_t cache = (padding ? 2 : 1) * row;
    uint64_t sizes[N_SCRATCH] = {row, row, row, row, row, row, ff,
                                 hp->ffn == VISION_FFN_SWIGLU ||
                                         hp->ffn == VISION_FFN_GEGLU_QUICK
                                     ? ff
                                     : 0,
                                 vk_matmul_quants_bytes(rows * wide),
                                 vk_matmul_scales_bytes(rows * wide), cache, cache};
    memcpy(out, sizes, sizeof sizes);
}

enum { N_HOST = 5 };

/* The host-visible buffers' sizes, in gpu_vision's order from query_tokens to ones. */
static void host_sizes(const vision_hparams *hp, uint32_t max_rows, uint64_t out[N_HOST])
{
    uint64_t rows = max_rows, pair = rows * 2 * sizeof(uint32_t), d = hp->n_embd / hp->n_head;
    uint64_t sizes[N_HOST] = {rows * TOKEN_WORDS * sizeof(uint32_t), pair, pair,
                              rows * d * sizeof(float), d * sizeof(float)};
    memcpy(out, sizes, sizeof sizes);
}

bool gpu_vision_bytes(int device, const vision_hparams *hp, const vision_layer *const *layers,
                      uint32_t n_layers, uint32_t max_rows, bool padding, uint64_t *out,
                      corral_error *err)
{
    *out = 0;
    vk_device *dev = vk_device_open(device, err);
    if (!dev)
        return false;
    uint64_t sum = 0, sizes[N_SCRATCH], host[N_HOST];
    for (uint32_t il = 0; il < n_layers; il++) {
        const weight *w[W_COUNT];
        block_weights(layers[il], w);
        for (int i = 0; i < W_COUNT; i++)
            if (w[i]->data)
                sum += vk_buffer_footprint(dev, weight_bytes(w[i]));
    }
    scratch_sizes(hp, max_rows, padding, sizes);
    for (size_t i = 0; i < N_SCRATCH; i++)
        sum += vk_buffer_footprint(dev, sizes[i] ? sizes[i] : 4);
    sum += vk_buffer_footprint(dev, VK_GELU_TABLE_BYTES);
    host_sizes(hp, max_rows, host);
    for (size_t i = 0; i < N_HOST; i++)
        sum += vk_buffer_footprint(dev, host[i]);
    *out = sum;
    return true;
}

static bool device_buffer(gpu_vision *v, uint64_t size, bool host_visible, vk_buffer *out,
                          corral_error *err)
{
    if (size > v->dev->max_range) {
        corral_error_set(err, "a vision buffer of %llu bytes is beyond %s's binding range (%llu)",
                         (unsigned long long)size, v->dev->info.name,
                         (unsigned long long)v->dev->max_range);
        return false;
    }
    return vk_buffer_create(v->dev, size ? size : 4, host_visible, out, err);
}

static bool upload_block(gpu_vision *v, const vision_layer *l, vk_vision_block *b,
                         corral_error *err)
{
    const weight *w[W_COUNT];
    block_weights(l, w);
    for (int i = 0; i < W_COUNT; i++) {
        if (!w[i]->data)
            continue;
        uint64_t bytes = weight_bytes(w[i]);
        b->w[i].type = w[i]->type;
        b->w[i].row_bytes = w[i]->row_bytes;
        b->w[i].n_in = (uint32_t)w[i]->n_in;
        if (!device_buffer(v, bytes, false, &b->w[i].b, err) ||
            !vk_buffer_write(v->dev, &b->w[i].b, 0, w[i]->data, bytes, err))
            return false;
    }
    b->attn_gate = l->attn_out_gate.data ? *(const float *)l->attn_out_gate.data : 1.0f;
    b->ffn_gate = l->ffn_out_gate.data ? *(const float *)l->ffn_out_gate.data : 1.0f;
    b->clipped = l->clamp != NULL;
    if (l->clamp)
        memcpy(b->clamp, l->clamp, sizeof b->clamp);
    return true;
}

gpu_vision *gpu_vision_create(int device, const vision_hparams *hp,
                              const vision_layer *const *layers, uint32_t n_layers,
                              uint32_t max_rows, bool padding, corral_error *err)
{
    vk_device *dev = vk_device_open(device, err);
    if (!dev)
        return NULL;
    gpu_vision *v = calloc(1, sizeof *v);
    if (!v || !(v->blocks = calloc(n_layers ? n_layers : 1, sizeof *v->blocks))) {
        free(v);
        corral_error_set(err, "out of memory");
        return NULL;
    }
    v->dev = dev;
    v->hp = *hp;
    v->n_blocks = n_layers;
    v->max_rows = max_rows;
    v->padding = padding;
    for (uint32_t il = 0; il < n_layers; il++)
        if (!gpu_vision_supports(hp, layers[il])) {
            corral_error_set(err, "the device cannot run block %u of this vision tower", il);
            gpu_vision_free(v);
            return NULL;
        }
    uint64_t sizes[N_SCRATCH], host[N_HOST];
    scratch_sizes(hp, max_rows, padding, sizes);
    host_sizes(hp, max_rows, host);
    vk_buffer *scratch[N_SCRATCH] = {&v->x,      &v->xn,     &v->q,       &v->k,
                                     &v->v,      &v->attn,   &v->ff,      &v->ff2,
                                     &v->quants, &v->scales, &v->k_cache, &v->v_cache};
    vk_buffer *host_visible[N_HOST] = {&v->query_tokens, &v->store_all, &v->store_real,
                                       &v->rope, &v->ones};
    bool ok = vk_commands_create(dev, &v->cmd, err);
    v->cmd_made = ok;
    for (size_t i = 0; ok && i < N_SCRATCH; i++)
        ok = device_buffer(v, sizes[i], false, scratch[i], err);
    for (size_t i = 0; ok && i < N_HOST; i++)
        ok = device_buffer(v, host[i], true, host_visible[i], err);
    for (uint32_t i = 0; ok && i < hp->n_embd / hp->n_head; i++)
        ((float *)v->ones.mapped)[i] = 1.0f;
    ok = ok && device_buffer(v, VK_GELU_TABLE_BYTES, false, &v->gelu_table, err) &&
         vk_buffer_write(dev, &v->gelu_table, 0,
                         hp->ffn == VISION_FFN_GELU_QUICK || hp->ffn == VISION_FFN_GEGLU_QUICK
                             ? vision_gelu_quick_f16_table()
                             : block_gelu_f16_table(),
                         VK_GELU_TABLE_BYTES, err);
    for (uint32_t il = 0; ok && il < n_layers; il++)
        ok = upload_block(v, layers[il], &v->blocks[il], err);
    if (!ok) {
        gpu_vision_free(v);
        return NULL;
    }
    return v;
}

uint32_t gpu_vision_max_rows(const gpu_vision *v)
{
    return v->max_rows;
}

const char *gpu_vision_device(const gpu_vision *v)
{
    return v->dev->info.name;
}

void gpu_vision_free(gpu_vision *v)
{
    if (!v)
        return;
    for (uint32_t il = 0; il < v->n_blocks; il++)
        for (int i = 0; i < W_COUNT; i++)
            if (v->blocks[il].w[i].b.buffer)
                vk_buffer_free(v->dev, &v->blocks[il].w[i].b);
    vk_buffer *all[] = {&v->x,         &v->xn,           &v->q,         &v->k,
                        &v->v,         &v->attn,         &v->ff,        &v->ff2,
                        &v->quants,    &v->scales,       &v->k_cache,   &v->v_cache,
                        &v->gelu_table, &v->query_tokens, &v->store_all, &v->store_real,
                        &v->rope,      &v->ones};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]->buffer)
            vk_buffer_free(v->dev, all[i]);
    if (v->cmd_made)
        vk_commands_free(&v->cmd);
    free(v->blocks);
    free(v);
}

/* y = W . x (+ b) over n rows. */
static void product(gpu_vision *v, const vk_vision_weight *w, const vk_vision_weight *b,
                    vk_buffer *x, vk_buffer *y, uint32_t n_in, uint32_t n_out, uint32_t n)
{
    vk_op_matmul(&v->cmd, w->type, vk_whole(&w->b), w->row_bytes, vk_whole(x),
                 vk_whole(&v->quants), vk_whole(&v->scales), vk_whole(y), n_in, n_out, n);
    if (b->b.buffer)
        vk_op_binary(&v->cmd, VK_ADD, vk_whole(y), vk_whole(&b->b), n * n_out, n_out, 0.0f);
}

/* x += gate * xn over count floats. */
static void add_gated(gpu_vision *v, float gate, uint32_t count)
{
    if (gate != 1.0f)
        vk_op_binary(&v->cmd, VK_SCALE, vk_whole(&v->xn), (vk_span){0}, count, 0, gate);
    vk_op_binary(&v->cmd, VK_ADD, vk_whole(&v->x), vk_whole(&v->xn), count, count, 0.0f);
}

/* out = norm(in) * w (+ b): the tower's norm; out may be in. */
static void norm(gpu_vision *v, const vk_vision_weight *w, const vk_vision_weight *b,
                 vk_buffer *in, vk_buffer *out, uint32_t n)
{
    const vision_hparams *hp = &v->hp;
    if (hp->norm == VISION_RMS_NORM)
        vk_op_rmsnorm(&v->cmd, vk_whole(&w->b), vk_whole(in), vk_whole(out), hp->n_embd, n,
                      hp->eps);
    else
        vk_op_layernorm(&v->cmd, vk_whole(&w->b), vk_whole(&b->b), vk_whole(in), vk_whole(out),
                        hp->n_embd, n, hp->eps);
}

/* y = W . x (+ b) as vision.c's layer_product: a clipped linear (which: its VISION_CLAMP_*)
 * clamps its input where it is first, and its output after. */
static void clipped_product(gpu_vision *v, const vk_vision_block *b, int which, int wi,
                            vk_buffer *x, vk_buffer *y, uint32_t n_in, uint32_t n_out,
                            uint32_t n)
{
    if (b->clipped)
        vk_op_clamp(&v->cmd, vk_whole(x), n * n_in, b->clamp[which][0], b->clamp[which][1]);
    product(v, &b->w[wi], &b->w[wi + 1], x, y, n_in, n_out, n);
    if (b->clipped)
        vk_op_clamp(&v->cmd, vk_whole(y), n * n_out, b->clamp[which][2], b->clamp[which][3]);
}

/* Each head of n rows RMS-normed on its own, in place (w: a head's width; the values' norm:
 * ones). */
static void head_norms(gpu_vision *v, const vk_buffer *w, vk_buffer *x, uint32_t n)
{
    const vision_hparams *hp = &v->hp;
    vk_op_rmsnorm(&v->cmd, vk_whole(w), vk_whole(x), vk_whole(x), hp->n_embd / hp->n_head,
                  n * hp->n_head, hp->eps);
}

static void rotate(gpu_vision *v, vk_buffer *x, uint32_t n)
{
    uint32_t H = v->hp.n_head, d = v->hp.n_embd / H;
    if (v->rope_halves)
        vk_op_rope_halves(&v->cmd, vk_whole(&v->rope), vk_whole(x), n, H, d);
    else
        vk_op_rope(&v->cmd, vk_whole(&v->rope), vk_whole(x), n, H, d, d, !v->rope_adjacent);
}

/* Block il over the run's n rows, as vision.c's layer_block. */
static void record_block(gpu_vision *v, uint32_t il, uint32_t n)
{
    const vision_hparams *hp = &v->hp;
    uint32_t E = hp->n_embd, F = hp->n_ff, H = hp->n_head, d = E / H;
    const vk_vision_block *b = &v->blocks[il];
    const vk_vision_weight *w = b->w;
    norm(v, &w[W_LN1], &w[W_LN1_B], &v->x, &v->xn, n);
    clipped_product(v, b, VISION_CLAMP_Q, W_Q, &v->xn, &v->q, E, E, n);
    clipped_product(v, b, VISION_CLAMP_K, W_K, &v->xn, &v->k, E, E, n);
    clipped_product(v, b, VISION_CLAMP_V, W_V, &v->xn, &v->v, E, E, n);
    if (w[W_Q_NORM].b.buffer)
        head_norms(v, &w[W_Q_NORM].b, &v->q, n);
    if (w[W_K_NORM].b.buffer)
        head_norms(v, &w[W_K_NORM].b, &v->k, n);
    if (v->turned) {
        rotate(v, &v->q, n);
        rotate(v, &v->k, n);
    }
    if (v->v_norm)
        head_norms(v, &v->ones, &v->v, n);
    vk_cache_shape cache = {H, d, v->max_rows, false};
    vk_buffer *stores[] = {&v->store_all, &v->store_real};
    for (size_t s = 0; s < (v->padding ? 2u : 1u); s++) {
        vk_op_kv_store(&v->cmd, vk_whole(stores[s]), vk_whole(&v->k), vk_whole(&v->k_cache),
                       &cache, n);
        vk_op_kv_store(&v->cmd, vk_whole(stores[s]), vk_whole(&v->v), vk_whole(&v->v_cache),
                       &cache, n);
    }
    bool window = v->windowed && hp->n_wa_pattern != 0 && (il + 1) % hp->n_wa_pattern != 0;
    vk_attention_shape shape = {.n_tokens = n, .n_head = H, .n_head_kv = H, .head_dim_k = d,
                                .head_dim_v = d, .n_cells = v->max_rows, .f16 = false,
                                .scale = v->kq_scale != 0.0f ? v->kq_scale
                                                             : 1.0f / sqrtf((float)d),
                                .last_at = window ? 4 * n : 2 * n};
    vk_op_attention_from(&v->cmd, vk_whole(&v->query_tokens), vk_whole(&v->q),
                         vk_whole(&v->k_cache), vk_whole(&v->v_cache), vk_whole(&v->attn), &shape,
                         window ? 3 * n : 0);
    clipped_product(v, b, VISION_CLAMP_OUT, W_O, &v->attn, &v->xn, E, E, n);
    if (w[W_ATTN_POST].b.buffer)
        norm(v, &w[W_ATTN_POST], &v->none, &v->xn, &v->xn, n);
    add_gated(v, b->attn_gate, n * E);
    norm(v, &w[W_LN2], &w[W_LN2_B], &v->x, &v->xn, n);
    if (hp->ffn == VISION_FFN_GEGLU_QUICK) { /* the gate first, as vision.c's */
        clipped_product(v, b, VISION_CLAMP_GATE, W_GATE, &v->xn, &v->ff, E, F, n);
        clipped_product(v, b, VISION_CLAMP_UP, W_UP, &v->xn, &v->ff2, E, F, n);
        vk_op_gelu_quick(&v->cmd, vk_whole(&v->gelu_table), vk_whole(&v->ff), vk_whole(&v->ff2),
                         n * F);
        clipped_product(v, b, VISION_CLAMP_DOWN, W_DOWN, &v->ff, &v->xn, F, E, n);
    } else if (hp->ffn == VISION_FFN_SWIGLU) {
        product(v, &w[W_GATE], &w[W_GATE_B], &v->xn, &v->ff, E, F, n);
        product(v, &w[W_UP], &w[W_UP_B], &v->xn, &v->ff2, E, F, n);
        vk_op_swiglu(&v->cmd, vk_whole(&v->ff), vk_whole(&v->ff2), n * F);
        product(v, &w[W_DOWN], &w[W_DOWN_B], &v->ff, &v->xn, F, E, n);
    } else {
        product(v, &w[W_UP], &w[W_UP_B], &v->xn, &v->ff, E, F, n);
        if (hp->ffn == VISION_FFN_GELU_ERF)
            vk_op_binary(&v->cmd, VK_GELU_ERF, vk_whole(&v->ff), (vk_span){0}, n * F, 0, 0.0f);
        else if (hp->ffn == VISION_FFN_GELU_QUICK)
            vk_op_gelu_quick(&v->cmd, vk_whole(&v->gelu_table), vk_whole(&v->ff), (vk_span){0},
                             n * F);
        else
            vk_op_gelu(&v->cmd, vk_whole(&v->gelu_table), vk_whole(&v->ff), (vk_span){0},
                       n * F);
        product(v, &w[W_DOWN], &w[W_DOWN_B], &v->ff, &v->xn, F, E, n);
    }
    if (w[W_FFN_POST].b.buffer)
        norm(v, &w[W_FFN_POST], &v->none, &v->xn, &v->xn, n);
    add_gated(v, b->ffn_gate, n * E);
    if (w[W_OUT_SCALE].b.buffer) /* one value for every channel, or one per channel */
        vk_op_binary(&v->cmd, VK_MUL, vk_whole(&v->x), vk_whole(&w[W_OUT_SCALE].b), n * E,
                     w[W_OUT_SCALE].n_in, 0.0f);
}

/* The attention's tokens for this run's padding and windows (the top comment). */
static void write_tokens(gpu_vision *v, uint32_t n, const uint8_t *padding,
                         const uint32_t *window)
{
    uint32_t *query = v->query_tokens.mapped, *all = v->store_all.mapped;
    uint32_t *real = v->store_real.mapped, n_real = 0;
    for (uint32_t r = 0; r < n; r++)
        n_real += !(padding && padding[r]);
    bool masked = n_real > 0 && n_real < n; /* no row to see: the CPU's mask is off too */
    for (uint32_t r = 0, next_real = 0, next_pad = n_real; r < n; r++) {
        bool pad = masked && padding[r];
        uint32_t cell = pad ? next_pad++ : next_real++;
        all[2 * r] = 0;
        all[2 * r + 1] = r;
        real[2 * r] = 1;
        real[2 * r + 1] = cell;
        query[2 * r] = pad ? 1 : 0;
        query[2 * r + 1] = pad ? cell : r;
        query[2 * n + r] = pad ? n_real - 1 : n - 1;
    }
    /* a window's first and last rows */
    for (uint32_t r = 0, begin = 0; window && r < n; r++) {
        if (window[r] != window[begin])
            begin = r;
        query[3 * n + r] = begin;
    }
    for (uint32_t r = n, end = n - 1; window && r-- > 0;) {
        if (window[r] != window[end])
            end = r;
        query[4 * n + r] = end;
    }
}

bool gpu_vision_run(gpu_vision *v, const gpu_vision_rows *rows, uint32_t first, uint32_t count,
                    corral_error *err)
{
    uint32_t n = rows->n_rows;
    if (n == 0 || n > v->max_rows || first > v->n_blocks || count > v->n_blocks - first) {
        corral_error_set(err, "a vision run of %u rows through blocks %u + %u, beyond the "
                         "%u rows and %u blocks made", n, first, count, v->max_rows,
                         v->n_blocks);
        return false;
    }
    if (rows->padding && rows->window) {
        corral_error_set(err, "a vision run with both padding rows and windows");
        return false;
    }
    if (rows->padding && !v->padding) {
        corral_error_set(err, "a vision run with padding rows, on blocks made without them");
        return false;
    }
    if (rows->rope_halves && (v->hp.n_embd / v->hp.n_head) % 4 != 0) {
        corral_error_set(err, "a vision run turning each half of heads of %u, not a multiple "
                         "of 4", v->hp.n_embd / v->hp.n_head);
        return false;
    }
    size_t bytes = (size_t)n * v->hp.n_embd * sizeof *rows->x;
    write_tokens(v, n, rows->padding, rows->window);
    v->windowed = rows->window != NULL;
    v->turned = rows->rope_cs != NULL;
    v->rope_adjacent = rows->rope_adjacent;
    v->rope_halves = rows->rope_halves;
    v->v_norm = rows->v_norm;
    v->kq_scale = rows->kq_scale;
    if (rows->rope_cs)
        memcpy(v->rope.mapped, rows->rope_cs,
               (size_t)n * (v->hp.n_embd / v->hp.n_head) * sizeof *rows->rope_cs);
    if (!vk_buffer_write(v->dev, &v->x, 0, rows->x, bytes, err))
        return false;
    vk_commands_begin(&v->cmd);
    for (uint32_t il = first; il < first + count; il++)
        record_block(v, il, n);
    return vk_commands_submit(&v->cmd, err) &&
           vk_buffer_read(v->dev, &v->x, 0, rows->x, bytes, err);
}

/*
 * Gemma 4's audio tower's conformer blocks on the Vulkan device (gpu_audio.h). Each block is
 * recorded from the op table (vk_ops.h) in the CPU's order (audio_gemma4.c's ffn_step,
 * attention_step, conv_step): RMS norms, the products with their bounds, SiLU as SwiGLU with
 * an up of ones (the CPU's x / (1 + e^-x) to the bit), the scales and residuals as binary
 * ops, and two shaders of the tower's own: the local attention (audio_attention.comp) and
 * the gated linear unit through the causal depthwise convolution (audio_conv.comp). A
 * product's input bounds clamp a copy, as the CPU's product does, since the same rows feed
 * several products with bounds of their own. A segment's rows go up once and come back
 * after the last block.
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_audio.h"
#include "tensor_type.h"
#include "vk_ops.h"

typedef struct vk_audio_weight {
    vk_buffer b;
    uint32_t type;
    size_t row_bytes;
} vk_audio_weight;

enum { M_FFN_UP, M_FFN_DOWN, M_FFN_UP_1, M_FFN_DOWN_1, M_Q, M_K, M_V, M_O, M_REL_K, M_PW1,
       M_PW2, M_COUNT };
enum { V_FFN_NORM, V_FFN_POST, V_FFN_NORM_1, V_FFN_POST_1, V_ATTN_NORM, V_ATTN_POST,
       V_CONV_NORM, V_CONV_POST, V_OUT_NORM, V_Q_SCALE, V_K_SCALE, V_CONV_DW, V_COUNT };

typedef struct vk_audio_block {
    vk_audio_weight m[M_COUNT];
    float bounds[M_COUNT][4]; /* in lo, in hi, out lo, out hi */
    vk_buffer v[V_COUNT];
} vk_audio_block;

struct gpu_audio {
    vk_device *dev;
    gpu_audio_blocks hp; /* layers and rel_pos not kept */
    uint32_t max_rows;
    vk_audio_block *blocks;
    vk_commands cmd;
    bool cmd_made;
    vk_buffer x, xn, q, k, v, attn, wide, clipped, ones, quants, scales, rel_pos, rel;
};

static void block_matrices(const audio_layer *l, const audio_linear *out[M_COUNT])
{
    const audio_linear *m[M_COUNT] = {&l->ffn_up, &l->ffn_down, &l->ffn_up_1, &l->ffn_down_1,
                                      &l->wq,     &l->wk,       &l->wv,       &l->wo,
                                      &l->rel_k,  &l->conv_pw1, &l->conv_pw2};
    memcpy(out, m, sizeof m);
}

/* The block's vectors' floats in V_* order (their counts: vector_count); the scales are
 * made at upload. */
static void block_vectors(const audio_layer *l, const float *out[V_COUNT])
{
    const weight *w[] = {&l->ffn_norm,  &l->ffn_post_norm,  &l->ffn_norm_1,
                         &l->ffn_post_norm_1, &l->attn_norm, &l->attn_post_norm,
                         &l->conv_norm, &l->conv_post_norm, &l->out_norm};
    for (int i = 0; i < V_Q_SCALE; i++)
        out[i] = w[i]->data;
    out[V_Q_SCALE] = out[V_K_SCALE] = NULL;
    out[V_CONV_DW] = l->conv_dw;
}

static uint64_t vector_count(const gpu_audio_blocks *b, int i)
{
    uint64_t E = b->n_embd;
    return i == V_Q_SCALE || i == V_K_SCALE ? E / b->n_head
           : i == V_CONV_DW                 ? E * b->kernel
                                            : E;
}

static uint64_t matrix_bytes(const audio_linear *l)
{
    return (uint64_t)l->w.row_bytes * l->w.n_out;
}

enum { N_SCRATCH = 13 };

/* The scratch of runs of max_rows, in gpu_audio's order from x to rel. */
static void scratch_sizes(const gpu_audio_blocks *b, uint32_t max_rows, uint64_t out[N_SCRATCH])
{
    uint64_t R = max_rows, E = b->n_embd, F = b->n_ff, P = b->past + 1;
    uint64_t wide = F > 2 * E ? F : 2 * E, in = F > E ? F : E;
    uint64_t inputs = (R > P ? R : P) * in; /* the widest product's input, the distances' too */
    uint64_t row = R * E * sizeof(float);
    uint64_t sizes[N_SCRATCH] = {row,
                                 row,
                                 row,
                                 row,
                                 row,
                                 row,
                                 R * wide * sizeof(float),
                                 inputs * sizeof(float),
                                 R * in * sizeof(float),
                                 vk_matmul_quants_bytes(inputs),
                                 vk_matmul_scales_bytes(inputs),
                                 P * E * sizeof(float),
                                 P * E * sizeof(float)};
    memcpy(out, sizes, sizeof sizes);
}

/* Whether dev runs these blocks for runs of max_rows: matrix types it multiplies, the
 * attention's reach within its shader, every dispatch's workgroups within dev's count. */
static bool runs_on(const vk_device *dev, const gpu_audio_blocks *b, uint32_t max_rows,
                    corral_error *err)
{
    if (b->past >= VK_AUDIO_MAX_PAST || b->n_head == 0 || b->n_embd % b->n_head != 0) {
        corral_error_set(err, "the device's audio attention takes fewer than %d past rows and "
                         "whole heads", VK_AUDIO_MAX_PAST);
        return false;
    }
    uint64_t groups_attention = ((uint64_t)max_rows * b->n_head + 63) / 64;
    uint64_t groups_conv = ((uint64_t)max_rows * b->n_embd + 255) / 256;
    if (groups_attention > dev->max_groups[0] || groups_conv > dev->max_groups[0] ||
        max_rows > dev->max_groups[0]) {
        corral_error_set(err, "runs of %u audio rows %u wide are beyond %s's workgroup count",
                         max_rows, b->n_embd, dev->info.name);
        return false;
    }
    for (uint32_t il = 0; il < b->n_layers; il++) {
        const audio_linear *m[M_COUNT];
        block_matrices(&b->layers[il], m);
        for (int i = 0; i < M_COUNT; i++)
            if (!vk_type_supported(m[i]->w.type)) {
                corral_error_set(err, "the device does not multiply the audio tower's %s "
                                 "matrices (block %u)", tensor_type_name(m[i]->w.type), il);
                return false;
            }
    }
    return true;
}

bool gpu_audio_bytes(int device, const gpu_audio_blocks *b, uint32_t max_rows, uint64_t *out,
                     corral_error *err)
{
    *out = 0;
    vk_device *dev = vk_device_open(device, err);
    if (!dev || !runs_on(dev, b, max_rows, err))
        return false;
    uint64_t sum = 0, sizes[N_SCRATCH];
    for (uint32_t il = 0; il < b->n_layers; il++) {
        const audio_linear *m[M_COUNT];
        block_matrices(&b->layers[il], m);
        for (int i = 0; i < M_COUNT; i++)
            sum += vk_buffer_footprint(dev, matrix_bytes(m[i]));
        for (int i = 0; i < V_COUNT; i++)
            sum += vk_buffer_footprint(dev, vector_count(b, i) * sizeof(float));
    }
    scratch_sizes(b, max_rows, sizes);
    for (size_t i = 0; i < N_SCRATCH; i++)
        sum += vk_buffer_footprint(dev, sizes[i]);
    *out = sum;
    return true;
}

static bool device_buffer(gpu_audio *a, uint64_t size, vk_buffer *out, corral_error *err)
{
    if (size > a->dev->max_range) {
        corral_error_set(err, "an audio tower buffer of %llu bytes is beyond %s's binding "
                         "range (%llu)", (unsigned long long)size, a->dev->info.name,
                         (unsigned long long)a->dev->max_range);
        return false;
    }
    return vk_buffer_create(a->dev, size ? size : 4, false, out, err);
}

static bool upload(gpu_audio *a, vk_buffer *out, const void *data, uint64_t bytes,
                   corral_error *err)
{
    return device_buffer(a, bytes, out, err) && vk_buffer_write(a->dev, out, 0, data, bytes, err);
}

static bool upload_block(gpu_audio *a, const audio_layer *l, vk_audio_block *b, float *staging,
                         corral_error *err)
{
    const audio_linear *m[M_COUNT];
    block_matrices(l, m);
    for (int i = 0; i < M_COUNT; i++) {
        b->m[i].type = m[i]->w.type;
        b->m[i].row_bytes = m[i]->w.row_bytes;
        float bounds[4] = {m[i]->in_lo, m[i]->in_hi, m[i]->out_lo, m[i]->out_hi};
        memcpy(b->bounds[i], bounds, sizeof bounds);
        if (!upload(a, &b->m[i].b, m[i]->w.data, matrix_bytes(m[i]), err))
            return false;
    }
    const float *v[V_COUNT];
    block_vectors(l, v);
    /* the queries' and keys' scales per dimension, as the CPU forms each product */
    uint32_t D = a->hp.n_embd / a->hp.n_head;
    const float *qs = l->q_scale.data, *ks = l->k_scale.data;
    for (uint32_t c = 0; c < D; c++) {
        staging[c] = a->hp.q_scale * qs[c];
        staging[D + c] = a->hp.k_scale * (ks ? ks[c] : 1.0f);
    }
    v[V_Q_SCALE] = staging;
    v[V_K_SCALE] = staging + D;
    for (int i = 0; i < V_COUNT; i++)
        if (!upload(a, &b->v[i], v[i], vector_count(&a->hp, i) * sizeof(float), err))
            return false;
    return true;
}

static vk_buffer *scratch_of(gpu_audio *a, size_t i)
{
    vk_buffer *all[N_SCRATCH] = {&a->x,    &a->xn,    &a->q,        &a->k,   &a->v,
                                 &a->attn, &a->wide,  &a->clipped,  &a->ones, &a->quants,
                                 &a->scales, &a->rel_pos, &a->rel};
    return all[i];
}

gpu_audio *gpu_audio_create(int device, const gpu_audio_blocks *b, uint32_t max_rows,
                            corral_error *err)
{
    vk_device *dev = vk_device_open(device, err);
    if (!dev || !runs_on(dev, b, max_rows, err))
        return NULL;
    gpu_audio *a = calloc(1, sizeof *a);
    if (!a || !(a->blocks = calloc(b->n_layers ? b->n_layers : 1, sizeof *a->blocks))) {
        free(a);
        corral_error_set(err, "out of memory");
        return NULL;
    }
    a->dev = dev;
    a->hp = *b;
    a->hp.layers = NULL;
    a->hp.rel_pos = NULL;
    a->max_rows = max_rows;
    uint64_t sizes[N_SCRATCH];
    scratch_sizes(b, max_rows, sizes);
    bool ok = vk_commands_create(dev, &a->cmd, err);
    a->cmd_made = ok;
    for (size_t i = 0; ok && i < N_SCRATCH; i++)
        ok = device_buffer(a, sizes[i], scratch_of(a, i), err);
    /* SiLU's up: ones as wide as the widest row SiLU takes */
    size_t n_ones = sizes[8] / sizeof(float);
    float *host = ok ? malloc(n_ones * sizeof *host) : NULL;
    if (ok && !host) {
        corral_error_set(err, "out of memory");
        ok = false;
    }
    for (size_t i = 0; ok && i < n_ones; i++)
        host[i] = 1.0f;
    ok = ok && vk_buffer_write(dev, &a->ones, 0, host, sizes[8], err) &&
         vk_buffer_write(dev, &a->rel_pos, 0, b->rel_pos, sizes[11], err);
    for (uint32_t il = 0; ok && il < b->n_layers; il++)
        ok = upload_block(a, &b->layers[il], &a->blocks[il], host, err);
    free(host);
    if (!ok) {
        gpu_audio_free(a);
        return NULL;
    }
    return a;
}

const char *gpu_audio_device(const gpu_audio *a)
{
    return a->dev->info.name;
}

void gpu_audio_free(gpu_audio *a)
{
    if (!a)
        return;
    for (uint32_t il = 0; il < a->hp.n_layers; il++) {
        vk_audio_block *b = &a->blocks[il];
        for (int i = 0; i < M_COUNT; i++)
            if (b->m[i].b.buffer)
                vk_buffer_free(a->dev, &b->m[i].b);
        for (int i = 0; i < V_COUNT; i++)
            if (b->v[i].buffer)
                vk_buffer_free(a->dev, &b->v[i]);
    }
    for (size_t i = 0; i < N_SCRATCH; i++)
        if (scratch_of(a, i)->buffer)
            vk_buffer_free(a->dev, scratch_of(a, i));
    if (a->cmd_made)
        vk_commands_free(&a->cmd);
    free(a->blocks);
    free(a);
}

/* y = clip(W . clip(x)) for n rows, as audio_gemma4.c's product: the input's bounds clamp a
 * copy (x feeds other products), the output's clamp y where it is. */
static void product(gpu_audio *a, const vk_audio_block *b, int m, vk_buffer *x, vk_buffer *y,
                    uint32_t n_in, uint32_t n_out, uint32_t n)
{
    const float *bound = b->bounds[m];
    vk_buffer *in = x;
    if (bound[0] > -FLT_MAX || bound[1] < FLT_MAX) {
        vk_rows whole = {1, n * n_in, 0, 0, 0, 0};
        vk_op_copy_rows(&a->cmd, vk_whole(x), vk_whole(&a->clipped), &whole);
        vk_op_clamp(&a->cmd, vk_whole(&a->clipped), n * n_in, bound[0], bound[1]);
        in = &a->clipped;
    }
    vk_op_matmul(&a->cmd, b->m[m].type, vk_whole(&b->m[m].b), b->m[m].row_bytes, vk_whole(in),
                 vk_whole(&a->quants), vk_whole(&a->scales), vk_whole(y), n_in, n_out, n);
    if (bound[2] > -FLT_MAX || bound[3] < FLT_MAX)
        vk_op_clamp(&a->cmd, vk_whole(y), n * n_out, bound[2], bound[3]);
}

static void rms(gpu_audio *a, const vk_buffer *w, vk_buffer *in, vk_buffer *out, uint32_t n)
{
    vk_op_rmsnorm(&a->cmd, vk_whole(w), vk_whole(in), vk_whole(out), a->hp.n_embd, n, a->hp.eps);
}

/* x = silu(x) over count floats. */
static void silu(gpu_audio *a, vk_buffer *x, uint32_t count)
{
    vk_op_swiglu(&a->cmd, vk_whole(x), vk_whole(&a->ones), count);
}

/* Half a feed-forward step: x += ffn_residual * post(down(silu(up(pre(x))))). */
static void ffn_step(gpu_audio *a, const vk_audio_block *b, int pre, int up, int post,
                     uint32_t n)
{
    uint32_t E = a->hp.n_embd, F = a->hp.n_ff;
    rms(a, &b->v[pre], &a->x, &a->xn, n);
    product(a, b, up, &a->xn, &a->wide, E, F, n);
    silu(a, &a->wide, n * F);
    product(a, b, up + 1, &a->wide, &a->xn, F, E, n);
    rms(a, &b->v[post], &a->xn, &a->xn, n);
    vk_op_binary(&a->cmd, VK_SCALE, vk_whole(&a->xn), (vk_span){0}, n * E, 0,
                 a->hp.ffn_residual);
    vk_op_binary(&a->cmd, VK_ADD, vk_whole(&a->x), vk_whole(&a->xn), n * E, n * E, 0.0f);
}

static void attention_step(gpu_audio *a, const vk_audio_block *b, uint32_t n)
{
    uint32_t E = a->hp.n_embd, H = a->hp.n_head, D = E / H, P = a->hp.past + 1;
    rms(a, &b->v[V_ATTN_NORM], &a->x, &a->xn, n);
    product(a, b, M_Q, &a->xn, &a->q, E, E, n);
    product(a, b, M_K, &a->xn, &a->k, E, E, n);
    product(a, b, M_V, &a->xn, &a->v, E, E, n);
    product(a, b, M_REL_K, &a->rel_pos, &a->rel, E, E, P);
    vk_op_binary(&a->cmd, VK_MUL, vk_whole(&a->q), vk_whole(&b->v[V_Q_SCALE]), n * E, D, 0.0f);
    vk_op_binary(&a->cmd, VK_MUL, vk_whole(&a->k), vk_whole(&b->v[V_K_SCALE]), n * E, D, 0.0f);
    vk_audio_attention shape = {n, H, D, a->hp.past, a->hp.cap};
    vk_op_audio_attention(&a->cmd, vk_whole(&a->q), vk_whole(&a->k), vk_whole(&a->v),
                          vk_whole(&a->rel), vk_whole(&a->attn), &shape);
    product(a, b, M_O, &a->attn, &a->q, E, E, n);
    rms(a, &b->v[V_ATTN_POST], &a->q, &a->q, n);
    vk_op_binary(&a->cmd, VK_ADD, vk_whole(&a->x), vk_whole(&a->q), n * E, n * E, 0.0f);
}

static void conv_step(gpu_audio *a, const vk_audio_block *b, uint32_t n)
{
    uint32_t E = a->hp.n_embd;
    rms(a, &b->v[V_CONV_NORM], &a->x, &a->xn, n);
    product(a, b, M_PW1, &a->xn, &a->wide, E, 2 * E, n);
    vk_op_audio_conv(&a->cmd, vk_whole(&a->wide), vk_whole(&b->v[V_CONV_DW]), vk_whole(&a->xn),
                     n, E, a->hp.kernel);
    rms(a, &b->v[V_CONV_POST], &a->xn, &a->xn, n);
    silu(a, &a->xn, n * E);
    product(a, b, M_PW2, &a->xn, &a->q, E, E, n);
    vk_op_binary(&a->cmd, VK_ADD, vk_whole(&a->x), vk_whole(&a->q), n * E, n * E, 0.0f);
}

bool gpu_audio_run(gpu_audio *a, float *x, uint32_t n_rows, corral_error *err)
{
    if (n_rows == 0 || n_rows > a->max_rows) {
        corral_error_set(err, "an audio run of %u rows, beyond the %u made", n_rows,
                         a->max_rows);
        return false;
    }
    size_t bytes = (size_t)n_rows * a->hp.n_embd * sizeof *x;
    if (!vk_buffer_write(a->dev, &a->x, 0, x, bytes, err))
        return false;
    vk_commands_begin(&a->cmd);
    for (uint32_t il = 0; il < a->hp.n_layers; il++) {
        const vk_audio_block *b = &a->blocks[il];
        ffn_step(a, b, V_FFN_NORM, M_FFN_UP, V_FFN_POST, n_rows);
        attention_step(a, b, n_rows);
        conv_step(a, b, n_rows);
        ffn_step(a, b, V_FFN_NORM_1, M_FFN_UP_1, V_FFN_POST_1, n_rows);
        rms(a, &b->v[V_OUT_NORM], &a->x, &a->x, n_rows);
    }
    return vk_commands_submit(&a->cmd, err) && vk_buffer_read(a->dev, &a->x, 0, x, bytes, err);
}

/*
 * Gated DeltaNet layers (delta_net.h), token by token: the prompt and each generated token go
 * through the same recurrence, so a prompt read in one batch, in several, or a token at a
 * time leaves the same state. Per token of a sequence:
 *
 *   qkv = causal conv (its taps over this and the previous inputs) of W_qkv . x, then silu;
 *   q, k: each key head L2-normalised; value head h reads key head h mod key heads
 *         (qwen35), or h / (value heads / key heads) (Qwen3-Next, ARCH_SSM_GROUPED);
 *   decay = exp(softplus(alpha . x + dt) * a), strength = sigmoid(beta . x), per value head;
 *   S = decay * S; S += strength * (v - S k) k^T; out = S q / sqrt(head_dim);
 *   out = rmsnorm(out) per head * silu(z . x), then W_out . out.
 *
 * Qwen3-Next's fused projections come grouped by key head g: ssm_in's rows are, per g, its q
 * and k rows, then the v and z rows of its value heads g * r ... g * r + r - 1 (r = value
 * heads / key heads); ssm_ba's are, per g, the betas then the alphas of those heads. Their
 * products land in the scratch proj and move to the layout above (ungroup).
 *
 * S is kept as its rows S[j][.] (one per value component), so that each row's decay, its
 * product with k, its update and its product with q are one pass over it. Value heads are
 * independent and run as tasks on the pool, each taking its sequence's tokens in order.
 */
#include "delta_net.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "gpu.h"
#include "util/checked.h"

static float *alloc_floats(size_t n, size_t m, bool *ok)
{
    size_t count, bytes;
    float *p = NULL;
    if (*ok && checked_mul_size(n ? n : 1, m ? m : 1, &count) &&
        checked_mul_size(count, sizeof(float), &bytes))
        p = calloc(1, bytes);
    *ok = *ok && p != NULL;
    return p;
}

/* The taps of every recurrent layer's conv in F32, whatever the file stores them as. */
static void copy_kernels(const corral_model *m, uint32_t n_cpu_layers, delta_net_context *d)
{
    size_t taps = m->hp.ssm_conv_kernel;
    for (uint32_t il = 0; il < n_cpu_layers; il++) {
        const weight *w = &m->layers[il].ssm_conv;
        if (!m->layers[il].recurrent)
            continue;
        float *to = d->kernels + (size_t)d->slot[il] * d->channels * taps;
        for (size_t c = 0; c < d->channels; c++)
            w->ops->dequantize((const char *)w->data + c * w->row_bytes, to + c * taps, taps);
    }
}

bool delta_net_context_init(corral_context *ctx, corral_error *err)
{
    const corral_model *m = ctx->model;
    const hparams *hp = &m->hp;
    if (hp->ssm_v_heads == 0)
        return true;
    delta_net_context *d = calloc(1, sizeof *d);
    if (!d) {
        corral_error_set(err, "out of memory");
        return false;
    }
    ctx->delta = d;
    d->slot = calloc(hp->n_layer, sizeof *d->slot);
    bool ok = d->slot != NULL;
    /* the device keeps the states of its layers (gpu_seq_states) */
    uint32_t n_cpu_layers = ctx->gpu ? gpu_layers_first(ctx->gpu) : hp->n_layer;
    for (uint32_t il = 0; ok && il < n_cpu_layers; il++)
        if (m->layers[il].recurrent)
            d->slot[il] = d->n_recurrent++;
    /* the model's reader capped these sizes, so the sums and products below stay small */
    size_t S = hp->ssm_head_dim, N = hp->ssm_state, taps = hp->ssm_conv_kernel;
    size_t nb = ctx->n_batch, value_width = (size_t)hp->ssm_v_heads * S;
    size_t per_seq_conv = 0, per_seq_state = 0;
    d->channels = value_width + 2 * (size_t)hp->ssm_k_heads * N;
    d->conv_floats = (taps - 1) * d->channels;
    ok = ok && checked_mul_size(value_width, N, &d->state_floats) &&
         checked_mul_size(d->conv_floats, d->n_recurrent, &per_seq_conv) &&
         checked_mul_size(d->state_floats, d->n_recurrent, &per_seq_state);
    /* calloc's zeros: a large block's pages come on first touch, so an idle sequence costs
     * address space only */
    d->conv_state = alloc_floats(ctx->n_seq, per_seq_conv, &ok);
    d->state = alloc_floats(ctx->n_seq, per_seq_state, &ok);
    d->dirty = calloc(ctx->n_seq, sizeof *d->dirty);
    /* a sequence's checkpoint touches its pages only once one is taken */
    d->n_checkpoints = ctx->n_checkpoints;
    for (uint32_t k = 0; k < d->n_checkpoints; k++) {
        d->checkpoint_conv[k] = alloc_floats(ctx->n_seq, per_seq_conv, &ok);
        d->checkpoint_state[k] = alloc_floats(ctx->n_seq, per_seq_state, &ok);
        d->checkpoint_len[k] = calloc(ctx->n_seq, sizeof *d->checkpoint_len[k]);
        ok = ok && d->checkpoint_len[k];
    }
    d->kernels = alloc_floats((size_t)d->n_recurrent * d->channels, taps, &ok);
    d->out = alloc_floats(nb, value_width, &ok);
    if (hp->ssm_shortconv) { /* in_proj's b, c and x per token */
        d->proj = alloc_floats(nb, 3 * d->channels, &ok);
    } else if (hp->ssm_mamba2) {
        d->proj = alloc_floats(nb, value_width + d->channels + hp->ssm_v_heads, &ok);
    } else {
        if (m->arch->tensors & ARCH_SSM_GROUPED) /* ssm_in's products, then ssm_ba's */
            d->proj = alloc_floats(nb, d->channels + value_width + 2 * hp->ssm_v_heads, &ok);
        d->qkv = alloc_floats(nb, d->channels, &ok);
        d->z = alloc_floats(nb, value_width, &ok);
        d->decay = alloc_floats(nb, hp->ssm_v_heads, &ok);
        d->strength = alloc_floats(nb, hp->ssm_v_heads, &ok);
    }
    if (!ok || !d->dirty) {
        corral_error_set(err, "cannot allocate the recurrent state for %u sequences", ctx->n_seq);
        return false;
    }
    copy_kernels(m, n_cpu_layers, d);
    return true;
}

void delta_net_context_free(delta_net_context *d)
{
    if (!d)
        return;
    float *buffers[] = {d->conv_state, d->state, d->kernels, d->qkv, d->z, d->out,
                        d->decay, d->strength, d->proj};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
        free(buffers[i]);
    for (uint32_t k = 0; k < DELTA_NET_CHECKPOINTS; k++) {
        free(d->checkpoint_conv[k]);
        free(d->checkpoint_state[k]);
        free(d->checkpoint_len[k]);
    }
    free(d->slot);
    free(d->dirty);
    free(d);
}

/* Sequence seq's conv windows and matrices (of every recurrent layer, one block each) from
 * the storage at from_conv / from_state to that at to_conv / to_state. */
static void copy_seq_states(const delta_net_context *d, uint32_t seq, float *to_conv,
                            float *to_state, const float *from_conv, const float *from_state)
{
    size_t conv = d->n_recurrent * d->conv_floats, state = d->n_recurrent * d->state_floats;
    memcpy(to_conv + (size_t)seq * conv, from_conv + (size_t)seq * conv, conv * sizeof(float));
    memcpy(to_state + (size_t)seq * state, from_state + (size_t)seq * state,
           state * sizeof(float));
}

void delta_net_seq_clear(corral_context *ctx, uint32_t seq)
{
    delta_net_context *d = ctx->delta;
    if (!d)
        return;
    if (ctx->gpu)
        gpu_seq_states(ctx->gpu, ctx, seq, GPU_STATES_CLEAR, CORRAL_CHECKPOINT_PROMPT);
    for (uint32_t k = 0; k < d->n_checkpoints; k++)
        d->checkpoint_len[k][seq] = 0;
    if (!d->dirty[seq])
        return;
    memset(d->conv_state + (size_t)seq * d->n_recurrent * d->conv_floats, 0,
           d->n_recurrent * d->conv_floats * sizeof(float));
    memset(d->state + (size_t)seq * d->n_recurrent * d->state_floats, 0,
           d->n_recurrent * d->state_floats * sizeof(float));
    d->dirty[seq] = false;
}

void delta_net_seq_checkpoint(corral_context *ctx, uint32_t seq, corral_checkpoint kind,
                              uint32_t len)
{
    delta_net_context *d = ctx->delta;
    if (ctx->gpu)
        gpu_seq_states(ctx->gpu, ctx, seq, GPU_STATES_CHECKPOINT, kind);
    copy_seq_states(d, seq, d->checkpoint_conv[kind], d->checkpoint_state[kind], d->conv_state,
                    d->state);
    d->checkpoint_len[kind][seq] = len;
}

/* The kind of sequence seq's longest checkpoint of at most n_keep tokens; n_checkpoints when
 * there is none. */
static uint32_t longest_checkpoint(const delta_net_context *d, uint32_t seq, uint32_t n_keep)
{
    uint32_t best = d->n_checkpoints;
    for (uint32_t k = 0; k < d->n_checkpoints; k++) {
        uint32_t len = d->checkpoint_len[k][seq];
        if (len > 0 && len <= n_keep && (best == d->n_checkpoints ||
                                         len > d->checkpoint_len[best][seq]))
            best = k;
    }
    return best;
}

uint32_t delta_net_seq_checkpoint_len(const delta_net_context *d, uint32_t seq, uint32_t n_keep)
{
    uint32_t k = longest_checkpoint(d, seq, n_keep);
    return k < d->n_checkpoints ? d->checkpoint_len[k][seq] : 0;
}

uint32_t delta_net_seq_restore(corral_context *ctx, uint32_t seq, uint32_t n_keep)
{
    delta_net_context *d = ctx->delta;
    uint32_t kind = longest_checkpoint(d, seq, n_keep);
    if (kind == d->n_checkpoints) {
        delta_net_seq_clear(ctx, seq);
        return 0;
    }
    for (uint32_t k = 0; k < d->n_checkpoints; k++)
        if (d->checkpoint_len[k][seq] > n_keep)
            d->checkpoint_len[k][seq] = 0;
    if (ctx->gpu)
        gpu_seq_states(ctx->gpu, ctx, seq, GPU_STATES_RESTORE, (corral_checkpoint)kind);
    copy_seq_states(d, seq, d->conv_state, d->state, d->checkpoint_conv[kind],
                    d->checkpoint_state[kind]);
    d->dirty[seq] = true;
    return d->checkpoint_len[kind][seq];
}

float delta_net_silu(float x)
{
    return x / (1.0f + expf(-x));
}

/* llama.cpp's softplus: linear above 20, where exp would lose it anyway. */
float delta_net_softplus(float x)
{
    return x > 20.0f ? x : logf(1.0f + expf(x));
}

/* delta_net_conv_token without the silu. Each channel's sum runs from the oldest input to
 * this one; the bias comes after it. */
static void conv_token_linear(const delta_net_context *d, uint32_t il, size_t taps,
                              float *window, const float *bias, float *x)
{
    size_t C = d->channels;
    const float *kernels = d->kernels + (size_t)d->slot[il] * C * taps;
    for (size_t c = 0; c < C; c++) {
        const float *w = kernels + c * taps;
        float in = x[c], sum = 0.0f;
        for (size_t k = 0; k + 1 < taps; k++)
            sum += window[k * C + c] * w[k];
        sum += in * w[taps - 1];
        for (size_t k = 0; k + 2 < taps; k++)
            window[k * C + c] = window[(k + 1) * C + c];
        if (taps > 1)
            window[(taps - 2) * C + c] = in;
        if (bias)
            sum += bias[c];
        x[c] = sum;
    }
}

void delta_net_gated_conv_token(const delta_net_context *d, uint32_t il, size_t taps,
                                float *window, float *row, float *y)
{
    size_t C = d->channels;
    float *b = row, *c = row + C, *x = row + 2 * C;
    for (size_t i = 0; i < C; i++)
        b[i] *= x[i];
    conv_token_linear(d, il, taps, window, NULL, b);
    for (size_t i = 0; i < C; i++)
        y[i] = c[i] * b[i];
}

void delta_net_conv_token(const delta_net_context *d, uint32_t il, size_t taps, float *window,
                          const float *bias, float *x)
{
    conv_token_linear(d, il, taps, window, bias, x);
    for (size_t c = 0; c < d->channels; c++)
        x[c] = delta_net_silu(x[c]);
}

/* As llama.cpp computes it: an RMSNorm with eps / n, then 1/sqrt(n). */
void delta_net_l2_normalize(float *x, size_t n, float eps)
{
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += (double)x[i] * x[i];
    float mean = (float)(sum / (double)n);
    float scale = 1.0f / sqrtf(mean + eps / (float)n), after = 1.0f / sqrtf((float)n);
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] * scale * after;
}

float delta_net_decay(float logit, float dt, float a)
{
    return expf(delta_net_softplus(logit + dt) * a);
}

float delta_net_strength(float logit)
{
    return 1.0f / (1.0f + expf(-logit));
}

/* Row j's decay, its product with k, its update and its product with q in one pass each. */
void delta_net_step(float *state, const float *q, const float *k, const float *v, float decay,
                    float strength, size_t S, float *out)
{
    float scale = 1.0f / sqrtf((float)S);
    for (size_t j = 0; j < S; j++) {
        float *s = state + j * S, sk = 0.0f, sq = 0.0f;
        for (size_t i = 0; i < S; i++) {
            s[i] *= decay;
            sk += s[i] * k[i];
        }
        float delta = (v[j] - sk) * strength;
        for (size_t i = 0; i < S; i++) {
            s[i] += k[i] * delta;
            sq += s[i] * q[i];
        }
        out[j] = sq * scale;
    }
}

typedef struct delta_job {
    corral_context *ctx;
    uint32_t layer;
} delta_job;

/* One (sequence, value head): the sequence's tokens of the batch in order through its state. */
static void delta_task(void *arg, size_t task, size_t thread)
{
    (void)thread;
    const delta_job *job = arg;
    const corral_context *ctx = job->ctx;
    const hparams *hp = &ctx->model->hp;
    const delta_net_context *d = ctx->delta;
    uint32_t seq = (uint32_t)(task / hp->ssm_v_heads);
    size_t h = task % hp->ssm_v_heads, S = hp->ssm_head_dim;
    size_t kh = delta_net_key_head(h, hp->ssm_v_heads, hp->ssm_k_heads,
                                   ctx->model->arch->tensors & ARCH_SSM_GROUPED);
    size_t key_width = (size_t)hp->ssm_k_heads * S;
    size_t value_width = (size_t)hp->ssm_v_heads * S;
    float *state = delta_net_state(d, seq, job->layer) + h * S * S;
    for (size_t t = 0; t < ctx->n_tokens; t++) {
        if (ctx->tok_seq[t] != seq)
            continue;
        const float *row = d->qkv + t * d->channels;
        const float *q = row + kh * S, *k = row + key_width + kh * S;
        const float *v = row + 2 * key_width + h * S;
        float decay = d->decay[t * hp->ssm_v_heads + h];
        float strength = d->strength[t * hp->ssm_v_heads + h];
        delta_net_step(state, q, k, v, decay, strength, S, d->out + t * value_width + h * S);
    }
}

/* Qwen3-Next's products, grouped by key head in d->proj (ssm_in's when the layer has it, in
 * place of d->qkv's and d->z's, then ssm_ba's), into the layout qwen35's projections give. */
static void ungroup(delta_net_context *d, const hparams *hp, size_t n, bool fused)
{
    size_t S = hp->ssm_head_dim, G = hp->ssm_k_heads, H = hp->ssm_v_heads, r = H / G;
    size_t key_width = G * S, value_width = H * S, qkvz = d->channels + value_width;
    const float *ba = d->proj + n * (fused ? qkvz : 0);
    for (size_t t = 0; t < n; t++) {
        float *qkv = d->qkv + t * d->channels, *z = d->z + t * value_width;
        for (size_t g = 0; fused && g < G; g++) {
            const float *from = d->proj + t * qkvz + g * (2 * S + 2 * r * S);
            memcpy(qkv + g * S, from, S * sizeof *from);
            memcpy(qkv + key_width + g * S, from + S, S * sizeof *from);
            memcpy(qkv + 2 * key_width + g * r * S, from + 2 * S, r * S * sizeof *from);
            memcpy(z + g * r * S, from + 2 * S + r * S, r * S * sizeof *from);
        }
        for (size_t g = 0; g < G; g++)
            for (size_t j = 0; j < r; j++) {
                d->strength[t * H + g * r + j] = ba[t * 2 * H + g * 2 * r + j];
                d->decay[t * H + g * r + j] = ba[t * 2 * H + g * 2 * r + r + j];
            }
    }
}

void forward_delta_net(corral_context *ctx, uint32_t il)
{
    const corral_model *m = ctx->model;
    const hparams *hp = &m->hp;
    const layer_weights *l = &m->layers[il];
    delta_net_context *d = ctx->delta;
    size_t n = ctx->n_tokens, S = hp->ssm_head_dim, H = hp->ssm_v_heads;
    size_t key_width = (size_t)hp->ssm_k_heads * S, value_width = H * S;
    size_t taps = hp->ssm_conv_kernel;
    if (m->arch->tensors & ARCH_SSM_GROUPED) {
        bool fused = l->ssm_in.data != NULL;
        float *ba = d->proj + (fused ? n * (d->channels + value_width) : 0);
        matrix_product in[] = {{&l->ssm_ba, NULL, 0, ba},
                               {&l->ssm_in, NULL, 0, d->proj},
                               {&l->ssm_z, NULL, 0, d->z}};
        if (!fused)
            in[1] = (matrix_product){&l->ssm_qkv, NULL, 0, d->qkv};
        forward_matmul(ctx, in, fused ? 2 : 3, ctx->xn, n);
        ungroup(d, hp, n, fused);
    } else {
        /* the decay's and strength's logits land in their own rows, made factors below */
        const matrix_product in[] = {{&l->ssm_qkv, NULL, 0, d->qkv},
                                     {&l->ssm_z, NULL, 0, d->z},
                                     {&l->ssm_alpha, NULL, 0, d->decay},
                                     {&l->ssm_beta, NULL, 0, d->strength}};
        forward_matmul(ctx, in, 4, ctx->xn, n);
    }
    const float *dt = l->ssm_dt.data, *a = l->ssm_a.data;
    for (size_t t = 0; t < n; t++) {
        uint32_t seq = ctx->tok_seq[t];
        d->dirty[seq] = true;
        float *row = d->qkv + t * d->channels;
        delta_net_conv_token(d, il, taps, delta_net_conv_state(d, seq, il), NULL, row);
        for (size_t h = 0; h < hp->ssm_k_heads; h++) {
            delta_net_l2_normalize(row + h * S, S, hp->norm_eps);
            delta_net_l2_normalize(row + key_width + h * S, S, hp->norm_eps);
        }
        for (size_t h = 0; h < H; h++) {
            float *decay = &d->decay[t * H + h], *strength = &d->strength[t * H + h];
            *decay = delta_net_decay(*decay, dt[h], a[h]);
            *strength = delta_net_strength(*strength);
        }
    }
    delta_job job = {ctx, il};
    threadpool_run(ctx->pool, (size_t)ctx->n_seq * H, delta_task, &job);
    /* each head's output RMS-normed and gated by silu(z) */
    for (size_t t = 0; t < n; t++)
        for (size_t h = 0; h < H; h++) {
            float *out = d->out + t * value_width + h * S;
            const float *z = d->z + t * value_width + h * S;
            block_rmsnorm(out, l->ssm_norm.data, S, hp->norm_eps, out);
            for (size_t j = 0; j < S; j++)
                out[j] *= delta_net_silu(z[j]);
        }
    const matrix_product proj = {&l->ssm_out, NULL, 0, ctx->xn};
    forward_matmul(ctx, &proj, 1, d->out, n);
}

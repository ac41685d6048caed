/*
 * Mamba2 layers (mamba2.h), token by token: the prompt and each generated token go through
 * the same recurrence, so a prompt read in one batch, in several, or a token at a time leaves
 * the same state. With H heads of P channels, G groups of N-wide B and C (head h reads group
 * h / (H / G)), per token of a sequence:
 *
 *   [z; xBC; dt] = W_in . x;  xBC = silu(causal conv of xBC over the previous inputs + bias);
 *   x, B, C = the parts of xBC;  step = softplus(dt + dt_bias), decay = exp(step * A) per head;
 *   per head and channel i: S[i] = decay * S[i] + (x[i] * step) * B;  y[i] = S[i] . C + D * x[i];
 *   y = y * silu(z), RMS-normed per group of channels (H * P / G), then W_out . y.
 *
 * A file's ssm_a holds A itself (negative: converters store -exp(A_log)). Heads are
 * independent and run as tasks on the pool, each taking its sequence's tokens in order.
 */
#include "mamba2.h"

#include <math.h>

#include "delta_net.h"
#include "forward.h"

typedef struct mamba2_job {
    corral_context *ctx;
    uint32_t layer;
} mamba2_job;

void mamba2_head_step(float *state, const float *x, const float *B, const float *C, float step,
                      float a, float skip, size_t P, size_t N, float *out)
{
    float decay = expf(step * a);
    for (size_t i = 0; i < P; i++) {
        float *s = state + i * N, x_step = x[i] * step, sum = 0.0f;
        for (size_t j = 0; j < N; j++) {
            s[j] = s[j] * decay + B[j] * x_step;
            sum += s[j] * C[j];
        }
        out[i] = sum + x[i] * skip;
    }
}

/* One (sequence, head): the sequence's tokens of the batch in order through its state. */
static void scan_task(void *arg, size_t task, size_t thread)
{
    (void)thread;
    const mamba2_job *job = arg;
    const corral_context *ctx = job->ctx;
    const hparams *hp = &ctx->model->hp;
    const layer_weights *l = &ctx->model->layers[job->layer];
    const delta_net_context *d = ctx->delta;
    size_t H = hp->ssm_v_heads, P = hp->ssm_head_dim, N = hp->ssm_state;
    uint32_t seq = (uint32_t)(task / H);
    size_t h = task % H, g = h / (H / hp->ssm_k_heads);
    size_t value_width = H * P, row_width = value_width + d->channels + H;
    float *state = delta_net_state(d, seq, job->layer) + h * P * N;
    float a = ((const float *)l->ssm_a.data)[h], skip = ((const float *)l->ssm_d.data)[h];
    for (size_t t = 0; t < ctx->n_tokens; t++) {
        if (ctx->tok_seq[t] != seq)
            continue;
        const float *row = d->proj + t * row_width;
        const float *x = row + value_width + h * P;
        const float *B = row + 2 * value_width + g * N;
        const float *C = B + (size_t)hp->ssm_k_heads * N;
        mamba2_head_step(state, x, B, C, row[value_width + d->channels + h], a, skip, P, N,
                         d->out + t * value_width + h * P);
    }
}

void forward_mamba2(corral_context *ctx, uint32_t il)
{
    const hparams *hp = &ctx->model->hp;
    const layer_weights *l = &ctx->model->layers[il];
    delta_net_context *d = ctx->delta;
    size_t n = ctx->n_tokens, H = hp->ssm_v_heads, value_width = H * hp->ssm_head_dim;
    size_t row_width = value_width + d->channels + H, group = value_width / hp->ssm_k_heads;
    const matrix_product in = {&l->ssm_in, NULL, 0, d->proj};
    forward_matmul(ctx, &in, 1, ctx->xn, n);
    const float *dt_bias = l->ssm_dt.data, *conv_bias = l->ssm_conv_b.data;
    for (size_t t = 0; t < n; t++) {
        uint32_t seq = ctx->tok_seq[t];
        d->dirty[seq] = true;
        float *row = d->proj + t * row_width, *dt = row + value_width + d->channels;
        delta_net_conv_token(d, il, hp->ssm_conv_kernel, delta_net_conv_state(d, seq, il),
                             conv_bias, row + value_width);
        for (size_t h = 0; h < H; h++)
            dt[h] = delta_net_softplus(dt[h] + dt_bias[h]);
    }
    mamba2_job job = {ctx, il};
    threadpool_run(ctx->pool, (size_t)ctx->n_seq * H, scan_task, &job);
    /* gated by silu(z), then each group of channels RMS-normed with its row of ssm_norm */
    for (size_t t = 0; t < n; t++) {
        float *out = d->out + t * value_width;
        const float *z = d->proj + t * row_width;
        for (size_t c = 0; c < value_width; c++)
            out[c] *= delta_net_silu(z[c]);
        for (size_t g = 0; g < hp->ssm_k_heads; g++)
            block_rmsnorm(out + g * group, (const float *)l->ssm_norm.data + g * group, group,
                          hp->norm_eps, out + g * group);
    }
    const matrix_product proj = {&l->ssm_out, NULL, 0, ctx->xn};
    forward_matmul(ctx, &proj, 1, d->out, n);
}

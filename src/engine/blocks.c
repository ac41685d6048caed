/*
 * Shared forward-pass blocks (see blocks.h). Plain loops: they are a small share of the time
 * next to the matrix kernels, and the compiler vectorises what it can.
 */
#include "blocks.h"

#include <math.h>
#include <pthread.h>

#include "cpu.h"

void block_rmsnorm(const float *x, const float *weight, size_t n, float eps, float *out)
{
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    float mean = (float)(sum / (double)n);
    float scale = 1.0f / sqrtf(mean + eps);
    for (size_t i = 0; i < n; i++)
        out[i] = x[i] * scale * weight[i];
}

rope_params rope_params_make(const corral_model *model, uint32_t variant)
{
    const hparams *hp = &model->hp;
    const rope_variant *rv = &model->rope[variant];
    return (rope_params){
        .mode = model->arch->rope,
        .n_rot = hp->n_rot,
        .theta_scale = powf(rv->freq_base, -2.0f / (float)hp->n_rot),
        .freq_scale = rv->freq_scale,
        .freq_factors = model->rope_freqs,
    };
}

void rope_cache(const rope_params *rp, float pos, float *cos_sin)
{
    float theta = pos;
    for (uint32_t i = 0; i < rp->n_rot / 2; i++) {
        float factor = rp->freq_factors ? rp->freq_factors[i] : 1.0f;
        float angle = rp->freq_scale * (theta / factor);
        cos_sin[2 * i] = cosf(angle);
        cos_sin[2 * i + 1] = sinf(angle);
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
    if (cpu_active_level() >= CPU_LEVEL_AVX512) {
        block_swiglu_avx512(x, y, n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] / (1.0f + expf(-x[i])) * y[i];
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
        float gelu = 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * x * (1.0f + coef_a * x * x)));
        gelu_f16_table[h] = quant_f32_to_f16(gelu);
    }
}

void block_geglu_prepare(void)
{
    pthread_once(&gelu_f16_once, build_gelu_f16_table);
}

void block_geglu(float *x, const float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float gelu;
        if (x[i] <= -10.0f)
            gelu = 0.0f;
        else if (x[i] >= 10.0f)
            gelu = x[i];
        else
            gelu = quant_f16_to_f32(gelu_f16_table[quant_f32_to_f16(x[i])]);
        x[i] = gelu * y[i];
    }
}

void block_softcap(float *x, size_t n, float cap)
{
    float inv = 1.0f / cap;
    for (size_t i = 0; i < n; i++)
        x[i] = tanhf(x[i] * inv) * cap;
}

void block_softmax(float *x, size_t n, float scale)
{
    if (cpu_active_level() >= CPU_LEVEL_AVX512) {
        block_softmax_avx512(x, n, scale);
        return;
    }
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
    float inv = (float)(1.0 / sum);
    for (size_t i = 0; i < n; i++)
        x[i] *= inv;
}

/* Keys per block of the score pass: 64 keys of up to 256 halves stay in L1 while every head
 * of the group reads them. */
enum { ATTENTION_KEY_BLOCK = 64 };

void block_attention(const quant_ops *kv_ops, const attention_shape *shape, const float *q,
                     const uint8_t *keys, const uint8_t *values_t, float *scores,
                     uint8_t *q_act, uint8_t *p_act, float *out)
{
    size_t n_heads = shape->n_heads, n_cells = shape->n_cells;
    size_t dk = shape->head_dim_k, dv = shape->head_dim_v;
    size_t q_bytes = dk * sizeof(float), p_bytes = n_cells * sizeof(float);
    for (size_t h = 0; h < n_heads; h++)
        kv_ops->quantize_act(q + h * dk, q_act + h * q_bytes, dk);
    for (size_t c = 0; c < n_cells; c += ATTENTION_KEY_BLOCK) {
        size_t n = n_cells - c < ATTENTION_KEY_BLOCK ? n_cells - c : ATTENTION_KEY_BLOCK;
        for (size_t h = 0; h < n_heads; h++)
            quant_dot_rows(kv_ops, dk, keys + c * shape->k_stride, shape->k_stride, n,
                           q_act + h * q_bytes, scores + h * n_cells + c);
    }
    for (size_t h = 0; h < n_heads; h++) {
        float *s = scores + h * n_cells;
        /* ggml caps the raw products, then scales them inside its softmax */
        if (shape->softcap > 0.0f)
            block_softcap(s, n_cells, shape->softcap);
        block_softmax(s, n_cells, shape->scale);
        kv_ops->quantize_act(s, p_act + h * p_bytes, n_cells);
    }
    for (size_t h = 0; h < n_heads; h++)
        quant_dot_rows(kv_ops, n_cells, values_t, shape->v_stride, dv, p_act + h * p_bytes,
                       out + h * dv);
}

/*
 * gpt-oss (OpenAI gpt-oss 20B and 120B; llama.cpp's OPENAI_MOE): a pre-norm block whose
 * attention has q/k/v/o biases and a learned sink logit per head (the softmax weights then
 * sum to less than 1), a sliding window on even layers and full attention on odd ones, and
 * YaRN RoPE (model.c). The FFN is a mixture of experts (moe.c) whose input norm the file
 * calls post_attention_norm, with a biased router, the chosen experts weighted by the softmax
 * of their biased logits, biased expert matrices and the clamped SwiGLU variant.
 *
 * ollama's own converter writes the same model another way (architecture `gptoss`, its keys
 * under `gptoss.`): q/k/v fused into attn_qkv (rows q;k;v, one fused bias), attn_out,
 * attn_sinks without `.weight`, the FFN's norm as ffn_norm, no expert_feed_forward_length
 * (feed_forward_length is the experts' width), YaRN without rope.scaling.type, and the gate
 * and up experts as one ffn_gate_up_exps whose rows interleave them (gate i at row 2i, up i
 * at 2i + 1 of each expert; its bias alike). Its first converter, which made the library's
 * gpt-oss blobs, also stored the MXFP4 experts as type 4 with another nibble order
 * (TENSOR_TYPE_MXFP4_OLLAMA). Its later converters kept `gptoss` while moving tensor by
 * tensor to llama.cpp's names (attn_q/k/v, attn_output, attn_sinks.weight,
 * post_attention_norm, split gate and up experts), so each tensor is looked up under either
 * name, as ollama's own loader does. All bind into the same layer_weights, so one forward
 * pass runs every layout. Experts in ollama's layouts are converted once (place_experts):
 * straight into the context's packed copy where the level packs them, else into a copy the
 * model owns, so they cost the one copy a file in ggml's layout costs.
 */
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "util/checked.h"

static bool gptoss_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    if (!model_read_u32(ld, "expert_feed_forward_length", &hp->n_ff_exp, true) ||
        !model_read_u32(ld, "attention.sliding_window", &hp->n_swa, true))
        return false;
    for (uint32_t il = 0; il < hp->n_layer; il++)
        m->layers[il].sliding = il % 2 == 0;
    return true;
}

static bool gptoss_ollama_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    if (!model_read_u32(ld, "attention.sliding_window", &hp->n_swa, true) ||
        !model_read_u32(ld, "expert_feed_forward_length", &hp->n_ff_exp, false))
        return false;
    for (uint32_t il = 0; il < hp->n_layer; il++)
        m->layers[il].sliding = il % 2 == 0;
    return true;
}

/* Layer il's tensor `suffix`, or else `other` (ollama's later converters moved to
 * llama.cpp's names one tensor at a time): the name to bind. */
static const char *either(model_loader *ld, uint32_t il, const char *suffix, const char *other,
                          char *name, size_t size)
{
    snprintf(name, size, "blk.%u.%s", il, suffix);
    if (!gguf_find_tensor(ld->model->file, name))
        snprintf(name, size, "blk.%u.%s", il, other);
    return name;
}

/* An F32 vector's elements [begin, begin + count) as a vector of its own. */
static weight vector_part(const weight *v, size_t begin, size_t count)
{
    weight part = *v;
    part.data = (const float *)v->data + begin;
    part.n_in = count;
    part.n_out = 1;
    part.row_bytes = count * sizeof(float);
    return part;
}

static bool gptoss_ollama_bind_attention(model_loader *ld, uint32_t il)
{
    const hparams *hp = &ld->model->hp;
    layer_weights *l = &ld->model->layers[il];
    size_t q = (size_t)hp->n_head * hp->head_dim_k, k = (size_t)hp->n_head_kv * hp->head_dim_k;
    size_t v = (size_t)hp->n_head_kv * hp->head_dim_v, o = (size_t)hp->n_head * hp->head_dim_v;
    char name[GGUF_MAX_NAME_BYTES + 1];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, il), name)
    size_t n = sizeof name;
    weight qkv, qkv_b;
    if (!gguf_find_tensor(ld->model->file, NAME("attn_qkv.weight"))) {
        if (!model_bind_matrix(ld, &l->wq, NAME("attn_q.weight"), hp->n_embd, q, 1, true) ||
            !model_bind_matrix(ld, &l->wk, NAME("attn_k.weight"), hp->n_embd, k, 1, true) ||
            !model_bind_matrix(ld, &l->wv, NAME("attn_v.weight"), hp->n_embd, v, 1, true) ||
            !model_bind_vector(ld, &l->bq, NAME("attn_q.bias"), q, true) ||
            !model_bind_vector(ld, &l->bk, NAME("attn_k.bias"), k, true) ||
            !model_bind_vector(ld, &l->bv, NAME("attn_v.bias"), v, true))
            return false;
    } else if (!model_bind_matrix(ld, &qkv, name, hp->n_embd, q + k + v, 1, true) ||
               !model_bind_vector(ld, &qkv_b, NAME("attn_qkv.bias"), q + k + v, true)) {
        return false;
    } else {
        l->wq = qkv, l->wk = qkv, l->wv = qkv;
        l->wq.n_out = q;
        l->wk.data = (const uint8_t *)qkv.data + q * qkv.row_bytes, l->wk.n_out = k;
        l->wv.data = (const uint8_t *)qkv.data + (q + k) * qkv.row_bytes, l->wv.n_out = v;
        l->bq = vector_part(&qkv_b, 0, q);
        l->bk = vector_part(&qkv_b, q, k);
        l->bv = vector_part(&qkv_b, q + k, v);
    }
    return model_bind_vector(ld, &l->attn_norm, NAME("attn_norm.weight"), hp->n_embd, true) &&
           model_bind_matrix(ld, &l->wo,
                             either(ld, il, "attn_out.weight", "attn_output.weight", name, n), o,
                             hp->n_embd, 1, true) &&
           model_bind_vector(ld, &l->bo,
                             either(ld, il, "attn_out.bias", "attn_output.bias", name, n),
                             hp->n_embd, true) &&
           model_bind_vector(ld, &l->attn_sinks,
                             either(ld, il, "attn_sinks", "attn_sinks.weight", name, n),
                             hp->n_head, true);
}

/* ollama's MXFP4 rows into ggml's: in each 17-byte block the scale stays, and the 16 bytes
 * holding elements (2k, 2k + 1) become bytes holding (j, j + 16). */
static void mxfp4_ollama_to_ggml(uint8_t *dst, const uint8_t *src, size_t bytes)
{
    for (size_t b = 0; b + 17 <= bytes; b += 17) {
        const uint8_t *in = src + b + 1;
        uint8_t *out = dst + b + 1;
        dst[b] = src[b];
        for (int k = 0; k < 8; k++) { /* in[k]: elements 2k, 2k + 1; in[k + 8]: 2k + 16, 2k + 17 */
            out[2 * k] = (uint8_t)((in[k] & 0x0F) | (in[k + 8] << 4));
            out[2 * k + 1] = (uint8_t)((in[k] >> 4) | (in[k + 8] & 0xF0));
        }
    }
}

void expert_source_rows(const expert_source *src, size_t row_bytes, size_t first, size_t n,
                        void *dst)
{
    for (size_t r = 0; r < n; r++) {
        uint8_t *to = (uint8_t *)dst + r * row_bytes;
        const uint8_t *from = src->data + (first + r) * src->stride;
        if (src->ollama_mxfp4)
            mxfp4_ollama_to_ggml(to, from, row_bytes);
        else
            memcpy(to, from, row_bytes);
    }
}

/*
 * Expert matrix w (bound: type, shapes, ops) whose rows are src's. In ggml's layout already,
 * its rows are the map's. Otherwise, where the level packs it, the context's packing reads
 * src (one converted copy, the packed one, as a file in ggml's layout costs); where it does
 * not, the rows are converted once into a copy the model owns (*owned).
 */
static bool place_experts(model_loader *ld, weight *w, expert_source *src, size_t rows_per_expert,
                          void **owned)
{
    w->data = src->data;
    if (!src->ollama_mxfp4 && src->stride == w->row_bytes) {
        *src = (expert_source){0};
        return true;
    }
    if (quant_packable(w->ops, w->n_in, rows_per_expert))
        return true;
    size_t bytes;
    if (!checked_mul_size(w->n_out, w->row_bytes, &bytes) || !(*owned = malloc(bytes))) {
        corral_error_set(ld->err, "%s: out of memory converting experts to ggml's layout",
                         gguf_path(ld->model->file));
        return false;
    }
    expert_source_rows(src, w->row_bytes, 0, w->n_out, *owned);
    w->data = *owned;
    w->model_owned = true;
    *src = (expert_source){0};
    return true;
}

/*
 * Binds experts tensor `name` [n_in, n_out, n_expert] as w (all experts' rows) with src its
 * rows in the map; ollama's MXFP4 is bound as type 39, src saying it needs reordering.
 */
static bool bind_experts_of_any_mxfp4(model_loader *ld, weight *w, const char *name,
                                      size_t n_in, size_t n_out, expert_source *src)
{
    const gguf_tensor *t = gguf_find_tensor(ld->model->file, name);
    size_t n_expert = ld->model->hp.n_expert;
    if (!t || t->type != TENSOR_TYPE_MXFP4_OLLAMA) {
        if (!model_bind_matrix(ld, w, name, n_in, n_out, n_expert, true))
            return false;
        *src = (expert_source){.data = w->data, .stride = w->row_bytes};
        return true;
    }
    if ((uint64_t)t->ne[0] != n_in || (uint64_t)t->ne[1] != n_out ||
        (uint64_t)t->ne[2] != n_expert || t->ne[3] != 1) {
        corral_error_set(ld->err, "%s: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%zu, %zu, %zu]",
                         gguf_path(ld->model->file), name, (long long)t->ne[0],
                         (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3], n_in,
                         n_out, n_expert);
        return false;
    }
    const quant_ops *ops = quant_ops_active(TENSOR_TYPE_MXFP4);
    if (!ops || !ops->dot) {
        corral_error_set(ld->err, "%s: tensor '%s' has type mxfp4, which is not supported yet",
                         gguf_path(ld->model->file), name);
        return false;
    }
    *w = (weight){.data = t->data, .type = TENSOR_TYPE_MXFP4, .n_in = n_in,
                  .n_out = n_out * n_expert, .row_bytes = t->size_bytes / (n_out * n_expert),
                  .ops = ops};
    *src = (expert_source){.data = t->data, .stride = w->row_bytes, .ollama_mxfp4 = true};
    return true;
}

/*
 * The interleaved gate/up experts as two matrices: gate row r (r = e * n_ff_exp + i) is the
 * tensor's row 2r, up's is 2r + 1, which their sources say; the kernels want an expert's
 * rows contiguous, so those are converted (placed) like any foreign layout. The biases,
 * small, are split into a copy the model owns: gate's, then up's.
 */
static bool gptoss_ollama_split_gate_up(model_loader *ld, layer_weights *l, const weight *gu,
                                        const weight *gu_b, const expert_source *gu_src)
{
    const hparams *hp = &ld->model->hp;
    size_t F = hp->n_ff_exp, n = hp->n_expert, rows = F * n, bias_bytes;
    if (!checked_mul_size(rows, 2 * sizeof(float), &bias_bytes) ||
        !(l->owned_exps_b = malloc(bias_bytes))) {
        corral_error_set(ld->err, "%s: out of memory splitting ffn_gate_up_exps.bias",
                         gguf_path(ld->model->file));
        return false;
    }
    float *gate_b = l->owned_exps_b, *up_b = gate_b + rows;
    const float *src_b = gu_b->data;
    for (size_t r = 0; r < rows; r++) {
        gate_b[r] = src_b[2 * r];
        up_b[r] = src_b[2 * r + 1];
    }
    l->ffn_gate_exps_b = *gu_b;
    l->ffn_gate_exps_b.data = gate_b;
    l->ffn_gate_exps_b.n_in = F;
    l->ffn_gate_exps_b.n_out = n;
    l->ffn_gate_exps_b.row_bytes = F * sizeof(float);
    l->ffn_up_exps_b = l->ffn_gate_exps_b;
    l->ffn_up_exps_b.data = up_b;

    l->ffn_gate_exps = *gu;
    l->ffn_gate_exps.n_out = rows;
    l->ffn_up_exps = l->ffn_gate_exps;
    l->gate_exps_src = (expert_source){gu_src->data, 2 * gu->row_bytes, gu_src->ollama_mxfp4};
    l->up_exps_src = l->gate_exps_src;
    l->up_exps_src.data += gu->row_bytes;
    return place_experts(ld, &l->ffn_gate_exps, &l->gate_exps_src, F, &l->owned_gate) &&
           place_experts(ld, &l->ffn_up_exps, &l->up_exps_src, F, &l->owned_up);
}

/* Gate and up experts as two tensors (ollama's converters after the split), with biases. */
static bool gptoss_ollama_gate_and_up(model_loader *ld, uint32_t il, layer_weights *l)
{
    const hparams *hp = &ld->model->hp;
    size_t E = hp->n_embd, F = hp->n_ff_exp, n = hp->n_expert;
    char name[GGUF_MAX_NAME_BYTES + 1];
    return bind_experts_of_any_mxfp4(ld, &l->ffn_gate_exps, NAME("ffn_gate_exps.weight"), E, F,
                                     &l->gate_exps_src) &&
           bind_experts_of_any_mxfp4(ld, &l->ffn_up_exps, NAME("ffn_up_exps.weight"), E, F,
                                     &l->up_exps_src) &&
           model_bind_matrix(ld, &l->ffn_gate_exps_b, NAME("ffn_gate_exps.bias"), F, n, 1, true) &&
           model_bind_matrix(ld, &l->ffn_up_exps_b, NAME("ffn_up_exps.bias"), F, n, 1, true) &&
           place_experts(ld, &l->ffn_gate_exps, &l->gate_exps_src, F, &l->owned_gate) &&
           place_experts(ld, &l->ffn_up_exps, &l->up_exps_src, F, &l->owned_up);
}

static bool gptoss_ollama_bind_moe(model_loader *ld, uint32_t il)
{
    const hparams *hp = &ld->model->hp;
    layer_weights *l = &ld->model->layers[il];
    size_t E = hp->n_embd, F = hp->n_ff_exp, n = hp->n_expert;
    char name[GGUF_MAX_NAME_BYTES + 1];
    weight gu = {0}, gu_b = {0};
    expert_source gu_src = {0};
    bool fused = gguf_find_tensor(ld->model->file, NAME("ffn_gate_up_exps.weight")) != NULL;
    if (!model_bind_vector(ld, &l->ffn_norm,
                           either(ld, il, "ffn_norm.weight", "post_attention_norm.weight", name,
                                  sizeof name), E, true) ||
        !model_bind_matrix(ld, &l->ffn_gate_inp, NAME("ffn_gate_inp.weight"), E, n, 1, true) ||
        !model_bind_vector(ld, &l->ffn_gate_inp_b, NAME("ffn_gate_inp.bias"), n, true) ||
        (fused && (!bind_experts_of_any_mxfp4(ld, &gu, NAME("ffn_gate_up_exps.weight"), E, 2 * F,
                                              &gu_src) ||
                   !model_bind_matrix(ld, &gu_b, NAME("ffn_gate_up_exps.bias"), 2 * F, n, 1,
                                      true))) ||
        (!fused && !gptoss_ollama_gate_and_up(ld, il, l)) ||
        !bind_experts_of_any_mxfp4(ld, &l->ffn_down_exps, NAME("ffn_down_exps.weight"), F, E,
                                   &l->down_exps_src) ||
        !model_bind_matrix(ld, &l->ffn_down_exps_b, NAME("ffn_down_exps.bias"), E, n, 1, true))
        return false;
    const weight *biases[] = {&gu_b, &l->ffn_gate_exps_b, &l->ffn_up_exps_b, &l->ffn_down_exps_b};
    for (size_t i = 0; i < sizeof biases / sizeof biases[0]; i++)
        if (biases[i]->data && biases[i]->type != TENSOR_TYPE_F32) {
            corral_error_set(ld->err, "%s: blk.%u's expert biases must be F32",
                             gguf_path(ld->model->file), il);
            return false;
        }
    return (!fused || gptoss_ollama_split_gate_up(ld, l, &gu, &gu_b, &gu_src)) &&
           place_experts(ld, &l->ffn_down_exps, &l->down_exps_src, E, &l->owned_down);
#undef NAME
}

const model_arch arch_gptoss = {
    .name = "gpt-oss",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU_OAI,
    .tensors = ARCH_QKV_BIAS | ARCH_OUTPUT_FFN_BIAS | ARCH_EXPERTS | ARCH_ATTN_SINKS |
               ARCH_EXPERT_BIASES | ARCH_FFN_NORM_POST_ATTN,
    .read_hparams = gptoss_hparams,
    .layer = layer_pre_norm,
};

const model_arch arch_gptoss_ollama = {
    .name = "gptoss",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU_OAI,
    .tensors = ARCH_QKV_BIAS | ARCH_OUTPUT_FFN_BIAS | ARCH_EXPERTS | ARCH_ATTN_SINKS |
               ARCH_EXPERT_BIASES,
    .read_hparams = gptoss_ollama_hparams,
    .layer = layer_pre_norm,
    .bind_attention = gptoss_ollama_bind_attention,
    .bind_moe = gptoss_ollama_bind_moe,
    .rope_scaling_default = "yarn",
};

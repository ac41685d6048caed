/*
 * Model loading: picks the architecture, reads hyper-parameters with llama.cpp's defaults,
 * and binds every tensor after checking its presence, type and shape, so that a wrong file
 * fails here with the tensor's name instead of misbehaving in the forward pass.
 */
#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lora.h"
#include "model.h"
#include "tensor_type.h"
#include "vocab.h"

static const model_arch *const architectures[] = {
    &arch_llama, &arch_qwen2, &arch_qwen3, &arch_phi3, &arch_gemma2, &arch_gemma3,
    &arch_bert,  &arch_nomic_bert,
    &arch_granite,
    &arch_olmo2,
    &arch_olmo3,
    &arch_smollm3,
    &arch_mistral3,
    &arch_starcoder2,
    &arch_cohere2,
    &arch_exaone4,
    &arch_glm4,
    &arch_qwen3moe,
    &arch_granitemoe,
    &arch_gptoss,
    &arch_gptoss_ollama,
    &arch_deepseek2,
    &arch_glm4moelite,
    &arch_qwen2vl,
    &arch_qwen25vl,
    &arch_gemma,
    &arch_command_r,
    &arch_exaone,
    &arch_qwen35,
    &arch_phi2,
    &arch_stablelm,
    &arch_qwen2moe,
    &arch_gemma4,
    &arch_qwen35moe,
    &arch_granitehybrid,
    &arch_glm4moe,
    &arch_gemma_embedding,
    &arch_qwen3next,
    &arch_nemotron_h,
    &arch_nemotron_h_moe,
    &arch_lfm2,
    &arch_qwen3vl,
    &arch_qwen3vlmoe,
    &arch_chatglm,
    &arch_internlm2,
    &arch_llama4,
    &arch_mllama,
    &arch_starcoder,
    &arch_falcon,
    &arch_jina_bert_v2,
    &arch_nomic_bert_moe,
    &arch_nemotron,
    &arch_lfm2moe,
    &arch_gemma3n,
    &arch_laguna,
    &arch_glmocr,
    &arch_deepseek2ocr,
    &arch_deepseekocr,
};

/* An encoder of bert's kind: post-LayerNorms, token types and a LayerNorm of the embeddings;
 * not one made of a decoder's blocks (ARCH_EMBED_DECODER), which keeps the decoder's tensors. */
static bool bert_encoder(unsigned tensors)
{
    return (tensors & ARCH_ENCODER) && !(tensors & ARCH_EMBED_DECODER);
}

enum weight_use {
    USE_MATRIX,    /* multiplied by activations: needs dot kernels */
    USE_EMBEDDING, /* rows looked up: needs dequantize */
    USE_VECTOR,    /* read as floats: must be F32 */
};

/* Bind tensor `name` of shape [n_in, n_out, n_mats] as one [n_in, n_out * n_mats] weight.
 * An absent optional tensor leaves w empty. */
static bool bind_mats(model_loader *ld, weight *w, const char *name, size_t n_in, size_t n_out,
                      size_t n_mats, enum weight_use use, bool required)
{
    const gguf_file *f = ld->model->file;
    const gguf_tensor *t = gguf_find_tensor(f, name);
    char alias_buf[GGUF_MAX_NAME_BYTES + 1];
    const char *alias = !t && ld->model->arch->tensor_alias
                            ? ld->model->arch->tensor_alias(name, alias_buf, sizeof alias_buf)
                            : NULL;
    if (alias && (t = gguf_find_tensor(f, alias)))
        name = alias; /* messages name the tensor as the file does */
    memset(w, 0, sizeof *w);
    if (!t) {
        if (required)
            corral_error_set(ld->err, "%s: missing tensor '%s'", gguf_path(f), name);
        return !required;
    }
    bool vector = n_out == 1;
    if ((uint64_t)t->ne[0] != n_in || (uint64_t)t->ne[1] != n_out ||
        (uint64_t)t->ne[2] != n_mats || t->ne[3] != 1) {
        if (n_mats != 1)
            corral_error_set(ld->err, "%s: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%zu, %zu, %zu]",
                             gguf_path(f), name, (long long)t->ne[0], (long long)t->ne[1],
                             (long long)t->ne[2], (long long)t->ne[3], n_in, n_out, n_mats);
        else if (vector)
            corral_error_set(ld->err, "%s: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%zu]",
                             gguf_path(f), name, (long long)t->ne[0], (long long)t->ne[1],
                             (long long)t->ne[2], (long long)t->ne[3], n_in);
        else
            corral_error_set(ld->err, "%s: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%zu, %zu]",
                             gguf_path(f), name, (long long)t->ne[0], (long long)t->ne[1],
                             (long long)t->ne[2], (long long)t->ne[3], n_in, n_out);
        return false;
    }
    const quant_ops *ops = quant_ops_active(t->type);
    bool usable = use == USE_VECTOR    ? t->type == TENSOR_TYPE_F32
                  : use == USE_MATRIX  ? ops && ops->dot
                                       : ops && ops->dequantize;
    if (!usable) {
        corral_error_set(ld->err, "%s: tensor '%s' has type %s, which is not supported %s",
                         gguf_path(f), name, tensor_type_name(t->type),
                         use == USE_VECTOR ? "for a vector (F32 is)" : "yet");
        return false;
    }
    if ((uintptr_t)t->data % sizeof(float) != 0) {
        corral_error_set(ld->err, "%s: tensor '%s' data is not 4-byte aligned", gguf_path(f),
                         name);
        return false;
    }
    w->data = t->data;
    w->type = t->type;
    w->n_in = n_in;
    w->n_out = n_out * n_mats;
    w->row_bytes = t->size_bytes / w->n_out;
    w->ops = ops;
    return true;
}

/* Bind tensor `name` as an [n_in, n_out] weight. An absent optional tensor leaves w empty. */
static bool bind(model_loader *ld, weight *w, const char *name, size_t n_in, size_t n_out,
                 enum weight_use use, bool required)
{
    return bind_mats(ld, w, name, n_in, n_out, 1, use, required);
}

/* Rows [begin, begin + count) of a bound matrix, as a matrix of its own. */
static weight weight_rows(const weight *w, size_t begin, size_t count)
{
    weight slice = *w;
    slice.data = (const uint8_t *)w->data + begin * w->row_bytes;
    slice.n_out = count;
    return slice;
}

/* Elements [begin, begin + count) of a bound F32 vector (empty stays empty). */
static weight vector_slice(const weight *w, size_t begin, size_t count)
{
    weight slice = *w;
    if (w->data) {
        slice.data = (const float *)w->data + begin;
        slice.n_in = count;
        slice.row_bytes = count * sizeof(float);
    }
    return slice;
}

bool model_bind_matrix(model_loader *ld, weight *w, const char *name, size_t n_in, size_t n_out,
                       size_t n_mats, bool required)
{
    return bind_mats(ld, w, name, n_in, n_out, n_mats, USE_MATRIX, required);
}

bool model_bind_vector(model_loader *ld, weight *w, const char *name, size_t n_in, bool required)
{
    return bind(ld, w, name, n_in, 1, USE_VECTOR, required);
}

bool model_bind_attention_projections(model_loader *ld, uint32_t il)
{
    const hparams *hp = &ld->model->hp;
    layer_weights *l = &ld->model->layers[il];
    char name[GGUF_MAX_NAME_BYTES + 1];
    size_t E = hp->n_embd, q_width = (size_t)l->n_head * hp->head_dim_k;
    size_t k_width = (size_t)hp->n_head_kv * hp->head_dim_k;
    size_t v_width = (size_t)hp->n_head_kv * hp->head_dim_v;
    size_t o_width = (size_t)l->n_head * hp->head_dim_v;
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, il), name)
    return model_bind_matrix(ld, &l->wq, NAME("attn_q.weight"), E, q_width, 1, true) &&
           model_bind_matrix(ld, &l->wk, NAME("attn_k.weight"), E, k_width, 1, true) &&
           model_bind_matrix(ld, &l->wv, NAME("attn_v.weight"), E, v_width, 1, true) &&
           model_bind_matrix(ld, &l->wo, NAME("attn_output.weight"), o_width, E, 1, true);
#undef NAME
}

/* A layer's optional second attention norm, its bias only beside its weight. */
static bool bind_attn_norm_2(model_loader *ld, uint32_t il, char *name, size_t name_size)
{
    layer_weights *l = &ld->model->layers[il];
    size_t E = ld->model->hp.n_embd;
#define NAME(suffix) (snprintf(name, name_size, "blk.%u." suffix, il), name)
    if (!bind(ld, &l->attn_norm_2, NAME("attn_norm_2.weight"), E, 1, USE_VECTOR, false) ||
        !bind(ld, &l->attn_norm_2_b, NAME("attn_norm_2.bias"), E, 1, USE_VECTOR, false))
        return false;
    if (l->attn_norm_2_b.data && !l->attn_norm_2.data) {
        corral_error_set(ld->err, "%s: layer %u has attn_norm_2.bias without attn_norm_2.weight",
                         gguf_path(ld->model->file), il);
        return false;
    }
    return true;
#undef NAME
}

/* ARCH_ATTN_OUT_GATE: blk.N.attn_gate.weight, or ollama's name for it, attn_g, with a row per
 * head or per element of the attention's output: the file's width says which, as llama.cpp
 * reads it. */
static bool bind_attn_out_gate(model_loader *ld, uint32_t il, char *name, size_t name_size)
{
    const corral_model *m = ld->model;
    layer_weights *l = &ld->model->layers[il];
    snprintf(name, name_size, "blk.%u.attn_gate.weight", il);
    if (!gguf_find_tensor(m->file, name))
        snprintf(name, name_size, "blk.%u.attn_g.weight", il);
    const gguf_tensor *t = gguf_find_tensor(m->file, name);
    if (!t) {
        corral_error_set(ld->err, "%s: missing tensor 'blk.%u.attn_gate.weight'", gguf_path(m->file),
                         il);
        return false;
    }
    size_t per_head = l->n_head, per_element = (size_t)l->n_head * l->head_dim_v;
    size_t width = (uint64_t)t->ne[1] == per_element ? per_element : per_head;
    if ((uint64_t)t->ne[1] != per_head && (uint64_t)t->ne[1] != per_element) {
        corral_error_set(ld->err, "%s: tensor '%s' has %lld rows: the attention gate has one per head (%zu) or one per element (%zu)",
                         gguf_path(m->file), name, (long long)t->ne[1], per_head, per_element);
        return false;
    }
    return bind(ld, &l->attn_gate, name, m->hp.n_embd, width, USE_MATRIX, true);
}

static bool bind_attention(model_loader *ld, uint32_t il, char *name, size_t name_size)
{
    const corral_model *m = ld->model;
    const hparams *hp = &m->hp;
    layer_weights *l = &ld->model->layers[il];
    unsigned tensors = m->arch->tensors;
    if (m->arch->bind_attention)
        return m->arch->bind_attention(ld, il);
    size_t q_width = (size_t)l->n_head * hp->head_dim_k;
    size_t k_width = (size_t)hp->n_head_kv * hp->head_dim_k;
    size_t v_width = (size_t)hp->n_head_kv * hp->head_dim_v;
    size_t o_width = (size_t)l->n_head * hp->head_dim_v;
#define NAME(suffix) (snprintf(name, name_size, "blk.%u." suffix, il), name)
    bool ok;
    bool bias = tensors & ARCH_QKV_BIAS;
    bool fused = (tensors & ARCH_FUSED_QKV) ||
                 ((tensors & ARCH_QKV_EITHER) &&
                  gguf_find_tensor(m->file, NAME("attn_qkv.weight")));
    if (fused) {
        weight qkv, qkv_b;
        ok = bind(ld, &qkv, NAME("attn_qkv.weight"), hp->n_embd, q_width + k_width + v_width,
                  USE_MATRIX, true);
        if (ok) {
            l->wq = weight_rows(&qkv, 0, q_width);
            l->wk = weight_rows(&qkv, q_width, k_width);
            l->wv = weight_rows(&qkv, q_width + k_width, v_width);
        }
        /* a fused matrix's biases are fused too, and then stand in for attn_{q,k,v}.bias */
        if (ok && (tensors & (ARCH_QKV_EITHER | ARCH_QKV_BIAS))) {
            ok = bind(ld, &qkv_b, NAME("attn_qkv.bias"), q_width + k_width + v_width, 1,
                      USE_VECTOR, bias);
            l->bq = vector_slice(&qkv_b, 0, q_width);
            l->bk = vector_slice(&qkv_b, q_width, k_width);
            l->bv = vector_slice(&qkv_b, q_width + k_width, v_width);
            bias = false;
        }
    } else {
        ok = bind(ld, &l->wq, NAME("attn_q.weight"), hp->n_embd, q_width, USE_MATRIX, true) &&
             bind(ld, &l->wk, NAME("attn_k.weight"), hp->n_embd, k_width, USE_MATRIX, true) &&
             bind(ld, &l->wv, NAME("attn_v.weight"), hp->n_embd, v_width, USE_MATRIX, true);
    }
    bool qk_norm = tensors & (ARCH_QK_NORM | ARCH_QK_NORM_FULL);
    bool qk_norm_required = qk_norm && !m->arch->qk_norm_optional;
    bool qk_norm_bias = qk_norm && (tensors & ARCH_LAYER_NORM);
    bool post = tensors & ARCH_POST_NORMS, encoder = bert_encoder(tensors);
    bool pre = !encoder && !(tensors & ARCH_NO_PRE_NORMS);
    /* a q/k norm spans one head, or the whole projection */
    size_t q_norm_width = tensors & ARCH_QK_NORM_FULL ? q_width : hp->head_dim_k;
    size_t k_norm_width = tensors & ARCH_QK_NORM_FULL ? k_width : hp->head_dim_k;
    bool heads = tensors & ARCH_QK_NORM_HEADS;
    size_t q_norm_rows = heads ? l->n_head : 1, k_norm_rows = heads ? hp->n_head_kv : 1;
    bool norm_bias = tensors & ARCH_NORM_BIAS, out_bias = tensors & ARCH_OUTPUT_FFN_BIAS;
    return ok &&
           (!pre ||
            bind(ld, &l->attn_norm, NAME("attn_norm.weight"), hp->n_embd, 1, USE_VECTOR, true)) &&
           (!norm_bias ||
            bind(ld, &l->attn_norm_b, NAME("attn_norm.bias"), hp->n_embd, 1, USE_VECTOR, true)) &&
           (!out_bias || bind(ld, &l->bo, NAME("attn_output.bias"), hp->n_embd, 1, USE_VECTOR,
                              !m->arch->output_ffn_bias_optional)) &&
           bind(ld, &l->wo, NAME("attn_output.weight"), o_width, hp->n_embd, USE_MATRIX, true) &&
           (l->bq.data ||
            (bind(ld, &l->bq, NAME("attn_q.bias"), q_width, 1, USE_VECTOR, bias) &&
             bind(ld, &l->bk, NAME("attn_k.bias"), k_width, 1, USE_VECTOR, bias) &&
             bind(ld, &l->bv, NAME("attn_v.bias"), v_width, 1, USE_VECTOR, bias))) &&
           bind(ld, &l->q_norm, NAME("attn_q_norm.weight"), q_norm_width, q_norm_rows, USE_VECTOR,
                qk_norm_required) &&
           bind(ld, &l->k_norm, NAME("attn_k_norm.weight"), k_norm_width, k_norm_rows, USE_VECTOR,
                qk_norm_required) &&
           (!qk_norm_bias ||
            (bind(ld, &l->q_norm_b, NAME("attn_q_norm.bias"), q_norm_width, q_norm_rows,
                  USE_VECTOR, false) &&
             bind(ld, &l->k_norm_b, NAME("attn_k_norm.bias"), k_norm_width, k_norm_rows,
                  USE_VECTOR, false))) &&
           (!l->q_norm.data == !l->k_norm.data ||
            (corral_error_set(ld->err, "%s: layer %u has only one of attn_q_norm and attn_k_norm",
                              gguf_path(m->file), il),
             false)) &&
           (!post || bind(ld, &l->post_attn_norm, NAME("post_attention_norm.weight"), hp->n_embd,
                          1, USE_VECTOR, true)) &&
           (!(tensors & ARCH_ATTN_SINKS) ||
            bind(ld, &l->attn_sinks, NAME("attn_sinks.weight"), l->n_head, 1, USE_VECTOR, true)) &&
           (!(tensors & ARCH_ATTN_NORM_2) || bind_attn_norm_2(ld, il, name, name_size)) &&
           (!(tensors & ARCH_ATTN_OUT_GATE) || bind_attn_out_gate(ld, il, name, name_size));
}

/*
 * One kind of layer il's experts (`kind`: ffn_gate, ffn_up or ffn_down): the 3-D tensor
 * blk.N.<kind>_exps.weight, or else one [n_in, n_out] tensor per expert,
 * blk.N.<kind>.E.weight, all of one type, bound as w (its data the first expert's) with
 * *rows where each expert's rows begin.
 */
static bool bind_experts(model_loader *ld, uint32_t il, const char *kind, size_t n_in,
                         size_t n_out, weight *w, const void ***rows)
{
    const hparams *hp = &ld->model->hp;
    char name[GGUF_MAX_NAME_BYTES + 1];
    snprintf(name, sizeof name, "blk.%u.%s_exps.weight", il, kind);
    if (gguf_find_tensor(ld->model->file, name))
        return bind_mats(ld, w, name, n_in, n_out, hp->n_expert, USE_MATRIX, true);
    if (!(*rows = calloc(hp->n_expert, sizeof **rows))) {
        corral_error_set(ld->err, "out of memory");
        return false;
    }
    for (uint32_t e = 0; e < hp->n_expert; e++) {
        weight one;
        snprintf(name, sizeof name, "blk.%u.%s.%u.weight", il, kind, e);
        if (e == 0 && !gguf_find_tensor(ld->model->file, name)) {
            corral_error_set(ld->err, "%s: missing tensor 'blk.%u.%s_exps.weight'",
                             gguf_path(ld->model->file), il, kind);
            return false;
        }
        if (!bind(ld, &one, name, n_in, n_out, USE_MATRIX, true))
            return false;
        if (e == 0) {
            *w = one;
            w->n_out = n_out * hp->n_expert;
        } else if (one.type != w->type) {
            corral_error_set(ld->err, "%s: tensor '%s' has type %s, expert 0's has %s",
                             gguf_path(ld->model->file), name, tensor_type_name(one.type),
                             tensor_type_name(w->type));
            return false;
        }
        (*rows)[e] = one.data;
    }
    return true;
}

/* The mixture-of-experts FFN: its norm, the router and the experts. */
static bool bind_moe_ffn(model_loader *ld, uint32_t il, char *name, size_t name_size)
{
    const hparams *hp = &ld->model->hp;
    layer_weights *l = &ld->model->layers[il];
    size_t E = hp->n_embd, F = hp->n_ff_exp, n = hp->n_expert, S = hp->n_ff_shexp;
    unsigned tensors = ld->model->arch->tensors;
    bool biases = tensors & ARCH_EXPERT_BIASES;
    bool shared = S > 0;
    if (ld->model->arch->bind_moe)
        return ld->model->arch->bind_moe(ld, il);
    const char *norm = tensors & ARCH_FFN_NORM_POST_ATTN ? NAME("post_attention_norm.weight")
                                                         : NAME("ffn_norm.weight");
    return bind(ld, &l->ffn_norm, norm, E, 1, USE_VECTOR, true) &&
           bind(ld, &l->exp_probs_b, NAME("exp_probs_b.bias"), n, 1, USE_VECTOR, false) &&
           bind(ld, &l->ffn_gate_shexp, NAME("ffn_gate_shexp.weight"), E, S, USE_MATRIX, shared) &&
           bind(ld, &l->ffn_up_shexp, NAME("ffn_up_shexp.weight"), E, S, USE_MATRIX, shared) &&
           bind(ld, &l->ffn_down_shexp, NAME("ffn_down_shexp.weight"), S, E, USE_MATRIX, shared) &&
           (!(tensors & ARCH_SHARED_EXPERT_GATE) ||
            bind(ld, &l->ffn_gate_inp_shexp, NAME("ffn_gate_inp_shexp.weight"), E, 1, USE_MATRIX,
                 true)) &&
           bind(ld, &l->ffn_gate_inp, NAME("ffn_gate_inp.weight"), E, n, USE_MATRIX, true) &&
           (!biases ||
            (bind(ld, &l->ffn_gate_inp_b, NAME("ffn_gate_inp.bias"), n, 1, USE_VECTOR, true) &&
             bind(ld, &l->ffn_gate_exps_b, NAME("ffn_gate_exps.bias"), F, n, USE_VECTOR, true) &&
             bind(ld, &l->ffn_up_exps_b, NAME("ffn_up_exps.bias"), F, n, USE_VECTOR, true) &&
             bind(ld, &l->ffn_down_exps_b, NAME("ffn_down_exps.bias"), E, n, USE_VECTOR, true))) &&
           bind_experts(ld, il, "ffn_gate", E, F, &l->ffn_gate_exps, &l->gate_exps_rows) &&
           bind_experts(ld, il, "ffn_up", E, F, &l->ffn_up_exps, &l->up_exps_rows) &&
           bind_experts(ld, il, "ffn_down", F, E, &l->ffn_down_exps, &l->down_exps_rows);
}

static bool bind_ffn(model_loader *ld, uint32_t il, char *name, size_t name_size)
{
    const corral_model *m = ld->model;
    const hparams *hp = &m->hp;
    layer_weights *l = &ld->model->layers[il];
    unsigned tensors = m->arch->tensors;
    bool ok;
    if (m->arch->bind_ffn)
        return m->arch->bind_ffn(ld, il);
    if (hp->n_expert > 0 && il >= hp->n_layer_dense_lead) {
        if (!(tensors & ARCH_DENSE_AND_EXPERTS))
            return bind_moe_ffn(ld, il, name, name_size);
        if (!bind_moe_ffn(ld, il, name, name_size))
            return false; /* then the dense FFN beside the experts */
    }
    bool fused = (tensors & ARCH_FUSED_GATE_UP) ||
                 ((tensors & ARCH_GATE_UP_EITHER) &&
                  !gguf_find_tensor(m->file, NAME("ffn_gate.weight")));
    if (fused) {
        weight gate_up;
        ok = bind(ld, &gate_up, NAME("ffn_up.weight"), hp->n_embd, 2 * (size_t)hp->n_ff,
                  USE_MATRIX, true);
        if (ok) {
            l->ffn_gate = weight_rows(&gate_up, 0, hp->n_ff);
            l->ffn_up = weight_rows(&gate_up, hp->n_ff, hp->n_ff);
        }
    } else {
        ok = (ffn_ungated(m->arch->ffn) || bind(ld, &l->ffn_gate, NAME("ffn_gate.weight"),
                                                hp->n_embd, l->n_ff, USE_MATRIX, true)) &&
             bind(ld, &l->ffn_up, NAME("ffn_up.weight"), hp->n_embd, l->n_ff, USE_MATRIX, true);
    }
    bool out_bias = tensors & ARCH_OUTPUT_FFN_BIAS;
    bool out_bias_required = !m->arch->output_ffn_bias_optional;
    const char *norm = tensors & ARCH_FFN_NORM_POST_ATTN ? "post_attention_norm" : "ffn_norm";
    char norm_name[GGUF_MAX_NAME_BYTES + 1];
    snprintf(norm_name, sizeof norm_name, "blk.%u.%s.weight", il, norm);
    bool ffn_norm_optional = tensors & ARCH_FFN_NORM_OPTIONAL;
    return ok &&
           (bert_encoder(tensors) || (tensors & (ARCH_NO_PRE_NORMS | ARCH_PARALLEL)) ||
            bind(ld, &l->ffn_norm, norm_name, hp->n_embd, 1, USE_VECTOR, !ffn_norm_optional)) &&
           (!(tensors & ARCH_NORM_BIAS) || (tensors & ARCH_PARALLEL) ||
            bind(ld, &l->ffn_norm_b, NAME("ffn_norm.bias"), hp->n_embd, 1, USE_VECTOR,
                 !ffn_norm_optional)) &&
           (!out_bias ||
            (bind(ld, &l->ffn_up_b, NAME("ffn_up.bias"), hp->n_ff, 1, USE_VECTOR,
                  out_bias_required) &&
             bind(ld, &l->ffn_down_b, NAME("ffn_down.bias"), hp->n_embd, 1, USE_VECTOR,
                  out_bias_required))) &&
           bind(ld, &l->ffn_down, NAME("ffn_down.weight"), l->n_ff, hp->n_embd, USE_MATRIX, true) &&
           (!(tensors & ARCH_POST_NORMS) ||
            bind(ld, &l->post_ffn_norm, NAME("post_ffw_norm.weight"), hp->n_embd, 1, USE_VECTOR, true));
#undef NAME
}

#define NAME(suffix) (snprintf(name, name_size, "blk.%u." suffix, il), name)

static bool bind_encoder_attention(model_loader *ld, uint32_t il, char *name, size_t name_size)
{
    const hparams *hp = &ld->model->hp;
    layer_weights *l = &ld->model->layers[il];
    size_t o_width = (size_t)hp->n_head * hp->head_dim_v;
    if (ld->model->arch->tensors & ARCH_FUSED_QKV) {
        size_t q_width = (size_t)hp->n_head * hp->head_dim_k;
        size_t k_width = (size_t)hp->n_head_kv * hp->head_dim_k;
        size_t v_width = (size_t)hp->n_head_kv * hp->head_dim_v;
        weight qkv_b;
        if (!bind(ld, &qkv_b, NAME("attn_qkv.bias"), q_width + k_width + v_width, 1, USE_VECTOR,
                  false))
            return false;
        l->bq = vector_slice(&qkv_b, 0, q_width);
        l->bk = vector_slice(&qkv_b, q_width, k_width);
        l->bv = vector_slice(&qkv_b, q_width + k_width, v_width);
    }
    return bind(ld, &l->bo, NAME("attn_output.bias"), o_width, 1, USE_VECTOR, false) &&
           bind(ld, &l->attn_out_norm, NAME("attn_output_norm.weight"), hp->n_embd, 1,
                USE_VECTOR, true) &&
           bind(ld, &l->attn_out_norm_b, NAME("attn_output_norm.bias"), hp->n_embd, 1,
                USE_VECTOR, true);
}

/* The FFN's biases (gelu only: llama.cpp's gated encoder FFNs have none) and the last norm. */
static bool bind_encoder_ffn(model_loader *ld, uint32_t il, char *name, size_t name_size)
{
    const hparams *hp = &ld->model->hp;
    layer_weights *l = &ld->model->layers[il];
    bool gelu = ld->model->arch->ffn == FFN_GELU;
    return (!gelu ||
            (bind(ld, &l->ffn_up_b, NAME("ffn_up.bias"), hp->n_ff, 1, USE_VECTOR, false) &&
             bind(ld, &l->ffn_down_b, NAME("ffn_down.bias"), hp->n_embd, 1, USE_VECTOR, false))) &&
           bind(ld, &l->layer_out_norm, NAME("layer_output_norm.weight"), hp->n_embd, 1,
                USE_VECTOR, true) &&
           bind(ld, &l->layer_out_norm_b, NAME("layer_output_norm.bias"), hp->n_embd, 1,
                USE_VECTOR, true);
#undef NAME
}

static bool bind_layer(model_loader *ld, uint32_t il)
{
    char name[GGUF_MAX_NAME_BYTES + 1];
    bool encoder = bert_encoder(ld->model->arch->tensors);
    return bind_attention(ld, il, name, sizeof name) && bind_ffn(ld, il, name, sizeof name) &&
           (!encoder || (bind_encoder_attention(ld, il, name, sizeof name) &&
                         bind_encoder_ffn(ld, il, name, sizeof name)));
}

bool model_read_u32(model_loader *ld, const char *suffix, uint32_t *out, bool required)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", ld->model->arch->name, suffix);
    const gguf_kv *kv = gguf_find_kv(ld->model->file, key);
    if (kv && kv->type == GGUF_TYPE_ARRAY) {
        corral_error_set(ld->err, "%s: per-layer values for '%s' are not supported",
                         gguf_path(ld->model->file), key);
        return false;
    }
    return required ? gguf_get_u32(ld->model->file, key, out, ld->err)
                    : gguf_get_u32_opt(ld->model->file, key, out, ld->err);
}

/* A per-layer array key's values, checked: unsigned integers, one per layer. NULL (err set)
 * when it is not such an array. */
static const gguf_kv *layer_array(model_loader *ld, const char *key)
{
    const gguf_kv *kv = gguf_find_kv(ld->model->file, key);
    bool ok = kv && gguf_type_is_integer(kv->elem_type) && kv->n == ld->model->hp.n_layer;
    for (uint64_t i = 0; ok && i < kv->n; i++)
        ok = gguf_kv_u64(kv, i) <= UINT32_MAX; /* a negative one wraps above it */
    if (!ok)
        corral_error_set(ld->err, "%s: '%s' must hold one unsigned integer for each of the %u layers",
                         gguf_path(ld->model->file), key, ld->model->hp.n_layer);
    return ok ? kv : NULL;
}

bool model_read_u32_layers(model_loader *ld, const char *suffix, uint32_t *out, bool required)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", ld->model->arch->name, suffix);
    const gguf_kv *kv = gguf_find_kv(ld->model->file, key);
    if (kv && kv->type == GGUF_TYPE_ARRAY) {
        if (!(kv = layer_array(ld, key)))
            return false;
        for (uint32_t il = 0; il < ld->model->hp.n_layer; il++)
            out[il] = (uint32_t)gguf_kv_u64(kv, il);
        return true;
    }
    uint32_t value;
    if (!(required ? gguf_get_u32(ld->model->file, key, &value, ld->err)
                   : gguf_get_u32_opt(ld->model->file, key, &value, ld->err)))
        return false;
    if (kv)
        for (uint32_t il = 0; il < ld->model->hp.n_layer; il++)
            out[il] = value;
    return true;
}

/* model_read_u32, or on ARCH_PER_LAYER_WIDTHS families the largest of a per-layer array. */
static bool read_u32_widest(model_loader *ld, const char *suffix, uint32_t *out, bool required)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", ld->model->arch->name, suffix);
    const gguf_kv *kv = gguf_find_kv(ld->model->file, key);
    if (!(ld->model->arch->tensors & ARCH_PER_LAYER_WIDTHS) || !kv ||
        kv->type != GGUF_TYPE_ARRAY)
        return model_read_u32(ld, suffix, out, required);
    if (!(kv = layer_array(ld, key)))
        return false;
    *out = 0;
    for (uint64_t i = 0; i < kv->n; i++)
        *out = gguf_kv_u64(kv, i) > *out ? (uint32_t)gguf_kv_u64(kv, i) : *out;
    return true;
}

bool model_read_f32(model_loader *ld, const char *suffix, float *out, bool required)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", ld->model->arch->name, suffix);
    return required ? gguf_get_f32(ld->model->file, key, out, ld->err)
                    : gguf_get_f32_opt(ld->model->file, key, out, ld->err);
}

bool model_read_bool(model_loader *ld, const char *suffix, bool *out, bool required)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", ld->model->arch->name, suffix);
    return required ? gguf_get_bool(ld->model->file, key, out, ld->err)
                    : gguf_get_bool_opt(ld->model->file, key, out, ld->err);
}

/* YaRN's magnitude correction for a scale factor s and a multiplier m (1 + 0.1 m ln s). */
static float yarn_mscale_of(float s, float m)
{
    return s <= 1.0f ? 1.0f : 0.1f * m * logf(s) + 1.0f;
}

/* Where the ramp of pairs stands for a number of rotations over the original context. */
static float yarn_corr_dim(uint32_t n_rot, uint32_t n_ctx_orig, float rotations, float base)
{
    return (float)n_rot * logf((float)n_ctx_orig / (rotations * 2.0f * (float)M_PI)) /
           (2.0f * logf(base));
}

/*
 * YaRN with llama.cpp's constants: beta_fast 32 and beta_slow 1 unless the file says, the
 * ramp between their correction dimensions, and cos/sin magnitude 1 + 0.1 ln(factor), or, with
 * rope.scaling.yarn_log_multiplier m, (1 + 0.1 ln f) / (1 + 0.1 m ln f). The magnitude is
 * computed as llama.cpp does in float: its attention factor, which cancels the 1 + 0.1 ln f
 * that ggml's RoPE then multiplies in again. Files from ollama's converter spell the keys
 * rope.scaling.beta_fast / beta_slow / mscale_all_dim (read when llama.cpp's are absent).
 * attn_factor (rope.scaling.attn_factor, ollama's Olmo 3 files) multiplies the magnitude once
 * more.
 */
static bool read_yarn(model_loader *ld, rope_variant *rv, float attn_factor)
{
    const hparams *hp = &ld->model->hp;
    uint32_t n_ctx_orig = hp->n_ctx_orig;
    float beta_fast = 32.0f, beta_slow = 1.0f, log_mul = 0.0f;
    if (!ld->model->arch->yarn_default_betas &&
        (!model_read_f32(ld, "rope.scaling.beta_fast", &beta_fast, false) ||
         !model_read_f32(ld, "rope.scaling.yarn_beta_fast", &beta_fast, false) ||
         !model_read_f32(ld, "rope.scaling.beta_slow", &beta_slow, false) ||
         !model_read_f32(ld, "rope.scaling.yarn_beta_slow", &beta_slow, false) ||
         !model_read_f32(ld, "rope.scaling.mscale_all_dim", &log_mul, false) ||
         !model_read_f32(ld, "rope.scaling.yarn_log_multiplier", &log_mul, false)))
        return false;
    float f = 1.0f / hp->rope_freq_scale;
    if (!(f >= 1.0f) || !isfinite(f) || n_ctx_orig == 0 || !(beta_fast > 0.0f) ||
        !(beta_slow > 0.0f) || !(log_mul >= 0.0f) || !isfinite(log_mul) ||
        !(hp->rope_freq_base > 1.0f) || hp->n_rot == 0 || !(attn_factor > 0.0f) ||
        !isfinite(attn_factor)) {
        corral_error_set(ld->err, "%s: inconsistent YaRN parameters (factor %g, original context %u, beta %g / %g, log multiplier %g, base %g, attention factor %g)",
                         gguf_path(ld->model->file), f, n_ctx_orig, beta_fast, beta_slow,
                         log_mul, hp->rope_freq_base, attn_factor);
        return false;
    }
    float attn = log_mul != 0.0f ? yarn_mscale_of(f, 1.0f) / yarn_mscale_of(f, log_mul)
                                 : yarn_mscale_of(f, 1.0f);
    attn *= 1.0f / (1.0f + 0.1f * logf(f));
    attn *= attn_factor;
    rv->yarn = true;
    rv->yarn_mscale = attn * (1.0f + 0.1f * logf(1.0f / hp->rope_freq_scale));
    float low = floorf(yarn_corr_dim(hp->n_rot, n_ctx_orig, beta_fast, hp->rope_freq_base));
    float high = ceilf(yarn_corr_dim(hp->n_rot, n_ctx_orig, beta_slow, hp->rope_freq_base));
    rv->yarn_corr_low = low > 0.0f ? low : 0.0f;
    rv->yarn_corr_high = high < (float)(hp->n_rot - 1) ? high : (float)(hp->n_rot - 1);
    return true;
}

/*
 * rope.scaling.attn_factor multiplies cos/sin whatever the scaling type, as llama.cpp
 * multiplies its attention factor in for every family: phi3's LongRoPE files carry
 * sqrt(1 + ln(context / original context) / ln(original context)), written by the
 * converters. Absent, it is 1.
 */
static bool read_rope_scaling(model_loader *ld)
{
    hparams *hp = &ld->model->hp;
    char key[128];
    const char *fallback = ld->model->arch->rope_scaling_default;
    gguf_str type = fallback ? (gguf_str){fallback, strlen(fallback)} : (gguf_str){"none", 4};
    snprintf(key, sizeof key, "%s.rope.scaling.type", ld->model->arch->name);
    if (!gguf_get_str_opt(ld->model->file, key, &type, ld->err))
        return false;
    float factor = 0.0f, attn_factor = 1.0f;
    hp->n_ctx_orig = hp->n_ctx_train;
    if (!model_read_f32(ld, "rope.scaling.factor", &factor, false) ||
        !model_read_f32(ld, "rope.scale_linear", &factor, false) ||
        !model_read_u32(ld, "rope.scaling.original_context_length", &hp->n_ctx_orig, false) ||
        !model_read_f32(ld, "rope.scaling.attn_factor", &attn_factor, false))
        return false;
    bool linear = type.size == 6 && memcmp(type.data, "linear", 6) == 0;
    bool yarn = type.size == 4 && memcmp(type.data, "yarn", 4) == 0;
    bool none = type.size == 4 && memcmp(type.data, "none", 4) == 0;
    if (!linear && !yarn && !none) {
        corral_error_set(ld->err, "%s: rope scaling type '%.*s' is not supported yet",
                         gguf_path(ld->model->file), (int)type.size, type.data);
        return false;
    }
    hp->rope_freq_scale = ((linear || yarn) && factor > 0.0f) ? 1.0f / factor : 1.0f;
    ld->model->rope[0] =
        (rope_variant){.freq_base = hp->rope_freq_base, .freq_scale = hp->rope_freq_scale};
    if (yarn)
        return read_yarn(ld, &ld->model->rope[0], attn_factor);
    if (!(attn_factor > 0.0f) || !isfinite(attn_factor)) {
        corral_error_set(ld->err, "%s: inconsistent RoPE attention factor %g",
                         gguf_path(ld->model->file), attn_factor);
        return false;
    }
    ld->model->rope[0].attn_factor = attn_factor;
    return true;
}

/* attention.head_count_kv: one value, or for ARCH_KV_HEADS_PER_LAYER one per layer, where 0
 * marks a recurrent layer and the attention layers' values must agree. */
static bool read_head_count_kv(model_loader *ld)
{
    hparams *hp = &ld->model->hp;
    char key[128];
    snprintf(key, sizeof key, "%s.attention.head_count_kv", ld->model->arch->name);
    const gguf_kv *kv = gguf_find_kv(ld->model->file, key);
    if (!kv || kv->type != GGUF_TYPE_ARRAY || !(ld->model->arch->tensors & ARCH_KV_HEADS_PER_LAYER))
        return read_u32_widest(ld, "attention.head_count_kv", &hp->n_head_kv, false);
    bool ok = kv->n == hp->n_layer && gguf_type_is_integer(kv->elem_type);
    int64_t heads = 0;
    for (uint64_t i = 0; ok && i < kv->n; i++) {
        int64_t v = gguf_kv_i64(kv, i);
        ok = v >= 0 && v <= UINT32_MAX && (v == 0 || heads == 0 || v == heads);
        heads = v > 0 ? v : heads;
    }
    if (!ok) {
        corral_error_set(ld->err, "%s: %s must hold one count per layer (%u), 0 for a recurrent layer and one value for the others",
                         gguf_path(ld->model->file), key, hp->n_layer);
        return false;
    }
    if (heads > 0) /* else recurrent layers only: the attention's sizes go unused */
        hp->n_head_kv = (uint32_t)heads;
    return true;
}

/* attention.head_count into hp->n_head: one value, or on a head_count_per_layer family one per
 * layer, hp then taking the most (the family's read_hparams sets each layer's). *first: layer
 * 0's, which llama.cpp's defaults (key and value widths, KV heads) are made of. */
static bool read_head_count(model_loader *ld, uint32_t *first)
{
    hparams *hp = &ld->model->hp;
    char key[128];
    snprintf(key, sizeof key, "%s.attention.head_count", ld->model->arch->name);
    const gguf_kv *kv = gguf_find_kv(ld->model->file, key);
    if (!ld->model->arch->head_count_per_layer || !kv || kv->type != GGUF_TYPE_ARRAY) {
        if (!model_read_u32(ld, "attention.head_count", &hp->n_head, true))
            return false;
        *first = hp->n_head;
        return true;
    }
    if (hp->n_layer == 0 || hp->n_layer > MODEL_MAX_LAYERS) {
        corral_error_set(ld->err, "%s: inconsistent layer count %u", gguf_path(ld->model->file),
                         hp->n_layer);
        return false;
    }
    if (!(kv = layer_array(ld, key)))
        return false;
    hp->n_head = 0;
    for (uint64_t i = 0; i < kv->n; i++)
        hp->n_head = gguf_kv_u64(kv, i) > hp->n_head ? (uint32_t)gguf_kv_u64(kv, i) : hp->n_head;
    *first = (uint32_t)gguf_kv_u64(kv, 0);
    return true;
}

static bool read_hparams(model_loader *ld)
{
    hparams *hp = &ld->model->hp;
    uint32_t n_head_first = 0;
    if (!model_read_u32(ld, "context_length", &hp->n_ctx_train, true) ||
        !model_read_u32(ld, "embedding_length", &hp->n_embd, true) ||
        !model_read_u32(ld, "block_count", &hp->n_layer, true) ||
        !read_u32_widest(ld, "feed_forward_length", &hp->n_ff,
                         !ld->model->arch->ffn_length_optional) ||
        !read_head_count(ld, &n_head_first))
        return false;
    hp->n_head_kv = n_head_first;
    if (!read_head_count_kv(ld))
        return false;
    const char *path = gguf_path(ld->model->file);
    if (hp->n_embd == 0 || hp->n_head == 0 || n_head_first == 0 || hp->n_head_kv == 0 ||
        hp->n_layer == 0 ||
        (hp->n_ff == 0 && !ld->model->arch->ffn_length_optional) ||
        hp->n_head % hp->n_head_kv != 0 || hp->n_layer > MODEL_MAX_LAYERS) {
        corral_error_set(ld->err, "%s: inconsistent hyper-parameters (embedding %u, layers %u, ffn %u, heads %u, kv heads %u)",
                         path, hp->n_embd, hp->n_layer, hp->n_ff, hp->n_head, hp->n_head_kv);
        return false;
    }
    hp->head_dim_k = n_head_first ? hp->n_embd / n_head_first : 0;
    if (!model_read_u32(ld, "attention.key_length", &hp->head_dim_k, false))
        return false;
    hp->head_dim_v = hp->head_dim_k;
    if (!model_read_u32(ld, "attention.value_length", &hp->head_dim_v, false))
        return false;
    hp->n_rot = hp->head_dim_k;
    if (!model_read_u32(ld, "rope.dimension_count", &hp->n_rot, false))
        return false;
    if (hp->head_dim_k == 0 || hp->head_dim_v == 0 || hp->n_rot > hp->head_dim_k ||
        hp->n_rot % 2 != 0) {
        corral_error_set(ld->err, "%s: inconsistent head sizes (key %u, value %u, rope %u)", path,
                         hp->head_dim_k, hp->head_dim_v, hp->n_rot);
        return false;
    }
    if (!model_read_u32(ld, "expert_count", &hp->n_expert, false) ||
        !model_read_u32(ld, "expert_used_count", &hp->n_expert_used, false))
        return false;
    hp->n_ff_exp = hp->n_ff;
    hp->expert_weights_norm = true;
    hp->expert_weights_scale = 1.0f;
    hp->rope_freq_base = 10000.0f;
    hp->causal = true;
    unsigned tensors = ld->model->arch->tensors;
    bool layer_norm = bert_encoder(tensors) || (tensors & ARCH_LAYER_NORM);
    const char *eps_key =
        layer_norm ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon";
    hp->norm_eps = ld->model->arch->norm_eps_default;
    if (!model_read_f32(ld, eps_key, &hp->norm_eps, hp->norm_eps == 0.0f) ||
        !model_read_f32(ld, "rope.freq_base", &hp->rope_freq_base, false) ||
        !read_rope_scaling(ld))
        return false;
    hp->embd_scale = 1.0f;
    hp->q_scale = 1.0f;
    hp->kq_scale = 1.0f / sqrtf((float)hp->head_dim_k);
    hp->residual_scale = 1.0f;
    hp->logit_mult = 1.0f;
    ld->model->n_rope_variants = 1;
    return true;
}

/* A mixture of experts where the family needs one, and only one that the FFN can run. */
static bool check_experts(model_loader *ld)
{
    const corral_model *m = ld->model;
    const hparams *hp = &m->hp;
    const char *path = gguf_path(m->file);
    if (hp->n_expert == 0) {
        if (m->arch->tensors & ARCH_EXPERTS) {
            corral_error_set(ld->err, "%s: %s needs %s.expert_count", path, m->arch->name,
                             m->arch->name);
            return false;
        }
        return true;
    }
    if ((m->arch->tensors & ARCH_ENCODER) && !(m->arch->tensors & ARCH_EXPERTS)) {
        corral_error_set(ld->err, "%s: experts in a %s encoder are not supported", path,
                         m->arch->name);
        return false;
    }
    if (hp->n_expert > MODEL_MAX_EXPERTS || hp->n_expert_used == 0 ||
        hp->n_expert_used > hp->n_expert || hp->n_expert_used > MODEL_MAX_EXPERTS_USED ||
        hp->n_ff_exp == 0) {
        corral_error_set(ld->err, "%s: inconsistent experts (%u, %u used, width %u; at most %d, %d used)",
                         path, hp->n_expert, hp->n_expert_used, hp->n_ff_exp, MODEL_MAX_EXPERTS,
                         MODEL_MAX_EXPERTS_USED);
        return false;
    }
    return true;
}

/* What the family's own keys set must still make sense. */
static bool check_layer_params(model_loader *ld)
{
    const corral_model *m = ld->model;
    if (!check_experts(ld))
        return false;
    for (uint32_t il = 0; il < m->hp.n_layer; il++) {
        const layer_weights *l = &m->layers[il];
        assert(l->rope_variant < m->n_rope_variants); /* set by the arch, not the file */
        if (l->sliding && m->hp.n_swa == 0) {
            corral_error_set(ld->err, "%s: layer %u has a sliding window, but %s.attention.sliding_window is 0",
                             gguf_path(m->file), il, m->arch->name);
            return false;
        }
    }
    return true;
}

/* Token type embeddings: one row per type (tokenizer.ggml.token_type_count), of which
 * llama.cpp adds row 0 to every token ("sentence A"). */
static bool bind_token_types(model_loader *ld)
{
    corral_model *m = ld->model;
    const gguf_tensor *t = gguf_find_tensor(m->file, "token_types.weight");
    size_t n_types = t && t->ne[1] > 0 ? (size_t)t->ne[1] : 1;
    return bind(ld, &m->type_embd, "token_types.weight", m->hp.n_embd, n_types, USE_EMBEDDING,
                false);
}

static bool bind_encoder_globals(model_loader *ld)
{
    corral_model *m = ld->model;
    const hparams *hp = &m->hp;
    return bind_token_types(ld) &&
           (!(m->arch->tensors & ARCH_POS_EMBD) ||
            bind(ld, &m->pos_embd, "position_embd.weight", hp->n_embd, hp->n_ctx_train,
                 USE_EMBEDDING, true)) &&
           bind(ld, &m->tok_norm, "token_embd_norm.weight", hp->n_embd, 1, USE_VECTOR, true) &&
           bind(ld, &m->tok_norm_b, "token_embd_norm.bias", hp->n_embd, 1, USE_VECTOR, true);
}

static bool bind_globals(model_loader *ld)
{
    corral_model *m = ld->model;
    const hparams *hp = &m->hp;
    /* a vocabulary cut to the text model's rows (vocab.c: ollama's gemma3n files) leaves rows
     * of token_embd past it, which no token reads: the first n_vocab are bound */
    size_t embd_rows = hp->n_vocab;
    const gguf_kv *tokens = gguf_find_kv(m->file, "tokenizer.ggml.tokens");
    const gguf_tensor *embd = gguf_find_tensor(m->file, "token_embd.weight");
    if (tokens && embd && tokens->n > hp->n_vocab && (uint64_t)embd->ne[1] == tokens->n)
        embd_rows = tokens->n;
    if (m->arch->token_embd_spare_rows && embd && embd->ne[1] > hp->n_vocab &&
        embd->ne[1] <= UINT32_MAX)
        embd_rows = (size_t)embd->ne[1];
    if (!bind(ld, &m->tok_embd, "token_embd.weight", hp->n_embd, embd_rows, USE_EMBEDDING, true))
        return false;
    m->tok_embd.n_out = hp->n_vocab;
    if (bert_encoder(m->arch->tensors))
        return bind_encoder_globals(ld);
    if (m->arch->tensors & ARCH_ENCODER) /* the decoder's last norm, before the pooling */
        return bind(ld, &m->output_norm, "output_norm.weight", hp->n_embd, 1, USE_VECTOR, true);
    if ((m->arch->tensors & ARCH_POS_EMBD) &&
        !bind(ld, &m->pos_embd, "position_embd.weight", hp->n_embd, hp->n_ctx_train,
              USE_EMBEDDING, true))
        return false;
    const char *output_norm = (m->arch->tensors & ARCH_OUTPUT_NORM_TOKEN_EMBD) &&
                                      !gguf_find_tensor(m->file, "output_norm.weight")
                                  ? "token_embd_norm.weight" : "output_norm.weight";
    if (!bind(ld, &m->output_norm, output_norm, hp->n_embd, 1, USE_VECTOR, true) ||
        ((m->arch->tensors & ARCH_NORM_BIAS) &&
         !bind(ld, &m->output_norm_b, "output_norm.bias", hp->n_embd, 1, USE_VECTOR, true)) ||
        !bind(ld, &m->output, "output.weight", hp->n_embd, hp->n_vocab, USE_MATRIX, false) ||
        ((m->arch->tensors & ARCH_OUTPUT_BIAS) &&
         !bind(ld, &m->output_b, "output.bias", hp->n_vocab, 1, USE_VECTOR, true)))
        return false;
    if (m->output.data && (m->arch->tensors & ARCH_TIED_OUTPUT)) {
        corral_error_set(ld->err, "%s: %s ties its output to token_embd.weight, but the file has an output.weight",
                         gguf_path(m->file), m->arch->name);
        return false;
    }
    if (!m->output.data) { /* tied embeddings, as llama.cpp does when output.weight is absent */
        if (!m->tok_embd.ops->dot) {
            corral_error_set(ld->err, "%s: token_embd.weight of type %s cannot serve as the output",
                             gguf_path(m->file), tensor_type_name(m->tok_embd.type));
            return false;
        }
        m->output = m->tok_embd;
    }
    weight freqs, longf, shortf;
    if (!bind(ld, &freqs, "rope_freqs.weight", hp->n_rot / 2, 1, USE_VECTOR, false) ||
        !bind(ld, &longf, "rope_factors_long.weight", hp->n_rot / 2, 1, USE_VECTOR, false) ||
        !bind(ld, &shortf, "rope_factors_short.weight", hp->n_rot / 2, 1, USE_VECTOR, false))
        return false;
    m->rope_freqs = freqs.data;
    m->rope_factors_long = longf.data;
    m->rope_factors_short = shortf.data;
    return true;
}

corral_model *corral_model_load(const char *path, corral_error *err)
{
    corral_model *m = calloc(1, sizeof *m);
    if (!m) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    model_loader ld = {m, err};
    if (!(m->file = gguf_open(path, err)))
        goto fail;
    gguf_str arch;
    if (!gguf_get_str(m->file, "general.architecture", &arch, err))
        goto fail;
    for (size_t i = 0; i < sizeof architectures / sizeof architectures[0]; i++)
        if (strlen(architectures[i]->name) == arch.size &&
            memcmp(architectures[i]->name, arch.data, arch.size) == 0)
            m->arch = architectures[i];
    /* ollama's embeddinggemma files say gemma3: their dense projection tells them apart */
    if (m->arch == &arch_gemma3 && gguf_find_tensor(m->file, "dense.0.weight"))
        m->arch = &arch_gemma3_embedding_ollama;
    m->arch = glm4_rope_variant(m->file, m->arch);
    if (!m->arch) {
        corral_error_set(err, "%s: architecture '%.*s' is not supported", path,
                         (int)(arch.size < 64 ? arch.size : 64), arch.data);
        goto fail;
    }
    if (!(m->vocab = vocab_load(m->file, err)))
        goto fail;
    m->hp.n_vocab = (uint32_t)corral_vocab_n_tokens(m->vocab);
    if (!read_hparams(&ld))
        goto fail;
    if (!(m->layers = calloc(m->hp.n_layer, sizeof *m->layers))) {
        corral_error_set(err, "out of memory");
        goto fail;
    }
    if (m->arch->read_hparams && !m->arch->read_hparams(&ld))
        goto fail;
    for (uint32_t il = 0; il < m->hp.n_layer; il++) { /* hp's where the family set none */
        layer_weights *l = &m->layers[il];
        l->n_head_kv = l->n_head_kv ? l->n_head_kv : m->hp.n_head_kv;
        l->head_dim_k = l->head_dim_k ? l->head_dim_k : m->hp.head_dim_k;
        l->head_dim_v = l->head_dim_v ? l->head_dim_v : m->hp.head_dim_v;
        l->n_ff = l->n_ff ? l->n_ff : m->hp.n_ff;
        l->n_head = l->n_head ? l->n_head : m->hp.n_head;
    }
    if (!check_layer_params(&ld) || !bind_globals(&ld))
        goto fail;
    for (uint32_t il = 0; il < m->hp.n_layer; il++)
        if (!bind_layer(&ld, il))
            goto fail;
    return m;
fail:
    corral_model_free(m);
    return NULL;
}

void corral_model_free(corral_model *m)
{
    if (!m)
        return;
    lora_free_all(m);
    corral_vocab_free(m->vocab);
    for (uint32_t il = 0; m->layers && il < m->hp.n_layer; il++) {
        free(m->layers[il].gate_exps_rows);
        free(m->layers[il].up_exps_rows);
        free(m->layers[il].down_exps_rows);
        free(m->layers[il].owned_k_b);
        free(m->layers[il].owned_gate);
        free(m->layers[il].owned_up);
        free(m->layers[il].owned_down);
        free(m->layers[il].owned_exps_b);
    }
    free(m->layers);
    free(m->alibi_slopes);
    gguf_close(m->file);
    free(m);
}

const corral_vocab *corral_model_vocab(const corral_model *m)
{
    return m->vocab;
}

uint32_t corral_model_n_ctx_train(const corral_model *m)
{
    return m->hp.n_ctx_train;
}

uint32_t corral_model_n_layer(const corral_model *m)
{
    return m->hp.n_layer;
}

uint32_t corral_model_n_vocab(const corral_model *m)
{
    return m->hp.n_vocab;
}

const char *corral_model_arch(const corral_model *m)
{
    return m->arch->name;
}

bool corral_model_is_embedding(const corral_model *m)
{
    return m->arch->tensors & ARCH_ENCODER;
}

uint32_t corral_model_n_embd(const corral_model *m)
{
    return m->hp.n_embd;
}

/*
 * LFM2 (see hf_family_lfm2.h): its config.json keys, which layers are convolutions, its
 * tensor names and the GGUF keys ollama's converter writes for it.
 */
#include "convert/hf_family_lfm2.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_WIDTH (1u << 24)

bool hf_family_is_lfm2(const hf_arch *a)
{
    return a->family == FAMILY_LFM2;
}

/* A positive integer key, absent (left as it is) or 1 to max. */
static bool read_count(const json_t *config, const char *key, uint32_t max, uint32_t *out,
                       corral_error *err)
{
    const json_t *v = json_object_get(config, key);
    if (!v || json_is_null(v))
        return true;
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > max) {
        corral_error_set(err, "config.json: %s must be an integer from 1 to %u", key, max);
        return false;
    }
    *out = (uint32_t)json_integer_value(v);
    return true;
}

/* A positive number key, absent (false, *out left) or positive. */
static bool read_number(const json_t *obj, const char *key, const char *section, bool *present,
                        float *out, corral_error *err)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return true;
    double d = json_number_value(v);
    if (!json_is_number(v) || !(d > 0) || d > 3.4e38) {
        corral_error_set(err, "config.json: %s%s must be a positive number", section, key);
        return false;
    }
    *out = (float)d;
    if (present)
        *present = true;
    return true;
}

/* The FFN width: block_ff_dim over intermediate_size, then, with block_auto_adjust_ff_dim,
 * two thirds of it times block_ffn_dim_multiplier rounded up to block_multiple_of. */
static bool read_ff(const json_t *config, hf_params *p, corral_error *err)
{
    uint32_t ff = p->n_ff, multiple = 0;
    float multiplier = 0;
    const json_t *adjust = json_object_get(config, "block_auto_adjust_ff_dim");
    if (!read_count(config, "block_ff_dim", MAX_WIDTH, &ff, err) ||
        !read_count(config, "block_multiple_of", MAX_WIDTH, &multiple, err) ||
        !read_number(config, "block_ffn_dim_multiplier", "", NULL, &multiplier, err))
        return false;
    if (adjust && !json_is_boolean(adjust)) {
        corral_error_set(err, "config.json: block_auto_adjust_ff_dim must be true or false");
        return false;
    }
    if (json_is_true(adjust) && multiple) {
        ff = 2 * ff / 3;
        if (multiplier > 0)
            ff = (uint32_t)((float)ff * multiplier);
        uint64_t rounded = (uint64_t)multiple * (((uint64_t)ff + multiple - 1) / multiple);
        if (rounded == 0 || rounded > MAX_WIDTH) {
            corral_error_set(err, "config.json: the adjusted FFN width %llu is not from 1 to %u",
                             (unsigned long long)rounded, MAX_WIDTH);
            return false;
        }
        ff = (uint32_t)rounded;
    }
    p->n_ff = ff;
    return true;
}

/* Which layers are attention: layer_types' "full_attention" ones, every layer without it. */
static bool read_layer_types(const json_t *config, hf_params *p, corral_error *err)
{
    const json_t *types = json_object_get(config, "layer_types");
    if (types && !json_is_null(types) && !json_is_array(types)) {
        corral_error_set(err, "config.json: layer_types must be a list");
        return false;
    }
    if (!(p->kv_heads_per_layer = calloc(p->n_layer, sizeof *p->kv_heads_per_layer))) {
        corral_error_set(err, "out of memory");
        return false;
    }
    for (uint32_t i = 0; i < p->n_layer; i++) {
        const char *type = json_string_value(json_array_get(types, i));
        bool attention = !json_is_array(types) || (type && !strcmp(type, "full_attention"));
        p->kv_heads_per_layer[i] = attention ? p->n_head_kv : 0;
    }
    return true;
}

hf_status hf_lfm2_read_config(const json_t *config, hf_params *p, corral_error *err)
{
    bool moe = !strcmp(p->arch->gguf_name, "lfm2moe");
    const json_t *rope = json_object_get(config, "rope_parameters");
    uint32_t dense = 0, experts = p->n_expert; /* num_local_experts or num_experts */
    if (!read_ff(config, p, err) ||
        !read_number(config, "norm_eps", "", &p->has_eps, &p->rms_eps, err) ||
        !read_count(config, "conv_L_cache", 64, &p->conv_kernel, err) ||
        (!p->has_theta && json_is_object(rope) &&
         !read_number(rope, "rope_theta", "rope_parameters.", &p->has_theta, &p->rope_theta,
                      err)) ||
        !read_count(config, "num_dense_layers", p->n_layer, &dense, err) ||
        !read_number(config, "routed_scaling_factor", "", NULL, &p->expert_weights_scale,
                     err) ||
        !read_layer_types(config, p, err))
        return HF_INVALID;
    if (!p->conv_kernel) {
        corral_error_set(err, "config.json has no conv_L_cache");
        return HF_INVALID;
    }
    if (moe != (experts > 0) ||
        (moe && (!p->n_ff_expert || !p->n_expert_used || p->n_expert_used > experts))) {
        corral_error_set(err, "config.json: a %s %s", p->arch->hf_name,
                         moe ? "needs num_experts, num_experts_per_tok (at most num_experts) "
                               "and moe_intermediate_size"
                             : "has no experts");
        return HF_INVALID;
    }
    p->n_expert = experts;
    p->n_dense_lead = dense;
    /* ollama's converter gives LFM2-8B-A1B, which claims 128000 positions, 32768 */
    if (moe && p->n_ctx == 128000 && p->vocab_size == 65536 && p->n_embd == 2048 &&
        p->n_layer == 40 && p->n_ff == 11776 && p->n_head == 32 && p->n_head_kv == 8 &&
        dense == 2 && experts == 64 && p->n_expert_used == 4 && p->n_ff_expert == 1536)
        p->n_ctx = 32768;
    return HF_OK;
}

/* Hugging Face name pieces and their GGUF names, tried before the common ones. */
static const char *const lfm2_renames[][2] = {
    {"model.embedding_norm", "token_embd_norm"},
    {"operator_norm", "attn_norm"},
    {"self_attn.out_proj", "attn_output"},
    {"self_attn.q_layernorm", "attn_q_norm"},
    {"self_attn.k_layernorm", "attn_k_norm"},
    {"conv.conv", "shortconv.conv"},
    {"conv.in_proj", "shortconv.in_proj"},
    {"conv.out_proj", "shortconv.out_proj"},
    {"feed_forward.gate.", "ffn_gate_inp."},
    {"feed_forward.expert_bias", "exp_probs_b.bias"},
    {"feed_forward.w1", "ffn_gate"},
    {"feed_forward.w2", "ffn_down"},
    {"feed_forward.w3", "ffn_up"},
};

const char *const *hf_lfm2_rename_at(const char *s)
{
    return hf_family_rename_in(lfm2_renames, sizeof lfm2_renames / sizeof lfm2_renames[0], s);
}

bool hf_lfm2_known_tensor(const hf_params *p, unsigned layer, const char *suffix)
{
    static const char *const both[] = {"attn_norm.weight", "ffn_norm.weight"};
    static const char *const conv[] = {"shortconv.in_proj.weight", "shortconv.conv.weight",
                                       "shortconv.out_proj.weight"};
    static const char *const attention[] = {"attn_q.weight",      "attn_k.weight",
                                            "attn_v.weight",      "attn_output.weight",
                                            "attn_q_norm.weight", "attn_k_norm.weight"};
    static const char *const ffn[] = {"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
    static const char *const router[] = {"ffn_gate_inp.weight", "exp_probs_b.bias"};
    bool experts = p->n_expert && layer >= p->n_dense_lead;
    return hf_family_listed(suffix, both, 2) ||
           (p->kv_heads_per_layer[layer] ? hf_family_listed(suffix, attention, 6)
                                         : hf_family_listed(suffix, conv, 3)) ||
           (experts ? hf_family_listed(suffix, router, 2) : hf_family_listed(suffix, ffn, 3));
}

bool hf_lfm2_write_keys(const hf_params *p, gguf_writer *w, corral_error *err)
{
    const char *a = p->arch->gguf_name;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    bool ok = gguf_writer_add_array(w, KEY("attention.head_count_kv"), GGUF_TYPE_UINT32,
                                    p->kv_heads_per_layer, p->n_layer, err) &&
              gguf_writer_add_u32(w, KEY("shortconv.l_cache"), p->conv_kernel, err);
    if (ok && !p->has_head_dim) /* else written with the common keys */
        ok = gguf_writer_add_u32(w, KEY("attention.key_length"), p->head_dim, err) &&
             gguf_writer_add_u32(w, KEY("attention.value_length"), p->head_dim, err);
    if (ok && p->n_expert)
        ok = gguf_writer_add_u32(w, KEY("leading_dense_block_count"), p->n_dense_lead, err) &&
             gguf_writer_add_u32(w, KEY("expert_gating_func"), 2, err) && /* sigmoid */
             gguf_writer_add_f32(w, KEY("expert_weights_scale"),
                                 p->expert_weights_scale > 0 ? p->expert_weights_scale : 1.0f,
                                 err);
#undef KEY
    return ok;
}

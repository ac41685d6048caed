/*
 * DeepSeek V3 and GLM-4 MoE Lite as DeepSeek-V2's GGUF (see hf_family_deepseek2.h): their
 * config.json keys, their tensor names and the keys ollama's converters write for each. The
 * split of GLM-4 MoE Lite's kv_b_proj is hf_convert.c's, through strided views.
 */
#include "convert/hf_family_deepseek2.h"

#include <stdio.h>
#include <string.h>

bool hf_family_is_deepseek2(const hf_arch *a)
{
    return a->family == FAMILY_DEEPSEEK2;
}

bool hf_deepseek2_splits_kv_b(const hf_arch *a)
{
    return hf_family_is_deepseek2(a) && !strcmp(a->hf_name, "Glm4MoeLiteForCausalLM");
}

const char *hf_deepseek2_pre_tokenizer(const hf_arch *a)
{
    return hf_deepseek2_splits_kv_b(a) ? "glm4" : "deepseek-v3";
}

/* V3's scoring_func (GLM-4 MoE Lite's routing is sigmoid's) and YaRN's log multiplier. */
static hf_status read_v3_config(const json_t *config, hf_params *p, corral_error *err)
{
    const json_t *scoring = json_object_get(config, "scoring_func");
    const json_t *scaling = json_object_get(config, "rope_scaling");
    const json_t *mscale = json_is_object(scaling) ? json_object_get(scaling, "mscale_all_dim")
                                                   : NULL;
    const char *s = json_string_value(scoring);
    if (scoring && !json_is_null(scoring) &&
        (!s || (strcmp(s, "softmax") != 0 && strcmp(s, "sigmoid") != 0))) {
        corral_error_set(err, "config.json: scoring_func '%.40s' is not softmax or sigmoid",
                         s ? s : "(not a string)");
        return HF_INVALID;
    }
    if (mscale && !json_is_null(mscale) &&
        (!json_is_number(mscale) || json_number_value(mscale) < 0 ||
         json_number_value(mscale) > 1000)) {
        corral_error_set(err, "config.json: rope_scaling.mscale_all_dim must be a number from 0 "
                         "to 1000");
        return HF_INVALID;
    }
    p->expert_gating = !s ? 0 : !strcmp(s, "softmax") ? 1 : 2;
    p->yarn_log_multiplier = 0.1f * (float)json_number_value(mscale);
    if (!p->has_theta) {
        p->has_theta = true;
        p->rope_theta = 10000.0f;
    }
    return HF_OK;
}

hf_status hf_deepseek2_read_config(const json_t *config, hf_params *p, corral_error *err)
{
    bool glm = hf_deepseek2_splits_kv_b(p->arch);
    const json_t *norm = json_object_get(config, "norm_topk_prob");
    const json_t *scale = json_object_get(config, "routed_scaling_factor");
    const json_t *dense = json_object_get(config, "first_k_dense_replace");
    if (!hf_family_read_count(config, "q_lora_rank", glm, 1u << 20, &p->q_lora_rank, err) ||
        !hf_family_read_count(config, "kv_lora_rank", true, 1u << 20, &p->kv_lora_rank, err) ||
        !hf_family_read_count(config, "qk_nope_head_dim", true, 65536, &p->qk_nope_dim, err) ||
        !hf_family_read_count(config, "qk_rope_head_dim", true, 65536, &p->qk_rope_dim, err) ||
        !hf_family_read_count(config, "v_head_dim", true, 65536, &p->v_head_dim, err) ||
        !hf_family_read_count(config, "n_shared_experts", false, 4096, &p->n_shared_experts, err) ||
        !hf_family_read_count(config, "n_group", false, 4096, &p->expert_groups, err) ||
        !hf_family_read_count(config, "topk_group", false, 4096, &p->expert_groups_used, err))
        return HF_INVALID;
    if ((norm && !json_is_null(norm) && !json_is_boolean(norm)) ||
        (scale && !json_is_null(scale) &&
         (!json_is_number(scale) || json_number_value(scale) < 0)) ||
        (dense && !json_is_null(dense) &&
         (!json_is_integer(dense) || json_integer_value(dense) < 0 ||
          json_integer_value(dense) > p->n_layer))) {
        corral_error_set(err, "config.json: norm_topk_prob must be true or false, "
                         "routed_scaling_factor a non-negative number and "
                         "first_k_dense_replace at most num_hidden_layers");
        return HF_INVALID;
    }
    if (glm) { /* ollama's defaults for it */
        p->expert_groups = p->expert_groups ? p->expert_groups : 1;
        p->expert_groups_used = p->expert_groups_used ? p->expert_groups_used : 1;
    }
    /* groups with none used route no token; the engine refuses that file */
    if (p->expert_groups && !p->expert_groups_used) {
        corral_error_set(err, "config.json gives n_group without topk_group, the groups a "
                         "token's experts come from");
        return HF_INVALID;
    }
    if (!p->n_expert || !p->n_ff_expert || p->qk_rope_dim % 2) {
        corral_error_set(err, "config.json: a %s needs n_routed_experts, num_experts_per_tok "
                         "and moe_intermediate_size, and an even qk_rope_head_dim",
                         p->arch->hf_name);
        return HF_INVALID;
    }
    if (p->expert_groups_used > p->expert_groups ||
        (p->expert_groups && p->n_expert % p->expert_groups)) {
        corral_error_set(err, "config.json: %u routed experts of width %u in %u groups (%u "
                         "used) do not make a %s", p->n_expert, p->n_ff_expert,
                         p->expert_groups, p->expert_groups_used, p->arch->hf_name);
        return HF_INVALID;
    }
    p->expert_weights_norm = json_is_true(norm);
    p->expert_weights_scale = (float)json_number_value(scale);
    p->n_dense_lead = (uint32_t)json_integer_value(dense);
    p->has_head_dim = false;
    if (!glm)
        return read_v3_config(config, p, err);
    p->expert_gating = 2; /* sigmoid */
    p->n_head_kv = 1;     /* the latent is every head's */
    if (!p->has_theta) {
        p->has_theta = true;
        p->rope_theta = 1000000.0f;
    }
    return HF_OK;
}

/* Hugging Face name pieces and their GGUF names, tried before the common ones. */
static const char *const deepseek2_renames[][2] = {
    {"self_attn.kv_a_proj_with_mqa", "attn_kv_a_mqa"},
    {"self_attn.kv_a_layernorm", "attn_kv_a_norm"},
    {"self_attn.kv_b_proj", "attn_kv_b"},
    {"self_attn.q_a_proj", "attn_q_a"},
    {"self_attn.q_a_layernorm", "attn_q_a_norm"},
    {"self_attn.q_b_proj", "attn_q_b"},
    {"mlp.shared_experts.down_proj", "ffn_down_shexp"},
    {"mlp.shared_experts.gate_proj", "ffn_gate_shexp"},
    {"mlp.shared_experts.up_proj", "ffn_up_shexp"},
    {"mlp.gate.e_score_correction_bias", "exp_probs_b.bias"},
};

const char *const *hf_deepseek2_rename_at(const char *s)
{
    return hf_family_rename_in(deepseek2_renames,
                               sizeof deepseek2_renames / sizeof deepseek2_renames[0], s);
}

bool hf_deepseek2_skipped_tensor(const hf_params *p, const char *name)
{
    unsigned layer;
    return sscanf(name, "model.layers.%u.", &layer) == 1 && layer >= p->n_layer;
}

bool hf_deepseek2_known_tensor(const hf_params *p, unsigned layer, const char *suffix)
{
    static const char *const attention[] = {
        "attn_norm.weight",      "attn_kv_a_mqa.weight", "attn_kv_a_norm.weight",
        "attn_kv_b.weight",      "attn_output.weight",   "ffn_norm.weight",
    };
    static const char *const q_lora[] = {"attn_q_a.weight", "attn_q_a_norm.weight",
                                         "attn_q_b.weight"};
    static const char *const ffn[] = {"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
    static const char *const moe[] = {"ffn_gate_inp.weight",   "exp_probs_b.bias",
                                      "ffn_gate_shexp.weight", "ffn_up_shexp.weight",
                                      "ffn_down_shexp.weight"};
    return hf_family_listed(suffix, attention, sizeof attention / sizeof attention[0]) ||
           (p->q_lora_rank ? hf_family_listed(suffix, q_lora, 3) : !strcmp(suffix, "attn_q.weight")) ||
           (layer < p->n_dense_lead ? hf_family_listed(suffix, ffn, 3) : hf_family_listed(suffix, moe, 5));
}

bool hf_deepseek2_write_keys(const hf_params *p, gguf_writer *w, corral_error *err)
{
    const char *a = p->arch->gguf_name;
    bool split = hf_deepseek2_splits_kv_b(p->arch);
    uint32_t head_k = p->qk_nope_dim + p->qk_rope_dim;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    /* with kv_b split, the lengths are the latent cache row's and the _mla keys each head's */
    bool ok =
        gguf_writer_add_str(w, "general.type", "model", 5, err) &&
        gguf_writer_add_u32(w, KEY("attention.key_length"),
                            split ? p->kv_lora_rank + p->qk_rope_dim : head_k, err) &&
        gguf_writer_add_u32(w, KEY("attention.value_length"),
                            split ? p->kv_lora_rank : p->v_head_dim, err) &&
        gguf_writer_add_u32(w, KEY("attention.q_lora_rank"), p->q_lora_rank, err) &&
        gguf_writer_add_u32(w, KEY("attention.kv_lora_rank"), p->kv_lora_rank, err) &&
        gguf_writer_add_u32(w, KEY("rope.dimension_count"), p->qk_rope_dim, err) &&
        gguf_writer_add_u32(w, KEY("leading_dense_block_count"), p->n_dense_lead, err) &&
        gguf_writer_add_u32(w, KEY("expert_shared_count"), p->n_shared_experts, err) &&
        gguf_writer_add_u32(w, KEY("expert_gating_func"), p->expert_gating, err) &&
        gguf_writer_add_bool(w, KEY("expert_weights_norm"), p->expert_weights_norm, err) &&
        gguf_writer_add_f32(w, KEY("expert_weights_scale"), p->expert_weights_scale, err);
    if (ok && split)
        ok = gguf_writer_add_u32(w, KEY("attention.key_length_mla"), head_k, err) &&
             gguf_writer_add_u32(w, KEY("attention.value_length_mla"), p->v_head_dim, err);
    if (ok && p->expert_groups)
        ok = gguf_writer_add_u32(w, KEY("expert_group_count"), p->expert_groups, err) &&
             gguf_writer_add_u32(w, KEY("expert_group_used_count"), p->expert_groups_used, err);
    if (ok && p->yarn_log_multiplier > 0) /* V3's */
        ok = gguf_writer_add_f32(w, KEY("rope.scaling.yarn_log_multiplier"),
                                 p->yarn_log_multiplier, err);
#undef KEY
    return ok;
}

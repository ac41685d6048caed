/*
 * Nemotron-H (see hf_family_nemotron_h.h): its config.json keys, its layers' kinds, its
 * tensor names and shapes, and the GGUF keys ollama's converter writes for it.
 */
#include "convert/hf_family_nemotron_h.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_WIDTH (1u << 24)

/* The table's NemotronHForCausalLM with experts. */
static const hf_arch nemotron_h_moe = {"NemotronHForCausalLM", "nemotron_h_moe",
                                       FAMILY_NEMOTRON_H, false};

bool hf_family_is_nemotron_h(const hf_arch *a)
{
    return a->family == FAMILY_NEMOTRON_H;
}

/* A number key of at least 0 (above 0 when positive): absent leaves *out. */
static bool read_number(const json_t *config, const char *key, bool positive, float *out,
                        corral_error *err)
{
    const json_t *v = json_object_get(config, key);
    if (!v || json_is_null(v))
        return true;
    double d = json_number_value(v);
    if (!json_is_number(v) || d < 0 || (positive && d == 0) || d > 3.4e38) {
        corral_error_set(err, "config.json: %s must be a %s number", key,
                         positive ? "positive" : "non-negative");
        return false;
    }
    *out = (float)d;
    return true;
}

/* hybrid_override_pattern (a string, or strings to join), one kind per layer. */
static bool read_pattern(const json_t *config, hf_params *p, corral_error *err)
{
    const json_t *v = json_object_get(config, "hybrid_override_pattern");
    size_t len = 0;
    if (!(p->layer_kinds = calloc(p->n_layer + 1, 1))) {
        corral_error_set(err, "out of memory");
        return false;
    }
    bool ok = json_is_string(v) || json_is_array(v);
    for (size_t i = 0; ok && i < (json_is_array(v) ? json_array_size(v) : 1); i++) {
        const json_t *part = json_is_array(v) ? json_array_get(v, i) : v;
        const char *s = json_string_value(part);
        size_t n = json_string_length(part);
        for (size_t k = 0; ok && s && k < n; k++) {
            if (s[k] == ' ' || s[k] == '\t' || s[k] == '\n')
                continue; /* ollama trims the pattern */
            ok = len < p->n_layer && strchr("M*A-E", s[k]) && s[k] != '\0';
            if (ok)
                p->layer_kinds[len++] = s[k] == 'A' ? '*' : s[k];
        }
        ok = ok && s;
    }
    if (!ok || len != p->n_layer) {
        corral_error_set(err, "config.json: hybrid_override_pattern must give each of the %u "
                         "layers a kind (M, *, A, - or E)", p->n_layer);
        return false;
    }
    return true;
}

hf_status hf_nemotron_h_read_config(const json_t *config, hf_params *p, corral_error *err)
{
    float eps = 1e-5f, partial = 0;
    p->ssm_groups = 1;
    uint32_t shared = 0, shared_ff = 0, groups = 0, groups_used = 0;
    const json_t *norm_topk = json_object_get(config, "norm_topk_prob");
    if (!hf_family_read_count(config, "conv_kernel", true, 64, &p->conv_kernel, err) ||
        !hf_family_read_count(config, "ssm_state_size", true, 65536, &p->ssm_state, err) ||
        !hf_family_read_count(config, "mamba_num_heads", true, 65536, &p->ssm_heads, err) ||
        !hf_family_read_count(config, "mamba_head_dim", true, 65536, &p->ssm_head_dim, err) ||
        !hf_family_read_count(config, "n_groups", false, 65536, &p->ssm_groups, err) ||
        !read_number(config, json_object_get(config, "norm_eps") ? "norm_eps"
                                                                  : "layer_norm_epsilon",
                     true, &eps, err) ||
        !read_number(config, "partial_rotary_factor", true, &partial, err) ||
        !hf_family_read_count(config, json_object_get(config, "n_shared_experts") ? "n_shared_experts"
                                                                        : "num_shared_experts",
                    false, 4096, &shared, err) ||
        !hf_family_read_count(config, "moe_shared_expert_intermediate_size", false, MAX_WIDTH,
                    &shared_ff, err) ||
        !read_number(config, "routed_scaling_factor", false, &p->expert_weights_scale, err) ||
        !hf_family_read_count(config, "n_group", false, 4096, &groups, err) ||
        !hf_family_read_count(config, "topk_group", false, 4096, &groups_used, err) ||
        !read_pattern(config, p, err))
        return HF_INVALID;
    if (norm_topk && !json_is_null(norm_topk) && !json_is_boolean(norm_topk)) {
        corral_error_set(err, "config.json: norm_topk_prob must be true or false");
        return HF_INVALID;
    }
    if ((uint64_t)p->ssm_heads * p->ssm_head_dim > MAX_WIDTH || p->ssm_heads % p->ssm_groups) {
        corral_error_set(err, "config.json: %u Mamba2 heads of %u (%u groups) do not make a "
                         "Mamba2 mixer", p->ssm_heads, p->ssm_head_dim, p->ssm_groups);
        return HF_INVALID;
    }
    if (partial > 1) {
        corral_error_set(err, "config.json: partial_rotary_factor must be at most 1");
        return HF_INVALID;
    }
    bool moe = p->n_expert || p->n_expert_used || p->n_ff_expert;
    if (moe && (!p->n_expert || !p->n_expert_used || p->n_expert_used > p->n_expert)) {
        corral_error_set(err, "config.json: a %s with experts needs n_routed_experts (or "
                         "num_experts) and num_experts_per_tok, at most as many",
                         p->arch->hf_name);
        return HF_INVALID;
    }
    if (moe)
        p->arch = &nemotron_h_moe;
    p->n_ff_expert = moe ? (p->n_ff_expert ? p->n_ff_expert : p->n_ff) : 0;
    p->n_ff_shared = shared_ff;
    p->n_shared_experts = shared;
    p->expert_groups = groups;
    p->expert_groups_used = groups_used;
    p->expert_weights_norm = json_is_true(norm_topk);
    p->rms_eps = p->ln_eps = eps;
    p->has_eps = p->has_ln_eps = true;
    if (!p->has_theta) { /* ollama's default */
        p->has_theta = true;
        p->rope_theta = 10000.0f;
    }
    p->rope_dims = partial > 0 ? (uint32_t)((float)p->head_dim * partial) : 0;
    p->kv_heads_per_layer = calloc(p->n_layer, sizeof *p->kv_heads_per_layer);
    p->ffn_per_layer = calloc(p->n_layer, sizeof *p->ffn_per_layer);
    if (!p->kv_heads_per_layer || !p->ffn_per_layer) {
        corral_error_set(err, "out of memory");
        return HF_IO;
    }
    for (uint32_t i = 0; i < p->n_layer; i++) {
        char kind = p->layer_kinds[i];
        if (kind == 'E' && !moe) {
            corral_error_set(err, "config.json: layer %u is a mixture of experts, but the "
                             "config gives no experts", i);
            return HF_INVALID;
        }
        p->kv_heads_per_layer[i] = kind == '*' ? p->n_head_kv : 0;
        p->ffn_per_layer[i] = kind == '-' ? p->n_ff : kind == 'E' ? p->n_ff_expert : 0;
    }
    return HF_OK;
}

/* Hugging Face name pieces and their GGUF names, tried before the common ones. */
static const char *const nemotron_h_renames[][2] = {
    {"backbone.embeddings", "token_embd"},
    {"backbone.norm_f", "output_norm"},
    {"backbone.layers", "blk"},
    {"mixer.in_proj", "ssm_in"},
    {"mixer.out_proj", "ssm_out"},
    {"mixer.dt_bias", "ssm_dt.bias"},
    {"mixer.A_log", "ssm_a"},
    {"mixer.D", "ssm_d"},
    {"mixer.conv1d", "ssm_conv1d"},
    {"mixer.norm.weight", "ssm_norm.weight"},
    {"mixer.q_proj", "attn_q"},
    {"mixer.k_proj", "attn_k"},
    {"mixer.v_proj", "attn_v"},
    {"mixer.o_proj", "attn_output"},
    {"mixer.gate.e_score_correction_bias", "exp_probs_b.bias"},
    {"mixer.gate.", "ffn_gate_inp."},
    {"mixer.fc1_latent_proj", "ffn_latent_in"},
    {"mixer.fc2_latent_proj", "ffn_latent_out"},
    {"mixer.shared_experts.up_proj", "ffn_up_shexp"},
    {"mixer.shared_experts.down_proj", "ffn_down_shexp"},
    {"mixer.up_proj", "ffn_up"},
    {"mixer.down_proj", "ffn_down"},
    {".norm.weight", ".attn_norm.weight"}, /* each layer's one norm */
};

const char *const *hf_nemotron_h_rename_at(const char *s)
{
    return hf_family_rename_in(nemotron_h_renames,
                               sizeof nemotron_h_renames / sizeof nemotron_h_renames[0], s);
}

bool hf_nemotron_h_skipped_tensor(const char *name)
{
    return strncmp(name, "mtp.", 4) == 0;
}

bool hf_nemotron_h_known_tensor(const hf_params *p, unsigned layer, const char *suffix)
{
    static const char *const mamba[] = {
        "ssm_in.weight", "ssm_conv1d.weight", "ssm_conv1d.bias", "ssm_dt.bias", "ssm_a",
        "ssm_d",         "ssm_norm.weight",   "ssm_out.weight",
    };
    static const char *const attention[] = {
        "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
        "attn_q.bias",   "attn_k.bias",   "attn_v.bias",   "attn_output.bias",
    };
    static const char *const ffn[] = {"ffn_up.weight", "ffn_down.weight", "ffn_up.bias",
                                      "ffn_down.bias"};
    static const char *const experts[] = {
        "ffn_gate_inp.weight",   "exp_probs_b.bias",       "ffn_up_shexp.weight",
        "ffn_down_shexp.weight", "ffn_latent_in.weight",   "ffn_latent_out.weight",
    };
    if (!strcmp(suffix, "attn_norm.weight"))
        return true;
    switch (p->layer_kinds[layer]) {
    case 'M': return hf_family_listed(suffix, mamba, sizeof mamba / sizeof mamba[0]);
    case '*': return hf_family_listed(suffix, attention, sizeof attention / sizeof attention[0]);
    case '-': return hf_family_listed(suffix, ffn, sizeof ffn / sizeof ffn[0]);
    default: return hf_family_listed(suffix, experts, sizeof experts / sizeof experts[0]);
    }
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

bool hf_nemotron_h_reshape(const hf_params *p, const char *name, uint32_t *n_dims,
                           int64_t ne[4])
{
    if (*n_dims != 1)
        return false;
    if (ends_with(name, ".ssm_a") || ends_with(name, ".ssm_d")) { /* one column */
        ne[1] = ne[0];
        ne[0] = 1;
    } else if (ends_with(name, ".ssm_norm.weight") && ne[0] % p->ssm_groups == 0) {
        ne[1] = p->ssm_groups; /* one row per group */
        ne[0] /= p->ssm_groups;
    } else {
        return false;
    }
    *n_dims = 2;
    return true;
}

void hf_nemotron_h_ffn_seen(hf_params *p, const char *name, uint64_t rows)
{
    unsigned layer;
    char again[64];
    if (sscanf(name, "blk.%u.", &layer) != 1 || layer >= p->n_layer ||
        p->layer_kinds[layer] != '-' || rows == 0 || rows > MAX_WIDTH)
        return;
    snprintf(again, sizeof again, "blk.%u.ffn_up.weight", layer);
    if (!strcmp(name, again))
        p->ffn_per_layer[layer] = (uint32_t)rows;
}

bool hf_nemotron_h_write_keys(const hf_params *p, gguf_writer *w, corral_error *err)
{
    const char *a = p->arch->gguf_name;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    bool ok = gguf_writer_add_array(w, KEY("attention.head_count_kv"), GGUF_TYPE_UINT32,
                                    p->kv_heads_per_layer, p->n_layer, err) &&
              gguf_writer_add_array(w, KEY("feed_forward_length"), GGUF_TYPE_UINT32,
                                    p->ffn_per_layer, p->n_layer, err) &&
              gguf_writer_add_f32(w, KEY("attention.layer_norm_epsilon"), p->ln_eps, err) &&
              gguf_writer_add_u32(w, KEY("ssm.conv_kernel"), p->conv_kernel, err) &&
              gguf_writer_add_u32(w, KEY("ssm.inner_size"), p->ssm_heads * p->ssm_head_dim,
                                  err) &&
              gguf_writer_add_u32(w, KEY("ssm.state_size"), p->ssm_state, err) &&
              gguf_writer_add_u32(w, KEY("ssm.group_count"), p->ssm_groups, err) &&
              gguf_writer_add_u32(w, KEY("ssm.time_step_rank"), p->ssm_heads, err);
    if (ok && !p->has_head_dim) /* else written with the common keys */
        ok = gguf_writer_add_u32(w, KEY("attention.key_length"), p->head_dim, err) &&
             gguf_writer_add_u32(w, KEY("attention.value_length"), p->head_dim, err);
    if (ok && p->rope_dims)
        ok = gguf_writer_add_u32(w, KEY("rope.dimension_count"), p->rope_dims, err);
    if (ok && p->n_expert && p->n_shared_experts)
        ok = gguf_writer_add_u32(w, KEY("expert_shared_count"), p->n_shared_experts, err);
    if (ok && p->n_expert)
        ok = gguf_writer_add_bool(w, KEY("expert_weights_norm"), p->expert_weights_norm,
                                  err) &&
             gguf_writer_add_f32(w, KEY("expert_weights_scale"), p->expert_weights_scale, err);
    if (ok && p->n_expert && p->expert_groups)
        ok = gguf_writer_add_u32(w, KEY("expert_group_count"), p->expert_groups, err);
    if (ok && p->n_expert && p->expert_groups_used)
        ok = gguf_writer_add_u32(w, KEY("expert_group_used_count"), p->expert_groups_used,
                                 err);
#undef KEY
    return ok;
}

/*
 * Laguna (see hf_family_laguna.h): its config.json keys, which layers slide and which are
 * dense, its tensor names and the GGUF keys ollama's converter writes for it.
 */
#include "convert/hf_family_laguna.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_WIDTH (1u << 24)

bool hf_family_is_laguna(const hf_arch *a)
{
    return a->family == FAMILY_LAGUNA;
}

/* A number key of obj: absent leaves *out; else it must be a non-negative number. */
static bool read_number(const json_t *obj, const char *section, const char *key, float *out,
                        corral_error *err)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return true;
    double d = json_number_value(v);
    if (!json_is_number(v) || !(d >= 0) || d > 3.4e38) {
        corral_error_set(err, "config.json: %s%s must be a number of at least 0", section, key);
        return false;
    }
    *out = (float)d;
    return true;
}

/* A true-or-false key: absent leaves *out. */
static bool read_flag(const json_t *config, const char *key, bool *out, corral_error *err)
{
    const json_t *v = json_object_get(config, key);
    if (!v || json_is_null(v))
        return true;
    if (!json_is_boolean(v)) {
        corral_error_set(err, "config.json: %s must be true or false", key);
        return false;
    }
    *out = json_is_true(v);
    return true;
}

/* One kind of layer's RoPE from obj (section names it in messages). */
static bool read_rope_params(const json_t *obj, const char *section, hf_rope_params *r,
                             corral_error *err)
{
    if (!obj || json_is_null(obj))
        return true;
    if (!json_is_object(obj)) {
        corral_error_set(err, "config.json: %s must be an object", section);
        return false;
    }
    char at[64];
    snprintf(at, sizeof at, "%s.", section);
    const json_t *type = json_object_get(obj, "rope_type");
    if (!type || json_is_null(type))
        type = json_object_get(obj, "type");
    if (type && !json_is_null(type) && !json_is_string(type)) {
        corral_error_set(err, "config.json: %srope_type must be a string", at);
        return false;
    }
    r->type = json_string_value(type);
    const json_t *ctx = json_object_get(obj, "original_max_position_embeddings");
    if (ctx && !json_is_null(ctx)) {
        if (!json_is_integer(ctx) || json_integer_value(ctx) < 0 ||
            json_integer_value(ctx) > UINT32_MAX) {
            corral_error_set(err, "config.json: %soriginal_max_position_embeddings must be an "
                             "integer from 0 to %u", at, UINT32_MAX);
            return false;
        }
        r->original_ctx = (uint32_t)json_integer_value(ctx);
    }
    return read_number(obj, at, "rope_theta", &r->theta, err) &&
           read_number(obj, at, "factor", &r->factor, err) &&
           read_number(obj, at, "beta_fast", &r->beta_fast, err) &&
           read_number(obj, at, "beta_slow", &r->beta_slow, err) &&
           read_number(obj, at, "attention_factor", &r->attention_factor, err) &&
           read_number(obj, at, "partial_rotary_factor", &r->partial, err);
}

/* rope_parameters (one set for every layer, or full_attention's or global_attention's and
 * sliding_attention's), and swa_rope_parameters where it does not nest a sliding set. */
static bool read_rope(const json_t *config, hf_laguna *l, corral_error *err)
{
    const json_t *rope = json_object_get(config, "rope_parameters");
    if (rope && !json_is_null(rope) && !json_is_object(rope)) {
        corral_error_set(err, "config.json: rope_parameters must be an object");
        return false;
    }
    const json_t *full = json_object_get(rope, "full_attention");
    const char *full_name = "rope_parameters.full_attention";
    if (!full) {
        full = json_object_get(rope, "global_attention");
        full_name = "rope_parameters.global_attention";
    }
    bool nested = full != NULL;
    const json_t *swa = nested ? json_object_get(rope, "sliding_attention") : NULL;
    hf_rope_params nested_swa = {0};
    if (!read_rope_params(nested ? full : rope, nested ? full_name : "rope_parameters",
                          &l->full, err) ||
        !read_rope_params(swa, "rope_parameters.sliding_attention", &nested_swa, err) ||
        !read_rope_params(json_object_get(config, "swa_rope_parameters"),
                          "swa_rope_parameters", &l->swa, err))
        return false;
    if (nested_swa.type || nested_swa.theta || nested_swa.factor || nested_swa.beta_fast ||
        nested_swa.beta_slow || nested_swa.attention_factor || nested_swa.partial ||
        nested_swa.original_ctx)
        l->swa = nested_swa;
    float partial = 0;
    if (!read_number(config, "", "partial_rotary_factor", &partial, err))
        return false;
    if (!l->full.partial)
        l->full.partial = partial ? partial : 1.0f;
    if (!l->swa.partial)
        l->swa.partial = l->full.partial;
    l->partial = partial ? partial : l->full.partial;
    return true;
}

/* Which layers are dense: mlp_only_layers, or mlp_layer_types' "dense" ones; ollama's
 * converter takes the first layer alone. */
static bool read_dense_layers(const json_t *config, hf_params *p, corral_error *err)
{
    const json_t *only = json_object_get(config, "mlp_only_layers");
    const json_t *types = json_object_get(config, "mlp_layer_types");
    bool first_only;
    if (json_is_array(only) && json_array_size(only) > 0) {
        first_only = json_array_size(only) == 1 && json_is_integer(json_array_get(only, 0)) &&
                     json_integer_value(json_array_get(only, 0)) == 0;
    } else if (json_is_array(types) && json_array_size(types) > 0) {
        size_t i;
        const json_t *t;
        first_only = true;
        json_array_foreach(types, i, t) {
            const char *s = json_string_value(t);
            bool dense = s && !strcasecmp(s, "dense");
            if (!dense && !(s && !strcasecmp(s, "sparse"))) {
                corral_error_set(err, "config.json: mlp_layer_types[%zu] is not \"dense\" or "
                                 "\"sparse\"", i);
                return false;
            }
            first_only = first_only && dense == (i == 0);
        }
    } else {
        first_only = false;
    }
    if (!first_only) {
        corral_error_set(err, "config.json: a %s's dense layers (mlp_only_layers or "
                         "mlp_layer_types) must be its first alone", p->arch->hf_name);
        return false;
    }
    p->n_dense_lead = 1;
    return true;
}

/* num_attention_heads_per_layer, when given: one nonzero count per layer. */
static bool read_heads(const json_t *config, hf_params *p, corral_error *err)
{
    const json_t *heads = json_object_get(config, "num_attention_heads_per_layer");
    if (!heads || json_is_null(heads) || (json_is_array(heads) && !json_array_size(heads)))
        return true;
    if (!json_is_array(heads) || json_array_size(heads) != p->n_layer) {
        corral_error_set(err, "config.json: num_attention_heads_per_layer must list one count "
                         "per layer (%u)", p->n_layer);
        return false;
    }
    if (!(p->laguna.heads = calloc(p->n_layer, sizeof *p->laguna.heads))) {
        corral_error_set(err, "out of memory");
        return false;
    }
    for (uint32_t i = 0; i < p->n_layer; i++) {
        const json_t *h = json_array_get(heads, i);
        if (!json_is_integer(h) || json_integer_value(h) < 1 || json_integer_value(h) > 65536 ||
            json_integer_value(h) % p->n_head_kv) {
            corral_error_set(err, "config.json: num_attention_heads_per_layer[%u] must be a "
                             "multiple of num_key_value_heads (%u) from 1 to 65536", i,
                             p->n_head_kv);
            return false;
        }
        p->laguna.heads[i] = (uint32_t)json_integer_value(h);
    }
    return true;
}

/* layer_types, when given: one "sliding_attention" or "full_attention" ("global_attention")
 * per layer. */
static bool read_layer_types(const json_t *config, hf_params *p, corral_error *err)
{
    const json_t *types = json_object_get(config, "layer_types");
    if (!types || json_is_null(types) || (json_is_array(types) && !json_array_size(types)))
        return true;
    if (!json_is_array(types) || json_array_size(types) != p->n_layer) {
        corral_error_set(err, "config.json: layer_types must list one type per layer (%u)",
                         p->n_layer);
        return false;
    }
    if (!(p->sliding_pattern = calloc(p->n_layer, 1))) {
        corral_error_set(err, "out of memory");
        return false;
    }
    p->n_sliding_pattern = p->n_layer;
    for (uint32_t i = 0; i < p->n_layer; i++) {
        const char *s = json_string_value(json_array_get(types, i));
        bool sliding = s && !strcasecmp(s, "sliding_attention");
        if (!sliding && !(s && (!strcasecmp(s, "full_attention") ||
                                !strcasecmp(s, "global_attention")))) {
            corral_error_set(err, "config.json: layer_types[%u] is not \"sliding_attention\", "
                             "\"full_attention\" or \"global_attention\"", i);
            return false;
        }
        p->sliding_pattern[i] = sliding;
    }
    p->laguna.layer_types = true;
    return true;
}

/* What ollama's converter refuses: anything but per-head gating, RMSNorm q/k norms and a
 * sigmoid router applied to the experts' outputs, an attention sink, sparse steps. */
static bool check_supported(const json_t *config, hf_params *p, corral_error *err)
{
    const json_t *gating = json_object_get(config, "gating");
    const char *g = json_string_value(gating);
    bool per_head = json_is_true(gating) || (g && (!strcasecmp(g, "per-head") ||
                                                   !strcasecmp(g, "true")));
    const json_t *norm = json_object_get(config, "qk_norm_type");
    bool rmsnorm = !norm || json_is_null(norm) ||
                   (json_is_string(norm) && !strcmp(json_string_value(norm), "rmsnorm"));
    bool sink = false, sigmoid = true, on_input = false;
    const json_t *step = json_object_get(config, "decoder_sparse_step"); /* 0 reads as 1 */
    if (step && !json_is_null(step) &&
        (!json_is_integer(step) || json_integer_value(step) < 0 ||
         json_integer_value(step) > 1)) {
        corral_error_set(err, "config.json: a %s's decoder_sparse_step must be 1",
                         p->arch->hf_name);
        return false;
    }
    if (!read_flag(config, "swa_attention_sink_enabled", &sink, err) ||
        !read_flag(config, "moe_router_use_sigmoid", &sigmoid, err) ||
        !read_flag(config, "moe_apply_router_weight_on_input", &on_input, err))
        return false;
    const char *why = sink         ? "an attention sink (swa_attention_sink_enabled)"
                      : !per_head  ? "attention gating other than per head (gating)"
                      : !rmsnorm   ? "q/k norms other than RMSNorm (qk_norm_type)"
                      : !sigmoid   ? "a softmax router (moe_router_use_sigmoid false)"
                      : on_input   ? "router weights on the experts' input"
                                     " (moe_apply_router_weight_on_input)"
                                   : NULL;
    if (why) {
        corral_error_set(err, "config.json: a %s with %s is not converted", p->arch->hf_name,
                         why);
        return false;
    }
    return true;
}

hf_status hf_laguna_read_config(const json_t *config, hf_params *p, corral_error *err)
{
    hf_laguna *l = &p->laguna;
    l->norm_topk = true;
    if (!p->has_head_dim || !json_object_get(config, "num_key_value_heads")) {
        corral_error_set(err, "config.json: a %s needs head_dim and num_key_value_heads",
                         p->arch->hf_name);
        return HF_INVALID;
    }
    uint32_t experts = 0;
    if (!check_supported(config, p, err) || !read_heads(config, p, err) ||
        !read_layer_types(config, p, err) || !read_dense_layers(config, p, err) ||
        !read_rope(config, l, err) ||
        !hf_family_read_count(config, "sliding_window", false, UINT32_MAX, &p->sliding_window,
                              err) ||
        !hf_family_read_count(config, "num_experts", true, 4096, &experts, err) ||
        !hf_family_read_count(config, "num_experts_per_tok", true, experts, &p->n_expert_used,
                              err) ||
        !hf_family_read_count(config, "moe_intermediate_size", true, MAX_WIDTH, &p->n_ff_expert,
                              err) ||
        !hf_family_read_count(config, "shared_expert_intermediate_size", true, MAX_WIDTH,
                              &p->n_ff_shared, err) ||
        !read_flag(config, "norm_topk_prob", &l->norm_topk, err) ||
        !read_number(config, "", "moe_routed_scaling_factor", &l->routed_scale, err))
        return HF_INVALID;
    if (p->n_layer < 2) {
        corral_error_set(err, "config.json: a %s needs a layer with experts after its dense "
                         "first", p->arch->hf_name);
        return HF_INVALID;
    }
    p->n_expert = experts;
    p->has_theta = false; /* its bases are rope_parameters' (hf_laguna_write_keys) */
    return HF_OK;
}

/* Hugging Face name pieces and their GGUF names, tried before the common ones. */
static const char *const laguna_renames[][2] = {
    {"self_attn.g_proj", "attn_g"},
    {"mlp.experts.e_score_correction_bias", "exp_probs_b.bias"},
    {"mlp.shared_expert.gate_proj", "ffn_gate_shexp"},
    {"mlp.shared_expert.up_proj", "ffn_up_shexp"},
    {"mlp.shared_expert.down_proj", "ffn_down_shexp"},
};

const char *const *hf_laguna_rename_at(const char *s)
{
    return hf_family_rename_in(laguna_renames, sizeof laguna_renames / sizeof laguna_renames[0],
                               s);
}

bool hf_laguna_known_tensor(const hf_params *p, unsigned layer, const char *suffix)
{
    static const char *const attention[] = {
        "attn_norm.weight",   "attn_q.weight",      "attn_k.weight",      "attn_v.weight",
        "attn_output.weight", "attn_q_norm.weight", "attn_k_norm.weight", "attn_g.weight",
        "ffn_norm.weight"};
    static const char *const dense[] = {"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
    static const char *const moe[] = {"ffn_gate_inp.weight",   "exp_probs_b.bias",
                                      "ffn_gate_shexp.weight", "ffn_up_shexp.weight",
                                      "ffn_down_shexp.weight"};
    return hf_family_listed(suffix, attention, sizeof attention / sizeof attention[0]) ||
           (layer < p->n_dense_lead ? hf_family_listed(suffix, dense, 3)
                                    : hf_family_listed(suffix, moe, 5));
}

/* The dimensions a head rotates: partial of head_dim, even, the whole head when that makes
 * none or too many. */
static uint32_t rope_dims(uint32_t head_dim, float partial)
{
    uint32_t dim = (uint32_t)((float)head_dim * partial);
    if (dim == 0 || dim > head_dim)
        dim = head_dim;
    dim -= dim % 2;
    return dim ? dim : head_dim;
}

bool hf_laguna_write_keys(const hf_params *p, gguf_writer *w, corral_error *err)
{
    const hf_laguna *l = &p->laguna;
    const hf_rope_params *full = &l->full, *swa = &l->swa;
    const char *type = full->type ? full->type : "";
    float factor = full->factor > 0 ? full->factor : 1.0f;
    /* YaRN's magnitude where the config gives no attention_factor, as ollama's converter
     * computes it */
    float attn_factor = full->attention_factor > 0 ? full->attention_factor
                        : !strcasecmp(type, "yarn") && factor > 1
                            ? (float)(0.1 * log((double)factor) + 1.0)
                            : 1.0f;
    const char *swa_type = swa->type && swa->type[0] ? swa->type : "linear";
    static const uint32_t first_layer[1] = {0};
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "laguna." suffix), key)
    bool ok =
        (!l->heads || gguf_writer_add_array(w, KEY("attention.head_count"), GGUF_TYPE_UINT32,
                                            l->heads, p->n_layer, err)) &&
        gguf_writer_add_u32(w, KEY("attention.sliding_window"), p->sliding_window, err) &&
        gguf_writer_add_bool(w, KEY("attention.sink_enabled"), false, err) &&
        gguf_writer_add_u32(w, KEY("attention.gating_type"), 1, err) && /* per head */
        gguf_writer_add_bool(w, KEY("attention.qk_norm"), true, err) &&
        gguf_writer_add_u32(w, KEY("expert_shared_count"), 1, err) &&
        gguf_writer_add_bool(w, KEY("expert_weights_norm"), l->norm_topk, err) &&
        gguf_writer_add_f32(w, KEY("expert_weights_scale"), l->routed_scale, err) &&
        gguf_writer_add_u32(w, KEY("expert_gating_func"), 2, err) && /* sigmoid */
        gguf_writer_add_u32(w, KEY("decoder_sparse_step"), 1, err) &&
        gguf_writer_add_u32(w, KEY("leading_dense_block_count"), p->n_dense_lead, err) &&
        gguf_writer_add_array(w, KEY("dense_layers"), GGUF_TYPE_UINT32, first_layer, 1, err) &&
        gguf_writer_add_f32(w, KEY("rope.freq_base"), full->theta > 0 ? full->theta : 10000.0f,
                            err) &&
        gguf_writer_add_str(w, KEY("rope.scaling.type"), type, strlen(type), err) &&
        gguf_writer_add_f32(w, KEY("rope.scaling.factor"), factor, err) &&
        gguf_writer_add_u32(w, KEY("rope.scaling.original_context_length"), full->original_ctx,
                            err) &&
        gguf_writer_add_f32(w, KEY("rope.scaling.beta_fast"), full->beta_fast, err) &&
        gguf_writer_add_f32(w, KEY("rope.scaling.beta_slow"), full->beta_slow, err) &&
        gguf_writer_add_f32(w, KEY("rope.scaling.attn_factor"), attn_factor, err) &&
        gguf_writer_add_f32(w, KEY("rope.partial_rotary_factor"), l->partial, err) &&
        gguf_writer_add_f32(w, KEY("rope.swa.freq_base"), swa->theta > 0 ? swa->theta : 10000.0f,
                            err) &&
        gguf_writer_add_str(w, KEY("rope.swa.scaling.type"), swa_type, strlen(swa_type), err) &&
        gguf_writer_add_f32(w, KEY("rope.swa.scaling.factor"),
                            swa->factor > 0 ? swa->factor : 1.0f, err) &&
        gguf_writer_add_f32(w, KEY("rope.swa.partial_rotary_factor"), swa->partial, err) &&
        gguf_writer_add_u32(w, KEY("rope.dimension_count"), rope_dims(p->head_dim, l->partial),
                            err) &&
        gguf_writer_add_u32(w, KEY("rope.swa.dimension_count"),
                            rope_dims(p->head_dim, swa->partial), err);
    if (ok && l->layer_types) {
        uint32_t *kinds = malloc(p->n_layer * sizeof *kinds);
        if (!kinds) {
            corral_error_set(err, "out of memory");
            return false;
        }
        for (uint32_t i = 0; i < p->n_layer; i++)
            kinds[i] = p->sliding_pattern[i]; /* 1 sliding, 0 global */
        ok = gguf_writer_add_array(w, KEY("attention.layer_types"), GGUF_TYPE_UINT32, kinds,
                                   p->n_layer, err) &&
             gguf_writer_add_array(w, KEY("attention.sliding_window_pattern"), GGUF_TYPE_BOOL,
                                   p->sliding_pattern, p->n_layer, err);
        free(kinds);
    }
#undef KEY
    return ok;
}

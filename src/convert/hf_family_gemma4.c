/*
 * Gemma 4 (see hf_family_gemma4.h): its config.json keys, which layers are global, its tensor
 * names and the GGUF keys ollama's converter writes for it.
 */
#include "convert/hf_family_gemma4.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_WIDTH (1u << 24)

bool hf_family_is_gemma4(const hf_arch *a)
{
    return a->family == FAMILY_GEMMA4;
}

/* A number key of obj, absent (left as it is) or positive; section names obj in messages. */
static bool read_number(const json_t *obj, const char *section, const char *key, float *out,
                        bool *present, corral_error *err)
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

/* A true-or-false key, false when absent. */
static bool read_flag(const json_t *config, const char *key, bool *out, corral_error *err)
{
    const json_t *v = json_object_get(config, key);
    if (v && !json_is_null(v) && !json_is_boolean(v)) {
        corral_error_set(err, "config.json: %s must be true or false", key);
        return false;
    }
    *out = json_is_true(v);
    return true;
}

/* A count that may be 0 (absent: 0), at most max. */
static bool read_count0(const json_t *config, const char *key, uint32_t max, uint32_t *out,
                        corral_error *err)
{
    const json_t *v = json_object_get(config, key);
    *out = 0;
    if (!v || json_is_null(v))
        return true;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max) {
        corral_error_set(err, "config.json: %s must be an integer from 0 to %u", key, max);
        return false;
    }
    *out = (uint32_t)json_integer_value(v);
    return true;
}

/* layer_types: one "sliding_attention" or "full_attention" per layer, as the sliding pattern. */
static bool read_layer_types(const json_t *config, hf_params *p, corral_error *err)
{
    const json_t *types = json_object_get(config, "layer_types");
    if (!json_is_array(types) || json_array_size(types) != p->n_layer) {
        corral_error_set(err, "config.json: a %s needs layer_types, one per layer (%u)",
                         p->arch->hf_name, p->n_layer);
        return false;
    }
    if (!(p->sliding_pattern = calloc(p->n_layer, 1))) {
        corral_error_set(err, "out of memory");
        return false;
    }
    p->n_sliding_pattern = p->n_layer;
    for (uint32_t i = 0; i < p->n_layer; i++) {
        const char *type = json_string_value(json_array_get(types, i));
        bool sliding = type && !strcmp(type, "sliding_attention");
        if (!sliding && !(type && !strcmp(type, "full_attention"))) {
            corral_error_set(err, "config.json: layer_types[%u] is not \"sliding_attention\" "
                             "or \"full_attention\"", i);
            return false;
        }
        p->sliding_pattern[i] = sliding;
    }
    return true;
}

/* rope_parameters' full_attention (its base and rotated fraction) and sliding_attention. */
static bool read_rope(const json_t *config, hf_params *p, corral_error *err)
{
    hf_gemma4 *g = &p->gemma4;
    const json_t *rope = json_object_get(config, "rope_parameters");
    if (rope && !json_is_null(rope) && !json_is_object(rope)) {
        corral_error_set(err, "config.json: rope_parameters must be an object");
        return false;
    }
    const json_t *full = json_object_get(rope, "full_attention");
    const json_t *swa = json_object_get(rope, "sliding_attention");
    if ((full && !json_is_null(full) && !json_is_object(full)) ||
        (swa && !json_is_null(swa) && !json_is_object(swa))) {
        corral_error_set(err, "config.json: rope_parameters' full_attention and "
                         "sliding_attention must be objects");
        return false;
    }
    g->has_full_rope = json_is_object(full);
    g->has_swa_rope = json_is_object(swa);
    g->rope_theta = g->rope_theta_swa = 0;
    g->partial_rotary = 0.25f;
    if (!read_number(full, "rope_parameters.full_attention.", "rope_theta", &g->rope_theta, NULL,
                     err) ||
        !read_number(full, "rope_parameters.full_attention.", "partial_rotary_factor",
                     &g->partial_rotary, NULL, err) ||
        !read_number(swa, "rope_parameters.sliding_attention.", "rope_theta", &g->rope_theta_swa,
                     NULL, err))
        return false;
    if ((g->has_full_rope && !g->rope_theta) || (g->has_swa_rope && !g->rope_theta_swa)) {
        corral_error_set(err, "config.json: rope_parameters' full_attention and "
                         "sliding_attention each need a rope_theta");
        return false;
    }
    if (g->partial_rotary > 1) {
        corral_error_set(err, "config.json: rope_parameters.full_attention."
                         "partial_rotary_factor must be at most 1");
        return false;
    }
    return true;
}

/* vision_config, when it gives the tower's layers: its sizes, and what ollama's converter
 * takes where it is silent (3 channels, a 3 x 3 pooling, epsilon 1e-6). */
static bool read_vision(const json_t *config, hf_params *p, corral_error *err)
{
    const json_t *v = json_object_get(config, "vision_config");
    hf_vision *vis = &p->vision;
    *vis = (hf_vision){.n_channels = 3, .merge_size = 3, .eps = 1e-6f};
    if (!v || json_is_null(v))
        return true;
    if (!json_is_object(v)) {
        corral_error_set(err, "config.json: vision_config must be an object");
        return false;
    }
    const json_t *layers = json_object_get(v, "num_hidden_layers");
    if (!layers || json_is_null(layers))
        return true; /* no tower */
    static const struct {
        const char *key;
        uint32_t max;
        bool required;
    } counts[] = {{"num_hidden_layers", 4096, true},  {"hidden_size", 1u << 20, true},
                  {"intermediate_size", MAX_WIDTH, true}, {"num_attention_heads", 65536, true},
                  {"patch_size", 1024, true},        {"num_channels", 3, false},
                  {"pooling_kernel_size", 64, false}};
    uint32_t *out[] = {&vis->n_layer, &vis->n_embd,      &vis->n_ff,        &vis->n_head,
                       &vis->patch_size, &vis->n_channels, &vis->merge_size};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        const json_t *n = json_object_get(v, counts[i].key);
        if (!n || json_is_null(n)) {
            if (!counts[i].required)
                continue;
            corral_error_set(err, "config.json has no vision_config.%s", counts[i].key);
            return false;
        }
        if (!json_is_integer(n) || json_integer_value(n) < 1 ||
            json_integer_value(n) > counts[i].max) {
            corral_error_set(err, "config.json: vision_config.%s must be an integer from 1 to %u",
                             counts[i].key, counts[i].max);
            return false;
        }
        *out[i] = (uint32_t)json_integer_value(n);
    }
    if (!read_number(v, "vision_config.", "layer_norm_eps", &vis->eps, NULL, err))
        return false;
    if (vis->n_embd % vis->n_head) {
        corral_error_set(err, "config.json: vision_config's %u heads do not divide its "
                         "hidden_size %u", vis->n_head, vis->n_embd);
        return false;
    }
    return true;
}

/* audio_config, when it gives the tower's layers: its sizes and epsilon (1e-6 where absent,
 * as ollama's converter takes it); without it the checkpoint's audio tower is left out. */
static bool read_audio(const json_t *config, hf_params *p, corral_error *err)
{
    const json_t *a = json_object_get(config, "audio_config");
    hf_gemma4 *g = &p->gemma4;
    g->n_audio_layer = g->n_audio_embd = g->n_audio_head = g->audio_kernel = 0;
    g->audio_eps = 1e-6f;
    if (!a || json_is_null(a))
        return true;
    if (!json_is_object(a)) {
        corral_error_set(err, "config.json: audio_config must be an object");
        return false;
    }
    const json_t *layers = json_object_get(a, "num_hidden_layers");
    if (!layers || json_is_null(layers) || (json_is_integer(layers) && !json_integer_value(layers)))
        return true; /* no tower */
    static const struct {
        const char *key;
        uint32_t max;
        bool required;
    } counts[] = {{"num_hidden_layers", 4096, true},
                  {"hidden_size", 1u << 20, true}, /* its FFN 4 times as wide, in 32 bits */
                  {"num_attention_heads", 65536, true},
                  {"conv_kernel_size", 4096, false}};
    uint32_t *out[] = {&g->n_audio_layer, &g->n_audio_embd, &g->n_audio_head, &g->audio_kernel};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        const json_t *n = json_object_get(a, counts[i].key);
        if (!n || json_is_null(n)) {
            if (!counts[i].required)
                continue;
            corral_error_set(err, "config.json has no audio_config.%s", counts[i].key);
            return false;
        }
        if (!json_is_integer(n) || json_integer_value(n) < 1 ||
            json_integer_value(n) > counts[i].max) {
            corral_error_set(err, "config.json: audio_config.%s must be an integer from 1 to %u",
                             counts[i].key, counts[i].max);
            return false;
        }
        *out[i] = (uint32_t)json_integer_value(n);
    }
    if (!read_number(a, "audio_config.", "rms_norm_eps", &g->audio_eps, NULL, err))
        return false;
    if (g->n_audio_embd % g->n_audio_head) {
        corral_error_set(err, "config.json: audio_config's %u heads do not divide its "
                         "hidden_size %u", g->n_audio_head, g->n_audio_embd);
        return false;
    }
    return true;
}

hf_status hf_gemma4_read_config(const json_t *config, hf_params *p, corral_error *err)
{
    hf_gemma4 *g = &p->gemma4;
    bool moe = false, double_wide = false;
    uint32_t experts = 0;
    g->n_global_kv_heads = p->n_head_kv;
    if (!hf_family_read_count(config, "global_head_dim", true, 65536, &g->global_head_dim, err) ||
        !hf_family_read_count(config, "sliding_window", true, UINT32_MAX, &p->sliding_window,
                              err) ||
        !hf_family_read_count(config, "num_global_key_value_heads", false, p->n_head,
                              &g->n_global_kv_heads, err) ||
        !read_count0(config, "num_kv_shared_layers", p->n_layer, &g->n_kv_shared, err) ||
        !read_count0(config, "hidden_size_per_layer_input", MAX_WIDTH, &g->n_embd_per_layer,
                     err) ||
        !read_flag(config, "attention_k_eq_v", &g->k_eq_v, err) ||
        !read_flag(config, "use_double_wide_mlp", &double_wide, err) ||
        !read_flag(config, "enable_moe_block", &moe, err) ||
        !read_number(config, "", "final_logit_softcapping", &p->final_softcap, NULL, err) ||
        !read_layer_types(config, p, err) || !read_rope(config, p, err) ||
        !read_vision(config, p, err) || !read_audio(config, p, err))
        return HF_INVALID;
    if (g->global_head_dim % 2 || p->n_head % g->n_global_kv_heads) {
        corral_error_set(err, "config.json: %u heads of %u dimensions (%u key/value heads) do "
                         "not make a global attention layer", p->n_head, g->global_head_dim,
                         g->n_global_kv_heads);
        return HF_INVALID;
    }
    if (g->n_kv_shared >= p->n_layer) {
        corral_error_set(err, "config.json: num_kv_shared_layers must be below "
                         "num_hidden_layers");
        return HF_INVALID;
    }
    if (moe) {
        if (!hf_family_read_count(config, "num_experts", true, 4096, &experts, err) ||
            !hf_family_read_count(config, "top_k_experts", true, experts, &p->n_expert_used,
                                  err) ||
            !hf_family_read_count(config, "moe_intermediate_size", true, MAX_WIDTH,
                                  &p->n_ff_expert, err))
            return HF_INVALID;
    }
    p->n_expert = experts;
    if (!p->has_eps) { /* Hugging Face's Gemma4TextConfig's */
        p->rms_eps = 1e-6f;
        p->has_eps = true;
    }
    /* the keys write_keys would give the sliding layers' widths and a top-level base: Gemma 4
     * writes its own */
    p->has_head_dim = false;
    p->has_theta = false;
    if (g->n_global_kv_heads != p->n_head_kv) { /* per layer, as ollama writes them */
        if (!(p->kv_heads_per_layer = calloc(p->n_layer, sizeof *p->kv_heads_per_layer))) {
            corral_error_set(err, "out of memory");
            return HF_IO;
        }
        for (uint32_t i = 0; i < p->n_layer; i++)
            p->kv_heads_per_layer[i] = p->sliding_pattern[i] ? p->n_head_kv
                                                             : g->n_global_kv_heads;
    }
    if (double_wide && g->n_kv_shared) { /* the shared layers' FFN twice as wide */
        if (p->n_ff > MAX_WIDTH / 2) {
            corral_error_set(err, "config.json: intermediate_size %u doubled is too wide",
                             p->n_ff);
            return HF_INVALID;
        }
        if (!(p->ffn_per_layer = calloc(p->n_layer, sizeof *p->ffn_per_layer))) {
            corral_error_set(err, "out of memory");
            return HF_IO;
        }
        for (uint32_t i = 0; i < p->n_layer; i++)
            p->ffn_per_layer[i] = i >= p->n_layer - g->n_kv_shared ? 2 * p->n_ff : p->n_ff;
    }
    return HF_OK;
}

/* Hugging Face name pieces and their GGUF names, tried before the common ones (the text
 * model's prefix already stripped to "model."). */
static const char *const gemma4_renames[][2] = {
    {"model.embed_tokens_per_layer", "per_layer_token_embd"},
    {"model.per_layer_model_projection", "per_layer_model_proj"},
    {"model.per_layer_projection_norm", "per_layer_proj_norm"},
    {"per_layer_input_gate", "inp_gate"},
    {"per_layer_projection", "proj"},
    {"post_per_layer_input_norm", "post_norm"},
    {"post_attention_layernorm", "post_attention_norm"},
    {"pre_feedforward_layernorm_2", "pre_ffw_norm_2"},
    {"pre_feedforward_layernorm", "ffn_norm"},
    {"post_feedforward_layernorm_1", "post_ffw_norm_1"},
    {"post_feedforward_layernorm_2", "post_ffw_norm_2"},
    {"post_feedforward_layernorm", "post_ffw_norm"},
    {"router.proj", "ffn_gate_inp"},
    {"router.scale", "ffn_gate_inp.scale"},
    {"router.per_expert_scale.weight", "ffn_down_exps.scale"},
    {"router.per_expert_scale", "ffn_down_exps.scale"},
    {"experts.gate_up_proj.weight", "ffn_gate_up_exps.weight"},
    {"experts.gate_up_proj", "ffn_gate_up_exps.weight"},
    {"experts.down_proj.weight", "ffn_down_exps.weight"},
    {"experts.down_proj", "ffn_down_exps.weight"},
    {"moe.gate_proj", "ffn_gate_exps.weight"},
    {"moe.up_proj", "ffn_up_exps.weight"},
    {"moe.gate_up_proj.weight", "ffn_gate_up_exps.weight"},
    {"moe.gate_up_proj", "ffn_gate_up_exps.weight"},
    {"moe.down_proj", "ffn_down_exps.weight"},
    {"moe.per_expert_scale.weight", "ffn_down_exps.scale"},
    {"moe.per_expert_scale", "ffn_down_exps.scale"},
    {"layer_scalar", "layer_output_scale.weight"},
};

const char *const *hf_gemma4_rename_at(const char *s)
{
    return hf_family_rename_in(gemma4_renames, sizeof gemma4_renames / sizeof gemma4_renames[0],
                               s);
}

/* The vision tower's name pieces and ollama's, tried in this order at each position. */
static const char *const tower_renames[][2] = {
    {".linear.weight", ".weight"}, /* a linear layer whose products are clipped */
    {".linear.bias", ".bias"},
    {"model.vision_tower.encoder.layers", "v.blk"},
    {"model.vision_tower.patch_embedder.input_proj", "v.patch_embd"},
    {"model.vision_tower.patch_embedder.position_embedding_table", "v.position_embd.weight"},
    {"model.vision_tower.std_bias", "v.std_bias"},
    {"model.vision_tower.std_scale", "v.std_scale"},
    {"model.embed_vision.embedding_projection", "mm.input_projection"},
    {"input_layernorm", "ln1"},
    {"self_attn.q_proj", "attn_q"},
    {"self_attn.q_norm", "attn_q_norm"},
    {"self_attn.k_proj", "attn_k"},
    {"self_attn.k_norm", "attn_k_norm"},
    {"self_attn.v_proj", "attn_v"},
    {"self_attn.o_proj", "attn_out"},
    {"mlp.gate_proj", "ffn_gate"},
    {"mlp.down_proj", "ffn_down"},
    {"mlp.up_proj", "ffn_up"},
    {"post_attention_layernorm", "attn_post_norm"},
    {"pre_feedforward_layernorm", "ln2"},
    {"post_feedforward_layernorm", "ffn_post_norm"},
    {"layer_scalar", "out_scale.weight"},
};

/* The audio tower's name pieces and ollama's, tried in this order at each position: the
 * subsampling convolutions and conformer blocks under either of the two namings checkpoints
 * use (conformer.N.attention.attn.*, layers.N.self_attn.*). */
static const char *const audio_renames[][2] = {
    {".linear.weight", ".weight"}, /* a linear layer whose products are clipped */
    {".linear.bias", ".bias"},
    {"model.audio_tower.subsample_conv_projection.conv_0.conv", "a.conv1d.0"},
    {"model.audio_tower.subsample_conv_projection.conv_0.norm", "a.conv1d.0.norm"},
    {"model.audio_tower.subsample_conv_projection.conv_1.conv", "a.conv1d.1"},
    {"model.audio_tower.subsample_conv_projection.conv_1.norm", "a.conv1d.1.norm"},
    {"model.audio_tower.subsample_conv_projection.layer0.conv", "a.conv1d.0"},
    {"model.audio_tower.subsample_conv_projection.layer0.norm", "a.conv1d.0.norm"},
    {"model.audio_tower.subsample_conv_projection.layer1.conv", "a.conv1d.1"},
    {"model.audio_tower.subsample_conv_projection.layer1.norm", "a.conv1d.1.norm"},
    {"model.audio_tower.subsample_conv_projection.input_proj_linear", "a.pre_encode.out"},
    {"model.audio_tower.conformer", "a.blk"},
    {"model.audio_tower.layers", "a.blk"},
    {"model.audio_tower.output_proj", "mm.a.fc"},
    {"model.embed_audio.embedding_projection", "mm.a.input_projection"},
    {"attention.attn.relative_position_embedding.pos_proj", "linear_pos"},
    {"self_attn.relative_k_proj", "linear_pos"},
    {"attention.attn.per_dim_key_scale", "per_dim_k_scale"},
    {"attention.attn.per_dim_scale", "per_dim_scale"},
    {"self_attn.per_dim_scale", "per_dim_scale"},
    {"attention.attn.q_proj", "attn_q"},
    {"attention.attn.k_proj", "attn_k"},
    {"attention.attn.v_proj", "attn_v"},
    {"attention.pre_attn_norm", "ln1"},
    {"attention.post_norm", "ln2"},
    {"attention.post", "attn_out"},
    {"self_attn.post", "attn_out"},
    {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},
    {"norm_pre_attn", "ln1"},
    {"norm_post_attn", "ln2"},
    {"ffw_layer_start.pre_layer_norm", "ffn_norm"},
    {"ffw_layer_start.post_layer_norm", "ffn_post_norm"},
    {"ffw_layer_start.ffw_layer_1", "ffn_up"},
    {"ffw_layer_start.ffw_layer_2", "ffn_down"},
    {"ffw_layer_end.pre_layer_norm", "ffn_norm_1"},
    {"ffw_layer_end.post_layer_norm", "ffn_post_norm_1"},
    {"ffw_layer_end.ffw_layer_1", "ffn_up_1"},
    {"ffw_layer_end.ffw_layer_2", "ffn_down_1"},
    {"feed_forward1.pre_layer_norm", "ffn_norm"},
    {"feed_forward1.post_layer_norm", "ffn_post_norm"},
    {"feed_forward1.ffw_layer_1", "ffn_up"},
    {"feed_forward1.ffw_layer_2", "ffn_down"},
    {"feed_forward2.pre_layer_norm", "ffn_norm_1"},
    {"feed_forward2.post_layer_norm", "ffn_post_norm_1"},
    {"feed_forward2.ffw_layer_1", "ffn_up_1"},
    {"feed_forward2.ffw_layer_2", "ffn_down_1"},
    {"lconv1d.depthwise_conv1d", "conv_dw"},
    {"lconv1d.pre_layer_norm", "conv_norm"},
    {"lconv1d.conv_norm", "norm_conv"},
    {"lconv1d.linear_start", "conv_pw1"},
    {"lconv1d.linear_end", "conv_pw2"},
    {"norm_out", "layer_pre_norm"},
};

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

bool hf_gemma4_rename_tower(const char *in, char *out, size_t cap)
{
    if (!strncmp(in, "model.vision_tower.", 19) || !strncmp(in, "model.embed_vision.", 19)) {
        hf_family_rename_by(tower_renames, sizeof tower_renames / sizeof tower_renames[0], in, out,
                            cap);
        return true;
    }
    if (strncmp(in, "model.audio_tower.", 18) != 0 && strncmp(in, "model.embed_audio.", 18) != 0)
        return false;
    hf_family_rename_by(audio_renames, sizeof audio_renames / sizeof audio_renames[0], in, out,
                        cap);
    /* the attention's scales are bare parameters; ollama's file names them as weights (the
     * engine reads the key scale under the same form) */
    size_t len = strlen(out);
    if ((ends_with(out, ".per_dim_scale") || ends_with(out, ".per_dim_k_scale")) &&
        len + 7 < cap)
        memcpy(out + len, ".weight", 8);
    return true;
}

bool hf_gemma4_softplus(const char *hf_name)
{
    return !strncmp(hf_name, "model.audio_tower.", 18) && ends_with(hf_name, ".per_dim_scale");
}

bool hf_gemma4_skipped_tensor(const hf_params *p, const char *name)
{
    static const char *const towers[] = {"model.audio_tower.", "model.embed_audio."};
    for (size_t i = 0; !p->gemma4.n_audio_layer && i < sizeof towers / sizeof towers[0]; i++)
        if (!strncmp(name, towers[i], strlen(towers[i])))
            return true;
    /* applied as a norm without weights */
    return strstr(name, "embedding_post_projection_norm") != NULL;
}

/* The linears whose products the tower clips, and the bounds each may have. */
static const char *const clipped[] = {"attn_q", "attn_k",  "attn_v",  "attn_out",
                                      "ffn_gate", "ffn_up", "ffn_down"};
static const char *const bounds[] = {"input_min", "input_max", "output_min", "output_max"};

/* Whether rest is "<one of linears>.<a bound>". */
static bool is_bound(const char *rest, const char *const *linears, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(linears[i]);
        if (!strncmp(rest, linears[i], len) && rest[len] == '.' &&
            hf_family_listed(rest + len + 1, bounds, 4))
            return true;
    }
    return false;
}

/* A vision tower's tensor (ollama's name), in a model with a tower. */
static bool known_tower_tensor(const hf_params *p, const char *name)
{
    static const char *const whole[] = {"v.patch_embd.weight", "v.position_embd.weight",
                                        "v.std_bias", "v.std_scale",
                                        "mm.input_projection.weight"};
    static const char *const block[] = {
        "ln1.weight",         "ln2.weight",         "attn_q.weight",          "attn_k.weight",
        "attn_v.weight",      "attn_out.weight",    "attn_q_norm.weight",     "attn_k_norm.weight",
        "attn_post_norm.weight", "ffn_gate.weight", "ffn_up.weight",          "ffn_down.weight",
        "ffn_post_norm.weight",  "out_scale.weight"};
    static const char *const projection[] = {"mm.input_projection"};
    if (hf_family_listed(name, whole, sizeof whole / sizeof whole[0]) ||
        is_bound(name, projection, 1))
        return true;
    unsigned layer;
    int at = 0;
    char again[32];
    if (sscanf(name, "v.blk.%u.%n", &layer, &at) != 1 || at == 0 || layer >= p->vision.n_layer)
        return false;
    snprintf(again, sizeof again, "v.blk.%u.", layer);
    if (strncmp(name, again, (size_t)at) != 0) /* "v.blk.01." */
        return false;
    const char *rest = name + at;
    return hf_family_listed(rest, block, sizeof block / sizeof block[0]) ||
           is_bound(rest, clipped, sizeof clipped / sizeof clipped[0]);
}

/* An audio tower's tensor (ollama's name), in a model with one: what the engine's tower
 * reads (src/engine/audio_gemma4.c). */
static bool known_audio_tensor(const hf_params *p, const char *name)
{
    static const char *const whole[] = {"a.conv1d.0.weight", "a.conv1d.0.norm.weight",
                                        "a.conv1d.1.weight", "a.conv1d.1.norm.weight",
                                        "a.pre_encode.out.weight", "mm.a.fc.weight",
                                        "mm.a.fc.bias", "mm.a.input_projection.weight"};
    static const char *const projections[] = {"a.pre_encode.out", "mm.a.fc",
                                              "mm.a.input_projection"};
    static const char *const block[] = {
        "ffn_norm.weight",     "ffn_up.weight",        "ffn_down.weight",
        "ffn_post_norm.weight", "ffn_norm_1.weight",   "ffn_up_1.weight",
        "ffn_down_1.weight",   "ffn_post_norm_1.weight", "ln1.weight",
        "attn_q.weight",       "attn_k.weight",        "attn_v.weight",
        "attn_out.weight",     "per_dim_scale.weight", "per_dim_k_scale.weight",
        "linear_pos.weight",   "ln2.weight",           "conv_norm.weight",
        "conv_pw1.weight",     "conv_dw.weight",       "norm_conv.weight",
        "conv_pw2.weight",     "layer_pre_norm.weight"};
    static const char *const linears[] = {"ffn_up",   "ffn_down", "ffn_up_1", "ffn_down_1",
                                          "attn_q",   "attn_k",   "attn_v",   "attn_out",
                                          "linear_pos", "conv_pw1", "conv_pw2"};
    if (hf_family_listed(name, whole, sizeof whole / sizeof whole[0]) ||
        is_bound(name, projections, sizeof projections / sizeof projections[0]))
        return true;
    unsigned layer;
    int at = 0;
    char again[32];
    if (sscanf(name, "a.blk.%u.%n", &layer, &at) != 1 || at == 0 ||
        layer >= p->gemma4.n_audio_layer)
        return false;
    snprintf(again, sizeof again, "a.blk.%u.", layer);
    if (strncmp(name, again, (size_t)at) != 0) /* "a.blk.01." */
        return false;
    const char *rest = name + at;
    return hf_family_listed(rest, block, sizeof block / sizeof block[0]) ||
           is_bound(rest, linears, sizeof linears / sizeof linears[0]);
}

bool hf_gemma4_known_global(const hf_params *p, const char *name)
{
    if (p->gemma4.n_audio_layer && known_audio_tensor(p, name))
        return true;
    static const char *const per_layer[] = {"per_layer_token_embd.weight",
                                            "per_layer_model_proj.weight",
                                            "per_layer_proj_norm.weight"};
    if (p->vision.n_layer && known_tower_tensor(p, name))
        return true;
    return p->gemma4.n_embd_per_layer && hf_family_listed(name, per_layer, 3);
}

bool hf_gemma4_known_tensor(const hf_params *p, unsigned layer, const char *suffix)
{
    static const char *const block[] = {
        "attn_norm.weight",   "attn_q.weight",      "attn_k.weight",
        "attn_output.weight", "attn_q_norm.weight", "attn_k_norm.weight",
        "post_attention_norm.weight", "ffn_norm.weight", "ffn_gate.weight",
        "ffn_up.weight",      "ffn_down.weight",    "post_ffw_norm.weight",
        "layer_output_scale.weight"};
    static const char *const per_layer[] = {"inp_gate.weight", "proj.weight",
                                            "post_norm.weight"};
    static const char *const moe[] = {
        "ffn_gate_inp.weight",    "ffn_gate_inp.scale",      "pre_ffw_norm_2.weight",
        "post_ffw_norm_1.weight", "post_ffw_norm_2.weight",  "ffn_gate_up_exps.weight",
        "ffn_gate_exps.weight",   "ffn_up_exps.weight",      "ffn_down_exps.weight",
        "ffn_down_exps.scale"};
    /* a global layer whose keys serve as values has no v_proj */
    bool values = !(p->gemma4.k_eq_v && !p->sliding_pattern[layer]);
    return hf_family_listed(suffix, block, sizeof block / sizeof block[0]) ||
           (values && !strcmp(suffix, "attn_v.weight")) ||
           (p->gemma4.n_embd_per_layer && hf_family_listed(suffix, per_layer, 3)) ||
           (p->n_expert && hf_family_listed(suffix, moe, sizeof moe / sizeof moe[0]));
}

float *hf_gemma4_rope_freqs(const hf_params *p, uint32_t *n, corral_error *err)
{
    const hf_gemma4 *g = &p->gemma4;
    *n = g->global_head_dim / 2;
    float *freqs = malloc(*n * sizeof *freqs);
    if (!freqs) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    uint32_t rotated = (uint32_t)((float)g->global_head_dim * g->partial_rotary / 2);
    for (uint32_t i = 0; i < *n; i++)
        freqs[i] = i < rotated ? 1.0f : 1e30f;
    return freqs;
}

bool hf_gemma4_write_keys(const hf_params *p, gguf_writer *w, corral_error *err)
{
    const hf_gemma4 *g = &p->gemma4;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "gemma4." suffix), key)
    bool ok = gguf_writer_add_u32(w, KEY("attention.key_length"), g->global_head_dim, err) &&
              gguf_writer_add_u32(w, KEY("attention.value_length"), g->global_head_dim, err) &&
              gguf_writer_add_u32(w, KEY("attention.key_length_swa"), p->head_dim, err) &&
              gguf_writer_add_u32(w, KEY("attention.value_length_swa"), p->head_dim, err) &&
              gguf_writer_add_u32(w, KEY("attention.sliding_window"), p->sliding_window, err) &&
              gguf_writer_add_array(w, KEY("attention.sliding_window_pattern"), GGUF_TYPE_BOOL,
                                    p->sliding_pattern, p->n_sliding_pattern, err) &&
              gguf_writer_add_u32(w, KEY("attention.shared_kv_layers"), g->n_kv_shared, err) &&
              gguf_writer_add_u32(w, KEY("embedding_length_per_layer_input"),
                                  g->n_embd_per_layer, err);
    /* ollama writes the per-layer lists as signed integers */
    if (ok && p->kv_heads_per_layer)
        ok = gguf_writer_add_array(w, KEY("attention.head_count_kv"), GGUF_TYPE_INT32,
                                   p->kv_heads_per_layer, p->n_layer, err);
    if (ok && p->ffn_per_layer)
        ok = gguf_writer_add_array(w, KEY("feed_forward_length"), GGUF_TYPE_INT32,
                                   p->ffn_per_layer, p->n_layer, err);
    if (ok && g->has_full_rope)
        ok = gguf_writer_add_f32(w, KEY("rope.freq_base"), g->rope_theta, err) &&
             gguf_writer_add_u32(w, KEY("rope.dimension_count"), g->global_head_dim, err);
    if (ok && g->has_swa_rope)
        ok = gguf_writer_add_f32(w, KEY("rope.freq_base_swa"), g->rope_theta_swa, err) &&
             gguf_writer_add_u32(w, KEY("rope.dimension_count_swa"), p->head_dim, err);
    if (ok && p->final_softcap > 0)
        ok = gguf_writer_add_f32(w, KEY("final_logit_softcapping"), p->final_softcap, err);
    const hf_vision *v = &p->vision;
    if (ok && v->n_layer)
        ok = gguf_writer_add_u32(w, KEY("vision.block_count"), v->n_layer, err) &&
             gguf_writer_add_u32(w, KEY("vision.embedding_length"), v->n_embd, err) &&
             gguf_writer_add_u32(w, KEY("vision.attention.head_count"), v->n_head, err) &&
             gguf_writer_add_u32(w, KEY("vision.feed_forward_length"), v->n_ff, err) &&
             gguf_writer_add_u32(w, KEY("vision.patch_size"), v->patch_size, err) &&
             gguf_writer_add_u32(w, KEY("vision.num_channels"), v->n_channels, err) &&
             gguf_writer_add_u32(w, KEY("vision.projector.scale_factor"), v->merge_size, err) &&
             gguf_writer_add_f32(w, KEY("vision.attention.layer_norm_epsilon"), v->eps, err);
    /* the conformer's FFN is 4 times its width; ollama writes the kernel only when given */
    if (ok && g->n_audio_layer)
        ok = gguf_writer_add_u32(w, KEY("audio.block_count"), g->n_audio_layer, err) &&
             gguf_writer_add_u32(w, KEY("audio.embedding_length"), g->n_audio_embd, err) &&
             gguf_writer_add_u32(w, KEY("audio.feed_forward_length"), 4 * g->n_audio_embd,
                                 err) &&
             gguf_writer_add_u32(w, KEY("audio.attention.head_count"), g->n_audio_head, err) &&
             gguf_writer_add_f32(w, KEY("audio.attention.layer_norm_epsilon"), g->audio_eps,
                                 err);
    if (ok && g->n_audio_layer && g->audio_kernel)
        ok = gguf_writer_add_u32(w, KEY("audio.conv_kernel_size"), g->audio_kernel, err);
#undef KEY
    return ok;
}

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

static bool read_vl_config(const json_t *config, hf_params *p, corral_error *err);

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
        !read_layer_types(config, p, err) ||
        (hf_lfm2_is_vl(p->arch) && !read_vl_config(config, p, err)))
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

static bool write_vl_keys(const hf_params *p, gguf_writer *w, corral_error *err);

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
    return ok && (!hf_lfm2_is_vl(p->arch) || write_vl_keys(p, w, err));
}

/* ---- LFM2-VL: the text model with its SigLIP 2 tower in the same file ---- */

bool hf_lfm2_is_vl(const hf_arch *a)
{
    return !strcmp(a->hf_name, "Lfm2VlForConditionalGeneration");
}

/* A true-or-false key: -1 when absent. */
static bool read_flag(const json_t *obj, const char *section, const char *key, int8_t *out,
                      corral_error *err)
{
    const json_t *v = json_object_get(obj, key);
    *out = -1;
    if (!v || json_is_null(v))
        return true;
    if (!json_is_boolean(v)) {
        corral_error_set(err, "%s%s must be true or false", section, key);
        return false;
    }
    *out = json_is_true(v);
    return true;
}

/* A positive integer key of obj (section names it in messages): absent leaves *out. */
static bool read_count_in(const json_t *obj, const char *section, const char *key, uint32_t max,
                          uint32_t *out, corral_error *err)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return true;
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > max) {
        corral_error_set(err, "%s%s must be an integer from 1 to %u", section, key, max);
        return false;
    }
    *out = (uint32_t)json_integer_value(v);
    return true;
}

/* The settings config.json (top) and processor_config.json's image_processor both may give. */
static const char *const shared_counts[LFM2VL_N_COUNTS] = {
    [LFM2VL_DOWNSAMPLE] = "downsample_factor", [LFM2VL_MIN_TILES] = "min_tiles",
    [LFM2VL_MAX_TILES] = "max_tiles",          [LFM2VL_TILE_SIZE] = "tile_size",
    [LFM2VL_MIN_TOKENS] = "min_image_tokens",  [LFM2VL_MAX_TOKENS] = "max_image_tokens"};
static const char *const shared_flags[LFM2VL_N_FLAGS] = {
    [LFM2VL_SPLIT] = "do_image_splitting", [LFM2VL_THUMBNAIL] = "use_thumbnail"};

/* LFM2-VL's vision_config (what it leaves out as ollama's converter takes it: LFM2-VL-1.6B's
 * tower) and its image settings at the top of config.json. */
static bool read_vl_config(const json_t *config, hf_params *p, corral_error *err)
{
    const json_t *v = json_object_get(config, "vision_config");
    hf_vision *vis = &p->vision;
    hf_lfm2vl *vl = &p->lfm2vl;
    *vis = (hf_vision){.n_layer = 27, .n_embd = 1152, .n_ff = 4304, .n_head = 16, .eps = 1e-6f,
                       .n_channels = 3};
    if (v && !json_is_null(v) && !json_is_object(v)) {
        corral_error_set(err, "config.json: vision_config must be an object");
        return false;
    }
    static const char section[] = "config.json: vision_config.";
    bool ok = read_count_in(v, section, "num_hidden_layers", 4096, &vis->n_layer, err) &&
              read_count_in(v, section, "hidden_size", MAX_WIDTH, &vis->n_embd, err) &&
              read_count_in(v, section, "intermediate_size", MAX_WIDTH, &vis->n_ff, err) &&
              read_count_in(v, section, "num_attention_heads", 65536, &vis->n_head, err) &&
              read_count_in(v, section, "num_channels", 3, &vis->n_channels, err) &&
              read_count_in(v, section, "patch_size", 1024, &vis->patch_size, err) &&
              read_number(v, "layer_norm_eps", "vision_config.", NULL, &vis->eps, err) &&
              read_count_in(config, "config.json: ", "encoder_patch_size", 1024,
                            &vl->encoder_patch, err) &&
              read_count_in(config, "config.json: ", "image_token_id", 1u << 30,
                            &vl->image_token, err) &&
              read_number(config, "max_pixels_tolerance", "", NULL, &vl->tolerance, err) &&
              read_flag(config, "config.json: ", "use_image_special_tokens",
                        &vl->special_tokens, err);
    for (int i = 0; ok && i < LFM2VL_N_COUNTS; i++)
        ok = read_count_in(config, "config.json: ", shared_counts[i], MAX_WIDTH, &vl->top[i],
                           err);
    for (int i = 0; ok && i < LFM2VL_N_FLAGS; i++)
        ok = read_flag(config, "config.json: ", shared_flags[i], &vl->top_flag[i], err);
    int8_t layernorm = -1;
    ok = ok && read_flag(config, "config.json: ", "projector_use_layernorm", &layernorm, err);
    if (!ok)
        return false;
    vl->use_layernorm = layernorm == 1;
    if (!vis->patch_size)
        vis->patch_size = vl->encoder_patch ? vl->encoder_patch : 16;
    if (vis->n_embd % vis->n_head) {
        corral_error_set(err, "config.json: vision_config's %u heads do not divide its "
                         "hidden_size %u", vis->n_head, vis->n_embd);
        return false;
    }
    for (int i = 0; i < LFM2VL_N_FLAGS; i++)
        vl->proc_flag[i] = -1;
    vl->start_token = vl->end_token = vl->thumbnail_token = -1;
    return true;
}

/* processor_config.json's image_processor.max_pixels_tolerance: absent or positive. */
static bool read_tolerance(const json_t *ip, float *out, corral_error *err)
{
    const json_t *v = json_object_get(ip, "max_pixels_tolerance");
    if (!v || json_is_null(v))
        return true;
    double d = json_number_value(v);
    if (!json_is_number(v) || !(d > 0) || d > 3.4e38) {
        corral_error_set(err, "processor_config.json: image_processor.max_pixels_tolerance "
                         "must be a positive number");
        return false;
    }
    *out = (float)d;
    return true;
}

hf_status hf_lfm2_read_processor(const json_t *processor, hf_params *p, corral_error *err)
{
    hf_lfm2vl *vl = &p->lfm2vl;
    const json_t *ip = json_object_get(processor, "image_processor");
    if (!ip || json_is_null(ip))
        return HF_OK;
    static const char section[] = "processor_config.json: image_processor.";
    if (!json_is_object(ip)) {
        corral_error_set(err, "processor_config.json: image_processor must be an object");
        return HF_INVALID;
    }
    const json_t *size = json_object_get(ip, "size");
    if (size && !json_is_null(size) && !json_is_object(size)) {
        corral_error_set(err, "%ssize must be an object", section);
        return HF_INVALID;
    }
    bool ok = read_count_in(size, "processor_config.json: image_processor.size.", "height",
                            MAX_WIDTH, &vl->proc_height, err) &&
              read_count_in(size, "processor_config.json: image_processor.size.", "width",
                            MAX_WIDTH, &vl->proc_width, err) &&
              read_tolerance(ip, &vl->proc_tolerance, err);
    for (int i = 0; ok && i < LFM2VL_N_COUNTS; i++)
        ok = read_count_in(ip, section, shared_counts[i], MAX_WIDTH, &vl->proc[i], err);
    for (int i = 0; ok && i < LFM2VL_N_FLAGS; i++)
        ok = read_flag(ip, section, shared_flags[i], &vl->proc_flag[i], err);
    const json_t *mean = json_object_get(ip, "image_mean"), *std = json_object_get(ip, "image_std");
    if (ok && (mean || std)) {
        for (int c = 0; ok && c < 3; c++) {
            const json_t *m = json_array_get(mean, (size_t)c), *s = json_array_get(std, (size_t)c);
            ok = json_array_size(mean) == 3 && json_array_size(std) == 3 && json_is_number(m) &&
                 json_is_number(s) && json_number_value(s) > 0;
            if (ok) {
                vl->mean[c] = (float)json_number_value(m);
                vl->std[c] = (float)json_number_value(s);
            }
        }
        if (!ok)
            corral_error_set(err, "%simage_mean and image_std must be lists of three numbers "
                             "(std positive)", section);
        vl->has_normalisation = ok;
    }
    return ok ? HF_OK : HF_INVALID;
}

/* The tower's and projector's name pieces and ollama's, tried in this order at each position
 * (the text model's first: a block's out_proj takes the text model's name, as ollama's
 * converter writes it). */
static const char *const tower_renames[][2] = {
    {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},
    {"self_attn.out_proj", "attn_output"},
    {"model.vision_tower.vision_model.embeddings.patch_embedding", "v.patch_embd"},
    {"model.vision_tower.vision_model.embeddings.position_embedding", "v.position_embd"},
    {"model.vision_tower.vision_model.encoder.layers", "v.blk"},
    {"model.vision_tower.vision_model.post_layernorm", "v.post_ln"},
    {"model.multi_modal_projector.layer_norm", "mm.layer_norm"},
    {"model.multi_modal_projector.linear_1", "mm.1"},
    {"model.multi_modal_projector.linear_2", "mm.2"},
    {"layer_norm1", "ln1"},
    {"layer_norm2", "ln2"},
    {"mlp.fc1", "ffn_up"},
    {"mlp.fc2", "ffn_down"},
};

bool hf_lfm2_rename_tower(const char *in, char *out, size_t cap)
{
    if (strncmp(in, "model.vision_tower.", 19) != 0 &&
        strncmp(in, "model.multi_modal_projector.", 28) != 0)
        return false;
    hf_family_rename_by(tower_renames, sizeof tower_renames / sizeof tower_renames[0], in, out,
                        cap);
    return true;
}

bool hf_lfm2_known_tower(const hf_params *p, const char *name)
{
    static const char *const whole[] = {"v.patch_embd", "v.post_ln", "mm.layer_norm", "mm.1",
                                        "mm.2"};
    static const char *const block[] = {"ln1",    "ln2",         "attn_q", "attn_k",
                                        "attn_v", "attn_output", "ffn_up", "ffn_down"};
    if (hf_family_weight_or_bias(name, whole, sizeof whole / sizeof whole[0]) ||
        !strcmp(name, "v.position_embd.weight"))
        return true;
    unsigned layer;
    int at = 0;
    char again[32];
    if (sscanf(name, "v.blk.%u.%n", &layer, &at) != 1 || at == 0 || layer >= p->vision.n_layer)
        return false;
    snprintf(again, sizeof again, "v.blk.%u.", layer);
    return !strncmp(name, again, (size_t)at) && /* not "v.blk.01." */
           hf_family_weight_or_bias(name + at, block, sizeof block / sizeof block[0]);
}

/* The first of a setting's two places that gives it, else the default. */
static uint32_t pick(const hf_lfm2vl *vl, int i, uint32_t otherwise)
{
    return vl->top[i] ? vl->top[i] : vl->proc[i] ? vl->proc[i] : otherwise;
}

static bool pick_flag(const hf_lfm2vl *vl, int i)
{
    return vl->top_flag[i] >= 0 ? vl->top_flag[i] == 1 : vl->proc_flag[i] != 0;
}

/* LFM2-VL's tower keys (lfm2.vision.*) and the image tokens, as ollama's converter writes
 * them. */
static bool write_vl_keys(const hf_params *p, gguf_writer *w, corral_error *err)
{
    const hf_vision *v = &p->vision;
    const hf_lfm2vl *vl = &p->lfm2vl;
    /* the side of the position table: a tile, downsampled */
    uint32_t tile = vl->proc[LFM2VL_TILE_SIZE] ? vl->proc[LFM2VL_TILE_SIZE]
                    : vl->proc_height         ? vl->proc_height
                    : vl->proc_width          ? vl->proc_width
                                              : 512;
    uint32_t downsample = pick(vl, LFM2VL_DOWNSAMPLE, 2), side = tile / downsample;
    static const float half[3] = {0.5f, 0.5f, 0.5f};
    const char *a = p->arch->gguf_name;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s.vision." suffix, a), key)
    bool ok =
        gguf_writer_add_u32(w, KEY("block_count"), v->n_layer, err) &&
        gguf_writer_add_u32(w, KEY("embedding_length"), v->n_embd, err) &&
        gguf_writer_add_u32(w, KEY("feed_forward_length"), v->n_ff, err) &&
        gguf_writer_add_u32(w, KEY("attention.head_count"), v->n_head, err) &&
        gguf_writer_add_f32(w, KEY("attention.layer_norm_epsilon"), v->eps, err) &&
        gguf_writer_add_u32(w, KEY("patch_size"), v->patch_size, err) &&
        gguf_writer_add_u32(w, KEY("num_channels"), v->n_channels, err) &&
        gguf_writer_add_u32(w, KEY("image_size"), side ? side : 1, err) &&
        gguf_writer_add_u32(w, KEY("projector.scale_factor"), downsample, err) &&
        gguf_writer_add_bool(w, KEY("projector.use_layernorm"), vl->use_layernorm, err) &&
        gguf_writer_add_bool(w, KEY("do_image_splitting"), pick_flag(vl, LFM2VL_SPLIT), err) &&
        gguf_writer_add_u32(w, KEY("min_tiles"), pick(vl, LFM2VL_MIN_TILES, 2), err) &&
        gguf_writer_add_u32(w, KEY("max_tiles"), pick(vl, LFM2VL_MAX_TILES, 10), err) &&
        gguf_writer_add_u32(w, KEY("tile_size"), pick(vl, LFM2VL_TILE_SIZE, 512), err) &&
        gguf_writer_add_u32(w, KEY("min_image_tokens"), pick(vl, LFM2VL_MIN_TOKENS, 64), err) &&
        gguf_writer_add_u32(w, KEY("max_image_tokens"), pick(vl, LFM2VL_MAX_TOKENS, 256), err) &&
        gguf_writer_add_f32(w, KEY("max_pixels_tolerance"),
                            vl->tolerance > 0        ? vl->tolerance
                            : vl->proc_tolerance > 0 ? vl->proc_tolerance
                                                     : 2.0f,
                            err) &&
        gguf_writer_add_bool(w, KEY("use_thumbnail"), pick_flag(vl, LFM2VL_THUMBNAIL), err) &&
        gguf_writer_add_bool(w, KEY("use_image_special_tokens"), vl->special_tokens != 0, err) &&
        gguf_writer_add_array(w, KEY("image_mean"), GGUF_TYPE_FLOAT32,
                              vl->has_normalisation ? vl->mean : half, 3, err) &&
        gguf_writer_add_array(w, KEY("image_std"), GGUF_TYPE_FLOAT32,
                              vl->has_normalisation ? vl->std : half, 3, err) &&
        gguf_writer_add_u32(w, KEY("image_token_id"), vl->image_token ? vl->image_token : 396,
                            err);
    if (ok && vl->start_token >= 0)
        ok = gguf_writer_add_u32(w, KEY("image_start_token_id"), (uint32_t)vl->start_token, err);
    if (ok && vl->end_token >= 0)
        ok = gguf_writer_add_u32(w, KEY("image_end_token_id"), (uint32_t)vl->end_token, err);
    if (ok && vl->thumbnail_token >= 0)
        ok = gguf_writer_add_u32(w, KEY("image_thumbnail_token_id"),
                                 (uint32_t)vl->thumbnail_token, err);
#undef KEY
    return ok;
}

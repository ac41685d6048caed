/*
 * GLM-OCR (see hf_family_glmocr.h): its config.json and preprocessor_config.json keys, its
 * tensor names and the GGUF keys ollama's converter writes for it.
 */
#include "convert/hf_family_glmocr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_WIDTH (1u << 24)

bool hf_family_is_glmocr(const hf_arch *a)
{
    return a->family == FAMILY_GLMOCR;
}

/* A positive integer key of obj (file and section name it in messages): absent leaves *out. */
static bool read_count(const json_t *obj, const char *where, const char *key, uint32_t max,
                       uint32_t *out, corral_error *err)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return true;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max) {
        corral_error_set(err, "%s%s must be an integer from 0 to %u", where, key, max);
        return false;
    }
    *out = (uint32_t)json_integer_value(v);
    return true;
}

/* A positive number key of obj: absent leaves *out. */
static bool read_number(const json_t *obj, const char *where, const char *key, float *out,
                        corral_error *err)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return true;
    double d = json_number_value(v);
    if (!json_is_number(v) || !(d > 0) || d > 3.4e38) {
        corral_error_set(err, "%s%s must be a positive number", where, key);
        return false;
    }
    *out = (float)d;
    return true;
}

/* The first nonzero of a and b, else otherwise (ollama's converter's cmp.Or). */
static uint32_t first_of(uint32_t a, uint32_t b, uint32_t otherwise)
{
    return a ? a : b ? b : otherwise;
}

hf_status hf_glmocr_read_config(const json_t *config, hf_params *p, corral_error *err)
{
    hf_glmocr *g = &p->glmocr;
    hf_vision *v = &p->vision;
    static const char text[] = "config.json: text_config.";
    const json_t *rope = json_object_get(config, "rope_parameters");
    if (rope && !json_is_null(rope) && !json_is_object(rope)) {
        corral_error_set(err, "config.json: text_config.rope_parameters must be an object");
        return HF_INVALID;
    }
    float partial = 0, rope_partial = 0;
    if (!read_count(config, text, "num_nextn_predict_layers", 16, &g->nextn, err) ||
        !read_number(rope, "config.json: text_config.rope_parameters.", "rope_theta",
                     &g->rope_theta, err) ||
        !read_number(rope, "config.json: text_config.rope_parameters.", "partial_rotary_factor",
                     &rope_partial, err) ||
        !read_number(config, text, "partial_rotary_factor", &partial, err))
        return HF_INVALID;
    g->partial = rope_partial ? rope_partial : partial ? partial : 1.0f;
    const json_t *sections = json_object_get(rope, "mrope_section");
    if (sections && !json_is_null(sections)) {
        size_t n = json_array_size(sections);
        bool ok = json_is_array(sections) && n > 0 && n <= 8;
        for (size_t i = 0; ok && i < n; i++) {
            const json_t *s = json_array_get(sections, i);
            ok = json_is_integer(s) && json_integer_value(s) >= 0 &&
                 json_integer_value(s) <= 65536;
            if (ok)
                g->mrope[i] = (int32_t)json_integer_value(s);
        }
        if (!ok) {
            corral_error_set(err, "config.json: text_config.rope_parameters.mrope_section must "
                             "be a list of 1 to 8 integers from 0 to 65536");
            return HF_INVALID;
        }
        g->n_mrope = (uint32_t)n;
    }
    if (g->partial > 1) {
        corral_error_set(err, "config.json: the partial_rotary_factor must be at most 1");
        return HF_INVALID;
    }
    if (p->n_layer + g->nextn > 4096) {
        corral_error_set(err, "config.json: too many layers");
        return HF_INVALID;
    }
    p->n_layer += g->nextn; /* the prediction layers follow the trunk, as block_count counts */
    if (!p->has_eps) {
        p->rms_eps = 1e-5f;
        p->has_eps = true;
    }
    p->has_head_dim = true; /* ollama's converter writes the head's width always */
    p->has_theta = false;   /* its base is rope_parameters' (hf_glmocr_write_keys) */
    const json_t *vc = json_object_get(config, "vision_config");
    if (vc && !json_is_null(vc) && !json_is_object(vc)) {
        corral_error_set(err, "config.json: vision_config must be an object");
        return HF_INVALID;
    }
    static const char vision[] = "config.json: vision_config.";
    *v = (hf_vision){.n_channels = 3, .eps = 1e-5f};
    if (!read_count(vc, vision, "depth", 4096, &v->n_layer, err) ||
        !read_count(vc, vision, "hidden_size", MAX_WIDTH, &v->n_embd, err) ||
        !read_count(vc, vision, "num_heads", 65536, &v->n_head, err) ||
        !read_count(vc, vision, "image_size", 65536, &v->image_size, err) ||
        !read_count(vc, vision, "patch_size", 1024, &v->patch_size, err) ||
        !read_count(vc, vision, "spatial_merge_size", 64, &v->merge_size, err) ||
        !read_count(vc, vision, "temporal_patch_size", 64, &v->temporal_patch_size, err) ||
        !read_count(vc, vision, "out_hidden_size", MAX_WIDTH, &g->out_hidden, err) ||
        !read_count(vc, vision, "intermediate_size", MAX_WIDTH, &v->n_ff, err) ||
        !read_number(vc, vision, "rms_norm_eps", &v->eps, err))
        return HF_INVALID;
    static const char *const ids[6] = {"image_token_id",       "image_start_token_id",
                                       "image_end_token_id",   "video_token_id",
                                       "video_start_token_id", "video_end_token_id"};
    for (int i = 0; i < 6; i++)
        if (!read_count(config, "config.json: ", ids[i], UINT32_MAX, &g->tokens[i], err))
            return HF_INVALID;
    v->n_layer = first_of(v->n_layer, 0, 24);
    v->n_embd = first_of(v->n_embd, 0, 1024);
    v->n_head = first_of(v->n_head, 0, 16);
    v->image_size = first_of(v->image_size, 0, 336);
    v->n_ff = first_of(v->n_ff, 0, 4096);
    g->out_hidden = first_of(g->out_hidden, 0, 1536);
    if (!v->n_head || v->n_embd % v->n_head) {
        corral_error_set(err, "config.json: vision_config's %u heads do not divide its "
                         "hidden_size %u", v->n_head, v->n_embd);
        return HF_INVALID;
    }
    return HF_OK;
}

hf_status hf_glmocr_read_preprocessor(const json_t *pre, hf_params *p, corral_error *err)
{
    hf_glmocr *g = &p->glmocr;
    static const char where[] = "preprocessor_config.json: ";
    const json_t *size = json_object_get(pre, "size");
    if (size && !json_is_null(size) && !json_is_object(size)) {
        corral_error_set(err, "preprocessor_config.json: size must be an object");
        return HF_INVALID;
    }
    if (!read_count(size, "preprocessor_config.json: size.", "shortest_edge", UINT32_MAX,
                    &g->min_pixels, err) ||
        !read_count(size, "preprocessor_config.json: size.", "longest_edge", UINT32_MAX,
                    &g->max_pixels, err) ||
        !read_count(pre, where, "patch_size", 1024, &g->pre_patch, err) ||
        !read_count(pre, where, "temporal_patch_size", 64, &g->pre_temporal, err) ||
        !read_count(pre, where, "merge_size", 64, &g->pre_merge, err))
        return HF_INVALID;
    static const char *const keys[2] = {"image_mean", "image_std"};
    float *dst[2] = {g->mean, g->std};
    bool *has[2] = {&g->has_mean, &g->has_std};
    for (int k = 0; k < 2; k++) { /* taken when three numbers, as ollama's converter */
        const json_t *list = json_object_get(pre, keys[k]);
        if (!list || json_is_null(list))
            continue;
        bool ok = json_is_array(list);
        for (size_t i = 0; ok && i < json_array_size(list); i++)
            ok = json_is_number(json_array_get(list, i));
        if (!ok) {
            corral_error_set(err, "preprocessor_config.json: %s must be a list of numbers",
                             keys[k]);
            return HF_INVALID;
        }
        *has[k] = json_array_size(list) == 3;
        for (size_t i = 0; *has[k] && i < 3; i++)
            dst[k][i] = (float)json_number_value(json_array_get(list, i));
    }
    hf_vision *v = &p->vision;
    v->patch_size = first_of(v->patch_size, g->pre_patch, 14);
    v->merge_size = first_of(v->merge_size, g->pre_merge, 2);
    v->temporal_patch_size = first_of(v->temporal_patch_size, g->pre_temporal, 2);
    return HF_OK;
}

/* The tower's name pieces and ollama's, tried in this order at each position. */
static const char *const tower_renames[][2] = {
    {"model.visual.patch_embed.proj_1", "v.patch_embd_1"},
    {"model.visual.patch_embed.proj", "v.patch_embd"},
    {"model.visual.blocks", "v.blk"},
    {"model.visual.post_layernorm", "v.post_ln"},
    {"model.visual.downsample", "mm.patch_merger"},
    {"attn.qkv", "attn_qkv"},
    {"attn.proj", "attn_out"},
    {"attn.q_norm", "attn_q_norm"},
    {"attn.k_norm", "attn_k_norm"},
    {"norm1", "ln1"},
    {"norm2", "ln2"},
    {"mlp.gate_proj", "ffn_gate"},
    {"mlp.up_proj", "ffn_up"},
    {"mlp.down_proj", "ffn_down"},
    {"model.visual.merger.proj", "mm.model.fc"},
    {"model.visual.merger.post_projection_norm", "mm.post_norm"},
    {"model.visual.merger.gate_proj", "mm.gate"},
    {"model.visual.merger.up_proj", "mm.up"},
    {"model.visual.merger.down_proj", "mm.down"},
};

bool hf_glmocr_rename_tower(const char *in, char *out, size_t cap)
{
    if (strncmp(in, "model.visual.", 13) != 0)
        return false;
    hf_family_rename_by(tower_renames, sizeof tower_renames / sizeof tower_renames[0], in, out,
                        cap);
    return true;
}

/* The text model's name pieces that differ from the common ones (the prefix stripped to
 * "model."), the prediction layers' under nextn. */
static const char *const glmocr_renames[][2] = {
    {"post_self_attn_layernorm", "post_attention_norm"},
    {"post_mlp_layernorm", "post_ffw_norm"},
    {".embed_tokens", ".nextn.embed_tokens"},
    {".eh_proj", ".nextn.eh_proj"},
    {".enorm", ".nextn.enorm"},
    {".hnorm", ".nextn.hnorm"},
    {".shared_head.head", ".nextn.shared_head_head"},
    {".shared_head.norm", ".nextn.shared_head_norm"},
};

const char *const *hf_glmocr_rename_at(const char *s)
{
    return hf_family_rename_in(glmocr_renames, sizeof glmocr_renames / sizeof glmocr_renames[0],
                               s);
}

bool hf_glmocr_skipped_tensor(const hf_params *p, const char *name)
{
    unsigned layer;
    return sscanf(name, "model.language_model.layers.%u.", &layer) == 1 && layer >= p->n_layer;
}

bool hf_glmocr_known_tower(const hf_params *p, const char *name)
{
    static const char *const whole[] = {"v.patch_embd",   "v.patch_embd_0", "v.patch_embd_1",
                                        "v.post_ln",      "mm.patch_merger", "mm.model.fc",
                                        "mm.post_norm",   "mm.gate",         "mm.up",
                                        "mm.down"};
    static const char *const block[] = {"ln1",         "ln2",         "attn_qkv", "attn_out",
                                        "attn_q_norm", "attn_k_norm", "ffn_gate", "ffn_up",
                                        "ffn_down"};
    if (hf_family_weight_or_bias(name, whole, sizeof whole / sizeof whole[0]))
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

bool hf_glmocr_known_tensor(const hf_params *p, unsigned layer, const char *suffix)
{
    static const char *const block[] = {
        "attn_norm.weight", "attn_q.weight",      "attn_q.bias",
        "attn_k.weight",    "attn_k.bias",        "attn_v.weight",
        "attn_v.bias",      "attn_output.weight", "post_attention_norm.weight",
        "ffn_norm.weight",  "ffn_up.weight",      "ffn_down.weight",
        "post_ffw_norm.weight"};
    static const char *const nextn[] = {
        "nextn.embed_tokens.weight", "nextn.eh_proj.weight", "nextn.enorm.weight",
        "nextn.hnorm.weight", "nextn.shared_head_head.weight", "nextn.shared_head_norm.weight"};
    return hf_family_listed(suffix, block, sizeof block / sizeof block[0]) ||
           (layer >= p->n_layer - p->glmocr.nextn &&
            hf_family_listed(suffix, nextn, sizeof nextn / sizeof nextn[0]));
}

uint32_t hf_glmocr_neox_dims(const hf_params *p)
{
    if (!p->glmocr.n_mrope)
        return 0;
    uint32_t dims = (uint32_t)((float)p->head_dim * p->glmocr.partial);
    return dims - dims % 2;
}

bool hf_glmocr_write_keys(const hf_params *p, gguf_writer *w, corral_error *err)
{
    const hf_glmocr *g = &p->glmocr;
    const hf_vision *v = &p->vision;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "glmocr." suffix), key)
    bool ok = (!g->nextn ||
               gguf_writer_add_u32(w, KEY("nextn_predict_layers"), g->nextn, err)) &&
              gguf_writer_add_f32(w, KEY("rope.freq_base"),
                                  g->rope_theta > 0 ? g->rope_theta : 10000.0f, err) &&
              gguf_writer_add_f32(w, KEY("rope.partial_rotary_factor"), g->partial, err) &&
              (!g->n_mrope || gguf_writer_add_array(w, KEY("rope.mrope_section"),
                                                    GGUF_TYPE_INT32, g->mrope, g->n_mrope,
                                                    err)) &&
              gguf_writer_add_u32(w, KEY("vision.block_count"), v->n_layer, err) &&
              gguf_writer_add_u32(w, KEY("vision.embedding_length"), v->n_embd, err) &&
              gguf_writer_add_u32(w, KEY("vision.attention.head_count"), v->n_head, err) &&
              gguf_writer_add_u32(w, KEY("vision.image_size"), v->image_size, err) &&
              gguf_writer_add_u32(w, KEY("vision.patch_size"), v->patch_size, err) &&
              gguf_writer_add_u32(w, KEY("vision.spatial_merge_size"), v->merge_size, err) &&
              gguf_writer_add_u32(w, KEY("vision.temporal_patch_size"), v->temporal_patch_size,
                                  err) &&
              gguf_writer_add_u32(w, KEY("vision.out_hidden_size"), g->out_hidden, err) &&
              gguf_writer_add_u32(w, KEY("vision.intermediate_size"), v->n_ff, err) &&
              gguf_writer_add_f32(w, KEY("vision.attention.layer_norm_rms_epsilon"), v->eps,
                                  err) &&
              (!g->min_pixels ||
               gguf_writer_add_u32(w, KEY("vision.min_pixels"), g->min_pixels, err)) &&
              (!g->max_pixels ||
               gguf_writer_add_u32(w, KEY("vision.max_pixels"), g->max_pixels, err)) &&
              (!g->has_mean || gguf_writer_add_array(w, KEY("vision.image_mean"),
                                                     GGUF_TYPE_FLOAT32, g->mean, 3, err)) &&
              (!g->has_std || gguf_writer_add_array(w, KEY("vision.image_std"),
                                                    GGUF_TYPE_FLOAT32, g->std, 3, err));
    static const char *const ids[6] = {"image_token_id",       "image_start_token_id",
                                       "image_end_token_id",   "video_token_id",
                                       "video_start_token_id", "video_end_token_id"};
    for (int i = 0; ok && i < 6; i++) {
        snprintf(key, sizeof key, "glmocr.%s", ids[i]);
        ok = gguf_writer_add_u32(w, key, g->tokens[i], err);
    }
#undef KEY
    return ok;
}

/*
 * DeepSeek-OCR (see hf_family_deepseekocr.h): its config.json keys, its towers' names and the
 * GGUF keys ollama's converter writes for it.
 */
#include "convert/hf_family_deepseekocr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool hf_family_is_deepseekocr(const hf_arch *a)
{
    return a->family == FAMILY_DEEPSEEKOCR;
}

/* A non-negative integer key of obj (where names obj in messages): absent leaves *out. */
static bool read_count(const json_t *obj, const char *where, const char *key, uint32_t max,
                       uint32_t *out, corral_error *err)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return true;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max) {
        corral_error_set(err, "config.json: %s%s must be an integer from 0 to %u", where, key,
                         max);
        return false;
    }
    *out = (uint32_t)json_integer_value(v);
    return true;
}

/* vision_config.width's tower at key (an object, or absent). */
static const json_t *tower(const json_t *config, const char *key, corral_error *err,
                           bool *ok)
{
    const json_t *vision = json_object_get(config, "vision_config");
    const json_t *width = json_object_get(vision, "width");
    const json_t *t = json_object_get(width, key);
    if ((vision && !json_is_null(vision) && !json_is_object(vision)) ||
        (width && !json_is_null(width) && !json_is_object(width)) ||
        (t && !json_is_null(t) && !json_is_object(t))) {
        corral_error_set(err, "config.json: vision_config.width.%s must be an object", key);
        *ok = false;
    }
    return t;
}

hf_status hf_deepseekocr_read_config(const json_t *config, hf_params *p, corral_error *err)
{
    static const char lc[] = "language_config.";
    uint32_t experts = 0, used = 0, dense = 0;
    if (!read_count(config, lc, "n_routed_experts", 4096, &experts, err) ||
        !read_count(config, lc, "num_experts_per_tok", experts, &used, err) ||
        !read_count(config, lc, "first_k_dense_replace", p->n_layer, &dense, err))
        return HF_INVALID;
    if (experts && !used) {
        corral_error_set(err, "config.json: language_config has n_routed_experts without "
                         "num_experts_per_tok");
        return HF_INVALID;
    }
    p->n_expert = experts;
    p->n_expert_used = used;
    p->n_dense_lead = dense;
    /* the keys ollama's converter leaves out: the engine's defaults and the tensors say */
    p->has_head_dim = p->has_theta = p->has_eps = false;
    bool ok = true;
    const json_t *clip = tower(config, "clip-l-14-224", err, &ok);
    const json_t *sam = ok ? tower(config, "sam_vit_b", err, &ok) : NULL;
    static const char cw[] = "vision_config.width.clip-l-14-224.";
    static const char sw[] = "vision_config.width.sam_vit_b.";
    hf_vision *v = &p->vision;
    hf_sam *s = &p->sam;
    if (!ok || !read_count(clip, cw, "layers", 4096, &v->n_layer, err) ||
        !read_count(clip, cw, "width", 1u << 20, &v->n_embd, err) ||
        !read_count(clip, cw, "heads", 65536, &v->n_head, err) ||
        !read_count(clip, cw, "image_size", 65536, &v->image_size, err) ||
        !read_count(clip, cw, "patch_size", 1024, &v->patch_size, err) ||
        !read_count(sam, sw, "layers", 4096, &s->n_layer, err) ||
        !read_count(sam, sw, "width", 1u << 20, &s->n_embd, err) ||
        !read_count(sam, sw, "heads", 65536, &s->n_head, err))
        return HF_INVALID;
    const json_t *global = json_object_get(sam, "global_attn_indexes");
    if (global && !json_is_null(global)) {
        size_t n = json_array_size(global);
        ok = json_is_array(global) && n <= 64;
        for (size_t i = 0; ok && i < n; i++) {
            const json_t *g = json_array_get(global, i);
            ok = json_is_integer(g) && json_integer_value(g) >= 0 &&
                 json_integer_value(g) < (json_int_t)(s->n_layer ? s->n_layer : 1);
            if (ok)
                s->global[i] = (int32_t)json_integer_value(g);
        }
        if (!ok) {
            corral_error_set(err, "config.json: %sglobal_attn_indexes must list at most 64 of "
                             "its layers", sw);
            return HF_INVALID;
        }
        s->n_global = (uint32_t)n;
    }
    return HF_OK;
}

/* The language model's name pieces that differ from the common ones: the shared experts. */
static const char *const text_renames[][2] = {
    {"mlp.shared_experts.gate_proj", "ffn_gate_shexp"},
    {"mlp.shared_experts.up_proj", "ffn_up_shexp"},
    {"mlp.shared_experts.down_proj", "ffn_down_shexp"},
};

const char *const *hf_deepseekocr_rename_at(const char *s)
{
    return hf_family_rename_in(text_renames, sizeof text_renames / sizeof text_renames[0], s);
}

/* The towers' name pieces and ollama's, tried in this order at each position. */
static const char *const tower_renames[][2] = {
    {"model.vision_model", "v"},
    {"embeddings.patch_embedding", "patch_embd"},
    {"embeddings.class_embedding", "class_embd"},
    {"embeddings.position_embedding", "position_embd"},
    {"transformer.layers", "blk"},
    {"model.projector", "mm"},
    {"model.image_newline", "mm.image_newline"},
    {"model.view_seperator", "mm.view_seperator"}, /* the checkpoint's spelling */
    {"model.sam_model.patch_embed.proj", "s.patch_embd"},
    {"model.sam_model.pos_embed", "s.position_embd"},
    {"model.sam_model.blocks", "s.blk"},
    {"model.sam_model.neck", "s.neck"},
    {"model.sam_model.net_", "s.net_"},
};

bool hf_deepseekocr_rename_tower(const char *in, char *out, size_t cap)
{
    static const char *const prefixes[] = {"model.vision_model.", "model.sam_model.",
                                           "model.projector.", "model.image_newline",
                                           "model.view_seperator"};
    bool is_tower = false;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        is_tower = is_tower || !strncmp(in, prefixes[i], strlen(prefixes[i]));
    if (!is_tower)
        return false;
    hf_family_rename_by(tower_renames, sizeof tower_renames / sizeof tower_renames[0], in, out,
                        cap);
    return true;
}

/* The part of a block's name after "<prefix>blk.L." when L is below layers, or NULL. */
static const char *block_rest(const char *name, const char *prefix, uint32_t layers)
{
    char again[48];
    unsigned layer;
    int at = 0;
    size_t n = strlen(prefix);
    if (strncmp(name, prefix, n) != 0 || sscanf(name + n, "blk.%u.%n", &layer, &at) != 1 ||
        at == 0 || layer >= layers)
        return NULL;
    snprintf(again, sizeof again, "blk.%u.", layer);
    return strncmp(name + n, again, (size_t)at) ? NULL : name + n + at; /* not "blk.01." */
}

bool hf_deepseekocr_known_tower(const hf_params *p, const char *name)
{
    static const char *const whole[] = {"s.patch_embd", "s.neck.0",  "s.neck.1",
                                        "s.neck.2",     "s.neck.3",  "s.net_2",
                                        "s.net_3",      "v.patch_embd", "v.pre_layrnorm",
                                        "mm.layers"};
    static const char *const vectors[] = {"s.position_embd", "v.class_embd",
                                          "v.position_embd.weight", "mm.image_newline",
                                          "mm.view_seperator"};
    static const char *const sam_block[] = {"norm1", "norm2", "attn.qkv", "attn.proj",
                                            "mlp.lin1", "mlp.lin2"};
    static const char *const sam_tables[] = {"attn.rel_pos_h", "attn.rel_pos_w"};
    static const char *const clip_block[] = {"layer_norm1", "layer_norm2", "self_attn.qkv_proj",
                                             "self_attn.out_proj", "mlp.fc1", "mlp.fc2"};
    if (hf_family_weight_or_bias(name, whole, sizeof whole / sizeof whole[0]) ||
        hf_family_listed(name, vectors, sizeof vectors / sizeof vectors[0]))
        return true;
    const char *rest = block_rest(name, "s.", p->sam.n_layer);
    if (rest)
        return hf_family_weight_or_bias(rest, sam_block,
                                        sizeof sam_block / sizeof sam_block[0]) ||
               hf_family_listed(rest, sam_tables, 2);
    rest = block_rest(name, "v.", p->vision.n_layer);
    return rest && hf_family_weight_or_bias(rest, clip_block,
                                            sizeof clip_block / sizeof clip_block[0]);
}

bool hf_deepseekocr_known_tensor(const hf_params *p, unsigned layer, const char *suffix)
{
    static const char *const attention[] = {"attn_norm.weight", "attn_q.weight",
                                            "attn_k.weight",    "attn_v.weight",
                                            "attn_output.weight", "ffn_norm.weight"};
    static const char *const dense[] = {"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
    static const char *const moe[] = {"ffn_gate_inp.weight", "ffn_gate_shexp.weight",
                                      "ffn_up_shexp.weight", "ffn_down_shexp.weight"};
    bool experts = p->n_expert && layer >= p->n_dense_lead;
    return hf_family_listed(suffix, attention, sizeof attention / sizeof attention[0]) ||
           (experts ? hf_family_listed(suffix, moe, 4) : hf_family_listed(suffix, dense, 3));
}

bool hf_deepseekocr_write_keys(const hf_params *p, gguf_writer *w, corral_error *err)
{
    const hf_vision *v = &p->vision;
    const hf_sam *s = &p->sam;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "deepseekocr." suffix), key)
    return (p->n_expert ||
            (gguf_writer_add_u32(w, KEY("expert_count"), 0, err) &&
             gguf_writer_add_u32(w, KEY("expert_used_count"), 0, err))) &&
           gguf_writer_add_u32(w, KEY("leading_dense_block_count"), p->n_dense_lead, err) &&
           gguf_writer_add_u32(w, KEY("vision.block_count"), v->n_layer, err) &&
           gguf_writer_add_u32(w, KEY("vision.embedding_length"), v->n_embd, err) &&
           gguf_writer_add_u32(w, KEY("vision.head_count"), v->n_head, err) &&
           gguf_writer_add_u32(w, KEY("vision.image_size"), v->image_size, err) &&
           gguf_writer_add_u32(w, KEY("vision.patch_size"), v->patch_size, err) &&
           gguf_writer_add_u32(w, KEY("sam.block_count"), s->n_layer, err) &&
           gguf_writer_add_u32(w, KEY("sam.embedding_length"), s->n_embd, err) &&
           gguf_writer_add_u32(w, KEY("sam.head_count"), s->n_head, err) &&
           gguf_writer_add_array(w, KEY("sam.global_attention_indexes"), GGUF_TYPE_INT32,
                                 s->global, s->n_global, err);
#undef KEY
}

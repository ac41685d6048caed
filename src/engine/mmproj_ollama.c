/*
 * The vision tower as ollama stores it for its own engine (gemma3, qwen25vl, mistral3,
 * qwen3vl, qwen35, llama4, gemma4, glmocr, deepseekocr, lfm2, mllama): inside the text model's
 * GGUF, with the hyper-parameters under the text architecture's name
 * ("gemma3.vision.image_size") and its own tensor names ("v.blk.0.layer_norm1.weight" for
 * llama.cpp's "v.blk.0.ln1.weight"). The
 * loader (mmproj.c) asks for llama.cpp's names; this file says which architectures carry a
 * tower this way, turns a name into the file's, and fills the values ollama's engine fixes in
 * code rather than in the file.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "mmproj.h"

/* What ollama's converters and engine assume when a key is absent: a tower norm epsilon of
 * 1e-6 (both models) and 256 tokens per gemma3 image (its normalisation to [-1, 1] is set in
 * gemma3_hparams). */
#define OLLAMA_VISION_EPS 1e-6f
#define OLLAMA_GEMMA3_TOKENS 256u

const projector_kind *mmproj_ollama_kind(const gguf_file *file, const char *arch)
{
    if (strcmp(arch, "gemma3") == 0)
        return gguf_find_kv(file, "gemma3.vision.block_count") ? &projector_gemma3 : NULL;
    if (strcmp(arch, "qwen25vl") == 0)
        return gguf_find_kv(file, "qwen25vl.vision.block_count") ? &projector_qwen25vl : NULL;
    if (strcmp(arch, "mistral3") == 0)
        return gguf_find_kv(file, "mistral3.vision.block_count") ? &projector_pixtral : NULL;
    if (strcmp(arch, "llama4") == 0)
        return gguf_find_kv(file, "llama4.vision.block_count") ? &projector_llama4 : NULL;
    if (strcmp(arch, "gemma4") == 0)
        return gguf_find_kv(file, "gemma4.vision.block_count") ? &projector_gemma4v : NULL;
    if (strcmp(arch, "glmocr") == 0)
        return gguf_find_kv(file, "glmocr.vision.block_count") ? &projector_glm4v : NULL;
    if (strcmp(arch, "deepseekocr") == 0)
        return gguf_find_kv(file, "deepseekocr.vision.block_count") ? &projector_deepseekocr
                                                                    : NULL;
    if (strcmp(arch, "lfm2") == 0)
        return gguf_find_kv(file, "lfm2.vision.block_count") ? &projector_lfm2 : NULL;
    if (strcmp(arch, "mllama") == 0)
        return gguf_find_kv(file, "mllama.vision.block_count") ? &projector_mllama : NULL;
    /* Qwen 3.5's tower is Qwen3-VL's without deepstack, under the same names */
    if (strcmp(arch, "qwen3vl") == 0 || strcmp(arch, "qwen3vlmoe") == 0 ||
        strcmp(arch, "qwen35") == 0 || strcmp(arch, "qwen35moe") == 0) {
        char key[64];
        snprintf(key, sizeof key, "%s.vision.block_count", arch);
        return gguf_find_kv(file, key) ? &projector_qwen3vl : NULL;
    }
    return NULL;
}

/* A block's tensor ("v.blk.<n>." then a part) under the part's other name from parts, in buf;
 * name itself when no part matches. */
typedef struct name_pair {
    const char *ours, *theirs;
} name_pair;

static const char *block_part(const char *name, const name_pair *parts, size_t n_parts,
                              char *buf, size_t size)
{
    static const char blk[] = "v.blk.";
    if (strncmp(name, blk, sizeof blk - 1) != 0)
        return name;
    const char *dot = strchr(name + sizeof blk - 1, '.');
    if (!dot)
        return name;
    for (size_t i = 0; i < n_parts; i++) {
        size_t n = strlen(parts[i].ours);
        if (strncmp(dot + 1, parts[i].ours, n) != 0)
            continue;
        int w = snprintf(buf, size, "%.*s%s%s", (int)(dot + 1 - name), name, parts[i].theirs,
                         dot + 1 + n);
        return w > 0 && (size_t)w < size ? buf : name;
    }
    return name;
}

/* Qwen3-VL's (its Go engine's names): the merger under v.merger, the blocks' norms and MLP
 * under their Hugging Face names; q, k and v apart. Its one Conv3D patch kernel and its
 * deepstack mergers (numbered by place, not layer) are bound by projector_qwen3vl.c. */
static const char *qwen3vl_name(const char *name, char *buf, size_t size)
{
    static const name_pair whole[] = {
        {"v.patch_embd.bias", "v.patch_embed.bias"},
        {"v.position_embd.weight", "v.pos_embed.weight"},
        {"v.post_ln.weight", "v.merger.norm.weight"}, {"v.post_ln.bias", "v.merger.norm.bias"},
        {"mm.0.weight", "v.merger.linear_fc1.weight"}, {"mm.0.bias", "v.merger.linear_fc1.bias"},
        {"mm.2.weight", "v.merger.linear_fc2.weight"}, {"mm.2.bias", "v.merger.linear_fc2.bias"},
    };
    static const name_pair parts[] = {
        {"ln1.", "norm1."}, {"ln2.", "norm2."},
        {"ffn_up.", "mlp.linear_fc1."}, {"ffn_down.", "mlp.linear_fc2."},
    };
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
        if (strcmp(name, whole[i].ours) == 0)
            return whole[i].theirs;
    return block_part(name, parts, sizeof parts / sizeof parts[0], buf, size);
}

/* Mistral Small 3.x's: Hugging Face's names, ln_pre as encoder_norm, the projector's parts */
static const char *mistral3_name(const char *name, char *buf, size_t size)
{
    static const name_pair whole[] = {
        {"v.patch_embd.weight", "v.patch_conv.weight"},
        {"v.pre_ln.weight", "v.encoder_norm.weight"},
        {"mm.input_norm.weight", "mm.norm.weight"},
        {"mm.patch_merger.weight", "mm.patch_merger.merging_layer.weight"},
        {"mm.1.weight", "mm.linear_1.weight"}, {"mm.1.bias", "mm.linear_1.bias"},
        {"mm.2.weight", "mm.linear_2.weight"}, {"mm.2.bias", "mm.linear_2.bias"},
    };
    static const name_pair part[] = {
        {"ln1.", "attn_norm."}, {"ln2.", "ffn_norm."}, {"attn_out.", "attn_output."},
    };
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
        if (strcmp(name, whole[i].ours) == 0)
            return whole[i].theirs;
    return block_part(name, part, sizeof part / sizeof part[0], buf, size);
}

/* Qwen2.5-VL's: its two temporal patch kernels and its merger under "v."; blocks as ours */
static const char *qwen25vl_name(const char *name)
{
    static const name_pair whole[] = {
        {"v.patch_embd.weight", "v.patch_embd_0.weight"},
        {"v.patch_embd.weight.1", "v.patch_embd_1.weight"},
        {"v.post_ln.weight", "v.merger.ln_q.weight"},
        {"mm.0.weight", "v.merger.mlp.0.weight"}, {"mm.0.bias", "v.merger.mlp.0.bias"},
        {"mm.2.weight", "v.merger.mlp.2.weight"}, {"mm.2.bias", "v.merger.mlp.2.bias"},
    };
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
        if (strcmp(name, whole[i].ours) == 0)
            return whole[i].theirs;
    return name;
}

/* Llama 4's: Hugging Face's names under "v.", the adapter MLP inside the tower, the
 * projection as mm.linear_1; the blocks' norms and MLP as mistral3's and gemma3's. */
static const char *llama4_name(const char *name, char *buf, size_t size)
{
    static const name_pair whole[] = {
        {"v.patch_embd.weight", "v.patch_embedding.weight"},
        {"v.class_embd", "v.class_embedding"},
        {"v.position_embd.weight", "v.positional_embedding_vlm"},
        {"v.pre_ln.weight", "v.layernorm_pre.weight"}, {"v.pre_ln.bias", "v.layernorm_pre.bias"},
        {"v.post_ln.weight", "v.layernorm_post.weight"},
        {"v.post_ln.bias", "v.layernorm_post.bias"},
        {"mm.model.mlp.1.weight", "v.vision_adapter.mlp.fc1.weight"},
        {"mm.model.mlp.2.weight", "v.vision_adapter.mlp.fc2.weight"},
        {"mm.model.fc.weight", "mm.linear_1.weight"},
    };
    static const name_pair part[] = {
        {"ln1.", "attn_norm."}, {"ln2.", "ffn_norm."}, {"attn_out.", "attn_output."},
        {"ffn_up.", "mlp.fc1."}, {"ffn_down.", "mlp.fc2."},
    };
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
        if (strcmp(name, whole[i].ours) == 0)
            return whole[i].theirs;
    return block_part(name, part, sizeof part / sizeof part[0], buf, size);
}

/* DeepSeek-OCR's (ollama's converter): SAM under "s." with Hugging Face's leaf names (its
 * position table without ".weight"), CLIP's blocks under Hugging Face's names, the projection
 * as mm.layers, the newline and separator under "mm.". */
static const char *deepseekocr_name(const char *name, char *buf, size_t size)
{
    static const name_pair whole[] = {
        {"v.sam.pos_embd.weight", "s.position_embd"},
        {"v.pre_ln.weight", "v.pre_layrnorm.weight"}, {"v.pre_ln.bias", "v.pre_layrnorm.bias"},
        {"mm.model.fc.weight", "mm.layers.weight"}, {"mm.model.fc.bias", "mm.layers.bias"},
        {"v.image_newline", "mm.image_newline"}, {"v.view_seperator", "mm.view_seperator"},
    };
    static const name_pair clip_part[] = {
        {"ln1.", "layer_norm1."}, {"ln2.", "layer_norm2."},
        {"attn_qkv.", "self_attn.qkv_proj."}, {"attn_out.", "self_attn.out_proj."},
        {"ffn_up.", "mlp.fc1."}, {"ffn_down.", "mlp.fc2."},
    };
    static const name_pair sam_part[] = {
        {"attn.out.", "attn.proj."}, {"attn.pos_h.weight", "attn.rel_pos_h"},
        {"attn.pos_w.weight", "attn.rel_pos_w"}, {"pre_ln.", "norm1."}, {"post_ln.", "norm2."},
    };
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
        if (strcmp(name, whole[i].ours) == 0)
            return whole[i].theirs;
    static const char sam[] = "v.sam.";
    if (strncmp(name, sam, sizeof sam - 1) != 0)
        return block_part(name, clip_part, sizeof clip_part / sizeof clip_part[0], buf, size);
    /* v.sam.X is s.X; a block's part under its other name */
    const char *rest = name + sizeof sam - 1;
    static const char blk[] = "blk.";
    const char *dot = strncmp(rest, blk, sizeof blk - 1) == 0 ? strchr(rest + sizeof blk - 1, '.')
                                                             : NULL;
    for (size_t i = 0; dot && i < sizeof sam_part / sizeof sam_part[0]; i++) {
        size_t n = strlen(sam_part[i].ours);
        if (strncmp(dot + 1, sam_part[i].ours, n) != 0)
            continue;
        int w = snprintf(buf, size, "s.%.*s%s%s", (int)(dot + 1 - rest), rest,
                         sam_part[i].theirs, dot + 1 + n);
        return w > 0 && (size_t)w < size ? buf : name;
    }
    int w = snprintf(buf, size, "s.%s", rest);
    return w > 0 && (size_t)w < size ? buf : name;
}

const char *mmproj_ollama_name(const projector_kind *kind, const gguf_file *file,
                               const char *name, char *buf, size_t size)
{
    if (kind == &projector_deepseekocr)
        return deepseekocr_name(name, buf, size);
    if (kind == &projector_llama4)
        return llama4_name(name, buf, size);
    if (kind == &projector_qwen25vl)
        return qwen25vl_name(name);
    if (kind == &projector_pixtral)
        return mistral3_name(name, buf, size);
    if (kind == &projector_qwen3vl)
        return qwen3vl_name(name, buf, size);
    if (kind == &projector_gemma4v) /* its converter writes the mmproj's names, bounds too */
        return name;
    if (kind == &projector_mllama) { /* the mmproj's names but for the blocks' norms and out */
        static const name_pair part[] = {
            {"ln1.", "attn_norm."}, {"ln2.", "ffn_norm."}, {"attn_out.", "attn_output."},
        };
        return block_part(name, part, sizeof part / sizeof part[0], buf, size);
    }
    if (kind == &projector_lfm2) { /* the mmproj's names but for the projector's LayerNorm */
        if (strcmp(name, "mm.input_norm.weight") == 0)
            return "mm.layer_norm.weight";
        if (strcmp(name, "mm.input_norm.bias") == 0)
            return "mm.layer_norm.bias";
        /* ollama's converter names the blocks' output projection as the text model's */
        static const name_pair out[] = {{"attn_out.", "attn_output."}};
        return gguf_find_tensor(file, "v.blk.0.attn_output.weight")
                   ? block_part(name, out, 1, buf, size)
                   : name;
    }
    if (kind == &projector_glm4v) { /* GLM-OCR's: the mmproj's names but the patch kernels' */
        if (strcmp(name, "v.patch_embd.weight") == 0)
            return "v.patch_embd_0.weight";
        if (strcmp(name, "v.patch_embd.weight.1") == 0)
            return "v.patch_embd_1.weight";
        return name;
    }
    static const name_pair whole[] = {
        {"v.patch_embd.weight", "v.patch_embedding.weight"},
        {"v.patch_embd.bias", "v.patch_embedding.bias"},
        {"v.position_embd.weight", "v.position_embedding.weight"},
        {"v.post_ln.weight", "v.post_layernorm.weight"},
        {"v.post_ln.bias", "v.post_layernorm.bias"},
        {"mm.soft_emb_norm.weight", "mm.mm_soft_emb_norm.weight"},
        {"mm.input_projection.weight", "mm.mm_input_projection.weight"},
    };
    static const name_pair part[] = {
        {"ln1.", "layer_norm1."},     {"ln2.", "layer_norm2."}, {"attn_out.", "attn_output."},
        {"ffn_up.", "mlp.fc1."},      {"ffn_down.", "mlp.fc2."},
    };
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
        if (strcmp(name, whole[i].ours) == 0)
            return whole[i].theirs;
    return block_part(name, part, sizeof part / sizeof part[0], buf, size);
}

/* key (under the file's prefix) absent or equal to want, the only value the tower runs with */
static bool expect_u32(corral_mmproj *mm, const char *name, uint32_t want, corral_error *err)
{
    char key[96];
    uint32_t v = want;
    snprintf(key, sizeof key, "%s.%s", mm->key_prefix, name);
    if (!gguf_get_u32_opt(mm->file, key, &v, err))
        return false;
    if (v != want) {
        corral_error_set(err, "%s: %s is %u; only %u is supported", gguf_path(mm->file), key, v,
                         want);
        return false;
    }
    return true;
}

/* The tower's norm epsilon: the file's vision.attention.layer_norm_epsilon, or fallback */
static bool read_tower_eps(corral_mmproj *mm, float fallback, corral_error *err)
{
    char key[96];
    mm->hp.eps = fallback;
    snprintf(key, sizeof key, "%s.vision.attention.layer_norm_epsilon", mm->key_prefix);
    return gguf_get_f32_opt(mm->file, key, &mm->hp.eps, err);
}

/* vision.rope.freq_base absent or 10000, the only base the towers' 2-D RoPE runs with */
static bool expect_rope_base_10000(corral_mmproj *mm, corral_error *err)
{
    char key[96];
    float theta = 10000.0f;
    snprintf(key, sizeof key, "%s.vision.rope.freq_base", mm->key_prefix);
    if (!gguf_get_f32_opt(mm->file, key, &theta, err))
        return false;
    if (theta != 10000.0f) {
        corral_error_set(err, "%s: %s is %g; only 10000 is supported", gguf_path(mm->file), key,
                         (double)theta);
        return false;
    }
    return true;
}

static bool gemma3_hparams(corral_mmproj *mm, corral_error *err)
{
    vision_hparams *hp = &mm->hp;
    const char *path = gguf_path(mm->file);
    char key[96];
    if (hp->image_size == 0) {
        corral_error_set(err, "%s: missing key '%s.vision.image_size'", path, mm->key_prefix);
        return false;
    }
    for (int c = 0; c < 3; c++) {
        hp->mean[c] = 0.5f;
        hp->std[c] = 0.5f;
    }
    if (!read_tower_eps(mm, OLLAMA_VISION_EPS, err))
        return false;
    /* The converter writes "mm.tokens_per_image", the engine reads "mm_tokens_per_image":
     * either counts, the default when neither is there. */
    uint32_t tokens = OLLAMA_GEMMA3_TOKENS;
    snprintf(key, sizeof key, "%s.mm_tokens_per_image", mm->key_prefix);
    if (!gguf_get_u32_opt(mm->file, key, &tokens, err))
        return false;
    snprintf(key, sizeof key, "%s.mm.tokens_per_image", mm->key_prefix);
    if (!gguf_get_u32_opt(mm->file, key, &tokens, err))
        return false;
    /* the pooled grid is square: tokens = (side / n_merge)^2 */
    uint32_t per_side = 0;
    while (per_side < 65536 && (uint64_t)(per_side + 1) * (per_side + 1) <= tokens)
        per_side++;
    uint32_t side = hp->patch_size ? hp->image_size / hp->patch_size : 0;
    if (per_side == 0 || (uint64_t)per_side * per_side != tokens || side % per_side != 0) {
        corral_error_set(err, "%s: %u tokens per image do not pool a %u x %u patch grid", path,
                         tokens, side, side);
        return false;
    }
    hp->n_merge = side / per_side;
    return true;
}

/* ollama's Qwen2.5-VL: full attention in the blocks listed by fullatt_block_indexes (its
 * default 7, 15, 23, 31), which must be every p-th block for our windowing; CLIP's
 * normalisation (the loader's default); RoPE base 10000 and 2 x 2 merging, 2 frames. */
static bool qwen25vl_hparams(corral_mmproj *mm, corral_error *err)
{
    vision_hparams *hp = &mm->hp;
    const char *path = gguf_path(mm->file);
    char key[96];
    if (!read_tower_eps(mm, OLLAMA_VISION_EPS, err))
        return false;
    if (!expect_rope_base_10000(mm, err))
        return false;
    if (!expect_u32(mm, "vision.spatial_merge_size", 2, err) ||
        !expect_u32(mm, "vision.temporal_patch_size", 2, err))
        return false;
    snprintf(key, sizeof key, "%s.vision.window_size", mm->key_prefix);
    if (!gguf_get_u32_opt(mm->file, key, &hp->window_pixels, err))
        return false;
    if (hp->window_pixels > 8192) {
        corral_error_set(err, "%s: %s is %u, more than 8192", path, key, hp->window_pixels);
        return false;
    }
    int64_t fixed[] = {7, 15, 23, 31};
    const gguf_kv *kv;
    snprintf(key, sizeof key, "%s.vision.fullatt_block_indexes", mm->key_prefix);
    if (!gguf_get_array_opt(mm->file, key, GGUF_TYPE_COUNT, &kv, err))
        return false;
    uint64_t n = kv ? kv->n : 4;
    if (kv && !gguf_type_is_integer(kv->elem_type))
        n = 0;
    int64_t first = n ? (kv ? gguf_kv_i64(kv, 0) : fixed[0]) : -1;
    uint64_t pattern = first >= 0 ? (uint64_t)first + 1 : 0;
    bool ok = pattern > 0 && pattern <= hp->n_layer && n == hp->n_layer / pattern;
    for (uint64_t i = 0; ok && i < n; i++)
        ok = (kv ? gguf_kv_i64(kv, i) : fixed[i]) == (int64_t)((i + 1) * pattern - 1);
    if (!ok) {
        corral_error_set(err, "%s: %s must list every p-th of the %u blocks", path, key,
                         hp->n_layer);
        return false;
    }
    hp->n_wa_pattern = (uint32_t)pattern;
    return true;
}

/* ollama's mistral3: a tower eps of 1e-5 (the projector's norm takes the text config's, which
 * must be the same here), RoPE base 10000, CLIP's normalisation (the loader's default), a
 * 2 x 2 merge, and images no longer than vision.longest_edge (1540) a side, which we keep in
 * image_size. */
static bool mistral3_hparams(corral_mmproj *mm, corral_error *err)
{
    vision_hparams *hp = &mm->hp;
    const char *path = gguf_path(mm->file);
    char key[96];
    if (!read_tower_eps(mm, 1e-5f, err))
        return false;
    float merger_eps = 1e-5f;
    snprintf(key, sizeof key, "%s.text_config.rms_norm_eps", mm->key_prefix);
    if (!gguf_get_f32_opt(mm->file, key, &merger_eps, err))
        return false;
    if (merger_eps != hp->eps) {
        corral_error_set(err, "%s: %s (%g) differs from the tower's epsilon (%g); not supported",
                         path, key, (double)merger_eps, (double)hp->eps);
        return false;
    }
    if (!expect_rope_base_10000(mm, err))
        return false;
    if (!expect_u32(mm, "vision.attention.key_length", hp->n_embd / hp->n_head, err))
        return false;
    hp->n_merge = 2;
    snprintf(key, sizeof key, "%s.spatial_merge_size", mm->key_prefix);
    if (!gguf_get_u32_opt(mm->file, key, &hp->n_merge, err))
        return false;
    if (hp->n_merge == 0 || hp->n_merge > 8) { /* 2 in every released model */
        corral_error_set(err, "%s: %s is %u, expected 1 to 8", path, key, hp->n_merge);
        return false;
    }
    hp->image_size = 1540;
    snprintf(key, sizeof key, "%s.vision.longest_edge", mm->key_prefix);
    if (!gguf_get_u32_opt(mm->file, key, &hp->image_size, err))
        return false;
    if (hp->image_size > 8192) {
        corral_error_set(err, "%s: %s is %u, more than 8192", path, key, hp->image_size);
        return false;
    }
    return true;
}

/* The normalisation's vision.image_mean and vision.image_std (three values each) into hp; an
 * absent one keeps hp's value unless required. */
static bool read_normalisation(corral_mmproj *mm, bool required, corral_error *err)
{
    vision_hparams *hp = &mm->hp;
    static const char *const triples[2] = {"image_mean", "image_std"};
    for (int i = 0; i < 2; i++) {
        const gguf_kv *kv;
        char key[96];
        snprintf(key, sizeof key, "%s.vision.%s", mm->key_prefix, triples[i]);
        if (!(required ? gguf_get_array : gguf_get_array_opt)(mm->file, key, GGUF_TYPE_FLOAT32,
                                                              &kv, err))
            return false;
        if (kv && kv->n != 3) {
            corral_error_set(err, "%s: %s has %llu values, expected 3", gguf_path(mm->file), key,
                             (unsigned long long)kv->n);
            return false;
        }
        for (int c = 0; kv && c < 3; c++)
            (i ? hp->std : hp->mean)[c] = gguf_kv_f32(kv, c);
    }
    return true;
}

/* ollama's Qwen3-VL: the norm epsilon and normalisation its converter writes (defaults
 * 1e-6 and 0.5, as its engine takes them); RoPE base 10000, 2 x 2 merging and 2 frames, the
 * only values its tower runs with. The deepstack layers are bound with the tensors. */
static bool qwen3vl_hparams(corral_mmproj *mm, corral_error *err)
{
    vision_hparams *hp = &mm->hp;
    if (!read_tower_eps(mm, OLLAMA_VISION_EPS, err))
        return false;
    for (int c = 0; c < 3; c++)
        hp->mean[c] = hp->std[c] = 0.5f;
    if (!read_normalisation(mm, false, err))
        return false;
    if (!expect_rope_base_10000(mm, err))
        return false;
    return expect_u32(mm, "vision.spatial_merge_size", 2, err) &&
           expect_u32(mm, "vision.temporal_patch_size", 2, err);
}

/* ollama's Qwen 3.5, as its engine (llama.cpp behind its compatibility layer) takes the file:
 * that layer gives the tower an epsilon of 1e-6 and a normalisation of 0.5 and 0.5 whatever
 * the file says, and llama.cpp's 2 x 2 merge of two frames; a file whose keys say another
 * merge or frame count is refused rather than run as it would not have been meant. */
static bool qwen35_tower_hparams(corral_mmproj *mm, corral_error *err)
{
    vision_hparams *hp = &mm->hp;
    hp->eps = OLLAMA_VISION_EPS;
    for (int c = 0; c < 3; c++)
        hp->mean[c] = hp->std[c] = 0.5f;
    return expect_u32(mm, "vision.spatial_merge_size", 2, err) &&
           expect_u32(mm, "vision.temporal_patch_size", 2, err);
}

/* ollama's Llama 4, as its translation for llama.cpp reads it: the tower's epsilon under
 * vision.layer_norm_epsilon (required, as llama.cpp requires its own key), a pixel shuffle of
 * round(1 / vision.pixel_shuffle_ratio) (2 when absent or not positive) and a normalisation
 * to [-1, 1]. vision.rope.freq_base is not read there: llama.cpp turns at 10000 whatever it
 * says, and so do we. */
static bool llama4_hparams(corral_mmproj *mm, corral_error *err)
{
    vision_hparams *hp = &mm->hp;
    const char *path = gguf_path(mm->file);
    char key[96];
    if (hp->image_size == 0) {
        corral_error_set(err, "%s: missing key '%s.vision.image_size'", path, mm->key_prefix);
        return false;
    }
    snprintf(key, sizeof key, "%s.vision.layer_norm_epsilon", mm->key_prefix);
    if (!gguf_get_f32(mm->file, key, &hp->eps, err))
        return false;
    for (int c = 0; c < 3; c++)
        hp->mean[c] = hp->std[c] = 0.5f;
    float ratio = 0.0f;
    snprintf(key, sizeof key, "%s.vision.pixel_shuffle_ratio", mm->key_prefix);
    if (!gguf_get_f32_opt(mm->file, key, &ratio, err))
        return false;
    hp->n_merge = 2;
    if (ratio > 0.0f) {
        /* the projector's bind bounds the result; a tiny ratio must not overflow the cast */
        float scale = roundf(1.0f / ratio);
        hp->n_merge = scale >= 1.0f && scale <= 64.0f ? (uint32_t)scale : scale < 1.0f ? 2 : 65;
    }
    return true;
}

/* ollama's gemma4, as its engine (llama.cpp behind its compatibility layer) takes the file:
 * pixels in [0, 1] (the tower maps them to [-1, 1] itself), the converter's epsilon (1e-6
 * when absent) and llama.cpp's 3 x 3 pooling, which that layer does not take from the file's
 * vision.projector.scale_factor; so a file whose key says otherwise is refused. */
static bool gemma4_hparams(corral_mmproj *mm, corral_error *err)
{
    vision_hparams *hp = &mm->hp;
    for (int c = 0; c < 3; c++) {
        hp->mean[c] = 0.0f;
        hp->std[c] = 1.0f;
    }
    if (hp->image_size == 0) /* sized by pixel bounds: any side the checks accept */
        hp->image_size = hp->patch_size;
    hp->n_merge = 3;
    return read_tower_eps(mm, OLLAMA_VISION_EPS, err) &&
           expect_u32(mm, "vision.projector.scale_factor", 3, err);
}

/* ollama's LFM2-VL, as its converter writes it: the tower's epsilon (1e-6 when absent), the
 * normalisation (0.5 and 0.5 when absent), the unshuffle's vision.projector.scale_factor (2
 * when absent) and image_size, the side whose patches the position table holds (the
 * converter's tile / scale, 256). */
static bool lfm2_hparams(corral_mmproj *mm, corral_error *err)
{
    vision_hparams *hp = &mm->hp;
    const char *path = gguf_path(mm->file);
    char key[96];
    if (hp->image_size == 0) {
        corral_error_set(err, "%s: missing key '%s.vision.image_size'", path, mm->key_prefix);
        return false;
    }
    if (!read_tower_eps(mm, OLLAMA_VISION_EPS, err))
        return false;
    for (int c = 0; c < 3; c++)
        hp->mean[c] = hp->std[c] = 0.5f;
    if (!read_normalisation(mm, false, err))
        return false;
    hp->n_merge = 2; /* the projector's bind bounds it */
    snprintf(key, sizeof key, "%s.vision.projector.scale_factor", mm->key_prefix);
    return gguf_get_u32_opt(mm->file, key, &hp->n_merge, err);
}

/* ollama's GLM-OCR, as its compatibility layer hands the tower to llama.cpp: the MLP width
 * as vision.intermediate_size, the epsilon as vision.attention.layer_norm_rms_epsilon and the
 * normalisation as vision.image_mean and image_std, which llama.cpp requires; a 2 x 2 merge,
 * the only one its graph runs. Images are sized by pixel bounds, not a square side. */
static bool glmocr_hparams(corral_mmproj *mm, corral_error *err)
{
    vision_hparams *hp = &mm->hp;
    char key[96];
    if (hp->image_size == 0)
        hp->image_size = hp->patch_size;
    snprintf(key, sizeof key, "%s.vision.intermediate_size", mm->key_prefix);
    if (!gguf_get_u32_opt(mm->file, key, &hp->n_ff, err))
        return false;
    snprintf(key, sizeof key, "%s.vision.attention.layer_norm_rms_epsilon", mm->key_prefix);
    if (!gguf_get_f32(mm->file, key, &hp->eps, err))
        return false;
    if (!read_normalisation(mm, true, err))
        return false;
    return expect_u32(mm, "vision.spatial_merge_size", 2, err);
}

/* ollama's mllama: the tile's side as vision.image_size (required), the epsilon as
 * vision.attention.layer_norm_epsilon (1e-6 when absent), CLIP's normalisation (the loader's
 * default), as its engine took them; the tiles and layers are the projector's (bind). */
static bool mllama_hparams(corral_mmproj *mm, corral_error *err)
{
    if (mm->hp.image_size == 0) {
        corral_error_set(err, "%s: missing key '%s.vision.image_size'", gguf_path(mm->file),
                         mm->key_prefix);
        return false;
    }
    return read_tower_eps(mm, OLLAMA_VISION_EPS, err);
}

bool mmproj_ollama_hparams(corral_mmproj *mm, corral_error *err)
{
    vision_hparams *hp = &mm->hp;
    const char *path = gguf_path(mm->file);
    char key[96];
    uint32_t channels = 3;
    snprintf(key, sizeof key, "%s.vision.num_channels", mm->key_prefix);
    if (!gguf_get_u32_opt(mm->file, key, &channels, err))
        return false;
    if (channels != 3) {
        corral_error_set(err, "%s: %s is %u; only 3-channel images are supported", path, key,
                         channels);
        return false;
    }
    /* ollama's engine takes the MLP's width from its tensors; so do we where the key is absent */
    if (hp->n_ff == 0) {
        const gguf_tensor *up = mmproj_find_tensor(mm, "v.blk.0.ffn_up.weight");
        if (!up || up->ne[1] < 1 || up->ne[1] > (1 << 18)) {
            corral_error_set(err, "%s: no %s.vision.feed_forward_length and no usable first "
                             "block MLP to take it from", path, mm->key_prefix);
            return false;
        }
        hp->n_ff = (uint32_t)up->ne[1];
    }
    if (mm->kind == &projector_qwen25vl || mm->kind == &projector_qwen3vl) {
        /* images are sized by pixel bounds, not a square side: any side the checks accept */
        if (hp->image_size == 0)
            hp->image_size = hp->patch_size;
        if (mm->kind == &projector_qwen25vl)
            return qwen25vl_hparams(mm, err);
        return strncmp(mm->key_prefix, "qwen35", 6) == 0 ? qwen35_tower_hparams(mm, err)
                                                         : qwen3vl_hparams(mm, err);
    }
    if (mm->kind == &projector_pixtral)
        return mistral3_hparams(mm, err);
    if (mm->kind == &projector_llama4)
        return llama4_hparams(mm, err);
    if (mm->kind == &projector_gemma4v)
        return gemma4_hparams(mm, err);
    if (mm->kind == &projector_glm4v)
        return glmocr_hparams(mm, err);
    if (mm->kind == &projector_lfm2)
        return lfm2_hparams(mm, err);
    if (mm->kind == &projector_mllama)
        return mllama_hparams(mm, err);
    if (mm->kind == &projector_deepseekocr) {
        /* as ollama's compatibility layer gives llama.cpp the file: a normalisation to
         * [-1, 1]; the epsilon and sizes are the projector's own (projector_deepseekocr.c) */
        for (int c = 0; c < 3; c++)
            hp->mean[c] = hp->std[c] = 0.5f;
        hp->eps = OLLAMA_VISION_EPS;
        if (hp->image_size == 0) /* the views' sizes are fixed: any the checks accept */
            hp->image_size = hp->patch_size;
        return true;
    }
    return gemma3_hparams(mm, err);
}

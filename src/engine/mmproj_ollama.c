/*
 * The vision tower as ollama stores it for its own engine: inside the text model's GGUF, with
 * the hyper-parameters under the text architecture's name ("gemma3.vision.image_size") and its
 * own tensor names ("v.blk.0.layer_norm1.weight" for llama.cpp's "v.blk.0.ln1.weight"). The
 * loader (mmproj.c) asks for llama.cpp's names; this file says which architectures carry a
 * tower this way, turns a name into the file's, and fills the values ollama's engine fixes in
 * code rather than in the file.
 */
#include <stdio.h>
#include <string.h>

#include "mmproj.h"

/* What ollama's gemma3 image processor and converter assume: SigLIP's normalisation to
 * [-1, 1], its LayerNorm epsilon, and 256 tokens per image. */
#define OLLAMA_GEMMA3_EPS 1e-6f
#define OLLAMA_GEMMA3_TOKENS 256u

const projector_kind *mmproj_ollama_kind(const gguf_file *file, const char *arch)
{
    if (strcmp(arch, "gemma3") != 0)
        return NULL;
    return gguf_find_kv(file, "gemma3.vision.block_count") ? &projector_gemma3 : NULL;
}

const char *mmproj_ollama_name(const char *name, char *buf, size_t size)
{
    static const struct { const char *ours, *theirs; } whole[] = {
        {"v.patch_embd.weight", "v.patch_embedding.weight"},
        {"v.patch_embd.bias", "v.patch_embedding.bias"},
        {"v.position_embd.weight", "v.position_embedding.weight"},
        {"v.post_ln.weight", "v.post_layernorm.weight"},
        {"v.post_ln.bias", "v.post_layernorm.bias"},
        {"mm.soft_emb_norm.weight", "mm.mm_soft_emb_norm.weight"},
        {"mm.input_projection.weight", "mm.mm_input_projection.weight"},
    };
    static const struct { const char *ours, *theirs; } part[] = {
        {"ln1.", "layer_norm1."},     {"ln2.", "layer_norm2."}, {"attn_out.", "attn_output."},
        {"ffn_up.", "mlp.fc1."},      {"ffn_down.", "mlp.fc2."},
    };
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
        if (strcmp(name, whole[i].ours) == 0)
            return whole[i].theirs;
    /* a block's tensor: "v.blk.<n>." then the part ollama names otherwise */
    static const char blk[] = "v.blk.";
    if (strncmp(name, blk, sizeof blk - 1) != 0)
        return name;
    const char *dot = strchr(name + sizeof blk - 1, '.');
    if (!dot)
        return name;
    for (size_t i = 0; i < sizeof part / sizeof part[0]; i++) {
        size_t n = strlen(part[i].ours);
        if (strncmp(dot + 1, part[i].ours, n) != 0)
            continue;
        int w = snprintf(buf, size, "%.*s%s%s", (int)(dot + 1 - name), name, part[i].theirs,
                         dot + 1 + n);
        return w > 0 && (size_t)w < size ? buf : name;
    }
    return name;
}

bool mmproj_ollama_hparams(corral_mmproj *mm, corral_error *err)
{
    vision_hparams *hp = &mm->hp;
    const char *path = gguf_path(mm->file);
    char key[96];
    for (int c = 0; c < 3; c++) {
        hp->mean[c] = 0.5f;
        hp->std[c] = 0.5f;
    }
    hp->eps = OLLAMA_GEMMA3_EPS;
    snprintf(key, sizeof key, "%s.vision.attention.layer_norm_epsilon", mm->key_prefix);
    if (!gguf_get_f32_opt(mm->file, key, &hp->eps, err))
        return false;
    uint32_t channels = 3;
    snprintf(key, sizeof key, "%s.vision.num_channels", mm->key_prefix);
    if (!gguf_get_u32_opt(mm->file, key, &channels, err))
        return false;
    if (channels != 3) {
        corral_error_set(err, "%s: %s is %u; only 3-channel images are supported", path, key,
                         channels);
        return false;
    }
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

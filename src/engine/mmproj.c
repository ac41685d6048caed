/*
 * Loading a projector file: the clip hyper-parameters with llama.cpp's defaults, the
 * projector kind from the table below, and every tower tensor checked for presence, type and
 * shape, so that encoding trusts them. Also the public vision entry points that are not the
 * tower's own steps (vision.c) or a kind's (projector_*.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blocks.h"
#include "gpu_vision.h"
#include "mmproj.h"
#include "tensor_type.h"

static const projector_kind *const projector_kinds[] = {&projector_gemma3, &projector_qwen25vl,
                                                        &projector_llava, &projector_pixtral,
                                                        &projector_qwen3vl, &projector_minicpmv,
                                                        &projector_llama4, &projector_gemma4v,
                                                        &projector_glm4v, &projector_deepseekocr,
                                                        &projector_lfm2};

/* Bounds on what a file may claim, far above any real tower, so that a hostile header cannot
 * make the encoder allocate or loop without end. */
enum {
    MAX_IMAGE_SIZE = 8192,
    MAX_PATCH_SIZE = 64,
    MAX_EMBD = 1 << 16,
    MAX_LAYERS = 512,
    MAX_PATCHES = MMPROJ_MAX_PATCHES,
};

const gguf_tensor *mmproj_find_tensor(const corral_mmproj *mm, const char *name)
{
    char buf[128];
    return gguf_find_tensor(
        mm->file,
        mm->ollama_names ? mmproj_ollama_name(mm->kind, mm->file, name, buf, sizeof buf) : name);
}

static bool bind_tensor(corral_mmproj *mm, weight *w, const char *name, size_t n_in,
                        size_t n_out, size_t conv_channels, bool vector, bool required,
                        corral_error *err)
{
    char buf[128];
    if (mm->ollama_names) /* messages name the tensor as the file does */
        name = mmproj_ollama_name(mm->kind, mm->file, name, buf, sizeof buf);
    const gguf_tensor *t = gguf_find_tensor(mm->file, name);
    memset(w, 0, sizeof *w);
    if (!t) {
        if (required)
            corral_error_set(err, "%s: missing tensor '%s'", gguf_path(mm->file), name);
        return !required;
    }
    /* a conv kernel [p, p, channels, n_out] is a matrix of n_out rows of p * p * channels */
    bool shape_ok;
    if (conv_channels)
        shape_ok = t->ne[0] == t->ne[1] && t->ne[2] == (int64_t)conv_channels &&
                   (uint64_t)t->ne[0] * (uint64_t)t->ne[1] * conv_channels == n_in &&
                   t->ne[3] == (int64_t)n_out;
    else
        shape_ok = t->ne[0] == (int64_t)n_in && t->ne[1] == (int64_t)(vector ? 1 : n_out) &&
                   t->ne[2] == 1 && t->ne[3] == 1;
    if (!shape_ok) {
        corral_error_set(err, "%s: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected %zu x %zu",
                         gguf_path(mm->file), name, (long long)t->ne[0], (long long)t->ne[1],
                         (long long)t->ne[2], (long long)t->ne[3], n_in, vector ? (size_t)1 : n_out);
        return false;
    }
    const quant_ops *ops = quant_ops_active(t->type);
    bool usable = vector ? t->type == TENSOR_TYPE_F32 : ops && ops->dot && ops->dequantize;
    if (!usable || (uintptr_t)t->data % sizeof(float) != 0) {
        corral_error_set(err, "%s: tensor '%s' has type %s, which is not supported %s",
                         gguf_path(mm->file), name, tensor_type_name(t->type),
                         vector ? "for a vector (F32 is)" : "for a matrix");
        return false;
    }
    w->data = t->data;
    w->type = t->type;
    w->n_in = n_in;
    w->n_out = vector ? 1 : n_out;
    w->row_bytes = t->size_bytes / w->n_out;
    w->ops = ops;
    return true;
}

bool mmproj_bind_matrix(corral_mmproj *mm, weight *w, const char *name, size_t n_in,
                        size_t n_out, bool required, corral_error *err)
{
    return bind_tensor(mm, w, name, n_in, n_out, 0, false, required, err);
}

bool mmproj_bind_vector(corral_mmproj *mm, weight *w, const char *name, size_t n, bool required,
                        corral_error *err)
{
    return bind_tensor(mm, w, name, n, 1, 0, true, required, err);
}

bool mmproj_bind_conv(corral_mmproj *mm, weight *w, const char *name, size_t channels,
                      size_t n_in, size_t n_out, bool required, corral_error *err)
{
    return bind_tensor(mm, w, name, n_in, n_out, channels, false, required, err);
}

/* key: under the file's prefix ("vision.image_size": "clip.vision.image_size") */
static bool read_u32(const corral_mmproj *mm, const char *name, uint32_t *out, uint32_t max,
                     bool required, corral_error *err)
{
    char key[96];
    snprintf(key, sizeof key, "%s.%s", mm->key_prefix, name);
    if (!(required ? gguf_get_u32 : gguf_get_u32_opt)(mm->file, key, out, err))
        return false;
    if (*out > max) {
        corral_error_set(err, "%s: %s is %u, more than %u", gguf_path(mm->file), key, *out, max);
        return false;
    }
    return true;
}

static bool read_triple(const corral_mmproj *mm, const char *key, float out[3], corral_error *err)
{
    const gguf_kv *kv;
    if (!gguf_get_array_opt(mm->file, key, GGUF_TYPE_FLOAT32, &kv, err))
        return false;
    if (!kv)
        return true;
    if (kv->n != 3) {
        corral_error_set(err, "%s: %s has %llu values, expected 3", gguf_path(mm->file), key,
                         (unsigned long long)kv->n);
        return false;
    }
    for (int c = 0; c < 3; c++)
        out[c] = gguf_kv_f32(kv, c);
    return true;
}

static bool read_hparams(corral_mmproj *mm, corral_error *err)
{
    vision_hparams *hp = &mm->hp;
    const char *path = gguf_path(mm->file);
    bool has_vision = mm->ollama_names; /* there the architecture said so (mmproj_ollama_kind) */
    if (!gguf_get_bool_opt(mm->file, "clip.has_vision_encoder", &has_vision, err))
        return false;
    if (!has_vision) {
        corral_error_set(err, "%s: the projector file has no vision encoder", path);
        return false;
    }
    /* llama.cpp's defaults: CLIP's normalisation, a 4 x 4 pooling for gemma3 (3 x 3 for
     * gemma4v), Qwen's 112-pixel windows */
    *hp = (vision_hparams){.mean = {0.48145466f, 0.4578275f, 0.40821073f},
                           .std = {0.26862954f, 0.26130258f, 0.27577711f},
                           .n_merge = mm->kind == &projector_gemma4v ? 3 : 4,
                           .window_pixels = 112};
    /* ollama's files may leave out the sizes its engine does not need (mmproj_ollama.c);
     * its DeepSeek-OCR files name the heads vision.head_count */
    bool clip = !mm->ollama_names;
    bool ollama_deepseekocr = mm->ollama_names && mm->kind == &projector_deepseekocr;
    if (!read_u32(mm, "vision.image_size", &hp->image_size, MAX_IMAGE_SIZE, clip, err) ||
        !read_u32(mm, "vision.patch_size", &hp->patch_size, MAX_PATCH_SIZE, true, err) ||
        !read_u32(mm, "vision.embedding_length", &hp->n_embd, MAX_EMBD, true, err) ||
        !read_u32(mm, "vision.feed_forward_length", &hp->n_ff, 4 * MAX_EMBD, clip, err) ||
        !read_u32(mm, "vision.block_count", &hp->n_layer, MAX_LAYERS, true, err) ||
        !read_u32(mm, ollama_deepseekocr ? "vision.head_count" : "vision.attention.head_count",
                  &hp->n_head, MAX_EMBD, true, err))
        return false;
    if (mm->ollama_names) {
        if (!mmproj_ollama_hparams(mm, err))
            return false;
    } else if (!read_u32(mm, "vision.projector.scale_factor", &hp->n_merge, MAX_IMAGE_SIZE, false,
                         err) ||
               !read_u32(mm, "vision.n_wa_pattern", &hp->n_wa_pattern, MAX_LAYERS, false, err) ||
               !read_u32(mm, "vision.window_size", &hp->window_pixels, MAX_IMAGE_SIZE, false,
                         err) ||
               !gguf_get_f32(mm->file, "clip.vision.attention.layer_norm_epsilon", &hp->eps,
                             err) ||
               !read_triple(mm, "clip.vision.image_mean", hp->mean, err) ||
               !read_triple(mm, "clip.vision.image_std", hp->std, err))
        return false;
    if (hp->patch_size == 0 || hp->image_size < hp->patch_size || hp->n_embd == 0 ||
        hp->n_ff == 0 || hp->n_layer == 0 || hp->n_head == 0 || hp->n_embd % hp->n_head != 0 ||
        hp->n_merge == 0 || !(hp->eps >= 0.0f)) {
        corral_error_set(err, "%s: inconsistent vision hyper-parameters (image %u, patch %u, "
                         "embedding %u, ffn %u, layers %u, heads %u)",
                         path, hp->image_size, hp->patch_size, hp->n_embd, hp->n_ff, hp->n_layer,
                         hp->n_head);
        return false;
    }
    for (int c = 0; c < 3; c++)
        if (!(hp->std[c] > 0.0f)) {
            corral_error_set(err, "%s: %s.vision.image_std must be positive", path,
                             mm->key_prefix);
            return false;
        }
    hp->norm = mm->kind->norm;
    hp->ffn = mm->kind->ffn;
    return true;
}

/* A fused attn_qkv [E, 3E] (Qwen3-VL's): its rows are the queries', keys' and values' one
 * after another, so each third is bound as its own matrix over the same memory, and the
 * bias likewise; a product's rows do not depend on the others, so this computes what the
 * fused product does. False with err set when present but malformed; *fused says whether
 * the layer has one. */
static bool bind_fused_qkv(corral_mmproj *mm, vision_layer *l, uint32_t il, bool *fused,
                           corral_error *err)
{
    size_t E = mm->hp.n_embd;
    char name[96];
    snprintf(name, sizeof name, "v.blk.%u.attn_qkv.weight", il);
    *fused = mmproj_find_tensor(mm, name) != NULL;
    if (!*fused)
        return true;
    weight qkv, qkv_b;
    if (!mmproj_bind_matrix(mm, &qkv, name, E, 3 * E, true, err))
        return false;
    snprintf(name, sizeof name, "v.blk.%u.attn_qkv.bias", il);
    if (!mmproj_bind_vector(mm, &qkv_b, name, 3 * E, false, err))
        return false;
    weight *parts[3] = {&l->wq, &l->wk, &l->wv}, *biases[3] = {&l->bq, &l->bk, &l->bv};
    for (size_t i = 0; i < 3; i++) {
        *parts[i] = qkv;
        parts[i]->n_out = E;
        parts[i]->data = (const uint8_t *)qkv.data + i * E * qkv.row_bytes;
        if (qkv_b.data) {
            *biases[i] = qkv_b;
            biases[i]->n_in = E;
            biases[i]->row_bytes = E * sizeof(float);
            biases[i]->data = (const float *)qkv_b.data + i * E;
        }
    }
    return true;
}

static bool bind_layer(corral_mmproj *mm, uint32_t il, corral_error *err)
{
    const vision_hparams *hp = &mm->hp;
    vision_layer *l = &mm->layers[il];
    size_t E = hp->n_embd, F = hp->n_ff;
    bool layer_norm = hp->norm == VISION_LAYER_NORM;
    bool gated = hp->ffn == VISION_FFN_SWIGLU || hp->ffn == VISION_FFN_GEGLU_QUICK;
    size_t d = E / hp->n_head;
    bool fused;
    if (!bind_fused_qkv(mm, l, il, &fused, err))
        return false;
    struct {
        weight *w;
        const char *suffix;
        size_t n_in, n_out;
        bool vector, required;
    } t[] = {
        {&l->ln1, "ln1.weight", E, 1, true, true},
        {&l->ln1_b, "ln1.bias", E, 1, true, layer_norm},
        {&l->ln2, "ln2.weight", E, 1, true, true},
        {&l->ln2_b, "ln2.bias", E, 1, true, layer_norm},
        {&l->wq, "attn_q.weight", E, E, false, true},
        {&l->bq, "attn_q.bias", E, 1, true, false},
        {&l->wk, "attn_k.weight", E, E, false, true},
        {&l->bk, "attn_k.bias", E, 1, true, false},
        {&l->wv, "attn_v.weight", E, E, false, true},
        {&l->bv, "attn_v.bias", E, 1, true, false},
        {&l->wo, "attn_out.weight", E, E, false, true},
        {&l->bo, "attn_out.bias", E, 1, true, false},
        {&l->up, "ffn_up.weight", E, F, false, true},
        {&l->up_b, "ffn_up.bias", F, 1, true, false},
        {&l->gate, "ffn_gate.weight", E, F, false, gated},
        {&l->gate_b, "ffn_gate.bias", F, 1, true, false},
        {&l->down, "ffn_down.weight", F, E, false, true},
        {&l->down_b, "ffn_down.bias", E, 1, true, false},
        {&l->q_norm, "attn_q_norm.weight", d, 1, true, false},
        {&l->k_norm, "attn_k_norm.weight", d, 1, true, false},
        {&l->attn_post_norm, "attn_post_norm.weight", E, 1, true, false},
        {&l->ffn_post_norm, "ffn_post_norm.weight", E, 1, true, false},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char name[96];
        if (fused && (t[i].w == &l->wq || t[i].w == &l->bq || t[i].w == &l->wk ||
                      t[i].w == &l->bk || t[i].w == &l->wv || t[i].w == &l->bv))
            continue;
        snprintf(name, sizeof name, "v.blk.%u.%s", il, t[i].suffix);
        if (!bind_tensor(mm, t[i].w, name, t[i].n_in, t[i].n_out, 0, t[i].vector, t[i].required,
                         err))
            return false;
    }
    /* the layer's output scale: one value, or one per channel */
    char name[96];
    snprintf(name, sizeof name, "v.blk.%u.out_scale.weight", il);
    const gguf_tensor *scale = mmproj_find_tensor(mm, name);
    size_t n_scale = scale && scale->ne[0] == 1 ? 1 : E;
    return bind_tensor(mm, &l->out_scale, name, n_scale, 1, 0, true, false, err);
}

/* An F16 patch kernel as F32 rows in *wide (NULL for any other type). */
static bool widen_f16_kernel(const weight *w, float **wide, corral_error *err)
{
    *wide = NULL;
    if (!w->data || w->type != TENSOR_TYPE_F16)
        return true;
    if (!(*wide = malloc(w->n_in * w->n_out * sizeof **wide))) {
        corral_error_set(err, "out of memory");
        return false;
    }
    for (size_t r = 0; r < w->n_out; r++)
        w->ops->dequantize((const uint8_t *)w->data + r * w->row_bytes, *wide + r * w->n_in,
                           w->n_in);
    return true;
}

static bool bind_tower(corral_mmproj *mm, corral_error *err)
{
    const vision_hparams *hp = &mm->hp;
    size_t E = hp->n_embd, p = hp->patch_size, n_in = 3 * p * p;
    /* ollama's Qwen3-VL keeps both frames' kernels in one Conv3D tensor: its kind binds them */
    bool conv3d = mm->ollama_names && mm->kind == &projector_qwen3vl;
    /* llama4's unfold is a linear layer: a [3 * p * p, E] matrix, laid out as the kernel */
    const gguf_tensor *patch = mmproj_find_tensor(mm, "v.patch_embd.weight");
    size_t conv_channels = mm->kind == &projector_llama4 && patch && patch->ne[2] == 1 ? 0 : 3;
    if (!(conv3d || bind_tensor(mm, &mm->patch_embd, "v.patch_embd.weight", n_in, E,
                                conv_channels, false, true, err)) ||
        !(conv3d || bind_tensor(mm, &mm->patch_embd_1, "v.patch_embd.weight.1", n_in, E, 3, false,
                                false, err)) ||
        !mmproj_bind_vector(mm, &mm->patch_b, "v.patch_embd.bias", E, false, err) ||
        !mmproj_bind_vector(mm, &mm->post_ln, "v.post_ln.weight", E, false, err) ||
        !mmproj_bind_vector(mm, &mm->post_ln_b, "v.post_ln.bias", E, false, err))
        return false;
    if (mm->patch_embd_1.data && mm->patch_embd_1.type != mm->patch_embd.type) {
        /* the patches are laid out once, in the kernels' type */
        corral_error_set(err, "%s: tensor 'v.patch_embd.weight.1' must have the type of "
                         "'v.patch_embd.weight'", gguf_path(mm->file));
        return false;
    }
    if (!widen_f16_kernel(&mm->patch_embd, &mm->patch_embd_wide, err) ||
        !widen_f16_kernel(&mm->patch_embd_1, &mm->patch_embd_1_wide, err))
        return false;
    if (!(mm->layers = calloc(hp->n_layer, sizeof *mm->layers))) {
        corral_error_set(err, "out of memory");
        return false;
    }
    for (uint32_t il = 0; il < hp->n_layer; il++)
        if (!bind_layer(mm, il, err))
            return false;
    return true;
}

corral_mmproj *corral_mmproj_load(const char *path, corral_error *err)
{
    gguf_file *file = gguf_open(path, err);
    return file ? mmproj_open(file, err) : NULL;
}

corral_mmproj *mmproj_open(gguf_file *file, corral_error *err)
{
    const char *path = gguf_path(file);
    corral_mmproj *mm = calloc(1, sizeof *mm);
    if (!mm) {
        gguf_close(file);
        corral_error_set(err, "out of memory");
        return NULL;
    }
    mm->file = file;
    gguf_str arch, type;
    if (!gguf_get_str(mm->file, "general.architecture", &arch, err))
        goto fail;
    if (arch.size == 0 || arch.size >= sizeof mm->key_prefix || memchr(arch.data, 0, arch.size)) {
        corral_error_set(err, "%s: not a projector file (architecture '%.*s')", path,
                         (int)(arch.size < 64 ? arch.size : 64), arch.data);
        goto fail;
    }
    memcpy(mm->key_prefix, arch.data, arch.size);
    if (strcmp(mm->key_prefix, "clip") != 0) {
        /* a text model's file may carry its own tower, ollama's way */
        if (!(mm->kind = mmproj_ollama_kind(mm->file, mm->key_prefix))) {
            corral_error_set(err, "%s: not a projector file (architecture '%s', expected 'clip' "
                             "or a model that carries a vision tower)", path, mm->key_prefix);
            goto fail;
        }
        mm->ollama_names = true;
    } else {
        /* LLaVA's early files name no type: llama.cpp takes them as "mlp" */
        type = (gguf_str){.data = "mlp", .size = 3};
        if (!gguf_get_str_opt(mm->file, "clip.projector_type", &type, err))
            goto fail;
        for (size_t i = 0; i < sizeof projector_kinds / sizeof projector_kinds[0]; i++)
            if (strlen(projector_kinds[i]->name) == type.size &&
                memcmp(projector_kinds[i]->name, type.data, type.size) == 0)
                mm->kind = projector_kinds[i];
        if (!mm->kind) {
            corral_error_set(err, "%s: projector type '%.*s' is not supported", path,
                             (int)(type.size < 64 ? type.size : 64), type.data);
            goto fail;
        }
    }
    if (!read_hparams(mm, err) || !bind_tower(mm, err) || !mm->kind->bind(mm, err))
        goto fail;
    block_geglu_prepare(); /* the GELU table */
    return mm;
fail:
    corral_mmproj_free(mm);
    return NULL;
}

void corral_mmproj_free(corral_mmproj *mm)
{
    if (!mm)
        return;
    free(mm->layers);
    free(mm->deepstack);
    free(mm->patch_owned);
    free(mm->merger_owned);
    free(mm->input_proj_owned);
    free(mm->patch_embd_wide);
    free(mm->patch_embd_1_wide);
    free(mm->patch_embd_rounded);
    free(mm->img_break_owned);
    free(mm->clamp_owned);
    deepseekocr_free(mm->sam);
    mllama_free(mm->mllama);
    gpu_vision_free(mm->gpu);
    gguf_close(mm->file);
    free(mm);
}

const char *corral_mmproj_projector(const corral_mmproj *mm)
{
    return mm->kind->name;
}

const char *corral_mmproj_image_begin(const corral_mmproj *mm)
{
    return mm->kind->image_begin;
}

const char *corral_mmproj_image_end(const corral_mmproj *mm)
{
    return mm->kind->image_end;
}

const char *corral_mmproj_part_text(const corral_mmproj *mm, uint32_t cols, uint32_t rows,
                                    size_t part)
{
    if (mm->kind->part_text)
        return mm->kind->part_text(mm, cols, rows, part);
    return part == 0 ? mm->kind->image_begin : mm->kind->image_end;
}

bool corral_mmproj_fits(const corral_mmproj *mm, const corral_model *model, corral_error *err)
{
    if (model->arch->tensors & ARCH_ENCODER) {
        corral_error_set(err, "%s is an embedding model: it takes no images", model->arch->name);
        return false;
    }
    /* a deepstack model takes, per image token, its embedding and one row per deepstack
     * layer side by side */
    uint64_t takes = (uint64_t)model->hp.n_embd * (1 + (uint64_t)model->hp.n_deepstack);
    if (mm->hp.n_embd_text != takes) {
        corral_error_set(err, "the projector makes embeddings of %u values, the model takes %llu "
                         "(%u deepstack layers)", mm->hp.n_embd_text, (unsigned long long)takes,
                         model->hp.n_deepstack);
        return false;
    }
    return true;
}

size_t corral_mmproj_image_tokens(const corral_mmproj *mm, uint32_t nx, uint32_t ny)
{
    const vision_hparams *hp = &mm->hp;
    if (mm->kind == &projector_gemma3) { /* the square's patches pooled n_merge x n_merge */
        size_t side = hp->image_size / hp->patch_size / hp->n_merge;
        return nx == hp->image_size && ny == hp->image_size ? side * side : 0;
    }
    if (mm->kind == &projector_llava) { /* a column of squares, every patch a token */
        size_t side = hp->image_size / hp->patch_size;
        return nx == hp->image_size && ny % hp->image_size == 0 &&
                       ny / hp->image_size <= mm->max_squares
                   ? ny / hp->image_size * side * side
                   : 0;
    }
    if (mm->kind == &projector_pixtral) /* merged rows, an [IMG_BREAK] between two */
        return pixtral_tokens(mm, nx, ny);
    if (mm->kind == &projector_llama4) /* a column of squares, each pixel-shuffled */
        return llama4_tokens(mm, nx, ny);
    if (mm->kind == &projector_deepseekocr) /* rows of tiles, the global view */
        return deepseekocr_tokens(mm, nx, ny);
    if (mm->kind == &projector_lfm2) /* one per merge square */
        return lfm2_tokens(mm, nx, ny);
    if (mm->kind == &projector_mllama) /* one token carrying every tile's states */
        return mllama_tokens(mm, nx, ny);
    if (mm->kind == &projector_minicpmv) /* the resampler's queries, for any part's size */
        return nx % hp->patch_size == 0 && ny % hp->patch_size == 0 ? hp->n_query : 0;
    /* qwen2.5vl: 2 x 2 patches merged; gemma4v: n_merge x n_merge pooled */
    size_t align = (mm->kind == &projector_gemma4v ? hp->n_merge : 2) * (size_t)hp->patch_size;
    return nx % align == 0 && ny % align == 0 ? (nx / align) * (ny / align) : 0;
}

uint32_t corral_mmproj_batch_tokens(const corral_mmproj *mm, const corral_model *model)
{
    if (!model->hp.image_bidirectional)
        return 1;
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    /* a sliced image's parts (stretch) go through one by one: each has the square's tokens */
    if (params.resize == CORRAL_IMAGE_LETTERBOX || params.resize == CORRAL_IMAGE_STRETCH)
        return (uint32_t)corral_mmproj_image_tokens(mm, params.image_size, params.image_size);
    if (params.resize == CORRAL_IMAGE_ANYRES || params.resize == CORRAL_IMAGE_TILES)
        return (uint32_t)corral_mmproj_image_tokens(mm, params.image_size,
                                                    params.image_size * mm->max_squares);
    /* smart resizing bounds the pixels, so the tokens: max_pixels of align x align each */
    uint64_t most = params.max_pixels / ((uint64_t)params.align * params.align);
    return most < UINT32_MAX ? (uint32_t)most : UINT32_MAX;
}

/* The most embeddings one image becomes, every part of it together, under the largest
 * image the preprocessing of params lets through. */
static uint64_t most_image_tokens(const corral_mmproj *mm, const corral_image_params *params)
{
    uint32_t S = params->image_size;
    uint64_t align = params->align ? params->align : 1; /* every kind that reads it sets it */
    switch (params->resize) {
    case CORRAL_IMAGE_LETTERBOX:
        return corral_mmproj_image_tokens(mm, S, S);
    case CORRAL_IMAGE_STRETCH: /* the overview and up to max_slices slices, each as many */
        return (1 + (uint64_t)params->max_slices) * corral_mmproj_image_tokens(mm, S, S);
    case CORRAL_IMAGE_ANYRES:
    case CORRAL_IMAGE_TILES: /* the overview and the most slices in one column */
        return corral_mmproj_image_tokens(mm, S, S * mm->max_squares);
    case CORRAL_IMAGE_VIEWS: { /* the global view alone, or a grid with it in rows below */
        uint64_t most = corral_mmproj_image_tokens(mm, S, S);
        for (uint32_t cols = 1; cols <= params->max_tiles; cols++)
            for (uint32_t rows = 1; rows <= params->max_tiles / cols; rows++) {
                uint64_t nx = (uint64_t)cols * params->tile_size;
                uint64_t ny = rows * (uint64_t)params->tile_size + ((uint64_t)S * S + nx - 1) / nx;
                if (nx > MAX_IMAGE_SIZE || ny > MAX_IMAGE_SIZE)
                    continue; /* corral_mmproj_encode refuses it */
                uint64_t n = corral_mmproj_image_tokens(mm, (uint32_t)nx, (uint32_t)ny);
                most = n > most ? n : most;
            }
        return most;
    }
    case CORRAL_IMAGE_CANVAS: /* mllama: one token, as wide as every tile's rows */
        return 1;
    case CORRAL_IMAGE_LONGEST_EDGE: { /* the square of the longest edge, sides rounded up */
        uint32_t side = (uint32_t)((S + align - 1) / align * align);
        return corral_mmproj_image_tokens(mm, side, side);
    }
    case CORRAL_IMAGE_SMART:
        break;
    }
    uint64_t most = params->max_pixels / (align * align);
    if (mm->kind == &projector_pixtral) /* an [IMG_BREAK] after every merged row but the last */
        most += (most < MAX_IMAGE_SIZE / align ? most : MAX_IMAGE_SIZE / align) - 1;
    /* a side under one merged token is kept at one, so a thin image's other side may pass
     * the pixel bound, up to the sides and patches corral_mmproj_encode takes */
    uint64_t per_token = (align / params->patch_size) * (align / params->patch_size);
    uint64_t long_side = MAX_IMAGE_SIZE / align;
    if (per_token && long_side > MAX_PATCHES / per_token)
        long_side = MAX_PATCHES / per_token;
    uint64_t thin = corral_mmproj_image_tokens(mm, (uint32_t)align, (uint32_t)(long_side * align));
    most = thin > most ? thin : most;
    if (mm->kind == &projector_lfm2 && params->max_slices) /* the tiles before the thumbnail */
        most += params->max_slices *
                (uint64_t)lfm2_tokens(mm, params->tile_size, params->tile_size);
    return most;
}

uint64_t corral_mmproj_image_bytes(const corral_mmproj *mm)
{
    const vision_hparams *hp = &mm->hp;
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    uint64_t width = hp->n_embd_text, tokens = most_image_tokens(mm, &params), bytes;
    if (mm->kind == &projector_mllama) { /* every tile's patches and class row */
        uint64_t side = hp->image_size / hp->patch_size;
        width *= params.max_tiles * (side * side + 1);
    }
    if (__builtin_mul_overflow(tokens, width, &bytes) ||
        __builtin_mul_overflow(bytes, (uint64_t)sizeof(float), &bytes))
        return UINT64_MAX;
    return bytes;
}

void corral_mmproj_image_params(const corral_mmproj *mm, corral_image_params *out)
{
    const vision_hparams *hp = &mm->hp;
    /* a merged token's side; Qwen's bounds as llama.cpp sets them: 8 to 4096 merged tokens,
     * pixtral's 8 to 1024, gemma4v's 40 to 280 (it does poorly on fewer, llama.cpp notes) */
    bool pixtral = mm->kind == &projector_pixtral, gemma4v = mm->kind == &projector_gemma4v;
    uint32_t side = pixtral || gemma4v ? hp->patch_size * hp->n_merge : 2 * hp->patch_size;
    uint64_t token_pixels = (uint64_t)side * side;
    *out = (corral_image_params){.resize = mm->kind->resize,
                                 .image_size = hp->image_size,
                                 .patch_size = hp->patch_size,
                                 .align = side,
                                 .min_pixels = (gemma4v ? 40 : 8) * token_pixels,
                                 .max_pixels =
                                     (pixtral ? 1024 : gemma4v ? 280 : 4096) * token_pixels,
                                 /* llama.cpp's max_slice_nums, fixed for minicpm-v */
                                 .max_slices = mm->kind == &projector_minicpmv ? 9 : 0};
    if (pixtral && mm->ollama_names) { /* ollama's own rule: image_size is its longest edge */
        out->resize = CORRAL_IMAGE_LONGEST_EDGE;
        out->align = hp->patch_size;
        out->min_pixels = 0;
        out->max_pixels = (uint64_t)hp->image_size * hp->image_size;
    }
    memcpy(out->mean, hp->mean, sizeof out->mean);
    memcpy(out->std, hp->std, sizeof out->std);
    if (mm->kind == &projector_lfm2) { /* a merge square a token, 64 to 256 of them */
        out->align = hp->patch_size * hp->n_merge;
        out->min_pixels = 64 * (uint64_t)out->align * out->align;
        out->max_pixels = 256 * (uint64_t)out->align * out->align;
        /* tiles of 512 pixels, 2 to 10 of them, as llama.cpp fixes them for LFM2-VL */
        out->tile_size = 512;
        out->max_slices = 10;
    }
    if (mm->kind == &projector_llama4) { /* its tiles at llama.cpp's pinpoints, on black */
        out->n_pinpoints = mm->n_pinpoints;
        memcpy(out->pinpoints, mm->pinpoints, sizeof out->pinpoints);
    }
    if (mm->kind == &projector_deepseekocr)
        deepseekocr_image_params(mm, out);
    if (mm->kind == &projector_mllama)
        mllama_image_params(mm, out);
    if (mm->kind == &projector_llava) {
        /* LLaVA pads with its mean colour; 1.6 slices at its pinpoints */
        memcpy(out->pad, (const uint8_t[3]){122, 116, 104}, sizeof out->pad);
        if (mm->n_pinpoints) {
            out->resize = CORRAL_IMAGE_ANYRES;
            out->n_pinpoints = mm->n_pinpoints;
            memcpy(out->pinpoints, mm->pinpoints, sizeof out->pinpoints);
        }
    }
}

bool corral_mmproj_encode(const corral_mmproj *mm, const float *pixels, uint32_t nx, uint32_t ny,
                          int n_threads, corral_image_embd *out, corral_error *err)
{
    return corral_mmproj_encode_cancellable(mm, pixels, nx, ny, n_threads, NULL, out, err);
}

bool corral_mmproj_encode_cancellable(const corral_mmproj *mm, const float *pixels, uint32_t nx,
                                      uint32_t ny, int n_threads, const corral_cancel *cancel,
                                      corral_image_embd *out, corral_error *err)
{
    memset(out, 0, sizeof *out);
    if (nx == 0 || ny == 0 || nx > MAX_IMAGE_SIZE || ny > MAX_IMAGE_SIZE) {
        corral_error_set(err, "image of %u x %u pixels: sides must be 1 to %u", nx, ny,
                         (unsigned)MAX_IMAGE_SIZE);
        return false;
    }
    uint64_t p = mm->hp.patch_size;
    /* deepseekocr encodes its views one by one and takes only its own sizes */
    if (mm->kind != &projector_deepseekocr && (nx / p) * (ny / p) > MAX_PATCHES) {
        corral_error_set(err, "image of %u x %u pixels: more than %u patches of %u pixels", nx, ny,
                         (unsigned)MAX_PATCHES, mm->hp.patch_size);
        return false;
    }
    size_t threads = n_threads > 0 ? (size_t)n_threads : threadpool_physical_cores();
    threadpool *pool = threadpool_create(threads, err);
    if (!pool)
        return false;
    bool ok = mm->kind->encode(mm, pool, cancel, pixels, nx, ny, out, err);
    threadpool_free(pool);
    if (!ok)
        corral_image_embd_free(out);
    return ok;
}

bool corral_mmproj_gpu_bytes(const corral_mmproj *mm, int device, uint64_t *out,
                             corral_error *err)
{
    *out = 0;
    if (mm->kind == &projector_mllama)
        return mllama_gpu_bytes(mm, device, out, err);
    return vision_gpu_bytes(mm, device, out, err);
}

bool corral_mmproj_use_gpu(corral_mmproj *mm, int device, corral_error *err)
{
    if (mm->gpu)
        return true;
    if (mm->kind == &projector_mllama)
        return mllama_use_gpu(mm, device, err);
    return vision_use_gpu(mm, device, err);
}

void corral_image_embd_free(corral_image_embd *embd)
{
    if (!embd)
        return;
    free(embd->data);
    memset(embd, 0, sizeof *embd);
}

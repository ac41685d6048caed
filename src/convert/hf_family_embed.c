/*
 * The encoder (embedding) architectures Corral converts (see hf_family_embed.h): BERT's tensor
 * names as GGUF's, which tensors it has, the pooling and normalization sentence-transformers'
 * modules.json gives it, and the GGUF keys ollama's converter writes for it.
 */
#include "convert/hf_family_embed.h"

#include <stdio.h>
#include <string.h>

#define MAX_MODULE_PATH 200

bool hf_family_is_encoder(const hf_arch *a)
{
    return a->family == FAMILY_BERT;
}

/* Hugging Face name pieces and their GGUF names, tried in this order at each position. */
static const char *const bert_renames[][2] = {
    {"encoder.layers", "blk"}, /* before "encoder.layer", of which it is a longer spelling */
    {"encoder.layer", "blk"},
    {"embeddings.word_embeddings", "token_embd"},
    {"embeddings.token_type_embeddings", "token_types"},
    {"embeddings.position_embeddings", "position_embd"},
    {"embeddings.LayerNorm", "token_embd_norm"},
    {"attention.self.query", "attn_q"},
    {"attention.self.key", "attn_k"},
    {"attention.self.value", "attn_v"},
    {"attention.output.dense", "attn_output"},
    {"attention.output.LayerNorm", "attn_output_norm"},
    {"intermediate.dense", "ffn_up"},
    {"output.dense", "ffn_down"},
    {"output.LayerNorm", "layer_output_norm"},
};

void hf_embed_rename(const char *in, char *out, size_t cap)
{
    size_t o = 0, n = sizeof bert_renames / sizeof bert_renames[0];
    for (const char *s = in; *s && o + 1 < cap;) {
        const char *const *pair = NULL;
        for (size_t r = 0; !pair && r < n; r++)
            if (strncmp(s, bert_renames[r][0], strlen(bert_renames[r][0])) == 0)
                pair = bert_renames[r];
        const char *piece = pair ? pair[1] : s;
        size_t len = pair ? strlen(piece) : 1;
        for (size_t i = 0; i < len && o + 1 < cap; i++)
            out[o++] = piece[i];
        s += pair ? strlen(pair[0]) : 1;
    }
    out[o] = '\0';
}

bool hf_embed_skipped_tensor(const char *name)
{
    /* positions are the token indices; the pooler serves next-sentence prediction only */
    return !strcmp(name, "embeddings.position_ids") || !strcmp(name, "pooler.dense.weight") ||
           !strcmp(name, "pooler.dense.bias");
}

bool hf_embed_known_tensor(const hf_params *p, const char *name)
{
    static const char *const whole[] = {"token_embd.weight", "token_types.weight",
                                        "position_embd.weight", "token_embd_norm.weight",
                                        "token_embd_norm.bias"};
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
        if (!strcmp(name, whole[i]))
            return true;
    unsigned layer;
    char prefix[32];
    if (sscanf(name, "blk.%u.", &layer) != 1 || layer >= p->n_layer)
        return false;
    int used = snprintf(prefix, sizeof prefix, "blk.%u.", layer);
    if (strncmp(name, prefix, (size_t)used) != 0) /* "blk.01." or "blk.+1." */
        return false;
    static const char *const parts[] = {"attn_q",           "attn_k", "attn_v",
                                        "attn_output",      "attn_output_norm",
                                        "layer_output_norm", "ffn_up", "ffn_down"};
    const char *rest = name + used;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        size_t n = strlen(parts[i]);
        if (!strncmp(rest, parts[i], n) &&
            (!strcmp(rest + n, ".weight") || !strcmp(rest + n, ".bias")))
            return true;
    }
    return false;
}

hf_status hf_embed_read_modules(const json_t *modules, hf_params *p, char *pooling_path,
                                size_t cap, corral_error *err)
{
    pooling_path[0] = '\0';
    if (!json_is_array(modules)) {
        corral_error_set(err, "modules.json must be a list of sentence-transformers modules");
        return HF_INVALID;
    }
    size_t i;
    const json_t *m;
    json_array_foreach(modules, i, m) {
        const char *type = json_string_value(json_object_get(m, "type"));
        const json_t *path = json_object_get(m, "path");
        if (!type || (path && !json_is_string(path))) {
            corral_error_set(err, "modules.json: module %zu needs a type and a path string", i);
            return HF_INVALID;
        }
        if (!strcmp(type, "sentence_transformers.models.Normalize")) {
            p->normalize = true;
        } else if (!strcmp(type, "sentence_transformers.models.Pooling")) {
            const char *dir = json_string_value(path);
            size_t len = json_string_length(path);
            /* a folder of the checkpoint's, as its uploaded files name it */
            if (!dir || len == 0 || len > MAX_MODULE_PATH || len + 13 > cap ||
                strlen(dir) != len || strchr(dir, '/') || !strcmp(dir, ".") ||
                !strcmp(dir, "..")) {
                corral_error_set(err, "modules.json: the pooling module's path must name one "
                                 "folder of at most %u characters", MAX_MODULE_PATH);
                return HF_INVALID;
            }
            snprintf(pooling_path, cap, "%s/config.json", dir);
        }
    }
    return HF_OK;
}

hf_status hf_embed_read_pooling(const json_t *pooling, hf_params *p, corral_error *err)
{
    const char *const keys[] = {"pooling_mode_mean_tokens", "pooling_mode_cls_token"};
    bool on[2];
    for (int k = 0; k < 2; k++) {
        const json_t *v = json_object_get(pooling, keys[k]);
        if (v && !json_is_boolean(v)) {
            corral_error_set(err, "the pooling module's config.json: %s must be true or false",
                             keys[k]);
            return HF_INVALID;
        }
        on[k] = json_is_true(v);
    }
    /* ollama's reading: mean over cls where both are set, none where neither is */
    p->pooling_type = on[0] ? 1 : on[1] ? 2 : 0;
    return HF_OK;
}

bool hf_embed_write_keys(const hf_params *p, gguf_writer *w, corral_error *err)
{
    const char *a = p->arch->gguf_name;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    bool ok = gguf_writer_add_bool(w, KEY("attention.causal"), false, err) &&
              gguf_writer_add_u32(w, KEY("pooling_type"), p->pooling_type, err) &&
              gguf_writer_add_bool(w, KEY("normalize_embeddings"), p->normalize, err);
    if (ok && p->has_ln_eps)
        ok = gguf_writer_add_f32(w, KEY("attention.layer_norm_epsilon"), p->ln_eps, err);
#undef KEY
    return ok;
}

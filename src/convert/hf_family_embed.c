/*
 * The encoder (embedding) architectures Corral converts (see hf_family_embed.h): BERT's tensor
 * names as GGUF's and which tensors it has, the pooling, normalization and projections
 * sentence-transformers' modules give an encoder, and the GGUF keys ollama's converter writes
 * for each.
 */
#include "convert/hf_family_embed.h"

#include <stdio.h>
#include <string.h>

#define MAX_MODULE_PATH 200
#define MAX_TOKEN_TYPES 16u

/* The table's NomicBertModel with experts (nomic-embed-text v2). */
static const hf_arch nomic_bert_moe = {"NomicBertModel", "nomic-bert-moe", FAMILY_BERT, false};

bool hf_family_is_encoder(const hf_arch *a)
{
    return a->family == FAMILY_BERT || hf_family_is_gemma_embedding(a);
}

bool hf_family_is_gemma_embedding(const hf_arch *a)
{
    return !strcmp(a->gguf_name, "gemma-embedding");
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

/* nomic-embed-text's names (NomicBertModel), as llama.cpp's converter maps them: q, k and v
 * in one matrix, a SwiGLU FFN (fc11 up, fc12 gate) or v2's GELU one (fc1 up, after fc11 and
 * fc12 of which it is a prefix), v2's router, the LayerNorms after attention and FFN. */
static const char *const nomic_renames[][2] = {
    {"encoder.layers", "blk"},
    {"embeddings.word_embeddings", "token_embd"},
    {"embeddings.token_type_embeddings", "token_types"},
    {"emb_ln", "token_embd_norm"},
    {"attn.Wqkv", "attn_qkv"},
    {"attn.out_proj", "attn_output"},
    {"norm1", "attn_output_norm"},
    {"norm2", "layer_output_norm"},
    {"mlp.fc11", "ffn_up"},
    {"mlp.fc12", "ffn_gate"},
    {"mlp.fc1", "ffn_up"},
    {"mlp.fc2", "ffn_down"},
    {"mlp.router.layer", "ffn_gate_inp"},
};

/* nomic-bert or nomic-bert-moe */
static bool is_nomic(const hf_arch *a)
{
    return !strncmp(a->gguf_name, "nomic-bert", 10);
}

static bool is_nomic_moe(const hf_arch *a)
{
    return a == &nomic_bert_moe;
}

void hf_embed_rename(const hf_arch *a, const char *in, char *out, size_t cap)
{
    const char *const(*renames)[2] = is_nomic(a) ? nomic_renames : bert_renames;
    size_t n = is_nomic(a) ? sizeof nomic_renames / sizeof nomic_renames[0]
                           : sizeof bert_renames / sizeof bert_renames[0];
    hf_family_rename_by(renames, n, in, out, cap);
}

/* nomic-bert-moe's experts' tensors: encoder.layers.L.mlp.experts.SUFFIX, that spelling
 * exactly (no "+1" or "01" for L). */
static bool parse_nomic_experts(const char *name, const char *suffix, unsigned *layer)
{
    char again[256];
    int end = 0;
    if (sscanf(name, "encoder.layers.%u.mlp.experts.%n", layer, &end) != 1 || end == 0 ||
        strcmp(name + end, suffix) != 0)
        return false;
    snprintf(again, sizeof again, "encoder.layers.%u.mlp.experts.%s", *layer, suffix);
    return !strcmp(again, name);
}

bool hf_embed_skipped_tensor(const hf_arch *a, const char *name)
{
    unsigned layer;
    /* positions are the token indices; the pooler serves next-sentence prediction only; the
     * bias nomic-bert-moe's experts add to their sum has no place in the engine's layer (nor
     * in llama.cpp's, whose converter leaves it out too) */
    return !strcmp(name, "embeddings.position_ids") || !strcmp(name, "pooler.dense.weight") ||
           !strcmp(name, "pooler.dense.bias") ||
           (is_nomic_moe(a) && parse_nomic_experts(name, "bias", &layer));
}

bool hf_embed_parse_nomic_experts(const hf_arch *a, const char *name, unsigned *layer,
                                  bool *down)
{
    if (!is_nomic_moe(a))
        return false;
    *down = parse_nomic_experts(name, "mlp.w2", layer);
    return *down || parse_nomic_experts(name, "mlp.w1", layer);
}

bool hf_embed_is_moe_layer(const hf_params *p, unsigned layer)
{
    return is_nomic_moe(p->arch) && p->moe_every && layer < p->n_layer &&
           layer % p->moe_every == 1;
}

bool hf_embed_known_tensor(const hf_params *p, const char *name)
{
    bool nomic = is_nomic(p->arch); /* RoPE, not learned positions */
    static const char *const whole[] = {"token_embd.weight", "token_types.weight",
                                        "token_embd_norm.weight", "token_embd_norm.bias",
                                        "position_embd.weight"};
    for (size_t i = 0; i < sizeof whole / sizeof whole[0] - nomic; i++)
        if (!strcmp(name, whole[i]))
            return true;
    unsigned layer;
    const char *rest = hf_family_layer_suffix(p, name, &layer);
    if (!rest)
        return false;
    static const char *const parts[] = {"attn_q",           "attn_k", "attn_v",
                                        "attn_output",      "attn_output_norm",
                                        "layer_output_norm", "ffn_up", "ffn_down"};
    static const char *const nomic_parts[] = {"attn_qkv",          "attn_output",
                                              "attn_output_norm",  "layer_output_norm",
                                              "ffn_up",            "ffn_gate",
                                              "ffn_down"};
    /* nomic-bert-moe: a GELU FFN, or in its expert layers the router (the experts apart) */
    static const char *const nomic_moe_parts[] = {"attn_qkv",         "attn_output",
                                                  "attn_output_norm", "layer_output_norm",
                                                  "ffn_up",           "ffn_down"};
    static const char *const nomic_expert_parts[] = {"attn_qkv",         "attn_output",
                                                     "attn_output_norm", "layer_output_norm",
                                                     "ffn_gate_inp"};
    if (is_nomic_moe(p->arch))
        return hf_embed_is_moe_layer(p, layer)
                   ? hf_family_weight_or_bias(rest, nomic_expert_parts,
                                              sizeof nomic_expert_parts /
                                                  sizeof nomic_expert_parts[0]) &&
                         strcmp(rest, "ffn_gate_inp.bias") != 0
                   : hf_family_weight_or_bias(rest, nomic_moe_parts,
                                              sizeof nomic_moe_parts /
                                                  sizeof nomic_moe_parts[0]);
    const char *const *names = nomic ? nomic_parts : parts;
    size_t n_names = nomic ? sizeof nomic_parts / sizeof nomic_parts[0]
                           : sizeof parts / sizeof parts[0];
    for (size_t i = 0; i < n_names; i++) {
        size_t n = strlen(names[i]);
        if (!strncmp(rest, names[i], n) &&
            (!strcmp(rest + n, ".weight") || !strcmp(rest + n, ".bias")))
            return true;
    }
    return false;
}

/* A module's folder as the checkpoint's files name it: one folder, no "." or "..". */
static bool module_folder(const json_t *path)
{
    const char *dir = json_string_value(path);
    size_t len = json_string_length(path);
    return dir && len > 0 && len <= MAX_MODULE_PATH && strlen(dir) == len && !strchr(dir, '/') &&
           strcmp(dir, ".") != 0 && strcmp(dir, "..") != 0;
}

json_t *hf_embed_nomic_config(const json_t *config)
{
    static const char *const aliases[][2] = {
        {"n_layer", "num_hidden_layers"},       {"n_embd", "hidden_size"},
        {"n_inner", "intermediate_size"},       {"n_head", "num_attention_heads"},
        {"n_positions", "max_position_embeddings"},
        {"layer_norm_epsilon", "layer_norm_eps"}, {"rotary_emb_base", "rope_theta"},
        {"moe_top_k", "num_experts_per_tok"},
    };
    json_t *merged = json_copy((json_t *)config);
    for (size_t i = 0; merged && i < sizeof aliases / sizeof aliases[0]; i++) {
        json_t *v = json_object_get(merged, aliases[i][0]);
        if (v && !json_object_get(merged, aliases[i][1]) &&
            json_object_set(merged, aliases[i][1], v) != 0) {
            json_decref(merged);
            return NULL;
        }
    }
    return merged;
}

hf_status hf_embed_read_nomic_config(const json_t *config, hf_params *p, corral_error *err)
{
    const json_t *every = json_object_get(config, "moe_every_n_layers");
    const json_t *types = json_object_get(config, "type_vocab_size");
    json_int_t n = json_integer_value(every), n_types = types ? json_integer_value(types) : 1;
    if ((every && !json_is_null(every) &&
         (!json_is_integer(every) || n < 0 || n > (json_int_t)p->n_layer)) ||
        (types && !json_is_integer(types)) || n_types < 1 || n_types > MAX_TOKEN_TYPES) {
        corral_error_set(err, "config.json: moe_every_n_layers must be 0 to n_layer (%u), "
                         "type_vocab_size 1 to %u", p->n_layer, MAX_TOKEN_TYPES);
        return HF_INVALID;
    }
    if (n == 0) { /* nomic-embed-text v1 and v1.5 */
        if (p->n_expert) {
            corral_error_set(err, "config.json: a NomicBertModel with num_experts needs "
                             "moe_every_n_layers");
            return HF_INVALID;
        }
        return HF_OK;
    }
    if (!p->n_expert) {
        corral_error_set(err, "config.json: a NomicBertModel with moe_every_n_layers needs "
                         "num_experts and moe_top_k");
        return HF_INVALID;
    }
    /* what the engine's nomic-bert-moe layer computes, and nothing else */
    const json_t *act = json_object_get(config, "activation_function");
    if (act && (!json_is_string(act) || strcmp(json_string_value(act), "gelu") != 0)) {
        corral_error_set(err, "config.json: nomic-embed-text v2's FFN and experts are GELU "
                         "(activation_function \"gelu\"), not '%.40s'",
                         json_is_string(act) ? json_string_value(act) : "(not a string)");
        return HF_INVALID;
    }
    if (json_is_true(json_object_get(config, "moe_normalize_expert_weights")) ||
        json_is_true(json_object_get(config, "prenorm"))) {
        corral_error_set(err, "config.json: a NomicBertModel whose experts' weights are "
                         "renormalized or whose LayerNorms come first (moe_normalize_expert_"
                         "weights, prenorm) is not converted");
        return HF_INVALID;
    }
    p->arch = &nomic_bert_moe;
    p->moe_every = (uint32_t)n;
    p->n_token_types = (uint32_t)n_types;
    return HF_OK;
}

hf_status hf_embed_read_modules(const json_t *modules, hf_params *p, hf_modules *m,
                                corral_error *err)
{
    memset(m, 0, sizeof *m);
    if (!json_is_array(modules)) {
        corral_error_set(err, "modules.json must be a list of sentence-transformers modules");
        return HF_INVALID;
    }
    bool gemma = hf_family_is_gemma_embedding(p->arch);
    size_t i;
    const json_t *module;
    json_array_foreach(modules, i, module) {
        const char *type = json_string_value(json_object_get(module, "type"));
        const json_t *path = json_object_get(module, "path");
        if (!type || (path && !json_is_string(path))) {
            corral_error_set(err, "modules.json: module %zu needs a type and a path string", i);
            return HF_INVALID;
        }
        bool pooling = !strcmp(type, "sentence_transformers.models.Pooling");
        bool dense = !strcmp(type, "sentence_transformers.models.Dense");
        if (!strcmp(type, "sentence_transformers.models.Normalize"))
            p->normalize = true;
        if (!pooling && !dense)
            continue;
        if (!module_folder(path)) {
            corral_error_set(err, "modules.json: module %zu's path must name one folder of at "
                             "most %u characters", i, MAX_MODULE_PATH);
            return HF_INVALID;
        }
        const char *dir = json_string_value(path);
        if (pooling) {
            snprintf(m->pooling, sizeof m->pooling, "%s/config.json", dir);
        } else if (!gemma) {
            corral_error_set(err, "modules.json: a %s with a Dense module ('%s') is not "
                             "converted (its projection would be left out)", p->arch->hf_name,
                             dir);
            return HF_INVALID;
        } else if (!strcmp(dir, "2_Dense") || !strcmp(dir, "3_Dense")) {
            unsigned which = dir[0] == '2' ? 0 : 1; /* ollama's: dense_2 and dense_3 */
            snprintf(m->dense_config[which], sizeof m->dense_config[which], "%s/config.json",
                     dir);
            snprintf(m->dense_weights[which], sizeof m->dense_weights[which],
                     "%s/model.safetensors", dir);
        }
    }
    if (gemma && (!m->dense_config[0][0] || !m->dense_config[1][0])) {
        corral_error_set(err, "modules.json: a %s needs its 2_Dense and 3_Dense modules",
                         p->arch->hf_name);
        return HF_INVALID;
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
    /* ollama's reading: mean over cls where both are set; neither is none, but EmbeddingGemma's
     * mean */
    p->pooling_type = on[0] ? 1 : on[1] ? 2 : hf_family_is_gemma_embedding(p->arch) ? 1 : 0;
    return HF_OK;
}

hf_status hf_embed_read_dense(const json_t *dense, unsigned which, hf_params *p,
                              corral_error *err)
{
    const json_t *in = json_object_get(dense, "in_features");
    const json_t *out = json_object_get(dense, "out_features");
    const json_t *bias = json_object_get(dense, "bias");
    if (!json_is_integer(in) || !json_is_integer(out) || json_integer_value(in) < 1 ||
        json_integer_value(out) < 1 || json_integer_value(in) > (1 << 20) ||
        json_integer_value(out) > (1 << 20) || (bias && !json_is_boolean(bias))) {
        corral_error_set(err, "%u_Dense/config.json: in_features and out_features must be "
                         "integers from 1 to %u, bias true or false", which + 2, 1u << 20);
        return HF_INVALID;
    }
    if (json_is_true(bias)) {
        corral_error_set(err, "%u_Dense/config.json: a projection with a bias is not "
                         "converted", which + 2);
        return HF_INVALID;
    }
    p->dense_in[which] = (uint32_t)json_integer_value(in);
    p->dense_out[which] = (uint32_t)json_integer_value(out);
    return HF_OK;
}

bool hf_embed_write_keys(const hf_params *p, gguf_writer *w, corral_error *err)
{
    const char *a = p->arch->gguf_name;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    bool ok = gguf_writer_add_u32(w, KEY("pooling_type"), p->pooling_type, err);
    if (ok && hf_family_is_gemma_embedding(p->arch)) {
        ok = gguf_writer_add_f32(w, KEY("rope.freq_base_swa"),
                                 p->rope_local_theta > 0 ? p->rope_local_theta : 10000.0f, err);
        for (unsigned i = 0; ok && i < 2; i++) {
            snprintf(key, sizeof key, "%s.dense_%u_feat_in", a, i + 2);
            ok = gguf_writer_add_u32(w, key, p->dense_in[i], err);
            snprintf(key, sizeof key, "%s.dense_%u_feat_out", a, i + 2);
            ok = ok && gguf_writer_add_u32(w, key, p->dense_out[i], err);
        }
        return ok;
    }
    ok = ok && gguf_writer_add_bool(w, KEY("attention.causal"), false, err) &&
         gguf_writer_add_bool(w, KEY("normalize_embeddings"), p->normalize, err);
    if (ok && is_nomic_moe(p->arch)) /* its vocabulary is not WordPiece's two segments */
        ok = gguf_writer_add_u32(w, KEY("moe_every_n_layers"), p->moe_every, err) &&
             gguf_writer_add_u32(w, "tokenizer.ggml.token_type_count", p->n_token_types, err);
    if (ok && p->has_ln_eps)
        ok = gguf_writer_add_f32(w, KEY("attention.layer_norm_epsilon"), p->ln_eps, err);
#undef KEY
    return ok;
}

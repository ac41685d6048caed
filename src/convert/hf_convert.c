/*
 * The checkpoint-to-GGUF driver (see hf_convert.h): config.json to the architecture's keys,
 * Hugging Face tensor names to GGUF's, and each tensor's rows streamed to the writer in its
 * GGUF type, permuted where Llama's RoPE pairing asks for it.
 */
#include "convert/hf_convert.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "convert/hf_tokenizer.h"
#include "convert/safetensors.h"
#include "gguf.h"
#include "quant_half.h"
#include "tensor_type.h"
#include "util/file.h"

#define CHUNK_BYTES ((size_t)4 << 20)
#define STEP_BYTES ((uint64_t)64 << 20) /* written per hf_converter_step */
#define MAX_LAYERS 4096u
#define MAX_WIDTH (1u << 20)
#define MAX_EXPERTS 4096u

typedef enum arch_family {
    FAMILY_LLAMA,  /* HF rotates halves; GGUF's llama pairs neighbours: Q/K rows permuted */
    FAMILY_QWEN2,  /* q/k/v biases */
    FAMILY_QWEN3,  /* per-head q/k norms */
    FAMILY_GEMMA,  /* norms stored as w - 1 (Gemma's RMSNorm scales by 1 + w) */
    FAMILY_GEMMA2, /* gemma's, with norms after attention and around the FFN, softcaps */
    FAMILY_GEMMA3, /* gemma2's, with q/k norms and a local RoPE base */
    FAMILY_PHI3,   /* fused q/k/v and gate/up; LongRoPE's factors as tensors */
} arch_family;

typedef struct hf_arch {
    const char *hf_name;
    const char *gguf_name;
    arch_family family;
} hf_arch;

static const hf_arch archs[] = {
    {"LlamaForCausalLM", "llama", FAMILY_LLAMA},
    {"MistralForCausalLM", "llama", FAMILY_LLAMA},
    {"Qwen2ForCausalLM", "qwen2", FAMILY_QWEN2},
    {"Qwen3ForCausalLM", "qwen3", FAMILY_QWEN3},
    {"Qwen3MoeForCausalLM", "qwen3moe", FAMILY_QWEN3},
    {"MixtralForCausalLM", "llama", FAMILY_LLAMA},
    {"GemmaForCausalLM", "gemma", FAMILY_GEMMA},
    {"Gemma2ForCausalLM", "gemma2", FAMILY_GEMMA2},
    {"Gemma3ForCausalLM", "gemma3", FAMILY_GEMMA3},
    {"Phi3ForCausalLM", "phi3", FAMILY_PHI3},
};

static bool is_gemma(const hf_arch *a)
{
    return a->family == FAMILY_GEMMA || a->family == FAMILY_GEMMA2 || a->family == FAMILY_GEMMA3;
}

/* gemma2's and gemma3's norms around attention and the FFN */
static bool has_sandwich_norms(const hf_arch *a)
{
    return a->family == FAMILY_GEMMA2 || a->family == FAMILY_GEMMA3;
}

/* The names of those norms, tried before the others where they exist. */
static const char *const sandwich_renames[][2] = {
    {"post_attention_layernorm", "post_attention_norm"},
    {"pre_feedforward_layernorm", "ffn_norm"},
    {"post_feedforward_layernorm", "post_ffw_norm"},
};

/* Hugging Face name pieces and their GGUF names, tried in this order at each position. */
static const char *const renames[][2] = {
    {"lm_head", "output"},
    {"model.embed_tokens", "token_embd"},
    {"model.norm", "output_norm"},
    {"model.layers", "blk"},
    {"input_layernorm", "attn_norm"},
    {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},
    {"self_attn.o_proj", "attn_output"},
    {"self_attn.qkv_proj", "attn_qkv"},
    {"self_attn.q_norm", "attn_q_norm"},
    {"self_attn.k_norm", "attn_k_norm"},
    {"mlp.gate_proj", "ffn_gate"},
    {"mlp.up_proj", "ffn_up"},
    {"mlp.down_proj", "ffn_down"},
    {"mlp.gate_up_proj", "ffn_up"},
    {"mlp.gate.", "ffn_gate_inp."},              /* a mixture of experts' router */
    {"block_sparse_moe.gate.", "ffn_gate_inp."}, /* Mixtral's */
    {"post_attention_layernorm", "ffn_norm"},
};

typedef struct hf_params {
    const hf_arch *arch;
    uint32_t n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_ctx;
    uint32_t n_expert, n_expert_used, n_ff_expert; /* a mixture of experts: n_expert > 0 */
    uint64_t vocab_size;
    bool has_head_dim, has_theta, has_eps;
    float rope_theta, rms_eps;
    const char *rope_type; /* rope_scaling's, or NULL */
    float rope_factor, low_freq_factor, high_freq_factor;
    uint32_t rope_original_ctx;
    /* Gemma's */
    uint32_t sliding_window;
    float attn_softcap, final_softcap, rope_local_theta;
    uint8_t *sliding_pattern; /* per layer: 1 for a sliding-window layer */
    uint32_t n_sliding_pattern;
} hf_params;

typedef struct out_tensor {
    char name[GGUF_MAX_NAME_BYTES + 1];
    const safetensors_tensor *src; /* NULL for one made here (see extra_tensor) */
    uint32_t type;
    uint32_t n_dims;
    int64_t ne[4];
    uint32_t permute_heads; /* > 0: Llama's Q/K row order, with this many heads */
    bool add_one;           /* a Gemma norm: 1 + the stored value */
    /* experts' matrices stacked (ffn_*_exps): experts[e] is expert e's, src the first found */
    const safetensors_tensor **experts;
    uint32_t n_experts;
} out_tensor;

/* An F32 vector made from config.json: Llama 3's rope_freqs, Phi-3's LongRoPE factors. */
typedef struct extra_tensor {
    const char *name;
    float *data;
    uint32_t n;
} extra_tensor;

struct hf_converter {
    const hf_file *files;
    size_t n_files;
    corral_error *err;
    hf_params p;
    json_t *config;
    hf_vocab *vocab;
    safetensors_file **shards;
    size_t n_shards;
    out_tensor *tensors;
    size_t n_tensors;
    extra_tensor extras[2]; /* RoPE factors made from config.json, written first */
    size_t n_extras;
    bool any_bf16;
    /* the tokenizer's files: the vocabulary's strings point into them */
    json_t *tokenizer_json[5];
    char *chat_template;
    char *spm_model;
    /* writing */
    gguf_writer *writer;
    uint8_t *buf;
    size_t next_extra, next_tensor;
    uint64_t next_row; /* of tensors[next_tensor] */
    uint64_t bytes_done, bytes_total;
};

typedef struct hf_converter converter;

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static bool is_shard(const char *name)
{
    return strchr(name, '/') == NULL && ends_with(name, ".safetensors");
}

static bool is_model_shard(const char *name)
{
    return is_shard(name) && strncmp(name, "model", 5) == 0;
}

bool hf_is_checkpoint_file(const char *name)
{
    static const char *const names[] = {"config.json", "tokenizer.json", "tokenizer_config.json",
                                        "generation_config.json", "tokenizer.model",
                                        "special_tokens_map.json", "added_tokens.json",
                                        "model.safetensors.index.json", "chat_template.jinja"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i]) == 0)
            return true;
    return is_shard(name);
}

bool hf_is_weights_file(const char *name)
{
    return is_shard(name);
}

static const hf_file *find_file(const converter *c, const char *name)
{
    for (size_t i = 0; i < c->n_files; i++)
        if (strcmp(c->files[i].name, name) == 0)
            return &c->files[i];
    return NULL;
}

/* A JSON file of the checkpoint: NULL with *status HF_OK when absent and not required. */
static json_t *load_json(converter *c, const char *name, bool required, hf_status *status)
{
    const hf_file *f = find_file(c, name);
    *status = HF_OK;
    if (!f) {
        if (required) {
            corral_error_set(c->err, "the checkpoint has no %s", name);
            *status = HF_INVALID;
        }
        return NULL;
    }
    struct stat st;
    if (stat(f->path, &st) != 0) {
        corral_error_set(c->err, "%s: %s", name, strerror(errno));
        *status = HF_IO;
        return NULL;
    }
    if ((uint64_t)st.st_size > HF_MAX_JSON_BYTES) {
        corral_error_set(c->err, "%s is larger than %zu bytes", name, HF_MAX_JSON_BYTES);
        *status = HF_INVALID;
        return NULL;
    }
    json_error_t jerr;
    json_t *value = json_load_file(f->path, JSON_REJECT_DUPLICATES, &jerr);
    if (!value || !json_is_object(value)) {
        corral_error_set(c->err, "%s is not a JSON object%s%.200s", name, value ? "" : ": ",
                         value ? "" : jerr.text);
        json_decref(value);
        *status = HF_INVALID;
        return NULL;
    }
    return value;
}

/* A text file of the checkpoint, NUL-terminated, in *out (left NULL when absent). */
static hf_status read_text(converter *c, const char *name, char **out, size_t *out_len)
{
    const hf_file *f = find_file(c, name);
    if (!f)
        return HF_OK;
    struct stat st;
    if (stat(f->path, &st) == 0 && (uint64_t)st.st_size > HF_MAX_JSON_BYTES) {
        corral_error_set(c->err, "%s is larger than %zu bytes", name, HF_MAX_JSON_BYTES);
        return HF_INVALID;
    }
    corral_error why;
    size_t len;
    if (!(*out = util_read_file(f->path, HF_MAX_JSON_BYTES, &len, &why))) {
        corral_error_set(c->err, "%s: cannot be read", name);
        return HF_IO;
    }
    if (out_len)
        *out_len = len;
    return HF_OK;
}

/* ---- config.json ---- */

static bool read_u32(converter *c, const char *key, bool required, uint32_t max, uint32_t *out)
{
    const json_t *v = json_object_get(c->config, key);
    if (!v || json_is_null(v)) {
        if (required)
            corral_error_set(c->err, "config.json has no %s", key);
        return !required;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > max) {
        corral_error_set(c->err, "config.json: %s must be an integer from 1 to %u", key, max);
        return false;
    }
    *out = (uint32_t)json_integer_value(v);
    return true;
}

static bool read_f32(converter *c, const json_t *obj, const char *key, bool *present, float *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return true;
    double d = json_number_value(v);
    if (!json_is_number(v) || !(d > 0) || d > 3.4e38) {
        corral_error_set(c->err, "config.json: %s must be a positive number", key);
        return false;
    }
    *out = (float)d;
    if (present)
        *present = true;
    return true;
}

static bool read_rope_scaling(converter *c)
{
    hf_params *p = &c->p;
    const json_t *s = json_object_get(c->config, "rope_scaling");
    if (!s || json_is_null(s))
        return true;
    const char *type = json_string_value(json_object_get(s, "rope_type"));
    if (!type)
        type = json_string_value(json_object_get(s, "type"));
    if (!json_is_object(s) || !type) {
        corral_error_set(c->err, "config.json: rope_scaling needs a rope_type");
        return false;
    }
    bool llama = p->arch->family == FAMILY_LLAMA, phi3 = p->arch->family == FAMILY_PHI3;
    if (strcmp(type, "default") == 0)
        return true;
    if (!(strcmp(type, "linear") == 0 || strcmp(type, "yarn") == 0 ||
          (llama && strcmp(type, "llama3") == 0) ||
          (phi3 && (strcmp(type, "longrope") == 0 || strcmp(type, "su") == 0)))) {
        corral_error_set(c->err, "config.json: rope_scaling type '%.40s' is not supported for "
                         "%s", type, p->arch->hf_name);
        return false;
    }
    p->rope_type = type;
    uint32_t original = 0;
    const json_t *o = json_object_get(s, "original_max_position_embeddings");
    if (json_is_integer(o) && json_integer_value(o) > 0 && json_integer_value(o) <= UINT32_MAX)
        original = (uint32_t)json_integer_value(o);
    p->rope_original_ctx = original;
    return read_f32(c, s, "factor", NULL, &p->rope_factor) &&
           read_f32(c, s, "low_freq_factor", NULL, &p->low_freq_factor) &&
           read_f32(c, s, "high_freq_factor", NULL, &p->high_freq_factor);
}

/* Gemma 2's and 3's window, softcaps and which layers slide (layer_types, or every layer but
 * each sliding_window_pattern-th). */
static hf_status read_gemma_config(converter *c)
{
    hf_params *p = &c->p;
    if (!read_u32(c, "sliding_window", false, UINT32_MAX, &p->sliding_window) ||
        !read_f32(c, c->config, "attn_logit_softcapping", NULL, &p->attn_softcap) ||
        !read_f32(c, c->config, "final_logit_softcapping", NULL, &p->final_softcap) ||
        !read_f32(c, c->config, "rope_local_base_freq", NULL, &p->rope_local_theta))
        return HF_INVALID;
    if (p->arch->family != FAMILY_GEMMA3)
        return HF_OK;
    const json_t *types = json_object_get(c->config, "layer_types");
    uint32_t every = 0;
    if (!json_is_array(types) &&
        !read_u32(c, "sliding_window_pattern", false, MAX_LAYERS, &every))
        return HF_INVALID;
    if (!json_is_array(types) && every == 0)
        return HF_OK;
    if (!(p->sliding_pattern = calloc(p->n_layer, 1))) {
        corral_error_set(c->err, "out of memory");
        return HF_IO;
    }
    p->n_sliding_pattern = p->n_layer;
    for (uint32_t i = 0; i < p->n_layer; i++) {
        const char *type = json_string_value(json_array_get(types, i));
        p->sliding_pattern[i] = json_is_array(types) ? type && !strcmp(type, "sliding_attention")
                                                     : (i + 1) % every != 0;
    }
    return HF_OK;
}

static hf_status read_config(converter *c)
{
    hf_status status;
    if (!(c->config = load_json(c, "config.json", true, &status)))
        return status;
    const json_t *list = json_object_get(c->config, "architectures");
    const char *name = json_string_value(json_array_get(list, 0));
    if (!name) {
        corral_error_set(c->err, "config.json names no architecture (\"architectures\")");
        return HF_INVALID;
    }
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (strcmp(archs[i].hf_name, name) == 0)
            c->p.arch = &archs[i];
    if (!c->p.arch) {
        corral_error_set(c->err, "unsupported architecture '%.80s': Corral converts "
                         HF_SUPPORTED_ARCHITECTURES, name);
        return HF_INVALID;
    }
    hf_params *p = &c->p;
    uint32_t vocab = 0;
    if (!read_u32(c, "num_hidden_layers", true, MAX_LAYERS, &p->n_layer) ||
        !read_u32(c, "hidden_size", true, MAX_WIDTH, &p->n_embd) ||
        !read_u32(c, "intermediate_size", true, 1u << 24, &p->n_ff) ||
        !read_u32(c, "num_attention_heads", true, 65536, &p->n_head) ||
        !read_u32(c, "max_position_embeddings", false, UINT32_MAX, &p->n_ctx) ||
        !read_u32(c, "vocab_size", false, HF_MAX_VOCAB, &vocab))
        return HF_INVALID;
    p->vocab_size = vocab;
    p->n_head_kv = p->n_head;
    if (!read_u32(c, "num_key_value_heads", false, p->n_head, &p->n_head_kv))
        return HF_INVALID;
    if (json_object_get(c->config, "head_dim") && !json_is_null(json_object_get(c->config,
                                                                                 "head_dim"))) {
        if (!read_u32(c, "head_dim", true, 65536, &p->head_dim))
            return HF_INVALID;
        p->has_head_dim = true;
    } else {
        p->head_dim = p->n_embd / p->n_head;
    }
    if (p->head_dim == 0 || p->head_dim % 2 || p->n_head % p->n_head_kv) {
        corral_error_set(c->err, "config.json: %u heads of %u dimensions (%u key/value heads) "
                         "do not make an attention layer", p->n_head, p->head_dim, p->n_head_kv);
        return HF_INVALID;
    }
    if (!read_f32(c, c->config, "rope_theta", &p->has_theta, &p->rope_theta) ||
        !read_f32(c, c->config, "rms_norm_eps", &p->has_eps, &p->rms_eps) ||
        !read_rope_scaling(c))
        return HF_INVALID;
    if (p->arch->family == FAMILY_GEMMA3 && !p->has_theta) {
        p->has_theta = true; /* Gemma 3's global layers' base when its config leaves it out */
        p->rope_theta = 1000000.0f;
    }
    if (!read_u32(c, strcmp(p->arch->gguf_name, "llama") ? "num_experts" : "num_local_experts",
                  false, MAX_EXPERTS, &p->n_expert) ||
        !read_u32(c, "num_experts_per_tok", p->n_expert > 0, p->n_expert ? p->n_expert : 1,
                  &p->n_expert_used) ||
        !read_u32(c, "moe_intermediate_size", false, 1u << 24, &p->n_ff_expert))
        return HF_INVALID;
    if (p->arch->family == FAMILY_PHI3) {
        uint32_t original = 0;
        if (!read_u32(c, "sliding_window", false, UINT32_MAX, &p->sliding_window) ||
            !read_u32(c, "original_max_position_embeddings", false, UINT32_MAX, &original))
            return HF_INVALID;
        if (original)
            p->rope_original_ctx = original;
    }
    return has_sandwich_norms(p->arch) ? read_gemma_config(c) : HF_OK;
}

/* ---- the tokenizer ---- */

/* tokenizer.model (SentencePiece) when there is one, as ollama prefers it; else tokenizer.json. */
static hf_status read_tokenizer(converter *c)
{
    static const char *const names[5] = {"tokenizer.json", "tokenizer_config.json",
                                         "generation_config.json", "added_tokens.json",
                                         "special_tokens_map.json"};
    bool spm = find_file(c, "tokenizer.model") != NULL;
    hf_status status = HF_OK;
    for (size_t i = 0; i < 5 && status == HF_OK; i++)
        c->tokenizer_json[i] = load_json(c, names[i], i == 0 && !spm, &status);
    size_t spm_len = 0;
    if (status == HF_OK)
        status = read_text(c, "chat_template.jinja", &c->chat_template, NULL);
    if (status == HF_OK && spm)
        status = read_text(c, "tokenizer.model", &c->spm_model, &spm_len);
    if (status != HF_OK)
        return status;
    json_t *const *j = c->tokenizer_json;
    c->vocab = spm ? hf_vocab_load_spm(c->spm_model, spm_len, j[0], j[3], j[4], j[1], j[2],
                                       c->chat_template, c->p.vocab_size, c->err)
                   : hf_vocab_load(j[0], j[1], j[2], c->chat_template, c->p.vocab_size, c->err);
    return c->vocab ? HF_OK : HF_INVALID;
}

/* ---- tensors ---- */

/* The pair of the rename tables that starts s, or NULL. */
static const char *const *rename_at(const hf_arch *a, const char *s)
{
    size_t n = sizeof sandwich_renames / sizeof sandwich_renames[0];
    for (size_t r = 0; has_sandwich_norms(a) && r < n; r++)
        if (strncmp(s, sandwich_renames[r][0], strlen(sandwich_renames[r][0])) == 0)
            return sandwich_renames[r];
    n = sizeof renames / sizeof renames[0];
    for (size_t r = 0; r < n; r++)
        if (strncmp(s, renames[r][0], strlen(renames[r][0])) == 0)
            return renames[r];
    return NULL;
}

static void rename_tensor(const hf_arch *a, const char *in, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *s = in; *s && o + 1 < cap;) {
        const char *const *pair = rename_at(a, s);
        const char *piece = pair ? pair[1] : s;
        size_t len = pair ? strlen(piece) : 1;
        for (size_t i = 0; i < len && o + 1 < cap; i++)
            out[o++] = piece[i];
        s += pair ? strlen(pair[0]) : 1;
    }
    out[o] = '\0';
}

/* Whether a GGUF name is one of the architecture's tensors. */
static bool known_tensor(const hf_params *p, const char *name)
{
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "output_norm.weight") ||
        !strcmp(name, "output.weight"))
        return true;
    unsigned layer;
    char prefix[32];
    if (sscanf(name, "blk.%u.", &layer) != 1 || layer >= p->n_layer)
        return false;
    int used = snprintf(prefix, sizeof prefix, "blk.%u.", layer);
    if (strncmp(name, prefix, (size_t)used) != 0) /* "blk.01." or "blk.+1." */
        return false;
    const char *suffix = name + used;
    static const char *const block[] = {"attn_norm.weight", "attn_output.weight",
                                        "ffn_norm.weight", "ffn_up.weight", "ffn_down.weight"};
    for (size_t i = 0; i < sizeof block / sizeof block[0]; i++)
        if (!strcmp(suffix, block[i]))
            return true;
    arch_family f = p->arch->family;
    if (p->n_expert && !strcmp(suffix, "ffn_gate_inp.weight"))
        return true;
    if (f == FAMILY_PHI3) /* q/k/v in one matrix, gate and up in one */
        return !strcmp(suffix, "attn_qkv.weight");
    if (!strcmp(suffix, "attn_q.weight") || !strcmp(suffix, "attn_k.weight") ||
        !strcmp(suffix, "attn_v.weight") || !strcmp(suffix, "ffn_gate.weight"))
        return true;
    if (f == FAMILY_QWEN2 && (!strcmp(suffix, "attn_q.bias") || !strcmp(suffix, "attn_k.bias") ||
                              !strcmp(suffix, "attn_v.bias")))
        return true;
    if (has_sandwich_norms(p->arch) && (!strcmp(suffix, "post_attention_norm.weight") ||
                                        !strcmp(suffix, "post_ffw_norm.weight")))
        return true;
    return (f == FAMILY_QWEN3 || f == FAMILY_GEMMA3) &&
           (!strcmp(suffix, "attn_q_norm.weight") || !strcmp(suffix, "attn_k_norm.weight"));
}

static hf_status append_tensor(converter *c, const out_tensor *t)
{
    out_tensor *grown = realloc(c->tensors, (c->n_tensors + 1) * sizeof *grown);
    if (!grown) {
        corral_error_set(c->err, "out of memory");
        return HF_IO;
    }
    c->tensors = grown;
    c->tensors[c->n_tensors++] = *t;
    return HF_OK;
}

/*
 * An expert's matrix ("model.layers.L.mlp.experts.E.gate_proj.weight", Mixtral's
 * "model.layers.L.block_sparse_moe.experts.E.w1.weight"): which layer, expert and GGUF kind
 * (gate, up, down). False for any other name.
 */
static bool parse_expert(const char *name, unsigned *layer, unsigned *expert, const char **kind)
{
    static const char *const hf[][2] = {{"gate_proj", "gate"}, {"up_proj", "up"},
                                        {"down_proj", "down"}, {"w1", "gate"},
                                        {"w3", "up"}, {"w2", "down"}};
    char part[16], again[256];
    if (sscanf(name, "model.layers.%u.mlp.experts.%u.%15[a-z_].weight", layer, expert,
               part) == 3 ||
        sscanf(name, "model.layers.%u.block_sparse_moe.experts.%u.%15[a-z0-9].weight", layer,
               expert, part) == 3) {
        for (size_t i = 0; i < sizeof hf / sizeof hf[0]; i++) {
            bool mixtral = hf[i][0][0] == 'w';
            snprintf(again, sizeof again, mixtral ? "model.layers.%u.block_sparse_moe.experts.%u.%s"
                                                    ".weight"
                                                  : "model.layers.%u.mlp.experts.%u.%s.weight",
                     *layer, *expert, hf[i][0]);
            if (strcmp(again, name) == 0) { /* exactly that spelling: no "+1" or "01" */
                *kind = hf[i][1];
                return true;
            }
        }
    }
    return false;
}

/* One expert's matrix into its layer's stack (blk.L.ffn_KIND_exps.weight: experts outermost). */
static hf_status add_expert(converter *c, const safetensors_tensor *src, unsigned layer,
                            unsigned expert, const char *kind)
{
    const hf_params *p = &c->p;
    if (!p->n_expert || layer >= p->n_layer || expert >= p->n_expert || src->n_dims != 2 ||
        src->shape[0] == 0 || src->shape[1] == 0 || src->shape[0] > INT64_MAX ||
        src->shape[1] > INT64_MAX) {
        corral_error_set(c->err, "tensor '%.200s' is not an expert's matrix of this %s (%u "
                         "layers, %u experts)", src->name, p->arch->hf_name, p->n_layer,
                         p->n_expert);
        return HF_INVALID;
    }
    char name[GGUF_MAX_NAME_BYTES + 1];
    snprintf(name, sizeof name, "blk.%u.ffn_%s_exps.weight", layer, kind);
    out_tensor *t = NULL;
    for (size_t i = 0; i < c->n_tensors && !t; i++)
        if (strcmp(c->tensors[i].name, name) == 0)
            t = &c->tensors[i];
    if (!t) {
        out_tensor stack = {.src = src, .n_dims = 3, .n_experts = p->n_expert,
                            .ne = {(int64_t)src->shape[1], (int64_t)src->shape[0],
                                   (int64_t)p->n_expert, 1},
                            .type = src->dtype == SAFETENSORS_BF16 ? TENSOR_TYPE_BF16
                                                                   : TENSOR_TYPE_F16};
        snprintf(stack.name, sizeof stack.name, "%s", name);
        if (!(stack.experts = calloc(p->n_expert, sizeof *stack.experts))) {
            corral_error_set(c->err, "out of memory");
            return HF_IO;
        }
        hf_status status = append_tensor(c, &stack);
        if (status != HF_OK) {
            free(stack.experts);
            return status;
        }
        t = &c->tensors[c->n_tensors - 1];
        c->any_bf16 = c->any_bf16 || t->type == TENSOR_TYPE_BF16;
    }
    if (t->experts[expert] || src->dtype != t->src->dtype ||
        src->shape[0] != t->src->shape[0] || src->shape[1] != t->src->shape[1]) {
        corral_error_set(c->err, "tensor '%.200s' %s", src->name,
                         t->experts[expert] ? "is in the checkpoint twice"
                                            : "differs in shape or dtype from its layer's other "
                                              "experts");
        return HF_INVALID;
    }
    t->experts[expert] = src;
    return HF_OK;
}

/* Every stack has all its experts. */
static hf_status check_experts(converter *c)
{
    for (size_t i = 0; i < c->n_tensors; i++)
        for (uint32_t e = 0; e < c->tensors[i].n_experts; e++)
            if (!c->tensors[i].experts[e]) {
                corral_error_set(c->err, "the checkpoint has no expert %u for '%s'", e,
                                 c->tensors[i].name);
                return HF_INVALID;
            }
    return HF_OK;
}

static hf_status add_tensor(converter *c, const safetensors_tensor *src)
{
    if (ends_with(src->name, ".rotary_emb.inv_freq"))
        return HF_OK; /* recomputed from rope_theta */
    unsigned layer, expert;
    const char *kind;
    if (parse_expert(src->name, &layer, &expert, &kind))
        return add_expert(c, src, layer, expert, kind);
    out_tensor t = {.src = src};
    rename_tensor(c->p.arch, src->name, t.name, sizeof t.name);
    if (!known_tensor(&c->p, t.name)) {
        corral_error_set(c->err, "tensor '%.200s' is not one of a %s's that Corral converts",
                         src->name, c->p.arch->hf_name);
        return HF_INVALID;
    }
    if (src->n_dims > 4) {
        corral_error_set(c->err, "tensor '%.200s' has %u dimensions", src->name, src->n_dims);
        return HF_INVALID;
    }
    for (size_t i = 0; i < c->n_tensors; i++)
        if (strcmp(c->tensors[i].name, t.name) == 0) {
            corral_error_set(c->err, "tensor '%.200s' is in the checkpoint twice", src->name);
            return HF_INVALID;
        }
    /* GGUF lists dimensions innermost first; a scalar is one element */
    t.n_dims = src->n_dims ? src->n_dims : 1;
    for (uint32_t d = 0; d < 4; d++)
        t.ne[d] = 1;
    for (uint32_t d = 0; d < src->n_dims; d++) {
        if (src->shape[d] == 0 || src->shape[d] > INT64_MAX) {
            corral_error_set(c->err, "tensor '%.200s' has an empty dimension", src->name);
            return HF_INVALID;
        }
        t.ne[src->n_dims - 1 - d] = (int64_t)src->shape[d];
    }
    if (t.n_dims == 1 || ends_with(t.name, ".bias") || ends_with(t.name, ".ffn_gate_inp.weight"))
        t.type = TENSOR_TYPE_F32; /* a router's few columns decide which experts run */
    else
        t.type = src->dtype == SAFETENSORS_BF16 ? TENSOR_TYPE_BF16 : TENSOR_TYPE_F16;
    c->any_bf16 = c->any_bf16 || t.type == TENSOR_TYPE_BF16;
    bool q = ends_with(t.name, ".attn_q.weight"), k = ends_with(t.name, ".attn_k.weight");
    t.add_one = is_gemma(c->p.arch) && ends_with(t.name, "_norm.weight");
    if (c->p.arch->family == FAMILY_LLAMA && (q || k)) {
        uint32_t heads = q ? c->p.n_head : c->p.n_head_kv;
        uint64_t rows = src->n_dims == 2 ? src->shape[0] : 0;
        if (rows == 0 || rows % heads || (rows / heads) % 2) {
            corral_error_set(c->err, "tensor '%.200s': %llu rows do not split into %u heads of "
                             "an even size", src->name, (unsigned long long)rows, heads);
            return HF_INVALID;
        }
        t.permute_heads = heads;
    }
    return append_tensor(c, &t);
}

static int by_file_name(const void *a, const void *b)
{
    return strcmp((*(const hf_file *const *)a)->name, (*(const hf_file *const *)b)->name);
}

/* An index's shards must all be among the files, or the checkpoint is incomplete. */
static hf_status check_index(converter *c)
{
    hf_status status;
    json_t *index = load_json(c, "model.safetensors.index.json", false, &status);
    if (!index)
        return status;
    const json_t *map = json_object_get(index, "weight_map");
    const char *tensor;
    const json_t *shard;
    status = json_is_object(map) ? HF_OK : HF_INVALID;
    if (status != HF_OK)
        corral_error_set(c->err, "model.safetensors.index.json has no weight_map");
    json_object_foreach((json_t *)map, tensor, shard) {
        if (status != HF_OK)
            break;
        const char *name = json_string_value(shard);
        if (!name || !find_file(c, name)) {
            corral_error_set(c->err, "model.safetensors.index.json puts '%.100s' in '%.100s', "
                             "which is not among the files", tensor, name ? name : "?");
            status = HF_INVALID;
        }
    }
    json_decref(index);
    return status;
}

static hf_status read_tensors(converter *c)
{
    hf_status status = check_index(c);
    if (status != HF_OK)
        return status;
    const hf_file **shards = calloc(c->n_files ? c->n_files : 1, sizeof *shards);
    if (!shards || !(c->shards = calloc(c->n_files ? c->n_files : 1, sizeof *c->shards))) {
        free(shards);
        corral_error_set(c->err, "out of memory");
        return HF_IO;
    }
    /* model*.safetensors when there are any: Mistral's repositories also hold the same weights
     * under Mistral's own names (consolidated.safetensors) */
    bool model_shards = false;
    for (size_t i = 0; i < c->n_files; i++)
        model_shards = model_shards || is_model_shard(c->files[i].name);
    size_t n = 0;
    for (size_t i = 0; i < c->n_files; i++)
        if (model_shards ? is_model_shard(c->files[i].name) : is_shard(c->files[i].name))
            shards[n++] = &c->files[i];
    qsort(shards, n, sizeof *shards, by_file_name);
    for (size_t i = 0; i < n && status == HF_OK; i++) {
        corral_error why;
        safetensors_file *f = safetensors_open(shards[i]->path, &why);
        if (!f) {
            /* the reader names the path it was given; the user knows the file's name */
            const char *msg = why.message;
            size_t len = strlen(shards[i]->path);
            if (strncmp(msg, shards[i]->path, len) == 0)
                msg += len;
            corral_error_set(c->err, "%.200s%.400s", shards[i]->name, msg);
            status = HF_INVALID;
            break;
        }
        c->shards[c->n_shards++] = f;
        for (size_t t = 0; t < safetensors_count(f) && status == HF_OK; t++)
            status = add_tensor(c, safetensors_at(f, t));
    }
    free(shards);
    if (status == HF_OK)
        status = check_experts(c);
    if (status == HF_OK && c->n_tensors == 0) {
        corral_error_set(c->err, "the checkpoint has no tensors (no *.safetensors files)");
        status = HF_INVALID;
    }
    return status;
}

static float *add_extra(converter *c, const char *name, uint32_t n)
{
    extra_tensor *e = &c->extras[c->n_extras];
    if (!(e->data = malloc((n ? n : 1) * sizeof *e->data))) {
        corral_error_set(c->err, "out of memory");
        return NULL;
    }
    e->name = name;
    e->n = n;
    c->n_extras++;
    return e->data;
}

/* Phi-3's LongRoPE factors (rope_scaling's long_factor and short_factor), one per pair. */
static hf_status make_longrope_factors(converter *c)
{
    const hf_params *p = &c->p;
    const json_t *s = json_object_get(c->config, "rope_scaling");
    static const char *const keys[2] = {"long_factor", "short_factor"};
    static const char *const names[2] = {"rope_factors_long.weight", "rope_factors_short.weight"};
    for (int k = 0; k < 2; k++) {
        const json_t *list = json_object_get(s, keys[k]);
        if (!json_is_array(list) || json_array_size(list) != p->head_dim / 2) {
            corral_error_set(c->err, "config.json: rope_scaling's %s must be %u numbers",
                             keys[k], p->head_dim / 2);
            return HF_INVALID;
        }
        float *out = add_extra(c, names[k], p->head_dim / 2);
        if (!out)
            return HF_IO;
        for (uint32_t i = 0; i < p->head_dim / 2; i++) {
            const json_t *v = json_array_get(list, i);
            double d = json_number_value(v);
            if (!json_is_number(v) || !(d > 0) || d > 3.4e38) {
                corral_error_set(c->err, "config.json: rope_scaling's %s[%u] is not a positive "
                                 "number", keys[k], i);
                return HF_INVALID;
            }
            out[i] = (float)d;
        }
    }
    return HF_OK;
}

/* Llama 3's per-frequency RoPE scale (its "llama3" rope_scaling), one factor per pair. */
static hf_status make_rope_freqs(converter *c)
{
    const hf_params *p = &c->p;
    if (p->rope_type && p->arch->family == FAMILY_PHI3 &&
        (!strcmp(p->rope_type, "longrope") || !strcmp(p->rope_type, "su")))
        return make_longrope_factors(c);
    if (!p->rope_type || strcmp(p->rope_type, "llama3") != 0)
        return HF_OK;
    float factor = p->rope_factor > 0 ? p->rope_factor : 8.0f;
    float low = p->low_freq_factor > 0 ? p->low_freq_factor : 1.0f;
    float high = p->high_freq_factor > 0 ? p->high_freq_factor : 4.0f;
    float original = p->rope_original_ctx ? (float)p->rope_original_ctx : 8192.0f;
    float theta = p->has_theta ? p->rope_theta : 10000.0f;
    if (!(high > low)) {
        corral_error_set(c->err, "config.json: rope_scaling's high_freq_factor must be above "
                         "its low_freq_factor");
        return HF_INVALID;
    }
    float *freqs = add_extra(c, "rope_freqs.weight", p->head_dim / 2);
    if (!freqs)
        return HF_IO;
    float low_wavelen = original / low, high_wavelen = original / high;
    for (uint32_t i = 0; i < p->head_dim / 2; i++) {
        double wavelen = 2 * M_PI * pow(theta, (double)(2 * i) / p->head_dim);
        if (wavelen < high_wavelen) {
            freqs[i] = 1.0f;
        } else if (wavelen > low_wavelen) {
            freqs[i] = factor;
        } else {
            float smooth = (original / (float)wavelen - low) / (high - low);
            freqs[i] = 1.0f / ((1 - smooth) / factor + smooth);
        }
    }
    return HF_OK;
}

/* ---- writing ---- */

/*
 * Phi-3's window, the context its RoPE was trained for, and the attention factor its scaled
 * RoPE takes (LongRoPE: sqrt(1 + ln(scale) / ln(original)); yarn: 0.1 ln(scale) + 1; at
 * least 1), scale being max_position_embeddings over the original.
 */
static bool write_phi3_keys(converter *c, gguf_writer *w, const char *a)
{
    const hf_params *p = &c->p;
    char key[96];
    bool ok = true;
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    if (p->sliding_window)
        ok = gguf_writer_add_u32(w, KEY("attention.sliding_window"), p->sliding_window, c->err);
    uint32_t original = p->rope_original_ctx;
    if (ok && original && !p->rope_type)
        ok = gguf_writer_add_u32(w, KEY("rope.scaling.original_context_length"), original,
                                 c->err);
    if (ok && original && p->n_ctx && p->rope_type) {
        double scale = (double)p->n_ctx / original, factor;
        if (!strcmp(p->rope_type, "yarn"))
            factor = 0.1 * log(scale) + 1.0;
        else
            factor = sqrt(1.0 + log(scale) / log((double)original));
        ok = gguf_writer_add_f32(w, KEY("rope.scaling.attn_factor"),
                                 (float)(factor > 1.0 ? factor : 1.0), c->err);
        if (ok && strcmp(p->rope_type, "yarn") != 0)
            ok = gguf_writer_add_u32(w, KEY("rope.scaling.original_context_length"), original,
                                     c->err);
    }
#undef KEY
    return ok;
}

/* Gemma 2's and 3's attention windows and softcaps, Gemma 3's local RoPE base. */
static bool write_gemma_keys(converter *c, gguf_writer *w, const char *a)
{
    const hf_params *p = &c->p;
    char key[96];
    bool ok = true;
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    if (p->sliding_window)
        ok = gguf_writer_add_u32(w, KEY("attention.sliding_window"), p->sliding_window, c->err);
    if (ok && p->attn_softcap > 0)
        ok = gguf_writer_add_f32(w, KEY("attn_logit_softcapping"), p->attn_softcap, c->err);
    if (ok && p->final_softcap > 0)
        ok = gguf_writer_add_f32(w, KEY("final_logit_softcapping"), p->final_softcap, c->err);
    if (ok && p->arch->family == FAMILY_GEMMA3)
        ok = gguf_writer_add_f32(w, KEY("rope.local.freq_base"),
                                 p->rope_local_theta > 0 ? p->rope_local_theta : 10000.0f, c->err);
    if (ok && p->n_sliding_pattern)
        ok = gguf_writer_add_array(w, KEY("attention.sliding_window_pattern"), GGUF_TYPE_BOOL,
                                   p->sliding_pattern, p->n_sliding_pattern, c->err);
#undef KEY
    return ok;
}

static bool write_keys(converter *c, gguf_writer *w)
{
    const hf_params *p = &c->p;
    const char *a = p->arch->gguf_name;
    corral_error *err = c->err;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    bool llama = strcmp(a, "llama") == 0;
    bool ok = gguf_writer_add_str(w, "general.architecture", a, strlen(a), err) &&
              gguf_writer_add_u32(w, "general.file_type", c->any_bf16 ? 32 : 1, err) &&
              gguf_writer_add_u32(w, "general.quantization_version", 2, err) &&
              gguf_writer_add_u32(w, KEY("vocab_size"), hf_vocab_count(c->vocab), err) &&
              gguf_writer_add_u32(w, KEY("block_count"), p->n_layer, err) &&
              gguf_writer_add_u32(w, KEY("embedding_length"), p->n_embd, err) &&
              gguf_writer_add_u32(w, KEY("feed_forward_length"), p->n_ff, err) &&
              gguf_writer_add_u32(w, KEY("attention.head_count"), p->n_head, err) &&
              gguf_writer_add_u32(w, KEY("attention.head_count_kv"), p->n_head_kv, err);
    if (ok && p->n_ctx)
        ok = gguf_writer_add_u32(w, KEY("context_length"), p->n_ctx, err);
    if (ok && p->n_expert)
        ok = gguf_writer_add_u32(w, KEY("expert_count"), p->n_expert, err) &&
             gguf_writer_add_u32(w, KEY("expert_used_count"), p->n_expert_used, err);
    if (ok && p->n_expert && p->n_ff_expert)
        ok = gguf_writer_add_u32(w, KEY("expert_feed_forward_length"), p->n_ff_expert, err);
    bool phi3 = p->arch->family == FAMILY_PHI3;
    if (ok && (llama || phi3))
        ok = gguf_writer_add_u32(w, KEY("rope.dimension_count"), p->head_dim, err);
    if (ok && (p->has_head_dim || p->arch->family == FAMILY_QWEN3 || is_gemma(p->arch)))
        ok = gguf_writer_add_u32(w, KEY("attention.key_length"), p->head_dim, err) &&
             gguf_writer_add_u32(w, KEY("attention.value_length"), p->head_dim, err);
    if (ok && p->has_theta)
        ok = gguf_writer_add_f32(w, KEY("rope.freq_base"), p->rope_theta, err);
    if (ok && p->has_eps)
        ok = gguf_writer_add_f32(w, KEY("attention.layer_norm_rms_epsilon"), p->rms_eps, err);
    if (ok && phi3)
        ok = write_phi3_keys(c, w, a);
    bool factors = p->rope_type && (!strcmp(p->rope_type, "llama3") ||
                                    !strcmp(p->rope_type, "longrope") ||
                                    !strcmp(p->rope_type, "su"));
    if (ok && p->rope_type && !factors) {
        ok = gguf_writer_add_str(w, KEY("rope.scaling.type"), p->rope_type,
                                 strlen(p->rope_type), err);
        if (ok && p->rope_factor > 0)
            ok = gguf_writer_add_f32(w, KEY("rope.scaling.factor"), p->rope_factor, err);
        if (ok && p->rope_original_ctx)
            ok = gguf_writer_add_u32(w, KEY("rope.scaling.original_context_length"),
                                     p->rope_original_ctx, err);
    }
#undef KEY
    if (ok && is_gemma(p->arch))
        ok = write_gemma_keys(c, w, a);
    return ok && hf_vocab_write(c->vocab, w, err);
}

static float element_f32(const uint8_t *src, safetensors_dtype dtype, size_t i)
{
    uint16_t h;
    float f;
    switch (dtype) {
    case SAFETENSORS_F32: memcpy(&f, src + 4 * i, 4); return f;
    case SAFETENSORS_F16: memcpy(&h, src + 2 * i, 2); return quant_f16_to_f32(h);
    case SAFETENSORS_BF16: memcpy(&h, src + 2 * i, 2); return quant_bf16_to_f32(h);
    }
    return 0;
}

/* n elements of src into dst in the output type, plus one where add_one. */
static void convert_elements(const uint8_t *src, safetensors_dtype dtype, uint32_t type,
                             bool add_one, uint8_t *dst, size_t n)
{
    bool same = (dtype == SAFETENSORS_F32 && type == TENSOR_TYPE_F32) ||
                (dtype == SAFETENSORS_F16 && type == TENSOR_TYPE_F16) ||
                (dtype == SAFETENSORS_BF16 && type == TENSOR_TYPE_BF16);
    if (same && !add_one) {
        memcpy(dst, src, n * safetensors_dtype_size(dtype));
        return;
    }
    for (size_t i = 0; i < n; i++) {
        float f = element_f32(src, dtype, i) + (add_one ? 1.0f : 0.0f);
        if (type == TENSOR_TYPE_F32) {
            memcpy(dst + 4 * i, &f, 4);
        } else {
            uint16_t h = type == TENSOR_TYPE_F16 ? quant_f32_to_f16(f) : quant_f32_to_bf16(f);
            memcpy(dst + 2 * i, &h, 2);
        }
    }
}

/*
 * The source row of output row r. Hugging Face keeps each head's rotated halves apart
 * (first half of the head dimension, then the second); GGUF's llama pairs them up, so
 * output row 2i+s of a head is its source row s*D/2 + i.
 */
static uint64_t source_row(const out_tensor *t, uint64_t rows, uint64_t r)
{
    if (!t->permute_heads)
        return r;
    uint64_t d = rows / t->permute_heads, head = r / d, j = r % d;
    return head * d + (j % 2) * (d / 2) + j / 2;
}

/* Rows of a source matrix (1 for a vector), and the output tensor's (all experts' for a stack). */
static uint64_t source_rows(const out_tensor *t)
{
    return t->src->n_dims > 1 ? t->src->shape[0] : 1;
}

static uint64_t output_rows(const out_tensor *t)
{
    return source_rows(t) * (t->n_experts ? t->n_experts : 1);
}

static uint64_t output_row_bytes(const out_tensor *t)
{
    return t->src->n_elems / source_rows(t) * (t->type == TENSOR_TYPE_F32 ? 4 : 2);
}

/* Output rows [from, to) of a tensor from the checkpoint. */
static bool write_rows(converter *c, const out_tensor *t, uint64_t from, uint64_t to)
{
    const safetensors_tensor *s = t->src;
    uint64_t rows = source_rows(t);
    uint64_t row_elems = s->n_elems / rows;
    size_t in_size = safetensors_dtype_size(s->dtype);
    size_t out_size = t->type == TENSOR_TYPE_F32 ? 4 : 2;
    uint64_t piece = CHUNK_BYTES / out_size; /* a row longer than the buffer goes in pieces */
    for (uint64_t r = from; r < to; r++) {
        const uint8_t *row = t->n_experts
                                 ? t->experts[r / rows]->data + (r % rows) * row_elems * in_size
                                 : s->data + source_row(t, rows, r) * row_elems * in_size;
        for (uint64_t at = 0; at < row_elems; at += piece) {
            size_t n = (size_t)(row_elems - at < piece ? row_elems - at : piece);
            convert_elements(row + at * in_size, s->dtype, t->type, t->add_one, c->buf, n);
            if (!gguf_writer_write_tensor(c->writer, c->buf, n * out_size, c->err))
                return false;
        }
    }
    c->bytes_done += (to - from) * row_elems * out_size;
    return true;
}

static void converter_free(converter *c)
{
    if (!c)
        return;
    gguf_writer_free(c->writer); /* an unfinished output's temporary file goes with it */
    free(c->buf);
    hf_vocab_free(c->vocab);
    for (size_t i = 0; i < 5; i++)
        json_decref(c->tokenizer_json[i]);
    free(c->chat_template);
    free(c->spm_model);
    json_decref(c->config);
    for (size_t i = 0; i < c->n_shards; i++)
        safetensors_close(c->shards[i]);
    free(c->shards);
    for (size_t i = 0; i < c->n_tensors; i++)
        free(c->tensors[i].experts);
    free(c->tensors);
    for (size_t i = 0; i < c->n_extras; i++)
        free(c->extras[i].data);
    free(c->p.sliding_pattern);
    free(c);
}

void hf_converter_free(hf_converter *c)
{
    converter_free(c);
}

hf_status hf_converter_open(const hf_file *files, size_t n, hf_converter **out,
                            corral_error *err)
{
    converter *c = calloc(1, sizeof *c);
    *out = NULL;
    if (!c) {
        corral_error_set(err, "out of memory");
        return HF_IO;
    }
    *c = (converter){.files = files, .n_files = n, .err = err};
    hf_status status = read_config(c);
    if (status == HF_OK)
        status = read_tokenizer(c);
    if (status == HF_OK)
        status = read_tensors(c);
    if (status == HF_OK)
        status = make_rope_freqs(c);
    if (status != HF_OK) {
        converter_free(c);
        return status;
    }
    *out = c;
    return HF_OK;
}

hf_status hf_converter_begin(hf_converter *c, const char *out_path, corral_error *err)
{
    c->err = err;
    if (!(c->writer = gguf_writer_create()) || !(c->buf = malloc(CHUNK_BYTES))) {
        corral_error_set(err, "out of memory");
        return HF_IO;
    }
    bool ok = write_keys(c, c->writer);
    for (size_t i = 0; ok && i < c->n_extras; i++) {
        int64_t ne[1] = {c->extras[i].n};
        ok = gguf_writer_add_tensor(c->writer, c->extras[i].name, TENSOR_TYPE_F32, 1, ne, err);
        c->bytes_total += c->extras[i].n * sizeof(float);
    }
    for (size_t i = 0; ok && i < c->n_tensors; i++) {
        const out_tensor *t = &c->tensors[i];
        ok = gguf_writer_add_tensor(c->writer, t->name, t->type, t->n_dims, t->ne, err);
        c->bytes_total += output_rows(t) * output_row_bytes(t);
    }
    if (!ok)
        return HF_INVALID;
    return gguf_writer_begin(c->writer, out_path, err) ? HF_OK : HF_IO;
}

hf_status hf_converter_step(hf_converter *c, bool *done, corral_error *err)
{
    c->err = err;
    *done = false;
    bool ok = true;
    for (; ok && c->next_extra < c->n_extras; c->next_extra++) {
        const extra_tensor *e = &c->extras[c->next_extra];
        ok = gguf_writer_write_tensor(c->writer, e->data, e->n * sizeof(float), err);
        c->bytes_done += e->n * sizeof(float);
    }
    uint64_t budget = c->bytes_done + STEP_BYTES;
    while (ok && c->next_tensor < c->n_tensors && c->bytes_done < budget) {
        const out_tensor *t = &c->tensors[c->next_tensor];
        uint64_t rows = output_rows(t), row_bytes = output_row_bytes(t);
        uint64_t n = (budget - c->bytes_done) / (row_bytes ? row_bytes : 1);
        n = n == 0 ? 1 : n > rows - c->next_row ? rows - c->next_row : n;
        ok = write_rows(c, t, c->next_row, c->next_row + n);
        if ((c->next_row += n) == rows) {
            c->next_tensor++;
            c->next_row = 0;
        }
    }
    if (ok && c->next_tensor == c->n_tensors) {
        ok = gguf_writer_finish(c->writer, err);
        *done = ok;
    }
    return ok ? HF_OK : HF_IO;
}

uint64_t hf_converter_bytes_done(const hf_converter *c)
{
    return c->bytes_done;
}

uint64_t hf_converter_bytes_total(const hf_converter *c)
{
    return c->bytes_total;
}

hf_status hf_convert(const hf_file *files, size_t n, const char *out_path, corral_error *err)
{
    hf_converter *c;
    hf_status status = hf_converter_open(files, n, &c, err);
    if (status == HF_OK)
        status = hf_converter_begin(c, out_path, err);
    for (bool done = false; status == HF_OK && !done;)
        status = hf_converter_step(c, &done, err);
    hf_converter_free(c);
    return status;
}

/*
 * The checkpoint-to-GGUF driver (see hf_convert.h): the checkpoint's files found and read,
 * its tensors gathered from the shards under their GGUF names (experts stacked) with their
 * GGUF types, and each tensor's rows streamed to the writer, permuted where Llama's RoPE
 * pairing asks for it. What differs by architecture is hf_family.c's.
 */
#include "convert/hf_convert.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "convert/hf_family.h"
#include "convert/hf_family_deepseek2.h"
#include "convert/hf_family_embed.h"
#include "convert/hf_family_gemma4.h"
#include "convert/hf_family_glmocr.h"
#include "convert/hf_family_laguna.h"
#include "convert/hf_family_lfm2.h"
#include "convert/hf_family_nemotron_h.h"
#include "convert/hf_tokenizer.h"
#include "convert/safetensors.h"
#include "gguf.h"
#include "quant_half.h"
#include "tensor_type.h"
#include "util/file.h"

#define CHUNK_BYTES ((size_t)4 << 20)
#define STEP_BYTES ((uint64_t)64 << 20) /* written per hf_converter_step */

/* What becomes of each element on the way out. */
typedef enum elem_op {
    ELEM_AS_IS,
    ELEM_ADD_ONE, /* a Gemma or Qwen 3.5 norm: 1 + the stored value */
    ELEM_NEG_EXP, /* Qwen 3.5's A_log: -exp of the stored value, the decay's a */
    ELEM_CLAMP,   /* Gemma 3n's AltUp coefficients: within [-clamp, clamp] */
    ELEM_TANH,    /* Llama 3.2 Vision's tower gates, stored before their tanh */
    ELEM_ONE_MINUS_TANH, /* its position embedding's gate: 1 - tanh */
    ELEM_SOFTPLUS, /* Gemma 4's audio per_dim_scale: log(1 + exp), in double as ollama's */
} elem_op;

typedef struct out_tensor {
    char name[GGUF_MAX_NAME_BYTES + 1];
    const safetensors_tensor *src;
    uint32_t type;
    uint32_t n_dims;
    int64_t ne[4];
    uint32_t permute_heads; /* > 0: Llama's Q/K row order, with this many heads */
    bool transposed; /* a square matrix written transposed (after the permutation) */
    elem_op op;
    float clamp; /* ELEM_CLAMP's bound */
    bool v_reordered;       /* Qwen 3.5's value heads tiled (v_order; key_heads, per_key) */
    hf_v_order v_order;
    uint32_t key_heads, per_key;
    /* Qwen3-Next's in_proj_qkvz, per key head its q, k, v and z rows, split into attn_qkv
     * (every head's q, then k, then v) or attn_gate (every head's z): which, and its rows */
    enum { QKVZ_NONE, QKVZ_QKV, QKVZ_Z } qkvz;
    uint64_t qkvz_rows;
    uint64_t head_q, head_v; /* a key head's q (and k) rows, and its value heads' v (and z) */
    /* experts' matrices stacked (ffn_*_exps): experts[e] is expert e's, src the first found */
    const safetensors_tensor **experts;
    uint32_t n_experts;
    /* a strided view of src (gpt-oss's experts): output row r's k-th element (an MXFP4 block
     * when type is MXFP4) is src's element (r / group_rows) * group_stride +
     * (r % group_rows) * row_stride + offset + k * col_stride; with sub_rows, each group's
     * rows are in turn subgroups (a patch kernel's channels): row j of a group is at
     * (j / sub_rows) * sub_stride + (j % sub_rows) * row_stride */
    bool strided;
    uint64_t n_rows, row_elems, group_rows, group_stride, row_stride, offset, col_stride;
    uint64_t sub_rows, sub_stride;
    /* GLM-OCR's q/k (rows, or a bias's elements): per head of neox_head, its first neox_rot
     * from interleaved pairs to NeoX's halves (element i < neox_rot / 2 is source 2i, the next
     * half source 2i + 1) */
    uint32_t neox_head, neox_rot;
    const safetensors_tensor *scales; /* MXFP4: the blocks' scales, src the blocks */
} out_tensor;

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
    size_t n_tensors, tensors_cap;
    /* the tensors by name: open addressing over index_cap (a power of two, at least twice
     * n_tensors) slots, each a tensor's index + 1 or 0; a checkpoint can hold a million
     * tensors, which a scan per tensor would take hours over */
    uint32_t *index;
    size_t index_cap;
    hf_modules modules; /* an encoder's sentence-transformers modules' files */
    hf_extra_tensor extras[2]; /* RoPE factors made from config.json, written first */
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

/* A sentence-transformers module's config.json or weights ("1_Pooling/config.json",
 * "2_Dense/model.safetensors"): one folder down. */
static bool is_module_file(const char *name)
{
    const char *slash = strchr(name, '/');
    return slash && slash != name &&
           (strcmp(slash + 1, "config.json") == 0 ||
            strcmp(slash + 1, "model.safetensors") == 0) &&
           strncmp(name, "./", 2) != 0 && strncmp(name, "../", 3) != 0;
}

bool hf_is_checkpoint_file(const char *name)
{
    static const char *const names[] = {"config.json", "tokenizer.json", "tokenizer_config.json",
                                        "generation_config.json", "tokenizer.model",
                                        "special_tokens_map.json", "added_tokens.json",
                                        "model.safetensors.index.json", "chat_template.jinja",
                                        "preprocessor_config.json", "processor_config.json",
                                        "modules.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i]) == 0)
            return true;
    return is_shard(name) || is_module_file(name);
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

/* A JSON file of the checkpoint, an object unless any: NULL with *status HF_OK when absent
 * and not required. */
static json_t *load_json_value(converter *c, const char *name, bool required, bool any,
                               hf_status *status)
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
    if (!value || (!any && !json_is_object(value))) {
        corral_error_set(c->err, "%s is not a JSON %s%s%.200s", name, any ? "text" : "object",
                         value ? "" : ": ", value ? "" : jerr.text);
        json_decref(value);
        *status = HF_INVALID;
        return NULL;
    }
    return value;
}

static json_t *load_json(converter *c, const char *name, bool required, hf_status *status)
{
    return load_json_value(c, name, required, false, status);
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

/* An encoder's pooling and normalization: sentence-transformers' modules.json (required, as
 * ollama's converter requires it) and its Pooling module's config.json. */
static hf_status read_modules(converter *c)
{
    hf_status status;
    json_t *modules = load_json_value(c, "modules.json", false, true, &status);
    if (!modules) {
        if (status != HF_OK)
            return status;
        corral_error_set(c->err, "the checkpoint has no modules.json: a %s converts with its "
                         "sentence-transformers modules (its pooling)", c->p.arch->hf_name);
        return HF_INVALID;
    }
    status = hf_embed_read_modules(modules, &c->p, &c->modules, c->err);
    json_decref(modules);
    if (hf_family_is_gemma_embedding(c->p.arch))
        c->p.pooling_type = 1; /* mean, where no pooling module says otherwise */
    const char *names[3] = {c->modules.pooling, c->modules.dense_config[0],
                            c->modules.dense_config[1]};
    for (unsigned i = 0; i < 3 && status == HF_OK; i++) {
        if (!names[i][0])
            continue;
        json_t *config = load_json(c, names[i], true, &status);
        if (!config)
            break;
        status = i == 0 ? hf_embed_read_pooling(config, &c->p, c->err)
                        : hf_embed_read_dense(config, i - 1, &c->p, c->err);
        json_decref(config);
    }
    return status;
}

/* config.json, an encoder's sentence-transformers modules, and Qwen3-VL's
 * preprocessor_config.json where there is one (its image normalisation and size bounds, which
 * ollama's file carries). */
static hf_status read_config(converter *c)
{
    hf_status status;
    if (!(c->config = load_json(c, "config.json", true, &status)))
        return status;
    status = hf_family_read_config(c->config, &c->p, c->err);
    if (status == HF_OK && hf_family_is_encoder(c->p.arch))
        status = read_modules(c);
    if (status == HF_OK && hf_lfm2_is_vl(c->p.arch)) { /* its image settings, when given */
        json_t *processor = load_json(c, "processor_config.json", false, &status);
        if (processor)
            status = hf_lfm2_read_processor(processor, &c->p, c->err);
        json_decref(processor);
        return status;
    }
    if (status != HF_OK)
        return status;
    bool glmocr = hf_family_is_glmocr(c->p.arch); /* whose converter requires the file */
    if (!hf_family_is_qwen3vl(c->p.arch) && !glmocr)
        return status;
    json_t *preprocessor = load_json(c, "preprocessor_config.json", glmocr, &status);
    if (preprocessor)
        status = glmocr ? hf_glmocr_read_preprocessor(preprocessor, &c->p, c->err)
                        : hf_family_read_preprocessor(preprocessor, &c->p, c->err);
    json_decref(preprocessor);
    return status;
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
                   : hf_vocab_load(j[0], j[1], j[2], c->chat_template, c->p.vocab_size,
                                   hf_family_bpe_model(c->p.arch), c->err);
    if (c->vocab && hf_family_is_gemma_embedding(c->p.arch)) /* added tokens past the rows */
        hf_vocab_truncate(c->vocab, (uint32_t)c->p.vocab_size);
    if (c->vocab && hf_family_pre_tokenizer(c->p.arch))
        hf_vocab_set_pre(c->vocab, hf_family_pre_tokenizer(c->p.arch));
    if (c->vocab && hf_deepseek2_splits_kv_b(c->p.arch)) /* GLM-4 MoE Lite's, as ollama's */
        hf_vocab_eog_from_eos_ids(c->vocab);
    if (c->vocab && hf_family_is_laguna(c->p.arch))
        hf_vocab_as_laguna(c->vocab);
    if (c->vocab && hf_family_is_glmocr(c->p.arch))
        hf_vocab_as_glmocr(c->vocab);
    if (c->vocab && hf_lfm2_is_vl(c->p.arch)) { /* the marks around an image's tokens */
        c->p.lfm2vl.start_token = hf_vocab_find(c->vocab, "<|image_start|>");
        c->p.lfm2vl.end_token = hf_vocab_find(c->vocab, "<|image_end|>");
        c->p.lfm2vl.thumbnail_token = hf_vocab_find(c->vocab, "<|img_thumbnail|>");
    }
    return c->vocab ? HF_OK : HF_INVALID;
}

/* ---- tensors ---- */

static uint64_t name_hash(const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, then a finaliser that spreads its low bits */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

/* The output tensor named name, or NULL. */
static out_tensor *find_tensor(converter *c, const char *name)
{
    if (!c->index_cap)
        return NULL;
    size_t mask = c->index_cap - 1;
    for (size_t slot = name_hash(name) & mask; c->index[slot]; slot = (slot + 1) & mask)
        if (strcmp(c->tensors[c->index[slot] - 1].name, name) == 0)
            return &c->tensors[c->index[slot] - 1];
    return NULL;
}

static void index_put(converter *c, size_t i)
{
    size_t mask = c->index_cap - 1, slot = name_hash(c->tensors[i].name) & mask;
    while (c->index[slot])
        slot = (slot + 1) & mask;
    c->index[slot] = (uint32_t)(i + 1);
}

static hf_status append_tensor(converter *c, const out_tensor *t)
{
    if (c->n_tensors >= SAFETENSORS_MAX_TENSORS * 4u) { /* a fused tensor splits into parts */
        corral_error_set(c->err, "the checkpoint makes more than %u tensors",
                         SAFETENSORS_MAX_TENSORS * 4u);
        return HF_INVALID;
    }
    if (c->n_tensors == c->tensors_cap) {
        size_t cap = c->tensors_cap ? 2 * c->tensors_cap : 64;
        out_tensor *grown = realloc(c->tensors, cap * sizeof *grown);
        if (!grown) {
            corral_error_set(c->err, "out of memory");
            return HF_IO;
        }
        c->tensors = grown;
        c->tensors_cap = cap;
    }
    if (2 * (c->n_tensors + 1) > c->index_cap) {
        size_t cap = c->index_cap ? 2 * c->index_cap : 128;
        uint32_t *index = calloc(cap, sizeof *index);
        if (!index) {
            corral_error_set(c->err, "out of memory");
            return HF_IO;
        }
        free(c->index);
        c->index = index;
        c->index_cap = cap;
        for (size_t i = 0; i < c->n_tensors; i++)
            index_put(c, i);
    }
    c->tensors[c->n_tensors] = *t;
    index_put(c, c->n_tensors++);
    return HF_OK;
}

/* A 2-D matrix as the index-th of count in the 3-D stack name (the stack outermost). */
static hf_status add_to_stack(converter *c, const safetensors_tensor *src, const char *name,
                              uint32_t index, uint32_t count)
{
    out_tensor *t = find_tensor(c, name);
    if (!t) {
        out_tensor stack = {.src = src, .n_dims = 3, .n_experts = count,
                            .ne = {(int64_t)src->shape[1], (int64_t)src->shape[0],
                                   (int64_t)count, 1},
                            .type = src->dtype == SAFETENSORS_BF16 ? TENSOR_TYPE_BF16
                                                                   : TENSOR_TYPE_F16};
        snprintf(stack.name, sizeof stack.name, "%s", name);
        if (!(stack.experts = calloc(count, sizeof *stack.experts))) {
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
    if (!t->experts) { /* the name is taken by a whole tensor (gpt-oss's or packed experts) */
        corral_error_set(c->err, "tensor '%.200s' is a matrix of '%s', which the checkpoint "
                         "also holds whole", src->name, name);
        return HF_INVALID;
    }
    if (t->experts[index] || src->dtype != t->src->dtype ||
        src->shape[0] != t->src->shape[0] || src->shape[1] != t->src->shape[1]) {
        corral_error_set(c->err, "tensor '%.200s' %s", src->name,
                         t->experts[index] ? "is in the checkpoint twice"
                                           : "differs in shape or dtype from the others of its "
                                             "stack");
        return HF_INVALID;
    }
    t->experts[index] = src;
    return HF_OK;
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
    return add_to_stack(c, src, name, expert, p->n_expert);
}

/*
 * One of a gpt-oss layer's expert tensors: its shape checked against config.json's, then the
 * strided views that pick gate's and up's rows (interleaved in gate_up), transpose a plain
 * matrix (PyTorch keeps it [experts, in, out]) and pair MXFP4 blocks with their scales.
 */
static hf_status add_gptoss_experts(converter *c, const safetensors_tensor *src, unsigned layer,
                                    gptoss_part part)
{
    const hf_params *p = &c->p;
    uint64_t n_exp = p->n_expert, ff = p->n_ff_expert, embd = p->n_embd;
    bool gate_up = part <= GPTOSS_GATE_UP_SCALES;
    bool blocks = part == GPTOSS_GATE_UP_BLOCKS || part == GPTOSS_DOWN_BLOCKS;
    bool mx = blocks || part == GPTOSS_GATE_UP_SCALES || part == GPTOSS_DOWN_SCALES;
    bool bias = part == GPTOSS_GATE_UP_BIAS || part == GPTOSS_DOWN_BIAS;
    uint64_t fused = gate_up ? 2 : 1;
    uint64_t rows = gate_up ? ff : embd;  /* output rows per expert */
    uint64_t inner = gate_up ? embd : ff; /* elements per output row */
    uint64_t want[4] = {n_exp, 0, 0, 0}; /* the shape config.json makes, outermost first */
    uint32_t n_dims = 3;
    if (bias) {
        n_dims = 2;
        want[1] = fused * rows;
    } else if (mx) {
        n_dims = blocks ? 4 : 3;
        want[1] = fused * rows;
        want[2] = inner / 32;
        want[3] = 16;
    } else {
        want[1] = inner;
        want[2] = fused * rows;
    }
    bool fits = layer < p->n_layer && src->n_dims == n_dims && (!mx || inner % 32 == 0) &&
                (mx == (src->dtype == SAFETENSORS_U8));
    for (uint32_t d = 0; fits && d < n_dims; d++)
        fits = src->shape[d] == want[d];
    if (!fits) {
        char shape[96];
        size_t used = 0;
        for (uint32_t d = 0; d < n_dims; d++)
            used += (size_t)snprintf(shape + used, sizeof shape - used, "%s%llu", d ? ", " : "",
                                     (unsigned long long)want[d]);
        corral_error_set(c->err, "tensor '%.200s' is not the %s tensor [%s] of this "
                         "GptOssForCausalLM's %u layers", src->name, mx ? "U8" : "float", shape,
                         p->n_layer);
        return HF_INVALID;
    }
    for (uint64_t pick = 0; pick < fused; pick++) {
        out_tensor t = {.strided = true, .n_dims = bias ? 2 : 3};
        snprintf(t.name, sizeof t.name, "blk.%u.ffn_%s_exps.%s", layer,
                 !gate_up ? "down" : pick ? "up" : "gate", bias ? "bias" : "weight");
        out_tensor *have = find_tensor(c, t.name); /* the other half of an MXFP4 pair */
        if (have && mx && have->type == TENSOR_TYPE_MXFP4 &&
            (blocks ? !have->src : !have->scales)) {
            *(blocks ? &have->src : &have->scales) = src;
            continue;
        }
        if (have) {
            corral_error_set(c->err, "tensor '%.200s' is in the checkpoint twice", src->name);
            return HF_INVALID;
        }
        t.n_rows = n_exp * (bias ? 1 : rows);
        t.ne[0] = (int64_t)(bias ? rows : inner);
        t.ne[1] = (int64_t)(bias ? n_exp : rows);
        t.ne[2] = bias ? 1 : (int64_t)n_exp;
        t.ne[3] = 1;
        if (bias) { /* [experts, fused * rows]: row e's k-th is element fused * k + pick */
            t.row_elems = rows;
            t.group_rows = 1;
            t.group_stride = fused * rows;
            t.offset = pick;
            t.col_stride = fused;
            t.type = TENSOR_TYPE_F32;
        } else if (mx) { /* [experts, fused * rows, blocks]: whole rows, every fused-th */
            uint64_t nb = inner / 32;
            t.row_elems = nb;
            t.group_rows = rows;
            t.group_stride = fused * rows * nb;
            t.row_stride = fused * nb;
            t.offset = pick * nb;
            t.col_stride = 1;
            t.type = TENSOR_TYPE_MXFP4;
        } else { /* [experts, inner, fused * rows]: output row r is column fused * r + pick */
            t.row_elems = inner;
            t.group_rows = rows;
            t.group_stride = inner * fused * rows;
            t.row_stride = fused;
            t.offset = pick;
            t.col_stride = fused * rows;
            t.type = src->dtype == SAFETENSORS_BF16 ? TENSOR_TYPE_BF16 : TENSOR_TYPE_F16;
        }
        if (mx && !blocks)
            t.scales = src;
        else
            t.src = src;
        c->any_bf16 = c->any_bf16 || t.type == TENSOR_TYPE_BF16;
        hf_status status = append_tensor(c, &t);
        if (status != HF_OK)
            return status;
    }
    return HF_OK;
}

/*
 * One of a Qwen 3.5 MoE layer's expert tensors, its shape checked against config.json's:
 * down's as it is, gate_up's as two strided views, gate's rows and up's of each expert.
 * Qwen3-VL MoE's and Llama 4's are stored transposed (each expert's [in, out]): every part
 * is a strided view reading the checkpoint's columns as rows.
 */
static hf_status add_packed_experts(converter *c, const safetensors_tensor *src, unsigned layer,
                                    bool down)
{
    const hf_params *p = &c->p;
    uint64_t n_exp = p->n_expert, ff = p->n_ff_expert, embd = p->n_embd;
    bool transposed = hf_family_experts_transposed(p->arch);
    uint64_t rows = down ? embd : 2 * ff, cols = down ? ff : embd; /* per expert, as GGUF's */
    uint64_t dim1 = transposed ? cols : rows, dim2 = transposed ? rows : cols;
    bool fits = src->n_dims == 3 && layer < p->n_layer && ff && src->shape[0] == n_exp &&
                src->shape[1] == dim1 && src->shape[2] == dim2 && src->dtype != SAFETENSORS_U8;
    if (!fits) {
        corral_error_set(c->err, "tensor '%.200s' is not [%llu, %llu, %llu] (config.json's "
                         "experts, widths and layers)", src->name, (unsigned long long)n_exp,
                         (unsigned long long)dim1, (unsigned long long)dim2);
        return HF_INVALID;
    }
    uint32_t type = src->dtype == SAFETENSORS_BF16 ? TENSOR_TYPE_BF16 : TENSOR_TYPE_F16;
    c->any_bf16 = c->any_bf16 || type == TENSOR_TYPE_BF16;
    static const char *const kinds[3] = {"gate", "up", "down"};
    for (int k = down ? 2 : 0; k < (down ? 3 : 2); k++) {
        out_tensor t = {.src = src, .type = type, .n_dims = 3,
                        .ne = {(int64_t)(down ? ff : embd), (int64_t)(down ? embd : ff),
                               (int64_t)n_exp, 1}};
        snprintf(t.name, sizeof t.name, "blk.%u.ffn_%s_exps.weight", layer, kinds[k]);
        if (find_tensor(c, t.name)) {
            corral_error_set(c->err, "tensor '%.200s' is in the checkpoint twice", src->name);
            return HF_INVALID;
        }
        if (transposed) { /* expert e's output row i is its column i (ff + i for up's) */
            uint64_t out_rows = down ? embd : ff, width = down ? embd : 2 * ff;
            t.strided = true;
            t.n_rows = n_exp * out_rows;
            t.row_elems = cols;
            t.group_rows = out_rows;
            t.group_stride = cols * width;
            t.row_stride = 1;
            t.offset = k == 1 ? ff : 0;
            t.col_stride = width;
        } else if (!down) { /* expert e's output row i of gate (up) is its row i (ff + i) */
            t.strided = true;
            t.n_rows = n_exp * ff;
            t.row_elems = embd;
            t.group_rows = ff;
            t.group_stride = 2 * ff * embd;
            t.row_stride = embd;
            t.offset = k == 1 ? ff * embd : 0;
            t.col_stride = 1;
        }
        hf_status status = append_tensor(c, &t);
        if (status != HF_OK)
            return status;
    }
    return HF_OK;
}

/*
 * One of nomic-bert-moe's packed experts, [experts x n_inner, n_embd]: w1, the experts' up
 * matrices one after another as GGUF stacks them (its bytes as they are), or w2, each
 * expert's down matrix transposed ([n_inner, n_embd]), read as a strided view.
 */
static hf_status add_nomic_experts(converter *c, const safetensors_tensor *src, unsigned layer,
                                   bool down)
{
    const hf_params *p = &c->p;
    uint64_t n_exp = p->n_expert, ff = p->n_ff, embd = p->n_embd;
    if (!hf_embed_is_moe_layer(p, layer)) {
        corral_error_set(c->err, "tensor '%.200s': layer %u has no experts (config.json's "
                         "moe_every_n_layers %u)", src->name, layer, p->moe_every);
        return HF_INVALID;
    }
    if (src->n_dims != 2 || src->shape[0] != n_exp * ff || src->shape[1] != embd ||
        src->dtype == SAFETENSORS_U8) {
        corral_error_set(c->err, "tensor '%.200s' is not [%llu, %llu] (config.json's experts "
                         "times n_inner, and n_embd)", src->name,
                         (unsigned long long)(n_exp * ff), (unsigned long long)embd);
        return HF_INVALID;
    }
    out_tensor t = {.src = src, .n_dims = 3,
                    .type = src->dtype == SAFETENSORS_BF16 ? TENSOR_TYPE_BF16 : TENSOR_TYPE_F16,
                    .ne = {(int64_t)(down ? ff : embd), (int64_t)(down ? embd : ff),
                           (int64_t)n_exp, 1}};
    snprintf(t.name, sizeof t.name, "blk.%u.ffn_%s_exps.weight", layer, down ? "down" : "up");
    if (find_tensor(c, t.name)) {
        corral_error_set(c->err, "tensor '%.200s' is in the checkpoint twice", src->name);
        return HF_INVALID;
    }
    if (down) { /* expert e's output row i is column i of its [n_inner, n_embd] block */
        t.strided = true;
        t.n_rows = n_exp * embd;
        t.row_elems = ff;
        t.group_rows = embd;
        t.group_stride = ff * embd;
        t.row_stride = 1;
        t.col_stride = embd;
    }
    c->any_bf16 = c->any_bf16 || t.type == TENSOR_TYPE_BF16;
    return append_tensor(c, &t);
}

/* Every stack has all its experts, every MXFP4 tensor its blocks and scales. */
static hf_status check_experts(converter *c)
{
    for (size_t i = 0; i < c->n_tensors; i++)
        if (c->tensors[i].type == TENSOR_TYPE_MXFP4 &&
            (!c->tensors[i].src || !c->tensors[i].scales)) {
            corral_error_set(c->err, "the checkpoint has MXFP4 %s but not their %s for '%s'",
                             c->tensors[i].src ? "blocks" : "scales",
                             c->tensors[i].src ? "scales" : "blocks", c->tensors[i].name);
            return HF_INVALID;
        }
    for (size_t i = 0; i < c->n_tensors; i++)
        for (uint32_t e = 0; e < c->tensors[i].n_experts; e++)
            if (!c->tensors[i].experts[e]) {
                corral_error_set(c->err, "the checkpoint has no %s %u for '%s'",
                                 strstr(c->tensors[i].name, "_exps.") ? "expert" : "matrix", e,
                                 c->tensors[i].name);
                return HF_INVALID;
            }
    return HF_OK;
}

/* Appends t, a part of a checkpoint tensor: named as name with part_suffix for its
 * whole_suffix, refused when the checkpoint already gave that name. */
static hf_status append_part(converter *c, out_tensor *t, const char *name,
                             const char *whole_suffix, const char *part_suffix)
{
    snprintf(t->name, sizeof t->name, "%.*s%s", (int)(strlen(name) - strlen(whole_suffix)), name,
             part_suffix);
    if (find_tensor(c, t->name)) {
        corral_error_set(c->err, "tensor '%.200s' is in the checkpoint twice", t->src->name);
        return HF_INVALID;
    }
    c->any_bf16 = c->any_bf16 || t->type == TENSOR_TYPE_BF16;
    return append_tensor(c, t);
}

/* Qwen3-Next's fused in_proj_qkvz (GGUF name blk.L.ssm_in.weight) as llama.cpp's converter
 * splits it: attn_qkv and attn_gate, read through qkvz_source. */
static hf_status add_qkvz(converter *c, const safetensors_tensor *src, const char *name)
{
    const hf_params *p = &c->p;
    uint64_t group = 2 * (uint64_t)p->key_head_dim +
                     2 * (uint64_t)(p->value_heads / p->key_heads) * p->value_head_dim;
    if (src->n_dims != 2 || src->shape[0] != p->key_heads * group ||
        src->shape[1] != p->n_embd || src->dtype == SAFETENSORS_U8) {
        corral_error_set(c->err, "tensor '%.200s' is not [%llu, %u] (config.json's linear "
                         "attention)", src->name, (unsigned long long)(p->key_heads * group),
                         p->n_embd);
        return HF_INVALID;
    }
    uint64_t qk = 2 * (uint64_t)p->key_heads * p->key_head_dim;
    uint64_t v = (uint64_t)p->value_heads * p->value_head_dim;
    for (int part = 0; part < 2; part++) {
        out_tensor t = {.src = src, .n_dims = 2, .qkvz = part ? QKVZ_Z : QKVZ_QKV,
                        .qkvz_rows = part ? v : qk + v, .key_heads = p->key_heads,
                        .head_q = p->key_head_dim, .head_v = v / p->key_heads,
                        .type = src->dtype == SAFETENSORS_BF16 ? TENSOR_TYPE_BF16
                                                               : TENSOR_TYPE_F16};
        t.ne[0] = (int64_t)p->n_embd;
        t.ne[1] = (int64_t)t.qkvz_rows;
        t.ne[2] = t.ne[3] = 1;
        hf_status status = append_part(c, &t, name, "ssm_in.weight",
                                       part ? "attn_gate.weight" : "attn_qkv.weight");
        if (status != HF_OK)
            return status;
    }
    return HF_OK;
}

/*
 * GLM-4 MoE Lite's kv_b_proj ([heads * (qk_nope + v_head), kv_lora]: per head its key rows,
 * then its value rows) split as ollama's converter splits it, each part a strided view:
 * attn_k_b [heads, kv_lora, qk_nope] (each head's key rows transposed, for the absorbed
 * attention) and attn_v_b [heads, v_head, kv_lora] (its value rows).
 */
static hf_status add_kv_b(converter *c, const safetensors_tensor *src, const char *name)
{
    const hf_params *p = &c->p;
    uint64_t nope = p->qk_nope_dim, v = p->v_head_dim, lora = p->kv_lora_rank;
    uint64_t heads = p->n_head, per = nope + v;
    if (src->n_dims != 2 || src->shape[0] != heads * per || src->shape[1] != lora ||
        src->dtype == SAFETENSORS_U8 || src->dtype == SAFETENSORS_I64) {
        corral_error_set(c->err, "tensor '%.200s' is not [%llu, %llu] (config.json's heads of "
                         "qk_nope_head_dim + v_head_dim, and kv_lora_rank)", src->name,
                         (unsigned long long)(heads * per), (unsigned long long)lora);
        return HF_INVALID;
    }
    for (int part = 0; part < 2; part++) {
        bool k = part == 0;
        out_tensor t = {.src = src, .strided = true, .n_dims = 3,
                        .type = src->dtype == SAFETENSORS_BF16 ? TENSOR_TYPE_BF16
                                                               : TENSOR_TYPE_F16,
                        .ne = {(int64_t)(k ? nope : lora), (int64_t)(k ? lora : v),
                               (int64_t)heads, 1},
                        .n_rows = heads * (k ? lora : v), .row_elems = k ? nope : lora,
                        .group_rows = k ? lora : v, .group_stride = per * lora,
                        .row_stride = k ? 1 : lora, .offset = k ? 0 : nope * lora,
                        .col_stride = k ? lora : 1};
        hf_status status = append_part(c, &t, name, "attn_kv_b.weight",
                                       k ? "attn_k_b.weight" : "attn_v_b.weight");
        if (status != HF_OK)
            return status;
    }
    return HF_OK;
}

/*
 * Qwen2.5-VL's fused tower tensors split as ollama's converter splits them, each part a
 * strided view of src: the patch kernel ([width, channels, 2, patch, patch], its two
 * temporal slices) as patch_embd_0 and patch_embd_1, and a block's attn_qkv (weight
 * [3 width, width] or bias [3 width]) as attn_q, attn_k and attn_v (Qwen3-VL's too).
 */
static hf_status add_qwen25vl_split(converter *c, const safetensors_tensor *src,
                                    const char *name)
{
    uint64_t width = c->p.vision.n_embd;
    bool patch = !strcmp(name, "v.patch_embd.weight"), bias = ends_with(name, ".bias");
    bool fits = patch ? src->n_dims == 5 && src->shape[0] == width && src->shape[2] == 2 &&
                            src->shape[3] == c->p.vision.patch_size &&
                            src->shape[4] == c->p.vision.patch_size &&
                            src->shape[1] == c->p.vision.n_channels
                      : src->n_dims == (bias ? 1u : 2u) && src->shape[0] == 3 * width &&
                            (bias || src->shape[1] == width);
    if (!fits) {
        corral_error_set(c->err, "tensor '%.200s' is not %s (config.json's vision_config)",
                         src->name, patch ? "[hidden_size, channels, 2, patch_size, patch_size]"
                                    : bias ? "[3 hidden_size]"
                                           : "[3 hidden_size, hidden_size]");
        return HF_INVALID;
    }
    static const char *const qkv[] = {"attn_q", "attn_k", "attn_v"};
    for (uint64_t part = 0; part < (patch ? 2u : 3u); part++) {
        out_tensor t = {.src = src, .strided = true, .group_rows = 1, .col_stride = 1,
                        .type = bias ? TENSOR_TYPE_F32 : TENSOR_TYPE_F16};
        if (patch) { /* rows of patch x patch, one a channel of an output */
            uint64_t area = src->shape[3] * src->shape[4];
            t.n_dims = 4;
            t.ne[0] = (int64_t)src->shape[4];
            t.ne[1] = (int64_t)src->shape[3];
            t.ne[2] = (int64_t)src->shape[1];
            t.ne[3] = (int64_t)src->shape[0];
            t.n_rows = src->shape[0] * src->shape[1];
            t.row_elems = area;
            t.group_stride = 2 * area;
            t.offset = part * area;
            snprintf(t.name, sizeof t.name, "v.patch_embd_%u.weight", (unsigned)part);
        } else {
            t.n_dims = bias ? 1 : 2;
            t.ne[0] = (int64_t)width;
            t.ne[1] = bias ? 1 : (int64_t)width;
            t.ne[2] = t.ne[3] = 1;
            t.n_rows = bias ? 1 : width;
            t.row_elems = width;
            t.group_stride = width;
            t.offset = part * width * (bias ? 1 : width);
            snprintf(t.name, sizeof t.name, "%.*s%s%s",
                     (int)(strlen(name) - strlen(bias ? "attn_qkv.bias" : "attn_qkv.weight")),
                     name, qkv[part], bias ? ".bias" : ".weight");
        }
        if (find_tensor(c, t.name)) {
            corral_error_set(c->err, "tensor '%.200s' is in the checkpoint twice", src->name);
            return HF_INVALID;
        }
        hf_status status = append_tensor(c, &t);
        if (status != HF_OK)
            return status;
    }
    return HF_OK;
}

/*
 * Qwen3-VL's patch kernel ([width, channels, frames, patch, patch]) as ollama's file keeps
 * it: one Conv3D tensor, its outputs and channels in one dimension (ne [patch, patch,
 * frames, width x channels]), the checkpoint's bytes in their order.
 */
static hf_status add_conv3d_kernel(converter *c, const safetensors_tensor *src, out_tensor *t)
{
    const hf_vision *v = &c->p.vision;
    if (src->n_dims != 5 || src->shape[0] != v->n_embd || src->shape[1] != v->n_channels ||
        src->shape[2] != v->temporal_patch_size || src->shape[3] != v->patch_size ||
        src->shape[4] != v->patch_size) {
        corral_error_set(c->err, "tensor '%.200s' is not [hidden_size, in_channels, "
                         "temporal_patch_size, patch_size, patch_size] (config.json's "
                         "vision_config)", src->name);
        return HF_INVALID;
    }
    if (find_tensor(c, t->name)) {
        corral_error_set(c->err, "tensor '%.200s' is in the checkpoint twice", src->name);
        return HF_INVALID;
    }
    t->n_dims = 4;
    t->ne[0] = t->ne[1] = (int64_t)v->patch_size;
    t->ne[2] = (int64_t)v->temporal_patch_size;
    t->ne[3] = (int64_t)v->n_embd * v->n_channels;
    t->type = TENSOR_TYPE_F16; /* ollama keeps a vision tower F16 */
    return append_tensor(c, t);
}

/*
 * Gemma 4's and LFM2-VL's patch kernel: a linear layer over each patch's pixels ([hidden_size,
 * patch_size * patch_size * channels], a row's pixels by row, column, then channel) written as
 * ollama's converter writes it, the convolution kernel [hidden_size, channels, patch_size,
 * patch_size] (F16): output row (o, c, y) holds source elements
 * o * P * P * C + (y * P + x) * C + c.
 */
static hf_status add_patch_kernel(converter *c, const safetensors_tensor *src, out_tensor *t)
{
    const hf_vision *v = &c->p.vision;
    uint64_t side = v->patch_size, channels = v->n_channels;
    if (src->n_dims != 2 || src->shape[0] != v->n_embd ||
        src->shape[1] != side * side * channels) {
        corral_error_set(c->err, "tensor '%.200s' is not [hidden_size, patch_size * patch_size * "
                         "num_channels] (config.json's vision_config)", src->name);
        return HF_INVALID;
    }
    if (find_tensor(c, t->name)) {
        corral_error_set(c->err, "tensor '%.200s' is in the checkpoint twice", src->name);
        return HF_INVALID;
    }
    t->n_dims = 4;
    t->ne[0] = t->ne[1] = (int64_t)side;
    t->ne[2] = (int64_t)channels;
    t->ne[3] = (int64_t)v->n_embd;
    t->type = TENSOR_TYPE_F16; /* its convolution multiplies halves */
    t->strided = true;
    t->n_rows = v->n_embd * channels * side;
    t->row_elems = side;
    t->group_rows = channels * side;
    t->group_stride = side * side * channels;
    t->sub_rows = side;
    t->sub_stride = 1;
    t->row_stride = side * channels;
    t->col_stride = channels;
    return append_tensor(c, t);
}

/* Llama 3.2 Vision's one position gate g as ollama's file holds it: 1 - tanh(g) as
 * v.position_embd.gate, tanh(g) as v.tile_position_embd.gate. */
static hf_status add_mllama_position_gates(converter *c, out_tensor *t)
{
    if (t->src->n_elems != 1) {
        corral_error_set(c->err, "tensor '%.200s' is not one number", t->src->name);
        return HF_INVALID;
    }
    out_tensor tile = *t;
    t->op = ELEM_ONE_MINUS_TANH;
    snprintf(tile.name, sizeof tile.name, "v.tile_position_embd.gate");
    tile.op = ELEM_TANH;
    if (find_tensor(c, t->name) || find_tensor(c, tile.name)) {
        corral_error_set(c->err, "tensor '%.200s' is in the checkpoint twice", t->src->name);
        return HF_INVALID;
    }
    hf_status status = append_tensor(c, t);
    return status == HF_OK ? append_tensor(c, &tile) : status;
}

static hf_status add_tensor(converter *c, const safetensors_tensor *src)
{
    if (ends_with(src->name, ".rotary_emb.inv_freq") ||
        hf_family_skipped_tensor(&c->p, src->name))
        return HF_OK; /* recomputed from rope_theta, or a part the GGUF leaves out */
    if (src->dtype == SAFETENSORS_I64) {
        corral_error_set(c->err, "tensor '%.200s' is I64: only a BERT's position ids, which the "
                         "GGUF leaves out, are integers", src->name);
        return HF_INVALID;
    }
    unsigned layer, expert;
    const char *kind;
    gptoss_part part;
    bool down;
    if (c->p.arch->family == FAMILY_GPTOSS &&
        hf_family_parse_gptoss_experts(src->name, &layer, &part))
        return add_gptoss_experts(c, src, layer, part);
    if (c->p.n_expert && hf_family_parse_packed_experts(c->p.arch, src->name, &layer, &down))
        return add_packed_experts(c, src, layer, down);
    if (hf_embed_parse_nomic_experts(c->p.arch, src->name, &layer, &down))
        return add_nomic_experts(c, src, layer, down);
    if (src->dtype == SAFETENSORS_U8) {
        corral_error_set(c->err, "tensor '%.200s' is U8: only gpt-oss's MXFP4 experts "
                         "(*_blocks, *_scales) are bytes", src->name);
        return HF_INVALID;
    }
    if (hf_family_parse_expert(src->name, &layer, &expert, &kind))
        return add_expert(c, src, layer, expert, kind);
    char stack[GGUF_MAX_NAME_BYTES + 1];
    uint32_t index, count;
    if (hf_family_parse_stacked(&c->p, src->name, stack, sizeof stack, &index, &count)) {
        if (index >= count || src->n_dims != 2 || src->shape[0] != c->p.n_embd ||
            src->shape[1] != c->p.n_embd) {
            corral_error_set(c->err, "tensor '%.200s' is not one of %u [hidden_size, "
                             "hidden_size] matrices (config.json's)", src->name, count);
            return HF_INVALID;
        }
        return add_to_stack(c, src, stack, index, count);
    }
    out_tensor t = {.src = src};
    hf_family_rename(c->p.arch, src->name, t.name, sizeof t.name);
    if (!hf_family_known_tensor(&c->p, t.name)) {
        corral_error_set(c->err, "tensor '%.200s' is not one of a %s's that Corral converts",
                         src->name, c->p.arch->hf_name);
        return HF_INVALID;
    }
    bool qwen3vl = hf_family_is_qwen3vl(c->p.arch);
    if ((hf_family_is_qwen25vl(c->p.arch) &&
         (!strcmp(t.name, "v.patch_embd.weight") ||
          (!strncmp(t.name, "v.", 2) && strstr(t.name, ".attn_qkv.")))) ||
        (qwen3vl && !strncmp(t.name, "v.", 2) && strstr(t.name, ".attn_qkv.")))
        return add_qwen25vl_split(c, src, t.name);
    if (qwen3vl && !strcmp(t.name, "v.patch_embed.weight"))
        return add_conv3d_kernel(c, src, &t);
    if (!strcmp(t.name, "v.patch_embd.weight") &&
        (hf_family_is_gemma4(c->p.arch) || (hf_lfm2_is_vl(c->p.arch) && src->n_dims == 2)))
        return add_patch_kernel(c, src, &t); /* LFM2-VL's as a convolution kernel is kept */
    if (hf_family_is_glmocr(c->p.arch) && !strcmp(t.name, "v.patch_embd.weight")) {
        if (src->n_dims == 5) /* its two temporal slices apart */
            return add_qwen25vl_split(c, src, t.name);
        snprintf(t.name, sizeof t.name, "v.patch_embd_0.weight"); /* one slice already */
    }
    if (src->n_dims > 4) {
        corral_error_set(c->err, "tensor '%.200s' has %u dimensions", src->name, src->n_dims);
        return HF_INVALID;
    }
    if (find_tensor(c, t.name)) {
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
    if (hf_family_is_qwen3next(c->p.arch) && ends_with(t.name, ".ssm_in.weight"))
        return add_qkvz(c, src, t.name);
    if (hf_deepseek2_splits_kv_b(c->p.arch) && ends_with(t.name, ".attn_kv_b.weight"))
        return add_kv_b(c, src, t.name);
    bool conv = ends_with(t.name, ".ssm_conv1d.weight") ||
                ends_with(t.name, ".shortconv.conv.weight") || /* Qwen 3.5's, LFM2's */
                (!strncmp(t.name, "a.blk.", 6) && ends_with(t.name, ".conv_dw.weight"));
    /* Gemma 4's audio subsampling kernels: ollama's converter keeps them F32 */
    bool audio_conv = !strncmp(t.name, "a.conv1d.", 9);
    if (conv && !(src->n_dims == 3 && src->shape[1] == 1)) {
        corral_error_set(c->err, "tensor '%.200s' is not [channels, 1, kernel]", src->name);
        return HF_INVALID;
    }
    if (ends_with(t.name, ".ffn_gate_inp_shexp.weight") && src->n_dims == 2 &&
        src->shape[0] == 1) { /* [1, n_embd] squeezed, as the GGUF holds one row */
        t.n_dims = 1;
        t.ne[1] = 1;
    }
    if (conv) { /* squeezed to [channels, kernel] */
        t.n_dims = 2;
        t.ne[1] = t.ne[2];
        t.ne[2] = 1;
    }
    if (hf_family_v_order(&c->p, t.name, &t.v_order)) {
        uint64_t size = src->n_dims == 0        ? 0
                        : t.v_order.columns ? src->shape[src->n_dims - 1]
                                            : src->shape[0];
        if (size != t.v_order.size) {
            corral_error_set(c->err, "tensor '%.200s' has %llu %s where config.json's linear "
                             "attention makes %llu", src->name,
                             (unsigned long long)size,
                             t.v_order.columns ? "columns" : "rows",
                             (unsigned long long)t.v_order.size);
            return HF_INVALID;
        }
        t.v_reordered = true;
        t.key_heads = c->p.key_heads;
        t.per_key = c->p.value_heads / c->p.key_heads;
    }
    /* ollama keeps a vision tower F16 (DeepSeek-OCR's SAM under "s." too), and Gemma 4's
     * audio projectors */
    bool tower = strncmp(t.name, "v.", 2) == 0 || strncmp(t.name, "s.", 2) == 0;
    bool f16_only = tower || strncmp(t.name, "mm.a.", 5) == 0;
    /* the position tables ollama's converter keeps F32 (Llama 4's, Llama 3.2 Vision's,
     * DeepSeek-OCR's SAM) */
    static const char *const f32_tables[] = {
        "v.positional_embedding_vlm",     "v.position_embd.weight",
        "v.tile_position_embd.weight",    "v.pre_tile_position_embd.weight",
        "v.post_tile_position_embd.weight", "s.position_embd"};
    /* and SAM's relative position tables */
    bool f32_table = ends_with(t.name, ".rel_pos_h") || ends_with(t.name, ".rel_pos_w");
    for (size_t i = 0; i < sizeof f32_tables / sizeof f32_tables[0]; i++)
        f32_table = f32_table || !strcmp(t.name, f32_tables[i]);
    if (t.n_dims == 1 || ends_with(t.name, ".bias") || ends_with(t.name, ".ffn_gate_inp.weight") ||
        conv || audio_conv || f32_table || ends_with(t.name, "_norm.weight") ||
        !strcmp(t.name, "token_types.weight"))
        t.type = TENSOR_TYPE_F32; /* a router's few columns decide which experts run; llama.cpp
                                   * keeps a convolution's few taps F32; the engine reads a
                                   * norm's rows (Command R+'s per head) and BERT's two segment
                                   * vectors as F32 */
    else
        t.type = src->dtype == SAFETENSORS_BF16 && !f16_only ? TENSOR_TYPE_BF16 : TENSOR_TYPE_F16;
    c->any_bf16 = c->any_bf16 || t.type == TENSOR_TYPE_BF16;
    bool mllama = hf_family_is_mllama(c->p.arch);
    bool q = ends_with(t.name, ".attn_q.weight") ||
             (mllama && ends_with(t.name, ".cross_attn_q_proj.weight"));
    bool k = ends_with(t.name, ".attn_k.weight") ||
             (mllama && ends_with(t.name, ".cross_attn_k_proj.weight"));
    if (mllama && tower && (ends_with(t.name, "_gate") || ends_with(t.name, ".gate")))
        t.op = ELEM_TANH; /* ollama's file holds the gates tanh'd */
    if (mllama && !strcmp(t.name, "v.position_embd.gate"))
        return add_mllama_position_gates(c, &t);
    if (hf_family_adds_one(c->p.arch, t.name))
        t.op = ELEM_ADD_ONE;
    if (hf_family_is_gemma4(c->p.arch) && hf_gemma4_softplus(src->name))
        t.op = ELEM_SOFTPLUS;
    uint32_t neox = hf_family_is_glmocr(c->p.arch) ? hf_glmocr_neox_dims(&c->p) : 0;
    if (neox && !tower && !strncmp(t.name, "blk.", 4) &&
        (strstr(t.name, ".attn_q.") || strstr(t.name, ".attn_k."))) {
        uint64_t size = src->n_dims ? src->shape[0] : 0;
        if (size == 0 || size % c->p.head_dim || c->p.head_dim < neox) {
            corral_error_set(c->err, "tensor '%.200s': %llu rows do not split into heads of %u",
                             src->name, (unsigned long long)size, c->p.head_dim);
            return HF_INVALID;
        }
        t.neox_head = c->p.head_dim;
        t.neox_rot = neox;
    }
    if ((c->p.arch->family == FAMILY_QWEN35 || hf_family_is_nemotron_h(c->p.arch)) &&
        ends_with(t.name, ".ssm_a"))
        t.op = ELEM_NEG_EXP;
    if ((t.clamp = hf_family_clamp(&c->p, t.name)) > 0)
        t.op = ELEM_CLAMP;
    if (hf_family_is_nemotron_h(c->p.arch)) { /* its vectors' GGUF shapes, their type kept */
        hf_nemotron_h_reshape(&c->p, t.name, &t.n_dims, t.ne);
        hf_nemotron_h_ffn_seen(&c->p, t.name, src->n_dims == 2 ? src->shape[0] : 0);
    }
    /* a pixtral tower's Q and K keep Hugging Face's order, as in ollama's file; Llama 3.2
     * Vision's tower's are permuted as Llama's and then transposed, as ollama's converter
     * writes them */
    bool mllama_tower = mllama && tower;
    if ((c->p.arch->family == FAMILY_LLAMA || mllama) && (!tower || mllama_tower) && (q || k)) {
        uint32_t heads = mllama_tower ? c->p.vision.n_head : q ? c->p.n_head : c->p.n_head_kv;
        uint64_t rows = src->n_dims == 2 ? src->shape[0] : 0;
        if (rows == 0 || rows % heads || (rows / heads) % 2) {
            corral_error_set(c->err, "tensor '%.200s': %llu rows do not split into %u heads of "
                             "an even size", src->name, (unsigned long long)rows, heads);
            return HF_INVALID;
        }
        if (mllama_tower && src->shape[1] != rows) {
            corral_error_set(c->err, "tensor '%.200s' is not square", src->name);
            return HF_INVALID;
        }
        t.permute_heads = heads;
        t.transposed = mllama_tower;
    }
    return append_tensor(c, &t);
}

/*
 * EmbeddingGemma's projections: each Dense module's model.safetensors holds linear.weight,
 * [out_features, in_features], written as dense_2.weight and dense_3.weight.
 */
static hf_status add_dense_modules(converter *c)
{
    for (unsigned i = 0; i < 2; i++) {
        const char *name = c->modules.dense_weights[i];
        if (!name[0])
            continue;
        const hf_file *f = find_file(c, name);
        if (!f) {
            corral_error_set(c->err, "the checkpoint has no %s", name);
            return HF_INVALID;
        }
        corral_error why;
        safetensors_file *st = safetensors_open(f->path, &why);
        if (!st) {
            corral_error_set(c->err, "%s: cannot be read as safetensors", name);
            return HF_INVALID;
        }
        c->shards[c->n_shards++] = st;
        const safetensors_tensor *src = safetensors_find(st, "linear.weight");
        if (!src || src->n_dims != 2 || src->shape[0] != c->p.dense_out[i] ||
            src->shape[1] != c->p.dense_in[i] || src->dtype == SAFETENSORS_U8 ||
            src->dtype == SAFETENSORS_I64) {
            corral_error_set(c->err, "%s: linear.weight must be a [%u, %u] matrix (its "
                             "config.json's out_features and in_features)", name,
                             c->p.dense_out[i], c->p.dense_in[i]);
            return HF_INVALID;
        }
        out_tensor t = {.src = src, .n_dims = 2,
                        .ne = {(int64_t)src->shape[1], (int64_t)src->shape[0], 1, 1},
                        .type = src->dtype == SAFETENSORS_BF16 ? TENSOR_TYPE_BF16
                                                               : TENSOR_TYPE_F16};
        snprintf(t.name, sizeof t.name, "dense_%u.weight", i + 2);
        c->any_bf16 = c->any_bf16 || t.type == TENSOR_TYPE_BF16;
        hf_status status = append_tensor(c, &t);
        if (status != HF_OK)
            return status;
    }
    return HF_OK;
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
        status = add_dense_modules(c);
    if (status == HF_OK)
        status = check_experts(c);
    if (status == HF_OK && c->n_tensors == 0) {
        corral_error_set(c->err, "the checkpoint has no tensors (no *.safetensors files)");
        status = HF_INVALID;
    }
    return status;
}

/* ---- writing ---- */

static float element_f32(const uint8_t *src, safetensors_dtype dtype, size_t i)
{
    uint16_t h;
    float f;
    switch (dtype) {
    case SAFETENSORS_F32: memcpy(&f, src + 4 * i, 4); return f;
    case SAFETENSORS_F16: memcpy(&h, src + 2 * i, 2); return quant_f16_to_f32(h);
    case SAFETENSORS_BF16: memcpy(&h, src + 2 * i, 2); return quant_bf16_to_f32(h);
    case SAFETENSORS_U8: /* MXFP4 bytes: repacked, never read as numbers */
    case SAFETENSORS_I64: break; /* refused unless left out */
    }
    return 0;
}

/* n elements of src into dst in the output type, op applied (clamp: ELEM_CLAMP's bound). */
static void convert_elements(const uint8_t *src, safetensors_dtype dtype, uint32_t type,
                             elem_op op, float clamp, uint8_t *dst, size_t n)
{
    bool same = (dtype == SAFETENSORS_F32 && type == TENSOR_TYPE_F32) ||
                (dtype == SAFETENSORS_F16 && type == TENSOR_TYPE_F16) ||
                (dtype == SAFETENSORS_BF16 && type == TENSOR_TYPE_BF16);
    if (same && op == ELEM_AS_IS) {
        memcpy(dst, src, n * safetensors_dtype_size(dtype));
        return;
    }
    for (size_t i = 0; i < n; i++) {
        float f = element_f32(src, dtype, i);
        if (op == ELEM_ADD_ONE)
            f += 1.0f;
        else if (op == ELEM_NEG_EXP)
            f = -(float)exp((double)f);
        else if (op == ELEM_CLAMP)
            f = f > clamp ? clamp : f < -clamp ? -clamp : f;
        else if (op == ELEM_TANH)
            f = (float)tanh((double)f);
        else if (op == ELEM_ONE_MINUS_TANH)
            f = (float)(1.0 - tanh((double)f));
        else if (op == ELEM_SOFTPLUS)
            f = (float)log(1.0 + exp((double)f));
        if (type == TENSOR_TYPE_F32) {
            memcpy(dst + 4 * i, &f, 4);
        } else {
            uint16_t h = type == TENSOR_TYPE_F16 ? quant_f32_to_f16(f) : quant_f32_to_bf16(f);
            memcpy(dst + 2 * i, &h, 2);
        }
    }
}

/*
 * The source row (column) of output row (column) i of a tensor whose value heads are tiled
 * (see hf_v_order): the output's value head v * key_heads + k is the source's k * per_key + v.
 */
static uint64_t v_source(const out_tensor *t, uint64_t i)
{
    const hf_v_order *o = &t->v_order;
    uint64_t n_heads = (uint64_t)t->key_heads * t->per_key;
    if (i < o->first || i >= o->first + n_heads * o->head_size)
        return i;
    uint64_t head = (i - o->first) / o->head_size, within = (i - o->first) % o->head_size;
    uint64_t v = head / t->key_heads, k = head % t->key_heads;
    return o->first + (k * t->per_key + v) * o->head_size + within;
}

/* GLM-OCR's permuted q/k: the source of output row (or a bias's element) i (see out_tensor). */
static uint64_t neox_source(const out_tensor *t, uint64_t i)
{
    uint64_t j = i % t->neox_head, half = t->neox_rot / 2;
    if (j >= t->neox_rot)
        return i;
    return i - j + (j < half ? 2 * j : 2 * (j - half) + 1);
}

/*
 * The row of Qwen3-Next's in_proj_qkvz (per key head: q, k, then the head's value heads' v,
 * then their z; each key head group rows) that row r of attn_qkv or attn_gate is.
 */
static uint64_t qkvz_source(const out_tensor *t, uint64_t r)
{
    uint64_t group = 2 * t->head_q + 2 * t->head_v, qk = t->key_heads * t->head_q;
    if (t->qkvz == QKVZ_Z)
        return r / t->head_v * group + 2 * t->head_q + t->head_v + r % t->head_v;
    if (r < 2 * qk) /* q's heads, then k's */
        return r % qk / t->head_q * group + (r >= qk ? t->head_q : 0) + r % t->head_q;
    r -= 2 * qk;
    return r / t->head_v * group + 2 * t->head_q + r % t->head_v;
}

/*
 * The source row of output row r. Hugging Face keeps each head's rotated halves apart
 * (first half of the head dimension, then the second); GGUF's llama pairs them up, so
 * output row 2i+s of a head is its source row s*D/2 + i.
 */
static uint64_t source_row(const out_tensor *t, uint64_t rows, uint64_t r)
{
    if (t->neox_head)
        return neox_source(t, r);
    if (t->qkvz)
        return qkvz_source(t, r);
    if (t->v_reordered && !t->v_order.columns)
        return v_source(t, r);
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
    if (t->qkvz)
        return t->qkvz_rows;
    if (t->strided)
        return t->n_rows;
    return source_rows(t) * (t->n_experts ? t->n_experts : 1);
}

/* Bytes of one output element (of one MXFP4 block: its scale and 16 bytes of pairs). */
static size_t output_elem_bytes(const out_tensor *t)
{
    return t->type == TENSOR_TYPE_MXFP4 ? 17 : t->type == TENSOR_TYPE_F32 ? 4 : 2;
}

static uint64_t output_row_bytes(const out_tensor *t)
{
    if (t->strided)
        return t->row_elems * output_elem_bytes(t);
    return t->src->n_elems / source_rows(t) * output_elem_bytes(t);
}

/*
 * An MXFP4 block's 32 E2M1 values from Hugging Face's order (byte k: elements 2k in its low
 * nibble, 2k + 1 in its high one) into ggml's (byte k: elements k and k + 16).
 */
static void mxfp4_to_ggml_order(const uint8_t in[16], uint8_t out[16])
{
    for (int k = 0; k < 16; k++) {
        int hi = k + 16;
        uint8_t low = (uint8_t)((in[k / 2] >> (4 * (k % 2))) & 0x0f);
        uint8_t high = (uint8_t)((in[hi / 2] >> (4 * (hi % 2))) & 0x0f);
        out[k] = (uint8_t)(low | high << 4);
    }
}

/* Output rows [from, to) of a strided view (see out_tensor). */
static bool write_strided_rows(converter *c, const out_tensor *t, uint64_t from, uint64_t to)
{
    bool mx = t->type == TENSOR_TYPE_MXFP4;
    size_t out_size = output_elem_bytes(t), in_size = safetensors_dtype_size(t->src->dtype);
    uint64_t piece = CHUNK_BYTES / out_size;
    for (uint64_t r = from; r < to; r++) {
        uint64_t j = r % t->group_rows;
        uint64_t base = (r / t->group_rows) * t->group_stride + t->offset +
                        (t->sub_rows ? (j / t->sub_rows) * t->sub_stride +
                                           (j % t->sub_rows) * t->row_stride
                                     : j * t->row_stride);
        for (uint64_t at = 0; at < t->row_elems; at += piece) {
            size_t n = (size_t)(t->row_elems - at < piece ? t->row_elems - at : piece);
            for (size_t k = 0; k < n; k++) {
                uint64_t i = base + (at + k) * t->col_stride;
                uint8_t *dst = c->buf + k * out_size;
                if (mx) {
                    dst[0] = t->scales->data[i];
                    mxfp4_to_ggml_order(t->src->data + 16 * i, dst + 1);
                } else {
                    convert_elements(t->src->data + i * in_size, t->src->dtype, t->type,
                                     ELEM_AS_IS, 0, dst, 1);
                }
            }
            if (!gguf_writer_write_tensor(c->writer, c->buf, n * out_size, c->err))
                return false;
        }
    }
    c->bytes_done += (to - from) * t->row_elems * out_size;
    return true;
}

/* Output rows [from, to) of a tensor from the checkpoint. */
static bool write_rows(converter *c, const out_tensor *t, uint64_t from, uint64_t to)
{
    if (t->strided)
        return write_strided_rows(c, t, from, to);
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
            if (t->v_reordered && t->v_order.columns)
                for (size_t k = 0; k < n; k++)
                    convert_elements(row + v_source(t, at + k) * in_size, s->dtype, t->type,
                                     t->op, t->clamp, c->buf + k * out_size, 1);
            else if (t->neox_head && rows == 1) /* a bias: its elements permuted */
                for (size_t k = 0; k < n; k++)
                    convert_elements(row + neox_source(t, at + k) * in_size, s->dtype, t->type,
                                     t->op, t->clamp, c->buf + k * out_size, 1);
            else if (t->transposed) /* element k: column r of the permuted source's row k */
                for (size_t k = 0; k < n; k++)
                    convert_elements(s->data + (source_row(t, rows, at + k) * row_elems + r) *
                                                   in_size,
                                     s->dtype, t->type, t->op, t->clamp, c->buf + k * out_size, 1);
            else
                convert_elements(row + at * in_size, s->dtype, t->type, t->op, t->clamp, c->buf,
                                 n);
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
    free(c->index);
    for (size_t i = 0; i < c->n_extras; i++)
        free(c->extras[i].data);
    hf_family_params_free(&c->p);
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
        status = hf_family_rope_tensors(c->config, &c->p, c->extras, &c->n_extras, c->err);
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
    bool ok = hf_family_write_keys(&c->p, hf_vocab_count(c->vocab), c->any_bf16, c->writer,
                                   err) &&
              hf_vocab_write(c->vocab, c->writer, err);
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
        const hf_extra_tensor *e = &c->extras[c->next_extra];
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

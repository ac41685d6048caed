/*
 * Quantizing a model file (quantize_model.h, corral/engine.h): llama.cpp's recipes and
 * per-tensor type rules, as in the copy ollama vendors, then a streaming rewrite of an
 * F32/F16/BF16 GGUF (its MXFP4 tensors copied) with llama.cpp's tensor order and metadata
 * order. Tensors are read slice by slice from the source's map, so memory stays at one slice
 * whatever the model's size. The
 * quantizers are the engine's, bit-exact with ggml's quantize_row_*_ref, which is what
 * llama.cpp uses when it has no importance matrix.
 */
#include "quantize_model.h"

#include <assert.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "corral/engine.h"
#include "gguf.h"
#include "quant.h"
#include "tensor_type.h"
#include "threadpool.h"
#include "util/checked.h"

/* ---- recipes ---- */

enum {
    FTYPE_Q4_K_S = 14,
    FTYPE_Q4_K_M = 15,
    FTYPE_Q5_K_M = 17,
    QUANTIZATION_VERSION = 2, /* ggml's GGML_QNT_VERSION: general.quantization_version */
};

static const quant_recipe recipes[] = {
    {"Q4_0", 2, TENSOR_TYPE_Q4_0},
    {"Q4_K_M", FTYPE_Q4_K_M, TENSOR_TYPE_Q4_K},
    {"Q4_K_S", FTYPE_Q4_K_S, TENSOR_TYPE_Q4_K},
    {"Q5_K_M", FTYPE_Q5_K_M, TENSOR_TYPE_Q5_K},
    {"Q6_K", 18, TENSOR_TYPE_Q6_K},
    {"Q8_0", 7, TENSOR_TYPE_Q8_0},
};

const quant_recipe *quant_recipe_find(const char *name)
{
    if (strcasecmp(name, "Q4_K") == 0)
        name = "Q4_K_M";
    else if (strcasecmp(name, "Q5_K") == 0)
        name = "Q5_K_M";
    for (size_t i = 0; i < sizeof recipes / sizeof recipes[0]; i++)
        if (strcasecmp(recipes[i].name, name) == 0)
            return &recipes[i];
    return NULL;
}

const char *corral_quantize_level(const char *name)
{
    const quant_recipe *recipe = quant_recipe_find(name);
    return recipe ? recipe->name : NULL;
}

/* ---- llama.cpp's tensor order ---- */

typedef struct order_entry {
    const char *name;
    int layer; /* N of "blk.N.", -1 outside the blocks */
    size_t index;
} order_entry;

static int layer_of(const char *name)
{
    if (strncmp(name, "blk.", 4) != 0 || name[4] < '0' || name[4] > '9')
        return -1;
    long layer = 0;
    for (const char *p = name + 4; *p >= '0' && *p <= '9'; p++)
        if ((layer = layer * 10 + (*p - '0')) > INT_MAX)
            return -1;
    return (int)layer;
}

static int compare_entries(const void *a, const void *b)
{
    const order_entry *x = a, *y = b;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* order[k] = the index of the k-th tensor in llama.cpp's order; malloc'ed. */
static size_t *sorted_order(const quant_tensor_desc *tensors, size_t n, corral_error *err)
{
    order_entry *entries = calloc(n ? n : 1, sizeof *entries);
    size_t *order = calloc(n ? n : 1, sizeof *order);
    if (!entries || !order) {
        free(entries);
        free(order);
        corral_error_set(err, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        entries[i] = (order_entry){tensors[i].name, layer_of(tensors[i].name), i};
    qsort(entries, n, sizeof *entries, compare_entries);
    for (size_t k = 0; k < n; k++)
        order[k] = entries[k].index;
    free(entries);
    return order;
}

/* ---- llama.cpp's per-tensor type choice ---- */

/* ggml_n_dims: the stored dimensions without trailing 1s (at least 1). */
static uint32_t n_dims_of(const int64_t ne[4])
{
    for (uint32_t d = 3; d > 0; d--)
        if (ne[d] > 1)
            return d + 1;
    return 1;
}

/* Name parts of the small or special 2-D weights llama.cpp leaves in their type. */
static const char *const kept_parts[] = {
    "_norm.weight", "ffn_gate_inp.weight", "altup", "laurel", "per_layer_model_proj",
    "ssm_conv1d.weight", "shortconv.conv.weight", "time_mix_first.weight",
    "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_v0.weight",
    "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight",
    "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight",
    "time_mix_decay_w1.weight", "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight",
    "attn_rel_b.weight", ".position_embd.",
};

static bool allows_quantization(const quant_tensor_desc *t)
{
    size_t len = strlen(t->name);
    if (len < 6 || strcmp(t->name + len - 6, "weight") != 0 || n_dims_of(t->ne) < 2 ||
        strcmp(t->name, "position_embd.weight") == 0 || strcmp(t->name, "token_types.weight") == 0)
        return false;
    for (size_t i = 0; i < sizeof kept_parts / sizeof kept_parts[0]; i++)
        if (strstr(t->name, kept_parts[i]))
            return false;
    return true;
}

/* llama.cpp's quantize_state_impl: what it counts as it walks the tensors. */
typedef struct rule_state {
    uint32_t ftype;
    const quant_model_desc *model;
    bool falcon;
    bool is_70b;     /* llama.cpp's LLM_TYPE_70B, for the archs Corral knows */
    bool has_output; /* false: token_embd doubles as the output and is treated like it */
    int n_attention_wv, i_attention_wv;
    int i_ffn_down, i_ffn_gate, i_ffn_up;
} rule_state;

static bool use_more_bits(int i_layer, int n_layers)
{
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 ||
           (i_layer - n_layers / 8) % 3 == 2;
}

/* The layer a counted tensor belongs to: the counter, or for MoE models its name. */
static bool layer_info(const rule_state *s, int counter, const char *name, int *i_layer,
                       corral_error *err)
{
    *i_layer = counter;
    if (s->model->n_expert <= 1)
        return true;
    *i_layer = layer_of(name);
    if (*i_layer < 0 || *i_layer >= (int)s->model->n_layer) {
        corral_error_set(err, "tensor '%s': cannot tell which of the %u layers it belongs to",
                         name, s->model->n_layer);
        return false;
    }
    return true;
}

static uint32_t block_elems(uint32_t type)
{
    return tensor_type_get(type)->block_elems;
}

/* The output tensor (and a tied token_embd): Q6_K unless the recipe is Q8_0. */
static uint32_t output_type(const rule_state *s, uint32_t type, int64_t row_len)
{
    if (s->falcon || row_len % block_elems(type) != 0)
        return TENSOR_TYPE_Q8_0;
    return type == TENSOR_TYPE_Q8_0 ? TENSOR_TYPE_Q8_0 : TENSOR_TYPE_Q6_K;
}

static uint32_t attn_v_type(rule_state *s, uint32_t type)
{
    if ((s->ftype == FTYPE_Q4_K_M || s->ftype == FTYPE_Q5_K_M) &&
        use_more_bits(s->i_attention_wv, s->n_attention_wv))
        type = TENSOR_TYPE_Q6_K;
    else if (s->ftype == FTYPE_Q4_K_S && s->i_attention_wv < 4)
        type = TENSOR_TYPE_Q5_K;
    if (s->is_70b && (type == TENSOR_TYPE_Q3_K || type == TENSOR_TYPE_Q4_K))
        type = TENSOR_TYPE_Q5_K;
    if (s->model->n_expert == 8)
        type = TENSOR_TYPE_Q8_0;
    s->i_attention_wv++;
    return type;
}

static uint32_t ffn_down_type(const rule_state *s, uint32_t type, int i_layer)
{
    int n_layer = (int)s->model->n_layer;
    bool more_bits = use_more_bits(i_layer, n_layer);
    if (s->ftype == FTYPE_Q4_K_M) {
        if (s->falcon)
            return i_layer < n_layer / 16 ? TENSOR_TYPE_Q6_K
                   : more_bits           ? TENSOR_TYPE_Q5_K
                                         : TENSOR_TYPE_Q4_K;
        return more_bits ? TENSOR_TYPE_Q6_K : type;
    }
    if (s->ftype == FTYPE_Q5_K_M && more_bits)
        return TENSOR_TYPE_Q6_K;
    if (s->ftype == FTYPE_Q4_K_S && !s->falcon && i_layer < n_layer / 8)
        return TENSOR_TYPE_Q5_K;
    return type;
}

/*
 * A row length the type's blocks do not divide: llama.cpp's fallback from a 256-element type
 * to a 32-element one (Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0), and to F16 when that does not
 * divide it either, or when the type already has 32-element blocks (Q4_0, Q8_0): there is no
 * smaller block to go to.
 */
static uint32_t fallback_type(int64_t row_len, uint32_t type)
{
    if (row_len % block_elems(type) == 0)
        return type;
    switch (type) {
    case TENSOR_TYPE_Q4_K: type = TENSOR_TYPE_Q5_0; break;
    case TENSOR_TYPE_Q5_K: type = TENSOR_TYPE_Q5_1; break;
    case TENSOR_TYPE_Q6_K: type = TENSOR_TYPE_Q8_0; break;
    default:
        /* a recipe or rule that gives a 256-element type needs its fallback above */
        assert(block_elems(type) <= 32);
        break;
    }
    return row_len % block_elems(type) == 0 ? type : TENSOR_TYPE_F16;
}

/* llama_tensor_get_type for one quantizable tensor, visited in llama.cpp's order. */
static bool choose_type(rule_state *s, const quant_tensor_desc *t, uint32_t base,
                        uint32_t *type, corral_error *err)
{
    const char *name = t->name;
    int i_layer;
    *type = base;
    if (strcmp(name, "output.weight") == 0 ||
        (!s->has_output && strcmp(name, "token_embd.weight") == 0)) {
        *type = output_type(s, base, t->ne[0]);
    } else if (strcmp(name, "token_embd.weight") == 0 ||
               strcmp(name, "per_layer_token_embd.weight") == 0) {
        /* only the IQ and ternary recipes change token embeddings */
    } else if (strstr(name, "attn_v.weight")) {
        *type = attn_v_type(s, base);
    } else if (strstr(name, "attn_k.weight")) {
        if (s->model->n_expert == 8)
            *type = TENSOR_TYPE_Q8_0;
    } else if (strstr(name, "attn_q.weight")) {
        /* only the IQ3 recipes change attn_q */
    } else if (strstr(name, "ffn_down")) {
        if (!layer_info(s, s->i_ffn_down, name, &i_layer, err))
            return false;
        *type = ffn_down_type(s, base, i_layer);
        s->i_ffn_down++;
    } else if (strstr(name, "attn_output.weight")) {
        if (!s->falcon && s->model->n_expert == 8 &&
            (s->ftype == FTYPE_Q4_K_S || s->ftype == FTYPE_Q4_K_M))
            *type = TENSOR_TYPE_Q5_K;
    } else if (strstr(name, "attn_qkv.weight")) {
        if (s->ftype == FTYPE_Q4_K_M)
            *type = TENSOR_TYPE_Q5_K;
        else if (s->ftype == FTYPE_Q5_K_M)
            *type = TENSOR_TYPE_Q6_K;
    } else if (strstr(name, "ffn_gate")) {
        if (!layer_info(s, s->i_ffn_gate++, name, &i_layer, err))
            return false;
    } else if (strstr(name, "ffn_up")) {
        if (!layer_info(s, s->i_ffn_up++, name, &i_layer, err))
            return false;
    }
    *type = fallback_type(t->ne[0], *type);
    return true;
}

static void init_rule_state(rule_state *s, const quant_recipe *recipe,
                            const quant_model_desc *model, const quant_tensor_desc *tensors,
                            size_t n)
{
    *s = (rule_state){.ftype = recipe->file_type, .model = model};
    s->falcon = strcmp(model->arch, "falcon") == 0;
    s->is_70b = model->n_layer == 80 &&
                ((strcmp(model->arch, "llama") == 0 && model->n_expert == 0 &&
                  model->n_head != model->n_head_kv) ||
                 strcmp(model->arch, "qwen2") == 0);
    for (size_t i = 0; i < n; i++) {
        const char *name = tensors[i].name;
        if (strstr(name, "attn_v.weight") || strstr(name, "attn_qkv.weight") ||
            strstr(name, "attn_kv_b.weight"))
            s->n_attention_wv++;
        else if (strcmp(name, "output.weight") == 0)
            s->has_output = true;
    }
}

static bool choose_types_in_order(const quant_recipe *recipe, const quant_model_desc *model,
                                  const quant_tensor_desc *tensors, const size_t *order,
                                  size_t n, uint32_t *types, corral_error *err)
{
    rule_state s;
    init_rule_state(&s, recipe, model, tensors, n);
    for (size_t k = 0; k < n; k++) {
        const quant_tensor_desc *t = &tensors[order[k]];
        types[order[k]] = t->type;
        if (allows_quantization(t) &&
            !choose_type(&s, t, recipe->base_type, &types[order[k]], err))
            return false;
        /* counted as the same model in F16 would be, so that the others get the same types */
        if (t->type == TENSOR_TYPE_MXFP4)
            types[order[k]] = TENSOR_TYPE_MXFP4;
    }
    return true;
}

bool quant_choose_types(const quant_recipe *recipe, const quant_model_desc *model,
                        const quant_tensor_desc *tensors, size_t n, uint32_t *types,
                        corral_error *err)
{
    size_t *order = sorted_order(tensors, n, err);
    bool ok = order && choose_types_in_order(recipe, model, tensors, order, n, types, err);
    free(order);
    return ok;
}

/* ---- the file quantizer ---- */

/* Source bytes one step reads (at least one row): memory stays small, progress stays fine. */
#define STEP_SOURCE_BYTES ((size_t)16 << 20)

typedef struct quant_item {
    const gguf_tensor *src;
    uint32_t type;          /* the output's */
    size_t n_rows;          /* every dimension past the first */
    size_t src_row_bytes, dst_row_bytes;
    size_t rows_per_step;
} quant_item;

struct corral_quantizer {
    gguf_file *src;
    const quant_recipe *recipe;
    const char *source_type;
    quant_item *items;      /* in output order */
    size_t n_items;
    size_t max_row_elems;   /* of the tensors that are converted */
    threadpool *pool;
    float *scratch;         /* max_row_elems floats per thread */
    uint8_t *out;           /* one step's converted rows */
    gguf_writer *writer;
    size_t current, current_row;
    uint64_t bytes_done, bytes_total;
    bool finished;
};

static bool out_of_memory(corral_error *err)
{
    corral_error_set(err, "out of memory");
    return false;
}

/* An integer key "<arch>.<suffix>"; required or optional (then *out is left alone). */
static bool arch_u32(const gguf_file *f, const char *arch, const char *suffix, bool required,
                     uint32_t *out, corral_error *err)
{
    char key[256];
    if ((size_t)snprintf(key, sizeof key, "%s.%s", arch, suffix) >= sizeof key) {
        corral_error_set(err, "%s: architecture name '%.40s...' is too long", gguf_path(f), arch);
        return false;
    }
    return required ? gguf_get_u32(f, key, out, err) : gguf_get_u32_opt(f, key, out, err);
}

static bool describe_model(const gguf_file *f, char *arch, size_t arch_size,
                           quant_model_desc *model, corral_error *err)
{
    gguf_str name;
    if (!gguf_get_str(f, "general.architecture", &name, err))
        return false;
    if (name.size >= arch_size || memchr(name.data, '\0', name.size)) {
        corral_error_set(err, "%s: general.architecture is not a usable name", gguf_path(f));
        return false;
    }
    memcpy(arch, name.data, name.size);
    arch[name.size] = '\0';
    *model = (quant_model_desc){.arch = arch};
    uint32_t n_split = 1;
    if (!gguf_get_u32_opt(f, "split.count", &n_split, err))
        return false;
    if (n_split > 1) {
        corral_error_set(err, "%s is one part of a split GGUF: merge the parts before quantizing",
                         gguf_path(f));
        return false;
    }
    if (!arch_u32(f, arch, "block_count", true, &model->n_layer, err) ||
        !arch_u32(f, arch, "expert_count", false, &model->n_expert, err))
        return false;
    /* the head counts matter only to llama.cpp's 70B rule for llama */
    return model->n_layer != 80 || strcmp(arch, "llama") != 0 ||
           (arch_u32(f, arch, "attention.head_count", false, &model->n_head, err) &&
            arch_u32(f, arch, "attention.head_count_kv", false, &model->n_head_kv, err));
}

/*
 * Every tensor F32, F16 or BF16 (ollama refuses the rest), or MXFP4: gpt-oss's experts as
 * released, a 4-bit type already, kept as they are while the other tensors are quantized.
 * The source's name for messages.
 */
static bool check_source_types(corral_quantizer *q, corral_error *err)
{
    bool any_f16 = false, any_bf16 = false;
    for (size_t i = 0; i < gguf_n_tensors(q->src); i++) {
        const gguf_tensor *t = gguf_tensor_at(q->src, i);
        if (t->type != TENSOR_TYPE_F32 && t->type != TENSOR_TYPE_F16 &&
            t->type != TENSOR_TYPE_BF16 && t->type != TENSOR_TYPE_MXFP4) {
            corral_error_set(err, "quantization is only supported for F16, BF16 and F32 models: "
                                  "tensor '%s' is %s (only MXFP4 tensors are kept as they are)",
                             t->name, tensor_type_name(t->type));
            return false;
        }
        any_f16 |= t->type == TENSOR_TYPE_F16;
        any_bf16 |= t->type == TENSOR_TYPE_BF16;
    }
    q->source_type = any_bf16 ? "BF16" : any_f16 ? "F16" : "F32";
    return true;
}

static bool plan_item(corral_quantizer *q, quant_item *it, size_t *out_bytes,
                      corral_error *err)
{
    const gguf_tensor *t = it->src;
    size_t row_elems = (size_t)t->ne[0];
    it->n_rows = (size_t)(gguf_tensor_n_elems(t) / (uint64_t)t->ne[0]);
    if (!tensor_type_row_bytes(t->type, row_elems, &it->src_row_bytes) ||
        !tensor_type_row_bytes(it->type, row_elems, &it->dst_row_bytes)) {
        corral_error_set(err, "tensor '%s': rows of %zu elements do not fit type %s", t->name,
                         row_elems, tensor_type_name(it->type));
        return false;
    }
    it->rows_per_step = STEP_SOURCE_BYTES / it->src_row_bytes;
    if (it->rows_per_step == 0)
        it->rows_per_step = 1;
    if (it->rows_per_step > it->n_rows)
        it->rows_per_step = it->n_rows;
    if (it->type != t->type) {
        size_t bytes;
        if (!checked_mul_size(it->rows_per_step, it->dst_row_bytes, &bytes))
            return out_of_memory(err);
        *out_bytes = bytes > *out_bytes ? bytes : *out_bytes;
        q->max_row_elems = row_elems > q->max_row_elems ? row_elems : q->max_row_elems;
    }
    q->bytes_total += t->size_bytes;
    return true;
}

/* Each tensor's output type and place in the output, and the buffers a step needs. */
static bool plan(corral_quantizer *q, const quant_model_desc *model, int n_threads,
                 corral_error *err)
{
    size_t n = gguf_n_tensors(q->src);
    quant_tensor_desc *descs = calloc(n ? n : 1, sizeof *descs);
    uint32_t *types = calloc(n ? n : 1, sizeof *types);
    q->items = calloc(n ? n : 1, sizeof *q->items);
    if (!descs || !types || !q->items) {
        free(descs);
        free(types);
        return out_of_memory(err);
    }
    for (size_t i = 0; i < n; i++) {
        const gguf_tensor *t = gguf_tensor_at(q->src, i);
        descs[i] = (quant_tensor_desc){t->name, t->type, {t->ne[0], t->ne[1], t->ne[2], t->ne[3]}};
    }
    size_t *order = sorted_order(descs, n, err);
    bool ok = order && choose_types_in_order(q->recipe, model, descs, order, n, types, err);
    size_t out_bytes = 0;
    for (size_t k = 0; ok && k < n; k++) {
        q->items[k] = (quant_item){.src = gguf_tensor_at(q->src, order[k]), .type = types[order[k]]};
        ok = plan_item(q, &q->items[k], &out_bytes, err);
    }
    q->n_items = n;
    free(order);
    free(descs);
    free(types);
    if (!ok)
        return false;
    size_t n_pool = n_threads > 0 ? (size_t)n_threads : threadpool_physical_cores();
    size_t scratch_floats;
    if (!checked_mul_size(n_pool, q->max_row_elems ? q->max_row_elems : 1, &scratch_floats) ||
        !(q->scratch = malloc(scratch_floats * sizeof *q->scratch)) ||
        !(q->out = malloc(out_bytes ? out_bytes : 1)))
        return out_of_memory(err);
    return (q->pool = threadpool_create(n_pool, err)) != NULL;
}

corral_quantizer *corral_quantizer_open(const char *src_path, const char *level, int n_threads,
                                        corral_error *err)
{
    const quant_recipe *recipe = quant_recipe_find(level);
    if (!recipe) {
        corral_error_set(err, "unsupported quantization type %s - supported types are %s",
                         level, CORRAL_QUANTIZE_LEVELS);
        return NULL;
    }
    corral_quantizer *q = calloc(1, sizeof *q);
    if (!q) {
        out_of_memory(err);
        return NULL;
    }
    q->recipe = recipe;
    char arch[128];
    quant_model_desc model;
    if (!(q->src = gguf_open(src_path, err)) ||
        !describe_model(q->src, arch, sizeof arch, &model, err) ||
        !check_source_types(q, err) || !plan(q, &model, n_threads, err)) {
        corral_quantizer_free(q);
        return NULL;
    }
    return q;
}

void corral_quantizer_free(corral_quantizer *q)
{
    if (!q)
        return;
    gguf_writer_free(q->writer); /* removes the temporary file of an unfinished output */
    threadpool_free(q->pool);
    free(q->scratch);
    free(q->out);
    free(q->items);
    gguf_close(q->src);
    free(q);
}

const char *corral_quantizer_source_type(const corral_quantizer *q)
{
    return q->source_type;
}

uint64_t corral_quantizer_bytes_done(const corral_quantizer *q)
{
    return q->bytes_done;
}

uint64_t corral_quantizer_bytes_total(const corral_quantizer *q)
{
    return q->bytes_total;
}

/* The source's metadata in its order, less what llama.cpp drops or rewrites, then
 * general.quantization_version and general.file_type last, as llama.cpp appends them. */
static bool declare_metadata(corral_quantizer *q, corral_error *err)
{
    static const char *const replaced[] = {"general.quantization_version", "general.file_type",
                                           "split.no", "split.count", "split.tensors.count"};
    for (size_t i = 0; i < gguf_n_kv(q->src); i++) {
        const gguf_kv *kv = gguf_kv_at(q->src, i);
        bool skip = false;
        for (size_t r = 0; r < sizeof replaced / sizeof replaced[0]; r++)
            skip |= strcmp(kv->key, replaced[r]) == 0;
        if (!skip && !gguf_writer_copy_kv(q->writer, kv, err))
            return false;
    }
    return gguf_writer_add_u32(q->writer, "general.quantization_version", QUANTIZATION_VERSION,
                               err) &&
           gguf_writer_add_u32(q->writer, "general.file_type", q->recipe->file_type, err);
}

bool corral_quantizer_begin(corral_quantizer *q, const char *dst_path, corral_error *err)
{
    assert(!q->writer);
    if (!(q->writer = gguf_writer_create()))
        return out_of_memory(err);
    if (!declare_metadata(q, err))
        return false;
    for (size_t k = 0; k < q->n_items; k++) {
        const gguf_tensor *t = q->items[k].src;
        if (!gguf_writer_add_tensor(q->writer, t->name, q->items[k].type, n_dims_of(t->ne), t->ne,
                                    err))
            return false;
    }
    return gguf_writer_begin(q->writer, dst_path, err);
}

typedef struct slice_job {
    const quant_ops *from, *to;
    const uint8_t *src;
    uint8_t *dst;
    size_t row_elems, src_row_bytes, dst_row_bytes;
    float *scratch; /* row_elems floats per thread, max_row_elems apart */
    size_t scratch_stride;
} slice_job;

static void convert_row(void *arg, size_t row, size_t thread)
{
    const slice_job *job = arg;
    float *values = job->scratch + thread * job->scratch_stride;
    job->from->dequantize(job->src + row * job->src_row_bytes, values, job->row_elems);
    job->to->quantize(values, job->dst + row * job->dst_row_bytes, job->row_elems);
}

/* The next rows of the current tensor, converted or copied, into the output. */
static bool write_slice(corral_quantizer *q, corral_error *err)
{
    const quant_item *it = &q->items[q->current];
    size_t rows = it->n_rows - q->current_row;
    rows = rows < it->rows_per_step ? rows : it->rows_per_step;
    const uint8_t *src = (const uint8_t *)it->src->data + q->current_row * it->src_row_bytes;
    bool ok;
    if (it->type == it->src->type) {
        ok = gguf_writer_write_tensor(q->writer, src, rows * it->src_row_bytes, err);
    } else {
        slice_job job = {
            .from = quant_ops_active(it->src->type), .to = quant_ops_active(it->type),
            .src = src, .dst = q->out, .row_elems = (size_t)it->src->ne[0],
            .src_row_bytes = it->src_row_bytes, .dst_row_bytes = it->dst_row_bytes,
            .scratch = q->scratch, .scratch_stride = q->max_row_elems,
        };
        assert(job.from && job.from->dequantize && job.to && job.to->quantize);
        threadpool_run(q->pool, rows, convert_row, &job);
        ok = gguf_writer_write_tensor(q->writer, q->out, rows * it->dst_row_bytes, err);
    }
    if (!ok)
        return false;
    q->bytes_done += rows * it->src_row_bytes;
    q->current_row += rows;
    if (q->current_row == it->n_rows) {
        q->current++;
        q->current_row = 0;
    }
    return true;
}

bool corral_quantizer_step(corral_quantizer *q, bool *done, corral_error *err)
{
    assert(q->writer && !q->finished);
    if (q->current < q->n_items && !write_slice(q, err))
        return false;
    if (q->current == q->n_items) {
        if (!gguf_writer_finish(q->writer, err))
            return false;
        q->finished = true;
    }
    *done = q->finished;
    return true;
}

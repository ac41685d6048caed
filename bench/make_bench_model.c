/*
 * make_bench_model: writes a random-weight GGUF at a real model's shape for `corral bench`
 * (docs/PERFORMANCE.md), with the engine's own GGUF writer and reference quantizers. Shapes
 * L1B (Llama-3.2-1B), Q05B (Qwen2.5-0.5B, written as arch llama), MQA1B (a llama with
 * Gemma-3-1B's attention: 26 layers of 4 query heads of 256 sharing one KV head, n_ff 6912,
 * without its sliding windows, which a llama lacks) and A3B8L (Qwen3-30B-A3B's shape cut to
 * 8 layers: qwen3moe, 32 query heads of 128 on 4 KV heads, 128 experts of 768, 8 used per
 * token) and GOSS8L (gpt-oss-20b cut to 8 of its 24 layers: 64 query heads of 64 on 8 KV
 * heads with biases and sinks, a sliding window of 128 on every other layer, YaRN RoPE, 32
 * experts of 2880 with biases, 4 used, a 201088-token vocabulary); tensor types are those
 * llama-quantize's recipe for the level gives (src/engine/quantize_model.c decides them), or
 * for MXFP4_MOE what gpt-oss's published MXFP4 files hold: experts MXFP4, the other matrices
 * Q8_0, the router, biases, sinks and norms F32. The
 * same seed gives the same bytes. The tokenizer keys are copied from a vocabulary GGUF so that
 * any GGUF runtime loads the file; a shape with a larger vocabulary pads it with unused
 * tokens, so that token_embd and output have the real model's rows. A `bigram` model has its
 * attention and FFN outputs (attn_output, ffn_down, ffn_down_exps) all zero: every layer adds
 * nothing to the token's embedding, so the next token depends on the last one alone, and a
 * text that walks the model's own choices repeats itself where a real model would quote its
 * prompt (what speculative decoding by prompt lookup needs to be measured), at the full cost
 * of every weight read. A `peaked` model is for a draft model's speculation: a trained
 * model's logits are peaked, so a lower-bit copy of it mostly picks the same next token,
 * while random weights give nearly flat logits whose argmax any rounding flips. Each token
 * gets one favoured successor: output row j holds, beside its random values, a multiple of
 * token (j - PEAKED_STEP)'s embedding, so after token i the logit of i + PEAKED_STEP stands
 * out by a margin about the size of the random logits' spread; attn_output and ffn_down are
 * scaled down so the layers shift that margin a little, as context does, without drowning
 * the embedding. Where the margin is small, quantization noise picks another token: a Q4_0
 * copy of an F16 model agrees with it on most tokens but not all.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "corral/engine.h"
#include "gguf.h"
#include "quant.h"
#include "quantize_model.h"
#include "tensor_type.h"

/* Rows quantized per write, so memory stays small however large the tensor. */
enum { ROWS_PER_CHUNK = 64 };
enum { MAX_TENSORS = 4 + 12 * 64 }; /* a shape of up to 64 layers */

typedef struct model_shape {
    const char *name;
    uint32_t n_embd, n_layer, n_ff, n_head, n_head_kv, n_vocab, n_ctx_train;
    float rope_freq_base;
    /* a qwen3moe shape: its head width (key_length), and n_expert experts of n_ff each,
     * n_expert_used per token, in place of the dense FFN; 0 for a dense llama */
    uint32_t head_dim, n_expert, n_expert_used;
    /* a gpt-oss shape: the sliding window of its even layers (0 for the others) */
    uint32_t n_swa;
} model_shape;

static const model_shape shapes[] = {
    {"L1B", 2048, 16, 8192, 32, 8, 128256, 131072, 500000.0f, 0, 0, 0, 0},
    {"Q05B", 896, 24, 4864, 14, 2, 128256, 32768, 1000000.0f, 0, 0, 0, 0},
    {"MQA1B", 1024, 26, 6912, 4, 1, 128256, 32768, 1000000.0f, 0, 0, 0, 0},
    {"A3B8L", 2048, 8, 768, 32, 4, 128256, 40960, 1000000.0f, 128, 128, 8, 0},
    {"GOSS8L", 2880, 8, 2880, 64, 8, 201088, 131072, 150000.0f, 64, 32, 4, 128},
};

static const char *shape_arch(const model_shape *s)
{
    return s->n_swa ? "gpt-oss" : s->n_expert ? "qwen3moe" : "llama";
}

static uint32_t shape_head_dim(const model_shape *s)
{
    return s->head_dim ? s->head_dim : s->n_embd / s->n_head;
}

typedef struct tensor_plan {
    char name[64];
    uint32_t type;
    int64_t ne[3]; /* ne[0] is the row length; ne[1] == 1 for vectors; ne[2]: experts */
    bool is_norm;
    bool is_f32; /* a bias or gpt-oss's attention sinks: random values, kept in F32 */
} tensor_plan;

/* The tensors of a dense llama model, in creation order. */
static size_t plan_tensors(const model_shape *s, tensor_plan *plan)
{
    size_t n = 0;
    uint32_t head_dim = shape_head_dim(s);
    uint32_t q_width = head_dim * s->n_head, kv_width = head_dim * s->n_head_kv;
#define ADD(role, layer, cols, rows, norm) ADD3(role, layer, cols, rows, 1, norm)
#define ADD3(role, layer, cols, rows, mats, norm) ADDS(role, "weight", layer, cols, rows, mats, norm, false)
#define ADD_F32(role, suffix, layer, cols, rows) ADDS(role, suffix, layer, cols, rows, 1, false, true)
#define ADDS(role, suffix, layer, cols, rows, mats, norm, f32)                              \
    do {                                                                                    \
        tensor_plan *t = &plan[n++];                                                        \
        if ((layer) == UINT32_MAX)                                                          \
            snprintf(t->name, sizeof t->name, "%s.%s", role, suffix);                       \
        else                                                                                \
            snprintf(t->name, sizeof t->name, "blk.%u.%s.%s", (unsigned)(layer), role,      \
                     suffix);                                                               \
        t->ne[0] = (cols);                                                                  \
        t->ne[1] = (rows);                                                                  \
        t->ne[2] = (mats);                                                                  \
        t->is_norm = (norm);                                                                \
        t->is_f32 = (f32);                                                                  \
    } while (0)
    ADD("token_embd", UINT32_MAX, s->n_embd, s->n_vocab, false);
    for (uint32_t il = 0; s->n_swa && il < s->n_layer; il++) {
        ADD("attn_norm", il, s->n_embd, 1, true);
        ADD("attn_q", il, s->n_embd, q_width, false);
        ADD_F32("attn_q", "bias", il, q_width, 1);
        ADD("attn_k", il, s->n_embd, kv_width, false);
        ADD_F32("attn_k", "bias", il, kv_width, 1);
        ADD("attn_v", il, s->n_embd, kv_width, false);
        ADD_F32("attn_v", "bias", il, kv_width, 1);
        ADD("attn_output", il, q_width, s->n_embd, false);
        ADD_F32("attn_output", "bias", il, s->n_embd, 1);
        ADD_F32("attn_sinks", "weight", il, s->n_head, 1);
        ADD("post_attention_norm", il, s->n_embd, 1, true);
        ADD("ffn_gate_inp", il, s->n_embd, s->n_expert, false);
        ADD_F32("ffn_gate_inp", "bias", il, s->n_expert, 1);
        ADD3("ffn_gate_exps", il, s->n_embd, s->n_ff, s->n_expert, false);
        ADD_F32("ffn_gate_exps", "bias", il, s->n_ff, s->n_expert);
        ADD3("ffn_up_exps", il, s->n_embd, s->n_ff, s->n_expert, false);
        ADD_F32("ffn_up_exps", "bias", il, s->n_ff, s->n_expert);
        ADD3("ffn_down_exps", il, s->n_ff, s->n_embd, s->n_expert, false);
        ADD_F32("ffn_down_exps", "bias", il, s->n_embd, s->n_expert);
    }
    for (uint32_t il = 0; !s->n_swa && il < s->n_layer; il++) {
        ADD("attn_norm", il, s->n_embd, 1, true);
        ADD("attn_q", il, s->n_embd, q_width, false);
        ADD("attn_k", il, s->n_embd, kv_width, false);
        ADD("attn_v", il, s->n_embd, kv_width, false);
        ADD("attn_output", il, q_width, s->n_embd, false);
        ADD("ffn_norm", il, s->n_embd, 1, true);
        if (s->n_expert) {
            ADD("attn_q_norm", il, head_dim, 1, true);
            ADD("attn_k_norm", il, head_dim, 1, true);
            ADD("ffn_gate_inp", il, s->n_embd, s->n_expert, false);
            ADD3("ffn_gate_exps", il, s->n_embd, s->n_ff, s->n_expert, false);
            ADD3("ffn_up_exps", il, s->n_embd, s->n_ff, s->n_expert, false);
            ADD3("ffn_down_exps", il, s->n_ff, s->n_embd, s->n_expert, false);
            continue;
        }
        ADD("ffn_gate", il, s->n_embd, s->n_ff, false);
        ADD("ffn_up", il, s->n_embd, s->n_ff, false);
        ADD("ffn_down", il, s->n_ff, s->n_embd, false);
    }
    ADD("output_norm", UINT32_MAX, s->n_embd, 1, true);
    ADD("output", UINT32_MAX, s->n_embd, s->n_vocab, false);
#undef ADD
#undef ADD3
#undef ADD_F32
#undef ADDS
    return n;
}

/* Unquantized levels, as llama-quantize (or a converter) writes them: every matrix in the
 * level's type, the norms in F32. */
static const quant_recipe float_levels[] = {
    {"F32", 0, TENSOR_TYPE_F32},
    {"F16", 1, TENSOR_TYPE_F16},
    {"BF16", 32, TENSOR_TYPE_BF16},
};

/* llama-quantize's MXFP4_MOE (file type 38): the expert tensors MXFP4, every other matrix
 * Q8_0 but the router, which stays F32 as gpt-oss's converter leaves it. */
static const quant_recipe mxfp4_moe_level = {"MXFP4_MOE", 38, TENSOR_TYPE_MXFP4};

static const quant_recipe *level_find(const char *name)
{
    for (size_t i = 0; i < sizeof float_levels / sizeof float_levels[0]; i++)
        if (strcasecmp(float_levels[i].name, name) == 0)
            return &float_levels[i];
    if (strcasecmp(mxfp4_moe_level.name, name) == 0)
        return &mxfp4_moe_level;
    return quant_recipe_find(name);
}

static bool is_float_level(const quant_recipe *recipe)
{
    return recipe->base_type == TENSOR_TYPE_F32 || recipe->base_type == TENSOR_TYPE_F16 ||
           recipe->base_type == TENSOR_TYPE_BF16;
}

/* Each tensor's type: what llama.cpp's recipe makes of an F32 model of this shape. */
static bool choose_types(const model_shape *s, const quant_recipe *recipe, tensor_plan *plan,
                         size_t n, corral_error *err)
{
    if (is_float_level(recipe)) {
        for (size_t i = 0; i < n; i++)
            plan[i].type = plan[i].is_norm || plan[i].is_f32 ? TENSOR_TYPE_F32 : recipe->base_type;
        return true;
    }
    if (recipe == &mxfp4_moe_level) {
        for (size_t i = 0; i < n; i++)
            plan[i].type = plan[i].ne[2] > 1                   ? TENSOR_TYPE_MXFP4
                           : plan[i].is_norm || plan[i].is_f32 ? TENSOR_TYPE_F32
                           : strstr(plan[i].name, "ffn_gate_inp") ? TENSOR_TYPE_F32
                                                                  : TENSOR_TYPE_Q8_0;
        return true;
    }
    static quant_tensor_desc descs[MAX_TENSORS];
    static uint32_t types[MAX_TENSORS];
    for (size_t i = 0; i < n; i++)
        descs[i] = (quant_tensor_desc){plan[i].name, TENSOR_TYPE_F32,
                                       {plan[i].ne[0], plan[i].ne[1], plan[i].ne[2], 1}};
    quant_model_desc model = {.arch = shape_arch(s), .n_layer = s->n_layer, .n_head = s->n_head,
                              .n_head_kv = s->n_head_kv, .n_expert = s->n_expert};
    if (!quant_choose_types(recipe, &model, descs, n, types, err))
        return false;
    for (size_t i = 0; i < n; i++)
        plan[i].type = types[i];
    return true;
}

/* splitmix64: a tiny generator whose every seed gives a good stream. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Roughly N(0, 0.02^2), like a trained model's weights: the sum of two uniforms (triangular)
 * has standard deviation sqrt(2/12) per unit of width. */
static void fill_weights(uint64_t *state, float *out, size_t n)
{
    const float scale = 0.02f / 0.40824829f / 4294967296.0f;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = next_random(state);
        float a = (float)(uint32_t)r, b = (float)(uint32_t)(r >> 32);
        out[i] = (a - b) * scale;
    }
}

/* What the trailing word asks for: plain random weights, `bigram` or `peaked` (see the top). */
enum weight_style { STYLE_RANDOM, STYLE_BIGRAM, STYLE_PEAKED };

/* A peaked model's favoured successor of token i is i + PEAKED_STEP (mod n_vocab): a prime
 * that divides no shape's vocabulary size, so the walk visits every token before repeating.
 * PEAKED_GAIN scales the embedding planted in each output row; PEAKED_LAYER_SCALE the layers'
 * outputs (their sum over 16 layers then about matches an embedding's size). */
enum { PEAKED_STEP = 7919 };
#define PEAKED_GAIN 0.15f
#define PEAKED_LAYER_SCALE (1.0f / 256.0f)

/* Whether a bigram model writes this tensor as zeros (and a peaked one scales it). */
static bool bigram_zero(const char *name)
{
    const char *last = strrchr(name, '.'); /* blk.N.attn_output.weight: its kind before .weight */
    size_t n = last ? (size_t)(last - name) : strlen(name);
    return (n >= 11 && strncmp(name + n - 11, "attn_output", 11) == 0) ||
           (n >= 8 && strncmp(name + n - 8, "ffn_down", 8) == 0) ||
           (n >= 13 && strncmp(name + n - 13, "ffn_down_exps", 13) == 0);
}

/* How a peaked model's output rows get their planted embeddings: token_embd's seed and
 * shape, the gain, and a row of scratch. */
typedef struct planting {
    uint64_t embd_seed;
    size_t n_embd, n_vocab;
    float gain;
    float *row;
} planting;

/* Adds gain times token (j - PEAKED_STEP)'s embedding to output rows j = first.. of values.
 * fill_weights draws one splitmix64 step per value and the state only adds a constant each
 * step, so embedding row k is drawn again from its seed plus k * n_embd steps. */
static void plant_successors(const planting *p, size_t first, size_t rows, float *values)
{
    for (size_t r = 0; r < rows; r++) {
        size_t k = (first + r + p->n_vocab - PEAKED_STEP % p->n_vocab) % p->n_vocab;
        uint64_t state = p->embd_seed + (uint64_t)k * p->n_embd * 0x9e3779b97f4a7c15ULL;
        fill_weights(&state, p->row, p->n_embd);
        for (size_t i = 0; i < p->n_embd; i++)
            values[r * p->n_embd + i] += p->gain * p->row[i];
    }
}

/* Writes tensor t from its seed; zero: all zeros, or with peak set (a peaked model) its
 * layer outputs scaled and its output rows planted. */
static bool write_tensor(gguf_writer *w, const tensor_plan *t, uint64_t seed, bool zero,
                         const planting *peak, float *values, uint8_t *packed, corral_error *err)
{
    size_t row_bytes;
    if (!tensor_type_row_bytes(t->type, (uint64_t)t->ne[0], &row_bytes)) {
        corral_error_set(err, "%s: rows of %" PRId64 " do not fit type %s", t->name, t->ne[0],
                         tensor_type_name(t->type));
        return false;
    }
    if (t->is_norm) {
        for (int64_t i = 0; i < t->ne[0]; i++)
            values[i] = 1.0f;
        return gguf_writer_write_tensor(w, values, row_bytes, err);
    }
    /* F32 matrices (a router, which the recipes keep), biases and sinks are written as drawn */
    const quant_ops *ops = t->type == TENSOR_TYPE_F32 ? NULL
                                                       : quant_ops_get(t->type, CPU_LEVEL_SCALAR);
    if (t->type != TENSOR_TYPE_F32 && (!ops || !ops->quantize)) {
        corral_error_set(err, "%s: no quantizer for type %s", t->name, tensor_type_name(t->type));
        return false;
    }
    uint64_t state = seed;
    int64_t n_rows = t->ne[1] * t->ne[2];
    for (int64_t row = 0; row < n_rows; row += ROWS_PER_CHUNK) {
        size_t rows = (size_t)(n_rows - row < ROWS_PER_CHUNK ? n_rows - row : ROWS_PER_CHUNK);
        fill_weights(&state, values, rows * (size_t)t->ne[0]);
        if (zero && peak)
            for (size_t i = 0; i < rows * (size_t)t->ne[0]; i++)
                values[i] *= PEAKED_LAYER_SCALE;
        else if (zero)
            memset(values, 0, rows * (size_t)t->ne[0] * sizeof *values);
        else if (peak && strcmp(t->name, "output.weight") == 0)
            plant_successors(peak, (size_t)row, rows, values);
        for (size_t r = 0; r < rows; r++) {
            if (ops)
                ops->quantize(values + r * (size_t)t->ne[0], packed + r * row_bytes, (size_t)t->ne[0]);
            else
                memcpy(packed + r * row_bytes, values + r * (size_t)t->ne[0], row_bytes);
        }
        if (!gguf_writer_write_tensor(w, packed, rows * row_bytes, err))
            return false;
    }
    return true;
}

static bool add_arch_u32(gguf_writer *w, const model_shape *s, const char *suffix,
                         uint32_t value, corral_error *err)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", shape_arch(s), suffix);
    return gguf_writer_add_u32(w, key, value, err);
}

static bool add_arch_f32(gguf_writer *w, const model_shape *s, const char *suffix, float value,
                         corral_error *err)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", shape_arch(s), suffix);
    return gguf_writer_add_f32(w, key, value, err);
}

static bool add_hparams(gguf_writer *w, const model_shape *s, const quant_recipe *recipe,
                        corral_error *err)
{
    char name[64];
    snprintf(name, sizeof name, "bench-%s-%s", s->name, recipe->name);
    const char *arch = shape_arch(s);
    uint32_t head_dim = shape_head_dim(s);
    bool ok = gguf_writer_add_str(w, "general.architecture", arch, strlen(arch), err) &&
              gguf_writer_add_str(w, "general.name", name, strlen(name), err) &&
              gguf_writer_add_u32(w, "general.file_type", recipe->file_type, err) &&
              add_arch_u32(w, s, "vocab_size", s->n_vocab, err) &&
              add_arch_u32(w, s, "context_length", s->n_ctx_train, err) &&
              add_arch_u32(w, s, "embedding_length", s->n_embd, err) &&
              add_arch_u32(w, s, "block_count", s->n_layer, err) &&
              add_arch_u32(w, s, "feed_forward_length", s->n_ff, err) &&
              add_arch_u32(w, s, "rope.dimension_count", head_dim, err) &&
              add_arch_u32(w, s, "attention.head_count", s->n_head, err) &&
              add_arch_u32(w, s, "attention.head_count_kv", s->n_head_kv, err) &&
              add_arch_f32(w, s, "attention.layer_norm_rms_epsilon", 1e-5f, err) &&
              add_arch_f32(w, s, "rope.freq_base", s->rope_freq_base, err);
    if (!s->n_expert)
        return ok;
    ok = ok && add_arch_u32(w, s, "attention.key_length", head_dim, err) &&
         add_arch_u32(w, s, "attention.value_length", head_dim, err) &&
         add_arch_u32(w, s, "expert_count", s->n_expert, err) &&
         add_arch_u32(w, s, "expert_used_count", s->n_expert_used, err) &&
         add_arch_u32(w, s, "expert_feed_forward_length", s->n_ff, err);
    if (!s->n_swa)
        return ok;
    /* gpt-oss's YaRN: 32 times its original 4096 positions */
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    return ok && add_arch_u32(w, s, "attention.sliding_window", s->n_swa, err) &&
           gguf_writer_add_str(w, key, "yarn", 4, err) &&
           add_arch_f32(w, s, "rope.scaling.factor", 32.0f, err) &&
           add_arch_u32(w, s, "rope.scaling.original_context_length", 4096, err);
}

/* The vocabulary's tokens then unused ones up to n_vocab ("<|pad_N|>"), or their types
 * then 5 (unused): kv is tokenizer.ggml.tokens or tokenizer.ggml.token_type. */
static bool add_padded(gguf_writer *w, const gguf_kv *kv, uint32_t n_vocab, corral_error *err)
{
    enum { PAD_BYTES = 24 };
    bool strings = kv->elem_type == GGUF_TYPE_STRING;
    if (kv->type != GGUF_TYPE_ARRAY || (!strings && !gguf_type_is_integer(kv->elem_type))) {
        corral_error_set(err, "%s is not an array of strings or integers", kv->key);
        return false;
    }
    size_t n_pad = n_vocab - (size_t)kv->n;
    gguf_str *strs = strings ? calloc(n_vocab, sizeof *strs) : NULL;
    int32_t *types = strings ? NULL : calloc(n_vocab, sizeof *types);
    char *pads = strings ? calloc(n_pad, PAD_BYTES) : NULL;
    bool ok = strings ? strs && pads : types != NULL;
    for (uint64_t i = 0; ok && i < n_vocab; i++) {
        if (strings && i < kv->n)
            strs[i] = gguf_kv_str(kv, i);
        else if (strings)
            strs[i] = (gguf_str){pads + (i - kv->n) * PAD_BYTES,
                                 (size_t)snprintf(pads + (i - kv->n) * PAD_BYTES, PAD_BYTES,
                                                  "<|pad_%" PRIu64 "|>", i)};
        else
            types[i] = i < kv->n ? (int32_t)gguf_kv_i64(kv, i) : 5;
    }
    if (!ok)
        corral_error_set(err, "out of memory");
    ok = ok && (strings ? gguf_writer_add_str_array(w, kv->key, strs, n_vocab, err)
                        : gguf_writer_add_array(w, kv->key, GGUF_TYPE_INT32, types, n_vocab, err));
    free(strs);
    free(types);
    free(pads);
    return ok;
}

/* Every tokenizer.* pair of the vocabulary file, in its order; a vocabulary smaller than
 * n_vocab has its tokens and their types padded to it. */
static bool copy_tokenizer(gguf_writer *w, const gguf_file *vocab, uint32_t n_vocab,
                           corral_error *err)
{
    const gguf_kv *tokens = gguf_find_kv(vocab, "tokenizer.ggml.tokens");
    if (tokens && tokens->n > n_vocab) {
        corral_error_set(err, "%s: %" PRIu64 " tokens are more than the shape's %u",
                         gguf_path(vocab), tokens->n, n_vocab);
        return false;
    }
    bool pad = tokens && tokens->n < n_vocab;
    size_t copied = 0;
    for (size_t i = 0; i < gguf_n_kv(vocab); i++) {
        const gguf_kv *kv = gguf_kv_at(vocab, i);
        if (strncmp(kv->key, "tokenizer.", 10) != 0)
            continue;
        bool padded = pad && (strcmp(kv->key, "tokenizer.ggml.tokens") == 0 ||
                              strcmp(kv->key, "tokenizer.ggml.token_type") == 0);
        if (padded && kv->n != tokens->n) {
            corral_error_set(err, "%s: %s has %" PRIu64 " entries for %" PRIu64 " tokens",
                             gguf_path(vocab), kv->key, kv->n, tokens->n);
            return false;
        }
        if (!(padded ? add_padded(w, kv, n_vocab, err) : gguf_writer_copy_kv(w, kv, err)))
            return false;
        copied++;
    }
    if (copied == 0)
        corral_error_set(err, "%s has no tokenizer.* keys", gguf_path(vocab));
    return copied > 0;
}

static bool make_model(const model_shape *s, const quant_recipe *recipe, const char *vocab_path,
                       const char *out_path, uint64_t seed, enum weight_style style, float gain,
                       corral_error *err)
{
    static tensor_plan plan[MAX_TENSORS];
    size_t n_tensors = plan_tensors(s, plan);
    if (!choose_types(s, recipe, plan, n_tensors, err))
        return false;
    gguf_file *vocab = gguf_open(vocab_path, err);
    gguf_writer *w = gguf_writer_create();
    size_t max_row = s->n_embd > s->n_ff ? s->n_embd : s->n_ff;
    size_t q_width = (size_t)shape_head_dim(s) * s->n_head;
    max_row = max_row > q_width ? max_row : q_width;
    float *values = malloc(ROWS_PER_CHUNK * max_row * sizeof *values);
    uint8_t *packed = malloc(ROWS_PER_CHUNK * max_row * sizeof(float));
    planting peak = {.n_embd = s->n_embd, .n_vocab = s->n_vocab, .gain = gain,
                     .row = malloc(s->n_embd * sizeof *peak.row)};
    bool ok = vocab && w && values && packed && peak.row;
    if (!ok && vocab)
        corral_error_set(err, "out of memory");
    ok = ok && add_hparams(w, s, recipe, err) && copy_tokenizer(w, vocab, s->n_vocab, err);
    for (size_t i = 0; ok && i < n_tensors; i++) {
        uint32_t n_dims = plan[i].ne[2] > 1 ? 3 : plan[i].ne[1] == 1 ? 1 : 2;
        ok = gguf_writer_add_tensor(w, plan[i].name, plan[i].type, n_dims, plan[i].ne, err);
    }
    ok = ok && gguf_writer_begin(w, out_path, err);
    uint64_t seed_state = seed;
    for (size_t i = 0; ok && i < n_tensors; i++) {
        uint64_t tensor_seed = next_random(&seed_state);
        if (strcmp(plan[i].name, "token_embd.weight") == 0)
            peak.embd_seed = tensor_seed; /* written first: output comes last */
        ok = write_tensor(w, &plan[i], tensor_seed,
                          style != STYLE_RANDOM && bigram_zero(plan[i].name),
                          style == STYLE_PEAKED ? &peak : NULL, values, packed, err);
    }
    ok = ok && gguf_writer_finish(w, err);
    gguf_writer_free(w);
    gguf_close(vocab);
    free(values);
    free(packed);
    free(peak.row);
    return ok;
}

static void usage(FILE *out)
{
    fputs("Usage: make_bench_model L1B|Q05B|MQA1B|A3B8L|GOSS8L LEVEL VOCAB.gguf OUT.gguf "
          "[SEED [bigram|peaked[=GAIN]]]\n"
          "Writes a random-weight model (seed default 1) with VOCAB.gguf's tokenizer, its\n"
          "tensors typed as llama-quantize's LEVEL recipe would (" CORRAL_QUANTIZE_LEVELS
          ", MXFP4_MOE), or all matrices in F32, F16 or BF16. bigram: attn_output and ffn_down\n"
          "all zero, so that the next token depends on the last alone. peaked: each token has a\n"
          "favoured successor (GAIN, default 0.15, sets its margin), so that a lower-bit copy\n"
          "mostly agrees with the model, as copies of trained models do.\n",
          out);
}

/* The trailing word: bigram, peaked or peaked=GAIN (0 < GAIN <= 10). */
static bool parse_style(const char *word, enum weight_style *style, float *gain)
{
    *gain = PEAKED_GAIN;
    if (strcmp(word, "bigram") == 0) {
        *style = STYLE_BIGRAM;
        return true;
    }
    *style = STYLE_PEAKED;
    if (strcmp(word, "peaked") == 0)
        return true;
    if (strncmp(word, "peaked=", 7) != 0)
        return false;
    char *end;
    *gain = strtof(word + 7, &end);
    return word[7] && !*end && *gain > 0.0f && *gain <= 10.0f;
}

int main(int argc, char **argv)
{
    enum weight_style style = STYLE_RANDOM;
    float gain = PEAKED_GAIN;
    if (argc < 5 || argc > 7 || (argc == 7 && !parse_style(argv[6], &style, &gain))) {
        usage(stderr);
        return 2;
    }
    const model_shape *shape = NULL;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (strcmp(argv[1], shapes[i].name) == 0)
            shape = &shapes[i];
    const quant_recipe *recipe = level_find(argv[2]);
    char *end = NULL;
    uint64_t seed = argc >= 6 ? strtoull(argv[5], &end, 10) : 1;
    if (!shape || !recipe || (end && *end)) {
        usage(stderr);
        return 2;
    }
    corral_error err = {{0}};
    if (!make_model(shape, recipe, argv[3], argv[4], seed, style, gain, &err)) {
        fprintf(stderr, "make_bench_model: %s\n", err.message);
        return 1;
    }
    return 0;
}

/*
 * The model quantizer (src/engine/quantize_model.c): files llama.cpp quantized are reproduced
 * byte for byte, every recipe gives tiny-tolstoy the tensor types llama.cpp's rules give it
 * (worked out by hand below), every converted tensor holds exactly what the scalar reference
 * quantizer makes of the source rows, a tied token_embd is treated as the output, bad sources
 * are refused, MXFP4 experts are kept, an unfinished output leaves no file, and quantized
 * models load and generate.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "corral/engine.h"
#include "file_fixture.h"
#include "gguf.h"
#include "quant.h"
#include "quantize_model.h"
#include "reference_fixture.h"
#include "store_fixture.h"
#include "tensor_type.h"

static char *g_dir; /* outputs go here */

static const char *output(const char *name)
{
    return store_fixture_path(g_dir, name);
}

/* Quantize src to dst, checking the progress counters on the way. */
static void quantize(const char *src, const char *level, int n_threads, const char *dst)
{
    corral_error err = {{0}};
    corral_quantizer *q = corral_quantizer_open(src, level, n_threads, &err);
    if (!q)
        fail_msg("open %s: %s", src, err.message);
    if (!corral_quantizer_begin(q, dst, &err))
        fail_msg("begin %s: %s", dst, err.message);
    bool done = false;
    uint64_t last = 0;
    while (!done) {
        if (!corral_quantizer_step(q, &done, &err))
            fail_msg("step: %s", err.message);
        assert_true(corral_quantizer_bytes_done(q) > last || done);
        last = corral_quantizer_bytes_done(q);
    }
    assert_int_equal(corral_quantizer_bytes_done(q), corral_quantizer_bytes_total(q));
    corral_quantizer_free(q);
}

static gguf_file *open_gguf(const char *path)
{
    corral_error err = {{0}};
    gguf_file *f = gguf_open(path, &err);
    if (!f)
        fail_msg("%s", err.message);
    return f;
}

/* ---- llama.cpp's own files ---- */

/* quant/README: llama.cpp quantized rand-e256-F32.gguf into these. Q8_0 and Q6_K were made
 * with --pure, which chooses the same types as the recipes for those two. */
static void test_quantize_reproduces_llama_cpp_files_byte_for_byte(void **state)
{
    (void)state;
    static const char *const levels[] = {"Q4_K_M", "q8_0", "Q6_K"};
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "quant/rand-e256-%s.gguf", corral_quantize_level(levels[i]));
        quantize(fixture("quant/rand-e256-F32.gguf"), levels[i], 2, output("peer.gguf"));
        size_t got_len, want_len;
        char *got = file_fixture_read(output("peer.gguf"), &got_len);
        char *want = file_fixture_read(fixture(name), &want_len);
        assert_int_equal(got_len, want_len);
        size_t at = 0;
        while (at < got_len && got[at] == want[at])
            at++;
        if (at != got_len)
            fail_msg("%s: first difference from llama.cpp's file at byte %zu", levels[i], at);
        free(got);
        free(want);
    }
}

/* ---- tiny-tolstoy: 5 layers, rows of 256 (ffn_down: 640), untied output ---- */

typedef struct expected_types {
    const char *level;
    uint32_t output, token_embd, other; /* other: attn_q, attn_k, attn_output, ffn_gate, ffn_up */
    uint32_t attn_v[5], ffn_down[5];
} expected_types;

enum {
    Q4_0 = TENSOR_TYPE_Q4_0, Q5_0 = TENSOR_TYPE_Q5_0, Q5_1 = TENSOR_TYPE_Q5_1,
    Q8_0 = TENSOR_TYPE_Q8_0, Q4_K = TENSOR_TYPE_Q4_K, Q5_K = TENSOR_TYPE_Q5_K,
    Q6_K = TENSOR_TYPE_Q6_K,
};

/*
 * From llama_tensor_get_type: use_more_bits(i, 5) holds for layers 2 and 4; _M recipes give
 * those attn_v and ffn_down Q6_K; Q4_K_S gives attn_v of the first 4 layers Q5_K and ffn_down
 * of layers < 5/8 (none) Q5_K; output is Q6_K but for Q8_0. ffn_down rows (640) are no
 * multiple of 256, so Q4_K falls back to Q5_0, Q5_K to Q5_1 and Q6_K to Q8_0.
 */
static const expected_types tolstoy_types[] = {
    {"Q4_K_M", Q6_K, Q4_K, Q4_K, {Q4_K, Q4_K, Q6_K, Q4_K, Q6_K}, {Q5_0, Q5_0, Q8_0, Q5_0, Q8_0}},
    {"Q4_K_S", Q6_K, Q4_K, Q4_K, {Q5_K, Q5_K, Q5_K, Q5_K, Q4_K}, {Q5_0, Q5_0, Q5_0, Q5_0, Q5_0}},
    {"Q5_K_M", Q6_K, Q5_K, Q5_K, {Q5_K, Q5_K, Q6_K, Q5_K, Q6_K}, {Q5_1, Q5_1, Q8_0, Q5_1, Q8_0}},
    {"Q6_K", Q6_K, Q6_K, Q6_K, {Q6_K, Q6_K, Q6_K, Q6_K, Q6_K}, {Q8_0, Q8_0, Q8_0, Q8_0, Q8_0}},
    {"Q8_0", Q8_0, Q8_0, Q8_0, {Q8_0, Q8_0, Q8_0, Q8_0, Q8_0}, {Q8_0, Q8_0, Q8_0, Q8_0, Q8_0}},
    {"Q4_0", Q6_K, Q4_0, Q4_0, {Q4_0, Q4_0, Q4_0, Q4_0, Q4_0}, {Q4_0, Q4_0, Q4_0, Q4_0, Q4_0}},
};

static uint32_t expected_type(const expected_types *e, const char *name)
{
    int layer;
    char role[64];
    if (strcmp(name, "output.weight") == 0)
        return e->output;
    if (strcmp(name, "token_embd.weight") == 0)
        return e->token_embd;
    if (strstr(name, "norm.weight"))
        return TENSOR_TYPE_F32;
    if (sscanf(name, "blk.%d.%63[a-z_]", &layer, role) != 2 || layer < 0 || layer > 4)
        fail_msg("unexpected tensor %s", name);
    if (strcmp(role, "attn_v") == 0)
        return e->attn_v[layer];
    if (strcmp(role, "ffn_down") == 0)
        return e->ffn_down[layer];
    return e->other;
}

/* Every tensor of out: a copy of src's, or the scalar reference quantizer's bytes for the
 * source rows dequantized. */
static void check_tensor_bytes(const gguf_file *src, const gguf_file *out)
{
    for (size_t i = 0; i < gguf_n_tensors(out); i++) {
        const gguf_tensor *t = gguf_tensor_at(out, i);
        const gguf_tensor *s = gguf_find_tensor(src, t->name);
        assert_non_null(s);
        assert_memory_equal(t->ne, s->ne, sizeof t->ne);
        if (t->type == s->type) {
            assert_memory_equal(t->data, s->data, s->size_bytes);
            continue;
        }
        const quant_ops *from = quant_ops_get(s->type, CPU_LEVEL_SCALAR);
        const quant_ops *to = quant_ops_get(t->type, CPU_LEVEL_SCALAR);
        size_t n = (size_t)t->ne[0], rows = gguf_tensor_n_elems(t) / n;
        size_t src_row = s->size_bytes / rows, dst_row = t->size_bytes / rows;
        float *values = malloc(n * sizeof *values);
        uint8_t *want = malloc(dst_row);
        for (size_t r = 0; r < rows; r++) {
            from->dequantize((const uint8_t *)s->data + r * src_row, values, n);
            to->quantize(values, want, n);
            if (memcmp(want, (const uint8_t *)t->data + r * dst_row, dst_row) != 0)
                fail_msg("%s (%s): row %zu differs from the reference quantizer", t->name,
                         tensor_type_name(t->type), r);
        }
        free(values);
        free(want);
    }
}

static void check_tolstoy(const char *source, const expected_types *e, int n_threads)
{
    quantize(fixture(source), e->level, n_threads, output("tolstoy.gguf"));
    gguf_file *src = open_gguf(fixture(source));
    gguf_file *out = open_gguf(output("tolstoy.gguf"));
    assert_int_equal(gguf_n_tensors(out), 48);
    for (size_t i = 0; i < gguf_n_tensors(out); i++) {
        const gguf_tensor *t = gguf_tensor_at(out, i);
        uint32_t want = expected_type(e, t->name);
        if (t->type != want)
            fail_msg("%s: %s is %s, llama.cpp makes it %s", e->level, t->name,
                     tensor_type_name(t->type), tensor_type_name(want));
    }
    uint32_t file_type = 0, version = 0;
    corral_error err;
    assert_true(gguf_get_u32(out, "general.file_type", &file_type, &err));
    assert_true(gguf_get_u32(out, "general.quantization_version", &version, &err));
    assert_int_equal(file_type, quant_recipe_find(e->level)->file_type);
    assert_int_equal(version, 2);
    assert_int_equal(gguf_n_kv(out), gguf_n_kv(src) + 1); /* file_type replaced, version added */
    check_tensor_bytes(src, out);
    gguf_close(out);
    gguf_close(src);
    corral_model *model = corral_model_load(output("tolstoy.gguf"), &err);
    if (!model)
        fail_msg("%s: %s", e->level, err.message);
    corral_model_free(model);
}

static void test_quantize_tiny_tolstoy_gets_llama_cpp_types_and_reference_bytes(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof tolstoy_types / sizeof tolstoy_types[0]; i++)
        check_tolstoy("tiny-tolstoy-f32.gguf", &tolstoy_types[i], 2);
}

static void test_quantize_f16_source_single_thread(void **state)
{
    (void)state;
    corral_error err = {{0}};
    corral_quantizer *q = corral_quantizer_open(fixture("tiny-tolstoy-f16.gguf"), "Q4_K_M", 1,
                                                &err);
    assert_non_null(q);
    assert_string_equal(corral_quantizer_source_type(q), "F16"); /* F32 norms, F16 matrices */
    corral_quantizer_free(q);
    check_tolstoy("tiny-tolstoy-f16.gguf", &tolstoy_types[0], 1);
}

/* A BF16 source gets the types llama.cpp gave the F32 one, from its own (rounded) values. */
static void test_quantize_bf16_source(void **state)
{
    (void)state;
    corral_error err = {{0}};
    corral_quantizer *q = corral_quantizer_open(fixture("quant/rand-e256-BF16.gguf"), "Q4_K_M", 2,
                                                &err);
    assert_non_null(q);
    assert_string_equal(corral_quantizer_source_type(q), "BF16");
    corral_quantizer_free(q);
    quantize(fixture("quant/rand-e256-BF16.gguf"), "Q4_K_M", 2, output("bf16.gguf"));
    gguf_file *src = open_gguf(fixture("quant/rand-e256-BF16.gguf"));
    gguf_file *out = open_gguf(output("bf16.gguf"));
    gguf_file *peer = open_gguf(fixture("quant/rand-e256-Q4_K_M.gguf"));
    assert_int_equal(gguf_n_tensors(out), gguf_n_tensors(peer));
    for (size_t i = 0; i < gguf_n_tensors(out); i++) {
        const gguf_tensor *t = gguf_tensor_at(out, i), *p = gguf_tensor_at(peer, i);
        assert_string_equal(t->name, p->name);
        assert_int_equal(t->type, p->type);
    }
    check_tensor_bytes(src, out);
    gguf_close(peer);
    gguf_close(out);
    gguf_close(src);
}

/* The file types written are the ones ollama names: Q4_K_M is 15, and so on. */
static void test_quantize_levels_are_case_insensitive_with_ollama_aliases(void **state)
{
    (void)state;
    assert_string_equal(corral_quantize_level("q4_k_m"), "Q4_K_M");
    assert_string_equal(corral_quantize_level("q4_K"), "Q4_K_M");
    assert_string_equal(corral_quantize_level("Q5_k"), "Q5_K_M");
    assert_string_equal(corral_quantize_level("q4_k_s"), "Q4_K_S");
    assert_null(corral_quantize_level("q3_K_M"));
    assert_null(corral_quantize_level("F16"));
    static const char *const listed[] = {"Q4_0", "Q4_K_M", "Q4_K_S", "Q5_K_M", "Q6_K", "Q8_0"};
    static const uint32_t file_types[] = {2, 15, 14, 17, 18, 7};
    for (size_t i = 0; i < 6; i++) {
        assert_non_null(strstr(CORRAL_QUANTIZE_LEVELS, listed[i]));
        assert_int_equal(quant_recipe_find(listed[i])->file_type, file_types[i]);
    }
}

/* ---- the rules on their own ---- */

static uint32_t type_of(const quant_tensor_desc *tensors, const uint32_t *types, size_t n,
                        const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(tensors[i].name, name) == 0)
            return types[i];
    fail_msg("no tensor %s", name);
    return 0;
}

/* With no output.weight, llama.cpp quantizes token_embd as the output. */
static void test_tied_token_embd_is_quantized_like_the_output(void **state)
{
    (void)state;
    quant_model_desc model = {.arch = "llama", .n_layer = 1, .n_head = 8, .n_head_kv = 8};
    quant_tensor_desc tied[] = {
        {"blk.0.attn_q.weight", TENSOR_TYPE_F16, {4096, 4096, 1, 1}},
        {"token_embd.weight", TENSOR_TYPE_F16, {4096, 32000, 1, 1}},
        {"output_norm.weight", TENSOR_TYPE_F32, {4096, 1, 1, 1}},
    };
    uint32_t types[4];
    corral_error err;
    assert_true(quant_choose_types(quant_recipe_find("Q4_0"), &model, tied, 3, types, &err));
    assert_int_equal(type_of(tied, types, 3, "token_embd.weight"), Q6_K);
    assert_int_equal(type_of(tied, types, 3, "blk.0.attn_q.weight"), Q4_0);
    assert_int_equal(type_of(tied, types, 3, "output_norm.weight"), TENSOR_TYPE_F32);
    quant_tensor_desc untied[] = {
        tied[0], tied[1], tied[2], {"output.weight", TENSOR_TYPE_F16, {4096, 32000, 1, 1}},
    };
    assert_true(quant_choose_types(quant_recipe_find("Q4_0"), &model, untied, 4, types, &err));
    assert_int_equal(type_of(untied, types, 4, "token_embd.weight"), Q4_0);
    assert_int_equal(type_of(untied, types, 4, "output.weight"), Q6_K);
}

/* room for any layer number a size_t holds ("blk." 20 digits ".attn_v.weight") */
enum { LAYER_NAME_BYTES = 40 };

static void attn_v_layers(quant_tensor_desc *tensors, size_t n, char names[][LAYER_NAME_BYTES])
{
    for (size_t i = 0; i < n; i++) { /* given last layer first */
        snprintf(names[i], LAYER_NAME_BYTES, "blk.%zu.attn_v.weight", n - 1 - i);
        tensors[i] = (quant_tensor_desc){names[i], TENSOR_TYPE_F16, {8192, 1024, 1, 1}};
    }
}

/* llama.cpp counts attn_v tensors in its order (by layer number, whatever order the file has):
 * with 12, use_more_bits picks 0, 3, 6, 9, 10 and 11. */
static void test_attn_v_counts_follow_layer_numbers(void **state)
{
    (void)state;
    quant_model_desc model = {.arch = "llama", .n_layer = 12, .n_head = 8, .n_head_kv = 8};
    quant_tensor_desc tensors[12];
    char names[12][LAYER_NAME_BYTES];
    attn_v_layers(tensors, 12, names);
    uint32_t types[12];
    corral_error err;
    assert_true(quant_choose_types(quant_recipe_find("Q4_K_M"), &model, tensors, 12, types, &err));
    for (size_t i = 0; i < 12; i++) {
        size_t layer = 11 - i;
        bool more = layer == 0 || layer == 3 || layer == 6 || layer == 9 || layer >= 10;
        if (types[i] != (more ? Q6_K : Q4_K))
            fail_msg("%s is %s", names[i], tensor_type_name(types[i]));
    }
}

/* A 70B llama (80 layers, GQA) raises Q4_K attn_v to Q5_K; fused qkv has its own rule; rows
 * no 32-element block divides fall back to F16. */
static void test_rules_for_70b_qkv_and_odd_rows(void **state)
{
    (void)state;
    quant_tensor_desc tensors[8];
    char names[8][LAYER_NAME_BYTES];
    attn_v_layers(tensors, 8, names); /* use_more_bits(i, 8): 0, 3, 6, 7; names[6] is blk.1 */
    uint32_t types[8];
    corral_error err;
    quant_model_desc gqa = {.arch = "llama", .n_layer = 80, .n_head = 64, .n_head_kv = 8};
    assert_true(quant_choose_types(quant_recipe_find("Q4_K_M"), &gqa, tensors, 8, types, &err));
    assert_int_equal(types[6], Q5_K);
    assert_int_equal(types[7], Q6_K);
    quant_model_desc mha = {.arch = "llama", .n_layer = 80, .n_head = 64, .n_head_kv = 64};
    assert_true(quant_choose_types(quant_recipe_find("Q4_K_M"), &mha, tensors, 8, types, &err));
    assert_int_equal(types[6], Q4_K);
    quant_model_desc phi = {.arch = "phi3", .n_layer = 2};
    quant_tensor_desc fused[] = {
        {"blk.1.attn_qkv.weight", TENSOR_TYPE_F32, {256, 768, 1, 1}},
        {"blk.0.attn_qkv.weight", TENSOR_TYPE_F32, {256, 768, 1, 1}},
        {"blk.0.ffn_down.weight", TENSOR_TYPE_F32, {100, 256, 1, 1}},
    };
    assert_true(quant_choose_types(quant_recipe_find("Q5_K_M"), &phi, fused, 3, types, &err));
    assert_int_equal(types[0], Q6_K);
    assert_int_equal(types[1], Q6_K);
    assert_int_equal(types[2], TENSOR_TYPE_F16);
}

/*
 * llama.cpp's fallback for rows a type's blocks do not divide, under every recipe: rows of 96
 * (blocks of 32, not 256) take Q5_0 for Q4_K, Q5_1 for Q5_K and Q8_0 for Q6_K, and keep Q4_0
 * and Q8_0; the output takes Q8_0 whatever the recipe; rows of 16 fit no quantized type and
 * are stored as F16.
 */
static void test_rows_blocks_do_not_divide_fall_back_as_in_llama_cpp(void **state)
{
    (void)state;
    static const struct {
        const char *level;
        uint32_t rows_of_96;
    } recipes[] = {
        {"Q4_0", Q4_0}, {"Q4_K_M", Q5_0}, {"Q4_K_S", Q5_0},
        {"Q5_K_M", Q5_1}, {"Q6_K", Q8_0}, {"Q8_0", Q8_0},
    };
    quant_model_desc model = {.arch = "llama", .n_layer = 1, .n_head = 8, .n_head_kv = 8};
    quant_tensor_desc wide[] = {
        {"blk.0.attn_q.weight", TENSOR_TYPE_F32, {96, 96, 1, 1}},
        {"blk.0.ffn_gate.weight", TENSOR_TYPE_F32, {16, 96, 1, 1}},
        {"output.weight", TENSOR_TYPE_F32, {96, 300, 1, 1}},
    };
    quant_tensor_desc narrow[] = {
        {"blk.0.attn_v.weight", TENSOR_TYPE_F32, {16, 16, 1, 1}},
        {"blk.0.ffn_down.weight", TENSOR_TYPE_F32, {16, 16, 1, 1}},
        {"output.weight", TENSOR_TYPE_F32, {16, 300, 1, 1}},
    };
    for (size_t r = 0; r < sizeof recipes / sizeof recipes[0]; r++) {
        const quant_recipe *recipe = quant_recipe_find(recipes[r].level);
        uint32_t types[3];
        corral_error err;
        if (!quant_choose_types(recipe, &model, wide, 3, types, &err))
            fail_msg("%s: %s", recipes[r].level, err.message);
        assert_int_equal(type_of(wide, types, 3, "blk.0.attn_q.weight"), recipes[r].rows_of_96);
        assert_int_equal(type_of(wide, types, 3, "blk.0.ffn_gate.weight"), TENSOR_TYPE_F16);
        assert_int_equal(type_of(wide, types, 3, "output.weight"), Q8_0);
        if (!quant_choose_types(recipe, &model, narrow, 3, types, &err))
            fail_msg("%s: %s", recipes[r].level, err.message);
        for (size_t i = 0; i < 3; i++)
            if (types[i] != TENSOR_TYPE_F16)
                fail_msg("%s: %s is %s", recipes[r].level, narrow[i].name,
                         tensor_type_name(types[i]));
    }
}

/*
 * arch/command-r-plus has rows of 16 (and ffn_down rows of 32): at Q4_K_M every matrix but
 * ffn_down is F16, ffn_down Q8_0 on the layers use_more_bits picks (Q6_K's fallback) and Q5_0
 * elsewhere; the per-head q/k norms stay F32. The rows are the reference quantizer's, and the
 * result loads and decodes.
 */
static void test_quantize_command_r_plus_narrow_rows(void **state)
{
    (void)state;
    const char *src_path = fixture("arch/command-r-plus.gguf");
    quantize(src_path, "q4_K_M", 2, output("crplus.gguf"));
    gguf_file *src = open_gguf(src_path);
    gguf_file *out = open_gguf(output("crplus.gguf"));
    assert_int_equal(gguf_n_tensors(out), gguf_n_tensors(src));
    for (size_t i = 0; i < gguf_n_tensors(out); i++) {
        const gguf_tensor *t = gguf_tensor_at(out, i);
        int layer = -1;
        uint32_t want = TENSOR_TYPE_F16;
        if (strstr(t->name, "norm.weight"))
            want = TENSOR_TYPE_F32;
        else if (strstr(t->name, "ffn_down") && sscanf(t->name, "blk.%d.", &layer) == 1)
            want = layer < 8 || layer >= 56 || (layer - 8) % 3 == 2 ? Q8_0 : Q5_0;
        if (t->type != want)
            fail_msg("%s is %s, llama.cpp makes it %s", t->name, tensor_type_name(t->type),
                     tensor_type_name(want));
    }
    check_tensor_bytes(src, out);
    gguf_close(out);
    gguf_close(src);
    corral_error err;
    corral_model *model = corral_model_load(output("crplus.gguf"), &err);
    if (!model)
        fail_msg("%s", err.message);
    corral_context_params p;
    corral_context_params_init(&p);
    p.n_ctx = 64;
    p.n_threads = 2;
    corral_context *ctx = corral_context_create(model, &p, &err);
    if (!ctx)
        fail_msg("%s", err.message);
    const corral_token ids[] = {1, 2, 3, 4};
    corral_batch batch = {.n_tokens = 4, .tokens = ids};
    if (!corral_decode(ctx, &batch, &err))
        fail_msg("%s", err.message);
    const float *logits = corral_get_logits(ctx, 3);
    for (uint32_t i = 0; i < corral_model_n_vocab(model); i++)
        assert_true(isfinite(logits[i]));
    corral_context_free(ctx);
    corral_model_free(model);
}

/* ---- MXFP4 experts ---- */

/* gpt-oss.gguf (F32) with its experts' matrices taken from the MXFP4 fixture, as a gpt-oss
 * checkpoint converts: MXFP4 experts, every other tensor plain. */
static void write_gptoss_with_mxfp4_experts(const char *dst)
{
    gguf_file *plain = open_gguf(fixture("arch/gpt-oss.gguf"));
    gguf_file *mx = open_gguf(fixture("arch/gpt-oss-mxfp4.gguf"));
    corral_error err = {{0}};
    gguf_writer *w = gguf_writer_create();
    assert_non_null(w);
    for (size_t i = 0; i < gguf_n_kv(plain); i++)
        assert_true(gguf_writer_copy_kv(w, gguf_kv_at(plain, i), &err));
    const gguf_tensor **ts = calloc(gguf_n_tensors(plain), sizeof *ts);
    assert_non_null(ts);
    for (size_t i = 0; i < gguf_n_tensors(plain); i++) {
        const gguf_tensor *t = gguf_tensor_at(plain, i), *e = gguf_find_tensor(mx, t->name);
        ts[i] = e && e->type == TENSOR_TYPE_MXFP4 ? e : t;
        assert_true(gguf_writer_add_tensor(w, ts[i]->name, ts[i]->type, ts[i]->n_dims,
                                           ts[i]->ne, &err));
    }
    assert_true(gguf_writer_begin(w, dst, &err));
    for (size_t i = 0; i < gguf_n_tensors(plain); i++)
        assert_true(gguf_writer_write_tensor(w, ts[i]->data, ts[i]->size_bytes, &err));
    assert_true(gguf_writer_finish(w, &err));
    gguf_writer_free(w);
    free(ts);
    gguf_close(mx);
    gguf_close(plain);
}

/* MXFP4 experts are copied; every other tensor gets the type and bytes it gets when the experts
 * are F32 too (the rules count the experts either way), and the result runs. */
static void test_quantize_keeps_mxfp4_experts(void **state)
{
    (void)state;
    char *mx = strdup(output("gptoss-mx.gguf")); /* output()'s buffer is reused */
    assert_non_null(mx);
    write_gptoss_with_mxfp4_experts(mx);
    quantize(mx, "Q4_K_M", 2, output("gptoss-mx-q4.gguf"));
    quantize(fixture("arch/gpt-oss.gguf"), "Q4_K_M", 2, output("gptoss-q4.gguf"));
    gguf_file *src = open_gguf(mx);
    free(mx);
    gguf_file *out = open_gguf(output("gptoss-mx-q4.gguf"));
    gguf_file *plain = open_gguf(output("gptoss-q4.gguf"));
    assert_int_equal(gguf_n_tensors(out), gguf_n_tensors(plain));
    size_t n_mxfp4 = 0, n_quantized = 0;
    for (size_t i = 0; i < gguf_n_tensors(out); i++) {
        const gguf_tensor *t = gguf_tensor_at(out, i), *p = gguf_tensor_at(plain, i);
        assert_string_equal(t->name, p->name);
        const gguf_tensor *s = gguf_find_tensor(src, t->name);
        const gguf_tensor *want = s->type == TENSOR_TYPE_MXFP4 ? s : p;
        if (t->type != want->type)
            fail_msg("%s is %s, not %s", t->name, tensor_type_name(t->type),
                     tensor_type_name(want->type));
        assert_int_equal(t->size_bytes, want->size_bytes);
        assert_memory_equal(t->data, want->data, t->size_bytes);
        n_mxfp4 += t->type == TENSOR_TYPE_MXFP4;
        n_quantized += t->type != TENSOR_TYPE_MXFP4 && t->type != s->type;
    }
    assert_int_equal(n_mxfp4, 3 * 4); /* gate, up and down in each of the 4 layers */
    assert_true(n_quantized > 0);
    gguf_close(plain);
    gguf_close(out);
    gguf_close(src);
    corral_error err = {{0}};
    corral_model *model = corral_model_load(output("gptoss-mx-q4.gguf"), &err);
    if (!model)
        fail_msg("%s", err.message);
    corral_context_params p;
    corral_context_params_init(&p);
    p.n_ctx = 16;
    p.n_threads = 1;
    corral_context *ctx = corral_context_create(model, &p, &err);
    if (!ctx)
        fail_msg("%s", err.message);
    const corral_token ids[] = {1, 2, 3};
    corral_batch batch = {.n_tokens = 3, .tokens = ids};
    if (!corral_decode(ctx, &batch, &err))
        fail_msg("%s", err.message);
    const float *logits = corral_get_logits(ctx, 2);
    for (uint32_t i = 0; i < corral_model_n_vocab(model); i++)
        assert_true(isfinite(logits[i]));
    corral_context_free(ctx);
    corral_model_free(model);
}

/* ---- refusals and clean-up ---- */

static void expect_open_error(const char *path, const char *level, const char *part)
{
    corral_error err = {{0}};
    corral_quantizer *q = corral_quantizer_open(path, level, 1, &err);
    if (q)
        fail_msg("%s at %s: opened", path, level);
    if (!strstr(err.message, part))
        fail_msg("%s at %s: '%s' lacks '%s'", path, level, err.message, part);
}

static void test_quantize_refuses_quantized_sources_and_unknown_levels(void **state)
{
    (void)state;
    expect_open_error(fixture("quant/rand-e256-Q4_0.gguf"), "Q4_K_M",
                      "quantization is only supported for F16, BF16 and F32 models: tensor "
                      "'output.weight' is q4_0 (only MXFP4 tensors are kept as they are)");
    expect_open_error(fixture("tiny-tolstoy-f32.gguf"), "q3_K_M",
                      "unsupported quantization type q3_K_M - supported types are Q4_0");
    expect_open_error(output("no-such-file.gguf"), "Q8_0", "no-such-file.gguf");
}

static void test_unfinished_quantization_leaves_no_file(void **state)
{
    (void)state;
    char *dir = store_fixture_make_root();
    const char *dst = store_fixture_path(dir, "half.gguf");
    corral_error err = {{0}};
    corral_quantizer *q = corral_quantizer_open(fixture("tiny-tolstoy-f32.gguf"), "Q8_0", 1, &err);
    assert_non_null(q);
    assert_string_equal(corral_quantizer_source_type(q), "F32");
    assert_true(corral_quantizer_begin(q, dst, &err));
    bool done = false;
    assert_true(corral_quantizer_step(q, &done, &err));
    assert_false(done);
    corral_quantizer_free(q);
    assert_int_equal(store_fixture_count_entries(dir, "."), 0);
    store_fixture_remove_root(dir);
}

static int setup(void **state)
{
    (void)state;
    g_dir = store_fixture_make_root();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    store_fixture_remove_root(g_dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantize_reproduces_llama_cpp_files_byte_for_byte),
        cmocka_unit_test(test_quantize_tiny_tolstoy_gets_llama_cpp_types_and_reference_bytes),
        cmocka_unit_test(test_quantize_f16_source_single_thread),
        cmocka_unit_test(test_quantize_bf16_source),
        cmocka_unit_test(test_quantize_levels_are_case_insensitive_with_ollama_aliases),
        cmocka_unit_test(test_tied_token_embd_is_quantized_like_the_output),
        cmocka_unit_test(test_attn_v_counts_follow_layer_numbers),
        cmocka_unit_test(test_rules_for_70b_qkv_and_odd_rows),
        cmocka_unit_test(test_rows_blocks_do_not_divide_fall_back_as_in_llama_cpp),
        cmocka_unit_test(test_quantize_command_r_plus_narrow_rows),
        cmocka_unit_test(test_quantize_keeps_mxfp4_experts),
        cmocka_unit_test(test_quantize_refuses_quantized_sources_and_unknown_levels),
        cmocka_unit_test(test_unfinished_quantization_leaves_no_file),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

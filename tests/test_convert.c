/*
 * Hugging Face checkpoints to GGUF (src/convert): the safetensors reader refuses every
 * malformed header it is given, and the tiny llama.cpp-made fixtures come back from their
 * checkpoints (tests/hf_fixture.c) tensor for tensor, bit for bit in the types llama.cpp's
 * converter writes, with the same metadata and the same tokens; checkpoints Corral cannot
 * convert are refused with a message that says why; so for LoRA adapters in PEFT's form, which
 * must also give the lora/ fixtures' logits. With --write-checkpoint DIR it writes the qwen2
 * fixture's checkpoint there instead, with --write-embedding-checkpoints DIR the bert and
 * gemma-embedding fixtures' in DIR/bert-hf and DIR/embeddinggemma-hf (sentence-transformers'
 * modules in their folders), with --write-adapter DIR the PEFT directory of
 * lora/adapter-f32-r4.gguf (for tests/integration/cli.test.sh).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "convert/hf_adapter.h"
#include "convert/hf_convert.h"
#include "convert/safetensors.h"
#include "corral/engine.h"
#include "gguf.h"
#include "hf_fixture.h"
#include "quant_half.h"
#include "file_fixture.h"
#include "gguf_write_fixture.h"
#include "ollama_name_fixture.h"
#include "onefile_fixture.h"
#include "qwen3vl_single_fixture.h"
#include "reference_fixture.h"
#include "store_fixture.h"
#include "tensor_type.h"

/* ---- the safetensors reader ---- */

/* A file of one header (padded to 8 bytes) and data_size bytes of data; *size its length. */
static uint8_t *image(const char *header, size_t data_size, size_t *size)
{
    size_t len = strlen(header);
    *size = 8 + len + data_size;
    uint8_t *bytes = calloc(1, *size);
    assert_non_null(bytes);
    for (int i = 0; i < 8; i++)
        bytes[i] = (uint8_t)((uint64_t)len >> (8 * i));
    memcpy(bytes + 8, header, len);
    return bytes;
}

static void expect_refusal(const char *header, size_t data_size, const char *why)
{
    size_t size;
    uint8_t *bytes = image(header, data_size, &size);
    corral_error err = {{0}};
    safetensors_file *f = safetensors_open_memory(bytes, size, "x.safetensors", &err);
    if (f)
        fail_msg("accepted: %s", header);
    if (!strstr(err.message, why))
        fail_msg("'%s' for %s, expected '%s'", err.message, header, why);
    free(bytes);
}

static void test_safetensors_reads_a_valid_file(void **state)
{
    (void)state;
    size_t size;
    uint8_t *bytes = image("{\"__metadata__\":{\"format\":\"pt\"},"
                           "\"b\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[8,20]},"
                           "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                           "\"s\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[20,22]},"
                           "\"u\":{\"dtype\":\"U8\",\"shape\":[2,1],\"data_offsets\":[22,24]},"
                           "\"e\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[24,24]}}  ",
                           24, &size);
    corral_error err = {{0}};
    safetensors_file *f = safetensors_open_memory(bytes, size, "x", &err);
    if (!f)
        fail_msg("%s", err.message);
    assert_int_equal(safetensors_count(f), 5);
    const safetensors_tensor *a = safetensors_at(f, 0), *b = safetensors_find(f, "b");
    assert_string_equal(a->name, "a"); /* by name */
    assert_ptr_equal(a->data, bytes + size - 24);
    assert_int_equal(a->size_bytes, 8);
    assert_non_null(b);
    assert_int_equal(b->dtype, SAFETENSORS_F16);
    assert_int_equal(b->n_dims, 2);
    assert_int_equal(b->shape[0], 2);
    assert_int_equal(b->shape[1], 3);
    assert_int_equal(b->n_elems, 6);
    assert_ptr_equal(b->data, a->data + 8);
    const safetensors_tensor *s = safetensors_find(f, "s");
    assert_int_equal(s->n_dims, 0);
    assert_int_equal(s->n_elems, 1);
    assert_int_equal(safetensors_find(f, "e")->size_bytes, 0);
    const safetensors_tensor *u = safetensors_find(f, "u");
    assert_int_equal(u->dtype, SAFETENSORS_U8);
    assert_int_equal(u->size_bytes, 2);
    assert_ptr_equal(u->data, s->data + 2);
    assert_null(safetensors_find(f, "__metadata__"));
    safetensors_close(f);
    free(bytes);
}

static void test_safetensors_refuses_malformed_headers(void **state)
{
    (void)state;
    expect_refusal("not json", 0, "not a JSON object");
    expect_refusal("[1]", 0, "not a JSON object");
    expect_refusal("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                   "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                   "not a JSON object"); /* a duplicate key */
    expect_refusal("{\"a\":{\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
                   "dtype 'I8'");
    expect_refusal("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4,
                   "shape and dtype make");
    expect_refusal("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4,
                   "shape and dtype make");
    expect_refusal("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,8]}}", 4,
                   "outside the file");
    expect_refusal("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4,
                   "outside the file");
    expect_refusal("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4,
                   "outside the file");
    expect_refusal("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
                   "overlap");
    expect_refusal("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
                   "\"data_offsets\":[0,0]}}", 0, "too many");
    expect_refusal("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
                   "bad shape");
    expect_refusal("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],"
                   "\"data_offsets\":[0,4]}}", 4, "dimensions");
    expect_refusal("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "two data_offsets");
    expect_refusal("{\"a\":5}", 0, "not an object");
    expect_refusal("{\"__metadata__\":[]}", 0, "__metadata__");
    expect_refusal("{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "empty");

    /* header lengths past the file and past the cap */
    uint8_t small[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    corral_error err = {{0}};
    assert_null(safetensors_open_memory(small, sizeof small, "x", &err));
    assert_non_null(strstr(err.message, "header length"));
    assert_null(safetensors_open_memory(small, 5, "x", &err));
    assert_non_null(strstr(err.message, "not a safetensors file"));
}

/* ---- conversion ---- */

static void rewrite(const char *name, const char *from, const char *to);
static void set_json(const char *name, const char *path, const char *key, const char *value);
static void expect_convert_refusal(const char *why);
static void expect_tower_fits(const char *path);
static void expect_converted_f16(const gguf_file *got, const char *name, const gguf_tensor *w);

static char *g_root;

static int setup(void **state)
{
    (void)state;
    g_root = store_fixture_make_root();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    store_fixture_remove_root(g_root);
    g_root = NULL;
    return 0;
}

#define MAX_FILES 24

typedef struct checkpoint {
    hf_file files[MAX_FILES];
    char paths[MAX_FILES][512];
    size_t n;
} checkpoint;

/* The checkpoint's files, as the server would list the ones a client uploaded. */
static void list_checkpoint(checkpoint *cp)
{
    static const char *const names[] = {"config.json", "tokenizer.json", "tokenizer_config.json",
                                        "generation_config.json", "model.safetensors.index.json",
                                        "model-00001-of-00002.safetensors",
                                        "model-00002-of-00002.safetensors",
                                        "model-audio.safetensors",
                                        "chat_template.jinja", "tokenizer.model",
                                        "consolidated.safetensors", "added_tokens.json",
                                        "preprocessor_config.json", "modules.json",
                                        "processor_config.json",
                                        "1_Pooling/config.json", "2_Dense/config.json",
                                        "2_Dense/model.safetensors", "3_Dense/config.json",
                                        "3_Dense/model.safetensors"};
    cp->n = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!store_fixture_exists(g_root, names[i]))
            continue;
        snprintf(cp->paths[cp->n], sizeof cp->paths[cp->n], "%s",
                 store_fixture_path(g_root, names[i]));
        cp->files[cp->n] = (hf_file){names[i], cp->paths[cp->n]};
        cp->n++;
    }
}

static hf_status convert(const char *out, corral_error *err)
{
    checkpoint cp;
    list_checkpoint(&cp);
    char out_path[512];
    snprintf(out_path, sizeof out_path, "%s", store_fixture_path(g_root, out));
    return hf_convert(cp.files, cp.n, out_path, err);
}

/* The value a fixture's F32 element has once converted to a GGUF type. */
static void expect_element(float x, uint32_t type, const uint8_t *got, size_t i, const char *name)
{
    if (type == TENSOR_TYPE_F32) {
        float y;
        memcpy(&y, got + 4 * i, 4);
        if (memcmp(&x, &y, 4) != 0)
            fail_msg("%s[%zu]: %g, expected %g", name, i, (double)y, (double)x);
        return;
    }
    uint16_t want = type == TENSOR_TYPE_F16 ? quant_f32_to_f16(x) : quant_f32_to_bf16(x), h;
    memcpy(&h, got + 2 * i, 2);
    if (h != want)
        fail_msg("%s[%zu]: 0x%04x, expected 0x%04x", name, i, h, want);
}

static bool kv_equal(const gguf_kv *a, const gguf_kv *b)
{
    if (a->type != b->type || a->elem_type != b->elem_type || a->n != b->n)
        return false;
    for (uint64_t i = 0; i < a->n; i++) {
        if (a->elem_type == GGUF_TYPE_STRING) {
            gguf_str x = gguf_kv_str(a, i), y = gguf_kv_str(b, i);
            if (x.size != y.size || memcmp(x.data, y.data, x.size) != 0)
                return false;
        } else if (a->elem_type == GGUF_TYPE_FLOAT32 || a->elem_type == GGUF_TYPE_FLOAT64) {
            if (gguf_kv_f64(a, i) != gguf_kv_f64(b, i))
                return false;
        } else if (a->elem_type == GGUF_TYPE_BOOL) {
            if (gguf_kv_bool(a, i) != gguf_kv_bool(b, i))
                return false;
        } else if (gguf_kv_i64(a, i) != gguf_kv_i64(b, i)) {
            return false;
        }
    }
    return true;
}

/* The keys a conversion writes its own way: the model's name and its file type. */
static const char *const skipped[] = {"general.name", "general.file_type", NULL};

/* Every metadata pair of want is in got with the same value, but those in skipped (a
 * NULL-terminated list). */
static void expect_same_keys(const gguf_file *want, const gguf_file *got,
                             const char *const *skipped_keys)
{
    for (size_t i = 0; i < gguf_n_kv(want); i++) {
        const gguf_kv *w = gguf_kv_at(want, i);
        bool skip = false;
        for (const char *const *k = skipped_keys; *k && !skip; k++)
            skip = strcmp(*k, w->key) == 0;
        if (skip)
            continue;
        const gguf_kv *g = gguf_find_kv(got, w->key);
        if (!g || !kv_equal(w, g))
            fail_msg("%s %s", w->key, g ? "differs" : "is missing");
    }
}

/* Every tensor of from is in got under the name rename gives (NULL: its own), byte for byte. */
static void expect_same_tensors(const gguf_file *from, const gguf_file *got,
                                const char *(*rename)(const char *, char *, size_t))
{
    for (size_t i = 0; i < gguf_n_tensors(from); i++) {
        const gguf_tensor *w = gguf_tensor_at(from, i);
        char buf[128];
        const char *name = rename ? rename(w->name, buf, sizeof buf) : w->name;
        const gguf_tensor *g = gguf_find_tensor(got, name);
        if (!g)
            fail_msg("no %s", name);
        if (g->type != w->type || memcmp(g->ne, w->ne, sizeof w->ne) != 0 ||
            g->size_bytes != w->size_bytes || memcmp(g->data, w->data, w->size_bytes) != 0)
            fail_msg("%s differs (%s, expected %s)", name, tensor_type_name(g->type),
                     tensor_type_name(w->type));
    }
}

/* The file at got_path holds the tensors of the one at want_path byte for byte and no others,
 * and its keys but those in skipped_keys. */
static void expect_same_file(const char *want_path, const char *got_path,
                             const char *const *skipped_keys)
{
    corral_error err = {{0}};
    gguf_file *want = gguf_open(want_path, &err), *got = gguf_open(got_path, &err);
    if (!want || !got)
        fail_msg("%s", err.message);
    assert_int_equal(gguf_n_tensors(got), gguf_n_tensors(want));
    expect_same_tensors(want, got, NULL);
    expect_same_keys(want, got, skipped_keys);
    gguf_close(want);
    gguf_close(got);
}

/*
 * Convert the checkpoint written in g_root and hold the result against the GGUF at want_path
 * (a fixture, or one made from it): the same
 * tensors (2-D ones in matrix_type, the rest F32; MXFP4 ones of experts_name, when given,
 * as they are there) and every metadata pair but those in skipped.
 */
static void check_round_trip(const char *want_path, const char *experts_name,
                             const char *hf_arch, safetensors_dtype dtype, uint32_t matrix_type,
                             const char *const *skipped)
{
    corral_error err = {{0}};
    if (convert("out.gguf", &err) != HF_OK)
        fail_msg("%s: %s", want_path, err.message);
    gguf_file *want = gguf_open(want_path, &err);
    gguf_file *got = gguf_open(store_fixture_path(g_root, "out.gguf"), &err);
    gguf_file *experts = experts_name ? gguf_open(fixture(experts_name), &err) : NULL;
    if (!want || !got || (experts_name && !experts))
        fail_msg("%s", err.message);
    assert_int_equal(gguf_n_tensors(got), gguf_n_tensors(want));
    for (size_t i = 0; i < gguf_n_tensors(want); i++) {
        const gguf_tensor *w = gguf_tensor_at(want, i);
        const gguf_tensor *mx = experts ? gguf_find_tensor(experts, w->name) : NULL;
        if (mx && mx->type == TENSOR_TYPE_MXFP4)
            w = mx;
        const gguf_tensor *g = gguf_find_tensor(got, w->name);
        if (!g)
            fail_msg("%s: no %s", want_path, w->name);
        assert_int_equal(g->n_dims, w->n_dims);
        for (int d = 0; d < 4; d++)
            assert_int_equal(g->ne[d], w->ne[d]);
        /* vectors, biases and a router's few columns stay F32; MXFP4 stays MXFP4 */
        size_t len = strlen(w->name);
        bool bias = len > 5 && strcmp(w->name + len - 5, ".bias") == 0;
        uint32_t type = w->type == TENSOR_TYPE_MXFP4 ? TENSOR_TYPE_MXFP4
                        : w->n_dims == 1 || bias || strstr(w->name, "ffn_gate_inp") ||
                                strstr(w->name, "ssm_conv1d") || strstr(w->name, "_norm.weight") ||
                                strstr(w->name, "shortconv.conv") ||
                                (len > 6 && (!strcmp(w->name + len - 6, ".ssm_a") ||
                                             !strcmp(w->name + len - 6, ".ssm_d"))) ||
                                !strcmp(w->name, "token_types.weight")
                            ? TENSOR_TYPE_F32
                            : matrix_type;
        if (g->type != type)
            fail_msg("%s: %s is %s, expected %s", want_path, w->name,
                     tensor_type_name(g->type), tensor_type_name(type));
        if (type == TENSOR_TYPE_MXFP4) { /* bit for bit */
            assert_int_equal(g->size_bytes, w->size_bytes);
            if (memcmp(g->data, w->data, w->size_bytes) != 0)
                fail_msg("%s: %s's blocks differ", want_path, w->name);
            continue;
        }
        /* a Gemma or Qwen 3.5 norm: the checkpoint's w - 1, plus one; a router (a shared
         * expert's too), a convolution or a norm per head: F32 from the checkpoint's matrix
         * type */
        bool qwen35 = strncmp(hf_arch, "Qwen3_5", 7) == 0 || strncmp(hf_arch, "Qwen3Next", 9) == 0;
        bool gemma = strncmp(hf_arch, "Gemma", 5) == 0 && strncmp(hf_arch, "Gemma3n", 7) != 0;
        bool nemotron = strcmp(hf_arch, "NemotronHForCausalLM") == 0; /* its A_log too */
        bool plus_one_norm = (gemma || qwen35) &&
                             strstr(w->name, "_norm.weight") && !strstr(w->name, "ssm_norm");
        bool a_log = (qwen35 || nemotron) && len > 6 &&
                     !strcmp(w->name + len - 6, ".ssm_a"); /* -exp(A_log) */
        bool router = strstr(w->name, "ffn_gate_inp.weight") ||
                      strstr(w->name, "ffn_gate_inp_shexp.weight") ||
                      strstr(w->name, "ssm_conv1d.weight") || strstr(w->name, "shortconv.conv") ||
                      (w->n_dims > 1 && strstr(w->name, "_norm.weight") &&
                       !strstr(w->name, "ssm_norm")) || /* Nemotron-H's is a vector */
                      !strcmp(w->name, "token_types.weight");
        for (uint64_t e = 0; e < gguf_tensor_n_elems(w); e++) {
            float x = w->type == TENSOR_TYPE_F16 ? quant_f16_to_f32(((const uint16_t *)w->data)[e])
                                                 : ((const float *)w->data)[e];
            if (plus_one_norm)
                x = (x - 1.0f) + 1.0f;
            if (a_log)
                x = -(float)exp((double)logf(-x));
            if (router && dtype == SAFETENSORS_F16)
                x = quant_f16_to_f32(quant_f32_to_f16(x));
            if (router && dtype == SAFETENSORS_BF16)
                x = quant_bf16_to_f32(quant_f32_to_bf16(x));
            expect_element(x, type, g->data, e, w->name);
        }
    }
    expect_same_keys(want, got, skipped);
    uint32_t file_type = 0;
    assert_true(gguf_get_u32(got, "general.file_type", &file_type, &err));
    assert_int_equal(file_type, matrix_type == TENSOR_TYPE_BF16 ? 32 : 1);
    gguf_str vocab_model;
    assert_true(gguf_get_str(got, "tokenizer.ggml.model", &vocab_model, &err));
    /* an embedding model's (WordPiece's, Unigram's) has no chat template */
    bool encoder = (vocab_model.size == 4 && !memcmp(vocab_model.data, "bert", 4)) ||
                   (vocab_model.size == 2 && !memcmp(vocab_model.data, "t5", 2));
    gguf_str tmpl;
    if (!encoder) { /* with no template, no eos */
        assert_true(gguf_get_str(got, "tokenizer.chat_template", &tmpl, &err));
        assert_int_equal(tmpl.size, strlen(HF_FIXTURE_CHAT_TEMPLATE));
        const gguf_kv *eos_ids = gguf_find_kv(got, "tokenizer.ggml.eos_token_ids");
        assert_non_null(eos_ids); /* generation_config.json's list */
        assert_int_equal(eos_ids->n, 2);
    }
    gguf_close(want);
    gguf_close(got);
    if (experts)
        gguf_close(experts);

    /* the engine takes the result */
    corral_model *model = corral_model_load(store_fixture_path(g_root, "out.gguf"), &err);
    if (!model)
        fail_msg("%s: %s", want_path, err.message);
    corral_model_free(model);
}

static void round_trip(const char *fixture_name, const char *hf_arch, safetensors_dtype dtype,
                       const char *pre_regex, uint32_t matrix_type, const char *const *skipped)
{
    hf_fixture_write(fixture(fixture_name), g_root, hf_arch, dtype, pre_regex);
    check_round_trip(fixture(fixture_name), NULL, hf_arch, dtype, matrix_type, skipped);
}

/* The same text gives the same tokens with the converted vocabulary as with the fixture's. */
static void same_tokens(const char *fixture_name)
{
    static const char text[] = "Once upon a time, there was a little girl.\n  It's 2024!";
    corral_error err = {{0}};
    corral_vocab *want = corral_vocab_open(fixture(fixture_name), &err);
    corral_vocab *got = want ? corral_vocab_open(store_fixture_path(g_root, "out.gguf"), &err)
                             : NULL;
    if (!got)
        fail_msg("%s", err.message);
    corral_token a[128], b[128];
    size_t na = 0, nb = 0;
    assert_true(corral_tokenize(want, text, strlen(text), true, true, a, 128, &na, &err));
    assert_true(corral_tokenize(got, text, strlen(text), true, true, b, 128, &nb, &err));
    assert_true(na > 5);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na * sizeof a[0]);
    corral_vocab_free(want);
    corral_vocab_free(got);
}

static void test_convert_qwen2_round_trip_f16(void **state)
{
    (void)state;
    /* Mistral's repositories hold their weights twice: model*.safetensors are read */
    store_fixture_write(g_root, "consolidated.safetensors", "not read", 8);
    round_trip("arch/qwen2.gguf", "Qwen2ForCausalLM", SAFETENSORS_F16, hf_fixture_qwen2_regex,
               TENSOR_TYPE_F16, skipped);
    same_tokens("arch/qwen2.gguf");
}

static void test_convert_qwen3_round_trip_bf16(void **state)
{
    (void)state;
    round_trip("arch/qwen3.gguf", "Qwen3ForCausalLM", SAFETENSORS_BF16, hf_fixture_qwen2_regex,
               TENSOR_TYPE_BF16, skipped);
    same_tokens("arch/qwen3.gguf");
}

/* llama-gqa's vocabulary is SentencePiece's: its checkpoint has a tokenizer.model */
static void test_convert_llama_round_trip_permutes_q_and_k(void **state)
{
    (void)state;
    round_trip("arch/llama-gqa.gguf", "LlamaForCausalLM", SAFETENSORS_F32, NULL,
               TENSOR_TYPE_F16, skipped);
    same_tokens("arch/llama-gqa.gguf");
}

static void test_convert_mistral_is_llama(void **state)
{
    (void)state;
    round_trip("arch/llama-gqa.gguf", "MistralForCausalLM", SAFETENSORS_BF16, NULL,
               TENSOR_TYPE_BF16, skipped);
}

/* Transformers keeps a template apart in chat_template.jinja when tokenizer_config.json has
 * none: it is the model's template then. */
static void test_convert_olmo2_round_trip(void **state)
{
    (void)state;
    round_trip("arch/olmo2.gguf", "Olmo2ForCausalLM", SAFETENSORS_BF16, hf_fixture_qwen2_regex,
               TENSOR_TYPE_BF16, skipped);
}

/* Olmo 3 is OLMo 2 with yarn (its attention factor) and sliding layers from layer_types. */
static void test_convert_olmo3_round_trip(void **state)
{
    (void)state;
    round_trip("arch/olmo3.gguf", "Olmo3ForCausalLM", SAFETENSORS_F16, hf_fixture_qwen2_regex,
               TENSOR_TYPE_F16, skipped);
}

/* Granite: Llama's Q/K permutation and its four multipliers. */
static void test_convert_granite_round_trip(void **state)
{
    (void)state;
    round_trip("arch/granite.gguf", "GraniteForCausalLM", SAFETENSORS_BF16, hf_fixture_qwen2_regex,
               TENSOR_TYPE_BF16, skipped);
}

static void test_convert_cohere2_round_trip(void **state)
{
    (void)state;
    round_trip("arch/cohere2.gguf", "Cohere2ForCausalLM", SAFETENSORS_F16, hf_fixture_qwen2_regex,
               TENSOR_TYPE_F16, skipped);
}

/* Command R's tokenizer.json splits no pattern: ollama's converter names its pre-tokenizer
 * "default", where llama.cpp's (the fixture's) says "command-r". */
static const char *const command_r_skipped[] = {"general.name", "general.file_type",
                                                "tokenizer.ggml.pre", NULL};

static void test_convert_command_r_round_trip(void **state)
{
    (void)state;
    round_trip("arch/command-r.gguf", "CohereForCausalLM", SAFETENSORS_F16, NULL,
               TENSOR_TYPE_F16, command_r_skipped);
    same_tokens("arch/command-r.gguf");
}

/* Command R+: each head's q and k LayerNorm rows, [heads, head_dim] in the checkpoint. */
static void test_convert_command_r_plus_round_trip(void **state)
{
    (void)state;
    round_trip("arch/command-r-plus.gguf", "CohereForCausalLM", SAFETENSORS_BF16, NULL,
               TENSOR_TYPE_BF16, command_r_skipped);
}

/*
 * BERT, from sentence-transformers' layout: its pooling from 1_Pooling/config.json, its
 * Normalize module, the I64 position ids and the pooler left out, tokenizer.json's WordPiece
 * as the "bert" model. ollama's converter names [CLS] and [SEP] cls and seperator only (the
 * fixture, llama.cpp's, also names them bos and eos) and makes [UNK] a control token like the
 * other special added tokens (llama.cpp's marks it unknown); the engine frames the text with
 * [CLS] and [SEP] all the same.
 */
static const char *const bert_skipped[] = {
    "general.name", "general.file_type", "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id", "tokenizer.ggml.add_bos_token",
    "tokenizer.ggml.add_eos_token", "tokenizer.ggml.token_type", NULL};

/* The WordPiece keys that bert_skipped leaves out of the comparison, and the Normalize module. */
static void expect_wordpiece(const char *fixture_name, const char *normalize_key)
{
    same_tokens(fixture_name);
    corral_error err = {{0}};
    gguf_file *want = gguf_open(fixture(fixture_name), &err);
    gguf_file *got = want ? gguf_open(store_fixture_path(g_root, "out.gguf"), &err) : NULL;
    if (!got)
        fail_msg("%s", err.message);
    const gguf_kv *w = gguf_find_kv(want, "tokenizer.ggml.token_type");
    const gguf_kv *g = gguf_find_kv(got, "tokenizer.ggml.token_type");
    assert_non_null(g);
    assert_int_equal(g->n, w->n);
    for (uint64_t i = 0; i < w->n; i++) /* 2: unknown, 3: control */
        assert_int_equal(gguf_kv_i64(g, i), gguf_kv_i64(w, i) == 2 ? 3 : gguf_kv_i64(w, i));
    bool normalize = false;
    assert_true(gguf_get_bool(got, normalize_key, &normalize, &err));
    assert_true(normalize);
    uint32_t segments = 0;
    assert_true(gguf_get_u32(got, "tokenizer.ggml.token_type_count", &segments, &err));
    assert_int_equal(segments, 2);
    gguf_close(want);
    gguf_close(got);
}

static void test_convert_bert_round_trip(void **state)
{
    (void)state;
    round_trip("arch/bert.gguf", "BertModel", SAFETENSORS_F16, NULL, TENSOR_TYPE_F16,
               bert_skipped);
    expect_wordpiece("arch/bert.gguf", "bert.normalize_embeddings");
}

/* nomic-embed-text (NomicBertModel): its GPT-2 style config keys (n_embd, n_layer, ...,
 * rotary_emb_base), its fused Wqkv, SwiGLU FFN (fc11 up, fc12 gate, fc2 down), norm1/norm2
 * and emb_ln under the names the engine reads, its pooling and tokenizer as BERT's. */
static void test_convert_nomic_bert_round_trip(void **state)
{
    (void)state;
    round_trip("arch/nomic-bert.gguf", "NomicBertModel", SAFETENSORS_BF16, NULL,
               TENSOR_TYPE_BF16, bert_skipped);
    expect_wordpiece("arch/nomic-bert.gguf", "nomic-bert.normalize_embeddings");
    remove(store_fixture_path(g_root, "out.gguf"));
    set_json("config.json", "", "num_experts", "8");
    set_json("config.json", "", "moe_top_k", "2");
    expect_convert_refusal("a NomicBertModel with num_experts needs moe_every_n_layers");
}

/*
 * The converted file at out.gguf tokenizes the reference text of arch/NAME.ref.txt as llama.cpp
 * did and embeds it as llama.cpp's library did from the fixture, to within what rounding the
 * fixture's F32 weights to F16 (11 bits) may move the normalized vector's elements: 2e-3 leaves
 * that room, and a wrong tensor, layer kind or key moves them by far more.
 */
static void expect_reference_embedding(const char *name)
{
    char path[96];
    snprintf(path, sizeof path, "arch/%s.ref.txt", name);
    char *ref = file_fixture_read(fixture(path), NULL);
    const char *text = strstr(ref, "# input_text: \"");
    const char *ids_line = strstr(ref, "\ninput_ids ");
    const char *embedding_line = strstr(ref, "\nembedding ");
    assert_true(text && ids_line && embedding_line);
    text += strlen("# input_text: \"");
    size_t text_len = (size_t)(strchr(text, '"') - text);
    char *p = (char *)ids_line + strlen("\ninput_ids ");
    size_t n_want = strtoul(p, &p, 10);
    assert_true(n_want > 0 && n_want <= 64);
    corral_token want[64], got[64];
    for (size_t i = 0; i < n_want; i++)
        want[i] = (corral_token)strtol(p, &p, 10);
    p = (char *)embedding_line + strlen("\nembedding ");
    size_t n_embd = strtoul(p, &p, 10);
    assert_true(n_embd > 0 && n_embd <= 64);
    float reference[64], out[64];
    for (size_t i = 0; i < n_embd; i++)
        reference[i] = strtof(p, &p);

    corral_error err = {{0}};
    const char *converted = store_fixture_path(g_root, "out.gguf");
    corral_vocab *vocab = corral_vocab_open(converted, &err);
    size_t n = 0;
    if (!vocab || !corral_tokenize(vocab, text, text_len, true, false, got, 64, &n, &err))
        fail_msg("%s", err.message);
    corral_vocab_free(vocab);
    assert_int_equal(n, n_want);
    assert_memory_equal(got, want, n * sizeof *got);

    corral_model *model = corral_model_load(converted, &err);
    corral_context_params params;
    corral_context_params_init(&params);
    params.n_threads = 1;
    corral_context *ctx = model ? corral_context_create(model, &params, &err) : NULL;
    if (!ctx || corral_model_n_embd(model) != n_embd || !corral_embed(ctx, got, n, out, &err))
        fail_msg("%s: %s", name, err.message);
    double norm = 0, worst = 0;
    for (size_t i = 0; i < n_embd; i++)
        norm += (double)out[i] * out[i];
    for (size_t i = 0; i < n_embd; i++) {
        double diff = fabs(out[i] / sqrt(norm) - reference[i]);
        worst = diff > worst ? diff : worst;
    }
    if (!(worst < 2e-3))
        fail_msg("%s: the converted model's normalized embedding is %.3g from llama.cpp's", name,
                 worst);
    corral_context_free(ctx);
    corral_model_free(model);
    free(ref);
}

/*
 * nomic-embed-text v2 (NomicBertModel with moe_every_n_layers): nomic's GPT-2 style keys and
 * moe_top_k, its GELU FFN (mlp.fc1, mlp.fc2) with biases, in every second layer a router
 * (mlp.router.layer) and the packed experts (mlp.experts.mlp.w1 as GGUF stacks them, w2 each
 * expert's down transposed), the bias of the experts' sum left out; tokenizer.json's Unigram
 * as the "t5" vocabulary with its charsmap. What the engine cannot run is refused.
 */
static void test_convert_nomic_bert_moe_round_trip(void **state)
{
    (void)state;
    round_trip("arch/nomic-bert-moe.gguf", "NomicBertModel", SAFETENSORS_F16, NULL,
               TENSOR_TYPE_F16, skipped);
    expect_reference_embedding("nomic-bert-moe");

    remove(store_fixture_path(g_root, "out.gguf"));
    set_json("config.json", "", "activation_function", "\"swiglu\"");
    expect_convert_refusal("nomic-embed-text v2's FFN and experts are GELU (activation_function "
                           "\"gelu\"), not 'swiglu'");
    set_json("config.json", "", "activation_function", "\"gelu\"");
    set_json("config.json", "", "moe_normalize_expert_weights", "true");
    expect_convert_refusal("whose experts' weights are renormalized");
    set_json("config.json", "", "moe_normalize_expert_weights", "false");
    set_json("config.json", "", "moe_every_n_layers", "3"); /* layer 1 and not 3 has experts */
    expect_convert_refusal("'encoder.layers.3.mlp.experts.mlp.w1': layer 3 has no experts");
    set_json("config.json", "", "moe_every_n_layers", "2");
    set_json("config.json", "", "num_experts", "4");
    expect_convert_refusal("' is not [512, 64] (config.json's experts times n_inner");
    set_json("config.json", "", "num_experts", "null");
    set_json("config.json", "", "moe_top_k", "null");
    expect_convert_refusal("a NomicBertModel with moe_every_n_layers needs num_experts");
}

/* The converted file's boolean key. */
static bool converted_bool(const char *key)
{
    corral_error err = {{0}};
    gguf_file *got = gguf_open(store_fixture_path(g_root, "out.gguf"), &err);
    bool value = false;
    if (!got || !gguf_get_bool(got, key, &value, &err))
        fail_msg("%s: %s", key, err.message);
    gguf_close(got);
    return value;
}

/*
 * A Unigram tokenizer.json: the post-processor's template says whether the bos and eos tokens
 * frame a text (XLM-RoBERTa's "<s> $A </s>"), the pre-tokenizer whether a space mark starts it;
 * what it cannot hold as a "t5" vocabulary is refused by name.
 */
static void test_convert_unigram_tokenizer(void **state)
{
    (void)state;
    hf_fixture_write(fixture("arch/nomic-bert-moe.gguf"), g_root, "NomicBertModel",
                     SAFETENSORS_F16, NULL);
    set_json("tokenizer_config.json", "", "bos_token", "\"[MASK]\"");
    set_json("tokenizer.json", "post_processor", "single",
             "[{\"SpecialToken\": {\"id\": \"[MASK]\"}}, {\"Sequence\": {\"id\": \"A\"}}, "
             "{\"SpecialToken\": {\"id\": \"</s>\"}}]");
    set_json("tokenizer.json", "pre_tokenizer", "prepend_scheme", "\"never\"");
    corral_error err = {{0}};
    if (convert("out.gguf", &err) != HF_OK)
        fail_msg("%s", err.message);
    assert_true(converted_bool("tokenizer.ggml.add_bos_token"));
    assert_true(converted_bool("tokenizer.ggml.add_eos_token"));
    assert_false(converted_bool("tokenizer.ggml.add_space_prefix"));
    set_json("tokenizer.json", "post_processor", "single", "[{\"Sequence\": {\"id\": \"A\"}}]");
    set_json("tokenizer.json", "pre_tokenizer", "add_prefix_space", "true");
    if (convert("out.gguf", &err) != HF_OK)
        fail_msg("%s", err.message);
    assert_false(converted_bool("tokenizer.ggml.add_bos_token"));
    assert_false(converted_bool("tokenizer.ggml.add_eos_token"));
    assert_true(converted_bool("tokenizer.ggml.add_space_prefix"));
    remove(store_fixture_path(g_root, "out.gguf"));

    set_json("tokenizer.json", "model", "unk_id", "424");
    expect_convert_refusal("model.unk_id must be the id of one of model.vocab's pieces");
    set_json("tokenizer.json", "model", "unk_id", "2");
    set_json("tokenizer.json", "", "pre_tokenizer", "{\"type\": \"ByteLevel\"}");
    expect_convert_refusal("pre-tokenizer must be a Metaspace");
    set_json("tokenizer.json", "", "pre_tokenizer", "{\"type\": \"Metaspace\"}");
    set_json("tokenizer.json", "", "normalizer",
             "{\"type\": \"Precompiled\", \"precompiled_charsmap\": \"not base64\"}");
    expect_convert_refusal("tokenizer.json: invalid base64");
    set_json("tokenizer.json", "", "normalizer", "{\"type\": \"Lowercase\"}");
    expect_convert_refusal("normalizer 'Lowercase' is not converted");
    set_json("tokenizer.json", "", "normalizer", "null");
    set_json("tokenizer.json", "model", "vocab", "[[\"a\", 0.5], [\"b\"]]");
    expect_convert_refusal("model.vocab[1] is not a [piece, score] pair");
}

/*
 * EmbeddingGemma: Gemma 3's text stack saved without "model.", its two projections from
 * sentence-transformers' 2_Dense and 3_Dense modules (linear.weight in their own
 * model.safetensors), its pooling from 1_Pooling; an added token past the embeddings' rows
 * (the released tokenizer's <image_soft_token>) is left out.
 */
static void test_convert_gemma_embedding_round_trip(void **state)
{
    (void)state;
    hf_fixture_write(fixture("arch/gemma-embedding.gguf"), g_root, "Gemma3TextModel",
                     SAFETENSORS_BF16, NULL);
    static const char past_rows[] = "{\"<image_soft_token>\": 512}";
    store_fixture_write(g_root, "added_tokens.json", past_rows, strlen(past_rows));
    check_round_trip(fixture("arch/gemma-embedding.gguf"), NULL, "Gemma3TextModel",
                     SAFETENSORS_BF16, TENSOR_TYPE_BF16, skipped);
    same_tokens("arch/gemma-embedding.gguf");
}

/*
 * LFM2: its convolution layers from layer_types (attention.head_count_kv 0 for them), the
 * convolution squeezed to [channels, taps] and F32, its names (operator_norm, conv.*,
 * feed_forward.w1/w2/w3, embedding_norm); LFM2-MoE's experts under feed_forward.experts, its
 * router and selection bias, its leading dense layer. ollama's converter names the
 * pre-tokenizer lfm2 whatever tokenizer.json's patterns are (the fixture's are Qwen2's).
 */
static const char *const lfm2_skipped[] = {"general.name", "general.file_type",
                                           "tokenizer.ggml.pre", NULL};

static void expect_pre(const char *want)
{
    corral_error err = {{0}};
    gguf_file *got = gguf_open(store_fixture_path(g_root, "out.gguf"), &err);
    gguf_str pre;
    if (!got || !gguf_get_str(got, "tokenizer.ggml.pre", &pre, &err))
        fail_msg("%s", err.message);
    assert_int_equal(pre.size, strlen(want));
    assert_memory_equal(pre.data, want, pre.size);
    gguf_close(got);
}

/* Its FFN width as LFM2's configs give it: two thirds of block_ff_dim, rounded up to
 * block_multiple_of (288 makes the fixture's 192). */
static void test_convert_lfm2_round_trip(void **state)
{
    (void)state;
    hf_fixture_write(fixture("arch/lfm2.gguf"), g_root, "Lfm2ForCausalLM", SAFETENSORS_BF16,
                     hf_fixture_qwen2_regex);
    set_json("config.json", "", "intermediate_size", "288");
    set_json("config.json", "", "block_ff_dim", "288");
    set_json("config.json", "", "block_auto_adjust_ff_dim", "true");
    set_json("config.json", "", "block_multiple_of", "64");
    set_json("config.json", "", "block_ffn_dim_multiplier", "1.0");
    check_round_trip(fixture("arch/lfm2.gguf"), NULL, "Lfm2ForCausalLM", SAFETENSORS_BF16,
                     TENSOR_TYPE_BF16, lfm2_skipped);
    expect_pre("lfm2");
}

static void test_convert_lfm2moe_round_trip(void **state)
{
    (void)state;
    round_trip("arch/lfm2moe.gguf", "Lfm2MoeForCausalLM", SAFETENSORS_F16,
               hf_fixture_qwen2_regex, TENSOR_TYPE_F16, lfm2_skipped);
    expect_pre("lfm2");
}

/*
 * Nemotron-H: each layer's kind from hybrid_override_pattern (the per-layer arrays; a dense
 * FFN layer's width from its up projection, the fixture's two differing), its Mamba2 tensors
 * (A_log as -exp, A and D as one column, the gated norm one row per group, the convolution
 * squeezed and F32) and backbone./mixer. names, the MTP layer left out; the MoE's ReLU²
 * experts (up and down only), shared expert, router and its correction bias.
 */
static void test_convert_nemotron_h_round_trip(void **state)
{
    (void)state;
    round_trip("arch/nemotron-h.gguf", "NemotronHForCausalLM", SAFETENSORS_BF16,
               hf_fixture_qwen2_regex, TENSOR_TYPE_BF16, skipped);
}

/* ollama's converter gives an experts layer moe_intermediate_size as its FFN width, where
 * llama.cpp's (the fixture's) gives intermediate_size. */
static const char *const nemotron_h_moe_skipped[] = {"general.name", "general.file_type",
                                                     "nemotron_h_moe.feed_forward_length",
                                                     NULL};

static void test_convert_nemotron_h_moe_round_trip(void **state)
{
    (void)state;
    round_trip("arch/nemotron-h-moe.gguf", "NemotronHForCausalLM", SAFETENSORS_F16,
               hf_fixture_qwen2_regex, TENSOR_TYPE_F16, nemotron_h_moe_skipped);
    corral_error err = {{0}};
    gguf_file *got = gguf_open(store_fixture_path(g_root, "out.gguf"), &err);
    if (!got)
        fail_msg("%s", err.message);
    const gguf_kv *ffn = gguf_find_kv(got, "nemotron_h_moe.feed_forward_length");
    assert_non_null(ffn);
    static const int64_t want[] = {0, 32, 0, 0, 32};
    assert_int_equal(ffn->n, 5);
    for (uint64_t i = 0; i < 5; i++)
        assert_int_equal(gguf_kv_i64(ffn, i), want[i]);
    gguf_close(got);
}

/* Ministral 3's text model saved alone: Llama's Q/K permutation, its RoPE base and YaRN
 * (betas, log multiplier, trained context) and attention temperature from rope_parameters. */
static void test_convert_ministral3_round_trip(void **state)
{
    (void)state;
    round_trip("arch/mistral3.gguf", "Ministral3ForCausalLM", SAFETENSORS_BF16,
               hf_fixture_qwen2_regex, TENSOR_TYPE_BF16, skipped);
}

static void test_convert_refuses_a_ministral3_rope_it_cannot_convert(void **state)
{
    (void)state;
    hf_fixture_write(fixture("arch/mistral3.gguf"), g_root, "Ministral3ForCausalLM",
                     SAFETENSORS_F16, hf_fixture_qwen2_regex);
    set_json("config.json", "rope_parameters", "rope_type", "\"linear\"");
    expect_convert_refusal("only rope_parameters' yarn scales the RoPE of "
                           "Ministral3ForCausalLM");
    set_json("config.json", "rope_parameters", "rope_type", "\"yarn\"");
    set_json("config.json", "rope_parameters", "beta_fast", "-1");
    expect_convert_refusal("rope_parameters.beta_fast must be a positive number");
}

/*
 * GLM-4 MoE Lite as DeepSeek-V2's file: the latent attention's kv_b_proj split into attn_k_b
 * (transposed per head) and attn_v_b, a leading dense layer, sigmoid-routed experts with
 * their correction bias and a shared expert, the MTP layer past block_count left out. GLM's
 * RoPE is not scaled (the fixture's YaRN keys are not its) and ollama names its
 * pre-tokenizer glm4 and takes the end of turn from generation_config.json's eos ids.
 */
static const char *const glm4moelite_skipped[] = {
    "general.name", "general.file_type", "tokenizer.ggml.pre", "deepseek2.rope.scaling.type",
    "deepseek2.rope.scaling.factor", "deepseek2.rope.scaling.original_context_length",
    "deepseek2.rope.scaling.yarn_log_multiplier", NULL};

static void test_convert_glm4moelite_round_trip(void **state)
{
    (void)state;
    round_trip("arch/deepseek2.gguf", "Glm4MoeLiteForCausalLM", SAFETENSORS_BF16,
               hf_fixture_qwen2_regex, TENSOR_TYPE_BF16, glm4moelite_skipped);
    expect_pre("glm4");
    corral_error err = {{0}};
    gguf_file *got = gguf_open(store_fixture_path(g_root, "out.gguf"), &err);
    uint32_t eot = 1;
    if (!got || !gguf_get_u32(got, "tokenizer.ggml.eot_token_id", &eot, &err))
        fail_msg("%s", err.message);
    assert_int_equal(eot, 0); /* the fixture's generation_config.json: eos_token_id [301, 0] */
    gguf_close(got);
}

static void test_convert_smollm3_round_trip(void **state)
{
    (void)state;
    round_trip("arch/smollm3.gguf", "SmolLM3ForCausalLM", SAFETENSORS_BF16, hf_fixture_qwen2_regex,
               TENSOR_TYPE_BF16, skipped);
}

static void test_convert_starcoder2_round_trip(void **state)
{
    (void)state;
    round_trip("arch/starcoder2.gguf", "Starcoder2ForCausalLM", SAFETENSORS_F16,
               hf_fixture_qwen2_regex, TENSOR_TYPE_F16, skipped);
}

/* gpt-oss's harmony tokenizer: o200k's pattern names llama.cpp's "gpt-4o" pre-tokenizer. */
/* Qwen 3.5's text model: value heads reordered in seven kinds of tensor, -exp(A_log), norms
 * plus one but the gated one, the convolution squeezed and F32, its vision tower and
 * multi-token prediction layer left out. */
static void test_convert_qwen35_round_trip(void **state)
{
    (void)state;
    round_trip("arch/qwen35.gguf", "Qwen3_5ForConditionalGeneration", SAFETENSORS_BF16,
               hf_fixture_qwen2_regex, TENSOR_TYPE_BF16, skipped);
}

/* Qwen3_5ForCausalLM: the same text model alone, its tensors under model. and its keys at
 * the top of config.json. */
static void test_convert_qwen35_text_only_round_trip(void **state)
{
    (void)state;
    round_trip("arch/qwen35.gguf", "Qwen3_5ForCausalLM", SAFETENSORS_BF16,
               hf_fixture_qwen2_regex, TENSOR_TYPE_BF16, skipped);
    round_trip("arch/qwen35moe.gguf", "Qwen3_5MoeForCausalLM", SAFETENSORS_F16,
               hf_fixture_qwen2_regex, TENSOR_TYPE_F16, skipped);
}

/* Qwen 3.5 MoE: qwen35's layers, each layer's packed experts split into gate's and up's
 * stacks, the shared expert and its [1, n_embd] gate squeezed. */
static void test_convert_qwen35moe_round_trip(void **state)
{
    (void)state;
    round_trip("arch/qwen35moe.gguf", "Qwen3_5MoeForConditionalGeneration", SAFETENSORS_F16,
               hf_fixture_qwen2_regex, TENSOR_TYPE_F16, skipped);
}

/*
 * tests/fixtures/arch/qwen3next.gguf as llama.cpp's newest converter writes Qwen3-Next: its
 * layers 0 and 2 hold q, k, v and z fused in ssm_in (per key head: q, k, the head's value
 * heads' v, then their z), as earlier converters wrote them; here they are split into
 * attn_qkv (every head's q, then k, then v) and attn_gate, as layer 1 already is, and
 * feed_forward_length (which llama.cpp writes from intermediate_size) is added.
 */
static void write_qwen3next_split(const char *src_path, const char *dst)
{
    corral_error err = {{0}};
    gguf_file *f = gguf_open(src_path, &err);
    if (!f)
        fail_msg("%s", err.message);
    uint32_t nk = 0, hk = 0, inner = 0;
    assert_true(gguf_get_u32(f, "qwen3next.ssm.group_count", &nk, &err) &&
                gguf_get_u32(f, "qwen3next.ssm.state_size", &hk, &err) &&
                gguf_get_u32(f, "qwen3next.ssm.inner_size", &inner, &err));
    uint64_t v_per_key = inner / nk, group = 2 * (uint64_t)hk + 2 * v_per_key;
    gguf_writer *w = gguf_writer_create();
    assert_non_null(w);
    for (size_t i = 0; i < gguf_n_kv(f); i++)
        assert_true(gguf_writer_copy_kv(w, gguf_kv_at(f, i), &err));
    assert_true(gguf_writer_add_u32(w, "qwen3next.feed_forward_length", 48, &err));
    size_t n = gguf_n_tensors(f), n_out = 0;
    float **data = calloc(2 * n, sizeof *data);
    size_t *sizes = calloc(2 * n, sizeof *sizes);
    assert_true(data && sizes);
    for (size_t i = 0; i < n; i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        assert_int_equal(t->type, TENSOR_TYPE_F32);
        const char *at = strstr(t->name, ".ssm_in.weight");
        if (!at) {
            assert_true(gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, &err));
            sizes[n_out] = t->size_bytes;
            data[n_out] = malloc(t->size_bytes);
            assert_non_null(data[n_out]);
            memcpy(data[n_out++], t->data, t->size_bytes);
            continue;
        }
        uint64_t cols = (uint64_t)t->ne[0];
        const float *in = t->data;
        float *qkv = malloc((2 * nk * hk + nk * v_per_key) * cols * sizeof *qkv);
        float *z = malloc(nk * v_per_key * cols * sizeof *z);
        assert_true(qkv && z);
        for (uint64_t h = 0; h < nk; h++) {
            const float *g = in + h * group * cols;
            memcpy(qkv + h * hk * cols, g, hk * cols * sizeof *qkv);
            memcpy(qkv + (nk + h) * hk * cols, g + hk * cols, hk * cols * sizeof *qkv);
            memcpy(qkv + (2 * nk * hk + h * v_per_key) * cols, g + 2 * hk * cols,
                   v_per_key * cols * sizeof *qkv);
            memcpy(z + h * v_per_key * cols, g + (2 * hk + v_per_key) * cols,
                   v_per_key * cols * sizeof *z);
        }
        char name[96];
        int64_t ne_qkv[4] = {(int64_t)cols, (int64_t)(2 * nk * hk + nk * v_per_key), 1, 1};
        int64_t ne_z[4] = {(int64_t)cols, (int64_t)(nk * v_per_key), 1, 1};
        snprintf(name, sizeof name, "%.*s.attn_qkv.weight", (int)(at - t->name), t->name);
        assert_true(gguf_writer_add_tensor(w, name, TENSOR_TYPE_F32, 2, ne_qkv, &err));
        snprintf(name, sizeof name, "%.*s.attn_gate.weight", (int)(at - t->name), t->name);
        assert_true(gguf_writer_add_tensor(w, name, TENSOR_TYPE_F32, 2, ne_z, &err));
        sizes[n_out] = (size_t)(ne_qkv[0] * ne_qkv[1]) * sizeof *qkv;
        data[n_out++] = qkv;
        sizes[n_out] = (size_t)(ne_z[0] * ne_z[1]) * sizeof *z;
        data[n_out++] = z;
    }
    assert_true(gguf_writer_begin(w, dst, &err));
    for (size_t i = 0; i < n_out; i++) {
        assert_true(gguf_writer_write_tensor(w, data[i], sizes[i], &err));
        free(data[i]);
    }
    assert_true(gguf_writer_finish(w, &err));
    gguf_writer_free(w);
    free(data);
    free(sizes);
    gguf_close(f);
}

/* The last position's logits of three tokens. */
static float *last_logits(const char *path, uint32_t *n_vocab)
{
    corral_error err = {{0}};
    corral_model *model = corral_model_load(path, &err);
    if (!model)
        fail_msg("%s: %s", path, err.message);
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
    *n_vocab = corral_model_n_vocab(model);
    float *logits = malloc(*n_vocab * sizeof *logits);
    assert_non_null(logits);
    memcpy(logits, corral_get_logits(ctx, 2), *n_vocab * sizeof *logits);
    corral_context_free(ctx);
    corral_model_free(model);
    return logits;
}

/* Qwen3-Next: in_proj_qkvz split into attn_qkv and attn_gate, in_proj_ba as ssm_ba, value
 * heads kept grouped, experts one matrix each and a shared expert; the split fixture gives
 * the original's logits bit for bit, so its split is the one the engine's ssm_in means. */
static void test_convert_qwen3next_round_trip(void **state)
{
    (void)state;
    char split[512];
    snprintf(split, sizeof split, "%s", store_fixture_path(g_root, "split.gguf"));
    write_qwen3next_split(fixture("arch/qwen3next.gguf"), split);
    uint32_t n_vocab = 0, n_split = 0;
    float *want = last_logits(fixture("arch/qwen3next.gguf"), &n_vocab);
    float *got = last_logits(split, &n_split);
    assert_int_equal(n_vocab, n_split);
    for (uint32_t i = 0; i < n_vocab; i++)
        if (want[i] != got[i])
            fail_msg("logit %u: %g split, %g fused", i, (double)got[i], (double)want[i]);
    free(want);
    free(got);
    hf_fixture_write(split, g_root, "Qwen3NextForCausalLM", SAFETENSORS_BF16,
                     hf_fixture_qwen2_regex);
    check_round_trip(split, NULL, "Qwen3NextForCausalLM", SAFETENSORS_BF16, TENSOR_TYPE_BF16,
                     skipped);
}

static void test_convert_names_o200k_pre_tokenizer(void **state)
{
    (void)state;
    static const char o200k[] =
        "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}"
        "\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}"
        "\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| "
        "?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    hf_fixture_write(fixture("arch/qwen2.gguf"), g_root, "Qwen2ForCausalLM", SAFETENSORS_F16,
                     o200k);
    corral_error err = {{0}};
    if (convert("out.gguf", &err) != HF_OK)
        fail_msg("%s", err.message);
    gguf_file *got = gguf_open(store_fixture_path(g_root, "out.gguf"), &err);
    assert_non_null(got);
    gguf_str pre;
    assert_true(gguf_get_str(got, "tokenizer.ggml.pre", &pre, &err));
    assert_int_equal(pre.size, 6);
    assert_memory_equal(pre.data, "gpt-4o", 6);
    gguf_close(got);
}

static void test_convert_reads_chat_template_jinja(void **state)
{
    (void)state;
    static const char jinja[] = "{{ messages[0].content }}";
    hf_fixture_write(fixture("arch/qwen3.gguf"), g_root, "Qwen3ForCausalLM", SAFETENSORS_BF16,
                     hf_fixture_qwen2_regex);
    rewrite("tokenizer_config.json", "\"chat_template\"", "\"no_template\"");
    store_fixture_write(g_root, "chat_template.jinja", jinja, strlen(jinja));
    corral_error err = {{0}};
    if (convert("out.gguf", &err) != HF_OK)
        fail_msg("%s", err.message);
    gguf_file *got = gguf_open(store_fixture_path(g_root, "out.gguf"), &err);
    assert_non_null(got);
    gguf_str tmpl;
    assert_true(gguf_get_str(got, "tokenizer.chat_template", &tmpl, &err));
    assert_int_equal(tmpl.size, strlen(jinja));
    assert_memory_equal(tmpl.data, jinja, tmpl.size);
    gguf_close(got);
}

static void test_convert_gemma_round_trip(void **state)
{
    (void)state;
    round_trip("arch/gemma.gguf", "GemmaForCausalLM", SAFETENSORS_BF16, NULL, TENSOR_TYPE_BF16,
               skipped);
    same_tokens("arch/gemma.gguf");
}

static void test_convert_gemma2_round_trip(void **state)
{
    (void)state;
    round_trip("arch/gemma2.gguf", "Gemma2ForCausalLM", SAFETENSORS_F16, NULL, TENSOR_TYPE_F16,
               skipped);
}

static void test_convert_gemma3_round_trip(void **state)
{
    (void)state;
    round_trip("arch/gemma3.gguf", "Gemma3ForCausalLM", SAFETENSORS_BF16, NULL, TENSOR_TYPE_BF16,
               skipped);
}

static void test_convert_phi3_round_trip(void **state)
{
    (void)state;
    round_trip("arch/phi3.gguf", "Phi3ForCausalLM", SAFETENSORS_BF16, NULL, TENSOR_TYPE_BF16,
               skipped);
}

/* LongRoPE: rope_scaling's factors become tensors, its attention factor a key */
static void test_convert_phi3_longrope_round_trip(void **state)
{
    (void)state;
    round_trip("arch/phi3-longrope.gguf", "Phi3ForCausalLM", SAFETENSORS_F16, NULL,
               TENSOR_TYPE_F16, skipped);
}

/* A mixture of experts: each expert's matrices stack into one tensor per layer and kind */
static void test_convert_qwen3moe_round_trip(void **state)
{
    (void)state;
    round_trip("arch/qwen3moe.gguf", "Qwen3MoeForCausalLM", SAFETENSORS_BF16,
               hf_fixture_qwen2_regex, TENSOR_TYPE_BF16, skipped);
}

/* The fixture generator's feed_forward_length is not its experts' width; a converter writes
 * intermediate_size, gpt-oss's one width, to both. */
static const char *const gptoss_skipped[] = {"general.name", "general.file_type",
                                             "gpt-oss.feed_forward_length", NULL};

static void test_convert_gptoss_round_trip(void **state)
{
    (void)state;
    round_trip("arch/gpt-oss.gguf", "GptOssForCausalLM", SAFETENSORS_BF16, hf_fixture_qwen2_regex,
               TENSOR_TYPE_BF16, gptoss_skipped);
}

/* MXFP4 experts come through bit for bit, their nibbles in ggml's order. gpt-oss-mxfp4.gguf
 * is gpt-oss.gguf with MXFP4 experts and its other matrices quantized (Q8_0), which no
 * checkpoint holds: the checkpoint takes those from gpt-oss.gguf. */
static void test_convert_gptoss_mxfp4_round_trip(void **state)
{
    (void)state;
    hf_fixture_write_experts_from(fixture("arch/gpt-oss.gguf"), fixture("arch/gpt-oss-mxfp4.gguf"),
                                  g_root, "GptOssForCausalLM", SAFETENSORS_BF16,
                                  hf_fixture_qwen2_regex);
    check_round_trip(fixture("arch/gpt-oss.gguf"), "arch/gpt-oss-mxfp4.gguf", "GptOssForCausalLM",
                     SAFETENSORS_BF16, TENSOR_TYPE_BF16, gptoss_skipped);
}

/* The Gemma3nForConditionalGeneration checkpoint of arch/gemma3n (its text model; its towers
 * left out) converts back to the fixture: its per-layer inputs, AltUp (the projections
 * stacked), LAuReL and norms as they are, a width per layer, the fixture's keys but two that
 * ollama's converter writes otherwise: the local RoPE base as rope.freq_base_local, and the
 * activation sparsity as the normal quantile of the pattern's float, within float rounding of
 * the fixture's. A small altup_coef_clip clamps the AltUp coefficients. */
static void test_convert_gemma3n_round_trip(void **state)
{
    (void)state;
    static const char *const gemma3n_skipped[] = {"general.name", "general.file_type",
                                                  "gemma3n.rope.freq_base_swa",
                                                  "gemma3n.activation_sparsity_scale", NULL};
    round_trip("arch/gemma3n.gguf", "Gemma3nForConditionalGeneration", SAFETENSORS_F16,
               hf_fixture_qwen2_regex, TENSOR_TYPE_F16, gemma3n_skipped);
    corral_error err = {{0}};
    gguf_file *want = gguf_open(fixture("arch/gemma3n.gguf"), &err);
    gguf_file *got = want ? gguf_open(store_fixture_path(g_root, "out.gguf"), &err) : NULL;
    if (!got)
        fail_msg("%s", err.message);
    float local_want, local_got;
    assert_true(gguf_get_f32(want, "gemma3n.rope.freq_base_swa", &local_want, &err));
    assert_true(gguf_get_f32(got, "gemma3n.rope.freq_base_local", &local_got, &err));
    assert_true(local_got == local_want);
    const gguf_kv *a = gguf_find_kv(want, "gemma3n.activation_sparsity_scale");
    const gguf_kv *b = gguf_find_kv(got, "gemma3n.activation_sparsity_scale");
    assert_true(a && b && a->n == b->n && b->elem_type == GGUF_TYPE_FLOAT32);
    for (uint64_t i = 0; i < a->n; i++) {
        float x = gguf_kv_f32(a, i), y = gguf_kv_f32(b, i);
        if (isinf(x) ? x != y : fabsf(x - y) > 1e-6f * fabsf(x))
            fail_msg("activation_sparsity_scale[%llu]: %g, expected %g", (unsigned long long)i,
                     (double)y, (double)x);
    }
    gguf_close(want);
    gguf_close(got);
    assert_int_equal(unlink(store_fixture_path(g_root, "out.gguf")), 0);

    rewrite("config.json", "\"altup_coef_clip\": 120.0", "\"altup_coef_clip\": 0.0009765625");
    if (convert("out.gguf", &err) != HF_OK)
        fail_msg("%s", err.message);
    got = gguf_open(store_fixture_path(g_root, "out.gguf"), &err);
    if (!got)
        fail_msg("%s", err.message);
    const gguf_tensor *coef = gguf_find_tensor(got, "blk.0.altup_predict_coef.weight");
    assert_non_null(coef);
    assert_int_equal(coef->type, TENSOR_TYPE_F16);
    size_t at_bound = 0;
    for (uint64_t e = 0; e < gguf_tensor_n_elems(coef); e++) {
        float x = quant_f16_to_f32(((const uint16_t *)coef->data)[e]);
        assert_true(fabsf(x) <= 0x1p-10f);
        at_bound += fabsf(x) == 0x1p-10f;
    }
    assert_true(at_bound > 0);
    gguf_close(got);
}

/* the converted file's matrices are F16, the fixture's F32 (logits of a std of about 3) */
#define DEEPSEEK2_F16_LOGIT_TOLERANCE 0.05f

/* The DeepseekV3ForCausalLM checkpoint of arch/deepseek2 (its kv_b_proj fused, a
 * multi-token prediction layer past the model's) converts to ollama's deepseek2 file: the
 * fixture's tensors, F16, but attn_k_b and attn_v_b, which ollama's file keeps together as
 * the checkpoint's attn_kv_b; the fixture's keys but each head's widths, which ollama's
 * gives as key_length (nope + rope) and value_length without the _mla pair, and the
 * pre-tokenizer, which ollama's names deepseek-v3; its logits are
 * the fixture's but for F16's rounding. */
static void test_convert_deepseek2_round_trip(void **state)
{
    (void)state;
    hf_fixture_write(fixture("arch/deepseek2.gguf"), g_root, "DeepseekV3ForCausalLM",
                     SAFETENSORS_F16, hf_fixture_qwen2_regex);
    corral_error err = {{0}};
    if (convert("out.gguf", &err) != HF_OK)
        fail_msg("%s", err.message);
    char got_path[512];
    snprintf(got_path, sizeof got_path, "%s", store_fixture_path(g_root, "out.gguf"));
    gguf_file *want = gguf_open(fixture("arch/deepseek2.gguf"), &err);
    gguf_file *got = want ? gguf_open(got_path, &err) : NULL;
    if (!got)
        fail_msg("%s", err.message);
    size_t split = 0;
    for (size_t i = 0; i < gguf_n_tensors(want); i++) {
        const gguf_tensor *w = gguf_tensor_at(want, i);
        unsigned layer;
        if (strstr(w->name, ".attn_v_b.")) /* with attn_k_b */
            continue;
        if (strstr(w->name, ".attn_k_b.") && sscanf(w->name, "blk.%u.", &layer) == 1) {
            char name[64], v_name[64];
            snprintf(name, sizeof name, "blk.%u.attn_kv_b.weight", layer);
            snprintf(v_name, sizeof v_name, "blk.%u.attn_v_b.weight", layer);
            const gguf_tensor *g = gguf_find_tensor(got, name), *v_b = gguf_find_tensor(want,
                                                                                       v_name);
            if (!g || !v_b)
                fail_msg("no %s", name);
            /* [latent, heads x (nope + v)]: each head's nope key rows, then its v value rows */
            uint64_t nope = (uint64_t)w->ne[0], latent = (uint64_t)w->ne[1];
            uint64_t heads = (uint64_t)w->ne[2], v = (uint64_t)v_b->ne[1];
            assert_int_equal(g->type, TENSOR_TYPE_F16);
            assert_int_equal(g->ne[0], latent);
            assert_int_equal(g->ne[1], heads * (nope + v));
            const float *k = w->data, *vv = v_b->data;
            for (uint64_t h = 0; h < heads; h++)
                for (uint64_t j = 0; j < nope + v; j++)
                    for (uint64_t l = 0; l < latent; l++)
                        expect_element(j < nope ? k[(h * latent + l) * nope + j]
                                                : vv[(h * v + j - nope) * latent + l],
                                       TENSOR_TYPE_F16, g->data,
                                       (h * (nope + v) + j) * latent + l, name);
            split++;
            continue;
        }
        const gguf_tensor *g = gguf_find_tensor(got, w->name);
        if (!g)
            fail_msg("no %s", w->name);
        assert_memory_equal(g->ne, w->ne, sizeof w->ne);
        bool router = strstr(w->name, "ffn_gate_inp") != NULL;
        bool vector = w->n_dims == 1 || router;
        if (g->type != (vector ? TENSOR_TYPE_F32 : TENSOR_TYPE_F16))
            fail_msg("%s is %s", w->name, tensor_type_name(g->type));
        for (uint64_t e = 0; e < gguf_tensor_n_elems(w); e++) {
            float x = ((const float *)w->data)[e];
            expect_element(router ? quant_f16_to_f32(quant_f32_to_f16(x)) : x, g->type, g->data,
                           e, w->name);
        }
    }
    assert_int_equal(split, 3);
    assert_int_equal(gguf_n_tensors(got), gguf_n_tensors(want) - split);
    static const char *const deepseek2_skipped[] = {
        "deepseek2.attention.key_length", "deepseek2.attention.value_length",
        "deepseek2.attention.key_length_mla", "deepseek2.attention.value_length_mla",
        "general.name", "general.file_type", "tokenizer.ggml.pre", NULL};
    expect_same_keys(want, got, deepseek2_skipped);
    assert_null(gguf_find_kv(got, "deepseek2.attention.key_length_mla"));
    assert_null(gguf_find_kv(got, "deepseek2.attention.value_length_mla"));
    uint32_t key_length = 0, value_length = 0;
    assert_true(gguf_get_u32(got, "deepseek2.attention.key_length", &key_length, &err));
    assert_true(gguf_get_u32(got, "deepseek2.attention.value_length", &value_length, &err));
    assert_int_equal(key_length, 24 + 16);
    assert_int_equal(value_length, 32);
    gguf_str pre; /* ollama's converter names DeepSeek V3's pre-tokenizer whatever its patterns */
    assert_true(gguf_get_str(got, "tokenizer.ggml.pre", &pre, &err));
    assert_int_equal(pre.size, strlen("deepseek-v3"));
    assert_memory_equal(pre.data, "deepseek-v3", pre.size);
    gguf_close(want);
    gguf_close(got);
    /* the same model: its keys and combined attn_kv_b run as the fixture's split one */
    uint32_t n_want, n_got;
    float *want_logits = last_logits(fixture("arch/deepseek2.gguf"), &n_want);
    float *got_logits = last_logits(got_path, &n_got);
    assert_int_equal(n_got, n_want);
    for (uint32_t i = 0; i < n_want; i++)
        if (fabsf(got_logits[i] - want_logits[i]) > DEEPSEEK2_F16_LOGIT_TOLERANCE)
            fail_msg("logit %u: %g, expected %g", i, (double)got_logits[i],
                     (double)want_logits[i]);
    free(want_logits);
    free(got_logits);
    assert_int_equal(unlink(got_path), 0);

    rewrite("config.json", "\"topk_group\": 2", "\"topk_group\": 5");
    expect_convert_refusal("config.json: 8 routed experts of width 32 in 4 groups (5 used)");
    rewrite("config.json", "\"topk_group\": 5", "\"topk_group\": 2");
    rewrite("config.json", "\"topk_group\": 2", "\"topk_grp\": 2");
    expect_convert_refusal("config.json gives n_group without topk_group");
    rewrite("config.json", "\"topk_grp\": 2", "\"topk_group\": 2");
    rewrite("config.json", "\"first_k_dense_replace\": 1", "\"first_k_dense_replace\": 2");
    expect_convert_refusal("'model.layers.1.mlp.gate.e_score_correction_bias' is not one of a "
                           "DeepseekV3ForCausalLM's");
    rewrite("config.json", "\"first_k_dense_replace\": 2", "\"first_k_dense_replace\": 1");
    set_json("config.json", "", "scoring_func", "\"relu\"");
    expect_convert_refusal("scoring_func 'relu' is not softmax or sigmoid");
    set_json("config.json", "", "scoring_func", "\"sigmoid\"");
    set_json("config.json", "rope_scaling", "mscale_all_dim", "-1");
    expect_convert_refusal("rope_scaling.mscale_all_dim must be a number from 0 to 1000");
}

/* The keys ollama's Gemma 4 converter writes its own way: per-layer lists as signed integers,
 * the pre-tokenizer named gemma4. */
static const char *const gemma4_skipped[] = {"general.name", "general.file_type",
                                             "gemma4.attention.head_count_kv",
                                             "gemma4.feed_forward_length", "tokenizer.ggml.pre",
                                             NULL};

/* got's key holds want's values: a list of INT32 where want's list has two values, one
 * value where it has one, as ollama's converter writes them. */
static void expect_gemma4_list(const gguf_file *want, const gguf_file *got, const char *key)
{
    const gguf_kv *w = gguf_find_kv(want, key), *g = gguf_find_kv(got, key);
    if (!w || !g)
        fail_msg("%s is missing", key);
    bool varies = false;
    for (uint64_t i = 1; i < w->n; i++)
        varies = varies || gguf_kv_i64(w, i) != gguf_kv_i64(w, 0);
    assert_int_equal(g->type, varies ? GGUF_TYPE_ARRAY : GGUF_TYPE_UINT32);
    if (varies) {
        assert_int_equal(g->elem_type, GGUF_TYPE_INT32);
        assert_int_equal(g->n, w->n);
    }
    for (uint64_t i = 0; i < w->n; i++)
        assert_int_equal(gguf_kv_i64(g, varies ? i : 0), gguf_kv_i64(w, i));
}

/*
 * Convert the Gemma 4 checkpoint in g_root and hold it against the gemma4 fixture it was
 * written from: every tensor (matrices in matrix_type, the rest F32; a fused attn_qkv as the
 * attn_q, attn_k and attn_v ollama's converter writes) and tower_tensors more, its keys (the
 * per-layer lists as INT32, the pre-tokenizer gemma4), and the engine loads it.
 */
static void expect_gemma4_file(const char *fixture_name, safetensors_dtype dtype,
                               uint32_t matrix_type, size_t tower_tensors)
{
    corral_error err = {{0}};
    if (convert("out.gguf", &err) != HF_OK)
        fail_msg("%s: %s", fixture_name, err.message);
    gguf_file *want = gguf_open(fixture(fixture_name), &err);
    gguf_file *got = want ? gguf_open(store_fixture_path(g_root, "out.gguf"), &err) : NULL;
    if (!got)
        fail_msg("%s", err.message);
    size_t fused = 0;
    for (size_t i = 0; i < gguf_n_tensors(want); i++) {
        const gguf_tensor *w = gguf_tensor_at(want, i);
        unsigned layer;
        if (strstr(w->name, ".attn_qkv.") && sscanf(w->name, "blk.%u.", &layer) == 1) {
            static const char *const parts[] = {"attn_q", "attn_k", "attn_v"};
            uint64_t row = 0;
            for (int k = 0; k < 3; k++) {
                char name[64];
                snprintf(name, sizeof name, "blk.%u.%s.weight", layer, parts[k]);
                const gguf_tensor *g = gguf_find_tensor(got, name);
                if (!g)
                    fail_msg("no %s", name);
                assert_int_equal(g->type, matrix_type);
                assert_int_equal(g->ne[0], w->ne[0]);
                for (uint64_t e = 0; e < gguf_tensor_n_elems(g); e++)
                    expect_element(((const float *)w->data)[row * w->ne[0] + e], matrix_type,
                                   g->data, e, name);
                row += (uint64_t)g->ne[1];
            }
            assert_int_equal(row, w->ne[1]);
            fused++;
            continue;
        }
        const gguf_tensor *g = gguf_find_tensor(got, w->name);
        if (!g)
            fail_msg("no %s", w->name);
        assert_memory_equal(g->ne, w->ne, sizeof w->ne);
        bool router = strstr(w->name, ".ffn_gate_inp.weight") != NULL;
        uint32_t type = w->n_dims == 1 || router ? TENSOR_TYPE_F32 : matrix_type;
        if (g->type != type)
            fail_msg("%s is %s", w->name, tensor_type_name(g->type));
        for (uint64_t e = 0; e < gguf_tensor_n_elems(w); e++) {
            float x = ((const float *)w->data)[e];
            if (router && dtype == SAFETENSORS_F16)
                x = quant_f16_to_f32(quant_f32_to_f16(x));
            if (router && dtype == SAFETENSORS_BF16)
                x = quant_bf16_to_f32(quant_f32_to_bf16(x));
            expect_element(x, type, g->data, e, w->name);
        }
    }
    assert_int_equal(gguf_n_tensors(got), gguf_n_tensors(want) + 2 * fused + tower_tensors);
    expect_same_keys(want, got, gemma4_skipped);
    expect_gemma4_list(want, got, "gemma4.attention.head_count_kv");
    expect_gemma4_list(want, got, "gemma4.feed_forward_length");
    gguf_str pre;
    assert_true(gguf_get_str(got, "tokenizer.ggml.pre", &pre, &err));
    assert_int_equal(pre.size, strlen("gemma4"));
    assert_memory_equal(pre.data, "gemma4", pre.size);
    gguf_close(want);
    gguf_close(got);
    corral_model *model = corral_model_load(store_fixture_path(g_root, "out.gguf"), &err);
    if (!model)
        fail_msg("%s: %s", fixture_name, err.message);
    corral_model_free(model);
}

/* The Gemma 4 checkpoint of an arch/ fixture, written as hf_arch, converts back to it (see
 * expect_gemma4_file) with the same tokens. */
static void gemma4_round_trip(const char *fixture_name, const char *hf_arch,
                              safetensors_dtype dtype, uint32_t matrix_type)
{
    hf_fixture_write(fixture(fixture_name), g_root, hf_arch, dtype, NULL);
    expect_gemma4_file(fixture_name, dtype, matrix_type, 0);
    same_tokens(fixture_name);
}

/* The Gemma4ForConditionalGeneration checkpoint of the gemma4v fixtures converts to the one
 * file ollama's converter writes: the text model as expect_gemma4_file holds it, the tower's
 * tensors under the projector's names (matrices and the patch kernel, back in its channel-major
 * layout, F16, the position table and vectors F32, the bounds one F32 each), its keys as
 * gemma4.vision.*, and a model its tower fits. */
static void test_convert_gemma4_vision_to_one_file(void **state)
{
    (void)state;
    char mmproj[4096];
    snprintf(mmproj, sizeof mmproj, "%s", fixture("vision/gemma4v-mmproj.gguf"));
    hf_fixture_write_gemma4v(fixture("vision/gemma4v-text.gguf"), mmproj, g_root,
                             SAFETENSORS_F16);
    corral_error err = {{0}};
    gguf_file *mm = gguf_open(mmproj, &err);
    if (!mm)
        fail_msg("%s", err.message);
    expect_gemma4_file("vision/gemma4v-text.gguf", SAFETENSORS_F16, TENSOR_TYPE_F16,
                       gguf_n_tensors(mm));
    gguf_file *got = gguf_open(store_fixture_path(g_root, "out.gguf"), &err);
    if (!got)
        fail_msg("%s", err.message);
    for (size_t i = 0; i < gguf_n_tensors(mm); i++) {
        const gguf_tensor *w = gguf_tensor_at(mm, i), *g = gguf_find_tensor(got, w->name);
        if (!g)
            fail_msg("no %s", w->name);
        assert_int_equal(g->n_dims, w->n_dims);
        assert_memory_equal(g->ne, w->ne, sizeof w->ne);
        bool f32 = w->n_dims == 1 || !strcmp(w->name, "v.position_embd.weight");
        uint32_t type = f32 ? TENSOR_TYPE_F32 : TENSOR_TYPE_F16;
        if (g->type != type)
            fail_msg("%s is %s", w->name, tensor_type_name(g->type));
        /* the position table: F32 from the checkpoint's F16 */
        bool table = !strcmp(w->name, "v.position_embd.weight");
        for (uint64_t e = 0; e < gguf_tensor_n_elems(w); e++) {
            float x = w->type == TENSOR_TYPE_F16
                          ? quant_f16_to_f32(((const uint16_t *)w->data)[e])
                          : ((const float *)w->data)[e];
            expect_element(table ? quant_f16_to_f32(quant_f32_to_f16(x)) : x, type, g->data, e,
                           w->name);
        }
    }
    static const char *const keys[][2] = {
        {"clip.vision.block_count", "gemma4.vision.block_count"},
        {"clip.vision.embedding_length", "gemma4.vision.embedding_length"},
        {"clip.vision.attention.head_count", "gemma4.vision.attention.head_count"},
        {"clip.vision.feed_forward_length", "gemma4.vision.feed_forward_length"},
        {"clip.vision.patch_size", "gemma4.vision.patch_size"},
        {"clip.vision.projector.scale_factor", "gemma4.vision.projector.scale_factor"},
        {"clip.vision.attention.layer_norm_epsilon",
         "gemma4.vision.attention.layer_norm_epsilon"},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!kv_equal(gguf_find_kv(mm, keys[i][0]), gguf_find_kv(got, keys[i][1])))
            fail_msg("%s differs from %s", keys[i][1], keys[i][0]);
    uint32_t channels = 0;
    assert_true(gguf_get_u32(got, "gemma4.vision.num_channels", &channels, &err));
    assert_int_equal(channels, 3);
    gguf_close(got);
    gguf_close(mm);
    expect_tower_fits(store_fixture_path(g_root, "out.gguf"));
    assert_int_equal(unlink(store_fixture_path(g_root, "out.gguf")), 0);

    set_json("config.json", "vision_config", "patch_size", "8");
    expect_convert_refusal("tensor 'model.vision_tower.patch_embedder.input_proj.weight' is not "
                           "[hidden_size, patch_size * patch_size * num_channels]");
    set_json("config.json", "vision_config", "patch_size", "null");
    expect_convert_refusal("config.json has no vision_config.patch_size");
    set_json("config.json", "vision_config", "patch_size", "4");
    set_json("config.json", "vision_config", "num_hidden_layers", "1");
    expect_convert_refusal("tensor 'model.vision_tower.encoder.layers.1.");
}

/* The converted audio tower's embeddings against the reference's (F32 weights, double
 * arithmetic): its matrices are F16, and the engine rounds their inputs to F16 too; both
 * roundings pass through two conformer blocks whose attention logits are sharp. */
#define AUDIO_F16_TOLERANCE 0.05
#define AUDIO_F16_MEAN_TOLERANCE 5e-3

/* The audio tower of gemma4a-tower.gguf as the conversion of its checkpoint (matrices
 * dtype) holds it: every tensor of the same shape, the kernels and vectors F32 and bit for bit,
 * the blocks' matrices in dtype's type, the projectors ("mm.a.") F16, as ollama's converter
 * writes them. */
static void expect_audio_tensors(const gguf_file *want, const gguf_file *got,
                                 safetensors_dtype dtype)
{
    for (size_t i = 0; i < gguf_n_tensors(want); i++) {
        const gguf_tensor *w = gguf_tensor_at(want, i), *g = gguf_find_tensor(got, w->name);
        if (!g)
            fail_msg("no %s", w->name);
        assert_int_equal(g->n_dims, w->n_dims);
        assert_memory_equal(g->ne, w->ne, sizeof w->ne);
        bool f32 = w->n_dims == 1 || !strncmp(w->name, "a.conv1d.", 9) ||
                   strstr(w->name, ".conv_dw.") != NULL;
        bool projector = !strncmp(w->name, "mm.", 3);
        uint32_t type = f32                                    ? TENSOR_TYPE_F32
                        : dtype == SAFETENSORS_BF16 && !projector ? TENSOR_TYPE_BF16
                                                                  : TENSOR_TYPE_F16;
        if (g->type != type)
            fail_msg("%s is %s", w->name, tensor_type_name(g->type));
        for (uint64_t e = 0; e < gguf_tensor_n_elems(w); e++) {
            float x = ((const float *)w->data)[e];
            if (!f32 && dtype == SAFETENSORS_BF16) /* the checkpoint's value */
                x = quant_bf16_to_f32(quant_f32_to_bf16(x));
            expect_element(x, type, g->data, e, w->name);
        }
    }
}

/* The Gemma4ForConditionalGeneration checkpoint of an E2B/E4B-like model (the gemma4v text
 * model and tower, the gemma4a audio tower under model.audio_tower.* and model.embed_audio.*,
 * audio_config) converts to one file holding all three: the audio tower's tensors as
 * expect_audio_tensors holds them (per_dim_scale through softplus, the depthwise kernels
 * squeezed), its keys as gemma4.audio.*, and a tower the engine loads that hears the fixture
 * clip as the reference does. Saved BF16, the blocks' matrices stay BF16. An audio_config
 * that does not fit is refused. */
static void test_convert_gemma4_audio_to_one_file(void **state)
{
    (void)state;
    char mmproj[4096], tower[4096];
    snprintf(mmproj, sizeof mmproj, "%s", fixture("vision/gemma4v-mmproj.gguf"));
    snprintf(tower, sizeof tower, "%s", fixture("audio/gemma4a-tower.gguf"));
    hf_fixture_write_gemma4_audio(fixture("vision/gemma4v-text.gguf"), mmproj, tower, g_root,
                                  SAFETENSORS_F16);
    corral_error err = {{0}};
    gguf_file *mm = gguf_open(mmproj, &err);
    gguf_file *audio = mm ? gguf_open(tower, &err) : NULL;
    if (!audio)
        fail_msg("%s", err.message);
    expect_gemma4_file("vision/gemma4v-text.gguf", SAFETENSORS_F16, TENSOR_TYPE_F16,
                       gguf_n_tensors(mm) + gguf_n_tensors(audio));
    const char *out = store_fixture_path(g_root, "out.gguf");
    gguf_file *got = gguf_open(out, &err);
    if (!got)
        fail_msg("%s", err.message);
    expect_audio_tensors(audio, got, SAFETENSORS_F16);
    size_t keys = 0, got_keys = 0;
    for (size_t i = 0; i < gguf_n_kv(audio); i++) {
        const gguf_kv *kv = gguf_kv_at(audio, i);
        if (strncmp(kv->key, "gemma4.audio.", 13) != 0)
            continue;
        keys++;
        if (!kv_equal(kv, gguf_find_kv(got, kv->key)))
            fail_msg("%s differs", kv->key);
    }
    for (size_t i = 0; i < gguf_n_kv(got); i++)
        got_keys += strncmp(gguf_kv_at(got, i)->key, "gemma4.audio.", 13) == 0;
    assert_int_equal(got_keys, keys);
    gguf_close(got);

    /* the engine hears the clip through the converted tower: the reference's embeddings,
     * within what F16 matrices move them */
    bool absent = true;
    corral_audio_tower *t = corral_audio_tower_load(out, &absent, &err);
    corral_model *model = t ? corral_model_load(out, &err) : NULL;
    if (!model || !corral_audio_tower_fits(t, model, &err))
        fail_msg("%s", absent ? "no audio tower" : err.message);
    size_t size;
    float *mel = file_fixture_read(fixture("audio/gemma4a-clip.mel.f32"), &size);
    float *want = file_fixture_read(fixture("audio/gemma4a-clip.embd.f32"), &size);
    size_t n_frames = 119, n_tokens = 30, width = 32;
    assert_int_equal(size, n_tokens * width * sizeof(float));
    corral_image_embd embd;
    if (!corral_audio_tower_encode(t, mel, n_frames, 1, &embd, &err))
        fail_msg("%s", err.message);
    assert_int_equal(embd.n_tokens, n_tokens);
    assert_int_equal(embd.n_embd, width);
    double worst = 0, sum = 0;
    for (size_t i = 0; i < n_tokens * width; i++) {
        double d = fabs((double)embd.data[i] - want[i]);
        worst = fmax(worst, d);
        sum += d;
    }
    if (worst > AUDIO_F16_TOLERANCE || sum / (double)(n_tokens * width) > AUDIO_F16_MEAN_TOLERANCE)
        fail_msg("audio embeddings off the reference's: at most %g, mean %g", worst,
                 sum / (double)(n_tokens * width));
    corral_image_embd_free(&embd);
    free(want);
    free(mel);
    corral_model_free(model);
    corral_audio_tower_free(t);
    assert_int_equal(unlink(out), 0);

    hf_fixture_write_gemma4_audio(fixture("vision/gemma4v-text.gguf"), mmproj, tower, g_root,
                                  SAFETENSORS_BF16);
    if (convert("out.gguf", &err) != HF_OK)
        fail_msg("%s", err.message);
    if (!(got = gguf_open(out, &err)))
        fail_msg("%s", err.message);
    expect_audio_tensors(audio, got, SAFETENSORS_BF16);
    gguf_close(got);
    gguf_close(audio);
    gguf_close(mm);
    assert_int_equal(unlink(out), 0);

    set_json("config.json", "audio_config", "num_attention_heads", "3");
    expect_convert_refusal("config.json: audio_config's 3 heads do not divide its hidden_size 16");
    set_json("config.json", "audio_config", "num_attention_heads", "2");
    set_json("config.json", "audio_config", "hidden_size", "null");
    expect_convert_refusal("config.json has no audio_config.hidden_size");
    set_json("config.json", "audio_config", "hidden_size", "16");
    set_json("config.json", "audio_config", "num_hidden_layers", "1");
    expect_convert_refusal("tensor 'model.audio_tower.conformer.1.");
}

/* Gemma4ForCausalLM: the text model saved alone, a fused q/k/v in the fixture. */
static void test_convert_gemma4_round_trip(void **state)
{
    (void)state;
    gemma4_round_trip("arch/gemma4.gguf", "Gemma4ForCausalLM", SAFETENSORS_BF16,
                      TENSOR_TYPE_BF16);
}

/* Gemma4ForConditionalGeneration's text model (its towers left out): per-layer inputs,
 * key/value sharing, the shared layers' FFN twice as wide. */
static void test_convert_gemma4_e_round_trip(void **state)
{
    (void)state;
    gemma4_round_trip("arch/gemma4-e.gguf", "Gemma4ForConditionalGeneration", SAFETENSORS_F16,
                      TENSOR_TYPE_F16);
}

/* Gemma 4's experts beside the dense FFN: gate and up packed in some layers, apart in others,
 * each expert's output scale in some. */
static void test_convert_gemma4_moe_round_trip(void **state)
{
    (void)state;
    gemma4_round_trip("arch/gemma4-moe.gguf", "Gemma4ForConditionalGeneration",
                      SAFETENSORS_F16, TENSOR_TYPE_F16);
}

/* Gemma 4 saved with tokenizer.json alone, a BPE over SentencePiece pieces (byte fallback):
 * the "llama" model with its merges, as ollama's converter writes it, which the engine reads
 * as Gemma 4's BPE. */
static void test_convert_gemma4_bpe_tokenizer(void **state)
{
    (void)state;
    hf_fixture_write(fixture("arch/gemma4.gguf"), g_root, "Gemma4ForCausalLM", SAFETENSORS_F16,
                     NULL);
    assert_int_equal(unlink(store_fixture_path(g_root, "tokenizer.model")), 0);
    corral_error err = {{0}};
    gguf_file *want = gguf_open(fixture("arch/gemma4.gguf"), &err);
    if (!want)
        fail_msg("%s", err.message);
    const gguf_kv *tokens = gguf_find_kv(want, "tokenizer.ggml.tokens");
    json_t *vocab = json_object();
    for (uint64_t id = 0; id < tokens->n; id++)
        json_object_setn_new_nocheck(vocab, gguf_kv_str(tokens, id).data,
                                     gguf_kv_str(tokens, id).size, json_integer((json_int_t)id));
    json_t *tokenizer = json_pack("{s:s,s:[],s:{s:s,s:b,s:o,s:[[s,s],[s,s]]}}", "version", "1.0",
                                  "added_tokens", "model", "type", "BPE", "byte_fallback", true,
                                  "vocab", vocab, "merges", "\xe2\x96\x81", "t", "h", "e");
    assert_non_null(tokenizer);
    char *text = json_dumps(tokenizer, 0);
    store_fixture_write(g_root, "tokenizer.json", text, strlen(text));
    free(text);
    json_decref(tokenizer);
    if (convert("out.gguf", &err) != HF_OK)
        fail_msg("%s", err.message);
    gguf_file *got = gguf_open(store_fixture_path(g_root, "out.gguf"), &err);
    if (!got)
        fail_msg("%s", err.message);
    gguf_str model, pre;
    assert_true(gguf_get_str(got, "tokenizer.ggml.model", &model, &err));
    assert_true(gguf_get_str(got, "tokenizer.ggml.pre", &pre, &err));
    assert_int_equal(model.size, 5);
    assert_memory_equal(model.data, "llama", 5);
    assert_int_equal(pre.size, 6);
    assert_memory_equal(pre.data, "gemma4", 6);
    const gguf_kv *merges = gguf_find_kv(got, "tokenizer.ggml.merges");
    assert_non_null(merges);
    assert_int_equal(merges->n, 2);
    assert_true(kv_equal(tokens, gguf_find_kv(got, "tokenizer.ggml.tokens")));
    gguf_close(want);
    gguf_close(got);
    corral_vocab *v = corral_vocab_open(store_fixture_path(g_root, "out.gguf"), &err);
    if (!v)
        fail_msg("%s", err.message);
    corral_token ids[64];
    size_t n = 0;
    assert_true(corral_tokenize(v, "the tale", 8, false, false, ids, 64, &n, &err));
    assert_true(n > 0);
    corral_vocab_free(v);
}

/* The LagunaForCausalLM checkpoint of arch/laguna converts to ollama's laguna file: the
 * fixture's tensors (its attention gate under ollama's name, attn_g; the router F32), its
 * keys but the sliding layers' RoPE, which ollama's names rope.swa.*, and ollama's own: the
 * layer kinds, gating, the YaRN magnitude it computes, no chat template, no BOS added. */
static void test_convert_laguna_round_trip(void **state)
{
    (void)state;
    hf_fixture_write(fixture("arch/laguna.gguf"), g_root, "LagunaForCausalLM", SAFETENSORS_F16,
                     hf_fixture_qwen2_regex);
    corral_error err = {{0}};
    if (convert("out.gguf", &err) != HF_OK)
        fail_msg("%s", err.message);
    gguf_file *want = gguf_open(fixture("arch/laguna.gguf"), &err);
    gguf_file *got = want ? gguf_open(store_fixture_path(g_root, "out.gguf"), &err) : NULL;
    if (!got)
        fail_msg("%s", err.message);
    assert_int_equal(gguf_n_tensors(got), gguf_n_tensors(want));
    for (size_t i = 0; i < gguf_n_tensors(want); i++) {
        const gguf_tensor *w = gguf_tensor_at(want, i);
        char name[128];
        const char *gate = strstr(w->name, ".attn_gate.");
        if (gate)
            snprintf(name, sizeof name, "%.*s.attn_g.weight", (int)(gate - w->name), w->name);
        else
            snprintf(name, sizeof name, "%s", w->name);
        expect_converted_f16(got, name, w);
    }
    static const char *const laguna_skipped[] = {"general.name", "general.file_type",
                                                 "laguna.rope.freq_base_swa",
                                                 "laguna.rope.dimension_count_swa", NULL};
    expect_same_keys(want, got, laguna_skipped);
    static const char *const renamed[][2] = {
        {"laguna.rope.freq_base_swa", "laguna.rope.swa.freq_base"},
        {"laguna.rope.dimension_count_swa", "laguna.rope.swa.dimension_count"},
    };
    for (size_t i = 0; i < 2; i++)
        if (!kv_equal(gguf_find_kv(want, renamed[i][0]), gguf_find_kv(got, renamed[i][1])))
            fail_msg("%s differs from %s", renamed[i][1], renamed[i][0]);
    float attn_factor = 0;
    assert_true(gguf_get_f32(got, "laguna.rope.scaling.attn_factor", &attn_factor, &err));
    assert_true(attn_factor == (float)(0.1 * log(4.0) + 1.0)); /* factor 4, none given */
    const gguf_kv *kinds = gguf_find_kv(got, "laguna.attention.layer_types");
    const gguf_kv *pattern = gguf_find_kv(got, "laguna.attention.sliding_window_pattern");
    assert_true(kinds && pattern && kinds->n == 5 && pattern->n == 5);
    for (uint64_t i = 0; i < 5; i++) {
        assert_int_equal(gguf_kv_i64(kinds, i), i % 4 != 0);
        assert_int_equal(gguf_kv_bool(pattern, i), i % 4 != 0);
    }
    assert_null(gguf_find_kv(got, "tokenizer.chat_template"));
    assert_false(gguf_kv_bool(gguf_find_kv(got, "tokenizer.ggml.add_bos_token"), 0));
    gguf_close(want);
    gguf_close(got);
    corral_model *model = corral_model_load(store_fixture_path(g_root, "out.gguf"), &err);
    if (!model)
        fail_msg("%s", err.message);
    corral_model_free(model);
    same_tokens("arch/laguna.gguf");
    assert_int_equal(unlink(store_fixture_path(g_root, "out.gguf")), 0);

    static const struct {
        const char *key, *value, *why;
    } cases[] = {
        {"gating", "\"per-element\"", "attention gating other than per head"},
        {"swa_attention_sink_enabled", "true", "an attention sink"},
        {"moe_router_use_sigmoid", "false", "a softmax router"},
        {"mlp_only_layers", "[0, 1]", "dense layers (mlp_only_layers or mlp_layer_types) must "
                                      "be its first alone"},
        {"num_attention_heads_per_layer", "[4, 8]", "num_attention_heads_per_layer must list "
                                                    "one count per layer (5)"},
        {"layer_types", "[\"full_attention\", \"chunked\", \"sliding_attention\", "
                        "\"sliding_attention\", \"full_attention\"]",
         "layer_types[1] is not"},
        {"shared_expert_intermediate_size", "null",
         "config.json has no shared_expert_intermediate_size"},
        {"decoder_sparse_step", "2", "decoder_sparse_step must be 1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hf_fixture_write(fixture("arch/laguna.gguf"), g_root, "LagunaForCausalLM",
                         SAFETENSORS_F16, hf_fixture_qwen2_regex);
        set_json("config.json", "", cases[i].key, cases[i].value);
        expect_convert_refusal(cases[i].why);
    }
}

static void test_convert_mixtral_round_trip(void **state)
{
    (void)state;
    round_trip("arch/llama-moe.gguf", "MixtralForCausalLM", SAFETENSORS_F16, NULL,
               TENSOR_TYPE_F16, skipped);
}

/* The engine loads the file at path as a model and a tower that fits it. */
static void expect_tower_fits(const char *path)
{
    corral_error err = {{0}};
    corral_model *model = corral_model_load(path, &err);
    corral_mmproj *mm = model ? corral_mmproj_load(path, &err) : NULL;
    if (!mm || !corral_mmproj_fits(mm, model, &err))
        fail_msg("%s", err.message);
    corral_mmproj_free(mm);
    corral_model_free(model);
}

/* The files a one-file vision test holds side by side: its fixtures' text model and tower
 * as converted from the checkpoint (text_f16, mmproj_f16), the one file made of them (want)
 * and the conversion's (got). */
typedef struct vision_paths {
    char text_f16[512], mmproj_f16[512], want[512], got[512];
} vision_paths;

/* Converts the checkpoint in g_root to out.gguf; the paths of the files to compare. */
static vision_paths convert_vision(void)
{
    corral_error err = {{0}};
    if (convert("out.gguf", &err) != HF_OK)
        fail_msg("%s", err.message);
    vision_paths v;
    snprintf(v.text_f16, sizeof v.text_f16, "%s", store_fixture_path(g_root, "text-f16.gguf"));
    snprintf(v.mmproj_f16, sizeof v.mmproj_f16, "%s",
             store_fixture_path(g_root, "mmproj-f16.gguf"));
    snprintf(v.want, sizeof v.want, "%s", store_fixture_path(g_root, "want.gguf"));
    snprintf(v.got, sizeof v.got, "%s", store_fixture_path(g_root, "out.gguf"));
    return v;
}

/* ---- Gemma 3 with its vision tower ---- */

/* src's keys and tensors as the converter writes an F16 checkpoint's values: matrices F16,
 * vectors F32, Gemma norms (kept as w - 1, when gemma) plus one; into dst. Tensors whose name
 * holds one of keep_f32 (a NULL-terminated list, or NULL) stay F32 with the values F16 rounds
 * them to. */
static void write_as_converted_but(const char *src, const char *dst, bool gemma,
                                   const char *const *keep_f32)
{
    corral_error err = {{0}};
    gguf_file *in = gguf_open(src, &err);
    gguf_writer *w = gguf_writer_create();
    if (!in || !w)
        fail_msg("%s: %s", src, err.message);
    bool ok = true;
    for (size_t i = 0; ok && i < gguf_n_kv(in); i++)
        ok = gguf_writer_copy_kv(w, gguf_kv_at(in, i), &err);
    for (int pass = 0; ok && pass < 2; pass++) {
        for (size_t i = 0; ok && i < gguf_n_tensors(in); i++) {
            const gguf_tensor *t = gguf_tensor_at(in, i);
            bool keep = false;
            for (const char *const *k = keep_f32; k && *k; k++)
                keep = keep || strstr(t->name, *k);
            uint32_t type = t->n_dims == 1 || keep ? TENSOR_TYPE_F32 : TENSOR_TYPE_F16;
            if (pass == 0) {
                ok = gguf_writer_add_tensor(w, t->name, type, t->n_dims, t->ne, &err);
                continue;
            }
            bool gemma_norm =
                gemma && strncmp(t->name, "v.", 2) != 0 && strstr(t->name, "_norm.weight");
            size_t n = (size_t)gguf_tensor_n_elems(t);
            uint8_t *bytes = malloc(n * 4);
            assert_non_null(bytes);
            for (size_t e = 0; e < n; e++) {
                float x = ((const float *)t->data)[e];
                if (gemma_norm)
                    x = (x - 1.0f) + 1.0f;
                uint16_t h = quant_f32_to_f16(x);
                if (keep)
                    x = quant_f16_to_f32(h);
                memcpy(bytes + e * (type == TENSOR_TYPE_F32 ? 4 : 2),
                       type == TENSOR_TYPE_F32 ? (void *)&x : (void *)&h,
                       type == TENSOR_TYPE_F32 ? 4 : 2);
            }
            ok = gguf_writer_write_tensor(w, bytes, n * (type == TENSOR_TYPE_F32 ? 4 : 2), &err);
            free(bytes);
        }
        if (pass == 0)
            ok = ok && gguf_writer_begin(w, dst, &err);
    }
    gguf_write_fixture_finish(w, ok, dst, &err);
    gguf_close(in);
}

static void write_as_converted(const char *src, const char *dst, bool gemma)
{
    write_as_converted_but(src, dst, gemma, NULL);
}

/* The image embeddings of a side x side reference image (its pixels fixture) with the file
 * at path. */
static corral_image_embd image_embeddings(const char *path, const char *pixels_fixture,
                                          uint32_t side)
{
    corral_error err = {{0}};
    corral_mmproj *mm = corral_mmproj_load(path, &err);
    if (!mm)
        fail_msg("%s", err.message);
    size_t size;
    float *pixels = file_fixture_read(fixture(pixels_fixture), &size);
    assert_int_equal(size, (size_t)side * side * 3 * sizeof(float));
    corral_image_embd embd;
    if (!corral_mmproj_encode(mm, pixels, side, side, 1, &embd, &err))
        fail_msg("%s", err.message);
    free(pixels);
    corral_mmproj_free(mm);
    return embd;
}

/* The Gemma3ForConditionalGeneration checkpoint of the gemma3 vision fixtures converts to the
 * one file ollama's converter writes (the fixtures merged as ollama lays them out, at the
 * checkpoint's F16): the same tensors byte for byte, the same keys, the same image
 * embeddings, and a model its tower fits. */
static void test_convert_gemma3_vision_to_one_file(void **state)
{
    (void)state;
    char text[4096], mmproj[4096];
    snprintf(text, sizeof text, "%s", fixture("vision/gemma3-text.gguf"));
    snprintf(mmproj, sizeof mmproj, "%s", fixture("vision/gemma3-mmproj.gguf"));
    hf_fixture_write_vision(text, mmproj, g_root, 16, SAFETENSORS_F16);
    vision_paths v = convert_vision();
    corral_error err = {{0}};
    write_as_converted(text, v.text_f16, true);
    write_as_converted(mmproj, v.mmproj_f16, true);
    onefile_fixture_write(v.text_f16, v.mmproj_f16, v.want, 16, NULL, NULL);

    /* the projector's projection_dim, which ollama's converter does not write */
    static const char *const gemma3_skipped[] = {"general.name", "general.file_type",
                                                 "gemma3.vision.projection_dim", NULL};
    expect_same_file(v.want, v.got, gemma3_skipped);

    corral_image_embd a = image_embeddings(v.want, "vision/gemma3.square.pixels.f32", 64);
    corral_image_embd b = image_embeddings(v.got, "vision/gemma3.square.pixels.f32", 64);
    assert_int_equal(a.n_tokens, 16);
    assert_int_equal(b.n_tokens, a.n_tokens);
    assert_int_equal(b.n_embd, a.n_embd);
    assert_memory_equal(b.data, a.data, a.n_tokens * a.n_embd * sizeof *a.data);
    corral_image_embd_free(&a);
    corral_image_embd_free(&b);
    expect_tower_fits(v.got);

    /* from BF16, as ollama's converter: the text model's matrices and the projection BF16,
     * the tower's F16 */
    hf_fixture_write_vision(text, mmproj, g_root, 16, SAFETENSORS_BF16);
    if (convert("out.gguf", &err) != HF_OK)
        fail_msg("%s", err.message);
    gguf_file *got = gguf_open(v.got, &err);
    assert_non_null(got);
    static const struct {
        const char *name;
        uint32_t type;
    } types[] = {{"blk.0.attn_q.weight", TENSOR_TYPE_BF16},
                 {"mm.mm_input_projection.weight", TENSOR_TYPE_BF16},
                 {"v.blk.0.attn_q.weight", TENSOR_TYPE_F16},
                 {"v.patch_embedding.weight", TENSOR_TYPE_F16},
                 {"v.blk.0.attn_q.bias", TENSOR_TYPE_F32}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (gguf_find_tensor(got, types[i].name)->type != types[i].type)
            fail_msg("%s is %s", types[i].name,
                     tensor_type_name(gguf_find_tensor(got, types[i].name)->type));
    gguf_close(got);
    assert_int_equal(unlink(v.got), 0);

    rewrite("config.json", "\"image_size\": 64", "\"image_size\": 0");
    expect_convert_refusal("config.json: vision_config.image_size must be an integer from 1");
    rewrite("config.json", "\"vision_config\"", "\"vision_configs\"");
    expect_convert_refusal("config.json has no vision_config object");
}

/* ---- LFM2-VL with its tower ---- */

/* got's tensor name holds want's tensor as an F16 checkpoint of it converts: vectors and the
 * kinds kept F32 (a convolution's taps, a position table) F32 with the values F16 rounds them
 * to, the rest F16. */
static void expect_converted_f16(const gguf_file *got, const char *name, const gguf_tensor *w)
{
    const gguf_tensor *g = gguf_find_tensor(got, name);
    if (!g)
        fail_msg("no %s", name);
    assert_memory_equal(g->ne, w->ne, sizeof w->ne); /* its trailing 1s, if any, aside */
    bool kept_f32 = strstr(name, "shortconv.conv") || strstr(name, "ffn_gate_inp.weight") ||
                    !strcmp(name, "v.position_embd.weight") || !strcmp(name, "s.position_embd") ||
                    strstr(name, ".rel_pos_");
    uint32_t type = g->n_dims == 1 || kept_f32 ? TENSOR_TYPE_F32 : TENSOR_TYPE_F16;
    if (g->type != type)
        fail_msg("%s is %s", name, tensor_type_name(g->type));
    for (uint64_t e = 0; e < gguf_tensor_n_elems(w); e++) {
        float x = w->type == TENSOR_TYPE_F16 ? quant_f16_to_f32(((const uint16_t *)w->data)[e])
                                             : ((const float *)w->data)[e];
        expect_element(kept_f32 ? quant_f16_to_f32(quant_f32_to_f16(x)) : x, type, g->data, e,
                       name);
    }
}

/* The Lfm2VlForConditionalGeneration checkpoint of the lfm2v fixtures converts to the one
 * file ollama's converter writes: the text model's tensors and keys, the projector's tensors
 * (the patch kernel back in its channel-major layout) under its names but the blocks' output
 * projection (attn_output, the text model's name) and the projector's LayerNorm
 * (mm.layer_norm), the tower's keys and image settings as lfm2.vision.* with the image marks'
 * ids, and a model its tower fits. */
static void test_convert_lfm2vl_to_one_file(void **state)
{
    (void)state;
    char text[4096], mmproj[4096];
    snprintf(text, sizeof text, "%s", fixture("vision/lfm2v-text.gguf"));
    snprintf(mmproj, sizeof mmproj, "%s", fixture("vision/lfm2v-mmproj.gguf"));
    hf_fixture_write_lfm2vl(text, mmproj, g_root, SAFETENSORS_F16);
    corral_error err = {{0}};
    if (convert("out.gguf", &err) != HF_OK)
        fail_msg("%s", err.message);
    gguf_file *want = gguf_open(text, &err), *mm = want ? gguf_open(mmproj, &err) : NULL;
    gguf_file *got = mm ? gguf_open(store_fixture_path(g_root, "out.gguf"), &err) : NULL;
    if (!got)
        fail_msg("%s", err.message);
    assert_int_equal(gguf_n_tensors(got), gguf_n_tensors(want) + gguf_n_tensors(mm));
    for (size_t i = 0; i < gguf_n_tensors(want); i++)
        expect_converted_f16(got, gguf_tensor_at(want, i)->name, gguf_tensor_at(want, i));
    for (size_t i = 0; i < gguf_n_tensors(mm); i++) {
        const gguf_tensor *w = gguf_tensor_at(mm, i);
        char name[128];
        const char *out = strstr(w->name, ".attn_out.");
        if (out)
            snprintf(name, sizeof name, "%.*s.attn_output.%s", (int)(out - w->name), w->name,
                     out + strlen(".attn_out."));
        else if (!strncmp(w->name, "mm.input_norm.", 14))
            snprintf(name, sizeof name, "mm.layer_norm.%s", w->name + 14);
        else
            snprintf(name, sizeof name, "%s", w->name);
        expect_converted_f16(got, name, w);
    }
    expect_same_keys(want, got, lfm2_skipped);
    static const char *const keys[][2] = {
        {"clip.vision.block_count", "lfm2.vision.block_count"},
        {"clip.vision.embedding_length", "lfm2.vision.embedding_length"},
        {"clip.vision.feed_forward_length", "lfm2.vision.feed_forward_length"},
        {"clip.vision.attention.head_count", "lfm2.vision.attention.head_count"},
        {"clip.vision.attention.layer_norm_epsilon", "lfm2.vision.attention.layer_norm_epsilon"},
        {"clip.vision.patch_size", "lfm2.vision.patch_size"},
        {"clip.vision.image_size", "lfm2.vision.image_size"},
        {"clip.vision.projector.scale_factor", "lfm2.vision.projector.scale_factor"},
        {"clip.vision.image_mean", "lfm2.vision.image_mean"},
        {"clip.vision.image_std", "lfm2.vision.image_std"},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!kv_equal(gguf_find_kv(mm, keys[i][0]), gguf_find_kv(got, keys[i][1])))
            fail_msg("%s differs from %s", keys[i][1], keys[i][0]);
    static const struct {
        const char *key;
        uint32_t value;
    } ids[] = {{"lfm2.vision.image_start_token_id", 304},
               {"lfm2.vision.image_end_token_id", 305},
               {"lfm2.vision.image_thumbnail_token_id", 306},
               {"lfm2.vision.tile_size", 128}, /* processor_config.json's */
               {"lfm2.vision.max_tiles", 10},  /* ollama's default */
               {"lfm2.vision.image_token_id", 396}};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        uint32_t v = 0;
        assert_true(gguf_get_u32(got, ids[i].key, &v, &err));
        assert_int_equal(v, ids[i].value);
    }
    assert_true(gguf_kv_bool(gguf_find_kv(got, "lfm2.vision.projector.use_layernorm"), 0));
    gguf_close(got);
    gguf_close(mm);
    gguf_close(want);
    expect_tower_fits(store_fixture_path(g_root, "out.gguf"));
    assert_int_equal(unlink(store_fixture_path(g_root, "out.gguf")), 0);

    rewrite("processor_config.json", "\"image_mean\"", "\"image_means\"");
    expect_convert_refusal("image_processor.image_mean and image_std must be lists of three "
                           "numbers");
    rewrite("processor_config.json", "\"image_means\"", "\"image_mean\"");
    set_json("config.json", "vision_config", "num_hidden_layers", "1");
    expect_convert_refusal("tensor 'model.vision_tower.vision_model.encoder.layers.1.");
}

/* ---- GLM-OCR with its tower ---- */

/* The GlmOcrForConditionalGeneration checkpoint of the glm4v fixtures converts to the one file
 * ollama's converter writes: the glm4 text model's tensors (q and k permuted back to NeoX
 * pairs, gate and up in one ffn_up, the prediction layer's under nextn) and keys under
 * glmocr.* (the sections as mrope_section), the projector's tensors (its two temporal patch
 * kernels as patch_embd_0 and patch_embd_1), its keys as glmocr.vision.*, the tokenizer's
 * marks, and a model its tower fits. */
static void test_convert_glmocr_to_one_file(void **state)
{
    (void)state;
    char text[4096], mmproj[4096];
    snprintf(text, sizeof text, "%s", fixture("vision/glm4v-text.gguf"));
    snprintf(mmproj, sizeof mmproj, "%s", fixture("vision/glm4v-mmproj.gguf"));
    hf_fixture_write_glmocr(text, mmproj, g_root, SAFETENSORS_F16);
    corral_error err = {{0}};
    if (convert("out.gguf", &err) != HF_OK)
        fail_msg("%s", err.message);
    gguf_file *want = gguf_open(text, &err), *mm = want ? gguf_open(mmproj, &err) : NULL;
    gguf_file *got = mm ? gguf_open(store_fixture_path(g_root, "out.gguf"), &err) : NULL;
    if (!got)
        fail_msg("%s", err.message);
    assert_int_equal(gguf_n_tensors(got), gguf_n_tensors(want) + gguf_n_tensors(mm));
    for (size_t i = 0; i < gguf_n_tensors(want); i++)
        expect_converted_f16(got, gguf_tensor_at(want, i)->name, gguf_tensor_at(want, i));
    for (size_t i = 0; i < gguf_n_tensors(mm); i++) {
        const gguf_tensor *w = gguf_tensor_at(mm, i);
        const char *name = !strcmp(w->name, "v.patch_embd.weight")     ? "v.patch_embd_0.weight"
                           : !strcmp(w->name, "v.patch_embd.weight.1") ? "v.patch_embd_1.weight"
                                                                       : w->name;
        expect_converted_f16(got, name, w);
    }
    static const char *const keys[][2] = {
        {"glm4.block_count", "glmocr.block_count"},
        {"glm4.nextn_predict_layers", "glmocr.nextn_predict_layers"},
        {"glm4.embedding_length", "glmocr.embedding_length"},
        {"glm4.feed_forward_length", "glmocr.feed_forward_length"},
        {"glm4.attention.head_count", "glmocr.attention.head_count"},
        {"glm4.attention.head_count_kv", "glmocr.attention.head_count_kv"},
        {"glm4.attention.key_length", "glmocr.attention.key_length"},
        {"glm4.attention.value_length", "glmocr.attention.value_length"},
        {"glm4.attention.layer_norm_rms_epsilon", "glmocr.attention.layer_norm_rms_epsilon"},
        {"glm4.context_length", "glmocr.context_length"},
        {"glm4.rope.freq_base", "glmocr.rope.freq_base"},
        {"tokenizer.ggml.pre", "tokenizer.ggml.pre"},
        {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.bos_token_id"},
        {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eos_token_id"},
        {"tokenizer.ggml.padding_token_id", "tokenizer.ggml.padding_token_id"},
        {"tokenizer.ggml.tokens", "tokenizer.ggml.tokens"},
        {"clip.vision.block_count", "glmocr.vision.block_count"},
        {"clip.vision.embedding_length", "glmocr.vision.embedding_length"},
        {"clip.vision.attention.head_count", "glmocr.vision.attention.head_count"},
        {"clip.vision.image_size", "glmocr.vision.image_size"},
        {"clip.vision.patch_size", "glmocr.vision.patch_size"},
        {"clip.vision.spatial_merge_size", "glmocr.vision.spatial_merge_size"},
        {"clip.vision.feed_forward_length", "glmocr.vision.intermediate_size"},
        {"clip.vision.projection_dim", "glmocr.vision.out_hidden_size"},
        {"clip.vision.attention.layer_norm_epsilon",
         "glmocr.vision.attention.layer_norm_rms_epsilon"},
        {"clip.vision.image_mean", "glmocr.vision.image_mean"},
        {"clip.vision.image_std", "glmocr.vision.image_std"},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const gguf_file *from = !strncmp(keys[i][0], "clip.", 5) ? mm : want;
        if (!kv_equal(gguf_find_kv(from, keys[i][0]), gguf_find_kv(got, keys[i][1])))
            fail_msg("%s differs from %s", keys[i][1], keys[i][0]);
    }
    const gguf_kv *want_sections = gguf_find_kv(want, "glm4.rope.dimension_sections");
    const gguf_kv *sections = gguf_find_kv(got, "glmocr.rope.mrope_section");
    assert_true(sections && sections->n == 3 && sections->elem_type == GGUF_TYPE_INT32);
    for (uint64_t i = 0; i < 3; i++)
        assert_int_equal(gguf_kv_i64(sections, i), gguf_kv_i64(want_sections, i));
    static const struct {
        const char *key;
        uint32_t value;
    } ids[] = {{"tokenizer.ggml.unknown_token_id", 301}, /* <|endoftext|> */
               {"tokenizer.ggml.eot_token_id", 306},     /* <|user|> */
               {"glmocr.image_start_token_id", 308},
               {"glmocr.vision.temporal_patch_size", 2},
               {"glmocr.vision.min_pixels", 12544}};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        uint32_t v = 0;
        assert_true(gguf_get_u32(got, ids[i].key, &v, &err));
        assert_int_equal(v, ids[i].value);
    }
    gguf_close(got);
    gguf_close(mm);
    gguf_close(want);
    expect_tower_fits(store_fixture_path(g_root, "out.gguf"));
    assert_int_equal(unlink(store_fixture_path(g_root, "out.gguf")), 0);

    set_json("config.json", "vision_config", "patch_size", "8");
    expect_convert_refusal("tensor 'model.visual.patch_embed.proj.weight' is not [hidden_size, "
                           "channels, 2, patch_size, patch_size]");
    set_json("config.json", "vision_config", "patch_size", "4");
    set_json("config.json", "text_config", "rope_parameters", "{\"mrope_section\": [2, \"3\"]}");
    expect_convert_refusal("mrope_section must be a list of 1 to 8 integers");
    set_json("config.json", "text_config", "rope_parameters", "{\"mrope_section\": [2, 3, 3]}");
    assert_int_equal(unlink(store_fixture_path(g_root, "preprocessor_config.json")), 0);
    expect_convert_refusal("preprocessor_config.json");
}

/* ---- DeepSeek-OCR with its towers ---- */

/* A deepseekocr projector tensor's name in ollama's file: SAM's under "s." (its position
 * table without ".weight", its blocks' norms, output projection and relative position tables
 * under Hugging Face's names), CLIP's blocks and pre-norm under Hugging Face's names, the
 * projection as mm.layers, the newline and separator under "mm.". */
static void deepseekocr_ollama_name(const char *name, char *out, size_t cap)
{
    static const char *const whole[][2] = {
        {"v.sam.pos_embd.weight", "s.position_embd"}, {"v.pre_ln.", "v.pre_layrnorm."},
        {"mm.model.fc.", "mm.layers."},                {"v.image_newline", "mm.image_newline"},
        {"v.view_seperator", "mm.view_seperator"},     {"v.sam.", "s."},
    };
    static const char *const parts[][2] = {
        {"pre_ln.", "norm1."},         {"post_ln.", "norm2."},
        {"attn.out.", "attn.proj."},   {"attn.pos_h.weight", "attn.rel_pos_h"},
        {"attn.pos_w.weight", "attn.rel_pos_w"}, {"ln1.", "layer_norm1."},
        {"ln2.", "layer_norm2."},      {"attn_qkv.", "self_attn.qkv_proj."},
        {"attn_out.", "self_attn.out_proj."}, {"ffn_up.", "mlp.fc1."},
        {"ffn_down.", "mlp.fc2."},
    };
    char head[128];
    snprintf(head, sizeof head, "%s", name);
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
        if (!strncmp(name, whole[i][0], strlen(whole[i][0]))) {
            snprintf(head, sizeof head, "%s%s", whole[i][1], name + strlen(whole[i][0]));
            break;
        }
    unsigned layer;
    int at = 0;
    if ((sscanf(head, "s.blk.%u.%n", &layer, &at) == 1 || sscanf(head, "v.blk.%u.%n", &layer,
                                                                  &at) == 1) && at > 0)
        for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
            if (!strncmp(head + at, parts[i][0], strlen(parts[i][0]))) {
                snprintf(out, cap, "%.*s%s%s", at, head, parts[i][1],
                         head + at + strlen(parts[i][0]));
                return;
            }
    snprintf(out, cap, "%s", head);
}

/* The DeepseekOCRForCausalLM checkpoint of the deepseek2-ocr language model and the
 * deepseekocr projector converts to the one file ollama's converter writes: the language
 * model's tensors and only the keys ollama's writes (under deepseekocr.*: no expert width,
 * epsilon or RoPE keys), both towers' tensors under ollama's names (their tables F32), their
 * keys as deepseekocr.vision.* and deepseekocr.sam.*; the engine loads it and the towers fit. */
static void test_convert_deepseekocr_to_one_file(void **state)
{
    (void)state;
    char text[4096], mmproj[4096];
    snprintf(text, sizeof text, "%s", fixture("arch/deepseek2-ocr.gguf"));
    snprintf(mmproj, sizeof mmproj, "%s", fixture("vision/deepseekocr-mmproj.gguf"));
    hf_fixture_write_deepseekocr(text, mmproj, g_root, SAFETENSORS_F16);
    corral_error err = {{0}};
    if (convert("out.gguf", &err) != HF_OK)
        fail_msg("%s", err.message);
    gguf_file *want = gguf_open(text, &err), *mm = want ? gguf_open(mmproj, &err) : NULL;
    gguf_file *got = mm ? gguf_open(store_fixture_path(g_root, "out.gguf"), &err) : NULL;
    if (!got)
        fail_msg("%s", err.message);
    assert_int_equal(gguf_n_tensors(got), gguf_n_tensors(want) + gguf_n_tensors(mm));
    for (size_t i = 0; i < gguf_n_tensors(want); i++)
        expect_converted_f16(got, gguf_tensor_at(want, i)->name, gguf_tensor_at(want, i));
    for (size_t i = 0; i < gguf_n_tensors(mm); i++) {
        char name[128];
        deepseekocr_ollama_name(gguf_tensor_at(mm, i)->name, name, sizeof name);
        expect_converted_f16(got, name, gguf_tensor_at(mm, i));
    }
    static const char *const keys[][2] = {
        {"deepseek2-ocr.block_count", "deepseekocr.block_count"},
        {"deepseek2-ocr.context_length", "deepseekocr.context_length"},
        {"deepseek2-ocr.embedding_length", "deepseekocr.embedding_length"},
        {"deepseek2-ocr.feed_forward_length", "deepseekocr.feed_forward_length"},
        {"deepseek2-ocr.attention.head_count", "deepseekocr.attention.head_count"},
        {"deepseek2-ocr.attention.head_count_kv", "deepseekocr.attention.head_count_kv"},
        {"deepseek2-ocr.expert_count", "deepseekocr.expert_count"},
        {"deepseek2-ocr.expert_used_count", "deepseekocr.expert_used_count"},
        {"deepseek2-ocr.leading_dense_block_count", "deepseekocr.leading_dense_block_count"},
        {"tokenizer.ggml.tokens", "tokenizer.ggml.tokens"},
        {"clip.vision.block_count", "deepseekocr.vision.block_count"},
        {"clip.vision.embedding_length", "deepseekocr.vision.embedding_length"},
        {"clip.vision.attention.head_count", "deepseekocr.vision.head_count"},
        {"clip.vision.image_size", "deepseekocr.vision.image_size"},
        {"clip.vision.patch_size", "deepseekocr.vision.patch_size"},
        {"clip.vision.sam.block_count", "deepseekocr.sam.block_count"},
        {"clip.vision.sam.embedding_length", "deepseekocr.sam.embedding_length"},
        {"clip.vision.sam.head_count", "deepseekocr.sam.head_count"},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const gguf_file *from = !strncmp(keys[i][0], "clip.", 5) ? mm : want;
        if (!kv_equal(gguf_find_kv(from, keys[i][0]), gguf_find_kv(got, keys[i][1])))
            fail_msg("%s differs from %s", keys[i][1], keys[i][0]);
    }
    static const char *const left_out[] = {
        "deepseekocr.expert_feed_forward_length", "deepseekocr.expert_shared_count",
        "deepseekocr.rope.freq_base", "deepseekocr.attention.layer_norm_rms_epsilon",
        "deepseekocr.attention.key_length"};
    for (size_t i = 0; i < sizeof left_out / sizeof left_out[0]; i++)
        if (gguf_find_kv(got, left_out[i]))
            fail_msg("%s is written", left_out[i]);
    const gguf_kv *global = gguf_find_kv(got, "deepseekocr.sam.global_attention_indexes");
    assert_true(global && global->n == 4 && global->elem_type == GGUF_TYPE_INT32);
    assert_int_equal(gguf_kv_i64(global, 3), 11);
    gguf_close(got);
    gguf_close(mm);
    gguf_close(want);
    expect_tower_fits(store_fixture_path(g_root, "out.gguf"));
    assert_int_equal(unlink(store_fixture_path(g_root, "out.gguf")), 0);

    set_json("config.json", "language_config", "num_experts_per_tok", "null");
    expect_convert_refusal("language_config has n_routed_experts without num_experts_per_tok");
    set_json("config.json", "language_config", "num_experts_per_tok", "3");
    set_json("config.json", "vision_config", "width", "[]");
    expect_convert_refusal("vision_config.width.clip-l-14-224 must be an object");
}

/* ---- Qwen2.5-VL with its tower ---- */

/* The Qwen2_5_VLForConditionalGeneration checkpoint of the qwen25vl vision fixtures converts
 * to the one file ollama's converter writes (the fixtures merged as ollama lays them out, at
 * the checkpoint's F16): the same tensors byte for byte (the patch kernel and each block's
 * Q/K/V split back out), ollama's keys, the same image embeddings, a model its tower fits. */
static void test_convert_qwen25vl_to_one_file(void **state)
{
    (void)state;
    char text[4096], mmproj[4096];
    snprintf(text, sizeof text, "%s", fixture("vision/qwen25vl-text.gguf"));
    snprintf(mmproj, sizeof mmproj, "%s", fixture("vision/qwen25vl-mmproj.gguf"));
    hf_fixture_write_qwen25vl(text, mmproj, g_root, SAFETENSORS_F16);
    vision_paths v = convert_vision();
    write_as_converted(text, v.text_f16, false);
    write_as_converted(mmproj, v.mmproj_f16, false);
    onefile_fixture_write(v.text_f16, v.mmproj_f16, v.want, 0, NULL, NULL);

    expect_same_file(v.want, v.got, skipped);

    corral_image_embd a = image_embeddings(v.want, "vision/qwen25vl.square.pixels.f32", 84);
    corral_image_embd b = image_embeddings(v.got, "vision/qwen25vl.square.pixels.f32", 84);
    assert_int_equal(a.n_tokens, 9);
    assert_int_equal(b.n_tokens, a.n_tokens);
    assert_int_equal(b.n_embd, a.n_embd);
    assert_memory_equal(b.data, a.data, a.n_tokens * a.n_embd * sizeof *a.data);
    corral_image_embd_free(&a);
    corral_image_embd_free(&b);
    expect_tower_fits(v.got);
    assert_int_equal(unlink(v.got), 0);

    /* the tower's width (the text model's is followed by a wider intermediate_size) */
    rewrite("config.json", "\"hidden_size\": 64,\n  \"intermediate_size\": 96",
            "\"hidden_size\": 32,\n  \"intermediate_size\": 96");
    expect_convert_refusal("'visual.blocks.0.attn.qkv.bias' is not [3 hidden_size] "
                           "(config.json's vision_config)");
}

/* ---- Qwen3-VL with its tower ---- */

/* The Qwen3VLForConditionalGeneration checkpoint of the qwen3vl vision fixtures converts to
 * the one file ollama's converter writes (the fixtures laid out as ollama's file, at the
 * checkpoint's F16): the same tensors byte for byte (each block's Q/K/V split back out, the
 * patch kernels in one Conv3D tensor, the deepstack mergers by place), ollama's keys and
 * preprocessor_config.json's normalisation, a model its tower fits. */
static void test_convert_qwen3vl_to_one_file(void **state)
{
    (void)state;
    char text[4096], mmproj[4096];
    snprintf(text, sizeof text, "%s", fixture("vision/qwen3vl-text.gguf"));
    snprintf(mmproj, sizeof mmproj, "%s", fixture("vision/qwen3vl-mmproj.gguf"));
    hf_fixture_write_qwen3vl(text, mmproj, g_root, SAFETENSORS_F16);
    vision_paths v = convert_vision();
    corral_error err = {{0}};
    write_as_converted(text, v.text_f16, false);
    /* the single file's writer makes its F16 Conv3D kernel from F32 kernels */
    static const char *const kernels[] = {"v.patch_embd.weight", NULL};
    write_as_converted_but(mmproj, v.mmproj_f16, false, kernels);
    static const int32_t deepstack[2] = {0, 2};
    qwen3vl_single_fixture_write(v.text_f16, v.mmproj_f16, v.want, NULL, deepstack, 2);

    expect_same_file(v.want, v.got, skipped);
    gguf_file *got = gguf_open(v.got, &err);
    if (!got)
        fail_msg("%s", err.message);
    uint32_t edge = 0;
    assert_true(gguf_get_u32(got, "qwen3vl.vision.longest_edge", &edge, &err));
    assert_int_equal(edge, 4 * 4 * 4096);
    gguf_close(got);
    expect_tower_fits(v.got);
    assert_int_equal(unlink(v.got), 0);

    rewrite("config.json", "\"deepstack_visual_indexes\": [\n   0,\n   2\n  ]",
            "\"deepstack_visual_indexes\": [\n   2,\n   0\n  ]");
    expect_convert_refusal("config.json: vision_config.deepstack_visual_indexes must list at "
                           "most 64 of the 3 layers, in ascending order");
    rewrite("config.json", "\"deepstack_visual_indexes\": [\n   2,\n   0\n  ]",
            "\"deepstack_visual_indexes\": [\n   0\n  ]");
    expect_convert_refusal("'model.visual.deepstack_merger_list.1.");
    rewrite("config.json", "\"deepstack_visual_indexes\": [\n   0\n  ]",
            "\"deepstack_visual_indexes\": [\n   0,\n   2\n  ]");
    rewrite("config.json", "\"temporal_patch_size\": 2", "\"temporal_patch_size\": 3");
    expect_convert_refusal("'model.visual.patch_embed.proj.weight' is not [hidden_size, "
                           "in_channels, temporal_patch_size, patch_size, patch_size]");
    rewrite("config.json", "\"temporal_patch_size\": 3", "\"temporal_patch_size\": 2");
    rewrite("preprocessor_config.json", "\"image_std\"", "\"image_sd\"");
    expect_convert_refusal("preprocessor_config.json gives image_mean without image_std");
}

/* The Qwen3VLMoeForConditionalGeneration checkpoint of the qwen3vlmoe fixture (with the
 * qwen3vl tower) converts to ollama's qwen3vlmoe file: the text model's tensors as the
 * fixture's, BF16 (each layer's packed, transposed experts as gate's, up's and down's
 * stacks), its keys but those ollama's file lists otherwise (the M-RoPE sections as three
 * rope.mrope_section, no n_deepstack_layers), the tower's keys under qwen3vlmoe.; the engine
 * loads it. */
static void test_convert_qwen3vlmoe_experts(void **state)
{
    (void)state;
    char text[4096], mmproj[4096];
    snprintf(text, sizeof text, "%s", fixture("arch/qwen3vlmoe.gguf"));
    snprintf(mmproj, sizeof mmproj, "%s", fixture("vision/qwen3vl-mmproj.gguf"));
    hf_fixture_write_qwen3vl(text, mmproj, g_root, SAFETENSORS_BF16);
    corral_error err = {{0}};
    if (convert("out.gguf", &err) != HF_OK)
        fail_msg("%s", err.message);
    char got_path[512];
    snprintf(got_path, sizeof got_path, "%s", store_fixture_path(g_root, "out.gguf"));
    gguf_file *want = gguf_open(text, &err), *got = gguf_open(got_path, &err);
    if (!want || !got)
        fail_msg("%s", err.message);
    for (size_t i = 0; i < gguf_n_tensors(want); i++) {
        const gguf_tensor *w = gguf_tensor_at(want, i), *g = gguf_find_tensor(got, w->name);
        if (!g)
            fail_msg("no %s", w->name);
        assert_int_equal(g->n_dims, w->n_dims);
        assert_memory_equal(g->ne, w->ne, sizeof w->ne);
        bool router = strstr(w->name, "ffn_gate_inp") != NULL;
        uint32_t type = w->n_dims == 1 || router ? TENSOR_TYPE_F32 : TENSOR_TYPE_BF16;
        if (g->type != type)
            fail_msg("%s is %s", w->name, tensor_type_name(g->type));
        for (uint64_t e = 0; e < gguf_tensor_n_elems(w); e++) {
            float x = ((const float *)w->data)[e];
            if (router) /* F32 from the checkpoint's BF16 */
                x = quant_bf16_to_f32(quant_f32_to_bf16(x));
            expect_element(x, type, g->data, e, w->name);
        }
    }
    static const char *const qwen3vlmoe_skipped[] = {
        "general.name", "general.file_type", "qwen3vlmoe.rope.dimension_sections",
        "qwen3vlmoe.n_deepstack_layers", NULL};
    expect_same_keys(want, got, qwen3vlmoe_skipped);
    const gguf_kv *sections = gguf_find_kv(got, "qwen3vlmoe.rope.mrope_section");
    assert_non_null(sections);
    assert_int_equal(sections->n, 3);
    for (uint64_t i = 0; i < 3; i++)
        assert_int_equal(gguf_kv_i64(sections, i), i == 0 ? 6 : 5);
    const gguf_kv *deepstack = gguf_find_kv(got, "qwen3vlmoe.vision.deepstack_visual_indexes");
    assert_non_null(deepstack);
    assert_int_equal(deepstack->n, 2);
    uint32_t file_type = 0;
    assert_true(gguf_get_u32(got, "general.file_type", &file_type, &err));
    assert_int_equal(file_type, 32);
    gguf_close(want);
    gguf_close(got);
    corral_model *model = corral_model_load(got_path, &err);
    if (!model)
        fail_msg("%s", err.message);
    corral_model_free(model);
    assert_int_equal(unlink(got_path), 0);

    /* the experts' width, which the packed tensors must have */
    rewrite("config.json", "\"moe_intermediate_size\": 32", "\"moe_intermediate_size\": 16");
    expect_convert_refusal("'model.language_model.layers.0.mlp.experts.");
}

/* ---- Llama 4 with its tower ---- */

/* The Llama4ForConditionalGeneration checkpoint of the llama4 vision fixtures converts to the
 * one file ollama's converter writes: the text model's tensors (Q/K as the checkpoint keeps
 * them, each layer's packed experts split and transposed) and the tower's under ollama's
 * names byte for byte at the checkpoint's F16 (the position table F32), the text model's keys
 * with the tower's under llama4.vision.*, a model its tower fits. */
static void test_convert_llama4_to_one_file(void **state)
{
    (void)state;
    char text[4096], mmproj[4096];
    snprintf(text, sizeof text, "%s", fixture("vision/llama4-text.gguf"));
    snprintf(mmproj, sizeof mmproj, "%s", fixture("vision/llama4-mmproj.gguf"));
    hf_fixture_write_llama4(text, mmproj, g_root, SAFETENSORS_F16);
    vision_paths v = convert_vision();
    corral_error err = {{0}};
    /* the router and the position table are F32 in ollama's file */
    static const char *const routers[] = {".ffn_gate_inp.", NULL};
    static const char *const table[] = {"v.position_embd.weight", NULL};
    write_as_converted_but(text, v.text_f16, false, routers);
    write_as_converted_but(mmproj, v.mmproj_f16, false, table);
    gguf_file *want_text = gguf_open(v.text_f16, &err), *want_mm = gguf_open(v.mmproj_f16, &err);
    gguf_file *got = gguf_open(v.got, &err);
    if (!want_text || !want_mm || !got)
        fail_msg("%s", err.message);
    assert_int_equal(gguf_n_tensors(got), gguf_n_tensors(want_text) + gguf_n_tensors(want_mm));
    expect_same_tensors(want_text, got, NULL);
    expect_same_tensors(want_mm, got, ollama_name_fixture_llama4);
    expect_same_keys(want_text, got, skipped);
    static const struct {
        const char *key;
        uint32_t value;
    } u32s[] = {{"llama4.vision.block_count", 2},       {"llama4.vision.embedding_length", 32},
                {"llama4.vision.feed_forward_length", 64},
                {"llama4.vision.attention.head_count", 2}, {"llama4.vision.image_size", 16},
                {"llama4.vision.patch_size", 4},        {"llama4.attention.chunk_size", 8192}};
    for (size_t i = 0; i < sizeof u32s / sizeof u32s[0]; i++) {
        uint32_t v = 0;
        assert_true(gguf_get_u32(got, u32s[i].key, &v, &err));
        assert_int_equal(v, u32s[i].value);
    }
    static const struct {
        const char *key;
        float value;
    } f32s[] = {{"llama4.vision.layer_norm_epsilon", 1e-5f},
                {"llama4.vision.pixel_shuffle_ratio", 0.5f},
                {"llama4.vision.rope.freq_base", 10000.0f}};
    for (size_t i = 0; i < sizeof f32s / sizeof f32s[0]; i++) {
        float v = 0;
        assert_true(gguf_get_f32(got, f32s[i].key, &v, &err));
        assert_true(v == f32s[i].value);
    }
    const gguf_kv *qk_norm = gguf_find_kv(got, "llama4.use_qk_norm");
    assert_true(qk_norm && gguf_kv_bool(qk_norm, 0));
    gguf_close(want_text);
    gguf_close(want_mm);
    gguf_close(got);
    expect_tower_fits(v.got);
    assert_int_equal(unlink(v.got), 0);

    rewrite("config.json", "\"intermediate_size_mlp\"", "\"intermediate_size_dense\"");
    expect_convert_refusal("config.json has no intermediate_size_mlp");
    rewrite("config.json", "\"intermediate_size_dense\"", "\"intermediate_size_mlp\"");

    /* Llama 4 Scout's llama3 scaling has no band between its low and high frequencies */
    rewrite("config.json", "\"use_qk_norm\": true",
            "\"use_qk_norm\": true, \"rope_scaling\": {\"rope_type\": \"llama3\", "
            "\"factor\": 16.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 1.0, "
            "\"original_max_position_embeddings\": 8192}");
    if (convert("out.gguf", &err) != HF_OK)
        fail_msg("%s", err.message);
    got = gguf_open(v.got, &err);
    if (!got)
        fail_msg("%s", err.message);
    const gguf_tensor *freqs = gguf_find_tensor(got, "rope_freqs.weight");
    assert_non_null(freqs);
    assert_int_equal(gguf_tensor_n_elems(freqs), 8);
    /* theta 5e5 over 16 dimensions: pair 4 turns in 4443 positions, pair 5 in 22935 */
    for (int i = 0; i < 8; i++)
        assert_true(((const float *)freqs->data)[i] == (i < 5 ? 1.0f : 16.0f));
    gguf_close(got);
}

/* ---- Llama 3.2 Vision ---- */

/* The MllamaForConditionalGeneration checkpoint of the mllama fixture (ollama's one file)
 * converts back to that file: every tensor byte for byte at the checkpoint's F16 (the
 * position tables F32; each tower block's Q and K permuted and transposed, the text model's
 * and the cross-attention layers' Q and K permuted, as ollama's converter writes them) but
 * the gates, which come back through tanh within float rounding (the position gate as
 * 1 - tanh and tanh), and rope_freqs, which the checkpoint's config does not make; the
 * fixture's keys; a model its tower fits. */
static void test_convert_mllama_to_one_file(void **state)
{
    (void)state;
    char src[4096];
    snprintf(src, sizeof src, "%s", fixture("vision/mllama.gguf"));
    hf_fixture_write_mllama(src, g_root, SAFETENSORS_F16);
    corral_error err = {{0}};
    if (convert("out.gguf", &err) != HF_OK)
        fail_msg("%s", err.message);
    char want_path[512], got_path[512];
    snprintf(want_path, sizeof want_path, "%s", store_fixture_path(g_root, "want.gguf"));
    snprintf(got_path, sizeof got_path, "%s", store_fixture_path(g_root, "out.gguf"));
    static const char *const tables[] = {"position_embd.weight", NULL};
    write_as_converted_but(src, want_path, false, tables);
    gguf_file *want = gguf_open(want_path, &err), *got = gguf_open(got_path, &err);
    if (!want || !got)
        fail_msg("%s", err.message);
    assert_null(gguf_find_tensor(got, "rope_freqs.weight"));
    assert_int_equal(gguf_n_tensors(got), gguf_n_tensors(want) - 1);
    for (size_t i = 0; i < gguf_n_tensors(want); i++) {
        const gguf_tensor *w = gguf_tensor_at(want, i), *g = gguf_find_tensor(got, w->name);
        if (!strcmp(w->name, "rope_freqs.weight"))
            continue;
        if (!g)
            fail_msg("no %s", w->name);
        size_t len = strlen(w->name);
        bool gate = len > 5 && (!strcmp(w->name + len - 5, ".gate") ||
                                !strcmp(w->name + len - 5, "_gate"));
        bool tower = strncmp(w->name, "v.", 2) == 0;
        if (gate && tower) { /* through atanh and back */
            assert_int_equal(g->type, TENSOR_TYPE_F32);
            float x = ((const float *)w->data)[0], y = ((const float *)g->data)[0];
            if (fabsf(x - y) > 1e-6f)
                fail_msg("%s: %g, expected %g", w->name, (double)y, (double)x);
            continue;
        }
        if (g->type != w->type || memcmp(g->ne, w->ne, sizeof w->ne) != 0 ||
            g->size_bytes != w->size_bytes || memcmp(g->data, w->data, w->size_bytes) != 0)
            fail_msg("%s differs (%s, expected %s)", w->name, tensor_type_name(g->type),
                     tensor_type_name(w->type));
    }
    expect_same_keys(want, got, skipped);
    gguf_close(want);
    gguf_close(got);
    expect_tower_fits(got_path);
    assert_int_equal(unlink(got_path), 0);

    rewrite("config.json", "\"cross_attention_layers\": [\n   1,\n   3\n  ]",
            "\"cross_attention_layers\": [\n   3,\n   1\n  ]");
    expect_convert_refusal("config.json: cross_attention_layers must list at most 256 of the 5 "
                           "layers, in ascending order");
}

/* ---- Mistral 3 with its pixtral tower ---- */

/* the converted file's weights are F16 (the reference's projector F32 but its convolution) */
#define MISTRAL3_F16_EMBD_TOLERANCE 5e-3f

/* got's tensor name holds want's values (src_row(r): want's row for got's row r), F16 but
 * for vectors, which stay F32. */
static void expect_tensor_values(const gguf_file *got, const char *name, const gguf_tensor *want,
                                 uint32_t qk_heads, const float *replace_row, uint64_t row)
{
    const gguf_tensor *g = gguf_find_tensor(got, name);
    if (!g)
        fail_msg("no %s", name);
    uint64_t n = gguf_tensor_n_elems(want), cols = (uint64_t)want->ne[0], rows = n / cols;
    assert_int_equal(gguf_tensor_n_elems(g), n);
    assert_int_equal(g->type, want->n_dims == 1 ? TENSOR_TYPE_F32 : TENSOR_TYPE_F16);
    const float *src = want->data;
    uint64_t d = qk_heads ? rows / qk_heads : 0;
    for (uint64_t r = 0; r < rows; r++) {
        /* Hugging Face's row r of a head is llama.cpp's row 2 (r % d/2) + (r % d) / (d/2) */
        uint64_t s = qk_heads ? r / d * d + 2 * (r % d % (d / 2)) + r % d / (d / 2) : r;
        for (uint64_t c = 0; c < cols; c++) {
            float x = replace_row && r == row ? replace_row[c] : src[s * cols + c];
            bool same = g->type == TENSOR_TYPE_F32
                            ? ((const float *)g->data)[r * cols + c] == x
                            : ((const uint16_t *)g->data)[r * cols + c] == quant_f32_to_f16(x);
            if (!same)
                fail_msg("%s differs at row %llu column %llu", name, (unsigned long long)r,
                         (unsigned long long)c);
        }
    }
}

/* The Mistral3ForConditionalGeneration checkpoint of the mistral3 vision fixtures converts to
 * the one file ollama's converter writes: the text model's tensors as a Llama's, the tower's
 * under ollama's names with Q and K in Hugging Face's order, [IMG_BREAK] in the text
 * embeddings, the tower's keys under mistral3.*; its image embeddings are the reference's
 * but for F16's rounding. */
static void test_convert_mistral3_vision_to_one_file(void **state)
{
    (void)state;
    char text_path[4096], mmproj_path[4096], got_path[512];
    snprintf(text_path, sizeof text_path, "%s", fixture("vision/mistral3-text.gguf"));
    snprintf(mmproj_path, sizeof mmproj_path, "%s", fixture("vision/mistral3-mmproj.gguf"));
    hf_fixture_write_pixtral(text_path, mmproj_path, g_root, SAFETENSORS_F16);
    corral_error err = {{0}};
    if (convert("out.gguf", &err) != HF_OK)
        fail_msg("%s", err.message);
    snprintf(got_path, sizeof got_path, "%s", store_fixture_path(g_root, "out.gguf"));
    gguf_file *text = gguf_open(text_path, &err), *mm = gguf_open(mmproj_path, &err);
    gguf_file *got = gguf_open(got_path, &err);
    if (!text || !mm || !got)
        fail_msg("%s", err.message);
    const gguf_tensor *brk = gguf_find_tensor(mm, "v.token_embd.img_break");
    assert_non_null(brk);
    const uint64_t break_id = 305; /* the fixture's [IMG_BREAK] */
    size_t n_tower = 0;
    for (size_t i = 0; i < gguf_n_tensors(text); i++) {
        const gguf_tensor *t = gguf_tensor_at(text, i);
        bool embd = !strcmp(t->name, "token_embd.weight");
        expect_tensor_values(got, t->name, t, 0, embd ? brk->data : NULL, break_id);
    }
    for (size_t i = 0; i < gguf_n_tensors(mm); i++) {
        const gguf_tensor *t = gguf_tensor_at(mm, i);
        char buf[128];
        const char *name = ollama_name_fixture_pixtral(t->name, buf, sizeof buf);
        bool qk = strstr(t->name, ".attn_q.") || strstr(t->name, ".attn_k.");
        if (name)
            expect_tensor_values(got, name, t, qk ? 2 : 0, NULL, 0);
        n_tower += name != NULL;
    }
    assert_int_equal(gguf_n_tensors(got), gguf_n_tensors(text) + n_tower);
    expect_same_keys(text, got, skipped);
    static const struct {
        const char *key;
        uint32_t value;
    } u32s[] = {{"mistral3.vision.block_count", 2},      {"mistral3.vision.embedding_length", 32},
                {"mistral3.vision.feed_forward_length", 64},
                {"mistral3.vision.attention.head_count", 2},
                {"mistral3.vision.attention.key_length", 16},
                {"mistral3.vision.image_size", 64},      {"mistral3.vision.patch_size", 4},
                {"mistral3.vision.num_channels", 3},     {"mistral3.spatial_merge_size", 2},
                {"mistral3.image_token_index", 304}};
    for (size_t i = 0; i < sizeof u32s / sizeof u32s[0]; i++) {
        uint32_t v = 0;
        if (!gguf_get_u32(got, u32s[i].key, &v, &err) || v != u32s[i].value)
            fail_msg("%s is %u, expected %u", u32s[i].key, v, u32s[i].value);
    }
    float base = 0;
    assert_true(gguf_get_f32(got, "mistral3.vision.rope.freq_base", &base, &err));
    assert_true(base == 10000.0f);
    gguf_str act;
    assert_true(gguf_get_str(got, "mistral3.mm.projector_hidden_act", &act, &err));
    assert_true(act.size == 4 && !memcmp(act.data, "gelu", 4));
    const gguf_kv *bias = gguf_find_kv(got, "mistral3.mm.projector_bias");
    assert_true(bias && bias->type == GGUF_TYPE_BOOL);
    assert_null(gguf_find_kv(got, "mistral3.vision.attention.layer_norm_epsilon"));
    gguf_close(got);
    gguf_close(mm);
    gguf_close(text);

    corral_model *model = corral_model_load(got_path, &err);
    corral_mmproj *proj = model ? corral_mmproj_load(got_path, &err) : NULL;
    if (!proj || !corral_mmproj_fits(proj, model, &err))
        fail_msg("%s", err.message);
    size_t size;
    float *pixels = file_fixture_read(fixture("vision/mistral3.wide.pixels.f32"), &size);
    assert_int_equal(size, 40 * 24 * 3 * sizeof(float));
    corral_image_embd embd;
    if (!corral_mmproj_encode(proj, pixels, 40, 24, 1, &embd, &err))
        fail_msg("%s", err.message);
    assert_int_equal(embd.n_tokens, 17); /* 5 x 3 merged, two [IMG_BREAK] rows */
    float *want = file_fixture_read(fixture("vision/mistral3.wide.embd.f32"), &size);
    assert_int_equal(size, embd.n_tokens * embd.n_embd * sizeof(float));
    float worst = 0;
    for (size_t i = 0; i < embd.n_tokens * embd.n_embd; i++)
        worst = fmaxf(worst, fabsf(embd.data[i] - want[i]));
    printf("mistral3 from its checkpoint: image embeddings within %g of the reference's\n",
           (double)worst);
    assert_true(worst < MISTRAL3_F16_EMBD_TOLERANCE);
    free(want);
    free(pixels);
    corral_image_embd_free(&embd);
    corral_mmproj_free(proj);
    corral_model_free(model);
    assert_int_equal(unlink(got_path), 0);

    rewrite("config.json", "\"max_position_embeddings\": 256",
            "\"max_position_embeddings\": 256, \"rope_parameters\": {\"rope_type\": \"yarn\"}");
    expect_convert_refusal("a scaled RoPE ('yarn') is not supported for "
                           "Mistral3ForConditionalGeneration");
}

/* ---- LoRA adapters ---- */

#define ADAPTER_BASE "arch/llama-gqa.gguf"

/* The PEFT adapter in g_root converted for base into out.gguf. */
static hf_status convert_adapter(const char *base, corral_error *err)
{
    static const char *const names[] = {HF_ADAPTER_CONFIG, HF_ADAPTER_WEIGHTS};
    hf_file files[2];
    char paths[2][512], out_path[512];
    size_t n = 0;
    for (size_t i = 0; i < 2; i++)
        if (store_fixture_exists(g_root, names[i])) {
            snprintf(paths[n], sizeof paths[n], "%s", store_fixture_path(g_root, names[i]));
            files[n] = (hf_file){names[i], paths[n]};
            n++;
        }
    snprintf(out_path, sizeof out_path, "%s", store_fixture_path(g_root, "out.gguf"));
    return hf_adapter_convert(files, n, fixture(base), out_path, err);
}

/* The base model's logits for a few tokens with the adapter at path applied. */
static float *adapted_logits(const char *path)
{
    corral_error err;
    corral_model *m = corral_model_load(fixture(ADAPTER_BASE), &err);
    if (!m || !corral_model_add_lora(m, path, 1.0f, &err))
        fail_msg("%s", err.message);
    corral_context_params p;
    corral_context_params_init(&p);
    p.kv_type = CORRAL_KV_F32;
    p.n_ctx = 16;
    p.n_batch = 16;
    p.n_threads = 1;
    corral_context *ctx = corral_context_create(m, &p, &err);
    static const corral_token ids[] = {1, 15, 300, 42, 7, 99};
    corral_batch batch = {.n_tokens = 6, .tokens = ids};
    if (!ctx || !corral_decode(ctx, &batch, &err))
        fail_msg("%s", err.message);
    size_t n_vocab = corral_model_n_vocab(m);
    float *logits = malloc(n_vocab * sizeof *logits);
    assert_non_null(logits);
    memcpy(logits, corral_get_logits(ctx, 5), n_vocab * sizeof *logits);
    corral_context_free(ctx);
    corral_model_free(m);
    return logits;
}

/* A lora/ fixture's PEFT directory converts back to it, value for value in F32, with its keys;
 * applied, it gives the fixture's logits exactly. */
static void adapter_round_trip(const char *fixture_name)
{
    hf_fixture_write_adapter(fixture(fixture_name), fixture(ADAPTER_BASE), g_root);
    corral_error err = {{0}};
    if (convert_adapter(ADAPTER_BASE, &err) != HF_OK)
        fail_msg("%s: %s", fixture_name, err.message);
    gguf_file *want = gguf_open(fixture(fixture_name), &err);
    gguf_file *got = gguf_open(store_fixture_path(g_root, "out.gguf"), &err);
    if (!want || !got)
        fail_msg("%s", err.message);
    assert_int_equal(gguf_n_tensors(got), gguf_n_tensors(want));
    for (size_t i = 0; i < gguf_n_tensors(want); i++) {
        const gguf_tensor *w = gguf_tensor_at(want, i);
        const gguf_tensor *g = gguf_find_tensor(got, w->name);
        if (!g)
            fail_msg("%s: no %s", fixture_name, w->name);
        assert_int_equal(g->type, TENSOR_TYPE_F32);
        for (int d = 0; d < 4; d++)
            assert_int_equal(g->ne[d], w->ne[d]);
        for (uint64_t e = 0; e < gguf_tensor_n_elems(w); e++) {
            const uint16_t *halves = w->data;
            float x = w->type == TENSOR_TYPE_F32 ? ((const float *)w->data)[e]
                                                 : quant_f16_to_f32(halves[e]);
            expect_element(x, TENSOR_TYPE_F32, g->data, e, w->name);
        }
    }
    static const char *const keys[] = {"general.architecture", "general.type", "adapter.type",
                                       "adapter.lora.alpha"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const gguf_kv *w = gguf_find_kv(want, keys[i]), *g = gguf_find_kv(got, keys[i]);
        if (!g || !kv_equal(w, g))
            fail_msg("%s: %s %s", fixture_name, keys[i], g ? "differs" : "is missing");
    }
    gguf_close(want);
    gguf_close(got);
    float *a = adapted_logits(fixture(fixture_name));
    float *b = adapted_logits(store_fixture_path(g_root, "out.gguf"));
    assert_memory_equal(a, b, 512 * sizeof *a);
    free(a);
    free(b);
}

static void test_convert_adapter_f32_round_trip(void **state)
{
    (void)state;
    adapter_round_trip("lora/adapter-f32-r4.gguf");
}

static void test_convert_adapter_f16_round_trip(void **state)
{
    (void)state;
    adapter_round_trip("lora/adapter-f16-qv.gguf");
}

static void expect_adapter_refusal(const char *base, const char *why)
{
    corral_error err = {{0}};
    assert_int_equal(convert_adapter(base, &err), HF_INVALID);
    if (!strstr(err.message, why))
        fail_msg("'%s', expected '%s'", err.message, why);
    assert_false(store_fixture_exists(g_root, "out.gguf"));
}

/* Each case starts from the F16 adapter's PEFT directory with one thing wrong. */
static void test_convert_refuses_adapters_it_cannot_convert(void **state)
{
    (void)state;
    static const struct {
        const char *file, *from, *to, *why;
    } cases[] = {
        {HF_ADAPTER_CONFIG, "\"use_rslora\": false", "\"use_rslora\": true", "use_rslora"},
        {HF_ADAPTER_CONFIG, "\"use_dora\": false", "\"use_dora\": true", "use_dora"},
        {HF_ADAPTER_CONFIG, "\"peft_type\": \"LORA\"", "\"peft_type\": \"IA3\"", "peft_type"},
        {HF_ADAPTER_CONFIG, "\"lora_alpha\"", "\"lora_alphx\"", "lora_alpha must be"},
        {HF_ADAPTER_CONFIG, "\"use_dora\": false", "\"alpha_pattern\": {\"q_proj\": 2}",
         "alpha_pattern"},
        {HF_ADAPTER_WEIGHTS, "layers.0.self_attn.q_proj.lora_B", "layers.0.self_attn.q_proj.lora_C",
         "is not a LoRA matrix"},
        {HF_ADAPTER_WEIGHTS, "layers.0.self_attn.q_proj.lora_B", "layers.0.self_attn.k_proj.lora_B",
         "has no lora_"},
        {HF_ADAPTER_WEIGHTS, "layers.0.self_attn.q_proj.lora_A", "layers.0.self_attn.q_norm.lora_A",
         "which is not an attention, feed-forward or output matrix"},
        {HF_ADAPTER_WEIGHTS, "layers.0.self_attn.q_proj.lora_A", "layers.9.self_attn.q_proj.lora_A",
         "which is not an attention"},
        /* the first tensor (q_proj's lora_A, [8, 64] F16) as bytes of the same size */
        {HF_ADAPTER_WEIGHTS, "\"dtype\":\"F16\",\"shape\":[8,", "\"dtype\":\"U8\",\"shape\":[16,",
         "is not a matrix of numbers"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hf_fixture_write_adapter(fixture("lora/adapter-f16-qv.gguf"), fixture(ADAPTER_BASE),
                                 g_root);
        rewrite(cases[i].file, cases[i].from, cases[i].to);
        expect_adapter_refusal(ADAPTER_BASE, cases[i].why);
    }
    hf_fixture_write_adapter(fixture("lora/adapter-f16-qv.gguf"), fixture(ADAPTER_BASE), g_root);
    expect_adapter_refusal("arch/phi2.gguf", "not 'phi2'");
    /* converted as models, but with matrices split or fused on the way (kv_b, conv) */
    expect_adapter_refusal("arch/deepseek2.gguf", "not 'deepseek2'");
    expect_adapter_refusal("arch/lfm2.gguf", "not 'lfm2'");
    /* Qwen 3.5's linear attention is reshaped by the model's conversion, not by an adapter's */
    expect_adapter_refusal("arch/qwen35.gguf", "does not convert adapters for qwen35 models");
    expect_adapter_refusal("lora/adapter-f16-qv.gguf", "the base model");
    assert_int_equal(unlink(store_fixture_path(g_root, HF_ADAPTER_CONFIG)), 0);
    expect_adapter_refusal(ADAPTER_BASE, HF_ADAPTER_CONFIG " is missing");
}

/* ---- refusals ---- */

static void expect_convert_refusal(const char *why)
{
    corral_error err = {{0}};
    assert_int_equal(convert("out.gguf", &err), HF_INVALID);
    if (!strstr(err.message, why))
        fail_msg("'%s', expected '%s'", err.message, why);
    assert_false(store_fixture_exists(g_root, "out.gguf"));
}

static void rewrite(const char *name, const char *from, const char *to)
{
    size_t len;
    char *text = file_fixture_read(store_fixture_path(g_root, name), &len);
    char *at = memmem(text, len, from, strlen(from)); /* a safetensors file holds NUL bytes */
    if (!at)
        fail_msg("no '%s' in %s", from, name);
    size_t out_len = len - strlen(from) + strlen(to);
    char *out = malloc(out_len + 1);
    assert_non_null(out);
    memcpy(out, text, (size_t)(at - text));
    memcpy(out + (at - text), to, strlen(to));
    memcpy(out + (at - text) + strlen(to), at + strlen(from), len - (size_t)(at - text) -
                                                                  strlen(from));
    store_fixture_write(g_root, name, out, out_len);
    free(out);
    free(text);
}

static void test_convert_refuses_what_it_cannot_convert(void **state)
{
    (void)state;
    hf_fixture_write(fixture("arch/qwen2.gguf"), g_root, "GPTNeoXForCausalLM", SAFETENSORS_F16,
                     hf_fixture_qwen2_regex);
    expect_convert_refusal("unsupported architecture 'GPTNeoXForCausalLM' (`corral create "
                           "--help` lists those Corral converts)");
    /* a name longer than a message shows is cut where it says so, the message whole */
    char long_name[CORRAL_ERROR_MAX + 1], shown[HF_SHOWN_NAME_BYTES + 8];
    memset(long_name, 'X', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    char value[sizeof long_name + 8];
    snprintf(value, sizeof value, "[\"%s\"]", long_name);
    set_json("config.json", "", "architectures", value);
    corral_error cut = {{0}};
    assert_int_equal(convert("out.gguf", &cut), HF_INVALID);
    snprintf(shown, sizeof shown, "'%.*s...'", HF_SHOWN_NAME_BYTES, long_name);
    assert_non_null(strstr(cut.message, shown));
    assert_non_null(strstr(cut.message, "lists those Corral converts)"));
    assert_true(strlen(cut.message) < sizeof cut.message - 1);

    hf_fixture_write(fixture("arch/qwen2.gguf"), g_root, "Qwen3ForCausalLM", SAFETENSORS_F16,
                     hf_fixture_qwen2_regex); /* qwen2's biases are no part of qwen3 */
    expect_convert_refusal("_proj.bias' is not one of a Qwen3ForCausalLM's");

    hf_fixture_write(fixture("arch/qwen2.gguf"), g_root, "Qwen2ForCausalLM", SAFETENSORS_F16,
                     hf_fixture_qwen2_regex);
    rewrite("model.safetensors.index.json", "model-00002-of-00002", "model-00003-of-00003");
    expect_convert_refusal("'model-00003-of-00003.safetensors', which is not among the files");

    hf_fixture_write(fixture("arch/qwen2.gguf"), g_root, "Qwen2ForCausalLM", SAFETENSORS_F16,
                     hf_fixture_qwen2_regex);
    rewrite("tokenizer.json", "\"BPE\"", "\"WordLevel\"");
    expect_convert_refusal("Corral converts BPE, WordPiece and Unigram tokenizers, not "
                           "'WordLevel'");
    rewrite("tokenizer.json", "\"WordLevel\"", "\"Unigram\""); /* a BPE's vocab object */
    expect_convert_refusal("a Unigram model.vocab must be a list of [piece, score] pairs");

    hf_fixture_write(fixture("arch/qwen2.gguf"), g_root, "Qwen2ForCausalLM", SAFETENSORS_F16,
                     hf_fixture_qwen2_regex);
    rewrite("tokenizer.json", "\"BPE\"", "\"BPE\", \"byte_fallback\": true");
    expect_convert_refusal("give its tokenizer.model too");

    hf_fixture_write(fixture("arch/qwen2.gguf"), g_root, "Qwen2ForCausalLM", SAFETENSORS_F16,
                     hf_fixture_qwen2_regex);
    rewrite("config.json", "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 1");
    expect_convert_refusal("'model.layers.1.");

    hf_fixture_write(fixture("arch/qwen2.gguf"), g_root, "Qwen2ForCausalLM", SAFETENSORS_F16,
                     hf_fixture_qwen2_regex);
    rewrite("config.json", "\"hidden_size\": 64", "\"hidden_size\": -64");
    expect_convert_refusal("hidden_size must be an integer");

    hf_fixture_write(fixture("arch/qwen2.gguf"), g_root, "Qwen2ForCausalLM", SAFETENSORS_F16,
                     hf_fixture_qwen2_regex);
    rewrite("model-00001-of-00002.safetensors", "\"F16\"", "\"I64\"");
    expect_convert_refusal("model-00001-of-00002.safetensors: tensor");

    hf_fixture_write(fixture("arch/llama-gqa.gguf"), g_root, "LlamaForCausalLM", SAFETENSORS_F16,
                     NULL);
    rewrite("config.json", "\"num_attention_heads\": 4", "\"num_attention_heads\": 3");
    expect_convert_refusal("do not make an attention layer");

    hf_fixture_write(fixture("arch/llama-gqa.gguf"), g_root, "LlamaForCausalLM", SAFETENSORS_F16,
                     NULL);
    store_fixture_write(g_root, "tokenizer.model", "\x0a\x05" "ab", 4); /* a piece cut short */
    expect_convert_refusal("tokenizer.model is not a SentencePiece model");

    unlink(store_fixture_path(g_root, "tokenizer.model")); /* BPE from here on */
    hf_fixture_write(fixture("arch/qwen3moe.gguf"), g_root, "Qwen3MoeForCausalLM",
                     SAFETENSORS_F16, hf_fixture_qwen2_regex);
    rewrite("config.json", "\"num_experts\": 8", "\"num_experts\": 9");
    expect_convert_refusal("the checkpoint has no expert 8 for 'blk.0.ffn_");

    hf_fixture_write(fixture("arch/qwen3moe.gguf"), g_root, "Qwen3MoeForCausalLM",
                     SAFETENSORS_F16, hf_fixture_qwen2_regex);
    rewrite("config.json", "\"num_experts\": 8", "\"num_experts\": 7");
    expect_convert_refusal("is not an expert's matrix of this Qwen3MoeForCausalLM");

    hf_fixture_write(fixture("arch/granite.gguf"), g_root, "GraniteForCausalLM",
                     SAFETENSORS_F16, hf_fixture_qwen2_regex);
    set_json("config.json", "", "embedding_multiplier", "-12");
    expect_convert_refusal("embedding_multiplier must be a positive number");

    hf_fixture_write(fixture("arch/olmo3.gguf"), g_root, "Olmo3ForCausalLM", SAFETENSORS_F16,
                     hf_fixture_qwen2_regex);
    set_json("config.json", "rope_scaling", "attention_factor", "\"1.2\"");
    expect_convert_refusal("attention_factor must be a positive number");

    hf_fixture_write(fixture("arch/starcoder2.gguf"), g_root, "Starcoder2ForCausalLM",
                     SAFETENSORS_F16, hf_fixture_qwen2_regex);
    set_json("config.json", "", "norm_epsilon", "0");
    expect_convert_refusal("norm_epsilon must be a positive number");

    hf_fixture_write(fixture("arch/olmo2.gguf"), g_root, "Cohere2ForCausalLM", SAFETENSORS_F16,
                     hf_fixture_qwen2_regex); /* OLMo 2's norms are no part of Cohere 2 */
    expect_convert_refusal("is not one of a Cohere2ForCausalLM's");

    hf_fixture_write(fixture("arch/qwen35.gguf"), g_root, "Qwen3_5ForConditionalGeneration",
                     SAFETENSORS_F16, hf_fixture_qwen2_regex);
    set_json("config.json", "text_config", "linear_num_value_heads", "3");
    expect_convert_refusal("linear_num_value_heads (3) must be a multiple of");

    hf_fixture_write(fixture("arch/qwen35.gguf"), g_root, "Qwen3_5ForConditionalGeneration",
                     SAFETENSORS_F16, hf_fixture_qwen2_regex); /* value heads of 8, not 16 */
    set_json("config.json", "text_config", "linear_value_head_dim", "8");
    expect_convert_refusal("has 128 rows where config.json's linear attention makes 96");

    hf_fixture_write(fixture("arch/qwen35.gguf"), g_root, "Qwen3_5ForConditionalGeneration",
                     SAFETENSORS_F16, hf_fixture_qwen2_regex); /* layer 3 made a DeltaNet one */
    set_json("config.json", "text_config", "full_attention_interval", "5");
    expect_convert_refusal("layers.3.self_attn.k_norm.weight' is not one of a "
                           "Qwen3_5ForConditionalGeneration's");

    hf_fixture_write(fixture("arch/qwen35moe.gguf"), g_root, "Qwen3_5MoeForConditionalGeneration",
                     SAFETENSORS_F16, hf_fixture_qwen2_regex); /* experts 32 wide, not 16 */
    set_json("config.json", "text_config", "moe_intermediate_size", "16");
    expect_convert_refusal("experts.down_proj' is not [8, 64, 16]");

    write_qwen3next_split(fixture("arch/qwen3next.gguf"), store_fixture_path(g_root, "s.gguf"));
    char split[512];
    snprintf(split, sizeof split, "%s", store_fixture_path(g_root, "s.gguf"));
    hf_fixture_write(split, g_root, "Qwen3NextForCausalLM", SAFETENSORS_F16,
                     hf_fixture_qwen2_regex); /* value heads of 8, not 16 */
    set_json("config.json", "", "linear_value_head_dim", "8");
    expect_convert_refusal("in_proj_qkvz.weight' is not [128, 64]");

    corral_error err = {{0}};
    hf_file none[1] = {{"tokenizer.json", "/nonexistent"}};
    assert_int_equal(hf_convert(none, 1, store_fixture_path(g_root, "x.gguf"), &err), HF_INVALID);
    assert_non_null(strstr(err.message, "no config.json"));
}

/* gpt-oss's MXFP4 experts: bytes only there, blocks with their scales, at config.json's shape */
static void test_convert_refuses_malformed_gptoss_experts(void **state)
{
    (void)state;
    static const char scales[] = "model.layers.0.mlp.experts.down_proj_scales";
    const char *const shards[] = {"model-00001-of-00002.safetensors",
                                  "model-00002-of-00002.safetensors"};
    const char *shard = NULL;
    hf_fixture_write_experts_from(fixture("arch/gpt-oss.gguf"), fixture("arch/gpt-oss-mxfp4.gguf"),
                                  g_root, "GptOssForCausalLM", SAFETENSORS_BF16,
                                  hf_fixture_qwen2_regex);
    for (int i = 0; i < 2 && !shard; i++) {
        size_t len;
        char *text = file_fixture_read(store_fixture_path(g_root, shards[i]), &len);
        if (memmem(text, len, scales, strlen(scales)))
            shard = shards[i];
        free(text);
    }
    assert_non_null(shard);
    rewrite(shard, scales, "model.layers.0.mlp.experts.down_proj_scalez");
    expect_convert_refusal("down_proj_scalez' is U8: only gpt-oss's MXFP4 experts");

    hf_fixture_write_experts_from(fixture("arch/gpt-oss.gguf"), fixture("arch/gpt-oss-mxfp4.gguf"),
                                  g_root, "GptOssForCausalLM", SAFETENSORS_BF16,
                                  hf_fixture_qwen2_regex);
    /* a name the converter passes over: the scales are gone */
    rewrite(shard, scales, "model.layers.0.mlp.expe.rotary_emb.inv_freq");
    expect_convert_refusal("MXFP4 blocks but not their scales for 'blk.0.ffn_down_exps.weight'");

    hf_fixture_write_experts_from(fixture("arch/gpt-oss.gguf"), fixture("arch/gpt-oss-mxfp4.gguf"),
                                  g_root, "GptOssForCausalLM", SAFETENSORS_BF16,
                                  hf_fixture_qwen2_regex);
    rewrite(shard, scales, "model.layers.7.mlp.experts.down_proj_scales");
    expect_convert_refusal("down_proj_scales' is not the U8 tensor [8, 64, 1] of this GptOssForCausalLM's 4 "
                           "layers");

    hf_fixture_write_experts_from(fixture("arch/gpt-oss.gguf"), fixture("arch/gpt-oss-mxfp4.gguf"),
                                  g_root, "GptOssForCausalLM", SAFETENSORS_BF16,
                                  hf_fixture_qwen2_regex);
    rewrite("config.json", "\"num_local_experts\": 8", "\"num_local_experts\": 9");
    expect_convert_refusal("tensor [9, ");
}

/* One JSON file of the checkpoint with key set to value (a JSON text) in its object at path
 * ("" for the top, else one key). */
/* The gpt-oss fixture's checkpoint with a third shard of one 16-byte tensor (header) is
 * refused with message, and nothing is written. */
static void expect_third_shard_refused(const char *header, const char *message)
{
    hf_fixture_write(fixture("arch/gpt-oss.gguf"), g_root, "GptOssForCausalLM",
                     SAFETENSORS_BF16, hf_fixture_qwen2_regex);
    size_t size;
    uint8_t *bytes = image(header, 16, &size);
    store_fixture_write(g_root, "model-00003-of-00003.safetensors", bytes, size);
    free(bytes);
    checkpoint cp;
    list_checkpoint(&cp);
    char extra[512], out_path[512];
    snprintf(extra, sizeof extra, "%s",
             store_fixture_path(g_root, "model-00003-of-00003.safetensors"));
    cp.files[cp.n++] = (hf_file){"model-00003-of-00003.safetensors", extra};
    snprintf(out_path, sizeof out_path, "%s", store_fixture_path(g_root, "out.gguf"));
    corral_error err = {{0}};
    assert_int_equal(hf_convert(cp.files, cp.n, out_path, &err), HF_INVALID);
    if (!strstr(err.message, message))
        fail_msg("%s", err.message);
    assert_false(store_fixture_exists(g_root, "out.gguf"));
}

/* One expert's matrix in a later shard than its layer's whole experts tensor (gpt-oss's
 * gate_up_proj) is refused, not added to a stack that tensor is not. */
static void test_convert_refuses_an_expert_beside_its_whole_stack(void **state)
{
    (void)state;
    expect_third_shard_refused("{\"model.layers.0.mlp.experts.0.gate_proj.weight\":"
                               "{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}",
                               "experts.0.gate_proj.weight' is a matrix of "
                               "'blk.0.ffn_gate_exps.weight', which the checkpoint also holds "
                               "whole");
}

/* A tensor a later shard gives again (the converter finds names through its index). */
static void test_convert_refuses_a_tensor_given_twice(void **state)
{
    (void)state;
    expect_third_shard_refused("{\"model.norm.weight\":"
                               "{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
                               "tensor 'model.norm.weight' is in the checkpoint twice");
}

static void set_json(const char *name, const char *path, const char *key, const char *value)
{
    json_error_t jerr;
    json_t *root = json_load_file(store_fixture_path(g_root, name), 0, &jerr);
    json_t *v = json_loads(value, JSON_DECODE_ANY, &jerr);
    assert_non_null(root);
    assert_non_null(v);
    json_t *obj = *path ? json_object_get(root, path) : root;
    assert_non_null(obj);
    json_object_set_new(obj, key, v);
    char *text = json_dumps(root, 0);
    store_fixture_write(g_root, name, text, strlen(text));
    free(text);
    json_decref(root);
}

/* Command R's RoPE is never scaled, and its q/k norms come with use_qk_norm. */
static void test_convert_refuses_what_command_r_lacks(void **state)
{
    (void)state;
    hf_fixture_write(fixture("arch/command-r-plus.gguf"), g_root, "CohereForCausalLM",
                     SAFETENSORS_F16, NULL);
    set_json("config.json", "", "rope_scaling", "{\"rope_type\": \"linear\", \"factor\": 2}");
    expect_convert_refusal("a scaled RoPE ('linear') is not supported for CohereForCausalLM");
    set_json("config.json", "", "rope_scaling", "null");
    set_json("config.json", "", "use_qk_norm", "false");
    expect_convert_refusal("tensor 'model.layers.0.self_attn.q_norm.weight' is not one of a "
                           "CohereForCausalLM's");
    set_json("config.json", "", "use_qk_norm", "1");
    expect_convert_refusal("use_qk_norm must be true or false");
}

/* An encoder needs its sentence-transformers modules, each checked; integers are only its
 * position ids. */
static void test_convert_refuses_what_bert_lacks(void **state)
{
    (void)state;
    hf_fixture_write(fixture("arch/bert.gguf"), g_root, "BertModel", SAFETENSORS_F16, NULL);
    set_json("1_Pooling/config.json", "", "pooling_mode_mean_tokens", "1");
    expect_convert_refusal("pooling_mode_mean_tokens must be true or false");
    store_fixture_write(g_root, "modules.json", "{}", 2);
    expect_convert_refusal("modules.json must be a list of sentence-transformers modules");
    static const char escape[] =
        "[{\"type\": \"sentence_transformers.models.Pooling\", \"path\": \"a/..\"}]";
    store_fixture_write(g_root, "modules.json", escape, strlen(escape));
    expect_convert_refusal("module 0's path must name one folder");
    static const char dense[] =
        "[{\"type\": \"sentence_transformers.models.Dense\", \"path\": \"2_Dense\"}]";
    store_fixture_write(g_root, "modules.json", dense, strlen(dense));
    expect_convert_refusal("a BertModel with a Dense module ('2_Dense') is not converted");
    static const char other[] =
        "[{\"type\": \"sentence_transformers.models.Pooling\", \"path\": \"2_Pooling\"}]";
    store_fixture_write(g_root, "modules.json", other, strlen(other));
    expect_convert_refusal("the checkpoint has no 2_Pooling/config.json");
    remove(store_fixture_path(g_root, "modules.json"));
    expect_convert_refusal("the checkpoint has no modules.json: a BertModel converts with its "
                           "sentence-transformers modules");

    hf_fixture_write(fixture("arch/bert.gguf"), g_root, "BertModel", SAFETENSORS_F16, NULL);
    rewrite("model-00002-of-00002.safetensors", "embeddings.position_ids",
            "embeddings.position_idz");
    expect_convert_refusal("tensor 'embeddings.position_idz' is I64: only a BERT's position "
                           "ids");
}

/* EmbeddingGemma needs both projections, without biases, of the sizes their configs give. */
static void test_convert_refuses_what_gemma_embedding_lacks(void **state)
{
    (void)state;
    hf_fixture_write(fixture("arch/gemma-embedding.gguf"), g_root, "Gemma3TextModel",
                     SAFETENSORS_F16, NULL);
    set_json("3_Dense/config.json", "", "bias", "true");
    expect_convert_refusal("3_Dense/config.json: a projection with a bias is not converted");
    set_json("3_Dense/config.json", "", "bias", "false");
    set_json("3_Dense/config.json", "", "in_features", "95");
    expect_convert_refusal("3_Dense/model.safetensors: linear.weight must be a [64, 95] matrix");
    remove(store_fixture_path(g_root, "3_Dense/model.safetensors"));
    expect_convert_refusal("the checkpoint has no 3_Dense/model.safetensors");
    static const char one[] =
        "[{\"type\": \"sentence_transformers.models.Dense\", \"path\": \"2_Dense\"}]";
    store_fixture_write(g_root, "modules.json", one, strlen(one));
    expect_convert_refusal("a Gemma3TextModel needs its 2_Dense and 3_Dense modules");
}

/* LFM2's layers are what layer_types says; its convolution needs its taps, its MoE experts. */
static void test_convert_refuses_what_lfm2_lacks(void **state)
{
    (void)state;
    static const struct {
        const char *key, *value, *why;
    } cases[] = {
        {"conv_L_cache", "null", "config.json has no conv_L_cache"},
        {"conv_L_cache", "65", "conv_L_cache must be an integer from 1 to 64"},
        {"layer_types", "\"conv\"", "layer_types must be a list"},
        {"layer_types", "[\"full_attention\"]",
         "tensor 'model.layers.0.conv.conv.weight' is not one of a Lfm2ForCausalLM's"},
        {"block_auto_adjust_ff_dim", "1", "block_auto_adjust_ff_dim must be true or false"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hf_fixture_write(fixture("arch/lfm2.gguf"), g_root, "Lfm2ForCausalLM", SAFETENSORS_F16,
                         hf_fixture_qwen2_regex);
        set_json("config.json", "", cases[i].key, cases[i].value);
        expect_convert_refusal(cases[i].why);
    }
    hf_fixture_write(fixture("arch/lfm2.gguf"), g_root, "Lfm2ForCausalLM", SAFETENSORS_F16,
                     hf_fixture_qwen2_regex);
    set_json("config.json", "", "num_local_experts", "4"); /* ollama's other spelling */
    set_json("config.json", "", "num_experts_per_tok", "2");
    expect_convert_refusal("a Lfm2ForCausalLM has no experts");
    hf_fixture_write(fixture("arch/lfm2moe.gguf"), g_root, "Lfm2MoeForCausalLM",
                     SAFETENSORS_F16, hf_fixture_qwen2_regex);
    set_json("config.json", "", "num_experts", "null");
    set_json("config.json", "", "num_experts_per_tok", "null");
    expect_convert_refusal("a Lfm2MoeForCausalLM needs num_experts");
}

/* Gemma 4's layer kinds, head widths and experts come from its config; a global layer whose
 * keys serve as values has no v_proj. */
static void test_convert_refuses_what_gemma4_lacks(void **state)
{
    (void)state;
    static const struct {
        const char *fixture, *key, *value, *why;
    } cases[] = {
        {"arch/gemma4.gguf", "global_head_dim", "null", "config.json has no global_head_dim"},
        {"arch/gemma4.gguf", "layer_types", "[\"full_attention\"]",
         "a Gemma4ForCausalLM needs layer_types, one per layer (6)"},
        {"arch/gemma4.gguf", "layer_types",
         "[\"sliding_attention\", \"sliding_attention\", \"chunked_attention\", "
         "\"sliding_attention\", \"sliding_attention\", \"full_attention\"]",
         "layer_types[2] is not \"sliding_attention\" or \"full_attention\""},
        {"arch/gemma4.gguf", "num_global_key_value_heads", "3",
         "4 heads of 32 dimensions (3 key/value heads) do not make a global attention layer"},
        {"arch/gemma4.gguf", "num_kv_shared_layers", "6",
         "num_kv_shared_layers must be below num_hidden_layers"},
        {"arch/gemma4-e.gguf", "attention_k_eq_v", "true",
         "tensor 'model.language_model.layers.1.self_attn.v_proj.weight' is not one of a "
         "Gemma4ForConditionalGeneration's"},
        {"arch/gemma4.gguf", "hidden_size_per_layer_input", "-1",
         "hidden_size_per_layer_input must be an integer from 0 to"},
        {"arch/gemma4-moe.gguf", "top_k_experts", "null", "config.json has no top_k_experts"},
        {"arch/gemma4-moe.gguf", "enable_moe_block", "false",
         "tensor 'model.language_model.layers.0.experts.down_proj' is not one of a "
         "Gemma4ForConditionalGeneration's"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool nested = strcmp(cases[i].fixture, "arch/gemma4.gguf") != 0;
        hf_fixture_write(fixture(cases[i].fixture), g_root,
                         nested ? "Gemma4ForConditionalGeneration" : "Gemma4ForCausalLM",
                         SAFETENSORS_F16, NULL);
        set_json("config.json", nested ? "text_config" : "", cases[i].key, cases[i].value);
        expect_convert_refusal(cases[i].why);
    }
    hf_fixture_write(fixture("arch/gemma4.gguf"), g_root, "Gemma4ForCausalLM", SAFETENSORS_F16,
                     NULL);
    set_json("config.json", "rope_parameters", "full_attention", "{\"rope_type\": \"default\"}");
    expect_convert_refusal("rope_parameters' full_attention and sliding_attention each need a "
                           "rope_theta");
}

/* Nemotron-H's layers are what hybrid_override_pattern says, its Mamba2 sizes required. */
static void test_convert_refuses_what_nemotron_h_lacks(void **state)
{
    (void)state;
    static const struct {
        const char *key, *value, *why;
    } cases[] = {
        {"hybrid_override_pattern", "\"M-*M\"", "must give each of the 5 layers a kind"},
        {"hybrid_override_pattern", "\"M-*MX\"", "must give each of the 5 layers a kind"},
        {"hybrid_override_pattern", "[\"M-\", 5]", "must give each of the 5 layers a kind"},
        {"hybrid_override_pattern", "\"M-*ME\"", "layer 4 is a mixture of experts"},
        {"hybrid_override_pattern", "\"MM*M-\"",
         "tensor 'backbone.layers.1.mixer.down_proj.weight' is not one of a"},
        {"conv_kernel", "null", "config.json has no conv_kernel"},
        {"n_groups", "3", "do not make a Mamba2 mixer"},
        {"norm_topk_prob", "1", "norm_topk_prob must be true or false"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hf_fixture_write(fixture("arch/nemotron-h.gguf"), g_root, "NemotronHForCausalLM",
                         SAFETENSORS_F16, hf_fixture_qwen2_regex);
        set_json("config.json", "", cases[i].key, cases[i].value);
        expect_convert_refusal(cases[i].why);
    }
}

/* GLM-4 MoE Lite's latent attention is what its config says, its experts required. */
static void test_convert_refuses_what_glm4moelite_lacks(void **state)
{
    (void)state;
    static const struct {
        const char *key, *value, *why;
    } cases[] = {
        {"q_lora_rank", "null", "config.json has no q_lora_rank"},
        {"v_head_dim", "31", "tensor 'model.layers.0.self_attn.kv_b_proj.weight' is not "
                             "[220, 40]"},
        {"first_k_dense_replace", "4", "first_k_dense_replace at most num_hidden_layers"},
        {"moe_intermediate_size", "null", "needs n_routed_experts, num_experts_per_tok and "
                                          "moe_intermediate_size"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hf_fixture_write(fixture("arch/deepseek2.gguf"), g_root, "Glm4MoeLiteForCausalLM",
                         SAFETENSORS_F16, hf_fixture_qwen2_regex);
        set_json("config.json", "", cases[i].key, cases[i].value);
        expect_convert_refusal(cases[i].why);
    }
}

/* Every tokenizer file's fields are checked before they index anything. */
static void test_convert_refuses_malformed_tokenizers(void **state)
{
    (void)state;
    static const struct {
        const char *file, *path, *key, *value, *why;
    } cases[] = {
        {"tokenizer.json", "model", "merges", "[[1, 2]]", "merges[0] is neither"},
        {"tokenizer.json", "model", "vocab", "{\"a\": 16777216}", "has no id below 16777216"},
        {"tokenizer.json", "model", "vocab", "{\"a\": 3, \"b\": 3}", "id 3 is given to two"},
        {"tokenizer.json", "", "added_tokens", "[{\"id\": -1, \"content\": \"x\"}]",
         "added_tokens[0] needs a content string and an id below"},
        {"tokenizer_config.json", "", "add_bos_token", "\"yes\"", "must be true or false"},
        {"tokenizer_config.json", "", "chat_template", "5", "chat_template must be a string"},
        {"generation_config.json", "", "eos_token_id", "[301, 99999]", "is not a token id"},
        {"config.json", "", "vocab_size", "16777217", "vocab_size must be an integer"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hf_fixture_write(fixture("arch/qwen2.gguf"), g_root, "Qwen2ForCausalLM", SAFETENSORS_F16,
                         hf_fixture_qwen2_regex);
        set_json(cases[i].file, cases[i].path, cases[i].key, cases[i].value);
        expect_convert_refusal(cases[i].why);
    }
    /* added_tokens.json beside a tokenizer.model must continue its ids without a gap */
    hf_fixture_write(fixture("arch/llama-gqa.gguf"), g_root, "LlamaForCausalLM",
                     SAFETENSORS_F16, NULL);
    static const char gap[] = "{\"<x>\": 600}", clash[] = "{\"<x>\": 5}";
    store_fixture_write(g_root, "added_tokens.json", gap, strlen(gap));
    expect_convert_refusal("added_tokens.json: no token has id 512");
    store_fixture_write(g_root, "added_tokens.json", clash, strlen(clash));
    expect_convert_refusal("added_tokens.json: '<x>' is not token 5");
    /* a token past the pieces (and one that repeats its piece) is accepted: user-defined */
    static const char more[] = "{\"<x>\": 512, \"<s>\": 1}";
    store_fixture_write(g_root, "added_tokens.json", more, strlen(more));
    corral_error err = {{0}};
    if (convert("out.gguf", &err) != HF_OK)
        fail_msg("%s", err.message);
    gguf_file *got = gguf_open(store_fixture_path(g_root, "out.gguf"), &err);
    assert_non_null(got);
    const gguf_kv *tokens = gguf_find_kv(got, "tokenizer.ggml.tokens");
    const gguf_kv *types = gguf_find_kv(got, "tokenizer.ggml.token_type");
    assert_int_equal(tokens->n, 513);
    assert_int_equal(gguf_kv_str(tokens, 512).size, 3);
    assert_memory_equal(gguf_kv_str(tokens, 512).data, "<x>", 3);
    assert_int_equal(gguf_kv_i64(types, 512), 4);
    gguf_close(got);
}

/* Ids no token has are padded with "[PAD<id>]" tokens, but at most 65536 of them: a few bytes
 * of config.json or tokenizer.json cannot make a vocabulary of millions. */
static void test_convert_caps_vocabulary_padding(void **state)
{
    (void)state;
    hf_fixture_write(fixture("arch/qwen2.gguf"), g_root, "Qwen2ForCausalLM", SAFETENSORS_F16,
                     hf_fixture_qwen2_regex);
    set_json("config.json", "", "vocab_size", "16777216");
    expect_convert_refusal("more than 65536 ids without a token");
    hf_fixture_write(fixture("arch/qwen2.gguf"), g_root, "Qwen2ForCausalLM", SAFETENSORS_F16,
                     hf_fixture_qwen2_regex);
    set_json("tokenizer.json", "", "added_tokens",
             "[{\"id\": 16777000, \"content\": \"<x>\", \"special\": true}]");
    expect_convert_refusal("would be padded to 16777001 ids");

    hf_fixture_write(fixture("arch/llama-gqa.gguf"), g_root, "LlamaForCausalLM",
                     SAFETENSORS_F16, NULL); /* tokenizer.model, 512 pieces */
    set_json("config.json", "", "vocab_size", "66048");
    corral_error err = {{0}};
    if (convert("out.gguf", &err) != HF_OK)
        fail_msg("%s", err.message);
    gguf_file *got = gguf_open(store_fixture_path(g_root, "out.gguf"), &err);
    assert_non_null(got);
    const gguf_kv *tokens = gguf_find_kv(got, "tokenizer.ggml.tokens");
    assert_int_equal(tokens->n, 66048);
    assert_int_equal(gguf_kv_str(tokens, 66047).size, 10);
    assert_memory_equal(gguf_kv_str(tokens, 66047).data, "[PAD66047]", 10);
    assert_int_equal(gguf_kv_i64(gguf_find_kv(got, "tokenizer.ggml.token_type"), 66047), 4);
    gguf_close(got);
    assert_int_equal(unlink(store_fixture_path(g_root, "out.gguf")), 0);
    set_json("config.json", "", "vocab_size", "66049");
    expect_convert_refusal("vocab_size 66049 is more than 65536 ids past tokenizer.model's 512");
}

/* For tests/integration/cli.test.sh: the qwen2 fixture's checkpoint into a directory. */
static const char *g_write_dir;

static void write_checkpoint(void **state)
{
    (void)state;
    hf_fixture_write(fixture("arch/qwen2.gguf"), g_write_dir, "Qwen2ForCausalLM",
                     SAFETENSORS_F16, hf_fixture_qwen2_regex);
}

/* ... the bert and gemma-embedding fixtures', their modules' files one folder down ... */
static void write_embedding_checkpoints(void **state)
{
    (void)state;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/bert-hf", g_write_dir);
    hf_fixture_write(fixture("arch/bert.gguf"), dir, "BertModel", SAFETENSORS_F16, NULL);
    snprintf(dir, sizeof dir, "%s/embeddinggemma-hf", g_write_dir);
    hf_fixture_write(fixture("arch/gemma-embedding.gguf"), dir, "Gemma3TextModel",
                     SAFETENSORS_BF16, NULL);
}

/* ... and the PEFT directory of lora/adapter-f32-r4.gguf, for arch/llama-gqa.gguf. */
static void write_adapter(void **state)
{
    (void)state;
    hf_fixture_write_adapter(fixture("lora/adapter-f32-r4.gguf"), fixture(ADAPTER_BASE),
                             g_write_dir);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write-checkpoint") == 0) {
        g_write_dir = argv[2];
        const struct CMUnitTest write[] = {cmocka_unit_test(write_checkpoint)};
        return cmocka_run_group_tests(write, NULL, NULL);
    }
    if (argc == 3 && strcmp(argv[1], "--write-embedding-checkpoints") == 0) {
        g_write_dir = argv[2];
        const struct CMUnitTest write[] = {cmocka_unit_test(write_embedding_checkpoints)};
        return cmocka_run_group_tests(write, NULL, NULL);
    }
    if (argc == 3 && strcmp(argv[1], "--write-adapter") == 0) {
        g_write_dir = argv[2];
        const struct CMUnitTest write[] = {cmocka_unit_test(write_adapter)};
        return cmocka_run_group_tests(write, NULL, NULL);
    }
    if (argc != 1) {
        fprintf(stderr, "usage: %s [--write-checkpoint DIR | --write-embedding-checkpoints DIR | "
                "--write-adapter DIR]\n", argv[0]);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_safetensors_reads_a_valid_file),
        cmocka_unit_test(test_safetensors_refuses_malformed_headers),
        cmocka_unit_test_setup_teardown(test_convert_qwen2_round_trip_f16, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_qwen3_round_trip_bf16, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_llama_round_trip_permutes_q_and_k, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_convert_mistral_is_llama, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_gemma_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_gemma2_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_gemma3_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_phi3_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_phi3_longrope_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_qwen3moe_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_mixtral_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_gptoss_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_gptoss_mxfp4_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_names_o200k_pre_tokenizer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_olmo2_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_olmo3_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_granite_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_cohere2_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_command_r_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_command_r_plus_round_trip, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_convert_refuses_what_command_r_lacks, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_convert_bert_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_nomic_bert_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_nomic_bert_moe_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_unigram_tokenizer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_refuses_what_bert_lacks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_gemma_embedding_round_trip, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_convert_refuses_what_gemma_embedding_lacks, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_convert_lfm2_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_lfm2moe_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_refuses_what_lfm2_lacks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_nemotron_h_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_nemotron_h_moe_round_trip, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_convert_refuses_what_nemotron_h_lacks, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_convert_ministral3_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_glm4moelite_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_refuses_what_glm4moelite_lacks, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_convert_refuses_a_ministral3_rope_it_cannot_convert,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_smollm3_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_starcoder2_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_qwen35_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_qwen35moe_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_qwen35_text_only_round_trip, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_convert_qwen3next_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_reads_chat_template_jinja, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_convert_gemma3_vision_to_one_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_qwen25vl_to_one_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_qwen3vl_to_one_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_deepseek2_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_gemma3n_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_gemma4_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_gemma4_e_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_gemma4_moe_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_refuses_what_gemma4_lacks, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_convert_gemma4_bpe_tokenizer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_gemma4_audio_to_one_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_gemma4_vision_to_one_file, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_convert_lfm2vl_to_one_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_laguna_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_glmocr_to_one_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_deepseekocr_to_one_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_qwen3vlmoe_experts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_llama4_to_one_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_mllama_to_one_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_mistral3_vision_to_one_file, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_convert_adapter_f32_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_adapter_f16_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_refuses_adapters_it_cannot_convert, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_convert_refuses_what_it_cannot_convert, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_convert_refuses_malformed_gptoss_experts, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_convert_refuses_an_expert_beside_its_whole_stack,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert_refuses_a_tensor_given_twice, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_convert_refuses_malformed_tokenizers, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_convert_caps_vocabulary_padding, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * LoRA adapters against llama.cpp: the lora/ references (an F32 adapter at scales 1 and 0.5,
 * an F16 adapter, and both together on arch/llama-gqa.gguf) for the prompt's last logits and
 * every greedy step, and the adapters llama.cpp refuses (not an adapter, another
 * architecture, a tensor the model lacks, shapes that do not fit, an unpaired half), which
 * must leave the model as it was; an adapter of phi3's fused matrices against the same model
 * with the adapter merged into its weights. Tolerances are lora/README's.
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

#include "corral/engine.h"
#include "gguf.h"
#include "gguf_write_fixture.h"
#include "reference_fixture.h"
#include "tensor_type.h"

/* lora/README: float32 rounding for F32 adapters. An F16 adapter is computed in F32 here,
 * where ggml rounds x and A x to F16 first: that rounding is the difference (observed up to
 * 1.35e-3 against a merged F32 model). */
#define F32_TOLERANCE 1e-4f
#define F16_TOLERANCE 3e-3f

#define N_GREEDY 16

/* Numbers after "\nkey " up to the end of that line; returns the count. */
static size_t floats_after(const char *text, const char *key, float *out, size_t max)
{
    char header[64];
    snprintf(header, sizeof header, "\n%s ", key);
    const char *p = strstr(text, header);
    if (!p)
        fail_msg("key '%s' not found", key);
    p += strlen(header);
    size_t n = 0;
    while (*p && *p != '\n' && n < max) {
        char *end;
        float v = strtof(p, &end);
        if (end == p)
            break;
        out[n++] = v;
        p = end;
    }
    return n;
}

static corral_model *load_base(void)
{
    corral_error err;
    corral_model *m = corral_model_load(fixture("arch/llama-gqa.gguf"), &err);
    if (!m)
        fail_msg("%s", err.message);
    return m;
}

static corral_context *open_context(corral_model *m)
{
    corral_context_params p;
    corral_context_params_init(&p);
    p.kv_type = CORRAL_KV_F32;
    p.n_ctx = 64;
    p.n_batch = 64;
    p.n_threads = 2;
    corral_error err;
    corral_context *ctx = corral_context_create(m, &p, &err);
    if (!ctx)
        fail_msg("%s", err.message);
    return ctx;
}

static void decode_or_fail(corral_context *ctx, const corral_token *ids, size_t n)
{
    corral_error err;
    corral_batch batch = {.n_tokens = n, .tokens = ids};
    if (!corral_decode(ctx, &batch, &err))
        fail_msg("decode: %s", err.message);
}

/* The reference's input ids (without the count). */
static size_t input_ids(const char *text, corral_token *ids, size_t max)
{
    float v[65];
    size_t n = floats_after(text, "input_ids", v, 65);
    assert_true(n >= 2 && (size_t)v[0] == n - 1 && n - 1 <= max);
    for (size_t i = 1; i < n; i++)
        ids[i - 1] = (corral_token)v[i];
    return n - 1;
}

/* The base model's last logits for the reference input: what a refused adapter must keep. */
static void base_last_logits(corral_model *m, const char *text, float *out)
{
    corral_token ids[64];
    size_t n = input_ids(text, ids, 64);
    corral_context *ctx = open_context(m);
    decode_or_fail(ctx, ids, n);
    memcpy(out, corral_get_logits(ctx, n - 1), corral_model_n_vocab(m) * sizeof *out);
    corral_context_free(ctx);
}

/* Attach the case's `lora FILE SCALE` lines in order, run its input and greedy path and
 * compare every logit and id with llama.cpp's. */
static void check_case(const char *name, float tolerance)
{
    char path[256];
    snprintf(path, sizeof path, "lora/%s.ref.txt", name);
    char *text = read_file(fixture(path));
    corral_model *m = load_base();
    size_t n_adapters = 0;
    for (const char *line = strstr(text, "\nlora "); line; line = strstr(line + 1, "\nlora ")) {
        char file[128];
        float scale;
        assert_int_equal(sscanf(line, "\nlora %127s %f", file, &scale), 2);
        snprintf(path, sizeof path, "lora/%s", file);
        corral_error err;
        if (!corral_model_add_lora(m, fixture(path), scale, &err))
            fail_msg("%s", err.message);
        n_adapters++;
    }
    assert_true(n_adapters > 0);

    size_t V = corral_model_n_vocab(m);
    corral_token ids[64];
    size_t n = input_ids(text, ids, 64);
    float want_ids[N_GREEDY + 1];
    assert_int_equal(floats_after(text, "greedy_ids", want_ids, N_GREEDY + 1), N_GREEDY + 1);
    float *last_line = malloc((V + 1) * sizeof *last_line); /* the count, then the logits */
    float *want_steps = malloc(N_GREEDY * V * sizeof *want_steps);
    assert_int_equal(floats_after(text, "last_logits", last_line, V + 1), V + 1);
    const float *want_last = last_line + 1;
    read_matrix(text, "greedy_step_logits", want_steps, N_GREEDY, V);

    corral_context *ctx = open_context(m);
    decode_or_fail(ctx, ids, n);
    const float *logits = corral_get_logits(ctx, n - 1);
    float diff = max_abs_diff(logits, want_last, V);
    if (diff > tolerance)
        fail_msg("%s: last logits differ by %g (tolerance %g)", name, diff, tolerance);
    for (size_t s = 0; s < N_GREEDY; s++) {
        diff = max_abs_diff(logits, want_steps + s * V, V);
        if (diff > tolerance)
            fail_msg("%s: greedy step %zu logits differ by %g (tolerance %g)", name, s, diff,
                     tolerance);
        corral_token id = argmax(logits, V), want = (corral_token)want_ids[s + 1];
        if (id != want)
            fail_msg("%s: greedy id %zu is %d, llama.cpp %d", name, s, id, want);
        if (s + 1 < N_GREEDY) {
            decode_or_fail(ctx, &id, 1);
            logits = corral_get_logits(ctx, 0);
        }
    }
    corral_context_free(ctx);
    corral_model_free(m);
    free(last_line);
    free(want_steps);
    free(text);
}

static void test_lora_f32_adapter(void **state) { (void)state; check_case("f32-r4", F32_TOLERANCE); }
static void test_lora_f32_adapter_at_half_scale(void **state) { (void)state; check_case("f32-r4-scale0.5", F32_TOLERANCE); }
static void test_lora_f16_adapter(void **state) { (void)state; check_case("f16-qv", F16_TOLERANCE); }
static void test_lora_two_adapters_add_up(void **state) { (void)state; check_case("two-adapters", F16_TOLERANCE); }

/* ---- refusals ---- */

typedef struct test_tensor {
    const char *name;
    int64_t ne0, ne1;
} test_tensor;

/* Deterministic values in [-0.05, 0.05): the tensor's element i of stream `seed`. */
static float small_value(unsigned seed, size_t i)
{
    uint32_t h = (uint32_t)(i * 2654435761u) ^ (seed * 40503u + 12345u);
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    return ((float)(h % 1000u) - 500.0f) * 1e-4f;
}

/* The values write_adapter gives tensor t: 0.01s, or small_value(t + 1, ·) when varied. */
static bool varied_values;

static float adapter_value(size_t t, size_t i)
{
    return varied_values ? small_value((unsigned)t + 1, i) : 0.01f;
}

/* An F32 adapter GGUF at path with these keys (NULL: left out), alpha 8 and tensors of
 * adapter_value. */
static void write_adapter(const char *path, const char *general_type, const char *arch,
                          const test_tensor *tensors, size_t n)
{
    corral_error err;
    gguf_writer *w = gguf_writer_create();
    assert_non_null(w);
    bool ok = gguf_writer_add_str(w, "general.architecture", arch, strlen(arch), &err) &&
              (!general_type ||
               gguf_writer_add_str(w, "general.type", general_type, strlen(general_type), &err)) &&
              gguf_writer_add_str(w, "adapter.type", "lora", 4, &err) &&
              gguf_writer_add_f32(w, "adapter.lora.alpha", 8.0f, &err);
    for (size_t i = 0; ok && i < n; i++) {
        int64_t ne[2] = {tensors[i].ne0, tensors[i].ne1};
        ok = gguf_writer_add_tensor(w, tensors[i].name, TENSOR_TYPE_F32, 2, ne, &err);
    }
    ok = ok && gguf_writer_begin(w, path, &err);
    for (size_t i = 0; ok && i < n; i++) {
        size_t count = (size_t)(tensors[i].ne0 * tensors[i].ne1);
        float *values = malloc(count * sizeof *values);
        assert_non_null(values);
        for (size_t j = 0; j < count; j++)
            values[j] = adapter_value(i, j);
        ok = gguf_writer_write_tensor(w, values, count * sizeof *values, &err);
        free(values);
    }
    gguf_write_fixture_finish(w, ok, path, &err);
}

/* Attaching the adapter fails with a message holding `expect`, leaves the model's output as
 * it was, and corral_lora_check says the same. */
static void check_refused(const char *adapter_arg, const char *model_arg, const char *expect)
{
    char adapter[2048], model_path[2048]; /* fixture() reuses its buffers */
    snprintf(adapter, sizeof adapter, "%s", adapter_arg);
    snprintf(model_path, sizeof model_path, "%s", model_arg);
    corral_error err;
    corral_model *m = corral_model_load(model_path, &err);
    if (!m)
        fail_msg("%s", err.message);
    bool llama_gqa = strstr(model_path, "llama-gqa") != NULL;
    char *text = llama_gqa ? read_file(fixture("lora/f32-r4.ref.txt")) : NULL;
    size_t V = corral_model_n_vocab(m);
    float *before = malloc(V * sizeof *before), *after = malloc(V * sizeof *after);
    if (llama_gqa)
        base_last_logits(m, text, before);
    assert_false(corral_model_add_lora(m, adapter, 1.0f, &err));
    if (!strstr(err.message, expect))
        fail_msg("'%s' does not say '%s'", err.message, expect);
    if (llama_gqa) {
        base_last_logits(m, text, after);
        assert_memory_equal(before, after, V * sizeof *before);
    }
    corral_model_free(m);
    assert_false(corral_lora_check(adapter, model_path, &err));
    if (!strstr(err.message, expect))
        fail_msg("check: '%s' does not say '%s'", err.message, expect);
    free(before);
    free(after);
    free(text);
}

static char tmp_dir[64];

static int make_tmp_dir(void **state)
{
    (void)state;
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/corral-test-lora-XXXXXX");
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static int remove_tmp_dir(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *tmp_path(const char *name)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
    return path;
}

static void test_lora_refuses_a_model_as_adapter(void **state)
{
    (void)state;
    const char *base = fixture("arch/llama-gqa.gguf");
    check_refused(base, base, "is not an adapter");
    const test_tensor pair[] = {{"blk.0.attn_q.weight.lora_a", 64, 4},
                                {"blk.0.attn_q.weight.lora_b", 4, 64}};
    write_adapter(tmp_path("untyped.gguf"), NULL, "llama", pair, 2);
    check_refused(tmp_path("untyped.gguf"), base, "is not an adapter");
}

static void test_lora_refuses_another_architecture(void **state)
{
    (void)state;
    check_refused(fixture("lora/adapter-f32-r4.gguf"), fixture("arch/qwen2.gguf"),
                  "the adapter is for architecture 'llama', the model is 'qwen2'");
}

static void test_lora_refuses_a_tensor_the_model_lacks(void **state)
{
    (void)state;
    const test_tensor tensors[] = {{"blk.0.attn_q.weight.lora_a", 64, 4},
                                   {"blk.0.attn_q.weight.lora_b", 4, 64},
                                   {"blk.7.attn_q.weight.lora_a", 64, 4},
                                   {"blk.7.attn_q.weight.lora_b", 4, 64}};
    write_adapter(tmp_path("missing.gguf"), "adapter", "llama", tensors, 4);
    check_refused(tmp_path("missing.gguf"), fixture("arch/llama-gqa.gguf"),
                  "'blk.7.attn_q.weight', which the model does not have");
}

static void test_lora_refuses_shapes_that_do_not_fit(void **state)
{
    (void)state;
    const char *base = fixture("arch/llama-gqa.gguf");
    /* attn_k is [64, 32]: lora_a of the wrong width, lora_b of the wrong height, ranks apart */
    const test_tensor wide_a[] = {{"blk.1.attn_k.weight.lora_a", 48, 4},
                                  {"blk.1.attn_k.weight.lora_b", 4, 32}};
    const test_tensor tall_b[] = {{"blk.1.attn_k.weight.lora_a", 64, 4},
                                  {"blk.1.attn_k.weight.lora_b", 4, 64}};
    const test_tensor ranks[] = {{"blk.1.attn_k.weight.lora_a", 64, 4},
                                 {"blk.1.attn_k.weight.lora_b", 8, 32}};
    const test_tensor *cases[] = {wide_a, tall_b, ranks};
    for (size_t i = 0; i < 3; i++) {
        write_adapter(tmp_path("shape.gguf"), "adapter", "llama", cases[i], 2);
        check_refused(tmp_path("shape.gguf"), base, "adapter tensors for 'blk.1.attn_k.weight' do not fit it");
    }
    /* the whole F32 adapter on a wider llama */
    check_refused(fixture("lora/adapter-f32-r4.gguf"), fixture("arch/llama-tied.gguf"),
                  "'blk.0.attn_q.weight' do not fit it");
}

static void test_lora_refuses_unpaired_and_unknown_tensors(void **state)
{
    (void)state;
    const char *base = fixture("arch/llama-gqa.gguf");
    const test_tensor only_a[] = {{"blk.0.attn_q.weight.lora_a", 64, 4}};
    write_adapter(tmp_path("only-a.gguf"), "adapter", "llama", only_a, 1);
    check_refused(tmp_path("only-a.gguf"), base, "'blk.0.attn_q.weight.lora_a' has no 'blk.0.attn_q.weight.lora_b'");
    const test_tensor only_b[] = {{"blk.0.attn_q.weight.lora_b", 4, 64}};
    write_adapter(tmp_path("only-b.gguf"), "adapter", "llama", only_b, 1);
    check_refused(tmp_path("only-b.gguf"), base, "'blk.0.attn_q.weight.lora_b' has no 'blk.0.attn_q.weight.lora_a'");
    const test_tensor other[] = {{"blk.0.attn_q.weight.lora_c", 64, 4}};
    write_adapter(tmp_path("other.gguf"), "adapter", "llama", other, 1);
    check_refused(tmp_path("other.gguf"), base, "'blk.0.attn_q.weight.lora_c' is neither");
    const test_tensor embd[] = {{"token_embd.weight.lora_a", 64, 4},
                                {"token_embd.weight.lora_b", 4, 512}};
    write_adapter(tmp_path("embd.gguf"), "adapter", "llama", embd, 2);
    check_refused(tmp_path("embd.gguf"), base, "'token_embd.weight', which adapters cannot change");
}

/* An adapter's norm weights are skipped, as llama.cpp skips them; the check accepts it. */
static void test_lora_skips_norm_weights(void **state)
{
    (void)state;
    const test_tensor tensors[] = {{"blk.0.attn_norm.weight", 64, 1},
                                   {"blk.0.attn_q.weight.lora_a", 64, 4},
                                   {"blk.0.attn_q.weight.lora_b", 4, 64}};
    write_adapter(tmp_path("norm.gguf"), "adapter", "llama", tensors, 3);
    corral_error err;
    if (!corral_lora_check(tmp_path("norm.gguf"), fixture("arch/llama-gqa.gguf"), &err))
        fail_msg("%s", err.message);
}

/* ---- fused matrices: an adapter of attn_qkv / ffn_up (gate;up) equals the merged weights ---- */

/* A copy of the F32 model at src with W += (alpha / r) B A for each of the adapter's pairs
 * (lora_a tensor index 2k, lora_b 2k + 1, values adapter_value), in double. */
static void write_merged(const char *src, const char *dst, const test_tensor *pairs,
                         size_t n_pairs, float alpha)
{
    corral_error err;
    gguf_file *f = gguf_open(src, &err);
    if (!f)
        fail_msg("%s", err.message);
    gguf_writer *w = gguf_writer_create();
    bool ok = w != NULL;
    for (size_t i = 0; ok && i < gguf_n_kv(f); i++)
        ok = gguf_writer_copy_kv(w, gguf_kv_at(f, i), &err);
    for (size_t i = 0; ok && i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        ok = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, &err);
    }
    ok = ok && gguf_writer_begin(w, dst, &err);
    for (size_t i = 0; ok && i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        float *data = malloc(t->size_bytes);
        assert_non_null(data);
        memcpy(data, t->data, t->size_bytes);
        for (size_t p = 0; p < n_pairs; p++) {
            size_t len = strlen(t->name);
            if (strncmp(pairs[2 * p].name, t->name, len) != 0 ||
                strcmp(pairs[2 * p].name + len, ".lora_a") != 0)
                continue;
            assert_int_equal(t->type, TENSOR_TYPE_F32);
            size_t n_in = (size_t)t->ne[0], n_out = (size_t)t->ne[1];
            size_t r = (size_t)pairs[2 * p].ne1;
            for (size_t o = 0; o < n_out; o++)
                for (size_t i_in = 0; i_in < n_in; i_in++) {
                    double sum = 0.0;
                    for (size_t k = 0; k < r; k++)
                        sum += (double)adapter_value(2 * p + 1, o * r + k) *
                               adapter_value(2 * p, k * n_in + i_in);
                    data[o * n_in + i_in] += (float)(alpha / (double)r * sum);
                }
        }
        ok = gguf_writer_write_tensor(w, data, t->size_bytes, &err);
        free(data);
    }
    gguf_close(f);
    gguf_write_fixture_finish(w, ok, dst, &err);
}

/* The last logits of ids on a model (with an adapter when not NULL). */
static void last_logits_of(const char *model_path, const char *adapter, const corral_token *ids,
                           size_t n, float *out)
{
    corral_error err;
    corral_model *m = corral_model_load(model_path, &err);
    if (!m)
        fail_msg("%s", err.message);
    if (adapter && !corral_model_add_lora(m, adapter, 1.0f, &err))
        fail_msg("%s", err.message);
    corral_context *ctx = open_context(m);
    decode_or_fail(ctx, ids, n);
    memcpy(out, corral_get_logits(ctx, n - 1), corral_model_n_vocab(m) * sizeof *out);
    corral_context_free(ctx);
    corral_model_free(m);
}

static void test_lora_on_fused_matrices_equals_merged_weights(void **state)
{
    (void)state;
    /* phi3: E 96, q 96 + k 48 + v 48 rows in attn_qkv, gate;up 2 x 192 rows in ffn_up */
    const test_tensor pairs[] = {{"blk.0.attn_qkv.weight.lora_a", 96, 4},
                                 {"blk.0.attn_qkv.weight.lora_b", 4, 192},
                                 {"blk.1.ffn_up.weight.lora_a", 96, 8},
                                 {"blk.1.ffn_up.weight.lora_b", 8, 384}};
    char base[2048], adapter[256], merged[256];
    snprintf(base, sizeof base, "%s", fixture("arch/phi3.gguf"));
    snprintf(adapter, sizeof adapter, "%s", tmp_path("phi3-fused.gguf"));
    snprintf(merged, sizeof merged, "%s", tmp_path("phi3-merged.gguf"));
    varied_values = true;
    write_adapter(adapter, "adapter", "phi3", pairs, 4);
    write_merged(base, merged, pairs, 2, 8.0f);
    varied_values = false;
    const corral_token ids[] = {1, 403, 407, 261, 378, 432, 383, 286};
    size_t n = sizeof ids / sizeof ids[0];
    float plain[1024], adapted[1024], want[1024];
    last_logits_of(base, NULL, ids, n, plain);
    last_logits_of(base, adapter, ids, n, adapted);
    last_logits_of(merged, NULL, ids, n, want);
    float moved = max_abs_diff(plain, want, 516), diff = max_abs_diff(adapted, want, 516);
    if (moved < 0.05f)
        fail_msg("the merged adapter moves the logits by %g only", moved);
    if (diff > F32_TOLERANCE)
        fail_msg("adapter on fused matrices differs from the merged model by %g", diff);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lora_f32_adapter),
        cmocka_unit_test(test_lora_f32_adapter_at_half_scale),
        cmocka_unit_test(test_lora_f16_adapter),
        cmocka_unit_test(test_lora_two_adapters_add_up),
        cmocka_unit_test(test_lora_refuses_a_model_as_adapter),
        cmocka_unit_test(test_lora_refuses_another_architecture),
        cmocka_unit_test(test_lora_refuses_a_tensor_the_model_lacks),
        cmocka_unit_test(test_lora_refuses_shapes_that_do_not_fit),
        cmocka_unit_test(test_lora_refuses_unpaired_and_unknown_tensors),
        cmocka_unit_test(test_lora_skips_norm_weights),
        cmocka_unit_test(test_lora_on_fused_matrices_equals_merged_weights),
    };
    return cmocka_run_group_tests(tests, make_tmp_dir, remove_tmp_dir);
}

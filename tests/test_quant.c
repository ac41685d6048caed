/*
 * Tensor-type arithmetic (src/engine/quant.h) for every type issue 3 lists: dequantize and
 * quantize against llama.cpp's blocks (fixtures quant/rand-e256-*.blocks.txt), dot products
 * at the active dispatch level against the scalar level, and the matrix entry points against
 * per-row dots. Types are found through quant_ops_get, so the K-quant kernels are picked up
 * as soon as they exist; a listed type without ops fails test_every_listed_type_has_ops.
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

#include "gguf.h"
#include "quant.h"
#include "quant_legacy.h"
#include "tensor_type.h"

/* Weight types issue 3 requires, with their blocks.txt stems (NULL: no fixture). */
typedef struct listed_type {
    uint32_t type;
    const char *fixture; /* rand-e256-<fixture>.blocks.txt */
} listed_type;

static const listed_type listed_types[] = {
    {TENSOR_TYPE_F32, NULL},       {TENSOR_TYPE_F16, "F16"},   {TENSOR_TYPE_BF16, "BF16"},
    {TENSOR_TYPE_Q4_0, "Q4_0"},    {TENSOR_TYPE_Q4_1, "Q4_1"}, {TENSOR_TYPE_Q5_0, "Q5_0"},
    {TENSOR_TYPE_Q5_1, "Q5_1"},    {TENSOR_TYPE_Q8_0, "Q8_0"}, {TENSOR_TYPE_Q2_K, "Q2_K"},
    {TENSOR_TYPE_Q3_K, "Q3_K"},    {TENSOR_TYPE_Q4_K, "Q4_K"}, {TENSOR_TYPE_Q4_K, "Q4_K_M"},
    {TENSOR_TYPE_Q5_K, "Q5_K"},    {TENSOR_TYPE_Q6_K, "Q6_K"},  {TENSOR_TYPE_MXFP4, NULL},
};
enum { N_LISTED = sizeof listed_types / sizeof listed_types[0] };

/* Activation-only types: ops with dequantize and quantize, but no dot. */
static const uint32_t activation_types[] = {TENSOR_TYPE_Q8_1, TENSOR_TYPE_Q8_K};

/* ---- blocks.txt ----------------------------------------------------------------------- */

enum { BLOCKS_FILE_MAX_BYTES = 1 << 22 };

typedef struct blocks_file {
    uint32_t type;
    size_t block_elems, block_bytes, n_blocks;
    uint8_t *bytes;  /* n_blocks * block_bytes */
    float *dequant;  /* n_blocks * block_elems */
    float *source;   /* n_blocks * block_elems */
    unsigned seen_bytes, seen_dequant, seen_source; /* blocks with each line present */
} blocks_file;

static void blocks_file_free(blocks_file *f)
{
    free(f->bytes);
    free(f->dequant);
    free(f->source);
}

static char *read_fixture(const char *relative)
{
    const char *dir = getenv("CORRAL_FIXTURES");
    assert_non_null(dir);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, relative);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        fail_msg("cannot open fixture %s", path);
    char *text = malloc(BLOCKS_FILE_MAX_BYTES + 1);
    assert_non_null(text);
    size_t n = fread(text, 1, BLOCKS_FILE_MAX_BYTES, fp);
    assert_true(feof(fp)); /* the cap is far above any blocks.txt */
    fclose(fp);
    text[n] = '\0';
    return text;
}

/* The number after "\n<key>: " (never on the first line, which is "file: ..."); 0 if absent. */
static size_t header_size(const char *text, const char *key)
{
    char line_start[64];
    snprintf(line_start, sizeof line_start, "\n%s: ", key);
    const char *at = strstr(text, line_start);
    return at ? (size_t)strtoull(at + strlen(line_start), NULL, 10) : 0;
}

static void parse_hex(const char *s, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned byte;
        if (sscanf(s + 2 * i, "%2x", &byte) != 1)
            fail_msg("bad hex at byte %zu", i);
        out[i] = (uint8_t)byte;
    }
    assert_true(s[2 * n] == '\n' || s[2 * n] == '\0');
}

static void parse_floats(const char *s, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *end;
        out[i] = strtof(s, &end);
        if (end == s)
            fail_msg("missing value %zu", i);
        s = end;
    }
}

/* Parses a blocks.txt fixture: the header's geometry, then each block's three lines. */
static void blocks_file_load_path(const char *relative, blocks_file *f)
{
    char *text = read_fixture(relative);
    memset(f, 0, sizeof *f);
    f->type = (uint32_t)header_size(text, "ggml_type_id");
    f->n_blocks = header_size(text, "n_blocks");
    /* Plain types list 32-element pseudo-blocks; the others only ggml's geometry. */
    f->block_elems = header_size(text, "block_elems");
    f->block_bytes = header_size(text, "block_bytes");
    if (!f->block_elems) {
        f->block_elems = header_size(text, "ggml_block_elems");
        f->block_bytes = header_size(text, "ggml_block_bytes");
    }
    assert_true(f->n_blocks > 0 && f->n_blocks <= 64 && f->block_elems > 0 &&
                f->block_elems <= 256 && f->block_bytes > 0 && f->block_bytes <= 1024);
    f->bytes = calloc(f->n_blocks, f->block_bytes);
    f->dequant = calloc(f->n_blocks * f->block_elems, sizeof(float));
    f->source = calloc(f->n_blocks * f->block_elems, sizeof(float));
    assert_true(f->bytes && f->dequant && f->source);

    for (const char *line = text; *line;) {
        const char *next = strchr(line, '\n');
        next = next ? next + 1 : line + strlen(line);
        unsigned index;
        char kind[16];
        int consumed = 0;
        if (sscanf(line, "block %u %15[a-z_0-9]:%n", &index, kind, &consumed) != 2 ||
            consumed == 0) {
            line = next;
            continue;
        }
        assert_true(index < f->n_blocks);
        const char *value = line + consumed + 1;
        if (strcmp(kind, "bytes") == 0) {
            parse_hex(value, f->bytes + index * f->block_bytes, f->block_bytes);
            f->seen_bytes++;
        } else if (strcmp(kind, "dequant") == 0) {
            parse_floats(value, f->dequant + index * f->block_elems, f->block_elems);
            f->seen_dequant++;
        } else if (strcmp(kind, "source_f32") == 0) {
            parse_floats(value, f->source + index * f->block_elems, f->block_elems);
            f->seen_source++;
        }
        line = next;
    }
    free(text);
    assert_int_equal(f->seen_bytes, f->n_blocks);
    assert_int_equal(f->seen_dequant, f->n_blocks);
}

/* quant/rand-e256-<stem>.blocks.txt */
static void blocks_file_load(const char *stem, blocks_file *f)
{
    char relative[256];
    snprintf(relative, sizeof relative, "quant/rand-e256-%s.blocks.txt", stem);
    blocks_file_load_path(relative, f);
}

static uint32_t float_bits(float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return bits;
}

/* The active level's name, avx512's variants (avx512-novnni, avx512-vdpbf16ps) included */
static const char *level_name(void)
{
    return cpu_active_level_name();
}

/* ---- ops presence --------------------------------------------------------------------- */

static void test_every_listed_type_has_ops(void **state)
{
    (void)state;
    int missing = 0;
    for (int i = 0; i < N_LISTED; i++) {
        uint32_t type = listed_types[i].type;
        const quant_ops *ops = quant_ops_active(type);
        if (!ops || !ops->dequantize || !ops->quantize || !ops->quantize_act || !ops->dot) {
            print_error("type %s has no complete ops at level %s\n", tensor_type_name(type),
                        level_name());
            missing++;
            continue;
        }
        assert_int_equal(ops->type, type);
        assert_true(quant_act_row_bytes(type, 256) > 0);
    }
    for (size_t i = 0; i < sizeof activation_types / sizeof activation_types[0]; i++) {
        const quant_ops *ops = quant_ops_active(activation_types[i]);
        if (!ops || !ops->dequantize || !ops->quantize) {
            print_error("activation type %s has no ops\n", tensor_type_name(activation_types[i]));
            missing++;
        }
    }
    assert_int_equal(missing, 0);
}

/* ---- fixtures: dequantize and quantize ------------------------------------------------ */

static void test_dequantize_matches_ggml_bit_for_bit(void **state)
{
    (void)state;
    for (int i = 0; i < N_LISTED; i++) {
        const quant_ops *ops = quant_ops_active(listed_types[i].type);
        if (!listed_types[i].fixture || !ops || !ops->dequantize)
            continue; /* reported by test_every_listed_type_has_ops */
        blocks_file f;
        blocks_file_load(listed_types[i].fixture, &f);
        assert_int_equal(f.type, listed_types[i].type);
        float out[256];
        for (size_t b = 0; b < f.n_blocks; b++) {
            ops->dequantize(f.bytes + b * f.block_bytes, out, f.block_elems);
            for (size_t j = 0; j < f.block_elems; j++) {
                float want = f.dequant[b * f.block_elems + j];
                if (float_bits(out[j]) != float_bits(want))
                    fail_msg("%s block %zu element %zu: got %.9g want %.9g",
                             listed_types[i].fixture, b, j, out[j], want);
            }
        }
        blocks_file_free(&f);
    }
}

static void test_quantize_reproduces_ggml_bytes(void **state)
{
    (void)state;
    for (int i = 0; i < N_LISTED; i++) {
        const quant_ops *ops = quant_ops_active(listed_types[i].type);
        if (!listed_types[i].fixture || !ops || !ops->quantize)
            continue;
        blocks_file f;
        blocks_file_load(listed_types[i].fixture, &f);
        assert_int_equal(f.seen_source, f.n_blocks);
        uint8_t out[1024];
        for (size_t b = 0; b < f.n_blocks; b++) {
            ops->quantize(f.source + b * f.block_elems, out, f.block_elems);
            const uint8_t *want = f.bytes + b * f.block_bytes;
            for (size_t j = 0; j < f.block_bytes; j++)
                if (out[j] != want[j])
                    fail_msg("%s block %zu byte %zu: got %02x want %02x",
                             listed_types[i].fixture, b, j, out[j], want[j]);
        }
        blocks_file_free(&f);
    }
}

/* ---- fixtures: whole models ----------------------------------------------------------- */

static gguf_file *open_quant_model(const char *stem)
{
    const char *dir = getenv("CORRAL_FIXTURES");
    assert_non_null(dir);
    char path[1024];
    snprintf(path, sizeof path, "%s/quant/rand-e256-%s.gguf", dir, stem);
    corral_error err = {0};
    gguf_file *file = gguf_open(path, &err);
    if (!file)
        fail_msg("cannot open %s", path);
    return file;
}

/*
 * The quant README: without an importance matrix llama.cpp quantizes with ggml's reference
 * quantizers, so requantizing every row of every tensor of rand-e256-F32.gguf must give the
 * bytes of each rand-e256-<T>.gguf (thousands of blocks per type, not just blocks.txt's).
 */
static void test_quantize_reproduces_every_tensor_of_the_llama_cpp_files(void **state)
{
    (void)state;
    gguf_file *source = open_quant_model("F32");
    for (int i = 0; i < N_LISTED; i++) {
        const quant_ops *ops = quant_ops_active(listed_types[i].type);
        if (!listed_types[i].fixture || !ops || !ops->quantize)
            continue;
        gguf_file *quantized = open_quant_model(listed_types[i].fixture);
        size_t rows_checked = 0;
        for (size_t t = 0; t < gguf_n_tensors(quantized); t++) {
            const gguf_tensor *q = gguf_tensor_at(quantized, t);
            const quant_ops *q_ops = quant_ops_active(q->type);
            if (q->type == TENSOR_TYPE_F32 || !q_ops || !q_ops->quantize)
                continue;
            const gguf_tensor *f = gguf_find_tensor(source, q->name);
            assert_non_null(f);
            size_t n = (size_t)q->ne[0], n_rows = (size_t)(q->ne[1] * q->ne[2] * q->ne[3]);
            size_t bytes;
            assert_true(tensor_type_row_bytes(q->type, n, &bytes));
            uint8_t *out = malloc(bytes);
            assert_non_null(out);
            for (size_t r = 0; r < n_rows; r++, rows_checked++) {
                q_ops->quantize((const float *)f->data + r * n, out, n);
                if (memcmp(out, (const uint8_t *)q->data + r * bytes, bytes) != 0)
                    fail_msg("%s: tensor %s row %zu differs", listed_types[i].fixture, q->name, r);
            }
            free(out);
        }
        assert_true(rows_checked > 0);
        gguf_close(quantized);
    }
    gguf_close(source);
}

/* blocks.txt's tensor_dequant_fnv1a64: FNV-1a 64 of the f32 bits of all of blk.0.attn_q. */
static void test_dequantize_whole_tensor_matches_ggml_hash(void **state)
{
    (void)state;
    for (int i = 0; i < N_LISTED; i++) {
        const quant_ops *ops = quant_ops_active(listed_types[i].type);
        if (!listed_types[i].fixture || !ops || !ops->dequantize)
            continue;
        char relative[256];
        snprintf(relative, sizeof relative, "quant/rand-e256-%s.blocks.txt",
                 listed_types[i].fixture);
        char *text = read_fixture(relative);
        const char *key = strstr(text, "\ntensor_dequant_fnv1a64: ");
        assert_non_null(key);
        uint64_t want = strtoull(key + strlen("\ntensor_dequant_fnv1a64: "), NULL, 16);
        free(text);

        gguf_file *file = open_quant_model(listed_types[i].fixture);
        const gguf_tensor *t = gguf_find_tensor(file, "blk.0.attn_q.weight");
        assert_non_null(t);
        size_t n = (size_t)(t->ne[0] * t->ne[1]);
        float *out = malloc(n * sizeof(float));
        assert_non_null(out);
        ops->dequantize(t->data, out, n);
        uint64_t hash = 0xcbf29ce484222325ULL;
        for (size_t j = 0; j < n; j++) {
            uint32_t bits = float_bits(out[j]);
            for (int k = 0; k < 4; k++) {
                hash ^= (bits >> (8 * k)) & 0xff;
                hash *= 0x100000001b3ULL;
            }
        }
        if (hash != want)
            fail_msg("%s: dequantized hash %016llx, ggml's %016llx", listed_types[i].fixture,
                     (unsigned long long)hash, (unsigned long long)want);
        free(out);
        gguf_close(file);
    }
}

/* ---- MXFP4 (arch/gpt-oss-mxfp4: llama.cpp's MXFP4_MOE recipe on arch/gpt-oss.gguf) ---- */

static gguf_file *open_arch_model(const char *name)
{
    const char *dir = getenv("CORRAL_FIXTURES");
    assert_non_null(dir);
    char path[1024];
    snprintf(path, sizeof path, "%s/arch/%s.gguf", dir, name);
    corral_error err = {0};
    gguf_file *file = gguf_open(path, &err);
    if (!file)
        fail_msg("cannot open %s: %s", path, err.message);
    return file;
}

/* The blocks dump's 16 blocks: ggml's values bit for bit, and its bytes from their source. */
static void test_mxfp4_blocks_match_ggml(void **state)
{
    (void)state;
    const quant_ops *ops = quant_ops_active(TENSOR_TYPE_MXFP4);
    assert_non_null(ops);
    blocks_file f;
    blocks_file_load_path("arch/gpt-oss-mxfp4.blocks.txt", &f);
    assert_int_equal(f.type, TENSOR_TYPE_MXFP4);
    assert_int_equal(f.block_elems, 32);
    assert_int_equal(f.block_bytes, 17);
    assert_int_equal(f.seen_source, f.n_blocks);
    for (size_t b = 0; b < f.n_blocks; b++) {
        float out[32];
        uint8_t bytes[17];
        ops->dequantize(f.bytes + b * 17, out, 32);
        for (size_t j = 0; j < 32; j++)
            if (float_bits(out[j]) != float_bits(f.dequant[b * 32 + j]))
                fail_msg("mxfp4 block %zu element %zu: got %.9g want %.9g", b, j, out[j],
                         f.dequant[b * 32 + j]);
        ops->quantize(f.source + b * 32, bytes, 32);
        if (memcmp(bytes, f.bytes + b * 17, 17) != 0)
            fail_msg("mxfp4 block %zu: quantized bytes differ from ggml's", b);
    }
    blocks_file_free(&f);
}

/* The dump's whole-tensor FNV-1a 64 of the dequantized f32 bits, and every MXFP4 tensor of the
 * file requantized from the F32 model's rows (the dump says llama.cpp's reference quantizer
 * made them): 12 expert tensors, 3072 blocks. */
static void test_mxfp4_tensors_match_ggml(void **state)
{
    (void)state;
    const quant_ops *ops = quant_ops_active(TENSOR_TYPE_MXFP4);
    char *text = read_fixture("arch/gpt-oss-mxfp4.blocks.txt");
    const char *key = strstr(text, "\ntensor_dequant_fnv1a64: ");
    assert_non_null(key);
    uint64_t want = strtoull(key + strlen("\ntensor_dequant_fnv1a64: "), NULL, 16);
    free(text);

    gguf_file *quantized = open_arch_model("gpt-oss-mxfp4"), *source = open_arch_model("gpt-oss");
    const gguf_tensor *t = gguf_find_tensor(quantized, "blk.0.ffn_gate_exps.weight");
    assert_non_null(t);
    assert_int_equal(t->type, TENSOR_TYPE_MXFP4);
    size_t n = (size_t)(t->ne[0] * t->ne[1] * t->ne[2]);
    float *out = malloc(n * sizeof(float));
    assert_non_null(out);
    ops->dequantize(t->data, out, n);
    uint64_t hash = 0xcbf29ce484222325ULL;
    for (size_t j = 0; j < n; j++)
        for (int k = 0; k < 4; k++) {
            hash ^= (float_bits(out[j]) >> (8 * k)) & 0xff;
            hash *= 0x100000001b3ULL;
        }
    free(out);
    if (hash != want)
        fail_msg("mxfp4: dequantized hash %016llx, ggml's %016llx", (unsigned long long)hash,
                 (unsigned long long)want);

    size_t tensors = 0;
    for (size_t i = 0; i < gguf_n_tensors(quantized); i++) {
        const gguf_tensor *q = gguf_tensor_at(quantized, i);
        if (q->type != TENSOR_TYPE_MXFP4)
            continue;
        const gguf_tensor *f = gguf_find_tensor(source, q->name);
        assert_non_null(f);
        assert_int_equal(f->type, TENSOR_TYPE_F32);
        size_t row = (size_t)q->ne[0], rows = (size_t)(q->ne[1] * q->ne[2] * q->ne[3]);
        size_t bytes = (size_t)q->ne[0] / 32 * 17;
        uint8_t *block_row = malloc(bytes);
        assert_non_null(block_row);
        for (size_t r = 0; r < rows; r++) {
            ops->quantize((const float *)f->data + r * row, block_row, row);
            if (memcmp(block_row, (const uint8_t *)q->data + r * bytes, bytes) != 0)
                fail_msg("mxfp4: tensor %s row %zu differs from llama.cpp's", q->name, r);
        }
        free(block_row);
        tensors++;
    }
    assert_int_equal(tensors, 12);
    gguf_close(quantized);
    gguf_close(source);
}

/* The exponent byte's scale, subnormal cases included, and ggml's quantizer's edge cases: an
 * all-zero block, a tie between two magnitudes (the smaller wins), and the top code. */
static void test_mxfp4_scale_and_ties(void **state)
{
    (void)state;
    const quant_ops *ops = quant_ops_active(TENSOR_TYPE_MXFP4);
    static const struct { uint8_t e; uint32_t bits; } scales[] = {
        {0, 0x00200000u}, {1, 0x00400000u}, {2, 0x00800000u}, {128, 0x3f800000u}, {255, 0x7f000000u}};
    for (size_t i = 0; i < sizeof scales / sizeof scales[0]; i++) {
        uint8_t block[17] = {scales[i].e, 0x01}; /* element 0: code 1 (value 1) */
        float out[32];
        ops->dequantize(block, out, 32);
        if (float_bits(out[0]) != scales[i].bits)
            fail_msg("mxfp4 e=%u: scale bits %08x, want %08x", scales[i].e, float_bits(out[0]),
                     scales[i].bits);
    }
    float x[32] = {0};
    uint8_t bytes[17];
    ops->quantize(x, bytes, 32);
    for (int j = 0; j < 17; j++)
        assert_int_equal(bytes[j], 0);
    /* amax 6: e = 2 - 2 + 127, scale 2^-1, so codes step by 0.5 up to 6; 2.5 lies halfway
     * between 2 (code 4) and 3 (code 5), -0.25 between 0 and -0.5 (code 0 is first) */
    x[0] = 6.0f, x[1] = 2.5f, x[2] = -0.25f, x[16] = -6.0f, x[17] = 0.75f;
    ops->quantize(x, bytes, 32);
    assert_int_equal(bytes[0], 127);
    assert_int_equal(bytes[1], 0x07 | 0x0f << 4);
    assert_int_equal(bytes[2], 0x04 | 0x01 << 4); /* 0.75 halfway: 0.5 (code 1) wins */
    assert_int_equal(bytes[3], 0x00);
}

/* ---- half conversions (values from ggml's conversions) --------------------------------- */

static void test_f16_and_bf16_round_like_ggml(void **state)
{
    (void)state;
    assert_int_equal(quant_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
    assert_int_equal(quant_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
    assert_int_equal(quant_f32_to_f16(65519.0f), 0x7bff);
    assert_int_equal(quant_f32_to_f16(65520.0f), 0x7c00);
    assert_int_equal(quant_f32_to_f16(0.1f), 0x2e66);
    assert_int_equal(quant_f32_to_f16(-0.0f), 0x8000);
    assert_int_equal(quant_f32_to_f16(0x1p-25f), 0x0000);     /* tie to even zero */
    assert_int_equal(quant_f32_to_f16(3 * 0x1p-25f), 0x0002); /* 1.5 units: tie to even 2 */
    assert_int_equal(quant_f32_to_f16(0x1p-24f), 0x0001);
    assert_int_equal(quant_f32_to_f16(-NAN), 0xfe00);
    assert_int_equal(float_bits(quant_f16_to_f32(0x7c01)), 0x7fc02000);
    assert_int_equal(quant_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
    assert_int_equal(quant_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
    assert_int_equal(quant_f32_to_bf16(3.4028235e38f), 0x7f80);
    /* Every non-NaN half survives the round trip through float. */
    for (uint32_t h = 0; h < 0x10000; h++) {
        bool f16_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        bool bf16_nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
        if (!f16_nan)
            assert_int_equal(quant_f32_to_f16(quant_f16_to_f32((uint16_t)h)), h);
        if (!bf16_nan)
            assert_int_equal(quant_f32_to_bf16(quant_bf16_to_f32((uint16_t)h)), h);
    }
}

/* The active level's F16 quantizers (vector conversion where the CPU has one) give the
 * scalar rounding's bytes for every kind of float: ties, overflow, subnormal halves, values
 * that vanish, infinities and NaN (ggml drops the payload) in the middle of a vector. */
static void test_f16_quantizers_at_active_level_round_like_scalar(void **state)
{
    (void)state;
    enum { N = 4099 };
    static float x[N];
    static uint16_t got[N], got_act[N];
    const float specials[] = {1.0f + 0x1p-11f, 65519.0f, 65520.0f, -0.0f, 0x1p-25f,
                              3 * 0x1p-25f, 0x1p-24f, 0x1p-140f, INFINITY, -INFINITY, NAN, -NAN};
    uint32_t rng = 99;
    for (size_t i = 0; i < N; i++) {
        rng = rng * 1664525u + 1013904223u;
        uint32_t bits = rng;
        memcpy(&x[i], &bits, sizeof bits); /* any float, NaN included */
        if (i % 7 == 0)
            x[i] = specials[(i / 7) % (sizeof specials / sizeof specials[0])];
    }
    const quant_ops *ops = quant_ops_active(TENSOR_TYPE_F16);
    ops->quantize(x, got, N);
    ops->quantize_act(x, got_act, N);
    for (size_t i = 0; i < N; i++)
        if (got[i] != quant_f32_to_f16(x[i]) || got_act[i] != quant_f32_to_f16(x[i]))
            fail_msg("%s: F16 of %a (bits %08x) is %04x / %04x, scalar %04x", level_name(),
                     (double)x[i], float_bits(x[i]), got[i], got_act[i], quant_f32_to_f16(x[i]));
}

/* ---- activation quantization ---------------------------------------------------------- */

/* A worked example computed with ggml's own functions: Q4_0 weights, Q8_0 activations. */
static void test_q4_0_worked_example_matches_ggml(void **state)
{
    (void)state;
    float x[32], a[32];
    for (int j = 0; j < 32; j++) {
        x[j] = (float)(((29 * j + 11) % 97) - 48) / 32.0f;
        a[j] = (float)(((17 * j + 3) % 23) - 11) / 8.0f;
    }
    static const uint8_t want_w[18] = {0x00, 0x32, 0xf2, 0x37, 0x8c, 0xd0, 0x25, 0x6a,
                                       0xbf, 0xf3, 0x58, 0xad, 0xe2, 0x37, 0x8b, 0xd0,
                                       0x15, 0x6a};
    static const uint8_t want_a[34] = {
        0x8b, 0x21, 0xa4, 0x68, 0x23, 0xdd, 0x98, 0x5c, 0x17, 0xd2, 0x8d, 0x51,
        0x0c, 0xc6, 0x81, 0x45, 0x00, 0xbb, 0x7f, 0x3a, 0xf4, 0xaf, 0x73, 0x2e,
        0xe9, 0xa4, 0x68, 0x23, 0xdd, 0x98, 0x5c, 0x17, 0xd2, 0x8d};
    const quant_ops *ops = quant_ops_active(TENSOR_TYPE_Q4_0);
    assert_non_null(ops);
    uint8_t w[18], act[34];
    ops->quantize(x, w, 32);
    assert_memory_equal(w, want_w, sizeof want_w);
    quant_quantize_activations(ops, a, 32, 1, act);
    assert_memory_equal(act, want_a, sizeof want_a);
    float dot = ops->dot(32, w, act);
    if (cpu_active_level() == CPU_LEVEL_SCALAR)
        assert_int_equal(float_bits(dot), float_bits(1.03321695f));
    else
        assert_true(fabsf(dot - 1.03321695f) <= 2e-7f);
}

/* The x86 recipe (tests/fixtures/quant/README.md, activation table) rounds ties to even
 * where the reference quantizer rounds them away: amax 127 gives id 1, so 2.5 -> 2 and
 * -3.5 -> -4. */
static void test_q8_activations_round_half_to_even(void **state)
{
    (void)state;
    float a[32] = {127.0f, 2.5f, -3.5f, 0.5f};
    uint8_t act[36];
    quant_quantize_activations(quant_ops_active(TENSOR_TYPE_Q8_0), a, 32, 1, act);
    assert_int_equal(act[0] | act[1] << 8, quant_f32_to_f16(1.0f));
    assert_int_equal((int8_t)act[2], 127);
    assert_int_equal((int8_t)act[3], 2);
    assert_int_equal((int8_t)act[4], -4);
    assert_int_equal((int8_t)act[5], 0);
    /* Q8_1 also stores s = d * sum(q) = 127 + 2 - 4 = 125. */
    quant_quantize_activations(quant_ops_active(TENSOR_TYPE_Q4_1), a, 32, 1, act);
    assert_int_equal(act[2] | act[3] << 8, quant_f32_to_f16(125.0f));
    assert_int_equal((int8_t)act[5], 2);
}

/* ---- dot products --------------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static double rng_uniform(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * 0x1p-53;
}

static float rng_normal(void)
{
    double u = rng_uniform() + 0x1p-54, v = rng_uniform();
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

/* Gaussian values at a random scale, a few outliers, and (optionally) a zero block. */
static void fill_random(float *x, size_t n, bool zero_first_block)
{
    float scale = (float)pow(10.0, 4.0 * rng_uniform() - 2.0);
    for (size_t i = 0; i < n; i++) {
        x[i] = scale * rng_normal();
        if (rng_uniform() < 0.005)
            x[i] *= 8.0f;
    }
    if (zero_first_block)
        memset(x, 0, (n < 32 ? n : 32) * sizeof(float));
}

static size_t row_bytes(uint32_t type, size_t n)
{
    size_t bytes;
    assert_true(tensor_type_row_bytes(type, n, &bytes));
    return bytes;
}

/*
 * Tolerance of a dot product at a SIMD level against the scalar level (and of the scalar
 * level against an f64 sum of the dequantized operands). The integer sums inside blocks are
 * exact on every path; only the order and fusing of the f32 additions differ. Every term
 * passes through at most `steps` sequential additions plus ~3 roundings of its scale
 * products, so each path is within (steps + 3) * 2^-24 * S of the exact value, where
 * S = sum |w_i * a_i|; two paths are within twice that. steps counts f32 additions into one
 * accumulator: one per 32 elements for block types (K-quants have fewer), one per 8 for the
 * float types (the scalar float path sums in f64). We allow (steps + 4) * 2^-22 * S.
 */
static double dot_tolerance(size_t n, uint32_t type, double sum_abs_products)
{
    size_t per_step = tensor_type_get(type)->block_elems == 1 ? 8 : 32;
    double steps = (double)(n / per_step + 1);
    return (steps + 4.0) * 0x1p-22 * sum_abs_products;
}

/* Q8_1's s is d * sum(q) rounded to f16, and Q4_1/Q5_1 dots use it in place of the exact
 * sum: the exact value of the dot is sum w*a + sum_blocks m * (s - d * sum q). */
static double q8_1_min_correction(uint32_t type, const uint8_t *w, const uint8_t *act, size_t n)
{
    if (type != TENSOR_TYPE_Q4_1 && type != TENSOR_TYPE_Q5_1)
        return 0.0;
    size_t w_block = tensor_type_get(type)->block_bytes;
    double correction = 0.0;
    for (size_t b = 0; b < n / 32; b++, w += w_block, act += 36) {
        double m = quant_f16_to_f32((uint16_t)(w[2] | w[3] << 8));
        double d = quant_f16_to_f32((uint16_t)(act[0] | act[1] << 8));
        double s = quant_f16_to_f32((uint16_t)(act[2] | act[3] << 8));
        int sum = 0;
        for (int j = 0; j < 32; j++)
            sum += (int8_t)act[4 + j];
        correction += m * (s - d * sum);
    }
    return correction;
}

static void check_dot(uint32_t type, size_t n, int round)
{
    const quant_ops *ops = quant_ops_active(type);
    const quant_ops *scalar = quant_ops_get(type, CPU_LEVEL_SCALAR);
    const quant_ops *act_ops = quant_ops_get(ops->act_type, CPU_LEVEL_SCALAR);
    size_t w_bytes = row_bytes(type, n), a_bytes = quant_act_row_bytes(type, n);
    assert_true(a_bytes > 0);
    float *x = malloc(n * sizeof(float)), *a = malloc(n * sizeof(float));
    float *wd = malloc(n * sizeof(float)), *ad = malloc(n * sizeof(float));
    uint8_t *w = malloc(w_bytes), *act = malloc(a_bytes), *act_scalar = malloc(a_bytes);
    assert_true(x && a && wd && ad && w && act && act_scalar);

    fill_random(x, n, round % 3 == 1);
    fill_random(a, n, round % 3 == 2);
    ops->quantize(x, w, n);
    quant_quantize_activations(ops, a, n, 1, act);
    quant_quantize_activations(scalar, a, n, 1, act_scalar);
    assert_memory_equal(act, act_scalar, a_bytes); /* same activation bytes at every level */

    float got = ops->dot(n, w, act);
    float want = scalar->dot(n, w, act);
    ops->dequantize(w, wd, n);
    bool have_act_values = act_ops && act_ops->dequantize;
    if (have_act_values) {
        act_ops->dequantize(act, ad, n);
    } else {
        /* Bound each quantized activation by |a| + max|a| / 127 (one Q8 step). */
        float amax = 0.0f;
        for (size_t i = 0; i < n; i++)
            amax = fmaxf(amax, fabsf(a[i]));
        for (size_t i = 0; i < n; i++)
            ad[i] = fabsf(a[i]) + amax / 127.0f;
    }
    double sum_abs = 0.0;
    for (size_t i = 0; i < n; i++)
        sum_abs += fabs((double)wd[i] * (double)ad[i]);
    double tolerance = dot_tolerance(n, type, sum_abs);
    if (fabs((double)got - (double)want) > tolerance)
        fail_msg("%s n=%zu at %s: %.9g vs scalar %.9g (tolerance %.3g)", tensor_type_name(type),
                 n, level_name(), got, want, tolerance);

    if (have_act_values) {
        double exact = q8_1_min_correction(type, w, act, n);
        for (size_t i = 0; i < n; i++)
            exact += (double)wd[i] * (double)ad[i];
        if (fabs((double)want - exact) > tolerance)
            fail_msg("%s n=%zu scalar %.9g vs f64 %.9g (tolerance %.3g)",
                     tensor_type_name(type), n, want, exact, tolerance);
    }
    free(x), free(a), free(wd), free(ad), free(w), free(act), free(act_scalar);
}

static void test_dot_at_active_level_matches_scalar(void **state)
{
    (void)state;
    static const size_t sizes[] = {1, 37, 32, 96, 256, 768, 4096, 4099, 4128};
    for (int i = 0; i < N_LISTED; i++) {
        uint32_t type = listed_types[i].type;
        const quant_ops *ops = quant_ops_active(type);
        if (!ops || !ops->dot)
            continue;
        uint32_t block = tensor_type_get(type)->block_elems;
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            if (sizes[s] % block == 0)
                for (int round = 0; round < 6; round++)
                    check_dot(type, sizes[s], round);
    }
}

/* A worked example computed with ggml's own functions: Q4_K weights, Q8_K activations. */
static void test_q4_k_worked_example_matches_ggml(void **state)
{
    (void)state;
    float x[256], a[256], wd[256], ad[256];
    for (int j = 0; j < 256; j++) {
        x[j] = (float)(((29 * j + 11) % 97) - 40) / 32.0f + 0.25f * (float)(j / 32);
        a[j] = (float)(((17 * j + 3) % 23) - 11) / 8.0f;
    }
    static const uint8_t want_w[144] = {
        0x60, 0x1b, 0x09, 0x25, 0xf6, 0xf3, 0xf2, 0xf5, 0x3f, 0x2b, 0x22, 0x17, 0x34, 0x14, 0x0b,
        0x0f, 0xa2, 0xf6, 0x4b, 0x90, 0xe5, 0x29, 0x7e, 0xc3, 0x08, 0x5c, 0xa2, 0xf6, 0x4b, 0x90,
        0xd5, 0x29, 0x7e, 0xc3, 0x08, 0x5c, 0xa1, 0xf6, 0x3b, 0x8f, 0xd4, 0x29, 0x7e, 0xc3, 0x07,
        0x5c, 0xa1, 0xf6, 0xd4, 0x29, 0x6e, 0xb2, 0x07, 0x5c, 0x90, 0xe5, 0x3a, 0x8f, 0xd4, 0x19,
        0x6e, 0xb2, 0x07, 0x4c, 0x90, 0xe5, 0x3a, 0x8f, 0xc3, 0x18, 0x6d, 0xb2, 0xf7, 0x4c, 0x90,
        0xe5, 0x3a, 0x7f, 0xc3, 0x18, 0xf5, 0x4a, 0x9f, 0xe3, 0x28, 0x7d, 0xc2, 0x17, 0x6b, 0xa0,
        0xf5, 0x4a, 0x9f, 0xe3, 0x28, 0x7d, 0xc2, 0x16, 0x5b, 0xa0, 0xf5, 0x4a, 0x9f, 0xd3, 0x28,
        0x7d, 0xc1, 0x06, 0x5b, 0xa0, 0xf5, 0x49, 0x39, 0x7d, 0xb3, 0xf7, 0x6b, 0xa1, 0xe6, 0x5a,
        0x9e, 0xd4, 0x38, 0x7d, 0xb3, 0xf7, 0x6b, 0xa1, 0xe5, 0x4a, 0x8e, 0xc4, 0x38, 0x7d, 0xb3,
        0xf7, 0x6b, 0xaf, 0xe5, 0x4a, 0x8e, 0xc4, 0x38, 0x7c};
    static const struct { int index; float value; } want_values[] = {
        {0, -0.850204468f}, {1, -0.0723724365f}, {3, -1.23912048f}, {7, -0.65574646f},
        {31, -0.0723724365f}, {32, 0.99079895f}, {33, 1.90907288f}, {64, 0.0514831543f},
        {128, 0.87727356f}, {160, 2.78916931f}, {192, 1.91217041f}, {224, 0.680603027f},
        {255, 1.58807373f}};
    static const int8_t want_qs[8] = {-92, 104, 35, -35, -104, 92, 23, -46};
    static const int16_t want_bsums[16] = {-230, 92,  150, -57, 0,   57, -150, -92,
                                           230,  23, -184, 138, -69, -11, 46,  104};
    const quant_ops *ops = quant_ops_active(TENSOR_TYPE_Q4_K);
    assert_non_null(ops);
    uint8_t w[144], act[292];
    ops->quantize(x, w, 256);
    assert_memory_equal(w, want_w, sizeof want_w);
    ops->dequantize(w, wd, 256);
    for (size_t i = 0; i < sizeof want_values / sizeof want_values[0]; i++)
        assert_int_equal(float_bits(wd[want_values[i].index]), float_bits(want_values[i].value));

    assert_int_equal(ops->act_type, TENSOR_TYPE_Q8_K);
    quant_quantize_activations(ops, a, 256, 1, act);
    float d;
    memcpy(&d, act, sizeof d);
    assert_int_equal(float_bits(d), float_bits(0.0108267711f));
    assert_memory_equal(act + 4, want_qs, sizeof want_qs);
    for (int g = 0; g < 16; g++)
        assert_int_equal((int16_t)(act[260 + 2 * g] | act[261 + 2 * g] << 8), want_bsums[g]);

    float dot = ops->dot(256, w, act);
    if (cpu_active_level() == CPU_LEVEL_SCALAR) {
        assert_int_equal(float_bits(dot), float_bits(7.71365118f)); /* ggml's portable order */
    } else {
        quant_ops_get(TENSOR_TYPE_Q8_K, CPU_LEVEL_SCALAR)->dequantize(act, ad, 256);
        double sum_abs = 0.0;
        for (int j = 0; j < 256; j++)
            sum_abs += fabs((double)wd[j] * (double)ad[j]);
        assert_true(fabs(dot - 7.71365185) <= dot_tolerance(256, TENSOR_TYPE_Q4_K, sum_abs));
    }
}

/* ggml's degenerate blocks: all-zero super-blocks are all zero bytes, and a
 * constant -0.5 Q4_K block is d = 0, dmin = fp16(0.5/63), every min 63, every quant 0. */
static void test_k_quant_degenerate_blocks_match_ggml(void **state)
{
    (void)state;
    static const uint32_t k_types[] = {TENSOR_TYPE_Q2_K, TENSOR_TYPE_Q3_K, TENSOR_TYPE_Q4_K,
                                       TENSOR_TYPE_Q5_K, TENSOR_TYPE_Q6_K, TENSOR_TYPE_Q8_K};
    float x[256] = {0};
    uint8_t block[292], zero[292] = {0};
    for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++) {
        memset(block, 0xa5, sizeof block);
        quant_ops_active(k_types[i])->quantize(x, block, 256);
        assert_memory_equal(block, zero, tensor_type_get(k_types[i])->block_bytes);
    }
    for (int j = 0; j < 256; j++)
        x[j] = -0.5f;
    quant_ops_active(TENSOR_TYPE_Q4_K)->quantize(x, block, 256);
    uint16_t dmin = quant_f32_to_f16(0.5f / 63.0f);
    const uint8_t want_head[16] = {0, 0, (uint8_t)dmin, (uint8_t)(dmin >> 8), 0, 0, 0, 0,
                                   0xff, 0xff, 0xff, 0xff, 0xf0, 0xf0, 0xf0, 0xf0};
    assert_memory_equal(block, want_head, sizeof want_head);
    assert_memory_equal(block + 16, zero, 128);
}

/* ---- matrix entry points -------------------------------------------------------------- */

static void fill_random_read_only(uint32_t type, uint8_t *w, size_t n);

/* One shape: rows [ROW_BEGIN, ROW_END) of N_ROWS against n_tokens activation rows (random
 * blocks for the types without a quantizer). */
static void check_matmul_equals_dots(const quant_ops *ops, size_t n, size_t n_tokens)
{
    enum { N_ROWS = 21, ROW_BEGIN = 2, ROW_END = 19, LDY = 24, MAX_TOKENS = 26 };
    assert_true(n_tokens <= MAX_TOKENS);
    size_t w_bytes = row_bytes(ops->type, n), a_bytes = quant_act_row_bytes(ops->type, n);
    float *x = malloc(n * N_ROWS * sizeof(float)), *a = malloc(n * n_tokens * sizeof(float));
    uint8_t *w = malloc(w_bytes * N_ROWS), *act = malloc(a_bytes * n_tokens);
    float y[MAX_TOKENS * LDY];
    assert_true(x && a && w && act);
    fill_random(x, n * N_ROWS, false);
    fill_random(a, n * n_tokens, false);
    for (int r = 0; r < N_ROWS; r++)
        if (ops->quantize)
            ops->quantize(x + r * n, w + r * w_bytes, n);
        else
            fill_random_read_only(ops->type, w + r * w_bytes, n);
    quant_quantize_activations(ops, a, n, n_tokens, act);
    for (size_t k = 0; k < n_tokens * LDY; k++)
        y[k] = -12345.0f;
    quant_matmul_rows(ops, w, n, ROW_BEGIN, ROW_END, act, n_tokens, y, LDY);
    for (size_t t = 0; t < n_tokens; t++)
        for (int r = 0; r < LDY; r++) {
            float want = r >= ROW_BEGIN && r < ROW_END
                             ? ops->dot(n, w + r * w_bytes, act + t * a_bytes)
                             : -12345.0f; /* rows outside the range stay untouched */
            if (float_bits(y[t * LDY + r]) != float_bits(want))
                fail_msg("%s n=%zu tokens=%zu: row %d token %zu is %.9g, its dot %.9g",
                         tensor_type_name(ops->type), n, n_tokens, r, t, y[t * LDY + r], want);
        }
    free(x), free(a), free(w), free(act);
}

/* quant_matmul_rows, the path of matrices that are not packed, walks rows in tiles (the
 * float types' tile kernels, or dots): every result must carry the bits of its own dot, rows
 * outside its range untouched, for batch sizes around a tile, rows with an odd number of
 * blocks, and float rows that end in a partial vector. */
static void test_matmul_rows_equals_per_row_dots(void **state)
{
    (void)state;
    /* 5, 6 and 9: the float kernels' widest tile and split ones; 26: past a block of tokens */
    const size_t batch_sizes[] = {1, 3, 4, 5, 6, 9, 26};
    for (int i = 0; i < N_LISTED; i++) {
        const quant_ops *ops = quant_ops_active(listed_types[i].type);
        if (!ops || !ops->dot)
            continue;
        uint32_t block_elems = tensor_type_get(ops->type)->block_elems;
        for (size_t b = 0; b < sizeof batch_sizes / sizeof batch_sizes[0]; b++) {
            check_matmul_equals_dots(ops, 512, batch_sizes[b]);
            if (block_elems <= 32)
                check_matmul_equals_dots(ops, 608, batch_sizes[b]); /* 19 blocks */
            if (block_elems == 1) /* the float kernels' masked tail */
                check_matmul_equals_dots(ops, 600, batch_sizes[b]);
        }
    }
}

/* Packed kernels (rows repacked at load) owe every result the bits of its dot as well: a
 * range of whole row groups, tokens around the tile width, rows longer than a group. */
/* Rows of random weights quantized and packed once, for the batches checked against them. */
enum { PACKED_ROWS = 3 * QUANT_PACK_ROWS, PACKED_ROW_BEGIN = QUANT_PACK_ROWS };
typedef struct packed_weights {
    const quant_ops *ops;
    size_t n;
    uint8_t *w, *packed;
} packed_weights;

/* Types without a quantizer (the read-only ones) take random blocks. */
static packed_weights packed_weights_make(const quant_ops *ops, size_t n)
{
    size_t w_bytes = row_bytes(ops->type, n);
    packed_weights pw = {ops, n, malloc(w_bytes * PACKED_ROWS), malloc(w_bytes * PACKED_ROWS)};
    float *x = malloc(n * PACKED_ROWS * sizeof(float));
    assert_true(x && pw.w && pw.packed);
    fill_random(x, n * PACKED_ROWS, false);
    for (int r = 0; r < PACKED_ROWS; r++)
        if (ops->quantize)
            ops->quantize(x + r * n, pw.w + r * w_bytes, n);
        else
            fill_random_read_only(ops->type, pw.w + r * w_bytes, n);
    quant_pack_rows(ops, pw.w, n, 0, PACKED_ROW_BEGIN, pw.packed);
    quant_pack_rows(ops, pw.w, n, PACKED_ROW_BEGIN, PACKED_ROWS, pw.packed);
    free(x);
    return pw;
}

static void packed_weights_free(packed_weights *pw)
{
    free(pw->w), free(pw->packed);
}

/* The packed rows [PACKED_ROW_BEGIN, PACKED_ROWS) times n_tokens random activations: each
 * product bit for bit the row's dot, and nothing written outside those rows. */
static void check_packed_matmul_equals_dots(const packed_weights *pw, size_t n_tokens)
{
    enum { LDY = PACKED_ROWS + 5 };
    const quant_ops *ops = pw->ops;
    size_t n = pw->n, w_bytes = row_bytes(ops->type, n);
    size_t a_bytes = quant_act_row_bytes(ops->type, n);
    float *a = malloc(n * n_tokens * sizeof(float));
    uint8_t *act = malloc(a_bytes * n_tokens);
    void *sums = malloc(quant_packed_sums_bytes(n) * n_tokens);
    float *y = malloc(n_tokens * LDY * sizeof(float));
    assert_true(a && act && sums && y);
    fill_random(a, n * n_tokens, false);
    quant_quantize_activations(ops, a, n, n_tokens, act);
    quant_prepare_packed_act(ops, act, n, n_tokens, sums);
    for (size_t k = 0; k < n_tokens * LDY; k++)
        y[k] = -12345.0f;
    quant_matmul_packed_rows(ops, pw->packed, n, PACKED_ROW_BEGIN, PACKED_ROWS, act, sums,
                             n_tokens, y, LDY);
    for (size_t t = 0; t < n_tokens; t++)
        for (int r = 0; r < LDY; r++) {
            float want = r >= PACKED_ROW_BEGIN && r < PACKED_ROWS
                             ? ops->dot(n, pw->w + r * w_bytes, act + t * a_bytes)
                             : -12345.0f;
            if (float_bits(y[t * LDY + r]) != float_bits(want))
                fail_msg("packed %s n=%zu tokens=%zu: row %d token %zu is %.9g, its dot %.9g",
                         tensor_type_name(ops->type), n, n_tokens, r, t, y[t * LDY + r], want);
        }
    free(a), free(act), free(sums), free(y);
}

/* Rows of width n, quantized once, checked against every batch size. */
static void check_packed_batches(const quant_ops *ops, size_t n, const size_t *batch_sizes,
                                 size_t n_batch_sizes)
{
    packed_weights pw = packed_weights_make(ops, n);
    for (size_t b = 0; b < n_batch_sizes; b++)
        check_packed_matmul_equals_dots(&pw, batch_sizes[b]);
    packed_weights_free(&pw);
}

static void test_packed_matmul_equals_per_row_dots(void **state)
{
    (void)state;
    /* 5, 6 and 9: the float kernels' widest tile and split ones; 26: past a block of tokens */
    const size_t batch_sizes[] = {1, 3, 4, 5, 6, 9, 26}, one_token[] = {1};
    enum { N_BATCH_SIZES = sizeof batch_sizes / sizeof batch_sizes[0] };
    for (int i = 0; i < N_LISTED; i++) {
        const quant_ops *ops = quant_ops_active(listed_types[i].type);
        if (!ops || !quant_packable(ops, 512, 3 * QUANT_PACK_ROWS))
            continue;
        uint32_t block_elems = tensor_type_get(ops->type)->block_elems;
        check_packed_batches(ops, 512, batch_sizes, N_BATCH_SIZES);
        /* an odd number of blocks: 19, or 3 super-blocks */
        check_packed_batches(ops, block_elems <= 32 ? 608 : 768, batch_sizes, N_BATCH_SIZES);
        if (block_elems == 1) /* float rows that end in a partial chunk */
            check_packed_batches(ops, 600, batch_sizes, N_BATCH_SIZES);
        /* 9 and 16 super-blocks: the 1-token Q4_K / Q5_K kernels read activation blocks ahead
         * of their use on such rows */
        if (block_elems == 256) {
            check_packed_batches(ops, 9 * 256, one_token, 1);
            check_packed_batches(ops, 16 * 256, one_token, 1);
        }
    }
    /* rows that are not whole groups stay unpacked */
    const quant_ops *q4_0 = quant_ops_active(TENSOR_TYPE_Q4_0);
    assert_false(quant_packable(q4_0, 512, QUANT_PACK_ROWS + 1));
    const uint32_t packed_types[] = {TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q4_1, TENSOR_TYPE_Q5_0,
                                     TENSOR_TYPE_Q5_1, TENSOR_TYPE_Q8_0, TENSOR_TYPE_Q2_K,
                                     TENSOR_TYPE_Q3_K, TENSOR_TYPE_Q4_K, TENSOR_TYPE_Q5_K,
                                     TENSOR_TYPE_Q6_K};
    /* every x86 level packs them: VNNI kernels, or maddubs at avx2 and avx512-novnni */
    if (strcmp(level_name(), "scalar") != 0)
        for (size_t i = 0; i < sizeof packed_types / sizeof packed_types[0]; i++)
            assert_true(quant_packable(quant_ops_active(packed_types[i]), 512, QUANT_PACK_ROWS));
}

/* One F16 or BF16 kernel set of the avx2 or avx512 level (quant_legacy.h). */
typedef struct float_kernels {
    enum cpu_level level;
    bool needs_avx512_bf16;
    uint32_t type;
    quant_dot_fn dot;
    quant_matmul_fn matmul;
    quant_matmul_packed_fn matmul_packed;
} float_kernels;

/*
 * A prompt's F16 / BF16 products at avx2 and avx512 (many tokens: the wide tiles of
 * quant_legacy_avx2.c and quant_legacy_avx512.c, activations converted ahead in segments):
 * rows past a group of 64, tokens past a block of 24 and past a tile, elements past a
 * segment of 256 to a partial chunk, packed and row-major, each result the bits of its dot.
 * BF16 at avx512 goes through both its kernel sets directly, whichever this CPU dispatches
 * to: the FMA ones, and where the CPU has AVX512_BF16 the vdpbf16ps ones (32-element steps,
 * the last one partial).
 */
static void test_float_prompt_matmul_equals_dots(void **state)
{
    (void)state;
    enum { N = 600, ROWS = 80, ROW_MAJOR_ROWS = 71, TOKENS = 31, LDY = ROWS + 3 };
    const float_kernels kernels[] = {
        {CPU_LEVEL_AVX2, false, TENSOR_TYPE_F16, quant_dot_f16_avx2, quant_matmul_f16_avx2,
         quant_matmul_packed_f16_avx2},
        {CPU_LEVEL_AVX2, false, TENSOR_TYPE_BF16, quant_dot_bf16_avx2, quant_matmul_bf16_avx2,
         quant_matmul_packed_bf16_avx2},
        {CPU_LEVEL_AVX512, false, TENSOR_TYPE_F16, quant_dot_f16_avx512, quant_matmul_f16_avx512,
         quant_matmul_packed_f16_avx512},
        {CPU_LEVEL_AVX512, false, TENSOR_TYPE_BF16, quant_dot_bf16_avx512,
         quant_matmul_bf16_avx512, quant_matmul_packed_bf16_avx512},
        {CPU_LEVEL_AVX512, true, TENSOR_TYPE_BF16, quant_dot_bf16_avx512_bf16,
         quant_matmul_bf16_avx512_bf16, quant_matmul_packed_bf16_avx512_bf16},
    };
    size_t n_kernels = sizeof kernels / sizeof kernels[0];
    float *x = malloc(N * ROWS * sizeof(float)), *a = malloc(N * TOKENS * sizeof(float));
    uint16_t *w = malloc(N * ROWS * sizeof(uint16_t)), *packed = malloc(N * ROWS * sizeof(uint16_t));
    uint16_t *act = malloc(N * TOKENS * sizeof(uint16_t));
    float *y = malloc(TOKENS * LDY * sizeof(float));
    assert_true(x && a && w && packed && act && y);
    for (size_t k = 0; k < n_kernels; k++) {
        if (cpu_active_level() < kernels[k].level ||
            (kernels[k].needs_avx512_bf16 && !cpu_has_avx512_bf16()))
            continue;
        const quant_ops *ops = quant_ops_active(kernels[k].type);
        fill_random(x, N * ROWS, false);
        fill_random(a, N * TOKENS, false);
        for (size_t r = 0; r < ROWS; r++)
            ops->quantize(x + r * N, w + r * N, N);
        quant_quantize_activations(ops, a, N, TOKENS, act);
        quant_pack_rows(ops, w, N, 0, ROWS, packed);
        for (int layout = 0; layout < 2; layout++) {
            size_t rows = layout ? ROWS : ROW_MAJOR_ROWS;
            for (size_t j = 0; j < TOKENS * LDY; j++)
                y[j] = -12345.0f;
            if (layout)
                kernels[k].matmul_packed(N, packed, ROWS / QUANT_PACK_ROWS, act,
                                         N * sizeof(uint16_t), NULL, TOKENS, y, LDY);
            else
                kernels[k].matmul(N, w, N * sizeof(uint16_t), rows, act, N * sizeof(uint16_t),
                                  TOKENS, y, LDY);
            for (size_t t = 0; t < TOKENS; t++)
                for (size_t r = 0; r < LDY; r++) {
                    float want = r < rows ? kernels[k].dot(N, w + r * N, act + t * N) : -12345.0f;
                    if (float_bits(y[t * LDY + r]) != float_bits(want))
                        fail_msg("%s kernels %zu %s: row %zu token %zu is %.9g, its dot %.9g",
                                 tensor_type_name(kernels[k].type), k,
                                 layout ? "packed" : "row-major", r, t, y[t * LDY + r], want);
                }
        }
    }
    free(x), free(a), free(w), free(packed), free(act), free(y);
}

/*
 * BF16's dot and tiles come from one kernel set, vdpbf16ps or FMA as cpu_prefers_vdpbf16ps
 * says, so that a prompt's results and a step's keep the same bits; level avx512-vdpbf16ps
 * (CORRAL_CPU, as cpu_level_gate sets it) takes the vdpbf16ps set.
 */
static void test_bf16_kernels_switch_together(void **state)
{
    (void)state;
    if (strcmp(level_name(), "avx512-vdpbf16ps") == 0)
        assert_true(cpu_prefers_vdpbf16ps());
    if (cpu_active_level() != CPU_LEVEL_AVX512)
        skip();
    const quant_ops *ops = quant_ops_active(TENSOR_TYPE_BF16);
    if (cpu_prefers_vdpbf16ps()) {
        assert_ptr_equal(ops->dot, quant_dot_bf16_avx512_bf16);
        assert_ptr_equal(ops->matmul, quant_matmul_bf16_avx512_bf16);
        assert_ptr_equal(ops->matmul_packed, quant_matmul_packed_bf16_avx512_bf16);
    } else {
        assert_ptr_equal(ops->dot, quant_dot_bf16_avx512);
        assert_ptr_equal(ops->matmul, quant_matmul_bf16_avx512);
        assert_ptr_equal(ops->matmul_packed, quant_matmul_packed_bf16_avx512);
    }
}

/*
 * One block of row r at the integer extremes: every quant at its largest value in even rows
 * and its smallest in odd ones (Q4_0 / Q4_1 / Q4_K: nibbles 15 or 0; Q5_0 / Q5_1 / Q5_K: qs
 * and qh, q = 31 or 0; Q8_0: 127 or -128; Q6_K: 63 or 0 with scales 127 or -128; Q3_K: q = 3
 * or -4; Q2_K: 3 or 0), d = 1. Q4_1 / Q5_1 take m = -0.5, Q4_K / Q5_K every scale and min 63, Q2_K every scale and min
 * 15 (dmin 0.5 for those three); Q3_K every scale 31 in rows 0, 1 (mod 4) and -32 in rows
 * 2, 3, so each sign of the quants meets each sign of the scales. MXFP4 takes every code
 * +12 in even rows and -12 in odd ones; IQ4_NL and IQ4_XS the largest value (+113) in even
 * rows and the smallest (-127) in odd ones, IQ4_XS under sub-block scales as Q3_K's (+31 or
 * -32).
 */
static void fill_extreme_block(uint32_t type, uint8_t *block, size_t block_bytes, size_t r)
{
    uint8_t high = type == TENSOR_TYPE_Q8_0 ? 0x7f : 0xff;
    uint8_t low = type == TENSOR_TYPE_Q8_0 ? 0x80 : 0x00;
    memset(block, r % 2 ? low : high, block_bytes);
    switch (type) {
    case TENSOR_TYPE_Q2_K: /* scales, qs; then d, dmin */
        memset(block, 0xff, 16);
        block[80] = 0x00, block[81] = 0x3c;
        block[82] = 0x00, block[83] = 0x38;
        break;
    case TENSOR_TYPE_Q3_K: /* hmask, qs; then scales (biased by 32), d */
        memset(block + 96, r % 4 < 2 ? 0xff : 0x00, 12);
        block[108] = 0x00, block[109] = 0x3c;
        break;
    case TENSOR_TYPE_Q6_K: /* ql, qh; then scales, d */
        memset(block + 192, r % 2 ? 0x80 : 0x7f, 16);
        block[208] = 0x00, block[209] = 0x3c;
        break;
    case TENSOR_TYPE_Q4_K:
    case TENSOR_TYPE_Q5_K:
        block[0] = 0x00, block[1] = 0x3c; /* d = 1.0 */
        block[2] = 0x00, block[3] = 0x38; /* dmin = 0.5 */
        memset(block + 4, 0xff, 12);     /* every scale and min 63 */
        break;
    case TENSOR_TYPE_Q4_1:
    case TENSOR_TYPE_Q5_1:
        block[0] = 0x00, block[1] = 0x3c; /* d = 1.0 */
        block[2] = 0x00, block[3] = 0xb8; /* m = -0.5 */
        break;
    case TENSOR_TYPE_IQ4_XS: /* d = 1; every scale 63 (+31) in rows 0, 1 (mod 4), 0 (-32)
                              * in rows 2, 3; codes 15 (+113) or 0 (-127) */
        block[0] = 0x00, block[1] = 0x3c;
        memset(block + 2, r % 4 < 2 ? 0xff : 0x00, 6);
        break;
    case TENSOR_TYPE_MXFP4: /* scale 2^-1; every code 7 (+12) or 15 (-12) */
        block[0] = 127;
        memset(block + 1, r % 2 ? 0xff : 0x77, 16);
        break;
    default:
        block[0] = 0x00, block[1] = 0x3c;
        break;
    }
}

/*
 * Packed kernels at the integer extremes, where narrow partial sums would saturate or wrap
 * (the AVX2 kernels add a block's or sub-block's products in i16): blocks of
 * fill_extreme_block against activations of +-127, all of one sign or alternating in fours.
 * The packed result must still carry its dot's bits.
 */
static void test_packed_matmul_extremes_equal_dots(void **state)
{
    (void)state;
    enum { N = 256, ROWS = QUANT_PACK_ROWS, TOKENS = 3 };
    const uint32_t types[] = {TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q4_1, TENSOR_TYPE_Q5_0,
                              TENSOR_TYPE_Q5_1, TENSOR_TYPE_Q8_0, TENSOR_TYPE_Q2_K,
                              TENSOR_TYPE_Q3_K, TENSOR_TYPE_Q4_K, TENSOR_TYPE_Q5_K,
                              TENSOR_TYPE_Q6_K, TENSOR_TYPE_MXFP4, TENSOR_TYPE_IQ4_NL,
                              TENSOR_TYPE_IQ4_XS};
    static float a[TOKENS * N];
    for (size_t i = 0; i < N; i++) {
        a[i] = 1.0f;
        a[N + i] = -1.0f;
        a[2 * N + i] = (i / 4) % 2 ? -1.0f : 1.0f;
    }
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const quant_ops *ops = quant_ops_active(types[k]);
        if (!quant_packable(ops, N, ROWS))
            continue;
        size_t w_bytes = row_bytes(ops->type, N), a_bytes = quant_act_row_bytes(ops->type, N);
        size_t blocks = N / tensor_type_get(ops->type)->block_elems, block_bytes = w_bytes / blocks;
        uint8_t *w = malloc(w_bytes * ROWS), *packed = malloc(w_bytes * ROWS);
        uint8_t *act = malloc(a_bytes * TOKENS);
        void *sums = malloc(quant_packed_sums_bytes(N) * TOKENS);
        float *y = malloc(TOKENS * ROWS * sizeof(float));
        assert_true(w && packed && act && sums && y);
        for (size_t r = 0; r < ROWS; r++)
            for (size_t b = 0; b < blocks; b++)
                fill_extreme_block(types[k], w + r * w_bytes + b * block_bytes, block_bytes, r);
        quant_pack_rows(ops, w, N, 0, ROWS, packed);
        quant_quantize_activations(ops, a, N, TOKENS, act);
        quant_prepare_packed_act(ops, act, N, TOKENS, sums);
        quant_matmul_packed_rows(ops, packed, N, 0, ROWS, act, sums, TOKENS, y, ROWS);
        for (size_t t = 0; t < TOKENS; t++)
            for (size_t r = 0; r < ROWS; r++) {
                float want = ops->dot(N, w + r * w_bytes, act + t * a_bytes);
                if (float_bits(y[t * ROWS + r]) != float_bits(want))
                    fail_msg("%s packed %s: row %zu token %zu is %.9g, its dot %.9g", level_name(),
                             tensor_type_name(ops->type), r, t, y[t * ROWS + r], want);
            }
        free(w), free(packed), free(act), free(sums), free(y);
    }
}

/* The K-quants' activations (Q8_K) at the active level: the portable quantizer's bytes for
 * random blocks, an all-zero block, a magnitude tie of opposite signs (the first one sets
 * the scale), values that land on .5 once scaled, and blocks holding NaN or an infinity. */
static void test_q8_k_activations_at_active_level_match_portable(void **state)
{
    (void)state;
    enum { BLOCKS = 9, N = 256 * BLOCKS };
    static float x[N];
    uint32_t rng = 3;
    for (size_t i = 0; i < N; i++) {
        rng = rng * 1664525u + 1013904223u;
        x[i] = (float)((int)(rng >> 8) % 200001 - 100000) / 3000.0f;
    }
    for (size_t i = 256; i < 512; i++)
        x[i] = i % 2 ? 0.0f : -0.0f;
    x[512 + 7] = -40.0f, x[512 + 100] = 40.0f;
    for (size_t i = 768; i < 1024; i++)
        x[i] = (float)((int)(i % 255) - 127); /* iscale 1: every value exact, then .5 steps */
    x[768] = 254.0f;
    x[1024 + 33] = NAN;
    x[1280 + 200] = INFINITY;
    x[1536 + 5] = -INFINITY;
    const quant_ops *active = quant_ops_active(TENSOR_TYPE_Q4_K);
    const quant_ops *portable = quant_ops_get(TENSOR_TYPE_Q4_K, CPU_LEVEL_SCALAR);
    size_t bytes = quant_act_row_bytes(TENSOR_TYPE_Q4_K, N);
    uint8_t *got = malloc(bytes), *want = malloc(bytes);
    assert_true(got && want);
    active->quantize_act(x, got, N);
    portable->quantize_act(x, want, N);
    for (size_t i = 0; i < bytes; i++)
        if (got[i] != want[i])
            fail_msg("%s: Q8_K byte %zu (block %zu) is %02x, portable %02x", level_name(), i,
                     i / (bytes / BLOCKS), got[i], want[i]);
    free(got);
    free(want);
}

/* ---- read-only types: IQ4 (tools/iq4ref) and the lattice IQ types (tools/iqref) ---------- */

/* Types the engine reads but cannot write: ops without a quantizer, fixtures from ggml
 * (quant/rand-e256-<fixture>.blocks.txt), each with a tensor of its type in
 * quant/rand-e256-<model>.gguf. The lattice types' SIMD dots promise the scalar's bits; the
 * IQ4 ones, which fuse each block's multiply-add, only dot_tolerance. */
static const struct {
    uint32_t type;
    const char *fixture, *model;
    uint32_t partner;
    bool packed_at_simd, exact_dot;
} read_only_types[] = {
    {TENSOR_TYPE_IQ4_NL, "IQ4_NL", "IQ4_XS", TENSOR_TYPE_Q8_0, true, false},
    {TENSOR_TYPE_IQ4_XS, "IQ4_XS", "IQ4_XS", TENSOR_TYPE_Q8_K, true, false},
    {TENSOR_TYPE_IQ2_XXS, "IQ2_XXS", "IQ-lattice", TENSOR_TYPE_Q8_K, false, true},
    {TENSOR_TYPE_IQ2_XS, "IQ2_XS", "IQ-lattice", TENSOR_TYPE_Q8_K, false, true},
    {TENSOR_TYPE_IQ2_S, "IQ2_S", "IQ-lattice", TENSOR_TYPE_Q8_K, false, true},
    {TENSOR_TYPE_IQ3_XXS, "IQ3_XXS", "IQ-lattice", TENSOR_TYPE_Q8_K, false, true},
    {TENSOR_TYPE_IQ3_S, "IQ3_S", "IQ-lattice", TENSOR_TYPE_Q8_K, false, true},
    {TENSOR_TYPE_IQ1_S, "IQ1_S", "IQ-lattice", TENSOR_TYPE_Q8_K, false, true},
    {TENSOR_TYPE_IQ1_M, "IQ1_M", "IQ-lattice", TENSOR_TYPE_Q8_K, false, true},
};
enum { N_READ_ONLY = sizeof read_only_types / sizeof read_only_types[0] };

/* The text after "\n<key>: " in text, or a failure naming the key. */
static const char *fixture_value(const char *text, const char *key)
{
    char line_start[64];
    snprintf(line_start, sizeof line_start, "\n%s: ", key);
    const char *at = strstr(text, line_start);
    if (!at)
        fail_msg("fixture line '%s' is missing", key);
    return at + strlen(line_start);
}

static void test_read_only_types_have_ops(void **state)
{
    (void)state;
    for (int level = 0; level < CPU_LEVEL_COUNT; level++)
        for (int i = 0; i < N_READ_ONLY; i++) {
            const quant_ops *ops = quant_ops_get(read_only_types[i].type, (enum cpu_level)level);
            uint32_t partner = read_only_types[i].partner;
            assert_non_null(ops);
            assert_int_equal(ops->type, read_only_types[i].type);
            assert_true(ops->dequantize && ops->quantize_act && ops->dot && !ops->quantize);
            assert_int_equal(ops->act_type, partner);
            /* the activations of the types sharing the partner at this level, so that a layer
             * mixing them quantizes its input once (forward.c) */
            const quant_ops *sharing = quant_ops_get(
                partner == TENSOR_TYPE_Q8_0 ? TENSOR_TYPE_Q8_0 : TENSOR_TYPE_Q4_K,
                (enum cpu_level)level);
            assert_ptr_equal(ops->quantize_act, sharing->quantize_act);
            /* and a packed product prepares the sums a packed Q4_K one sharing its input reads */
            if (ops->matmul_packed)
                assert_ptr_equal(ops->act_sums, sharing->act_sums);
        }
}

/* ggml's dequantized values bit for bit at the scalar and the active level, ggml's bytes for
 * the activations, and ggml's dot products within dot_tolerance at both levels. */
static void test_read_only_blocks_and_dots_match_ggml(void **state)
{
    (void)state;
    for (int i = 0; i < N_READ_ONLY; i++) {
        uint32_t type = read_only_types[i].type;
        blocks_file f;
        blocks_file_load(read_only_types[i].fixture, &f);
        assert_int_equal(f.type, type);
        assert_int_equal(f.block_elems, tensor_type_get(type)->block_elems);
        assert_int_equal(f.block_bytes, tensor_type_get(type)->block_bytes);
        const quant_ops *levels[2] = {quant_ops_get(type, CPU_LEVEL_SCALAR),
                                      quant_ops_active(type)};
        float out[256];
        for (int l = 0; l < 2; l++)
            for (size_t b = 0; b < f.n_blocks; b++) {
                levels[l]->dequantize(f.bytes + b * f.block_bytes, out, f.block_elems);
                for (size_t j = 0; j < f.block_elems; j++)
                    if (float_bits(out[j]) != float_bits(f.dequant[b * f.block_elems + j]))
                        fail_msg("%s at %s block %zu element %zu: got %.9g want %.9g",
                                 read_only_types[i].fixture, l ? level_name() : "scalar", b, j,
                                 out[j], f.dequant[b * f.block_elems + j]);
            }

        char relative[256];
        snprintf(relative, sizeof relative, "quant/rand-e256-%s.blocks.txt",
                 read_only_types[i].fixture);
        char *text = read_fixture(relative);
        enum { ROWS = 3, ACTS = 3 };
        size_t n = f.n_blocks * f.block_elems / ROWS, w_bytes = row_bytes(type, n);
        size_t a_bytes = quant_act_row_bytes(type, n);
        assert_int_equal(strtoull(fixture_value(text, "act_row_bytes"), NULL, 10), a_bytes);
        const quant_ops *act_ops = quant_ops_get(levels[0]->act_type, CPU_LEVEL_SCALAR);
        float *a = malloc(n * sizeof *a), *ad = malloc(ACTS * n * sizeof *ad);
        float *wd = malloc(ROWS * n * sizeof *wd);
        uint8_t *act = malloc(ACTS * a_bytes), *mine = malloc(a_bytes);
        assert_true(a && ad && wd && act && mine);
        for (size_t s = 0; s < ACTS; s++) {
            char key[32];
            snprintf(key, sizeof key, "act %zu bytes", s);
            parse_hex(fixture_value(text, key), act + s * a_bytes, a_bytes);
            snprintf(key, sizeof key, "act %zu source_f32", s);
            parse_floats(fixture_value(text, key), a, n);
            for (int l = 0; l < 2; l++) {
                quant_quantize_activations(levels[l], a, n, 1, mine);
                if (memcmp(mine, act + s * a_bytes, a_bytes) != 0)
                    fail_msg("%s: activation row %zu differs from ggml's at %s",
                             read_only_types[i].fixture, s, l ? level_name() : "scalar");
            }
            act_ops->dequantize(act + s * a_bytes, ad + s * n, n);
        }
        levels[0]->dequantize(f.bytes, wd, ROWS * n);
        for (size_t r = 0; r < ROWS; r++)
            for (size_t s = 0; s < ACTS; s++) {
                char key[32];
                snprintf(key, sizeof key, "dot %zu %zu", r, s);
                float want = strtof(fixture_value(text, key), NULL);
                double sum_abs = 0.0;
                for (size_t j = 0; j < n; j++)
                    sum_abs += fabs((double)wd[r * n + j] * (double)ad[s * n + j]);
                double tolerance = dot_tolerance(n, type, sum_abs);
                for (int l = 0; l < 2; l++) {
                    float got = levels[l]->dot(n, f.bytes + r * w_bytes, act + s * a_bytes);
                    if (fabs((double)got - (double)want) > tolerance)
                        fail_msg("%s row %zu . act %zu at %s: %.9g, ggml %.9g (tolerance %.3g)",
                                 read_only_types[i].fixture, r, s, l ? level_name() : "scalar",
                                 got, want, tolerance);
                }
            }
        free(a), free(ad), free(wd), free(act), free(mine), free(text);
        blocks_file_free(&f);
    }
}

/* The FNV-1a 64 of ggml's dequantization of a whole tensor of the type's model. */
static void test_read_only_whole_tensor_matches_ggml_hash(void **state)
{
    (void)state;
    for (int i = 0; i < N_READ_ONLY; i++) {
        char relative[256];
        snprintf(relative, sizeof relative, "quant/rand-e256-%s.blocks.txt",
                 read_only_types[i].fixture);
        char *text = read_fixture(relative);
        uint64_t want = strtoull(fixture_value(text, "tensor_dequant_fnv1a64"), NULL, 16);
        const char *name_at = fixture_value(text, "tensor");
        char name[128];
        size_t len = strcspn(name_at, "\n");
        assert_true(len < sizeof name);
        memcpy(name, name_at, len);
        name[len] = '\0';
        free(text);

        gguf_file *file = open_quant_model(read_only_types[i].model);
        const gguf_tensor *t = gguf_find_tensor(file, name);
        assert_non_null(t);
        assert_int_equal(t->type, read_only_types[i].type);
        size_t n = (size_t)(t->ne[0] * t->ne[1]);
        float *out = malloc(n * sizeof(float));
        assert_non_null(out);
        quant_ops_active(t->type)->dequantize(t->data, out, n);
        uint64_t hash = 0xcbf29ce484222325ULL;
        for (size_t j = 0; j < n; j++)
            for (int k = 0; k < 4; k++) {
                hash ^= (float_bits(out[j]) >> (8 * k)) & 0xff;
                hash *= 0x100000001b3ULL;
            }
        if (hash != want)
            fail_msg("%s: dequantized hash %016llx, ggml's %016llx", name,
                     (unsigned long long)hash, (unsigned long long)want);
        free(out);
        gguf_close(file);
    }
}

/* Random blocks of a read-only type: any bytes are a valid block, once the f16 scale is a
 * finite number. It leads every block but IQ1_M's, whose four nibbles top its four scale
 * words (the last 8 bytes), the first word's the lowest. */
static void fill_random_read_only(uint32_t type, uint8_t *w, size_t n)
{
    const tensor_type_info *info = tensor_type_get(type);
    for (size_t b = 0; b < n / info->block_elems; b++) {
        uint8_t *block = w + b * info->block_bytes;
        for (size_t j = 0; j < info->block_bytes; j++)
            block[j] = (uint8_t)(rng_uniform() * 256.0);
        uint16_t d = quant_f32_to_f16((float)pow(10.0, 3.0 * rng_uniform() - 4.0));
        if (type != TENSOR_TYPE_IQ1_M) {
            memcpy(block, &d, sizeof d);
            continue;
        }
        uint8_t *scales = block + info->block_bytes - 8;
        for (int k = 0; k < 4; k++)
            scales[2 * k + 1] = (uint8_t)((scales[2 * k + 1] & 0x0f) | (d >> (4 * k) & 0xf) << 4);
    }
}

/* The active level's dots against the scalar level's (bit for bit for the lattice types), and
 * those against an f64 sum of the dequantized operands, under dot_tolerance: blocks added in
 * a different order and one rounding per block (or super-block) instead of several. */
static void test_read_only_dot_at_active_level_matches_scalar(void **state)
{
    (void)state;
    static const size_t sizes[] = {32, 96, 256, 768, 4096, 4128};
    for (int i = 0; i < N_READ_ONLY; i++) {
        uint32_t type = read_only_types[i].type;
        const quant_ops *ops = quant_ops_active(type), *scalar = quant_ops_get(type, CPU_LEVEL_SCALAR);
        const quant_ops *act_ops = quant_ops_get(ops->act_type, CPU_LEVEL_SCALAR);
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            size_t n = sizes[k];
            if (n % tensor_type_get(type)->block_elems != 0)
                continue;
            size_t a_bytes = quant_act_row_bytes(type, n);
            uint8_t *w = malloc(row_bytes(type, n)), *act = malloc(a_bytes);
            float *a = malloc(n * sizeof *a), *wd = malloc(n * sizeof *wd), *ad = malloc(n * sizeof *ad);
            assert_true(w && act && a && wd && ad);
            for (int round = 0; round < 4; round++) {
                fill_random_read_only(type, w, n);
                fill_random(a, n, round == 1);
                quant_quantize_activations(ops, a, n, 1, act);
                ops->dequantize(w, wd, n);
                act_ops->dequantize(act, ad, n);
                double sum_abs = 0.0, exact = 0.0;
                for (size_t j = 0; j < n; j++) {
                    sum_abs += fabs((double)wd[j] * (double)ad[j]);
                    exact += (double)wd[j] * (double)ad[j];
                }
                double tolerance = dot_tolerance(n, type, sum_abs);
                float got = ops->dot(n, w, act), want = scalar->dot(n, w, act);
                if (read_only_types[i].exact_dot && float_bits(got) != float_bits(want))
                    fail_msg("%s n=%zu at %s: %.9g, not the scalar's bits (%.9g)",
                             tensor_type_name(type), n, level_name(), got, want);
                if (fabs((double)got - (double)want) > tolerance)
                    fail_msg("%s n=%zu at %s: %.9g vs scalar %.9g (tolerance %.3g)",
                             tensor_type_name(type), n, level_name(), got, want, tolerance);
                if (fabs((double)want - exact) > tolerance)
                    fail_msg("%s n=%zu scalar %.9g vs f64 %.9g (tolerance %.3g)",
                             tensor_type_name(type), n, want, exact, tolerance);
            }
            free(w), free(act), free(a), free(wd), free(ad);
        }
    }
}

/* quant_matmul_rows on read-only types (the lattice types' tile kernels at the x86 levels,
 * dots elsewhere): every result the bits of its dot, for batches around the tile of 8
 * tokens, and rows of one and of three super-blocks. */
static void test_read_only_matmul_rows_equals_dots(void **state)
{
    (void)state;
    const size_t batch_sizes[] = {1, 3, 7, 8, 9, 17};
    for (int i = 0; i < N_READ_ONLY; i++) {
        const quant_ops *ops = quant_ops_active(read_only_types[i].type);
        for (size_t b = 0; b < sizeof batch_sizes / sizeof batch_sizes[0]; b++) {
            check_matmul_equals_dots(ops, 256, batch_sizes[b]);
            check_matmul_equals_dots(ops, 768, batch_sizes[b]);
        }
    }
    /* the lattice types take their tile kernels wherever there is SIMD */
    bool simd = strcmp(level_name(), "scalar") != 0;
    for (int i = 0; i < N_READ_ONLY; i++)
        if (read_only_types[i].exact_dot)
            assert_true((quant_ops_active(read_only_types[i].type)->matmul != NULL) == simd);
}

/* Packed IQ4 rows (random blocks) give each product its dot's bits, as the other packed types
 * do (check_packed_matmul_equals_dots); every x86 level packs them, and no level packs the
 * lattice types (their products take the per-row dot). */
static void test_read_only_packed_matmul_equals_dots(void **state)
{
    (void)state;
    const size_t batch_sizes[] = {1, 3, 4, 5, 9}, one_token[] = {1};
    enum { N_BATCH_SIZES = sizeof batch_sizes / sizeof batch_sizes[0] };
    for (int i = 0; i < N_READ_ONLY; i++) {
        const quant_ops *ops = quant_ops_active(read_only_types[i].type);
        if (strcmp(level_name(), "scalar") == 0 || !read_only_types[i].packed_at_simd) {
            assert_false(quant_packable(ops, 512, QUANT_PACK_ROWS));
            continue;
        }
        assert_true(quant_packable(ops, 512, QUANT_PACK_ROWS));
        check_packed_batches(ops, 512, batch_sizes, N_BATCH_SIZES);
        if (ops->type == TENSOR_TYPE_IQ4_NL) { /* 19 blocks */
            check_packed_batches(ops, 608, batch_sizes, N_BATCH_SIZES);
        } else { /* 3 and 9 super-blocks */
            check_packed_batches(ops, 3 * 256, batch_sizes, N_BATCH_SIZES);
            check_packed_batches(ops, 9 * 256, one_token, 1);
        }
    }
}

int main(void)
{
    const char *wanted = getenv("CORRAL_CPU");
    if (wanted && strcmp(wanted, level_name()) != 0)
        printf("note: CORRAL_CPU=%s, this CPU runs level %s\n", wanted, level_name());
    /* CORRAL_TEST_FILTER (a cmocka pattern such as "*packed*") runs only the tests it names */
    const char *filter = getenv("CORRAL_TEST_FILTER");
    if (filter)
        cmocka_set_test_filter(filter);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_listed_type_has_ops),
        cmocka_unit_test(test_dequantize_matches_ggml_bit_for_bit),
        cmocka_unit_test(test_quantize_reproduces_ggml_bytes),
        cmocka_unit_test(test_quantize_reproduces_every_tensor_of_the_llama_cpp_files),
        cmocka_unit_test(test_dequantize_whole_tensor_matches_ggml_hash),
        cmocka_unit_test(test_mxfp4_blocks_match_ggml),
        cmocka_unit_test(test_mxfp4_tensors_match_ggml),
        cmocka_unit_test(test_mxfp4_scale_and_ties),
        cmocka_unit_test(test_f16_and_bf16_round_like_ggml),
        cmocka_unit_test(test_f16_quantizers_at_active_level_round_like_scalar),
        cmocka_unit_test(test_q4_0_worked_example_matches_ggml),
        cmocka_unit_test(test_q8_activations_round_half_to_even),
        cmocka_unit_test(test_dot_at_active_level_matches_scalar),
        cmocka_unit_test(test_q4_k_worked_example_matches_ggml),
        cmocka_unit_test(test_k_quant_degenerate_blocks_match_ggml),
        cmocka_unit_test(test_matmul_rows_equals_per_row_dots),
        cmocka_unit_test(test_packed_matmul_equals_per_row_dots),
        cmocka_unit_test(test_packed_matmul_extremes_equal_dots),
        cmocka_unit_test(test_float_prompt_matmul_equals_dots),
        cmocka_unit_test(test_bf16_kernels_switch_together),
        cmocka_unit_test(test_q8_k_activations_at_active_level_match_portable),
        cmocka_unit_test(test_read_only_types_have_ops),
        cmocka_unit_test(test_read_only_blocks_and_dots_match_ggml),
        cmocka_unit_test(test_read_only_whole_tensor_matches_ggml_hash),
        cmocka_unit_test(test_read_only_dot_at_active_level_matches_scalar),
        cmocka_unit_test(test_read_only_matmul_rows_equals_dots),
        cmocka_unit_test(test_read_only_packed_matmul_equals_dots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

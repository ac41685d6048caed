/*
 * Writes the IQ4_NL / IQ4_XS test fixtures of tests/fixtures/quant/ with ggml's own code (its
 * public API: ggml_quantize_chunk, the type traits' to_float, the CPU traits' from_float and
 * vec_dot, and its GGUF writer), so that the engine's kernels are checked against ggml and not
 * against themselves. Not part of the build: see tools/iq4ref/README.md for the command line.
 *
 *   iq4gen model SRC_F32.gguf OUT.gguf   SRC's 2-D tensors quantized: ffn_down and output to
 *                                        IQ4_NL, the others to IQ4_XS; norms stay F32
 *   iq4gen blocks TYPE MODEL.gguf TENSOR OUT.txt
 *                                        random rows quantized by ggml (bytes, ggml's dequantized
 *                                        values, the source floats), activation rows in the
 *                                        type's partner (bytes), ggml's dot of every pair, and
 *                                        the FNV-1a 64 of ggml's dequantized TENSOR of MODEL
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-cpu.h"
#include "ggml.h"
#include "gguf.h"

enum { N_ROWS = 3, N_ACTS = 3 };

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static double uniform01(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return ((double)(rng_state >> 11) + 0.5) / 9007199254740992.0;
}

static float normal(void)
{
    return (float)(sqrt(-2.0 * log(uniform01())) * cos(6.283185307179586 * uniform01()));
}

static void die(const char *what)
{
    fprintf(stderr, "iq4gen: %s\n", what);
    exit(1);
}

static void print_hex(FILE *out, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fprintf(out, "%02x", p[i]);
    fputc('\n', out);
}

static void print_floats(FILE *out, const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fprintf(out, i ? " %.9g" : "%.9g", v[i]);
    fputc('\n', out);
}

static int model(const char *src_path, const char *out_path)
{
    struct ggml_context *data = NULL;
    struct gguf_init_params params = {.no_alloc = false, .ctx = &data};
    struct gguf_context *src = gguf_init_from_file(src_path, params);
    if (!src)
        die("cannot read the source model");
    struct gguf_context *out = gguf_init_empty();
    gguf_set_kv(out, src);
    gguf_set_val_u32(out, "general.file_type", 30); /* llama.cpp's MOSTLY_IQ4_XS */
    int64_t n = gguf_get_n_tensors(src);
    void **buffers = calloc((size_t)n, sizeof *buffers);
    for (int64_t i = 0; i < n; i++) {
        const char *name = gguf_get_tensor_name(src, i);
        struct ggml_tensor *t = ggml_get_tensor(data, name);
        if (t->type != GGML_TYPE_F32)
            die("the source must be all F32");
        gguf_add_tensor(out, t);
        if (ggml_n_dims(t) < 2)
            continue;
        enum ggml_type type = strstr(name, "ffn_down") || strcmp(name, "output.weight") == 0
                                  ? GGML_TYPE_IQ4_NL
                                  : GGML_TYPE_IQ4_XS;
        int64_t rows = ggml_nrows(t);
        buffers[i] = malloc(ggml_row_size(type, t->ne[0]) * (size_t)rows);
        ggml_quantize_chunk(type, t->data, buffers[i], 0, rows, t->ne[0], NULL);
        gguf_set_tensor_type(out, name, type);
        gguf_set_tensor_data(out, name, buffers[i]);
    }
    if (!gguf_write_to_file(out, out_path, false))
        die("cannot write the model");
    for (int64_t i = 0; i < n; i++)
        free(buffers[i]);
    free(buffers);
    gguf_free(out);
    gguf_free(src);
    ggml_free(data);
    return 0;
}

/* FNV-1a 64 over the f32 bits of ggml's dequantization of tensor `name` of model_path. */
static uint64_t tensor_hash(const char *model_path, const char *name, enum ggml_type type)
{
    struct ggml_context *data = NULL;
    struct gguf_init_params params = {.no_alloc = false, .ctx = &data};
    struct gguf_context *file = gguf_init_from_file(model_path, params);
    if (!file)
        die("cannot read the model");
    struct ggml_tensor *t = ggml_get_tensor(data, name);
    if (!t || t->type != type)
        die("the tensor is missing or of another type");
    int64_t n = ggml_nelements(t);
    float *values = malloc((size_t)n * sizeof *values);
    ggml_get_type_traits(type)->to_float(t->data, values, n);
    uint64_t hash = 0xcbf29ce484222325ULL;
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &values[i], sizeof bits);
        for (int k = 0; k < 4; k++) {
            hash ^= (bits >> (8 * k)) & 0xff;
            hash *= 0x100000001b3ULL;
        }
    }
    free(values);
    gguf_free(file);
    ggml_free(data);
    return hash;
}

/*
 * Rows of n elements, N(0,1) times a per-row gain; row 1 starts with 32 zeros (an all-zero
 * block) and row 2 one outlier of magnitude 32, far above the others, which its block's
 * scale is set by.
 */
static void fill_rows(float *x, size_t n, size_t rows)
{
    for (size_t r = 0; r < rows; r++) {
        float gain = 0.02f + 0.5f * (float)uniform01();
        for (size_t i = 0; i < n; i++)
            x[r * n + i] = gain * normal();
    }
    if (rows > 1)
        memset(x + n, 0, 32 * sizeof *x);
    if (rows > 2)
        x[2 * n + 77] = x[2 * n + 77] < 0.0f ? -32.0f : 32.0f;
}

static int blocks(const char *type_name, const char *model_path, const char *tensor,
                  const char *out_path)
{
    enum ggml_type type = strcmp(type_name, "IQ4_NL") == 0   ? GGML_TYPE_IQ4_NL
                          : strcmp(type_name, "IQ4_XS") == 0 ? GGML_TYPE_IQ4_XS
                                                             : GGML_TYPE_COUNT;
    if (type == GGML_TYPE_COUNT)
        die("TYPE is IQ4_NL or IQ4_XS");
    const struct ggml_type_traits *traits = ggml_get_type_traits(type);
    const struct ggml_type_traits_cpu *cpu = ggml_get_type_traits_cpu(type);
    enum ggml_type act_type = cpu->vec_dot_type;
    const struct ggml_type_traits_cpu *act_cpu = ggml_get_type_traits_cpu(act_type);
    size_t n = type == GGML_TYPE_IQ4_NL ? 512 : 1024;
    size_t block_elems = (size_t)traits->blck_size, block_bytes = traits->type_size;
    size_t row_bytes = ggml_row_size(type, (int64_t)n), act_bytes = ggml_row_size(act_type, (int64_t)n);

    float *x = malloc(N_ROWS * n * sizeof *x), *deq = malloc(N_ROWS * n * sizeof *deq);
    float *a = malloc(N_ACTS * n * sizeof *a);
    uint8_t *w = malloc(N_ROWS * row_bytes), *act = malloc(N_ACTS * act_bytes);
    if (!x || !deq || !a || !w || !act)
        die("out of memory");
    fill_rows(x, n, N_ROWS);
    ggml_quantize_chunk(type, x, w, 0, N_ROWS, (int64_t)n, NULL);
    traits->to_float(w, deq, (int64_t)(N_ROWS * n));
    fill_rows(a, n, N_ACTS);
    for (size_t r = 0; r < N_ACTS; r++)
        act_cpu->from_float(a + r * n, act + r * act_bytes, (int64_t)n);

    FILE *out = fopen(out_path, "w");
    if (!out)
        die("cannot write OUT.txt");
    size_t n_blocks = N_ROWS * n / block_elems;
    fprintf(out, "file: %s\n", out_path);
    fprintf(out, "made_by: tools/iq4ref/iq4gen.c blocks %s (ggml %s)\n", type_name,
            ggml_version());
    fprintf(out, "ggml_type_id: %d\nggml_type_name: %s\n", (int)type, ggml_type_name(type));
    fprintf(out, "ggml_block_elems: %zu\nggml_block_bytes: %zu\nn_blocks: %zu\n", block_elems,
            block_bytes, n_blocks);
    fprintf(out, "rows: %d rows of %zu elements, block i in row i / %zu\n", N_ROWS, n,
            n / block_elems);
    fprintf(out, "act_type_id: %d\nact_type_name: %s\nact_row_bytes: %zu\n", (int)act_type,
            ggml_type_name(act_type), act_bytes);
    fprintf(out, "tensor: %s\ntensor_dequant_fnv1a64: %016" PRIx64 "\n", tensor,
            tensor_hash(model_path, tensor, type));
    for (size_t b = 0; b < n_blocks; b++) {
        fprintf(out, "block %zu bytes: ", b);
        print_hex(out, w + b * block_bytes, block_bytes);
        fprintf(out, "block %zu dequant: ", b);
        print_floats(out, deq + b * block_elems, block_elems);
        fprintf(out, "block %zu source_f32: ", b);
        print_floats(out, x + b * block_elems, block_elems);
    }
    for (size_t r = 0; r < N_ACTS; r++) {
        fprintf(out, "act %zu source_f32: ", r);
        print_floats(out, a + r * n, n);
        fprintf(out, "act %zu bytes: ", r);
        print_hex(out, act + r * act_bytes, act_bytes);
    }
    for (size_t r = 0; r < N_ROWS; r++)
        for (size_t s = 0; s < N_ACTS; s++) {
            float dot;
            cpu->vec_dot((int)n, &dot, 0, w + r * row_bytes, 0, act + s * act_bytes, 0, 1);
            fprintf(out, "dot %zu %zu: %.9g\n", r, s, dot);
        }
    fclose(out);
    free(x), free(deq), free(a), free(w), free(act);
    return 0;
}

int main(int argc, char **argv)
{
    ggml_cpu_init();
    if (argc == 4 && strcmp(argv[1], "model") == 0)
        return model(argv[2], argv[3]);
    if (argc == 6 && strcmp(argv[1], "blocks") == 0)
        return blocks(argv[2], argv[3], argv[4], argv[5]);
    fprintf(stderr, "usage: iq4gen model SRC_F32.gguf OUT.gguf\n"
                    "       iq4gen blocks IQ4_NL|IQ4_XS MODEL.gguf TENSOR OUT.txt\n");
    return 2;
}

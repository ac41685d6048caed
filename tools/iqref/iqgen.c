/*
 * Writes what the engine needs from ggml for the lattice IQ types (IQ2_XXS, IQ2_XS, IQ2_S,
 * IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) using only ggml's public C API, so that the engine's tables
 * and kernels are checked against ggml and not against themselves. Not part of the build: see
 * tools/iqref/README.md for the command lines.
 *
 *   iqgen grids OUT.c        the lattice grids and the sign table, read back from ggml's
 *                            dequantization of crafted blocks (one index set, scale 1)
 *   iqgen model SRC_F32.gguf OUT.gguf
 *                            SRC's matrices quantized by ggml to the seven types in turn,
 *                            with a synthetic importance matrix; norms stay F32
 *   iqgen blocks TYPE MODEL.gguf TENSOR OUT.txt
 *                            random rows quantized by ggml (bytes, ggml's dequantized values,
 *                            the source floats), Q8_K activation rows, ggml's dot of every
 *                            pair, and the FNV-1a 64 of ggml's dequantized TENSOR of MODEL
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-cpu.h"
#include "ggml.h"
#include "gguf.h"

enum { N_ROWS = 3, N_ACTS = 3, ROW_ELEMS = 512 };

static void die(const char *what)
{
    fprintf(stderr, "iqgen: %s\n", what);
    exit(1);
}

static const struct {
    const char *name;
    enum ggml_type type;
} lattice_types[] = {
    {"IQ2_XXS", GGML_TYPE_IQ2_XXS}, {"IQ2_XS", GGML_TYPE_IQ2_XS}, {"IQ2_S", GGML_TYPE_IQ2_S},
    {"IQ3_XXS", GGML_TYPE_IQ3_XXS}, {"IQ3_S", GGML_TYPE_IQ3_S},   {"IQ1_S", GGML_TYPE_IQ1_S},
    {"IQ1_M", GGML_TYPE_IQ1_M},
};
enum { N_LATTICE = sizeof lattice_types / sizeof lattice_types[0] };

/* ---- grids ------------------------------------------------------------------------------ */

/*
 * One grid: for every index, a zeroed block whose f16 scale at byte 0 is `d` (chosen so that
 * the first group's scale is 1) and whose first group names that index (`set_index`),
 * dequantized by ggml; the group's first `width` values, less the `offset` the type adds to
 * each grid value (IQ1_S's +1/8), are the entry's bytes.
 */
typedef void (*set_index_fn)(uint8_t *block, unsigned index);

static void set_iq2_xxs(uint8_t *b, unsigned i) { b[2] = (uint8_t)i; }
static void set_iq2_xs(uint8_t *b, unsigned i) { b[2] = (uint8_t)i, b[3] = (uint8_t)(i >> 8); }
static void set_iq2_s(uint8_t *b, unsigned i) { b[2] = (uint8_t)i, b[66] = (uint8_t)(i >> 8); }
static void set_iq3_xxs(uint8_t *b, unsigned i) { b[2] = (uint8_t)i; }
static void set_iq3_s(uint8_t *b, unsigned i) { b[2] = (uint8_t)i, b[66] = (uint8_t)(i >> 8); }
static void set_iq1_s(uint8_t *b, unsigned i) { b[2] = (uint8_t)i, b[34] = (uint8_t)(i >> 8); }

static void read_grid(enum ggml_type type, uint16_t d, set_index_fn set_index, unsigned count,
                      int width, float offset, uint8_t *out)
{
    const struct ggml_type_traits *traits = ggml_get_type_traits(type);
    uint8_t block[256];
    float values[256];
    for (unsigned i = 0; i < count; i++) {
        memset(block, 0, sizeof block);
        memcpy(block, &d, sizeof d);
        set_index(block, i);
        traits->to_float(block, values, 256);
        for (int j = 0; j < width; j++) {
            float v = values[j] - offset;
            if (v != floorf(v) || v < -128.0f || v > 255.0f)
                die("a grid value is not a whole byte");
            out[i * (unsigned)width + (unsigned)j] = (uint8_t)(int)v;
        }
    }
}

/*
 * The sign byte of each 7-bit sign index, read from IQ2_XXS blocks (scale 1, grid index 0,
 * whose values are all positive): bit j set where element j comes out negative.
 */
static void read_signs(uint8_t out[128])
{
    const struct ggml_type_traits *traits = ggml_get_type_traits(GGML_TYPE_IQ2_XXS);
    uint8_t block[66];
    float values[256];
    for (unsigned s = 0; s < 128; s++) {
        memset(block, 0, sizeof block);
        uint16_t d = ggml_fp32_to_fp16(8.0f);
        memcpy(block, &d, sizeof d);
        block[6] = (uint8_t)s; /* the low 7 bits of the sub-block's second word */
        traits->to_float(block, values, 256);
        out[s] = 0;
        for (int j = 0; j < 8; j++)
            if (values[j] < 0.0f)
                out[s] |= (uint8_t)(1u << j);
    }
}

static void write_table(FILE *out, const char *c_type, const char *name, const uint8_t *bytes,
                        unsigned count, int width, int per_line)
{
    fprintf(out, "\nconst %s %s[%u] = {\n", c_type, name, count);
    for (unsigned i = 0; i < count; i++) {
        uint64_t v = 0;
        for (int j = width - 1; j >= 0; j--)
            v = v << 8 | bytes[i * (unsigned)width + (unsigned)j];
        if (i % (unsigned)per_line == 0)
            fputs("   ", out);
        if (width == 1)
            fprintf(out, " 0x%02" PRIx64 ",", v);
        else if (width == 4)
            fprintf(out, " 0x%08" PRIx64 ",", v);
        else
            fprintf(out, " 0x%016" PRIx64 ",", v);
        if (i % (unsigned)per_line == (unsigned)per_line - 1 || i + 1 == count)
            fputc('\n', out);
    }
    fputs("};\n", out);
}

static int grids(const char *out_path)
{
    static uint8_t iq2xxs[256 * 8], iq2xs[512 * 8], iq2s[1024 * 8], iq3xxs[256 * 4],
        iq3s[512 * 4], iq1s[2048 * 8], signs[128];
    uint16_t one = ggml_fp32_to_fp16(1.0f), four = ggml_fp32_to_fp16(4.0f),
             eight = ggml_fp32_to_fp16(8.0f);
    /* IQ2_*: a group's scale is d * (2s + 1) / 8, so d = 8 and s = 0 make it 1; IQ3_XXS's is
     * d * (2s + 1) / 4; IQ3_S's and IQ1_S's d * (2s + 1); IQ1_S adds +1/8 to each value. */
    read_grid(GGML_TYPE_IQ2_XXS, eight, set_iq2_xxs, 256, 8, 0.0f, iq2xxs);
    read_grid(GGML_TYPE_IQ2_XS, eight, set_iq2_xs, 512, 8, 0.0f, iq2xs);
    read_grid(GGML_TYPE_IQ2_S, eight, set_iq2_s, 1024, 8, 0.0f, iq2s);
    read_grid(GGML_TYPE_IQ3_XXS, four, set_iq3_xxs, 256, 4, 0.0f, iq3xxs);
    read_grid(GGML_TYPE_IQ3_S, one, set_iq3_s, 512, 4, 0.0f, iq3s);
    read_grid(GGML_TYPE_IQ1_S, one, set_iq1_s, 2048, 8, 0.125f, iq1s);
    read_signs(signs);
    /* the same signs as +1 / -1 bytes (0x01 / 0xff), a vector's multipliers for sign_epi8 */
    static uint8_t sign_masks[128 * 8];
    for (unsigned c = 0; c < 128; c++)
        for (int j = 0; j < 8; j++)
            sign_masks[c * 8 + (unsigned)j] = signs[c] >> j & 1 ? 0xff : 0x01;

    FILE *out = fopen(out_path, "w");
    if (!out)
        die("cannot write OUT.c");
    fprintf(out,
            "/*\n"
            " * The lattice IQ types' codebooks (quant_iq_grids.h), generated: do not edit. Made by\n"
            " * tools/iqref/iqgen.c (`iqgen grids src/engine/quant_iq_grids.c`, ggml %s), which\n"
            " * reads every entry back from ggml's dequantization of a block holding that one index\n"
            " * at scale 1, and every sign byte from an IQ2_XXS block holding that sign index\n"
            " * (the sign multipliers are those signs again, as +1 / -1 bytes).\n"
            " */\n"
            "#include \"quant_iq_grids.h\"\n",
            ggml_version());
    write_table(out, "uint8_t", "quant_iq_sign_bytes", signs, 128, 1, 16);
    write_table(out, "uint64_t", "quant_iq_sign_multipliers", sign_masks, 128, 8, 4);
    write_table(out, "uint64_t", "quant_iq2xxs_grid", iq2xxs, 256, 8, 4);
    write_table(out, "uint64_t", "quant_iq2xs_grid", iq2xs, 512, 8, 4);
    write_table(out, "uint64_t", "quant_iq2s_grid", iq2s, 1024, 8, 4);
    write_table(out, "uint32_t", "quant_iq3xxs_grid", iq3xxs, 256, 4, 8);
    write_table(out, "uint32_t", "quant_iq3s_grid", iq3s, 512, 4, 8);
    write_table(out, "uint64_t", "quant_iq1s_grid", iq1s, 2048, 8, 4);
    fclose(out);
    return 0;
}

/* ---- fixtures --------------------------------------------------------------------------- */

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;

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

/*
 * Quantizes rows x rows of n elements with ggml; the importance matrix ggml asks of these types
 * is made up: each column's mean square over the rows (plus a floor, so that no column has
 * weight zero).
 */
static void quantize_rows(enum ggml_type type, const float *x, void *out, int64_t rows, int64_t n)
{
    float *imatrix = calloc((size_t)n, sizeof *imatrix);
    if (!imatrix)
        die("out of memory");
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < n; j++)
            imatrix[j] += x[r * n + j] * x[r * n + j] / (float)rows;
    for (int64_t j = 0; j < n; j++)
        imatrix[j] += 1e-6f;
    ggml_quantize_init(type);
    ggml_quantize_chunk(type, x, out, 0, rows, n, imatrix);
    free(imatrix);
}

/* The type of each matrix of the model: the seven types in turn over the tensors by name. */
static enum ggml_type model_type(const char *name)
{
    static const char *const order[] = {"attn_q.", "attn_k.", "attn_v.", "attn_output.",
                                        "ffn_gate.", "ffn_up.", "ffn_down."};
    if (strcmp(name, "token_embd.weight") == 0)
        return GGML_TYPE_IQ3_XXS;
    if (strcmp(name, "output.weight") == 0)
        return GGML_TYPE_IQ3_S;
    int layer = strncmp(name, "blk.1.", 6) == 0;
    for (int k = 0; k < 7; k++)
        if (strstr(name, order[k]))
            return lattice_types[(k + 3 * layer) % N_LATTICE].type;
    die("a matrix the model has no type for");
    return GGML_TYPE_COUNT;
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
    gguf_set_val_u32(out, "general.file_type", 19); /* llama.cpp's MOSTLY_IQ2_XXS */
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
        enum ggml_type type = model_type(name);
        int64_t rows = ggml_nrows(t);
        buffers[i] = malloc(ggml_row_size(type, t->ne[0]) * (size_t)rows);
        quantize_rows(type, t->data, buffers[i], rows, t->ne[0]);
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
 * sub-block) and row 2 holds one outlier of magnitude 32, which its super-block's scale is set
 * by.
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
    enum ggml_type type = GGML_TYPE_COUNT;
    for (int i = 0; i < N_LATTICE; i++)
        if (strcmp(type_name, lattice_types[i].name) == 0)
            type = lattice_types[i].type;
    if (type == GGML_TYPE_COUNT)
        die("TYPE is one of IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S IQ1_S IQ1_M");
    const struct ggml_type_traits *traits = ggml_get_type_traits(type);
    const struct ggml_type_traits_cpu *cpu = ggml_get_type_traits_cpu(type);
    enum ggml_type act_type = cpu->vec_dot_type;
    const struct ggml_type_traits_cpu *act_cpu = ggml_get_type_traits_cpu(act_type);
    size_t n = ROW_ELEMS;
    size_t block_elems = (size_t)traits->blck_size, block_bytes = traits->type_size;
    size_t row_bytes = ggml_row_size(type, (int64_t)n), act_bytes = ggml_row_size(act_type, (int64_t)n);

    float *x = malloc(N_ROWS * n * sizeof *x), *deq = malloc(N_ROWS * n * sizeof *deq);
    float *a = malloc(N_ACTS * n * sizeof *a);
    uint8_t *w = malloc(N_ROWS * row_bytes), *act = malloc(N_ACTS * act_bytes);
    if (!x || !deq || !a || !w || !act)
        die("out of memory");
    fill_rows(x, n, N_ROWS);
    for (size_t r = 0; r < N_ROWS; r++) /* each row its own importance matrix */
        quantize_rows(type, x + r * n, w + r * row_bytes, 1, (int64_t)n);
    traits->to_float(w, deq, (int64_t)(N_ROWS * n));
    fill_rows(a, n, N_ACTS);
    for (size_t r = 0; r < N_ACTS; r++)
        act_cpu->from_float(a + r * n, act + r * act_bytes, (int64_t)n);

    FILE *out = fopen(out_path, "w");
    if (!out)
        die("cannot write OUT.txt");
    size_t n_blocks = N_ROWS * n / block_elems;
    const char *file_name = strrchr(out_path, '/');
    fprintf(out, "file: %s\n", file_name ? file_name + 1 : out_path);
    fprintf(out, "made_by: tools/iqref/iqgen.c blocks %s (ggml %s)\n", type_name, ggml_version());
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
    if (argc == 3 && strcmp(argv[1], "grids") == 0)
        return grids(argv[2]);
    if (argc == 4 && strcmp(argv[1], "model") == 0)
        return model(argv[2], argv[3]);
    if (argc == 6 && strcmp(argv[1], "blocks") == 0)
        return blocks(argv[2], argv[3], argv[4], argv[5]);
    fprintf(stderr, "usage: iqgen grids OUT.c\n"
                    "       iqgen model SRC_F32.gguf OUT.gguf\n"
                    "       iqgen blocks TYPE MODEL.gguf TENSOR OUT.txt\n");
    return 2;
}

/*
 * corral_model_file: the public, read-only view of a GGUF file for tools outside the engine
 * (gguf-info now; /api/show later). It formats metadata and tensor tables; it never exposes
 * tensor data.
 */
#include <stdlib.h>
#include <string.h>

#include "corral/engine.h"
#include "gguf.h"
#include "mmproj.h"
#include "model_memory.h"
#include "tensor_type.h"

struct corral_model_file {
    gguf_file *gguf;
};

corral_model_file *corral_model_file_open(const char *path, corral_error *err)
{
    gguf_file *gguf = gguf_open(path, err);
    if (!gguf)
        return NULL;
    corral_model_file *file = malloc(sizeof *file);
    if (!file) {
        gguf_close(gguf);
        corral_error_set(err, "out of memory");
        return NULL;
    }
    file->gguf = gguf;
    return file;
}

void corral_model_file_close(corral_model_file *file)
{
    if (!file)
        return;
    gguf_close(file->gguf);
    free(file);
}

bool corral_model_file_has_vision(const corral_model_file *file)
{
    gguf_str arch;
    char name[32];
    corral_error err;
    if (!gguf_get_str(file->gguf, "general.architecture", &arch, &err) || arch.size == 0 ||
        arch.size >= sizeof name)
        return false;
    memcpy(name, arch.data, arch.size);
    name[arch.size] = '\0';
    return mmproj_ollama_kind(file->gguf, name) != NULL;
}

/* A string as a quoted, escaped literal, cut at max_bytes. */
static void print_quoted(FILE *out, gguf_str s, size_t max_bytes)
{
    fputc('"', out);
    size_t n = s.size < max_bytes ? s.size : max_bytes;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s.data[i];
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", out);
        else if (c == '\t')
            fputs("\\t", out);
        else if (c < 0x20 || c == 0x7f)
            fprintf(out, "\\x%02x", c);
        else
            fputc(c, out);
    }
    fputs(s.size > n ? "\"..." : "\"", out);
}

static void print_element(FILE *out, const gguf_kv *kv, uint64_t i)
{
    switch (kv->elem_type) {
    case GGUF_TYPE_STRING:
        print_quoted(out, gguf_kv_str(kv, i), kv->type == GGUF_TYPE_ARRAY ? 60 : 400);
        break;
    case GGUF_TYPE_FLOAT32:
    case GGUF_TYPE_FLOAT64:
        fprintf(out, "%.9g", gguf_kv_f64(kv, i));
        break;
    case GGUF_TYPE_BOOL:
        fputs(gguf_kv_bool(kv, i) ? "true" : "false", out);
        break;
    case GGUF_TYPE_UINT64:
        fprintf(out, "%llu", (unsigned long long)gguf_kv_u64(kv, i));
        break;
    default:
        fprintf(out, "%lld", (long long)gguf_kv_i64(kv, i));
        break;
    }
}

static void print_kv(FILE *out, const gguf_kv *kv, size_t max_array_items)
{
    if (kv->type != GGUF_TYPE_ARRAY) {
        fprintf(out, "  %s: %s = ", kv->key, gguf_type_name(kv->type));
        print_element(out, kv, 0);
        fputc('\n', out);
        return;
    }
    fprintf(out, "  %s: array[%s; %llu] = [", kv->key, gguf_type_name(kv->elem_type),
            (unsigned long long)kv->n);
    for (uint64_t i = 0; i < kv->n && i < max_array_items; i++) {
        fputs(i ? ", " : "", out);
        print_element(out, kv, i);
    }
    fputs(kv->n > max_array_items ? ", ...]\n" : "]\n", out);
}

void corral_model_file_print(const corral_model_file *file, FILE *out, bool with_tensors,
                             size_t max_array_items)
{
    const gguf_file *g = file->gguf;
    fprintf(out, "file: %s\n", gguf_path(g));
    fprintf(out, "gguf version: %u\nfile size: %zu bytes\nalignment: %zu\ndata offset: %zu\n",
            gguf_version(g), gguf_file_size(g), gguf_alignment(g), gguf_data_offset(g));
    fprintf(out, "metadata: %zu keys\n", gguf_n_kv(g));
    for (size_t i = 0; i < gguf_n_kv(g); i++)
        print_kv(out, gguf_kv_at(g, i), max_array_items);

    size_t by_type[TENSOR_TYPE_ID_LIMIT] = {0};
    for (size_t i = 0; i < gguf_n_tensors(g); i++)
        by_type[gguf_tensor_at(g, i)->type]++;
    uint64_t n_params = corral_model_file_n_params(file);
    fprintf(out, "tensors: %zu (%llu parameters;", gguf_n_tensors(g),
            (unsigned long long)n_params);
    for (uint32_t type = 0; type < TENSOR_TYPE_ID_LIMIT; type++)
        if (by_type[type])
            fprintf(out, " %s: %zu", tensor_type_name(type), by_type[type]);
    fputs(")\n", out);
    if (!with_tensors)
        return;
    for (size_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        fprintf(out, "  %5zu %-40s %-6s [", i, t->name, tensor_type_name(t->type));
        for (uint32_t d = 0; d < (t->n_dims ? t->n_dims : 1); d++)
            fprintf(out, d ? ", %lld" : "%lld", (long long)t->ne[d]);
        fprintf(out, "] %zu bytes at %llu\n", t->size_bytes, (unsigned long long)t->offset);
    }
}

/* ---- metadata and tensor access ---- */

size_t corral_model_file_n_meta(const corral_model_file *file)
{
    return gguf_n_kv(file->gguf);
}

const char *corral_model_file_meta_key(const corral_model_file *file, size_t i)
{
    return gguf_kv_at(file->gguf, i)->key;
}

long corral_model_file_find_meta(const corral_model_file *file, const char *key)
{
    const gguf_kv *kv = gguf_find_kv(file->gguf, key);
    return kv ? (long)(kv - gguf_kv_at(file->gguf, 0)) : -1;
}

static corral_meta_type meta_type_of(enum gguf_type type)
{
    switch (type) {
    case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
        return CORRAL_META_INT;
    case GGUF_TYPE_FLOAT32: case GGUF_TYPE_FLOAT64:
        return CORRAL_META_FLOAT;
    case GGUF_TYPE_BOOL:
        return CORRAL_META_BOOL;
    case GGUF_TYPE_STRING:
        return CORRAL_META_STRING;
    case GGUF_TYPE_ARRAY:
        return CORRAL_META_ARRAY;
    default:
        return CORRAL_META_UINT;
    }
}

corral_meta_type corral_model_file_meta_type(const corral_model_file *file, size_t i)
{
    return meta_type_of(gguf_kv_at(file->gguf, i)->type);
}

corral_meta_type corral_model_file_meta_elem_type(const corral_model_file *file, size_t i)
{
    return meta_type_of(gguf_kv_at(file->gguf, i)->elem_type);
}

uint64_t corral_model_file_meta_count(const corral_model_file *file, size_t i)
{
    return gguf_kv_at(file->gguf, i)->n;
}

int64_t corral_model_file_meta_int(const corral_model_file *file, size_t i, uint64_t j)
{
    return gguf_kv_i64(gguf_kv_at(file->gguf, i), j);
}

uint64_t corral_model_file_meta_uint(const corral_model_file *file, size_t i, uint64_t j)
{
    return gguf_kv_u64(gguf_kv_at(file->gguf, i), j);
}

double corral_model_file_meta_float(const corral_model_file *file, size_t i, uint64_t j)
{
    return gguf_kv_f64(gguf_kv_at(file->gguf, i), j);
}

bool corral_model_file_meta_bool(const corral_model_file *file, size_t i, uint64_t j)
{
    return gguf_kv_bool(gguf_kv_at(file->gguf, i), j);
}

const char *corral_model_file_meta_string(const corral_model_file *file, size_t i, uint64_t j,
                                          size_t *len)
{
    gguf_str s = gguf_kv_str(gguf_kv_at(file->gguf, i), j);
    *len = s.size;
    return s.data;
}

size_t corral_model_file_n_tensors(const corral_model_file *file)
{
    return gguf_n_tensors(file->gguf);
}

const char *corral_model_file_tensor_name(const corral_model_file *file, size_t i)
{
    return gguf_tensor_at(file->gguf, i)->name;
}

const char *corral_model_file_tensor_type(const corral_model_file *file, size_t i)
{
    static const char *const upper[TENSOR_TYPE_ID_LIMIT] = {
        [TENSOR_TYPE_F32] = "F32",     [TENSOR_TYPE_F16] = "F16",     [TENSOR_TYPE_Q4_0] = "Q4_0",
        [TENSOR_TYPE_Q4_1] = "Q4_1",   [TENSOR_TYPE_Q5_0] = "Q5_0",   [TENSOR_TYPE_Q5_1] = "Q5_1",
        [TENSOR_TYPE_Q8_0] = "Q8_0",   [TENSOR_TYPE_Q8_1] = "Q8_1",   [TENSOR_TYPE_Q2_K] = "Q2_K",
        [TENSOR_TYPE_Q3_K] = "Q3_K",   [TENSOR_TYPE_Q4_K] = "Q4_K",   [TENSOR_TYPE_Q5_K] = "Q5_K",
        [TENSOR_TYPE_Q6_K] = "Q6_K",   [TENSOR_TYPE_Q8_K] = "Q8_K",   [TENSOR_TYPE_BF16] = "BF16",
        [TENSOR_TYPE_IQ2_XXS] = "IQ2_XXS", [TENSOR_TYPE_IQ2_XS] = "IQ2_XS",
        [TENSOR_TYPE_IQ3_XXS] = "IQ3_XXS", [TENSOR_TYPE_IQ1_S] = "IQ1_S",
        [TENSOR_TYPE_IQ4_NL] = "IQ4_NL", [TENSOR_TYPE_IQ3_S] = "IQ3_S", [TENSOR_TYPE_IQ2_S] = "IQ2_S",
        [TENSOR_TYPE_IQ4_XS] = "IQ4_XS", [TENSOR_TYPE_I8] = "I8",     [TENSOR_TYPE_I16] = "I16",
        [TENSOR_TYPE_I32] = "I32",     [TENSOR_TYPE_I64] = "I64",     [TENSOR_TYPE_F64] = "F64",
        [TENSOR_TYPE_IQ1_M] = "IQ1_M", [TENSOR_TYPE_TQ1_0] = "TQ1_0", [TENSOR_TYPE_TQ2_0] = "TQ2_0",
        [TENSOR_TYPE_MXFP4] = "MXFP4",
    };
    uint32_t type = gguf_tensor_at(file->gguf, i)->type;
    return upper[type] ? upper[type] : "unknown";
}

uint32_t corral_model_file_tensor_shape(const corral_model_file *file, size_t i, int64_t ne[4])
{
    const gguf_tensor *t = gguf_tensor_at(file->gguf, i);
    for (int d = 0; d < 4; d++)
        ne[d] = t->ne[d];
    return t->n_dims;
}

uint64_t corral_model_file_tensor_bytes(const corral_model_file *file, size_t i)
{
    return gguf_tensor_at(file->gguf, i)->size_bytes;
}

uint64_t corral_model_file_n_params(const corral_model_file *file)
{
    uint64_t n = 0;
    for (size_t i = 0; i < gguf_n_tensors(file->gguf); i++)
        n += gguf_tensor_n_elems(gguf_tensor_at(file->gguf, i));
    return n;
}

void corral_model_file_memory(const corral_model_file *file, corral_model_memory *out)
{
    model_memory_plan(file->gguf, out);
}

/*
 * corral_model_file: the public, read-only view of a GGUF file for tools outside the engine
 * (gguf-info now; /api/show later). It formats metadata and tensor tables; it never exposes
 * tensor data.
 */
#include <stdlib.h>

#include "corral/engine.h"
#include "gguf.h"
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
    uint64_t n_params = 0;
    for (size_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        by_type[t->type]++;
        n_params += gguf_tensor_n_elems(t);
    }
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

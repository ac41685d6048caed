/*
 * GGUF v3 writer: metadata and tensor declarations are collected in memory, then the file is
 * streamed to a temporary file beside the target and renamed into place only when complete
 * (after fsync), so a crash or an error never leaves a partial GGUF under the final name.
 * Tensor data is laid out exactly as ggml's reader requires: tensors
 * in info order, each at the running sum of the earlier ones' sizes padded to the alignment.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "tensor_type.h"
#include "util/checked.h"

typedef struct byte_buffer {
    uint8_t *data;
    size_t size, cap;
} byte_buffer;

typedef struct writer_tensor {
    char *name;
    uint32_t type;
    uint32_t n_dims;
    int64_t ne[4];
    size_t size_bytes;
} writer_tensor;

struct gguf_writer {
    byte_buffer kv_bytes; /* serialized metadata pairs */
    char **keys;
    size_t n_kv;
    writer_tensor *tensors;
    size_t n_tensors;
    uint32_t alignment;

    /* streaming state, after gguf_writer_begin */
    FILE *out;
    char *path, *temp_path;
    size_t current;         /* tensor being written */
    size_t current_written; /* its bytes so far */
    bool finished;
};

static bool buffer_append(byte_buffer *b, const void *data, size_t size)
{
    size_t need;
    if (!checked_add_size(b->size, size, &need))
        return false;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < need)
            if (!checked_mul_size(cap, 2, &cap))
                return false;
        uint8_t *grown = realloc(b->data, cap);
        if (!grown)
            return false;
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->size, data, size);
    b->size = need;
    return true;
}

static bool buffer_append_str(byte_buffer *b, const char *s, size_t size)
{
    uint64_t len = size;
    return buffer_append(b, &len, 8) && buffer_append(b, s, size);
}

gguf_writer *gguf_writer_create(void)
{
    gguf_writer *w = calloc(1, sizeof *w);
    if (w)
        w->alignment = GGUF_DEFAULT_ALIGNMENT;
    return w;
}

void gguf_writer_free(gguf_writer *w)
{
    if (!w)
        return;
    if (w->out)
        fclose(w->out);
    if (w->temp_path && !w->finished)
        unlink(w->temp_path);
    for (size_t i = 0; i < w->n_kv; i++)
        free(w->keys[i]);
    for (size_t i = 0; i < w->n_tensors; i++)
        free(w->tensors[i].name);
    free(w->keys);
    free(w->tensors);
    free(w->kv_bytes.data);
    free(w->path);
    free(w->temp_path);
    free(w);
}

static bool out_of_memory(corral_error *err)
{
    corral_error_set(err, "out of memory");
    return false;
}

/* Record a new key (rejecting duplicates) and write its name and type tag. */
static bool begin_kv(gguf_writer *w, const char *key, enum gguf_type type, corral_error *err)
{
    if (w->out) {
        corral_error_set(err, "metadata '%s' added after the header was written", key);
        return false;
    }
    size_t len = strlen(key);
    if (len == 0 || len > GGUF_MAX_KEY_BYTES) {
        corral_error_set(err, "metadata key '%.40s' must be 1 to %u bytes long", key,
                         GGUF_MAX_KEY_BYTES);
        return false;
    }
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], key) == 0) {
            corral_error_set(err, "duplicate metadata key '%s'", key);
            return false;
        }
    char **keys = realloc(w->keys, (w->n_kv + 1) * sizeof *keys);
    if (!keys)
        return out_of_memory(err);
    w->keys = keys;
    if (!(keys[w->n_kv] = strdup(key)))
        return out_of_memory(err);
    w->n_kv++;
    uint32_t tag = type;
    if (!buffer_append_str(&w->kv_bytes, key, len) || !buffer_append(&w->kv_bytes, &tag, 4))
        return out_of_memory(err);
    return true;
}

static size_t scalar_size(enum gguf_type type)
{
    switch (type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

bool gguf_writer_add_scalar(gguf_writer *w, const char *key, enum gguf_type type,
                            const void *value, corral_error *err)
{
    size_t size = scalar_size(type);
    if (size == 0) {
        corral_error_set(err, "metadata '%s': %s is not a numeric scalar type", key,
                         gguf_type_name(type));
        return false;
    }
    if (strcmp(key, "general.alignment") == 0) {
        uint32_t alignment;
        if (type != GGUF_TYPE_UINT32) {
            corral_error_set(err, "general.alignment must be a uint32");
            return false;
        }
        memcpy(&alignment, value, 4);
        if (alignment == 0 || (alignment & (alignment - 1)) || alignment > GGUF_MAX_ALIGNMENT) {
            corral_error_set(err, "general.alignment %u is not a power of two up to %u",
                             alignment, GGUF_MAX_ALIGNMENT);
            return false;
        }
        w->alignment = alignment;
    }
    if (!begin_kv(w, key, type, err))
        return false;
    return buffer_append(&w->kv_bytes, value, size) || out_of_memory(err);
}

bool gguf_writer_set_alignment(gguf_writer *w, uint32_t alignment, corral_error *err)
{
    return gguf_writer_add_scalar(w, "general.alignment", GGUF_TYPE_UINT32, &alignment, err);
}

bool gguf_writer_add_u32(gguf_writer *w, const char *key, uint32_t v, corral_error *err)
{
    return gguf_writer_add_scalar(w, key, GGUF_TYPE_UINT32, &v, err);
}

bool gguf_writer_add_f32(gguf_writer *w, const char *key, float v, corral_error *err)
{
    return gguf_writer_add_scalar(w, key, GGUF_TYPE_FLOAT32, &v, err);
}

bool gguf_writer_add_bool(gguf_writer *w, const char *key, bool v, corral_error *err)
{
    uint8_t byte = v;
    return gguf_writer_add_scalar(w, key, GGUF_TYPE_BOOL, &byte, err);
}

bool gguf_writer_add_str(gguf_writer *w, const char *key, const char *value, size_t size,
                         corral_error *err)
{
    if (!begin_kv(w, key, GGUF_TYPE_STRING, err))
        return false;
    return buffer_append_str(&w->kv_bytes, value, size) || out_of_memory(err);
}

static bool begin_array(gguf_writer *w, const char *key, enum gguf_type elem_type, uint64_t n,
                        corral_error *err)
{
    if (n > GGUF_MAX_ARRAY_LEN) {
        corral_error_set(err, "metadata '%s': %llu elements exceed the limit of %u", key,
                         (unsigned long long)n, GGUF_MAX_ARRAY_LEN);
        return false;
    }
    uint32_t tag = elem_type;
    if (!begin_kv(w, key, GGUF_TYPE_ARRAY, err))
        return false;
    return (buffer_append(&w->kv_bytes, &tag, 4) && buffer_append(&w->kv_bytes, &n, 8)) ||
           out_of_memory(err);
}

bool gguf_writer_add_array(gguf_writer *w, const char *key, enum gguf_type elem_type,
                           const void *values, uint64_t n, corral_error *err)
{
    size_t size = scalar_size(elem_type);
    if (size == 0) {
        corral_error_set(err, "metadata '%s': arrays of %s need gguf_writer_add_str_array", key,
                         gguf_type_name(elem_type));
        return false;
    }
    if (!begin_array(w, key, elem_type, n, err))
        return false;
    return buffer_append(&w->kv_bytes, values, size * (size_t)n) || out_of_memory(err);
}

bool gguf_writer_add_str_array(gguf_writer *w, const char *key, const gguf_str *values,
                               uint64_t n, corral_error *err)
{
    if (!begin_array(w, key, GGUF_TYPE_STRING, n, err))
        return false;
    for (uint64_t i = 0; i < n; i++)
        if (!buffer_append_str(&w->kv_bytes, values[i].data, values[i].size))
            return out_of_memory(err);
    return true;
}

bool gguf_writer_copy_kv(gguf_writer *w, const gguf_kv *kv, corral_error *err)
{
    if (kv->type != GGUF_TYPE_ARRAY) {
        if (kv->type == GGUF_TYPE_STRING) {
            gguf_str s = gguf_kv_str(kv, 0);
            return gguf_writer_add_str(w, kv->key, s.data, s.size, err);
        }
        return gguf_writer_add_scalar(w, kv->key, kv->type, kv->data, err);
    }
    if (!begin_array(w, kv->key, kv->elem_type, kv->n, err))
        return false;
    for (uint64_t i = 0; i < kv->n; i++) {
        bool ok;
        if (kv->elem_type == GGUF_TYPE_STRING) {
            gguf_str s = gguf_kv_str(kv, i);
            ok = buffer_append_str(&w->kv_bytes, s.data, s.size);
        } else {
            size_t size = scalar_size(kv->elem_type);
            ok = buffer_append(&w->kv_bytes, kv->data + (size_t)i * size, size);
        }
        if (!ok)
            return out_of_memory(err);
    }
    return true;
}

bool gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                            const int64_t *ne, corral_error *err)
{
    if (w->out) {
        corral_error_set(err, "tensor '%s' added after the header was written", name);
        return false;
    }
    if (strlen(name) > GGUF_MAX_NAME_BYTES) {
        corral_error_set(err, "tensor name '%.40s...' is longer than %u bytes", name,
                         GGUF_MAX_NAME_BYTES);
        return false;
    }
    if (n_dims < 1 || n_dims > 4) {
        corral_error_set(err, "tensor '%s': %u dimensions (1 to 4 allowed)", name, n_dims);
        return false;
    }
    for (size_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0) {
            corral_error_set(err, "duplicate tensor name '%s'", name);
            return false;
        }
    writer_tensor t = {.type = type, .n_dims = n_dims, .ne = {1, 1, 1, 1}};
    bool ok = true;
    for (uint32_t d = 0; d < n_dims; d++) {
        t.ne[d] = ne[d];
        ok = ok && ne[d] >= 1;
    }
    ok = ok && tensor_type_row_bytes(type, (uint64_t)t.ne[0], &t.size_bytes);
    for (int d = 1; d < 4 && ok; d++)
        ok = checked_mul_size(t.size_bytes, (size_t)t.ne[d], &t.size_bytes);
    if (!ok) {
        corral_error_set(err, "tensor '%s': invalid shape or type %s for its dimensions", name,
                         tensor_type_name(type));
        return false;
    }
    writer_tensor *grown = realloc(w->tensors, (w->n_tensors + 1) * sizeof *grown);
    if (!grown)
        return out_of_memory(err);
    w->tensors = grown;
    if (!(t.name = strdup(name)))
        return out_of_memory(err);
    w->tensors[w->n_tensors++] = t;
    return true;
}

static bool write_bytes(gguf_writer *w, const void *data, size_t size, corral_error *err)
{
    if (size && fwrite(data, 1, size, w->out) != size) {
        corral_error_set(err, "%s: write failed: %s", w->temp_path, strerror(errno));
        return false;
    }
    return true;
}

static bool write_zeros(gguf_writer *w, size_t n, corral_error *err)
{
    static const uint8_t zeros[64];
    while (n > 0) {
        size_t chunk = n < sizeof zeros ? n : sizeof zeros;
        if (!write_bytes(w, zeros, chunk, err))
            return false;
        n -= chunk;
    }
    return true;
}

static size_t pad_to(size_t x, size_t align)
{
    return (align - x % align) % align;
}

static bool write_header(gguf_writer *w, corral_error *err)
{
    uint32_t version = 3;
    uint64_t n_tensors = w->n_tensors, n_kv = w->n_kv;
    if (!write_bytes(w, "GGUF", 4, err) || !write_bytes(w, &version, 4, err) ||
        !write_bytes(w, &n_tensors, 8, err) || !write_bytes(w, &n_kv, 8, err) ||
        !write_bytes(w, w->kv_bytes.data, w->kv_bytes.size, err))
        return false;
    size_t pos = 24 + w->kv_bytes.size;
    uint64_t offset = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        const writer_tensor *t = &w->tensors[i];
        uint64_t name_len = strlen(t->name);
        if (!write_bytes(w, &name_len, 8, err) || !write_bytes(w, t->name, name_len, err) ||
            !write_bytes(w, &t->n_dims, 4, err) ||
            !write_bytes(w, t->ne, 8 * (size_t)t->n_dims, err) ||
            !write_bytes(w, &t->type, 4, err) || !write_bytes(w, &offset, 8, err))
            return false;
        pos += 8 + name_len + 4 + 8 * t->n_dims + 4 + 8;
        offset += t->size_bytes + pad_to(t->size_bytes, w->alignment);
    }
    return write_zeros(w, pad_to(pos, w->alignment), err);
}

bool gguf_writer_begin(gguf_writer *w, const char *path, corral_error *err)
{
    if (w->out || w->path) {
        corral_error_set(err, "%s: writer already started", path);
        return false;
    }
    size_t len = strlen(path);
    if (!(w->path = strdup(path)) || !(w->temp_path = malloc(len + 16)))
        return out_of_memory(err);
    snprintf(w->temp_path, len + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(w->temp_path);
    if (fd < 0) {
        corral_error_set(err, "%s: cannot create temporary file: %s", path, strerror(errno));
        free(w->temp_path);
        w->temp_path = NULL;
        return false;
    }
    if (!(w->out = fdopen(fd, "wb"))) {
        close(fd);
        corral_error_set(err, "%s: %s", w->temp_path, strerror(errno));
        return false;
    }
    return write_header(w, err);
}

bool gguf_writer_write_tensor(gguf_writer *w, const void *data, size_t size, corral_error *err)
{
    if (!w->out || w->current >= w->n_tensors) {
        corral_error_set(err, "tensor data written %s", w->out ? "past the last tensor"
                                                               : "before gguf_writer_begin");
        return false;
    }
    const writer_tensor *t = &w->tensors[w->current];
    if (size > t->size_bytes - w->current_written) {
        corral_error_set(err, "tensor '%s': %zu more bytes than its %zu", t->name,
                         size - (t->size_bytes - w->current_written), t->size_bytes);
        return false;
    }
    if (!write_bytes(w, data, size, err))
        return false;
    w->current_written += size;
    if (w->current_written == t->size_bytes) {
        if (!write_zeros(w, pad_to(t->size_bytes, w->alignment), err))
            return false;
        w->current++;
        w->current_written = 0;
    }
    return true;
}

/* Make the rename durable: fsync the directory that holds the file. */
static void sync_parent_dir(const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(copy);
}

bool gguf_writer_finish(gguf_writer *w, corral_error *err)
{
    if (!w->out || w->current != w->n_tensors) {
        corral_error_set(err, "%s: %zu of %zu tensors written", w->path ? w->path : "gguf",
                         w->current, w->n_tensors);
        return false;
    }
    FILE *out = w->out;
    w->out = NULL;
    bool ok = fflush(out) == 0 && fsync(fileno(out)) == 0;
    ok = (fclose(out) == 0) && ok;
    if (!ok || rename(w->temp_path, w->path) != 0) {
        corral_error_set(err, "%s: cannot complete the file: %s", w->path, strerror(errno));
        return false;
    }
    w->finished = true;
    sync_parent_dir(w->path);
    return true;
}

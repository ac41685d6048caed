/*
 * Safetensors reader (see safetensors.h). The header is parsed with jansson, duplicates
 * rejected; everything else about it is checked here, since a checkpoint comes from anyone.
 */
#include "convert/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct safetensors_file {
    char *name;
    void *map;       /* NULL for an image in memory */
    size_t map_size;
    safetensors_tensor *tensors;
    size_t n_tensors;
};

static const struct {
    const char *name;
    safetensors_dtype dtype;
    size_t size;
} dtypes[] = {
    {"F32", SAFETENSORS_F32, 4},
    {"F16", SAFETENSORS_F16, 2},
    {"BF16", SAFETENSORS_BF16, 2},
    {"U8", SAFETENSORS_U8, 1},
    {"I64", SAFETENSORS_I64, 8},
};

size_t safetensors_dtype_size(safetensors_dtype dtype)
{
    return dtypes[dtype].size;
}

void safetensors_close(safetensors_file *file)
{
    if (!file)
        return;
    for (size_t i = 0; i < file->n_tensors; i++)
        free(file->tensors[i].name);
    free(file->tensors);
    if (file->map)
        munmap(file->map, file->map_size);
    free(file->name);
    free(file);
}

size_t safetensors_count(const safetensors_file *file)
{
    return file->n_tensors;
}

const safetensors_tensor *safetensors_at(const safetensors_file *file, size_t i)
{
    return i < file->n_tensors ? &file->tensors[i] : NULL;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const safetensors_tensor *)a)->name, ((const safetensors_tensor *)b)->name);
}

const safetensors_tensor *safetensors_find(const safetensors_file *file, const char *name)
{
    safetensors_tensor key = {.name = (char *)name};
    return bsearch(&key, file->tensors, file->n_tensors, sizeof key, by_name);
}

/* A JSON integer in [0, max]. */
static bool get_u64(const json_t *v, uint64_t max, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        (uint64_t)json_integer_value(v) > max)
        return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

static bool parse_tensor(const char *file_name, const char *name, const json_t *entry,
                         uint64_t data_size, safetensors_tensor *t, corral_error *err)
{
    if (strlen(name) == 0 || strlen(name) > SAFETENSORS_MAX_NAME_BYTES) {
        corral_error_set(err, "%s: a tensor name is empty or longer than %u bytes", file_name,
                         SAFETENSORS_MAX_NAME_BYTES);
        return false;
    }
    if (!json_is_object(entry)) {
        corral_error_set(err, "%s: tensor '%.200s' is not an object", file_name, name);
        return false;
    }
    const char *dtype = json_string_value(json_object_get(entry, "dtype"));
    const json_t *shape = json_object_get(entry, "shape");
    const json_t *offsets = json_object_get(entry, "data_offsets");
    if (!dtype || !json_is_array(shape) || !json_is_array(offsets) || json_array_size(offsets) != 2) {
        corral_error_set(err, "%s: tensor '%.200s' needs a dtype string, a shape array and two "
                         "data_offsets", file_name, name);
        return false;
    }
    size_t d = 0;
    while (d < sizeof dtypes / sizeof dtypes[0] && strcmp(dtypes[d].name, dtype) != 0)
        d++;
    if (d == sizeof dtypes / sizeof dtypes[0]) {
        corral_error_set(err, "%s: tensor '%.200s' has dtype '%.20s': Corral converts F32, F16, "
                         "BF16 and U8 (MXFP4 blocks and scales) weights (and skips I64 "
                         "position ids)", file_name, name, dtype);
        return false;
    }
    t->dtype = dtypes[d].dtype;
    if (json_array_size(shape) > SAFETENSORS_MAX_DIMS) {
        corral_error_set(err, "%s: tensor '%.200s' has more than %u dimensions", file_name, name,
                         SAFETENSORS_MAX_DIMS);
        return false;
    }
    t->n_dims = (uint32_t)json_array_size(shape);
    uint64_t n = 1;
    for (uint32_t i = 0; i < t->n_dims; i++) {
        if (!get_u64(json_array_get(shape, i), UINT64_MAX, &t->shape[i])) {
            corral_error_set(err, "%s: tensor '%.200s' has a bad shape", file_name, name);
            return false;
        }
        if (t->shape[i] && n > UINT64_MAX / t->shape[i]) {
            corral_error_set(err, "%s: tensor '%.200s' has too many elements", file_name, name);
            return false;
        }
        n *= t->shape[i];
    }
    uint64_t begin, end;
    if (!get_u64(json_array_get(offsets, 0), data_size, &begin) ||
        !get_u64(json_array_get(offsets, 1), data_size, &end) || end < begin) {
        corral_error_set(err, "%s: tensor '%.200s' has data_offsets outside the file's %llu "
                         "data bytes", file_name, name, (unsigned long long)data_size);
        return false;
    }
    if (n > UINT64_MAX / dtypes[d].size || n * dtypes[d].size != end - begin) {
        corral_error_set(err, "%s: tensor '%.200s': its shape and dtype make %s bytes but its "
                         "data_offsets span %llu", file_name, name,
                         n > UINT64_MAX / dtypes[d].size ? "too many" : "a different number of",
                         (unsigned long long)(end - begin));
        return false;
    }
    t->n_elems = n;
    t->size_bytes = (size_t)(end - begin);
    t->data = (const uint8_t *)(uintptr_t)begin; /* an offset until the data base is known */
    if (!(t->name = strdup(name))) {
        corral_error_set(err, "out of memory");
        return false;
    }
    return true;
}

static int by_offset(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const safetensors_tensor *)a)->data;
    uintptr_t y = (uintptr_t)((const safetensors_tensor *)b)->data;
    return x < y ? -1 : x > y;
}

static bool parse(safetensors_file *f, const uint8_t *bytes, size_t size, corral_error *err)
{
    if (size < 8) {
        corral_error_set(err, "%s: not a safetensors file (%zu bytes)", f->name, size);
        return false;
    }
    uint64_t header = 0;
    for (int i = 7; i >= 0; i--)
        header = header << 8 | bytes[i];
    if (header < 2 || header > SAFETENSORS_MAX_HEADER_BYTES || header > size - 8) {
        corral_error_set(err, "%s: header length %llu is not within the file (%zu bytes) and "
                         "the %llu-byte cap", f->name, (unsigned long long)header, size,
                         (unsigned long long)SAFETENSORS_MAX_HEADER_BYTES);
        return false;
    }
    json_error_t jerr;
    json_t *root = json_loadb((const char *)bytes + 8, (size_t)header, JSON_REJECT_DUPLICATES,
                              &jerr);
    if (!root || !json_is_object(root)) {
        corral_error_set(err, "%s: header is not a JSON object%s%.200s", f->name,
                         root ? "" : ": ", root ? "" : jerr.text);
        json_decref(root);
        return false;
    }
    const uint8_t *data = bytes + 8 + header;
    uint64_t data_size = size - 8 - header;
    size_t n = json_object_size(root);
    const json_t *metadata = json_object_get(root, "__metadata__");
    if (metadata && !json_is_object(metadata)) {
        corral_error_set(err, "%s: __metadata__ is not an object", f->name);
        json_decref(root);
        return false;
    }
    if (n > SAFETENSORS_MAX_TENSORS || !(f->tensors = calloc(n ? n : 1, sizeof *f->tensors))) {
        corral_error_set(err, "%s: %s", f->name,
                         n > SAFETENSORS_MAX_TENSORS ? "too many tensors" : "out of memory");
        json_decref(root);
        return false;
    }
    const char *name;
    json_t *entry;
    bool ok = true;
    json_object_foreach(root, name, entry) {
        if (strcmp(name, "__metadata__") == 0)
            continue;
        if (!(ok = parse_tensor(f->name, name, entry, data_size, &f->tensors[f->n_tensors], err)))
            break;
        f->n_tensors++;
    }
    json_decref(root);
    if (!ok)
        return false;
    qsort(f->tensors, f->n_tensors, sizeof *f->tensors, by_offset);
    for (size_t i = 0; i < f->n_tensors; i++) {
        safetensors_tensor *t = &f->tensors[i];
        uint64_t begin = (uint64_t)(uintptr_t)t->data;
        if (i > 0 && t->size_bytes && begin < (uint64_t)(uintptr_t)f->tensors[i - 1].data +
                                                  f->tensors[i - 1].size_bytes) {
            corral_error_set(err, "%s: tensors '%.200s' and '%.200s' overlap", f->name,
                             f->tensors[i - 1].name, t->name);
            return false;
        }
    }
    for (size_t i = 0; i < f->n_tensors; i++)
        f->tensors[i].data = data + (uintptr_t)f->tensors[i].data;
    qsort(f->tensors, f->n_tensors, sizeof *f->tensors, by_name);
    return true;
}

safetensors_file *safetensors_open_memory(const void *bytes, size_t size, const char *name,
                                          corral_error *err)
{
    safetensors_file *f = calloc(1, sizeof *f);
    if (!f || !(f->name = strdup(name))) {
        free(f);
        corral_error_set(err, "out of memory");
        return NULL;
    }
    if (!parse(f, bytes, size, err)) {
        safetensors_close(f);
        return NULL;
    }
    return f;
}

safetensors_file *safetensors_open(const char *path, corral_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        corral_error_set(err, "%s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode) || st.st_size < 8) {
        close(fd);
        corral_error_set(err, "%s: not a safetensors file", path);
        return NULL;
    }
    size_t size = (size_t)st.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        corral_error_set(err, "%s: cannot map: %s", path, strerror(errno));
        return NULL;
    }
    safetensors_file *f = calloc(1, sizeof *f);
    if (!f || !(f->name = strdup(path))) {
        free(f);
        munmap(map, size);
        corral_error_set(err, "out of memory");
        return NULL;
    }
    f->map = map;
    f->map_size = size;
    if (!parse(f, map, size, err)) {
        safetensors_close(f);
        return NULL;
    }
    return f;
}

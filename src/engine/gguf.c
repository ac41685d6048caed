/*
 * GGUF reader: maps a file and validates all of it (header, metadata, tensor infos, tensor
 * extents) before handing out any pointer into it. It rejects whatever ggml's reader rejects,
 * plus the caps in gguf.h; messages name the file, the key or tensor, and
 * the byte offsets involved. The writer lives in gguf_writer.c.
 */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tensor_type.h"
#include "util/checked.h"

#define GGUF_MAGIC "GGUF"

/* Smallest encodings, used to bound counts by the bytes left before allocating. */
#define MIN_KV_BYTES 13u          /* key length + value type + 1-byte value */
#define MIN_TENSOR_INFO_BYTES 24u /* name length + n_dims + type + offset */

/* Open-addressing index of names (keys or tensor names) for lookups and duplicate checks. */
typedef struct name_index {
    uint32_t *slots; /* entry index + 1; 0 = empty */
    size_t mask;
} name_index;

struct gguf_file {
    char *path;
    const uint8_t *base;
    size_t size;
    bool mapped;
    uint32_t version;
    size_t alignment;
    size_t data_offset;
    gguf_kv *kvs;
    size_t n_kv;
    gguf_tensor *tensors;
    size_t n_tensors;
    name_index kv_index;
    name_index tensor_index;
};

/* A bounded cursor over the mapped bytes. */
typedef struct reader {
    const gguf_file *file;
    size_t pos;
    corral_error *err;
} reader;

static const size_t value_sizes[GGUF_TYPE_COUNT] = {
    [GGUF_TYPE_UINT8] = 1,   [GGUF_TYPE_INT8] = 1,    [GGUF_TYPE_UINT16] = 2,
    [GGUF_TYPE_INT16] = 2,   [GGUF_TYPE_UINT32] = 4,  [GGUF_TYPE_INT32] = 4,
    [GGUF_TYPE_FLOAT32] = 4, [GGUF_TYPE_BOOL] = 1,    [GGUF_TYPE_STRING] = 0,
    [GGUF_TYPE_ARRAY] = 0,   [GGUF_TYPE_UINT64] = 8,  [GGUF_TYPE_INT64] = 8,
    [GGUF_TYPE_FLOAT64] = 8,
};

const char *gguf_type_name(enum gguf_type type)
{
    static const char *const names[GGUF_TYPE_COUNT] = {
        "uint8", "int8",   "uint16", "int16", "uint32", "int32",   "float32",
        "bool",  "string", "array",  "uint64", "int64", "float64",
    };
    return (unsigned)type < GGUF_TYPE_COUNT ? names[type] : "invalid";
}

bool gguf_type_is_integer(enum gguf_type type)
{
    switch (type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16:
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64:
        return true;
    default:
        return false;
    }
}

/* ---- name index ---- */

static uint64_t hash_name(const char *s)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3u;
    return h;
}

static bool name_index_init(name_index *index, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    index->slots = calloc(cap, sizeof *index->slots);
    index->mask = cap - 1;
    return index->slots != NULL;
}

/* Index of `name` among entries, or -1. name_at(i) gives entry i's name. */
static long name_index_find(const name_index *index, const char *name,
                            const char *(*name_at)(const void *entries, size_t i),
                            const void *entries)
{
    if (!index->slots)
        return -1;
    for (size_t slot = hash_name(name) & index->mask;; slot = (slot + 1) & index->mask) {
        uint32_t entry = index->slots[slot];
        if (entry == 0)
            return -1;
        if (strcmp(name_at(entries, entry - 1), name) == 0)
            return (long)(entry - 1);
    }
}

/* Insert entry i; false when its name is already present. */
static bool name_index_insert(name_index *index, size_t i,
                              const char *(*name_at)(const void *entries, size_t i),
                              const void *entries)
{
    const char *name = name_at(entries, i);
    size_t slot = hash_name(name) & index->mask;
    for (; index->slots[slot]; slot = (slot + 1) & index->mask)
        if (strcmp(name_at(entries, index->slots[slot] - 1), name) == 0)
            return false;
    index->slots[slot] = (uint32_t)(i + 1);
    return true;
}

static const char *kv_name_at(const void *entries, size_t i)
{
    return ((const gguf_kv *)entries)[i].key;
}

static const char *tensor_name_at(const void *entries, size_t i)
{
    return ((const gguf_tensor *)entries)[i].name;
}

/* ---- bounded reading ---- */

static size_t bytes_left(const reader *r)
{
    return r->file->size - r->pos;
}

static bool take(reader *r, size_t n, const char *what, const uint8_t **out)
{
    if (n > bytes_left(r)) {
        corral_error_set(r->err, "%s: truncated: %s needs %zu bytes at offset %zu but the file has %zu",
                         r->file->path, what, n, r->pos, r->file->size);
        return false;
    }
    *out = r->file->base + r->pos;
    r->pos += n;
    return true;
}

static bool read_u32(reader *r, const char *what, uint32_t *out)
{
    const uint8_t *p;
    if (!take(r, 4, what, &p))
        return false;
    memcpy(out, p, 4);
    return true;
}

static bool read_u64(reader *r, const char *what, uint64_t *out)
{
    const uint8_t *p;
    if (!take(r, 8, what, &p))
        return false;
    memcpy(out, p, 8);
    return true;
}

/* A length-prefixed string; `what` names it in messages. */
static bool read_str(reader *r, const char *what, gguf_str *out)
{
    uint64_t len;
    size_t at = r->pos;
    if (!read_u64(r, what, &len))
        return false;
    if (len > bytes_left(r)) {
        corral_error_set(r->err, "%s: %s at offset %zu claims %llu bytes but only %zu remain",
                         r->file->path, what, at, (unsigned long long)len, bytes_left(r));
        return false;
    }
    out->data = (const char *)r->file->base + r->pos;
    out->size = (size_t)len;
    r->pos += (size_t)len;
    return true;
}

/* NUL-terminated copy of a key or tensor name, rejecting embedded NULs and overlong names. */
static char *copy_name(reader *r, const gguf_str *s, size_t max_bytes, const char *what)
{
    if (s->size > max_bytes) {
        corral_error_set(r->err, "%s: %s '%.40s...' is %zu bytes long; the limit is %zu",
                         r->file->path, what, s->data, s->size, max_bytes);
        return NULL;
    }
    if (memchr(s->data, '\0', s->size)) {
        corral_error_set(r->err, "%s: %s '%.*s' contains a NUL byte", r->file->path, what,
                         (int)s->size, s->data);
        return NULL;
    }
    char *copy = malloc(s->size + 1);
    if (!copy) {
        corral_error_set(r->err, "%s: out of memory", r->file->path);
        return NULL;
    }
    memcpy(copy, s->data, s->size);
    copy[s->size] = '\0';
    return copy;
}

/* ---- metadata ---- */

static bool read_value(reader *r, gguf_kv *kv)
{
    uint32_t raw_type;
    if (!read_u32(r, "value type", &raw_type))
        return false;
    if (raw_type >= GGUF_TYPE_COUNT) {
        corral_error_set(r->err, "%s: key '%s' has unknown value type %u", r->file->path, kv->key,
                         raw_type);
        return false;
    }
    kv->type = kv->elem_type = (enum gguf_type)raw_type;
    kv->n = 1;
    if (kv->type == GGUF_TYPE_ARRAY) {
        uint32_t elem;
        uint64_t count;
        if (!read_u32(r, "array element type", &elem) || !read_u64(r, "array length", &count))
            return false;
        if (elem >= GGUF_TYPE_COUNT || elem == GGUF_TYPE_ARRAY) {
            corral_error_set(r->err, "%s: key '%s' is an array of %s (type %u), which is not allowed",
                             r->file->path, kv->key,
                             elem == GGUF_TYPE_ARRAY ? "arrays" : "an unknown type", elem);
            return false;
        }
        if (count > GGUF_MAX_ARRAY_LEN) {
            corral_error_set(r->err, "%s: key '%s' has %llu array elements; the limit is %u",
                             r->file->path, kv->key, (unsigned long long)count, GGUF_MAX_ARRAY_LEN);
            return false;
        }
        kv->elem_type = (enum gguf_type)elem;
        kv->n = count;
    }
    kv->data = r->file->base + r->pos;

    if (kv->elem_type != GGUF_TYPE_STRING) {
        size_t total = value_sizes[kv->elem_type] * (size_t)kv->n; /* n <= 2^24: no overflow */
        if (total > bytes_left(r)) {
            corral_error_set(r->err, "%s: key '%s': %llu %s values need %zu bytes at offset %zu but only %zu remain",
                             r->file->path, kv->key, (unsigned long long)kv->n,
                             gguf_type_name(kv->elem_type), total, r->pos, bytes_left(r));
            return false;
        }
        r->pos += total;
        return true;
    }

    if (kv->n * 8 > bytes_left(r)) {
        corral_error_set(r->err, "%s: key '%s': %llu strings cannot fit in the %zu bytes left",
                         r->file->path, kv->key, (unsigned long long)kv->n, bytes_left(r));
        return false;
    }
    uint64_t *offsets = malloc(sizeof *offsets * (kv->n ? kv->n : 1));
    if (!offsets) {
        corral_error_set(r->err, "%s: out of memory", r->file->path);
        return false;
    }
    kv->str_offsets = offsets;
    for (uint64_t i = 0; i < kv->n; i++) {
        gguf_str s;
        offsets[i] = (uint64_t)(r->file->base + r->pos - kv->data);
        if (!read_str(r, kv->type == GGUF_TYPE_ARRAY ? "array string" : "string value", &s)) {
            corral_error_prefix(r->err, "key '%s'", kv->key);
            return false;
        }
    }
    return true;
}

static bool read_alignment(gguf_file *f, corral_error *err)
{
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_kv *kv = gguf_find_kv(f, "general.alignment");
    if (!kv)
        return true;
    if (kv->type != GGUF_TYPE_UINT32) {
        corral_error_set(err, "%s: general.alignment must be a uint32, not %s", f->path,
                         kv->type == GGUF_TYPE_ARRAY ? "an array" : gguf_type_name(kv->type));
        return false;
    }
    uint32_t alignment = (uint32_t)gguf_kv_u64(kv, 0);
    if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > GGUF_MAX_ALIGNMENT) {
        corral_error_set(err, "%s: general.alignment %u is not a power of two up to %u", f->path,
                         alignment, GGUF_MAX_ALIGNMENT);
        return false;
    }
    f->alignment = alignment;
    return true;
}

static bool read_metadata(reader *r, gguf_file *f, uint64_t n_kv)
{
    if (n_kv > GGUF_MAX_KV || n_kv * MIN_KV_BYTES > bytes_left(r)) {
        corral_error_set(r->err, "%s: header claims %llu metadata pairs, more than %s",
                         f->path, (unsigned long long)n_kv,
                         n_kv > GGUF_MAX_KV ? "the limit of 65536" : "the file can hold");
        return false;
    }
    f->kvs = calloc(n_kv ? n_kv : 1, sizeof *f->kvs);
    if (!f->kvs || !name_index_init(&f->kv_index, n_kv)) {
        corral_error_set(r->err, "%s: out of memory", f->path);
        return false;
    }
    for (uint64_t i = 0; i < n_kv; i++) {
        gguf_kv *kv = &f->kvs[i];
        gguf_str key;
        if (!read_str(r, "metadata key", &key))
            return false;
        if (key.size == 0) {
            corral_error_set(r->err, "%s: metadata pair %llu has an empty key", f->path,
                             (unsigned long long)i);
            return false;
        }
        if (!(kv->key = copy_name(r, &key, GGUF_MAX_KEY_BYTES, "metadata key")))
            return false;
        f->n_kv = i + 1; /* from here on, kv is owned by f and freed with it */
        if (!name_index_insert(&f->kv_index, i, kv_name_at, f->kvs)) {
            corral_error_set(r->err, "%s: duplicate metadata key '%s'", f->path, kv->key);
            return false;
        }
        if (!read_value(r, kv))
            return false;
    }
    return true;
}

/* ---- tensor infos ---- */

static bool read_tensor_info(reader *r, gguf_file *f, gguf_tensor *t)
{
    gguf_str name;
    if (!read_str(r, "tensor name", &name))
        return false;
    if (!(t->name = copy_name(r, &name, GGUF_MAX_NAME_BYTES, "tensor name")))
        return false;
    if (!read_u32(r, "tensor dimension count", &t->n_dims))
        return false;
    if (t->n_dims > 4) {
        corral_error_set(r->err, "%s: tensor '%s' has %u dimensions; at most 4 are allowed",
                         f->path, t->name, t->n_dims);
        return false;
    }
    for (int d = 0; d < 4; d++)
        t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne;
        if (!read_u64(r, "tensor dimension", &ne))
            return false;
        if (ne == 0 || ne > INT64_MAX) {
            corral_error_set(r->err, "%s: tensor '%s' dimension %u is %lld; every dimension must be at least 1",
                             f->path, t->name, d, (long long)ne);
            return false;
        }
        t->ne[d] = (int64_t)ne;
    }
    if (!read_u32(r, "tensor type", &t->type))
        return false;
    const tensor_type_info *info = tensor_type_get(t->type);
    if (!info) {
        corral_error_set(r->err, "%s: tensor '%s' has unknown or removed type %u", f->path,
                         t->name, t->type);
        return false;
    }
    if ((uint64_t)t->ne[0] % info->block_elems != 0) {
        corral_error_set(r->err, "%s: tensor '%s' row length %lld is not a multiple of the %s block size %u",
                         f->path, t->name, (long long)t->ne[0], info->name, info->block_elems);
        return false;
    }
    size_t size;
    bool ok = tensor_type_row_bytes(t->type, (uint64_t)t->ne[0], &size);
    int64_t elems = t->ne[0];
    for (int d = 1; d < 4 && ok; d++) {
        ok = checked_mul_size(size, (size_t)t->ne[d], &size) &&
             !__builtin_mul_overflow(elems, t->ne[d], &elems);
    }
    if (!ok) {
        corral_error_set(r->err, "%s: tensor '%s' shape [%lld, %lld, %lld, %lld] overflows its size",
                         f->path, t->name, (long long)t->ne[0], (long long)t->ne[1],
                         (long long)t->ne[2], (long long)t->ne[3]);
        return false;
    }
    t->size_bytes = size;
    return read_u64(r, "tensor offset", &t->offset);
}

static bool read_tensor_infos(reader *r, gguf_file *f, uint64_t n_tensors)
{
    if (n_tensors > GGUF_MAX_TENSORS || n_tensors * MIN_TENSOR_INFO_BYTES > bytes_left(r)) {
        corral_error_set(r->err, "%s: header claims %llu tensors, more than %s", f->path,
                         (unsigned long long)n_tensors,
                         n_tensors > GGUF_MAX_TENSORS ? "the limit of 1048576" : "the file can hold");
        return false;
    }
    f->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *f->tensors);
    if (!f->tensors || !name_index_init(&f->tensor_index, n_tensors)) {
        corral_error_set(r->err, "%s: out of memory", f->path);
        return false;
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        f->n_tensors = i + 1;
        if (!read_tensor_info(r, f, &f->tensors[i]))
            return false;
        if (!name_index_insert(&f->tensor_index, i, tensor_name_at, f->tensors)) {
            corral_error_set(r->err, "%s: duplicate tensor name '%s'", f->path, f->tensors[i].name);
            return false;
        }
    }
    return true;
}

/* Offsets must follow ggml's layout exactly, and every tensor must lie inside the file. */
static bool place_tensors(gguf_file *f, size_t infos_end, corral_error *err)
{
    if (!checked_align_up(infos_end, f->alignment, &f->data_offset)) {
        corral_error_set(err, "%s: data section offset overflows", f->path);
        return false;
    }
    size_t expected = 0;
    for (size_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        if (t->offset != expected) {
            corral_error_set(err, "%s: tensor '%s' is at data offset %llu, but the tensors before it end at %zu (with alignment %zu)",
                             f->path, t->name, (unsigned long long)t->offset, expected, f->alignment);
            return false;
        }
        size_t start, end, padded;
        if (!checked_add_size(f->data_offset, expected, &start) ||
            !checked_add_size(start, t->size_bytes, &end) ||
            !checked_align_up(t->size_bytes, f->alignment, &padded) ||
            !checked_add_size(expected, padded, &expected)) {
            corral_error_set(err, "%s: tensor '%s': data offsets overflow", f->path, t->name);
            return false;
        }
        if (end > f->size) {
            corral_error_set(err, "%s: tensor '%s': data ends at byte %zu but the file has %zu bytes",
                             f->path, t->name, end, f->size);
            return false;
        }
        t->data = f->base + start;
    }
    return true;
}

static bool parse(gguf_file *f, corral_error *err)
{
    reader r = {.file = f, .pos = 0, .err = err};
    const uint8_t *magic;
    if (!take(&r, 4, "magic", &magic))
        return false;
    if (memcmp(magic, GGUF_MAGIC, 4) != 0) {
        corral_error_set(err, "%s: not a GGUF file (bad magic)", f->path);
        return false;
    }
    if (!read_u32(&r, "version", &f->version))
        return false;
    if ((f->version & 0xFFFF) == 0) {
        corral_error_set(err, "%s: GGUF version 0x%08x looks byte-swapped (big-endian); only little-endian files are supported",
                         f->path, f->version);
        return false;
    }
    if (f->version < 2 || f->version > 3) {
        corral_error_set(err, "%s: GGUF version %u is not supported (versions 2 and 3 are)",
                         f->path, f->version);
        return false;
    }
    uint64_t n_tensors, n_kv;
    if (!read_u64(&r, "tensor count", &n_tensors) || !read_u64(&r, "metadata count", &n_kv))
        return false;
    return read_metadata(&r, f, n_kv) && read_alignment(f, err) &&
           read_tensor_infos(&r, f, n_tensors) && place_tensors(f, r.pos, err);
}

static gguf_file *file_new(const char *name, corral_error *err)
{
    gguf_file *f = calloc(1, sizeof *f);
    if (f)
        f->path = strdup(name);
    if (!f || !f->path) {
        free(f);
        corral_error_set(err, "%s: out of memory", name);
        return NULL;
    }
    return f;
}

gguf_file *gguf_open_memory(const void *bytes, size_t size, const char *name, corral_error *err)
{
    gguf_file *f = file_new(name, err);
    if (!f)
        return NULL;
    f->base = bytes;
    f->size = size;
    if (!parse(f, err)) {
        gguf_close(f);
        return NULL;
    }
    return f;
}

gguf_file *gguf_open(const char *path, corral_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        corral_error_set(err, "%s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        corral_error_set(err, "%s: not a regular file", path);
        close(fd);
        return NULL;
    }
    if (st.st_size == 0) {
        corral_error_set(err, "%s: file is empty", path);
        close(fd);
        return NULL;
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd);
    if (map == MAP_FAILED) {
        corral_error_set(err, "%s: cannot map file: %s", path, strerror(map_errno));
        return NULL;
    }
    gguf_file *f = file_new(path, err);
    if (!f) {
        munmap(map, (size_t)st.st_size);
        return NULL;
    }
    f->base = map;
    f->size = (size_t)st.st_size;
    f->mapped = true;
    if (!parse(f, err)) {
        gguf_close(f);
        return NULL;
    }
    return f;
}

void gguf_close(gguf_file *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n_kv; i++) {
        free((char *)f->kvs[i].key);
        free((uint64_t *)f->kvs[i].str_offsets);
    }
    for (size_t i = 0; i < f->n_tensors; i++)
        free((char *)f->tensors[i].name);
    free(f->kvs);
    free(f->tensors);
    free(f->kv_index.slots);
    free(f->tensor_index.slots);
    if (f->mapped)
        munmap((void *)f->base, f->size);
    free(f->path);
    free(f);
}

/* ---- queries ---- */

const char *gguf_path(const gguf_file *f) { return f->path; }
uint32_t gguf_version(const gguf_file *f) { return f->version; }
size_t gguf_alignment(const gguf_file *f) { return f->alignment; }
size_t gguf_file_size(const gguf_file *f) { return f->size; }
size_t gguf_data_offset(const gguf_file *f) { return f->data_offset; }
size_t gguf_n_kv(const gguf_file *f) { return f->n_kv; }
size_t gguf_n_tensors(const gguf_file *f) { return f->n_tensors; }

const gguf_kv *gguf_kv_at(const gguf_file *f, size_t i)
{
    return i < f->n_kv ? &f->kvs[i] : NULL;
}

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key)
{
    long i = name_index_find(&f->kv_index, key, kv_name_at, f->kvs);
    return i >= 0 ? &f->kvs[i] : NULL;
}

const gguf_tensor *gguf_tensor_at(const gguf_file *f, size_t i)
{
    return i < f->n_tensors ? &f->tensors[i] : NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name)
{
    long i = name_index_find(&f->tensor_index, name, tensor_name_at, f->tensors);
    return i >= 0 ? &f->tensors[i] : NULL;
}

uint64_t gguf_tensor_n_elems(const gguf_tensor *t)
{
    return (uint64_t)t->ne[0] * (uint64_t)t->ne[1] * (uint64_t)t->ne[2] * (uint64_t)t->ne[3];
}

/* ---- element access (values were validated at open) ---- */

gguf_str gguf_kv_str(const gguf_kv *kv, uint64_t i)
{
    const uint8_t *p = kv->data + (kv->str_offsets ? kv->str_offsets[i] : 0);
    uint64_t len;
    memcpy(&len, p, 8);
    return (gguf_str){(const char *)p + 8, (size_t)len};
}

/* Element i of a numeric value, read bytewise: values in the map are not aligned. */
static void load_elem(const gguf_kv *kv, uint64_t i, void *out, size_t size)
{
    memcpy(out, kv->data + (size_t)i * size, size);
}

#define DEFINE_LOAD(name, type)                                                            \
    static type name(const gguf_kv *kv, uint64_t i)                                        \
    {                                                                                      \
        type v;                                                                            \
        load_elem(kv, i, &v, sizeof v);                                                    \
        return v;                                                                          \
    }
DEFINE_LOAD(load_u8, uint8_t)
DEFINE_LOAD(load_i8, int8_t)
DEFINE_LOAD(load_u16, uint16_t)
DEFINE_LOAD(load_i16, int16_t)
DEFINE_LOAD(load_u32, uint32_t)
DEFINE_LOAD(load_i32, int32_t)
DEFINE_LOAD(load_u64, uint64_t)
DEFINE_LOAD(load_i64, int64_t)
DEFINE_LOAD(load_f32, float)
DEFINE_LOAD(load_f64, double)

float gguf_kv_f32(const gguf_kv *kv, uint64_t i)
{
    return load_f32(kv, i);
}

double gguf_kv_f64(const gguf_kv *kv, uint64_t i)
{
    return kv->elem_type == GGUF_TYPE_FLOAT64 ? load_f64(kv, i) : (double)load_f32(kv, i);
}

int64_t gguf_kv_i64(const gguf_kv *kv, uint64_t i)
{
    return (int64_t)gguf_kv_u64(kv, i);
}

uint64_t gguf_kv_u64(const gguf_kv *kv, uint64_t i)
{
    switch (kv->elem_type) {
    case GGUF_TYPE_UINT8: return load_u8(kv, i);
    case GGUF_TYPE_INT8: return (uint64_t)(int64_t)load_i8(kv, i);
    case GGUF_TYPE_UINT16: return load_u16(kv, i);
    case GGUF_TYPE_INT16: return (uint64_t)(int64_t)load_i16(kv, i);
    case GGUF_TYPE_UINT32: return load_u32(kv, i);
    case GGUF_TYPE_INT32: return (uint64_t)(int64_t)load_i32(kv, i);
    case GGUF_TYPE_UINT64: return load_u64(kv, i);
    case GGUF_TYPE_INT64: return (uint64_t)load_i64(kv, i);
    case GGUF_TYPE_BOOL: return load_u8(kv, i) != 0;
    default: return 0;
    }
}

bool gguf_kv_bool(const gguf_kv *kv, uint64_t i)
{
    return load_u8(kv, i) != 0;
}

/* ---- typed accessors ---- */

static bool is_signed_type(enum gguf_type t)
{
    return t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_INT32 ||
           t == GGUF_TYPE_INT64;
}

/* The scalar value of key, or NULL; *absent says whether it was missing (vs wrong shape). */
static const gguf_kv *find_scalar(const gguf_file *f, const char *key, bool optional,
                                  const char *want, bool *absent, corral_error *err)
{
    const gguf_kv *kv = gguf_find_kv(f, key);
    *absent = kv == NULL;
    if (!kv) {
        if (!optional)
            corral_error_set(err, "%s: missing key '%s'", f->path, key);
        return NULL;
    }
    if (kv->type == GGUF_TYPE_ARRAY) {
        corral_error_set(err, "%s: key '%s' is an array, expected %s", f->path, key, want);
        return NULL;
    }
    return kv;
}

static bool wrong_type(const gguf_file *f, const gguf_kv *kv, const char *want, corral_error *err)
{
    corral_error_set(err, "%s: key '%s' is %s, expected %s", f->path, kv->key,
                     gguf_type_name(kv->type), want);
    return false;
}

/* Integer scalar within [lo, hi] (signed comparison when the stored type is signed). */
static bool get_int(const gguf_file *f, const char *key, bool optional, int64_t lo, uint64_t hi,
                    const char *want, uint64_t *out, corral_error *err)
{
    bool absent;
    const gguf_kv *kv = find_scalar(f, key, optional, want, &absent, err);
    if (!kv)
        return absent && optional;
    if (!gguf_type_is_integer(kv->type))
        return wrong_type(f, kv, want, err);
    uint64_t v = gguf_kv_u64(kv, 0);
    bool fits = is_signed_type(kv->type) ? ((int64_t)v >= lo && ((int64_t)v < 0 || v <= hi))
                                         : v <= hi;
    if (!fits) {
        corral_error_set(err, "%s: key '%s' value %s%llu does not fit %s", f->path, key,
                         is_signed_type(kv->type) && (int64_t)v < 0 ? "-" : "",
                         is_signed_type(kv->type) && (int64_t)v < 0
                             ? (unsigned long long)-(int64_t)v : (unsigned long long)v,
                         want);
        return false;
    }
    *out = v;
    return true;
}

bool gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out, corral_error *err)
{
    uint64_t v;
    if (!get_int(f, key, false, 0, UINT32_MAX, "uint32", &v, err))
        return false;
    *out = (uint32_t)v;
    return true;
}

bool gguf_get_u32_opt(const gguf_file *f, const char *key, uint32_t *out, corral_error *err)
{
    uint64_t v = *out;
    if (!get_int(f, key, true, 0, UINT32_MAX, "uint32", &v, err))
        return false;
    *out = (uint32_t)v;
    return true;
}

bool gguf_get_i32(const gguf_file *f, const char *key, int32_t *out, corral_error *err)
{
    uint64_t v;
    if (!get_int(f, key, false, INT32_MIN, INT32_MAX, "int32", &v, err))
        return false;
    *out = (int32_t)(int64_t)v;
    return true;
}

bool gguf_get_i32_opt(const gguf_file *f, const char *key, int32_t *out, corral_error *err)
{
    uint64_t v = (uint64_t)(int64_t)*out;
    if (!get_int(f, key, true, INT32_MIN, INT32_MAX, "int32", &v, err))
        return false;
    *out = (int32_t)(int64_t)v;
    return true;
}

bool gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out, corral_error *err)
{
    return get_int(f, key, false, 0, UINT64_MAX, "uint64", out, err);
}

bool gguf_get_u64_opt(const gguf_file *f, const char *key, uint64_t *out, corral_error *err)
{
    return get_int(f, key, true, 0, UINT64_MAX, "uint64", out, err);
}

static bool get_f32(const gguf_file *f, const char *key, bool optional, float *out,
                    corral_error *err)
{
    bool absent;
    const gguf_kv *kv = find_scalar(f, key, optional, "float32", &absent, err);
    if (!kv)
        return absent && optional;
    if (kv->type != GGUF_TYPE_FLOAT32 && kv->type != GGUF_TYPE_FLOAT64)
        return wrong_type(f, kv, "float32", err);
    *out = (float)gguf_kv_f64(kv, 0);
    return true;
}

bool gguf_get_f32(const gguf_file *f, const char *key, float *out, corral_error *err)
{
    return get_f32(f, key, false, out, err);
}

bool gguf_get_f32_opt(const gguf_file *f, const char *key, float *out, corral_error *err)
{
    return get_f32(f, key, true, out, err);
}

static bool get_bool(const gguf_file *f, const char *key, bool optional, bool *out,
                     corral_error *err)
{
    bool absent;
    const gguf_kv *kv = find_scalar(f, key, optional, "bool", &absent, err);
    if (!kv)
        return absent && optional;
    if (kv->type != GGUF_TYPE_BOOL)
        return wrong_type(f, kv, "bool", err);
    *out = gguf_kv_bool(kv, 0);
    return true;
}

bool gguf_get_bool(const gguf_file *f, const char *key, bool *out, corral_error *err)
{
    return get_bool(f, key, false, out, err);
}

bool gguf_get_bool_opt(const gguf_file *f, const char *key, bool *out, corral_error *err)
{
    return get_bool(f, key, true, out, err);
}

static bool get_str(const gguf_file *f, const char *key, bool optional, gguf_str *out,
                    corral_error *err)
{
    bool absent;
    const gguf_kv *kv = find_scalar(f, key, optional, "string", &absent, err);
    if (!kv)
        return absent && optional;
    if (kv->type != GGUF_TYPE_STRING)
        return wrong_type(f, kv, "string", err);
    *out = gguf_kv_str(kv, 0);
    return true;
}

bool gguf_get_str(const gguf_file *f, const char *key, gguf_str *out, corral_error *err)
{
    return get_str(f, key, false, out, err);
}

bool gguf_get_str_opt(const gguf_file *f, const char *key, gguf_str *out, corral_error *err)
{
    return get_str(f, key, true, out, err);
}

static bool get_array(const gguf_file *f, const char *key, enum gguf_type elem_type,
                      bool optional, const gguf_kv **out, corral_error *err)
{
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) {
        *out = NULL;
        if (!optional)
            corral_error_set(err, "%s: missing key '%s'", f->path, key);
        return optional;
    }
    if (kv->type != GGUF_TYPE_ARRAY) {
        corral_error_set(err, "%s: key '%s' is %s, expected an array", f->path, key,
                         gguf_type_name(kv->type));
        return false;
    }
    if (elem_type != GGUF_TYPE_COUNT && kv->elem_type != elem_type) {
        corral_error_set(err, "%s: key '%s' is an array of %s, expected %s", f->path, key,
                         gguf_type_name(kv->elem_type), gguf_type_name(elem_type));
        return false;
    }
    *out = kv;
    return true;
}

bool gguf_get_array(const gguf_file *f, const char *key, enum gguf_type elem_type,
                    const gguf_kv **out, corral_error *err)
{
    return get_array(f, key, elem_type, false, out, err);
}

bool gguf_get_array_opt(const gguf_file *f, const char *key, enum gguf_type elem_type,
                        const gguf_kv **out, corral_error *err)
{
    return get_array(f, key, elem_type, true, out, err);
}

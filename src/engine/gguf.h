/*
 * GGUF v2/v3 reader and writer.
 *
 * The reader maps the file read-only and validates every byte it will ever use before
 * gguf_open returns: after that, keys, values, tensor shapes and tensor data pointers can be
 * trusted without further checks. String values point into the map (not NUL-terminated);
 * keys and tensor names are NUL-terminated copies. Anything malformed yields an error
 * naming the file and the problem; the reader never asserts or reads out of bounds on input.
 *
 * Limits (beyond ggml's own checks, to keep hostile files from exhausting memory):
 *   GGUF_MAX_KEY_BYTES     longest metadata key
 *   GGUF_MAX_NAME_BYTES    longest tensor name (ggml: 63 bytes)
 *   GGUF_MAX_ARRAY_LEN     most elements in one metadata array
 *   GGUF_MAX_KV            most metadata pairs
 *   GGUF_MAX_TENSORS       most tensors
 *   GGUF_MAX_ALIGNMENT     largest general.alignment
 * Counts are also bounded by the bytes left in the file.
 */
#ifndef CORRAL_ENGINE_GGUF_H
#define CORRAL_ENGINE_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "corral/error.h"

#define GGUF_MAX_KEY_BYTES 65535u
#define GGUF_MAX_NAME_BYTES 63u
#define GGUF_MAX_ARRAY_LEN (1u << 24)
#define GGUF_MAX_KV 65536u
#define GGUF_MAX_TENSORS 1048576u
#define GGUF_MAX_ALIGNMENT (1u << 20)
#define GGUF_DEFAULT_ALIGNMENT 32u

enum gguf_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
};

/* A string inside the mapped file (or the writer's memory): bytes, not NUL-terminated. */
typedef struct gguf_str {
    const char *data;
    size_t size;
} gguf_str;

/* One metadata pair. Scalars have n == 1 and elem_type == type. */
typedef struct gguf_kv {
    const char *key;          /* NUL-terminated copy */
    enum gguf_type type;      /* GGUF_TYPE_ARRAY for arrays */
    enum gguf_type elem_type; /* element type of an array; == type for scalars */
    uint64_t n;               /* elements in an array; 1 for scalars */
    const uint8_t *data;      /* first value byte in the map (unaligned) */
    const uint64_t *str_offsets; /* string arrays/scalars: offset of element i from data */
} gguf_kv;

typedef struct gguf_tensor {
    const char *name;     /* NUL-terminated copy */
    uint32_t n_dims;      /* as stored, 0..4 */
    int64_t ne[4];        /* dims not stored are 1; ne[0] is the row length */
    uint32_t type;        /* enum tensor_type, validated */
    uint64_t offset;      /* from the start of the data section */
    size_t size_bytes;
    const void *data;     /* in the map; aligned to the file's alignment */
} gguf_tensor;

typedef struct gguf_file gguf_file;

/* Map and validate path. NULL with err set on any problem. */
gguf_file *gguf_open(const char *path, corral_error *err);

/*
 * Validate a GGUF image already in memory (tests, fuzzing). bytes must outlive the result;
 * name is used in messages.
 */
gguf_file *gguf_open_memory(const void *bytes, size_t size, const char *name, corral_error *err);

void gguf_close(gguf_file *file);

const char *gguf_path(const gguf_file *file);
uint32_t gguf_version(const gguf_file *file);
size_t gguf_alignment(const gguf_file *file);
size_t gguf_file_size(const gguf_file *file);
size_t gguf_data_offset(const gguf_file *file); /* start of the tensor data section */

size_t gguf_n_kv(const gguf_file *file);
const gguf_kv *gguf_kv_at(const gguf_file *file, size_t i);
const gguf_kv *gguf_find_kv(const gguf_file *file, const char *key); /* NULL when absent */

size_t gguf_n_tensors(const gguf_file *file);
const gguf_tensor *gguf_tensor_at(const gguf_file *file, size_t i);
const gguf_tensor *gguf_find_tensor(const gguf_file *file, const char *name);
uint64_t gguf_tensor_n_elems(const gguf_tensor *tensor);

const char *gguf_type_name(enum gguf_type type);

/*
 * Typed metadata accessors. gguf_get_* fail (false, err set) when the key is absent or its
 * value has the wrong type; gguf_get_*_opt leave *out untouched and succeed when the key is
 * absent, and fail only on a wrong type. Integer accessors accept any integer type whose
 * value fits; float accessors accept FLOAT32 and FLOAT64.
 */
bool gguf_get_u32(const gguf_file *file, const char *key, uint32_t *out, corral_error *err);
bool gguf_get_u32_opt(const gguf_file *file, const char *key, uint32_t *out, corral_error *err);
bool gguf_get_i32(const gguf_file *file, const char *key, int32_t *out, corral_error *err);
bool gguf_get_i32_opt(const gguf_file *file, const char *key, int32_t *out, corral_error *err);
bool gguf_get_u64(const gguf_file *file, const char *key, uint64_t *out, corral_error *err);
bool gguf_get_u64_opt(const gguf_file *file, const char *key, uint64_t *out, corral_error *err);
bool gguf_get_f32(const gguf_file *file, const char *key, float *out, corral_error *err);
bool gguf_get_f32_opt(const gguf_file *file, const char *key, float *out, corral_error *err);
bool gguf_get_bool(const gguf_file *file, const char *key, bool *out, corral_error *err);
bool gguf_get_bool_opt(const gguf_file *file, const char *key, bool *out, corral_error *err);
bool gguf_get_str(const gguf_file *file, const char *key, gguf_str *out, corral_error *err);
bool gguf_get_str_opt(const gguf_file *file, const char *key, gguf_str *out, corral_error *err);

/*
 * An array value: fails when absent, not an array, or (when elem_type is not GGUF_TYPE_COUNT)
 * of another element type. gguf_get_array_opt gives NULL in *out when absent.
 */
bool gguf_get_array(const gguf_file *file, const char *key, enum gguf_type elem_type,
                    const gguf_kv **out, corral_error *err);
bool gguf_get_array_opt(const gguf_file *file, const char *key, enum gguf_type elem_type,
                        const gguf_kv **out, corral_error *err);

/* Element i (< kv->n) of a validated value; the element type must match the call. */
gguf_str gguf_kv_str(const gguf_kv *kv, uint64_t i);
float gguf_kv_f32(const gguf_kv *kv, uint64_t i);
double gguf_kv_f64(const gguf_kv *kv, uint64_t i);  /* FLOAT32 or FLOAT64 */
int64_t gguf_kv_i64(const gguf_kv *kv, uint64_t i);  /* any integer type but UINT64 > INT64_MAX */
uint64_t gguf_kv_u64(const gguf_kv *kv, uint64_t i); /* any integer type, negative ones cast */
bool gguf_kv_bool(const gguf_kv *kv, uint64_t i);
bool gguf_type_is_integer(enum gguf_type type);

/* ---- Writer: streaming and atomic (temp file, fsync, rename). ----
 *
 * Declare every metadata pair and tensor first, then gguf_writer_begin writes the header to a
 * temporary file beside path; each tensor's bytes follow with gguf_writer_write_tensor in
 * declaration order; gguf_writer_finish pads, fsyncs and renames into place. Freeing an
 * unfinished writer removes the temporary file, so a reader never sees a partial GGUF.
 */
typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_create(void);
void gguf_writer_free(gguf_writer *writer);

bool gguf_writer_set_alignment(gguf_writer *w, uint32_t alignment, corral_error *err);
bool gguf_writer_add_scalar(gguf_writer *w, const char *key, enum gguf_type type,
                            const void *value, corral_error *err);
bool gguf_writer_add_u32(gguf_writer *w, const char *key, uint32_t v, corral_error *err);
bool gguf_writer_add_f32(gguf_writer *w, const char *key, float v, corral_error *err);
bool gguf_writer_add_bool(gguf_writer *w, const char *key, bool v, corral_error *err);
bool gguf_writer_add_str(gguf_writer *w, const char *key, const char *value, size_t size,
                         corral_error *err);
/* Numeric array: n elements of elem_type packed in values (copied). */
bool gguf_writer_add_array(gguf_writer *w, const char *key, enum gguf_type elem_type,
                           const void *values, uint64_t n, corral_error *err);
bool gguf_writer_add_str_array(gguf_writer *w, const char *key, const gguf_str *values,
                               uint64_t n, corral_error *err);
/* Copy a metadata pair (any type) from a reader, e.g. to carry a tokenizer over. */
bool gguf_writer_copy_kv(gguf_writer *w, const gguf_kv *kv, corral_error *err);

bool gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                            const int64_t *ne, corral_error *err);

bool gguf_writer_begin(gguf_writer *w, const char *path, corral_error *err);
/* Bytes of the next declared tensor (exactly its size). May be called in several pieces. */
bool gguf_writer_write_tensor(gguf_writer *w, const void *data, size_t size, corral_error *err);
bool gguf_writer_finish(gguf_writer *w, corral_error *err);

#endif

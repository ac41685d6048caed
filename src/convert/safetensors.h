/*
 * Safetensors reader: one file of a Hugging Face checkpoint, mapped read-only.
 *
 * The format is an 8-byte little-endian header length, a JSON object of
 * {"name": {"dtype", "shape", "data_offsets": [begin, end]}} (plus an optional "__metadata__"
 * object of strings), then the tensor data, offsets counting from the end of the header.
 * Every field is checked before safetensors_open returns: the header's size against
 * SAFETENSORS_MAX_HEADER_BYTES and the file, each dtype (F32, F16, BF16, U8 and I64 are
 * read), each shape's element count times the dtype's size against its offsets
 * (overflow-checked), each range inside the data and no two ranges overlapping. After that
 * every tensor's data pointer and size can be trusted. Tensors are listed sorted by name.
 */
#ifndef CORRAL_CONVERT_SAFETENSORS_H
#define CORRAL_CONVERT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "corral/error.h"

#define SAFETENSORS_MAX_HEADER_BYTES ((uint64_t)100 << 20) /* the format's own reference cap */
#define SAFETENSORS_MAX_DIMS 8u
#define SAFETENSORS_MAX_NAME_BYTES 1024u
#define SAFETENSORS_MAX_TENSORS 1048576u

typedef enum safetensors_dtype {
    SAFETENSORS_F32,
    SAFETENSORS_F16,
    SAFETENSORS_BF16,
    SAFETENSORS_U8, /* bytes: gpt-oss's MXFP4 blocks and scales, never read as numbers */
    SAFETENSORS_I64, /* integers: a BERT's position ids, which conversion leaves out */
} safetensors_dtype;

typedef struct safetensors_tensor {
    char *name;
    safetensors_dtype dtype;
    uint32_t n_dims;                      /* 0 for a scalar */
    uint64_t shape[SAFETENSORS_MAX_DIMS]; /* outermost first, as PyTorch lists it */
    uint64_t n_elems;
    const uint8_t *data;                  /* in the map */
    size_t size_bytes;
} safetensors_tensor;

typedef struct safetensors_file safetensors_file;

/* Map and validate path; NULL with err set (naming the file) on any problem. */
safetensors_file *safetensors_open(const char *path, corral_error *err);

/* Validate an image already in memory (tests, fuzzing); bytes must outlive the result. */
safetensors_file *safetensors_open_memory(const void *bytes, size_t size, const char *name,
                                          corral_error *err);

void safetensors_close(safetensors_file *file);

size_t safetensors_count(const safetensors_file *file);
const safetensors_tensor *safetensors_at(const safetensors_file *file, size_t i);
const safetensors_tensor *safetensors_find(const safetensors_file *file, const char *name);

/* Bytes per element of a dtype. */
size_t safetensors_dtype_size(safetensors_dtype dtype);

#endif

/*
 * libFuzzer target for the safetensors reader: any byte string must either be rejected with a
 * message or yield tensors whose every byte lies inside the input, found again by name.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "convert/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    corral_error err;
    safetensors_file *f = safetensors_open_memory(data, size, "fuzz.safetensors", &err);
    if (!f) {
        if (strlen(err.message) == 0)
            __builtin_trap();
        return 0;
    }
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < safetensors_count(f); i++) {
        const safetensors_tensor *t = safetensors_at(f, i);
        if (t->data < data || t->size_bytes > size ||
            (size_t)(t->data - data) > size - t->size_bytes ||
            t->size_bytes != t->n_elems * safetensors_dtype_size(t->dtype) ||
            safetensors_find(f, t->name) != t)
            __builtin_trap();
        for (size_t b = 0; b < t->size_bytes; b++)
            sink ^= t->data[b];
    }
    (void)sink;
    safetensors_close(f);
    return 0;
}

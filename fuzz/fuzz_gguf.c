/*
 * libFuzzer target for the GGUF reader: any byte string must either be rejected with a
 * message or yield a file whose every key, value and tensor can be read without a fault.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    corral_error err;
    gguf_file *f = gguf_open_memory(data, size, "fuzz.gguf", &err);
    if (!f) {
        /* a rejection must carry a message */
        if (strlen(err.message) == 0)
            __builtin_trap();
        return 0;
    }
    volatile uint64_t sink = 0;
    for (size_t i = 0; i < gguf_n_kv(f); i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        for (uint64_t j = 0; j < kv->n; j++) {
            if (kv->elem_type == GGUF_TYPE_STRING)
                sink += gguf_kv_str(kv, j).size;
            else if (kv->elem_type == GGUF_TYPE_FLOAT32 || kv->elem_type == GGUF_TYPE_FLOAT64)
                sink += (uint64_t)(gguf_kv_f64(kv, j) != 0);
            else
                sink += gguf_kv_u64(kv, j);
        }
        if (gguf_find_kv(f, kv->key) != kv)
            __builtin_trap();
    }
    uint32_t u32;
    gguf_get_u32(f, "general.alignment", &u32, &err);
    for (size_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        const uint8_t *p = t->data;
        if (t->size_bytes)
            sink += p[0] + p[t->size_bytes - 1];
        if (gguf_find_tensor(f, t->name) != t)
            __builtin_trap();
    }
    (void)sink;
    gguf_close(f);
    return 0;
}

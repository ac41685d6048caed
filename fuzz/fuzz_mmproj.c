/*
 * libFuzzer target for projector files: any GGUF must either be refused with a message or
 * give a projector whose parameters read back sane; a small tower (a few layers, narrow,
 * few patches, so that a run stays fast) also encodes an image of the size it takes.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "mmproj.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    corral_error err;
    gguf_file *file = gguf_open_memory(data, size, "fuzz-mmproj.gguf", &err);
    corral_mmproj *mm = file ? mmproj_open(file, &err) : NULL;
    if (!mm) {
        if (strlen(err.message) == 0)
            __builtin_trap();
        return 0;
    }
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    if (params.patch_size == 0 || params.image_size < params.patch_size ||
        !corral_mmproj_image_begin(mm) || !corral_mmproj_image_end(mm))
        __builtin_trap();
    const vision_hparams *hp = &mm->hp;
    uint32_t side = params.resize == CORRAL_IMAGE_SMART ? params.align : params.image_size;
    uint64_t patches = (uint64_t)(side / hp->patch_size) * (side / hp->patch_size);
    if (hp->n_layer <= 4 && hp->n_embd <= 256 && hp->n_ff <= 1024 && patches <= 64 &&
        side <= 256) {
        float *pixels = calloc((size_t)side * side * 3, sizeof *pixels);
        corral_image_embd embd;
        if (pixels && corral_mmproj_encode(mm, pixels, side, side, 1, &embd, &err)) {
            if (embd.n_tokens == 0 || embd.n_embd != hp->n_embd_text)
                __builtin_trap();
            corral_image_embd_free(&embd);
        }
        free(pixels);
    }
    corral_mmproj_free(mm);
    return 0;
}

/*
 * libFuzzer target for the Gemma 4 audio tower in a model file: any GGUF must either carry
 * no tower, be refused with a message, or give a tower whose hyper-parameters read back sane
 * and whose token and byte counts grow with the clip without overflowing; a small tower
 * also encodes a few short clips of generated log-mel frames, and where every one of its
 * weights is a modest value, its embeddings must be finite.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "audio_gemma4.h"
#include "gguf.h"
#include "quant.h"

#define MEL_BINS 128
/* The longest clip the tower takes: 30 seconds of 10 ms frames. */
#define MAX_FRAMES 3000
/* Weights of at most this size cannot carry a small tower's sums past a float's range. */
#define MODEST_WEIGHT 64.0f

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_hparams(const audio_tower_hparams *hp)
{
    if (hp->n_layer == 0 || hp->n_embd == 0 || hp->n_head == 0 || hp->n_embd % hp->n_head != 0 ||
        hp->n_embd % 2 != 0 || hp->n_ff == 0 || hp->kernel == 0 || hp->kernel > 64 ||
        hp->conv0_channels == 0 || hp->conv1_channels == 0 || hp->n_proj == 0 ||
        hp->n_embd_text == 0 || !(hp->eps > 0.0f))
        __builtin_trap();
}

/* Tokens never shrink as frames grow, one frame gives a token, none gives none, and the
 * bytes of a clip are its tokens' rows or UINT64_MAX, never a wrapped count. */
static void check_counts(const corral_audio_tower *t, const audio_tower_hparams *hp)
{
    if (corral_audio_tower_tokens(t, 0) != 0 || corral_audio_tower_tokens(t, 1) != 1)
        __builtin_trap();
    size_t before = 0;
    for (size_t n = 0; n <= MAX_FRAMES + 1; n++) {
        size_t tokens = corral_audio_tower_tokens(t, n);
        if (tokens < before || tokens > n)
            __builtin_trap();
        before = tokens;
    }
    const size_t probes[] = {MAX_FRAMES, SIZE_MAX / 2, SIZE_MAX};
    for (size_t i = 0; i < sizeof probes / sizeof *probes; i++) {
        uint64_t bytes = corral_audio_tower_clip_bytes(t, probes[i]), want;
        uint64_t tokens = corral_audio_tower_tokens(t, probes[i]);
        bool wraps = __builtin_mul_overflow(tokens, (uint64_t)hp->n_embd_text * sizeof(float),
                                            &want);
        if (wraps ? bytes != UINT64_MAX : bytes != want)
            __builtin_trap();
    }
}

/* Whether every tensor of the tower in file (a.*, mm.a.*) holds finite values no larger than
 * MODEST_WEIGHT, in a type the engine reads. */
static bool modest_weights(const gguf_file *file)
{
    bool modest = true;
    float *row = NULL;
    for (size_t i = 0; modest && i < gguf_n_tensors(file); i++) {
        const gguf_tensor *g = gguf_tensor_at(file, i);
        if (strncmp(g->name, "a.", 2) != 0 && strncmp(g->name, "mm.a.", 5) != 0)
            continue;
        const quant_ops *ops = quant_ops_active(g->type);
        size_t width = (size_t)g->ne[0], rows = gguf_tensor_n_elems(g) / width;
        float *grown = realloc(row, width * sizeof *row);
        modest = ops && ops->dequantize && (uintptr_t)g->data % sizeof(float) == 0 && grown;
        row = grown ? grown : row;
        for (size_t r = 0; modest && r < rows; r++) {
            ops->dequantize((const uint8_t *)g->data + r * (g->size_bytes / rows), row, width);
            for (size_t k = 0; modest && k < width; k++)
                modest = fabsf(row[k]) <= MODEST_WEIGHT;
        }
    }
    free(row);
    return modest;
}

static void check_encode(const corral_audio_tower *t, const audio_tower_hparams *hp,
                         bool finite)
{
    corral_error err = {{0}};
    corral_image_embd embd;
    if (corral_audio_tower_encode(t, NULL, 0, 1, &embd, &err) || strlen(err.message) == 0)
        __builtin_trap();
    static const size_t frames[] = {1, 2, 3, 4, 5, 13, 31};
    float *mel = malloc(31 * MEL_BINS * sizeof *mel);
    if (!mel)
        return;
    /* log-mel-like values: a slow ramp and a ripple, from -8 to about 2 */
    for (size_t i = 0; i < 31 * MEL_BINS; i++)
        mel[i] = -8.0f + (float)(i % 97) * 0.1f + (float)(i / MEL_BINS) * 0.01f;
    for (size_t f = 0; f < sizeof frames / sizeof *frames; f++) {
        err.message[0] = '\0';
        if (!corral_audio_tower_encode(t, mel, frames[f], 1, &embd, &err)) {
            if (strlen(err.message) == 0)
                __builtin_trap();
            continue;
        }
        size_t tokens = corral_audio_tower_tokens(t, frames[f]);
        if (embd.n_tokens != tokens || embd.nx != tokens || embd.ny != 1 ||
            embd.n_embd != hp->n_embd_text || !embd.causal || !embd.data)
            __builtin_trap();
        for (size_t i = 0; finite && i < tokens * hp->n_embd_text; i++)
            if (!isfinite(embd.data[i]))
                __builtin_trap();
        corral_image_embd_free(&embd);
    }
    free(mel);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    corral_error err = {{0}};
    bool absent = false;
    gguf_file *file = gguf_open_memory(data, size, "fuzz-audio-tower.gguf", &err);
    /* read before the tower takes the file */
    bool finite = file && modest_weights(file);
    corral_audio_tower *t = file ? audio_tower_open(file, &absent, &err) : NULL;
    if (!t) {
        if (!absent && strlen(err.message) == 0)
            __builtin_trap();
        return 0;
    }
    audio_tower_hparams hp;
    audio_tower_hparams_get(t, &hp);
    check_hparams(&hp);
    check_counts(t, &hp);
    if (hp.n_layer <= 4 && hp.n_embd <= 256 && hp.n_ff <= 1024 && hp.conv0_channels <= 64 &&
        hp.conv1_channels <= 64 && hp.n_proj <= 1024 && hp.n_embd_text <= 1024)
        check_encode(t, &hp, finite);
    corral_audio_tower_free(t);
    return 0;
}

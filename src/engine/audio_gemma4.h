/*
 * The audio tower's entry points inside the engine (corral_audio_tower, audio_gemma4.c): a
 * tower from a GGUF already open, whatever holds its bytes, and the hyper-parameters a loaded
 * tower runs with, for the fuzzer (fuzz/fuzz_audio_tower.c) to check.
 */
#ifndef CORRAL_ENGINE_AUDIO_GEMMA4_H
#define CORRAL_ENGINE_AUDIO_GEMMA4_H

#include <stdbool.h>
#include <stdint.h>

#include "corral/engine.h"
#include "gguf.h"

/* kernel: the depthwise convolution's taps; conv0_channels, conv1_channels: the two
 * subsampling convolutions' outputs; n_proj: mm.a.fc's width */
typedef struct audio_tower_hparams {
    uint32_t n_layer, n_embd, n_head, n_ff, kernel;
    uint32_t conv0_channels, conv1_channels, n_proj, n_embd_text;
    float eps;
} audio_tower_hparams;

/* The tower in file, as corral_audio_tower_load gives one from a path; file is closed on
 * every path but success, where the tower owns it. */
corral_audio_tower *audio_tower_open(gguf_file *file, bool *absent, corral_error *err);

void audio_tower_hparams_get(const corral_audio_tower *tower, audio_tower_hparams *out);

#endif

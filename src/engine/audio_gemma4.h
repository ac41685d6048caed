/*
 * The audio tower's entry points inside the engine (corral_audio_tower, audio_gemma4.c): a
 * tower from a GGUF already open, whatever holds its bytes, and the hyper-parameters a loaded
 * tower runs with, for the fuzzer (fuzz/fuzz_audio_tower.c) to check; and a conformer
 * block's weights as the tower binds them, which a GPU backend takes too (gpu_audio.h).
 */
#ifndef CORRAL_ENGINE_AUDIO_GEMMA4_H
#define CORRAL_ENGINE_AUDIO_GEMMA4_H

#include <stdbool.h>
#include <stdint.h>

#include "corral/engine.h"
#include "gguf.h"
#include "model.h"

/* A matrix and the bounds of its product's input and output (lo, hi each; an unbounded
 * side: -FLT_MAX, FLT_MAX). */
typedef struct audio_linear {
    weight w;
    float in_lo, in_hi, out_lo, out_hi;
} audio_linear;

/* A conformer block's weights (vectors F32). */
typedef struct audio_layer {
    weight ffn_norm, ffn_post_norm, ffn_norm_1, ffn_post_norm_1;
    audio_linear ffn_up, ffn_down, ffn_up_1, ffn_down_1;
    weight attn_norm, q_scale, k_scale, attn_post_norm; /* k_scale: absent in some blocks */
    audio_linear wq, wk, wv, wo, rel_k;
    weight conv_norm, conv_post_norm;
    audio_linear conv_pw1, conv_pw2;
    float *conv_dw; /* [channel][kernel] */
    weight out_norm;
} audio_layer;

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

/*
 * The log-mel features Gemma 4's audio tower takes, as transformers' Gemma 4 feature extractor
 * makes them for one clip: 16 kHz samples in 20 ms frames every 10 ms, the first frame
 * centred on the first sample by half a window of silence in front; each frame under a
 * periodic Hann window, zero-filled to a 512-point FFT; the magnitudes (not the power)
 * through 128 triangular HTK-mel filters from 0 to 8 kHz without area normalisation; the
 * natural log of each sum plus 0.001. No pre-emphasis, no normalisation per bin.
 * llama.cpp's "gemma4a" preprocessing takes the log of the sum floored at 0.001 instead,
 * which differs only where a bin is near silence; the extractor is what the model was
 * trained on.
 */
#ifndef CORRAL_AUDIO_MEL_H
#define CORRAL_AUDIO_MEL_H

#include <stddef.h>
#include <stdint.h>

#include "corral/error.h"

#define AUDIO_MEL_RATE 16000
#define AUDIO_MEL_BINS 128
#define AUDIO_MEL_WINDOW 320
#define AUDIO_MEL_HOP 160
#define AUDIO_MEL_FFT 512

/* Log-mel frames: n_frames rows of n_mel values, frame after frame. */
typedef struct audio_mel {
    float *data;
    size_t n_frames;
    uint32_t n_mel;
} audio_mel;

/* The frames n_samples samples give (0: too few for one frame). */
size_t audio_mel_frames(size_t n_samples);

/* The features of n_samples samples at AUDIO_MEL_RATE; NULL with err when they give no
 * frame or memory runs out. */
audio_mel *audio_mel_compute(const float *samples, size_t n_samples, corral_error *err);
void audio_mel_free(audio_mel *mel);

#endif

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
 *
 * The tower is made for clips of up to 30 seconds. A longer clip is cut, as llama.cpp's mtmd
 * cuts it for this tower, into segments of 30 seconds of samples (the last one shorter),
 * without overlap, before any framing: each segment's frames are made as for a clip of its
 * own (half a window of silence in front of it), so the frames of a clip's first 30 seconds
 * are those of that 30-second clip alone. A last segment too short for one frame (under
 * AUDIO_MEL_WINDOW / 2 + 1 samples, 10 ms) gives none and is left out, where mtmd makes one
 * frame of it.
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
/* The samples of one segment: 30 seconds */
#define AUDIO_MEL_SEGMENT_SAMPLES (30 * AUDIO_MEL_RATE)

/* Log-mel frames: n_frames rows of n_mel values, frame after frame, segment after segment;
 * segment s's segment_frames[s] rows follow the rows of the segments before it. */
typedef struct audio_mel {
    float *data;
    size_t n_frames;
    uint32_t n_mel;
    size_t n_segments;
    size_t *segment_frames;
} audio_mel;

/* The segments n_samples samples are cut into (the ones that give a frame), and the frames
 * segment s of them gives (0 past the last). */
size_t audio_mel_segments(size_t n_samples);
size_t audio_mel_segment_frames(size_t n_samples, size_t s);

/* The frames n_samples samples give, all segments' (0: too few for one frame). */
size_t audio_mel_frames(size_t n_samples);

/* The features of n_samples samples at AUDIO_MEL_RATE, segment by segment; NULL with err when
 * they give no frame or memory runs out. */
audio_mel *audio_mel_compute(const float *samples, size_t n_samples, corral_error *err);
void audio_mel_free(audio_mel *mel);

#endif

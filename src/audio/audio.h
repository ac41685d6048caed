/*
 * Audio for the models with an audio tower: compressed bytes (WAV, FLAC, MP3) recognised by
 * their first bytes and decoded to mono float samples at the rate the tower takes. An Ogg
 * stream is recognised as audio and refused (decode.c says why).
 *
 * Every clip comes from a client, so decoding is bounded: the byte count is capped by the
 * caller (the runner's media cap), the header's channel count and rate are checked before any
 * sample memory grows, the samples read are counted against a duration cap as they arrive
 * (a header may lie about its length, and an MP3 has none), and a clip that does not decode,
 * or holds a sample that is not a finite number, is an error rather than silence.
 */
#ifndef CORRAL_AUDIO_AUDIO_H
#define CORRAL_AUDIO_AUDIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "corral/error.h"

/* The largest clip file a request may send (OpenAI's cap on a file to transcribe), and the
 * longest clip: the byte cap alone does not bound a clip's length (16-bit 16 kHz mono WAV
 * holds about 13 minutes in it, 32 kbit/s MP3 about 109, FLAC of near silence far more),
 * while its samples, features and embeddings grow with it; ten minutes is 15,000 of the
 * audio tower's tokens, more than most contexts hold. */
#define AUDIO_MAX_CLIP_BYTES (25u << 20)
#define AUDIO_MAX_CLIP_SECONDS 600.0

typedef enum audio_container {
    AUDIO_NOT_AUDIO,
    AUDIO_WAV,  /* RIFF/WAVE: PCM 8/16/24/32-bit or float */
    AUDIO_FLAC, /* native FLAC ("fLaC") */
    AUDIO_MP3,  /* an ID3 tag or an MPEG audio frame sync */
    AUDIO_OGG,  /* an Ogg stream: recognised, not decoded */
} audio_container;

/* The container data's first bytes name, or AUDIO_NOT_AUDIO (an image, or anything else). */
audio_container audio_sniff(const uint8_t *data, size_t len);

/* "WAV", "FLAC", "MP3", "Ogg" (or "not audio"). */
const char *audio_container_name(audio_container c);

/* Decoded audio: n_samples mono samples at rate samples a second, in [-1, 1] for integer
 * sources (a float WAV keeps its values). */
typedef struct audio_pcm {
    float *samples;
    size_t n_samples;
    uint32_t rate;
} audio_pcm;

/* data (len bytes) decoded, its channels averaged into one and resampled to rate; a clip
 * longer than max_seconds is refused, as is one with no samples, an Ogg one, and one whose
 * content is not the format its first bytes name. NULL with err. */
audio_pcm *audio_decode(const uint8_t *data, size_t len, uint32_t rate, double max_seconds,
                        corral_error *err);
void audio_pcm_free(audio_pcm *pcm);

#endif

/*
 * libFuzzer target for the audio decoding (WAV, FLAC and MP3 through libsndfile, and the
 * resampler) and the log-mel frames after it: any byte string must either be refused with a
 * message or decode to finite samples no longer than the cap, which then make frames of
 * finite values (or are refused as too short, with a message), and nothing may leak. The cap
 * is shorter than the runner's so each input stays fast. Seeds (fuzz/seeds/audio): 50 ms
 * tones written by libsndfile 1.2.0 (16-bit WAV at 16 kHz, stereo float WAV at 22.05 kHz,
 * FLAC, MP3).
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "audio/audio.h"
#include "audio/mel.h"

#define MAX_SECONDS 2.0

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    corral_error err = {{0}};
    audio_pcm *pcm = audio_decode(data, size, AUDIO_MEL_RATE, MAX_SECONDS, &err);
    if (!pcm) {
        if (strlen(err.message) == 0)
            __builtin_trap();
        return 0;
    }
    /* the resampler may round up by a few samples, never more */
    if (pcm->n_samples == 0 || pcm->n_samples > (size_t)(MAX_SECONDS * AUDIO_MEL_RATE) + 64 ||
        pcm->rate != AUDIO_MEL_RATE)
        __builtin_trap();
    for (size_t i = 0; i < pcm->n_samples; i++)
        if (!isfinite(pcm->samples[i]))
            __builtin_trap();
    audio_mel *mel = audio_mel_compute(pcm->samples, pcm->n_samples, &err);
    if (!mel && strlen(err.message) == 0)
        __builtin_trap();
    if (mel) {
        if (mel->n_frames != audio_mel_frames(pcm->n_samples) || mel->n_mel != AUDIO_MEL_BINS)
            __builtin_trap();
        for (size_t i = 0; i < mel->n_frames * mel->n_mel; i++)
            if (!isfinite(mel->data[i]))
                __builtin_trap();
    }
    audio_mel_free(mel);
    audio_pcm_free(pcm);
    return 0;
}

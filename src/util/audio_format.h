/*
 * Which audio container a file's first bytes announce: the formats a client may send as a
 * media item beside images (WAV, MP3, FLAC, Ogg). Only the signature is read; whether the
 * rest decodes is the decoder's business.
 */
#ifndef CORRAL_UTIL_AUDIO_FORMAT_H
#define CORRAL_UTIL_AUDIO_FORMAT_H

#include <stddef.h>
#include <stdint.h>

/* "wav" (RIFF....WAVE), "mp3" (an ID3v2 tag, or an MPEG audio frame header), "flac" (fLaC)
 * or "ogg" (OggS); NULL when the bytes start none of them. */
const char *util_audio_format(const uint8_t *bytes, size_t len);

#endif

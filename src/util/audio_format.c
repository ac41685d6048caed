/*
 * Audio containers told apart by their signatures (audio_format.h).
 */
#include "util/audio_format.h"

#include <stdbool.h>
#include <string.h>

/*
 * An MPEG audio frame header: 11 sync bits, then fields of which some values are reserved.
 * Checking those keeps other binary data that happens to start with 0xFF 0xE0 (or more) from
 * passing for audio.
 */
static bool mpeg_frame_header(const uint8_t *b, size_t len)
{
    if (len < 4 || b[0] != 0xFF || (b[1] & 0xE0) != 0xE0)
        return false;
    unsigned version = (b[1] >> 3) & 3, layer = (b[1] >> 1) & 3;
    unsigned bitrate = b[2] >> 4, rate = (b[2] >> 2) & 3;
    return version != 1 && layer != 0 && bitrate != 15 && rate != 3;
}

const char *util_audio_format(const uint8_t *bytes, size_t len)
{
    if (len >= 12 && memcmp(bytes, "RIFF", 4) == 0 && memcmp(bytes + 8, "WAVE", 4) == 0)
        return "wav";
    if ((len >= 10 && memcmp(bytes, "ID3", 3) == 0) || mpeg_frame_header(bytes, len))
        return "mp3";
    if (len >= 4 && memcmp(bytes, "fLaC", 4) == 0)
        return "flac";
    if (len >= 4 && memcmp(bytes, "OggS", 4) == 0)
        return "ogg";
    return NULL;
}

/*
 * Audio decoding (audio.h): the container recognised from its first bytes, libsndfile reading
 * it from memory through a virtual file, the channels averaged, and libsamplerate bringing
 * the samples to the tower's rate.
 */
#include "audio/audio.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <samplerate.h>
#include <sndfile.h>

/* Beyond these a header is hostile or exotic: no real clip has more channels or samples a
 * second, and the limits keep a frame's bytes and the resampling ratio small. */
#define AUDIO_MAX_CHANNELS 16
#define AUDIO_MAX_RATE 384000
#define AUDIO_MIN_RATE 1000

/* Frames read at a time. */
#define READ_FRAMES 4096

static bool is_mpeg_frame_sync(const uint8_t *p)
{
    /* 11 set sync bits, then a version, layer, bitrate and rate that are not the reserved or
     * "bad" values: a JPEG's 0xFF 0xD8 marker fails the sync bits */
    return p[0] == 0xFF && (p[1] & 0xE0) == 0xE0 && ((p[1] >> 3) & 3) != 1 &&
           ((p[1] >> 1) & 3) != 0 && (p[2] >> 4) != 0xF && ((p[2] >> 2) & 3) != 3;
}

audio_container audio_sniff(const uint8_t *data, size_t len)
{
    if (!data)
        return AUDIO_NOT_AUDIO;
    if (len >= 12 && memcmp(data, "RIFF", 4) == 0 && memcmp(data + 8, "WAVE", 4) == 0)
        return AUDIO_WAV;
    if (len >= 4 && memcmp(data, "fLaC", 4) == 0)
        return AUDIO_FLAC;
    if (len >= 4 && memcmp(data, "OggS", 4) == 0)
        return AUDIO_OGG;
    if (len >= 3 && memcmp(data, "ID3", 3) == 0)
        return AUDIO_MP3;
    if (len >= 4 && is_mpeg_frame_sync(data))
        return AUDIO_MP3;
    return AUDIO_NOT_AUDIO;
}

const char *audio_container_name(audio_container c)
{
    switch (c) {
    case AUDIO_WAV:
        return "WAV";
    case AUDIO_FLAC:
        return "FLAC";
    case AUDIO_MP3:
        return "MP3";
    case AUDIO_OGG:
        return "Ogg";
    case AUDIO_NOT_AUDIO:
        break;
    }
    return "not audio";
}

/* The bytes libsndfile reads through its virtual file. */
typedef struct memory_file {
    const uint8_t *data;
    sf_count_t len;
    sf_count_t at;
} memory_file;

static sf_count_t memory_length(void *user)
{
    return ((memory_file *)user)->len;
}

static sf_count_t memory_seek(sf_count_t offset, int whence, void *user)
{
    memory_file *f = user;
    sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? f->at : f->len;
    /* a seek outside the bytes is refused, and the sum cannot overflow: both are below 2^62 */
    if (offset < -f->len || offset > f->len || base + offset < 0 || base + offset > f->len)
        return -1;
    f->at = base + offset;
    return f->at;
}

static sf_count_t memory_read(void *ptr, sf_count_t count, void *user)
{
    memory_file *f = user;
    if (count < 0)
        return 0;
    sf_count_t n = f->len - f->at < count ? f->len - f->at : count;
    memcpy(ptr, f->data + f->at, (size_t)n);
    f->at += n;
    return n;
}

static sf_count_t memory_write(const void *ptr, sf_count_t count, void *user)
{
    (void)ptr, (void)count, (void)user;
    return 0; /* opened for reading only */
}

static sf_count_t memory_tell(void *user)
{
    return ((memory_file *)user)->at;
}

void audio_pcm_free(audio_pcm *pcm)
{
    if (!pcm)
        return;
    free(pcm->samples);
    free(pcm);
}

/* All of the file's frames averaged to mono, at most max_frames of them. */
static float *read_mono(SNDFILE *sf, int channels, size_t max_frames, double max_seconds,
                        size_t *n_out, corral_error *err)
{
    float *frame = malloc((size_t)READ_FRAMES * (size_t)channels * sizeof *frame);
    size_t cap = READ_FRAMES, n = 0;
    float *mono = malloc(cap * sizeof *mono);
    if (!frame || !mono) {
        corral_error_set(err, "out of memory");
        goto fail;
    }
    for (;;) {
        sf_count_t got = sf_readf_float(sf, frame, READ_FRAMES);
        if (got <= 0)
            break;
        if ((size_t)got > max_frames - n) {
            corral_error_set(err, "audio longer than %g seconds", max_seconds);
            goto fail;
        }
        if (n + (size_t)got > cap) {
            size_t want = cap * 2 < max_frames ? cap * 2 : max_frames;
            float *grown = realloc(mono, want * sizeof *mono);
            if (!grown) {
                corral_error_set(err, "out of memory");
                goto fail;
            }
            mono = grown;
            cap = want;
        }
        for (sf_count_t i = 0; i < got; i++) {
            double sum = 0.0;
            for (int c = 0; c < channels; c++)
                sum += frame[(size_t)i * (size_t)channels + (size_t)c];
            float v = (float)(sum / channels);
            if (!isfinite(v)) {
                corral_error_set(err, "audio holds a sample that is not a finite number");
                goto fail;
            }
            mono[n++] = v;
        }
    }
    if (sf_error(sf) != SF_ERR_NO_ERROR) {
        corral_error_set(err, "cannot decode audio: %s", sf_strerror(sf));
        goto fail;
    }
    free(frame);
    *n_out = n;
    return mono;
fail:
    free(frame);
    free(mono);
    return NULL;
}

/* in (n samples at from) at rate to; *n_out samples. */
static float *resample(const float *in, size_t n, uint32_t from, uint32_t to, size_t *n_out,
                       corral_error *err)
{
    double ratio = (double)to / from;
    /* n is bounded by the duration cap and the ratio by the rate limits: no overflow */
    size_t cap = (size_t)ceil((double)n * ratio) + 16;
    float *out = malloc(cap * sizeof *out);
    if (!out) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    SRC_DATA d = {.data_in = in, .data_out = out, .input_frames = (long)n,
                  .output_frames = (long)cap, .src_ratio = ratio};
    int rc = src_simple(&d, SRC_SINC_MEDIUM_QUALITY, 1);
    if (rc != 0) {
        corral_error_set(err, "cannot resample audio: %s", src_strerror(rc));
        free(out);
        return NULL;
    }
    *n_out = (size_t)d.output_frames_gen;
    return out;
}

/* The libsndfile major format a container must open as: its guess reads past an ID3 tag
 * and would take whatever follows, an Ogg stream too. */
static int major_format(audio_container kind)
{
    return kind == AUDIO_WAV ? SF_FORMAT_WAV : kind == AUDIO_FLAC ? SF_FORMAT_FLAC : SF_FORMAT_MPEG;
}

audio_pcm *audio_decode(const uint8_t *data, size_t len, uint32_t rate, double max_seconds,
                        corral_error *err)
{
    audio_container kind = audio_sniff(data, len);
    if (kind == AUDIO_NOT_AUDIO) {
        corral_error_set(err, "not a WAV, FLAC, MP3 or Ogg file");
        return NULL;
    }
    /* libvorbis leaks memory on some broken streams (found by fuzz_audio): a client could
     * grow the runner without end, so Ogg is recognised but not decoded */
    if (kind == AUDIO_OGG) {
        corral_error_set(err, "Ogg audio is not supported: send WAV, FLAC or MP3");
        return NULL;
    }
    if (len > (size_t)INT64_MAX / 4) {
        corral_error_set(err, "audio file too large");
        return NULL;
    }
    memory_file file = {.data = data, .len = (sf_count_t)len};
    SF_VIRTUAL_IO io = {.get_filelen = memory_length, .seek = memory_seek, .read = memory_read,
                        .write = memory_write, .tell = memory_tell};
    SF_INFO info;
    memset(&info, 0, sizeof info);
    SNDFILE *sf = sf_open_virtual(&io, SFM_READ, &info, &file);
    if (!sf) {
        corral_error_set(err, "cannot decode %s audio: %s", audio_container_name(kind),
                         sf_strerror(NULL));
        return NULL;
    }
    audio_pcm *pcm = NULL;
    float *mono = NULL;
    size_t n = 0;
    if ((info.format & SF_FORMAT_TYPEMASK) != major_format(kind)) {
        corral_error_set(err, "cannot decode %s audio: its content is another format",
                         audio_container_name(kind));
        goto done;
    }
    if (info.channels < 1 || info.channels > AUDIO_MAX_CHANNELS) {
        corral_error_set(err, "%s audio has %d channels; at most %d are taken",
                         audio_container_name(kind), info.channels, AUDIO_MAX_CHANNELS);
        goto done;
    }
    if (info.samplerate < AUDIO_MIN_RATE || info.samplerate > AUDIO_MAX_RATE) {
        corral_error_set(err, "%s audio at %d samples a second; %d to %d are taken",
                         audio_container_name(kind), info.samplerate, AUDIO_MIN_RATE,
                         AUDIO_MAX_RATE);
        goto done;
    }
    size_t max_frames = (size_t)(max_seconds * info.samplerate);
    if (!(mono = read_mono(sf, info.channels, max_frames, max_seconds, &n, err)))
        goto done;
    if (n == 0) {
        corral_error_set(err, "%s audio holds no samples", audio_container_name(kind));
        goto done;
    }
    if (!(pcm = calloc(1, sizeof *pcm))) {
        corral_error_set(err, "out of memory");
        goto done;
    }
    pcm->rate = rate;
    if ((uint32_t)info.samplerate == rate) {
        pcm->samples = mono;
        pcm->n_samples = n;
        mono = NULL;
    } else if (!(pcm->samples = resample(mono, n, (uint32_t)info.samplerate, rate,
                                         &pcm->n_samples, err))) {
        free(pcm);
        pcm = NULL;
    }
done:
    free(mono);
    sf_close(sf);
    return pcm;
}

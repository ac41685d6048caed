/*
 * Audio decoding (src/audio): containers told from images by their first bytes; WAV files
 * made by hand here (16-bit, 24-bit stereo, float) decoded to their exact samples; FLAC and
 * MP3 files written by libsndfile's own encoders in memory decoded to the signal they carry;
 * other rates resampled to the tower's; Ogg (libsndfile's Vorbis encoder) recognised and
 * refused, as is an Ogg stream behind an ID3 tag; hostile headers (too many channels, a wild
 * rate, no samples, a non-finite sample, garbage after a magic) and clips over the duration
 * cap refused with a message.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sndfile.h>

#include "audio/audio.h"

/* ---- hand-made WAV files ---- */

typedef struct bytes {
    uint8_t *data;
    size_t len, cap;
} bytes;

static void put(bytes *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        b->data = realloc(b->data, b->cap);
        assert_non_null(b->data);
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

static void put_u16(bytes *b, uint16_t v)
{
    uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    put(b, x, 2);
}

static void put_u32(bytes *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, x, 4);
}

/* A WAV header (format 1 PCM or 3 float) for data_bytes of sample data, which follows. */
static void wav_header(bytes *b, uint16_t format, uint16_t channels, uint32_t rate,
                       uint16_t bits, uint32_t data_bytes)
{
    put(b, "RIFF", 4);
    put_u32(b, 36 + data_bytes);
    put(b, "WAVEfmt ", 8);
    put_u32(b, 16);
    put_u16(b, format);
    put_u16(b, channels);
    put_u32(b, rate);
    put_u32(b, rate * channels * (bits / 8u));
    put_u16(b, (uint16_t)(channels * (bits / 8u)));
    put_u16(b, bits);
    put(b, "data", 4);
    put_u32(b, data_bytes);
}

static audio_pcm *decodes(const bytes *b, uint32_t rate, double max_seconds)
{
    corral_error err = {{0}};
    audio_pcm *pcm = audio_decode(b->data, b->len, rate, max_seconds, &err);
    if (!pcm)
        fail_msg("decode failed: %s", err.message);
    return pcm;
}

static void expect_refused(const bytes *b, double max_seconds, const char *needle)
{
    corral_error err = {{0}};
    audio_pcm *pcm = audio_decode(b->data, b->len, 16000, max_seconds, &err);
    if (pcm)
        fail_msg("decoded %zu samples, expected \"%s\"", pcm->n_samples, needle);
    if (!strstr(err.message, needle))
        fail_msg("error \"%s\" does not say \"%s\"", err.message, needle);
}

static void test_sniff(void **state)
{
    (void)state;
    static const uint8_t wav[12] = "RIFF\0\0\0\0WAVE", webp[12] = "RIFF\0\0\0\0WEBP";
    static const uint8_t flac[4] = "fLaC", ogg[4] = "OggS", id3[3] = "ID3";
    static const uint8_t mp3_sync[4] = {0xFF, 0xFB, 0x90, 0x00}; /* MPEG-1 layer III 128k */
    static const uint8_t jpeg[4] = {0xFF, 0xD8, 0xFF, 0xE0};
    static const uint8_t png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    static const uint8_t bad_rate[4] = {0xFF, 0xFB, 0x9C, 0x00}; /* reserved rate index */
    assert_int_equal(audio_sniff(wav, sizeof wav), AUDIO_WAV);
    assert_int_equal(audio_sniff(flac, sizeof flac), AUDIO_FLAC);
    assert_int_equal(audio_sniff(ogg, sizeof ogg), AUDIO_OGG);
    assert_int_equal(audio_sniff(id3, sizeof id3), AUDIO_MP3);
    assert_int_equal(audio_sniff(mp3_sync, sizeof mp3_sync), AUDIO_MP3);
    assert_int_equal(audio_sniff(webp, sizeof webp), AUDIO_NOT_AUDIO);
    assert_int_equal(audio_sniff(jpeg, sizeof jpeg), AUDIO_NOT_AUDIO);
    assert_int_equal(audio_sniff(png, sizeof png), AUDIO_NOT_AUDIO);
    assert_int_equal(audio_sniff(bad_rate, sizeof bad_rate), AUDIO_NOT_AUDIO);
    assert_int_equal(audio_sniff(wav, 11), AUDIO_NOT_AUDIO); /* too short to say */
    assert_int_equal(audio_sniff(NULL, 0), AUDIO_NOT_AUDIO);
}

static void test_wav_pcm16_exact(void **state)
{
    (void)state;
    static const int16_t samples[] = {0, 1, -1, 16384, -16384, 32767, -32768, 1234};
    size_t n = sizeof samples / sizeof *samples;
    bytes b = {0};
    wav_header(&b, 1, 1, 16000, 16, (uint32_t)(n * 2));
    for (size_t i = 0; i < n; i++)
        put_u16(&b, (uint16_t)samples[i]);
    audio_pcm *pcm = decodes(&b, 16000, 30.0);
    assert_int_equal(pcm->n_samples, n);
    assert_int_equal(pcm->rate, 16000);
    for (size_t i = 0; i < n; i++)
        assert_float_equal(pcm->samples[i], samples[i] / 32768.0f, 1e-7f);
    audio_pcm_free(pcm);
    free(b.data);
}

static void test_wav_pcm24_stereo_averaged(void **state)
{
    (void)state;
    /* left, right pairs: the mono sample is their mean */
    static const int32_t frames[][2] = {{0, 0}, {4194304, -4194304}, {4194304, 0},
                                        {-8388608, -8388608}, {8388607, 1}};
    size_t n = sizeof frames / sizeof *frames;
    bytes b = {0};
    wav_header(&b, 1, 2, 16000, 24, (uint32_t)(n * 6));
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < 2; c++) {
            uint32_t v = (uint32_t)frames[i][c];
            uint8_t x[3] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16)};
            put(&b, x, 3);
        }
    audio_pcm *pcm = decodes(&b, 16000, 30.0);
    assert_int_equal(pcm->n_samples, n);
    for (size_t i = 0; i < n; i++)
        assert_float_equal(pcm->samples[i],
                           (frames[i][0] + frames[i][1]) / 2.0f / 8388608.0f, 1e-6f);
    audio_pcm_free(pcm);
    free(b.data);
}

static void test_wav_float_kept(void **state)
{
    (void)state;
    static const float samples[] = {0.0f, 0.5f, -0.25f, 1.0f, -1.0f, 0.125f};
    size_t n = sizeof samples / sizeof *samples;
    bytes b = {0};
    wav_header(&b, 3, 1, 16000, 32, (uint32_t)(n * 4));
    put(&b, samples, sizeof samples);
    audio_pcm *pcm = decodes(&b, 16000, 30.0);
    assert_int_equal(pcm->n_samples, n);
    assert_memory_equal(pcm->samples, samples, sizeof samples);
    audio_pcm_free(pcm);
    free(b.data);
}

/* A 16-bit mono WAV of a sine at hz, seconds long at rate. */
static void sine_wav(bytes *b, uint32_t rate, double hz, double seconds)
{
    size_t n = (size_t)(rate * seconds);
    wav_header(b, 1, 1, rate, 16, (uint32_t)(n * 2));
    for (size_t i = 0; i < n; i++)
        put_u16(b, (uint16_t)(int16_t)lrint(16000.0 * sin(2 * M_PI * hz * i / rate)));
}

/* The largest difference between pcm's samples and the sine at hz (amplitude 16000 / 32768)
 * over its middle half, where the resampler's and encoders' edges do not reach. */
static double sine_error(const audio_pcm *pcm, double hz, size_t delay)
{
    double worst = 0.0;
    for (size_t i = pcm->n_samples / 4; i < pcm->n_samples * 3 / 4; i++) {
        double want = 16000.0 / 32768.0 * sin(2 * M_PI * hz * (double)(i - delay) / pcm->rate);
        worst = fmax(worst, fabs(pcm->samples[i] - want));
    }
    return worst;
}

static void test_wav_resampled(void **state)
{
    (void)state;
    bytes b = {0};
    sine_wav(&b, 48000, 440.0, 0.1);
    audio_pcm *pcm = decodes(&b, 16000, 30.0);
    assert_int_equal(pcm->rate, 16000);
    assert_true(pcm->n_samples >= 1598 && pcm->n_samples <= 1602);
    assert_true(sine_error(pcm, 440.0, 0) < 0.01);
    audio_pcm_free(pcm);
    free(b.data);
}

/* ---- files written by libsndfile's encoders into memory ---- */

typedef struct memory_out {
    bytes b;
    sf_count_t at;
} memory_out;

static sf_count_t out_length(void *user)
{
    return (sf_count_t)((memory_out *)user)->b.len;
}

static sf_count_t out_seek(sf_count_t offset, int whence, void *user)
{
    memory_out *m = user;
    sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? m->at : (sf_count_t)m->b.len;
    m->at = base + offset;
    return m->at;
}

static sf_count_t out_read(void *ptr, sf_count_t count, void *user)
{
    memory_out *m = user;
    sf_count_t left = (sf_count_t)m->b.len - m->at;
    sf_count_t n = count < left ? count : left;
    if (n <= 0)
        return 0;
    memcpy(ptr, m->b.data + m->at, (size_t)n);
    m->at += n;
    return n;
}

static sf_count_t out_write(const void *ptr, sf_count_t count, void *user)
{
    memory_out *m = user;
    size_t end = (size_t)m->at + (size_t)count;
    if (end > m->b.cap) {
        m->b.cap = end * 2;
        m->b.data = realloc(m->b.data, m->b.cap);
        assert_non_null(m->b.data);
    }
    if ((size_t)m->at > m->b.len)
        memset(m->b.data + m->b.len, 0, (size_t)m->at - m->b.len);
    memcpy(m->b.data + m->at, ptr, (size_t)count);
    m->at += count;
    if (end > m->b.len)
        m->b.len = end;
    return count;
}

static sf_count_t out_tell(void *user)
{
    return ((memory_out *)user)->at;
}

/* A sine at hz, seconds long at rate, in format (SF_FORMAT_*), as libsndfile writes it. */
static bytes encoded_sine(int format, int rate, double hz, double seconds)
{
    memory_out m = {0};
    SF_VIRTUAL_IO io = {.get_filelen = out_length, .seek = out_seek, .read = out_read,
                        .write = out_write, .tell = out_tell};
    SF_INFO info = {.samplerate = rate, .channels = 1, .format = format};
    SNDFILE *sf = sf_open_virtual(&io, SFM_WRITE, &info, &m);
    if (!sf)
        fail_msg("libsndfile cannot write format 0x%x: %s", format, sf_strerror(NULL));
    size_t n = (size_t)(rate * seconds);
    float *s = malloc(n * sizeof *s);
    assert_non_null(s);
    for (size_t i = 0; i < n; i++)
        s[i] = (float)(16000.0 / 32768.0 * sin(2 * M_PI * hz * i / rate));
    assert_int_equal(sf_writef_float(sf, s, (sf_count_t)n), (sf_count_t)n);
    sf_close(sf);
    free(s);
    return m.b;
}

static void test_flac(void **state)
{
    (void)state;
    bytes b = encoded_sine(SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 16000, 440.0, 0.1);
    assert_int_equal(audio_sniff(b.data, b.len), AUDIO_FLAC);
    audio_pcm *pcm = decodes(&b, 16000, 30.0);
    assert_int_equal(pcm->n_samples, 1600);
    assert_true(sine_error(pcm, 440.0, 0) < 1.0 / 32768 + 1e-6); /* lossless: rounding only */
    audio_pcm_free(pcm);
    free(b.data);
}

/* The lag (0 to max_lag samples) at which pcm best matches the sine: a lossy encoder adds a
 * delay at the start. */
static size_t best_lag(const audio_pcm *pcm, double hz, size_t max_lag)
{
    size_t best = 0;
    double best_err = INFINITY;
    for (size_t lag = 0; lag <= max_lag; lag++) {
        double e = sine_error(pcm, hz, lag);
        if (e < best_err) {
            best_err = e;
            best = lag;
        }
    }
    return best;
}

static void test_lossy(int format, audio_container want, int rate)
{
    bytes b = encoded_sine(format, rate, 440.0, 0.5);
    assert_int_equal(audio_sniff(b.data, b.len), want);
    audio_pcm *pcm = decodes(&b, 16000, 30.0);
    /* the encoder's padding may add frames, never a tenth of a second */
    assert_true(pcm->n_samples >= 7800 && pcm->n_samples <= 9600);
    size_t lag = best_lag(pcm, 440.0, 16000 / 440);
    assert_true(sine_error(pcm, 440.0, lag) < 0.05);
    audio_pcm_free(pcm);
    free(b.data);
}

static void test_mp3(void **state)
{
    (void)state;
    test_lossy(SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III, AUDIO_MP3, 44100);
}

static void test_ogg_refused(void **state)
{
    (void)state;
    bytes b = encoded_sine(SF_FORMAT_OGG | SF_FORMAT_VORBIS, 16000, 440.0, 0.1);
    assert_int_equal(audio_sniff(b.data, b.len), AUDIO_OGG);
    expect_refused(&b, 30.0, "Ogg audio is not supported");
    /* behind an ID3 tag (10 bytes, no frames), which libsndfile skips to guess what follows */
    bytes tagged = {0};
    put(&tagged, "ID3\x04\0\0\0\0\0\0", 10);
    put(&tagged, b.data, b.len);
    assert_int_equal(audio_sniff(tagged.data, tagged.len), AUDIO_MP3);
    expect_refused(&tagged, 30.0, "cannot decode MP3");
    free(tagged.data);
    free(b.data);
}

static void test_refused(void **state)
{
    (void)state;
    bytes b = {0};
    wav_header(&b, 1, 100, 16000, 16, 200);
    put(&b, (uint8_t[200]){0}, 200);
    expect_refused(&b, 30.0, "channels");
    b.len = 0;
    wav_header(&b, 1, 1, 100, 16, 2);
    put_u16(&b, 0);
    expect_refused(&b, 30.0, "samples a second");
    b.len = 0;
    wav_header(&b, 1, 1, 16000, 16, 0);
    expect_refused(&b, 30.0, "no samples");
    b.len = 0;
    wav_header(&b, 3, 1, 16000, 32, 8);
    put(&b, (float[2]){0.5f, NAN}, 8);
    expect_refused(&b, 30.0, "not a finite number");
    b.len = 0;
    sine_wav(&b, 16000, 440.0, 0.5);
    expect_refused(&b, 0.25, "longer than 0.25 seconds");
    b.len = 0;
    put(&b, "fLaC", 4);
    put(&b, (uint8_t[64]){1, 2, 3}, 64);
    expect_refused(&b, 30.0, "cannot decode FLAC");
    b.len = 0;
    put(&b, "\x89PNG\r\n\x1a\n", 8);
    expect_refused(&b, 30.0, "not a WAV, FLAC, MP3 or Ogg file");
    free(b.data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sniff),
        cmocka_unit_test(test_wav_pcm16_exact),
        cmocka_unit_test(test_wav_pcm24_stereo_averaged),
        cmocka_unit_test(test_wav_float_kept),
        cmocka_unit_test(test_wav_resampled),
        cmocka_unit_test(test_flac),
        cmocka_unit_test(test_mp3),
        cmocka_unit_test(test_ogg_refused),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

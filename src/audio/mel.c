/*
 * Gemma 4's log-mel features (mel.h): a clip cut into 30-second segments, a radix-2 FFT in
 * double precision over each windowed frame and a filter bank whose triangles are stored as
 * the range of bins each one covers.
 */
#include "audio/mel.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define N_BINS (AUDIO_MEL_FFT / 2 + 1)
#define LOG_OFFSET 0.001

/* One mel filter: its weights for FFT bins first .. first + n - 1. */
typedef struct mel_filter {
    int first, n;
    double weight[N_BINS];
} mel_filter;

typedef struct mel_tables {
    double window[AUDIO_MEL_WINDOW];
    double cos_t[AUDIO_MEL_FFT / 2], sin_t[AUDIO_MEL_FFT / 2];
    mel_filter filters[AUDIO_MEL_BINS];
} mel_tables;

static double hz_to_mel(double hz)
{
    return 2595.0 * log10(1.0 + hz / 700.0);
}

static double mel_to_hz(double mel)
{
    return 700.0 * (pow(10.0, mel / 2595.0) - 1.0);
}

static void build_tables(mel_tables *t)
{
    for (int i = 0; i < AUDIO_MEL_WINDOW; i++)
        t->window[i] = 0.5 - 0.5 * cos(2.0 * M_PI * i / AUDIO_MEL_WINDOW);
    for (int i = 0; i < AUDIO_MEL_FFT / 2; i++) {
        t->cos_t[i] = cos(2.0 * M_PI * i / AUDIO_MEL_FFT);
        t->sin_t[i] = -sin(2.0 * M_PI * i / AUDIO_MEL_FFT);
    }
    /* n_mel + 2 edges equally spaced in mel between 0 Hz and half the rate */
    double top = hz_to_mel(AUDIO_MEL_RATE / 2.0), edge[AUDIO_MEL_BINS + 2];
    for (int i = 0; i < AUDIO_MEL_BINS + 2; i++)
        edge[i] = mel_to_hz(top * i / (AUDIO_MEL_BINS + 1));
    for (int m = 0; m < AUDIO_MEL_BINS; m++) {
        mel_filter *f = &t->filters[m];
        double left = edge[m], centre = edge[m + 1], right = edge[m + 2];
        f->first = -1;
        f->n = 0;
        for (int k = 0; k < N_BINS; k++) {
            double hz = (double)k * AUDIO_MEL_RATE / AUDIO_MEL_FFT, w = 0.0;
            if (hz >= left && hz <= centre)
                w = (hz - left) / (centre - left);
            else if (hz > centre && hz <= right)
                w = (right - hz) / (right - centre);
            if (w <= 0.0)
                continue;
            if (f->first < 0)
                f->first = k;
            f->n = k - f->first + 1;
            f->weight[k - f->first] = w;
        }
        if (f->first < 0)
            f->first = 0;
    }
}

/* In-place iterative radix-2 FFT of AUDIO_MEL_FFT complex values. */
static void fft(const mel_tables *t, double *re, double *im)
{
    const int n = AUDIO_MEL_FFT;
    for (int i = 1, j = 0; i < n; i++) {
        int bit = n >> 1;
        for (; j & bit; bit >>= 1)
            j ^= bit;
        j ^= bit;
        if (i < j) {
            double a = re[i], b = im[i];
            re[i] = re[j];
            im[i] = im[j];
            re[j] = a;
            im[j] = b;
        }
    }
    for (int len = 2; len <= n; len <<= 1) {
        int step = n / len;
        for (int s = 0; s < n; s += len)
            for (int k = 0; k < len / 2; k++) {
                double wr = t->cos_t[k * step], wi = t->sin_t[k * step];
                int a = s + k, b = s + k + len / 2;
                double xr = re[b] * wr - im[b] * wi, xi = re[b] * wi + im[b] * wr;
                re[b] = re[a] - xr;
                im[b] = im[a] - xi;
                re[a] += xr;
                im[a] += xi;
            }
    }
}

/* The frames one segment of n samples gives: frames of window + 1 samples every hop over it
 * with half a window of silence in front. */
static size_t frames_of_segment(size_t n)
{
    size_t padded = n + AUDIO_MEL_WINDOW / 2;
    if (padded < AUDIO_MEL_WINDOW + 1)
        return 0;
    return (padded - (AUDIO_MEL_WINDOW + 1)) / AUDIO_MEL_HOP + 1;
}

size_t audio_mel_segments(size_t n_samples)
{
    size_t rest = n_samples % AUDIO_MEL_SEGMENT_SAMPLES;
    return n_samples / AUDIO_MEL_SEGMENT_SAMPLES + (frames_of_segment(rest) > 0);
}

/* The samples of segment s of a clip of n_samples (s at most n_samples / a segment's). */
static size_t segment_samples(size_t n_samples, size_t s)
{
    size_t left = n_samples - s * AUDIO_MEL_SEGMENT_SAMPLES;
    return left < AUDIO_MEL_SEGMENT_SAMPLES ? left : AUDIO_MEL_SEGMENT_SAMPLES;
}

size_t audio_mel_segment_frames(size_t n_samples, size_t s)
{
    if (s > n_samples / AUDIO_MEL_SEGMENT_SAMPLES)
        return 0;
    return frames_of_segment(segment_samples(n_samples, s));
}

size_t audio_mel_frames(size_t n_samples)
{
    return n_samples / AUDIO_MEL_SEGMENT_SAMPLES * frames_of_segment(AUDIO_MEL_SEGMENT_SAMPLES) +
           frames_of_segment(n_samples % AUDIO_MEL_SEGMENT_SAMPLES);
}

void audio_mel_free(audio_mel *mel)
{
    if (!mel)
        return;
    free(mel->data);
    free(mel->segment_frames);
    free(mel);
}

/* The n_frames rows of one segment of n samples, as for a clip of its own. */
static void segment_features(const mel_tables *t, const float *samples, size_t n,
                             size_t n_frames, float *rows)
{
    double re[AUDIO_MEL_FFT], im[AUDIO_MEL_FFT], mag[N_BINS];
    for (size_t f = 0; f < n_frames; f++) {
        /* frame f starts half a window before sample f * hop */
        long start = (long)(f * AUDIO_MEL_HOP) - AUDIO_MEL_WINDOW / 2;
        for (int j = 0; j < AUDIO_MEL_FFT; j++) {
            long at = start + j;
            double x = j < AUDIO_MEL_WINDOW && at >= 0 && (size_t)at < n
                           ? samples[at] * t->window[j]
                           : 0.0;
            re[j] = x;
            im[j] = 0.0;
        }
        fft(t, re, im);
        for (int k = 0; k < N_BINS; k++)
            mag[k] = sqrt(re[k] * re[k] + im[k] * im[k]);
        float *row = rows + f * AUDIO_MEL_BINS;
        for (int m = 0; m < AUDIO_MEL_BINS; m++) {
            const mel_filter *flt = &t->filters[m];
            double sum = 0.0;
            for (int k = 0; k < flt->n; k++)
                sum += mag[flt->first + k] * flt->weight[k];
            row[m] = (float)log(sum + LOG_OFFSET);
        }
    }
}

audio_mel *audio_mel_compute(const float *samples, size_t n_samples, corral_error *err)
{
    size_t n_frames = audio_mel_frames(n_samples), n_segments = audio_mel_segments(n_samples);
    if (n_frames == 0) {
        corral_error_set(err, "audio too short: %zu samples, at least %d are needed", n_samples,
                         AUDIO_MEL_WINDOW / 2 + 1);
        return NULL;
    }
    audio_mel *mel = calloc(1, sizeof *mel);
    mel_tables *t = malloc(sizeof *t);
    if (mel && n_frames <= SIZE_MAX / sizeof(float) / AUDIO_MEL_BINS) {
        mel->data = malloc(n_frames * AUDIO_MEL_BINS * sizeof *mel->data);
        mel->segment_frames = malloc(n_segments * sizeof *mel->segment_frames);
    }
    if (!mel || !t || !mel->data || !mel->segment_frames) {
        corral_error_set(err, "out of memory");
        audio_mel_free(mel);
        free(t);
        return NULL;
    }
    build_tables(t);
    mel->n_frames = n_frames;
    mel->n_mel = AUDIO_MEL_BINS;
    mel->n_segments = n_segments;
    for (size_t s = 0, row = 0; s < n_segments; row += mel->segment_frames[s], s++) {
        mel->segment_frames[s] = audio_mel_segment_frames(n_samples, s);
        segment_features(t, samples + s * AUDIO_MEL_SEGMENT_SAMPLES,
                         segment_samples(n_samples, s), mel->segment_frames[s],
                         mel->data + row * AUDIO_MEL_BINS);
    }
    free(t);
    return mel;
}

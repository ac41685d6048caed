/*
 * The joined Gemma 4 model with an audio tower, and a tone to send it (audio_model_fixture.h).
 */
#include "audio_model_fixture.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gguf.h"
#include "gguf_write_fixture.h"

void audio_model_fixture_write(const char *path, const char *drop)
{
    const char *fixtures = getenv("CORRAL_FIXTURES");
    assert_non_null(fixtures);
    char text_path[2048], tower_path[2048];
    snprintf(text_path, sizeof text_path, "%s/vision/gemma4v-text.gguf", fixtures);
    snprintf(tower_path, sizeof tower_path, "%s/audio/gemma4a-tower.gguf", fixtures);
    corral_error err = {{0}};
    gguf_file *text = gguf_open(text_path, &err), *tower = gguf_open(tower_path, &err);
    if (!text || !tower)
        fail_msg("%s", err.message);
    gguf_writer *w = gguf_writer_create();
    bool ok = w != NULL;
    for (size_t i = 0; ok && i < gguf_n_kv(text); i++) {
        const char *key = gguf_kv_at(text, i)->key;
        ok = strcmp(key, "gemma4.attention.sliding_window") == 0 ||
                     strcmp(key, "gemma4.context_length") == 0
                 ? gguf_writer_add_u32(w, key, 4096, &err)
                 : gguf_writer_copy_kv(w, gguf_kv_at(text, i), &err);
    }
    for (size_t i = 0; ok && i < gguf_n_kv(tower); i++)
        if (strncmp(gguf_kv_at(tower, i)->key, "gemma4.audio.", 13) == 0)
            ok = gguf_writer_copy_kv(w, gguf_kv_at(tower, i), &err);
    for (int pass = 0; ok && pass < 2; pass++) {
        gguf_file *files[2] = {text, tower};
        for (size_t f = 0; f < 2; f++)
            for (size_t i = 0; ok && i < gguf_n_tensors(files[f]); i++) {
                const gguf_tensor *t = gguf_tensor_at(files[f], i);
                if (!drop || strcmp(t->name, drop) != 0)
                    ok = gguf_write_fixture_copy(w, pass, t->name, t, &err);
            }
        if (pass == 0)
            ok = ok && gguf_writer_begin(w, path, &err);
    }
    gguf_write_fixture_finish(w, ok, path, &err);
    gguf_close(text);
    gguf_close(tower);
}

uint8_t *audio_model_fixture_tone_at(uint32_t rate, double seconds, size_t *size)
{
    size_t n = (size_t)(rate * seconds), bytes = 44 + 2 * n;
    uint8_t *w = malloc(bytes);
    assert_non_null(w);
    uint32_t data = (uint32_t)(2 * n), riff = 36 + data, byte_rate = 2 * rate;
    memcpy(w, "RIFF", 4);
    memcpy(w + 4, &riff, 4);
    memcpy(w + 8, "WAVEfmt ", 8);
    /* PCM, one channel, rate samples a second, 2-byte frames, 16 bits */
    uint8_t fmt[20] = {16, 0, 0, 0, 1, 0, 1, 0};
    memcpy(fmt + 8, &rate, 4);
    memcpy(fmt + 12, &byte_rate, 4);
    fmt[16] = 2;
    fmt[18] = 16;
    memcpy(w + 16, fmt, sizeof fmt);
    memcpy(w + 36, "data", 4);
    memcpy(w + 40, &data, 4);
    for (size_t i = 0; i < n; i++) {
        int16_t v = (int16_t)(8000.0 * sin(2 * M_PI * 440.0 * (double)i / rate));
        memcpy(w + 44 + 2 * i, &v, 2);
    }
    *size = bytes;
    return w;
}

uint8_t *audio_model_fixture_tone(double seconds, size_t *size)
{
    return audio_model_fixture_tone_at(16000, seconds, size);
}

/*
 * Shared by the tests that run a Gemma 4 model with an audio tower (test_runner_vision.c,
 * test_cli_vision.c): the tiny gemma4 text model of tests/fixtures/vision and the tower of
 * tests/fixtures/audio joined into one file, as ollama's converter puts both, and a WAV
 * tone to send it.
 */
#ifndef CORRAL_TESTS_AUDIO_MODEL_FIXTURE_H
#define CORRAL_TESTS_AUDIO_MODEL_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

/* The joined model at path, the tower's tensor `drop` left out (NULL: none). Its sliding
 * window (8) is widened past any test's context, so that a slot can keep a prompt's cells
 * for the next request: with the window, the runner starts each prompt over; its context
 * (256) is widened to 4096 too, for clips of minutes. Fails the current cmocka test on any
 * error. */
void audio_model_fixture_write(const char *path, const char *drop);

/* A 16 kHz mono 16-bit WAV of a 440 Hz tone, seconds long (malloc'd, *size bytes); at rate
 * samples a second. */
uint8_t *audio_model_fixture_tone(double seconds, size_t *size);
uint8_t *audio_model_fixture_tone_at(uint32_t rate, double seconds, size_t *size);

#endif

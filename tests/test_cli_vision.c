/*
 * `corral infer --mmproj` as a developer runs it, against the vision/ references, from the
 * image files (PNG and JPEG) and from preprocessed pixels: the prompt split around
 * <__media__> gives llama.cpp's ids, the greedy tokens are llama.cpp's, --dump-pixels writes
 * its pixels bit for bit and --dump-embd embeddings within the tolerance, a prompt that
 * writes its BOS starts with one; a prompt without the marker, a file that is no projector
 * and pixels of the wrong size are refused. `corral infer --audio` with a gemma4 file that
 * carries an audio tower (audio_model_fixture.h) evaluates a WAV's 13 tokens and dumps its
 * log-mel frames and embeddings; a model without a tower and a file that is no audio are
 * refused, and a clip file is read up to the server's cap on a clip's bytes.
 */
#include <math.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "audio_model_fixture.h"
#include "command_fixture.h"
#include "file_fixture.h"

#define EMBD_TOLERANCE 1e-4f

/* The rest of the line after "\n<key>" in text. */
static char *line_after(const char *text, const char *key, char *out, size_t size)
{
    char header[64];
    snprintf(header, sizeof header, "\n%s", key);
    const char *p = strstr(text, header);
    if (!p)
        fail_msg("'%s' not found", key);
    p += strlen(header);
    size_t n = strcspn(p, "\n");
    snprintf(out, size, "%.*s", (int)(n < size ? n : size - 1), p);
    return out;
}

/* A reference: its model and image, the image's file (NULL: its preprocessed pixels, of
 * size, through --pixels) and the prompt quoted for the shell (newlines stay inside). The
 * Qwen square's embeddings are left to test_vision, which tells its one GELU table step
 * from an error. */
typedef struct vision_case {
    const char *model, *image, *file, *size, *prompt;
    bool check_embd;
} vision_case;

#define GEMMA3_PROMPT "'<__media__>Describe the picture.'"
#define QWEN_PROMPT "'<|im_start|>user\n<__media__>Describe.<|im_end|>\n<|im_start|>assistant\n'"

static const vision_case cases[] = {
    {"gemma3", "square", "square.png", NULL, GEMMA3_PROMPT, true},
    {"gemma3", "wide", "wide.png", NULL, GEMMA3_PROMPT, true},
    {"gemma3", "square-jpeg", "square-jpeg.jpg", NULL, GEMMA3_PROMPT, true},
    {"gemma3", "wide", NULL, "64x64", GEMMA3_PROMPT, true},
    {"qwen25vl", "square", "square.png", NULL, QWEN_PROMPT, false},
    {"qwen25vl", "wide", "wide.png", NULL, QWEN_PROMPT, true},
    {"qwen25vl", "square-jpeg", "square-jpeg.jpg", NULL, QWEN_PROMPT, true},
    {"qwen25vl", "wide", NULL, "168x84", QWEN_PROMPT, true},
};

static char *infer(const vision_case *c, const char *prompt, const char *mmproj,
                   const char *extra, int *status)
{
    char cmd[4096], image[256];
    if (c->file)
        snprintf(image, sizeof image, "--image %s", c->file);
    else
        snprintf(image, sizeof image, "--pixels %s.%s.pixels.f32 --pixels-size %s", c->model,
                 c->image, c->size);
    snprintf(cmd, sizeof cmd,
             "cd '%s/vision' && '%s' infer %s-text.gguf %s --mmproj %s %s -n 16 --ids "
             "--ignore-eos --kv f32 --temperature 0 --repeat-penalty 1 -t 2 %s 2>/dev/null",
             getenv("CORRAL_FIXTURES"), getenv("CORRAL_BIN"), c->model, prompt, mmproj, image,
             extra);
    return command_fixture_run(cmd, status);
}

static void test_cli_vision_matches_llama_cpp(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const vision_case *c = &cases[i];
        char path[2048], mmproj[256], dir[] = "/tmp/corral-vision-XXXXXX", extra[600];
        assert_non_null(mkdtemp(dir));
        snprintf(mmproj, sizeof mmproj, "%s-mmproj.gguf", c->model);
        snprintf(extra, sizeof extra, "--dump-pixels %s/pixels.f32 --dump-embd %s/embd.f32", dir,
                 dir);
        int status;
        char *printed = infer(c, c->prompt, mmproj, extra, &status);
        assert_int_equal(status, 0);
        size_t len = strlen(printed);
        char *out = malloc(len + 2); /* a newline first, so that every line starts with one */
        assert_non_null(out);
        out[0] = '\n';
        memcpy(out + 1, printed, len + 1);
        free(printed);
        snprintf(path, sizeof path, "%s/vision/%s.%s.ref.txt", getenv("CORRAL_FIXTURES"),
                 c->model, c->image);
        char *ref = file_fixture_read(path, NULL), want[1024], got[1024];
        /* the prompt's text ids: chunk 0 then chunk 2 */
        char chunk0[512], chunk2[512];
        line_after(ref, "chunk 0 text ", chunk0, sizeof chunk0);
        line_after(ref, "chunk 2 text ", chunk2, sizeof chunk2);
        snprintf(want, sizeof want, "prompt_ids:%s%s", strchr(chunk0, ':') + 1,
                 strchr(chunk2, ':') + 1);
        assert_string_equal(line_after(out, "prompt_ids", got, sizeof got),
                            want + strlen("prompt_ids"));
        line_after(ref, "greedy_ids", want, sizeof want);
        assert_string_equal(line_after(out, "generated_ids:", got, sizeof got), want);

        size_t n_dumped, n_ref;
        snprintf(path, sizeof path, "%s/pixels.f32", dir);
        char *dumped = file_fixture_read(path, &n_dumped);
        unlink(path);
        snprintf(path, sizeof path, "%s/vision/%s.%s.pixels.f32", getenv("CORRAL_FIXTURES"),
                 c->model, c->image);
        char *pixels = file_fixture_read(path, &n_ref);
        assert_int_equal(n_dumped, n_ref);
        assert_memory_equal(dumped, pixels, n_ref);
        free(dumped);
        free(pixels);

        snprintf(path, sizeof path, "%s/embd.f32", dir);
        float *embd = (float *)file_fixture_read(path, &n_dumped);
        unlink(path);
        snprintf(path, sizeof path, "%s/vision/%s.%s.embd.f32", getenv("CORRAL_FIXTURES"),
                 c->model, c->image);
        float *want_embd = (float *)file_fixture_read(path, &n_ref);
        assert_int_equal(n_dumped, n_ref);
        float worst = 0.0f;
        for (size_t j = 0; j < n_ref / sizeof(float); j++)
            worst = fmaxf(worst, fabsf(embd[j] - want_embd[j]));
        printf("%s %s: dumped embeddings max diff %.3g\n", c->model, c->image, worst);
        if (c->check_embd)
            assert_true(worst <= EMBD_TOLERANCE);
        free(embd);
        free(want_embd);
        rmdir(dir);
        free(ref);
        free(out);
    }
}

/* A prompt that writes the BOS itself ("<s>" in this vocabulary) starts with it once. */
static void test_cli_vision_prompt_starts_with_one_bos(void **state)
{
    (void)state;
    int status;
    char *plain = infer(&cases[0], GEMMA3_PROMPT, "gemma3-mmproj.gguf", "-n 0", &status);
    assert_int_equal(status, 0);
    char *with_bos = infer(&cases[0], "'<s><__media__>Describe the picture.'",
                           "gemma3-mmproj.gguf", "-n 0", &status);
    assert_int_equal(status, 0);
    assert_non_null(strstr(plain, "prompt_ids: 1 "));
    assert_string_equal(with_bos, plain);
    free(plain);
    free(with_bos);
}

static void test_cli_vision_refuses(void **state)
{
    (void)state;
    int status;
    /* no marker in the prompt */
    char *out = infer(&cases[0], "'Describe the picture.'", "gemma3-mmproj.gguf", "", &status);
    assert_int_not_equal(status, 0);
    free(out);
    /* not an image */
    vision_case not_image = cases[0];
    not_image.file = "gemma3-text.gguf";
    out = infer(&not_image, GEMMA3_PROMPT, "gemma3-mmproj.gguf", "", &status);
    assert_int_not_equal(status, 0);
    free(out);
    /* a text model is no projector */
    out = infer(&cases[0], cases[0].prompt, "gemma3-text.gguf", "", &status);
    assert_int_not_equal(status, 0);
    free(out);
    /* pixels of a size the projector does not encode (qwen's for gemma3's square) */
    out = infer(&cases[7], cases[7].prompt, "gemma3-mmproj.gguf", "", &status);
    assert_int_not_equal(status, 0);
    free(out);
}

/* infer --audio of the joined model (or `model`) with clip, its stderr kept. */
static char *infer_audio(const char *model, const char *clip, const char *extra, int *status)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "'%s' infer '%s' '<start_of_turn>user\n<__media__> What is said?<end_of_turn>\n"
             "<start_of_turn>model\n' --audio '%s' -n 4 --ids --kv f32 --temperature 0 -t 1 "
             "%s 2>&1",
             getenv("CORRAL_BIN"), model, clip, extra);
    return command_fixture_run(cmd, status);
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

/* A 16 kHz WAV of silence `bytes` long at path (sparse: its samples are the file's zeros). */
static void write_silent_wav(const char *path, uint32_t bytes)
{
    size_t size;
    uint8_t *wav = audio_model_fixture_tone(0, &size);
    uint32_t data = bytes - (uint32_t)size, riff = bytes - 8;
    memcpy(wav + 4, &riff, 4);
    memcpy(wav + size - 4, &data, 4);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(wav, 1, size, f), size);
    assert_int_equal(ftruncate(fileno(f), bytes), 0);
    fclose(f);
    free(wav);
}

static void test_cli_infer_audio(void **state)
{
    (void)state;
    char model[256], clip[256], mel[256], embd[256], extra[600];
    snprintf(model, sizeof model, "/tmp/corral-test-cli-audio-%d.gguf", (int)getpid());
    snprintf(clip, sizeof clip, "/tmp/corral-test-cli-audio-%d.wav", (int)getpid());
    snprintf(mel, sizeof mel, "/tmp/corral-test-cli-audio-%d.mel", (int)getpid());
    snprintf(embd, sizeof embd, "/tmp/corral-test-cli-audio-%d.embd", (int)getpid());
    audio_model_fixture_write(model, NULL);
    size_t size;
    uint8_t *wav = audio_model_fixture_tone(0.5, &size);
    FILE *f = fopen(clip, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(wav, 1, size, f), size);
    fclose(f);
    free(wav);
    int status;
    snprintf(extra, sizeof extra, "--dump-pixels %s --dump-embd %s", mel, embd);
    char *out = infer_audio(model, clip, extra, &status);
    if (status != 0)
        fail_msg("%s", out);
    free(out);
    /* 0.5 s: 49 frames of 128 bins, 13 tokens of the text width (32) */
    assert_int_equal(file_size(mel), 49 * 128 * 4);
    assert_int_equal(file_size(embd), 13 * 32 * 4);
    /* a model without a tower; a file that is no audio */
    char text_model[2048];
    snprintf(text_model, sizeof text_model, "%s/vision/gemma4v-text.gguf",
             getenv("CORRAL_FIXTURES"));
    out = infer_audio(text_model, clip, "", &status);
    assert_int_not_equal(status, 0);
    assert_non_null(strstr(out, "carries no audio tower"));
    free(out);
    out = infer_audio(model, model, "", &status);
    assert_int_not_equal(status, 0);
    assert_non_null(strstr(out, "not a WAV, FLAC, MP3 or Ogg file"));
    free(out);
    /* a clip file is read up to the server's cap (audio.h): 21 MiB of WAV is refused for its
     * length (11 minutes), 26 MiB for its bytes */
    write_silent_wav(clip, 21u << 20);
    out = infer_audio(model, clip, "", &status);
    assert_int_not_equal(status, 0);
    assert_non_null(strstr(out, "longer than 600 seconds"));
    free(out);
    write_silent_wav(clip, 26u << 20);
    out = infer_audio(model, clip, "", &status);
    assert_int_not_equal(status, 0);
    assert_non_null(strstr(out, "larger than 25 MiB"));
    free(out);
    remove(model);
    remove(clip);
    remove(mel);
    remove(embd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_vision_matches_llama_cpp),
        cmocka_unit_test(test_cli_vision_prompt_starts_with_one_bos),
        cmocka_unit_test(test_cli_vision_refuses),
        cmocka_unit_test(test_cli_infer_audio),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

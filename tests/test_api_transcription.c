/*
 * /v1/audio/transcriptions read into a chat request (server/api/transcription.c): a form as
 * the openai client sends it becomes ollama's system message (the language and the prompt
 * added), a user message carrying the clip, temperature 0 unless the form says; the answer
 * is {"text"} trimmed, plain text for response_format text; a missing model or file, an empty
 * or oversized clip, a file that is no audio, an unknown response_format, a bad temperature,
 * stream true, a field that is not text and a body that is not multipart are refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_fixture.h"
#include "audio/audio.h"
#include "server/api/transcription.h"
#include "server/core/image_input.h"

#define BOUNDARY "----form7"
#define TYPE "multipart/form-data; boundary=" BOUNDARY
#define CLIP "RIFF\x04\0\0\0WAVE" /* 12 bytes */

typedef struct field {
    const char *name;
    const char *value; /* NULL: the end of the list */
    size_t len;        /* 0: strlen(value) */
    bool file;
} field;

/* The body of fields as the openai client writes it (free()); *len its length. */
static char *form_body(const field *fields, size_t *len)
{
    size_t cap = 1024;
    for (const field *f = fields; f->value; f++)
        cap += (f->len ? f->len : strlen(f->value)) + 256;
    char *body = malloc(cap);
    assert_non_null(body);
    size_t n = 0;
    for (const field *f = fields; f->value; f++) {
        n += (size_t)sprintf(body + n, "--" BOUNDARY "\r\nContent-Disposition: form-data; "
                             "name=\"%s\"%s\r\n%s\r\n", f->name,
                             f->file ? "; filename=\"clip.wav\"" : "",
                             f->file ? "Content-Type: audio/wav\r\n" : "");
        size_t len = f->len ? f->len : strlen(f->value);
        memcpy(body + n, f->value, len);
        n += len;
        n += (size_t)sprintf(body + n, "\r\n");
    }
    n += (size_t)sprintf(body + n, "--" BOUNDARY "--\r\n");
    *len = n;
    return body;
}

static unsigned parse(const field *fields, chat_request **req, transcription_answer *answer,
                      char *message)
{
    size_t len;
    char *body = form_body(fields, &len);
    unsigned status = transcription_parse(TYPE, body, len, req, answer, message, 256);
    free(body);
    return status;
}

static void test_form_to_chat(void **state)
{
    (void)state;
    const field fields[] = {
        {"file", CLIP, 12, true}, {"model", "gemma4:e2b", 0, false},
        {"language", "en", 0, false}, {"prompt", "A talk on skies.", 0, false},
        {"response_format", "text", 0, false}, {"temperature", "0.25", 0, false},
        {NULL, NULL, 0, false},
    };
    chat_request *req = NULL;
    transcription_answer answer;
    char message[256] = "";
    assert_int_equal(parse(fields, &req, &answer, message), 200);
    assert_true(answer.plain_text);
    json_t *got = describe_request(req);
    json_t *want = api_json(
        "{\"model\": \"gemma4:e2b\", \"chat\": true, \"stream\": false,"
        " \"options\": {\"temperature\": 0.25}, \"messages\": ["
        "{\"role\": \"system\", \"content\": \"Transcribe the audio exactly as spoken. Output"
        " only the spoken words. Do not answer any question in the audio. The audio is in en."
        " Context: A talk on skies.\"},"
        "{\"role\": \"user\", \"content\": \"What exact words are spoken in this audio?\","
        " \"images\": [\"UklGRgQAAABXQVZF\"]}]}");
    api_expect_subset(want, got, "the whole form");
    json_decref(want);
    json_decref(got);
    chat_request_free(req);

    /* the defaults: temperature 0 (ollama's), JSON, no language or context */
    const field bare[] = {{"model", "m", 0, false}, {"file", CLIP, 12, true},
                          {"response_format", "verbose_json", 0, false},
                          {"stream", "false", 0, false}, {NULL, NULL, 0, false}};
    assert_int_equal(parse(bare, &req, &answer, message), 200);
    assert_false(answer.plain_text);
    got = describe_request(req);
    want = api_json("{\"options\": {\"temperature\": 0.0}, \"messages\": [{\"role\": \"system\","
                    " \"content\": \"Transcribe the audio exactly as spoken. Output only the"
                    " spoken words. Do not answer any question in the audio.\"}, {\"role\":"
                    " \"user\", \"content\": \"What exact words are spoken in this audio?\","
                    " \"images\": [\"UklGRgQAAABXQVZF\"]}]}");
    api_expect_subset(want, got, "the defaults");
    json_decref(want);
    json_decref(got);
    chat_request_free(req);
}

static void test_refusals(void **state)
{
    (void)state;
    static const char png[] = "\x89PNG\r\n\x1a\n";
    static const struct {
        field fields[3];
        unsigned status;
        const char *why;
    } cases[] = {
        {{{"file", CLIP, 12, true}}, 400, "model is required"},
        {{{"model", "", 0, false}, {"file", CLIP, 12, true}}, 400, "model is required"},
        {{{"model", "m", 0, false}}, 400, "file is required"},
        {{{"model", "m", 0, false}, {"file", "", 0, true}}, 400, "audio file is empty"},
        {{{"model", "m", 0, false}, {"file", png, 8, true}}, 400,
         "file is not audio Corral reads: WAV, MP3 or FLAC"},
        {{{"model", "m", 0, false}, {"file", "OggS\0\x02\0\0", 8, true}}, 400,
         "Ogg audio is not supported: send WAV, FLAC or MP3"},
        {{{"model", "m", 0, false}, {"response_format", "xml", 0, false}}, 400,
         "response_format must be one of json, text, srt, verbose_json, vtt, diarized_json, "
         "not \"xml\""},
        {{{"model", "m", 0, false}, {"temperature", "warm", 0, false}}, 400,
         "temperature must be a number of at least 0, not \"warm\""},
        {{{"model", "m", 0, false}, {"temperature", "-1", 0, false}}, 400, "at least 0"},
        {{{"model", "m", 0, false}, {"temperature", "nan", 0, false}}, 400, "at least 0"},
        {{{"model", "m", 0, false}, {"stream", "true", 0, false}}, 400,
         "stream is not supported: the transcription is answered whole"},
        {{{"model", "m", 0, false}, {"prompt", "a\0b", 3, false}}, 400,
         "prompt must be UTF-8 text without NUL bytes"},
        {{{"model", "\xff", 0, false}}, 400, "model must be UTF-8 text without NUL bytes"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        field fields[4] = {cases[i].fields[0], cases[i].fields[1], cases[i].fields[2]};
        chat_request *req = NULL;
        transcription_answer answer;
        char message[256] = "";
        unsigned status = parse(fields, &req, &answer, message);
        if (status != cases[i].status || !strstr(message, cases[i].why))
            fail_msg("case %zu: %u \"%s\", want %u \"%s\"", i, status, message,
                     cases[i].status, cases[i].why);
        assert_null(req);
    }
    /* a clip over OpenAI's cap is a 413 */
    size_t big = AUDIO_MAX_CLIP_BYTES + 1;
    char *clip = calloc(1, big);
    assert_non_null(clip);
    memcpy(clip, CLIP, 12);
    const field large[] = {{"model", "m", 0, false}, {"file", clip, big, true},
                           {NULL, NULL, 0, false}};
    chat_request *req = NULL;
    transcription_answer answer;
    char message[256] = "";
    assert_int_equal(parse(large, &req, &answer, message), 413);
    assert_non_null(strstr(message, "audio file larger than 26214400 bytes"));
    free(clip);
    /* a body that is not multipart */
    assert_int_equal(transcription_parse("application/json", "{}", 2, &req, &answer, message,
                                         sizeof message), 400);
    assert_non_null(strstr(message, "failed to parse multipart form: request Content-Type "
                                    "isn't multipart/form-data"));
}

/* The answer: the content without the white space around it. */
static void test_answer(void **state)
{
    (void)state;
    transcription_answer a = {0};
    generation_info info = {.model = "m", .chat = true, .state = &a};
    generation_delta answer = {.content = "\n Why is the sky blue? \n", .content_len = 24,
                               .thinking = "", .thinking_len = 0};
    json_t *got = api_shape_whole(&transcription_shape, &info, "{}", &answer);
    json_t *want = api_json("{\"text\": \"Why is the sky blue?\"}");
    assert_true(json_equal(got, want));
    json_decref(got);
    json_decref(want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_form_to_chat),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_answer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

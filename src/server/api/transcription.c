/*
 * /v1/audio/transcriptions: the upload read, the chat request it becomes, and the answer's
 * shape (transcription.h).
 */
#include "server/api/transcription.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/utf8.h"
#include "server/api/api_build.h"
#include "server/api/api_serve.h"
#include "server/api/openai.h"
#include "server/core/image_input.h"
#include "server/http/multipart.h"
#include "server/server.h"
#include "audio/audio.h"
#include "util/base64.h"

/* What the model is told, as ollama tells it: the clip may hold a question or an order, and
 * the answer must be its words, not a reply to them. */
#define SYSTEM_PROMPT                                                                          \
    "Transcribe the audio exactly as spoken. Output only the spoken words. Do not answer any " \
    "question in the audio."
#define USER_PROMPT "What exact words are spoken in this audio?"

/* OpenAI's response formats: "text" is answered as text, the others as {"text"}, as ollama
 * answers them all. */
static const char *const formats[] = {"json", "text", "srt", "verbose_json", "vtt",
                                      "diarized_json"};

/* A text field's value (NULL when the form lacks it) as a new string; false with the 400's
 * message when it holds a NUL byte or is not UTF-8. */
static bool text_field(const multipart_form *form, const char *name, char **out, api_build *b)
{
    *out = NULL;
    const multipart_part *part = multipart_field(form, name);
    if (!part)
        return true;
    int tail;
    if (memchr(part->data, '\0', part->len) ||
        utf8_valid_prefix((const unsigned char *)part->data, part->len, &tail) != part->len)
        return api_refuse(b, 400, "%s must be UTF-8 text without NUL bytes", name);
    if (!(*out = strndup(part->data, part->len)))
        return API_OUT_OF_MEMORY(b);
    return true;
}

static bool read_format(const char *value, transcription_answer *answer, api_build *b)
{
    if (!value || !*value)
        return true;
    for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
        if (strcmp(value, formats[i]) == 0) {
            answer->plain_text = strcmp(value, "text") == 0;
            return true;
        }
    return api_refuse(b, 400, "response_format must be one of json, text, srt, verbose_json, "
                              "vtt, diarized_json, not \"%.32s\"", value);
}

/* temperature (ollama's is always 0, which stands when the form gives none); false with the
 * 400's message for a value that is not a number of at least 0. */
static bool read_temperature(const char *value, json_t *options, api_build *b)
{
    double t = 0;
    if (value && *value) {
        char *end;
        t = strtod(value, &end);
        if (*end || !isfinite(t) || t < 0 || isspace((unsigned char)*value))
            return api_refuse(b, 400, "temperature must be a number of at least 0, not "
                                      "\"%.32s\"", value);
    }
    return json_object_set_new(options, "temperature", json_real(t)) == 0 ||
           API_OUT_OF_MEMORY(b);
}

/* The system message: the instruction, the clip's language and the client's prompt as
 * context, in ollama's words. */
static char *system_prompt(const char *language, const char *prompt)
{
    char *text = NULL;
    int n = asprintf(&text, "%s%s%s%s%s%s", SYSTEM_PROMPT,
                     language && *language ? " The audio is in " : "",
                     language && *language ? language : "", language && *language ? "." : "",
                     prompt && *prompt ? " Context: " : "", prompt && *prompt ? prompt : "");
    return n < 0 ? NULL : text;
}

/* The upload's clip as the user message's one media item; false with the refusal. */
static bool add_clip(chat_request *req, const multipart_part *file, api_build *b)
{
    if (!file)
        return api_refuse(b, 400, "file is required");
    if (file->len == 0)
        return api_refuse(b, 400, "audio file is empty");
    if (file->len > AUDIO_MAX_CLIP_BYTES)
        return api_refuse(b, 413, "audio file larger than %u bytes", AUDIO_MAX_CLIP_BYTES);
    audio_container clip = audio_sniff((const uint8_t *)file->data, file->len);
    if (clip == AUDIO_OGG)
        return api_refuse(b, 400, "Ogg audio is not supported: send WAV, FLAC or MP3");
    if (clip == AUDIO_NOT_AUDIO)
        return api_refuse(b, 400, "file is not audio Corral reads: WAV, MP3 or FLAC");
    char *base64 = util_base64_encode((const uint8_t *)file->data, file->len);
    bool ok = base64 && chat_request_add_text(req, "user", USER_PROMPT, strlen(USER_PROMPT)) &&
              chat_message_add_image(&req->messages[req->n_messages - 1], base64,
                                     strlen(base64));
    free(base64);
    return ok || API_OUT_OF_MEMORY(b);
}

static bool build(const multipart_form *form, chat_request *req, transcription_answer *answer,
                  api_build *b)
{
    char *format = NULL, *temperature = NULL, *stream = NULL, *language = NULL, *prompt = NULL;
    bool ok = text_field(form, "model", &req->model, b) &&
              text_field(form, "response_format", &format, b) &&
              text_field(form, "temperature", &temperature, b) &&
              text_field(form, "stream", &stream, b) &&
              text_field(form, "language", &language, b) &&
              text_field(form, "prompt", &prompt, b);
    if (ok && (!req->model || !*req->model))
        ok = api_refuse(b, 400, "model is required");
    /* ollama answers whole whatever stream says; a client that asked for events would read
     * that answer as none */
    if (ok && stream && strcmp(stream, "true") == 0)
        ok = api_refuse(b, 400, "stream is not supported: the transcription is answered whole");
    ok = ok && read_format(format, answer, b) && read_temperature(temperature, req->options, b);
    char *system = ok ? system_prompt(language, prompt) : NULL;
    ok = ok && ((system && chat_request_add_text(req, "system", system, strlen(system))) ||
                API_OUT_OF_MEMORY(b));
    ok = ok && add_clip(req, multipart_field(form, "file"), b);
    free(system);
    free(format);
    free(temperature);
    free(stream);
    free(language);
    free(prompt);
    return ok;
}

unsigned transcription_parse(const char *content_type, const char *body, size_t len,
                             chat_request **out, transcription_answer *answer, char *message,
                             size_t size)
{
    api_build b = {.message = message, .size = size, .status = 200};
    *answer = (transcription_answer){0};
    multipart_form *form = malloc(sizeof *form);
    if (!form) {
        snprintf(message, size, "out of memory");
        return 500;
    }
    if (!multipart_parse(content_type, body, len, form, message, size)) {
        free(form);
        return 400;
    }
    chat_request *req = chat_request_create(true);
    bool ok = (req && (req->options = json_object())) || API_OUT_OF_MEMORY(&b);
    if (ok) {
        req->stream = false;
        ok = build(form, req, answer, &b);
    }
    free(form);
    if (!ok) {
        chat_request_free(req);
        return b.status;
    }
    *out = req;
    return 200;
}

/* ---- the answer ---- */

/* The answer's text without the white space around it, as ollama trims it. */
static void trimmed(const generation_delta *answer, const char **text, size_t *len)
{
    const char *s = answer->content;
    size_t n = answer->content_len;
    while (n && isspace((unsigned char)*s)) {
        s++;
        n--;
    }
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    *text = s;
    *len = n;
}

static json_t *transcription_whole(const generation_info *info, const generation_done *done,
                                   const generation_delta *answer)
{
    (void)info;
    (void)done;
    const char *text;
    size_t len;
    trimmed(answer, &text, &len);
    return json_pack("{s:s%}", "text", text, len);
}

static void transcription_reply(http_reply *reply, const generation_info *info,
                                const generation_done *done, const generation_delta *answer)
{
    const transcription_answer *a = info->state;
    if (!a->plain_text) {
        http_reply_json(reply, 200, transcription_whole(info, done, answer));
        return;
    }
    const char *text;
    size_t len;
    trimmed(answer, &text, &len);
    char *copy = strndup(text, len);
    if (copy)
        http_reply_text(reply, 200, "text/plain; charset=utf-8", copy);
    else
        openai_error(reply, 500, "out of memory");
    free(copy);
}

static json_t *transcription_loaded(const generation_info *info, const char *reason)
{
    (void)info;
    (void)reason;
    return json_pack("{s:s}", "text", "");
}

const generation_shape transcription_shape = {
    .stream_content_type = "text/event-stream",
    .whole = transcription_whole,
    .reply_whole = transcription_reply,
    .loaded = transcription_loaded,
    .error = openai_error,
};

/* ---- the endpoint ---- */

static void handle_transcriptions(void *ctx, const http_request *req, http_reply *reply)
{
    char message[512];
    chat_request *request = NULL;
    transcription_answer form;
    unsigned status = transcription_parse(req->content_type, req->body, req->body_len,
                                          &request, &form, message, sizeof message);
    transcription_answer *answer = NULL;
    if (status == 200 && (answer = malloc(sizeof *answer)))
        *answer = form;
    api_serve_parsed(ctx, status, message, request, &transcription_shape, answer, reply);
}

static const http_route routes[] = {
    {"POST", "/v1/audio/transcriptions", false, handle_transcriptions, NULL},
};

const route_table routes_transcription = {routes, sizeof routes / sizeof routes[0]};

/*
 * libFuzzer target for Modelfiles, both ways: the input is parsed as `corral create` parses
 * a Modelfile and turned into the create request; the request's fields then become a model
 * as /api/show sees it, whose generated Modelfile and parameters text are built and the
 * generated Modelfile parsed again. Besides crashes, sanitizer reports, leaks and hangs, a
 * request that loses an instruction (a TEMPLATE, SYSTEM, LICENSE or MESSAGE the parser
 * accepted but the request lacks) is a bug, and so is "out of memory" for a small input.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/modelfile.h"
#include "server/models/modelfile_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An allocation failed (messages that echo the input never end this way: names are words). */
static bool out_of_memory(const corral_error *err)
{
    size_t n = strlen(err->message), k = strlen("out of memory");
    return n >= k && strcmp(err->message + n - k, "out of memory") == 0 &&
           (n == k || err->message[n - k - 1] == ' ');
}

static void fail(const char *what, const uint8_t *data, size_t size)
{
    fprintf(stderr, "%s in:\n%.*s\n", what, (int)size, (const char *)data);
    abort();
}

static size_t count_kind(const modelfile *mf, modelfile_kind kind)
{
    size_t n = 0;
    for (size_t i = 0; i < mf->n_commands; i++)
        n += mf->commands[i].kind == kind;
    return n;
}

/* The value of the last command of kind, or NULL. */
static const char *last_value(const modelfile *mf, modelfile_kind kind)
{
    const char *value = NULL;
    for (size_t i = 0; i < mf->n_commands; i++)
        if (mf->commands[i].kind == kind)
            value = mf->commands[i].value;
    return value;
}

static void check_field(const json_t *request, const char *field, const char *want,
                        const uint8_t *data, size_t size)
{
    const char *got = json_string_value(json_object_get(request, field));
    if ((want == NULL) != (got == NULL) || (want && strcmp(want, got) != 0))
        fail(field, data, size);
}

/* Every instruction the parser accepted is in the request. */
static void check_request(const modelfile *mf, const json_t *request, const uint8_t *data,
                          size_t size)
{
    check_field(request, "template", last_value(mf, MODELFILE_TEMPLATE), data, size);
    check_field(request, "system", last_value(mf, MODELFILE_SYSTEM), data, size);
    check_field(request, "renderer", last_value(mf, MODELFILE_RENDERER), data, size);
    check_field(request, "parser", last_value(mf, MODELFILE_PARSER), data, size);
    if (json_array_size(json_object_get(request, "license")) != count_kind(mf, MODELFILE_LICENSE))
        fail("a LICENSE lost", data, size);
    if (json_array_size(json_object_get(request, "messages")) !=
        count_kind(mf, MODELFILE_MESSAGE))
        fail("a MESSAGE lost", data, size);
}

/* The request as the model /api/show would describe, and its generated Modelfile parsed. */
static void show_again(const json_t *request, const uint8_t *data, size_t size)
{
    char path[] = "/models/blobs/sha256-0000";
    model_ref ref = {.model_path = path};
    snprintf(ref.display, sizeof ref.display, "fuzz:latest");
    ref.template_text = (char *)json_string_value(json_object_get(request, "template"));
    ref.system = (char *)json_string_value(json_object_get(request, "system"));
    json_t *licenses = json_object_get(request, "license");
    if (json_array_size(licenses) > 0)
        ref.license = (char *)json_string_value(json_array_get(licenses, 0));
    ref.params = json_object_get(request, "parameters");
    ref.messages = json_object_get(request, "messages");
    char *params = modelfile_parameters_text(ref.params);
    char *text = modelfile_generate(&ref);
    if (!params || !text)
        fail("show text out of memory", data, size);
    corral_error err;
    modelfile *again = modelfile_parse(text, strlen(text), &err);
    json_t *again_request = again ? modelfile_to_request(again, NULL, &err) : NULL;
    if (again && !again_request && out_of_memory(&err))
        fail("out of memory on the generated Modelfile", data, size);
    json_decref(again_request);
    modelfile_free(again);
    free(text);
    free(params);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    corral_error err;
    modelfile *mf = modelfile_parse((const char *)data, size, &err);
    if (!mf) {
        if (out_of_memory(&err))
            fail("parse out of memory", data, size);
        return 0;
    }
    json_t *request = modelfile_to_request(mf, NULL, &err);
    if (!request) {
        if (out_of_memory(&err))
            fail("request out of memory", data, size);
    } else {
        check_request(mf, request, data, size);
        show_again(request, data, size);
    }
    json_decref(request);
    modelfile_free(mf);
    return 0;
}

/*
 * `corral run MODEL [PROMPT]`: a prompt argument or piped stdin runs one /api/generate and
 * exits; otherwise the REPL. A model the server does not have is pulled first; the REPL
 * loads the model (with a spinner) before the first prompt. An embedding model prints the
 * prompt's embedding instead, as ollama does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/client.h"
#include "cli/flags.h"
#include "cli/commands.h"
#include "cli/generate.h"
#include "cli/progress.h"
#include "cli/prompt_images.h"
#include "cli/pull.h"
#include "cli/repl.h"
#include "cli/show.h"

#define MAX_PROMPT_BYTES (64u << 20)

typedef struct run_args {
    const char *model;
    char *prompt;          /* joined arguments; NULL for none */
    const char *format;
    const char *think;     /* "true", "false" or a level; NULL unset */
    const char *keep_alive;
    const char *dimensions; /* embedding models: keep this many values */
    bool truncate, truncate_given; /* embedding models; not given: the server's default */
    bool verbose, no_word_wrap, hide_thinking, insecure;
} run_args;

static void usage(FILE *out)
{
    fputs("Usage: corral run MODEL [PROMPT] [flags]\n\n"
          "Run a model: answer PROMPT (or stdin) once, or chat interactively.\n\n"
          "Flags:\n"
          "      --verbose          print timing statistics after each answer\n"
          "      --nowordwrap       do not wrap words at the terminal width\n"
          "      --format FORMAT    json, or a JSON schema the answer must follow\n"
          "      --think[=LEVEL]    thinking on (true), off (false), or low|medium|high|max\n"
          "      --hidethinking     do not print the thinking\n"
          "      --keepalive DUR    how long the model stays loaded (e.g. 5m, 0, -1)\n"
          "      --dimensions N     embedding models: print the first N values, normalised\n"
          "      --truncate[=BOOL]  embedding models: cut a text longer than the context\n"
          "                         (true, the default) or refuse it (false)\n"
          "      --insecure         allow an http registry when pulling the model\n\n"
          "An on/off flag also takes a value: --verbose=false, --insecure=1.\n"
          "Words after -- are the prompt even when they start with a dash.\n\n"
          "Environment variables (CORRAL_NAME, else OLLAMA_NAME):\n"
          "      HOST        the server's address (default 127.0.0.1:11434)\n"
          "      NOHISTORY   1: the chat keeps no history in ~/.corral/history\n"
          "      EDITOR      the editor Ctrl-G opens in the chat (else VISUAL, EDITOR, vi)\n",
          out);
}

static bool append_prompt(char **prompt, const char *text)
{
    size_t old = *prompt ? strlen(*prompt) : 0, n = strlen(text);
    if (old + n + 2 > MAX_PROMPT_BYTES)
        return false;
    char *grown = realloc(*prompt, old + n + 2);
    if (!grown)
        return false;
    if (old)
        grown[old++] = ' ';
    memcpy(grown + old, text, n + 1);
    *prompt = grown;
    return true;
}

/* A word that is not a flag: the model's name, then the prompt's words. */
static bool take_word(run_args *a, const char *arg)
{
    if (!a->model) {
        a->model = arg;
    } else if (!append_prompt(&a->prompt, arg)) {
        fprintf(stderr, "Error: the prompt is larger than %u MB\n", MAX_PROMPT_BYTES >> 20);
        return false;
    }
    return true;
}

/* arg against run's boolean flags, "--verbose" or "--verbose=false" alike (flags.h) */
static flag_match bool_flag(run_args *a, const char *arg)
{
    const struct { const char *name; bool *value; } flags[] = {
        {"--verbose", &a->verbose},     {"--nowordwrap", &a->no_word_wrap},
        {"--hidethinking", &a->hide_thinking}, {"--insecure", &a->insecure},
        {"--truncate", &a->truncate},
    };
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        flag_match match = flag_bool(arg, flags[i].name, flags[i].value);
        if (match != FLAG_OTHER) {
            a->truncate_given |= flags[i].value == &a->truncate;
            return match;
        }
    }
    return FLAG_OTHER;
}

/* 0 parsed; 1 help shown; 2 usage error */
static int parse_args(int argc, char **argv, run_args *a)
{
    bool flags_ended = false; /* after "--" every word is the model or the prompt */
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (flags_ended) {
            if (!take_word(a, arg))
                return 2;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            flags_ended = true;
            continue;
        }
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage(stdout);
            return 1;
        }
        flag_match match = flag_value(argc, argv, &i, "--format", 0, &a->format);
        if (match == FLAG_OTHER)
            match = flag_value(argc, argv, &i, "--keepalive", 0, &a->keep_alive);
        if (match == FLAG_OTHER)
            match = flag_value(argc, argv, &i, "--dimensions", 0, &a->dimensions);
        if (match == FLAG_OTHER)
            match = bool_flag(a, arg);
        if (match == FLAG_BAD_VALUE)
            return 2;
        if (match == FLAG_SET)
            continue;
        if (strcmp(arg, "--think") == 0 || strncmp(arg, "--think=", 8) == 0) {
            a->think = flag_think_level(arg[7] ? arg + 8 : "");
            if (!a->think) {
                fprintf(stderr, "Error: invalid value for --think: \"%s\" (use true, false, "
                                "low, medium, high or max)\n", arg + 8);
                return 2;
            }
        } else if (strncmp(arg, "--", 2) == 0 || (arg[0] == '-' && arg[1] && !a->model)) {
            fprintf(stderr, "Error: unknown flag '%s'\n\n", arg);
            usage(stderr);
            return 2;
        } else if (!take_word(a, arg)) {
            return 2;
        }
    }
    if (!a->model) {
        usage(stderr);
        return 2;
    }
    if (a->format && strcmp(a->format, "json") != 0) {
        json_t *schema = json_loads(a->format, 0, NULL);
        bool is_schema = json_is_object(schema);
        json_decref(schema);
        if (!is_schema) {
            fprintf(stderr, "Error: invalid format '%s': use json or a JSON schema object "
                            "('{\"type\":\"object\",...}')\n", a->format);
            return 2;
        }
    }
    char *end = NULL;
    long dims = a->dimensions ? strtol(a->dimensions, &end, 10) : 0;
    if (a->dimensions && (end == a->dimensions || *end || dims <= 0 || dims > 1 << 20)) {
        fprintf(stderr, "Error: --dimensions must be a positive number\n");
        return 2;
    }
    return 0;
}

/* Piped stdin goes in front of the prompt arguments, as in ollama. */
static bool read_piped_stdin(run_args *a, corral_error *err)
{
    char *text = malloc(MAX_PROMPT_BYTES + 1);
    if (!text) {
        corral_error_set(err, "out of memory");
        return false;
    }
    size_t n = fread(text, 1, MAX_PROMPT_BYTES + 1, stdin);
    if (n > MAX_PROMPT_BYTES || ferror(stdin)) {
        corral_error_set(err, n > MAX_PROMPT_BYTES ? "stdin is larger than 64 MB"
                                                   : "cannot read stdin");
        free(text);
        return false;
    }
    text[n] = '\0';
    char *args = a->prompt;
    a->prompt = text;
    bool ok = !args || append_prompt(&a->prompt, args);
    free(args);
    if (!ok)
        corral_error_set(err, "the prompt is larger than 64 MB");
    return ok;
}

/* show the model; pull it when the server does not have it. */
static json_t *find_or_pull(corral_client *client, const run_args *a, corral_error *err)
{
    json_t *request = json_pack("{s:s}", "model", a->model);
    json_t *reply = NULL;
    long status = client_call(client, "POST", "/api/show", request, &reply, err);
    if (status == 404) {
        if (!pull_transfer(client, "/api/pull", a->model, a->insecure, err)) {
            json_decref(request);
            return NULL;
        }
        status = client_call(client, "POST", "/api/show", request, &reply, err);
    }
    json_decref(request);
    if (status != 200) {
        json_decref(reply);
        return NULL;
    }
    return reply;
}

static json_t *think_value(const char *text)
{
    if (!text)
        return NULL;
    if (strcmp(text, "true") == 0)
        return json_true();
    if (strcmp(text, "false") == 0)
        return json_false();
    return json_string(text);
}

static int run_once(run_session *s, const char *prompt)
{
    json_t *images = json_array();
    char *text = NULL;
    corral_error image_err = {{0}};
    if (s->media && !prompt_images_extract(prompt, &text, images, stderr, &image_err)) {
        fprintf(stderr, "Error: %s\n", image_err.message);
        json_decref(images);
        return 1;
    }
    json_t *request = json_pack("{s:s,s:s,s:b}", "model", s->model, "prompt", text ? text : prompt,
                                "stream", 1);
    free(text);
    if (json_array_size(images))
        json_object_set(request, "images", images);
    json_decref(images);
    if (s->format)
        json_object_set(request, "format", s->format);
    if (s->think)
        json_object_set(request, "think", s->think);
    if (s->keep_alive[0])
        json_object_set_new(request, "keep_alive", json_string(s->keep_alive));
    corral_error err = {{0}};
    generate_result result = generate_print(s->client, "/api/generate", request, &s->display,
                                            NULL, &err);
    json_decref(request);
    if (result == GENERATE_FAILED) {
        fprintf(stderr, "Error: %s\n", err.message);
        return 1;
    }
    return result == GENERATE_CANCELLED ? 130 : 0;
}

/* An embedding model's answer: the prompt's vector as one JSON array on stdout. */
static int run_embed(run_session *s, const run_args *a)
{
    if (!a->prompt || !*a->prompt) {
        fprintf(stderr, "Error: an embedding model needs text to embed: give it as an "
                        "argument or on stdin\n");
        return 1;
    }
    json_t *request = json_pack("{s:s,s:s}", "model", s->model, "input", a->prompt);
    if (a->dimensions)
        json_object_set_new(request, "dimensions", json_integer(atol(a->dimensions)));
    if (a->truncate_given)
        json_object_set_new(request, "truncate", json_boolean(a->truncate));
    if (s->keep_alive[0])
        json_object_set_new(request, "keep_alive", json_string(s->keep_alive));
    json_t *reply = NULL;
    corral_error err = {{0}};
    long status = client_call(s->client, "POST", "/api/embed", request, &reply, &err);
    json_decref(request);
    json_t *vector = json_array_get(json_object_get(reply, "embeddings"), 0);
    if (status != 200 || !json_is_array(vector)) {
        fprintf(stderr, "Error: %s\n", status == 200 ? "the server sent no embedding"
                                                      : err.message);
        json_decref(reply);
        return 1;
    }
    size_t i;
    json_t *v;
    json_array_foreach(vector, i, v) /* float32 values: 9 digits bring each back exactly */
        printf("%s%.9g", i ? "," : "[", json_number_value(v));
    printf("]\n");
    json_decref(reply);
    return 0;
}

int cmd_run(int argc, char **argv)
{
    run_args a = {0};
    int parsed = parse_args(argc, argv, &a);
    if (parsed) {
        free(a.prompt);
        return parsed == 1 ? 0 : 2;
    }
    corral_error err = {{0}};
    bool interactive = isatty(STDIN_FILENO) && !a.prompt;
    if (interactive && !isatty(STDOUT_FILENO)) {
        /* the chat's prompts and answers would go where nobody sees them (ollama runs an
         * empty prompt instead) */
        fprintf(stderr, "Error: no prompt: give it as an argument or on stdin; the interactive "
                        "chat needs a terminal on stdout\n");
        return 2;
    }
    if (!isatty(STDIN_FILENO) && !read_piped_stdin(&a, &err)) {
        fprintf(stderr, "Error: %s\n", err.message);
        free(a.prompt);
        return 1;
    }
    generate_install_interrupt();
    run_session s = {
        .display = {.word_wrap = !a.no_word_wrap, .hide_thinking = a.hide_thinking,
                    .verbose = a.verbose},
        .options = json_object(), .messages = json_array(), .think = think_value(a.think),
    };
    snprintf(s.model, sizeof s.model, "%s", a.model);
    if (a.format) /* "json", else the schema parse_args checked */
        s.format = strcmp(a.format, "json") == 0 ? json_string("json")
                                                  : json_loads(a.format, 0, NULL);
    snprintf(s.keep_alive, sizeof s.keep_alive, "%s", a.keep_alive ? a.keep_alive : "");
    int status = 1;
    json_t *shown = NULL;
    s.client = client_connect(&err);
    if (s.client && (shown = find_or_pull(s.client, &a, &err))) {
        s.media = show_has_capability(shown, "vision") || show_has_capability(shown, "audio");
        if (show_has_capability(shown, "embedding") &&
            !show_has_capability(shown, "completion")) {
            status = run_embed(&s, &a);
        } else if (interactive) {
            status = repl_run(&s, shown);
        } else {
            status = run_once(&s, a.prompt ? a.prompt : "");
        }
    } else {
        fprintf(stderr, "Error: %s\n", err.message);
    }
    json_decref(shown);
    client_close(s.client);
    json_decref(s.options);
    json_decref(s.messages);
    json_decref(s.think);
    json_decref(s.format);
    free(s.system);
    free(a.prompt);
    return status;
}

/*
 * The REPL of `corral run` (see repl.h). A turn is read with libedit (`"""` blocks and
 * `/set system """` span lines), then either runs a slash command or sends the conversation
 * to /api/chat. Ctrl-C cancels a generation or the line being typed; Ctrl-D on an empty line
 * exits. The conversation only grows by turns that completed. The paste and Ctrl-G keys are
 * repl_keys.c's.
 */
#include "repl.h"

#include <errno.h>
#include <histedit.h>
#include <langinfo.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/commands.h"
#include "cli/modelfile.h"
#include "cli/prompt_images.h"
#include "cli/progress.h"
#include "cli/repl_keys.h"
#include "cli/show.h"

#define HISTORY_ENTRIES 1000
#define MAX_WORDS 64

typedef enum input_kind { INPUT_TEXT, INPUT_INTERRUPT, INPUT_EOF } input_kind;

typedef struct repl {
    run_session *s;
    EditLine *el;
    History *history;
    char history_path[4200];
    bool keep_history;
    repl_line line;    /* the """ block state and held lines the key functions share */
    bool line_pasted;  /* the last line read carries held lines: a prompt, not a command */
} repl;

/* ---- line input ---- */

static char *prompt_text(EditLine *el)
{
    repl_line *line = NULL;
    el_get(el, EL_CLIENTDATA, &line);
    return (char *)repl_line_prompt(line);
}

static bool env_true(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0 && strcasecmp(v, "false") != 0;
}

static void open_history(repl *r)
{
    r->history = history_init();
    HistEvent ev;
    history(r->history, &ev, H_SETSIZE, HISTORY_ENTRIES);
    history(r->history, &ev, H_SETUNIQUE, 1);
    const char *home = getenv("HOME");
    r->keep_history = home && *home && !env_true("CORRAL_NOHISTORY") &&
                      !env_true("OLLAMA_NOHISTORY");
    if (r->keep_history &&
        (size_t)snprintf(r->history_path, sizeof r->history_path, "%s/.corral/history", home) <
            sizeof r->history_path)
        history(r->history, &ev, H_LOAD, r->history_path);
    else
        r->keep_history = false;
}

/*
 * libedit decodes what is typed with the C library's multibyte functions, and a program runs
 * in the "C" locale, whatever LANG says, until it calls setlocale: there every non-ASCII
 * character typed would be dropped. Prompts are UTF-8: the environment's locale when it is
 * UTF-8, else C.UTF-8 (LC_ALL=C, no LANG). Only LC_CTYPE changes; numbers keep their point.
 */
static void use_utf8_input(void)
{
    const char *set = setlocale(LC_CTYPE, "");
    if (!set || strcmp(nl_langinfo(CODESET), "UTF-8") != 0)
        setlocale(LC_CTYPE, "C.UTF-8");
}

static bool repl_open(repl *r)
{
    use_utf8_input();
    r->el = el_init("corral", stdin, stdout, stderr);
    if (!r->el)
        return false;
    open_history(r);
    el_set(r->el, EL_EDITOR, "emacs");
    el_set(r->el, EL_CLIENTDATA, &r->line);
    el_set(r->el, EL_PROMPT, prompt_text);
    el_set(r->el, EL_HIST, history, r->history);
    el_set(r->el, EL_SIGNAL, 1);
    repl_keys_bind(r->el);
    return true;
}

static void repl_close(repl *r)
{
    repl_keys_unbind();
    free(r->line.held);
    HistEvent ev;
    if (r->history && r->keep_history)
        history(r->history, &ev, H_SAVE, r->history_path);
    if (r->el)
        el_end(r->el);
    if (r->history)
        history_end(r->history);
}

/* One line from libedit, without its newline, into a malloc'ed string. */
static input_kind read_line(repl *r, char **out)
{
    int count = 0;
    errno = 0;
    client_reset_cancel();
    const char *line = el_gets(r->el, &count);
    char *pasted = r->line.held; /* held lines go in front of the line */
    r->line.held = NULL;
    r->line_pasted = pasted != NULL;
    if (!line || client_cancelled()) {
        free(pasted);
        return !line && !client_cancelled() && errno != EINTR ? INPUT_EOF : INPUT_INTERRUPT;
    }
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        n--;
    size_t len = pasted ? strlen(pasted) : 0;
    if (!repl_append_bytes(&pasted, &len, line, n)) {
        fprintf(stderr, "Error: the input is larger than %u MB\n", REPL_MAX_INPUT_BYTES >> 20);
        free(pasted);
        return INPUT_INTERRUPT;
    }
    *out = pasted ? pasted : strdup("");
    return *out ? INPUT_TEXT : INPUT_EOF;
}

static bool ends_with_quotes(const char *s)
{
    size_t n = strlen(s);
    return n >= 3 && strcmp(s + n - 3, "\"\"\"") == 0;
}

/* Append line (and a newline unless last) to *text, keeping under REPL_MAX_INPUT_BYTES. */
static bool append_text(char **text, const char *line, size_t len, bool newline)
{
    size_t old = *text ? strlen(*text) : 0;
    if (old + len + 2 > REPL_MAX_INPUT_BYTES)
        return false;
    char *grown = realloc(*text, old + len + 2);
    if (!grown)
        return false;
    memcpy(grown + old, line, len);
    if (newline)
        grown[old + len++] = '\n';
    grown[old + len] = '\0';
    *text = grown;
    return true;
}

typedef enum turn_kind {
    TURN_LINE,   /* one typed line: a slash command or a prompt */
    TURN_PROMPT, /* a `"""` block or a paste of several lines: always a prompt */
    TURN_SYSTEM, /* a `/set system """` block */
} turn_kind;

/*
 * A whole turn: one line (with the lines pasted before it), or a `"""` block (the opening
 * line's text after the quotes up to the line ending with `"""`).
 */
static input_kind read_turn(repl *r, char **out, turn_kind *turn)
{
    *out = NULL;
    *turn = TURN_LINE;
    char *line;
    input_kind kind = read_line(r, &line);
    if (kind != INPUT_TEXT)
        return kind;
    const char *body = NULL;
    if (r->line_pasted) { /* pasted text is taken as it is, quotes and slashes too */
        *turn = TURN_PROMPT;
    } else if (strncmp(line, "\"\"\"", 3) == 0) {
        body = line + 3;
        *turn = TURN_PROMPT;
    } else if (strncmp(line, "/set system \"\"\"", 15) == 0) {
        body = line + 15;
        *turn = TURN_SYSTEM;
    }
    if (!body) {
        *out = line;
        return INPUT_TEXT;
    }
    char *text = NULL;
    bool ok = true;
    if (ends_with_quotes(body)) {
        ok = append_text(&text, body, strlen(body) - 3, false);
    } else {
        ok = append_text(&text, body, strlen(body), *body != '\0');
        r->line.continuing = true;
        while (ok) {
            char *next;
            kind = read_line(r, &next);
            if (kind != INPUT_TEXT)
                break;
            bool last = ends_with_quotes(next);
            ok = append_text(&text, next, strlen(next) - (last ? 3 : 0), !last);
            free(next);
            if (last)
                break;
        }
        r->line.continuing = false;
    }
    free(line);
    if (!ok) {
        fprintf(stderr, "Error: the input is larger than %u MB\n", REPL_MAX_INPUT_BYTES >> 20);
        kind = INPUT_INTERRUPT;
    }
    if (kind != INPUT_TEXT) {
        free(text);
        return kind;
    }
    *out = text ? text : strdup("");
    return *out ? INPUT_TEXT : INPUT_EOF;
}

/* ---- talking to the server ---- */

/* The model's /api/show; with the session's /set system and /set parameter values over the
 * model's when with_session, so that /show modelfile is the Modelfile of this session. */
static json_t *fetch_show(run_session *s, bool with_session)
{
    corral_error err = {{0}};
    json_t *request = json_pack("{s:s}", "model", s->model);
    if (with_session && s->system)
        json_object_set_new(request, "system", json_string(s->system));
    if (with_session && json_object_size(s->options))
        json_object_set(request, "options", s->options);
    json_t *reply = NULL;
    long status = client_call(s->client, "POST", "/api/show", request, &reply, &err);
    json_decref(request);
    if (status != 200 || !json_is_object(reply)) {
        fprintf(stderr, "Error: %s\n", status == 200 ? "empty show reply" : err.message);
        json_decref(reply);
        return NULL;
    }
    return reply;
}

/* Load the model with a spinner so the first answer does not wait for it. */
static bool preload(run_session *s)
{
    json_t *request = json_pack("{s:s,s:b}", "model", s->model, "stream", 0);
    if (s->keep_alive[0])
        json_object_set_new(request, "keep_alive", json_string(s->keep_alive));
    if (s->think) /* a model that cannot think says so now, not at the first message */
        json_object_set(request, "think", s->think);
    progress *spinner = progress_create(stderr);
    progress_update(spinner, "", NULL, 0, 0);
    corral_error err = {{0}};
    long status = client_call(s->client, "POST", "/api/generate", request, NULL, &err);
    progress_free(spinner, false);
    json_decref(request);
    if (status != 200)
        fprintf(stderr, "Error: %s\n", err.message);
    return status == 200;
}

/* The user's message; for a model that sees images, the image paths in the prompt become
 * its images (prompt_images.h). false (said on stderr) when an image cannot be attached. */
static bool prompt_user_message(const run_session *s, const char *prompt, json_t **out)
{
    json_t *images = json_array();
    char *text = NULL;
    corral_error err = {{0}};
    if (s->media && !prompt_images_extract(prompt, &text, images, stderr, &err)) {
        fprintf(stderr, "Error: %s\n", err.message);
        json_decref(images);
        return false;
    }
    *out = json_pack("{s:s,s:s}", "role", "user", "content", text ? text : prompt);
    if (json_array_size(images))
        json_object_set(*out, "images", images);
    json_decref(images);
    free(text);
    return true;
}

static void chat(run_session *s, const char *prompt)
{
    json_t *messages = json_array();
    if (s->system)
        json_array_append_new(messages, json_pack("{s:s,s:s}", "role", "system", "content",
                                                  s->system));
    json_array_extend(messages, s->messages);
    json_t *user = NULL;
    if (!prompt_user_message(s, prompt, &user)) {
        json_decref(messages);
        return;
    }
    json_array_append(messages, user);
    json_t *request = json_pack("{s:s,s:o,s:b}", "model", s->model, "messages", messages,
                                "stream", 1);
    if (json_object_size(s->options))
        json_object_set(request, "options", s->options);
    if (s->format)
        json_object_set(request, "format", s->format);
    if (s->think)
        json_object_set(request, "think", s->think);
    if (s->keep_alive[0])
        json_object_set_new(request, "keep_alive", json_string(s->keep_alive));
    corral_error err = {{0}};
    char *answer = NULL;
    generate_result result = generate_print(s->client, "/api/chat", request, &s->display,
                                            &answer, &err);
    json_decref(request);
    if (result == GENERATE_DONE) {
        json_array_append(s->messages, user);
        json_array_append_new(s->messages, json_pack("{s:s,s:s}", "role", "assistant",
                                                     "content", answer ? answer : ""));
        printf("\n");
    } else if (result == GENERATE_FAILED) {
        fprintf(stderr, "Error: %s\n", err.message);
    }
    free(answer);
    json_decref(user);
}

/* ---- slash commands ---- */

static void print_help(const char *topic)
{
    if (topic && *topic == '/') /* "/? /set" is "/? set" */
        topic++;
    if (topic && strcmp(topic, "set") == 0) {
        puts("Available Commands:\n"
             "  /set parameter ...     Set a parameter\n"
             "  /set system <string>   Set system message\n"
             "  /set history           Enable history\n"
             "  /set nohistory         Disable history\n"
             "  /set wordwrap          Enable wordwrap\n"
             "  /set nowordwrap        Disable wordwrap\n"
             "  /set format json       Enable JSON mode\n"
             "  /set noformat          Disable formatting\n"
             "  /set verbose           Show LLM stats\n"
             "  /set quiet             Disable LLM stats\n"
             "  /set think [level]     Enable thinking (true, low, medium, high, max)\n"
             "  /set nothink           Disable thinking\n");
    } else if (topic && strcmp(topic, "show") == 0) {
        puts("Available Commands:\n"
             "  /show info         Show details for this model\n"
             "  /show license      Show model license\n"
             "  /show modelfile    Show Modelfile for this model\n"
             "  /show parameters   Show parameters for this model\n"
             "  /show system       Show system message\n"
             "  /show template     Show prompt template\n");
    } else if (topic && (strcmp(topic, "shortcuts") == 0 || strcmp(topic, "shortcut") == 0)) {
        puts("Available keyboard shortcuts:\n"
             "  Ctrl + a            Move to the beginning of the line (Home)\n"
             "  Ctrl + e            Move to the end of the line (End)\n"
             "   Alt + b            Move back (left) one word\n"
             "   Alt + f            Move forward (right) one word\n"
             "  Ctrl + k            Delete the sentence after the cursor\n"
             "  Ctrl + u            Delete the sentence before the cursor\n"
             "  Ctrl + w            Delete the word before the cursor\n\n"
             "  Ctrl + l            Clear the screen\n"
             "  Ctrl + g            Open the prompt in an editor ($CORRAL_EDITOR, ...)\n"
             "  Ctrl + c            Stop the model from responding\n"
             "  Ctrl + d            Exit corral (/bye)\n");
    } else {
        puts("Available Commands:\n"
             "  /set            Set session variables\n"
             "  /show           Show model information\n"
             "  /load <model>   Load a session or model\n"
             "  /save <model>   Save your current session\n"
             "  /clear          Clear session context\n"
             "  /list           List the local models\n"
             "  /bye            Exit\n"
             "  /?, /help       Help for a command\n"
             "  /? shortcuts    Help for keyboard shortcuts\n\n"
             "Use \"\"\" to begin a multi-line message.\n");
    }
}

/* "/set parameter NAME VALUE..." with words[0] = "/set" */
static void set_parameter(run_session *s, char **words, size_t n)
{
    if (n < 4) {
        puts("Usage:\n  /set parameter <name> <value>\n\n"
             "Common parameters (a Modelfile's PARAMETER names all work):\n"
             "  /set parameter seed <int>             Random number seed\n"
             "  /set parameter num_predict <int>      Max number of tokens to predict\n"
             "  /set parameter top_k <int>            Pick from top k num of tokens\n"
             "  /set parameter top_p <float>          Pick token based on sum of probabilities\n"
             "  /set parameter min_p <float>          Pick token based on top token probability "
             "* min_p\n"
             "  /set parameter num_ctx <int>          Set the context size\n"
             "  /set parameter temperature <float>    Set creativity level\n"
             "  /set parameter repeat_penalty <float> How strongly to penalize repetitions\n"
             "  /set parameter repeat_last_n <int>    Set how far back to look for repetitions\n"
             "  /set parameter num_gpu <int>          The number of layers to send to the GPU\n"
             "  /set parameter stop <string> <string> ...   Set the stop parameters");
        return;
    }
    const char *name = words[2];
    json_t *value = NULL;
    corral_error err = {{0}};
    size_t last = strcmp(name, "stop") == 0 ? n : 4; /* stop takes every value, the rest one */
    for (size_t i = 3; i < last; i++) {
        json_t *one;
        parameter_result result = modelfile_parameter_value(name, words[i], &one, &err);
        if (result == PARAMETER_DEPRECATED) {
            printf("warning: parameter %s is deprecated\n", name);
            json_decref(value);
            return;
        }
        if (result == PARAMETER_INVALID) {
            printf("Couldn't set parameter: %s\n", err.message);
            json_decref(value);
            return;
        }
        if (!value) {
            value = one;
        } else { /* only stop has several values: a list */
            json_array_extend(value, one);
            json_decref(one);
        }
    }
    json_object_set_new(s->options, name, value);
    if (strcmp(name, "stop") == 0) {
        printf("Set parameter '%s' to '", name);
        for (size_t i = 3; i < n; i++)
            printf("%s%s", i > 3 ? ", " : "", words[i]);
        puts("'");
    } else {
        printf("Set parameter '%s' to '%s'\n", name, words[3]);
    }
}

/* /set think on a model that cannot think: said now, not only when the next turn fails */
static void warn_without_thinking(run_session *s)
{
    json_t *shown = fetch_show(s, false);
    if (shown && !show_has_capability(shown, "thinking"))
        printf("warning: model '%s' does not support thinking output\n", s->model);
    json_decref(shown);
}

static void set_command(repl *r, char **words, size_t n, const char *line)
{
    run_session *s = r->s;
    const char *what = n > 1 ? words[1] : "";
    if (strcmp(what, "parameter") == 0) {
        set_parameter(s, words, n);
    } else if (strcmp(what, "system") == 0 && n < 3) {
        print_help("set");
    } else if (strcmp(what, "system") == 0) {
        const char *text = strstr(line, "system") + strlen("system");
        text += strspn(text, " \t");
        free(s->system);
        s->system = strdup(text);
        puts("Set system message.");
    } else if (strcmp(what, "history") == 0 || strcmp(what, "nohistory") == 0) {
        r->keep_history = what[0] == 'h' && r->history_path[0];
        puts(what[0] == 'h' ? "Set history." : "Set nohistory.");
    } else if (strcmp(what, "wordwrap") == 0 || strcmp(what, "nowordwrap") == 0) {
        s->display.word_wrap = what[0] == 'w';
        printf("Set '%s' mode.\n", what);
    } else if (strcmp(what, "verbose") == 0 || strcmp(what, "quiet") == 0) {
        s->display.verbose = what[0] == 'v';
        printf("Set '%s' mode.\n", what);
    } else if (strcmp(what, "format") == 0) {
        if (n < 3 || strcmp(words[2], "json") != 0) {
            puts("Invalid or missing format. For 'json' mode use '/set format json'");
            return;
        }
        json_decref(s->format);
        s->format = json_string("json");
        puts("Set format to 'json' mode.");
    } else if (strcmp(what, "noformat") == 0) {
        json_decref(s->format);
        s->format = NULL;
        puts("Disabled format.");
    } else if (strcmp(what, "think") == 0 || strcmp(what, "nothink") == 0) {
        json_decref(s->think);
        if (what[0] == 'n')
            s->think = json_false();
        else if (n > 2 && strcmp(words[2], "true") != 0)
            s->think = json_string(words[2]);
        else
            s->think = json_true();
        if (what[0] != 'n' && n > 2)
            printf("Set 'think' mode to '%s'.\n", words[2]);
        else
            printf("Set '%s' mode.\n", what);
        warn_without_thinking(s);
    } else if (!*what) {
        print_help("set");
    } else {
        printf("Unknown command '/set %s'. Type /? for help\n", what);
    }
}

static void show_parameters(run_session *s, const json_t *shown)
{
    /* as ollama lays it out: each list indented, a blank line after each */
    const char *model_params = json_string_value(json_object_get(shown, "parameters"));
    puts("Model defined parameters:");
    if (!model_params || !*model_params)
        puts("  No additional parameters were specified for this model.");
    for (const char *line = model_params; line && *line;) {
        size_t n = strcspn(line, "\n");
        if (n)
            printf("  %.*s\n", (int)n, line);
        line += n + (line[n] == '\n');
    }
    puts("");
    if (json_object_size(s->options)) {
        puts("User defined parameters:");
        const char *key;
        json_t *value;
        json_object_foreach(s->options, key, value) {
            char *text = json_dumps(value, JSON_ENCODE_ANY | JSON_COMPACT);
            printf("  %-30s %s\n", key, text ? text : "?");
            free(text);
        }
        puts("");
    }
}

static bool is_set(const json_t *text)
{
    return json_string_value(text) && *json_string_value(text);
}

static void show_command(repl *r, char **words, size_t n)
{
    run_session *s = r->s;
    const char *what = n > 1 ? words[1] : "";
    static const struct { const char *name; show_view view; const char *field, *none; } views[] = {
        {"info", SHOW_INFO, NULL, NULL},
        {"license", SHOW_LICENSE, "license", "No license was specified for this model."},
        {"modelfile", SHOW_MODELFILE, "modelfile", "No Modelfile was found."},
        {"parameters", SHOW_PARAMETERS, NULL, NULL},
        {"system", SHOW_SYSTEM, "system", "No system message was specified for this model."},
        {"template", SHOW_TEMPLATE, "template", "No prompt template was specified for this model."},
    };
    size_t v = 0;
    while (v < sizeof views / sizeof views[0] && strcmp(views[v].name, what) != 0)
        v++;
    if (v == sizeof views / sizeof views[0]) {
        if (*what)
            printf("Unknown command '/show %s'. Type /? for help\n", what);
        else
            print_help("show");
        return;
    }
    if (views[v].view == SHOW_SYSTEM && s->system) {
        puts(s->system);
        return;
    }
    json_t *shown = fetch_show(s, true);
    if (!shown)
        return;
    if (views[v].view == SHOW_PARAMETERS) {
        show_parameters(s, shown);
    } else if (views[v].field && !is_set(json_object_get(shown, views[v].field))) {
        puts(views[v].none);
    } else {
        show_print(shown, views[v].view, false, stdout);
    }
    json_decref(shown);
}

static void save_command(run_session *s, const char *name)
{
    json_t *request = json_pack("{s:s,s:s,s:b}", "model", name, "from", s->model, "stream", 0);
    if (s->system)
        json_object_set_new(request, "system", json_string(s->system));
    if (json_object_size(s->options))
        json_object_set(request, "parameters", s->options);
    if (json_array_size(s->messages))
        json_object_set(request, "messages", s->messages);
    corral_error err = {{0}};
    long status = client_call(s->client, "POST", "/api/create", request, NULL, &err);
    json_decref(request);
    if (status / 100 == 2)
        printf("Created new model '%s'\n", name);
    else
        fprintf(stderr, "error: %s\n", err.message);
}

/* The model's stored messages as a transcript, before the first prompt. */
static void repl_print_history(const json_t *show_reply)
{
    size_t i;
    const json_t *msg;
    json_array_foreach(json_object_get(show_reply, "messages"), i, msg) {
        const char *role = json_string_value(json_object_get(msg, "role"));
        const char *content = json_string_value(json_object_get(msg, "content"));
        if (!role || !content)
            continue;
        if (strcmp(role, "user") == 0)
            printf(">>> %s\n", content);
        else if (strcmp(role, "assistant") == 0)
            printf("%s\n\n", content);
    }
}

static void load_command(run_session *s, const char *name)
{
    char previous[sizeof s->model];
    memcpy(previous, s->model, sizeof previous);
    snprintf(s->model, sizeof s->model, "%s", name);
    json_t *shown = fetch_show(s, false);
    if (!shown) {
        memcpy(s->model, previous, sizeof previous);
        return;
    }
    json_array_clear(s->messages);
    s->media = show_has_capability(shown, "vision") || show_has_capability(shown, "audio");
    printf("Loading model '%s'\n", s->model);
    preload(s);
    repl_print_history(shown);
    json_decref(shown);
}

/* Split a copy of line into at most MAX_WORDS words. */
static size_t split_words(char *copy, char **words)
{
    size_t n = 0;
    char *save = NULL;
    for (char *w = strtok_r(copy, " \t", &save); w && n < MAX_WORDS; w = strtok_r(NULL, " \t", &save))
        words[n++] = w;
    return n;
}

/* false when the REPL should end */
static bool slash_command(repl *r, const char *line)
{
    char *copy = strdup(line);
    if (!copy)
        return true;
    char *words[MAX_WORDS];
    size_t n = split_words(copy, words);
    const char *cmd = n ? words[0] : "/";
    bool more = true;
    if (strcmp(cmd, "/bye") == 0 || strcmp(cmd, "/exit") == 0) {
        more = false;
    } else if (strcmp(cmd, "/?") == 0 || strcmp(cmd, "/help") == 0) {
        print_help(n > 1 ? words[1] : NULL);
    } else if (strcmp(cmd, "/set") == 0) {
        set_command(r, words, n, line);
    } else if (strcmp(cmd, "/show") == 0) {
        show_command(r, words, n);
    } else if (strcmp(cmd, "/clear") == 0) {
        json_array_clear(r->s->messages);
        puts("Cleared session context");
    } else if (strcmp(cmd, "/list") == 0) { /* "/list PREFIX" as `corral list PREFIX` */
        words[0] = "list";
        cmd_list((int)n, words);
    } else if (strcmp(cmd, "/save") == 0 || strcmp(cmd, "/load") == 0) {
        if (n != 2)
            printf("Usage:\n  %s <modelname>\n", cmd);
        else if (cmd[1] == 's')
            save_command(r->s, words[1]);
        else
            load_command(r->s, words[1]);
    } else {
        printf("Unknown command '%s'. Type /? for help\n", cmd);
    }
    free(copy);
    return more;
}

/* ---- the loop ---- */

static void remember(repl *r, const char *text)
{
    HistEvent ev;
    if (*text)
        history(r->history, &ev, H_ENTER, text);
}

int repl_run(run_session *s, const json_t *show_reply)
{
    if (!preload(s))
        return 1;
    repl_print_history(show_reply);
    repl r = {.s = s};
    if (!repl_open(&r)) {
        fprintf(stderr, "Error: cannot start line editing\n");
        return 1;
    }
    for (;;) {
        char *text;
        turn_kind turn;
        input_kind kind = read_turn(&r, &text, &turn);
        if (kind == INPUT_EOF) {
            putchar('\n'); /* the shell's prompt starts on a line of its own */
            break;
        }
        if (kind == INPUT_INTERRUPT) {
            puts("\nUse Ctrl + d or /bye to exit.");
            continue;
        }
        if (r.keep_history)
            remember(&r, text);
        bool more = true;
        if (turn == TURN_SYSTEM) {
            free(s->system);
            s->system = strdup(text);
            puts("Set system message.");
        } else if (turn == TURN_LINE && text[0] == '/' &&
                   !(s->media && prompt_images_starts_with_file(text))) {
            more = slash_command(&r, text);
        } else if (text[strspn(text, " \t\n")] != '\0') {
            chat(s, text);
        }
        free(text);
        if (!more)
            break;
    }
    repl_close(&r);
    return 0;
}

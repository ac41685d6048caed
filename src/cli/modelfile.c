/*
 * Modelfile parsing and request building (see modelfile.h). The grammar is ollama's:
 * `INSTRUCTION args` per line, case-insensitive names, `#` comment lines, values bare to the
 * end of the line, "quoted" or """multi-line""" (both may span lines; the closing quote ends
 * its line). A parse walks the text once with a cursor that counts lines.
 */
#include "modelfile.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/utf8.h"
#include "options/options.h"

static const struct {
    const char *name;
    modelfile_kind kind;
} instructions[] = {
    {"from", MODELFILE_FROM},         {"parameter", MODELFILE_PARAMETER},
    {"template", MODELFILE_TEMPLATE}, {"system", MODELFILE_SYSTEM},
    {"adapter", MODELFILE_ADAPTER},   {"license", MODELFILE_LICENSE},
    {"message", MODELFILE_MESSAGE},   {"requires", MODELFILE_REQUIRES},
    {"renderer", MODELFILE_RENDERER}, {"parser", MODELFILE_PARSER},
    {"draft", MODELFILE_DRAFT},
};

static const char *const deprecated_parameters[] = {
    "penalize_newline", "low_vram", "f16_kv", "logits_all", "vocab_only",
    "use_mlock", "mirostat", "mirostat_tau", "mirostat_eta", "numa",
};

#define INVALID_COMMAND                                                                        \
    "command must be one of \"from\", \"license\", \"template\", \"system\", \"adapter\", "    \
    "\"draft\", \"renderer\", \"parser\", \"parameter\", \"message\", or \"requires\""

typedef struct cursor {
    const char *p, *end;
    unsigned line;
    corral_error *err;
} cursor;

static bool at_line_end(const cursor *c)
{
    return c->p == c->end || *c->p == '\n' || *c->p == '\r';
}

static void skip_blanks(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
        c->p++;
}

/* Move past the end of the current line. */
static void next_line(cursor *c)
{
    while (!at_line_end(c))
        c->p++;
    if (c->p < c->end && *c->p == '\r')
        c->p++;
    if (c->p < c->end && *c->p == '\n')
        c->p++;
    c->line++;
}

static size_t take_word(cursor *c, bool digits_and_underscore)
{
    const char *start = c->p;
    while (c->p < c->end && (isalpha((unsigned char)*c->p) ||
                             (digits_and_underscore && (isdigit((unsigned char)*c->p) ||
                                                        *c->p == '_'))))
        c->p++;
    return (size_t)(c->p - start);
}

/* Copy [start, stop) dropping CRs of CRLF line ends. */
static char *copy_value(const char *start, const char *stop)
{
    char *out = malloc((size_t)(stop - start) + 1);
    if (!out)
        return NULL;
    size_t n = 0;
    for (const char *q = start; q < stop; q++)
        if (!(*q == '\r' && q + 1 < stop && q[1] == '\n'))
            out[n++] = *q;
    out[n] = '\0';
    return out;
}

/* A quoted value opened by quote (`"` or `"""`) at c->p; the closing quote must end a line.
 * A quote with more text after it on its line is part of the value, as ollama reads
 * """a"""b""" as a"""b (and as `corral show --modelfile` writes a text that holds """). */
static char *take_quoted(cursor *c, const char *quote)
{
    unsigned opened_on = c->line;
    size_t qlen = strlen(quote);
    const char *start = c->p + qlen;
    for (const char *q = start; q + qlen <= c->end; q++) {
        if (*q == '\n')
            c->line++;
        if (memcmp(q, quote, qlen) != 0)
            continue;
        const char *after = q + qlen;
        while (after < c->end && (*after == ' ' || *after == '\t'))
            after++;
        if (after != c->end && *after != '\n' && *after != '\r')
            continue; /* a quote inside a value that goes on */
        c->p = after;
        char *value = copy_value(start, q);
        if (!value)
            corral_error_set(c->err, "out of memory");
        return value;
    }
    corral_error_set(c->err, "line %u: unterminated %s", opened_on,
                     qlen == 3 ? "\"\"\" (multi-line value)" : "\" (quoted value)");
    return NULL;
}

static char *take_value(cursor *c, const char *instruction)
{
    skip_blanks(c);
    if (c->end - c->p >= 3 && memcmp(c->p, "\"\"\"", 3) == 0)
        return take_quoted(c, "\"\"\"");
    if (c->p < c->end && *c->p == '"')
        return take_quoted(c, "\"");
    const char *start = c->p;
    while (!at_line_end(c))
        c->p++;
    const char *stop = c->p;
    while (stop > start && (stop[-1] == ' ' || stop[-1] == '\t'))
        stop--;
    if (stop == start) {
        corral_error_set(c->err, "line %u: %s needs a value", c->line, instruction);
        return NULL;
    }
    char *value = copy_value(start, stop);
    if (!value)
        corral_error_set(c->err, "out of memory");
    return value;
}

static bool lookup_instruction(const char *name, size_t len, modelfile_kind *kind)
{
    for (size_t i = 0; i < sizeof instructions / sizeof instructions[0]; i++)
        if (strlen(instructions[i].name) == len && strncasecmp(instructions[i].name, name, len) == 0) {
            *kind = instructions[i].kind;
            return true;
        }
    return false;
}

static bool is_message_role(const char *role)
{
    return strcmp(role, "system") == 0 || strcmp(role, "user") == 0 ||
           strcmp(role, "assistant") == 0;
}

/* One instruction starting at c->p (a letter); appends to mf. */
static bool parse_command(cursor *c, modelfile *mf, size_t *cap)
{
    modelfile_command cmd = {.line = c->line};
    const char *name = c->p;
    size_t name_len = take_word(c, false);
    if (!lookup_instruction(name, name_len, &cmd.kind) ||
        (!at_line_end(c) && *c->p != ' ' && *c->p != '\t')) {
        corral_error_set(c->err, "line %u: %s", c->line, INVALID_COMMAND);
        return false;
    }
    char upper[16];
    snprintf(upper, sizeof upper, "%.*s", (int)name_len, name);
    for (char *u = upper; *u; u++)
        *u = (char)toupper((unsigned char)*u);
    if (cmd.kind == MODELFILE_PARAMETER || cmd.kind == MODELFILE_MESSAGE) {
        skip_blanks(c);
        const char *key = c->p;
        size_t key_len = take_word(c, cmd.kind == MODELFILE_PARAMETER);
        if (key_len == 0 || at_line_end(c) || (*c->p != ' ' && *c->p != '\t')) {
            corral_error_set(c->err, "line %u: %s needs %s and a value", c->line, upper,
                             cmd.kind == MODELFILE_PARAMETER ? "a name" : "a role");
            return false;
        }
        cmd.key = strndup(key, key_len);
        if (!cmd.key) {
            corral_error_set(c->err, "out of memory");
            return false;
        }
        if (cmd.kind == MODELFILE_MESSAGE && !is_message_role(cmd.key)) {
            corral_error_set(c->err, "line %u: message role must be one of \"system\", "
                                     "\"user\", or \"assistant\"", c->line);
            free(cmd.key);
            return false;
        }
    }
    cmd.value = take_value(c, upper);
    if (!cmd.value) {
        free(cmd.key);
        return false;
    }
    if (mf->n_commands == *cap) {
        size_t grown_cap = *cap ? *cap * 2 : 16;
        modelfile_command *grown = realloc(mf->commands, grown_cap * sizeof *grown);
        if (!grown) {
            corral_error_set(c->err, "out of memory");
            free(cmd.key);
            free(cmd.value);
            return false;
        }
        mf->commands = grown;
        *cap = grown_cap;
    }
    mf->commands[mf->n_commands++] = cmd;
    return true;
}

/* The 1-based line of at in text. */
static unsigned line_of(const char *text, const char *at)
{
    unsigned line = 1;
    for (const char *q = text; q < at; q++)
        line += *q == '\n';
    return line;
}

modelfile *modelfile_parse(const char *text, size_t len, corral_error *err)
{
    if (len > MODELFILE_MAX_BYTES) {
        corral_error_set(err, "the Modelfile is larger than %u MB", MODELFILE_MAX_BYTES >> 20);
        return NULL;
    }
    const char *nul = memchr(text, '\0', len);
    if (nul) {
        corral_error_set(err, "line %u: NUL byte (is this a binary file?)", line_of(text, nul));
        return NULL;
    }
    /* A value becomes a JSON string of the create request, which must be UTF-8: text in
     * another encoding is refused here, where the line can still be named. */
    int incomplete_tail;
    size_t valid = utf8_valid_prefix((const unsigned char *)text, len, &incomplete_tail);
    if (valid < len) {
        corral_error_set(err, "line %u: not UTF-8 text (save the Modelfile as UTF-8)",
                         line_of(text, text + valid));
        return NULL;
    }
    modelfile *mf = calloc(1, sizeof *mf);
    if (!mf) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    cursor c = {text, text + len, 1, err};
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
        c.p += 3;
    size_t cap = 0;
    while (c.p < c.end) {
        skip_blanks(&c);
        if (at_line_end(&c) || *c.p == '#') {
            next_line(&c);
            continue;
        }
        if (!parse_command(&c, mf, &cap)) {
            modelfile_free(mf);
            return NULL;
        }
        next_line(&c);
    }
    for (size_t i = 0; i < mf->n_commands; i++)
        if (mf->commands[i].kind == MODELFILE_FROM)
            return mf;
    corral_error_set(err, "no FROM line");
    modelfile_free(mf);
    return NULL;
}

void modelfile_free(modelfile *mf)
{
    if (!mf)
        return;
    for (size_t i = 0; i < mf->n_commands; i++) {
        free(mf->commands[i].key);
        free(mf->commands[i].value);
    }
    free(mf->commands);
    free(mf);
}

/* Go's strconv.ParseBool */
static bool parse_go_bool(const char *text, bool *out)
{
    static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True"};
    static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False"};
    for (size_t i = 0; i < 6; i++) {
        if (strcmp(text, yes[i]) == 0) {
            *out = true;
            return true;
        }
        if (strcmp(text, no[i]) == 0) {
            *out = false;
            return true;
        }
    }
    return false;
}

parameter_result modelfile_parameter_value(const char *key, const char *value, json_t **out,
                                           corral_error *err)
{
    *out = NULL;
    for (size_t i = 0; i < sizeof deprecated_parameters / sizeof deprecated_parameters[0]; i++)
        if (strcmp(key, deprecated_parameters[i]) == 0)
            return PARAMETER_DEPRECATED;
    const option_info *option = options_find(key);
    if (!option) {
        corral_error_set(err, "unknown parameter '%s'", key);
        return PARAMETER_INVALID;
    }
    char *end;
    errno = 0;
    switch (option->type) {
    case OPTION_INT: {
        long long v = strtoll(value, &end, 10);
        if (errno || end == value || *end) {
            corral_error_set(err, "invalid int value '%s' for parameter %s", value, key);
            return PARAMETER_INVALID;
        }
        *out = json_integer(v);
        break;
    }
    case OPTION_FLOAT: {
        double v = strtod(value, &end);
        if (errno || end == value || *end || !isfinite(v)) {
            corral_error_set(err, "invalid float value '%s' for parameter %s", value, key);
            return PARAMETER_INVALID;
        }
        *out = json_real(v);
        break;
    }
    case OPTION_BOOL: {
        bool v;
        if (!parse_go_bool(value, &v)) {
            corral_error_set(err, "invalid bool value '%s' for parameter %s", value, key);
            return PARAMETER_INVALID;
        }
        *out = json_boolean(v);
        break;
    }
    case OPTION_STRING_ARRAY: {
        int incomplete_tail;
        size_t n = strlen(value);
        if (utf8_valid_prefix((const unsigned char *)value, n, &incomplete_tail) < n) {
            corral_error_set(err, "invalid value for parameter %s: not UTF-8 text", key);
            return PARAMETER_INVALID;
        }
        *out = json_pack("[s]", value);
        break;
    }
    }
    if (!*out) {
        corral_error_set(err, "out of memory");
        return PARAMETER_INVALID;
    }
    return PARAMETER_OK;
}

/* golang.org/x/mod/semver validity, with the leading "v" optional: 1, 1.2, 1.2.3[-pre][+b] */
static bool is_semver(const char *text)
{
    const char *p = text + (*text == 'v');
    for (int part = 0; part < 3; part++) {
        if (!isdigit((unsigned char)*p) || (*p == '0' && isdigit((unsigned char)p[1])))
            return false;
        while (isdigit((unsigned char)*p))
            p++;
        if (*p != '.')
            break;
        if (part == 2)
            return false;
        p++;
    }
    if (*p == '-' || *p == '+') {
        p++;
        if (!*p)
            return false;
        for (; *p; p++)
            if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '+')
                return false;
    }
    return *p == '\0';
}

static bool add_parameter(json_t *params, const modelfile_command *cmd, FILE *warnings,
                          corral_error *err)
{
    json_t *value;
    switch (modelfile_parameter_value(cmd->key, cmd->value, &value, err)) {
    case PARAMETER_DEPRECATED:
        if (warnings)
            fprintf(warnings, "warning: parameter %s is deprecated\n", cmd->key);
        return true;
    case PARAMETER_INVALID:
        corral_error_prefix(err, "line %u", cmd->line);
        return false;
    case PARAMETER_OK:
        break;
    }
    json_t *old = json_object_get(params, cmd->key);
    if (json_is_array(old) && json_is_array(value)) /* repeated `stop` lines build a list */
        json_array_extend(old, value);
    else
        json_object_set(params, cmd->key, value);
    json_decref(value);
    return true;
}

json_t *modelfile_to_request(const modelfile *mf, FILE *warnings, corral_error *err)
{
    json_t *request = json_object();
    json_t *params = json_object();
    json_t *messages = json_array();
    json_t *licenses = json_array();
    bool ok = request && params && messages && licenses;
    if (!ok)
        corral_error_set(err, "out of memory");
    for (size_t i = 0; ok && i < mf->n_commands; i++) {
        const modelfile_command *cmd = &mf->commands[i];
        switch (cmd->kind) {
        case MODELFILE_FROM:
        case MODELFILE_ADAPTER:
        case MODELFILE_DRAFT:
            break; /* paths: resolved by the caller */
        case MODELFILE_PARAMETER:
            ok = add_parameter(params, cmd, warnings, err);
            break;
        case MODELFILE_TEMPLATE:
            json_object_set_new(request, "template", json_string(cmd->value));
            break;
        case MODELFILE_SYSTEM:
            json_object_set_new(request, "system", json_string(cmd->value));
            break;
        case MODELFILE_RENDERER:
            json_object_set_new(request, "renderer", json_string(cmd->value));
            break;
        case MODELFILE_PARSER:
            json_object_set_new(request, "parser", json_string(cmd->value));
            break;
        case MODELFILE_LICENSE:
            json_array_append_new(licenses, json_string(cmd->value));
            break;
        case MODELFILE_MESSAGE:
            json_array_append_new(messages, json_pack("{s:s,s:s}", "role", cmd->key, "content",
                                                      cmd->value));
            break;
        case MODELFILE_REQUIRES:
            if (!is_semver(cmd->value)) {
                corral_error_set(err, "line %u: requires must be a valid semver (e.g. 0.14.0)",
                                 cmd->line);
                ok = false;
                break;
            }
            json_object_set_new(request, "requires",
                                json_string(cmd->value + (cmd->value[0] == 'v')));
            break;
        }
    }
    if (ok && json_object_size(params))
        json_object_set(request, "parameters", params);
    if (ok && json_array_size(messages))
        json_object_set(request, "messages", messages);
    if (ok && json_array_size(licenses))
        json_object_set(request, "license", licenses);
    json_decref(params);
    json_decref(messages);
    json_decref(licenses);
    if (!ok) {
        json_decref(request);
        return NULL;
    }
    return request;
}

/*
 * The Modelfile: parsing its text into commands, and turning the commands that
 * need no file access into the fields of an /api/create request (template, system, license,
 * parameters type-checked against the option table, messages, requires, renderer, parser).
 * FROM / ADAPTER / DRAFT paths are resolved by `corral create`, which reads the disk.
 * Every error names the line it is about: "line 4: unknown parameter 'tempature'".
 */
#ifndef CORRAL_CLI_MODELFILE_H
#define CORRAL_CLI_MODELFILE_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#include "corral/error.h"

#define MODELFILE_MAX_BYTES (16u << 20)

typedef enum modelfile_kind {
    MODELFILE_FROM,
    MODELFILE_PARAMETER,
    MODELFILE_TEMPLATE,
    MODELFILE_SYSTEM,
    MODELFILE_ADAPTER,
    MODELFILE_LICENSE,
    MODELFILE_MESSAGE,
    MODELFILE_REQUIRES,
    MODELFILE_RENDERER,
    MODELFILE_PARSER,
    MODELFILE_DRAFT,
} modelfile_kind;

typedef struct modelfile_command {
    modelfile_kind kind;
    char *key;     /* PARAMETER name or MESSAGE role; NULL for the others */
    char *value;   /* unquoted */
    unsigned line; /* 1-based line of the instruction */
} modelfile_command;

typedef struct modelfile {
    modelfile_command *commands;
    size_t n_commands;
} modelfile;

/* Parse len bytes of Modelfile text (UTF-8). NULL with err ("line 3: …", "no FROM line"). */
modelfile *modelfile_parse(const char *text, size_t len, corral_error *err);
void modelfile_free(modelfile *mf);

typedef enum parameter_result {
    PARAMETER_OK,         /* *out holds the JSON value */
    PARAMETER_DEPRECATED, /* ollama dropped this option: warn and ignore */
    PARAMETER_INVALID,    /* err says why */
} parameter_result;

/*
 * A parameter's text value as the JSON its option takes: integer, float, boolean, or
 * a one-string array for `stop`. Shared by the Modelfile and the REPL's /set parameter.
 */
parameter_result modelfile_parameter_value(const char *key, const char *value, json_t **out,
                                           corral_error *err);

/*
 * The create request fields from every command except FROM, ADAPTER and DRAFT. Deprecated
 * parameters are reported on warnings (may be NULL). NULL with err naming the line.
 */
json_t *modelfile_to_request(const modelfile *mf, FILE *warnings, corral_error *err);

#endif

/*
 * Printing an /api/show reply the way `ollama show` does: the default sections view (Model,
 * Capabilities, Projector, Parameters, System, License, and Metadata/Tensors when verbose) or
 * one raw field. Shared by `corral show` and the REPL's /show.
 */
#ifndef CORRAL_CLI_SHOW_H
#define CORRAL_CLI_SHOW_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

typedef enum show_view {
    SHOW_INFO,
    SHOW_LICENSE,
    SHOW_MODELFILE,
    SHOW_PARAMETERS,
    SHOW_SYSTEM,
    SHOW_TEMPLATE,
} show_view;

void show_print(const json_t *reply, show_view view, bool verbose, FILE *out);

/* Whether an /api/show reply lists capability name ("vision", "thinking", ...). */
bool show_has_capability(const json_t *reply, const char *name);

#endif

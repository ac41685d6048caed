/*
 * Text that /api/show prints the way ollama does: the `parameters` block (key padded to 30
 * columns, value as Go's %#v) and the generated `modelfile` (FROM <blob path>, ADAPTER
 * <blob path>, TEMPLATE, SYSTEM, PARAMETER, LICENSE, MESSAGE with ollama's quoting).
 */
#ifndef CORRAL_SERVER_MODELFILE_TEXT_H
#define CORRAL_SERVER_MODELFILE_TEXT_H

#include <jansson.h>

#include "server/models/model_ref.h"

/* The parameters text of a PARAMS object (NULL: ""). malloc'ed; NULL only out of memory. */
char *modelfile_parameters_text(const json_t *params);

/* The whole generated Modelfile of ref. malloc'ed; NULL only out of memory. */
char *modelfile_generate(const model_ref *ref);

#endif

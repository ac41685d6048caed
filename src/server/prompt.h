/*
 * Turning a generate or chat request into prompt text with the model's template: the
 * request's `template` (generate), else the TEMPLATE layer (Go), else the GGUF's
 * tokenizer.chat_template (Jinja, with bos_token/eos_token), else a bare {{ .Prompt }}.
 * Assembles the messages as ollama does (model SYSTEM and MESSAGES first).
 */
#ifndef CORRAL_SERVER_PROMPT_H
#define CORRAL_SERVER_PROMPT_H

#include <jansson.h>
#include <stdbool.h>

#include "server/model_ref.h"

/* malloc'ed prompt, or NULL with err (a template error: HTTP 500; bad fields: 400). */
char *prompt_build(const model_ref *ref, const json_t *request, bool chat, corral_error *err);

#endif

/*
 * Turning a generate or chat request into prompt text with the model's template: the
 * request's `template` (generate), else the TEMPLATE layer (Go) unless ollama's rule prefers
 * the GGUF's tokenizer.chat_template (Jinja, with bos_token/eos_token; model_info.h), else a
 * bare {{ .Prompt }}; for a model that speaks harmony (gpt-oss) without a TEMPLATE, the built-in
 * harmony renderer (harmony_model.h); for a model whose config names one of the built-in
 * renderers, or a Laguna model without a TEMPLATE (renderer_model.h), that renderer. Assembles the messages as ollama does (model SYSTEM and MESSAGES
 * first), and says which tags split that template's answers into thinking, content and tool
 * calls.
 */
#ifndef CORRAL_SERVER_PROMPT_H
#define CORRAL_SERVER_PROMPT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "server/models/model_ref.h"
#include "template/renderer.h"
#include "template/template.h"

/* Which part of a chat's history a prompt renders (ollama's `truncate`). */
typedef struct prompt_window {
    size_t first;      /* the caller's: of the messages before it only the system ones stay */
    size_t n_messages; /* prompt_build's: the history's length (model SYSTEM and MESSAGEs too) */
    size_t n_dropped;  /* prompt_build's: the messages left out */
} prompt_window;

/* malloc'ed prompt, or NULL with err (a template error: HTTP 500). tags: those of the
 * template or renderer that rendered it (all empty for a bare {{ .Prompt }}), or harmony's. window: NULL renders the
 * whole history; a chat's may leave its start out. */
char *prompt_build(const model_ref *ref, const json_t *request, bool chat, prompt_window *window,
                   corral_output_tags *tags, corral_error *err);

/* The built-in renderer that lays out request's prompt (template/renderer.h), or NULL when
 * harmony's renderer or a template does (a generate's own `template` among them). */
const corral_renderer *prompt_renderer(const model_ref *ref, const json_t *request, bool chat);

/* Bytes of text a request brings to its prompt (a chat's message contents and thinking; a
 * generate's prompt, system and suffix). A template writes that text out whole, so past the
 * render's output cap (corral_template_default_limits) the request itself is too large, which
 * the caller tells apart from a faulty template before rendering. */
size_t prompt_request_text_bytes(const json_t *request, bool chat);

#endif

/*
 * Corral's built-in renderers: prompt layouts written in C for the models whose ollama
 * manifests name one of ollama's renderers ("renderer" in the config) instead of carrying a
 * TEMPLATE, and whose GGUFs may have no chat template at all. Each entry says which of
 * ollama's names pick it, lays out the whole history with the request's tools and think, and
 * says how the model's answer splits (the thinking tags, the tag its calls open with and
 * their syntax, read by template/output.h) and what it can do (the tools and thinking
 * capabilities /api/show reports). Harmony (gpt-oss) is not here: its answers split by
 * channels, not tags (template/harmony.h). A renderer is one row of renderer.c's table and
 * its own file.
 */
#ifndef CORRAL_TEMPLATE_RENDERER_H
#define CORRAL_TEMPLATE_RENDERER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "corral/error.h"
#include "template/template.h"

/*
 * The prompt for messages (the whole history as the server assembles it, images already
 * marked in the text) and tools (the request's; NULL or empty: none) with think (NULL or
 * null: unset; true, false or an effort level). A malloc'ed string (its length in *len), or
 * NULL with err when out of memory, over limits->max_output_bytes (limits NULL: the template
 * defaults), or for a value nested deeper than the JSON writer goes (template/valuefmt.h).
 */
typedef char *corral_render_fn(const json_t *messages, const json_t *tools, const json_t *think,
                               const corral_template_limits *limits, size_t *len,
                               corral_error *err);

#define CORRAL_RENDERER_MAX_NAMES 2

typedef struct corral_renderer {
    const char *names[CORRAL_RENDERER_MAX_NAMES]; /* ollama's names for it (NULL: no more) */
    corral_render_fn *render;
    const char *think_open, *think_close; /* "" when it does not think */
    const char *tool_open;                /* "" when it has no tools */
    corral_call_syntax calls;
    bool tools, thinking; /* capabilities */
    /* the call tag also ends the thinking (corral_output_tags.tool_ends_thinking): ollama
     * reads its answers with a parser that does so (its qwen3.5, qwen3-vl and nemotron-3-nano
     * parsers), as its models may skip </think> */
    bool tool_ends_thinking;
    /* a system or developer message with an image is refused (a 400 before rendering, as the
     * server marks images in the text by then): ollama's qwen3.8 renderer refuses one */
    bool text_only_system;
    /* media placed in front of a message's text are set apart from it by a space when the
     * text starts with a character other than white space: ollama's renderers that write
     * image tags themselves place them so (its renderContentWithImageTags), and the runner
     * keeps the space */
    bool spaced_media;
} corral_renderer;

/* The renderer ollama's name picks, or NULL when Corral has none of that name. */
const corral_renderer *corral_renderer_find(const char *name);

/* The tags the renderer's answers split at. */
void corral_renderer_output_tags(const corral_renderer *r, corral_output_tags *tags);

/* The renderers (template/qwen_render.c): ollama's of the same names. */
corral_render_fn qwen35_render;            /* qwen3.5: thinks unless told not to */
corral_render_fn ornith_render;            /* ornith: qwen3.5, every answer's think block kept */
corral_render_fn qwen38_render;            /* qwen3.8: and one system turn with the effort */
corral_render_fn qwen3_coder_render;       /* qwen3-coder: tools, no thinking */
corral_render_fn qwen3_vl_instruct_render; /* qwen3-vl-instruct: tools as JSON calls */
corral_render_fn qwen3_vl_thinking_render; /* qwen3-vl-thinking: and thinks */

#endif

/*
 * Prompt templates: the public face of src/template/. Parses and renders the two template
 * languages models carry (Go text/template for ollama TEMPLATE layers, Jinja for GGUF
 * tokenizer.chat_template) over a jansson data model, turns a chat request into a prompt
 * as ollama does, and parses model output back into thinking, content and tool calls.
 * Templates are untrusted: parsing is depth-bounded and rendering has no I/O and stops with an
 * error at the limits below. Nothing here knows the engine or HTTP.
 */
#ifndef CORRAL_TEMPLATE_TEMPLATE_H
#define CORRAL_TEMPLATE_TEMPLATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "corral/error.h"

/* Largest template source accepted, and deepest nesting of blocks or expressions. */
#define CORRAL_TEMPLATE_MAX_SOURCE_BYTES (4u << 20)
#define CORRAL_TEMPLATE_MAX_PARSE_DEPTH 200u

typedef enum corral_template_syntax {
    CORRAL_TEMPLATE_GO,
    CORRAL_TEMPLATE_JINJA,
} corral_template_syntax;

/* The sandbox of one render. Any limit reached stops the render with an error. */
typedef struct corral_template_limits {
    size_t max_output_bytes; /* rendered text, and any string built on the way */
    size_t max_steps;        /* evaluation steps (nodes evaluated, loop iterations) */
    unsigned max_depth;      /* nesting of calls, macros and expressions at run time */
} corral_template_limits;

corral_template_limits corral_template_default_limits(void);

typedef struct corral_template corral_template;

/* Parse src (need not be NUL-terminated). NULL with err set ("line L, column C: ..."). */
corral_template *corral_template_parse(corral_template_syntax syntax, const char *src, size_t len,
                                       corral_error *err);
void corral_template_free(corral_template *tmpl);
corral_template_syntax corral_template_syntax_of(const corral_template *tmpl);

/*
 * Render with vars as the data: for Go the dot (keys as ollama names them: System, Messages…),
 * for Jinja the global variables (messages, tools, bos_token…). limits NULL means defaults.
 * Returns a malloc'ed NUL-terminated string (length in *len) or NULL with err set; a Jinja
 * raise_exception leaves exactly the template's message in err.
 */
char *corral_template_render(const corral_template *tmpl, const json_t *vars,
                             const corral_template_limits *limits, size_t *len, corral_error *err);

/*
 * Whether a Go template refers to a field or variable anywhere (case-insensitive, e.g.
 * "messages", "response", "tools"). Always false for Jinja templates.
 */
bool corral_template_uses_field(const corral_template *tmpl, const char *name);

/*
 * Parse an ollama TEMPLATE layer (Go syntax). As ollama does, a template that mentions
 * neither .Messages nor .Response gets {{ .Response }} appended.
 */
corral_template *corral_template_parse_ollama(const char *src, size_t len, corral_error *err);

/*
 * Render a chat request into a prompt as ollama does. request is the JSON of a chat or
 * generate request: messages, tools, think, and for generate system/prompt/suffix; for Jinja
 * templates also bos_token, eos_token, add_generation_prompt, enable_thinking. Go templates
 * get ollama's data (System, Messages with same-role turns merged, Tools, Think…; legacy
 * templates per turn; prompt + suffix as fill-in-the-middle); Jinja templates get request's
 * keys as variables.
 */
char *corral_template_render_chat(const corral_template *tmpl, const json_t *request,
                                  const corral_template_limits *limits, size_t *len,
                                  corral_error *err);

/*
 * The built-in template a GGUF's Jinja chat template stands for: the name in index (the
 * array of {"template", "name"} of templates/index.json) whose Jinja source is closest by
 * edit distance, if closer than CORRAL_TEMPLATE_DETECT_MAX_DISTANCE code points; else NULL.
 * The name points into index.
 */
#define CORRAL_TEMPLATE_DETECT_MAX_DISTANCE 100u
const char *corral_template_detect(const json_t *index, const char *chat_template, size_t len);

/* ---- built-in templates (embedded from src/template/builtin/) ---- */

/* The Go source of built-in name (e.g. "chatml") and, if params is not NULL, its parameters
 * ({"stop": [...], ...}, a new reference). False when there is no such built-in. */
bool corral_builtin_template(const char *name, const char **source, size_t *len, json_t **params);
/* The built-in a GGUF's Jinja chat template stands for (corral_template_detect over the
 * embedded index), copied into name; false when none is close enough. */
bool corral_builtin_template_detect(const char *chat_template, size_t len, char *name,
                                    size_t name_size);

/* ---- model output ---- */

/*
 * How a family writes a tool call after its tool tag. JSON: an object (or an array of them)
 * with a name and arguments, as most templates ask. The others are each a family's own
 * text, the arguments typed by the request's tool schemas (corral_output_parser_set_tools):
 *   XML_FUNCTION  <tool_call><function=NAME><parameter=KEY>VALUE</parameter>...</function>
 *                 </tool_call> (Qwen3-Coder, Qwen 3.5, Nemotron 3 Nano)
 *   ARG_PAIRS     <tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>...
 *                 </tool_call> (GLM-4.5 and later, Laguna)
 *   DEEPSEEK      <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{JSON}
 *                 <｜tool▁call▁end｜>...<｜tool▁calls▁end｜> (DeepSeek V3.1 and later)
 *   NAME_ARGS     [TOOL_CALLS]NAME[ARGS]{JSON} (Mistral's templates since Magistral)
 *   GEMMA4        <|tool_call>call:NAME{KEY:VALUE,...}<tool_call|>, strings between <|"|>
 *                 marks, numbers, true, false, null, lists and mappings bare (Gemma 4)
 *   KIMI          <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX
 *                 <|tool_call_argument_begin|>{JSON}<|tool_call_end|>...
 *                 <|tool_calls_section_end|> (Kimi K2, K2 Thinking; the name read off the id)
 *   MINIMAX       <minimax:tool_call><invoke name="NAME"><parameter name="KEY">VALUE
 *                 </parameter>...</invoke>...</minimax:tool_call> (MiniMax M2)
 *   MINIMAX_M3    ]<]minimax[>[ (NS) before every tag: NS<tool_call>NS<invoke name="NAME">
 *                 NS<KEY>VALUE NS</KEY>...NS</invoke>...NS</tool_call>, a value text or
 *                 elements of its own (NS<item>s a list, else a mapping) (MiniMax M3)
 *   DSML          <｜DSML｜function_calls><｜DSML｜invoke name="NAME"><｜DSML｜parameter
 *                 name="KEY" string="true|false">VALUE</｜DSML｜parameter>...</｜DSML｜invoke>
 *                 ...</｜DSML｜function_calls> (DeepSeek V3.2; V4 names the block tool_calls)
 *   PYTHON        TAG NAME(KEY=VALUE, ...) ... its closing tag, Python literals for values, the
 *                 calls in a list or one a line (python_calls.h): LFM2's <|tool_call_start|>
 *                 [...]<|tool_call_end|>, Olmo 3's <function_calls>...</function_calls>
 *   DEEPSEEK_FENCED  DEEPSEEK's tokens around TYPE<｜tool▁sep｜>NAME\n```json\n{JSON}\n```
 *                 (DeepSeek V3's and R1's older form, the type "function"; Cogito v2)
 *   FUNCTIONGEMMA <start_function_call>call:NAME{KEY:VALUE,...}<end_function_call>, GEMMA4's
 *                 values with <escape> for the mark around strings (FunctionGemma)
 *   COHERE        <|START_ACTION|>[{"tool_call_id": ID, "tool_name": NAME, "parameters":
 *                 {JSON}}, ...]<|END_ACTION|>, and the answer's text between <|START_TEXT|> and
 *                 <|END_TEXT|> (or <|START_RESPONSE|> and <|END_RESPONSE|>), marks that are
 *                 not content (Cohere's Command R7B, Command A and North models)
 *   GLIMMER       the answer as messages, each a header [<|start|>assistant] to=RECIPIENT
 *                 <|message|> and a body ended by <|eom|>, <|eot|> or the next header: to=self
 *                 is thinking, to=a tool (NAME, or NS.NAME for a NAME of that namespace) its
 *                 call, <atem:function_calls><atem:invoke name="NAME"><atem:parameter
 *                 name="KEY">VALUE</atem:parameter>...</atem:invoke></atem:function_calls>,
 *                 anything else content; a message with no header is content (Glimmer)
 */
typedef enum corral_call_syntax {
    CORRAL_CALLS_JSON = 0,
    CORRAL_CALLS_XML_FUNCTION,
    CORRAL_CALLS_ARG_PAIRS,
    CORRAL_CALLS_DEEPSEEK,
    CORRAL_CALLS_NAME_ARGS,
    CORRAL_CALLS_GEMMA4,
    CORRAL_CALLS_KIMI,
    CORRAL_CALLS_MINIMAX,
    CORRAL_CALLS_DSML,
    CORRAL_CALLS_MINIMAX_M3,
    CORRAL_CALLS_PYTHON,
    CORRAL_CALLS_DEEPSEEK_FENCED,
    CORRAL_CALLS_FUNCTIONGEMMA,
    CORRAL_CALLS_COHERE,
    CORRAL_CALLS_GLIMMER,
} corral_call_syntax;

/* Whether every answer in the syntax is framed by marks that are not content (COHERE's text
 * marks, GLIMMER's headers): its answers go through the output parser even when neither
 * thinking nor tools are on. */
bool corral_output_framed(corral_call_syntax calls);

/* Tags that split model output. Empty strings turn a part off; tool_open "{" parses bare
 * JSON objects (only when the output starts with one). harmony: the output is harmony's
 * channels instead (harmony.h), which no tags describe. */
typedef struct corral_output_tags {
    char think_open[64];
    char think_close[64];
    char tool_open[64];
    bool harmony;
    /* the key the template writes a call's arguments under, "arguments" or "parameters";
     * empty when it does not show */
    char tool_arguments[16];
    corral_call_syntax calls; /* what follows tool_open */
    /* tool_open also ends the thinking: the family's model may open a call without closing
     * its thinking first (ollama's qwen3, qwen3-vl, qwen3.5 and nemotron-3-nano parsers,
     * llama.cpp's for Qwen3-Coder's calls), and the call then is a call, not thinking */
    bool tool_ends_thinking;
} corral_output_tags;

/* The call syntax a template's text shows (its markers: <function= with <parameter=,
 * <arg_key>, the DeepSeek call tokens, [ARGS], <|tool_call>call:, <start_function_call>call:
 * with <escape>, Kimi's call tokens, <minimax:tool_call>, ]<]minimax[>[ with <invoke,
 * ｜DSML｜ with invoke), and the tag its calls open with written into tool_open (64 bytes);
 * JSON when none shows. */
corral_call_syntax corral_template_call_syntax(const char *src, size_t len, char *tool_open);

/* Infer tags from a Go template as ollama does, or from a Jinja template's
 * source (corral_template_jinja_output_tags). */
void corral_template_output_tags(const corral_template *tmpl, corral_output_tags *tags);

/*
 * Tags from a Jinja chat template's text, which need not parse: the first known thinking pair
 * it names (<think>…</think> and the others llama.cpp's chat parsers know, also when only
 * split off at the closing tag as content.split('</think>')); the tool tag the family writes
 * calls after (<tool_call>, [TOOL_CALLS]), else "{" (bare JSON, as Llama 3 writes them).
 * <tool_call> ends <think> thinking when the calls are Qwen3-Coder's <function=...> (Qwen
 * 3.5's, Nemotron 3 Nano's), as llama.cpp reads that format.
 */
void corral_template_jinja_output_tags(const char *src, size_t len, corral_output_tags *tags);

/* What one feed decided; pointers stay valid until the next feed or free. */
typedef struct corral_output_delta {
    const char *content;
    size_t content_len;
    const char *thinking;
    size_t thinking_len;
    const json_t
        *tool_calls; /* calls completed in this feed: [{"function":{index,name,arguments}}] */
} corral_output_delta;

typedef struct corral_output_parser corral_output_parser;

/* starts_in_thinking: the prompt ended with the opening thinking tag. max_bytes bounds
 * text held back and produced per feed. */
corral_output_parser *corral_output_parser_create(const corral_output_tags *tags,
                                                  bool starts_in_thinking, size_t max_bytes);
void corral_output_parser_free(corral_output_parser *parser);
/* The request's tools (an OpenAI-style array, NULL: none; borrowed, kept until the parser is
 * freed): the tagged call syntaxes type each argument by its parameter's schema, as ollama's
 * parsers do (a string parameter stays text, an integer is read as one, ...). */
void corral_output_parser_set_tools(corral_output_parser *parser, const json_t *tools);
/* Feed the next chunk of output; final on the last one flushes everything held back. */
bool corral_output_parser_feed(corral_output_parser *parser, const char *chunk, size_t n,
                               bool final, corral_output_delta *delta, corral_error *err);

#endif

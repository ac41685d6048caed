/*
 * Forced tool calls as a grammar (tool_grammar.h). The call is itself described as a JSON
 * schema — an object whose "name" is a const and whose arguments are the tool's parameters,
 * one such object per allowed tool under anyOf — and that schema goes through the `format`
 * grammar builder with the template's tags around it. A tool's parameters may hold local
 * $refs ("#/$defs/..."), which point into the parameters: moved into the call schema, they
 * are rewritten to point at the same place there.
 */
#include "server/core/tool_grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/core/format_grammar.h"
#include "template/cohere.h"
#include "template/glimmer.h"
#include "template/harmony.h"

/* A forced choice's tools are few; this bounds the work a hostile request can ask for. */
enum { MAX_FORCED_TOOLS = 256 };

bool tool_choice_forces(const chat_request *req)
{
    return req->tool_choice != CHAT_TOOL_CHOICE_AUTO;
}

bool tool_choice_set_named(chat_request *req, const char *name)
{
    char *copy = strdup(name);
    if (!copy)
        return false;
    free(req->tool_choice_name);
    req->tool_choice_name = copy;
    req->tool_choice = CHAT_TOOL_CHOICE_NAMED;
    return true;
}

static const char *tool_name(const json_t *tool)
{
    return json_string_value(json_object_get(json_object_get(tool, "function"), "name"));
}

bool tool_choice_check(const chat_request *req, char *message, size_t size)
{
    if (!tool_choice_forces(req))
        return true;
    const json_t *format = req->format;
    if (format && !json_is_null(format) &&
        !(json_is_string(format) && json_string_length(format) == 0)) { /* one grammar */
        snprintf(message, size, "tool_choice forces a tool call, which a response format cannot "
                                "constrain too: send one or the other");
        return false;
    }
    if (json_array_size(req->tools) == 0) {
        snprintf(message, size, "tool_choice forces a tool call, but the request has no tools");
        return false;
    }
    if (req->tool_choice != CHAT_TOOL_CHOICE_NAMED)
        return true;
    size_t i;
    json_t *tool;
    json_array_foreach(req->tools, i, tool) {
        const char *name = tool_name(tool);
        if (name && strcmp(name, req->tool_choice_name) == 0)
            return true;
    }
    snprintf(message, size, "tool_choice names the tool \"%.200s\", which is not among the tools",
             req->tool_choice_name);
    return false;
}

static bool is_one_of(const char *keyword, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(keyword, list[i]) == 0)
            return true;
    return false;
}

/* Keywords whose values are JSON data, not schemas: a "$ref" key inside them is data too. */
static bool holds_data(const char *keyword)
{
    static const char *const data[] = {"const", "enum", "default", "examples"};
    return is_one_of(keyword, data, sizeof data / sizeof data[0]);
}

/* Keywords whose values map names to schemas: their keys are names, never keywords (a
 * property may be called "const" or "$ref"). */
static bool holds_names(const char *keyword)
{
    static const char *const maps[] = {"properties", "patternProperties", "$defs", "definitions",
                                       "dependentSchemas"};
    return is_one_of(keyword, maps, sizeof maps / sizeof maps[0]);
}

/*
 * A copy of node (a schema, or with names a map of names to schemas) with each local $ref
 * ("#...") pointing under prefix (a JSON pointer, "/..." escaped already) instead: a new
 * reference, NULL when out of memory.
 */
static json_t *moved_refs(const json_t *node, const char *prefix, bool names)
{
    if (json_is_array(node)) {
        json_t *out = json_array();
        size_t i;
        json_t *item;
        json_array_foreach(node, i, item) {
            json_t *moved = out ? moved_refs(item, prefix, false) : NULL;
            if (!moved || json_array_append_new(out, moved) != 0) {
                json_decref(out);
                return NULL;
            }
        }
        return out;
    }
    if (!json_is_object(node))
        return json_deep_copy(node);
    json_t *out = json_object();
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)node, key, value) {
        const char *ref = !names && strcmp(key, "$ref") == 0 ? json_string_value(value) : NULL;
        json_t *moved = NULL;
        if (ref && ref[0] == '#') {
            size_t n = strlen(prefix) + strlen(ref) + 2;
            char *text = malloc(n);
            if (text) {
                snprintf(text, n, "#%s%s", prefix, ref + 1);
                moved = json_string(text);
            }
            free(text);
        } else if (out) {
            moved = !names && holds_data(key)
                        ? json_deep_copy(value)
                        : moved_refs(value, prefix, !names && holds_names(key));
        }
        if (!out || !moved || json_object_set_new(out, key, moved) != 0) {
            json_decref(moved);
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

/* A tool's parameters as the schema of its arguments: none, null or {} allow any object. */
static json_t *arguments_schema(const json_t *tool)
{
    json_t *parameters = json_object_get(json_object_get(tool, "function"), "parameters");
    if (!json_is_object(parameters) || json_object_size(parameters) == 0)
        return json_pack("{s:s}", "type", "object");
    return json_incref(parameters);
}

/* Can the grammar enforce schema? False with err naming the tool. */
static bool check_parameters(const json_t *schema, const char *name, corral_error *err)
{
    corral_error inner = {{0}};
    char *grammar = format_grammar_from_schema(schema, &inner);
    free(grammar);
    if (grammar)
        return true;
    const char *why = inner.message;
    if (strncmp(why, "format: ", 8) == 0)
        why += 8;
    corral_error_set(err, "tool \"%.200s\": its parameters cannot be enforced for tool_choice: %s",
                     name, why);
    return false;
}

/* The longest id a forced Cohere call writes: its renderer numbers the calls 0, 1, ... */
enum { COHERE_ID_MAX = 8 };

/* The schema of one call of tool: its name a const under name_key and its arguments under
 * key, their $refs moved to at; first, when id_key is not NULL, a short string there. */
static json_t *call_schema(const json_t *tool, const char *name_key, const char *key,
                           const char *id_key, const char *at, corral_error *err)
{
    json_t *arguments = arguments_schema(tool);
    if (arguments && !check_parameters(arguments, tool_name(tool), err)) {
        json_decref(arguments);
        return NULL;
    }
    json_t *moved = arguments ? moved_refs(arguments, at, false) : NULL;
    json_decref(arguments);
    json_t *properties = json_object(), *required = json_array();
    bool ok = moved && properties && required;
    if (ok && id_key)
        ok = json_object_set_new(properties, id_key,
                                 json_pack("{s:s,s:i}", "type", "string", "maxLength",
                                           COHERE_ID_MAX)) == 0 &&
             json_array_append_new(required, json_string(id_key)) == 0;
    ok = ok &&
         json_object_set_new(properties, name_key, json_pack("{s:s}", "const", tool_name(tool))) ==
             0 &&
         json_object_set(properties, key, moved) == 0 &&
         json_array_append_new(required, json_string(name_key)) == 0 &&
         json_array_append_new(required, json_string(key)) == 0;
    json_decref(moved);
    json_t *call = ok ? json_pack("{s:s,s:o,s:o}", "type", "object", "properties", properties,
                                  "required", required)
                      : NULL;
    if (!call) {
        if (!ok) {
            json_decref(properties);
            json_decref(required);
        }
        corral_error_set(err, "out of memory");
    }
    return call;
}

/* {"anyOf": [...]}: the schema of one call of the tools (only the one called name when name
 * is not NULL), each call's as call_schema's, their $refs moved to under prefix (where the
 * anyOf stands); NULL with err. */
static json_t *calls_schema(const json_t *tools, const char *name, const char *name_key,
                            const char *key, const char *id_key, const char *prefix,
                            corral_error *err)
{
    json_t *calls = json_array();
    if (!calls) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool) {
        if (!tool_name(tool) || (name && strcmp(tool_name(tool), name) != 0))
            continue;
        if (json_array_size(calls) == MAX_FORCED_TOOLS) {
            corral_error_set(err, "tool_choice can force a call among at most %d tools",
                             MAX_FORCED_TOOLS);
            json_decref(calls);
            return NULL;
        }
        char at[64];
        snprintf(at, sizeof at, "%s/anyOf/%zu/properties/%s", prefix, json_array_size(calls),
                 key);
        json_t *call = call_schema(tool, name_key, key, id_key, at, err);
        if (!call || json_array_append_new(calls, call) != 0) {
            if (call)
                corral_error_set(err, "out of memory");
            json_decref(calls);
            return NULL;
        }
    }
    if (json_array_size(calls) == 0) {
        json_decref(calls);
        corral_error_set(err, "tool_choice: no tool to call");
        return NULL;
    }
    json_t *one = json_pack("{s:o}", "anyOf", calls);
    if (!one)
        corral_error_set(err, "out of memory");
    return one;
}

/* The closing tag of an XML-like tag ("<tool_call>" closes with "</tool_call>"); "" else. */
static void closing_tag(const char *open, char *close, size_t size)
{
    size_t n = strlen(open);
    close[0] = '\0';
    if (n > 2 && open[0] == '<' && open[1] != '/' && open[n - 1] == '>' &&
        !memchr(open + 1, '<', n - 2) && !memchr(open + 1, '>', n - 2))
        snprintf(close, size, "</%s", open + 1);
}

/* A call written as JSON after the template's tag: a schema of the call, through format. */
static char *json_call_grammar(const json_t *tools, const char *name,
                               const corral_output_tags *tags, corral_error *err)
{
    const char *key = tags->tool_arguments[0] ? tags->tool_arguments : "arguments";
    const char *open = tags->tool_open;
    /* Mistral's tag is followed by a list of calls; a bare "[" tag is that list itself */
    bool listed = strcmp(open, "[TOOL_CALLS]") == 0 || strcmp(open, "[") == 0;
    bool bare = strcmp(open, "{") == 0 || strcmp(open, "[") == 0;
    json_t *one = calls_schema(tools, name, "name", key, NULL, listed ? "/items" : "", err);
    if (!one)
        return NULL;
    json_t *schema = listed ? json_pack("{s:s,s:o,s:i,s:i}", "type", "array", "items", one,
                                        "minItems", 1, "maxItems", 1)
                            : one;
    if (!schema) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    char close[sizeof tags->tool_open + 1];
    closing_tag(open, close, sizeof close);
    char *grammar = format_grammar_from_schema_between(schema, bare ? "" : open, close, err);
    json_decref(schema);
    return grammar;
}

/*
 * ---- calls in a family's own syntax (corral_call_syntax) ----
 *
 * A table of the syntaxes: each grammar is the template's tag, the syntax's own text around
 * the name, the name as a literal, then the arguments, then the syntax's closing text. The
 * arguments are
 *   - one JSON value (DeepSeek, also V3's fenced form, Kimi, Mistral), as format writes it;
 *     inside DeepSeek's and Kimi's tokens its strings never hold a raw '<' before what starts
 *     their tokens ('｜', '|'), which would end the call early;
 *   - Gemma 4's mapping, in its own value syntax (format's GEMMA4 dialect), and
 *     FunctionGemma's, the same with its own string mark (FUNCTIONGEMMA);
 *   - or key and value pairs (Qwen3-Coder's <parameter=...>, MiniMax M2's
 *     <parameter name="...">, GLM's <arg_key>): one a property, in the schema's order, the
 *     required ones always there, each value raw text as the parser types it back by the
 *     tool's schema (output.c's typed_value): a string as its text — never one the parser
 *     would read as another type, nor holding a text that ends it —, numbers, booleans and
 *     null bare, arrays and objects as JSON. What the parser makes
 *     of a value is asked of the parser itself (read_back), so that the grammar follows it.
 *     DeepSeek's DSML says which: a string's raw text, or any value as JSON. MiniMax M3's
 *     values are elements named by their keys, an array's and an object's elements of their
 *     own in turn (element_array, element_object), read back where they stand;
 *   - or Python's KEY=VALUE (LFM2, Olmo 3), each value JSON that reads the same as a Python
 *     literal (format's PYTHON dialect).
 * Every syntax but JSON's (json_call_grammar, above), Cohere's and Glimmer's is in the table;
 * Glimmer's ATEM block has a shape of its own (glimmer_shape), the body of a message whose
 * header the prompt ends with (tool_grammar_glimmer, below), harmony has its own grammar
 * (tool_grammar_harmony, below), and so has Cohere's action list, after the tag the prompt
 * ends with (tool_grammar_cohere, below).
 */

typedef struct tagged_shape {
    corral_call_syntax syntax;
    const char *before_name; /* after the template's tag */
    const char *after_name;
    const char *close;        /* after the arguments */
    const char *name_forbids; /* characters a name cannot hold there */
    format_dialect dialect;   /* of the JSON the call holds */
    const char *lt_follower;  /* JSON_NO_LT: what starts the syntax's tags after '<' */
    /* key and value pairs, when key_open is not NULL: key_open KEY key_close value_open VALUE
     * value_close, each pair */
    const char *key_open, *key_close, *value_open, *value_close;
    const char *key_forbids;        /* characters a key cannot hold */
    const char *const *value_ends;  /* texts a raw value cannot hold */
    bool value_lines;               /* newlines around the value, which the parser drops */
    bool lines;                     /* a newline may come before key_open, value_open, close */
    /* DeepSeek's DSML says a value's type after its key: key_close before the raw text of a
     * string, json_close before any value as JSON; NULL when values are raw text alone */
    const char *json_close;
    bool python;     /* arguments as Python's KEY=VALUE (python_args) */
    bool closes_tag; /* the template's own tag closes the block, after close */
    /* MiniMax M3's: each value an element named by its key (value_close, the key, '>'), an
     * array's items <item> elements and an object's properties elements of their own */
    bool elements;
} tagged_shape;

/* The texts a raw value may not hold: the parser ends the value, the call or the block at
 * the first of them. */
static const char *const xml_function_ends[] = {"</parameter>", "</function>", "</tool_call>",
                                                NULL};
static const char *const arg_pairs_ends[] = {"</arg_value>", "</tool_call>", NULL};
static const char *const minimax_ends[] = {"</parameter>", "</invoke>", "</minimax:tool_call>",
                                           NULL};
#define DSML "｜DSML｜"
/* DSML's end tags all start "</｜", which free text's automaton (ASCII) cannot name: a raw
 * string holds no "</" at all, and one that does is written as JSON (string="false") */
static const char *const dsml_ends[] = {"</", NULL};
#define M3 "]<]minimax[>["
static const char *const m3_ends[] = {M3, NULL};

static const tagged_shape tagged_shapes[] = {
    /* values between newlines, which the parser drops */
    {CORRAL_CALLS_XML_FUNCTION, "\n<function=", ">\n", "</function>\n</tool_call>", "<>\n",
     FORMAT_JSON_NO_LT, "/", "<parameter=", ">\n", "", "\n</parameter>\n", ">\n",
     xml_function_ends, true, false, NULL, false, false, false},
    /* GLM-4.5 writes each tag on a line of its own, 4.7 not */
    {CORRAL_CALLS_ARG_PAIRS, "", "", "</tool_call>", "<\n", FORMAT_JSON_NO_LT, "/", "<arg_key>",
     "</arg_key>", "<arg_value>", "</arg_value>", "<\n", arg_pairs_ends, false, true, NULL, false,
     false, false},
    {CORRAL_CALLS_DEEPSEEK, "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>",
     "<｜tool▁call▁end｜><｜tool▁calls▁end｜>", "<\n", FORMAT_JSON_NO_LT, "｜", NULL, NULL,
     NULL, NULL, NULL, NULL, false, false, NULL, false, false, false},
    /* DeepSeek V3's and R1's older form (Cogito v2): the type "function" before the name, the
     * arguments fenced after it; JSON's whitespace never puts "\n```" inside it */
    {CORRAL_CALLS_DEEPSEEK_FENCED, "<｜tool▁call▁begin｜>function<｜tool▁sep｜>", "\n```json\n",
     "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", "<\n", FORMAT_JSON_NO_LT, "｜", NULL, NULL,
     NULL, NULL, NULL, NULL, false, false, NULL, false, false, false},
    {CORRAL_CALLS_NAME_ARGS, "", "[ARGS]", "", "<\n[", FORMAT_JSON, NULL, NULL, NULL, NULL, NULL,
     NULL, NULL, false, false, NULL, false, false, false},
    {CORRAL_CALLS_GEMMA4, "call:", "", "<tool_call|>", "<\n{", FORMAT_GEMMA4, NULL, NULL, NULL,
     NULL, NULL, NULL, NULL, false, false, NULL, false, false, false},
    {CORRAL_CALLS_FUNCTIONGEMMA, "call:", "", "<end_function_call>", "<\n{",
     FORMAT_FUNCTIONGEMMA, NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, false, NULL, false,
     false, false},
    /* Kimi K2 names the call by an id, functions.NAME:IDX */
    {CORRAL_CALLS_KIMI, "<|tool_call_begin|>functions.", ":0<|tool_call_argument_begin|>",
     "<|tool_call_end|><|tool_calls_section_end|>", "<\n:|", FORMAT_JSON_NO_LT, "|", NULL, NULL,
     NULL, NULL, NULL, NULL, false, false, NULL, false, false, false},
    {CORRAL_CALLS_MINIMAX, "\n<invoke name=\"", "\">", "</invoke>\n</minimax:tool_call>",
     "<>\n\"", FORMAT_JSON_NO_LT, "/", "<parameter name=\"", "\">", "", "</parameter>", "<>\n\"",
     minimax_ends, false, true, NULL, false, false, false},
    /* DeepSeek V3.2's and V4's: string="true" before a string's raw text, "false" before JSON */
    {CORRAL_CALLS_DSML, "\n<" DSML "invoke name=\"", "\">", "</" DSML "invoke>\n", "<>\n\"",
     FORMAT_JSON_NO_LT, "｜", "<" DSML "parameter name=\"", "\" string=\"true\">", "",
     "</" DSML "parameter>", "<>\n\"", dsml_ends, false, true, "\" string=\"false\">", false,
     true, false},
    /* LFM2's and Olmo 3's NAME(KEY=VALUE, ...): LFM2's tag opens a list of calls */
    {CORRAL_CALLS_PYTHON, "", "(", ")", "", FORMAT_PYTHON, NULL, NULL, NULL, NULL, NULL, NULL,
     NULL, false, false, NULL, true, true, false},
    /* MiniMax M3's: every tag after its namespace mark, which no raw value holds; no value
     * is JSON (arrays and objects are elements), the dialect gives numbers a reader holds */
    {CORRAL_CALLS_MINIMAX_M3, "\n" M3 "<invoke name=\"", "\">", M3 "</invoke>\n" M3 "</tool_call>",
     "<>\n\"", FORMAT_JSON_NO_LT, "/", M3 "<", ">", "", M3 "</", "<>\n", m3_ends, false,
     false, NULL, false, false, true},
};

/* Glimmer's values stand as written between the tags, newlines and all: a raw value holds
 * none of the tags that end it, nor the message's end marks (control tokens, which a value
 * holding their text would turn into when the call is rendered into a later prompt); nor does
 * a JSON string hold '<' before '/' or '|', where those start */
static const char *const atem_ends[] = {"</atem:parameter>", "</atem:invoke>", "<|eom|>",
                                        "<|eot|>", "<|start|>assistant", NULL};
static const tagged_shape glimmer_shape = {
    CORRAL_CALLS_GLIMMER, "\n<atem:invoke name=\"", "\">\n", "</atem:invoke>\n",
    "<>\" \t\r\n\v\f", FORMAT_JSON_NO_LT, "/|", "<atem:parameter name=\"", "\">", "",
    "</atem:parameter>\n", "<>\n\"", atem_ends, false, false, NULL, false, true, false};

static const tagged_shape *shape_of(corral_call_syntax syntax)
{
    for (size_t i = 0; i < sizeof tagged_shapes / sizeof tagged_shapes[0]; i++)
        if (tagged_shapes[i].syntax == syntax)
            return &tagged_shapes[i];
    return NULL;
}

enum { MAX_VALUE_DEPTH = 32 };

/* What the parser reads back of a value of one key: each a text it types so. */
typedef struct readable {
    bool string, integer, number, boolean, null, array, object;
    bool newline_ends; /* a string's newlines at its start and end are kept */
} readable;

typedef struct tagged_ctx {
    const tagged_shape *shape;
    const corral_output_tags *tags;
    const json_t *tools;      /* the request's, as the parser gets them */
    const char *tool;         /* the tool whose grammar is written */
    const json_t *parameters; /* its schema, where its $refs point */
    format_builder *b;
    corral_error *err;
    bool failed; /* err set here, not by the builder */
    /* the texts around the calls for this template's tag: before the name (the shape's, and
     * LFM2's list), after the arguments (the shape's close, then the tag's closing one) */
    char before[64], close[sizeof ((corral_output_tags *)0)->tool_open + 96];
    /* MiniMax M3: the elements inside the key's around the value being written (read_back
     * reads a value there) */
    const char *nest[MAX_VALUE_DEPTH + 1];
    size_t n_nest;
} tagged_ctx;

/* What the parser makes of text as the value of key in a call of the tool: a new
 * reference, NULL when the call does not read back. */
static json_t *read_back(const tagged_ctx *c, const char *key, const char *text)
{
    char *call = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&call, &len);
    if (!out)
        return NULL;
    const tagged_shape *sh = c->shape;
    fprintf(out, "%s%s%s%s%s%s%s%s", c->tags->tool_open, c->before, c->tool, sh->after_name,
            sh->key_open, key, sh->key_close, sh->value_open);
    for (size_t i = 0; i < c->n_nest; i++)
        fprintf(out, "%s%s%s", sh->key_open, c->nest[i], sh->key_close);
    fputs(text, out);
    for (size_t i = c->n_nest; i-- > 0;)
        fprintf(out, "%s%s>", sh->value_close, c->nest[i]);
    fprintf(out, "%s%s%s%s", sh->value_close, sh->elements ? key : "", sh->elements ? ">" : "",
            c->close);
    if (fclose(out) != 0) {
        free(call);
        return NULL;
    }
    corral_output_tags tags = {0};
    memcpy(tags.tool_open, c->tags->tool_open, sizeof tags.tool_open);
    tags.calls = c->shape->syntax;
    corral_output_parser *p = corral_output_parser_create(&tags, false, 2 * len + 4096);
    json_t *value = NULL;
    if (p) {
        corral_output_parser_set_tools(p, c->tools);
        corral_output_delta d;
        corral_error err = {{0}};
        if (corral_output_parser_feed(p, call, len, true, &d, &err) && d.content_len == 0 &&
            json_array_size(d.tool_calls) == 1) {
            json_t *fn = json_object_get(json_array_get(d.tool_calls, 0), "function");
            value = json_object_get(json_object_get(fn, "arguments"), key);
            for (size_t i = 0; i < c->n_nest; i++)
                value = json_is_array(value) ? json_array_get(value, 0)
                                             : json_object_get(value, c->nest[i]);
            json_incref(value);
        }
    }
    corral_output_parser_free(p);
    free(call);
    return value;
}

/* Does text read back as value? */
static bool reads_as(const tagged_ctx *c, const char *key, const char *text, json_t *value)
{
    json_t *back = value ? read_back(c, key, text) : NULL;
    bool same = back && json_equal(back, value);
    json_decref(back);
    json_decref(value);
    return same;
}

static readable readable_of(const tagged_ctx *c, const char *key)
{
    readable r;
    r.string = reads_as(c, key, "x", json_string("x"));
    r.integer = reads_as(c, key, "5", json_integer(5));
    r.number = reads_as(c, key, "0.5", json_real(0.5));
    r.boolean = reads_as(c, key, "true", json_true()) && reads_as(c, key, "false", json_false());
    r.null = reads_as(c, key, "null", json_null());
    r.newline_ends = reads_as(c, key, "\nx\n", json_string("\nx\n"));
    json_t *back = read_back(c, key, "[]");
    r.array = json_is_array(back);
    json_decref(back);
    back = read_back(c, key, "{}");
    r.object = json_is_object(back);
    json_decref(back);
    return r;
}

typedef enum value_result { VALUE_ERROR, VALUE_NONE, VALUE_OK } value_result;

/* The builder failed with message: VALUE_ERROR. */
#define VALUE_FAIL(c, ...) (format_builder_fail((c)->b, __VA_ARGS__), VALUE_ERROR)

static value_result raw_value(tagged_ctx *c, const char *key, const readable *r,
                              const json_t *schema, int depth, char name[64]);

/* A raw string of a schema's "string" type: never text the parser would type otherwise. */
static value_result raw_string(tagged_ctx *c, const readable *r, const json_t *schema,
                               char name[64])
{
    if (!r->string)
        return VALUE_NONE;
    static const char *const null_only[] = {"null", NULL};
    static const char *const words[] = {"null", "true", "false", NULL};
    format_text t = {
        .avoid = c->shape->value_ends,
        .not_whole = r->boolean ? words : null_only,
        /* the first characters of what reads as a number or as JSON */
        .not_first = r->integer || r->number || r->array || r->object ? "0123456789+-. \t\n\v\f\r[{"
                                                                      : NULL,
        .no_newline_ends = !c->shape->value_lines && !r->newline_ends,
    };
    if (!format_builder_range(c->b, schema, "minLength", "maxLength", &t.min, &t.max) ||
        !format_builder_text(c->b, &t, name))
        return VALUE_ERROR;
    return VALUE_OK;
}

/* The text of a const or enum value as a raw value (a string as itself, others as JSON),
 * malloc'ed; NULL when out of memory. */
static char *literal_text(const json_t *value)
{
    if (json_is_string(value))
        return strndup(json_string_value(value), json_string_length(value));
    return json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);
}

/* name ::= the values of list (a const's one or an enum's) that read back as themselves. */
static value_result raw_literals(tagged_ctx *c, const char *key, const json_t *list,
                                 char name[64])
{
    FILE *out = format_builder_stream(c->b);
    bool any = false;
    size_t i;
    json_t *item;
    json_array_foreach(list, i, item) {
        char *text = literal_text(item);
        if (!text) {
            corral_error_set(c->err, "out of memory");
            c->failed = true;
            return VALUE_ERROR;
        }
        if (reads_as(c, key, text, json_incref(item))) {
            if (!any)
                format_builder_rule_name(c->b, "lit", name);
            fprintf(out, any ? " | " : "%s ::= ", name);
            format_builder_text_literal(c->b, text);
            any = true;
        }
        free(text);
    }
    if (any)
        fputc('\n', out);
    return any ? VALUE_OK : VALUE_NONE;
}

/* name ::= alternatives[0] | ...: those that are VALUE_OK. */
static value_result write_alternatives(tagged_ctx *c, char (*alts)[64], const value_result *got,
                                       size_t n, char name[64])
{
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        if (got[i] == VALUE_ERROR)
            return VALUE_ERROR;
        any = any || got[i] == VALUE_OK;
    }
    if (!any)
        return VALUE_NONE;
    FILE *out = format_builder_stream(c->b);
    format_builder_rule_name(c->b, "alt", name);
    fprintf(out, "%s ::= ", name);
    bool first = true;
    for (size_t i = 0; i < n; i++)
        if (got[i] == VALUE_OK) {
            fprintf(out, "%s%s", first ? "" : " | ", alts[i]);
            first = false;
        }
    fputc('\n', out);
    return VALUE_OK;
}

/* A key as a pairs syntax holds it back. */
static bool key_fits(const tagged_shape *shape, const char *key)
{
    size_t n = strlen(key);
    return n > 0 && n < 256 && !strpbrk(key, shape->key_forbids) &&
           !strchr(" \t\r\v\f", key[0]) && !strchr(" \t\r\v\f", key[n - 1]);
}

/* Is key among required's names? */
static bool is_required(const json_t *required, const char *key)
{
    size_t k;
    json_t *item;
    json_array_foreach(required, k, item)
        if (json_is_string(item) && strcmp(json_string_value(item), key) == 0)
            return true;
    return false;
}

/* The text after a value of key: the shape's close, an element's own (M3) naming key. */
static bool write_close(tagged_ctx *c, const char *key)
{
    char *close = NULL;
    if (asprintf(&close, "%s%s%s", c->shape->value_close, c->shape->elements ? key : "",
                 c->shape->elements ? ">" : "") < 0) {
        corral_error_set(c->err, "out of memory");
        c->failed = true;
        return false;
    }
    format_builder_text_literal(c->b, close);
    free(close);
    return true;
}

/* name ::= the element e around the value of schema inside the key's value (M3's): NONE
 * when no value can be written there. */
static value_result element_rule(tagged_ctx *c, const char *key, const char *e,
                                 const json_t *schema, int depth, char name[64])
{
    if (c->n_nest >= MAX_VALUE_DEPTH)
        return VALUE_FAIL(c, "schema nested deeper than %d", MAX_VALUE_DEPTH);
    if (!key_fits(c->shape, e))
        return VALUE_FAIL(c, "the property name \"%.100s\" cannot be written in this "
                             "template's call syntax", e);
    c->nest[c->n_nest++] = e;
    readable r = readable_of(c, key);
    char value[64];
    value_result got = raw_value(c, key, &r, schema, depth + 1, value);
    c->n_nest--;
    if (got != VALUE_OK)
        return got;
    FILE *out = format_builder_stream(c->b);
    char *open = NULL;
    if (asprintf(&open, "%s%s%s", c->shape->key_open, e, c->shape->key_close) < 0) {
        corral_error_set(c->err, "out of memory");
        c->failed = true;
        return VALUE_ERROR;
    }
    format_builder_rule_name(c->b, "el", name);
    fprintf(out, "%s ::= ", name);
    format_builder_text_literal(c->b, open);
    free(open);
    fprintf(out, " %s ", value);
    if (!write_close(c, e))
        return VALUE_ERROR;
    fputc('\n', out);
    return VALUE_OK;
}

/* Does text, in the place being written, read back as a container like probe (an array or
 * an object, empty when probe is)? */
static bool reads_like(const tagged_ctx *c, const char *key, const char *text, bool array,
                       bool empty)
{
    json_t *back = read_back(c, key, text);
    bool same = array ? json_is_array(back) && (json_array_size(back) == 0) == empty
                      : json_is_object(back) && (json_object_size(back) == 0) == empty;
    json_decref(back);
    return same;
}

/* An array as M3's template writes it: an <item> element each, none for an empty one. */
static value_result element_array(tagged_ctx *c, const char *key, const json_t *schema,
                                  int depth, char name[64])
{
    char *probe = NULL;
    if (asprintf(&probe, "%sitem%sx%sitem>", c->shape->key_open, c->shape->key_close,
                 c->shape->value_close) < 0) {
        corral_error_set(c->err, "out of memory");
        c->failed = true;
        return VALUE_ERROR;
    }
    bool listed = reads_like(c, key, probe, true, false);
    free(probe);
    if (!listed)
        return VALUE_NONE;
    long min, max;
    if (!format_builder_range(c->b, schema, "minItems", "maxItems", &min, &max))
        return VALUE_ERROR;
    if (min < 0)
        min = 0;
    if (min == 0 && !reads_like(c, key, "", true, true))
        min = 1; /* the empty element reads as something else there */
    const json_t *items = json_object_get(schema, "items");
    json_t *any = items ? NULL : json_object();
    char item[64];
    value_result got = items || any ? element_rule(c, key, "item", items ? items : any, depth,
                                                   item)
                                    : VALUE_FAIL(c, "out of memory");
    json_decref(any);
    if (got == VALUE_ERROR || (got == VALUE_NONE && min > 0))
        return got == VALUE_ERROR ? VALUE_ERROR : VALUE_NONE;
    if (max >= 0 && max < min)
        return VALUE_NONE;
    FILE *out = format_builder_stream(c->b);
    format_builder_rule_name(c->b, "list", name);
    if (got == VALUE_NONE || max == 0)
        fprintf(out, "%s ::= \"\"\n", name);
    else if (max < 0)
        fprintf(out, "%s ::= %s{%ld,}\n", name, item, min);
    else
        fprintf(out, "%s ::= %s{%ld,%ld}\n", name, item, min, max);
    return VALUE_OK;
}

/* An object as M3's template writes it: an element a property, in the schema's order, the
 * required ones always there. */
static value_result element_object(tagged_ctx *c, const char *key, const json_t *schema,
                                   int depth, char name[64])
{
    const json_t *properties = json_object_get(schema, "properties");
    const json_t *required = json_object_get(schema, "required");
    if ((properties && !json_is_object(properties)) || (required && !json_is_array(required)))
        return VALUE_FAIL(c, "properties must be an object and required an array");
    size_t n = json_object_size(properties), i = 0;
    char (*elements)[64] = calloc(n ? n : 1, sizeof *elements);
    bool *needed = calloc(n ? n : 1, sizeof *needed);
    value_result result = VALUE_OK;
    bool any_needed = false;
    if (!elements || !needed) {
        corral_error_set(c->err, "out of memory");
        c->failed = true;
        result = VALUE_ERROR;
    }
    const char *prop;
    json_t *sub;
    json_object_foreach((json_t *)properties, prop, sub) {
        if (result != VALUE_OK)
            break;
        needed[i] = is_required(required, prop);
        any_needed = any_needed || needed[i];
        char *probe = NULL;
        if (asprintf(&probe, "%s%s%sx%s%s>", c->shape->key_open, prop, c->shape->key_close,
                     c->shape->value_close, prop) < 0) {
            corral_error_set(c->err, "out of memory");
            c->failed = true;
            result = VALUE_ERROR;
            break;
        }
        bool mapped = reads_like(c, key, probe, false, false);
        free(probe);
        value_result got = mapped ? element_rule(c, key, prop, sub, depth, elements[i])
                                  : VALUE_NONE;
        if (got == VALUE_ERROR || (got == VALUE_NONE && needed[i]))
            result = got;
        if (got == VALUE_NONE)
            elements[i][0] = '\0';
        i++;
    }
    /* with nothing required the element may be empty, if that reads as an object there */
    if (result == VALUE_OK && !any_needed && !reads_like(c, key, "", false, true))
        result = VALUE_NONE;
    if (result == VALUE_OK) {
        FILE *out = format_builder_stream(c->b);
        format_builder_rule_name(c->b, "map", name);
        fprintf(out, "%s ::=", name);
        for (i = 0; i < n; i++)
            if (elements[i][0])
                fprintf(out, " %s%s", elements[i], needed[i] ? "" : "?");
        fputs(" \"\"\n", out);
    }
    free(elements);
    free(needed);
    return result;
}

/* A raw value of one type of schema. */
static value_result raw_type(tagged_ctx *c, const char *key, const readable *r,
                             const json_t *schema, const char *type, int depth, char name[64])
{
    static const char *const bare[] = {"integer", "number", "null"};
    bool can[] = {r->integer, r->number, r->null};
    if (strcmp(type, "string") == 0)
        return raw_string(c, r, schema, name);
    for (size_t i = 0; i < 3; i++)
        if (strcmp(type, bare[i]) == 0) {
            if (!can[i])
                return VALUE_NONE;
            snprintf(name, 64, "%s", format_builder_primitive(c->b, bare[i]));
            return VALUE_OK;
        }
    if (strcmp(type, "boolean") == 0) { /* Qwen3-Coder's template writes Python's True */
        if (!r->boolean)
            return VALUE_NONE;
        format_builder_rule_name(c->b, "bool", name);
        fprintf(format_builder_stream(c->b), "%s ::= [tT] \"rue\" | [fF] \"alse\"\n", name);
        return VALUE_OK;
    }
    if (c->shape->elements && strcmp(type, "array") == 0)
        return element_array(c, key, schema, depth, name);
    if (c->shape->elements && strcmp(type, "object") == 0)
        return element_object(c, key, schema, depth, name);
    if ((strcmp(type, "array") == 0 && !r->array) || (strcmp(type, "object") == 0 && !r->object))
        return VALUE_NONE;
    /* arrays, objects, and types format refuses */
    return format_builder_type(c->b, c->parameters, schema, type, name) ? VALUE_OK : VALUE_ERROR;
}

/* Any value the parser reads back (all are valid): text that ends where the parser ends it. */
static value_result raw_any(tagged_ctx *c, const readable *r, char name[64])
{
    format_text t = {
        .avoid = c->shape->value_ends,
        .no_newline_ends = !c->shape->value_lines && !r->newline_ends,
        .min = -1,
        .max = -1,
    };
    return format_builder_text(c->b, &t, name) ? VALUE_OK : VALUE_ERROR;
}

/* A raw value of schema: format's keywords (format_grammar.c's visit), as the raw syntax
 * holds them. VALUE_NONE: no value of it can be written so. */
static value_result raw_value(tagged_ctx *c, const char *key, const readable *r,
                              const json_t *schema, int depth, char name[64])
{
    if (depth > MAX_VALUE_DEPTH)
        return VALUE_FAIL(c, "schema nested deeper than %d", MAX_VALUE_DEPTH);
    if (json_is_true(schema) || (json_is_object(schema) && json_object_size(schema) == 0))
        return raw_any(c, r, name);
    if (!json_is_object(schema))
        return VALUE_FAIL(c, "a schema must be an object or true");
    const char *ref = json_string_value(json_object_get(schema, "$ref"));
    if (ref) {
        const json_t *target = format_builder_resolve(c->parameters, ref);
        if (!target)
            return VALUE_FAIL(c, "$ref \"%s\" points at nothing in the schema", ref);
        return raw_value(c, key, r, target, depth + 1, name);
    }
    json_t *v;
    if ((v = json_object_get(schema, "const"))) {
        json_t *one = json_pack("[O]", v);
        value_result got = one ? raw_literals(c, key, one, name) : VALUE_ERROR;
        json_decref(one);
        return got;
    }
    if ((v = json_object_get(schema, "enum"))) {
        if (!json_is_array(v) || json_array_size(v) == 0)
            return VALUE_FAIL(c, "enum must be a non-empty array");
        return raw_literals(c, key, v, name);
    }
    static const char *const alternatives[] = {"anyOf", "oneOf"};
    json_t *list = NULL;
    for (size_t i = 0; i < 2 && !list; i++)
        list = json_object_get(schema, alternatives[i]);
    if (list && (!json_is_array(list) || json_array_size(list) == 0))
        return VALUE_FAIL(c, "anyOf and oneOf must be non-empty arrays of schemas");
    if ((v = json_object_get(schema, "allOf"))) {
        if (!json_is_array(v) || json_array_size(v) != 1)
            return VALUE_FAIL(c, "allOf is supported with one schema only");
        return raw_value(c, key, r, json_array_get(v, 0), depth + 1, name);
    }
    json_t *types = NULL;
    if (!list) {
        json_t *type = format_schema_type(schema);
        if (json_is_string(type) && json_string_length(type) == 0) {
            json_decref(type);
            return raw_any(c, r, name); /* no type: any value */
        }
        types = json_is_array(type) ? json_copy(type) : json_pack("[O]", type);
        json_decref(type);
        if (types && json_is_true(json_object_get(schema, "nullable")))
            json_array_append_new(types, json_string("null"));
        if (!types) {
            corral_error_set(c->err, "out of memory");
            c->failed = true;
            return VALUE_ERROR;
        }
        list = types;
    }
    size_t n = json_array_size(list);
    char (*alts)[64] = calloc(n ? n : 1, sizeof *alts);
    value_result *got = calloc(n ? n : 1, sizeof *got);
    value_result result = VALUE_ERROR;
    if (!alts || !got) {
        corral_error_set(c->err, "out of memory");
        c->failed = true;
    } else if (n == 0) {
        format_builder_fail(c->b, "type must be a name or an array of names");
    } else {
        for (size_t i = 0; i < n; i++) {
            json_t *item = json_array_get(list, i);
            if (types && !json_is_string(item)) {
                format_builder_fail(c->b, "type must be a name or an array of names");
                got[i] = VALUE_ERROR;
            } else {
                got[i] = types ? raw_type(c, key, r, schema, json_string_value(item), depth,
                                          alts[i])
                               : raw_value(c, key, r, item, depth + 1, alts[i]);
            }
            if (got[i] == VALUE_ERROR)
                break;
        }
        result = write_alternatives(c, alts, got, n, name);
    }
    free(alts);
    free(got);
    json_decref(types);
    return result;
}

/* A tool's name as the syntax holds it back: not empty, no space around it, none of the
 * characters that would end it. */
static bool name_fits(const tagged_shape *shape, const char *name)
{
    size_t n = strlen(name);
    return n > 0 && n < 256 && !strpbrk(name, shape->name_forbids) &&
           !strchr(" \t\r\n\v\f", name[0]) && !strchr(" \t\r\n\v\f", name[n - 1]);
}


/* The arguments of the tool as key and value pairs, into name (empty when it has none). */
/* The properties and required list of the tool's parameters, which a syntax of one key and
 * value a property needs to be an object's; false with the builder failed. */
static bool named_properties(const tagged_ctx *c, const json_t **properties,
                             const json_t **required)
{
    const json_t *type = json_object_get(c->parameters, "type");
    *properties = json_object_get(c->parameters, "properties");
    *required = json_object_get(c->parameters, "required");
    if ((type && !(json_is_string(type) && strcmp(json_string_value(type), "object") == 0)) ||
        (*properties && !json_is_object(*properties)) || (*required && !json_is_array(*required)))
        return format_builder_fail(c->b, "its parameters must be an object of named properties "
                                         "for this template's call syntax");
    return true;
}


static bool pairs_rule(tagged_ctx *c, char name[64])
{
    const json_t *properties, *required;
    if (!named_properties(c, &properties, &required))
        return false;
    name[0] = '\0';
    if (json_object_size(properties) == 0)
        return true; /* a call with no arguments */
    FILE *out = format_builder_stream(c->b);
    size_t n = json_object_size(properties), i = 0;
    char (*pairs)[64] = calloc(n, sizeof *pairs);
    bool *needed = calloc(n, sizeof *needed);
    bool ok = pairs && needed;
    if (!ok) {
        corral_error_set(c->err, "out of memory");
        c->failed = true;
    }
    const char *key;
    json_t *schema;
    json_object_foreach((json_t *)properties, key, schema) {
        if (!ok)
            break;
        needed[i] = is_required(required, key);
        if (!key_fits(c->shape, key)) {
            ok = format_builder_fail(c->b, "the property name \"%.100s\" cannot be written in "
                                           "this template's call syntax", key);
            break;
        }
        const tagged_shape *sh = c->shape;
        readable r = readable_of(c, key);
        char value[64], json[64] = "";
        value_result got = raw_value(c, key, &r, schema, 0, value);
        if (got == VALUE_ERROR ||
            (sh->json_close && !format_builder_schema(c->b, c->parameters, schema, key, json))) {
            ok = false;
            break;
        }
        if (got == VALUE_NONE && needed[i] && !json[0]) {
            ok = format_builder_fail(c->b, "no value of property \"%.100s\" can be written in "
                                           "this template's call syntax", key);
            break;
        }
        if (got == VALUE_OK || json[0]) {
            format_builder_rule_name(c->b, "pair", pairs[i]);
            fprintf(out, "%s ::= ", pairs[i]);
            char *open = NULL;
            if (asprintf(&open, "%s%s", sh->key_open, key) < 0) {
                corral_error_set(c->err, "out of memory");
                c->failed = true;
                ok = false;
                break;
            }
            if (sh->lines)
                fputs("\"\\n\"? ", out);
            format_builder_text_literal(c->b, open);
            free(open);
            fputs(" (", out);
            if (got == VALUE_OK) {
                format_builder_text_literal(c->b, sh->key_close);
                /* a newline after the key where the parser drops it (DSML keeps a string's) */
                if (sh->lines && !sh->json_close)
                    fputs(" \"\\n\"?", out);
                if (*sh->value_open) {
                    fputc(' ', out);
                    format_builder_text_literal(c->b, sh->value_open);
                }
                fprintf(out, " %s%s", value, json[0] ? " | " : "");
            }
            if (json[0]) {
                format_builder_text_literal(c->b, sh->json_close);
                fprintf(out, " %s", json);
            }
            fputs(") ", out);
            if (!write_close(c, key)) {
                ok = false;
                break;
            }
            fputc('\n', out);
        }
        i++;
    }
    if (ok) {
        format_builder_rule_name(c->b, "args", name);
        fprintf(out, "%s ::=", name);
        for (i = 0; i < n; i++)
            if (pairs[i][0])
                fprintf(out, " %s%s", pairs[i], needed[i] ? "" : "?");
        fputs(" \"\"\n", out);
    }
    free(pairs);
    free(needed);
    return ok;
}

/* A Python identifier (a function's name may also hold '.' and '-', as the reader takes). */
static bool python_word(const char *s, bool function)
{
    static const char letters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_";
    size_t n = strlen(s);
    if (n == 0 || n > 255 || !strchr(letters, s[0]))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!strchr(letters, s[i]) && !strchr("0123456789", s[i]) &&
            !(function && strchr(".-", s[i])))
            return false;
    return true;
}

static int compare_keys(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * Python's KEY=VALUE arguments, by commas, into name (empty when there are none): in the
 * keys' sorted order, as Corral's renderers write a call, the required ones always there,
 * each value the property's JSON as a Python literal. Rule first-I: the first argument
 * written is the I-th key's or a later one's; rest-I: those after, each behind a comma.
 */
static bool python_args(tagged_ctx *c, char name[64])
{
    const json_t *properties, *required;
    if (!named_properties(c, &properties, &required))
        return false;
    name[0] = '\0';
    size_t n = json_object_size(properties), i = 0;
    if (n == 0)
        return true;
    const char **keys = calloc(n, sizeof *keys);
    if (!keys) {
        corral_error_set(c->err, "out of memory");
        c->failed = true;
        return false;
    }
    const char *key;
    json_t *schema;
    json_object_foreach((json_t *)properties, key, schema)
        keys[i++] = key;
    qsort(keys, n, sizeof *keys, compare_keys);
    FILE *out = format_builder_stream(c->b);
    char base[64], value[64];
    format_builder_rule_name(c->b, "py", base);
    bool ok = true;
    for (i = n; ok && i-- > 0;) {
        if (!python_word(keys[i], false)) {
            ok = format_builder_fail(c->b, "the property name \"%.100s\" cannot be written in "
                                           "this template's call syntax", keys[i]);
            break;
        }
        ok = format_builder_schema(c->b, c->parameters, json_object_get(properties, keys[i]),
                                   keys[i], value);
        if (!ok)
            break;
        bool needed = is_required(required, keys[i]);
        fprintf(out, "%s-kv%zu ::= \"%s=\" %s\n", base, i, keys[i], value);
        fprintf(out, "%s-rest%zu ::= %s\",\" \" \"? %s-kv%zu%s", base, i, needed ? "" : "(",
                base, i, needed ? "" : ")?");
        if (i + 1 < n)
            fprintf(out, " %s-rest%zu", base, i + 1);
        fprintf(out, "\n%s-first%zu ::= %s-kv%zu", base, i, base, i);
        if (i + 1 < n)
            fprintf(out, " %s-rest%zu", base, i + 1);
        if (!needed)
            fprintf(out, i + 1 < n ? " | %s-first%zu" : " | \"\"", base, i + 1);
        fputc('\n', out);
    }
    free(keys);
    if (ok) {
        format_builder_rule_name(c->b, "args", name);
        fprintf(out, "%s ::= %s-first0\n", name, base);
    }
    return ok;
}

/* The rule of one call of tool: its name, then its arguments. */
static bool call_rule(tagged_ctx *c, char name[64])
{
    const tagged_shape *shape = c->shape;
    if (!name_fits(shape, c->tool) || (shape->python && !python_word(c->tool, true)))
        return format_builder_fail(c->b, "its name cannot be written in this template's call "
                                         "syntax");
    char args[64];
    bool ok = shape->python    ? python_args(c, args)
              : shape->key_open ? pairs_rule(c, args)
                                : format_builder_schema(c->b, c->parameters, c->parameters,
                                                        "args", args);
    if (!ok)
        return false;
    FILE *out = format_builder_stream(c->b);
    format_builder_rule_name(c->b, "call", name);
    fprintf(out, "%s ::= ", name);
    char *head = NULL;
    if (asprintf(&head, "%s%s", c->tool, shape->after_name) < 0) {
        corral_error_set(c->err, "out of memory");
        c->failed = true;
        return false;
    }
    format_builder_text_literal(c->b, head);
    free(head);
    fprintf(out, " %s\n", args[0] ? args : "\"\"");
    return true;
}

/* The builder's error in err, said of tool. */
static void blame_tool(corral_error *err, const char *tool)
{
    char why[CORRAL_ERROR_MAX];
    snprintf(why, sizeof why, "%s",
             strncmp(err->message, "format: ", 8) == 0 ? err->message + 8 : err->message);
    corral_error_set(err, "tool \"%.200s\": its parameters cannot be enforced for tool_choice: "
                          "%s", tool, why);
}

/*
 * c's texts around the calls (before, close) for its template's tag, and into follower what
 * JSON_NO_LT's '<' may not come before; false with err when the tag has no closing tag. The
 * block a closing tag ends: LFM2's <|..._start|> ends with <|..._end|> and holds a list,
 * another <X> ends with </X>.
 */
static bool call_texts(tagged_ctx *c, char follower[8], corral_error *err)
{
    const tagged_shape *sh = c->shape;
    const char *open = c->tags->tool_open;
    static const char start[] = "_start|>";
    size_t n = strlen(open), k = sizeof start - 1;
    bool listed = sh->python && n > k && strcmp(open + n - k, start) == 0;
    char tag_close[sizeof c->tags->tool_open + 1] = "";
    if (listed)
        snprintf(tag_close, sizeof tag_close, "%.*s_end|>", (int)(n - k), open);
    else if (sh->closes_tag)
        closing_tag(open, tag_close, sizeof tag_close);
    if (sh->closes_tag && !tag_close[0]) {
        corral_error_set(err, "tool_choice cannot force a call in the call syntax after %.64s",
                         open);
        return false;
    }
    snprintf(c->before, sizeof c->before, "%s%s", listed ? "[" : "", sh->before_name);
    snprintf(c->close, sizeof c->close, "%s%s%s", sh->close, listed ? "]" : "", tag_close);
    /* LFM2's and Olmo 3's: what follows '<' in their closing tags, ASCII */
    snprintf(follower, 8, "%s", sh->lt_follower ? sh->lt_follower : "");
    if (!sh->lt_follower && tag_close[0])
        snprintf(follower, 8, "%.1s", tag_close + 1);
    return true;
}

static char *tool_grammar_tagged(const tagged_shape *shape, const json_t *tools,
                                 const char *name, const corral_output_tags *tags,
                                 corral_error *err)
{
    tagged_ctx c = {.shape = shape, .tags = tags, .tools = tools, .err = err};
    char follower[8];
    if (!call_texts(&c, follower, err) ||
        !(c.b = format_builder_create(c.shape->dialect, follower, err)))
        return NULL;
    char (*calls)[64] = calloc(MAX_FORCED_TOOLS, sizeof *calls);
    size_t n = 0;
    bool ok = calls != NULL;
    if (!ok)
        corral_error_set(err, "out of memory");
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool) {
        if (!ok)
            break;
        if (!tool_name(tool) || (name && strcmp(tool_name(tool), name) != 0))
            continue;
        if (n == MAX_FORCED_TOOLS) {
            corral_error_set(err, "tool_choice can force a call among at most %d tools",
                             MAX_FORCED_TOOLS);
            ok = false;
            break;
        }
        json_t *parameters = arguments_schema(tool);
        c.tool = tool_name(tool);
        c.parameters = parameters;
        if (!parameters) {
            corral_error_set(err, "out of memory");
            c.failed = true;
        }
        ok = parameters && call_rule(&c, calls[n]);
        if (!ok && !c.failed)
            blame_tool(err, c.tool);
        json_decref(parameters);
        n++;
    }
    if (ok && n == 0) {
        corral_error_set(err, "tool_choice: no tool to call");
        ok = false;
    }
    if (!ok) {
        free(calls);
        format_builder_free(c.b);
        return NULL;
    }
    FILE *out = format_builder_stream(c.b);
    fputs("call ::= ", out);
    char *head = NULL;
    if (asprintf(&head, "%s%s", tags->tool_open, c.before) < 0)
        head = NULL;
    format_builder_text_literal(c.b, head ? head : "");
    free(head);
    fputs(" (", out);
    for (i = 0; i < n; i++)
        fprintf(out, "%s%s", i ? " | " : "", calls[i]);
    fputs(") ", out);
    if (c.shape->lines)
        fputs("\"\\n\"? ", out);
    format_builder_text_literal(c.b, c.close);
    fputc('\n', out);
    free(calls);
    return format_builder_finish(c.b, "call");
}

char *tool_grammar_create(const json_t *tools, const char *name, const corral_output_tags *tags,
                          corral_error *err)
{
    if (tags->calls == CORRAL_CALLS_JSON)
        return json_call_grammar(tools, name, tags, err);
    const tagged_shape *shape = shape_of(tags->calls);
    if (shape)
        return tool_grammar_tagged(shape, tools, name, tags, err);
    corral_error_set(err, "tool_choice cannot force a call in the call syntax after %.64s",
                     tags->tool_open);
    return NULL;
}

/*
 * ---- harmony (gpt-oss) ----
 *
 * A harmony call is a message whose header names the function: "<|channel|>commentary
 * to=functions.NAME <|constrain|>json<|message|>", then the arguments' JSON, then <|call|>.
 * The header is made of the model's control tokens, which a grammar (matching the text of
 * ordinary tokens) cannot ask for: the server writes it at the end of the prompt instead,
 * so the one function is chosen before the answer starts, and the grammar is the arguments'
 * alone. Their strings never hold a raw '<' before '|', which would read as the message's
 * end tag.
 */

/* The one tool a call whose header names it can be of (name, or the only tool offered), its
 * index in *at; NULL with err naming family when there are none or several. */
static const json_t *headed_tool(const json_t *tools, const char *name, const char *family,
                                 size_t *at, corral_error *err)
{
    const json_t *called = NULL;
    size_t i, n = 0;
    json_t *tool;
    json_array_foreach(tools, i, tool) {
        if (!tool_name(tool) || (name && strcmp(tool_name(tool), name) != 0))
            continue;
        called = tool;
        *at = i;
        n++;
    }
    if (n == 0) {
        corral_error_set(err, "tool_choice: no tool to call");
        return NULL;
    }
    if (n > 1) {
        corral_error_set(err, "tool_choice: a %s model names the function it calls in its "
                              "message header, which the server writes before the answer: "
                              "name the function to call, or offer one tool", family);
        return NULL;
    }
    return called;
}

char *tool_grammar_harmony(const json_t *tools, const char *name, char **header,
                           corral_error *err)
{
    *header = NULL;
    size_t at = 0;
    const json_t *called = headed_tool(tools, name, "harmony", &at, err);
    if (!called)
        return NULL;
    json_t *names = harmony_tool_names(tools);
    json_t *parameters = arguments_schema(called);
    format_builder *b = names && parameters
                            ? format_builder_create(FORMAT_JSON_NO_LT, "|", err)
                            : NULL;
    char args[64];
    char *grammar = NULL;
    if (!names || !parameters) {
        corral_error_set(err, "out of memory");
    } else if (b && !format_builder_schema(b, parameters, parameters, "args", args)) {
        blame_tool(err, tool_name(called));
        format_builder_free(b);
    } else if (b) {
        grammar = format_builder_finish(b, args);
    }
    if (grammar &&
        asprintf(header, "<|channel|>commentary to=functions.%s <|constrain|>json<|message|>",
                 json_string_value(json_array_get(names, at))) < 0) {
        *header = NULL;
        corral_error_set(err, "out of memory");
        free(grammar);
        grammar = NULL;
    }
    json_decref(names);
    json_decref(parameters);
    return grammar;
}

/*
 * ---- Glimmer ----
 *
 * A Glimmer call is a message whose header names the function, " to=NAME<|message|>" after
 * the "<|start|>assistant" the prompt ends with, and whose body is the ATEM block of the call.
 * The header ends in <|message|>, a control token a grammar cannot ask for: the server writes
 * the header at the end of the prompt, as for harmony, and the grammar is the body's
 * (glimmer_shape), of that one function.
 */

char *tool_grammar_glimmer(const json_t *tools, const char *name, char **header,
                           corral_error *err)
{
    *header = NULL;
    size_t at = 0;
    const json_t *called = headed_tool(tools, name, "Glimmer", &at, err);
    if (!called)
        return NULL;
    if (strcmp(tool_name(called), "self") == 0) { /* a message to=self is thinking */
        corral_error_set(err, "tool \"self\": a Glimmer model's messages to \"self\" are its "
                              "thinking, which tool_choice cannot force as a call");
        return NULL;
    }
    corral_output_tags tags = {.calls = CORRAL_CALLS_GLIMMER};
    snprintf(tags.tool_open, sizeof tags.tool_open, "%s", GLIMMER_TOOL_OPEN);
    char *grammar = tool_grammar_tagged(&glimmer_shape, tools, tool_name(called), &tags, err);
    if (grammar && asprintf(header, " to=%s<|message|>", tool_name(called)) < 0) {
        *header = NULL;
        corral_error_set(err, "out of memory");
        free(grammar);
        grammar = NULL;
    }
    return grammar;
}

/*
 * ---- Cohere ----
 *
 * A Cohere call is an action: <|START_ACTION|>, a JSON list of {"tool_call_id", "tool_name",
 * "parameters"} objects, <|END_ACTION|>. Cohere's vocabularies hold both tags as control
 * tokens (llama.cpp's converter types every "<|...|>" added token so), which a grammar cannot
 * ask for: the server ends the prompt with the opening tag, and the grammar is the list. Once
 * the list is whole, the grammar allows nothing but an end of generation: the answer ends
 * there, without <|END_ACTION|>, and the parser reads the calls of an action the answer's
 * end cut off.
 */

/*
 * How the prompt's end leads to the action: the turn's thinking, which the renderer leaves
 * closed (think off) or open, closed empty here, so a forced call has no thinking before it;
 * the bare turn a Command R7B or Command A template opens, whose calls come after an empty
 * thinking as that template writes an assistant's calls. Any other end continues an
 * assistant's text (the renderer's <|START_TEXT|>, the older templates' <|START_RESPONSE|>),
 * which is closed first.
 */
static const struct {
    const char *end, *then;
} cohere_turn_ends[] = {
    {COHERE_THINK_CLOSE, ""},
    {COHERE_THINK_OPEN, COHERE_THINK_CLOSE},
    {"<|CHATBOT_TOKEN|>", COHERE_THINK_OPEN COHERE_THINK_CLOSE},
};

/* What prompt (a Cohere one) must be followed by for the action's list to come next: the
 * text that closes what it leaves open, then the action's tag. */
static const char *cohere_closing(const char *prompt)
{
    size_t n = strlen(prompt);
    while (n > 0 && strchr(" \t\r\n", prompt[n - 1]))
        n--;
    for (size_t i = 0; i < sizeof cohere_turn_ends / sizeof cohere_turn_ends[0]; i++) {
        size_t k = strlen(cohere_turn_ends[i].end);
        if (n >= k && memcmp(prompt + n - k, cohere_turn_ends[i].end, k) == 0)
            return cohere_turn_ends[i].then;
    }
    const char *text = NULL, *response = NULL;
    for (const char *at = prompt; (at = strstr(at, "<|START_TEXT|>")); at++)
        text = at;
    for (const char *at = prompt; (at = strstr(at, "<|START_RESPONSE|>")); at++)
        response = at;
    return response && (!text || response > text) ? "<|END_RESPONSE|>" : "<|END_TEXT|>";
}

/*
 * The list: one {"tool_call_id", "tool_name", "parameters"} object, whose strings never hold
 * a raw '<' before '|' (the parser ends the action at the first <|END_ACTION|> in its text,
 * wherever it stands, which a vocabulary without the control token spells out). The renderer leaves a blank line between the list's brackets and its
 * calls ("[\n\n    {"), so the whitespace here takes two newlines in a row where format's
 * takes one. The id is a short string, which the parser passes over.
 */
char *tool_grammar_cohere(const json_t *tools, const char *name, const char *prompt,
                          char **tail, corral_error *err)
{
    *tail = NULL;
    json_t *one = calls_schema(tools, name, "tool_name", "parameters", "tool_call_id", "/items",
                               err);
    json_t *schema = one ? json_pack("{s:s,s:o,s:i,s:i}", "type", "array", "items", one,
                                     "minItems", 1, "maxItems", 1)
                         : NULL;
    if (one && !schema)
        corral_error_set(err, "out of memory");
    format_builder *b = schema ? format_builder_create(FORMAT_JSON_NO_LT, "|", err) : NULL;
    char list[64];
    char *grammar = NULL;
    if (b) {
        format_builder_set_newlines(b, 2);
        if (!format_builder_schema(b, schema, schema, "action", list)) {
            format_builder_free(b);
        } else {
            fprintf(format_builder_stream(b), "call ::= %s\n", list);
            grammar = format_builder_finish(b, "call");
        }
    }
    json_decref(schema);
    if (grammar && asprintf(tail, "%s%s", cohere_closing(prompt), COHERE_TOOL_OPEN) < 0) {
        *tail = NULL;
        corral_error_set(err, "out of memory");
        free(grammar);
        grammar = NULL;
    }
    return grammar;
}

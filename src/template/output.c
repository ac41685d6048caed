/*
 * Model output -> thinking, content and tool calls, on a token stream where
 * tags may be split across chunks. Text that could still be the start of a tag is held back
 * until the next chunk decides it. Tool calls are JSON objects after the tool tag (or bare
 * objects when the tag is "{"), in ollama's accepted shapes, or a family's own syntax
 * (corral_call_syntax); Glimmer's answers are messages, split by their headers instead of
 * tags. Output that fails to parse as calls is given back as content. Also infers the tags
 * from a Go template.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "template/go_template.h"
#include "template/harmony.h"
#include "template/jinja_template.h"
#include "template/python_calls.h"
#include "template/tbuf.h"
#include "template/template.h"

typedef enum out_state {
    OUT_START,
    OUT_THINKING_START,
    OUT_THINKING,
    OUT_AFTER_THINKING,
    OUT_CONTENT,
    OUT_TOOLS,
    OUT_CONTENT_ONLY,
    OUT_HEADER, /* GLIMMER: a message's header */
    OUT_BODY,   /* GLIMMER: its body */
} out_state;

/* What a GLIMMER message's header makes of its body. */
typedef enum body_kind {
    BODY_THINKING,
    BODY_CONTENT,
    BODY_CALL,
} body_kind;

struct corral_output_parser {
    corral_output_tags tags;
    out_state state;
    bool emitted_content; /* tag-{ tools only count at the very start */
    tbuf pending;         /* undecided bytes */
    tbuf content, thinking;
    json_t *calls;  /* calls completed in the current feed */
    size_t n_calls; /* all calls so far, for "index" */
    size_t max_bytes;
    harmony_parser *harmony; /* a harmony answer: that parser does the work */
    const json_t *tools;     /* the request's, to type the tagged syntaxes' arguments */
    body_kind body;          /* OUT_BODY's */
    bool body_emitted;       /* some of this body has gone out as content */
    char recipient[256];     /* OUT_BODY's header's, for a call */
};

corral_output_parser *corral_output_parser_create(const corral_output_tags *tags,
                                                  bool starts_in_thinking, size_t max_bytes)
{
    corral_output_parser *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->tags = *tags;
    p->state = tags->calls == CORRAL_CALLS_GLIMMER                 ? OUT_HEADER
               : starts_in_thinking && tags->think_open[0] ? OUT_THINKING_START
                                                           : OUT_START;
    p->max_bytes = max_bytes;
    tbuf_init(&p->pending, max_bytes);
    tbuf_init(&p->content, max_bytes);
    tbuf_init(&p->thinking, max_bytes);
    p->calls = json_array();
    if (!p->calls) {
        free(p);
        return NULL;
    }
    return p;
}

corral_output_parser *harmony_output_parser_create(const char *prompt, const json_t *tools,
                                                   size_t max_bytes)
{
    corral_output_parser *p = calloc(1, sizeof *p);
    if (p && !(p->harmony = harmony_parser_create(prompt, tools, max_bytes))) {
        free(p);
        return NULL;
    }
    return p;
}

void corral_output_parser_set_tools(corral_output_parser *p, const json_t *tools)
{
    p->tools = tools;
}

void corral_output_parser_free(corral_output_parser *p)
{
    if (!p)
        return;
    harmony_parser_free(p->harmony);
    tbuf_free(&p->pending);
    tbuf_free(&p->content);
    tbuf_free(&p->thinking);
    json_decref(p->calls);
    free(p);
}

/* Length of the longest suffix of s[0..n) that is a proper prefix of tag. */
static size_t partial_tag(const char *s, size_t n, const char *tag)
{
    size_t t = strlen(tag);
    for (size_t k = t > 0 ? t - 1 : 0; k > 0; k--)
        if (k <= n && memcmp(s + n - k, tag, k) == 0)
            return k;
    return 0;
}

static void consume(tbuf *b, size_t n)
{
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

static size_t leading_space(const tbuf *b)
{
    size_t i = 0;
    while (i < b->len && isspace((unsigned char)b->data[i]))
        i++;
    return i;
}

/* Length of the whitespace that ends s[0..n). */
static size_t trailing_space(const char *s, size_t n)
{
    size_t k = 0;
    while (k < n && isspace((unsigned char)s[n - 1 - k]))
        k++;
    return k;
}

static bool emit(corral_output_parser *p, tbuf *to, size_t n, corral_error *err)
{
    if (!tbuf_append(to, p->pending.data, n)) {
        corral_error_set(err, "model output exceeds %zu bytes", p->max_bytes);
        return false;
    }
    if (to == &p->content && n)
        p->emitted_content = true;
    consume(&p->pending, n);
    return true;
}

static bool tool_tag_is_json(const corral_output_parser *p)
{
    return !strcmp(p->tags.tool_open, "{") || !strcmp(p->tags.tool_open, "[");
}

/* One call in any of ollama's shapes; NULL if obj is not a call. */
static json_t *to_call(json_t *obj, size_t index)
{
    json_t *fn = json_object_get(obj, "function");
    json_t *src = json_is_object(fn) ? fn : obj;
    json_t *name = json_object_get(src, "name");
    json_t *args = json_object_get(src, "arguments");
    if (!args)
        args = json_object_get(src, "parameters");
    if (!json_is_string(name))
        return NULL;
    json_t *parsed = NULL;
    if (json_is_string(args))
        args = parsed = json_loads(json_string_value(args), 0, NULL);
    if (!args)
        args = parsed = json_object();
    if (!json_is_object(args)) {
        json_decref(parsed);
        return NULL;
    }
    json_t *call = json_pack("{s:{s:I,s:O,s:O}}", "function", "index", (json_int_t)index, "name",
                             name, "arguments", args);
    json_decref(parsed);
    return call;
}

static bool add_calls(corral_output_parser *p, json_t *value)
{
    size_t n = json_is_array(value) ? json_array_size(value) : 1;
    json_t *found = json_array();
    for (size_t i = 0; found && i < n; i++) {
        json_t *item = json_is_array(value) ? json_array_get(value, i) : value;
        json_t *call = json_is_object(item) ? to_call(item, p->n_calls + i) : NULL;
        if (!call) {
            json_decref(found);
            return false;
        }
        json_array_append_new(found, call);
    }
    if (!found)
        return false;
    p->n_calls += json_array_size(found);
    json_array_extend(p->calls, found);
    json_decref(found);
    return true;
}

static size_t skip_space(const tbuf *b, size_t i)
{
    while (i < b->len && isspace((unsigned char)b->data[i]))
        i++;
    return i;
}

/*
 * In tool mode: parse complete calls, dropping the bytes of each call (and the tags around
 * it) only once it is complete. False when the held text is not tool calls; *wait when it
 * may still become one.
 */
static bool parse_tools(corral_output_parser *p, bool final, bool *wait)
{
    tbuf *b = &p->pending;
    const char *open = p->tags.tool_open;
    size_t open_len = strlen(open);
    size_t i = 0;
    *wait = false;
    for (;;) {
        i = skip_space(b, i);
        if (!tool_tag_is_json(p) && b->len - i >= open_len &&
            !memcmp(b->data + i, open, open_len)) {
            i += open_len;
            continue;
        }
        if (b->len - i >= 2 && b->data[i] == '<' && b->data[i + 1] == '/') {
            char *end = memchr(b->data + i, '>', b->len - i);
            if (!end) {
                *wait = !final;
                return !final;
            }
            i = (size_t)(end - b->data) + 1;
            consume(b, i);
            i = 0;
            continue;
        }
        if (i == b->len) {
            *wait = !final && i > 0;
            return !final || i == 0 || p->n_calls > 0;
        }
        char c = b->data[i];
        if (c != '{' && c != '[') {
            bool maybe_tag = !tool_tag_is_json(p) && b->len - i < open_len &&
                             !memcmp(open, b->data + i, b->len - i);
            *wait = maybe_tag && !final;
            return *wait;
        }
        json_error_t jerr;
        json_t *value = json_loadb(b->data + i, b->len - i, JSON_DISABLE_EOF_CHECK, &jerr);
        if (!value) {
            *wait = !final && jerr.position >= (int)(b->len - i) - 1;
            return *wait;
        }
        size_t used = (size_t)jerr.position;
        bool added = add_calls(p, value);
        json_decref(value);
        if (!added)
            return false;
        consume(b, i + used);
        i = 0;
    }
}


/* ---- calls in a family's own syntax (corral_call_syntax) ---- */

static const char DS_CALLS_BEGIN[] = "<｜tool▁calls▁begin｜>";
static const char DS_CALLS_END[] = "<｜tool▁calls▁end｜>";
static const char DS_CALL_BEGIN[] = "<｜tool▁call▁begin｜>";
static const char DS_CALL_END[] = "<｜tool▁call▁end｜>";
static const char DS_SEP[] = "<｜tool▁sep｜>";
static const char KIMI_SECTION_BEGIN[] = "<|tool_calls_section_begin|>";
static const char KIMI_SECTION_END[] = "<|tool_calls_section_end|>";
static const char KIMI_CALL_BEGIN[] = "<|tool_call_begin|>";
static const char KIMI_CALL_END[] = "<|tool_call_end|>";
static const char KIMI_ARGS[] = "<|tool_call_argument_begin|>";
#define DSML "｜DSML｜"
#define M3_NS "]<]minimax[>["
#define ATEM_OPEN "<atem:function_calls>"
#define ATEM_CLOSE "</atem:function_calls>"
static const char G_MESSAGE[] = "<|message|>"; /* GLIMMER: a header's end */

/* s[0..n) without the whitespace around it. */
static const char *trim(const char *s, size_t *n)
{
    while (*n && isspace((unsigned char)s[0]))
        s++, (*n)--;
    while (*n && isspace((unsigned char)s[*n - 1]))
        (*n)--;
    return s;
}

static bool all_space(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isspace((unsigned char)s[i]))
            return false;
    return true;
}

/* The first `tag` in s[0..n), or NULL. */
static const char *find_tag(const char *s, size_t n, const char *tag)
{
    return memmem(s, n, tag, strlen(tag));
}

/* The JSON types a parameter's schema allows (its "type", a name or a list, and those of
 * its anyOf), as bits of the names below; 0 when the schema names none. */
enum { T_BOOLEAN = 1, T_INTEGER = 2, T_NUMBER = 4, T_ARRAY = 8, T_OBJECT = 16, T_STRING = 32 };

static unsigned type_bits_of(const json_t *type)
{
    static const char *const names[] = {"boolean", "integer", "number",
                                        "array",   "object",  "string"};
    unsigned bits = 0;
    for (size_t i = 0; i < (json_is_array(type) ? json_array_size(type) : 1); i++) {
        const char *name = json_string_value(json_is_array(type) ? json_array_get(type, i) : type);
        for (size_t k = 0; name && k < sizeof names / sizeof names[0]; k++)
            if (!strcmp(name, names[k]))
                bits |= 1u << k;
    }
    return bits;
}

/* The types a schema allows: its "type" and those of its anyOf. */
static unsigned schema_types(const json_t *schema)
{
    unsigned bits = type_bits_of(json_object_get(schema, "type"));
    size_t k;
    const json_t *alt;
    json_array_foreach(json_object_get(schema, "anyOf"), k, alt)
        bits |= type_bits_of(json_object_get(alt, "type"));
    return bits;
}

/* The schema of parameter key of tool fn among tools; NULL when none says. */
static const json_t *param_schema(const json_t *tools, const char *fn, const char *key)
{
    size_t i;
    const json_t *tool;
    json_array_foreach(tools, i, tool) {
        const json_t *f = json_object_get(tool, "function");
        if (json_is_object(f) && json_is_string(json_object_get(f, "name")) &&
            !strcmp(json_string_value(json_object_get(f, "name")), fn))
            return json_object_get(
                json_object_get(json_object_get(f, "parameters"), "properties"), key);
    }
    return NULL;
}

static unsigned param_types(const json_t *tools, const char *fn, const char *key)
{
    return schema_types(param_schema(tools, fn, key));
}

/* Whole of s[0..n) read by strtoll / strtod (no leading space, nothing left over). */
static bool whole_integer(const char *s, size_t n, long long *v)
{
    char buf[64];
    if (n == 0 || n >= sizeof buf || isspace((unsigned char)s[0]))
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *end;
    errno = 0;
    *v = strtoll(buf, &end, 10);
    return *end == '\0' && errno == 0;
}

static bool whole_number(const char *s, size_t n, double *v)
{
    char buf[64];
    if (n == 0 || n >= sizeof buf || isspace((unsigned char)s[0]))
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *end;
    *v = strtod(buf, &end);
    return *end == '\0' && isfinite(*v);
}

/*
 * One argument's value, as ollama's parsers type the tagged syntaxes' text: "null" (any
 * case) is null; with no type in the schema, the text; else the first of boolean, integer,
 * number (a whole one as an integer), array, object that the schema allows and the text
 * reads as, else the text.
 */
static json_t *typed_text(const char *raw, size_t n, unsigned types)
{
    if (n == 4 && !strncasecmp(raw, "null", 4))
        return json_null();
    if ((types & T_BOOLEAN) && n == 4 && !strncasecmp(raw, "true", 4))
        return json_true();
    if ((types & T_BOOLEAN) && n == 5 && !strncasecmp(raw, "false", 5))
        return json_false();
    if (types == T_BOOLEAN)
        return json_false(); /* as the reference parser does */
    long long i;
    double d;
    if ((types & T_INTEGER) && whole_integer(raw, n, &i))
        return json_integer(i);
    if ((types & T_NUMBER) && whole_number(raw, n, &d))
        return d == trunc(d) && fabs(d) < 9.2e18 ? json_integer((json_int_t)d) : json_real(d);
    if (types & (T_ARRAY | T_OBJECT)) {
        json_t *v = json_loadb(raw, n, JSON_DECODE_ANY, NULL);
        if ((json_is_array(v) && (types & T_ARRAY)) || (json_is_object(v) && (types & T_OBJECT)))
            return v;
        json_decref(v);
    }
    return json_stringn(raw, n);
}

/* The same with one newline dropped at each end, as most of those parsers read a value. */
static json_t *typed_value(const char *raw, size_t n, unsigned types)
{
    if (n && raw[0] == '\n')
        raw++, n--;
    if (n && raw[n - 1] == '\n')
        n--;
    return typed_text(raw, n, types);
}

/* A call {"function": {index, name, arguments}} of name[0..n) and args (stolen). */
static json_t *make_call(const char *name, size_t n, json_t *args, size_t index)
{
    name = trim(name, &n);
    if (!args || n == 0 || memchr(name, '<', n) || memchr(name, '\n', n)) {
        json_decref(args);
        return NULL;
    }
    json_t *call = json_pack("{s:{s:I,s:s%,s:o}}", "function", "index", (json_int_t)index,
                             "name", name, n, "arguments", args);
    return call;
}

/* Set args[key] from the raw value text: as it is when the model marked it text (as_text 1),
 * as JSON when it marked it not (0) and it reads so, else typed by fn's schema (typed_value;
 * as_text AS_WRITTEN: typed_text, the syntax keeping a value's newlines). */
enum { AS_WRITTEN = 2 };
static bool set_typed(const corral_output_parser *p, json_t *args, const char *fn,
                      const char *key, size_t key_len, const char *raw, size_t n, int as_text)
{
    key = trim(key, &key_len);
    if (key_len == 0)
        return false;
    char *k = strndup(key, key_len);
    json_t *v = as_text == 1 ? json_stringn(raw, n)
                : as_text == 0 ? json_loadb(raw, n, JSON_DECODE_ANY, NULL)
                               : NULL;
    unsigned types = k ? param_types(p->tools, fn, k) : 0;
    if (!v)
        v = as_text == AS_WRITTEN ? typed_text(raw, n, types) : typed_value(raw, n, types);
    bool ok = k && v && json_object_set_new(args, k, v) == 0;
    if (!ok && v && !k)
        json_decref(v);
    free(k);
    return ok;
}

/* How a syntax writes one parameter: open, the key up to key_end (then, after a quote, the
 * attributes up to '>'), the value, close; or (elements) as MiniMax M3 does, an element named
 * by the key, its value text or nested elements, M3_NS before every tag. */
typedef struct param_form {
    const char *open, *close;
    char key_end;
    bool elements;
} param_form;

static const param_form QWEN_PARAMS = {"<parameter=", "</parameter>", '>', false};
static const param_form MINIMAX_PARAMS = {"<parameter name=\"", "</parameter>", '"', false};
static const param_form DSML_PARAMS = {"<" DSML "parameter name=\"", "</" DSML "parameter>", '"',
                                       false};
static const param_form M3_PARAMS = {NULL, NULL, 0, true};
static const param_form ATEM_PARAMS = {"<atem:parameter name=\"", "</atem:parameter>", '"', false};

/* MiniMax M3's arguments: M3_NS<KEY>VALUE M3_NS</KEY>, a value being text or elements of its
 * own (<item>s: a list; else a mapping), as its template's to_xml writes them; text typed by
 * the schema of where it stands (the parameter's, its properties' and items'). */
enum { M3_MAX_DEPTH = 32, M3_MAX_NAME = 256 };

/* At *s, after whitespace, an opening M3_NS<NAME>: its name, *s moved past it. */
static bool m3_open(const char **s, const char *end, const char **name, size_t *n)
{
    size_t ns = sizeof M3_NS - 1;
    const char *at = *s;
    while (at < end && isspace((unsigned char)*at))
        at++;
    if ((size_t)(end - at) < ns + 2 || memcmp(at, M3_NS, ns) != 0 || at[ns] != '<' ||
        at[ns + 1] == '/')
        return false;
    const char *nm = at + ns + 1, *gt = memchr(nm, '>', (size_t)(end - nm));
    if (!gt || gt == nm || (size_t)(gt - nm) >= M3_MAX_NAME)
        return false;
    *name = nm;
    *n = (size_t)(gt - nm);
    *s = gt + 1;
    return true;
}

/* The value of element name[0..n) from *s through its closing tag (*s moved past it); NULL
 * when it is not closed or holds something else. */
static json_t *m3_element(const char **s, const char *end, const char *name, size_t n,
                          const json_t *schema, int depth)
{
    char close[sizeof M3_NS + M3_MAX_NAME + 3];
    int close_len = snprintf(close, sizeof close, "%s</%.*s>", M3_NS, (int)n, name);
    unsigned types = schema_types(schema);
    const char *at = *s, *child;
    size_t child_len;
    json_t *v = NULL;
    if (depth < M3_MAX_DEPTH && m3_open(&at, end, &child, &child_len)) {
        bool list = child_len == 4 && !memcmp(child, "item", 4) &&
                    ((types & T_ARRAY) || !(types & T_OBJECT));
        v = list ? json_array() : json_object();
        for (;;) {
            char key[M3_MAX_NAME];
            memcpy(key, child, child_len);
            key[child_len] = '\0';
            const json_t *sub = list ? json_object_get(schema, "items")
                                     : json_object_get(json_object_get(schema, "properties"), key);
            json_t *item = list && strcmp(key, "item") != 0
                               ? NULL
                               : m3_element(&at, end, child, child_len, sub, depth + 1);
            if (!item || (list ? json_array_append_new(v, item)
                               : json_object_set_new(v, key, item)) != 0) {
                json_decref(v);
                return NULL;
            }
            if (!m3_open(&at, end, &child, &child_len))
                break;
        }
        while (at < end && isspace((unsigned char)*at))
            at++;
        if ((size_t)(end - at) < (size_t)close_len || memcmp(at, close, (size_t)close_len)) {
            json_decref(v);
            return NULL;
        }
    } else {
        const char *stop = find_tag(at, (size_t)(end - at), close);
        if (!stop)
            return NULL;
        size_t text = (size_t)(stop - at);
        if (text == 0 && !(types & T_STRING) && (types & (T_ARRAY | T_OBJECT)))
            v = types & T_ARRAY ? json_array() : json_object(); /* to_xml wrote [] or {} so */
        else
            v = typed_value(at, text, types);
        at = stop;
    }
    *s = at + close_len;
    return v;
}

/* M3's parameters of fn in s[0..n) (only whitespace between them) set in args. */
static bool m3_params(const corral_output_parser *p, const char *fn, const char *s, size_t n,
                      json_t *args)
{
    const char *at = s, *end = s + n, *name;
    size_t name_len;
    while (m3_open(&at, end, &name, &name_len)) {
        char key[M3_MAX_NAME];
        memcpy(key, name, name_len);
        key[name_len] = '\0';
        json_t *v = m3_element(&at, end, name, name_len, param_schema(p->tools, fn, key), 1);
        if (!v || json_object_set_new(args, key, v) != 0)
            return false;
    }
    return all_space(at, (size_t)(end - at));
}

/* DeepSeek's string="true" or "false" among attrs[0..n): 1, 0; -1 when it does not say. */
static int string_attr(const char *attrs, size_t n)
{
    static const char attr[] = "string=\"";
    const char *a = find_tag(attrs, n, attr);
    if (!a)
        return -1;
    const char *v = a + sizeof attr - 1;
    size_t left = (size_t)(attrs + n - v);
    if (left >= 5 && !memcmp(v, "true\"", 5))
        return 1;
    return left >= 6 && !memcmp(v, "false\"", 6) ? 0 : -1;
}

/* Each parameter in form f found in s[0..n) (the text between them passed over) set in args,
 * typed by fn's schema; false when one is left open or has no key. */
static bool read_params(const corral_output_parser *p, const char *fn, const char *s, size_t n,
                        const param_form *f, json_t *args)
{
    if (f->elements)
        return m3_params(p, fn, s, n, args);
    const char *at = s, *end = s + n;
    size_t open_len = strlen(f->open), close_len = strlen(f->close);
    for (;;) {
        const char *open = find_tag(at, (size_t)(end - at), f->open);
        if (!open)
            return true;
        const char *key = open + open_len;
        const char *kend = memchr(key, f->key_end, (size_t)(end - key));
        const char *gt = kend ? memchr(kend, '>', (size_t)(end - kend)) : NULL;
        const char *close = gt ? find_tag(gt + 1, (size_t)(end - gt - 1), f->close) : NULL;
        /* Glimmer's values are what stands between the tags, newlines and all */
        int as_text = f == &ATEM_PARAMS ? AS_WRITTEN : string_attr(kend, (size_t)(gt - kend));
        if (!close || !set_typed(p, args, fn, key, (size_t)(kend - key), gt + 1,
                                 (size_t)(close - gt - 1), as_text))
            return false;
        at = close + close_len;
    }
}

/* A function name s[0..n) copied into fn (256 bytes); false when empty or longer. */
static bool copy_name(char fn[256], const char *s, size_t n)
{
    if (n == 0 || n >= 256)
        return false;
    memcpy(fn, s, n);
    fn[n] = '\0';
    return true;
}

/* <function=NAME> (<parameter=KEY>VALUE</parameter>)* </function>, the inside of one
 * <tool_call> block; NULL when it is not that. */
static json_t *xml_function_call(const corral_output_parser *p, const char *s, size_t n,
                                 size_t index)
{
    static const char fn_open[] = "<function=", fn_close[] = "</function>";
    s = trim(s, &n);
    if (n < sizeof fn_open - 1 || memcmp(s, fn_open, sizeof fn_open - 1) != 0)
        return NULL;
    const char *name = s + sizeof fn_open - 1, *gt = memchr(name, '>', n - (size_t)(name - s));
    const char *end = find_tag(s, n, fn_close);
    if (!gt || !end || gt > end)
        return NULL;
    char fn[256];
    size_t name_len = (size_t)(gt - name);
    if (!copy_name(fn, name, name_len))
        return NULL;
    json_t *args = json_object();
    if (!read_params(p, fn, gt + 1, (size_t)(end - gt - 1), &QWEN_PARAMS, args)) {
        json_decref(args);
        return NULL;
    }
    return make_call(fn, name_len, args, index);
}

/* name[0..n) as the request's tools know it: a declared name, or NS.NAME for a declared NAME
 * of namespace NS (its name up to the first '.', or all of it), as Glimmer's prompt offers
 * each namespace's functions; NULL when no tool has it. */
static const char *declared_tool(const json_t *tools, const char *name, size_t n)
{
    const char *dot = memchr(name, '.', n);
    for (int pass = 0; pass < 2; pass++) {
        size_t i;
        const json_t *tool;
        json_array_foreach(tools, i, tool) {
            const char *fn = json_string_value(json_object_get(json_object_get(tool, "function"),
                                                               "name"));
            if (!fn || !*fn)
                continue;
            if (pass == 0 && strlen(fn) == n && !memcmp(fn, name, n))
                return fn;
            size_t ns = strcspn(fn, ".");
            if (pass == 1 && dot && strcmp(fn, dot + 1) == 0 &&
                (size_t)(dot - name) == ns && !memcmp(fn, name, ns))
                return fn;
        }
    }
    return NULL;
}

/*
 * Glimmer's invoke name at s[0..n) (after name=") copied into fn, *params where its
 * parameters start; false when it is not closed by `">` or is empty or too long. As ollama's
 * parser reads it, a <|message|> before the `">` is dropped (the model sometimes writes the
 * header's boundary token into the name), and one followed at once by a parameter stands for
 * the `">` itself. Only the name is read so: a value (after the `">`) keeps the token.
 */
static bool atem_invoke_name(const char *s, size_t n, char fn[256], const char **params)
{
    static const char term[] = "\">";
    const char *at = s, *end = s + n;
    size_t len = 0, msg = sizeof G_MESSAGE - 1, param = strlen(ATEM_PARAMS.open);
    for (;;) {
        const char *t = find_tag(at, (size_t)(end - at), term);
        const char *m = find_tag(at, (size_t)(t ? t - at : end - at), G_MESSAGE);
        const char *stop = m ? m : t;
        if (!stop || len + (size_t)(stop - at) >= 256)
            return false;
        memcpy(fn + len, at, (size_t)(stop - at));
        len += (size_t)(stop - at);
        if (!m) {
            *params = t + sizeof term - 1;
            break;
        }
        at = m + msg;
        if ((size_t)(end - at) >= param && !memcmp(at, ATEM_PARAMS.open, param)) {
            *params = at;
            break;
        }
    }
    fn[len] = '\0';
    return len > 0;
}

/* NAME"> then parameters in form f: the inside of one <invoke name="...">...</invoke> of
 * MiniMax's block, DeepSeek's DSML or Glimmer's ATEM block (s after the opening quote); NULL
 * when it is not that. Glimmer's name may be a declared tool's NS.NAME, its values typed by
 * that tool's schema. */
static json_t *invoke_call(const corral_output_parser *p, const char *s, size_t n,
                           const param_form *f, size_t index)
{
    char fn[256];
    const char *params;
    if (f == &ATEM_PARAMS) {
        if (!atem_invoke_name(s, n, fn, &params))
            return NULL;
    } else {
        const char *quote = memchr(s, '"', n);
        if (!quote || (size_t)(quote - s) + 1 >= n || quote[1] != '>' ||
            !copy_name(fn, s, (size_t)(quote - s)))
            return NULL;
        params = quote + 2;
    }
    const char *tool = f == &ATEM_PARAMS ? declared_tool(p->tools, fn, strlen(fn)) : NULL;
    json_t *args = json_object();
    if (!read_params(p, tool ? tool : fn, params, n - (size_t)(params - s), f, args)) {
        json_decref(args);
        return NULL;
    }
    return make_call(fn, strlen(fn), args, index);
}

/* NAME (<arg_key>KEY</arg_key> <arg_value>VALUE</arg_value>)*, the inside of one <tool_call>
 * block; NULL when it is not that (a key without its value, no name). */
static json_t *arg_pairs_call(const corral_output_parser *p, const char *s, size_t n,
                              size_t index)
{
    static const char ko[] = "<arg_key>", kc[] = "</arg_key>", vo[] = "<arg_value>",
                      vc[] = "</arg_value>";
    const char *first = find_tag(s, n, ko);
    size_t name_len = first ? (size_t)(first - s) : n;
    const char *name = trim(s, &name_len);
    char fn[256];
    if (!copy_name(fn, name, name_len))
        return NULL;
    json_t *args = json_object();
    const char *at = first, *end = s + n;
    while (at) {
        const char *k = at + sizeof ko - 1;
        const char *kend = find_tag(k, (size_t)(end - k), kc);
        const char *v = kend ? find_tag(kend, (size_t)(end - kend), vo) : NULL;
        const char *vend = v ? find_tag(v, (size_t)(end - v), vc) : NULL;
        if (!vend || !all_space(kend + sizeof kc - 1, (size_t)(v - kend) - (sizeof kc - 1)) ||
            !set_typed(p, args, fn, k, (size_t)(kend - k), v + sizeof vo - 1,
                       (size_t)(vend - v) - (sizeof vo - 1), -1)) {
            json_decref(args);
            return NULL;
        }
        at = find_tag(vend, (size_t)(end - vend), ko);
    }
    return make_call(fn, name_len, args, index);
}

/* NAME<｜tool▁sep｜>{JSON} (the inside of one DeepSeek call) or Kimi's
 * functions.NAME:IDX<|tool_call_argument_begin|>{JSON} (an id: ids true, the name read off
 * it as Kimi's template writes it), sep between them; NULL when it is not that. */
static json_t *name_json_call(const char *s, size_t n, const char *sep, bool ids, size_t index)
{
    const char *at = find_tag(s, n, sep);
    if (!at)
        return NULL;
    const char *json = at + strlen(sep);
    size_t json_len = (size_t)(s + n - json);
    json = trim(json, &json_len);
    json_t *args = json_loadb(json, json_len, 0, NULL);
    if (!json_is_object(args)) {
        json_decref(args);
        return NULL;
    }
    size_t name_len = (size_t)(at - s);
    const char *name = trim(s, &name_len);
    if (ids) {
        static const char prefix[] = "functions.";
        if (name_len >= sizeof prefix && !memcmp(name, prefix, sizeof prefix - 1))
            name += sizeof prefix - 1, name_len -= sizeof prefix - 1;
        size_t digits = 0;
        while (digits < name_len && isdigit((unsigned char)name[name_len - 1 - digits]))
            digits++;
        if (digits && digits < name_len && name[name_len - 1 - digits] == ':')
            name_len -= digits + 1;
    }
    return make_call(name, name_len, args, index);
}

/* Gemma 4's arguments: {KEY:VALUE,...} with strings between <|"|> marks and the rest bare
 * (gemma4's chat template writes them so), read into JSON. FunctionGemma writes the same
 * form with <escape> for the mark. */
enum { G4_MAX_DEPTH = 32 };

typedef struct g4_reader {
    const char *s, *end;
    const char *quote; /* the mark around strings */
    int depth;
} g4_reader;

static void g4_space(g4_reader *r)
{
    while (r->s < r->end && isspace((unsigned char)*r->s))
        r->s++;
}

static bool g4_at(const g4_reader *r, const char *lit)
{
    size_t n = strlen(lit);
    return (size_t)(r->end - r->s) >= n && memcmp(r->s, lit, n) == 0;
}

/* A quoted text; NULL (and r unmoved) when it is not one. */
static json_t *g4_quoted(g4_reader *r)
{
    size_t q = strlen(r->quote);
    if (!g4_at(r, r->quote))
        return NULL;
    const char *text = r->s + q, *close = find_tag(text, (size_t)(r->end - text), r->quote);
    if (!close)
        return NULL;
    r->s = close + q;
    return json_stringn(text, (size_t)(close - text));
}

static json_t *g4_value(g4_reader *r);

/* {KEY:VALUE,...} (r at its '{'), keys quoted or bare. */
static json_t *g4_mapping(g4_reader *r)
{
    json_t *obj = json_object();
    r->s++;
    g4_space(r);
    if (r->s < r->end && *r->s == '}') {
        r->s++;
        return obj;
    }
    for (;;) {
        g4_space(r);
        json_t *key = g4_quoted(r);
        if (!key) {
            const char *k = r->s;
            while (r->s < r->end && *r->s != ':' && *r->s != ',' && *r->s != '}' &&
                   !isspace((unsigned char)*r->s))
                r->s++;
            key = r->s > k ? json_stringn(k, (size_t)(r->s - k)) : NULL;
        }
        g4_space(r);
        json_t *value = NULL;
        if (key && r->s < r->end && *r->s == ':') {
            r->s++;
            value = g4_value(r);
        }
        if (!value || json_object_set_new(obj, json_string_value(key), value) != 0) {
            json_decref(key);
            json_decref(obj);
            return NULL;
        }
        json_decref(key);
        g4_space(r);
        if (r->s < r->end && *r->s == ',') {
            r->s++;
            continue;
        }
        if (r->s < r->end && *r->s == '}') {
            r->s++;
            return obj;
        }
        json_decref(obj);
        return NULL;
    }
}

/* [VALUE,...] (r at its '['). */
static json_t *g4_list(g4_reader *r)
{
    json_t *list = json_array();
    r->s++;
    g4_space(r);
    if (r->s < r->end && *r->s == ']') {
        r->s++;
        return list;
    }
    for (;;) {
        json_t *v = g4_value(r);
        if (!v || json_array_append_new(list, v) != 0) {
            json_decref(list);
            return NULL;
        }
        g4_space(r);
        if (r->s < r->end && *r->s == ',') {
            r->s++;
            continue;
        }
        if (r->s < r->end && *r->s == ']') {
            r->s++;
            return list;
        }
        json_decref(list);
        return NULL;
    }
}

/* One value: quoted text, a mapping, a list, or a bare word (true, false, null, a number,
 * else its text). */
static json_t *g4_value(g4_reader *r)
{
    g4_space(r);
    if (r->s >= r->end || ++r->depth > G4_MAX_DEPTH)
        return NULL;
    json_t *v;
    if (*r->s == '{')
        v = g4_mapping(r);
    else if (*r->s == '[')
        v = g4_list(r);
    else if (g4_at(r, r->quote))
        v = g4_quoted(r); /* NULL when the text is never closed */
    else {
        const char *w = r->s;
        while (r->s < r->end && *r->s != ',' && *r->s != '}' && *r->s != ']')
            r->s++;
        size_t n = (size_t)(r->s - w);
        w = trim(w, &n);
        long long i;
        double d;
        if (n == 0)
            v = NULL;
        else if (n == 4 && !memcmp(w, "true", 4))
            v = json_true();
        else if (n == 5 && !memcmp(w, "false", 5))
            v = json_false();
        else if (n == 4 && !memcmp(w, "null", 4))
            v = json_null();
        else if (whole_integer(w, n, &i))
            v = json_integer(i);
        else if (whole_number(w, n, &d))
            v = json_real(d);
        else
            v = json_stringn(w, n);
    }
    r->depth--;
    return v;
}

/* call:NAME{ARGS}, the inside of one <|tool_call> block (FunctionGemma's
 * <start_function_call> block), its strings between quote marks; NULL when it is not that. */
static json_t *gemma4_call(const char *s, size_t n, const char *quote, size_t index)
{
    static const char call[] = "call:";
    s = trim(s, &n);
    if (n < sizeof call || memcmp(s, call, sizeof call - 1) != 0)
        return NULL;
    const char *name = s + sizeof call - 1, *brace = memchr(name, '{', n - (sizeof call - 1));
    if (!brace)
        return NULL;
    g4_reader r = {brace, s + n, quote, 0};
    json_t *args = g4_mapping(&r);
    g4_space(&r);
    if (!args || r.s != r.end) {
        json_decref(args);
        return NULL;
    }
    return make_call(name, (size_t)(brace - name), args, index);
}

/* TYPE<｜tool▁sep｜>NAME\n```json\n{JSON}\n``` (the inside of one call in DeepSeek V3's
 * older form; the type, "function", is not checked, as ollama's Cogito parser does not),
 * sep between type and name; NULL when it is not that. */
static json_t *fenced_json_call(const char *s, size_t n, const char *sep, size_t index)
{
    static const char open[] = "\n```json\n", close[] = "\n```";
    const char *end = s + n, *at = find_tag(s, n, sep);
    const char *name = at ? at + strlen(sep) : NULL;
    const char *fence = name ? find_tag(name, (size_t)(end - name), open) : NULL;
    const char *json = fence ? fence + sizeof open - 1 : NULL;
    /* JSON holds no raw newline outside its white space, so the first fence closes it */
    const char *json_end = json ? find_tag(json, (size_t)(end - json), close) : NULL;
    if (!json_end)
        return NULL;
    const char *after = json_end + sizeof close - 1;
    json_t *args = all_space(after, (size_t)(end - after))
                       ? json_loadb(json, (size_t)(json_end - json), 0, NULL)
                       : NULL;
    if (!json_is_object(args)) {
        json_decref(args);
        return NULL;
    }
    return make_call(name, (size_t)(fence - name), args, index);
}

/* The syntaxes whose block holds one call or more, each between its own tags, only
 * whitespace between them: a name and JSON arguments with sep between (DeepSeek's call
 * tokens, Kimi's; in DeepSeek V3's older form a type before sep, the arguments fenced after
 * the name), or an invoke with its parameters in params' form (MiniMax M2 and M3, DeepSeek's
 * DSML). */
typedef struct call_section {
    corral_call_syntax syntax;
    const char *close; /* the block's end; NULL: the open tag's, "</" and what follows its '<' */
    const char *call_open, *call_close;
    const char *sep;
    bool ids; /* Kimi's: the name is read off the call's id */
    const param_form *params;
} call_section;

static const call_section SECTIONS[] = {
    {CORRAL_CALLS_DEEPSEEK, DS_CALLS_END, DS_CALL_BEGIN, DS_CALL_END, DS_SEP, false, NULL},
    {CORRAL_CALLS_DEEPSEEK_FENCED, DS_CALLS_END, DS_CALL_BEGIN, DS_CALL_END, DS_SEP, false,
     NULL},
    {CORRAL_CALLS_KIMI, KIMI_SECTION_END, KIMI_CALL_BEGIN, KIMI_CALL_END, KIMI_ARGS, true, NULL},
    {CORRAL_CALLS_MINIMAX, NULL, "<invoke name=\"", "</invoke>", NULL, false, &MINIMAX_PARAMS},
    {CORRAL_CALLS_DSML, NULL, "<" DSML "invoke name=\"", "</" DSML "invoke>", NULL, false,
     &DSML_PARAMS},
    {CORRAL_CALLS_MINIMAX_M3, M3_NS "</tool_call>", M3_NS "<invoke name=\"", M3_NS "</invoke>",
     NULL, false, &M3_PARAMS},
    {CORRAL_CALLS_GLIMMER, ATEM_CLOSE, "<atem:invoke name=\"", "</atem:invoke>", NULL, false,
     &ATEM_PARAMS},
};

/* The calls of a section syntax's block in[0..n) (the text between its tags) appended to
 * found; false when it holds something else, or no call. */
static bool section_calls(corral_output_parser *p, const call_section *sec, const char *in,
                          size_t n, json_t *found)
{
    const char *c = in, *stop = in + n;
    size_t open_len = strlen(sec->call_open), before = json_array_size(found);
    for (;;) {
        size_t left = (size_t)(stop - c), lead = 0;
        while (lead < left && isspace((unsigned char)c[lead]))
            lead++;
        if (lead == left)
            return json_array_size(found) > before;
        if (left - lead < open_len || memcmp(c + lead, sec->call_open, open_len) != 0)
            return false;
        const char *body = c + lead + open_len;
        const char *call_end = find_tag(body, (size_t)(stop - body), sec->call_close);
        if (!call_end)
            return false;
        size_t body_len = (size_t)(call_end - body), index = p->n_calls + json_array_size(found);
        json_t *call =
            sec->syntax == CORRAL_CALLS_DEEPSEEK_FENCED
                ? fenced_json_call(body, body_len, sec->sep, index)
            : sec->sep ? name_json_call(body, body_len, sec->sep, sec->ids, index)
                       : invoke_call(p, body, body_len, sec->params, index);
        if (!call)
            return false;
        json_array_append_new(found, call);
        c = call_end + strlen(sec->call_close);
    }
}

/* The tag that ends a block of Python-like calls opened by open: LFM2's <|..._start|> ends
 * with <|..._end|>, another tag <X> with </X>. */
static void python_close(const corral_output_tags *tags, char *close, size_t size)
{
    const char *open = tags->tool_open;
    static const char start[] = "_start|>";
    size_t n = strlen(open), k = sizeof start - 1;
    if (n > k && strcmp(open + n - k, start) == 0)
        snprintf(close, size, "%.*s_end|>", (int)(n - k), open);
    else
        snprintf(close, size, "</%s", open[0] == '<' ? open + 1 : open);
}

/* One of Cohere's action objects, {"tool_call_id", "tool_name", "parameters"}, appended to
 * found as a call when it is one: it names a tool and its parameters are an object. */
static void cohere_call(corral_output_parser *p, const json_t *item, json_t *found)
{
    json_t *name = json_object_get(item, "tool_name");
    json_t *args = json_object_get(item, "parameters");
    if (!json_is_string(name) || (args && !json_is_object(args) && !json_is_null(args)))
        return;
    json_t *call = make_call(json_string_value(name), json_string_length(name),
                             json_is_object(args) ? json_incref(args) : json_object(),
                             p->n_calls + json_array_size(found));
    if (call)
        json_array_append_new(found, call);
}

/*
 * Cohere's action, the inside of <|START_ACTION|>...<|END_ACTION|>: a JSON array of action
 * objects, the calls appended to found; false when it holds no call. Each object is read on
 * its own, as ollama's cohere parser recovers a malformed array (a comma missing between
 * objects, a value that is not JSON): a balanced top-level {...} (braces inside strings
 * passed over) that reads as a call is one, any other is passed over, so one bad call does
 * not drop the others.
 */
static bool cohere_calls(corral_output_parser *p, const char *s, size_t n, json_t *found)
{
    size_t before = json_array_size(found), depth = 0, start = 0;
    bool in_string = false, escaped = false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (escaped) {
            escaped = false;
        } else if (in_string) {
            escaped = c == '\\';
            in_string = c != '"';
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' && depth++ == 0) {
            start = i;
        } else if (c == '}' && depth > 0 && --depth == 0) {
            json_t *item = json_loadb(s + start, i + 1 - start, 0, NULL);
            if (item)
                cohere_call(p, item, found);
            json_decref(item);
        }
    }
    return json_array_size(found) > before;
}

/* A Glimmer message's body s[0..n) as calls: one ATEM block, each invoke naming a declared
 * tool (written there as the header addresses it, when the header named one), the calls
 * appended to found under the tools' own names; false when it is not that. */
static bool glimmer_calls(corral_output_parser *p, const char *s, size_t n, json_t *found)
{
    size_t open = sizeof ATEM_OPEN - 1, close = sizeof ATEM_CLOSE - 1;
    s = trim(s, &n);
    if (n < open + close || memcmp(s, ATEM_OPEN, open) != 0 ||
        memcmp(s + n - close, ATEM_CLOSE, close) != 0)
        return false;
    const call_section *sec = SECTIONS;
    while (sec->syntax != CORRAL_CALLS_GLIMMER)
        sec++;
    size_t before = json_array_size(found);
    if (!section_calls(p, sec, s + open, n - open - close, found))
        return false;
    const char *to = declared_tool(p->tools, p->recipient, strlen(p->recipient));
    for (size_t i = before; i < json_array_size(found); i++) {
        json_t *fn = json_object_get(json_array_get(found, i), "function");
        json_t *name = json_object_get(fn, "name");
        const char *tool =
            declared_tool(p->tools, json_string_value(name), json_string_length(name));
        if (!tool || (to && strcmp(tool, to) != 0) ||
            json_object_set_new(fn, "name", json_string(tool)) != 0)
            return false;
    }
    return true;
}

/* One block of calls at the start of b: *used the bytes it took (its tags included), the
 * calls appended to found. 1: done; 0: not calls; -1: incomplete (more text may finish it,
 * final false: the answer goes on). */
static int tagged_block(corral_output_parser *p, const tbuf *b, size_t at, bool final,
                        json_t *found, size_t *used)
{
    const char *s = b->data + at, *end = b->data + b->len;
    size_t n = (size_t)(end - s);
    size_t open_len = strlen(p->tags.tool_open);
    if (n < open_len)
        return memcmp(s, p->tags.tool_open, n) == 0 ? -1 : 0;
    if (memcmp(s, p->tags.tool_open, open_len) != 0)
        return 0;
    const char *in = s + open_len;
    switch (p->tags.calls) {
    case CORRAL_CALLS_XML_FUNCTION:
    case CORRAL_CALLS_ARG_PAIRS: {
        static const char close[] = "</tool_call>";
        const char *stop = find_tag(in, (size_t)(end - in), close);
        if (!stop)
            return -1;
        size_t inner = (size_t)(stop - in), index = p->n_calls + json_array_size(found);
        json_t *call = p->tags.calls == CORRAL_CALLS_XML_FUNCTION
                           ? xml_function_call(p, in, inner, index)
                           : arg_pairs_call(p, in, inner, index);
        if (!call)
            return 0;
        json_array_append_new(found, call);
        *used = (size_t)(stop - s) + sizeof close - 1;
        return 1;
    }
    case CORRAL_CALLS_DEEPSEEK:
    case CORRAL_CALLS_DEEPSEEK_FENCED:
    case CORRAL_CALLS_KIMI:
    case CORRAL_CALLS_MINIMAX:
    case CORRAL_CALLS_DSML:
    case CORRAL_CALLS_MINIMAX_M3: {
        const call_section *sec = SECTIONS;
        while (sec->syntax != p->tags.calls)
            sec++;
        char close[sizeof p->tags.tool_open + 1] = "</";
        if (sec->close)
            strcpy(close, sec->close);
        else
            strcat(close, p->tags.tool_open + 1);
        const char *stop = find_tag(in, (size_t)(end - in), close);
        if (!stop)
            return -1;
        if (!section_calls(p, sec, in, (size_t)(stop - in), found))
            return 0;
        *used = (size_t)(stop - s) + strlen(close);
        return 1;
    }
    case CORRAL_CALLS_PYTHON: {
        char close[sizeof p->tags.tool_open + 2];
        python_close(&p->tags, close, sizeof close);
        const char *stop = find_tag(in, (size_t)(end - in), close);
        if (!stop)
            return -1;
        if (!python_calls_read(in, (size_t)(stop - in), p->n_calls + json_array_size(found),
                               found))
            return 0;
        *used = (size_t)(stop - s) + strlen(close);
        return 1;
    }
    case CORRAL_CALLS_COHERE: {
        static const char close[] = "<|END_ACTION|>";
        const char *stop = find_tag(in, (size_t)(end - in), close);
        if (!stop && !final)
            return -1;
        /* an action the answer's end cut off keeps its whole calls, as ollama's parser does */
        if (!cohere_calls(p, in, (size_t)((stop ? stop : end) - in), found))
            return 0;
        *used = stop ? (size_t)(stop - s) + sizeof close - 1 : n;
        return 1;
    }
    case CORRAL_CALLS_GEMMA4:
    case CORRAL_CALLS_FUNCTIONGEMMA: {
        bool g4 = p->tags.calls == CORRAL_CALLS_GEMMA4;
        const char *close = g4 ? "<tool_call|>" : "<end_function_call>";
        const char *stop = find_tag(in, (size_t)(end - in), close);
        if (!stop)
            return -1;
        json_t *call = gemma4_call(in, (size_t)(stop - in), g4 ? "<|\"|>" : "<escape>",
                                   p->n_calls + json_array_size(found));
        if (!call)
            return 0;
        json_array_append_new(found, call);
        *used = (size_t)(stop - s) + strlen(close);
        return 1;
    }
    case CORRAL_CALLS_NAME_ARGS: {
        static const char args_tag[] = "[ARGS]";
        const char *tag = find_tag(in, (size_t)(end - in), args_tag);
        if (!tag)
            return (size_t)(end - in) > 256 ? 0 : -1; /* a name is short */
        const char *json = tag + sizeof args_tag - 1;
        json_error_t jerr;
        json_t *args = json_loadb(json, (size_t)(end - json), JSON_DISABLE_EOF_CHECK, &jerr);
        if (!args)
            return jerr.position >= (int)(end - json) - 1 ? -1 : 0;
        if (!json_is_object(args)) {
            json_decref(args);
            return 0;
        }
        json_t *call =
            make_call(in, (size_t)(tag - in), args, p->n_calls + json_array_size(found));
        if (!call)
            return 0;
        json_array_append_new(found, call);
        *used = (size_t)(json - s) + (size_t)jerr.position;
        return 1;
    }
    case CORRAL_CALLS_JSON:
    case CORRAL_CALLS_GLIMMER: /* read by message (glimmer_header, glimmer_body) */
        break;
    }
    return 0;
}

/* parse_tools for the tagged syntaxes: each complete block of calls taken off the held text;
 * false when the held text is not calls (the rest is content), *wait when it may still be. */
static bool parse_tagged_tools(corral_output_parser *p, bool final, bool *wait)
{
    tbuf *b = &p->pending;
    *wait = false;
    for (;;) {
        size_t i = skip_space(b, 0);
        if (i == b->len) {
            *wait = !final && i > 0;
            return !final || i == 0 || p->n_calls > 0;
        }
        json_t *found = json_array();
        size_t used = 0;
        int got = found ? tagged_block(p, b, i, final, found, &used) : 0;
        if (got == 1) {
            p->n_calls += json_array_size(found);
            json_array_extend(p->calls, found);
            json_decref(found);
            consume(b, i + used);
            continue;
        }
        json_decref(found);
        *wait = got < 0 && !final;
        return *wait;
    }
}

/* The marks an answer in the syntax wraps its text in, which are not content (Cohere's, the
 * older Command models' and the end of the turn, should it come through), NULL-ended; NULL
 * when it has none. */
static const char *const *content_marks(corral_call_syntax calls)
{
    static const char *const cohere[] = {"<|START_TEXT|>",     "<|END_TEXT|>",
                                         "<|START_RESPONSE|>", "<|END_RESPONSE|>",
                                         "<|END_OF_TURN_TOKEN|>", NULL};
    return calls == CORRAL_CALLS_COHERE ? cohere : NULL;
}

/* Content in a syntax with marks, up to the first of them or tag (NULL: none): a mark is
 * dropped, the text before either emitted, what may yet become one held. 1: tag starts the
 * held text; 0: all else taken; -1: failed (err set). */
static int content_until(corral_output_parser *p, const char *tag, bool final, corral_error *err)
{
    const char *const *marks = content_marks(p->tags.calls);
    tbuf *b = &p->pending;
    for (;;) {
        const char *data = b->data ? b->data : "";
        size_t first = b->len, mark_len = 0;
        const char *hit = tag && *tag ? memmem(data, b->len, tag, strlen(tag)) : NULL;
        if (hit)
            first = (size_t)(hit - data);
        for (size_t i = 0; marks[i]; i++) {
            hit = memmem(data, first, marks[i], strlen(marks[i]));
            if (hit) {
                first = (size_t)(hit - data);
                mark_len = strlen(marks[i]);
            }
        }
        if (first < b->len) {
            if (!emit(p, &p->content, first, err))
                return -1;
            if (!mark_len)
                return 1;
            consume(b, mark_len);
            continue;
        }
        size_t keep = 0;
        for (size_t i = 0; !final && marks[i]; i++) {
            size_t k = partial_tag(data, b->len, marks[i]);
            keep = k > keep ? k : keep;
        }
        size_t k = !final && tag ? partial_tag(data, b->len, tag) : 0;
        keep = k > keep ? k : keep;
        return emit(p, &p->content, b->len - keep, err) ? 0 : -1;
    }
}

/* ---- GLIMMER: the answer as messages ---- */

static const char G_ASSISTANT[] = "<|start|>assistant";
static const char *const G_ENDS[] = {"<|eom|>", "<|eot|>", G_ASSISTANT};

/* At the start of a message: its header read (the assistant's start, once written whole, taken
 * off first), or the message found to have none (a body of content). False to wait. */
static bool glimmer_header(corral_output_parser *p, bool final)
{
    tbuf *b = &p->pending;
    size_t start = sizeof G_ASSISTANT - 1, msg = sizeof G_MESSAGE - 1;
    if (b->len >= start && !memcmp(b->data, G_ASSISTANT, start))
        consume(b, start);
    else if (!final && b->len < start && !memcmp(b->data, G_ASSISTANT, b->len))
        return false;
    /* [space] [to=RECIPIENT] [space] <|message|>, the recipient without space or '<' */
    const char *s = b->data ? b->data : "", *end = s + b->len, *at = s;
    while (at < end && isspace((unsigned char)*at))
        at++;
    const char *to = at, *name = at;
    if ((size_t)(end - at) >= 3 && !memcmp(at, "to=", 3)) {
        name = at += 3;
        while (at < end && *at != '<' && !isspace((unsigned char)*at))
            at++;
    } else if (!final && (size_t)(end - at) < 3 && !memcmp(at, "to=", (size_t)(end - at)))
        return false;
    size_t name_len = to == name ? 0 : (size_t)(at - name);
    while (at < end && isspace((unsigned char)*at))
        at++;
    size_t left = (size_t)(end - at);
    p->body_emitted = false;
    if (name_len < sizeof p->recipient && left >= msg && !memcmp(at, G_MESSAGE, msg)) {
        memcpy(p->recipient, name, name_len);
        p->recipient[name_len] = '\0';
        consume(b, (size_t)(at - s) + msg);
        bool tools = p->tags.tool_open[0] != '\0';
        p->body = !strcmp(p->recipient, "self") ? BODY_THINKING
                  : tools && declared_tool(p->tools, p->recipient, name_len) ? BODY_CALL
                                                                              : BODY_CONTENT;
        p->state = OUT_BODY;
        return true;
    }
    if (!final && name_len < sizeof p->recipient && left < msg && !memcmp(at, G_MESSAGE, left))
        return false; /* may still be a header */
    p->recipient[0] = '\0';
    p->body = BODY_CONTENT;
    p->state = OUT_BODY;
    return true;
}

/* A message's body: thinking (dropped when thinking is off) and content go out as they come,
 * calls once the body ends; a content body that opens with a call block (a call the model
 * did not address) is held like one. A held body that does not read as calls is content.
 * A held body that opens with the block ends at the first end mark after the block's close,
 * as ollama's parser reads it: a value may hold the marks' text.
 * *ended: the body ended (the next message's header is up). False on failure. */
static bool glimmer_body(corral_output_parser *p, bool final, bool *ended, corral_error *err)
{
    tbuf *b = &p->pending;
    const char *data = b->data ? b->data : "";
    size_t ws = 0;
    while (ws < b->len && isspace((unsigned char)data[ws]))
        ws++;
    size_t open = sizeof ATEM_OPEN - 1, left = b->len - ws;
    bool opens = left >= open && !memcmp(data + ws, ATEM_OPEN, open);
    bool may_open = left < open && !memcmp(data + ws, ATEM_OPEN, left);
    bool held = p->body == BODY_CALL || (p->body == BODY_CONTENT && p->tags.tool_open[0] &&
                                         !p->body_emitted && (opens || may_open));
    size_t from = 0; /* where the end marks are looked for */
    if (held && opens) {
        const char *close = memmem(data + ws + open, left - open, ATEM_CLOSE,
                                   sizeof ATEM_CLOSE - 1);
        from = close ? (size_t)(close - data) + sizeof ATEM_CLOSE - 1 : b->len;
    }
    size_t end = b->len, end_len = 0;
    for (size_t i = 0; i < sizeof G_ENDS / sizeof *G_ENDS; i++) {
        const char *hit = memmem(data + from, end - from, G_ENDS[i], strlen(G_ENDS[i]));
        if (hit) {
            end = (size_t)(hit - data);
            end_len = G_ENDS[i] == G_ASSISTANT ? 0 : strlen(G_ENDS[i]);
        }
    }
    bool done = *ended = end < b->len || final;
    held = held && (p->body == BODY_CALL || opens || !done);
    if (held && !done)
        return true;
    size_t n = end;
    if (held) {
        json_t *found = json_array();
        if (!found) {
            corral_error_set(err, "out of memory");
            return false;
        }
        bool calls = glimmer_calls(p, data, end, found);
        if (calls) {
            p->n_calls += json_array_size(found);
            json_array_extend(p->calls, found);
            n = 0;
            consume(b, end);
        }
        json_decref(found);
    } else if (!done) {
        size_t keep = 0;
        for (size_t i = 0; i < sizeof G_ENDS / sizeof *G_ENDS; i++) {
            size_t k = partial_tag(data, b->len, G_ENDS[i]);
            keep = k > keep ? k : keep;
        }
        n = b->len - keep;
    }
    if (p->body == BODY_THINKING && !p->tags.think_open[0])
        consume(b, n);
    else if (!emit(p, p->body == BODY_THINKING ? &p->thinking : &p->content, n, err))
        return false;
    if (p->body != BODY_THINKING && n)
        p->body_emitted = true;
    if (done) {
        consume(b, end_len);
        p->state = OUT_HEADER;
    }
    return true;
}

static bool step(corral_output_parser *p, bool final, corral_error *err)
{
    const corral_output_tags *t = &p->tags;
    for (;;) {
        tbuf *b = &p->pending;
        switch (p->state) {
        case OUT_START: {
            size_t ws = leading_space(b), left = b->len - ws;
            size_t open_len = strlen(t->think_open), close_len = strlen(t->think_close);
            if (open_len && left >= open_len && !memcmp(b->data + ws, t->think_open, open_len)) {
                consume(b, ws + open_len);
                p->state = OUT_THINKING_START;
                continue;
            }
            /* an answer that closes the thinking it never opened (MiniMax M3's without
             * thinking, as its template writes them): the tag is not content */
            if (open_len && close_len && left >= close_len &&
                !memcmp(b->data + ws, t->think_close, close_len)) {
                consume(b, ws + close_len);
                p->state = OUT_AFTER_THINKING;
                continue;
            }
            if (open_len && !final &&
                (left == 0 ||
                 (left < open_len && !memcmp(b->data + ws, t->think_open, left)) ||
                 (left < close_len && !memcmp(b->data + ws, t->think_close, left))))
                return true; /* could still be either tag */
            p->state = OUT_CONTENT;
            continue;
        }
        case OUT_THINKING_START: /* thinking starts at its first word, as in ollama */
            consume(b, leading_space(b));
            if (b->len == 0 && !final)
                return true;
            p->state = OUT_THINKING;
            continue;
        case OUT_THINKING: {
            /* whitespace before the closing tag is not thinking: held until text follows */
            const char *close = t->think_close;
            const char *data = b->data ? b->data : "";
            char *hit = *close ? memmem(data, b->len, close, strlen(close)) : NULL;
            const char *tool = t->tool_ends_thinking ? t->tool_open : "";
            char *call = *tool ? memmem(data, b->len, tool, strlen(tool)) : NULL;
            if (call && (!hit || call < hit)) { /* the call is content's to parse, tag and all */
                size_t n = (size_t)(call - b->data), ws = trailing_space(b->data, n);
                if (!emit(p, &p->thinking, n - ws, err))
                    return false;
                consume(b, ws);
                p->state = OUT_CONTENT;
                continue;
            }
            if (hit) {
                size_t n = (size_t)(hit - b->data), ws = trailing_space(b->data, n);
                if (!emit(p, &p->thinking, n - ws, err))
                    return false;
                consume(b, ws + strlen(close));
                p->state = OUT_AFTER_THINKING;
                continue;
            }
            size_t keep = final ? 0 : partial_tag(b->data, b->len, close);
            size_t keep_tool = final ? 0 : partial_tag(b->data, b->len, tool);
            if (keep_tool > keep)
                keep = keep_tool;
            size_t ws = trailing_space(b->data, b->len - keep);
            if (!emit(p, &p->thinking, b->len - keep - ws, err))
                return false;
            if (final)
                consume(b, b->len);
            return true;
        }
        case OUT_AFTER_THINKING: {
            size_t ws = leading_space(b);
            consume(b, ws);
            if (b->len == 0 && !final)
                return true;
            p->state = OUT_CONTENT;
            continue;
        }
        case OUT_CONTENT: {
            const char *tag = t->tool_open;
            if (content_marks(t->calls)) {
                int got = content_until(p, tag, final, err);
                if (got <= 0)
                    return got == 0;
                p->state = OUT_TOOLS;
                continue;
            }
            if (!*tag)
                return emit(p, &p->content, b->len, err);
            if (tool_tag_is_json(p)) {
                size_t ws = leading_space(b);
                if (!p->emitted_content && ws < b->len && b->data[ws] == tag[0]) {
                    p->state = OUT_TOOLS;
                    continue;
                }
                if (!p->emitted_content && ws == b->len && !final)
                    return true;
                return emit(p, &p->content, b->len, err);
            }
            char *hit = memmem(b->data ? b->data : "", b->len, tag, strlen(tag));
            if (hit) {
                if (!emit(p, &p->content, (size_t)(hit - b->data), err))
                    return false;
                p->state = OUT_TOOLS;
                continue;
            }
            size_t keep = final ? 0 : partial_tag(b->data, b->len, tag);
            return emit(p, &p->content, b->len - keep, err);
        }
        case OUT_TOOLS: {
            bool wait;
            bool calls = t->calls == CORRAL_CALLS_JSON ? parse_tools(p, final, &wait)
                                                       : parse_tagged_tools(p, final, &wait);
            if (calls || wait)
                return true;
            p->state = OUT_CONTENT_ONLY; /* not tool calls after all: the rest is content */
            continue;
        }
        case OUT_CONTENT_ONLY:
            if (content_marks(t->calls))
                return content_until(p, NULL, final, err) >= 0;
            return emit(p, &p->content, b->len, err);
        case OUT_HEADER:
            if (b->len == 0 || !glimmer_header(p, final))
                return true;
            continue;
        case OUT_BODY: {
            bool ended;
            if (!glimmer_body(p, final, &ended, err))
                return false;
            if (!ended)
                return true;
            continue;
        }
        }
    }
}

bool corral_output_parser_feed(corral_output_parser *p, const char *chunk, size_t n, bool final,
                               corral_output_delta *delta, corral_error *err)
{
    if (p->harmony)
        return harmony_parser_feed(p->harmony, chunk, n, final, delta, err);
    p->content.len = p->thinking.len = 0;
    json_array_clear(p->calls);
    if (n && !tbuf_append(&p->pending, chunk, n)) {
        corral_error_set(err, "model output exceeds %zu bytes", p->max_bytes);
        return false;
    }
    if (!tbuf_append(&p->pending, "", 0) || !tbuf_append(&p->content, "", 0) ||
        !tbuf_append(&p->thinking, "", 0)) {
        corral_error_set(err, "out of memory");
        return false;
    }
    if (!step(p, final, err))
        return false;
    delta->content = p->content.data;
    delta->content_len = p->content.len;
    delta->thinking = p->thinking.data;
    delta->thinking_len = p->thinking.len;
    delta->tool_calls = p->calls;
    return true;
}

/* ---- tags from a Go template ---- */

static bool pipe_is_field(const go_pipe *pipe, const char *field)
{
    for (size_t c = 0; c < pipe->n_cmds; c++)
        for (size_t a = 0; a < pipe->cmds[c]->n_args; a++) {
            const go_arg *arg = pipe->cmds[c]->args[a];
            if (arg->n_fields && !strcmp(arg->fields[arg->n_fields - 1], field))
                return true;
        }
    return false;
}

static const go_node *first_text(const go_list *list)
{
    for (size_t i = 0; i < list->n; i++) {
        const go_node *n = list->items[i];
        if (n->kind == GO_NODE_TEXT)
            return n;
        const go_node *inner = first_text(&n->body);
        if (inner)
            return inner;
    }
    return NULL;
}

static const go_node *find_if_field(const go_list *list, const char *field)
{
    for (size_t i = 0; i < list->n; i++) {
        const go_node *n = list->items[i];
        if (n->kind == GO_NODE_IF && pipe_is_field(n->pipe, field))
            return n;
        const go_node *inner = find_if_field(&n->body, field);
        if (!inner)
            inner = find_if_field(&n->else_body, field);
        if (inner)
            return inner;
    }
    return NULL;
}

static void copy_trimmed(char *dst, size_t size, const char *s, size_t n, bool last_word)
{
    while (n && isspace((unsigned char)s[0]))
        s++, n--;
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    size_t start = 0, end = n;
    for (size_t i = 0; i < n; i++)
        if (isspace((unsigned char)s[i])) {
            if (last_word)
                start = i + 1;
            else if (end == n)
                end = i;
        }
    n = end > start ? end - start : 0;
    if (n >= size)
        n = 0;
    memcpy(dst, s + start, n);
    dst[n] = '\0';
}

/* The texts just before and after {{ .Thinking }} inside a range over .Messages. */
static bool find_thinking(const go_list *list, bool in_messages, corral_output_tags *tags)
{
    for (size_t i = 0; i < list->n; i++) {
        const go_node *n = list->items[i];
        if (in_messages && n->kind == GO_NODE_ACTION && pipe_is_field(n->pipe, "Thinking")) {
            const go_node *before =
                i > 0 && list->items[i - 1]->kind == GO_NODE_TEXT ? list->items[i - 1] : NULL;
            const go_node *after = i + 1 < list->n && list->items[i + 1]->kind == GO_NODE_TEXT
                                       ? list->items[i + 1]
                                       : NULL;
            if (!before || !after)
                continue;
            copy_trimmed(tags->think_open, sizeof tags->think_open, before->text, before->text_len,
                         true);
            copy_trimmed(tags->think_close, sizeof tags->think_close, after->text, after->text_len,
                         false);
            if (tags->think_open[0] && tags->think_close[0])
                return true;
            tags->think_open[0] = tags->think_close[0] = '\0';
            continue;
        }
        bool messages =
            in_messages || (n->kind == GO_NODE_RANGE && pipe_is_field(n->pipe, "Messages"));
        if (find_thinking(&n->body, messages, tags) || find_thinking(&n->else_body, messages, tags))
            return true;
    }
    return false;
}

static bool contains(const char *src, size_t len, const char *needle)
{
    return memmem(src, len, needle, strlen(needle)) != NULL;
}

/* The key of a call's arguments among texts the template writes: the first of "arguments"
 * and "parameters" (quoted, as the template writes JSON keys) found, into tags. */
static void find_arguments_key(const char *text, size_t len, corral_output_tags *tags)
{
    const char *arguments = memmem(text, len, "\"arguments\"", 11);
    const char *parameters = memmem(text, len, "\"parameters\"", 12);
    if (parameters && (!arguments || parameters < arguments))
        strcpy(tags->tool_arguments, "parameters");
    else if (arguments)
        strcpy(tags->tool_arguments, "arguments");
}

/* The same among the texts of a Go template's nodes (those of the calls it writes). */
static bool find_arguments_key_go(const go_list *list, corral_output_tags *tags)
{
    for (size_t i = 0; i < list->n && !tags->tool_arguments[0]; i++) {
        const go_node *n = list->items[i];
        if (n->kind == GO_NODE_TEXT)
            find_arguments_key(n->text, n->text_len, tags);
        else if (!find_arguments_key_go(&n->body, tags))
            find_arguments_key_go(&n->else_body, tags);
    }
    return tags->tool_arguments[0] != '\0';
}

bool corral_output_framed(corral_call_syntax calls)
{
    return calls == CORRAL_CALLS_COHERE || calls == CORRAL_CALLS_GLIMMER;
}

corral_call_syntax corral_template_call_syntax(const char *src, size_t len, char *tool_open)
{
    static const struct {
        const char *marker, *also, *open;
        corral_call_syntax syntax;
    } syntaxes[] = {
        {"<function=", "<parameter=", "<tool_call>", CORRAL_CALLS_XML_FUNCTION},
        {"<arg_key>", "<arg_value>", "<tool_call>", CORRAL_CALLS_ARG_PAIRS},
        /* DeepSeek V3's and R1's templates fence the arguments, V3.1's do not */
        {DS_CALL_BEGIN, "```json", DS_CALLS_BEGIN, CORRAL_CALLS_DEEPSEEK_FENCED},
        {DS_CALL_BEGIN, DS_SEP, DS_CALLS_BEGIN, CORRAL_CALLS_DEEPSEEK},
        {"[ARGS]", "[TOOL_CALLS]", "[TOOL_CALLS]", CORRAL_CALLS_NAME_ARGS},
        {"<|tool_call>call:", "<tool_call|>", "<|tool_call>", CORRAL_CALLS_GEMMA4},
        {"<start_function_call>call:", "<escape>", "<start_function_call>",
         CORRAL_CALLS_FUNCTIONGEMMA},
        {KIMI_CALL_BEGIN, KIMI_ARGS, KIMI_SECTION_BEGIN, CORRAL_CALLS_KIMI},
        {"<minimax:tool_call>", "<invoke name=", "<minimax:tool_call>", CORRAL_CALLS_MINIMAX},
        {M3_NS, "<invoke name=", M3_NS "<tool_call>", CORRAL_CALLS_MINIMAX_M3},
        /* Command R7B's, Command A's and North's action blocks */
        {"<|START_ACTION|>", "tool_name", "<|START_ACTION|>", CORRAL_CALLS_COHERE},
        /* LFM2.5's list of Python-like calls */
        {"<|tool_call_start|>", "<|tool_call_end|>", "<|tool_call_start|>", CORRAL_CALLS_PYTHON},
        /* DeepSeek V3.2 builds its tags from a variable: the block is function_calls, or in
         * V4's template (which has no function_calls) tool_calls, as llama.cpp tells them */
        {DSML, "invoke name=", NULL, CORRAL_CALLS_DSML},
    };
    for (size_t i = 0; i < sizeof syntaxes / sizeof syntaxes[0]; i++)
        if (contains(src, len, syntaxes[i].marker) && contains(src, len, syntaxes[i].also)) {
            const char *open = syntaxes[i].open;
            if (!open)
                open = contains(src, len, "function_calls") ? "<" DSML "function_calls>"
                                                            : "<" DSML "tool_calls>";
            strcpy(tool_open, open);
            return syntaxes[i].syntax;
        }
    return CORRAL_CALLS_JSON;
}

void corral_template_jinja_output_tags(const char *src, size_t len, corral_output_tags *tags)
{
    static const char *const think_pairs[][2] = {
        {"<think>", "</think>"},
        {"<|channel>", "<channel|>"},
        {"<|START_THINKING|>", "<|END_THINKING|>"},
        {"<seed:think>", "</seed:think>"},
        {"<mm:think>", "</mm:think>"},
    };
    static const char *const tool_tags[] = {"<tool_call>", "[TOOL_CALLS]"};
    memset(tags, 0, sizeof *tags);
    char split[64];
    for (size_t i = 0; i < sizeof think_pairs / sizeof think_pairs[0] && !tags->think_open[0];
         i++) {
        const char *open = think_pairs[i][0], *close = think_pairs[i][1];
        bool found = contains(src, len, open) && contains(src, len, close);
        snprintf(split, sizeof split, "content.split('%s')", close);
        found = found || contains(src, len, split);
        snprintf(split, sizeof split, "content.split(\"%s\")", close);
        if (found || contains(src, len, split)) {
            strcpy(tags->think_open, open);
            strcpy(tags->think_close, close);
        }
    }
    find_arguments_key(src, len, tags);
    strcpy(tags->tool_open, "{");
    for (size_t i = 0; i < sizeof tool_tags / sizeof tool_tags[0]; i++)
        if (contains(src, len, tool_tags[i])) {
            strcpy(tags->tool_open, tool_tags[i]);
            break;
        }
    tags->calls = corral_template_call_syntax(src, len, tags->tool_open);
    tags->tool_ends_thinking = strcmp(tags->think_open, "<think>") == 0 &&
                               strcmp(tags->tool_open, "<tool_call>") == 0 &&
                               tags->calls == CORRAL_CALLS_XML_FUNCTION;
}

/* Every text node under list, in order, appended to out (where a call's shape shows). */
static bool append_texts(const go_list *list, tbuf *out)
{
    for (size_t i = 0; i < list->n; i++) {
        const go_node *n = list->items[i];
        if (n->kind == GO_NODE_TEXT && !tbuf_append(out, n->text, n->text_len))
            return false;
        if (!append_texts(&n->body, out) || !append_texts(&n->else_body, out))
            return false;
    }
    return tbuf_append(out, "", 0);
}

void corral_template_output_tags(const corral_template *tmpl, corral_output_tags *tags)
{
    memset(tags, 0, sizeof *tags);
    const go_tree *tree = corral_template_go_tree(tmpl);
    if (!tree) {
        const jinja_tree *jinja = corral_template_jinja_tree(tmpl);
        corral_template_jinja_output_tags(jinja_tree_source(jinja), jinja_tree_source_len(jinja),
                                          tags);
        return;
    }
    strcpy(tags->tool_open, "{");
    const go_node *tool_if = find_if_field(&tree->root, "ToolCalls");
    const go_node *text = tool_if ? first_text(&tool_if->body) : NULL;
    if (text) {
        const char *brace = memchr(text->text, '{', text->text_len);
        size_t n = brace ? (size_t)(brace - text->text) : text->text_len;
        char tag[sizeof tags->tool_open];
        const char *s = text->text;
        while (n && isspace((unsigned char)*s))
            s++, n--;
        while (n && isspace((unsigned char)s[n - 1]))
            n--;
        if (n && n < sizeof tag) {
            memcpy(tag, s, n);
            tag[n] = '\0';
            strcpy(tags->tool_open, tag);
        }
    }
    if (tool_if) {
        find_arguments_key_go(&tool_if->body, tags);
        tbuf text;
        tbuf_init(&text, 1 << 20);
        if (append_texts(&tool_if->body, &text))
            tags->calls = corral_template_call_syntax(text.data, text.len, tags->tool_open);
        tbuf_free(&text);
    }
    find_thinking(&tree->root, false, tags);
}

/*
 * `format` to GBNF (format_grammar.h). A schema becomes one rule per node, written to a
 * memory stream as it is visited: objects as chains of rules that keep the commas right
 * whichever optional properties are present, arrays as bounded repetitions, enums and
 * consts as literals, anyOf / oneOf / type lists as alternatives, local $refs as rules of
 * their own (so they may recurse, though never before a `{` or `[`: the grammar would be left
 * recursive). Values never end in whitespace; containers put `space` where JSON allows it.
 * The same builder writes values in the dialects a forced tool call needs inside a family's
 * call syntax (format_grammar.h, tool_grammar.c), and free text held to limits as the rules
 * of an automaton (format_builder_text).
 */
#include <assert.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/core/format_grammar.h"

/*
 * Limits: schema nesting; repetition counts (the grammar parser's own limit); properties of
 * one object (the grammar engine follows at most 4096 rules from one character to the next,
 * and skipping an absent optional property costs two of them).
 */
enum { MAX_DEPTH = 64, MAX_COUNT = 4096, MAX_PROPERTIES = 1000 };

/* The shared rules, each written once when first used. */
static const char *const primitive_rules[] = {
    "space ::= | \" \" | \"\\n\" [ \\t]{0,20}\n",
    "char ::= [^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n",
    "string ::= \"\\\"\" char* \"\\\"\"\n",
    "integral-part ::= [0] | [1-9] [0-9]{0,15}\n",
    "integer ::= \"-\"? integral-part\n",
    "number ::= \"-\"? integral-part (\".\" [0-9]{1,16})? ([eE] [-+]? integral-part)?\n",
    "boolean ::= \"true\" | \"false\"\n",
    "null ::= \"null\"\n",
    "value ::= object | array | string | number | boolean | null\n",
    ("object ::= \"{\" space (string space \":\" space value space (\",\" space string space "
     "\":\" space value space)*)? \"}\"\n"),
    "array ::= \"[\" space (value space (\",\" space value space)*)? \"]\"\n",
};
enum { N_PRIMITIVES = sizeof primitive_rules / sizeof primitive_rules[0] };
static const char *const primitive_names[N_PRIMITIVES] = {
    "space", "char", "string", "integral-part", "integer", "number", "boolean", "null", "value",
    "object", "array",
};
/* What each primitive uses, by index into primitive_names (-1 ends). */
static const int primitive_uses[N_PRIMITIVES][6] = {
    {-1}, {-1}, {1, -1}, {-1}, {3, -1}, {3, -1}, {-1}, {-1}, {9, 10, 2, 5, 6, 7},
    {0, 2, 8, -1}, {0, 8, -1},
};

/* The primitives a dialect writes otherwise (format_grammar.h): by index, NULL where the same. */
static const char no_lt_char[] =
    "char ::= [^\"\\\\\\x7F\\x00-\\x1F<] | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n";
static const char short_number[] = "number ::= \"-\"? integral-part (\".\" [0-9]{1,16})? "
                                   "([eE] [-+]? [0-9]{1,2})?\n";
static const char *const no_lt_rules[N_PRIMITIVES] = {
    [1] = no_lt_char,
    [5] = short_number,
};
/* JSON's escapes, and those of them Python reads the same */
static const char json_escapes[] = "[\"\\\\/bfnrt]", python_escapes[] = "[\"\\\\nrt]";
static const char *const python_rules[N_PRIMITIVES] = {
    [1] = "char ::= [^\"\\\\\\x7F\\x00-\\x1F<] | [\\\\] ([\"\\\\nrt] | \"u\" [0-9a-fA-F]{4})\n",
    [5] = short_number,
};
/* Both Gemma dialects: their marks start with '<', which a bounded string never holds */
static const char *const gemma_rules[N_PRIMITIVES] = {
    [1] = "char ::= [^<\\x00]\n",
    [2] = "", /* string: written by primitive(), its text a rule of its own */
    [5] = short_number,
    [9] = ("object ::= \"{\" space (g4-key space \":\" space value space (\",\" space g4-key "
           "space \":\" space value space)*)? \"}\"\n"
           "g4-key ::= [^:,{}\\x5B\\x5D<\"\\x00-\\x20]+ | string\n"),
};

/* A Gemma dialect's mark around strings, and the texts its strings may not hold (the reader
 * would end the string, or the call, there): the mark and the call's end tag. */
typedef struct gemma_marks {
    const char *family;
    const char *quote;
    const char *avoid[3];
} gemma_marks;
static const gemma_marks gemma4_marks = {"Gemma 4", "<|\"|>", {"<|\"|>", "<tool_call|>", NULL}};
static const gemma_marks functiongemma_marks = {
    "FunctionGemma", "<escape>", {"<escape>", "<end_function_call>", NULL}};

typedef struct builder {
    FILE *out;
    char *text; /* what out writes, and its length */
    size_t len;
    format_dialect dialect;
    char lt_follower[8]; /* JSON_NO_LT: what a '<' in a string may not come before (each) */
    unsigned newlines;   /* in a row in JSON's whitespace; 0 for one, format's */
    const json_t *root;          /* for $refs */
    bool used[N_PRIMITIVES];
    unsigned n_rules;
    json_t *refs;                /* "$ref" -> its rule name */
    json_t *open_refs;           /* "$ref" being written -> `containers` when it was opened */
    int containers;              /* objects and arrays entered: text has been matched since */
    corral_error *err;
    bool failed;
} builder;

static bool fail(builder *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool fail_va(builder *b, const char *fmt, va_list ap)
{
    if (!b->failed) {
        char message[CORRAL_ERROR_MAX];
        vsnprintf(message, sizeof message, fmt, ap);
        corral_error_set(b->err, "format: %s", message);
    }
    b->failed = true;
    return false;
}

static bool fail(builder *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_va(b, fmt, ap);
    va_end(ap);
    return false;
}

/* The marks of a Gemma dialect; NULL for the others. */
static const gemma_marks *gemma_of(const builder *b)
{
    return b->dialect == FORMAT_GEMMA4          ? &gemma4_marks
           : b->dialect == FORMAT_FUNCTIONGEMMA ? &functiongemma_marks
                                                : NULL;
}

static void write_text_literal(builder *b, const char *text);

/* Are strings held from a raw '<' before the follower (JSON_NO_LT, and PYTHON's)? */
static bool no_lt(const builder *b)
{
    return b->dialect == FORMAT_JSON_NO_LT || b->dialect == FORMAT_PYTHON;
}

/* The name of a shared rule, writing it (and what it uses) the first time. */
static const char *primitive(builder *b, const char *name)
{
    for (int i = 0; i < N_PRIMITIVES; i++) {
        if (strcmp(primitive_names[i], name) != 0)
            continue;
        if (!b->used[i]) {
            b->used[i] = true;
            const char *const *own = b->dialect == FORMAT_JSON_NO_LT ? no_lt_rules
                                     : gemma_of(b)                   ? gemma_rules
                                     : b->dialect == FORMAT_PYTHON   ? python_rules
                                                                     : NULL;
            const char *rule = own && own[i] ? own[i] : primitive_rules[i];
            if (i == 0 && b->newlines > 1) {
                fprintf(b->out, "space ::= | \" \" | \"\\n\"{1,%u} [ \\t]{0,20}\n",
                        b->newlines);
            } else if (no_lt(b) && i == 2) {
                /* a run of '<' before anything but the follower, or before the closing quote */
                fputs("string ::= \"\\\"\" lt-char* \"<\"* \"\\\"\"\n"
                      "lt-char ::= char | \"<\"+ ([^\"\\\\\\x7F\\x00-\\x1F<", b->out);
                const unsigned char *f = (const unsigned char *)b->lt_follower;
                if (*f < 0x80)
                    for (; *f; f++)
                        fprintf(b->out, "\\x%02X", *f);
                else
                    fputs(b->lt_follower, b->out); /* UTF-8 in a class is one character */
                fprintf(b->out, "] | [\\\\] (%s | \"u\" [0-9a-fA-F]{4}))\n",
                        b->dialect == FORMAT_PYTHON ? python_escapes : json_escapes);
            } else if (gemma_of(b) && i == 2) {
                const gemma_marks *g = gemma_of(b);
                char text[64];
                format_text t = {.avoid = g->avoid, .min = -1, .max = -1};
                if (format_builder_text(b, &t, text)) {
                    fputs("string ::= ", b->out);
                    write_text_literal(b, g->quote);
                    fprintf(b->out, " %s ", text);
                    write_text_literal(b, g->quote);
                    fputc('\n', b->out);
                }
            } else {
                fputs(rule, b->out);
            }
            for (int k = 0; k < 6 && primitive_uses[i][k] >= 0; k++)
                primitive(b, primitive_names[primitive_uses[i][k]]);
        }
        return primitive_names[i];
    }
    return NULL; /* not reached: every caller names a primitive */
}

/* A fresh rule name from a hint (letters, digits and '-' kept), into name[64]. */
static void new_rule_name(builder *b, const char *hint, char name[64])
{
    int n = snprintf(name, 64, "r%u-", b->n_rules++);
    for (const char *c = hint; *c && n < 40; c++)
        if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9'))
            name[n++] = *c;
    name[n] = '\0';
}

/* value as compact JSON, its reals as short as reads back the same (jansson's default
 * writes 17 digits: 0.1 as 0.10000000000000001). */
static char *dump_shortest(const json_t *value)
{
    for (int precision = 15; precision <= 17; precision++) {
        size_t flags = JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(precision);
        char *text = json_dumps(value, flags);
        json_t *back = text ? json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL) : NULL;
        bool same = back && json_equal(back, value);
        json_decref(back);
        if (same || precision == 17 || !text)
            return text;
        free(text);
    }
    return NULL; /* not reached */
}

/* A mapping key the Gemma reader takes bare (its template writes every key bare): no
 * character that would end it or start a string. */
static bool g4_bare_key(const char *key)
{
    return *key && !strpbrk(key, ":,{}[]<\" \t\n\r\v\f");
}

/* text as a Gemma string (between g's marks) to out; false when it holds what would end the
 * string or the call early. */
static bool g4_write_string(FILE *out, const gemma_marks *g, const char *text, size_t len)
{
    for (const char *const *avoid = g->avoid; *avoid; avoid++)
        if (memmem(text, len, *avoid, strlen(*avoid)))
            return false;
    fputs(g->quote, out);
    fwrite(text, 1, len, out);
    fputs(g->quote, out);
    return true;
}

/* value as Gemma writes it with g's marks (format_grammar.h) to out; false for a string it
 * cannot hold. */
static bool g4_write_value(FILE *out, const gemma_marks *g, const json_t *value)
{
    if (json_is_string(value))
        return g4_write_string(out, g, json_string_value(value), json_string_length(value));
    if (json_is_array(value)) {
        size_t i;
        json_t *item;
        fputc('[', out);
        json_array_foreach(value, i, item) {
            if (i > 0)
                fputc(',', out);
            if (!g4_write_value(out, g, item))
                return false;
        }
        fputc(']', out);
        return true;
    }
    if (json_is_object(value)) {
        const char *key;
        json_t *item;
        bool first = true;
        fputc('{', out);
        json_object_foreach((json_t *)value, key, item) {
            if (!first)
                fputc(',', out);
            first = false;
            if (g4_bare_key(key))
                fputs(key, out);
            else if (!g4_write_string(out, g, key, strlen(key)))
                return false;
            fputc(':', out);
            if (!g4_write_value(out, g, item))
                return false;
        }
        fputc('}', out);
        return true;
    }
    char *text = dump_shortest(value);
    if (text)
        fputs(text, out);
    free(text);
    return text != NULL;
}

/* value in the builder's dialect, malloc'ed; NULL with the builder failed. */
static char *dialect_text(builder *b, const json_t *value)
{
    const gemma_marks *g = gemma_of(b);
    if (!g) {
        char *text = dump_shortest(value);
        if (!text) {
            fail(b, "out of memory");
            return NULL;
        }
        if (no_lt(b) && strpbrk(text, "<\\")) { /* only inside strings */
            size_t n = 0;
            for (const char *c = text; *c; c++)
                n += *c == '<' || *c == '\\' ? 6 : 1;
            char *escaped = malloc(n + 1);
            if (!escaped) {
                free(text);
                fail(b, "out of memory");
                return NULL;
            }
            char *w = escaped;
            for (const char *c = text; *c; c++) {
                /* Python keeps \b and \f as written: their code points instead */
                const char *code = *c == '<' ? "\\u003c"
                                   : *c == '\\' && b->dialect == FORMAT_PYTHON && c[1] == 'b'
                                       ? "\\u0008"
                                   : *c == '\\' && b->dialect == FORMAT_PYTHON && c[1] == 'f'
                                       ? "\\u000c"
                                       : NULL;
                if (code) {
                    memcpy(w, code, 6);
                    w += 6;
                    c += *c == '\\';
                } else if (*c == '\\') { /* an escape of two characters, kept */
                    *w++ = *c++;
                    *w++ = *c;
                } else {
                    *w++ = *c;
                }
            }
            *w = '\0';
            free(text);
            text = escaped;
        }
        return text;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out) {
        fail(b, "out of memory");
        return NULL;
    }
    bool ok = g4_write_value(out, g, value);
    if (fclose(out) != 0 || !ok) {
        free(text);
        if (ok)
            fail(b, "out of memory");
        else
            fail(b, "a string holding \"%s\" or \"%s\" cannot be written in %s's calls",
                 g->avoid[0], g->avoid[1], g->family);
        return NULL;
    }
    return text;
}

/* value in the builder's dialect, written as a GBNF literal. */
static bool write_literal(builder *b, const json_t *value)
{
    char *text = dialect_text(b, value);
    if (!text)
        return false;
    write_text_literal(b, text);
    free(text);
    return true;
}

static bool visit(builder *b, const json_t *schema, const char *hint, int depth, char name[64]);

/* A count keyword (minItems, maxLength, ...): -1 when absent; false on a bad value. */
static bool read_count(builder *b, const json_t *schema, const char *key, json_int_t *value)
{
    json_t *v = json_object_get(schema, key);
    *value = -1;
    if (!v)
        return true;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return fail(b, "%s must be a non-negative integer", key);
    *value = json_integer_value(v);
    return true;
}

/* A pair of counts (minLength / maxLength, ...), each -1 when absent. A maximum beyond what
 * a grammar can count is no limit; a minimum beyond it is refused. */
static bool read_range(builder *b, const json_t *schema, const char *min_key,
                       const char *max_key, long *min, long *max)
{
    json_int_t low, high;
    if (!read_count(b, schema, min_key, &low) || !read_count(b, schema, max_key, &high))
        return false;
    if (high >= 0 && low > high)
        return fail(b, "%s is larger than %s", min_key, max_key);
    if (low > MAX_COUNT)
        return fail(b, "%s above %d is not supported", min_key, MAX_COUNT);
    *min = (long)low;
    *max = high > MAX_COUNT ? -1 : (long)high;
    return true;
}

/* "{m,n}" for a repetition, "*" or "+" where that says it. */
static void write_repeat(builder *b, long min, long max)
{
    if (min <= 0 && max < 0)
        fputs("*", b->out);
    else if (min == 1 && max < 0)
        fputs("+", b->out);
    else if (max < 0)
        fprintf(b->out, "{%ld,}", min);
    else
        fprintf(b->out, "{%ld,%ld}", min < 0 ? 0 : min, max);
}

static bool visit_string(builder *b, const json_t *schema, const char *name)
{
    long min, max;
    if (!read_range(b, schema, "minLength", "maxLength", &min, &max))
        return false;
    if (min < 0 && max < 0) { /* pattern and format are not enforced: any string */
        fprintf(b->out, "%s ::= %s\n", name, primitive(b, "string"));
        return true;
    }
    primitive(b, "char");
    const gemma_marks *g = gemma_of(b);
    const char *quote = g ? g->quote : "\"";
    fprintf(b->out, "%s ::= ", name);
    write_text_literal(b, quote);
    fputs(" char", b->out);
    write_repeat(b, min, max);
    fputc(' ', b->out);
    write_text_literal(b, quote);
    fputc('\n', b->out);
    return true;
}

/* prefixItems as llama.cpp reads them: a tuple of exactly those items. */
static bool visit_tuple(builder *b, const json_t *prefix, const char *name, int depth)
{
    size_t n = json_array_size(prefix);
    if (!json_is_array(prefix) || n == 0)
        return fail(b, "prefixItems must be a non-empty array of schemas");
    char (*items)[64] = calloc(n, sizeof *items);
    if (!items)
        return fail(b, "out of memory");
    b->containers++;
    for (size_t i = 0; i < n && !b->failed; i++)
        visit(b, json_array_get(prefix, i), "item", depth + 1, items[i]);
    b->containers--;
    if (!b->failed) {
        primitive(b, "space");
        fprintf(b->out, "%s ::= \"[\" space", name);
        for (size_t i = 0; i < n; i++)
            fprintf(b->out, "%s %s space", i > 0 ? " \",\" space" : "", items[i]);
        fputs(" \"]\"\n", b->out);
    }
    free(items);
    return !b->failed;
}

static bool visit_array(builder *b, const json_t *schema, const char *name, int depth)
{
    json_t *prefix = json_object_get(schema, "prefixItems");
    if (prefix)
        return visit_tuple(b, prefix, name, depth);
    long min, max;
    if (!read_range(b, schema, "minItems", "maxItems", &min, &max))
        return false;
    char item[64];
    json_t *items = json_object_get(schema, "items");
    if (items) {
        b->containers++;
        bool ok = visit(b, items, "item", depth + 1, item);
        b->containers--;
        if (!ok)
            return false;
    } else {
        snprintf(item, sizeof item, "%s", primitive(b, "value"));
    }
    primitive(b, "space");
    if (max == 0) {
        fprintf(b->out, "%s ::= \"[\" space \"]\"\n", name);
        return true;
    }
    /* the first item, then the others after commas: min - 1 .. max - 1 of them */
    fprintf(b->out, "%s ::= \"[\" space %s%s space", name, min > 0 ? "" : "(", item);
    fprintf(b->out, " (\",\" space %s space)", item);
    write_repeat(b, min > 0 ? min - 1 : 0, max < 0 ? -1 : max - 1);
    fprintf(b->out, "%s \"]\"\n", min > 0 ? "" : ")?");
    return true;
}

/* Keys in Jinja's dictsort order: case-insensitive, then as they are. */
static int compare_keys_dictsort(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    int by_case = strcasecmp(x, y);
    return by_case ? by_case : strcmp(x, y);
}

/*
 * Properties in the schema's order (Gemma 4's: its template's), the required ones always
 * present. F(i) matches a non-empty run from property i on with no comma first; T(i) the rest
 * after something was written, each property present preceded by its comma:
 *   F(i) ::= kv(i) space T(i+1)  [ | F(i+1) when property i is optional ]
 *   T(i) ::= "," space kv(i) space T(i+1)  (the first three optional for an optional one)
 */
static bool visit_object(builder *b, const json_t *schema, const char *name, int depth)
{
    const json_t *properties = json_object_get(schema, "properties");
    const json_t *required = json_object_get(schema, "required");
    if (properties && !json_is_object(properties))
        return fail(b, "properties must be an object");
    size_t k;
    json_t *item;
    if (required && !json_is_array(required))
        return fail(b, "required must be an array of property names");
    json_array_foreach(required, k, item)
        if (!json_is_string(item))
            return fail(b, "required must be an array of property names");
    size_t n = json_object_size(properties);
    if (n == 0) { /* additionalProperties aside, any object */
        fprintf(b->out, "%s ::= %s\n", name, primitive(b, "object"));
        return true;
    }
    if (n > MAX_PROPERTIES)
        return fail(b, "an object with more than %d properties is not supported",
                    MAX_PROPERTIES);
    primitive(b, "space");
    const char **keys = calloc(n, sizeof *keys);
    char (*values)[64] = calloc(n, sizeof *values);
    bool *needed = calloc(n, sizeof *needed);
    if (!keys || !values || !needed) {
        free(keys);
        free(values);
        free(needed);
        return fail(b, "out of memory");
    }
    size_t i = 0;
    const char *key;
    json_t *sub;
    json_object_foreach((json_t *)properties, key, sub)
        keys[i++] = key;
    if (gemma_of(b)) /* its template writes them so (dictsort) */
        qsort(keys, n, sizeof *keys, compare_keys_dictsort);
    b->containers++;
    for (i = 0; i < n; i++)
        if (!visit(b, json_object_get(properties, keys[i]), keys[i], depth + 1, values[i]))
            break;
    b->containers--;
    json_array_foreach(required, k, item) {
        for (size_t j = 0; j < n; j++)
            needed[j] = needed[j] || (keys[j] && strcmp(keys[j], json_string_value(item)) == 0);
    }
    char base[64];
    new_rule_name(b, "obj", base);
    bool any_required = false;
    for (i = 0; i < n && !b->failed; i++) {
        any_required = any_required || needed[i];
        fprintf(b->out, "%s-kv%zu ::= ", base, i);
        json_t *key_json = json_string(keys[i]);
        bool ok = key_json != NULL;
        if (ok && gemma_of(b) && g4_bare_key(keys[i]))
            write_text_literal(b, keys[i]);
        else if (ok)
            ok = write_literal(b, key_json);
        else
            fail(b, "out of memory");
        json_decref(key_json);
        if (!ok)
            break;
        fprintf(b->out, " space \":\" space %s\n", values[i]);
        fprintf(b->out, "%s-f%zu ::= %s-kv%zu space", base, i, base, i);
        if (i + 1 < n)
            fprintf(b->out, " %s-t%zu", base, i + 1);
        if (!needed[i] && i + 1 < n)
            fprintf(b->out, " | %s-f%zu", base, i + 1);
        fputc('\n', b->out);
        fprintf(b->out, "%s-t%zu ::= %s\",\" space %s-kv%zu space%s", base, i,
                needed[i] ? "" : "(", base, i, needed[i] ? "" : ")?");
        if (i + 1 < n)
            fprintf(b->out, " %s-t%zu", base, i + 1);
        fputc('\n', b->out);
    }
    if (!b->failed)
        fprintf(b->out, "%s ::= \"{\" space %s-f0%s \"}\"\n", name, base, any_required ? "" : "?");
    free(keys);
    free(values);
    free(needed);
    return !b->failed;
}

/* A node of one type (name given). */
static bool visit_type(builder *b, const json_t *schema, const char *type, const char *name,
                       int depth)
{
    if (strcmp(type, "object") == 0)
        return visit_object(b, schema, name, depth);
    if (strcmp(type, "array") == 0)
        return visit_array(b, schema, name, depth);
    if (strcmp(type, "string") == 0)
        return visit_string(b, schema, name);
    static const char *const simple[] = {"integer", "number", "boolean", "null"};
    for (size_t i = 0; i < 4; i++)
        if (strcmp(type, simple[i]) == 0) {
            fprintf(b->out, "%s ::= %s\n", name, primitive(b, simple[i]));
            return true;
        }
    return fail(b, "unsupported schema type \"%s\"", type);
}

/* name ::= alt0 | alt1 | ..., each alternative a rule of its own. */
static bool visit_alternatives(builder *b, const json_t *list, const char *keyword,
                               const char *name, int depth)
{
    if (!json_is_array(list) || json_array_size(list) == 0)
        return fail(b, "%s must be a non-empty array of schemas", keyword);
    size_t n = json_array_size(list);
    char (*alts)[64] = calloc(n, sizeof *alts);
    if (!alts)
        return fail(b, "out of memory");
    for (size_t i = 0; i < n && !b->failed; i++)
        visit(b, json_array_get(list, i), keyword, depth + 1, alts[i]);
    if (!b->failed) {
        fprintf(b->out, "%s ::= %s", name, alts[0]);
        for (size_t i = 1; i < n; i++)
            fprintf(b->out, " | %s", alts[i]);
        fputc('\n', b->out);
    }
    free(alts);
    return !b->failed;
}

/* One step of a JSON pointer (token[0..len), ~0 and ~1 escaped) from node, or NULL. */
static const json_t *pointer_step(const json_t *node, const char *token, size_t len)
{
    char *key = malloc(len + 1);
    if (!key)
        return NULL;
    size_t n = 0;
    bool escaped_right = true;
    for (size_t i = 0; i < len; i++) {
        if (token[i] != '~')
            key[n++] = token[i];
        else if (i + 1 < len && (token[i + 1] == '0' || token[i + 1] == '1'))
            key[n++] = token[++i] == '0' ? '~' : '/';
        else
            escaped_right = false;
    }
    key[n] = '\0';
    bool is_index = n > 0 && n < 10 && strspn(key, "0123456789") == n && (key[0] != '0' || n == 1);
    const json_t *next = NULL;
    if (escaped_right && json_is_object(node))
        next = json_object_get(node, key);
    else if (escaped_right && json_is_array(node) && is_index)
        next = json_array_get(node, strtoul(key, NULL, 10));
    free(key);
    return next;
}

/* The schema a local $ref ("#", or a JSON pointer such as "#/$defs/NAME") points at. */
static const json_t *resolve_ref(const json_t *root, const char *ref)
{
    if (ref[0] != '#' || (ref[1] != '\0' && ref[1] != '/'))
        return NULL;
    const json_t *node = root;
    for (const char *p = ref + 1; node && *p == '/';) {
        size_t len = strcspn(++p, "/");
        node = pointer_step(node, p, len);
        p += len;
    }
    return node;
}

/* A local $ref: its rule, written once. */
static bool visit_ref(builder *b, const char *ref, int depth, char name[64])
{
    if (ref[0] != '#')
        return fail(b, "unsupported $ref \"%s\" (only references into the schema, \"#/...\")",
                    ref);
    const json_t *target = resolve_ref(b->root, ref);
    if (!target)
        return fail(b, "$ref \"%s\" points at nothing in the schema", ref);
    const char *known = json_string_value(json_object_get(b->refs, ref));
    json_t *opened_in = json_object_get(b->open_refs, ref);
    if (opened_in && json_integer_value(opened_in) == b->containers)
        return fail(b, "$ref \"%s\" refers to itself before any '{' or '['", ref);
    if (known) {
        snprintf(name, 64, "%s", known);
        return true;
    }
    new_rule_name(b, ref[1] ? strrchr(ref, '/') + 1 : "root", name);
    /* before visiting: it may recurse */
    if (json_object_set_new(b->refs, ref, json_string(name)) != 0 ||
        json_object_set_new(b->open_refs, ref, json_integer(b->containers)) != 0)
        return fail(b, "out of memory");
    char body[64];
    bool ok = visit(b, target, "def", depth + 1, body);
    json_object_del(b->open_refs, ref);
    if (ok)
        fprintf(b->out, "%s ::= %s\n", name, body);
    return ok;
}

/* Write the rules of schema; name receives the rule that matches it. */
static bool visit(builder *b, const json_t *schema, const char *hint, int depth, char name[64])
{
    if (depth > MAX_DEPTH)
        return fail(b, "schema nested deeper than %d", MAX_DEPTH);
    if (json_is_true(schema) || (json_is_object(schema) && json_object_size(schema) == 0)) {
        snprintf(name, 64, "%s", primitive(b, "value"));
        return true;
    }
    if (!json_is_object(schema))
        return fail(b, "a schema must be an object or true");
    const char *ref = json_string_value(json_object_get(schema, "$ref"));
    if (ref)
        return visit_ref(b, ref, depth, name);
    new_rule_name(b, hint, name);
    json_t *v;
    if ((v = json_object_get(schema, "const"))) {
        fprintf(b->out, "%s ::= ", name);
        if (!write_literal(b, v))
            return false;
        fputc('\n', b->out);
        return true;
    }
    if ((v = json_object_get(schema, "enum"))) {
        if (!json_is_array(v) || json_array_size(v) == 0)
            return fail(b, "enum must be a non-empty array");
        fprintf(b->out, "%s ::= ", name);
        size_t i;
        json_t *item;
        json_array_foreach(v, i, item) {
            if (i > 0)
                fputs(" | ", b->out);
            if (!write_literal(b, item))
                return false;
        }
        fputc('\n', b->out);
        return true;
    }
    static const char *const alternatives[] = {"anyOf", "oneOf"};
    for (size_t i = 0; i < 2; i++)
        if ((v = json_object_get(schema, alternatives[i])))
            return visit_alternatives(b, v, alternatives[i], name, depth);
    if ((v = json_object_get(schema, "allOf"))) {
        if (!json_is_array(v) || json_array_size(v) != 1)
            return fail(b, "allOf is supported with one schema only");
        char only[64];
        if (!visit(b, json_array_get(v, 0), hint, depth + 1, only))
            return false;
        fprintf(b->out, "%s ::= %s\n", name, only);
        return true;
    }
    json_t *type = format_schema_type(schema);
    bool nullable = json_is_true(json_object_get(schema, "nullable"));
    if (json_is_string(type) && json_string_length(type) == 0) {
        json_decref(type);
        snprintf(name, 64, "%s", primitive(b, "value")); /* no type: any value, null too */
        return true;
    }
    bool ok = true;
    if (json_is_string(type) && !nullable) {
        ok = visit_type(b, schema, json_string_value(type), name, depth);
    } else if (json_is_string(type) || json_is_array(type)) {
        /* several types, or one and null: a rule per type, then the alternatives */
        json_t *types = json_is_array(type) ? json_copy(type) : json_pack("[O]", type);
        if (nullable)
            json_array_append_new(types, json_string("null"));
        size_t i, n = json_array_size(types);
        json_t *t;
        char (*alts)[64] = calloc(n ? n : 1, sizeof *alts);
        ok = types && alts;
        json_array_foreach(types, i, t) {
            if (!ok)
                break;
            if (!json_is_string(t) || json_string_length(t) == 0) {
                ok = fail(b, "type must be a name or an array of names");
                break;
            }
            new_rule_name(b, json_string_value(t), alts[i]);
            ok = visit_type(b, schema, json_string_value(t), alts[i], depth);
        }
        if (ok && n > 0) {
            fprintf(b->out, "%s ::= %s", name, alts[0]);
            for (i = 1; i < n; i++)
                fprintf(b->out, " | %s", alts[i]);
            fputc('\n', b->out);
        }
        if (ok && n == 0)
            ok = fail(b, "type must be a name or an array of names");
        free(alts);
        json_decref(types);
    } else {
        ok = fail(b, "type must be a name or an array of names");
    }
    json_decref(type);
    return ok;
}

/* Close the stream with "root ::= start" last: the grammar text, or NULL. */
static char *finish(builder *b, char **text, const char *start)
{
    bool ok = !b->failed && !ferror(b->out);
    fprintf(b->out, "root ::= %s\n", start);
    ok = fclose(b->out) == 0 && ok; /* sets *text */
    json_decref(b->refs);
    json_decref(b->open_refs);
    if (!ok) {
        fail(b, "out of memory");
        free(*text);
        return NULL;
    }
    return *text;
}

/* A builder writing to a memory stream at *text; false when out of memory. */
static bool builder_open(builder *b, char **text, size_t *len)
{
    b->out = open_memstream(text, len);
    b->refs = json_object();
    b->open_refs = json_object();
    if (b->out && b->refs && b->open_refs)
        return true;
    if (b->out)
        fclose(b->out);
    free(*text);
    json_decref(b->refs);
    json_decref(b->open_refs);
    return false;
}

char *format_grammar_json_object(void)
{
    char *text = NULL;
    size_t len = 0;
    corral_error err;
    builder b = {.err = &err};
    if (!builder_open(&b, &text, &len))
        return NULL;
    return finish(&b, &text, primitive(&b, "object"));
}

/* text as a GBNF literal: quotes and backslashes escaped, control bytes as \xHH. */
static void write_text_literal(builder *b, const char *text)
{
    fputc('"', b->out);
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if (*c == '"' || *c == '\\')
            fputc('\\', b->out);
        if (*c < 0x20)
            fprintf(b->out, "\\x%02x", *c);
        else
            fputc(*c, b->out);
    }
    fputc('"', b->out);
}

/* Without a text before or after, the grammar is the schema's alone. */
char *format_grammar_from_schema_between(const json_t *schema, const char *before,
                                         const char *after, corral_error *err)
{
    char *text = NULL;
    size_t len = 0;
    builder b = {.root = schema, .err = err};
    if (!builder_open(&b, &text, &len)) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    char value[64] = "value";
    visit(&b, schema, "root", 0, value);
    if (!*before && !*after)
        return finish(&b, &text, value);
    const char *space = primitive(&b, "space");
    fputs("between ::= ", b.out);
    if (*before) {
        write_text_literal(&b, before);
        fprintf(b.out, " %s ", space);
    }
    fputs(value, b.out);
    if (*after) {
        fprintf(b.out, " %s ", space);
        write_text_literal(&b, after);
    }
    fputc('\n', b.out);
    return finish(&b, &text, "between");
}

char *format_grammar_from_schema(const json_t *schema, corral_error *err)
{
    return format_grammar_from_schema_between(schema, "", "", err);
}

/* ---- the builder for tool_grammar.c ---- */

/* Is text one UTF-8 character, or a few ASCII ones, other than NUL and the JSON string's own
 * specials? */
static bool followers(const char *text)
{
    const unsigned char *c = (const unsigned char *)text;
    if (!c || !*c)
        return false;
    if (*c >= 0x80) {
        size_t n = *c >= 0xF0 ? 4 : *c >= 0xE0 ? 3 : *c >= 0xC0 ? 2 : 0;
        return n > 0 && strlen(text) == n;
    }
    size_t n = strlen(text);
    for (size_t i = 0; i < n; i++)
        if (c[i] < 0x20 || c[i] >= 0x7F || strchr("\"\\<]", c[i]))
            return false;
    return n < sizeof ((builder *)0)->lt_follower;
}

format_builder *format_builder_create(format_dialect dialect, const char *lt_follower,
                                      corral_error *err)
{
    builder *b = calloc(1, sizeof *b);
    if (b && (dialect == FORMAT_JSON_NO_LT || dialect == FORMAT_PYTHON) &&
        !followers(lt_follower)) {
        free(b);
        corral_error_set(err, "format: the followers of '<' must be one character or a few "
                              "ASCII ones");
        return NULL;
    }
    if (b && lt_follower)
        snprintf(b->lt_follower, sizeof b->lt_follower, "%s", lt_follower);
    if (!b || !builder_open(b, &b->text, &b->len)) {
        free(b);
        corral_error_set(err, "out of memory");
        return NULL;
    }
    b->dialect = dialect;
    b->err = err;
    return b;
}

void format_builder_set_newlines(format_builder *b, unsigned newlines)
{
    assert(!b->used[0] && newlines > 0); /* before the whitespace rule is written */
    b->newlines = newlines;
}

/* root as the schema $refs point into: the references known so far forgotten when it
 * changes (their rules stay, unused). */
static bool set_root(builder *b, const json_t *root)
{
    if (b->root != root && json_object_clear(b->refs) != 0)
        return fail(b, "out of memory");
    b->root = root;
    return !b->failed;
}

bool format_builder_schema(format_builder *b, const json_t *root, const json_t *schema,
                           const char *hint, char name[64])
{
    return set_root(b, root) && visit(b, schema, hint, 0, name);
}

bool format_builder_type(format_builder *b, const json_t *root, const json_t *schema,
                         const char *type, char name[64])
{
    if (!set_root(b, root))
        return false;
    new_rule_name(b, type, name);
    return visit_type(b, schema, type, name, 0);
}

json_t *format_schema_type(const json_t *schema)
{
    json_t *type = json_object_get(schema, "type");
    if (type)
        return json_incref(type);
    return json_string(json_object_get(schema, "properties") ? "object"
                       : json_object_get(schema, "items")    ? "array"
                                                             : "");
}

const json_t *format_builder_resolve(const json_t *root, const char *ref)
{
    return resolve_ref(root, ref);
}

const char *format_builder_primitive(format_builder *b, const char *name)
{
    return primitive(b, name);
}

void format_builder_rule_name(format_builder *b, const char *hint, char name[64])
{
    new_rule_name(b, hint, name);
}

FILE *format_builder_stream(format_builder *b)
{
    return b->out;
}

void format_builder_text_literal(format_builder *b, const char *text)
{
    write_text_literal(b, text);
}

bool format_builder_range(format_builder *b, const json_t *schema, const char *min_key,
                          const char *max_key, long *min, long *max)
{
    return read_range(b, schema, min_key, max_key, min, max);
}

bool format_builder_fail(format_builder *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_va(b, fmt, ap);
    va_end(ap);
    return false;
}

char *format_builder_finish(format_builder *b, const char *start)
{
    char *grammar = finish(b, &b->text, start);
    free(b);
    return grammar;
}

void format_builder_free(format_builder *b)
{
    if (!b)
        return;
    fclose(b->out);
    free(b->text);
    json_decref(b->refs);
    json_decref(b->open_refs);
    free(b);
}

/*
 * format_builder_text: a deterministic automaton over the text, one rule per state, each
 * alternative a character class and the state it leads to (a right recursion, which the
 * grammar engine follows without growing its stacks). A state is the text's longest suffix
 * that begins an avoided text; while the text may still be one of not_whole, the text itself
 * (lower-cased); whether it is empty, and whether it ends in '\n'. With a length bound the
 * avoided texts cannot start at all, and the length is part of the state until the text can
 * no longer be a not_whole word: the rest is then a bounded repetition.
 */
enum { TEXT_MAX_STATES = 4096, TEXT_SUFFIX = 64, TEXT_WORD = 16, TEXT_ALPHABET = 129 };

typedef struct text_state {
    char suffix[TEXT_SUFFIX]; /* the longest suffix that begins an avoided text */
    char word[TEXT_WORD];     /* the text, lower-cased, while it begins a not_whole word */
    bool word_dead;           /* it no longer does */
    long len;                 /* characters: with a bound, counted; else 0 or 1 */
    bool newline;             /* ends with '\n' */
    bool tail;                /* bounded, and no word left: the rest is a repetition */
    bool live;                /* can reach an accepted end */
    int next[TEXT_ALPHABET];  /* by character (the last: any other one), -1 none */
    char name[64];
} text_state;

typedef struct text_automaton {
    const format_text *t;
    bool bounded;
    bool special[128];  /* characters any part of the limits names */
    unsigned char other; /* a character that stands for all the others */
    text_state *states;
    size_t n;
    json_t *index; /* a state's key -> its index */
} text_automaton;

static bool in_list(const char *const *list, const char *s, size_t n, bool whole)
{
    for (; list && *list; list++)
        if (whole ? strlen(*list) == n && memcmp(*list, s, n) == 0
                  : strlen(*list) >= n && memcmp(*list, s, n) == 0)
            return true;
    return false;
}

static bool text_accepts(const text_automaton *a, const text_state *s)
{
    const format_text *t = a->t;
    if (!s->word_dead && in_list(t->not_whole, s->word, strlen(s->word), true))
        return false;
    if (t->no_newline_ends && s->newline)
        return false;
    return !a->bounded || s->len >= t->min;
}

/* The state after character c from s, into *to; false when c may not come there. */
static bool text_step(const text_automaton *a, const text_state *s, unsigned char c,
                      text_state *to)
{
    const format_text *t = a->t;
    if (c == 0 || (s->len == 0 && t->not_first && strchr(t->not_first, c)) ||
        (s->len == 0 && t->no_newline_ends && c == '\n') ||
        (a->bounded && t->max >= 0 && s->len >= t->max))
        return false;
    memset(to, 0, sizeof *to);
    if (a->bounded) {
        for (const char *const *avoid = t->avoid; avoid && *avoid; avoid++)
            if ((unsigned char)**avoid == c)
                return false;
    } else {
        char grown[TEXT_SUFFIX + 1];
        size_t n = strlen(s->suffix);
        memcpy(grown, s->suffix, n);
        grown[n++] = (char)c;
        for (size_t k = 0; k < n; k++) /* an avoided text may end inside a longer prefix */
            if (in_list(t->avoid, grown + k, n - k, true))
                return false;
        size_t from = 0;
        while (from < n && !in_list(t->avoid, grown + from, n - from, false))
            from++;
        if (n - from >= TEXT_SUFFIX)
            return false; /* not reached: avoid's texts are checked shorter */
        memcpy(to->suffix, grown + from, n - from);
    }
    to->word_dead = s->word_dead;
    if (!s->word_dead) {
        size_t n = strlen(s->word);
        char lower = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        if (n + 1 < TEXT_WORD) {
            memcpy(to->word, s->word, n);
            to->word[n] = lower;
        }
        to->word_dead = n + 1 >= TEXT_WORD || !in_list(t->not_whole, to->word, n + 1, false);
        if (to->word_dead)
            memset(to->word, 0, sizeof to->word);
    }
    to->len = a->bounded ? s->len + 1 : 1;
    to->newline = t->no_newline_ends && c == '\n';
    to->tail = a->bounded && to->word_dead;
    return true;
}

/* The index of state s (added, its name given, when new); -1 when out of room. */
static int text_state_index(builder *b, text_automaton *a, const text_state *s)
{
    char key[TEXT_SUFFIX + TEXT_WORD + 64];
    snprintf(key, sizeof key, "%s|%s|%d|%ld|%d|%d", s->suffix, s->word, s->word_dead, s->len,
             s->newline, s->tail);
    json_t *known = json_object_get(a->index, key);
    if (known)
        return (int)json_integer_value(known);
    if (a->n == TEXT_MAX_STATES)
        return -1;
    a->states[a->n] = *s;
    for (int k = 0; k < TEXT_ALPHABET; k++)
        a->states[a->n].next[k] = -1;
    new_rule_name(b, "text", a->states[a->n].name);
    if (json_object_set_new(a->index, key, json_integer((json_int_t)a->n)) != 0)
        return -1;
    return (int)a->n++;
}

/* The character of alphabet slot k. */
static unsigned char text_char(const text_automaton *a, int k)
{
    return k == TEXT_ALPHABET - 1 ? a->other : (unsigned char)k;
}

/* c inside a character class. */
static void write_class_char(FILE *out, unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        fputc(c, out);
    else
        fprintf(out, "\\x%02X", c);
}

/* A tail state's rule: the rest of a bounded text, of the characters allowed anywhere. */
static void write_text_tail(builder *b, const text_automaton *a, const text_state *s)
{
    const format_text *t = a->t;
    long lo = t->min > s->len ? t->min - s->len : 0;
    long hi = t->max >= 0 ? t->max - s->len : -1;
    char excluded[64] = "\\x00";
    size_t n = strlen(excluded);
    for (const char *const *avoid = t->avoid; avoid && *avoid; avoid++) {
        bool again = false;
        for (const char *const *before = t->avoid; before < avoid; before++)
            again = again || **before == **avoid;
        if (!again && n + 5 < sizeof excluded)
            n += (size_t)snprintf(excluded + n, sizeof excluded - n, "\\x%02X",
                                  (unsigned char)**avoid);
    }
    fprintf(b->out, "%s ::= ", s->name);
    if (!t->no_newline_ends) {
        fprintf(b->out, "[^%s]", excluded);
        write_repeat(b, lo, hi);
        fputc('\n', b->out);
        return;
    }
    /* never ending in '\n': the last character apart */
    bool empty = lo == 0 && !s->newline;
    if (empty)
        fputs("\"\"", b->out);
    if (hi != 0) {
        fprintf(b->out, "%s[^%s]", empty ? " | " : "", excluded);
        write_repeat(b, lo > 1 ? lo - 1 : 0, hi < 0 ? -1 : hi - 1);
        fprintf(b->out, " [^%s\\x0A]", excluded);
    }
    fputc('\n', b->out);
}

static bool text_tail_live(const text_automaton *a, const text_state *s)
{
    long lo = a->t->min > s->len ? a->t->min - s->len : 0;
    long hi = a->t->max >= 0 ? a->t->max - s->len : -1;
    return hi != 0 || (lo == 0 && !(a->t->no_newline_ends && s->newline));
}

/* A live state's rule. */
static void write_text_state(builder *b, const text_automaton *a, const text_state *s)
{
    if (s->tail) {
        write_text_tail(b, a, s);
        return;
    }
    fprintf(b->out, "%s ::= ", s->name);
    bool any = false;
    if (text_accepts(a, s)) {
        fputs("\"\"", b->out);
        any = true;
    }
    int other = s->next[TEXT_ALPHABET - 1];
    if (other >= 0 && !a->states[other].live)
        other = -1;
    if (other >= 0) { /* all the characters that go where any other one goes */
        fprintf(b->out, "%s[^\\x00", any ? " | " : "");
        for (int k = 1; k < 128; k++)
            if (a->special[k] && s->next[k] != other)
                write_class_char(b->out, (unsigned char)k);
        fprintf(b->out, "] %s", a->states[other].name);
        any = true;
    }
    bool done[TEXT_ALPHABET] = {false};
    for (int k = 1; k < 128; k++) {
        int to = s->next[k];
        if (!a->special[k] || done[k] || to < 0 || to == other || !a->states[to].live)
            continue;
        fprintf(b->out, "%s[", any ? " | " : "");
        for (int j = k; j < 128; j++)
            if (a->special[j] && s->next[j] == to) {
                write_class_char(b->out, (unsigned char)j);
                done[j] = true;
            }
        fprintf(b->out, "] %s", a->states[to].name);
        any = true;
    }
    fputc('\n', b->out);
}

bool format_builder_text(format_builder *b, const format_text *t, char name[64])
{
    text_automaton a = {.t = t, .bounded = t->min >= 0 || t->max >= 0};
    if (t->min > MAX_COUNT)
        return fail(b, "a minimum length above %d is not supported", MAX_COUNT);
    for (const char *const *avoid = t->avoid; avoid && *avoid; avoid++) {
        size_t n = strlen(*avoid);
        if (n == 0 || n >= TEXT_SUFFIX)
            return fail(b, "text limits out of range");
        for (size_t i = 0; i < n; i++) {
            if ((unsigned char)(*avoid)[i] >= 0x80)
                return fail(b, "text limits out of range");
            a.special[(unsigned char)(*avoid)[i]] = true;
        }
    }
    for (const char *const *word = t->not_whole; word && *word; word++)
        for (const char *c = *word; *c; c++) {
            a.special[(unsigned char)*c & 0x7F] = true;
            if (*c >= 'a' && *c <= 'z')
                a.special[*c - 32] = true;
        }
    for (const char *c = t->not_first ? t->not_first : ""; *c; c++)
        a.special[(unsigned char)*c & 0x7F] = true;
    a.special['\n'] = true;
    a.special[0] = false;
    for (int c = 'x'; c < 128 + 'x'; c++)
        if (!a.special[c & 0x7F] && (c & 0x7F) >= 0x20) {
            a.other = (unsigned char)(c & 0x7F);
            break;
        }
    a.states = malloc(TEXT_MAX_STATES * sizeof *a.states);
    a.index = json_object();
    bool ok = a.states && a.index;
    if (!ok) {
        free(a.states);
        json_decref(a.index);
        return fail(b, "out of memory");
    }
    text_state start = {.word_dead = !t->not_whole || !*t->not_whole};
    ok = text_state_index(b, &a, &start) == 0;
    /* every state's transitions; states added while going are visited in turn */
    for (size_t i = 0; ok && i < a.n; i++) {
        if (a.states[i].tail)
            continue;
        for (int k = 0; ok && k < TEXT_ALPHABET; k++) {
            unsigned char c = text_char(&a, k);
            if (k < 128 && (!a.special[k] || k == 0))
                continue;
            text_state to;
            if (!text_step(&a, &a.states[i], c, &to))
                continue;
            int j = text_state_index(b, &a, &to);
            ok = j >= 0;
            a.states[i].next[k] = j;
        }
    }
    /* live: accepted where it is, or leading to a live state */
    for (bool changed = ok; changed;) {
        changed = false;
        for (size_t i = 0; i < a.n; i++) {
            text_state *s = &a.states[i];
            bool live = s->tail ? text_tail_live(&a, s) : text_accepts(&a, s);
            for (int k = 0; !live && k < TEXT_ALPHABET; k++)
                live = s->next[k] >= 0 && a.states[s->next[k]].live;
            if (live && !s->live)
                s->live = changed = true;
        }
    }
    if (ok && !a.states[0].live)
        ok = fail(b, "no text fits the limits");
    else if (!ok)
        fail(b, "a text's limits need more than %d rules", TEXT_MAX_STATES);
    for (size_t i = 0; ok && i < a.n; i++)
        if (a.states[i].live)
            write_text_state(b, &a, &a.states[i]);
    if (ok)
        snprintf(name, 64, "%s", a.states[0].name);
    free(a.states);
    json_decref(a.index);
    return ok && !b->failed;
}

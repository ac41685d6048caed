/*
 * Python semantics of Jinja values: truth, equality, str(), type names, UTF-8 code point
 * indexing, string construction under the sandbox's size limit, dict keys of any hashable
 * type, and the checks that keep mutated lists and dicts bounded and free of cycles.
 * Equality walks nested values itself (not json_equal) so that every node compared costs
 * a step.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja_exec.h"
#include "template/valuefmt.h"

bool jv_oom(jexec *ex, size_t pos)
{
    return tsandbox_fail(ex->sb, pos, "out of memory");
}

bool jv_charge(jexec *ex, size_t n, size_t pos)
{
    if (ex->sb->failed)
        return false;
    if (n > ex->sb->steps_left) {
        ex->sb->steps_left = 0;
        return tsandbox_fail(ex->sb, pos,
                             "evaluation step limit reached (template loops too long)");
    }
    ex->sb->steps_left -= n;
    return true;
}

bool jv_hold(jexec *ex, jheld *held, json_t *v, size_t pos)
{
    if (held->n == held->cap) {
        size_t cap = held->cap ? held->cap * 2 : 8;
        json_t **grown = realloc(held->items, cap * sizeof *grown);
        if (!grown)
            return jv_oom(ex, pos);
        held->items = grown;
        held->cap = cap;
    }
    held->items[held->n++] = json_incref(v);
    return true;
}

bool jv_holds(const jheld *held, const json_t *v)
{
    for (size_t i = 0; i < held->n; i++)
        if (held->items[i] == v)
            return true;
    return false;
}

void jv_held_free(jheld *held)
{
    for (size_t i = 0; i < held->n; i++)
        json_decref(held->items[i]);
    free(held->items);
    *held = (jheld){0};
}

bool jv_is_namespace(const jexec *ex, const json_t *v)
{
    return jv_holds(&ex->namespaces, v);
}

const char *jv_type_name(const json_t *v)
{
    if (!v)
        return "Undefined";
    if (tfmt_is_method(v))
        return "builtin_function_or_method";
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "dict";
    case JSON_ARRAY:
        return "list";
    case JSON_STRING:
        return "str";
    case JSON_INTEGER:
        return "int";
    case JSON_REAL:
        return "float";
    case JSON_TRUE:
    case JSON_FALSE:
        return "bool";
    default:
        return "NoneType";
    }
}

static double number_of(const json_t *v)
{
    if (json_is_true(v))
        return 1;
    if (json_is_false(v))
        return 0;
    return json_number_value(v);
}

static void key_of_stored(const char *s, size_t n, jkey *key);

static bool equal_depth(jexec *ex, const json_t *a, const json_t *b, size_t pos, int depth,
                        bool *result)
{
    if (!tsandbox_step(ex->sb, pos))
        return false;
    if (depth > TFMT_MAX_DEPTH)
        return tsandbox_fail(ex->sb, pos, "values nested too deeply to compare");
    *result = false;
    if (!a || !b) {
        *result = !a && !b;
        return true;
    }
    bool a_num = json_is_number(a) || json_is_boolean(a);
    bool b_num = json_is_number(b) || json_is_boolean(b);
    if (a_num && b_num) {
        if (json_is_integer(a) && json_is_integer(b))
            *result = json_integer_value(a) == json_integer_value(b);
        else
            *result = number_of(a) == number_of(b);
        return true;
    }
    if (json_typeof(a) != json_typeof(b))
        return true;
    switch (json_typeof(a)) {
    case JSON_STRING:
        *result = json_string_length(a) == json_string_length(b) &&
                  memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
        return true;
    case JSON_NULL:
        *result = true;
        return true;
    case JSON_ARRAY:
        if (json_array_size(a) != json_array_size(b))
            return true;
        for (size_t i = 0; i < json_array_size(a); i++) {
            bool same;
            if (!equal_depth(ex, json_array_get(a, i), json_array_get(b, i), pos, depth + 1, &same))
                return false;
            if (!same)
                return true;
        }
        *result = true;
        return true;
    case JSON_OBJECT: {
        if (json_object_size(a) != json_object_size(b))
            return true;
        const char *key;
        size_t key_len;
        json_t *value;
        json_object_keylen_foreach((json_t *)a, key, key_len, value)
        {
            jkey k;
            key_of_stored(key, key_len, &k);
            json_t *other = jv_dict_get(b, &k);
            bool same;
            if (!other)
                return true;
            if (!equal_depth(ex, value, other, pos, depth + 1, &same))
                return false;
            if (!same)
                return true;
        }
        *result = true;
        return true;
    }
    default:
        return true;
    }
}

bool jv_equal(jexec *ex, const json_t *a, const json_t *b, size_t pos, bool *result)
{
    return equal_depth(ex, a, b, pos, 0, result);
}

bool jv_str(jexec *ex, const json_t *v, tbuf *buf, size_t pos)
{
    if (!tfmt_py_str(buf, v))
        return tsandbox_fail(ex->sb, pos, "string longer than %zu bytes", buf->max_bytes);
    return true;
}

bool jv_string(jexec *ex, const char *s, size_t n, size_t pos, json_t **out)
{
    if (n > ex->sb->max_bytes)
        return tsandbox_fail(ex->sb, pos, "string longer than %zu bytes", ex->sb->max_bytes);
    *out = json_stringn_nocheck(s, n);
    return *out ? true : jv_oom(ex, pos);
}

bool jv_string_from_buf(jexec *ex, tbuf *buf, size_t pos, json_t **out)
{
    bool ok = jv_string(ex, buf->data ? buf->data : "", buf->len, pos, out);
    tbuf_free(buf);
    return ok;
}

size_t jv_utf8_count(const char *s, size_t n)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xc0) != 0x80)
            count++;
    return count;
}

size_t jv_utf8_offset(const char *s, size_t n, size_t index)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        if (((unsigned char)s[i] & 0xc0) != 0x80) {
            if (count == index)
                return i;
            count++;
        }
    }
    return n;
}

/*
 * Dict keys. A str key is stored as its text (a NUL ends it, as jansson's loader allows no
 * NUL in keys); an int, float, bool or None key as a NUL byte, a type letter and the key's
 * Python repr, which no str key can spell. Python's equal numbers are one key (1, 1.0 and
 * True), and the dict keeps the first of them it was given: a key with an integral value
 * finds an entry stored under any of its equal forms.
 */
static bool encode_key(char tag, const char *repr, size_t n, jkey *key)
{
    if (n > sizeof key->buf - 2)
        return false;
    key->buf[0] = '\0';
    key->buf[1] = tag;
    memcpy(key->buf + 2, repr, n);
    key->s = key->buf;
    key->n = n + 2;
    return true;
}

static bool encode_int(long long i, jkey *key)
{
    char digits[32];
    return encode_key('i', digits, (size_t)snprintf(digits, sizeof digits, "%lld", i), key);
}

static bool encode_float(double d, jkey *key)
{
    tbuf text;
    tbuf_init(&text, sizeof key->buf - 2);
    bool ok = tfmt_py_float(&text, d) && text.data && encode_key('f', text.data, text.len, key);
    tbuf_free(&text);
    return ok;
}

bool jv_key(jexec *ex, const json_t *v, size_t pos, jkey *key)
{
    key->integral = false;
    if (json_is_string(v)) {
        key->s = json_string_value(v);
        key->n = strlen(key->s);
        return true;
    }
    bool ok;
    if (json_is_integer(v)) {
        key->integral = true;
        key->ival = json_integer_value(v);
        ok = encode_int(key->ival, key);
    } else if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d == floor(d) && fabs(d) < 9e18) {
            key->integral = true;
            key->ival = (long long)d;
        }
        ok = encode_float(d, key);
    } else if (json_is_boolean(v)) {
        key->integral = true;
        key->ival = json_is_true(v);
        ok = encode_key('b', key->ival ? "True" : "False", key->ival ? 4 : 5, key);
    } else if (json_is_null(v)) {
        ok = encode_key('n', "None", 4, key);
    } else {
        return tsandbox_fail(ex->sb, pos, "unhashable type: '%s'", jv_type_name(v));
    }
    return ok ? true : jv_oom(ex, pos);
}

static void copy_key(jkey *dst, const jkey *src)
{
    *dst = *src;
    if (src->s == src->buf)
        dst->s = dst->buf;
}

/* The form of key that dict holds it under (key itself, or an equal number's); false when
 * dict has no key equal to it. */
static bool stored_key(const json_t *dict, const jkey *key, jkey *stored)
{
    if (json_object_getn(dict, key->s, key->n)) {
        copy_key(stored, key);
        return true;
    }
    if (!key->integral)
        return false;
    long long i = key->ival;
    double d = (double)i;
    /* a float is equal to the int only where it holds the int exactly */
    bool exact = d < 9e18 && d > -9e18 && (long long)d == i;
    if (encode_int(i, stored) && json_object_getn(dict, stored->s, stored->n))
        return true;
    if (exact && encode_float(d, stored) && json_object_getn(dict, stored->s, stored->n))
        return true;
    if (i == 0 && encode_float(-0.0, stored) && json_object_getn(dict, stored->s, stored->n))
        return true;
    return (i == 0 || i == 1) && encode_key('b', i ? "True" : "False", i ? 4 : 5, stored) &&
           json_object_getn(dict, stored->s, stored->n);
}

/* A key as a dict stores it, with the number it stands for (see jv_key). */
static void key_of_stored(const char *s, size_t n, jkey *key)
{
    key->s = s;
    key->n = n;
    key->integral = false;
    if (n < 3 || s[0] != '\0')
        return;
    if (s[1] == 'i' || s[1] == 'b') {
        key->integral = true;
        key->ival = s[1] == 'b' ? s[2] == 'T' : strtoll(s + 2, NULL, 10);
    } else if (s[1] == 'f') {
        double d = strtod(s + 2, NULL);
        key->integral = d == floor(d) && fabs(d) < 9e18;
        key->ival = key->integral ? (long long)d : 0;
    }
}

json_t *jv_key_value(const char *key, size_t n)
{
    if (n < 2 || key[0] != '\0')
        return json_stringn_nocheck(key, n);
    switch (key[1]) {
    case 'i':
        return json_integer(strtoll(key + 2, NULL, 10));
    case 'f':
        return json_real(strtod(key + 2, NULL));
    case 'b':
        return json_boolean(key[2] == 'T');
    default:
        return json_null();
    }
}

json_t *jv_dict_get(const json_t *dict, const jkey *key)
{
    jkey stored;
    return stored_key(dict, key, &stored) ? json_object_getn(dict, stored.s, stored.n) : NULL;
}

bool jv_dict_set(jexec *ex, json_t *dict, const jkey *key, json_t *value, size_t pos)
{
    jkey stored;
    if (!stored_key(dict, key, &stored))
        copy_key(&stored, key);
    return json_object_setn(dict, stored.s, stored.n, value ? value : json_null()) == 0 ||
           jv_oom(ex, pos);
}

void jv_dict_del(json_t *dict, const jkey *key)
{
    jkey stored;
    if (stored_key(dict, key, &stored))
        json_object_deln(dict, stored.s, stored.n);
}

bool jv_dict_keys(jexec *ex, const json_t *dict, size_t pos, json_t **out)
{
    json_t *keys = json_array();
    bool ok = keys && jv_charge(ex, json_object_size(dict), pos);
    const char *key;
    size_t n;
    json_t *value;
    json_object_keylen_foreach((json_t *)dict, key, n, value)
    {
        ok = ok && json_array_append_new(keys, jv_key_value(key, n)) == 0;
    }
    if (!ok) {
        json_decref(keys);
        return ex->sb->failed ? false : jv_oom(ex, pos);
    }
    *out = keys;
    return true;
}

/* ---- bound methods ---- */

/*
 * Jinja2 resolves `x.name` on a dict, list or str to Python's method of that name before
 * any key of that name, and `x['name']` to the method when no key matches. The sandbox HF
 * renders templates in gives Undefined for the methods that change a dict or list. A bound
 * method value is valuefmt.h's form (tfmt_is_method).
 */
static const char *const dict_methods[] = {"copy", "fromkeys", "get", "items", "keys", "values"};
static const char *const dict_mutators[] = {"clear", "pop", "popitem", "setdefault", "update"};
static const char *const list_methods[] = {"copy", "count", "index"};
static const char *const list_mutators[] = {"append", "clear",  "extend",  "insert",
                                            "pop",    "remove", "reverse", "sort"};
static const char *const str_methods[] = {
    "capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find",
    "format", "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit",
    "isidentifier", "islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper",
    "join", "ljust", "lower", "lstrip", "maketrans", "partition", "removeprefix",
    "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit", "rstrip",
    "split", "splitlines", "startswith", "strip", "swapcase", "title", "translate", "upper",
    "zfill"};

static bool listed(const char *const *names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(names[i], name))
            return true;
    return false;
}
#define LISTED(names, name) listed(names, sizeof names / sizeof names[0], name)

/* A groupby pair's field of that name: 0 grouper, 1 list; -1 when obj is no such pair. */
static bool group_field(jexec *ex, const json_t *obj, const char *name, size_t pos, int *field)
{
    *field = -1;
    if (json_array_size(obj) != 2 || (strcmp(name, "grouper") != 0 && strcmp(name, "list") != 0))
        return true;
    if (!jv_charge(ex, ex->groups.n, pos))
        return false;
    if (jv_holds(&ex->groups, obj))
        *field = name[0] == 'l';
    return true;
}

bool jv_python_attr(jexec *ex, json_t *obj, const char *name, size_t pos, bool *found,
                    json_t **out)
{
    if (out)
        *out = NULL;
    int field;
    if (json_is_array(obj) && ex->groups.n) {
        if (!group_field(ex, obj, name, pos, &field))
            return false;
        if (field >= 0) {
            *found = true;
            if (out)
                *out = json_incref(json_array_get(obj, (size_t)field));
            return true;
        }
    }
    bool safe, unsafe;
    if (json_is_object(obj)) {
        safe = LISTED(dict_methods, name);
        unsafe = !safe && LISTED(dict_mutators, name);
        if ((safe || unsafe) && (jv_is_namespace(ex, obj) || tfmt_is_method(obj)))
            safe = unsafe = false;
    } else if (json_is_array(obj)) {
        safe = LISTED(list_methods, name);
        unsafe = !safe && LISTED(list_mutators, name);
    } else {
        safe = json_is_string(obj) && LISTED(str_methods, name);
        unsafe = false;
    }
    *found = safe || unsafe;
    if (!safe || !out)
        return true;
    json_t *method = json_object();
    if (!method || json_object_setn_new_nocheck(method, TFMT_METHOD_KEY, 2,
                                                json_pack("[Os]", obj, name)) != 0) {
        json_decref(method);
        return jv_oom(ex, pos);
    }
    *out = method;
    return true;
}

json_t *jv_method_self(const json_t *method)
{
    return json_array_get(json_object_getn(method, TFMT_METHOD_KEY, 2), 0);
}

const char *jv_method_name(const json_t *method)
{
    return json_string_value(json_array_get(json_object_getn(method, TFMT_METHOD_KEY, 2), 1));
}

/* ---- mutation ---- */

/* Lists and dicts copied all the way down, other values shared (strings never change). */
static json_t *copy_containers(const json_t *v, int depth)
{
    if (depth > TFMT_MAX_DEPTH)
        return NULL;
    json_t *copy = NULL;
    if (json_is_array(v)) {
        copy = json_array();
        for (size_t i = 0; copy && i < json_array_size(v); i++)
            if (json_array_append_new(copy, copy_containers(json_array_get(v, i), depth + 1)))
                copy = (json_decref(copy), NULL);
    } else if (json_is_object(v)) {
        copy = json_object();
        const char *key;
        size_t n;
        json_t *item;
        json_object_keylen_foreach((json_t *)v, key, n, item)
        {
            if (copy && json_object_setn_new_nocheck(copy, key, n,
                                                     copy_containers(item, depth + 1)) != 0)
                copy = (json_decref(copy), NULL);
        }
    } else {
        copy = json_incref((json_t *)v);
    }
    return copy;
}

json_t *jv_copy_containers(const json_t *v)
{
    return copy_containers(v, 0);
}

/* Whether target is v or lies inside it; every node looked at costs a step. */
static bool reaches(jexec *ex, const json_t *v, const json_t *target, size_t pos, int depth,
                    bool *found)
{
    if (*found || !(json_is_array(v) || json_is_object(v)))
        return true;
    if (!jv_charge(ex, 1, pos))
        return false;
    if (depth > TFMT_MAX_DEPTH)
        return tsandbox_fail(ex->sb, pos, "value nested too deeply");
    if (v == target) {
        *found = true;
        return true;
    }
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v) && !*found; i++)
            if (!reaches(ex, json_array_get(v, i), target, pos, depth + 1, found))
                return false;
        return true;
    }
    const char *key;
    json_t *item;
    json_object_foreach((json_t *)v, key, item)
    {
        if (!reaches(ex, item, target, pos, depth + 1, found))
            return false;
    }
    return true;
}

bool jv_may_insert(jexec *ex, const json_t *container, const json_t *v, size_t extra, size_t pos)
{
    size_t size = json_is_array(container) ? json_array_size(container)
                                           : json_object_size(container);
    size_t max_items = ex->sb->max_bytes / sizeof(void *);
    if (size + extra > max_items)
        return tsandbox_fail(ex->sb, pos, "%s longer than %zu items",
                             jv_type_name(container), max_items);
    bool cycle = false;
    if (!reaches(ex, v, container, pos, 0, &cycle))
        return false;
    if (cycle)
        return tsandbox_fail(ex->sb, pos, "a %s cannot contain itself", jv_type_name(container));
    return true;
}

/* ---- Markup ---- */

bool jv_markup(jexec *ex, const json_t *v, size_t pos, json_t **out)
{
    size_t n = json_string_length(v);
    if (n > ex->sb->max_bytes - ex->markup_bytes)
        return tsandbox_fail(ex->sb, pos, "safe strings longer than %zu bytes in all",
                             ex->sb->max_bytes);
    /* a string of its own: the value marked may be shared with places that are plain str */
    json_t *copy = json_stringn_nocheck(json_string_value(v), n);
    if (!copy)
        return jv_oom(ex, pos);
    if (!jv_hold(ex, &ex->markups, copy, pos)) {
        json_decref(copy);
        return false;
    }
    ex->markup_bytes += n;
    *out = copy;
    return true;
}

bool jv_is_markup(jexec *ex, const json_t *v, size_t pos, bool *result)
{
    *result = false;
    if (!ex->markups.n || !json_is_string(v))
        return true;
    if (!jv_charge(ex, ex->markups.n, pos))
        return false;
    *result = jv_holds(&ex->markups, v);
    return true;
}

bool jv_escape_html(tbuf *out, const char *p, size_t n)
{
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        const char *entity = p[i] == '&'    ? "&amp;"
                             : p[i] == '<'  ? "&lt;"
                             : p[i] == '>'  ? "&gt;"
                             : p[i] == '\'' ? "&#39;"
                             : p[i] == '"'  ? "&#34;"
                                            : NULL;
        ok = entity ? tbuf_puts(out, entity) : tbuf_putc(out, p[i]);
    }
    return ok;
}

bool jv_markup_concat(jexec *ex, const json_t *a, bool a_safe, const json_t *b, bool b_safe,
                      size_t pos, json_t **out)
{
    tbuf text;
    tbuf_init(&text, ex->sb->max_bytes);
    bool ok = (a_safe ? tbuf_append(&text, json_string_value(a), json_string_length(a))
                      : jv_escape_html(&text, json_string_value(a), json_string_length(a))) &&
              (b_safe ? tbuf_append(&text, json_string_value(b), json_string_length(b))
                      : jv_escape_html(&text, json_string_value(b), json_string_length(b)));
    json_t *plain = NULL;
    if (!ok) {
        tbuf_free(&text);
        return tsandbox_fail(ex->sb, pos, "string longer than %zu bytes", ex->sb->max_bytes);
    }
    ok = jv_charge(ex, text.len / 4096, pos) && jv_string_from_buf(ex, &text, pos, &plain) &&
         jv_markup(ex, plain, pos, out);
    if (!ok)
        tbuf_free(&text);
    json_decref(plain);
    return ok;
}

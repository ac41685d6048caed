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

bool jv_is_namespace(const jexec *ex, const json_t *v)
{
    for (size_t i = 0; i < ex->n_namespaces; i++)
        if (ex->namespaces[i] == v)
            return true;
    return false;
}

const char *jv_type_name(const json_t *v)
{
    if (!v)
        return "Undefined";
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
            json_t *other = json_object_getn(b, key, key_len);
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
 * Python repr, which no str key can spell. A float with an integral value is the int key,
 * as 1.0 and 1 are one key in Python.
 */
bool jv_key(jexec *ex, const json_t *v, size_t pos, jkey *key)
{
    if (json_is_string(v)) {
        key->s = json_string_value(v);
        key->n = strlen(key->s);
        return true;
    }
    tbuf text;
    tbuf_init(&text, sizeof key->buf - 3);
    bool ok;
    char tag;
    double d = json_is_real(v) ? json_real_value(v) : 0;
    if (json_is_integer(v) || (json_is_real(v) && d == floor(d) && fabs(d) < 9e18)) {
        tag = 'i';
        long long i = json_is_integer(v) ? json_integer_value(v) : (long long)d;
        char digits[32];
        ok = tbuf_append(&text, digits, (size_t)snprintf(digits, sizeof digits, "%lld", i));
    } else if (json_is_real(v)) {
        tag = 'f';
        ok = tfmt_py_float(&text, d);
    } else if (json_is_boolean(v) || json_is_null(v)) {
        tag = json_is_null(v) ? 'n' : 'b';
        ok = tbuf_puts(&text, json_is_null(v) ? "None" : json_is_true(v) ? "True" : "False");
    } else {
        return tsandbox_fail(ex->sb, pos, "unhashable type: '%s'", jv_type_name(v));
    }
    if (!ok || !text.data) {
        tbuf_free(&text);
        return jv_oom(ex, pos);
    }
    key->buf[0] = '\0';
    key->buf[1] = tag;
    memcpy(key->buf + 2, text.data, text.len);
    key->s = key->buf;
    key->n = text.len + 2;
    tbuf_free(&text);
    return true;
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
    return json_object_getn(dict, key->s, key->n);
}

bool jv_dict_set(jexec *ex, json_t *dict, const jkey *key, json_t *value, size_t pos)
{
    return json_object_setn(dict, key->s, key->n, value ? value : json_null()) == 0 ||
           jv_oom(ex, pos);
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
    if (ex->n_markups == ex->cap_markups) {
        size_t cap = ex->cap_markups ? ex->cap_markups * 2 : 8;
        json_t **grown = realloc(ex->markups, cap * sizeof *grown);
        if (!grown)
            return jv_oom(ex, pos);
        ex->markups = grown;
        ex->cap_markups = cap;
    }
    /* a string of its own: the value marked may be shared with places that are plain str */
    json_t *copy = json_stringn_nocheck(json_string_value(v), n);
    if (!copy)
        return jv_oom(ex, pos);
    ex->markups[ex->n_markups++] = json_incref(copy);
    ex->markup_bytes += n;
    *out = copy;
    return true;
}

bool jv_is_markup(jexec *ex, const json_t *v, size_t pos, bool *result)
{
    *result = false;
    if (!ex->n_markups || !json_is_string(v))
        return true;
    if (!jv_charge(ex, ex->n_markups, pos))
        return false;
    for (size_t i = 0; i < ex->n_markups && !*result; i++)
        *result = ex->markups[i] == v;
    return true;
}

/* s with & < > ' " as HTML entities, as markupsafe.escape writes them. */
static bool escape_html(tbuf *out, const json_t *s)
{
    const char *p = json_string_value(s);
    size_t n = json_string_length(s);
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
                      : escape_html(&text, a)) &&
              (b_safe ? tbuf_append(&text, json_string_value(b), json_string_length(b))
                      : escape_html(&text, b));
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

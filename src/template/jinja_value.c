/*
 * Python semantics of Jinja values: truth, equality, str(), type names, UTF-8 code point
 * indexing, and string construction under the sandbox's size limit. Equality walks nested
 * values itself (not json_equal) so that every node compared costs a step.
 */
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
        json_t *value;
        json_object_foreach((json_t *)a, key, value)
        {
            json_t *other = json_object_get(b, key);
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

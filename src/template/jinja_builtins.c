/*
 * Jinja builtins: the filters, tests, str/dict methods and global functions
 * (raise_exception, strftime_now, namespace, range, dict) that HF chat templates use, with
 * Jinja2 and Python semantics. The list and dict methods that change their object
 * (append, pop, update…) work as in Python, as llama.cpp's engine allows them and Kimi's
 * templates need them; each checks the sandbox's size limit and refuses a reference cycle.
 * The safe filter makes Markup (jinja_value.c).
 */
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <utf8proc.h>

#include "template/jinja_exec.h"
#include "template/jinja_strings.h"
#include "template/valuefmt.h"

/* Positional argument i, else keyword name; NULL when neither was given. */
static json_t *arg(const jargs *args, size_t i, const char *name)
{
    if (i < args->n)
        return args->pos[i];
    return args->kw && name ? json_object_get(args->kw, name) : NULL;
}

static bool arg_given(const jargs *args, size_t i, const char *name)
{
    return i < args->n || (args->kw && name && json_object_get(args->kw, name));
}

static bool set_out(jexec *ex, size_t pos, json_t *v, json_t **out)
{
    *out = v;
    return v ? true : jv_oom(ex, pos);
}

/* str(v) as a temporary buffer. */
static bool to_text(jexec *ex, const json_t *v, size_t pos, tbuf *text)
{
    tbuf_init(text, ex->sb->max_bytes);
    if (!jv_str(ex, v, text, pos)) {
        tbuf_free(text);
        return false;
    }
    if (!text->data && !tbuf_append(text, "", 0)) {
        tbuf_free(text);
        return jv_oom(ex, pos);
    }
    return true;
}

static bool case_map(jexec *ex, const json_t *v, size_t pos, jcase mode, json_t **out)
{
    tbuf text, mapped;
    if (!to_text(ex, v, pos, &text))
        return false;
    tbuf_init(&mapped, ex->sb->max_bytes);
    bool ok = jstr_case(&mapped, text.data, text.len, mode) ||
              tsandbox_fail(ex->sb, pos, "string too long");
    tbuf_free(&text);
    return ok ? jv_string_from_buf(ex, &mapped, pos, out) : (tbuf_free(&mapped), false);
}

static bool strip(jexec *ex, const json_t *v, const json_t *chars, bool left, bool right,
                  size_t pos, json_t **out)
{
    tbuf text;
    if (!to_text(ex, v, pos, &text))
        return false;
    const char *c = json_is_string(chars) ? json_string_value(chars) : NULL;
    size_t a, b;
    jstr_strip(text.data, text.len, c, c ? json_string_length(chars) : 0, left, right, &a, &b);
    bool ok = jv_string(ex, text.data + a, b - a, pos, out);
    tbuf_free(&text);
    return ok;
}

static bool replace(jexec *ex, const json_t *v, const json_t *old, const json_t *new,
                    const json_t *count, size_t pos, json_t **out)
{
    if (!json_is_string(old) || !json_is_string(new))
        return tsandbox_fail(ex->sb, pos, "replace() arguments must be strings");
    tbuf text;
    if (!to_text(ex, v, pos, &text))
        return false;
    const char *o = json_string_value(old);
    size_t on = json_string_length(old);
    long long limit = json_is_integer(count) ? json_integer_value(count) : -1;
    tbuf result;
    tbuf_init(&result, ex->sb->max_bytes);
    bool ok = true;
    size_t i = 0;
    long long done = 0;
    while (ok && i <= text.len) {
        const char *hit = NULL;
        if (limit < 0 || done < limit) {
            if (on == 0)
                hit = text.data + i;
            else
                hit = memmem(text.data + i, text.len - i, o, on);
        }
        if (!hit) {
            ok = tbuf_append(&result, text.data + i, text.len - i);
            break;
        }
        size_t at = (size_t)(hit - text.data);
        ok = tbuf_append(&result, text.data + i, at - i) &&
             tbuf_append(&result, json_string_value(new), json_string_length(new)) &&
             jv_charge(ex, 1, pos);
        done++;
        if (on == 0) {
            if (at < text.len)
                ok = ok && tbuf_append(&result, text.data + at, 1);
            i = at + 1;
        } else {
            i = at + on;
        }
    }
    tbuf_free(&text);
    if (!ok) {
        tbuf_free(&result);
        return tsandbox_fail(ex->sb, pos, "string too long");
    }
    return jv_string_from_buf(ex, &result, pos, out);
}

/* str.split(sep=None, maxsplit=-1) */
static bool split(jexec *ex, const json_t *v, const json_t *sep, const json_t *maxsplit, size_t pos,
                  json_t **out)
{
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    long long limit = json_is_integer(maxsplit) ? json_integer_value(maxsplit) : -1;
    json_t *list = json_array();
    if (!list)
        return jv_oom(ex, pos);
    bool ok = true;
    if (!json_is_string(sep)) {
        size_t i = 0;
        long long splits = 0;
        for (;;) {
            size_t w;
            while (i < n && (w = jstr_space_at(s, n, i)))
                i += w;
            if (i >= n)
                break;
            size_t start = i;
            if (limit >= 0 && splits >= limit) {
                size_t a, b;
                jstr_strip(s + start, n - start, NULL, 0, false, true, &a, &b);
                ok = json_array_append_new(list, json_stringn_nocheck(s + start, b)) == 0;
                break;
            }
            while (i < n && !jstr_space_at(s, n, i))
                i++;
            ok = json_array_append_new(list, json_stringn_nocheck(s + start, i - start)) == 0 &&
                 jv_charge(ex, 1, pos);
            splits++;
            if (!ok)
                break;
        }
    } else {
        const char *d = json_string_value(sep);
        size_t dn = json_string_length(sep);
        if (dn == 0) {
            json_decref(list);
            return tsandbox_fail(ex->sb, pos, "empty separator");
        }
        size_t i = 0;
        long long splits = 0;
        for (;;) {
            const char *hit = (limit < 0 || splits < limit) ? memmem(s + i, n - i, d, dn) : NULL;
            size_t end = hit ? (size_t)(hit - s) : n;
            ok = json_array_append_new(list, json_stringn_nocheck(s + i, end - i)) == 0 &&
                 jv_charge(ex, 1, pos);
            if (!ok || !hit)
                break;
            i = end + dn;
            splits++;
        }
    }
    if (!ok) {
        json_decref(list);
        return ex->sb->failed ? false : jv_oom(ex, pos);
    }
    *out = list;
    return true;
}

static bool affix(jexec *ex, const json_t *v, const json_t *what, bool prefix, size_t pos,
                  bool *result)
{
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    *result = false;
    size_t count = json_is_array(what) ? json_array_size(what) : 1;
    for (size_t i = 0; i < count && !*result; i++) {
        const json_t *w = json_is_array(what) ? json_array_get(what, i) : what;
        if (!json_is_string(w))
            return tsandbox_fail(ex->sb, pos, "%s first arg must be str or a tuple of str",
                                 prefix ? "startswith" : "endswith");
        size_t wn = json_string_length(w);
        *result = wn <= n && memcmp(prefix ? s : s + n - wn, json_string_value(w), wn) == 0;
    }
    return true;
}

/* ---- tojson and collections ---- */

static bool to_json(jexec *ex, const json_t *v, const jargs *args, size_t first_arg, size_t pos,
                    json_t **out)
{
    if (!v)
        return tsandbox_fail(ex->sb, pos, "Object of type Undefined is not JSON serializable");
    const json_t *indent = arg(args, first_arg, "indent");
    tjson_style style = {.python = true, .indent = -1};
    if (json_is_integer(indent))
        style.indent = (int)(json_integer_value(indent) < 0    ? 0
                             : json_integer_value(indent) > 64 ? 64
                                                               : json_integer_value(indent));
    style.sort_keys = tvalue_truth(arg(args, 99, "sort_keys"));
    tbuf text;
    tbuf_init(&text, ex->sb->max_bytes);
    if (!tfmt_json(&text, v, &style)) {
        tbuf_free(&text);
        return tsandbox_fail(ex->sb, pos,
                             "tojson output too large, too deeply nested or holding a method");
    }
    return jv_string_from_buf(ex, &text, pos, out);
}

/* A list of a value's items as Jinja iterates them: list items, dict keys, characters. */
static bool as_list(jexec *ex, const json_t *v, size_t pos, json_t **out)
{
    if (!v)
        return set_out(ex, pos, json_array(), out);
    if (json_is_array(v))
        return set_out(ex, pos, json_incref((json_t *)v), out);
    json_t *list = json_array();
    if (!list)
        return jv_oom(ex, pos);
    bool ok = true;
    if (json_is_object(v)) {
        json_decref(list);
        return jv_dict_keys(ex, v, pos, out);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        size_t n = json_string_length(v);
        for (size_t i = 0; i < n && ok;) {
            size_t k = i + 1;
            while (k < n && ((unsigned char)s[k] & 0xc0) == 0x80)
                k++;
            ok = json_array_append_new(list, json_stringn_nocheck(s + i, k - i)) == 0;
            i = k;
        }
    } else {
        json_decref(list);
        return tsandbox_fail(ex->sb, pos, "'%s' object is not iterable", jv_type_name(v));
    }
    if (!ok || !jv_charge(ex, json_array_size(list), pos)) {
        json_decref(list);
        return ex->sb->failed ? false : jv_oom(ex, pos);
    }
    *out = list;
    return true;
}

/* Follow a dotted attribute path ("a.b" or "0") into v; NULL when missing. */
static json_t *attribute_of(json_t *v, const char *path)
{
    char part[128];
    while (v && *path) {
        size_t len = strcspn(path, ".");
        if (len >= sizeof part)
            return NULL;
        memcpy(part, path, len);
        part[len] = '\0';
        path += len + (path[len] == '.');
        if (json_is_object(v)) {
            v = json_object_get(v, part);
        } else if (json_is_array(v)) {
            char *end;
            long index = strtol(part, &end, 10);
            v = *end == '\0' && index >= 0 ? json_array_get(v, (size_t)index) : NULL;
        } else {
            v = NULL;
        }
    }
    return v;
}

/* select/reject/selectattr/rejectattr. */
static bool select_items(jexec *ex, json_t *seq, const jargs *args, size_t pos, bool by_attr,
                         bool keep_when, json_t **out)
{
    if (!tvalue_truth(seq)) /* Jinja2 walks nothing for a false value (none, say) */
        return set_out(ex, pos, json_array(), out);
    json_t *items;
    if (!as_list(ex, seq, pos, &items))
        return false;
    size_t test_at = by_attr ? 1 : 0;
    const json_t *attr = by_attr ? arg(args, 0, NULL) : NULL;
    if (by_attr && !json_is_string(attr)) {
        json_decref(items);
        return tsandbox_fail(ex->sb, pos, "selectattr/rejectattr need an attribute name");
    }
    const json_t *test = arg(args, test_at, NULL);
    if (test && !json_is_string(test)) {
        json_decref(items);
        return tsandbox_fail(ex->sb, pos, "test name must be a string");
    }
    jargs test_args = {.pos = args->n > test_at + 1 ? args->pos + test_at + 1 : NULL,
                       .n = args->n > test_at + 1 ? args->n - test_at - 1 : 0};
    json_t *kept = json_array();
    bool ok = kept != NULL;
    for (size_t i = 0; ok && i < json_array_size(items); i++) {
        json_t *item = json_array_get(items, i);
        json_t *subject = by_attr ? attribute_of(item, json_string_value(attr)) : item;
        bool pass;
        if (test)
            ok = jtest(ex, json_string_value(test), pos, subject, &test_args, &pass);
        else
            pass = tvalue_truth(subject);
        if (ok && pass == keep_when)
            ok = json_array_append(kept, item) == 0 || jv_oom(ex, pos);
        ok = ok && jv_charge(ex, 1, pos);
    }
    json_decref(items);
    if (!ok) {
        json_decref(kept);
        return ex->sb->failed ? false : jv_oom(ex, pos);
    }
    *out = kept;
    return true;
}

static bool map_items(jexec *ex, json_t *seq, const jargs *args, size_t pos, json_t **out)
{
    if (!tvalue_truth(seq)) /* Jinja2 walks nothing for a false value (none, say) */
        return set_out(ex, pos, json_array(), out);
    json_t *items;
    if (!as_list(ex, seq, pos, &items))
        return false;
    const json_t *attr = arg(args, 99, "attribute");
    const json_t *fallback = arg(args, 99, "default");
    const json_t *filter = attr ? NULL : arg(args, 0, NULL);
    if (!attr && !json_is_string(filter)) {
        json_decref(items);
        return tsandbox_fail(ex->sb, pos, "map needs attribute= or a filter name");
    }
    jargs filter_args = {.pos = args->n > 1 ? args->pos + 1 : NULL,
                         .n = args->n > 1 ? args->n - 1 : 0};
    json_t *mapped = json_array();
    bool ok = mapped != NULL;
    for (size_t i = 0; ok && i < json_array_size(items); i++) {
        json_t *item = json_array_get(items, i), *v = NULL;
        if (attr) {
            v = json_is_string(attr) ? attribute_of(item, json_string_value(attr)) : NULL;
            v = v ? v : (json_t *)fallback;
            v = v ? json_incref(v) : json_null();
        } else {
            ok = jfilter(ex, json_string_value(filter), pos, item, &filter_args, &v);
        }
        ok = ok && json_array_append_new(mapped, v ? v : json_null()) == 0 && jv_charge(ex, 1, pos);
    }
    json_decref(items);
    if (!ok) {
        json_decref(mapped);
        return ex->sb->failed ? false : jv_oom(ex, pos);
    }
    *out = mapped;
    return true;
}

static bool join(jexec *ex, json_t *seq, const json_t *sep, const json_t *attr, size_t pos,
                 json_t **out)
{
    json_t *items;
    if (!as_list(ex, seq, pos, &items))
        return false;
    tbuf text;
    tbuf_init(&text, ex->sb->max_bytes);
    bool ok = true;
    for (size_t i = 0; ok && i < json_array_size(items); i++) {
        json_t *item = json_array_get(items, i);
        if (json_is_string(attr))
            item = attribute_of(item, json_string_value(attr));
        if (i && json_is_string(sep))
            ok = tbuf_append(&text, json_string_value(sep), json_string_length(sep)) ||
                 tsandbox_fail(ex->sb, pos, "string too long");
        ok = ok && jv_str(ex, item, &text, pos) && jv_charge(ex, 1, pos);
    }
    json_decref(items);
    return ok ? jv_string_from_buf(ex, &text, pos, out) : (tbuf_free(&text), false);
}

static bool items_of(jexec *ex, json_t *v, size_t pos, json_t **out)
{
    if (!v)
        return set_out(ex, pos, json_array(), out);
    if (!json_is_object(v))
        return tsandbox_fail(ex->sb, pos, "items() needs a mapping, not %s", jv_type_name(v));
    json_t *list = json_array();
    bool ok = list != NULL && jv_charge(ex, json_object_size(v), pos);
    const char *key;
    size_t key_len;
    json_t *value;
    json_object_keylen_foreach(v, key, key_len, value)
    {
        ok = ok && json_array_append_new(list, json_pack("[oO]", jv_key_value(key, key_len),
                                                         value)) == 0;
    }
    if (!ok) {
        json_decref(list);
        return ex->sb->failed ? false : jv_oom(ex, pos);
    }
    *out = list;
    return true;
}

static bool length_of(jexec *ex, const json_t *v, size_t pos, json_t **out)
{
    size_t n;
    if (!v)
        n = 0;
    else if (json_is_string(v))
        n = jv_utf8_count(json_string_value(v), json_string_length(v));
    else if (json_is_array(v))
        n = json_array_size(v);
    else if (json_is_object(v))
        n = json_object_size(v);
    else
        return tsandbox_fail(ex->sb, pos, "object of type '%s' has no len()", jv_type_name(v));
    return set_out(ex, pos, json_integer((json_int_t)n), out);
}

static bool first_last(jexec *ex, json_t *v, bool last, size_t pos, json_t **out)
{
    json_t *items;
    if (!as_list(ex, v, pos, &items))
        return false;
    size_t n = json_array_size(items);
    *out = n ? json_incref(json_array_get(items, last ? n - 1 : 0)) : NULL;
    json_decref(items);
    return true;
}

static bool to_int(jexec *ex, const json_t *v, const json_t *fallback, size_t pos, json_t **out)
{
    if (json_is_integer(v))
        return set_out(ex, pos, json_incref((json_t *)v), out);
    if (json_is_real(v) && fabs(json_real_value(v)) < 9e18)
        return set_out(ex, pos, json_integer((json_int_t)json_real_value(v)), out);
    if (json_is_boolean(v))
        return set_out(ex, pos, json_integer(json_is_true(v)), out);
    if (json_is_string(v)) {
        char *end;
        const char *s = json_string_value(v);
        long long i = strtoll(s, &end, 10);
        if (end != s && *end == '\0')
            return set_out(ex, pos, json_integer(i), out);
        double d = strtod(s, &end);
        if (end != s && *end == '\0' && fabs(d) < 9e18)
            return set_out(ex, pos, json_integer((json_int_t)d), out);
    }
    return set_out(ex, pos, fallback ? json_incref((json_t *)fallback) : json_integer(0), out);
}

static bool indent(jexec *ex, json_t *v, const jargs *args, size_t pos, json_t **out)
{
    const json_t *width = arg(args, 0, "width");
    bool first = tvalue_truth(arg(args, 1, "first")), blank = tvalue_truth(arg(args, 2, "blank"));
    tbuf pad, text, result;
    tbuf_init(&pad, 256);
    if (json_is_string(width)) {
        tbuf_append(&pad, json_string_value(width), json_string_length(width));
    } else {
        long long w = json_is_integer(width) ? json_integer_value(width) : 4;
        for (long long i = 0; i < w && i < 256; i++)
            tbuf_putc(&pad, ' ');
    }
    if (!to_text(ex, v, pos, &text)) {
        tbuf_free(&pad);
        return false;
    }
    tbuf_init(&result, ex->sb->max_bytes);
    bool ok = true, line_start = true, is_first = true;
    for (size_t i = 0; i < text.len && ok; i++) {
        if (line_start) {
            bool empty = text.data[i] == '\n';
            if ((!is_first || first) && (blank || !empty))
                ok = tbuf_append(&result, pad.data ? pad.data : "", pad.len);
            line_start = false;
            is_first = false;
        }
        ok = ok && tbuf_putc(&result, text.data[i]);
        if (text.data[i] == '\n')
            line_start = true;
    }
    tbuf_free(&pad);
    tbuf_free(&text);
    return ok ? jv_string_from_buf(ex, &result, pos, out)
              : (tbuf_free(&result), tsandbox_fail(ex->sb, pos, "string too long"));
}

/* Python orders bools among the numbers, as 0 and 1. */
static bool orders_as_number(const json_t *v)
{
    return json_is_number(v) || json_is_boolean(v);
}

static double number_or_bool(const json_t *v)
{
    return json_is_boolean(v) ? json_is_true(v) : json_number_value(v);
}

static int compare_values(const json_t *a, const json_t *b)
{
    if (orders_as_number(a) && orders_as_number(b)) {
        double x = number_or_bool(a), y = number_or_bool(b);
        return (x > y) - (x < y);
    }
    if (json_is_string(a) && json_is_string(b))
        return strcmp(json_string_value(a), json_string_value(b));
    return (int)json_typeof(a) - (int)json_typeof(b);
}

typedef struct sort_entry {
    json_t *key; /* a reference of its own */
    json_t *item;
    size_t index;
} sort_entry;

static int compare_entries(const void *pa, const void *pb)
{
    const sort_entry *a = pa, *b = pb;
    int c = compare_values(a->key, b->key);
    return c ? c : (a->index > b->index) - (a->index < b->index);
}

/* What the ordering filters compare a value by: strings in ASCII lower case unless
 * case_sensitive (Jinja's default ignores case); a new reference, NULL when out of memory. */
static json_t *order_key(const json_t *v, bool case_sensitive)
{
    if (!v)
        return json_null();
    if (case_sensitive || !json_is_string(v))
        return json_incref((json_t *)v);
    size_t n = json_string_length(v);
    char *lower = malloc(n + 1);
    if (!lower)
        return NULL;
    const char *s = json_string_value(v);
    for (size_t i = 0; i < n; i++)
        lower[i] = (char)tolower((unsigned char)s[i]);
    json_t *key = json_stringn_nocheck(lower, n);
    free(lower);
    return key;
}

/* What an item is ordered by: itself, a pair's key or value (dictsort), or an attribute. */
typedef enum order_by { ORDER_ITEM, ORDER_PAIR_KEY, ORDER_PAIR_VALUE } order_by;

static const json_t *order_base(json_t *item, order_by by, const json_t *attr)
{
    if (by != ORDER_ITEM)
        return json_array_get(item, by == ORDER_PAIR_KEY ? 0 : 1);
    return json_is_string(attr) ? attribute_of(item, json_string_value(attr)) : item;
}

/* items (consumed) in order, stable, reversed on request: sort and dictsort. */
static bool sort_list(jexec *ex, json_t *items, order_by by, const json_t *attr,
                      bool case_sensitive, bool reverse, size_t pos, json_t **out)
{
    size_t n = json_array_size(items);
    sort_entry *entries = calloc(n ? n : 1, sizeof *entries);
    bool ok = entries && jv_charge(ex, n * 8, pos);
    for (size_t i = 0; i < n && ok; i++) {
        entries[i].item = json_array_get(items, i);
        ok = (entries[i].key = order_key(order_base(entries[i].item, by, attr), case_sensitive));
        entries[i].index = reverse ? n - i : i;
    }
    if (ok)
        qsort(entries, n, sizeof *entries, compare_entries);
    json_t *sorted = ok ? json_array() : NULL;
    ok = sorted != NULL;
    for (size_t i = 0; i < n && ok; i++)
        ok = json_array_append(sorted, entries[reverse ? n - 1 - i : i].item) == 0;
    for (size_t i = 0; entries && i < n; i++)
        json_decref(entries[i].key);
    free(entries);
    json_decref(items);
    if (!ok) {
        json_decref(sorted);
        return ex->sb->failed ? false : jv_oom(ex, pos);
    }
    *out = sorted;
    return true;
}

static bool sort_items(jexec *ex, json_t *v, const jargs *args, size_t pos, json_t **out)
{
    json_t *items;
    if (!as_list(ex, v, pos, &items))
        return false;
    return sort_list(ex, items, ORDER_ITEM, arg(args, 2, "attribute"),
                     tvalue_truth(arg(args, 1, "case_sensitive")),
                     tvalue_truth(arg(args, 0, "reverse")), pos, out);
}

/* dictsort(case_sensitive=false, by="key", reverse=false): a mapping's [key, value] pairs. */
static bool dictsort(jexec *ex, json_t *v, const jargs *args, size_t pos, json_t **out)
{
    json_t *items;
    if (!items_of(ex, v, pos, &items))
        return false;
    const json_t *by = arg(args, 1, "by");
    if (by && (!json_is_string(by) || (strcmp(json_string_value(by), "key") != 0 &&
                                       strcmp(json_string_value(by), "value") != 0))) {
        json_decref(items);
        return tsandbox_fail(ex->sb, pos, "dictsort: by must be 'key' or 'value'");
    }
    order_by order = by && !strcmp(json_string_value(by), "value") ? ORDER_PAIR_VALUE
                                                                    : ORDER_PAIR_KEY;
    return sort_list(ex, items, order, NULL, tvalue_truth(arg(args, 0, "case_sensitive")),
                     tvalue_truth(arg(args, 2, "reverse")), pos, out);
}

/* min / max(case_sensitive=false, attribute=none): the first smallest or largest item of a
 * sequence; undefined for an empty one. */
static bool min_max(jexec *ex, json_t *v, const jargs *args, bool max, size_t pos, json_t **out)
{
    json_t *items;
    if (!as_list(ex, v, pos, &items))
        return false;
    bool case_sensitive = tvalue_truth(arg(args, 0, "case_sensitive"));
    const json_t *attr = arg(args, 1, "attribute");
    json_t *best = NULL, *best_key = NULL;
    bool ok = true;
    for (size_t i = 0; i < json_array_size(items) && ok; i++) {
        json_t *item = json_array_get(items, i);
        json_t *key = order_key(order_base(item, ORDER_ITEM, attr), case_sensitive);
        ok = key != NULL;
        int c = ok && best_key ? compare_values(key, best_key) : 0;
        if (ok && (!best_key || (max ? c > 0 : c < 0))) {
            json_decref(best_key);
            best_key = key;
            best = item;
        } else {
            json_decref(key);
        }
    }
    *out = ok && best ? json_incref(best) : NULL;
    json_decref(best_key);
    json_decref(items);
    return ok ? true : jv_oom(ex, pos);
}

/* unique(case_sensitive=false, attribute=none): items in order, each first of its kind. */
static bool unique_items(jexec *ex, json_t *v, const jargs *args, size_t pos, json_t **out)
{
    json_t *items;
    if (!as_list(ex, v, pos, &items))
        return false;
    bool case_sensitive = tvalue_truth(arg(args, 0, "case_sensitive"));
    const json_t *attr = arg(args, 1, "attribute");
    json_t *kept = json_array(), *seen = json_array();
    bool ok = kept && seen;
    for (size_t i = 0; ok && i < json_array_size(items); i++) {
        json_t *item = json_array_get(items, i);
        json_t *key = order_key(order_base(item, ORDER_ITEM, attr), case_sensitive);
        bool dup = false;
        ok = key && jv_charge(ex, json_array_size(seen), pos);
        for (size_t k = 0; ok && !dup && k < json_array_size(seen); k++)
            ok = jv_equal(ex, key, json_array_get(seen, k), pos, &dup);
        if (ok && !dup)
            ok = json_array_append(seen, key) == 0 && json_array_append(kept, item) == 0;
        json_decref(key);
    }
    json_decref(items);
    json_decref(seen);
    if (!ok) {
        json_decref(kept);
        return ex->sb->failed ? false : jv_oom(ex, pos);
    }
    *out = kept;
    return true;
}

/* ---- jinja2's less common filters ---- */

/* An attribute argument as attribute_of's path: a string, or an int as its digits. */
static bool attribute_path(jexec *ex, const json_t *attr, size_t pos, char *buf, size_t size,
                           const char **path)
{
    *path = NULL;
    if (!attr || json_is_null(attr))
        return true;
    if (json_is_string(attr))
        *path = json_string_value(attr);
    else if (json_is_integer(attr))
        *path = (snprintf(buf, size, "%lld", (long long)json_integer_value(attr)), buf);
    else
        return tsandbox_fail(ex->sb, pos, "attribute must be a string or an integer");
    return true;
}

/* sum(attribute=none, start=0): Python's sum of numbers, or of lists from a list start. */
static bool sum_items(jexec *ex, json_t *v, const jargs *args, size_t pos, json_t **out)
{
    char buf[32];
    const char *path;
    if (!attribute_path(ex, arg(args, 0, "attribute"), pos, buf, sizeof buf, &path))
        return false;
    json_t *items;
    if (!as_list(ex, v, pos, &items))
        return false;
    json_t *start = arg(args, 1, "start");
    bool ok = true;
    if (json_is_array(start)) { /* list + list: the items joined */
        json_t *joined = json_copy(start);
        ok = joined && jv_charge(ex, json_array_size(start), pos);
        for (size_t i = 0; ok && i < json_array_size(items); i++) {
            json_t *item = json_array_get(items, i);
            item = path ? attribute_of(item, path) : item;
            if (!json_is_array(item))
                ok = tsandbox_fail(ex->sb, pos, "can only concatenate list (not \"%s\") to list",
                                   jv_type_name(item));
            else
                ok = jv_may_insert(ex, joined, NULL, json_array_size(item), pos) &&
                     jv_charge(ex, json_array_size(item), pos) &&
                     (json_array_extend(joined, item) == 0 || jv_oom(ex, pos));
        }
        json_decref(items);
        if (!ok) {
            json_decref(joined);
            return ex->sb->failed ? false : jv_oom(ex, pos);
        }
        *out = joined;
        return true;
    }
    if (json_is_string(start)) {
        json_decref(items);
        return tsandbox_fail(ex->sb, pos, "sum() can't sum strings [use ''.join(seq) instead]");
    }
    if (start && !orders_as_number(start)) {
        json_decref(items);
        return tsandbox_fail(ex->sb, pos, "unsupported operand type(s) for +: '%s' and 'int'",
                             jv_type_name(start));
    }
    /* ints stay ints until a float joins, as in Python */
    bool is_real = json_is_real(start);
    long long total = start && !is_real ? (long long)number_or_bool(start) : 0;
    double real_total = is_real ? json_real_value(start) : 0;
    for (size_t i = 0; ok && i < json_array_size(items); i++) {
        json_t *item = json_array_get(items, i);
        item = path ? attribute_of(item, path) : item;
        const char *left = is_real ? "float" : "int";
        if (!orders_as_number(item)) {
            ok = tsandbox_fail(ex->sb, pos, "unsupported operand type(s) for +: '%s' and '%s'",
                               left, item ? jv_type_name(item) : "Undefined");
        } else if (json_is_real(item) || is_real) {
            if (!is_real)
                real_total = (double)total;
            is_real = true;
            real_total += number_or_bool(item);
        } else {
            long long add = json_is_boolean(item) ? json_is_true(item) : json_integer_value(item);
            if (__builtin_add_overflow(total, add, &total))
                ok = tsandbox_fail(ex->sb, pos, "sum() overflows a 64-bit integer");
        }
        ok = ok && jv_charge(ex, 1, pos);
    }
    json_decref(items);
    if (!ok)
        return false;
    return set_out(ex, pos, is_real ? json_real(real_total) : json_integer(total), out);
}

/* groupby(attribute, default=none, case_sensitive=false): [grouper, items] pairs sorted by the
 * attribute, whose .grouper and .list name their items; the grouper is the first item's own
 * value (case kept) as in Jinja2. */
static bool group_by(jexec *ex, json_t *v, const jargs *args, size_t pos, json_t **out)
{
    char buf[32];
    const char *path;
    if (!attribute_path(ex, arg(args, 0, "attribute"), pos, buf, sizeof buf, &path))
        return false;
    if (!path)
        return tsandbox_fail(ex->sb, pos, "groupby needs an attribute");
    json_t *fallback = arg(args, 1, "default");
    if (json_is_null(fallback))
        fallback = NULL;
    bool case_sensitive = tvalue_truth(arg(args, 2, "case_sensitive"));
    json_t *items;
    if (!as_list(ex, v, pos, &items))
        return false;
    size_t n = json_array_size(items);
    sort_entry *entries = calloc(n ? n : 1, sizeof *entries);
    bool ok = entries ? jv_charge(ex, n * 8, pos) : jv_oom(ex, pos);
    for (size_t i = 0; i < n && ok; i++) {
        json_t *item = json_array_get(items, i), *base = attribute_of(item, path);
        base = base ? base : fallback;
        if (!base) {
            ok = tsandbox_fail(ex->sb, pos, "'%s object' has no attribute '%s'", jv_type_name(item),
                               path);
            break;
        }
        entries[i].item = item;
        entries[i].index = i;
        ok = (entries[i].key = order_key(base, case_sensitive)) || jv_oom(ex, pos);
    }
    if (ok)
        qsort(entries, n, sizeof *entries, compare_entries);
    json_t *groups = ok ? json_array() : NULL;
    ok = ok && (groups || jv_oom(ex, pos));
    json_t *members = NULL;
    for (size_t i = 0; i < n && ok; i++) {
        bool same = false;
        if (i > 0)
            ok = jv_equal(ex, entries[i - 1].key, entries[i].key, pos, &same);
        if (ok && !same) {
            json_t *grouper = attribute_of(entries[i].item, path);
            members = json_array();
            json_t *pair =
                members ? json_pack("[Oo]", grouper ? grouper : fallback, members) : NULL;
            ok = (pair && json_array_append_new(groups, pair) == 0) || jv_oom(ex, pos);
            ok = ok && jv_hold(ex, &ex->groups, pair, pos);
        }
        ok = ok && (json_array_append(members, entries[i].item) == 0 || jv_oom(ex, pos));
    }
    for (size_t i = 0; entries && i < n; i++)
        json_decref(entries[i].key);
    free(entries);
    json_decref(items);
    if (!ok) {
        json_decref(groups);
        return false;
    }
    *out = groups;
    return true;
}

/* batch(linecount, fill_with=none): lists of linecount items, the last filled when asked.
 * As in Jinja2 a batch closes when it holds linecount items, so 0 gives an empty first
 * batch and a negative count one batch of everything. */
static bool batch_items(jexec *ex, json_t *v, const jargs *args, size_t pos, json_t **out)
{
    const json_t *count = arg(args, 0, "linecount");
    if (!json_is_integer(count))
        return tsandbox_fail(ex->sb, pos, "batch() needs an integer linecount");
    long long per = json_integer_value(count);
    json_t *fill = arg(args, 1, "fill_with");
    if (json_is_null(fill))
        fill = NULL;
    json_t *items;
    if (!as_list(ex, v, pos, &items))
        return false;
    json_t *batches = json_array(), *current = json_array();
    bool ok = (batches && current) || jv_oom(ex, pos);
    for (size_t i = 0; ok && i < json_array_size(items); i++) {
        if (per >= 0 && json_array_size(current) == (unsigned long long)per) {
            ok = json_array_append_new(batches, current) == 0 || jv_oom(ex, pos);
            current = ok ? json_array() : NULL;
            ok = ok && (current || jv_oom(ex, pos));
        }
        ok = ok && jv_charge(ex, 1, pos) &&
             (json_array_append(current, json_array_get(items, i)) == 0 || jv_oom(ex, pos));
    }
    if (ok && json_array_size(current)) {
        if (fill && per > 0 && json_array_size(current) < (unsigned long long)per) {
            size_t missing = (size_t)per - json_array_size(current);
            ok = jv_may_insert(ex, current, fill, missing, pos) && jv_charge(ex, missing, pos);
            for (size_t i = 0; ok && i < missing; i++)
                ok = json_array_append(current, fill) == 0 || jv_oom(ex, pos);
        }
        ok = ok && (json_array_append(batches, current) == 0 || jv_oom(ex, pos));
    }
    json_decref(current);
    json_decref(items);
    if (!ok) {
        json_decref(batches);
        return false;
    }
    *out = batches;
    return true;
}

/* slice(slices, fill_with=none): the items cut into that many columns, the first ones a
 * longer by one where they do not divide evenly, the shorter ones filled when asked. */
static bool slice_items(jexec *ex, json_t *v, const jargs *args, size_t pos, json_t **out)
{
    const json_t *count = arg(args, 0, "slices");
    if (!json_is_integer(count))
        return tsandbox_fail(ex->sb, pos, "slice() needs an integer count");
    long long slices = json_integer_value(count);
    if (slices == 0)
        return tsandbox_fail(ex->sb, pos, "integer division or modulo by zero");
    json_t *fill = arg(args, 1, "fill_with");
    if (json_is_null(fill))
        fill = NULL;
    json_t *items;
    if (!as_list(ex, v, pos, &items))
        return false;
    json_t *columns = json_array();
    bool ok = columns ? slices < 0 || jv_charge(ex, (size_t)slices, pos) : jv_oom(ex, pos);
    size_t length = json_array_size(items);
    size_t per = slices > 0 ? length / (size_t)slices : 0;
    size_t extra = slices > 0 ? length % (size_t)slices : 0;
    size_t start = 0;
    for (long long k = 0; ok && k < slices; k++) {
        size_t end = start + per + ((size_t)k < extra);
        json_t *column = json_array();
        ok = (column && json_array_append_new(columns, column) == 0) || jv_oom(ex, pos);
        for (size_t i = start; ok && i < end; i++)
            ok = json_array_append(column, json_array_get(items, i)) == 0 || jv_oom(ex, pos);
        if (ok && fill && (size_t)k >= extra)
            ok = jv_may_insert(ex, column, fill, 1, pos) &&
                 (json_array_append(column, fill) == 0 || jv_oom(ex, pos));
        start = end;
    }
    json_decref(items);
    if (!ok) {
        json_decref(columns);
        return false;
    }
    *out = columns;
    return true;
}

/* attr(name): Python's getattr only (a dict's method, never its item), as in Jinja2. */
static bool attr_of(jexec *ex, json_t *v, const json_t *name, size_t pos, json_t **out)
{
    if (!v)
        return tsandbox_fail(ex->sb, pos, "attr() got an undefined value");
    tbuf text;
    if (!to_text(ex, name, pos, &text))
        return false;
    bool found;
    bool ok = jv_python_attr(ex, v, text.data, pos, &found, out);
    tbuf_free(&text);
    return ok;
}

/* truncate(length=255, killwords=false, end='...', leeway=5), lengths in code points. */
static bool truncate_text(jexec *ex, json_t *v, const jargs *args, size_t pos, json_t **out)
{
    const json_t *length = arg(args, 0, "length"), *end = arg(args, 2, "end"),
                 *leeway = arg(args, 3, "leeway");
    if ((length && !json_is_integer(length)) ||
        (leeway && !json_is_null(leeway) && !json_is_integer(leeway)))
        return tsandbox_fail(ex->sb, pos, "truncate() length and leeway must be integers");
    if (end && !json_is_string(end))
        return tsandbox_fail(ex->sb, pos, "truncate() end must be a string");
    long long want = length ? json_integer_value(length) : 255;
    long long slack = json_is_integer(leeway) ? json_integer_value(leeway) : 5;
    const char *tail = end ? json_string_value(end) : "...";
    size_t tail_bytes = end ? json_string_length(end) : 3;
    long long tail_chars = (long long)jv_utf8_count(tail, tail_bytes);
    if (want < tail_chars)
        return tsandbox_fail(ex->sb, pos, "expected length >= %lld, got %lld", tail_chars, want);
    if (slack < 0)
        return tsandbox_fail(ex->sb, pos, "expected leeway >= 0, got %lld", slack);
    if (!v)
        return true;
    if (!json_is_string(v))
        return tsandbox_fail(ex->sb, pos, "object of type '%s' has no len()", jv_type_name(v));
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    long long chars = (long long)jv_utf8_count(s, n);
    if (chars <= want || chars - want <= slack)
        return set_out(ex, pos, json_incref(v), out);
    size_t keep = jv_utf8_offset(s, n, (size_t)(want - tail_chars));
    if (!tvalue_truth(arg(args, 1, "killwords"))) { /* up to the last space, as rsplit(' ', 1) */
        const char *space = NULL;
        for (size_t i = 0; i < keep; i++)
            space = s[i] == ' ' ? s + i : space;
        keep = space ? (size_t)(space - s) : keep;
    }
    tbuf text;
    tbuf_init(&text, ex->sb->max_bytes);
    if (!tbuf_append(&text, s, keep) || !tbuf_append(&text, tail, tail_bytes)) {
        tbuf_free(&text);
        return tsandbox_fail(ex->sb, pos, "string too long");
    }
    return jv_string_from_buf(ex, &text, pos, out);
}

/* Whether the code point at s[i] is in Python's \w: a letter or number (str.isalnum) or _;
 * *width its bytes (1 for a byte that is not UTF-8). */
static bool word_char_at(const char *s, size_t n, size_t i, size_t *width)
{
    utf8proc_int32_t cp;
    utf8proc_ssize_t len =
        utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
    if (len <= 0) {
        *width = 1;
        return false;
    }
    *width = (size_t)len;
    if (cp == '_')
        return true;
    switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
        return true;
    default:
        return false;
    }
}

/* wordcount: runs of word characters in str(value), as Jinja2's \w+ finds them. */
static bool word_count(jexec *ex, json_t *v, size_t pos, json_t **out)
{
    tbuf text;
    if (!to_text(ex, v, pos, &text))
        return false;
    size_t words = 0, width;
    bool in_word = false;
    for (size_t i = 0; i < text.len; i += width) {
        bool word = word_char_at(text.data, text.len, i, &width);
        words += word && !in_word;
        in_word = word;
    }
    size_t bytes = text.len;
    tbuf_free(&text);
    return jv_charge(ex, bytes / 4096, pos) &&
           set_out(ex, pos, json_integer((json_int_t)words), out);
}

/* center(width=80): Python's str.center, the odd space on the left when width is odd. */
static bool center_text(jexec *ex, json_t *v, const json_t *width, size_t pos, json_t **out)
{
    if (width && !json_is_integer(width))
        return tsandbox_fail(ex->sb, pos, "center() width must be an integer");
    long long w = width ? json_integer_value(width) : 80;
    tbuf text, result;
    if (!to_text(ex, v, pos, &text))
        return false;
    long long chars = (long long)jv_utf8_count(text.data, text.len);
    if (w <= chars)
        return jv_string_from_buf(ex, &text, pos, out);
    long long margin = w - chars, left = margin / 2 + (margin & w & 1);
    tbuf_init(&result, ex->sb->max_bytes);
    bool ok = (unsigned long long)margin <= ex->sb->max_bytes && jv_charge(ex, (size_t)margin, pos);
    for (long long i = 0; ok && i < left; i++)
        ok = tbuf_putc(&result, ' ');
    ok = ok && tbuf_append(&result, text.data, text.len);
    for (long long i = left; ok && i < margin; i++)
        ok = tbuf_putc(&result, ' ');
    tbuf_free(&text);
    if (!ok) {
        tbuf_free(&result);
        return ex->sb->failed ? false : tsandbox_fail(ex->sb, pos, "string too long");
    }
    return jv_string_from_buf(ex, &result, pos, out);
}

/* HTML's legacy character references, the ones valid without a closing ';': the names of
 * U+00A0 to U+00FF in code point order, then the others with their code points. */
static const char *const latin1_names[96] = {
    "nbsp",   "iexcl",  "cent",   "pound",  "curren", "yen",    "brvbar", "sect",
    "uml",    "copy",   "ordf",   "laquo",  "not",    "shy",    "reg",    "macr",
    "deg",    "plusmn", "sup2",   "sup3",   "acute",  "micro",  "para",   "middot",
    "cedil",  "sup1",   "ordm",   "raquo",  "frac14", "frac12", "frac34", "iquest",
    "Agrave", "Aacute", "Acirc",  "Atilde", "Auml",   "Aring",  "AElig",  "Ccedil",
    "Egrave", "Eacute", "Ecirc",  "Euml",   "Igrave", "Iacute", "Icirc",  "Iuml",
    "ETH",    "Ntilde", "Ograve", "Oacute", "Ocirc",  "Otilde", "Ouml",   "times",
    "Oslash", "Ugrave", "Uacute", "Ucirc",  "Uuml",   "Yacute", "THORN",  "szlig",
    "agrave", "aacute", "acirc",  "atilde", "auml",   "aring",  "aelig",  "ccedil",
    "egrave", "eacute", "ecirc",  "euml",   "igrave", "iacute", "icirc",  "iuml",
    "eth",    "ntilde", "ograve", "oacute", "ocirc",  "otilde", "ouml",   "divide",
    "oslash", "ugrave", "uacute", "ucirc",  "uuml",   "yacute", "thorn",  "yuml"};
static const struct {
    const char *name;
    unsigned code_point;
} other_legacy_names[] = {{"amp", 0x26},  {"AMP", 0x26}, {"lt", 0x3c},   {"LT", 0x3c},
                          {"gt", 0x3e},   {"GT", 0x3e},  {"quot", 0x22}, {"QUOT", 0x22},
                          {"COPY", 0xa9}, {"REG", 0xae}};

/* The code point of a legacy reference name of n bytes; 0 when it is not one. */
static unsigned legacy_reference(const char *name, size_t n)
{
    for (size_t i = 0; i < 96; i++)
        if (strlen(latin1_names[i]) == n && !memcmp(latin1_names[i], name, n))
            return 0xa0 + (unsigned)i;
    for (size_t i = 0; i < sizeof other_legacy_names / sizeof other_legacy_names[0]; i++)
        if (strlen(other_legacy_names[i].name) == n && !memcmp(other_legacy_names[i].name, name, n))
            return other_legacy_names[i].code_point;
    return 0;
}

/* The text a numeric reference's code point stands for, as Python's html.unescape reads it:
 * NUL, surrogates and code points past Unicode are U+FFFD, 0x80-0x9F are Windows-1252's
 * characters, and the control and noncharacter code points are dropped (0). */
static unsigned numeric_reference(unsigned long cp)
{
    static const unsigned windows_1252[32] = {
        0x20ac, 0x81,   0x201a, 0x0192, 0x201e, 0x2026, 0x2020, 0x2021, 0x02c6, 0x2030, 0x0160,
        0x2039, 0x0152, 0x8d,   0x017d, 0x8f,   0x90,   0x2018, 0x2019, 0x201c, 0x201d, 0x2022,
        0x2013, 0x2014, 0x02dc, 0x2122, 0x0161, 0x203a, 0x0153, 0x9d,   0x017e, 0x0178};
    if (cp == 0 || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
        return 0xfffd;
    if (cp >= 0x80 && cp <= 0x9f)
        return windows_1252[cp - 0x80];
    if (cp == 0x0d)
        return cp;
    if ((cp >= 0x01 && cp <= 0x08) || cp == 0x0b || (cp >= 0x0e && cp <= 0x1f) || cp == 0x7f ||
        (cp >= 0xfdd0 && cp <= 0xfdef) || (cp & 0xfffe) == 0xfffe)
        return 0;
    return (unsigned)cp;
}

static size_t put_utf8(unsigned cp, char utf8[4])
{
    if (cp < 0x80) {
        utf8[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        utf8[0] = (char)(0xc0 | (cp >> 6));
        utf8[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        utf8[0] = (char)(0xe0 | (cp >> 12));
        utf8[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        utf8[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    utf8[0] = (char)(0xf0 | (cp >> 18));
    utf8[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    utf8[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    utf8[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* The reference at s (s[0] is '&') read into out as html.unescape reads it; the bytes of s
 * it spans, 0 when it is left as written. A name is read when it is a legacy one (with or
 * without ';', or a legacy prefix of a longer name without ';') or &apos;; HTML's other
 * named references are left as written. */
static size_t html_reference(const char *s, size_t n, tbuf *out, bool *ok)
{
    char utf8[4];
    if (n > 2 && s[1] == '#') {
        bool hex = s[2] == 'x' || s[2] == 'X';
        size_t i = hex ? 3 : 2, first = i;
        unsigned long cp = 0;
        for (; i < n && (hex ? isxdigit((unsigned char)s[i]) : isdigit((unsigned char)s[i])); i++) {
            unsigned digit = isdigit((unsigned char)s[i]) ? (unsigned)(s[i] - '0')
                                                          : (unsigned)((s[i] | 0x20) - 'a' + 10);
            cp = cp > 0x10ffff ? cp : cp * (hex ? 16 : 10) + digit;
        }
        if (i == first)
            return 0;
        unsigned c = numeric_reference(cp);
        *ok = !c || tbuf_append(out, utf8, put_utf8(c, utf8));
        return i + (i < n && s[i] == ';');
    }
    size_t len = 0;
    while (1 + len < n && len < 32 && !strchr("\t\n\f <&#;", s[1 + len]))
        len++;
    bool semicolon = 1 + len < n && s[1 + len] == ';';
    unsigned c = legacy_reference(s + 1, len);
    if (!c && semicolon && len == 4 && !memcmp(s + 1, "apos", 4))
        c = '\'';
    if (c) {
        *ok = tbuf_append(out, utf8, put_utf8(c, utf8));
        return 1 + len + semicolon;
    }
    if (semicolon) /* perhaps one of HTML's names this table lacks */
        return 0;
    for (size_t prefix = len; prefix-- > 2;)
        if ((c = legacy_reference(s + 1, prefix))) {
            *ok = tbuf_append(out, utf8, put_utf8(c, utf8));
            return 1 + prefix;
        }
    return 0;
}

/* Cut every span from an open mark to the first close mark after it, in place. */
static size_t cut_spans(char *s, size_t n, const char *open, const char *close)
{
    size_t on = strlen(open), cn = strlen(close), from = 0;
    for (;;) {
        char *a = memmem(s + from, n - from, open, on);
        char *b = a ? memmem(a, n - (size_t)(a - s), close, cn) : NULL;
        if (!b)
            return n;
        size_t cut = (size_t)(b - a) + cn;
        memmove(a, b + cn, n - (size_t)(b - s) - cn);
        n -= cut;
        from = (size_t)(a - s);
    }
}

/* striptags: markupsafe's Markup.striptags — comments and tags cut, whitespace runs one
 * space, then character references read (html_reference). A plain str, as markupsafe's
 * unescape gives. */
static bool strip_tags(jexec *ex, json_t *v, size_t pos, json_t **out)
{
    tbuf text, result;
    if (!to_text(ex, v, pos, &text))
        return false;
    size_t n = cut_spans(text.data, text.len, "<!--", "-->");
    n = cut_spans(text.data, n, "<", ">");
    tbuf_init(&result, ex->sb->max_bytes);
    bool ok = jv_charge(ex, text.len / 256, pos);
    size_t i = 0, w;
    while (ok) {
        while (i < n && (w = jstr_space_at(text.data, n, i)))
            i += w;
        if (i >= n)
            break;
        if (result.len)
            ok = tbuf_putc(&result, ' ');
        while (ok && i < n && !jstr_space_at(text.data, n, i)) {
            size_t ref =
                text.data[i] == '&' ? html_reference(text.data + i, n - i, &result, &ok) : 0;
            ok = ok && (ref || tbuf_putc(&result, text.data[i]));
            i += ref ? ref : 1;
        }
    }
    tbuf_free(&text);
    if (!ok) {
        tbuf_free(&result);
        return ex->sb->failed ? false : tsandbox_fail(ex->sb, pos, "string too long");
    }
    return jv_string_from_buf(ex, &result, pos, out);
}

/* filesizeformat(binary=false): a byte count in kB, MB… (or KiB, MiB…) to one decimal. */
static bool file_size(jexec *ex, json_t *v, const json_t *binary, size_t pos, json_t **out)
{
    double bytes;
    if (orders_as_number(v)) {
        bytes = number_or_bool(v);
    } else if (json_is_string(v)) {
        char *end;
        bytes = strtod(json_string_value(v), &end);
        while (end && jstr_space_at(end, strlen(end), 0))
            end += jstr_space_at(end, strlen(end), 0);
        if (end == json_string_value(v) || *end)
            return tsandbox_fail(ex->sb, pos, "could not convert string to float: '%s'",
                                 json_string_value(v));
    } else {
        return tsandbox_fail(ex->sb, pos, "float() argument must be a string or a real number");
    }
    bool bin = tvalue_truth(binary);
    double base = bin ? 1024 : 1000;
    static const char *const units[2][8] = {
        {"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"},
        {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"}};
    char text[400];
    if (bytes == 1) {
        snprintf(text, sizeof text, "1 Byte");
    } else if (bytes < base) { /* int(bytes): the whole part, every digit of it */
        snprintf(text, sizeof text, "%.0f Bytes", trunc(bytes) == 0 ? 0.0 : trunc(bytes));
    } else {
        double unit = base * base;
        int i = 0;
        while (i < 7 && !(bytes < unit)) {
            unit *= base;
            i++;
        }
        double shown = base * bytes / unit;
        if (isnan(shown) || isinf(shown))
            snprintf(text, sizeof text, "%s %s", isnan(shown) ? "nan" : "inf", units[bin][i]);
        else
            snprintf(text, sizeof text, "%.1f %s", shown, units[bin][i]);
    }
    return jv_string(ex, text, strlen(text), pos, out);
}

/* Percent-encoding of str(v) as Jinja2's urlencode writes it: UTF-8 bytes but letters,
 * digits and _.-~ (and / outside a query) as %XX, a space as + in a query. */
static bool url_quote(jexec *ex, const json_t *v, bool for_query, size_t pos, tbuf *out)
{
    tbuf text;
    if (!to_text(ex, v, pos, &text))
        return false;
    bool ok = true;
    for (size_t i = 0; i < text.len && ok; i++) {
        unsigned char c = (unsigned char)text.data[i];
        if (isalnum(c) || strchr("_.-~", c) || (c == '/' && !for_query)) {
            ok = tbuf_putc(out, (char)c);
        } else if (c == ' ' && for_query) {
            ok = tbuf_putc(out, '+');
        } else {
            char hex[4];
            snprintf(hex, sizeof hex, "%%%02X", c);
            ok = tbuf_append(out, hex, 3);
        }
    }
    tbuf_free(&text);
    return ok || tsandbox_fail(ex->sb, pos, "string too long");
}

/* urlencode: a string quoted for a URL path; a dict, or a list of pairs, as a query. */
static bool url_encode(jexec *ex, json_t *v, size_t pos, json_t **out)
{
    tbuf result;
    tbuf_init(&result, ex->sb->max_bytes);
    bool ok = true;
    if (v && (json_is_string(v) || !(json_is_array(v) || json_is_object(v)))) {
        ok = url_quote(ex, v, false, pos, &result);
    } else if (v) {
        json_t *pairs;
        if (!(json_is_object(v) ? items_of(ex, v, pos, &pairs) : as_list(ex, v, pos, &pairs)))
            return false;
        for (size_t i = 0; ok && i < json_array_size(pairs); i++) {
            json_t *pair = json_array_get(pairs, i);
            if (!json_is_array(pair) || json_array_size(pair) != 2)
                ok = tsandbox_fail(ex->sb, pos, "urlencode() needs a dict or key, value pairs");
            else
                ok = (!i || tbuf_putc(&result, '&') ||
                      tsandbox_fail(ex->sb, pos, "string too long")) &&
                     url_quote(ex, json_array_get(pair, 0), true, pos, &result) &&
                     (tbuf_putc(&result, '=') || tsandbox_fail(ex->sb, pos, "string too long")) &&
                     url_quote(ex, json_array_get(pair, 1), true, pos, &result) &&
                     jv_charge(ex, 1, pos);
        }
        json_decref(pairs);
    }
    return ok ? jv_string_from_buf(ex, &result, pos, out) : (tbuf_free(&result), false);
}

/* str(v) escaped for HTML, appended to out, unless v is Markup already and may stay. */
static bool escape_value(jexec *ex, const json_t *v, bool keep_markup, size_t pos, tbuf *out)
{
    bool safe = false;
    tbuf text;
    if (!to_text(ex, v, pos, &text))
        return false;
    bool ok = (!keep_markup || jv_is_markup(ex, v, pos, &safe)) &&
              ((safe ? tbuf_append(out, text.data, text.len)
                     : jv_escape_html(out, text.data, text.len)) ||
               tsandbox_fail(ex->sb, pos, "string too long"));
    tbuf_free(&text);
    return ok;
}

/* escape / e (Markup left as it is) and forceescape (escaped again): Markup either way. */
static bool escape_filter(jexec *ex, json_t *v, bool force, size_t pos, json_t **out)
{
    tbuf text;
    tbuf_init(&text, ex->sb->max_bytes);
    json_t *plain = NULL;
    bool ok = escape_value(ex, v, !force, pos, &text) &&
              jv_string_from_buf(ex, &text, pos, &plain) && jv_markup(ex, plain, pos, out);
    if (!plain)
        tbuf_free(&text);
    json_decref(plain);
    return ok;
}

/* xmlattr(autospace=true): a dict as XML attributes, none values left out; a key with
 * whitespace, / > or = is refused, as Jinja2 refuses it. */
static bool xml_attributes(jexec *ex, json_t *v, const jargs *args, size_t pos, json_t **out)
{
    if (!json_is_object(v))
        return tsandbox_fail(ex->sb, pos, "xmlattr() needs a mapping, not %s",
                             v ? jv_type_name(v) : "Undefined");
    bool autospace = !arg_given(args, 0, "autospace") || tvalue_truth(arg(args, 0, "autospace"));
    json_t *pairs;
    if (!items_of(ex, v, pos, &pairs))
        return false;
    tbuf result;
    tbuf_init(&result, ex->sb->max_bytes);
    bool ok = true;
    for (size_t i = 0; ok && i < json_array_size(pairs); i++) {
        json_t *key = json_array_get(json_array_get(pairs, i), 0);
        json_t *value = json_array_get(json_array_get(pairs, i), 1);
        if (json_is_null(value))
            continue;
        tbuf name;
        if (!json_is_string(key)) {
            ok = tsandbox_fail(ex->sb, pos, "expected string or bytes-like object, got '%s'",
                               jv_type_name(key));
            break;
        }
        if (!to_text(ex, key, pos, &name)) {
            ok = false;
            break;
        }
        for (size_t k = 0; ok && k < name.len; k++)
            if (strchr(" \t\n\r\f\v/>=", name.data[k]) && name.data[k])
                ok = tsandbox_fail(ex->sb, pos, "Invalid character in attribute name: '%s'",
                                   name.data);
        if (ok && !((!(autospace || result.len) || tbuf_putc(&result, ' ')) &&
                    jv_escape_html(&result, name.data, name.len) && tbuf_append(&result, "=\"", 2)))
            ok = tsandbox_fail(ex->sb, pos, "string too long");
        ok = ok && escape_value(ex, value, true, pos, &result) &&
             (tbuf_putc(&result, '"') || tsandbox_fail(ex->sb, pos, "string too long"));
        tbuf_free(&name);
    }
    json_decref(pairs);
    return ok ? jv_string_from_buf(ex, &result, pos, out) : (tbuf_free(&result), false);
}

/* ---- the format filter: Python's printf-style `text % args` ---- */

/* One conversion's flags, width and precision (-1: not given). */
typedef struct percent_spec {
    bool left, zero, plus, space, alternate;
    long long width, precision;
    char type;
} percent_spec;

/* text padded to spec's width in code points, spaces on the side the '-' flag says. */
static bool pad_text(jexec *ex, const char *text, size_t n, const percent_spec *spec, size_t pos,
                     tbuf *out)
{
    size_t chars = jv_utf8_count(text, n);
    size_t pad = spec->width > 0 && (unsigned long long)spec->width > chars
                     ? (size_t)spec->width - chars
                     : 0;
    bool ok = jv_charge(ex, pad / 64, pos);
    for (size_t i = 0; ok && !spec->left && i < pad; i++)
        ok = tbuf_putc(out, ' ');
    ok = ok && tbuf_append(out, text, n);
    for (size_t i = 0; ok && spec->left && i < pad; i++)
        ok = tbuf_putc(out, ' ');
    return ok || ex->sb->failed || tsandbox_fail(ex->sb, pos, "string too long");
}

/* ascii(v): repr(v) with each non-ASCII code point as \xhh, \uhhhh or \Uhhhhhhhh. */
static bool ascii_repr(const char *repr, size_t n, tbuf *out)
{
    bool ok = true;
    for (size_t i = 0; i < n && ok;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t len =
            utf8proc_iterate((const utf8proc_uint8_t *)repr + i, (utf8proc_ssize_t)(n - i), &cp);
        if (len <= 0 || cp < 0x80) {
            ok = tbuf_putc(out, repr[i++]);
            continue;
        }
        char escaped[16];
        snprintf(escaped, sizeof escaped,
                 cp < 0x100     ? "\\x%02x"
                 : cp < 0x10000 ? "\\u%04x"
                                : "\\U%08x",
                 (unsigned)cp);
        ok = tbuf_puts(out, escaped);
        i += (size_t)len;
    }
    return ok;
}

/* A number for %d %i %u %x %X %o %c (integral) or %e %f %g (real), with Python's errors. */
static bool percent_number(jexec *ex, const json_t *v, const percent_spec *spec, size_t pos,
                           tbuf *out)
{
    char type = spec->type;
    bool integral = strchr("diuxXoc", type) != NULL;
    if (type == 'c' && json_is_string(v)) {
        if (jv_utf8_count(json_string_value(v), json_string_length(v)) != 1)
            return tsandbox_fail(ex->sb, pos, "%%c requires int or char");
        return pad_text(ex, json_string_value(v), json_string_length(v), spec, pos, out);
    }
    if (!orders_as_number(v) || (strchr("xXoc", type) && json_is_real(v))) {
        const char *name = v ? jv_type_name(v) : "Undefined";
        if (type == 'c')
            return tsandbox_fail(ex->sb, pos, "%%c requires int or char");
        if (strchr("xXo", type))
            return tsandbox_fail(ex->sb, pos, "%%%c format: an integer is required, not %s", type,
                                 name);
        if (integral)
            return tsandbox_fail(ex->sb, pos, "%%%c format: a real number is required, not %s",
                                 type, name);
        return tsandbox_fail(ex->sb, pos, "must be real number, not %s", name);
    }
    if (type == 'c') {
        long long cp = json_is_boolean(v) ? json_is_true(v) : json_integer_value(v);
        if (cp < 0 || cp > 0x10ffff)
            return tsandbox_fail(ex->sb, pos, "%%c arg not in range(0x110000)");
        char utf8[4];
        return pad_text(ex, utf8, put_utf8((unsigned)cp, utf8), spec, pos, out);
    }
    if (integral) {
        double d = number_or_bool(v);
        long long i = json_is_integer(v) ? json_integer_value(v) : (long long)d;
        if (json_is_real(v) && !(fabs(d) < 9e18))
            return tsandbox_fail(ex->sb, pos, "%%%c format: number too large", type);
        /* Python prints the sign and magnitude, and 0o for an alternate octal */
        unsigned long long magnitude = i < 0 ? 0ull - (unsigned long long)i : (unsigned long long)i;
        char digits[32];
        const char *prefix = !spec->alternate ? ""
                             : type == 'o'    ? "0o"
                             : type == 'x'    ? "0x"
                             : type == 'X'    ? "0X"
                                              : "";
        snprintf(digits, sizeof digits,
                 type == 'o'   ? "%llo"
                 : type == 'x' ? "%llx"
                 : type == 'X' ? "%llX"
                               : "%llu",
                 magnitude);
        const char *sign = i < 0 ? "-" : spec->plus ? "+" : spec->space ? " " : "";
        size_t body = strlen(digits),
               min_digits = spec->precision > 0 ? (size_t)spec->precision : 0;
        size_t head = strlen(sign) + strlen(prefix),
               zeros = min_digits > body ? min_digits - body : 0;
        if (spec->zero && !spec->left && spec->width > 0 &&
            (size_t)spec->width > head + body + zeros)
            zeros = (size_t)spec->width - head - body;
        tbuf number;
        tbuf_init(&number, ex->sb->max_bytes);
        bool ok = tbuf_puts(&number, sign) && tbuf_puts(&number, prefix);
        for (size_t k = 0; ok && k < zeros; k++)
            ok = tbuf_putc(&number, '0');
        ok = ok && tbuf_puts(&number, digits);
        if (ok)
            ok = pad_text(ex, number.data, number.len, spec, pos, out);
        else
            ok = tsandbox_fail(ex->sb, pos, "string too long");
        tbuf_free(&number);
        return ok;
    }
    /* a real number: C's printf conversion is Python's for e, f and g */
    if (spec->width > (long long)ex->sb->max_bytes || spec->width > INT_MAX ||
        spec->precision > (long long)ex->sb->max_bytes || spec->precision > INT_MAX)
        return tsandbox_fail(ex->sb, pos, "string too long");
    char conv[16], *c = conv;
    *c++ = '%';
    if (spec->left)
        *c++ = '-';
    if (spec->zero && !spec->left)
        *c++ = '0';
    if (spec->plus)
        *c++ = '+';
    else if (spec->space)
        *c++ = ' ';
    if (spec->alternate)
        *c++ = '#';
    memcpy(c, "*.*", 3);
    c += 3;
    *c++ = type;
    *c = '\0';
    int width = spec->width > 0 ? (int)spec->width : 0;
    int precision = spec->precision >= 0 ? (int)spec->precision : 6;
    double d = number_or_bool(v);
    int n = snprintf(NULL, 0, conv, width, precision, d);
    if (n < 0 || (size_t)n > ex->sb->max_bytes)
        return tsandbox_fail(ex->sb, pos, "string too long");
    char *text = malloc((size_t)n + 1);
    if (!text)
        return jv_oom(ex, pos);
    snprintf(text, (size_t)n + 1, conv, width, precision, d);
    bool ok = jv_charge(ex, (size_t)n / 64, pos) &&
              (tbuf_append(out, text, (size_t)n) || tsandbox_fail(ex->sb, pos, "string too long"));
    free(text);
    return ok;
}

/* The value a conversion takes: the mapping's item for a %(key), else the next argument. */
static bool percent_argument(jexec *ex, const char *f, size_t n, size_t *i, const jargs *args,
                             const json_t *mapping, size_t *next, size_t pos, json_t **v)
{
    if (*i < n && f[*i] == '(') {
        const char *close = memchr(f + *i, ')', n - *i);
        if (!close)
            return tsandbox_fail(ex->sb, pos, "incomplete format key");
        if (!mapping)
            return tsandbox_fail(ex->sb, pos, "format requires a mapping");
        size_t start = *i + 1, len = (size_t)(close - f) - start;
        *i = (size_t)(close - f) + 1;
        const char *key;
        json_t *value;
        json_object_foreach((json_t *)mapping, key, value)
        {
            if (strlen(key) == len && !memcmp(key, f + start, len)) {
                *v = value;
                return true;
            }
        }
        return tsandbox_fail(ex->sb, pos, "KeyError: '%.*s'", (int)len, f + start);
    }
    if (mapping) { /* a mapping is one argument to a conversion without a key */
        if (*next > 0)
            return tsandbox_fail(ex->sb, pos, "not enough arguments for format string");
        (*next)++;
        *v = (json_t *)mapping;
        return true;
    }
    if (*next >= args->n)
        return tsandbox_fail(ex->sb, pos, "not enough arguments for format string");
    *v = args->pos[(*next)++];
    return true;
}

/* A width or precision: digits, or * taking the next argument (an int). */
static bool percent_count(jexec *ex, const char *f, size_t n, size_t *i, const jargs *args,
                          const json_t *mapping, size_t *next, size_t pos, long long *count)
{
    if (*i < n && f[*i] == '*') {
        (*i)++;
        if (mapping)
            return tsandbox_fail(ex->sb, pos, "* wants int");
        if (*next >= args->n)
            return tsandbox_fail(ex->sb, pos, "not enough arguments for format string");
        json_t *v = args->pos[(*next)++];
        if (!json_is_integer(v))
            return tsandbox_fail(ex->sb, pos, "* wants int");
        *count = json_integer_value(v);
        return true;
    }
    if (*i >= n || f[*i] < '0' || f[*i] > '9')
        return true;
    *count = 0;
    while (*i < n && f[*i] >= '0' && f[*i] <= '9') {
        if (*count > (long long)ex->sb->max_bytes)
            return tsandbox_fail(ex->sb, pos, "width too big");
        *count = *count * 10 + (f[(*i)++] - '0');
    }
    return true;
}

/* format(*args, **kwargs): str(value) % args, or % kwargs as a mapping, as Jinja2 does. */
static bool percent_format(jexec *ex, json_t *value, const jargs *args, size_t pos, json_t **out)
{
    const json_t *mapping = args->kw && json_object_size(args->kw) ? args->kw : NULL;
    if (mapping && args->n)
        return tsandbox_fail(ex->sb, pos,
                             "can't handle positional and keyword arguments at the same time");
    tbuf text, result;
    if (!to_text(ex, value, pos, &text))
        return false;
    tbuf_init(&result, ex->sb->max_bytes);
    const char *f = text.data;
    size_t n = text.len, next = 0;
    bool ok = true;
    for (size_t i = 0; ok && i < n;) {
        if (f[i] != '%') {
            size_t run = i;
            while (run < n && f[run] != '%')
                run++;
            ok = tbuf_append(&result, f + i, run - i) ||
                 tsandbox_fail(ex->sb, pos, "string too long");
            i = run;
            continue;
        }
        i++;
        json_t *v = NULL;
        percent_spec spec = {.width = -1, .precision = -1};
        bool keyed = i < n && f[i] == '(';
        if (keyed && !(ok = percent_argument(ex, f, n, &i, args, mapping, &next, pos, &v)))
            break;
        for (; i < n && strchr("-+ #0", f[i]) && f[i]; i++) {
            spec.left |= f[i] == '-';
            spec.plus |= f[i] == '+';
            spec.space |= f[i] == ' ';
            spec.alternate |= f[i] == '#';
            spec.zero |= f[i] == '0';
        }
        ok = percent_count(ex, f, n, &i, args, mapping, &next, pos, &spec.width);
        if (ok && spec.width < 0 && spec.width != -1) {
            spec.left = true;
            spec.width = -spec.width;
        }
        if (ok && i < n && f[i] == '.') {
            i++;
            spec.precision = 0;
            ok = percent_count(ex, f, n, &i, args, mapping, &next, pos, &spec.precision);
        }
        while (ok && i < n && strchr("hlL", f[i]) && f[i])
            i++;
        if (!ok)
            break;
        if (i >= n) {
            ok = tsandbox_fail(ex->sb, pos, "incomplete format");
            break;
        }
        spec.type = f[i++];
        if (spec.type == '%') {
            ok = tbuf_putc(&result, '%') || tsandbox_fail(ex->sb, pos, "string too long");
            continue;
        }
        if (!strchr("sradiuxXoeEfFgGc", spec.type) || !spec.type) {
            ok = tsandbox_fail(ex->sb, pos, "unsupported format character '%c' (0x%x) at index %zu",
                               spec.type, (unsigned char)spec.type, i - 1);
            break;
        }
        if (!keyed && !percent_argument(ex, f, n, &i, args, mapping, &next, pos, &v)) {
            ok = false;
            break;
        }
        ok = jv_charge(ex, 1, pos);
        if (ok && strchr("sra", spec.type)) {
            tbuf shown;
            tbuf_init(&shown, ex->sb->max_bytes);
            if (spec.type == 's') {
                ok = jv_str(ex, v, &shown, pos);
            } else {
                tbuf repr;
                tbuf_init(&repr, ex->sb->max_bytes);
                ok = (v ? tfmt_py_repr(&repr, v) : tbuf_puts(&repr, "Undefined")) &&
                     (spec.type == 'r' ? tbuf_append(&shown, repr.data ? repr.data : "", repr.len)
                                       : ascii_repr(repr.data ? repr.data : "", repr.len, &shown));
                tbuf_free(&repr);
                ok = ok || tsandbox_fail(ex->sb, pos, "string too long");
            }
            size_t keep = shown.len;
            if (ok && spec.precision >= 0 && shown.data)
                keep = jv_utf8_offset(shown.data, shown.len, (size_t)spec.precision);
            ok = ok && pad_text(ex, shown.data ? shown.data : "", keep, &spec, pos, &result);
            tbuf_free(&shown);
        } else if (ok) {
            ok = percent_number(ex, v, &spec, pos, &result);
        }
    }
    if (ok && !mapping && next < args->n)
        ok = tsandbox_fail(ex->sb, pos, "not all arguments converted during string formatting");
    tbuf_free(&text);
    return ok ? jv_string_from_buf(ex, &result, pos, out) : (tbuf_free(&result), false);
}

/* The filters and tests jfilter and jtest know, for the `filter` and `test` tests. */
static const char *const filter_names[] = {
    "abs",       "attr",    "batch",       "capitalize", "center",  "count",
    "d",         "default", "dictsort",    "e",          "escape",  "filesizeformat",
    "first",     "float",   "forceescape", "format",     "groupby", "indent",
    "int",       "items",   "join",        "last",       "length",  "list",
    "lower",     "map",     "max",         "min",        "reject",  "rejectattr",
    "replace",   "reverse", "round",       "safe",       "select",  "selectattr",
    "slice",     "sort",    "string",      "striptags",  "sum",     "title",
    "tojson",    "trim",    "truncate",    "unique",     "upper",   "urlencode",
    "wordcount", "xmlattr"};
static const char *const test_names[] = {
    "!=",       "<",        "<=",          "==",       ">",           ">=",       "boolean",
    "callable", "defined",  "divisibleby", "eq",       "equalto",     "escaped",  "even",
    "false",    "filter",   "float",       "ge",       "greaterthan", "gt",       "in",
    "integer",  "iterable", "le",          "lessthan", "lower",       "lt",       "mapping",
    "ne",       "none",     "number",      "odd",      "sameas",      "sequence", "string",
    "test",     "true",     "undefined",   "upper"};

static bool name_in(const json_t *v, const char *const *names, size_t n)
{
    for (size_t i = 0; json_is_string(v) && i < n; i++)
        if (!strcmp(json_string_value(v), names[i]))
            return true;
    return false;
}

bool jfilter(jexec *ex, const char *name, size_t pos, json_t *value, const jargs *args,
             json_t **out)
{
    *out = NULL;
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        json_t *fallback = arg(args, 0, "default_value");
        bool use = !value || (tvalue_truth(arg(args, 1, "boolean")) && !tvalue_truth(value));
        json_t *v = use ? fallback : value;
        if (use && !arg_given(args, 0, "default_value"))
            return set_out(ex, pos, json_string(""), out);
        *out = v ? json_incref(v) : NULL;
        return true;
    }
    if (tfmt_is_method(value) && strcmp(name, "string") != 0)
        return tsandbox_fail(ex->sb, pos, "filter '%s' cannot take a %s", name,
                             jv_type_name(value));
    if (!strcmp(name, "length") || !strcmp(name, "count"))
        return length_of(ex, value, pos, out);
    if (!strcmp(name, "tojson"))
        return to_json(ex, value, args, 0, pos, out);
    if (!strcmp(name, "items"))
        return items_of(ex, value, pos, out);
    if (!strcmp(name, "list"))
        return as_list(ex, value, pos, out);
    if (!strcmp(name, "first") || !strcmp(name, "last"))
        return first_last(ex, value, name[0] == 'l', pos, out);
    if (!strcmp(name, "join"))
        return join(ex, value, arg(args, 0, "d"), arg(args, 1, "attribute"), pos, out);
    if (!strcmp(name, "selectattr") || !strcmp(name, "rejectattr"))
        return select_items(ex, value, args, pos, true, name[0] == 's', out);
    if (!strcmp(name, "select") || !strcmp(name, "reject"))
        return select_items(ex, value, args, pos, false, name[0] == 's', out);
    if (!strcmp(name, "map"))
        return map_items(ex, value, args, pos, out);
    if (!strcmp(name, "sort"))
        return sort_items(ex, value, args, pos, out);
    if (!strcmp(name, "dictsort"))
        return dictsort(ex, value, args, pos, out);
    if (!strcmp(name, "unique"))
        return unique_items(ex, value, args, pos, out);
    if (!strcmp(name, "min") || !strcmp(name, "max"))
        return min_max(ex, value, args, name[1] == 'a', pos, out);
    if (!strcmp(name, "sum"))
        return sum_items(ex, value, args, pos, out);
    if (!strcmp(name, "groupby"))
        return group_by(ex, value, args, pos, out);
    if (!strcmp(name, "batch"))
        return batch_items(ex, value, args, pos, out);
    if (!strcmp(name, "slice"))
        return slice_items(ex, value, args, pos, out);
    if (!strcmp(name, "attr"))
        return attr_of(ex, value, arg(args, 0, "name"), pos, out);
    if (!strcmp(name, "truncate"))
        return truncate_text(ex, value, args, pos, out);
    if (!strcmp(name, "wordcount"))
        return word_count(ex, value, pos, out);
    if (!strcmp(name, "striptags"))
        return strip_tags(ex, value, pos, out);
    if (!strcmp(name, "urlencode"))
        return url_encode(ex, value, pos, out);
    if (!strcmp(name, "escape") || !strcmp(name, "e") || !strcmp(name, "forceescape"))
        return escape_filter(ex, value, name[0] == 'f', pos, out);
    if (!strcmp(name, "xmlattr"))
        return xml_attributes(ex, value, args, pos, out);
    if (!strcmp(name, "format"))
        return percent_format(ex, value, args, pos, out);
    if (!strcmp(name, "safe")) {
        if (json_is_string(value))
            return jv_markup(ex, value, pos, out);
        return (*out = value ? json_incref(value) : NULL), true;
    }
    /* an undefined value is the empty text to the text filters, as in Jinja (a tool's
     * parameter without a description, say) */
    static const char *const text_filters[] = {"trim", "upper", "lower", "title",
                                               "capitalize", "replace", "indent"};
    for (size_t i = 0; !value && i < sizeof text_filters / sizeof text_filters[0]; i++)
        if (!strcmp(name, text_filters[i])) {
            json_t *empty = json_string("");
            bool done = empty && jfilter(ex, name, pos, empty, args, out);
            json_decref(empty);
            return empty ? done : jv_oom(ex, pos);
        }
    if (!value && strcmp(name, "string") != 0)
        return tsandbox_fail(ex->sb, pos, "filter '%s' got an undefined value", name);
    if (!strcmp(name, "center"))
        return center_text(ex, value, arg(args, 0, "width"), pos, out);
    if (!strcmp(name, "filesizeformat"))
        return file_size(ex, value, arg(args, 0, "binary"), pos, out);
    if (!strcmp(name, "trim"))
        return strip(ex, value, arg(args, 0, "chars"), true, true, pos, out);
    if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "title") ||
        !strcmp(name, "capitalize"))
        return case_map(ex, value, pos,
                        name[0] == 'u'   ? JCASE_UPPER
                        : name[0] == 'l' ? JCASE_LOWER
                        : name[0] == 't' ? JCASE_TITLE
                                         : JCASE_CAPITALIZE,
                        out);
    if (!strcmp(name, "replace"))
        return replace(ex, value, arg(args, 0, "old"), arg(args, 1, "new"), arg(args, 2, "count"),
                       pos, out);
    if (!strcmp(name, "string")) {
        tbuf text;
        return to_text(ex, value, pos, &text) && jv_string_from_buf(ex, &text, pos, out);
    }
    if (!strcmp(name, "int"))
        return to_int(ex, value, arg(args, 0, "default"), pos, out);
    if (!strcmp(name, "float")) {
        double d = json_is_number(value)   ? json_number_value(value)
                   : json_is_string(value) ? strtod(json_string_value(value), NULL)
                                           : 0;
        return set_out(ex, pos, json_real(isfinite(d) ? d : 0), out);
    }
    if (!strcmp(name, "abs")) {
        if (json_is_integer(value) && json_integer_value(value) != INT64_MIN)
            return set_out(ex, pos, json_integer(llabs(json_integer_value(value))), out);
        if (json_is_real(value))
            return set_out(ex, pos, json_real(fabs(json_real_value(value))), out);
        return tsandbox_fail(ex->sb, pos, "bad operand type for abs()");
    }
    if (!strcmp(name, "reverse")) {
        json_t *items;
        if (json_is_string(value)) {
            if (!as_list(ex, value, pos, &items))
                return false;
            tbuf text;
            tbuf_init(&text, ex->sb->max_bytes);
            for (size_t i = json_array_size(items); i > 0; i--) {
                json_t *c = json_array_get(items, i - 1);
                tbuf_append(&text, json_string_value(c), json_string_length(c));
            }
            json_decref(items);
            return jv_string_from_buf(ex, &text, pos, out);
        }
        if (!as_list(ex, value, pos, &items))
            return false;
        json_t *reversed = json_array();
        for (size_t i = json_array_size(items); reversed && i > 0; i--)
            json_array_append(reversed, json_array_get(items, i - 1));
        json_decref(items);
        return set_out(ex, pos, reversed, out);
    }
    if (!strcmp(name, "indent"))
        return indent(ex, value, args, pos, out);
    if (!strcmp(name, "round")) {
        const json_t *precision = arg(args, 0, "precision");
        double scale =
            pow(10, json_is_integer(precision) ? (double)json_integer_value(precision) : 0);
        double d = json_is_number(value) ? json_number_value(value) : 0;
        return set_out(ex, pos, json_real(isfinite(d * scale) ? round(d * scale) / scale : d), out);
    }
    return tsandbox_fail(ex->sb, pos, "no filter named '%s'", name);
}

/* ---- tests ---- */

bool jtest(jexec *ex, const char *name, size_t pos, json_t *value, const jargs *args, bool *result)
{
    json_t *other = arg(args, 0, NULL);
    *result = false;
    if (!strcmp(name, "defined"))
        *result = value != NULL;
    else if (!strcmp(name, "undefined"))
        *result = value == NULL;
    else if (!strcmp(name, "none"))
        *result = json_is_null(value);
    else if (!strcmp(name, "string"))
        *result = json_is_string(value);
    else if (!strcmp(name, "number"))
        *result = json_is_number(value) || json_is_boolean(value);
    else if (!strcmp(name, "integer"))
        *result = json_is_integer(value);
    else if (!strcmp(name, "float"))
        *result = json_is_real(value);
    else if (!strcmp(name, "boolean"))
        *result = json_is_boolean(value);
    else if (!strcmp(name, "true"))
        *result = json_is_true(value);
    else if (!strcmp(name, "false"))
        *result = json_is_false(value);
    else if (!strcmp(name, "mapping"))
        *result = json_is_object(value) && !tfmt_is_method(value);
    else if (!strcmp(name, "iterable"))
        *result = !value || json_is_array(value) || json_is_string(value) ||
                  (json_is_object(value) && !tfmt_is_method(value));
    else if (!strcmp(name, "sequence"))
        *result = json_is_array(value) || json_is_string(value) ||
                  (json_is_object(value) && !tfmt_is_method(value));
    else if (!strcmp(name, "callable")) /* Undefined is callable in Jinja2 (calling it fails) */
        *result = !value || tfmt_is_method(value);
    else if (!strcmp(name, "escaped"))
        return jv_is_markup(ex, value, pos, result);
    else if (!strcmp(name, "filter"))
        *result = name_in(value, filter_names, sizeof filter_names / sizeof filter_names[0]);
    else if (!strcmp(name, "test"))
        *result = name_in(value, test_names, sizeof test_names / sizeof test_names[0]);
    else if (!strcmp(name, "equalto") || !strcmp(name, "eq") || !strcmp(name, "==") ||
             !strcmp(name, "sameas"))
        return jv_equal(ex, value, other, pos, result);
    else if (!strcmp(name, "ne") || !strcmp(name, "!=")) {
        if (!jv_equal(ex, value, other, pos, result))
            return false;
        *result = !*result;
    } else if (!strcmp(name, "in")) {
        *result = false;
        if (json_is_array(other)) {
            for (size_t i = 0; i < json_array_size(other) && !*result; i++)
                if (!jv_equal(ex, value, json_array_get(other, i), pos, result))
                    return false;
        } else if (json_is_object(other)) {
            jkey key;
            if (!jv_key(ex, value, pos, &key))
                return false;
            *result = jv_dict_get(other, &key) != NULL;
        } else if (json_is_string(other) && json_is_string(value)) {
            *result = memmem(json_string_value(other), json_string_length(other),
                             json_string_value(value), json_string_length(value)) != NULL;
        }
    } else if (!strcmp(name, "odd") || !strcmp(name, "even")) {
        if (!json_is_integer(value))
            return tsandbox_fail(ex->sb, pos, "test '%s' needs an integer", name);
        *result = (json_integer_value(value) % 2 != 0) == (name[0] == 'o');
    } else if (!strcmp(name, "divisibleby")) {
        if (!json_is_integer(value) || !json_is_integer(other) || json_integer_value(other) == 0)
            return tsandbox_fail(ex->sb, pos, "test 'divisibleby' needs non-zero integers");
        *result = json_integer_value(value) % json_integer_value(other) == 0;
    } else if (!strcmp(name, "lt") || !strcmp(name, "le") || !strcmp(name, "gt") ||
               !strcmp(name, "ge") || !strcmp(name, "lessthan") || !strcmp(name, "greaterthan") ||
               !strcmp(name, "<") || !strcmp(name, "<=") || !strcmp(name, ">") ||
               !strcmp(name, ">=")) {
        if (!json_is_number(value) || !json_is_number(other))
            return tsandbox_fail(ex->sb, pos, "test '%s' needs numbers", name);
        double a = json_number_value(value), b = json_number_value(other);
        bool less = name[0] == 'l' || name[0] == '<';
        bool or_equal = (name[1] == 'e' || name[1] == '=') && name[2] == '\0';
        *result = less ? (or_equal ? a <= b : a < b) : (or_equal ? a >= b : a > b);
    } else if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        json_t *mapped;
        if (!json_is_string(value))
            return true;
        if (!case_map(ex, value, pos, name[0] == 'l' ? JCASE_LOWER : JCASE_UPPER, &mapped))
            return false;
        *result = json_equal(mapped, value);
        json_decref(mapped);
    } else {
        return tsandbox_fail(ex->sb, pos, "no test named '%s'", name);
    }
    return true;
}

/* ---- methods ---- */

/* ---- str.format ---- */

/* A format spec: [[fill]align][sign][0][width][.precision][type]. */
typedef struct fmt_spec {
    const char *fill; /* one UTF-8 character */
    size_t fill_len;
    char align, sign, type;
    long width, precision; /* -1: not given */
} fmt_spec;

static bool parse_spec(jexec *ex, const char *s, size_t n, size_t pos, fmt_spec *spec)
{
    *spec = (fmt_spec){.fill = " ", .fill_len = 1, .width = -1, .precision = -1};
    size_t i = 0, first = n ? jv_utf8_offset(s, n, 1) : 0;
    if (first < n && strchr("<>=^", s[first])) {
        spec->fill = s;
        spec->fill_len = first;
        spec->align = s[first];
        i = first + 1;
    } else if (i < n && strchr("<>=^", s[i])) {
        spec->align = s[i++];
    }
    if (i < n && strchr("+- ", s[i]))
        spec->sign = s[i++];
    if (i < n && s[i] == '0' && !spec->align) {
        spec->fill = "0";
        spec->align = '=';
        i++;
    }
    long *fields[2] = {&spec->width, &spec->precision};
    for (int k = 0; k < 2; k++) {
        if (k == 1) {
            if (i >= n || s[i] != '.')
                break;
            i++;
        }
        if (i < n && s[i] >= '0' && s[i] <= '9')
            *fields[k] = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9' && *fields[k] < 100000)
            *fields[k] = *fields[k] * 10 + (s[i++] - '0');
    }
    if (i < n && strchr("sdfFeEgG%", s[i]))
        spec->type = s[i++];
    if (i != n)
        return tsandbox_fail(ex->sb, pos, "unsupported format spec '%.*s'", (int)n, s);
    return true;
}

/* v formatted by spec (Python's format(v, spec) for str, int, float and bool). */
static bool format_value(jexec *ex, const json_t *v, const fmt_spec *spec, size_t pos, tbuf *out)
{
    tbuf body;
    tbuf_init(&body, ex->sb->max_bytes);
    bool numeric = json_is_number(v) || (json_is_boolean(v) && (spec->type || spec->width >= 0));
    bool ok = true, negative = false;
    char type = spec->type;
    if (json_is_string(v) && type && type != 's')
        return tsandbox_fail(ex->sb, pos, "unknown format code '%c' for str", type);
    if (!json_is_string(v) && !numeric && (type || spec->width >= 0 || spec->precision >= 0))
        return tsandbox_fail(ex->sb, pos, "unsupported format string passed to %s.__format__",
                             jv_type_name(v));
    if (numeric && type == 's')
        return tsandbox_fail(ex->sb, pos, "unknown format code 's' for %s", jv_type_name(v));
    if (numeric && json_is_integer(v) && (!type || type == 'd')) {
        long long i = json_integer_value(v);
        char digits[32];
        negative = i < 0;
        snprintf(digits, sizeof digits, "%llu",
                 negative ? 0ull - (unsigned long long)i : (unsigned long long)i);
        ok = tbuf_puts(&body, digits);
    } else if (numeric && json_is_boolean(v) && (!type || type == 'd')) {
        ok = tbuf_putc(&body, json_is_true(v) ? '1' : '0');
    } else if (numeric && type == 'd') {
        return tsandbox_fail(ex->sb, pos, "unknown format code 'd' for float");
    } else if (numeric) {
        double d = json_is_boolean(v) ? json_is_true(v) : json_number_value(v);
        negative = signbit(d);
        d = fabs(d);
        if (!type) {
            ok = spec->precision < 0 ? tfmt_py_float(&body, d) : false;
            if (spec->precision >= 0)
                type = 'g';
        }
        if (type) {
            char text[400], conv = type == '%' ? 'f' : type;
            int prec = spec->precision < 0 ? 6 : spec->precision > 50 ? 50 : (int)spec->precision;
            if (d >= 1e300 && (conv == 'f' || conv == 'F'))
                return tsandbox_fail(ex->sb, pos, "float too large to format");
            snprintf(text, sizeof text, (char[]){'%', '.', '*', conv, '\0'}, prec,
                     type == '%' ? d * 100 : d);
            ok = tbuf_puts(&body, text) && (type != '%' || tbuf_putc(&body, '%'));
        }
    } else {
        ok = jv_str(ex, v, &body, pos);
        if (ok && spec->precision >= 0 && body.data) /* precision truncates a string */
            body.len = jv_utf8_offset(body.data, body.len, (size_t)spec->precision);
    }
    const char *sign = !numeric                ? ""
                       : negative              ? "-"
                       : spec->sign == '+'     ? "+"
                       : spec->sign == ' '     ? " "
                                               : "";
    size_t chars = jv_utf8_count(body.data ? body.data : "", body.len) + strlen(sign);
    size_t pad = spec->width > 0 && (size_t)spec->width > chars ? (size_t)spec->width - chars : 0;
    char align = spec->align ? spec->align : numeric ? '>' : '<';
    size_t before = align == '>' || align == '=' ? pad : align == '^' ? pad / 2 : 0;
    ok = ok && jv_charge(ex, pad, pos);
    if (ok && align == '=')
        ok = tbuf_puts(out, sign);
    for (size_t i = 0; ok && i < before; i++)
        ok = tbuf_append(out, spec->fill, spec->fill_len);
    if (ok && align != '=')
        ok = tbuf_puts(out, sign);
    ok = ok && tbuf_append(out, body.data ? body.data : "", body.len);
    for (size_t i = before; ok && i < pad; i++)
        ok = tbuf_append(out, spec->fill, spec->fill_len);
    tbuf_free(&body);
    return ok || tsandbox_fail(ex->sb, pos, "string longer than %zu bytes", ex->sb->max_bytes);
}

/* The value a replacement field names: an argument, then .attr and [key] steps; NULL
 * (Undefined) when a step finds nothing. */
static bool format_field_value(jexec *ex, const char *f, size_t n, size_t *auto_index,
                               const jargs *args, size_t pos, json_t **out)
{
    size_t i = strcspn(f, ".[");
    if (i > n)
        i = n;
    json_t *v;
    if (i == 0 || (f[0] >= '0' && f[0] <= '9')) {
        size_t index = 0;
        if (i == 0) {
            index = (*auto_index)++;
        } else {
            for (size_t k = 0; k < i; k++) {
                if (f[k] < '0' || f[k] > '9' || index > 100000)
                    return tsandbox_fail(ex->sb, pos, "bad format field '%.*s'", (int)n, f);
                index = index * 10 + (size_t)(f[k] - '0');
            }
        }
        if (index >= args->n)
            return tsandbox_fail(ex->sb, pos, "Replacement index %zu out of range", index);
        v = args->pos[index];
    } else {
        char name[128];
        if (i >= sizeof name)
            return tsandbox_fail(ex->sb, pos, "format field name too long");
        memcpy(name, f, i);
        name[i] = '\0';
        v = args->kw ? json_object_get(args->kw, name) : NULL;
        if (!v)
            return tsandbox_fail(ex->sb, pos, "KeyError: '%s' in str.format()", name);
    }
    while (v && i < n) {
        bool bracket = f[i] == '[';
        size_t start = ++i;
        while (i < n && f[i] != (bracket ? ']' : '.') && (bracket || f[i] != '['))
            i++;
        json_t *key = NULL;
        char *end;
        long long index = strtoll(f + start, &end, 10);
        if (bracket && end == f + i && i > start)
            key = json_integer(index);
        else
            key = json_stringn_nocheck(f + start, i - start);
        jkey k;
        bool found = key && (json_is_object(v) ? jv_key(ex, key, pos, &k) : true);
        if (!found) {
            json_decref(key);
            return ex->sb->failed ? false : jv_oom(ex, pos);
        }
        size_t at;
        v = json_is_object(v)                          ? jv_dict_get(v, &k)
            : json_is_array(v) && json_is_integer(key) && index >= 0 &&
                    (at = (size_t)index) < json_array_size(v)
                ? json_array_get(v, at)
                : NULL;
        json_decref(key);
        if (bracket)
            i++;
    }
    *out = v; /* a missing item is Undefined, which formats as the empty text, as in Jinja2 */
    return true;
}

/* str.format(*args, **kwargs) with Python's replacement fields {name!conv:spec}. */
static bool str_format(jexec *ex, const json_t *fmt, const jargs *args, size_t pos, json_t **out)
{
    const char *s = json_string_value(fmt);
    size_t n = json_string_length(fmt), auto_index = 0;
    tbuf text;
    tbuf_init(&text, ex->sb->max_bytes);
    bool ok = true;
    for (size_t i = 0; ok && i < n;) {
        if ((s[i] == '{' || s[i] == '}') && i + 1 < n && s[i + 1] == s[i]) {
            ok = tbuf_putc(&text, s[i]) || tsandbox_fail(ex->sb, pos, "string too long");
            i += 2;
            continue;
        }
        if (s[i] == '}') {
            ok = tsandbox_fail(ex->sb, pos, "Single '}' encountered in format string");
            break;
        }
        if (s[i] != '{') {
            size_t run = i;
            while (run < n && s[run] != '{' && s[run] != '}')
                run++;
            ok = tbuf_append(&text, s + i, run - i) ||
                 tsandbox_fail(ex->sb, pos, "string too long");
            i = run;
            continue;
        }
        const char *close = memchr(s + i, '}', n - i);
        const char *inner = close ? memchr(s + i + 1, '{', (size_t)(close - s) - i - 1) : NULL;
        if (!close || inner) {
            ok = tsandbox_fail(ex->sb, pos, close ? "nested format fields are not supported"
                                                  : "Single '{' encountered in format string");
            break;
        }
        const char *field = s + i + 1;
        size_t len = (size_t)(close - field);
        const char *colon = memchr(field, ':', len);
        const char *bang = memchr(field, '!', colon ? (size_t)(colon - field) : len);
        size_t name_len = bang ? (size_t)(bang - field) : colon ? (size_t)(colon - field) : len;
        char conv = 's';
        if (bang) {
            conv = bang + 1 < field + len ? bang[1] : '\0';
            if ((conv != 's' && conv != 'r' && conv != 'a') ||
                bang + 2 != (colon ? colon : field + len)) {
                ok = tsandbox_fail(ex->sb, pos, "bad conversion in format field");
                break;
            }
        }
        fmt_spec spec;
        json_t *v = NULL;
        ok = format_field_value(ex, field, name_len, &auto_index, args, pos, &v) &&
             parse_spec(ex, colon ? colon + 1 : "", colon ? (size_t)(field + len - colon - 1) : 0,
                        pos, &spec);
        if (ok && conv != 's') {
            tbuf repr;
            tbuf_init(&repr, ex->sb->max_bytes);
            json_t *shown = NULL;
            ok = (tfmt_py_repr(&repr, v) ||
                  tsandbox_fail(ex->sb, pos, "string longer than %zu bytes", ex->sb->max_bytes)) &&
                 jv_string_from_buf(ex, &repr, pos, &shown) &&
                 format_value(ex, shown, &spec, pos, &text);
            json_decref(shown);
        } else if (ok) {
            ok = format_value(ex, v, &spec, pos, &text);
        }
        ok = ok && jv_charge(ex, 1, pos);
        i = (size_t)(close - s) + 1;
    }
    return ok ? jv_string_from_buf(ex, &text, pos, out) : (tbuf_free(&text), false);
}

static bool string_method(jexec *ex, json_t *s, const char *name, size_t pos, const jargs *args,
                          json_t **out)
{
    json_t *a0 = arg(args, 0, NULL), *a1 = arg(args, 1, NULL);
    if (!strcmp(name, "strip") || !strcmp(name, "lstrip") || !strcmp(name, "rstrip"))
        return strip(ex, s, a0, name[0] != 'r', name[0] != 'l', pos, out);
    if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "title") ||
        !strcmp(name, "capitalize"))
        return case_map(ex, s, pos,
                        name[0] == 'u'   ? JCASE_UPPER
                        : name[0] == 'l' ? JCASE_LOWER
                        : name[0] == 't' ? JCASE_TITLE
                                         : JCASE_CAPITALIZE,
                        out);
    if (!strcmp(name, "split"))
        return split(ex, s, arg(args, 0, "sep"), arg(args, 1, "maxsplit"), pos, out);
    if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) {
        bool r;
        if (!affix(ex, s, a0, name[0] == 's', pos, &r))
            return false;
        return set_out(ex, pos, json_boolean(r), out);
    }
    if (!strcmp(name, "replace"))
        return replace(ex, s, a0, a1, arg(args, 2, NULL), pos, out);
    if (!strcmp(name, "format"))
        return str_format(ex, s, args, pos, out);
    if (!strcmp(name, "join"))
        return join(ex, a0, s, NULL, pos, out);
    if (!strcmp(name, "find") || !strcmp(name, "count")) {
        if (!json_is_string(a0))
            return tsandbox_fail(ex->sb, pos, "%s() needs a string", name);
        const char *h = json_string_value(s), *needle = json_string_value(a0);
        size_t hn = json_string_length(s), nn = json_string_length(a0);
        if (name[0] == 'f') {
            const char *hit = memmem(h, hn, needle, nn);
            return set_out(ex, pos,
                           json_integer(hit ? (json_int_t)jv_utf8_count(h, (size_t)(hit - h)) : -1),
                           out);
        }
        size_t count = 0;
        for (size_t i = 0; nn && i + nn <= hn;) {
            const char *hit = memmem(h + i, hn - i, needle, nn);
            if (!hit)
                break;
            count++;
            i = (size_t)(hit - h) + nn;
        }
        return set_out(ex, pos, json_integer((json_int_t)(nn ? count : jv_utf8_count(h, hn) + 1)),
                       out);
    }
    if (!strcmp(name, "isdigit") || !strcmp(name, "isspace") || !strcmp(name, "isalpha")) {
        const char *h = json_string_value(s);
        size_t n = json_string_length(s);
        bool r = n > 0;
        for (size_t i = 0; i < n && r; i++) {
            unsigned char c = (unsigned char)h[i];
            r = name[2] == 'd'   ? (c >= '0' && c <= '9')
                : name[2] == 's' ? jstr_space_at(h, n, i) > 0
                                 : ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || c >= 0x80;
        }
        return set_out(ex, pos, json_boolean(r), out);
    }
    return tsandbox_fail(ex->sb, pos, "'str object' has no attribute '%s'", name);
}

bool jinja_mutating_method(const char *name)
{
    static const char *const names[] = {"append", "extend", "insert", "pop",       "remove",
                                        "clear",  "update", "setdefault", "popitem"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i]))
            return true;
    return false;
}

static bool returns_none(jexec *ex, size_t pos, json_t **out)
{
    return set_out(ex, pos, json_null(), out);
}

static bool list_mutation(jexec *ex, json_t *list, const char *name, size_t pos,
                          const jargs *args, json_t **out)
{
    json_t *a0 = arg(args, 0, NULL), *a1 = arg(args, 1, NULL);
    size_t n = json_array_size(list);
    if (!strcmp(name, "append") || !strcmp(name, "insert")) {
        bool insert = name[0] == 'i';
        json_t *item = insert ? a1 : a0;
        if (args->n != (insert ? 2u : 1u))
            return tsandbox_fail(ex->sb, pos, "list.%s() takes %d argument(s)", name,
                                 insert ? 2 : 1);
        if (insert && !json_is_integer(a0))
            return tsandbox_fail(ex->sb, pos, "list.insert() index must be an integer");
        long long at = insert ? json_integer_value(a0) : (long long)n;
        if (at < 0)
            at = at + (long long)n < 0 ? 0 : at + (long long)n;
        if (at > (long long)n)
            at = (long long)n;
        if (!jv_may_insert(ex, list, item, 1, pos))
            return false;
        if (json_array_insert(list, (size_t)at, item ? item : json_null()) != 0)
            return jv_oom(ex, pos);
        return returns_none(ex, pos, out);
    }
    if (!strcmp(name, "extend")) {
        json_t *items;
        if (args->n != 1)
            return tsandbox_fail(ex->sb, pos, "list.extend() takes 1 argument");
        if (!as_list(ex, a0, pos, &items))
            return false;
        if (items == list) { /* l.extend(l) adds l's items, not l */
            json_decref(items);
            if (!(items = json_copy(list)))
                return jv_oom(ex, pos);
        }
        size_t count = json_array_size(items);
        bool ok = jv_may_insert(ex, list, NULL, count, pos) && jv_charge(ex, count, pos);
        for (size_t i = 0; ok && i < count; i++)
            ok = jv_may_insert(ex, list, json_array_get(items, i), 0, pos);
        ok = ok && (json_array_extend(list, items) == 0 || jv_oom(ex, pos));
        json_decref(items);
        return ok && returns_none(ex, pos, out);
    }
    if (!strcmp(name, "pop")) {
        long long at = a0 ? (json_is_integer(a0) ? json_integer_value(a0) : LLONG_MIN) : -1;
        if (at == LLONG_MIN)
            return tsandbox_fail(ex->sb, pos, "list.pop() index must be an integer");
        if (n == 0)
            return tsandbox_fail(ex->sb, pos, "pop from empty list");
        if (at < 0)
            at += (long long)n;
        if (at < 0 || at >= (long long)n)
            return tsandbox_fail(ex->sb, pos, "pop index out of range");
        *out = json_incref(json_array_get(list, (size_t)at));
        json_array_remove(list, (size_t)at);
        return true;
    }
    if (!strcmp(name, "remove")) {
        for (size_t i = 0; i < n; i++) {
            bool same;
            if (!jv_equal(ex, json_array_get(list, i), a0, pos, &same))
                return false;
            if (same) {
                json_array_remove(list, i);
                return returns_none(ex, pos, out);
            }
        }
        return tsandbox_fail(ex->sb, pos, "list.remove(x): x not in list");
    }
    if (!strcmp(name, "clear")) {
        json_array_clear(list);
        return returns_none(ex, pos, out);
    }
    return tsandbox_fail(ex->sb, pos, "'list object' has no callable attribute '%s'", name);
}

/* dict.update(other or pairs, **kwargs) */
static bool dict_update(jexec *ex, json_t *dict, const jargs *args, size_t pos)
{
    json_t *other = arg(args, 0, NULL);
    json_t *pairs = NULL;
    bool ok = true;
    if (json_is_object(other) && !tfmt_is_method(other)) {
        ok = items_of(ex, other, pos, &pairs);
    } else if (json_is_array(other)) {
        pairs = json_incref(other);
    } else if (other && !json_is_null(other)) {
        return tsandbox_fail(ex->sb, pos, "'%s' object is not iterable", jv_type_name(other));
    }
    for (size_t i = 0; ok && i < json_array_size(pairs); i++) {
        json_t *pair = json_array_get(pairs, i);
        jkey key;
        if (!json_is_array(pair) || json_array_size(pair) != 2)
            ok = tsandbox_fail(ex->sb, pos, "dict.update() needs a dict or key, value pairs");
        else
            ok = jv_key(ex, json_array_get(pair, 0), pos, &key) &&
                 jv_may_insert(ex, dict, json_array_get(pair, 1), 1, pos) &&
                 jv_dict_set(ex, dict, &key, json_array_get(pair, 1), pos);
    }
    json_decref(pairs);
    const char *name;
    json_t *value;
    if (ok && args->kw) {
        json_object_foreach(args->kw, name, value)
        {
            jkey key = {.s = name, .n = strlen(name)};
            ok = ok && jv_may_insert(ex, dict, value, 1, pos) &&
                 jv_dict_set(ex, dict, &key, value, pos);
        }
    }
    return ok;
}

static bool dict_mutation(jexec *ex, json_t *dict, const char *name, size_t pos,
                          const jargs *args, json_t **out)
{
    if (jv_is_namespace(ex, dict))
        return tsandbox_fail(ex->sb, pos, "'Namespace' object has no attribute '%s'", name);
    if (!strcmp(name, "update"))
        return dict_update(ex, dict, args, pos) && returns_none(ex, pos, out);
    if (!strcmp(name, "clear")) {
        json_object_clear(dict);
        return returns_none(ex, pos, out);
    }
    if (!strcmp(name, "popitem")) {
        void *last = NULL;
        for (void *it = json_object_iter(dict); it; it = json_object_iter_next(dict, it))
            last = it;
        if (!last)
            return tsandbox_fail(ex->sb, pos, "popitem(): dictionary is empty");
        const char *key = json_object_iter_key(last);
        size_t n = json_object_iter_key_len(last);
        json_t *pair = json_pack("[oO]", jv_key_value(key, n), json_object_iter_value(last));
        if (!pair)
            return jv_oom(ex, pos);
        json_object_deln(dict, key, n);
        *out = pair;
        return true;
    }
    jkey key;
    json_t *a1 = arg(args, 1, "default");
    if (!jv_key(ex, arg(args, 0, NULL), pos, &key))
        return false;
    json_t *v = jv_dict_get(dict, &key);
    if (!strcmp(name, "setdefault")) {
        if (!v) {
            if (!jv_may_insert(ex, dict, a1, 1, pos) || !jv_dict_set(ex, dict, &key, a1, pos))
                return false;
            v = jv_dict_get(dict, &key);
        }
        return set_out(ex, pos, json_incref(v), out);
    }
    /* pop */
    if (!v && !arg_given(args, 1, "default"))
        return tsandbox_fail(ex->sb, pos, "KeyError in dict.pop()");
    *out = json_incref(v ? v : a1);
    if (v)
        jv_dict_del(dict, &key);
    return true;
}

bool jmethod(jexec *ex, json_t *obj, const char *name, size_t pos, const jargs *args, json_t **out)
{
    *out = NULL;
    if (tfmt_is_method(obj))
        return tsandbox_fail(ex->sb, pos, "'%s' object has no attribute '%s'",
                             jv_type_name(obj), name);
    if (json_is_string(obj))
        return string_method(ex, obj, name, pos, args, out);
    bool container = json_is_array(obj) || (json_is_object(obj) && !jv_is_namespace(ex, obj));
    if (container && !strcmp(name, "copy")) /* shallow, as Python's */
        return jv_charge(ex, json_is_array(obj) ? json_array_size(obj) : json_object_size(obj),
                         pos) &&
               set_out(ex, pos, json_copy(obj), out);
    if ((json_is_array(obj) || json_is_object(obj)) && jinja_mutating_method(name))
        return json_is_array(obj) ? list_mutation(ex, obj, name, pos, args, out)
                                  : dict_mutation(ex, obj, name, pos, args, out);
    if (json_is_object(obj)) {
        if (!strcmp(name, "items"))
            return items_of(ex, obj, pos, out);
        if (!strcmp(name, "keys"))
            return as_list(ex, obj, pos, out);
        if (!strcmp(name, "values")) {
            json_t *list = json_array();
            const char *key;
            json_t *value;
            json_object_foreach(obj, key, value)
            {
                if (list && json_array_append(list, value) != 0) {
                    json_decref(list);
                    list = NULL;
                }
            }
            return set_out(ex, pos, list, out);
        }
        if (!strcmp(name, "get")) {
            jkey key;
            if (!jv_key(ex, arg(args, 0, NULL), pos, &key))
                return false;
            json_t *v = jv_dict_get(obj, &key);
            if (!v)
                v = arg(args, 1, "default");
            return set_out(ex, pos, v ? json_incref(v) : json_null(), out);
        }
        json_t *loop_index = json_object_get(obj, "index0");
        if (!strcmp(name, "cycle") && json_is_integer(loop_index) && args->n > 0) {
            json_t *v = args->pos[(size_t)json_integer_value(loop_index) % args->n];
            *out = v ? json_incref(v) : NULL;
            return true;
        }
    }
    if (json_is_array(obj) && (!strcmp(name, "index") || !strcmp(name, "count"))) {
        size_t count = 0;
        for (size_t i = 0; i < json_array_size(obj); i++) {
            bool same;
            if (!jv_equal(ex, json_array_get(obj, i), arg(args, 0, NULL), pos, &same))
                return false;
            if (same && name[0] == 'i')
                return set_out(ex, pos, json_integer((json_int_t)i), out);
            count += same;
        }
        if (name[0] == 'i')
            return tsandbox_fail(ex->sb, pos, "value is not in list");
        return set_out(ex, pos, json_integer((json_int_t)count), out);
    }
    return tsandbox_fail(ex->sb, pos, "'%s object' has no callable attribute '%s'",
                         jv_type_name(obj), name);
}

/* ---- global functions ---- */

bool jis_global_function(const char *name)
{
    static const char *const names[] = {"raise_exception", "strftime_now", "namespace", "range",
                                        "dict"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i]))
            return true;
    return false;
}

static bool range_list(jexec *ex, const jargs *args, size_t pos, json_t **out)
{
    long long v[3] = {0, 0, 1};
    if (args->n < 1 || args->n > 3)
        return tsandbox_fail(ex->sb, pos, "range expected 1 to 3 arguments");
    for (size_t i = 0; i < args->n; i++) {
        if (!json_is_integer(args->pos[i]))
            return tsandbox_fail(ex->sb, pos, "range arguments must be integers");
        v[args->n == 1 ? 1 : i] = json_integer_value(args->pos[i]);
    }
    if (v[2] == 0)
        return tsandbox_fail(ex->sb, pos, "range() arg 3 must not be zero");
    json_t *list = json_array();
    bool ok = list != NULL;
    for (long long i = v[0]; ok && (v[2] > 0 ? i < v[1] : i > v[1]); i += v[2]) {
        ok = jv_charge(ex, 1, pos) && json_array_append_new(list, json_integer(i)) == 0;
        if (__builtin_add_overflow(i, v[2], &(long long){0}))
            break;
    }
    if (!ok) {
        json_decref(list);
        return ex->sb->failed ? false : jv_oom(ex, pos);
    }
    *out = list;
    return true;
}

bool jglobal_call(jexec *ex, const char *name, size_t pos, const jargs *args, json_t **out)
{
    *out = NULL;
    if (!strcmp(name, "raise_exception")) {
        tbuf text;
        if (!to_text(ex, arg(args, 0, NULL), pos, &text))
            return false;
        tsandbox_raise(ex->sb, text.data);
        tbuf_free(&text);
        return false;
    }
    if (!strcmp(name, "strftime_now")) {
        json_t *format = arg(args, 0, NULL);
        if (!json_is_string(format))
            return tsandbox_fail(ex->sb, pos, "strftime_now needs a format string");
        time_t now = time(NULL);
        struct tm tm;
        char text[256];
        size_t n = localtime_r(&now, &tm)
                       ? strftime(text, sizeof text, json_string_value(format), &tm)
                       : 0;
        return jv_string(ex, text, n, pos, out);
    }
    if (!strcmp(name, "range"))
        return range_list(ex, args, pos, out);
    if (!strcmp(name, "namespace") || !strcmp(name, "dict")) {
        json_t *obj = json_object();
        if (!obj)
            return jv_oom(ex, pos);
        if (!dict_update(ex, obj, args, pos)) {
            json_decref(obj);
            return false;
        }
        if (name[0] == 'n' && !jv_hold(ex, &ex->namespaces, obj, pos)) {
            json_decref(obj);
            return false;
        }
        *out = obj;
        return true;
    }
    return tsandbox_fail(ex->sb, pos, "'%s' is undefined", name);
}

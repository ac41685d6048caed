/*
 * Jinja evaluator: expressions with Python semantics, statements, scopes (a for loop or
 * macro call opens a frame; if does not), macros and namespaces. Every expression and
 * statement costs a sandbox step, macro calls are depth-limited, and every string or list
 * built is checked against the output size limit, so exponential growth stops early.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja_exec.h"
#include "template/jinja_template.h"
#include "template/valuefmt.h"

static bool set_var(jexec *ex, jframe *frame, const char *name, json_t *value, size_t pos)
{
    json_t *stored = value ? value : ex->undefined;
    if (!stored || json_object_set(frame->vars, name, stored) != 0)
        return jv_oom(ex, pos);
    return true;
}

static void lookup(const jexec *ex, const jframe *frame, const char *name, json_t **out)
{
    for (; frame; frame = frame->parent) {
        json_t *v = json_object_get(frame->vars, name);
        if (v) {
            *out = v == ex->undefined ? NULL : json_incref(v);
            return;
        }
    }
    json_t *v = json_object_get(ex->globals, name);
    *out = v ? json_incref(v) : NULL;
}

const jmacro *jfind_macro(const jexec *ex, const char *name)
{
    for (size_t i = ex->n_macros; i > 0; i--)
        if (strcmp(ex->macros[i - 1].name, name) == 0)
            return &ex->macros[i - 1];
    return NULL;
}

static void free_args(jargs *args)
{
    for (size_t i = 0; i < args->n; i++)
        json_decref(args->pos[i]);
    free(args->pos);
    json_decref(args->kw);
    args->pos = NULL;
    args->n = 0;
    args->kw = NULL;
}

static bool eval_args(jexec *ex, const jexpr *e, jframe *frame, jargs *args)
{
    args->pos = calloc(e->n_args ? e->n_args : 1, sizeof *args->pos);
    args->n = 0;
    args->kw = NULL;
    if (!args->pos)
        return jv_oom(ex, e->pos);
    for (size_t i = 0; i < e->n_args; i++) {
        if (!jeval(ex, e->args[i], frame, &args->pos[i]))
            return false;
        args->n++;
    }
    if (e->n_kw) {
        args->kw = json_object();
        if (!args->kw)
            return jv_oom(ex, e->pos);
        for (size_t i = 0; i < e->n_kw; i++) {
            json_t *v;
            if (!jeval(ex, e->kw_values[i], frame, &v))
                return false;
            if (json_object_set_new(args->kw, e->kw_names[i], v ? v : json_null()) != 0)
                return jv_oom(ex, e->pos);
        }
    }
    return true;
}

static bool undefined_error(jexec *ex, const jexpr *e)
{
    if (e->kind == JE_NAME)
        return tsandbox_fail(ex->sb, e->pos, "'%s' is undefined", e->name);
    if (e->kind == JE_ATTR)
        return tsandbox_fail(ex->sb, e->pos, "'%s' is undefined", e->name);
    return tsandbox_fail(ex->sb, e->pos, "undefined value used");
}

/* ---- attribute, index, slice ---- */

static bool eval_attr(jexec *ex, const jexpr *e, jframe *frame, json_t **out)
{
    json_t *obj;
    if (!jeval(ex, e->a, frame, &obj))
        return false;
    if (!obj)
        return undefined_error(ex, e->a);
    /* Python's getattr first, then the item of that name */
    bool found;
    bool ok = jv_python_attr(ex, obj, e->name, e->pos, &found, out);
    if (ok && !found && json_is_object(obj) && !tfmt_is_method(obj)) {
        json_t *v = json_object_get(obj, e->name);
        *out = v ? json_incref(v) : NULL;
    }
    json_decref(obj);
    return ok;
}

/* Python's index normalisation; false when out of range. */
static bool normalise_index(long long index, size_t len, size_t *out)
{
    if (index < 0)
        index += (long long)len;
    if (index < 0 || (size_t)index >= len)
        return false;
    *out = (size_t)index;
    return true;
}

/* Python's obj[key], then getattr(obj, key) for a str key that finds no item. */
static bool index_value(jexec *ex, json_t *obj, json_t *key, size_t pos, json_t **out)
{
    *out = NULL;
    if (tfmt_is_method(obj))
        return true;
    if (json_is_object(obj) && key && !json_is_array(key) && !json_is_object(key)) {
        jkey k;
        if (!jv_key(ex, key, pos, &k))
            return false;
        json_t *v = jv_dict_get(obj, &k);
        *out = v ? json_incref(v) : NULL;
    } else if (json_is_array(obj) && json_is_integer(key)) {
        size_t i;
        if (normalise_index(json_integer_value(key), json_array_size(obj), &i))
            *out = json_incref(json_array_get(obj, i));
    } else if (json_is_string(obj) && json_is_integer(key)) {
        const char *s = json_string_value(obj);
        size_t n = json_string_length(obj), i;
        if (normalise_index(json_integer_value(key), jv_utf8_count(s, n), &i)) {
            size_t start = jv_utf8_offset(s, n, i), end = jv_utf8_offset(s, n, i + 1);
            return jv_string(ex, s + start, end - start, pos, out);
        }
    }
    bool found;
    if (!*out && json_is_string(key))
        return jv_python_attr(ex, obj, json_string_value(key), pos, &found, out);
    return true;
}

static bool slice_bound(jexec *ex, const jexpr *e, jframe *frame, bool *given, long long *value)
{
    *given = false;
    if (!e)
        return true;
    json_t *v;
    if (!jeval(ex, e, frame, &v))
        return false;
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v)) {
            json_decref(v);
            return tsandbox_fail(ex->sb, e->pos, "slice indices must be integers");
        }
        *given = true;
        *value = json_integer_value(v);
    }
    json_decref(v);
    return true;
}

/* Python's slice.indices(len). */
static void slice_indices(bool has_start, long long start, bool has_stop, long long stop,
                          long long step, long long len, long long *first, long long *last)
{
    long long lo = step < 0 ? -1 : 0, hi = step < 0 ? len - 1 : len;
    if (!has_start) {
        *first = step < 0 ? hi : lo;
    } else {
        *first = start < 0 ? start + len : start;
        *first = *first < lo ? lo : *first > hi ? hi : *first;
    }
    if (!has_stop) {
        *last = step < 0 ? lo : hi;
    } else {
        *last = stop < 0 ? stop + len : stop;
        *last = *last < lo ? lo : *last > hi ? hi : *last;
    }
}

static bool eval_slice(jexec *ex, const jexpr *e, jframe *frame, json_t **out)
{
    bool has_start, has_stop, has_step;
    long long start = 0, stop = 0, step = 1;
    if (!slice_bound(ex, e->b, frame, &has_start, &start) ||
        !slice_bound(ex, e->c, frame, &has_stop, &stop) ||
        !slice_bound(ex, e->n_args ? e->args[0] : NULL, frame, &has_step, &step))
        return false;
    if (!has_step)
        step = 1;
    if (step == 0)
        return tsandbox_fail(ex->sb, e->pos, "slice step cannot be zero");
    json_t *obj;
    if (!jeval(ex, e->a, frame, &obj))
        return false;
    if (!obj)
        return undefined_error(ex, e->a);
    bool ok = true;
    *out = NULL;
    if (json_is_array(obj) || json_is_string(obj)) {
        const char *s = json_is_string(obj) ? json_string_value(obj) : NULL;
        size_t bytes = s ? json_string_length(obj) : 0;
        long long len = s ? (long long)jv_utf8_count(s, bytes) : (long long)json_array_size(obj);
        long long first, last;
        slice_indices(has_start, start, has_stop, stop, step, len, &first, &last);
        if (s && step == 1) {
            size_t a = jv_utf8_offset(s, bytes, (size_t)first);
            size_t b = last > first ? jv_utf8_offset(s, bytes, (size_t)last) : a;
            ok = jv_string(ex, s + a, b - a, e->pos, out);
        } else {
            tbuf text;
            tbuf_init(&text, ex->sb->max_bytes);
            json_t *list = s ? NULL : json_array();
            if (!s && !list)
                ok = jv_oom(ex, e->pos);
            for (long long i = first; ok && (step > 0 ? i < last : i > last); i += step) {
                ok = jv_charge(ex, 1, e->pos);
                if (ok && s) {
                    size_t a = jv_utf8_offset(s, bytes, (size_t)i);
                    size_t b = jv_utf8_offset(s, bytes, (size_t)i + 1);
                    ok = tbuf_append(&text, s + a, b - a) ||
                         tsandbox_fail(ex->sb, e->pos, "string too long");
                } else if (ok) {
                    ok = json_array_append(list, json_array_get(obj, (size_t)i)) == 0 ||
                         jv_oom(ex, e->pos);
                }
            }
            if (s)
                ok = ok ? jv_string_from_buf(ex, &text, e->pos, out) : (tbuf_free(&text), false);
            else if (ok)
                *out = list;
            else
                json_decref(list);
        }
    }
    json_decref(obj);
    return ok;
}

/* ---- arithmetic and comparison ---- */

static bool is_num(const json_t *v)
{
    return json_is_number(v) || json_is_boolean(v);
}

static long long int_of(const json_t *v)
{
    return json_is_integer(v) ? json_integer_value(v) : json_is_true(v) ? 1 : 0;
}

static double float_of(const json_t *v)
{
    return json_is_real(v) ? json_real_value(v) : (double)int_of(v);
}

static bool type_error(jexec *ex, size_t pos, const char *op, const json_t *a, const json_t *b)
{
    return tsandbox_fail(ex->sb, pos, "unsupported operand type(s) for %s: '%s' and '%s'", op,
                         jv_type_name(a), jv_type_name(b));
}

static bool int_result(jexec *ex, size_t pos, bool overflow, long long v, json_t **out)
{
    if (overflow)
        return tsandbox_fail(ex->sb, pos, "integer overflow");
    *out = json_integer(v);
    return *out ? true : jv_oom(ex, pos);
}

/* Python ints are unbounded; ours stop with an error instead of wrapping. */
static bool int_op(jexec *ex, size_t pos, char op, long long x, long long y, json_t **out)
{
    long long r = 0;
    bool overflow = op == '+'   ? __builtin_add_overflow(x, y, &r)
                    : op == '-' ? __builtin_sub_overflow(x, y, &r)
                                : __builtin_mul_overflow(x, y, &r);
    return int_result(ex, pos, overflow, r, out);
}

static bool float_result(jexec *ex, size_t pos, double v, json_t **out)
{
    *out = json_real(v);
    if (!*out) /* jansson refuses inf and nan */
        return tsandbox_fail(ex->sb, pos, "float result out of range");
    return true;
}

static bool repeat(jexec *ex, size_t pos, const json_t *seq, long long times, json_t **out)
{
    if (times < 0)
        times = 0;
    if (json_is_string(seq)) {
        size_t n = json_string_length(seq);
        if (n && (unsigned long long)times > ex->sb->max_bytes / n)
            return tsandbox_fail(ex->sb, pos, "string longer than %zu bytes", ex->sb->max_bytes);
        tbuf text;
        tbuf_init(&text, ex->sb->max_bytes);
        bool ok = jv_charge(ex, (size_t)times, pos);
        for (long long i = 0; i < times && ok; i++)
            ok = tbuf_append(&text, json_string_value(seq), n) || jv_oom(ex, pos);
        return ok ? jv_string_from_buf(ex, &text, pos, out) : (tbuf_free(&text), false);
    }
    size_t n = json_array_size(seq);
    if (n && (unsigned long long)times > ex->sb->steps_left / n)
        return tsandbox_fail(ex->sb, pos, "list too long");
    if (!jv_charge(ex, n * (size_t)times, pos))
        return false;
    json_t *list = json_array();
    bool ok = list != NULL;
    for (long long i = 0; i < times && ok; i++)
        ok = json_array_extend(list, (json_t *)seq) == 0;
    if (!ok) {
        json_decref(list);
        return jv_oom(ex, pos);
    }
    *out = list;
    return true;
}

static bool arith(jexec *ex, const char *op, size_t pos, json_t *a, json_t *b, json_t **out)
{
    if (!a || !b)
        return tsandbox_fail(ex->sb, pos, "undefined value in '%s'", op);
    if (!strcmp(op, "+") && json_is_string(a) && json_is_string(b)) {
        bool a_safe, b_safe;
        if (!jv_is_markup(ex, a, pos, &a_safe) || !jv_is_markup(ex, b, pos, &b_safe))
            return false;
        if (a_safe || b_safe)
            return jv_markup_concat(ex, a, a_safe, b, b_safe, pos, out);
        size_t na = json_string_length(a), nb = json_string_length(b);
        if (na + nb > ex->sb->max_bytes)
            return tsandbox_fail(ex->sb, pos, "string longer than %zu bytes", ex->sb->max_bytes);
        char *s = malloc(na + nb + 1);
        if (!s)
            return jv_oom(ex, pos);
        memcpy(s, json_string_value(a), na);
        memcpy(s + na, json_string_value(b), nb);
        *out = json_stringn_nocheck(s, na + nb);
        free(s);
        return *out ? jv_charge(ex, (na + nb) / 4096, pos) : jv_oom(ex, pos);
    }
    if (!strcmp(op, "+") && json_is_array(a) && json_is_array(b)) {
        if (!jv_charge(ex, json_array_size(a) + json_array_size(b), pos))
            return false;
        json_t *list = json_copy(a);
        if (!list || json_array_extend(list, b) != 0) {
            json_decref(list);
            return jv_oom(ex, pos);
        }
        *out = list;
        return true;
    }
    if (!strcmp(op, "*") && (json_is_string(a) || json_is_array(a)) && json_is_integer(b))
        return repeat(ex, pos, a, json_integer_value(b), out);
    if (!strcmp(op, "*") && (json_is_string(b) || json_is_array(b)) && json_is_integer(a))
        return repeat(ex, pos, b, json_integer_value(a), out);
    if (!is_num(a) || !is_num(b))
        return type_error(ex, pos, op, a, b);
    bool ints = !json_is_real(a) && !json_is_real(b);
    long long x = int_of(a), y = int_of(b);
    double fx = float_of(a), fy = float_of(b);
    switch (op[0]) {
    case '+':
        return ints ? int_op(ex, pos, '+', x, y, out) : float_result(ex, pos, fx + fy, out);
    case '-':
        return ints ? int_op(ex, pos, '-', x, y, out) : float_result(ex, pos, fx - fy, out);
    case '*':
        if (op[1] == '*') {
            if (ints && y >= 0) {
                long long base = x, result = 1;
                bool overflow = false;
                for (long long e = y; e > 0 && !overflow; e >>= 1) {
                    if (e & 1)
                        overflow |= __builtin_mul_overflow(result, base, &result);
                    if (e > 1)
                        overflow |= __builtin_mul_overflow(base, base, &base);
                }
                return int_result(ex, pos, overflow, result, out);
            }
            return float_result(ex, pos, pow(fx, fy), out);
        }
        return ints ? int_op(ex, pos, '*', x, y, out) : float_result(ex, pos, fx * fy, out);
    case '/':
        if (fy == 0)
            return tsandbox_fail(ex->sb, pos, "division by zero");
        if (op[1] == '/') {
            if (ints) {
                if (x == LLONG_MIN && y == -1)
                    return tsandbox_fail(ex->sb, pos, "integer overflow");
                long long q = x / y;
                if ((x % y != 0) && ((x < 0) != (y < 0)))
                    q--;
                return int_result(ex, pos, false, q, out);
            }
            return float_result(ex, pos, floor(fx / fy), out);
        }
        return float_result(ex, pos, fx / fy, out);
    case '%':
        if (fy == 0)
            return tsandbox_fail(ex->sb, pos, "modulo by zero");
        if (ints) {
            if (y == -1)
                return int_result(ex, pos, false, 0, out);
            long long m = x % y;
            if (m != 0 && ((m < 0) != (y < 0)))
                m += y;
            return int_result(ex, pos, false, m, out);
        }
        {
            double m = fmod(fx, fy);
            if (m != 0 && ((m < 0) != (fy < 0)))
                m += fy;
            return float_result(ex, pos, m, out);
        }
    }
    return type_error(ex, pos, op, a, b);
}

static bool order(jexec *ex, const char *op, size_t pos, json_t *a, json_t *b, json_t **out)
{
    int c;
    if (a && b && is_num(a) && is_num(b)) {
        if (!json_is_real(a) && !json_is_real(b)) {
            long long x = int_of(a), y = int_of(b);
            c = (x > y) - (x < y);
        } else {
            double x = float_of(a), y = float_of(b);
            c = (x > y) - (x < y);
        }
    } else if (json_is_string(a) && json_is_string(b)) {
        size_t na = json_string_length(a), nb = json_string_length(b);
        int m = memcmp(json_string_value(a), json_string_value(b), na < nb ? na : nb);
        c = m ? (m > 0 ? 1 : -1) : (na > nb) - (na < nb);
    } else {
        return tsandbox_fail(ex->sb, pos, "'%s' not supported between instances of '%s' and '%s'",
                             op, jv_type_name(a), jv_type_name(b));
    }
    bool r = !strcmp(op, "<")    ? c < 0
             : !strcmp(op, ">")  ? c > 0
             : !strcmp(op, "<=") ? c <= 0
                                 : c >= 0;
    *out = json_boolean(r);
    return true;
}

static bool contains(jexec *ex, size_t pos, json_t *item, json_t *container, bool *result)
{
    *result = false;
    if (!container)
        return true;
    if (json_is_string(container)) {
        if (!json_is_string(item))
            return tsandbox_fail(ex->sb, pos,
                                 "'in <string>' requires string as left operand, not %s",
                                 jv_type_name(item));
        *result = memmem(json_string_value(container), json_string_length(container),
                         json_string_value(item), json_string_length(item)) != NULL ||
                  json_string_length(item) == 0;
        return true;
    }
    if (json_is_object(container) && !tfmt_is_method(container)) {
        jkey key;
        if (!jv_key(ex, item, pos, &key))
            return false;
        *result = jv_dict_get(container, &key) != NULL;
        return true;
    }
    if (json_is_array(container)) {
        for (size_t i = 0; i < json_array_size(container) && !*result; i++)
            if (!jv_equal(ex, item, json_array_get(container, i), pos, result))
                return false;
        return true;
    }
    return tsandbox_fail(ex->sb, pos, "argument of type '%s' is not iterable",
                         jv_type_name(container));
}

static bool eval_binary(jexec *ex, const jexpr *e, jframe *frame, json_t **out)
{
    json_t *a = NULL, *b = NULL;
    if (!jeval(ex, e->a, frame, &a) || !jeval(ex, e->b, frame, &b)) {
        json_decref(a);
        return false;
    }
    bool ok;
    const char *op = e->op;
    if (!strcmp(op, "~")) {
        tbuf text;
        tbuf_init(&text, ex->sb->max_bytes);
        ok = jv_str(ex, a, &text, e->pos) && jv_str(ex, b, &text, e->pos);
        ok = ok ? jv_string_from_buf(ex, &text, e->pos, out) : (tbuf_free(&text), false);
    } else if (!strcmp(op, "==") || !strcmp(op, "!=")) {
        bool same;
        ok = jv_equal(ex, a, b, e->pos, &same);
        *out = json_boolean(same == (op[0] == '='));
    } else if (!strcmp(op, "in") || !strcmp(op, "notin")) {
        bool found;
        ok = contains(ex, e->pos, a, b, &found);
        *out = json_boolean(found == (op[0] == 'i'));
    } else if (op[0] == '<' || op[0] == '>') {
        ok = order(ex, op, e->pos, a, b, out);
    } else {
        ok = arith(ex, op, e->pos, a, b, out);
    }
    json_decref(a);
    json_decref(b);
    return ok;
}

/* ---- calls ---- */

/* A bound method value called: x['items'](), or a variable set to x.items. */
static bool call_method(jexec *ex, const json_t *method, const jexpr *e, jframe *frame,
                        jargs *args, json_t **out)
{
    return eval_args(ex, e, frame, args) &&
           jmethod(ex, jv_method_self(method), jv_method_name(method), e->pos, args, out);
}

static bool eval_call(jexec *ex, const jexpr *e, jframe *frame, json_t **out)
{
    const jexpr *callee = e->a;
    jargs args = {0};
    bool ok;
    if (callee->kind == JE_ATTR) {
        json_t *obj;
        if (!jeval(ex, callee->a, frame, &obj))
            return false;
        if (!obj)
            return undefined_error(ex, callee->a);
        /* a method value held under the name (a namespace's, say) unless Python's own comes
         * first */
        bool found;
        json_t *held = NULL;
        ok = jv_python_attr(ex, obj, callee->name, e->pos, &found, NULL);
        if (ok && !found && json_is_object(obj))
            held = json_object_get(obj, callee->name);
        if (ok && tfmt_is_method(held))
            ok = call_method(ex, held, e, frame, &args, out);
        else if (ok)
            ok = eval_args(ex, e, frame, &args) &&
                 jmethod(ex, obj, callee->name, e->pos, &args, out);
        json_decref(obj);
    } else if (callee->kind == JE_NAME) {
        const jmacro *macro = jfind_macro(ex, callee->name);
        if (macro) {
            ok = eval_args(ex, e, frame, &args) && jcall_macro(ex, macro, &args, e->pos, out);
        } else if (jis_global_function(callee->name)) {
            ok = eval_args(ex, e, frame, &args) &&
                 jglobal_call(ex, callee->name, e->pos, &args, out);
        } else {
            json_t *v;
            lookup(ex, frame, callee->name, &v);
            ok = tfmt_is_method(v) ? call_method(ex, v, e, frame, &args, out)
                 : v ? tsandbox_fail(ex->sb, e->pos, "'%s' object is not callable",
                                     jv_type_name(v))
                     : tsandbox_fail(ex->sb, e->pos, "'%s' is undefined", callee->name);
            json_decref(v);
        }
    } else {
        json_t *v;
        ok = jeval(ex, callee, frame, &v);
        ok = ok && (tfmt_is_method(v) ? call_method(ex, v, e, frame, &args, out)
                                    : tsandbox_fail(ex->sb, e->pos, "'%s' object is not callable",
                                                    jv_type_name(v)));
        json_decref(v);
    }
    free_args(&args);
    return ok;
}

/* Whether e names a global function or a macro: no value, but defined, as in Jinja2, where
 * templates test `strftime_now is defined` before calling it (Llama 3.1 and later fall back
 * to a fixed date otherwise). */
static bool names_a_callable(const jexec *ex, const jexpr *e)
{
    return e->kind == JE_NAME && (jis_global_function(e->name) || jfind_macro(ex, e->name));
}

static bool eval_filter_or_test(jexec *ex, const jexpr *e, jframe *frame, json_t **out)
{
    json_t *value = NULL;
    if (!e->a)
        value = ex->filter_input ? json_incref(ex->filter_input) : NULL;
    else if (!jeval(ex, e->a, frame, &value))
        return false;
    jargs args = {0};
    bool ok = eval_args(ex, e, frame, &args);
    bool defined_test = !strcmp(e->name, "defined") || !strcmp(e->name, "undefined");
    if (ok && e->kind == JE_FILTER) {
        ok = jfilter(ex, e->name, e->pos, value, &args, out);
    } else if (ok && defined_test && !value && names_a_callable(ex, e->a)) {
        *out = json_boolean((e->name[0] == 'd') != e->negated);
    } else if (ok) {
        bool result;
        ok = jtest(ex, e->name, e->pos, value, &args, &result);
        *out = json_boolean(result != e->negated);
    }
    free_args(&args);
    json_decref(value);
    return ok;
}

static bool eval_sequence(jexec *ex, const jexpr *e, jframe *frame, json_t **out)
{
    json_t *result = e->kind == JE_DICT ? json_object() : json_array();
    if (!result)
        return jv_oom(ex, e->pos);
    for (size_t i = 0; i < e->n_args; i++) {
        json_t *v;
        if (!jeval(ex, e->args[i], frame, &v)) {
            json_decref(result);
            return false;
        }
        bool ok;
        if (e->kind == JE_DICT) {
            json_t *key = v;
            jkey k;
            v = NULL;
            ok = jv_key(ex, key, e->args[i]->pos, &k) && jeval(ex, e->args[++i], frame, &v);
            ok = ok && jv_dict_set(ex, result, &k, v, e->pos);
            json_decref(v);
            json_decref(key);
        } else {
            ok = json_array_append_new(result, v ? v : json_null()) == 0 || jv_oom(ex, e->pos);
        }
        if (!ok) {
            json_decref(result);
            return false;
        }
    }
    *out = result;
    return true;
}

bool jeval(jexec *ex, const jexpr *e, jframe *frame, json_t **out)
{
    *out = NULL;
    if (!tsandbox_step(ex->sb, e->pos))
        return false;
    json_t *v = NULL;
    bool ok = true;
    switch (e->kind) {
    case JE_LITERAL:
        *out = json_incref(e->literal);
        return true;
    case JE_NAME:
        lookup(ex, frame, e->name, out);
        return true;
    case JE_LIST:
    case JE_TUPLE:
    case JE_DICT:
        return eval_sequence(ex, e, frame, out);
    case JE_ATTR:
        return eval_attr(ex, e, frame, out);
    case JE_INDEX: {
        json_t *obj, *key;
        if (!jeval(ex, e->a, frame, &obj))
            return false;
        if (!obj)
            return undefined_error(ex, e->a);
        if (!jeval(ex, e->b, frame, &key)) {
            json_decref(obj);
            return false;
        }
        ok = index_value(ex, obj, key, e->pos, out);
        json_decref(obj);
        json_decref(key);
        return ok;
    }
    case JE_SLICE:
        return eval_slice(ex, e, frame, out);
    case JE_CALL:
        return eval_call(ex, e, frame, out);
    case JE_FILTER:
    case JE_TEST:
        return eval_filter_or_test(ex, e, frame, out);
    case JE_NEG:
    case JE_POS:
        if (!jeval(ex, e->a, frame, &v))
            return false;
        if (!is_num(v)) {
            ok = tsandbox_fail(ex->sb, e->pos, "bad operand type for unary %s: '%s'",
                               e->kind == JE_NEG ? "-" : "+", jv_type_name(v));
        } else if (e->kind == JE_POS) {
            *out = json_is_real(v) ? json_incref(v) : json_integer(int_of(v));
        } else if (json_is_real(v)) {
            ok = float_result(ex, e->pos, -json_real_value(v), out);
        } else {
            ok = int_op(ex, e->pos, '-', 0, int_of(v), out);
        }
        json_decref(v);
        return ok;
    case JE_NOT:
        if (!jeval(ex, e->a, frame, &v))
            return false;
        *out = json_boolean(!tvalue_truth(v));
        json_decref(v);
        return true;
    case JE_AND:
    case JE_OR:
        if (!jeval(ex, e->a, frame, &v))
            return false;
        if (tvalue_truth(v) == (e->kind == JE_OR)) {
            *out = v;
            return true;
        }
        json_decref(v);
        return jeval(ex, e->b, frame, out);
    case JE_BINARY:
        return eval_binary(ex, e, frame, out);
    case JE_COND:
        if (!jeval(ex, e->a, frame, &v))
            return false;
        ok = tvalue_truth(v);
        json_decref(v);
        if (ok)
            return jeval(ex, e->b, frame, out);
        return e->c ? jeval(ex, e->c, frame, out) : true;
    }
    return tsandbox_fail(ex->sb, e->pos, "unknown expression");
}

/* ---- statements ---- */

static bool exec_body(jexec *ex, const jbody *body, jframe *frame);

static bool new_frame(jexec *ex, jframe *frame, jframe *parent, size_t pos)
{
    frame->vars = json_object();
    frame->parent = parent;
    return frame->vars ? true : jv_oom(ex, pos);
}

/* Render body into a fresh buffer instead of the output (macros, set blocks). */
static bool capture(jexec *ex, const jbody *body, jframe *frame, size_t pos, json_t **out)
{
    tbuf text;
    tbuf_init(&text, ex->sb->max_bytes);
    tbuf *saved = ex->out;
    ex->out = &text;
    bool ok = exec_body(ex, body, frame);
    ex->out = saved;
    if (!ok) {
        tbuf_free(&text);
        return false;
    }
    return jv_string_from_buf(ex, &text, pos, out);
}

bool jcall_macro(jexec *ex, const jmacro *macro, const jargs *args, size_t pos, json_t **out)
{
    const jstmt *m = macro->stmt;
    if (args->n > m->n_targets)
        return tsandbox_fail(ex->sb, pos, "macro '%s' takes not more than %zu argument(s)",
                             macro->name, m->n_targets);
    if (!tsandbox_enter(ex->sb, pos))
        return false;
    jframe frame;
    bool ok = new_frame(ex, &frame, ex->root, pos);
    for (size_t i = 0; i < m->n_targets && ok; i++) {
        json_t *v = NULL;
        json_t *kw = args->kw ? json_object_get(args->kw, m->targets[i]) : NULL;
        if (i < args->n)
            v = json_incref(args->pos[i]);
        else if (kw)
            v = json_incref(kw);
        else if (m->defaults[i])
            ok = jeval(ex, m->defaults[i], &frame, &v);
        ok = ok && set_var(ex, &frame, m->targets[i], v, pos);
        json_decref(v);
    }
    ok = ok && capture(ex, &m->body, &frame, pos, out);
    json_decref(frame.vars);
    tsandbox_leave(ex->sb);
    return ok;
}

static bool bind_targets(jexec *ex, const jstmt *s, jframe *frame, json_t *value)
{
    if (s->n_targets == 1)
        return set_var(ex, frame, s->targets[0], value, s->pos);
    if (!json_is_array(value) || json_array_size(value) != s->n_targets)
        return tsandbox_fail(ex->sb, s->pos, "cannot unpack %s into %zu variables",
                             jv_type_name(value), s->n_targets);
    for (size_t i = 0; i < s->n_targets; i++)
        if (!set_var(ex, frame, s->targets[i], json_array_get(value, i), s->pos))
            return false;
    return true;
}

/* The values a for loop walks: list items, dict keys, string characters. */
static bool loop_items(jexec *ex, const jstmt *s, json_t *iterable, json_t **items)
{
    *items = NULL;
    if (!iterable) {
        *items = json_array();
    } else if (json_is_array(iterable)) {
        /* a template that changes lists walks the list as it was when the loop began */
        *items = ex->tree->mutates ? json_copy(iterable) : json_incref(iterable);
        return *items ? jv_charge(ex, ex->tree->mutates ? json_array_size(iterable) : 0, s->pos)
                      : jv_oom(ex, s->pos);
    } else if (json_is_object(iterable) && !tfmt_is_method(iterable)) {
        return jv_dict_keys(ex, iterable, s->pos, items);
    } else if (json_is_string(iterable)) {
        const char *str = json_string_value(iterable);
        size_t n = json_string_length(iterable);
        *items = json_array();
        for (size_t i = 0; i < n && *items;) {
            size_t next = jv_utf8_offset(str, n, jv_utf8_count(str, i + 1));
            if (next <= i)
                next = i + 1;
            if (json_array_append_new(*items, json_stringn_nocheck(str + i, next - i)) != 0)
                return jv_oom(ex, s->pos);
            i = next;
        }
    } else {
        return tsandbox_fail(ex->sb, s->pos, "'%s' object is not iterable", jv_type_name(iterable));
    }
    return *items ? true : jv_oom(ex, s->pos);
}

static bool filter_items(jexec *ex, const jstmt *s, jframe *frame, json_t **items)
{
    json_t *kept = json_array();
    if (!kept)
        return jv_oom(ex, s->pos);
    jframe scope;
    bool ok = new_frame(ex, &scope, frame, s->pos);
    for (size_t i = 0; i < json_array_size(*items) && ok; i++) {
        json_t *item = json_array_get(*items, i), *keep = NULL;
        ok = bind_targets(ex, s, &scope, item) && jeval(ex, s->filter, &scope, &keep);
        if (ok && tvalue_truth(keep))
            ok = json_array_append(kept, item) == 0 || jv_oom(ex, s->pos);
        json_decref(keep);
    }
    json_decref(scope.vars);
    json_decref(*items);
    *items = kept;
    return ok;
}

static json_t *loop_object(size_t i, json_t *items)
{
    size_t n = json_array_size(items);
    json_t *loop = json_pack("{s:I,s:I,s:I,s:I,s:b,s:b,s:I,s:I,s:I}", "index", (json_int_t)i + 1,
                             "index0", (json_int_t)i, "revindex", (json_int_t)(n - i), "revindex0",
                             (json_int_t)(n - i - 1), "first", i == 0, "last", i + 1 == n, "length",
                             (json_int_t)n, "depth", (json_int_t)1, "depth0", (json_int_t)0);
    if (loop && i > 0)
        json_object_set(loop, "previtem", json_array_get(items, i - 1));
    if (loop && i + 1 < n)
        json_object_set(loop, "nextitem", json_array_get(items, i + 1));
    return loop;
}

static bool exec_for(jexec *ex, const jstmt *s, jframe *frame)
{
    json_t *iterable, *items;
    if (!jeval(ex, s->expr, frame, &iterable))
        return false;
    bool ok = loop_items(ex, s, iterable, &items);
    json_decref(iterable);
    if (ok && s->filter)
        ok = filter_items(ex, s, frame, &items);
    if (!ok) {
        json_decref(items);
        return false;
    }
    jframe scope;
    ok = new_frame(ex, &scope, frame, s->pos);
    size_t n = json_array_size(items);
    for (size_t i = 0; i < n && ok; i++) {
        if (!tsandbox_step(ex->sb, s->pos)) {
            ok = false;
            break;
        }
        json_t *loop = loop_object(i, items);
        ok = loop && json_object_set_new(scope.vars, "loop", loop) == 0;
        if (!ok) {
            ok = jv_oom(ex, s->pos);
            break;
        }
        ok = bind_targets(ex, s, &scope, json_array_get(items, i)) &&
             exec_body(ex, &s->body, &scope);
        if (ex->signal == JSIGNAL_BREAK) {
            ex->signal = JSIGNAL_NONE;
            break;
        }
        ex->signal = JSIGNAL_NONE;
    }
    json_decref(scope.vars);
    json_decref(items);
    if (ok && n == 0)
        ok = exec_body(ex, &s->else_body, frame);
    return ok;
}

/* A namespace must not come to hold a namespace: that could close a reference cycle. */
static bool holds_namespace(jexec *ex, const json_t *v, size_t pos, int depth, bool *found)
{
    if (!v || *found)
        return true;
    if (!jv_charge(ex, 1, pos))
        return false;
    if (depth > TFMT_MAX_DEPTH)
        return tsandbox_fail(ex->sb, pos, "value nested too deeply");
    if (jv_is_namespace(ex, v)) {
        *found = true;
        return true;
    }
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v) && !*found; i++)
            if (!holds_namespace(ex, json_array_get(v, i), pos, depth + 1, found))
                return false;
    } else if (json_is_object(v)) {
        const char *key;
        json_t *item;
        json_object_foreach((json_t *)v, key, item)
        {
            if (!holds_namespace(ex, item, pos, depth + 1, found))
                return false;
        }
    }
    return true;
}

static bool exec_set(jexec *ex, const jstmt *s, jframe *frame)
{
    json_t *value;
    if (!jeval(ex, s->expr, frame, &value))
        return false;
    bool ok;
    if (s->attr) {
        json_t *ns;
        lookup(ex, frame, s->targets[0], &ns);
        bool nested = false;
        if (!jv_is_namespace(ex, ns))
            ok = tsandbox_fail(ex->sb, s->pos, "cannot assign attribute on non-namespace object");
        else if (!holds_namespace(ex, value, s->pos, 0, &nested))
            ok = false;
        else if (nested)
            ok = tsandbox_fail(ex->sb, s->pos, "a namespace cannot hold a namespace");
        else
            ok = json_object_set(ns, s->attr, value ? value : json_null()) == 0 ||
                 jv_oom(ex, s->pos);
        json_decref(ns);
    } else {
        ok = bind_targets(ex, s, frame, value);
    }
    json_decref(value);
    return ok;
}

static bool exec_stmt(jexec *ex, const jstmt *s, jframe *frame)
{
    json_t *v = NULL;
    bool ok;
    switch (s->kind) {
    case JS_TEXT:
        if (!tbuf_append(ex->out, s->text, s->text_len))
            return tsandbox_fail(ex->sb, s->pos, "output exceeds %zu bytes", ex->out->max_bytes);
        return true;
    case JS_OUTPUT:
        if (!jeval(ex, s->expr, frame, &v))
            return false;
        ok = tfmt_py_str(ex->out, v) ||
             tsandbox_fail(ex->sb, s->pos, "output exceeds %zu bytes", ex->out->max_bytes);
        json_decref(v);
        return ok;
    case JS_IF:
        if (!jeval(ex, s->expr, frame, &v))
            return false;
        ok = tvalue_truth(v);
        json_decref(v);
        return exec_body(ex, ok ? &s->body : &s->else_body, frame);
    case JS_FOR:
        return exec_for(ex, s, frame);
    case JS_SET:
        return exec_set(ex, s, frame);
    case JS_SET_BLOCK:
        if (!capture(ex, &s->body, frame, s->pos, &v))
            return false;
        ok = set_var(ex, frame, s->targets[0], v, s->pos);
        json_decref(v);
        return ok;
    case JS_MACRO:
        if (ex->n_macros == ex->cap_macros) {
            size_t cap = ex->cap_macros ? ex->cap_macros * 2 : 8;
            jmacro *macros = realloc(ex->macros, cap * sizeof *macros);
            if (!macros)
                return jv_oom(ex, s->pos);
            ex->macros = macros;
            ex->cap_macros = cap;
        }
        ex->macros[ex->n_macros++] = (jmacro){s->name, s};
        return true;
    case JS_BREAK:
        ex->signal = JSIGNAL_BREAK;
        return true;
    case JS_CONTINUE:
        ex->signal = JSIGNAL_CONTINUE;
        return true;
    case JS_BLOCK:
        return exec_body(ex, &s->body, frame);
    case JS_FILTER_BLOCK: {
        json_t *body, *saved = ex->filter_input;
        if (!capture(ex, &s->body, frame, s->pos, &body))
            return false;
        ex->filter_input = body;
        ok = jeval(ex, s->expr, frame, &v);
        ex->filter_input = saved;
        json_decref(body);
        ok = ok && (tfmt_py_str(ex->out, v) ||
                    tsandbox_fail(ex->sb, s->pos, "output exceeds %zu bytes", ex->out->max_bytes));
        json_decref(v);
        return ok;
    }
    }
    return false;
}

static bool exec_body(jexec *ex, const jbody *body, jframe *frame)
{
    for (size_t i = 0; i < body->n; i++) {
        if (!tsandbox_step(ex->sb, body->items[i]->pos) || !exec_stmt(ex, body->items[i], frame))
            return false;
        if (ex->signal != JSIGNAL_NONE)
            return true;
    }
    return true;
}

bool jinja_render(const jinja_tree *tree, const json_t *vars, tsandbox *sb, tbuf *out)
{
    json_t *own = NULL;
    if (!json_is_object(vars))
        vars = own = json_object();
    else if (tree->mutates)
        vars = own = jv_copy_containers(vars);
    jframe root = {0};
    jexec ex = {.tree = tree,
                .sb = sb,
                .out = out,
                .globals = vars,
                .root = &root,
                .undefined = json_object()};
    bool ok = vars && ex.undefined
                  ? new_frame(&ex, &root, NULL, 0) && exec_body(&ex, &tree->root, &root)
                  : tsandbox_fail(sb, 0, "out of memory or data nested too deeply");
    json_decref(root.vars);
    json_decref(ex.undefined);
    jv_held_free(&ex.namespaces);
    jv_held_free(&ex.markups);
    jv_held_free(&ex.groups);
    free(ex.macros);
    json_decref(own);
    return ok && !sb->failed;
}

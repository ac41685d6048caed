/*
 * The functions a Go template may call: text/template's builtins (and, or, not, comparisons,
 * len, index, slice, print/printf/println) and ollama's extras (json, currentDate,
 * yesterdayDate). Comparisons treat JSON null as the other operand's zero value, because a
 * missing key stands for a Go struct field that was never set.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "template/go_template.h"
#include "template/valuefmt.h"

static const char *const func_names[GO_FUNC_COUNT] = {
    [GO_FUNC_AND] = "and",
    [GO_FUNC_OR] = "or",
    [GO_FUNC_NOT] = "not",
    [GO_FUNC_EQ] = "eq",
    [GO_FUNC_NE] = "ne",
    [GO_FUNC_LT] = "lt",
    [GO_FUNC_LE] = "le",
    [GO_FUNC_GT] = "gt",
    [GO_FUNC_GE] = "ge",
    [GO_FUNC_LEN] = "len",
    [GO_FUNC_INDEX] = "index",
    [GO_FUNC_SLICE] = "slice",
    [GO_FUNC_PRINT] = "print",
    [GO_FUNC_PRINTF] = "printf",
    [GO_FUNC_PRINTLN] = "println",
    [GO_FUNC_JSON] = "json",
    [GO_FUNC_CURRENT_DATE] = "currentDate",
    [GO_FUNC_YESTERDAY_DATE] = "yesterdayDate",
};

const char *go_func_name(go_func f)
{
    return f < GO_FUNC_COUNT ? func_names[f] : "?";
}

go_func go_func_lookup(const char *name, size_t len)
{
    for (int f = 0; f < GO_FUNC_COUNT; f++)
        if (strlen(func_names[f]) == len && memcmp(func_names[f], name, len) == 0)
            return (go_func)f;
    return GO_FUNC_COUNT;
}

static json_t *fail(tsandbox *sb, size_t pos, const char *fmt, const char *arg)
{
    tsandbox_fail(sb, pos, fmt, arg);
    return NULL;
}

static json_t *oom(tsandbox *sb, size_t pos)
{
    tsandbox_fail(sb, pos, "out of memory");
    return NULL;
}

/*
 * Order a and b: -1, 0 or 1 in *order. Null compares as the other side's zero value;
 * numbers by value; strings by bytes; booleans only for (in)equality.
 */
static bool compare(const json_t *a, const json_t *b, bool need_order, int *order, tsandbox *sb,
                    size_t pos)
{
    if (json_is_null(a) && json_is_null(b)) {
        *order = 0;
        return true;
    }
    if (json_is_null(a) || json_is_null(b)) {
        const json_t *other = json_is_null(a) ? b : a;
        int sign = json_is_null(a) ? -1 : 1;
        if (json_is_number(other)) {
            double d = json_number_value(other);
            *order = d == 0 ? 0 : (d > 0 ? sign : -sign);
            return true;
        }
        if (json_is_string(other)) {
            *order = json_string_length(other) ? sign : 0;
            return true;
        }
        if (!need_order) {
            *order = tvalue_truth(other) ? 1 : 0;
            return true;
        }
    }
    if (json_is_integer(a) && json_is_integer(b)) {
        json_int_t x = json_integer_value(a), y = json_integer_value(b);
        *order = (x > y) - (x < y);
        return true;
    }
    if (json_is_number(a) && json_is_number(b)) {
        double x = json_number_value(a), y = json_number_value(b);
        *order = (x > y) - (x < y);
        return true;
    }
    if (json_is_string(a) && json_is_string(b)) {
        size_t na = json_string_length(a), nb = json_string_length(b);
        int c = memcmp(json_string_value(a), json_string_value(b), na < nb ? na : nb);
        *order = c ? (c > 0 ? 1 : -1) : (na > nb) - (na < nb);
        return true;
    }
    if (json_is_boolean(a) && json_is_boolean(b) && !need_order) {
        *order = json_typeof(a) == json_typeof(b) ? 0 : 1;
        return true;
    }
    tsandbox_fail(sb, pos, "incompatible types for comparison");
    return false;
}

static json_t *call_compare(go_func f, json_t **args, size_t n, tsandbox *sb, size_t pos)
{
    if (n < 2)
        return fail(sb, pos, "wrong number of args for %s: want at least 2", go_func_name(f));
    if (f == GO_FUNC_EQ) {
        for (size_t i = 1; i < n; i++) {
            int order;
            if (!compare(args[0], args[i], false, &order, sb, pos))
                return NULL;
            if (order == 0)
                return json_true();
        }
        return json_false();
    }
    if (n != 2)
        return fail(sb, pos, "wrong number of args for %s: want 2", go_func_name(f));
    int order;
    if (!compare(args[0], args[1], f != GO_FUNC_NE, &order, sb, pos))
        return NULL;
    bool result = f == GO_FUNC_NE   ? order != 0
                  : f == GO_FUNC_LT ? order < 0
                  : f == GO_FUNC_LE ? order <= 0
                  : f == GO_FUNC_GT ? order > 0
                                    : order >= 0;
    return json_boolean(result);
}

static bool to_index(const json_t *v, long long *out)
{
    if (!json_is_integer(v))
        return false;
    *out = json_integer_value(v);
    return true;
}

static json_t *call_index(json_t **args, size_t n, tsandbox *sb, size_t pos)
{
    if (n < 1)
        return fail(sb, pos, "wrong number of args for %s: want at least 1", "index");
    json_t *v = json_incref(args[0]);
    for (size_t i = 1; i < n; i++) {
        json_t *next = NULL;
        long long k;
        if (json_is_array(v)) {
            if (!to_index(args[i], &k) || k < 0 || (size_t)k >= json_array_size(v)) {
                json_decref(v);
                return fail(sb, pos, "error calling index: %s", "index out of range");
            }
            next = json_incref(json_array_get(v, (size_t)k));
        } else if (json_is_object(v) && json_is_string(args[i])) {
            next = json_object_get(v, json_string_value(args[i]));
            next = next ? json_incref(next) : json_null();
        } else if (json_is_string(v) && to_index(args[i], &k) && k >= 0 &&
                   (size_t)k < json_string_length(v)) {
            next = json_integer((unsigned char)json_string_value(v)[k]);
        } else {
            json_decref(v);
            return fail(sb, pos, "error calling index: can't index item of type %s",
                        json_is_null(v) ? "nil" : "this type");
        }
        json_decref(v);
        v = next;
    }
    return v;
}

static json_t *call_slice(json_t **args, size_t n, tsandbox *sb, size_t pos)
{
    if (n < 1 || n > 4)
        return fail(sb, pos, "wrong number of args for %s", "slice");
    json_t *v = args[0];
    size_t len;
    if (json_is_array(v))
        len = json_array_size(v);
    else if (json_is_string(v) && n <= 3)
        len = json_string_length(v);
    else
        return fail(sb, pos, "error calling slice: can't slice item of type %s",
                    json_is_null(v) ? "nil" : "this type");
    long long idx[2] = {0, (long long)len};
    for (size_t i = 1; i < n && i < 3; i++)
        if (!to_index(args[i], &idx[i - 1]))
            return fail(sb, pos, "error calling slice: %s", "non-integer index");
    if (idx[0] < 0 || idx[1] < idx[0] || (size_t)idx[1] > len)
        return fail(sb, pos, "error calling slice: %s", "index out of range");
    if (json_is_string(v))
        return json_stringn_nocheck(json_string_value(v) + idx[0], (size_t)(idx[1] - idx[0]));
    json_t *out = json_array();
    if (!out)
        return oom(sb, pos);
    for (long long i = idx[0]; i < idx[1]; i++)
        if (json_array_append(out, json_array_get(v, (size_t)i)) != 0) {
            json_decref(out);
            return oom(sb, pos);
        }
    return out;
}

static json_t *call_len(json_t **args, size_t n, tsandbox *sb, size_t pos)
{
    if (n != 1)
        return fail(sb, pos, "wrong number of args for %s: want 1", "len");
    json_t *v = args[0];
    if (json_is_string(v))
        return json_integer((json_int_t)json_string_length(v));
    if (json_is_array(v))
        return json_integer((json_int_t)json_array_size(v));
    if (json_is_object(v))
        return json_integer((json_int_t)json_object_size(v));
    if (json_is_null(v))
        return json_integer(0);
    return fail(sb, pos, "error calling len: len of type %s",
                json_is_number(v) ? "number" : "bool");
}

/* Format one printf verb for value v into piece (before width padding). */
static bool format_verb(tbuf *piece, char verb, int precision, const json_t *v)
{
    switch (verb) {
    case 'd':
        if (json_is_integer(v))
            return tbuf_printf(piece, "%lld", (long long)json_integer_value(v));
        break;
    case 'f':
    case 'e':
    case 'g':
        if (json_is_number(v)) {
            char fmt[8] = {'%', '.', '*', verb, 0};
            if (precision < 0 && verb == 'g')
                return tfmt_go_float(piece, json_number_value(v));
            return tbuf_printf(piece, fmt, precision < 0 ? 6 : precision, json_number_value(v));
        }
        break;
    case 'q':
        if (json_is_string(v))
            return tfmt_go_quote(piece, json_string_value(v), json_string_length(v));
        break;
    case 't':
        if (json_is_boolean(v))
            return tbuf_puts(piece, json_is_true(v) ? "true" : "false");
        break;
    case 'x':
        if (json_is_integer(v))
            return tbuf_printf(piece, "%llx", (long long)json_integer_value(v));
        if (json_is_string(v)) {
            bool ok = true;
            for (size_t i = 0; i < json_string_length(v) && ok; i++)
                ok = tbuf_printf(piece, "%02x", (unsigned char)json_string_value(v)[i]);
            return ok;
        }
        break;
    case 'c':
        if (json_is_integer(v)) {
            char c = (char)json_integer_value(v);
            return tbuf_putc(piece, c);
        }
        break;
    case 's':
    case 'v':
        if (json_is_null(v))
            return tbuf_puts(piece, verb == 'v' ? "<nil>" : "%!s(<nil>)");
        if (precision >= 0 && json_is_string(v)) {
            size_t n = json_string_length(v);
            return tbuf_append(piece, json_string_value(v),
                               n < (size_t)precision ? n : (size_t)precision);
        }
        return tfmt_go(piece, v);
    }
    /* Go prints a mismatch as %!verb(type=value). */
    return tbuf_printf(piece, "%%!%c(", verb) && tfmt_go(piece, v) && tbuf_putc(piece, ')');
}

static bool go_sprintf(tbuf *out, const char *fmt, size_t fmt_len, json_t **args, size_t n)
{
    size_t next = 0;
    for (size_t i = 0; i < fmt_len; i++) {
        if (fmt[i] != '%' || i + 1 >= fmt_len) {
            if (!tbuf_putc(out, fmt[i]))
                return false;
            continue;
        }
        i++;
        bool left = false, zero = false, plus = false;
        for (; i < fmt_len && strchr("-+# 0", fmt[i]); i++) {
            left |= fmt[i] == '-';
            zero |= fmt[i] == '0';
            plus |= fmt[i] == '+';
        }
        int width = 0, precision = -1;
        for (; i < fmt_len && fmt[i] >= '0' && fmt[i] <= '9'; i++)
            width = width < 10000 ? width * 10 + (fmt[i] - '0') : width;
        if (i < fmt_len && fmt[i] == '.') {
            precision = 0;
            for (i++; i < fmt_len && fmt[i] >= '0' && fmt[i] <= '9'; i++)
                precision = precision < 10000 ? precision * 10 + (fmt[i] - '0') : precision;
        }
        if (i >= fmt_len)
            return tbuf_puts(out, "%!(NOVERB)");
        char verb = fmt[i];
        if (verb == '%') {
            if (!tbuf_putc(out, '%'))
                return false;
            continue;
        }
        if (next >= n) {
            if (!tbuf_printf(out, "%%!%c(MISSING)", verb))
                return false;
            continue;
        }
        tbuf piece;
        tbuf_init(&piece, out->max_bytes);
        bool ok = (plus && json_is_number(args[next]) && json_number_value(args[next]) >= 0
                       ? tbuf_putc(&piece, '+')
                       : true) &&
                  format_verb(&piece, verb, precision, args[next]);
        next++;
        size_t pad = ok && piece.len < (size_t)width ? (size_t)width - piece.len : 0;
        for (size_t k = 0; k < pad && ok && !left; k++)
            ok = tbuf_putc(out, zero && verb != 's' && verb != 'q' ? '0' : ' ');
        ok = ok && tbuf_append(out, piece.data ? piece.data : "", piece.len);
        for (size_t k = 0; k < pad && ok && left; k++)
            ok = tbuf_putc(out, ' ');
        tbuf_free(&piece);
        if (!ok)
            return false;
    }
    if (next < n) {
        bool ok = tbuf_puts(out, "%!(EXTRA ");
        for (size_t k = next; k < n && ok; k++)
            ok = (k > next ? tbuf_puts(out, ", ") : true) && tfmt_go(out, args[k]);
        return ok && tbuf_putc(out, ')');
    }
    return true;
}

static json_t *call_print(go_func f, json_t **args, size_t n, tsandbox *sb, size_t pos)
{
    tbuf out;
    tbuf_init(&out, sb->max_bytes);
    bool ok = true;
    if (f == GO_FUNC_PRINTF) {
        if (n < 1 || !json_is_string(args[0]))
            return fail(sb, pos, "wrong number of args for %s", "printf");
        ok = go_sprintf(&out, json_string_value(args[0]), json_string_length(args[0]), args + 1,
                        n - 1);
    } else {
        for (size_t i = 0; i < n && ok; i++) {
            bool space = f == GO_FUNC_PRINTLN
                             ? i > 0
                             : i > 0 && !json_is_string(args[i - 1]) && !json_is_string(args[i]);
            ok = (space ? tbuf_putc(&out, ' ') : true) && tfmt_go(&out, args[i]);
        }
        if (f == GO_FUNC_PRINTLN)
            ok = ok && tbuf_putc(&out, '\n');
    }
    if (!ok) {
        tbuf_free(&out);
        return fail(sb, pos, "%s output too large", go_func_name(f));
    }
    size_t len;
    char *text = tbuf_take(&out, &len);
    json_t *v = text ? json_stringn_nocheck(text, len) : NULL;
    free(text);
    return v ? v : oom(sb, pos);
}

static json_t *call_date(int days_ago)
{
    time_t now = time(NULL) - (time_t)days_ago * 86400;
    struct tm tm;
    char text[32];
    if (!localtime_r(&now, &tm) || !strftime(text, sizeof text, "%Y-%m-%d", &tm))
        return json_string("");
    return json_string(text);
}

json_t *go_call(go_func f, json_t **args, size_t n, tsandbox *sb, size_t pos)
{
    switch (f) {
    case GO_FUNC_NOT:
        if (n != 1)
            return fail(sb, pos, "wrong number of args for %s: want 1", "not");
        return json_boolean(!tvalue_truth(args[0]));
    case GO_FUNC_EQ:
    case GO_FUNC_NE:
    case GO_FUNC_LT:
    case GO_FUNC_LE:
    case GO_FUNC_GT:
    case GO_FUNC_GE:
        return call_compare(f, args, n, sb, pos);
    case GO_FUNC_LEN:
        return call_len(args, n, sb, pos);
    case GO_FUNC_INDEX:
        return call_index(args, n, sb, pos);
    case GO_FUNC_SLICE:
        return call_slice(args, n, sb, pos);
    case GO_FUNC_PRINT:
    case GO_FUNC_PRINTF:
    case GO_FUNC_PRINTLN:
        return call_print(f, args, n, sb, pos);
    case GO_FUNC_JSON: {
        if (n != 1)
            return fail(sb, pos, "wrong number of args for %s: want 1", "json");
        static const tjson_style go_json = {.python = false, .html_escape = true, .indent = -1};
        tbuf out;
        tbuf_init(&out, sb->max_bytes);
        if (!tfmt_json(&out, args[0], &go_json)) {
            tbuf_free(&out);
            return fail(sb, pos, "%s output too large", "json");
        }
        size_t len;
        char *text = tbuf_take(&out, &len);
        json_t *v = text ? json_stringn_nocheck(text, len) : NULL;
        free(text);
        return v ? v : oom(sb, pos);
    }
    case GO_FUNC_CURRENT_DATE:
    case GO_FUNC_YESTERDAY_DATE:
        if (n != 0)
            return fail(sb, pos, "wrong number of args for %s: want 0", go_func_name(f));
        return call_date(f == GO_FUNC_YESTERDAY_DATE ? 1 : 0);
    case GO_FUNC_AND:
    case GO_FUNC_OR:
    case GO_FUNC_COUNT:
        break;
    }
    return fail(sb, pos, "function %s cannot be called here", go_func_name(f));
}

/*
 * multipart/form-data bodies read into their parts (multipart.h).
 */
#include "server/http/multipart.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef struct span {
    const char *at;
    size_t len;
} span;

static bool refuse(char *message, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool refuse(char *message, size_t size, const char *fmt, ...)
{
    int n = snprintf(message, size, "failed to parse multipart form: ");
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < size)
        vsnprintf(message + n, size - (size_t)n, fmt, ap);
    va_end(ap);
    return false;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t';
}

static span trim(span s)
{
    while (s.len && is_space(*s.at)) {
        s.at++;
        s.len--;
    }
    while (s.len && is_space(s.at[s.len - 1]))
        s.len--;
    return s;
}

/* RFC 7230's tchar: what a header's or a parameter's name is made of. */
static bool is_token_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool span_is(span s, const char *text)
{
    return s.len == strlen(text) && strncasecmp(s.at, text, s.len) == 0;
}

/*
 * The parameters after a header value's first item ("; name=value; name2=\"quoted\""),
 * each handed to take with its name and unquoted value (copied into value, value_size
 * bytes). False when they do not parse or a value is too long (message set).
 */
typedef bool (*param_fn)(void *ctx, span name, const char *value, char *message, size_t size);

static bool read_params(span s, param_fn take, void *ctx, char *message, size_t size)
{
    const char *p = s.at, *end = s.at + s.len;
    for (;;) {
        while (p < end && is_space(*p))
            p++;
        if (p == end)
            return true;
        if (*p++ != ';')
            return refuse(message, size, "expected ';' between header parameters");
        while (p < end && is_space(*p))
            p++;
        if (p == end) /* a trailing ';' */
            return true;
        span name = {p, 0};
        while (p < end && is_token_char(*p))
            p++;
        name.len = (size_t)(p - name.at);
        while (p < end && is_space(*p))
            p++;
        if (!name.len || p == end || *p++ != '=')
            return refuse(message, size, "a header parameter is not name=value");
        while (p < end && is_space(*p))
            p++;
        char value[MULTIPART_MAX_NAME];
        size_t n = 0;
        if (p < end && *p == '"') {
            for (p++;; p++) {
                if (p == end)
                    return refuse(message, size, "a quoted header parameter is not closed");
                if (*p == '"')
                    break;
                if (*p == '\\' && p + 1 < end)
                    p++;
                if (n + 1 >= sizeof value)
                    return refuse(message, size, "a header parameter longer than %d bytes",
                                  MULTIPART_MAX_NAME - 1);
                value[n++] = *p;
            }
            p++;
        } else {
            while (p < end && *p != ';' && !is_space(*p)) {
                if (n + 1 >= sizeof value)
                    return refuse(message, size, "a header parameter longer than %d bytes",
                                  MULTIPART_MAX_NAME - 1);
                value[n++] = *p++;
            }
        }
        value[n] = '\0';
        if (!take(ctx, name, value, message, size))
            return false;
    }
}

static bool take_boundary(void *ctx, span name, const char *value, char *message, size_t size)
{
    char *boundary = ctx;
    if (!span_is(name, "boundary"))
        return true;
    size_t len = strlen(value);
    if (len == 0 || len > MULTIPART_MAX_BOUNDARY)
        return refuse(message, size, "the boundary must be 1 to %d characters",
                      MULTIPART_MAX_BOUNDARY);
    memcpy(boundary, value, len + 1);
    return true;
}

static bool read_boundary(const char *content_type, char *boundary, char *message, size_t size)
{
    if (!content_type)
        return refuse(message, size, "request Content-Type isn't multipart/form-data");
    const char *semi = strchr(content_type, ';');
    span type = trim((span){content_type, semi ? (size_t)(semi - content_type)
                                               : strlen(content_type)});
    if (!span_is(type, "multipart/form-data"))
        return refuse(message, size, "request Content-Type isn't multipart/form-data");
    *boundary = '\0';
    if (semi && !read_params((span){semi, strlen(semi)}, take_boundary, boundary, message,
                             size))
        return false;
    return *boundary || refuse(message, size, "no multipart boundary param in Content-Type");
}

/*
 * Where the delimiter line ("--" boundary) that ends a part starts, searching from p: the
 * CRLF before it, and after it "--" (the close) or optional spaces and CRLF; a match followed
 * by anything else is the part's content. NULL when none is before end.
 */
static const char *find_delimiter(const char *p, const char *end, const char *delim,
                                  size_t dlen)
{
    while (p < end) {
        const char *m = memmem(p, (size_t)(end - p), delim, dlen);
        if (!m)
            return NULL;
        const char *after = m + dlen;
        if (end - after >= 2 && after[0] == '-' && after[1] == '-')
            return m;
        while (after < end && is_space(*after))
            after++;
        if (end - after >= 2 && after[0] == '\r' && after[1] == '\n')
            return m;
        p = m + 1;
    }
    return NULL;
}

typedef struct disposition {
    multipart_part *part;
    bool named;
} disposition;

static bool take_disposition(void *ctx, span name, const char *value, char *message,
                             size_t size)
{
    (void)message;
    (void)size;
    disposition *d = ctx;
    if (span_is(name, "name")) {
        strcpy(d->part->name, value);
        d->named = true;
    } else if (span_is(name, "filename")) {
        strcpy(d->part->filename, value);
        d->part->is_file = true;
    }
    return true;
}

/* One header line of part (index i) into it; false with message. */
static bool read_header(span line, multipart_part *part, bool *named, size_t i, char *message,
                        size_t size)
{
    for (size_t k = 0; k < line.len; k++)
        if ((unsigned char)line.at[k] < 0x20 && line.at[k] != '\t')
            return refuse(message, size, "part %zu: a control character in its headers", i);
    const char *colon = memchr(line.at, ':', line.len);
    span name = {line.at, colon ? (size_t)(colon - line.at) : 0};
    for (size_t k = 0; k < name.len; k++)
        if (!is_token_char(name.at[k]))
            name.len = 0;
    if (!name.len)
        return refuse(message, size, "part %zu: a header line is not Name: value", i);
    span value = trim((span){colon + 1, line.len - name.len - 1});
    if (span_is(name, "Content-Type")) {
        if (value.len >= sizeof part->content_type)
            return refuse(message, size, "part %zu: a Content-Type longer than %d bytes", i,
                          MULTIPART_MAX_NAME - 1);
        memcpy(part->content_type, value.at, value.len);
        part->content_type[value.len] = '\0';
    } else if (span_is(name, "Content-Disposition")) {
        const char *semi = memchr(value.at, ';', value.len);
        span kind = trim((span){value.at, semi ? (size_t)(semi - value.at) : value.len});
        if (!span_is(kind, "form-data"))
            return refuse(message, size, "part %zu: its Content-Disposition is not form-data",
                          i);
        disposition d = {part, false};
        if (semi && !read_params((span){semi, value.len - (size_t)(semi - value.at)},
                                 take_disposition, &d, message, size))
            return false;
        *named = *named || d.named;
    }
    return true;
}

/* The header block [p, end) of part i, CRLF-terminated lines, into it. */
static bool read_headers(const char *p, const char *end, multipart_part *part, size_t i,
                         char *message, size_t size)
{
    bool named = false;
    while (p < end) {
        const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);
        if (!eol) /* the caller's block ends in CRLF: not reached */
            eol = end;
        if (!read_header((span){p, (size_t)(eol - p)}, part, &named, i, message, size))
            return false;
        p = eol + 2;
    }
    return named ||
           refuse(message, size, "part %zu has no Content-Disposition: form-data with a name",
                  i);
}

bool multipart_parse(const char *content_type, const char *body, size_t len,
                     multipart_form *form, char *message, size_t size)
{
    memset(form, 0, sizeof *form);
    char boundary[MULTIPART_MAX_BOUNDARY + 1];
    if (!read_boundary(content_type, boundary, message, size))
        return false;
    if (!body)
        return refuse(message, size, "missing request body");
    /* "\r\n--boundary": each part's end; the first delimiter may open the body itself */
    char delim[MULTIPART_MAX_BOUNDARY + 5];
    size_t dlen = (size_t)snprintf(delim, sizeof delim, "\r\n--%s", boundary);
    const char *end = body + len, *at;
    if (len >= dlen - 2 && memcmp(body, delim + 2, dlen - 2) == 0 &&
        find_delimiter(body, end, delim + 2, dlen - 2) == body)
        at = body + dlen - 2;
    else if ((at = find_delimiter(body, end, delim, dlen)))
        at += dlen;
    else
        return refuse(message, size, "the body holds no boundary line");
    for (;;) {
        /* at: just after a delimiter that find_delimiter vouched for */
        if (at[0] == '-' && at[1] == '-')
            return true;
        while (is_space(*at))
            at++;
        at += 2; /* the CRLF */
        size_t i = form->n_parts;
        if (i == MULTIPART_MAX_PARTS)
            return refuse(message, size, "more than %d parts", MULTIPART_MAX_PARTS);
        multipart_part *part = &form->parts[i];
        const char *data;
        if (end - at >= 2 && at[0] == '\r' && at[1] == '\n') {
            data = at + 2; /* no headers */
        } else {
            size_t window = (size_t)(end - at);
            if (window > MULTIPART_MAX_HEADER_BYTES + 4)
                window = MULTIPART_MAX_HEADER_BYTES + 4;
            const char *blank = memmem(at, window, "\r\n\r\n", 4);
            if (!blank)
                return refuse(message, size, "part %zu: its headers are not ended by a blank "
                              "line within %d bytes", i, MULTIPART_MAX_HEADER_BYTES);
            if (!read_headers(at, blank + 2, part, i, message, size))
                return false;
            data = blank + 4;
        }
        if (!*part->name)
            return refuse(message, size, "part %zu has no Content-Disposition: form-data with "
                          "a name", i);
        const char *next = find_delimiter(data, end, delim, dlen);
        if (!next)
            return refuse(message, size, "the body ends before its closing boundary");
        part->data = data;
        part->len = (size_t)(next - data);
        form->n_parts++;
        at = next + dlen;
    }
}

const multipart_part *multipart_field(const multipart_form *form, const char *name)
{
    for (size_t i = 0; i < form->n_parts; i++)
        if (strcmp(form->parts[i].name, name) == 0)
            return &form->parts[i];
    return NULL;
}

/* Bounded growable buffer; see tbuf.h. */
#include "template/tbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tbuf_init(tbuf *b, size_t max_bytes)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max_bytes = max_bytes;
}

void tbuf_free(tbuf *b)
{
    if (!b)
        return;
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

static bool tbuf_reserve(tbuf *b, size_t extra)
{
    if (extra > b->max_bytes || b->len > b->max_bytes - extra)
        return false;
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *data = realloc(b->data, cap);
    if (!data)
        return false;
    b->data = data;
    b->cap = cap;
    return true;
}

bool tbuf_append(tbuf *b, const char *s, size_t n)
{
    if (!tbuf_reserve(b, n))
        return false;
    if (n)
        memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return true;
}

bool tbuf_puts(tbuf *b, const char *s)
{
    return tbuf_append(b, s, strlen(s));
}

bool tbuf_putc(tbuf *b, char c)
{
    return tbuf_append(b, &c, 1);
}

bool tbuf_printf(tbuf *b, const char *fmt, ...)
{
    char small[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return false;
    if ((size_t)n < sizeof small)
        return tbuf_append(b, small, (size_t)n);
    if (!tbuf_reserve(b, (size_t)n))
        return false;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return true;
}

char *tbuf_take(tbuf *b, size_t *len)
{
    if (!b->data && !tbuf_reserve(b, 0))
        return NULL;
    char *data = b->data;
    if (len)
        *len = b->len;
    b->data = NULL;
    b->len = b->cap = 0;
    return data;
}

/*
 * tbuf: a growable byte buffer with a hard maximum, used for every string a template
 * produces (output, concatenations, JSON text). Appending past the maximum fails instead of
 * growing, so a hostile template stops at a known size. The data is always NUL-terminated.
 */
#ifndef CORRAL_TEMPLATE_TBUF_H
#define CORRAL_TEMPLATE_TBUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct tbuf {
    char *data;
    size_t len;
    size_t cap;
    size_t max_bytes;
} tbuf;

void tbuf_init(tbuf *b, size_t max_bytes);
void tbuf_free(tbuf *b);
/* False when the result would exceed max_bytes or memory runs out; b is unchanged then. */
bool tbuf_append(tbuf *b, const char *s, size_t n);
bool tbuf_puts(tbuf *b, const char *s);
bool tbuf_putc(tbuf *b, char c);
bool tbuf_printf(tbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hand the bytes to the caller (malloc'ed, NUL-terminated, never NULL) and reset b. */
char *tbuf_take(tbuf *b, size_t *len);

#endif

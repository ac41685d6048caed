/*
 * Python str operations the Jinja builtins share (internal): whitespace as str.isspace
 * sees it, strip, case mapping (upper, lower, title, capitalize) through utf8proc, and
 * split. Results go to a bounded tbuf; invalid UTF-8 bytes pass through unchanged.
 */
#ifndef CORRAL_TEMPLATE_JINJA_STRINGS_H
#define CORRAL_TEMPLATE_JINJA_STRINGS_H

#include <stdbool.h>
#include <stddef.h>

#include "template/tbuf.h"

typedef enum jcase { JCASE_UPPER, JCASE_LOWER, JCASE_TITLE, JCASE_CAPITALIZE } jcase;

/* Strip chars (NULL: whitespace) from the left and/or right; gives the kept range. */
void jstr_strip(const char *s, size_t n, const char *chars, size_t n_chars, bool left, bool right,
                size_t *start, size_t *end);
bool jstr_case(tbuf *out, const char *s, size_t n, jcase mode);
/* Byte length of the whitespace code point at s[i], or 0. */
size_t jstr_space_at(const char *s, size_t n, size_t i);

#endif

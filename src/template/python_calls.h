/*
 * Tool calls written as Python calls, as LFM2 and Olmo 3 write them between their tool tags:
 * NAME(KEY=VALUE, ...), each value a Python literal (a string in single or double quotes
 * with Python's backslash escapes, an integer or float, True, False, None, or a list, tuple
 * or dict of them; JSON's true, false and null are taken too), several calls in a list
 * ([a(x=1), b()], LFM2's) or one after another, by commas or line breaks (Olmo 3's).
 */
#ifndef CORRAL_TEMPLATE_PYTHON_CALLS_H
#define CORRAL_TEMPLATE_PYTHON_CALLS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The calls in s[0..n), appended to found as the output parser gives calls ({"function":
 * {"index", "name", "arguments"}}, indexes from first_index); false (found as it was) when
 * the text is not calls alone, or none. */
bool python_calls_read(const char *s, size_t n, size_t first_index, json_t *found);

#endif

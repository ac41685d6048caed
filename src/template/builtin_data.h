/*
 * The built-in template files embedded at build time (builtin.cmake generates the table from
 * src/template/builtin/). Internal to src/template/; builtin.c is the only reader.
 */
#ifndef CORRAL_TEMPLATE_BUILTIN_DATA_H
#define CORRAL_TEMPLATE_BUILTIN_DATA_H

#include <stddef.h>

typedef struct builtin_file {
    const char *name; /* file name, e.g. "chatml.gotmpl" */
    const char *data; /* NUL-terminated */
    size_t size;
} builtin_file;

extern const builtin_file builtin_files[];
extern const size_t builtin_n_files;

#endif

/*
 * Built-in templates shipped in the binary: the Go template and parameters (stop strings…)
 * of each named format, and auto-detection of the built-in a GGUF's Jinja chat template
 * stands for, against the embedded index (see detect.c for the matching rule).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/builtin_data.h"
#include "template/template.h"

static const builtin_file *find_file(const char *name, const char *ext)
{
    char file[256];
    snprintf(file, sizeof file, "%s%s", name, ext);
    for (size_t i = 0; i < builtin_n_files; i++)
        if (strcmp(builtin_files[i].name, file) == 0)
            return &builtin_files[i];
    return NULL;
}

bool corral_builtin_template(const char *name, const char **source, size_t *len, json_t **params)
{
    const builtin_file *tmpl = find_file(name, ".gotmpl");
    if (!tmpl || strcmp(name, "index") == 0)
        return false;
    *source = tmpl->data;
    *len = tmpl->size;
    if (params) {
        const builtin_file *json = find_file(name, ".json");
        *params = json ? json_loadb(json->data, json->size, 0, NULL) : json_object();
        if (!*params)
            return false;
    }
    return true;
}

bool corral_builtin_template_detect(const char *chat_template, size_t len, char *name,
                                    size_t name_size)
{
    const builtin_file *file = find_file("index", ".json");
    json_t *index = file ? json_loadb(file->data, file->size, 0, NULL) : NULL;
    const char *found = index ? corral_template_detect(index, chat_template, len) : NULL;
    bool ok = found && find_file(found, ".gotmpl") && strlen(found) < name_size;
    if (ok)
        memcpy(name, found, strlen(found) + 1);
    json_decref(index);
    return ok;
}

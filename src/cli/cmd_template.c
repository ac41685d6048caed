/*
 * `corral template render FILE | --from MODEL.gguf`: render a prompt template (FILE.gotmpl
 * as an ollama TEMPLATE layer, any other file or the GGUF's tokenizer.chat_template as a
 * Jinja chat template) over one JSON request read from stdin, and print exactly the prompt.
 * Template errors go to stderr with exit status 1. Developer tool.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "corral/engine.h"
#include "template/template.h"

#define MAX_INPUT_BYTES (64u << 20)

static void usage(FILE *out)
{
    fprintf(out, "Usage: corral template render FILE < request.json\n"
                 "       corral template render --from MODEL.gguf < request.json\n"
                 "  FILE.gotmpl is rendered as an ollama TEMPLATE (Go text/template), any other\n"
                 "  file as a Jinja chat template. The request holds messages, tools,\n"
                 "  add_generation_prompt, bos_token, eos_token, enable_thinking and, for Go\n"
                 "  templates, system, prompt, response, suffix, think.\n");
}

/* All of f, at most max bytes; NULL when larger or unreadable. */
static char *read_all(FILE *f, size_t max, size_t *len)
{
    size_t cap = 65536, n = 0;
    char *data = malloc(cap + 1);
    while (data) {
        size_t got = fread(data + n, 1, cap - n, f);
        n += got;
        if (n < cap)
            break;
        if (cap >= max) {
            free(data);
            return NULL;
        }
        cap = cap * 2 > max ? max : cap * 2;
        char *grown = realloc(data, cap + 1);
        if (!grown)
            free(data);
        data = grown;
    }
    if (!data || ferror(f)) {
        free(data);
        return NULL;
    }
    data[n] = '\0';
    *len = n;
    return data;
}

/* The GGUF's own Jinja chat template, malloc'ed; NULL with a message on stderr. */
static char *gguf_chat_template(const char *path, size_t *len)
{
    corral_error err = {{0}};
    corral_model_file *file = corral_model_file_open(path, &err);
    if (!file) {
        fprintf(stderr, "corral template: %s\n", err.message);
        return NULL;
    }
    long key = corral_model_file_find_meta(file, "tokenizer.chat_template");
    const char *text = NULL;
    if (key >= 0 && corral_model_file_meta_type(file, (size_t)key) == CORRAL_META_STRING)
        text = corral_model_file_meta_string(file, (size_t)key, 0, len);
    char *copy = text ? malloc(*len + 1) : NULL;
    if (copy) {
        memcpy(copy, text, *len);
        copy[*len] = '\0';
    } else {
        fprintf(stderr, "corral template: '%s' has no tokenizer.chat_template\n", path);
    }
    corral_model_file_close(file);
    return copy;
}

static char *template_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *src = f ? read_all(f, CORRAL_TEMPLATE_MAX_SOURCE_BYTES, len) : NULL;
    if (f)
        fclose(f);
    if (!src)
        fprintf(stderr,
                "corral template: cannot read '%s' (missing, unreadable or over %u bytes)\n", path,
                CORRAL_TEMPLATE_MAX_SOURCE_BYTES);
    return src;
}

static int render(const char *path, bool from_gguf)
{
    size_t src_len = 0, input_len = 0;
    char *src = from_gguf ? gguf_chat_template(path, &src_len) : template_file(path, &src_len);
    if (!src)
        return 1;
    char *input = read_all(stdin, MAX_INPUT_BYTES, &input_len);
    json_error_t jerr;
    json_t *request = input ? json_loadb(input, input_len, 0, &jerr) : NULL;
    bool parse_failed = input && !request;
    free(input);
    if (!json_is_object(request)) {
        fprintf(stderr, "corral template: stdin must hold one JSON object%s%s\n",
                parse_failed ? ": " : "", parse_failed ? jerr.text : "");
        json_decref(request);
        free(src);
        return 1;
    }
    size_t n = strlen(path);
    bool go = !from_gguf && n >= 7 && strcmp(path + n - 7, ".gotmpl") == 0;
    corral_error err = {{0}};
    corral_template *tmpl = go ? corral_template_parse_ollama(src, src_len, &err)
                               : corral_template_parse(CORRAL_TEMPLATE_JINJA, src, src_len, &err);
    free(src);
    size_t out_len = 0;
    char *out = tmpl ? corral_template_render_chat(tmpl, request, NULL, &out_len, &err) : NULL;
    corral_template_free(tmpl);
    json_decref(request);
    if (!out) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    fwrite(out, 1, out_len, stdout);
    free(out);
    return fflush(stdout) == 0 ? 0 : 1;
}

int cmd_template(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    bool from_gguf = argc == 4 && strcmp(argv[2], "--from") == 0;
    if ((argc != 3 && !from_gguf) || strcmp(argv[1], "render") != 0 ||
        (!from_gguf && argv[2][0] == '-')) {
        usage(stderr);
        return 2;
    }
    return render(argv[argc - 1], from_gguf);
}

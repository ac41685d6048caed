/*
 * `corral tokenize MODEL.gguf [--special] [--no-bos]` and `corral detokenize MODEL.gguf
 * [--special] [--raw]`: one case per stdin line, in the escaped form of tokenizer-cases.txt
 * (\n \t \r \\ \" \uXXXX), to one line of ids, and back. Only the vocabulary is loaded.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "corral/engine.h"
#include "util/text.h"

#define MAX_LINE_BYTES ((size_t)64 << 20)

typedef struct line_buffer {
    char *data;
    size_t size, cap;
} line_buffer;

/* Read one line without its '\n'. 1 = a line, 0 = end of input, -1 = error (message printed). */
static int read_line(FILE *in, line_buffer *line, const char *cmd)
{
    line->size = 0;
    bool any = false;
    for (;;) {
        if (line->cap - line->size < 2) {
            size_t cap = line->cap ? line->cap * 2 : 4096;
            char *grown = cap <= MAX_LINE_BYTES + 4096 ? realloc(line->data, cap) : NULL;
            if (!grown) {
                fprintf(stderr, "corral %s: input line longer than %zu bytes\n", cmd,
                        MAX_LINE_BYTES);
                return -1;
            }
            line->data = grown;
            line->cap = cap;
        }
        if (!fgets(line->data + line->size, (int)(line->cap - line->size), in))
            break;
        any = true;
        line->size += strlen(line->data + line->size);
        if (line->size > 0 && line->data[line->size - 1] == '\n') {
            line->data[--line->size] = '\0';
            return 1;
        }
    }
    if (ferror(in)) {
        fprintf(stderr, "corral %s: reading stdin: %s\n", cmd, strerror(errno));
        return -1;
    }
    return any ? 1 : 0;
}

/* Four hex digits at s (room checked by the caller), or -1. */
static long hex4(const char *s)
{
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int d = text_hex_digit(s[i]);
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/*
 * Decode the escapes in place (the result is never longer). A \uXXXX high surrogate followed
 * by a \uXXXX low one is one character; other escapes are kept as written.
 */
static size_t unescape(char *s, size_t len)
{
    size_t out = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '\\' || i + 1 == len) {
            s[out++] = s[i];
            continue;
        }
        char c = s[++i];
        long cp;
        if (c == 'n') {
            s[out++] = '\n';
        } else if (c == 't') {
            s[out++] = '\t';
        } else if (c == 'r') {
            s[out++] = '\r';
        } else if (c == '\\' || c == '"') {
            s[out++] = c;
        } else if (c == 'u' && i + 4 < len && (cp = hex4(s + i + 1)) >= 0) {
            i += 4;
            long low;
            if (cp >= 0xD800 && cp <= 0xDBFF && i + 6 < len && s[i + 1] == '\\' &&
                s[i + 2] == 'u' && (low = hex4(s + i + 3)) >= 0xDC00 && low <= 0xDFFF) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                i += 6;
            }
            out += text_utf8_encode((uint32_t)cp, (unsigned char *)s + out);
        } else {
            s[out++] = '\\';
            s[out++] = c;
        }
    }
    return out;
}

static void usage_tokenize(FILE *out)
{
    fprintf(out, "Usage: corral tokenize MODEL.gguf [--special] [--no-bos] < lines\n"
                 "  Each stdin line (escapes \\n \\t \\r \\\\ \\\" \\uXXXX) becomes a line of ids.\n"
                 "  --special  text of control tokens (\"<|eot_id|>\") becomes those tokens\n"
                 "  --no-bos   do not add BOS/EOS\n");
}

static void usage_detokenize(FILE *out)
{
    fprintf(out, "Usage: corral detokenize MODEL.gguf [--special] [--raw] < lines\n"
                 "  Each stdin line of ids becomes a line of text, escaped as tokenize reads it.\n"
                 "  --special  render control tokens (\"<s>\") instead of dropping them\n"
                 "  --raw      print the bytes unescaped\n");
}

/* Shared argument parsing: MODEL plus boolean flags named in names[]. 0 = go on. */
static int parse_args(int argc, char **argv, const char *const names[2], bool *flags[2],
                      const char **model, void (*usage)(FILE *))
{
    for (int i = 1; i < argc; i++) {
        bool matched = false;
        for (int f = 0; f < 2; f++)
            if (strcmp(argv[i], names[f]) == 0)
                *flags[f] = matched = true;
        if (matched)
            continue;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return -1;
        }
        if (argv[i][0] == '-' || *model) {
            fprintf(stderr, "corral %s: unexpected argument '%s'\n", argv[0], argv[i]);
            usage(stderr);
            return 2;
        }
        *model = argv[i];
    }
    if (!*model) {
        usage(stderr);
        return 2;
    }
    return 0;
}

int cmd_tokenize(int argc, char **argv)
{
    bool special = false, no_bos = false;
    const char *model = NULL;
    int rc = parse_args(argc, argv, (const char *const[2]){"--special", "--no-bos"},
                        (bool *[2]){&special, &no_bos}, &model, usage_tokenize);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    corral_error err;
    corral_vocab *vocab = corral_vocab_open(model, &err);
    if (!vocab) {
        fprintf(stderr, "corral tokenize: %s\n", err.message);
        return 1;
    }
    line_buffer line = {0};
    corral_token *ids = NULL;
    size_t ids_cap = 0;
    int status = 0;
    while ((rc = read_line(stdin, &line, "tokenize")) == 1) {
        size_t len = unescape(line.data, line.size), n_ids;
        for (;;) {
            if (!corral_tokenize(vocab, line.data, len, !no_bos, special, ids, ids_cap, &n_ids,
                                 &err)) {
                fprintf(stderr, "corral tokenize: %s\n", err.message);
                status = 1;
                goto done;
            }
            if (n_ids <= ids_cap)
                break;
            corral_token *grown = realloc(ids, n_ids * sizeof *ids);
            if (!grown) {
                fprintf(stderr, "corral tokenize: out of memory\n");
                status = 1;
                goto done;
            }
            ids = grown;
            ids_cap = n_ids;
        }
        for (size_t i = 0; i < n_ids; i++)
            printf(i ? " %d" : "%d", ids[i]);
        putchar('\n');
    }
    if (rc < 0)
        status = 1;
done:
    free(ids);
    free(line.data);
    corral_vocab_free(vocab);
    return status;
}

static void print_escaped(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        switch (s[i]) {
        case '\n': fputs("\\n", stdout); break;
        case '\t': fputs("\\t", stdout); break;
        case '\r': fputs("\\r", stdout); break;
        case '\\': fputs("\\\\", stdout); break;
        default: putchar(s[i]);
        }
    }
}

/* Parse the ids of one line into *ids (grown as needed). False with a message on bad input. */
static bool parse_ids(char *s, corral_token **ids, size_t *n, size_t *cap, size_t line_no)
{
    *n = 0;
    for (char *p = s;;) {
        while (*p == ' ' || *p == '\t' || *p == '\r')
            p++;
        if (!*p)
            return true;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX) {
            fprintf(stderr, "corral detokenize: line %zu: '%.20s' is not a token id\n", line_no,
                    p);
            return false;
        }
        p = end;
        if (*n == *cap) {
            size_t grown_cap = *cap ? *cap * 2 : 256;
            corral_token *grown = realloc(*ids, grown_cap * sizeof **ids);
            if (!grown) {
                fprintf(stderr, "corral detokenize: out of memory\n");
                return false;
            }
            *ids = grown;
            *cap = grown_cap;
        }
        (*ids)[(*n)++] = (corral_token)v;
    }
}

int cmd_detokenize(int argc, char **argv)
{
    bool special = false, raw = false;
    const char *model = NULL;
    int rc = parse_args(argc, argv, (const char *const[2]){"--special", "--raw"},
                        (bool *[2]){&special, &raw}, &model, usage_detokenize);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    corral_error err;
    corral_vocab *vocab = corral_vocab_open(model, &err);
    if (!vocab) {
        fprintf(stderr, "corral detokenize: %s\n", err.message);
        return 1;
    }
    line_buffer line = {0};
    corral_token *ids = NULL;
    size_t n_ids, ids_cap = 0, line_no = 0, text_cap = 0;
    char *text = NULL;
    int status = 0;
    while (status == 0 && (rc = read_line(stdin, &line, "detokenize")) == 1) {
        line_no++;
        size_t n_bytes;
        if (!parse_ids(line.data, &ids, &n_ids, &ids_cap, line_no)) {
            status = 1;
            break;
        }
        for (;;) {
            if (!corral_detokenize(vocab, ids, n_ids, true, special, text, text_cap, &n_bytes,
                                   &err)) {
                fprintf(stderr, "corral detokenize: line %zu: %s\n", line_no, err.message);
                status = 1;
                break;
            }
            if (n_bytes <= text_cap)
                break;
            char *grown = realloc(text, n_bytes);
            if (!grown) {
                fprintf(stderr, "corral detokenize: out of memory\n");
                status = 1;
                break;
            }
            text = grown;
            text_cap = n_bytes;
        }
        if (status)
            break;
        if (raw)
            fwrite(text, 1, n_bytes, stdout);
        else
            print_escaped(text, n_bytes);
        putchar('\n');
    }
    if (rc < 0)
        status = 1;
    free(text);
    free(ids);
    free(line.data);
    corral_vocab_free(vocab);
    return status;
}

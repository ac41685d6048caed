/*
 * Printing a streamed generation (see generate.h). Word wrap holds back the word being
 * written until a space or newline shows where it ends, so a word that would cross the right
 * edge starts the next line instead. Widths are terminal columns: a CJK character takes two,
 * and a line may break between two of them.
 */
#include "generate.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <utf8proc.h>

#include "cli/format.h"

#define MAX_REPLY_BYTES (64u << 20)
#define WORD_BYTES 1024
#define GREY "\x1b[90m"
#define RESET "\x1b[0m"

typedef struct printer {
    const generate_display *display;
    bool terminal;
    size_t width;       /* 0: no wrapping */
    size_t column;
    char word[WORD_BYTES];
    size_t word_len, word_cols;
    size_t char_start;  /* where the character being decoded starts in word */
    uint32_t code;      /* its code point so far */
    int pending;        /* its continuation bytes still to come */
    bool thinking;      /* inside the thinking block */
    bool wrote_anything;
    char last_char;
    char *reply;        /* the content, for the caller's history */
    size_t reply_len, reply_cap;
    bool reply_overflow;
    json_t *final_chunk;
} printer;

static void on_sigint(int sig)
{
    (void)sig;
    client_cancel();
}

void generate_install_interrupt(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: a blocked read returns so the REPL sees Ctrl-C */
    sigaction(SIGINT, &sa, NULL);
}

static void flush_word(printer *p)
{
    if (!p->word_len)
        return;
    if (p->width && p->column > 0 && p->column + p->word_cols > p->width) {
        fputc('\n', stdout);
        p->column = 0;
    }
    fwrite(p->word, 1, p->word_len, stdout);
    p->column += p->word_cols;
    p->word_len = p->word_cols = 0;
}

/*
 * The character that ends at the word's end is complete: it joins the word, or, when it is
 * wide (a place a line of CJK text may break) or the word would pass the line's end, the word
 * before it is printed first. A wide character is printed at once, as a word of its own.
 */
static void complete_char(printer *p)
{
    /* utf8proc's East Asian widths: 2 for CJK, kana, Hangul, fullwidth forms and emoji, 0 for
     * combining marks and zero-width characters */
    int width = utf8proc_charwidth((utf8proc_int32_t)p->code);
    size_t cols = width > 0 ? (size_t)width : 0;
    if (cols == 2 || (p->word_cols && p->word_cols + cols > p->width)) {
        char tail[4];
        size_t n = p->word_len - p->char_start;
        memcpy(tail, p->word + p->char_start, n);
        p->word_len = p->char_start;
        flush_word(p);
        memcpy(p->word, tail, n);
        p->word_len = n;
    }
    p->word_cols += cols;
    if (cols == 2)
        flush_word(p);
}

/* One byte of a word into the word buffer, decoding UTF-8 as it comes. */
static void put_word_byte(printer *p, unsigned char b)
{
    bool continuation = (b & 0xC0) == 0x80;
    if (!continuation || !p->pending) { /* a new character (a stray continuation byte too) */
        if (p->word_len + 4 >= sizeof p->word)
            flush_word(p); /* a "word" longer than the buffer: break it */
        p->char_start = p->word_len;
        p->pending = b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : b >= 0xC0 ? 1 : 0;
        p->code = b >= 0xF0 ? b & 0x07u : b >= 0xE0 ? b & 0x0Fu : b >= 0xC0 ? b & 0x1Fu : b;
    } else {
        p->code = p->code << 6 | (b & 0x3Fu);
        p->pending--;
    }
    p->word[p->word_len++] = (char)b;
    if (!p->pending)
        complete_char(p);
}

static void put_text(printer *p, const char *text)
{
    size_t len = strlen(text);
    if (len) {
        p->wrote_anything = true;
        p->last_char = text[len - 1];
    }
    if (!p->width) {
        fputs(text, stdout);
        fflush(stdout);
        return;
    }
    for (const char *c = text; *c; c++) {
        if (*c == '\n') {
            flush_word(p);
            fputc('\n', stdout);
            p->column = 0;
        } else if (*c == ' ') {
            flush_word(p);
            if (p->column + 1 > p->width) {
                fputc('\n', stdout);
                p->column = 0;
            } else {
                fputc(' ', stdout);
                p->column++;
            }
        } else {
            put_word_byte(p, (unsigned char)*c);
        }
    }
    fflush(stdout);
}

static void keep_reply(printer *p, const char *text)
{
    size_t n = strlen(text);
    if (p->reply_overflow || !n)
        return;
    if (p->reply_len + n + 1 > MAX_REPLY_BYTES) {
        p->reply_overflow = true;
        return;
    }
    if (p->reply_len + n + 1 > p->reply_cap) {
        size_t cap = p->reply_cap ? p->reply_cap : 4096;
        while (cap < p->reply_len + n + 1)
            cap *= 2;
        char *grown = realloc(p->reply, cap);
        if (!grown) {
            p->reply_overflow = true;
            return;
        }
        p->reply = grown;
        p->reply_cap = cap;
    }
    memcpy(p->reply + p->reply_len, text, n + 1);
    p->reply_len += n;
}

static void show_thinking(printer *p, const char *text)
{
    if (p->display->hide_thinking || !*text)
        return;
    if (!p->thinking) {
        p->thinking = true;
        if (p->terminal)
            fputs(GREY, stdout);
        put_text(p, "Thinking...\n");
    }
    put_text(p, text);
}

static void end_thinking(printer *p)
{
    if (!p->thinking)
        return;
    p->thinking = false;
    put_text(p, "\n...done thinking.\n\n");
    if (p->terminal)
        fputs(RESET, stdout);
}

static bool on_chunk(void *user, const json_t *chunk)
{
    printer *p = user;
    const json_t *message = json_object_get(chunk, "message");
    const json_t *source = message ? message : chunk;
    const char *thinking = json_string_value(json_object_get(source, "thinking"));
    const char *content = json_string_value(json_object_get(source, message ? "content"
                                                                             : "response"));
    if (thinking)
        show_thinking(p, thinking);
    if (content && *content) {
        end_thinking(p);
        put_text(p, content);
        keep_reply(p, content);
    }
    if (json_array_size(json_object_get(source, "tool_calls")))
        put_text(p, "Model called a non-existent function\n");
    if (json_is_true(json_object_get(chunk, "done"))) {
        json_decref(p->final_chunk);
        p->final_chunk = json_deep_copy(chunk);
    }
    return true;
}

static int64_t metric(const json_t *chunk, const char *key)
{
    return (int64_t)json_integer_value(json_object_get(chunk, key));
}

static void print_duration_line(const char *label, int64_t ns)
{
    char text[64];
    format_duration_ns(ns, text, sizeof text);
    fprintf(stderr, "%-22s%s\n", label, text);
}

/* ollama's Metrics.Summary */
static void print_statistics(const json_t *chunk)
{
    if (metric(chunk, "total_duration"))
        print_duration_line("total duration:", metric(chunk, "total_duration"));
    if (metric(chunk, "load_duration"))
        print_duration_line("load duration:", metric(chunk, "load_duration"));
    static const struct { const char *count, *duration, *label; } phases[] = {
        {"prompt_eval_count", "prompt_eval_duration", "prompt eval"},
        {"eval_count", "eval_duration", "eval"},
    };
    for (size_t i = 0; i < 2; i++) {
        int64_t count = metric(chunk, phases[i].count);
        int64_t duration = metric(chunk, phases[i].duration);
        char label[40];
        if (count) {
            snprintf(label, sizeof label, "%s count:", phases[i].label);
            fprintf(stderr, "%-22s%lld token(s)\n", label, (long long)count);
        }
        if (duration) {
            snprintf(label, sizeof label, "%s duration:", phases[i].label);
            print_duration_line(label, duration);
            snprintf(label, sizeof label, "%s rate:", phases[i].label);
            fprintf(stderr, "%-22s%.2f tokens/s\n", label, (double)count / ((double)duration / 1e9));
        }
    }
}

static size_t wrap_width(void)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 10)
        return (size_t)ws.ws_col - 5; /* as ollama: a margin on the right */
    return 0;
}

generate_result generate_print(corral_client *client, const char *path, const json_t *request,
                               const generate_display *display, char **reply_text,
                               corral_error *err)
{
    printer p = {.display = display, .terminal = isatty(STDOUT_FILENO)};
    if (p.terminal && display->word_wrap)
        p.width = wrap_width();
    client_reset_cancel();
    long status = client_stream(client, path, request, on_chunk, &p, err);
    flush_word(&p);
    if (p.thinking && p.terminal)
        fputs(RESET, stdout);
    fflush(stdout);
    generate_result result = GENERATE_DONE;
    if (status == 0 && client_cancelled())
        result = GENERATE_CANCELLED;
    else if (status < 200 || status > 299)
        result = GENERATE_FAILED;
    if (result == GENERATE_CANCELLED ? !p.wrote_anything || p.last_char != '\n'
                                     : p.wrote_anything && p.last_char != '\n')
        fputc('\n', stdout); /* after the text, or after the ^C the terminal echoed */
    if (result == GENERATE_DONE && display->verbose && p.final_chunk)
        print_statistics(p.final_chunk);
    json_decref(p.final_chunk);
    if (reply_text && result == GENERATE_DONE) {
        *reply_text = p.reply ? p.reply : strdup("");
        p.reply = NULL;
    }
    free(p.reply);
    return result;
}

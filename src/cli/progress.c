/*
 * The progress display (see progress.h). All state sits behind one mutex because the
 * spinner thread redraws while the caller's transfer reports. Lines are cut to the terminal
 * width so a redraw can move the cursor up by exactly the number of lines it drew.
 */
#include "progress.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "format.h"

#define MAX_ENTRIES 64
#define SPINNER_TICK_MS 100

typedef struct progress_entry {
    char status[160];
    char digest[80];  /* empty for a spinner */
    uint64_t total, completed;
    uint64_t first_completed;
    double first_seen_s;
    bool done;        /* a later status replaced this spinner */
    bool printed;     /* plain output: already written */
} progress_entry;

struct progress {
    FILE *out;
    bool terminal;
    pthread_mutex_t lock;
    pthread_t ticker;
    bool ticker_running, stopping;
    unsigned tick;
    progress_entry entries[MAX_ENTRIES];
    size_t n_entries;
    size_t lines_drawn;
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int terminal_width(FILE *out)
{
    struct winsize ws;
    if (ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20)
        return ws.ws_col;
    return 80;
}

/* Copy at most max_cols UTF-8 characters of text into out. */
static void cut_to_columns(const char *text, size_t max_cols, char *out, size_t size)
{
    size_t cols = 0, i = 0;
    for (; text[i] && i + 1 < size; i++) {
        if (((unsigned char)text[i] & 0xC0) != 0x80 && cols++ == max_cols)
            break;
        out[i] = text[i];
    }
    out[i] = '\0';
}

static bool entry_is_bar(const progress_entry *e)
{
    return e->digest[0] && e->completed > 0 && e->total > 0;
}

static void render_bar(const progress_entry *e, int width, char *line, size_t size)
{
    uint64_t completed = e->completed < e->total ? e->completed : e->total;
    int percent = (int)(completed * 100 / e->total);
    char done_text[32], total_text[32], right[160];
    format_bytes(completed, done_text, sizeof done_text);
    format_bytes(e->total, total_text, sizeof total_text);
    if (completed >= e->total) {
        snprintf(right, sizeof right, " %s", total_text);
    } else {
        double elapsed = now_s() - e->first_seen_s;
        double rate = elapsed > 0.5 ? (double)(completed - e->first_completed) / elapsed : 0;
        char rate_text[32] = "", eta[32] = "";
        if (rate > 0) {
            format_bytes((uint64_t)rate, rate_text, sizeof rate_text);
            strcat(rate_text, "/s");
            format_eta((double)(e->total - completed) / rate, eta, sizeof eta);
        }
        snprintf(right, sizeof right, " %s/%s  %s  %s", done_text, total_text, rate_text, eta);
    }
    char left[200];
    snprintf(left, sizeof left, "%s: %3d%% ", e->status, percent);
    int bar_cols = width - (int)strlen(left) - (int)strlen(right) - 4;
    bar_cols = bar_cols < 10 ? 10 : bar_cols > 50 ? 50 : bar_cols;
    int filled = (int)(completed * (uint64_t)bar_cols / e->total);
    char bar[50 * 3 + 16] = "";
    size_t used = 0;
    for (int i = 0; i < bar_cols; i++) {
        const char *cell = i < filled ? "\xe2\x96\x88" : " "; /* U+2588 full block */
        size_t n = strlen(cell);
        memcpy(bar + used, cell, n);
        used += n;
    }
    bar[used] = '\0';
    snprintf(line, size, "%s\xe2\x96\x95%s\xe2\x96\x8f%s", left, bar, right); /* ▕ … ▏ */
}

static void render_entry(const progress *p, const progress_entry *e, char *line, size_t size)
{
    static const char *const frames[] = {"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"};
    if (entry_is_bar(e)) {
        render_bar(e, terminal_width(p->out), line, size);
    } else if (e->done || p->stopping) {
        snprintf(line, size, "%s", e->status);
    } else {
        snprintf(line, size, "%s%s%s", e->status, e->status[0] ? " " : "",
                 frames[p->tick % (sizeof frames / sizeof frames[0])]);
    }
}

/* Terminal: redraw every line in place. Caller holds the lock. */
static void redraw(progress *p)
{
    int width = terminal_width(p->out);
    fputs("\x1b[?2026h\r", p->out);
    if (p->lines_drawn)
        fprintf(p->out, "\x1b[%zuA", p->lines_drawn);
    for (size_t i = 0; i < p->n_entries; i++) {
        char line[1024], cut[1024];
        render_entry(p, &p->entries[i], line, sizeof line);
        cut_to_columns(line, (size_t)width - 1, cut, sizeof cut);
        fprintf(p->out, "%s\x1b[K\n", cut);
    }
    p->lines_drawn = p->n_entries;
    fputs("\x1b[?2026l", p->out);
    fflush(p->out);
}

/* Not a terminal: write each spinner status once and each layer once it is complete. */
static void print_plain(progress *p)
{
    for (size_t i = 0; i < p->n_entries; i++) {
        progress_entry *e = &p->entries[i];
        if (e->printed || !e->status[0])
            continue;
        if (e->digest[0]) {
            if (e->total == 0 || e->completed < e->total)
                continue;
            char size_text[32];
            format_bytes(e->total, size_text, sizeof size_text);
            fprintf(p->out, "%s: 100%% %s\n", e->status, size_text);
        } else {
            fprintf(p->out, "%s\n", e->status);
        }
        e->printed = true;
    }
    fflush(p->out);
}

static void *run_ticker(void *arg)
{
    progress *p = arg;
    for (;;) {
        struct timespec pause = {0, SPINNER_TICK_MS * 1000000L};
        nanosleep(&pause, NULL);
        pthread_mutex_lock(&p->lock);
        if (p->stopping) {
            pthread_mutex_unlock(&p->lock);
            return NULL;
        }
        p->tick++;
        redraw(p);
        pthread_mutex_unlock(&p->lock);
    }
}

progress *progress_create(FILE *out)
{
    progress *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->out = out;
    p->terminal = isatty(fileno(out));
    pthread_mutex_init(&p->lock, NULL);
    if (p->terminal) {
        fputs("\x1b[?25l", out); /* hide the cursor */
        fflush(out);
        p->ticker_running = pthread_create(&p->ticker, NULL, run_ticker, p) == 0;
    }
    return p;
}

static progress_entry *find_or_add(progress *p, const char *status, const char *digest)
{
    for (size_t i = p->n_entries; i-- > 0;) {
        progress_entry *e = &p->entries[i];
        if (digest && *digest ? strcmp(e->digest, digest) == 0
                              : !e->digest[0] && strcmp(e->status, status) == 0 && !e->done)
            return e;
    }
    if (!digest || !*digest)
        for (size_t i = 0; i < p->n_entries; i++)
            if (!p->entries[i].digest[0])
                p->entries[i].done = true;
    if (p->n_entries == MAX_ENTRIES) { /* forget the oldest line rather than grow */
        memmove(p->entries, p->entries + 1, sizeof p->entries[0] * (MAX_ENTRIES - 1));
        p->n_entries--;
    }
    progress_entry *e = &p->entries[p->n_entries++];
    memset(e, 0, sizeof *e);
    snprintf(e->digest, sizeof e->digest, "%s", digest ? digest : "");
    e->first_seen_s = now_s();
    return e;
}

void progress_update(progress *p, const char *status, const char *digest, uint64_t total,
                     uint64_t completed)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    size_t n_before = p->n_entries;
    progress_entry *e = find_or_add(p, status ? status : "", digest);
    bool added = p->n_entries != n_before || strcmp(e->status, status ? status : "") != 0;
    snprintf(e->status, sizeof e->status, "%s", status ? status : "");
    if (e->total != total || e->completed == 0) {
        e->first_completed = completed;
        e->first_seen_s = now_s();
    }
    e->total = total;
    e->completed = completed;
    if (p->terminal) {
        if (added || !p->ticker_running) /* otherwise the ticker redraws within 100 ms */
            redraw(p);
    } else {
        print_plain(p);
    }
    pthread_mutex_unlock(&p->lock);
}

void progress_update_json(progress *p, const json_t *line)
{
    const char *status = json_string_value(json_object_get(line, "status"));
    const char *digest = json_string_value(json_object_get(line, "digest"));
    json_int_t total = json_integer_value(json_object_get(line, "total"));
    json_int_t completed = json_integer_value(json_object_get(line, "completed"));
    if (!status)
        return;
    progress_update(p, status, digest, total > 0 ? (uint64_t)total : 0,
                    completed > 0 ? (uint64_t)completed : 0);
}

void progress_free(progress *p, bool keep)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stopping = true;
    pthread_mutex_unlock(&p->lock);
    if (p->ticker_running)
        pthread_join(p->ticker, NULL);
    if (p->terminal) {
        if (keep) {
            redraw(p);
        } else if (p->lines_drawn) {
            fprintf(p->out, "\r\x1b[%zuA\x1b[J", p->lines_drawn);
        }
        fputs("\x1b[?25h", p->out); /* show the cursor */
    } else if (keep) {
        for (size_t i = 0; i < p->n_entries; i++)
            p->entries[i].done = true;
        print_plain(p);
    }
    fflush(p->out);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

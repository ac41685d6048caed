/*
 * The REPL's bracketed paste and Ctrl-G editor keys (see repl_keys.h), as libedit key
 * functions: each reads or produces text, holds its whole lines in the shared repl_line and
 * leaves the last line in libedit's buffer, then asks libedit to redraw.
 */
#include "cli/repl_keys.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <wchar.h>

#include "cli/client.h"
#include "util/file.h"

const char *repl_line_prompt(const repl_line *line)
{
    return line && (line->continuing || line->held) ? "... " : ">>> ";
}

/*
 * A terminal in bracketed-paste mode wraps pasted text in ESC[200~ ... ESC[201~. Without it a
 * pasted block would reach the REPL as Enter-separated lines, each sent as a prompt of its
 * own. With it, the pasted lines wait (shown under "... ") while the last one is edited, and
 * Enter sends them all as one message, as ollama does.
 */
#define PASTE_START "\033[200~"
#define PASTE_END "\033[201~"

bool repl_append_bytes(char **text, size_t *len, const char *bytes, size_t n)
{
    if (n > REPL_MAX_INPUT_BYTES - *len)
        return false;
    char *grown = realloc(*text, *len + n + 1);
    if (!grown)
        return false;
    memcpy(grown + *len, bytes, n);
    *len += n;
    grown[*len] = '\0';
    *text = grown;
    return true;
}

/* The wide characters [from, to) appended as UTF-8 (the REPL's LC_CTYPE) to *text. */
static bool append_wide(char **text, size_t *len, const wchar_t *from, const wchar_t *to)
{
    for (; from < to; from++) {
        char mb[MB_LEN_MAX];
        mbstate_t state = {0};
        size_t k = wcrtomb(mb, *from, &state);
        if (k != (size_t)-1 && !repl_append_bytes(text, len, mb, k))
            return false;
    }
    return true;
}

/*
 * The text up to ESC[201~, line ends as "\n", malloc'ed; NULL when input ended first or the
 * paste is larger than REPL_MAX_INPUT_BYTES (the rest is still read: none of it runs as keys).
 */
static char *read_paste(EditLine *el)
{
    char *text = NULL;
    size_t len = 0, matched = 0; /* bytes of PASTE_END seen last */
    bool fits = true, after_cr = false;
    const size_t end_len = strlen(PASTE_END);
    wchar_t wc;
    while (matched < end_len && el_wgetc(el, &wc) == 1) {
        if (wc == (wchar_t)(unsigned char)PASTE_END[matched]) {
            matched++;
            continue;
        }
        /* a partial end marker was text after all; an ESC may start the real one */
        fits = fits && repl_append_bytes(&text, &len, PASTE_END, matched);
        matched = wc == L'\033';
        if (matched)
            continue;
        if (wc == L'\n' && after_cr) { /* "\r\n": one line end, already taken */
            after_cr = false;
            continue;
        }
        after_cr = wc == L'\r';
        if (wc == L'\r' || wc == L'\n')
            fits = fits && repl_append_bytes(&text, &len, "\n", 1);
        else
            fits = fits && append_wide(&text, &len, &wc, &wc + 1);
    }
    if (matched < end_len || !fits) {
        if (!fits)
            fprintf(stderr, "\nError: the paste is larger than %u MB\n",
                    REPL_MAX_INPUT_BYTES >> 20);
        free(text);
        return NULL;
    }
    return text ? text : strdup("");
}

/*
 * The edited line becomes text (malloc'ed, taken): its whole lines wait in r->held, printed
 * over the edited line, and its last line is edited. CC_REDISPLAY, for libedit to redraw it.
 */
static unsigned char hold_lines(EditLine *el, repl_line *r, char *text)
{
    char *newline = strrchr(text, '\n');
    const char *last = newline ? newline + 1 : text;
    const char *prompt = repl_line_prompt(r); /* the edited line's, before lines wait */
    size_t pasted_len = r->held ? strlen(r->held) : 0;
    if (!repl_append_bytes(&r->held, &pasted_len, text, (size_t)(last - text))) {
        fprintf(stderr, "\nError: the input is larger than %u MB\n",
                REPL_MAX_INPUT_BYTES >> 20);
        free(text);
        return CC_REDISPLAY;
    }
    printf("\r\033[K%s", last > text ? prompt : "");
    for (const char *c = text; c < last; c++)
        if (*c != '\n')
            putchar(*c);
        else
            printf(c + 1 < last ? "\r\n... " : "\r\n");
    fflush(stdout);
    const LineInfoW *li = el_wline(el);
    int chars = (int)(li->lastchar - li->buffer);
    el_cursor(el, chars);
    el_deletestr(el, chars);
    if (*last)
        el_insertstr(el, last);
    free(text);
    return CC_REDISPLAY;
}

/* libedit key function for ESC[200~ (see above). */
static unsigned char paste_key(EditLine *el, int ch)
{
    (void)ch;
    repl_line *r = NULL;
    el_get(el, EL_CLIENTDATA, &r);
    char *paste = read_paste(el);
    if (!paste)
        return CC_REDISPLAY;
    if (!strchr(paste, '\n')) { /* one line: typed in where the cursor is */
        el_insertstr(el, paste);
        free(paste);
        return CC_REFRESH;
    }
    /* the edited line with the paste at the cursor */
    const LineInfoW *li = el_wline(el);
    char *line = NULL;
    size_t len = 0;
    bool ok = append_wide(&line, &len, li->buffer, li->cursor) &&
              repl_append_bytes(&line, &len, paste, strlen(paste)) &&
              append_wide(&line, &len, li->cursor, li->lastchar);
    free(paste);
    if (!ok) {
        fprintf(stderr, "\nError: the paste is larger than %u MB\n",
                REPL_MAX_INPUT_BYTES >> 20);
        free(line);
        return CC_REDISPLAY;
    }
    return hold_lines(el, r, line);
}

/* ---- Ctrl-G: the prompt in an editor ---- */

/* CORRAL_EDITOR, else OLLAMA_EDITOR, VISUAL, EDITOR; vi when none is set. */
static const char *editor_command(void)
{
    const char *names[] = {"CORRAL_EDITOR", "OLLAMA_EDITOR", "VISUAL", "EDITOR"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v)
            return v;
    }
    return "vi";
}

/*
 * The editor run on a temporary file holding text, through the shell (an editor setting may
 * carry arguments: "code --wait"); the file's text afterwards without its trailing newlines,
 * malloc'ed. NULL, the reason printed, when it could not run or failed.
 */
static char *edit_text(const char *text)
{
    char path[] = "/tmp/corral-prompt-XXXXXX.txt";
    int fd = mkstemps(path, 4);
    if (fd < 0) {
        fprintf(stderr, "Error: cannot create a file for the editor: %s\n", strerror(errno));
        return NULL;
    }
    size_t n = strlen(text);
    bool written = write(fd, text, n) == (ssize_t)n;
    close(fd);
    char *result = NULL;
    const char *editor = editor_command();
    char command[4200];
    if (!written || (size_t)snprintf(command, sizeof command, "%s \"$1\"", editor) >=
                        sizeof command) {
        fprintf(stderr, "Error: cannot hand the prompt to the editor\n");
    } else {
        pid_t pid = fork();
        if (pid == 0) {
            execl("/bin/sh", "sh", "-c", command, "corral-editor", path, (char *)NULL);
            _exit(127);
        }
        int status = 0;
        while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "Error: the editor '%s' failed (set CORRAL_EDITOR or "
                            "OLLAMA_EDITOR to the one you use)\n", editor);
        } else {
            size_t size = 0;
            corral_error err = {{0}};
            result = util_read_file(path, REPL_MAX_INPUT_BYTES, &size, &err);
            if (!result)
                fprintf(stderr, "Error: %s\n", err.message);
            while (result && size && (result[size - 1] == '\n' || result[size - 1] == '\r'))
                result[--size] = '\0';
        }
    }
    unlink(path);
    return result;
}

/* libedit key function for Ctrl-G: the edited line goes to the editor and comes back. */
static unsigned char editor_key(EditLine *el, int ch)
{
    (void)ch;
    repl_line *r = NULL;
    el_get(el, EL_CLIENTDATA, &r);
    const LineInfoW *li = el_wline(el);
    char *line = NULL;
    size_t len = 0;
    if (!append_wide(&line, &len, li->buffer, li->lastchar)) {
        free(line);
        return CC_ERROR;
    }
    printf("\r\n");
    fflush(stdout);
    el_set(el, EL_PREP_TERM, 0); /* the editor gets the terminal as the shell leaves it */
    char *edited = edit_text(line ? line : "");
    el_set(el, EL_PREP_TERM, 1);
    fputs("\033[?2004h", stdout); /* editors turn bracketed paste off when they leave */
    free(line);
    client_reset_cancel(); /* a Ctrl-C in the editor was the editor's */
    if (!edited || !*edited) {
        free(edited);
        fflush(stdout);
        return CC_REDISPLAY;
    }
    return hold_lines(el, r, edited);
}

void repl_keys_bind(EditLine *el)
{
    /* the wide calls: libedit keeps these names as given, where the narrow ones leak copies */
    el_wset(el, EL_ADDFN, L"corral-paste", L"take a bracketed paste", paste_key);
    el_set(el, EL_BIND, PASTE_START, "corral-paste", NULL);
    el_wset(el, EL_ADDFN, L"corral-editor", L"edit the prompt in $EDITOR", editor_key);
    el_set(el, EL_BIND, "^G", "corral-editor", NULL);
    if (isatty(STDOUT_FILENO)) {
        fputs("\033[?2004h", stdout); /* the terminal marks pastes from now on */
        fflush(stdout);
    }
}

void repl_keys_unbind(void)
{
    if (isatty(STDOUT_FILENO)) {
        fputs("\033[?2004l", stdout);
        fflush(stdout);
    }
}

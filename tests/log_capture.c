/* The server's log captured for tests (log_capture.h). */
#include "log_capture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

static char log_path[64];
static int saved_stderr = -1;

void log_capture_begin(void)
{
    snprintf(log_path, sizeof log_path, "/tmp/corral-test-log-%d.txt", (int)getpid());
    fflush(stderr);
    saved_stderr = dup(STDERR_FILENO);
    int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(saved_stderr >= 0 && fd >= 0);
    dup2(fd, STDERR_FILENO);
    close(fd);
}

char *log_capture_end(void)
{
    fflush(stderr);
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
    FILE *f = fopen(log_path, "r");
    assert_non_null(f);
    static char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    return text;
}

void log_capture_remove(void)
{
    if (log_path[0])
        unlink(log_path);
}

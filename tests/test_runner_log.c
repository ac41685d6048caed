/*
 * A runner's output relayed into the server's log (src/server/sched/runner_log.c), written
 * into a real pipe as a runner writes it: each line once, with the model and the pid, in
 * whatever pieces it arrives; the runner's own JSON log lines with their level and fields; a
 * line past the limit cut; the last message kept for a failed load's error; and the end of
 * the relay not held up by a writer that keeps the pipe open.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log_capture.h"
#include "server/sched/runner_log.h"
#include "util/log.h"

static void write_all(int fd, const char *text, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, text, n);
        assert_true(w > 0);
        text += w;
        n -= (size_t)w;
    }
}

static size_t count(const char *text, const char *what)
{
    size_t n = 0;
    for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int remove_log(void **state)
{
    (void)state;
    log_capture_remove();
    return 0;
}

/* A relay for model's runner pid over a new pipe, the log captured; its write end. */
static runner_log *start_relay(const char *model, pid_t pid, int *write_end)
{
    log_configure(LOG_FORMAT_TEXT, false);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    log_capture_begin();
    corral_error err;
    runner_log *l = runner_log_start(fds[0], model, pid, &err);
    assert_non_null(l);
    *write_end = fds[1];
    return l;
}

/* Finish and free l; the message of its last line to last, and what was logged. */
static char *end_relay(runner_log *l, char *last, size_t size)
{
    runner_log_finish(l);
    runner_log_last_line(l, last, size);
    runner_log_free(l);
    return log_capture_end();
}

static void test_runner_log_relays_each_line_with_its_runner(void **state)
{
    (void)state;
    int writer;
    runner_log *l = start_relay("stories:latest", 4242, &writer);
    const char *first = "corral runner: using an F16 KV cache\r\n\ncorral runner: a line in ";
    write_all(writer, first, strlen(first));
    usleep(50 * 1000); /* the relay meets the second line's first piece alone */
    write_all(writer, "two pieces\n", 11);
    write_all(writer, "no newline at the end", 21);
    close(writer);
    char last[32];
    char *text = end_relay(l, last, sizeof last);
    assert_non_null(strstr(text, "level=INFO msg=\"corral runner: using an F16 KV cache\" "
                                 "model=stories:latest runner_pid=4242\n"));
    assert_non_null(strstr(text, "msg=\"corral runner: a line in two pieces\" "
                                 "model=stories:latest runner_pid=4242\n"));
    assert_non_null(strstr(text, "msg=\"no newline at the end\" model=stories:latest"));
    assert_int_equal(count(text, "\n"), 3); /* the empty line is not relayed */
    assert_string_equal(last, "no newline at the end");
}

static void test_runner_log_keeps_a_log_lines_level_and_fields(void **state)
{
    (void)state;
    int writer;
    runner_log *l = start_relay("m", 9, &writer);
    const char *lines =
        "{\"time\":\"2026-01-01T00:00:00.000Z\",\"level\":\"WARN\",\"msg\":\"no GPU\","
        "\"layers\":3,\"share\":0.5,\"device\":\"a b\",\"model\":\"forged\"}\n"
        "{\"level\":\"ERROR\",\"msg\":\"cannot load\"}\n"
        "{\"msg\":\"no level\"}\n";
    write_all(writer, lines, strlen(lines));
    close(writer);
    char last[32];
    char *text = end_relay(l, last, sizeof last);
    assert_non_null(strstr(text, "level=WARN msg=\"no GPU\" layers=3 share=0.5 device=\"a b\" "
                                 "model=m runner_pid=9\n"));
    assert_null(strstr(text, "2026-01-01")); /* the runner's time is not kept */
    assert_null(strstr(text, "forged"));
    assert_non_null(strstr(text, "level=ERROR msg=\"cannot load\" model=m runner_pid=9\n"));
    /* not a log line: the text as it came */
    assert_non_null(strstr(text, "level=INFO msg=\"{\\\"msg\\\":\\\"no level\\\"}\" model=m"));
    assert_string_equal(last, "{\"msg\":\"no level\"}");
}

static void test_runner_log_cuts_a_line_past_the_limit(void **state)
{
    (void)state;
    int writer;
    runner_log *l = start_relay("m", 1, &writer);
    size_t n = RUNNER_LOG_LINE_MAX + 10;
    char *line = malloc(n + 1);
    assert_non_null(line);
    memset(line, 'x', n);
    line[n] = '\n';
    write_all(writer, line, n + 1);
    free(line);
    close(writer);
    char last[16];
    char *text = end_relay(l, last, sizeof last);
    assert_int_equal(count(text, "level=INFO"), 2);
    assert_non_null(strstr(text, "msg=xxxxxxxxxx model=m runner_pid=1\n"));
    assert_string_equal(last, "xxxxxxxxxx"); /* the second piece, its 10 bytes */
}

static void test_runner_log_ends_without_waiting_for_every_writer(void **state)
{
    (void)state;
    int writer;
    runner_log *l = start_relay("m", 7, &writer);
    write_all(writer, "last words\n", 11);
    double start = seconds();
    char last[32]; /* writer stays open, as with a child the runner left behind */
    char *text = end_relay(l, last, sizeof last);
    double took = seconds() - start;
    close(writer);
    assert_non_null(strstr(text, "msg=\"last words\" model=m runner_pid=7\n"));
    assert_string_equal(last, "last words");
    assert_true(took < 1.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runner_log_relays_each_line_with_its_runner),
        cmocka_unit_test(test_runner_log_keeps_a_log_lines_level_and_fields),
        cmocka_unit_test(test_runner_log_cuts_a_line_past_the_limit),
        cmocka_unit_test(test_runner_log_ends_without_waiting_for_every_writer),
    };
    return cmocka_run_group_tests(tests, NULL, remove_log);
}

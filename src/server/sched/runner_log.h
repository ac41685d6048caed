/*
 * A runner's output in the server's log: what `corral runner` writes on its stdout and stderr
 * (a cache type it could not take, a GPU it could not use, why it failed to load, a
 * sanitizer's report) goes through a pipe to a thread of the server, which writes each line
 * to the server's log with the model's name and the runner's pid. The runner logs JSON lines
 * (util/log.h): those come out with their own level, message and fields, in the server's
 * format; any other line is an INFO line whose message is the text. The last message is
 * kept for the error a failed load reports.
 */
#ifndef CORRAL_SERVER_SCHED_RUNNER_LOG_H
#define CORRAL_SERVER_SCHED_RUNNER_LOG_H

#include <stddef.h>
#include <sys/types.h>

#include "corral/error.h"

/* The longest line relayed as one; a longer one is cut into lines this long. */
#define RUNNER_LOG_LINE_MAX 4096

typedef struct runner_log runner_log;

/* Relay the lines read from fd (a pipe's read end, owned from now on, closed by
 * runner_log_free) as the lines of model's runner pid; model must outlive the relay. NULL
 * with err set when the thread cannot start; fd is closed then too. */
runner_log *runner_log_start(int fd, const char *model, pid_t pid, corral_error *err);

/* The message of the last line that was not empty so far, cut to size (size >= 1); "" when
 * none. */
void runner_log_last_line(runner_log *l, char *out, size_t size);

/* Once the runner is gone: relay what the pipe still holds, then stop the thread. Waits at
 * most a poll's interval past the pipe's end for a writer the runner left behind. */
void runner_log_finish(runner_log *l);

/* runner_log_finish, then free; l may be NULL. */
void runner_log_free(runner_log *l);

#endif

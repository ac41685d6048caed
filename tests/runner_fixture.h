/*
 * Shared by the runner tests: a `corral runner` child process, talked to over its Unix
 * socket as the server talks to it. Started, reached and stopped here; what is said to it is
 * each test's.
 */
#ifndef CORRAL_TESTS_RUNNER_FIXTURE_H
#define CORRAL_TESTS_RUNNER_FIXTURE_H

#include <stdbool.h>
#include <sys/types.h>

/* A connection to the runner listening at socket_path; -1 when none answers there. */
int runner_fixture_connect(const char *socket_path);

/* Runs argv (argv[0] the binary; NULL-terminated) as a child, *pid its id, and waits up to
 * 20 s (sanitizer builds start slowly) for socket_path to take a connection; false when it
 * did not. */
bool runner_fixture_start(const char *const argv[], const char *socket_path, pid_t *pid);

/* Asks the runner to stop (SIGTERM) and waits for it: 0 when it exited cleanly (status 0),
 * having drained its connections and freed everything; -1 otherwise. */
int runner_fixture_stop(pid_t pid);

#endif

/*
 * Shared piece of the CLI tests: run a shell command as a user would and capture what it
 * prints.
 */
#ifndef CORRAL_TESTS_COMMAND_FIXTURE_H
#define CORRAL_TESTS_COMMAND_FIXTURE_H

/* Runs cmd with popen; returns its stdout (malloc'd, NUL-terminated) and sets *status to
 * its exit status (-1 if it did not exit). Fails the current cmocka test on any error. */
char *command_fixture_run(const char *cmd, int *status);

#endif

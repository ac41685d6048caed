/*
 * The server's log (stderr) captured to a file for a test to read back: begin, log, end.
 */
#ifndef CORRAL_TESTS_LOG_CAPTURE_H
#define CORRAL_TESTS_LOG_CAPTURE_H

/* stderr goes to a file of this process's until log_capture_end (cmocka's own messages then
 * go where they did). */
void log_capture_begin(void);

/* What was logged since log_capture_begin, up to 8 KiB; valid until the next call. */
char *log_capture_end(void);

/* Remove the file (a group teardown). */
void log_capture_remove(void);

#endif

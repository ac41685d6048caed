/*
 * `corral runner`: the child process that hosts one model for `corral serve`. It owns the
 * engine context with one KV-cache sequence per parallel slot, batches every active slot's
 * work into one forward pass per step (continuous batching: new requests join between
 * steps), and serves requests over a Unix socket (protocol.h).
 */
#ifndef CORRAL_RUNNER_RUNNER_H
#define CORRAL_RUNNER_RUNNER_H

/* Entry point; argv[0] is "runner". Returns the process exit status. */
int runner_main(int argc, char **argv);

#endif

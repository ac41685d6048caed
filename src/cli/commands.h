/*
 * The `corral` subcommands. Each takes the arguments after its name (argv[0] is the command
 * name) and returns the process exit status; only main() exits.
 */
#ifndef CORRAL_CLI_COMMANDS_H
#define CORRAL_CLI_COMMANDS_H

int cmd_bench(int argc, char **argv);
int cmd_gguf_info(int argc, char **argv);
int cmd_gpus(int argc, char **argv);
int cmd_infer(int argc, char **argv);
int cmd_runner(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_template(int argc, char **argv);

/* Client commands: they talk to `corral serve` over HTTP (client.h). */
int cmd_run(int argc, char **argv);
int cmd_pull(int argc, char **argv);
int cmd_push(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_ps(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_cp(int argc, char **argv);
int cmd_create(int argc, char **argv);
int cmd_stop(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_launch(int argc, char **argv);

#endif

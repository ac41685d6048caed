/*
 * The `corral` subcommands. Each takes the arguments after its name (argv[0] is the command
 * name) and returns the process exit status; only main() exits.
 */
#ifndef CORRAL_CLI_COMMANDS_H
#define CORRAL_CLI_COMMANDS_H

int cmd_bench(int argc, char **argv);
int cmd_gguf_info(int argc, char **argv);
int cmd_infer(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_template(int argc, char **argv);

#endif

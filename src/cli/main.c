/*
 * `corral` entry point: picks the subcommand and hands it the rest of argv.
 * Commands live one per file (cmd_*.c); this file only dispatches and prints help.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"serve", cmd_serve, "start the ollama-compatible server (alias: start)"},
    {"start", cmd_serve, "start the server"},
    {"create", cmd_create, "create a model from a Modelfile"},
    {"show", cmd_show, "show information for a model"},
    {"run", cmd_run, "run a model: one prompt, or an interactive chat"},
    {"stop", cmd_stop, "stop (unload) a running model"},
    {"pull", cmd_pull, "pull a model from a registry"},
    {"push", cmd_push, "push a model to a registry"},
    {"list", cmd_list, "list models (alias: ls)"},
    {"ls", cmd_list, "list models"},
    {"ps", cmd_ps, "list running models"},
    {"cp", cmd_cp, "copy a model"},
    {"rm", cmd_rm, "remove models"},
    {"launch", cmd_launch, "start a coding agent (Claude Code, Codex...) on a local model"},
    {"bench", cmd_bench, "prompt and generation speed of a model, as llama-bench"},
    {"gpus", cmd_gpus, "list the GPUs the engine can offload layers to"},
    {"gguf-info", cmd_gguf_info, "print a GGUF file's metadata and tensors"},
    {"infer", cmd_infer, "run a GGUF model on a prompt (developer tool)"},
    {"runner", cmd_runner, "host one model for the server (started by 'corral serve')"},
    {"tokenize", cmd_tokenize, "text lines (stdin) to token ids with a model's vocabulary"},
    {"detokenize", cmd_detokenize, "token id lines (stdin) back to text"},
    {"template", cmd_template, "render a prompt template over a JSON request (developer tool)"},
};

static void print_usage(FILE *out)
{
    fprintf(out, "Usage: corral <command> [arguments]\n\nCommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nRun 'corral <command> --help' for a command's options.\n");
}

/* Edit distance between two short words (command names; longer input is cut to 31 bytes). */
static size_t edit_distance(const char *a, const char *b)
{
    size_t n = strnlen(a, 31), m = strnlen(b, 31), row[32];
    for (size_t j = 0; j <= m; j++)
        row[j] = j;
    for (size_t i = 1; i <= n; i++) {
        size_t diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= m; j++) {
            size_t above = row[j];
            size_t best = diagonal + (a[i - 1] != b[j - 1]);
            best = above + 1 < best ? above + 1 : best;
            best = row[j - 1] + 1 < best ? row[j - 1] + 1 : best;
            row[j] = best;
            diagonal = above;
        }
    }
    return row[m];
}

/*
 * An unknown command, with the commands it may be a typo of: a prefix of theirs, or a few
 * edits away (one for a name of three letters or less, two for a longer one).
 */
static int unknown_command(const char *name)
{
    fprintf(stderr, "corral: unknown command '%s'\n", name);
    size_t len = strlen(name), most_edits = len <= 3 ? 1 : 2;
    bool first = true;
    for (size_t i = 0; len >= 2 && i < sizeof commands / sizeof commands[0]; i++) {
        if (edit_distance(name, commands[i].name) > most_edits &&
            strncmp(commands[i].name, name, len) != 0)
            continue;
        fprintf(stderr, "%s '%s'", first ? "Did you mean" : " or", commands[i].name);
        first = false;
    }
    fprintf(stderr, "%s\n", first ? "" : "?\n");
    print_usage(stderr);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        print_usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 ||
        (strcmp(name, "help") == 0 && argc == 2)) {
        print_usage(stdout);
        return 0;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "-v") == 0)
        return cmd_version(argc - 1, argv + 1);
    if (strcmp(name, "help") == 0 && argc > 2) { /* `corral help run` = `corral run --help` */
        char *help_argv[] = {argv[2], "--help", NULL};
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
            if (strcmp(argv[2], commands[i].name) == 0)
                return commands[i].run(2, help_argv);
        return unknown_command(argv[2]);
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(name, commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    return unknown_command(name);
}

/* `corral runner ...`: the per-model child process started by `corral serve`. */
#include "cli/commands.h"
#include "runner/runner.h"

int cmd_runner(int argc, char **argv)
{
    return runner_main(argc, argv);
}

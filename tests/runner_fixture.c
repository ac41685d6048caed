/* A `corral runner` child for the runner tests (runner_fixture.h). */
#include "runner_fixture.h"

#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

int runner_fixture_connect(const char *socket_path)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", socket_path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0)
        return fd;
    if (fd >= 0)
        close(fd);
    return -1;
}

bool runner_fixture_start(const char *const argv[], const char *socket_path, pid_t *pid)
{
    *pid = fork();
    if (*pid == 0) {
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    for (int i = 0; i < 200; i++) { /* up to 20 s under sanitizers */
        int fd = runner_fixture_connect(socket_path);
        if (fd >= 0) {
            close(fd);
            return true;
        }
        usleep(100 * 1000);
    }
    return false;
}

int runner_fixture_stop(pid_t pid)
{
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

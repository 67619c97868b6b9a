/* PID 1 of one box host: names the host, then reaps every orphan until it is killed.
 *
 *   unshare --mount --pid --uts --fork --mount-proc init HOSTNAME READY_FILE
 *
 * Without a reaper, a host's orphans (a daemon whose parent exited, a workload whose wrapper was
 * killed) would stay zombies and look alive to every /proc check. The box kills a host by SIGKILL
 * to this process; the kernel then kills everything else in its PID namespace. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: init HOSTNAME READY_FILE\n");
        return 2;
    }
    if (sethostname(argv[1], strlen(argv[1])) != 0) {
        perror("init: sethostname");
        return 1;
    }
    sigset_t wanted;
    sigemptyset(&wanted);
    sigaddset(&wanted, SIGCHLD);
    sigaddset(&wanted, SIGTERM);
    sigprocmask(SIG_BLOCK, &wanted, NULL); /* taken by sigwait below, so none is lost between waits */
    int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "ready\n", 6) != 6 || close(fd) != 0) {
        perror("init: ready file");
        return 1;
    }
    for (;;) {
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
        int sig = 0;
        if (sigwait(&wanted, &sig) == 0 && sig == SIGTERM)
            return 0;
    }
}

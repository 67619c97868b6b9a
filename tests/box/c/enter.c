/* Run a command inside one box host: its mount, UTS and PID namespaces, in a given folder.
 *
 *   enter INIT_PID CWD COMMAND [ARG...]
 *
 * What nsenter(1) does, plus what a test's subprocess.Popen needs from it: signals sent to this
 * process (terminate(), a timeout's kill is SIGKILL and cannot be) are forwarded to the command, and
 * the command's exit status or death by signal is this process's own. nsenter forwards nothing, so
 * Popen.terminate() would leave the command running in the host. The command also dies with this
 * process (a timeout's SIGKILL cannot be forwarded): its parent is outside the host's PID namespace,
 * so the host's init would not even adopt it. What the command itself starts is the host's. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile pid_t child = 0;
static const int forwarded[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGCONT, SIGWINCH};
#define NFORWARDED (sizeof forwarded / sizeof forwarded[0])

static void forward(int sig) {
    if (child > 0)
        kill(child, sig);
}

static int open_ns(const char *pid, const char *kind) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%s/ns/%s", pid, kind);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "enter: %s: %s\n", path, strerror(errno));
        exit(125);
    }
    return fd;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: enter INIT_PID CWD COMMAND [ARG...]\n");
        return 125;
    }
    /* All three are opened before any is entered: once in the host's mount namespace, /proc is the
     * host's and INIT_PID names another process there. */
    int fds[3] = {open_ns(argv[1], "uts"), open_ns(argv[1], "pid"), open_ns(argv[1], "mnt")};
    for (int i = 0; i < 3; i++) {
        if (setns(fds[i], 0) != 0) {
            perror("enter: setns");
            return 125;
        }
        close(fds[i]);
    }
    if (chdir(argv[2]) != 0) { /* entering a mount namespace moved us to its root */
        fprintf(stderr, "enter: cd %s: %s\n", argv[2], strerror(errno));
        return 125;
    }
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old); /* a signal before fork returns waits for `child` to be known */
    for (size_t i = 0; i < NFORWARDED; i++)
        signal(forwarded[i], forward);
    pid_t pid = fork(); /* a PID namespace applies to children only */
    if (pid < 0) {
        perror("enter: fork");
        return 125;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        for (size_t i = 0; i < NFORWARDED; i++)
            signal(forwarded[i], SIG_DFL);
        sigprocmask(SIG_SETMASK, &old, NULL);
        execvp(argv[3], argv + 3);
        fprintf(stderr, "enter: %s: %s\n", argv[3], strerror(errno));
        _exit(errno == ENOENT ? 127 : 126);
    }
    child = pid;
    sigprocmask(SIG_SETMASK, &old, NULL);
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            perror("enter: waitpid");
            return 125;
        }
    }
    if (WIFSIGNALED(status)) { /* die the same death, so the caller sees -SIG as it would without us */
        int sig = WTERMSIG(status);
        signal(sig, SIG_DFL);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sig);
        sigprocmask(SIG_UNBLOCK, &one, NULL);
        kill(getpid(), sig);
        return 128 + sig;
    }
    return WEXITSTATUS(status);
}

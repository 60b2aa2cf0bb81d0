/* Ring sockets inherited through exec (docs/sockets.md, "exec"): a new
 * image keeps working on the connections it inherits (also through a dup'd
 * number); close-on-exec numbers vanish; the old holder goes on after the
 * new image exits. Prints one line per check; the output must be the same
 * on the kernel and under the library.
 *
 * `exec_inherited nolib` runs one more case, whose output differs by
 * design: a new image started with an empty environment (so without the
 * library) gets an unconnected socket in place of the ring socket. */
#include "common.h"
#include <fcntl.h>
#include <signal.h>

/* The new image: talks over descriptor `fd`. */
static int new_image(int fd) {
    ssize_t w = write(fd, "from the new image", 18);
    if (w != 18) {
        printf("new image: write failed: %s\n", strerror(errno));
        return 2;
    }
    char buf[8];
    size_t n = read_full(fd, buf, 5);
    printf("new image: read %zu '%.*s'\n", n, (int)n, buf);
    return n == 5 ? 0 : 3;
}

static int run(char **envp, const char *mode, int fd) {
    char num[16];
    snprintf(num, sizeof num, "%d", fd);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        char *argv[] = {"exec_inherited", (char *)mode, num, NULL};
        if (envp)
            execve("/proc/self/exe", argv, envp);
        else
            execv("/proc/self/exe", argv);
        _exit(127);
    }
    return child_status(pid);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc == 3 && strcmp(argv[1], "child") == 0) {
        signal(SIGPIPE, SIG_IGN);
        return new_image(atoi(argv[2]));
    }
    if (argc == 3 && strcmp(argv[1], "probe") == 0) {
        int r = fcntl(atoi(argv[2]), F_GETFD);
        printf("new image: descriptor %s\n", r < 0 && errno == EBADF ? "closed (EBADF)" : "open");
        return 0;
    }
    int l, c, s;
    connected_pair(&l, &c, &s);
    char buf[64];

    if (argc == 2 && strcmp(argv[1], "nolib") == 0) {
        char *empty[] = {NULL};
        CHECK(write(s, "reply", 5) == 5);
        int code = run(empty, "child", c);
        printf("new image without the library: exit %d\n", code);
        CHECK(write(c, "old", 3) == 3);
        size_t n = read_full(s, buf, 3);
        printf("old image goes on: read %zu '%.*s'\n", n, (int)n, buf);
        return 0;
    }

    /* 1. fork + exec: the new image talks over the inherited connection */
    CHECK(write(s, "reply", 5) == 5);
    int code = run(NULL, "child", c);
    size_t n = read_full(s, buf, 18);
    printf("old image read %zu '%.*s'; new image exit %d\n", n, (int)n, buf, code);

    /* 2. through a dup'd number, both numbers inherited */
    int d = dup(c);
    CHECK(d >= 0);
    CHECK(write(s, "again", 5) == 5);
    code = run(NULL, "child", d);
    n = read_full(s, buf, 18);
    printf("through a dup: read %zu '%.*s'; new image exit %d\n", n, (int)n, buf, code);
    close(d);

    /* 3. close-on-exec: the number vanishes in the new image */
    CHECK(fcntl(c, F_SETFD, FD_CLOEXEC) == 0);
    printf("probe exit %d\n", run(NULL, "probe", c));
    CHECK(fcntl(c, F_SETFD, 0) == 0);

    /* 4. the old image's copies go on, and the end comes at its close */
    CHECK(write(c, "still here", 10) == 10);
    n = read_full(s, buf, 10);
    printf("after the new images: read %zu '%.*s'\n", n, (int)n, buf);
    close(c);
    printf("after the last close: read %zd\n", read(s, buf, sizeof buf));
    close(s);
    close(l);
    return 0;
}

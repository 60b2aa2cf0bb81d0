/* What the small conformance programs (fork_shared.c, exec_inherited.c,
 * host_address.c) share: a check that prints and exits, whole reads, a
 * child's exit status and a listener with a connection to it. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(c)                                                                \
    do {                                                                        \
        if (!(c)) {                                                             \
            printf("FAILED line %d: %s (%s)\n", __LINE__, #c, strerror(errno)); \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

/* Reads exactly n bytes (or fewer at EOF). */
static inline size_t read_full(int fd, char *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

/* Waits for `pid`; its exit status, or -1 if a signal ended it. */
static inline int child_status(pid_t pid) {
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A TCP listener on `ip` (network order), port chosen by the kernel;
 * `*a` gets its address. */
static inline int listen_on(in_addr_t ip, struct sockaddr_in *a) {
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = ip;
    int l = socket(AF_INET, SOCK_STREAM, 0);
    socklen_t len = sizeof *a;
    CHECK(l >= 0 && bind(l, (struct sockaddr *)a, sizeof *a) == 0 && listen(l, 4) == 0);
    CHECK(getsockname(l, (struct sockaddr *)a, &len) == 0);
    return l;
}

/* A loopback listener `*l`, a client `*c` connected to it and the server
 * end `*s` it accepted. */
static inline void connected_pair(int *l, int *c, int *s) {
    struct sockaddr_in a;
    *l = listen_on(htonl(INADDR_LOOPBACK), &a);
    *c = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(connect(*c, (struct sockaddr *)&a, sizeof a) == 0);
    *s = accept(*l, NULL, NULL);
    CHECK(*s >= 0);
}

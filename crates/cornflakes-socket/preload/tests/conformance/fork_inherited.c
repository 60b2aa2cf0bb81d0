/* A known, loud difference from the kernel (docs/sockets.md, "fork"): a
 * forked child may not read or write a ring socket it inherited; the call
 * fails with EOPNOTSUPP and says so on stderr, and the parent's connection
 * is untouched, even after the child closes its copy and exits.
 * Prints "child: <errno name>" and "parent: <result>". */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int l = socket(AF_INET, SOCK_STREAM, 0);
    socklen_t len = sizeof a;
    if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 4) || getsockname(l, (struct sockaddr *)&a, &len))
        return 1;
    int c = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(c, (struct sockaddr *)&a, sizeof a))
        return 1;
    int s = accept(l, NULL, NULL);
    pid_t pid = fork();
    if (pid == 0) {
        ssize_t w = write(c, "child", 5);
        int e = errno;
        close(c);
        close(s);
        _exit(w < 0 && e == EOPNOTSUPP ? 0 : w < 0 ? 2 : 3);
    }
    int st;
    waitpid(pid, &st, 0);
    printf("child: %s\n", WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "EOPNOTSUPP" : WIFEXITED(st) && WEXITSTATUS(st) == 3 ? "wrote" : "other");
    char buf[16];
    ssize_t w = write(c, "parent", 6);
    ssize_t r = read(s, buf, sizeof buf);
    printf("parent: wrote %zd read %zd '%.*s'\n", w, r, (int)(r > 0 ? r : 0), buf);
    return 0;
}

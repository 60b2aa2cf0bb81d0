/* Connected sockets shared by fork (docs/sockets.md, "fork"): parent and
 * child both read and write the sockets they share, each call whole, and
 * the stream ends for the peer only at the last close. Prints one line per
 * check; the output must be the same on the kernel and under the library. */
#include "common.h"
#include <poll.h>

int main(void) {
    int l, c, s;
    connected_pair(&l, &c, &s);
    char buf[4096];
    setvbuf(stdout, NULL, _IONBF, 0);

    /* 1. the child talks over the inherited client end, the parent answers */
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        CHECK(write(c, "from child", 10) == 10);
        size_t n = read_full(c, buf, 12);
        close(c);
        close(s);
        _exit(n == 12 && memcmp(buf, "parent reply", 12) == 0 ? 0 : 2);
    }
    size_t n = read_full(s, buf, 10);
    printf("parent read %zu '%.*s'\n", n, (int)n, buf);
    CHECK(write(s, "parent reply", 12) == 12);
    printf("child exit %d\n", child_status(pid));

    /* 2. the child's close ended nothing: the parent's copies still work */
    CHECK(write(c, "still open", 10) == 10);
    n = read_full(s, buf, 10);
    printf("after the child's close: read %zu '%.*s'\n", n, (int)n, buf);

    /* 3. both write 1000 records to the same end at once: each write whole */
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        for (int i = 0; i < 1000; i++) {
            char rec[8];
            snprintf(rec, sizeof rec, "C%04d\n", i);
            if (write(c, rec, 6) != 6)
                _exit(2);
        }
        _exit(0);
    }
    for (int i = 0; i < 1000; i++) {
        char rec[8];
        snprintf(rec, sizeof rec, "P%04d\n", i);
        CHECK(write(c, rec, 6) == 6);
    }
    static char all[12000];
    n = read_full(s, all, sizeof all);
    int next_c = 0, next_p = 0, bad = 0;
    for (size_t i = 0; i + 6 <= n; i += 6) {
        int k = atoi(all + i + 1);
        if (all[i] == 'C' && k == next_c && all[i + 5] == '\n')
            next_c++;
        else if (all[i] == 'P' && k == next_p && all[i + 5] == '\n')
            next_p++;
        else
            bad++;
    }
    printf("interleaved: %zu bytes, child records %d, parent records %d, broken %d, child exit %d\n", n, next_c,
           next_p, bad, child_status(pid));

    /* 4. the child reads the first half of a message, the parent the rest */
    CHECK(write(c, "0123456789abcdefghij", 20) == 20);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        size_t got = read_full(s, buf, 10);
        _exit(got == 10 && memcmp(buf, "0123456789", 10) == 0 ? 0 : 2);
    }
    printf("child read the first half: exit %d\n", child_status(pid));
    n = read_full(s, buf, 10);
    printf("parent read the rest: %zu '%.*s'\n", n, (int)n, buf);

    /* 5. a child that holds the end open: the peer sees EOF only after
       both have closed it */
    int go[2];
    CHECK(pipe(go) == 0);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        char one;
        ssize_t r = read(go[0], &one, 1);
        close(c);
        _exit(r == 1 ? 0 : 2);
    }
    close(c);
    struct pollfd p = {s, POLLIN, 0};
    printf("after the parent's close: poll %d\n", poll(&p, 1, 100));
    CHECK(write(go[1], "g", 1) == 1);
    printf("child exit %d\n", child_status(pid));
    p.revents = 0;
    int ready = poll(&p, 1, 5000);
    printf("after the child's close: poll %d revents POLLIN %d\n", ready, (p.revents & POLLIN) != 0);
    ssize_t r = read(s, buf, sizeof buf);
    printf("read %zd\n", r);
    close(s);
    close(l);
    return 0;
}

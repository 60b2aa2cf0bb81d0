/* Socket conformance program for libcfsocket.
 *
 * Run once on the kernel and once under LD_PRELOAD=libcfsocket.so; the two
 * outputs must be identical line by line (tests/conformance.rs does this).
 * Lines print results that do not depend on the run (no port numbers, no
 * descriptor numbers): return values, errno names, bytes read, flags.
 * Only the parent prints; children report through their exit status.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *ename(int e) {
    switch (e) {
    case 0: return "0";
    case EAGAIN: return "EAGAIN";
    case ECONNREFUSED: return "ECONNREFUSED";
    case EINPROGRESS: return "EINPROGRESS";
    case EPIPE: return "EPIPE";
    case ECONNRESET: return "ECONNRESET";
    case EISCONN: return "EISCONN";
    case ENOTCONN: return "ENOTCONN";
    case EBADF: return "EBADF";
    case EINVAL: return "EINVAL";
    case ENOENT: return "ENOENT";
    case EEXIST: return "EEXIST";
    default: return "other";
    }
}

#define SAY(...) do { printf(__VA_ARGS__); printf("\n"); fflush(stdout); } while (0)
#define CHECK(x) do { if (!(x)) { SAY("FAILED %s at line %d errno=%s", #x, __LINE__, ename(errno)); exit(1); } } while (0)

static struct sockaddr_in loop_addr(unsigned short port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

static unsigned short port_of(int fd, int peer) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int r = peer ? getpeername(fd, (struct sockaddr *)&a, &len) : getsockname(fd, (struct sockaddr *)&a, &len);
    CHECK(r == 0 && len == sizeof a && a.sin_family == AF_INET);
    return ntohs(a.sin_port);
}

static int tcp(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    return fd;
}

static int connect_to(unsigned short port) {
    int fd = tcp();
    struct sockaddr_in a = loop_addr(port);
    CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    return fd;
}

static void read_exact(int fd, char *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        CHECK(r > 0);
        got += (size_t)r;
    }
}

/* A write 50 ms from now, from another thread (while the main one sleeps). */
static volatile sig_atomic_t sigio_count;
static void on_sigio(int sig) {
    (void)sig;
    sigio_count++;
}

static int late_fd;
static void *write_late(void *arg) {
    (void)arg;
    usleep(50 * 1000);
    CHECK(write(late_fd, "w", 1) == 1);
    return NULL;
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    char buf[4096];

    /* listen on an ephemeral port */
    int l = tcp();
    int one = 1;
    CHECK(setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0);
    struct sockaddr_in la = loop_addr(0);
    CHECK(bind(l, (struct sockaddr *)&la, sizeof la) == 0);
    SAY("listen %d", listen(l, 16));
    unsigned short port = port_of(l, 0);
    SAY("listen port nonzero %d", port != 0);

    /* nobody listens: ECONNREFUSED */
    {
        int t = tcp();
        struct sockaddr_in ta = loop_addr(0);
        CHECK(bind(t, (struct sockaddr *)&ta, sizeof ta) == 0);
        unsigned short dead = port_of(t, 0);
        close(t);
        int c = tcp();
        struct sockaddr_in da = loop_addr(dead);
        int r = connect(c, (struct sockaddr *)&da, sizeof da);
        SAY("connect to closed port: %d %s", r, ename(r ? errno : 0));
        close(c);
    }

    /* connect, accept, names */
    int c = connect_to(port);
    struct sockaddr_in pa;
    socklen_t plen = sizeof pa;
    int s = accept(l, (struct sockaddr *)&pa, &plen);
    CHECK(s >= 0);
    /* the library keeps its own descriptors out of the program's range */
    SAY("descriptors dense: accept gives connect's + 1: %d", s == c + 1);
    SAY("accept peer family %d len %d ip %s", pa.sin_family == AF_INET, (int)plen, inet_ntoa(pa.sin_addr));
    SAY("names: c.peer==listen %d s.local==listen %d s.peer==c.local %d accept addr==c.local %d",
        port_of(c, 1) == port, port_of(s, 0) == port, port_of(s, 1) == port_of(c, 0), ntohs(pa.sin_port) == port_of(c, 0));
    {
        struct sockaddr_in again = loop_addr(port);
        int r = connect(c, (struct sockaddr *)&again, sizeof again);
        SAY("connect again: %d %s", r, ename(errno));
    }

    /* read/write */
    SAY("write %zd", write(c, "hello", 5));
    ssize_t n = read(s, buf, sizeof buf);
    SAY("read %zd '%.*s'", n, (int)n, buf);

    /* send/recv, MSG_PEEK */
    SAY("send %zd", send(s, "world", 5, 0));
    n = recv(c, buf, 3, MSG_PEEK);
    SAY("peek %zd '%.*s'", n, (int)n, buf);
    n = recv(c, buf, sizeof buf, 0);
    SAY("recv %zd '%.*s'", n, (int)n, buf);

    /* writev / readv, MSG_WAITALL */
    {
        struct iovec w[3] = {{"ab", 2}, {"cde", 3}, {"fghij", 5}};
        SAY("writev %zd", writev(c, w, 3));
        char x[4], y[6];
        struct iovec r[2] = {{x, 4}, {y, 6}};
        n = readv(s, r, 2);
        SAY("readv %zd '%.4s' '%.6s'", n, x, y);
        SAY("send %zd", send(c, "0123456789", 10, 0));
        n = recv(s, buf, 10, MSG_WAITALL);
        SAY("recv waitall %zd '%.*s'", n, (int)n, buf);
    }

    /* sendto / recvfrom / sendmsg / recvmsg */
    {
        SAY("sendto %zd", sendto(s, "to", 2, 0, NULL, 0));
        struct sockaddr_in from;
        socklen_t flen = sizeof from;
        n = recvfrom(c, buf, sizeof buf, 0, (struct sockaddr *)&from, &flen);
        SAY("recvfrom %zd '%.*s'", n, (int)n, buf);
        struct iovec v[2] = {{"msg", 3}, {"hdr", 3}};
        struct msghdr m;
        memset(&m, 0, sizeof m);
        m.msg_iov = v;
        m.msg_iovlen = 2;
        SAY("sendmsg %zd", sendmsg(c, &m, 0));
        char r1[2], r2[10];
        struct iovec rv[2] = {{r1, 2}, {r2, 10}};
        struct msghdr rm;
        memset(&rm, 0, sizeof rm);
        rm.msg_iov = rv;
        rm.msg_iovlen = 2;
        n = recvmsg(s, &rm, 0);
        SAY("recvmsg %zd '%.2s' '%.4s' flags %d", n, r1, r2, rm.msg_flags);
    }

    /* sendmmsg / recvmmsg */
    {
        struct iovec a1 = {"one", 3}, a2 = {"two!", 4};
        struct mmsghdr mm[2];
        memset(mm, 0, sizeof mm);
        mm[0].msg_hdr.msg_iov = &a1;
        mm[0].msg_hdr.msg_iovlen = 1;
        mm[1].msg_hdr.msg_iov = &a2;
        mm[1].msg_hdr.msg_iovlen = 1;
        int r = sendmmsg(c, mm, 2, 0);
        SAY("sendmmsg %d lens %u %u", r, mm[0].msg_len, mm[1].msg_len);
        struct pollfd wp = {s, POLLIN, 0};
        CHECK(poll(&wp, 1, 1000) == 1);
        char b1[7];
        struct iovec r1 = {b1, 7};
        struct mmsghdr rm[2];
        memset(rm, 0, sizeof rm);
        rm[0].msg_hdr.msg_iov = &r1;
        rm[0].msg_hdr.msg_iovlen = 1;
        size_t got = 0;
        while (got < 7) {
            r1.iov_base = b1 + got;
            r1.iov_len = 7 - got;
            r = recvmmsg(s, rm, 1, 0, NULL);
            CHECK(r == 1);
            got += rm[0].msg_len;
        }
        SAY("recvmmsg '%.7s'", b1);
    }

    /* non-blocking */
    {
        int fl = fcntl(s, F_GETFL);
        SAY("F_GETFL nonblock %d", (fl & O_NONBLOCK) != 0);
        CHECK(fcntl(s, F_SETFL, fl | O_NONBLOCK) == 0);
        SAY("F_GETFL nonblock %d", (fcntl(s, F_GETFL) & O_NONBLOCK) != 0);
        n = read(s, buf, sizeof buf);
        SAY("nonblocking read %zd %s", n, ename(errno));
        CHECK(fcntl(s, F_SETFL, fl) == 0);
        n = recv(c, buf, sizeof buf, MSG_DONTWAIT);
        SAY("recv MSG_DONTWAIT %zd %s", n, ename(errno));
        int on = 1;
        CHECK(ioctl(c, FIONBIO, &on) == 0);
        n = recv(c, buf, sizeof buf, 0);
        SAY("FIONBIO read %zd %s", n, ename(errno));
        on = 0;
        CHECK(ioctl(c, FIONBIO, &on) == 0);
    }

    /* FIONREAD */
    {
        CHECK(write(c, "1234567", 7) == 7);
        int avail = -1;
        /* Nagle may hold the segment until the peer's delayed ACK: wait. */
        struct pollfd wp = {s, POLLIN, 0};
        CHECK(poll(&wp, 1, 1000) == 1);
        int fr = ioctl(s, FIONREAD, &avail);
        CHECK(fr == 0);
        SAY("FIONREAD %d", avail);
        read_exact(s, buf, 7);
    }

    /* poll with a pipe in the set */
    {
        int p[2];
        CHECK(pipe(p) == 0);
        struct pollfd ps[2] = {{s, POLLIN, 0}, {p[0], POLLIN, 0}};
        SAY("poll idle %d", poll(ps, 2, 0));
        SAY("poll timeout %d", poll(ps, 2, 20));
        CHECK(write(p[1], "p", 1) == 1);
        int r = poll(ps, 2, 1000);
        SAY("poll pipe %d s.revents %d pipe.revents %d", r, ps[0].revents, ps[1].revents);
        CHECK(read(p[0], buf, 1) == 1);
        CHECK(write(c, "z", 1) == 1);
        r = poll(ps, 2, 1000);
        SAY("poll sock %d s.revents %d pipe.revents %d", r, ps[0].revents, ps[1].revents);
        CHECK(read(s, buf, 1) == 1);
        struct pollfd w = {c, POLLOUT, 0};
        r = poll(&w, 1, 0);
        SAY("poll writable %d revents %d", r, w.revents);
        close(p[0]);
        close(p[1]);
    }

    /* ppoll, select and pselect with a pipe in the set */
    {
        int p[2];
        CHECK(pipe(p) == 0);
        struct pollfd ps[2] = {{s, POLLIN, 0}, {p[0], POLLIN, 0}};
        struct timespec ts = {0, 20 * 1000 * 1000};
        SAY("ppoll timeout %d", ppoll(ps, 2, &ts, NULL));
        CHECK(write(c, "q", 1) == 1);
        int r = ppoll(ps, 2, NULL, NULL);
        SAY("ppoll sock %d s.revents %d", r, ps[0].revents);
        fd_set rs;
        int maxfd = (s > p[0] ? s : p[0]) + 1;
        FD_ZERO(&rs);
        FD_SET(s, &rs);
        FD_SET(p[0], &rs);
        struct timeval tv = {1, 0};
        r = select(maxfd, &rs, NULL, NULL, &tv);
        SAY("select sock %d s %d pipe %d", r, FD_ISSET(s, &rs) != 0, FD_ISSET(p[0], &rs) != 0);
        CHECK(read(s, buf, 1) == 1);
        FD_ZERO(&rs);
        FD_SET(s, &rs);
        FD_SET(p[0], &rs);
        tv.tv_sec = 0;
        tv.tv_usec = 20000;
        SAY("select timeout %d", select(maxfd, &rs, NULL, NULL, &tv));
        CHECK(write(p[1], "p", 1) == 1);
        FD_ZERO(&rs);
        FD_SET(s, &rs);
        FD_SET(p[0], &rs);
        fd_set ws;
        FD_ZERO(&ws);
        FD_SET(c, &ws);
        r = pselect((maxfd > c ? maxfd : c + 1), &rs, &ws, NULL, NULL, NULL);
        SAY("pselect %d s %d pipe %d c writable %d", r, FD_ISSET(s, &rs) != 0, FD_ISSET(p[0], &rs) != 0, FD_ISSET(c, &ws) != 0);
        close(p[0]);
        close(p[1]);
    }

    /* sendfile from a file */
    {
        char path[] = "/tmp/cf-conformance-XXXXXX";
        int f = mkstemp(path);
        CHECK(f >= 0);
        unlink(path);
        static char data[5000], back[5000];
        for (int i = 0; i < 5000; i++)
            data[i] = (char)(i * 13);
        CHECK(write(f, data, sizeof data) == (ssize_t)sizeof data);
        off_t off = 1000;
        n = sendfile(c, f, &off, 3000);
        SAY("sendfile %zd offset %lld", n, (long long)off);
        read_exact(s, back, 3000);
        SAY("sendfile bytes match %d", memcmp(back, data + 1000, 3000) == 0);
        CHECK(lseek(f, 4000, SEEK_SET) == 4000);
        n = sendfile(c, f, NULL, 5000);
        SAY("sendfile at position %zd now at %lld", n, (long long)lseek(f, 0, SEEK_CUR));
        read_exact(s, back, 1000);
        SAY("sendfile bytes match %d", memcmp(back, data + 4000, 1000) == 0);
        close(f);
    }

    /* epoll with a pipe in the set */
    {
        int p[2];
        CHECK(pipe(p) == 0);
        int ep = epoll_create1(EPOLL_CLOEXEC);
        CHECK(ep >= 0);
        struct epoll_event e = {.events = EPOLLIN, .data.u64 = 111};
        CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, s, &e) == 0);
        e.data.u64 = 222;
        CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &e) == 0);
        struct epoll_event out[4];
        SAY("epoll idle %d", epoll_wait(ep, out, 4, 0));
        SAY("epoll timeout %d", epoll_wait(ep, out, 4, 20));
        CHECK(write(p[1], "p", 1) == 1);
        int r = epoll_wait(ep, out, 4, 1000);
        SAY("epoll pipe %d data %llu events %u", r, (unsigned long long)out[0].data.u64, out[0].events);
        CHECK(read(p[0], buf, 1) == 1);
        CHECK(write(c, "e", 1) == 1);
        r = epoll_wait(ep, out, 4, 1000);
        SAY("epoll sock %d data %llu events %u", r, (unsigned long long)out[0].data.u64, out[0].events);
        CHECK(read(s, buf, 1) == 1);
        SAY("epoll drained %d", epoll_wait(ep, out, 4, 0));
        /* epoll_pwait2: a timespec timeout, then a write while it sleeps */
        {
            struct timespec ts = {0, 20 * 1000 * 1000};
            SAY("epoll_pwait2 timeout %d", epoll_pwait2(ep, out, 4, &ts, NULL));
            pthread_t th;
            late_fd = c;
            CHECK(pthread_create(&th, NULL, write_late, NULL) == 0);
            ts.tv_sec = 5;
            ts.tv_nsec = 0;
            r = epoll_pwait2(ep, out, 4, &ts, NULL);
            SAY("epoll_pwait2 woken %d data %llu", r, (unsigned long long)out[0].data.u64);
            CHECK(pthread_join(th, NULL) == 0);
            read_exact(s, buf, 1);
        }
        /* one-shot: reported once until re-armed */
        e.events = EPOLLIN | EPOLLONESHOT;
        e.data.u64 = 333;
        CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, s, &e) == 0);
        CHECK(write(c, "12", 2) == 2);
        r = epoll_wait(ep, out, 4, 1000);
        SAY("oneshot first %d data %llu", r, (unsigned long long)out[0].data.u64);
        SAY("oneshot second %d", epoll_wait(ep, out, 4, 20));
        read_exact(s, buf, 2);
        CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL) == 0);
        CHECK(write(c, "3", 1) == 1);
        SAY("after del %d", epoll_wait(ep, out, 4, 20));
        read_exact(s, buf, 1);
        /* deleted: DEL and MOD fail; ADD again reports again */
        r = epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL);
        SAY("del again: %d %s", r, ename(r ? errno : 0));
        r = epoll_ctl(ep, EPOLL_CTL_MOD, s, &e);
        SAY("mod after del: %d %s", r, ename(r ? errno : 0));
        e.events = EPOLLIN;
        e.data.u64 = 444;
        SAY("add again %d", epoll_ctl(ep, EPOLL_CTL_ADD, s, &e));
        r = epoll_ctl(ep, EPOLL_CTL_ADD, s, &e);
        SAY("add twice: %d %s", r, ename(r ? errno : 0));
        CHECK(write(c, "4", 1) == 1);
        r = epoll_wait(ep, out, 4, 1000);
        SAY("after add again %d data %llu", r, (unsigned long long)out[0].data.u64);
        read_exact(s, buf, 1);
        CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL) == 0);
        close(ep);
        close(p[0]);
        close(p[1]);
    }

    /* edge-triggered epoll: one report per arrival, the end once, room once */
    {
        int ep = epoll_create1(EPOLL_CLOEXEC);
        CHECK(ep >= 0);
        struct epoll_event e = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.u64 = 7};
        int ec = connect_to(port);
        int es = accept(l, NULL, NULL);
        CHECK(ec >= 0 && es >= 0);
        CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, es, &e) == 0);
        struct epoll_event out[4];
        SAY("et idle %d", epoll_wait(ep, out, 4, 20));
        CHECK(write(ec, "ab", 2) == 2);
        int r = epoll_wait(ep, out, 4, 1000);
        SAY("et arrival %d events %u", r, r > 0 ? out[0].events : 0);
        SAY("et unread, nothing new %d", epoll_wait(ep, out, 4, 20));
        read_exact(es, buf, 1);
        SAY("et half read, nothing new %d", epoll_wait(ep, out, 4, 20));
        CHECK(write(ec, "c", 1) == 1);
        r = epoll_wait(ep, out, 4, 1000);
        SAY("et second arrival %d events %u", r, r > 0 ? out[0].events : 0);
        read_exact(es, buf, 2);
        SAY("et drained %d", epoll_wait(ep, out, 4, 20));
        CHECK(write(ec, "d", 1) == 1);
        r = epoll_wait(ep, out, 4, 1000);
        SAY("et after drain %d", r);
        read_exact(es, buf, 1);
        /* writer side: EPOLLOUT once after ADD, not again while writable */
        struct epoll_event w = {.events = EPOLLOUT | EPOLLET, .data.u64 = 8};
        CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, ec, &w) == 0);
        r = epoll_wait(ep, out, 4, 1000);
        SAY("et out %d data %llu events %u", r, r > 0 ? (unsigned long long)out[0].data.u64 : 0ULL, r > 0 ? out[0].events : 0);
        SAY("et out again %d", epoll_wait(ep, out, 4, 20));
        CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, ec, NULL) == 0);
        /* MOD re-arms: the unread byte is reported again */
        CHECK(write(ec, "e", 1) == 1);
        r = epoll_wait(ep, out, 4, 1000);
        SAY("et before mod %d", r);
        CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, es, &e) == 0);
        r = epoll_wait(ep, out, 4, 1000);
        SAY("et after mod %d events %u", r, r > 0 ? out[0].events : 0);
        read_exact(es, buf, 1);
        /* the end of the stream, once */
        close(ec);
        r = epoll_wait(ep, out, 4, 1000);
        SAY("et close %d events %u", r, r > 0 ? out[0].events : 0);
        SAY("et close again %d", epoll_wait(ep, out, 4, 20));
        close(es);
        close(ep);
    }

    /* O_ASYNC (FIOASYNC, as nginx sets it): SIGIO on each arrival */
    {
        signal(SIGIO, on_sigio);
        CHECK(fcntl(s, F_SETOWN, getpid()) == 0);
        int on = 1;
        SAY("FIOASYNC on %d", ioctl(s, FIOASYNC, &on));
        for (int round = 0; round < 2; round++) {
            sigio_count = 0;
            CHECK(write(c, "x", 1) == 1);
            for (int i = 0; i < 1000 && !sigio_count; i++)
                usleep(1000);
            SAY("SIGIO after write %d: %d", round, sigio_count > 0);
            read_exact(s, buf, 1);
        }
        on = 0;
        SAY("FIOASYNC off %d", ioctl(s, FIOASYNC, &on));
        sigio_count = 0;
        CHECK(write(c, "z", 1) == 1);
        usleep(50000);
        SAY("SIGIO after FIOASYNC off: %d", sigio_count > 0);
        read_exact(s, buf, 1);
        SAY("F_SETFL O_ASYNC %d", fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_ASYNC));
        sigio_count = 0;
        CHECK(write(c, "w", 1) == 1);
        for (int i = 0; i < 1000 && !sigio_count; i++)
            usleep(1000);
        SAY("SIGIO after F_SETFL O_ASYNC: %d", sigio_count > 0);
        read_exact(s, buf, 1);
        CHECK(fcntl(s, F_SETFL, fcntl(s, F_GETFL) & ~O_ASYNC) == 0);
        signal(SIGIO, SIG_DFL);
    }

    /* options */
    {
        int v = 1;
        socklen_t vl = sizeof v;
        SAY("setsockopt TCP_NODELAY %d", setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &v, sizeof v));
        v = 0;
        CHECK(getsockopt(c, IPPROTO_TCP, TCP_NODELAY, &v, &vl) == 0);
        SAY("TCP_NODELAY %d", v != 0);
        vl = sizeof v;
        CHECK(getsockopt(c, SOL_SOCKET, SO_TYPE, &v, &vl) == 0);
        SAY("SO_TYPE stream %d", v == SOCK_STREAM);
        vl = sizeof v;
        CHECK(getsockopt(c, SOL_SOCKET, SO_ERROR, &v, &vl) == 0);
        SAY("SO_ERROR %d", v);
        vl = sizeof v;
        CHECK(getsockopt(c, SOL_SOCKET, SO_KEEPALIVE, &v, &vl) == 0);
        SAY("SO_KEEPALIVE %d", v);
    }

    /* dup: the copy works, closing it keeps the original */
    {
        int d = dup(c);
        CHECK(d >= 0);
        SAY("write via dup %zd", write(d, "dup", 3));
        read_exact(s, buf, 3);
        SAY("read '%.3s'", buf);
        close(d);
        SAY("write after closing dup %zd", write(c, "ok", 2));
        read_exact(s, buf, 2);
        int d2 = fcntl(c, F_DUPFD_CLOEXEC, 100);
        SAY("F_DUPFD_CLOEXEC >=100 %d cloexec %d", d2 >= 100, (fcntl(d2, F_GETFD) & FD_CLOEXEC) != 0);
        SAY("write via F_DUPFD copy %zd", write(d2, "x", 1));
        read_exact(s, buf, 1);
        close(d2);
    }

    /* shutdown(SHUT_WR): EOF for the peer, the other direction still works */
    {
        SAY("shutdown %d", shutdown(c, SHUT_WR));
        n = read(s, buf, sizeof buf);
        SAY("read after peer shutdown %zd", n);
        n = write(c, "x", 1);
        SAY("write after own shutdown %zd %s", n, ename(n < 0 ? errno : 0));
        SAY("write back %zd", write(s, "back", 4));
        read_exact(c, buf, 4);
        SAY("read '%.4s'", buf);
    }

    /* close: EOF, then EPIPE with MSG_NOSIGNAL */
    {
        close(s);
        n = read(c, buf, sizeof buf);
        SAY("read after peer close %zd", n);
        int c2 = connect_to(port);
        int s2 = accept(l, NULL, NULL);
        CHECK(s2 >= 0);
        close(s2);
        int epipe = 0;
        for (int i = 0; i < 50 && !epipe; i++) {
            if (send(c2, "x", 1, MSG_NOSIGNAL) < 0)
                epipe = errno == EPIPE || errno == ECONNRESET ? errno : -1;
            else
                usleep(10000);
        }
        SAY("send after peer close: %s", epipe > 0 ? "EPIPE or ECONNRESET" : "never failed");
        close(c2);
        close(c);
    }

    /* non-blocking connect: EINPROGRESS, then writable, SO_ERROR 0 */
    {
        int nc = tcp();
        CHECK(fcntl(nc, F_SETFL, O_NONBLOCK) == 0);
        struct sockaddr_in a = loop_addr(port);
        int r = connect(nc, (struct sockaddr *)&a, sizeof a);
        SAY("nonblocking connect %d %s", r, ename(r ? errno : 0));
        struct pollfd w = {nc, POLLOUT, 0};
        r = poll(&w, 1, 1000);
        SAY("poll connect %d revents %d", r, w.revents);
        int err = -1;
        socklen_t el = sizeof err;
        CHECK(getsockopt(nc, SOL_SOCKET, SO_ERROR, &err, &el) == 0);
        SAY("SO_ERROR %d", err);
        int ns = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        CHECK(ns >= 0);
        SAY("accept4 nonblock %d cloexec %d", (fcntl(ns, F_GETFL) & O_NONBLOCK) != 0, (fcntl(ns, F_GETFD) & FD_CLOEXEC) != 0);
        SAY("write %zd", write(nc, "nb", 2));
        struct pollfd rp = {ns, POLLIN, 0};
        CHECK(poll(&rp, 1, 1000) == 1);
        SAY("read %zd", read(ns, buf, sizeof buf));
        close(nc);
        close(ns);
    }

    /* another process: 1 MB each way through an echo */
    {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            close(l);
            int cc = connect_to(port);
            static char out[1 << 20], in[1 << 20];
            for (size_t i = 0; i < sizeof out; i++)
                out[i] = (char)(i * 7 + 3);
            size_t off = 0;
            while (off < sizeof out) {
                ssize_t w = write(cc, out + off, sizeof out - off > 65536 ? 65536 : sizeof out - off);
                if (w <= 0)
                    _exit(2);
                off += (size_t)w;
                size_t got = 0;
                while (got < (size_t)w) {
                    ssize_t r = read(cc, in + off - w + got, (size_t)w - got);
                    if (r <= 0)
                        _exit(3);
                    got += (size_t)r;
                }
            }
            _exit(memcmp(in, out, sizeof out) == 0 ? 0 : 4);
        }
        int ss = accept(l, NULL, NULL);
        CHECK(ss >= 0);
        size_t total = 0;
        for (;;) {
            n = read(ss, buf, sizeof buf);
            if (n <= 0)
                break;
            size_t off = 0;
            while (off < (size_t)n) {
                ssize_t w = write(ss, buf + off, (size_t)n - off);
                CHECK(w > 0);
                off += (size_t)w;
            }
            total += (size_t)n;
        }
        int st;
        waitpid(pid, &st, 0);
        SAY("echoed %zu bytes; client exit %d; final read %zd", total, WIFEXITED(st) ? WEXITSTATUS(st) : -1, n);
        close(ss);
    }

    /* bulk: 32 MiB one way in 128 KiB writes (under the library the writer
       moves to a bulk ring midway), read in odd sizes that straddle writes */
    {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            close(l);
            int cc = connect_to(port);
            static unsigned char out[128 << 10];
            size_t sent = 0;
            while (sent < (32u << 20)) {
                for (size_t i = 0; i < sizeof out; i++)
                    out[i] = (unsigned char)((sent + i) * 7 + (sent + i) / 4099);
                size_t off = 0;
                while (off < sizeof out) {
                    ssize_t w = write(cc, out + off, sizeof out - off);
                    if (w <= 0)
                        _exit(2);
                    off += (size_t)w;
                }
                sent += sizeof out;
            }
            _exit(close(cc) == 0 ? 0 : 3);
        }
        int ss = accept(l, NULL, NULL);
        CHECK(ss >= 0);
        static unsigned char in[200000];
        const size_t sizes[] = {1000, 70000, 131072, 3, 200000, 4096};
        size_t total = 0, k = 0;
        int intact = 1;
        for (;;) {
            /* a slow reader now and then: the writer finds the ring full */
            if (k % 16 == 0)
                usleep(500);
            n = read(ss, in, sizes[k++ % 6]);
            if (n <= 0)
                break;
            for (ssize_t i = 0; i < n; i++)
                intact &= in[i] == (unsigned char)((total + (size_t)i) * 7 + (total + (size_t)i) / 4099);
            total += (size_t)n;
        }
        int st;
        waitpid(pid, &st, 0);
        SAY("bulk: %zu bytes in odd reads, intact %d; writer exit %d; final read %zd", total, intact,
            WIFEXITED(st) ? WEXITSTATUS(st) : -1, n);
        close(ss);
    }

    /* a peer killed mid-connection: EOF */
    {
        int pp[2];
        CHECK(pipe(pp) == 0);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            close(l);
            int cc = connect_to(port);
            if (write(cc, "alive", 5) != 5)
                _exit(2);
            if (write(pp[1], "r", 1) != 1)
                _exit(2);
            pause();
            _exit(0);
        }
        int ss = accept(l, NULL, NULL);
        CHECK(ss >= 0);
        CHECK(read(pp[0], buf, 1) == 1);
        read_exact(ss, buf, 5);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        n = read(ss, buf, sizeof buf);
        SAY("read after peer killed %zd %s", n, ename(n < 0 ? errno : 0));
        int epipe = 0;
        for (int i = 0; i < 50 && !epipe; i++) {
            if (send(ss, "x", 1, MSG_NOSIGNAL) < 0)
                epipe = errno == EPIPE || errno == ECONNRESET;
            else
                usleep(10000);
        }
        SAY("send to killed peer fails %d", epipe);
        close(ss);
        close(pp[0]);
        close(pp[1]);
    }

    /* a writer killed mid-transfer: the reader gets what was sent, then EOF */
    {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            close(l);
            int cc = connect_to(port);
            static char chunk[8192];
            memset(chunk, 'k', sizeof chunk);
            for (;;)
                if (write(cc, chunk, sizeof chunk) <= 0)
                    _exit(2);
        }
        int ss = accept(l, NULL, NULL);
        CHECK(ss >= 0);
        size_t total = 0;
        int killed = 0, bad = 0;
        for (;;) {
            n = read(ss, buf, sizeof buf);
            if (n <= 0)
                break;
            for (ssize_t i = 0; i < n; i++)
                bad |= buf[i] != 'k';
            total += (size_t)n;
            if (!killed && total >= 1 << 20) {
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                killed = 1;
            }
        }
        SAY("writer killed mid-transfer: ended with %s, >= 1 MiB %d, bytes intact %d", n == 0 ? "EOF" : ename(errno),
            total >= 1 << 20, !bad);
        close(ss);
    }

    /* idle connections cost no CPU: 1000 pairs, 2 s in epoll_wait (both
       ends here: about 12 000 descriptors under the library); the CPU used
       goes to stderr, which the test shows when the outputs differ. The
       bound is 100 ms (5 % of a core; a wait that spun would take ~2000 ms):
       the library's debug build took ~5 ms on the AMD guest and 20-30 ms on
       the Intel guest (2026-11-28), where a 20 ms bound failed. */
    {
        enum { PAIRS = 1000 };
        struct rlimit nofile;
        CHECK(getrlimit(RLIMIT_NOFILE, &nofile) == 0);
        if (nofile.rlim_cur < 16384 && nofile.rlim_max >= 16384) {
            nofile.rlim_cur = nofile.rlim_max < 65536 ? nofile.rlim_max : 65536;
            CHECK(setrlimit(RLIMIT_NOFILE, &nofile) == 0);
        }
        static int cs[PAIRS], ss_[PAIRS];
        int ep = epoll_create1(0);
        CHECK(ep >= 0);
        for (int i = 0; i < PAIRS; i++) {
            cs[i] = connect_to(port);
            ss_[i] = accept(l, NULL, NULL);
            CHECK(ss_[i] >= 0);
            struct epoll_event e = {.events = EPOLLIN, .data.u64 = (unsigned long long)i};
            CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, cs[i], &e) == 0);
            CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, ss_[i], &e) == 0);
        }
        struct epoll_event out[8];
        /* Let the new connections settle first: what is left of their set-up
           (a last wake-up, a ring handshake) is not the cost of idling. */
        int r = epoll_wait(ep, out, 8, 200);
        CHECK(r == 0);
        struct rusage before, after;
        getrusage(RUSAGE_SELF, &before);
        r = epoll_wait(ep, out, 8, 2000);
        getrusage(RUSAGE_SELF, &after);
        long cpu_us = (after.ru_utime.tv_sec - before.ru_utime.tv_sec) * 1000000L + (after.ru_utime.tv_usec - before.ru_utime.tv_usec) +
                      (after.ru_stime.tv_sec - before.ru_stime.tv_sec) * 1000000L + (after.ru_stime.tv_usec - before.ru_stime.tv_usec);
        SAY("%d idle connections: epoll_wait %d, cpu under 100 ms in 2 s %d", PAIRS, r, cpu_us < 100000);
        fprintf(stderr, "idle connections: %ld us of CPU in 2 s\n", cpu_us);
        /* and they still work */
        CHECK(write(cs[PAIRS - 1], "w", 1) == 1);
        r = epoll_wait(ep, out, 8, 1000);
        SAY("after a write: epoll_wait %d data %llu", r, (unsigned long long)out[0].data.u64);
        for (int i = 0; i < PAIRS; i++) {
            close(cs[i]);
            close(ss_[i]);
        }
        close(ep);
    }

    SAY("close listener %d", close(l));
    int r = close(l);
    SAY("close again %d %s", r, ename(errno));
    SAY("done");
    return 0;
}

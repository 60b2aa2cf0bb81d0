/* A connection to one of the host's own (non-loopback) addresses is local
 * too (docs/sockets.md, "What goes where"): a listener on the wildcard
 * address, a client connecting to the host's first non-loopback IPv4
 * address; names as the kernel gives them, data both ways. Prints
 * "host address: none" where the host has no such address. */
#include "common.h"
#include <ifaddrs.h>

int main(void) {
    struct ifaddrs *list, *i;
    struct in_addr host = {0};
    if (getifaddrs(&list) != 0)
        return 1;
    for (i = list; i; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET) {
            struct in_addr a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
            if ((ntohl(a.s_addr) >> 24) != 127) {
                host = a;
                break;
            }
        }
    freeifaddrs(list);
    if (host.s_addr == 0) {
        printf("host address: none\n");
        return 0;
    }
    struct sockaddr_in a;
    int l = listen_on(htonl(INADDR_ANY), &a);
    a.sin_addr = host;
    int c = socket(AF_INET, SOCK_STREAM, 0);
    printf("host address: connect %d\n", connect(c, (struct sockaddr *)&a, sizeof a));
    int s = accept(l, NULL, NULL);
    struct sockaddr_in cl, cp, sl, sp;
    socklen_t n1 = sizeof cl, n2 = sizeof cp, n3 = sizeof sl, n4 = sizeof sp;
    getsockname(c, (struct sockaddr *)&cl, &n1);
    getpeername(c, (struct sockaddr *)&cp, &n2);
    getsockname(s, (struct sockaddr *)&sl, &n3);
    getpeername(s, (struct sockaddr *)&sp, &n4);
    printf("client local is the host address %d, client peer is it %d, server local is it %d, ports match %d\n",
           cl.sin_addr.s_addr == host.s_addr, cp.sin_addr.s_addr == host.s_addr, sl.sin_addr.s_addr == host.s_addr,
           cl.sin_port == sp.sin_port && cp.sin_port == sl.sin_port);
    char buf[8];
    printf("write %zd", write(c, "ping", 4));
    printf(" read %zd", read(s, buf, sizeof buf));
    printf(" write %zd", write(s, "pong", 4));
    ssize_t r = read(c, buf, sizeof buf);
    printf(" read %zd '%.*s'\n", r, (int)(r > 0 ? r : 0), buf);
    close(c);
    printf("eof %zd\n", read(s, buf, sizeof buf));
    return 0;
}

/* An LD_PRELOAD library for the lab's peers experiment (lab/peers.py): every IPv4 TCP
 * connection the process opens is bound, before connect(), to the next source address of a
 * loopback range, so one wrk process is many clients to nginx ($remote_addr, the key of its
 * per-client rate and connection limits), and a flooding client is one address of its own.
 *
 *   LAB_SOURCE_FIRST=127.0.1.1 LAB_SOURCE_COUNT=64 LD_PRELOAD=source_address.so wrk ...
 *
 * Connection n takes address FIRST + (n mod COUNT). Linux routes all of 127.0.0.0/8 to the
 * loopback interface, so no address needs configuring. Without LAB_SOURCE_FIRST it changes
 * nothing. lab/attacks.py compiles it with cc into the run's temporary directory.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);

static atomic_uint next_connection;

int connect(int fd, const struct sockaddr *address, socklen_t length) {
    static connect_fn real_connect;
    if (real_connect == NULL) {
        real_connect = (connect_fn)dlsym(RTLD_NEXT, "connect");
    }
    const char *first = getenv("LAB_SOURCE_FIRST");
    struct in_addr base;
    if (first != NULL && address != NULL && address->sa_family == AF_INET &&
        inet_pton(AF_INET, first, &base) == 1) {
        const char *count_text = getenv("LAB_SOURCE_COUNT");
        unsigned long count = count_text != NULL ? strtoul(count_text, NULL, 10) : 1;
        if (count == 0) {
            count = 1;
        }
        unsigned index = atomic_fetch_add(&next_connection, 1) % count;
        struct sockaddr_in source = {0};
        source.sin_family = AF_INET;
        source.sin_addr.s_addr = htonl(ntohl(base.s_addr) + index);
        /* The port is chosen at connect() with the destination known: a range of ports per
         * (source, destination) pair instead of one shared range per source address. */
        int on = 1;
        setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &on, sizeof on);
        if (bind(fd, (const struct sockaddr *)&source, sizeof source) != 0) {
            return -1;
        }
    }
    return real_connect(fd, address, length);
}

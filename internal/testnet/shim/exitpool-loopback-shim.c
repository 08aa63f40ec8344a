/*
 * LD_PRELOAD shim loaded into every tor of the private test network.
 *
 * 1. Safety net: connect/sendto/sendmsg to any non-loopback IPv4/IPv6 address (a v4-mapped
 *    IPv6 address counts as the IPv4 address it maps) fail with ENETUNREACH before the
 *    syscall, so no packet of the test network can ever leave the machine, whatever tor is
 *    told to reach. Tor turns ENETUNREACH into "no route" (SOCKS reply 4).
 * 2. Distinct exit addresses: tor ignores OutboundBindAddress for loopback destinations, so
 *    every exit would reach 127.0.0.1 from 127.0.0.1. When EXITPOOL_SHIM_BIND_IPV4 holds an
 *    IPv4 address, unbound IPv4 TCP sockets are bound to it before connect, so a destination
 *    sees each exit's own 127.0.0.N.
 * 3. Exit traffic from another address: when EXITPOOL_SHIM_EXIT_BIND_IPV4 holds an IPv4
 *    address too, connections to ports outside EXITPOOL_SHIM_RELAY_PORTS ("LOW-HIGH", the
 *    network's own ORPorts and DirPorts) are bound to it instead, as OutboundBindAddressExit
 *    would on a real exit: the relay keeps talking to the network from its published address,
 *    and destinations see the other one.
 *
 * Refusals are reported on stderr (tor's stdout/stderr go to a log file in the node's dir).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Exported so a process (or a test) can tell that the shim really is the one interposed. */
const char exitpool_loopback_shim_version[] = "exitpool-loopback-shim/2";

typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);
typedef ssize_t (*sendto_fn)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
typedef ssize_t (*sendmsg_fn)(int, const struct msghdr *, int);
typedef int (*sendmmsg_fn)(int, struct mmsghdr *, unsigned int, int);

static connect_fn real_connect;
static sendto_fn real_sendto;
static sendmsg_fn real_sendmsg;
static sendmmsg_fn real_sendmmsg;

static void *resolve_next(const char *name) {
  void *fn = dlsym(RTLD_NEXT, name);
  if (fn == NULL) {
    /* Without the real function nothing can work; dying loudly beats silently leaking. */
    static const char msg[] = "exitpool-shim: cannot resolve libc symbol\n";
    ssize_t ignored = write(2, msg, sizeof msg - 1);
    (void)ignored;
    abort();
  }
  return fn;
}

static int ipv4_is_loopback(const struct in_addr *addr) {
  return (ntohl(addr->s_addr) >> 24) == 127;
}

/* 1: loopback (or not an IP family, e.g. AF_UNIX/AF_NETLINK/AF_UNSPEC); 0: must be refused. */
static int destination_allowed(const struct sockaddr *sa, socklen_t len) {
  if (sa == NULL) return 1; /* connected socket: the connect() already passed this check */
  if (len < (socklen_t)sizeof(sa_family_t)) return 1; /* the kernel will reject it anyway */
  if (sa->sa_family == AF_INET) {
    if (len < (socklen_t)sizeof(struct sockaddr_in)) return 0;
    const struct sockaddr_in *in4 = (const struct sockaddr_in *)sa;
    return ipv4_is_loopback(&in4->sin_addr);
  }
  if (sa->sa_family == AF_INET6) {
    if (len < (socklen_t)sizeof(struct sockaddr_in6)) return 0;
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
    if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return 1;
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      struct in_addr mapped;
      memcpy(&mapped.s_addr, &in6->sin6_addr.s6_addr[12], 4);
      return ipv4_is_loopback(&mapped);
    }
    return 0;
  }
  return 1;
}

static void report_refusal(const char *call, const struct sockaddr *sa) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, text, sizeof text);
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, text, sizeof text);
  }
  char line[160];
  int n = snprintf(line, sizeof line, "exitpool-shim: refused %s to non-loopback %s\n", call, text);
  if (n > 0) {
    ssize_t ignored = write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    (void)ignored;
  }
}

/* 1 when EXITPOOL_SHIM_RELAY_PORTS ("LOW-HIGH") is set and holds `port`. */
static int is_relay_port(unsigned int port) {
  const char *range = getenv("EXITPOOL_SHIM_RELAY_PORTS");
  unsigned int low = 0, high = 0;
  if (range == NULL || sscanf(range, "%u-%u", &low, &high) != 2) return 0;
  return port >= low && port <= high;
}

/* The source address for a connection to `dest`: the exit address for exit traffic, else the relay's own. */
static const char *source_address_for(const struct sockaddr_in *dest) {
  const char *exit_address = getenv("EXITPOOL_SHIM_EXIT_BIND_IPV4");
  if (exit_address != NULL && exit_address[0] != '\0' && !is_relay_port(ntohs(dest->sin_port))) return exit_address;
  return getenv("EXITPOOL_SHIM_BIND_IPV4");
}

/* Binds an unbound IPv4 TCP socket to its source address (above); leaves every other socket alone. */
static void bind_to_own_source_address(int fd, const struct sockaddr *dest) {
  if (dest == NULL || dest->sa_family != AF_INET) return;
  const char *wanted = source_address_for((const struct sockaddr_in *)dest);
  if (wanted == NULL || wanted[0] == '\0') return;

  int type = 0;
  socklen_t type_len = sizeof type;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_len) != 0 || type != SOCK_STREAM) return;

  struct sockaddr_in current;
  socklen_t current_len = sizeof current;
  memset(&current, 0, sizeof current);
  if (getsockname(fd, (struct sockaddr *)&current, &current_len) != 0) return;
  if (current.sin_family != AF_INET || current.sin_port != 0 || current.sin_addr.s_addr != htonl(INADDR_ANY)) return;

  struct sockaddr_in source;
  memset(&source, 0, sizeof source);
  source.sin_family = AF_INET;
  source.sin_port = 0;
  if (inet_pton(AF_INET, wanted, &source.sin_addr) != 1) return;
  /* A failed bind is not fatal: the connection then simply leaves from the default address. */
  if (bind(fd, (const struct sockaddr *)&source, sizeof source) != 0) {
    static const char msg[] = "exitpool-shim: bind to the source address failed\n";
    ssize_t ignored = write(2, msg, sizeof msg - 1);
    (void)ignored;
  }
}

int connect(int fd, const struct sockaddr *addr, socklen_t len) {
  if (real_connect == NULL) real_connect = (connect_fn)resolve_next("connect");
  if (!destination_allowed(addr, len)) {
    report_refusal("connect", addr);
    errno = ENETUNREACH;
    return -1;
  }
  bind_to_own_source_address(fd, addr);
  return real_connect(fd, addr, len);
}

ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *addr, socklen_t len) {
  if (real_sendto == NULL) real_sendto = (sendto_fn)resolve_next("sendto");
  if (!destination_allowed(addr, len)) {
    report_refusal("sendto", addr);
    errno = ENETUNREACH;
    return -1;
  }
  return real_sendto(fd, buf, n, flags, addr, len);
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags) {
  if (real_sendmsg == NULL) real_sendmsg = (sendmsg_fn)resolve_next("sendmsg");
  if (msg != NULL && msg->msg_name != NULL && !destination_allowed((const struct sockaddr *)msg->msg_name, msg->msg_namelen)) {
    report_refusal("sendmsg", (const struct sockaddr *)msg->msg_name);
    errno = ENETUNREACH;
    return -1;
  }
  return real_sendmsg(fd, msg, flags);
}

/* libuv (Node's dgram) batches datagrams with sendmmsg; one forbidden destination refuses the batch. */
int sendmmsg(int fd, struct mmsghdr *msgs, unsigned int count, int flags) {
  if (real_sendmmsg == NULL) real_sendmmsg = (sendmmsg_fn)resolve_next("sendmmsg");
  if (msgs != NULL) {
    for (unsigned int i = 0; i < count; i++) {
      const struct msghdr *msg = &msgs[i].msg_hdr;
      if (msg->msg_name != NULL && !destination_allowed((const struct sockaddr *)msg->msg_name, msg->msg_namelen)) {
        report_refusal("sendmmsg", (const struct sockaddr *)msg->msg_name);
        errno = ENETUNREACH;
        return -1;
      }
    }
  }
  return real_sendmmsg(fd, msgs, count, flags);
}

/*
 * peer.c: the agents' connectivity listener and probe (see peer.h).  Sockets are non-blocking and
 * every wait is a poll() with a deadline, so a black-holed peer costs at most the probe's timeout.
 */
#include "agent/peer.h"

#include "agent/clock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define POLL_MS 500
#define BANNER_MAX 128

struct egs_peer_listener {
	int fd;
	int port;
	char banner[BANNER_MAX];
	atomic_bool stop;
	pthread_t thread;
};

static void *listener_main(void *arg)
{
	struct egs_peer_listener *l = arg;
	size_t len = strlen(l->banner);

	while (!atomic_load(&l->stop)) {
		struct pollfd pfd = {.fd = l->fd, .events = POLLIN};
		int c;
		if (poll(&pfd, 1, POLL_MS) <= 0)
			continue;
		c = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (c < 0)
			continue;
		/* One short line into an empty socket buffer: it fits, so a non-blocking send never waits. */
		(void)!send(c, l->banner, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		close(c);
	}
	return NULL;
}

/* Binds a listening socket for host:port in family; returns it, or -1 with why in err. */
static int bind_family(const char *host, int port, int family, char *err, size_t errsz)
{
	struct addrinfo hints = {.ai_family = family, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res = NULL;
	char service[16];
	int fd = -1, one = 1, zero = 0, rc;

	snprintf(service, sizeof(service), "%d", port);
	rc = getaddrinfo(*host ? host : NULL, service, &hints, &res);
	if (rc != 0) {
		snprintf(err, errsz, "%s: %s", *host ? host : "any address", gai_strerror(rc));
		return -1;
	}
	for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0) {
			snprintf(err, errsz, "socket: %s", strerror(errno));
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (ai->ai_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0) {
			int e = errno;
			snprintf(err, errsz, "port %d: %s", port, strerror(e));
			close(fd);
			fd = -1;
			errno = e; /* bind_listener() looks at it */
		}
	}
	freeaddrinfo(res);
	return fd;
}

/* host "" means every address: IPv6 with IPv4 mapped where the system has IPv6, else IPv4 alone. */
static int bind_listener(const char *host, int port, char *err, size_t errsz)
{
	int fd;

	if (*host)
		return bind_family(host, port, AF_UNSPEC, err, errsz);
	fd = bind_family(host, port, AF_INET6, err, errsz);
	if (fd < 0 && errno != EADDRINUSE)
		fd = bind_family(host, port, AF_INET, err, errsz);
	return fd;
}

enum egs_err egs_peer_listener_start(const char *host, int port, const char *cluster,
				     struct egs_peer_listener **out, char *err, size_t errsz)
{
	struct egs_peer_listener *l;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	*out = NULL;
	snprintf(err, errsz, "port %d: cannot listen", port);
	l = egs_calloc(1, sizeof(*l));
	l->fd = bind_listener(host ? host : "", port, err, errsz);
	if (l->fd < 0)
		goto fail;
	if (getsockname(l->fd, (struct sockaddr *)&ss, &sl) == 0)
		l->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port :
							   ((struct sockaddr_in *)&ss)->sin_port);
	snprintf(l->banner, sizeof(l->banner), "%s %s\n", EGS_PEER_BANNER, cluster);
	atomic_init(&l->stop, false);
	if (pthread_create(&l->thread, NULL, listener_main, l) != 0) {
		snprintf(err, errsz, "cannot start the listener thread");
		goto fail;
	}
	*out = l;
	return EGS_OK;
fail:
	if (l->fd >= 0)
		close(l->fd);
	egs_free(l);
	return EGS_ERR_IO;
}

int egs_peer_listener_port(const struct egs_peer_listener *l)
{
	return l->port;
}

void egs_peer_listener_free(struct egs_peer_listener *l)
{
	if (!l)
		return;
	atomic_store(&l->stop, true);
	pthread_join(l->thread, NULL);
	close(l->fd);
	egs_free(l);
}

/* Splits "host:port" or "[v6]:port" into host and port; false when malformed. */
static bool split_address(const char *address, char *host, size_t hostsz, char *port, size_t portsz)
{
	const char *colon = strrchr(address, ':'), *h = address;
	size_t hl;

	if (!colon || !colon[1] || strlen(colon + 1) >= portsz || strspn(colon + 1, "0123456789") != strlen(colon + 1))
		return false;
	hl = (size_t)(colon - address);
	if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
		h++;
		hl -= 2;
	}
	if (hl == 0 || hl >= hostsz)
		return false;
	memcpy(host, h, hl);
	host[hl] = '\0';
	egs_strlcpy(port, colon + 1, portsz);
	return true;
}

/* Waits for events on fd until deadline; false on timeout (errno ETIMEDOUT) or error. */
static bool wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = events};
		int64_t left = deadline - egs_clock_ms();
		int rc;
		if (left <= 0) {
			errno = ETIMEDOUT;
			return false;
		}
		rc = poll(&pfd, 1, (int)left);
		if (rc > 0)
			return true;
		if (rc < 0 && errno != EINTR)
			return false;
	}
}

/* Connects fd to ai before deadline. */
static bool connect_by(int fd, const struct addrinfo *ai, int64_t deadline)
{
	int soerr = 0;
	socklen_t sl = sizeof(soerr);

	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		return true;
	if (errno != EINPROGRESS || !wait_fd(fd, POLLOUT, deadline))
		return false;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
		errno = soerr ? soerr : errno;
		return false;
	}
	return true;
}

/* Reads one line (without its newline) into buf before deadline. */
static bool read_line(int fd, char *buf, size_t n, int64_t deadline)
{
	size_t k = 0;

	while (k < n - 1) {
		ssize_t r;
		if (!wait_fd(fd, POLLIN, deadline))
			return false;
		r = recv(fd, buf + k, n - 1 - k, 0);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			break;
		k += (size_t)r;
		if (memchr(buf, '\n', k))
			break;
	}
	buf[k] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	return true;
}

enum egs_err egs_peer_probe(const char *address, int timeout_ms, char *banner, size_t bannersz, char *why,
			    size_t whysz, int64_t *elapsed_ms)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
	char host[256], port[8];
	int64_t t0 = egs_clock_ms(), deadline = t0 + timeout_ms;
	enum egs_err rc = EGS_ERR_IO;
	int fd = -1, gai;

	banner[0] = '\0';
	snprintf(why, whysz, "unreachable");
	if (!split_address(address, host, sizeof(host), port, sizeof(port))) {
		snprintf(why, whysz, "'%s' is not host:port", address);
		rc = EGS_ERR_INVALID;
		goto out;
	}
	if ((gai = getaddrinfo(host, port, &hints, &res)) != 0) {
		snprintf(why, whysz, "cannot resolve %s: %s", host, gai_strerror(gai));
		goto out;
	}
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect_by(fd, ai, deadline))
			break;
		snprintf(why, whysz, "%s", strerror(errno == EINPROGRESS ? ETIMEDOUT : errno));
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	if (fd < 0)
		goto out;
	if (!read_line(fd, banner, bannersz, deadline)) {
		snprintf(why, whysz, "connected, but no banner within %d ms", timeout_ms);
		goto out;
	}
	if (strncmp(banner, EGS_PEER_BANNER " ", strlen(EGS_PEER_BANNER) + 1) != 0) {
		snprintf(why, whysz, "connected, but the answer is not an egs-agent's");
		rc = EGS_ERR_INVALID;
		goto out;
	}
	why[0] = '\0';
	rc = EGS_OK;
out:
	if (res)
		freeaddrinfo(res);
	if (fd >= 0)
		close(fd);
	if (elapsed_ms)
		*elapsed_ms = egs_clock_ms() - t0;
	return rc;
}

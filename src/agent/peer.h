/*
 * peer.h: how agents reach each other for the connectivity pre-check: each agent may listen on a TCP
 * port (--check-port) and answer every connection with one banner line, "EGS-AGENT <cluster>\n",
 * then close it; a checking agent connects to a peer's host:port with a timeout and reads that line.
 *
 * The listener runs one thread that waits in poll() with a short timeout, so it costs nothing while
 * idle and stops within half a second.  It reads nothing from the peer, so there is nothing to parse
 * and nothing to overflow.
 */
#ifndef EGS_AGENT_PEER_H
#define EGS_AGENT_PEER_H

#include "core/common.h"

#define EGS_PEER_BANNER "EGS-AGENT"

struct egs_peer_listener;

/*
 * Listens on host:port (host NULL or "": every address, IPv6 and IPv4 where the system allows) and
 * answers with the banner of cluster (copied).  port 0 picks a free port (see
 * egs_peer_listener_port()).  On success stores the running listener in *out (caller frees with
 * egs_peer_listener_free()); on failure returns EGS_ERR_IO and writes why into err (errsz bytes).
 */
enum egs_err egs_peer_listener_start(const char *host, int port, const char *cluster,
				     struct egs_peer_listener **out, char *err, size_t errsz);

/* The port the listener is bound to. */
int egs_peer_listener_port(const struct egs_peer_listener *l);

/* Stops the thread and closes the socket.  egs_peer_listener_free(NULL) is a no-op. */
void egs_peer_listener_free(struct egs_peer_listener *l);

/*
 * Connects to address ("host:port", "[v6]:port") within timeout_ms and reads the peer's banner line
 * into banner (bannersz bytes).  Returns EGS_OK when a line starting with EGS_PEER_BANNER came back;
 * EGS_ERR_INVALID when the address is malformed or something else answered; EGS_ERR_IO when the host
 * cannot be resolved or reached in time.  why (whysz bytes) says what went wrong.  *elapsed_ms (may be
 * NULL) gets the time it took.
 */
enum egs_err egs_peer_probe(const char *address, int timeout_ms, char *banner, size_t bannersz, char *why,
			    size_t whysz, int64_t *elapsed_ms);

#endif

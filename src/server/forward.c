/*
 * forward.c: a follower sends writes and the agents' calls to the leader (docs/ha.md).
 *
 * The leader's address is meta leader.addr, which the leader publishes when it takes the lock
 * (replica.c keeps the follower's copy fresh).  Each forwarded request goes on a connection of
 * its own (a long poll must not hold up the next write), with the client's method, path, query,
 * headers (Authorization included: the leader authenticates) and body; the leader's status,
 * headers and body go back unchanged.  A request that already came through a follower
 * (X-EGS-Forwarded) is never sent on: the follower answers 503 NOT_LEADER instead, so a stale
 * address cannot make two followers bounce a request between them.  When no leader is known or it
 * does not answer, the client gets 503 LEADER_UNAVAILABLE with Retry-After: 1 (nothing was
 * written by this replica; the write may or may not have reached the leader when the connection
 * broke after sending, as with any connection that breaks before the answer).
 *
 * The leader audits a forwarded write under the client's address, not the follower's: the follower sends
 * it in X-EGS-Client with X-EGS-Client-Proof, an HMAC-SHA-256 over the client's address, the follower's
 * advertised address, the method and the request target, under a key derived (for this use only) from
 * kubecreds.key, which every replica shares.  A client cannot claim an address: whatever it sends in
 * those headers is dropped here, and a leader that cannot verify the proof records the connection's
 * peer as before (audit.c).
 *
 * Under TLS (egsd --tls-cert) the follower speaks HTTPS to the leader and verifies it: the chain must
 * end at a certificate of the system's store or at one in this egsd's own --tls-cert file (a partial
 * chain is enough: replicas that share one certificate trust each other), and the certificate must
 * name the leader's advertised host (an IP address or a DNS name).
 */
#include "server/server.h"

#include "core/util.h"
#include "server/conn.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <event2/http.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define FORWARD_TIMEOUT_S 75 /* above the longest agent long poll (60 s) */
#define FORWARDED "X-EGS-Forwarded"
#define CLIENT "X-EGS-Client"
#define PROOF "X-EGS-Client-Proof"

struct fwd {
	struct egs_server *srv;
	struct egs_hreq *client; /* answered exactly once */
	struct evhttp_connection *up;
	enum evhttp_cmd_type method;
	char path[512];
	int64_t t0_us;
};

bool egs_forward_wanted(enum evhttp_cmd_type method, const char *path)
{
	if (method != EVHTTP_REQ_GET && method != EVHTTP_REQ_HEAD && method != EVHTTP_REQ_OPTIONS)
		return true;
	/* GETs that change state or need the leader's runtime: the agents' polls, kubeconfigs. */
	return strncmp(path, "/api/v1/agent/", 14) == 0 || strcmp(path, "/api/v1/slice-workspace/kube-config") == 0;
}

/* Headers that describe one hop, not the request, and the client claims only a replica may make:
 * never copied. */
static bool hop_header(const char *name)
{
	static const char *const hop[] = { "Connection", "Keep-Alive", "Transfer-Encoding", "Content-Length", "Host",
					   "Expect", "Upgrade", "TE", "Trailer", "Proxy-Connection", "Date",
					   FORWARDED, CLIENT, PROOF };
	for (size_t i = 0; i < EGS_ARRAY_LEN(hop); i++)
		if (strcasecmp(name, hop[i]) == 0)
			return true;
	return false;
}

/* The MAC of a forwarded request's client claim (see the top of the file). */
static void client_mac(const struct egs_server *srv, const char *client, const char *via, enum evhttp_cmd_type method,
		       const char *uri, unsigned char mac[crypto_auth_hmacsha256_BYTES])
{
	static const char context[] = "egsd forwarded client v1";
	unsigned char key[crypto_auth_hmacsha256_KEYBYTES];
	crypto_auth_hmacsha256_state st;
	char m[16];

	crypto_generichash(key, sizeof(key), (const unsigned char *)context, sizeof(context) - 1, srv->kubecred_key,
			   sizeof(srv->kubecred_key));
	snprintf(m, sizeof(m), "%d", (int)method);
	crypto_auth_hmacsha256_init(&st, key, sizeof(key));
	const char *parts[] = { client, via, m, uri };
	for (size_t i = 0; i < EGS_ARRAY_LEN(parts); i++) /* each part NUL-terminated: no two splits agree */
		crypto_auth_hmacsha256_update(&st, (const unsigned char *)parts[i], strlen(parts[i]) + 1);
	crypto_auth_hmacsha256_final(&st, mac);
	sodium_memzero(key, sizeof(key));
	sodium_memzero(&st, sizeof(st));
}

bool egs_forward_client(const struct egs_req *r, char *out, size_t n)
{
	/* The client header first: a request that was not forwarded (every audited write on a leader)
	 * has none, and the three other lookups cost ~500 instructions a create (issue 16). */
	const char *client = r->hq ? egs_req_header(r, CLIENT) : NULL;
	if (!client)
		return false;
	const char *proof = egs_req_header(r, PROOF);
	const char *via = egs_req_header(r, FORWARDED), *uri = egs_hreq_target(r->hq);
	unsigned char want[crypto_auth_hmacsha256_BYTES], got[crypto_auth_hmacsha256_BYTES];
	size_t len = 0;

	if (!proof || !via || !uri || strlen(client) > 64 ||
	    sodium_hex2bin(got, sizeof(got), proof, strlen(proof), NULL, &len, NULL) != 0 || len != sizeof(got))
		return false;
	client_mac(r->srv, client, via, r->method, uri, want);
	if (crypto_verify_32(want, got) != 0)
		return false;
	snprintf(out, n, "%s via %s", client, via);
	return true;
}

/* The leader's answer's header fields onto the client's answer. */
static void copy_answer_headers(struct egs_hreq *to, const struct evkeyvalq *from)
{
	for (const struct evkeyval *kv = from->tqh_first; kv; kv = kv->next.tqe_next)
		if (!hop_header(kv->key))
			egs_hreq_header_add(to, kv->key, kv->value);
}

/* The client's request's header fields onto the request to the leader. */
static void copy_request_headers(struct evkeyvalq *to, const struct egs_hreq *from)
{
	const char *name, *value;
	for (size_t i = 0; egs_hreq_header_at(from, i, &name, &value); i++)
		if (!hop_header(name))
			evhttp_add_header(to, name, value);
}

static void free_conn(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	evhttp_connection_free(arg);
}

/* The client's request as the usual reply path takes it (for its logs and metrics), into r. */
static void client_req(const struct fwd *f, struct egs_req *r)
{
	memset(r, 0, sizeof(*r));
	r->srv = f->srv;
	r->hq = f->client;
	r->method = f->method;
	r->t0_us = f->t0_us;
	egs_strlcpy(r->path, f->path, sizeof(r->path));
}

/* Answers the client in the error envelope. */
static void fail(struct fwd *f, const char *key, const char *msg)
{
	struct egs_req r;
	client_req(f, &r);
	egs_reply_header(&r, "Retry-After", "1");
	egs_reply_err(&r, EGS_ERR_UNAVAILABLE, key, NULL, "%s", msg);
}

static void on_answer(struct evhttp_request *resp, void *arg)
{
	struct fwd *f = arg;
	int code = resp ? evhttp_request_get_response_code(resp) : 0;
	if (code == 0) {
		fail(f, "LEADER_UNAVAILABLE", "the leader did not answer (it may be changing): retry");
	} else {
		struct egs_req r;
		client_req(f, &r);
		copy_answer_headers(f->client, evhttp_request_get_input_headers(resp));
		egs_reply_raw(&r, code, evhttp_request_get_input_buffer(resp));
	}
	/* The connection may not be freed inside its own callback. */
	struct timeval now = { 0, 0 };
	event_base_once(f->srv->base, -1, EV_TIMEOUT, free_conn, f->up, &now);
	free(f);
}

/* The client context of forwarded HTTPS requests, made once (NULL: it cannot be; logged). */
static SSL_CTX *client_ctx(struct egs_server *srv)
{
	if (srv->fwd_tls)
		return srv->fwd_tls;
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx || SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 || SSL_CTX_set_default_verify_paths(ctx) != 1 ||
	    SSL_CTX_load_verify_locations(ctx, srv->tls_cert, NULL) != 1) {
		fprintf(srv->log, "level=error msg=\"forwarding: cannot set up TLS to the leader\"\n");
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	X509_STORE_set_flags(SSL_CTX_get_cert_store(ctx), X509_V_FLAG_PARTIAL_CHAIN);
	srv->fwd_tls = ctx;
	return ctx;
}

/* A connection to host:port, HTTPS when this egsd serves HTTPS; NULL when TLS cannot be set up. */
static struct evhttp_connection *connect_leader(struct egs_server *srv, const char *host, uint16_t port)
{
	if (!srv->tls)
		return evhttp_connection_base_new(srv->base, NULL, host, port);
	SSL_CTX *ctx = client_ctx(srv);
	SSL *ssl = ctx ? SSL_new(ctx) : NULL;
	unsigned char ip[16];
	if (!ssl)
		return NULL;
	bool is_ip = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
	if (is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) != 1
		  : (SSL_set1_host(ssl, host) != 1 || SSL_set_tlsext_host_name(ssl, host) != 1)) {
		SSL_free(ssl);
		return NULL;
	}
	struct bufferevent *bev = bufferevent_openssl_socket_new(srv->base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
								 BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (!bev) {
		SSL_free(ssl);
		return NULL;
	}
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	return evhttp_connection_base_bufferevent_new(srv->base, NULL, bev, host, port);
}

/* The client's address and its proof, for the leader's audit log. */
static void add_client(const struct egs_server *srv, const struct egs_req *r, struct evkeyvalq *out, const char *uri)
{
	const char *addr = egs_hreq_peer(r->hq);
	unsigned char mac[crypto_auth_hmacsha256_BYTES];
	char hex[2 * sizeof(mac) + 1];

	if (!addr[0] || !uri || strlen(addr) > 64)
		return;
	client_mac(srv, addr, srv->advertised, r->method, uri, mac);
	sodium_bin2hex(hex, sizeof(hex), mac, sizeof(mac));
	evhttp_add_header(out, CLIENT, addr);
	evhttp_add_header(out, PROOF, hex);
}

void egs_forward(struct egs_req *r)
{
	struct egs_server *srv = r->srv;
	char host[256];
	const char *colon = strrchr(srv->leader.addr, ':');
	long port = colon ? strtol(colon + 1, NULL, 10) : 0;
	if (egs_req_header(r, FORWARDED)) {
		egs_reply_header(r, "Retry-After", "1");
		egs_reply_err(r, EGS_ERR_UNAVAILABLE, "NOT_LEADER", NULL,
			      "this egsd does not lead (the leader changed while the request travelled): retry");
		return;
	}
	if (!colon || port <= 0 || port > 65535 || (size_t)(colon - srv->leader.addr) >= sizeof(host)) {
		egs_reply_header(r, "Retry-After", "1");
		egs_reply_err(r, EGS_ERR_UNAVAILABLE, "LEADER_UNAVAILABLE", NULL,
			      "no egsd leads at the moment (a new one is being elected): retry");
		return;
	}
	memcpy(host, srv->leader.addr, (size_t)(colon - srv->leader.addr));
	host[colon - srv->leader.addr] = '\0';
	struct evhttp_connection *conn = connect_leader(srv, host, (uint16_t)port);
	if (!conn) {
		egs_reply_header(r, "Retry-After", "1");
		egs_reply_err(r, EGS_ERR_UNAVAILABLE, "LEADER_UNAVAILABLE", NULL, "the leader cannot be reached over TLS");
		return;
	}
	struct fwd *f = egs_calloc(1, sizeof(*f));
	f->srv = srv;
	f->client = r->hq;
	f->method = r->method;
	f->t0_us = r->t0_us;
	egs_strlcpy(f->path, r->path, sizeof(f->path));
	f->up = conn;
	evhttp_connection_set_timeout(f->up, FORWARD_TIMEOUT_S);
	struct evhttp_request *up = evhttp_request_new(on_answer, f);
	EGS_ASSERT(up);
	struct evkeyvalq *out = evhttp_request_get_output_headers(up);
	copy_request_headers(out, r->hq);
	evhttp_add_header(out, "Host", srv->leader.addr);
	evhttp_add_header(out, FORWARDED, srv->advertised);
	add_client(srv, r, out, egs_hreq_target(r->hq));
	struct evbuffer *body = evhttp_request_get_output_buffer(up);
	const char *bp;
	size_t blen;
	egs_hreq_body(r->hq, &bp, &blen);
	evbuffer_add(body, bp, blen);
	if (evbuffer_get_length(body) > 0) { /* libevent adds it to a POST or PUT only: a DELETE's body was lost */
		char len[24];
		snprintf(len, sizeof(len), "%zu", evbuffer_get_length(body));
		evhttp_add_header(out, "Content-Length", len);
	}
	r->hq = NULL; /* taken: on_answer replies */
	if (evhttp_make_request(f->up, up, f->method, egs_hreq_target(f->client)) != 0) {
		/* evhttp freed up; the connection is ours to free */
		fail(f, "LEADER_UNAVAILABLE", "the request could not be sent to the leader: retry");
		evhttp_connection_free(f->up);
		free(f);
	}
}

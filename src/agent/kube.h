/*
 * kube.h: a small Kubernetes API client for egs-agent's kubernetes backend: where the API server is
 * and how to authenticate (a kubeconfig's current context, or the in-cluster service account), and
 * JSON requests over HTTPS with libcurl, kept connections, and watch streams.
 *
 * What it speaks is the real Kubernetes REST API (JSON only, no protobuf): paths like
 * /api/v1/nodes, Status objects on errors, newline-delimited watch events.  A bearer token read from
 * a file (the in-cluster token, a kubeconfig's tokenFile) is read again whenever the file changes,
 * because bound service account tokens expire and the kubelet rotates the file.
 *
 * Thread safety: one struct egs_kube may be used by any number of threads at once; each call takes a
 * libcurl handle from a small pool (returned after the call, so its connection is kept for the next).
 * Tokens and keys are never logged and never appear in error messages.
 */
#ifndef EGS_AGENT_KUBE_H
#define EGS_AGENT_KUBE_H

#include "core/common.h"

#include <jansson.h>

#define EGS_KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* Where the API server is and how to talk to it.  Every string is owned (NULL: not set). */
struct egs_kube_config {
	char *server;     /* "https://host:port" (no trailing slash) */
	char *token;      /* a bearer token */
	char *token_file; /* a file holding the bearer token, read again when it changes */
	char *ca_pem;     /* the CA bundle (PEM), from certificate-authority-data */
	char *ca_file;    /* the CA bundle file */
	char *cert_pem, *cert_file; /* the client certificate (PEM) or its file */
	char *key_pem, *key_file;   /* the client key (PEM) or its file */
	bool insecure;    /* insecure-skip-tls-verify: true */
};

/* Frees every string of c and zeroes it. */
void egs_kube_config_cleanup(struct egs_kube_config *c);

/*
 * Parses a kubeconfig (YAML text of len bytes) and fills *out from its current context: the
 * cluster's server, certificate-authority(-data) and insecure-skip-tls-verify; the user's token,
 * tokenFile, client-certificate(-data) and client-key(-data).  Relative file names are taken
 * relative to base_dir (the kubeconfig's directory; NULL: as given).  source names the text in
 * errors.  Returns EGS_OK, or EGS_ERR_INVALID with why in err (errsz bytes): not YAML, no
 * current-context, a context, cluster or user that is missing, a server that is not https:// or
 * http://, data that is not base64, or a user with an auth method this client lacks (exec, auth
 * provider, basic auth).  *out is cleaned up on failure.
 */
enum egs_err egs_kube_config_parse(const char *text, size_t len, const char *source, const char *base_dir,
				   struct egs_kube_config *out, char *err, size_t errsz);

/* Reads the kubeconfig at path and parses it as egs_kube_config_parse() does (base_dir: path's
 * directory).  EGS_ERR_IO when the file cannot be read. */
enum egs_err egs_kube_config_load(const char *path, struct egs_kube_config *out, char *err, size_t errsz);

/*
 * The in-cluster configuration: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT with the
 * token file and CA under sa_dir (NULL: EGS_KUBE_SA_DIR).  EGS_ERR_NOT_FOUND when not in a cluster
 * (the variables are unset), EGS_ERR_IO when the token or CA file is unreadable.
 */
enum egs_err egs_kube_config_incluster(const char *sa_dir, struct egs_kube_config *out, char *err,
				       size_t errsz);

struct egs_kube;

/* Polled during slow calls (and every second of a watch); true aborts the call. */
typedef bool (*egs_kube_stop_fn)(void *arg);

/* Opens a client for cfg (copied).  EGS_ERR_IO when a file named by cfg cannot be read (err says
 * which).  Caller frees *out with egs_kube_free(). */
enum egs_err egs_kube_new(const struct egs_kube_config *cfg, struct egs_kube **out, char *err, size_t errsz);

/* Frees k and its connections.  egs_kube_free(NULL) is a no-op.  No call may be in progress. */
void egs_kube_free(struct egs_kube *k);

/* Installs the interruption check (fn may be NULL; arg borrowed). */
void egs_kube_set_stop(struct egs_kube *k, egs_kube_stop_fn fn, void *arg);

/* The API server's URL (borrowed). */
const char *egs_kube_server(const struct egs_kube *k);

/*
 * One request: method on path (starting with '/', query included), with body (borrowed; NULL: none)
 * sent as content_type (NULL: application/json; patches pass application/merge-patch+json,
 * application/strategic-merge-patch+json or application/json-patch+json).  Waits at most timeout_s.
 * *status gets the HTTP status (0 when none came back) and *out (may be NULL) the answer's JSON (caller
 * decrefs; NULL when none).  Returns EGS_OK for 2xx; EGS_ERR_NOT_FOUND (404), EGS_ERR_CONFLICT (409),
 * EGS_ERR_BUSY (429, e.g. an eviction refused by a PodDisruptionBudget), EGS_ERR_UNAUTHENTICATED (401),
 * EGS_ERR_FORBIDDEN (403), EGS_ERR_INVALID (other 4xx), EGS_ERR_IO (5xx, no answer, aborted); err gets
 * the Status message or the transport error.
 */
enum egs_err egs_kube_call(struct egs_kube *k, const char *method, const char *path, const char *content_type,
			   json_t *body, int timeout_s, long *status, json_t **out, char *err, size_t errsz);

/* Called with each watch event ({"type","object"}, borrowed); return false to end the watch. */
typedef bool (*egs_kube_event_fn)(void *arg, json_t *event);

/*
 * A watch: GET path (which holds watch=1 and the resourceVersion) and calls fn with every event as it
 * arrives, until the server ends the stream (EGS_OK), fn returns false (EGS_OK), no byte came for
 * idle_s seconds (EGS_ERR_IO: a silent server, e.g. unreachable), stop(stop_arg) or the client's stop check returns true (EGS_ERR_IO; stop may be NULL), or
 * the server refused (the egs_kube_call() codes; 410 Gone is EGS_ERR_EXPIRED).  An event longer than 16
 * MiB ends the watch with EGS_ERR_TOO_LARGE.
 */
enum egs_err egs_kube_watch(struct egs_kube *k, const char *path, int idle_s, egs_kube_event_fn fn, void *arg,
			    egs_kube_stop_fn stop, void *stop_arg, long *status, char *err, size_t errsz);

/* Writes s into out (outsz bytes) escaped for a URL query value or path segment (RFC 3986 unreserved
 * characters stay).  Returns false when out is too small. */
bool egs_kube_escape(const char *s, char *out, size_t outsz);

#endif

/*
 * egs.h: libegs, the public C client of the EGS REST API (v1).  egsctl and egs-agent are built on it.
 *
 * The client speaks the public envelope: every answer is
 * {"statusCode","status","message","data","error"}, and a call hands back either the envelope's data
 * (success) or its error object (failure).  Transport is libcurl; JSON is jansson, whose json_t
 * appears in this API, so callers include <jansson.h> (this header does it for them).
 *
 * Threads: a struct egs_client is not shared between threads; make one per thread.  Different clients
 * may be used concurrently.  The first egs_client_new() initialises libcurl once for the process.
 *
 * Secrets: the bearer token is only ever sent in the Authorization header; it never appears in an
 * error message of this library.
 */
#ifndef EGS_EGS_H
#define EGS_EGS_H

#include <jansson.h>
#include <stdbool.h>

#include "egs/err.h"

/* Answers larger than this are refused (EGS_ERR_TOO_LARGE) before they are read completely. */
#define EGS_CLIENT_MAX_BODY (16L * 1024 * 1024)

struct egs_client;

/*
 * Polled while a call is in flight (about once a second, and on every progress of the transfer);
 * returning true aborts the call, which then fails with EGS_ERR_IO and the message "aborted".
 * Must be thread-safe with respect to whatever sets the condition (an atomic flag, typically).
 */
typedef bool (*egs_client_abort_fn)(void *arg);

/*
 * Returns a new client for the server at base_url ("http://host:port", a trailing slash is fine),
 * authenticating with bearer_token (may be NULL or "" for unauthenticated calls).  Both strings are
 * copied.  Returns NULL when base_url is not an http:// or https:// URL, when the token holds
 * control characters (they would inject headers), or when libcurl cannot be initialised.  Caller
 * frees with egs_client_free().
 */
struct egs_client *egs_client_new(const char *base_url, const char *bearer_token);

/* Frees the client and closes its connections.  egs_client_free(NULL) is a no-op. */
void egs_client_free(struct egs_client *c);

/*
 * Installs fn (may be NULL to remove it) to be polled during calls so that another thread can
 * interrupt a long poll promptly.  arg is borrowed and must outlive the client's calls.
 */
void egs_client_set_abort(struct egs_client *c, egs_client_abort_fn fn, void *arg);

/*
 * Calls method ("GET", "POST", "PUT", "DELETE", ...) on path (starting with "/", already
 * percent-encoded, query string included) with body (borrowed, may be NULL: no body) serialised as
 * JSON.  The whole call is bounded by timeout_s seconds (> 0).
 *
 * On return *http_status (may be NULL) holds the HTTP status, or 0 when no complete answer arrived
 * (the server could not be reached, the call timed out or was aborted); an answer refused as too
 * large keeps its status.
 * *data (may be NULL) receives a new reference the caller frees with json_decref():
 *   - on EGS_OK (a 2xx answer) the envelope's data, or NULL when the envelope carried none;
 *   - on an error answer the envelope's error object ({"errorKey","message","data"}), or NULL when
 *     the answer had none (a proxy's page, for example);
 *   - NULL on a transport failure.
 *
 * Returns EGS_OK for 2xx; for an error answer, the egs_err of its errorKey when the key is known, else
 * one derived from the status (400 EGS_ERR_BAD_REQUEST, 401 EGS_ERR_UNAUTHENTICATED, 403
 * EGS_ERR_FORBIDDEN, 404 EGS_ERR_NOT_FOUND, 409 EGS_ERR_CONFLICT, 413 EGS_ERR_TOO_LARGE, 422
 * EGS_ERR_INVALID, other 4xx EGS_ERR_BAD_REQUEST, 500 EGS_ERR_STORE, other statuses EGS_ERR_IO);
 * EGS_ERR_TOO_LARGE when the answer exceeds EGS_CLIENT_MAX_BODY; EGS_ERR_IO when the server could
 * not be reached, the call timed out or was aborted, or a 2xx answer was not a JSON envelope.
 * egs_client_errmsg() then says why.
 */
enum egs_err egs_client_call(struct egs_client *c, const char *method, const char *path, json_t *body,
			     long timeout_s, long *http_status, json_t **data);

/*
 * Returns a human readable account of the last call's failure: the server's error message, or the
 * transport's ("Couldn't connect to server", "Timeout was reached", "aborted"); "" after a success.
 * Borrowed: valid until the next call on c.
 */
const char *egs_client_errmsg(const struct egs_client *c);

#endif

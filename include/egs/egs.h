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
 *
 * Two layers: egs_client_call() speaks any route and hands back the envelope's data; the typed calls
 * below it (authenticate, inventory, clusters, workspaces, GPRs, events) name the routes and unwrap
 * their answers.  Both report failures the same way: an enum egs_err (0 = ok) plus
 * egs_client_errmsg(), egs_client_errkey() and egs_client_errfield() for the details.
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

/*
 * https:// servers are always verified: the certificate chain against the trusted CAs and the
 * certificate's names (DNS or IP SAN) against the URL's host; a failure is EGS_ERR_IO with the TLS
 * library's reason in egs_client_errmsg() ("SSL certificate problem: ..."), never a fallback to http.
 * By default the system's CA store is trusted.  egs_client_set_ca_file() trusts the CA certificates
 * (PEM) of path instead (a private CA), or the system store again with NULL.  path is copied; the
 * file is read at each connection.  Returns EGS_ERR_IO, changing nothing, when path cannot be read.
 */
enum egs_err egs_client_set_ca_file(struct egs_client *c, const char *path);

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

/* egs_client_call() with a body already serialised: json_text (borrowed, NUL-terminated JSON, sent as
 * is).  For callers that build a large body piece by piece instead of as one tree in memory. */
enum egs_err egs_client_call_text(struct egs_client *c, const char *method, const char *path, const char *json_text,
				  long timeout_s, long *http_status, json_t **data);

/*
 * Returns a human readable account of the last call's failure: the server's error message, or the
 * transport's ("Couldn't connect to server", "Timeout was reached", "aborted"); "" after a success.
 * Borrowed: valid until the next call on c.
 */
const char *egs_client_errmsg(const struct egs_client *c);

/*
 * Details of the last call's failure, for callers that map errors precisely (egsctl points at the
 * manifest line of error.data.field).  Each is borrowed, valid until the next call on c, and ""
 * (0 for the status) after a success or when the answer did not carry it.
 */
const char *egs_client_errkey(const struct egs_client *c);   /* error.errorKey, e.g. "GPR_NOT_FOUND" */
const char *egs_client_errfield(const struct egs_client *c); /* error.data.field, e.g. "priority" */
long egs_client_status(const struct egs_client *c);          /* HTTP status; 0 = no answer */

/* ---------------------------------------------------------------------------------------------- */
/*
 * Typed calls.  Each is one egs_client_call() under the client's timeout (EGS_CLIENT_TIMEOUT_S
 * unless changed with egs_client_set_timeout()) and fails exactly as egs_client_call() documents;
 * egs_client_errmsg() and the accessors above then say why.
 *
 * Requests are JSON objects with the wire field names of the API (docs: README's API table and
 * GET /api/v1/openapi.json); they are borrowed and never modified.  Answers are new references the
 * caller frees with json_decref(), set only on EGS_OK (NULL otherwise).  Lists hand back the
 * array of the answer's "items" (or "workspaces"), never NULL on success.
 * Names and ids are percent-encoded by the library where they go into a query string.
 */
#define EGS_CLIENT_TIMEOUT_S 30L
#define EGS_CLIENT_ID_MAX 64 /* room for a gprId ("gpr-xxxxxxxx-xxxx") with margin */

/* Sets the bound of every typed call that follows (seconds, > 0). */
void egs_client_set_timeout(struct egs_client *c, long timeout_s);

/*
 * Replaces the bearer token (NULL or "" = none).  Returns EGS_ERR_INVALID, changing nothing, when
 * the token holds control characters.
 */
enum egs_err egs_client_set_token(struct egs_client *c, const char *bearer_token);

/*
 * Authenticates: POST /api/v1/auth {"apiKey"} and, on success, installs the returned bearer token
 * on c for the calls that follow.  A malformed key answers EGS_ERR_BAD_REQUEST, an unknown one
 * EGS_ERR_UNAUTHENTICATED, an expired one EGS_ERR_EXPIRED.
 * On success c keeps a copy of api_key (in memory only, wiped by egs_client_free()) so that any
 * later call answered 401 TOKEN_EXPIRED authenticates again once and is retried: a long session
 * (a wait of hours) outlives its tokens without the caller noticing.
 */
enum egs_err egs_client_authenticate(struct egs_client *c, const char *api_key);

/* ---- inventory and clusters ---- */
/* GET /api/v1/inventory/list: every node the caller may see (data.items). */
enum egs_err egs_client_inventory(struct egs_client *c, json_t **items);
/* GET /api/v1/inventory?sliceName=: what the workspace holds now. */
enum egs_err egs_client_inventory_workspace(struct egs_client *c, const char *workspace, json_t **items);
/* GET /api/v1/nodes[?clusterName=] (admins; cluster may be NULL) and GET /api/v1/gpus (admins). */
enum egs_err egs_client_nodes(struct egs_client *c, const char *cluster, json_t **items);
enum egs_err egs_client_gpus(struct egs_client *c, json_t **items);
/* GET /api/v1/clusters. */
enum egs_err egs_client_clusters(struct egs_client *c, json_t **items);
/*
 * POST /api/v1/clusters (admins) with spec {clusterName, projectName?, apiServer?, caData?}.
 * *answer receives {clusterName, projectName, agentToken}: the token is shown only this once.
 */
enum egs_err egs_client_cluster_register(struct egs_client *c, json_t *spec, json_t **answer);
/* PUT /api/v1/clusters {clusterName, apiServer?, caData?} (admins). */
enum egs_err egs_client_cluster_update(struct egs_client *c, json_t *spec);

/* ---- slice workspaces ---- */
/* GET /api/v1/slice-workspace/list (data.workspaces) and GET ?workspaceName= (one, with users). */
enum egs_err egs_client_workspace_list(struct egs_client *c, json_t **items);
enum egs_err egs_client_workspace_get(struct egs_client *c, const char *name, json_t **ws);
/* POST /api/v1/slice-workspace {workspaceName, clusters, namespaces, username, email, ...} (admins). */
enum egs_err egs_client_workspace_create(struct egs_client *c, json_t *spec);
/*
 * PUT /api/v1/slice-workspace {workspaceName, addNamespaces, removeNamespaces, addClusters,
 * removeClusters, addUsers, removeUsers, description} (admins); *ws (may be NULL) receives the
 * updated workspace.
 */
enum egs_err egs_client_workspace_update(struct egs_client *c, json_t *changes, json_t **ws);
/* DELETE /api/v1/slice-workspace {workspaceName}: cancels its waiting GPRs; EGS_ERR_BUSY while one is active. */
enum egs_err egs_client_workspace_delete(struct egs_client *c, const char *name);

/* ---- workspace policies (docs/policies.md) ---- */
/* GET /api/v1/slice-workspace/policy?workspaceName=: *policy receives {workspaceName, ...what it sets}
 * ({workspaceName} alone when the workspace has no policy). */
enum egs_err egs_client_policy_get(struct egs_client *c, const char *workspace, json_t **policy);
/* PUT /api/v1/slice-workspace/policy {workspaceName, maxGPRs, ..., softLimits} (admins): replaces the
 * whole policy; *policy (may be NULL) receives it as stored. */
enum egs_err egs_client_policy_set(struct egs_client *c, json_t *body, json_t **policy);
/* DELETE /api/v1/slice-workspace/policy {workspaceName} (admins): EGS_ERR_NOT_FOUND when it has none. */
enum egs_err egs_client_policy_delete(struct egs_client *c, const char *workspace);
/* GET /api/v1/settings/policy: the global policy every workspace obeys (maxNodesPerGpr always set). */
enum egs_err egs_client_policy_global(struct egs_client *c, json_t **policy);

/* ---- GPR templates and template bindings (docs/templates.md) ---- */
/* `binding` picks the kind: false = /api/v1/gpr-template (named by the template's name), true =
 * /api/v1/gpr-template-binding (named by its workspace).  Get: *obj receives the object (new
 * reference); EGS_ERR_NOT_FOUND when there is none.  List: *items receives the array (items or
 * templateBindings).  Put: POST (create) or PUT (replace) body as is, *obj (may be NULL) receives the
 * answer's data.  Delete: EGS_ERR_NOT_FOUND when there is none, EGS_ERR_CONFLICT for a template a
 * binding lists. */
enum egs_err egs_client_template_get(struct egs_client *c, bool binding, const char *name, json_t **obj);
enum egs_err egs_client_template_list(struct egs_client *c, bool binding, json_t **items);
enum egs_err egs_client_template_put(struct egs_client *c, bool binding, bool create, json_t *body, json_t **obj);
enum egs_err egs_client_template_delete(struct egs_client *c, bool binding, const char *name);

/* ---- GPU provision requests ---- */
/*
 * POST /api/v1/gpr.  On success copies the new gprId into id (EGS_CLIENT_ID_MAX bytes).  A request
 * no node could ever satisfy fails with EGS_ERR_UNSATISFIABLE and the reason in the message.
 */
enum egs_err egs_client_gpr_create(struct egs_client *c, json_t *request, char id[EGS_CLIENT_ID_MAX]);
/*
 * PUT /api/v1/gpr: changes (priority, gprName, other request fields) go into a copy that gains
 * "gprId": id.  Works while the GPR waits (Pending, Queued); else EGS_ERR_GPR_PROVISIONED or
 * EGS_ERR_GPR_FINISHED.
 */
enum egs_err egs_client_gpr_update(struct egs_client *c, const char *id, json_t *changes);
/* DELETE /api/v1/gpr: cancels a waiting GPR (EGS_ERR_GPR_PROVISIONED once it is provisioning). */
enum egs_err egs_client_gpr_cancel(struct egs_client *c, const char *id);
/* PUT /api/v1/gpr {earlyRelease: true}: releases a provisioned GPR before its exit time
 * (EGS_ERR_GPR_NOT_PROVISIONED while it still waits: cancel it; EGS_ERR_GPR_RELEASED once released). */
enum egs_err egs_client_gpr_release(struct egs_client *c, const char *id);
/* GET /api/v1/gpr?gprId=: the GPR with its status (EGS_ERR_NOT_FOUND when unknown or out of scope). */
enum egs_err egs_client_gpr_status(struct egs_client *c, const char *id, json_t **gpr);
/*
 * GET /api/v1/gpr/list: the GPRs of workspace (NULL = every workspace the caller sees), only those
 * whose provisioningStatus is status when status is not NULL.
 */
enum egs_err egs_client_gpr_list(struct egs_client *c, const char *workspace, const char *status, json_t **items);
/* POST /api/v1/gpr/waittime: {estimatedStartTime, estimatedWaitTime, items[] per cluster and shape}. */
enum egs_err egs_client_gpr_waittime(struct egs_client *c, json_t *request, json_t **answer);

/*
 * GET /api/v1/queue: {items, groups, queueLength}: the waiting GPRs the caller may see in queue order,
 * each with its global "position" (and "positionInGroup" among those wanting the same cluster and GPU
 * shape), then the Pending ones without a position.  Servers before the queue route answer
 * EGS_ERR_NOT_FOUND with errorKey ROUTE_NOT_FOUND.
 */
enum egs_err egs_client_queue(struct egs_client *c, json_t **answer);

/* ---- events ---- */
/* Filters of egs_client_events(); NULL members and limit 0 do not filter. */
struct egs_client_event_filter {
	const char *workspace;
	const char *gpr_id;
	const char *type;  /* "Normal" or "Warning" */
	const char *since; /* RFC 3339, or a duration back from now ("1h") */
	int limit;         /* 1..1000; 0 = the server's default (100) */
};
/* GET /api/v1/events: events of the caller's scope, newest first. */
enum egs_err egs_client_events(struct egs_client *c, const struct egs_client_event_filter *f, json_t **items);

/* ---- the audit log ---- */
/* Filters of egs_client_audit(); NULL members and limit 0 do not filter. */
struct egs_client_audit_filter {
	const char *since, *until; /* RFC 3339, or a duration back from now ("24h") */
	const char *actor;         /* an API key's id or name */
	const char *cont;          /* the previous page's continue token */
	int limit;                 /* 1..1000; 0 = the server's default (100) */
};
/* GET /api/v1/audit (admins without a project scope): *answer is the data, {items, continue}, oldest
 * first (caller decrefs). */
enum egs_err egs_client_audit(struct egs_client *c, const struct egs_client_audit_filter *f, json_t **answer);

#endif

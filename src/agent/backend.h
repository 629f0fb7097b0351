/*
 * backend.h: the cluster backend interface of egs-agent: how a node is attached to a slice workspace
 * for a GPR and detached again, and what is attached now.
 *
 * Backends: local (backend_local.c: a state file plus operator hooks), later kubernetes and slurm.
 * Contract every backend keeps, because the control plane derives actions again on every poll:
 *   - a node holds either one dedicated attachment or a set of shared ones (GPU sharing: each a GPR
 *     with its shares of the node's GPUs, in hundredths, never more than a whole GPU per device);
 *   - attach is idempotent: attaching a node to the GPR it is already attached to succeeds at once;
 *     attaching a node that holds another dedicated GPR, a dedicated GPR to a node holding shares, or
 *     shares that would over-commit a GPU fails with EGS_ERR_CONFLICT (detach comes first);
 *   - detach is idempotent: detaching a node that is not attached (or attached to another GPR) succeeds
 *     and changes nothing; detaching a shared GPR frees exactly its shares;
 *   - what is attached survives an agent restart (it is reported as attachedGpr at registration);
 *   - EGS_ERR_BUSY from attach or detach means "cannot act now": what the backend drives does not
 *     answer (the kubernetes backend's API server is down).  The agent then does not report the
 *     action (a failure would quarantine a good node); egsd sends it again on a later poll.
 * attach/detach calls are serialised by the backend; egs_backend_attached_gpr() and
 * egs_backend_list() may be called from another thread at the same time and never wait for a hook.
 */
#ifndef EGS_AGENT_BACKEND_H
#define EGS_AGENT_BACKEND_H

#include "core/common.h"
#include "core/model.h"

#include <jansson.h>

/* What an attach action asks for.  All borrowed. */
struct egs_attach_req {
	const char *node;
	const char *gpr_id;
	const char *workspace;
	const struct egs_strlist *namespaces;
	const char *start_time; /* RFC 3339, or "" */
	const char *exit_time;  /* RFC 3339, or "" */
	const struct egs_gpu_share *shares; /* a shared GPR's shares of the node's GPUs; NULL: dedicated */
	size_t n_shares;
};

/* One current attachment (a copy: every string owned). */
struct egs_attachment {
	char *node;
	char *gpr_id;
	char *workspace;
	struct egs_strlist namespaces;
	char *start_time;
	char *exit_time;
	char *attached_at; /* RFC 3339, when this agent attached it */
	struct egs_gpu_share *shares; /* a shared attachment's shares (owned); NULL when dedicated */
	size_t n_shares;
};

/* What a `sliceAccess` action asks for (docs/internals/agent-protocol.md section 5).  All borrowed. */
struct egs_slice_req {
	const char *workspace;
	const struct egs_strlist *namespaces; /* at least one; the ServiceAccount lives in the first */
	const char *service_account;
	int64_t generation; /* >= 1 */
	int64_t ttl_s;      /* the token lifetime asked for (the cluster may grant less) */
};

/* A minted slice token: token is owned (caller wipes and frees it); expires_at RFC 3339. */
struct egs_slice_token {
	char *token;
	char expires_at[40];
};

/* Polled while a backend waits on something slow (a hook); true interrupts it. */
typedef bool (*egs_backend_stop_fn)(void *arg);

struct egs_backend;

struct egs_backend_ops {
	const char *name;
	bool dedicated_only; /* never holds shared attachments: egs_backend_shared_gprs() lists nothing
			      * without walking every attachment (it runs per node per heartbeat) */
	enum egs_err (*attach)(struct egs_backend *b, const struct egs_attach_req *req, char *msg,
			       size_t msgsz);
	enum egs_err (*detach)(struct egs_backend *b, const char *node, const char *gpr_id, char *msg,
			       size_t msgsz);
	bool (*attached_gpr)(struct egs_backend *b, const char *node, char *gpr, size_t gprsz);
	void (*list)(struct egs_backend *b, struct egs_attachment **out, size_t *n);
	void (*free)(struct egs_backend *b);
	/* Slice access (optional; NULL in backends that cannot mint cluster tokens, which then do not
	 * advertise "sliceAccess"): see egs_backend_slice_access() and the two below. */
	enum egs_err (*slice_access)(struct egs_backend *b, const struct egs_slice_req *req,
				     struct egs_slice_token *tok, char *msg, size_t msgsz);
	enum egs_err (*slice_release)(struct egs_backend *b, const char *workspace, const char *ns,
				      const char *service_account, char *msg, size_t msgsz);
	json_t *(*slice_state)(struct egs_backend *b);
};

/* The common part of every backend (its first member). */
struct egs_backend {
	const struct egs_backend_ops *ops;
	egs_backend_stop_fn stop;
	void *stop_arg;
};

/*
 * Attaches req->node to req->gpr_id in req->workspace.  Returns EGS_OK (msg: "attached" or "already
 * attached"), EGS_ERR_CONFLICT when the node holds another GPR, EGS_ERR_IO when the backend failed
 * (msg: why, e.g. the hook's last output line).  msg has msgsz bytes and is always set.
 */
enum egs_err egs_backend_attach(struct egs_backend *b, const struct egs_attach_req *req, char *msg,
				size_t msgsz);

/*
 * Detaches node from gpr_id, dedicated or shared (NULL or "": from the dedicated GPR it holds, if any).  Returns EGS_OK (msg: "detached" or
 * "not attached"), or EGS_ERR_IO when the backend failed (msg: why; the node stays attached).
 */
enum egs_err egs_backend_detach(struct egs_backend *b, const char *node, const char *gpr_id, char *msg,
				size_t msgsz);

/* Copies the GPR id node is attached to into gpr (gprsz bytes) and returns true; "" and false when
 * the node is not attached. */
bool egs_backend_attached_gpr(struct egs_backend *b, const char *node, char *gpr, size_t gprsz);

/* Appends to out the GPR ids of node's shared attachments (caller cleans out up). */
void egs_backend_shared_gprs(struct egs_backend *b, const char *node, struct egs_strlist *out);

/* Stores a copy of every current attachment in *out (caller frees with egs_attachments_free()) and
 * their number in *n. */
void egs_backend_list(struct egs_backend *b, struct egs_attachment **out, size_t *n);

/* Frees n attachments returned by egs_backend_list(). */
void egs_attachments_free(struct egs_attachment *a, size_t n);

/* True when the backend sets up slice access (it has the three slice operations). */
bool egs_backend_has_slices(const struct egs_backend *b);

/*
 * Sets up slice access for req and mints a token (the slice's namespaces, ServiceAccount and
 * RoleBindings, per docs/internals/agent-protocol.md section 5) into *tok.  Returns EGS_OK (tok set),
 * EGS_ERR_CONFLICT (a namespace belongs to another slice), EGS_ERR_BUSY (cannot act now: do not report),
 * or another code with msg saying why.  Only for a backend with egs_backend_has_slices().
 */
enum egs_err egs_backend_slice_access(struct egs_backend *b, const struct egs_slice_req *req,
				      struct egs_slice_token *tok, char *msg, size_t msgsz);

/*
 * Takes namespace ns out of slice workspace: deletes it when the backend created it, else removes the
 * slice's label, its RoleBinding and the ServiceAccount service_account there.  Idempotent (a namespace
 * gone or no longer the slice's is EGS_OK).  EGS_ERR_BUSY: cannot act now.  msg always set.
 */
enum egs_err egs_backend_slice_release(struct egs_backend *b, const char *workspace, const char *ns,
				       const char *service_account, char *msg, size_t msgsz);

/*
 * The slice namespaces the backend set up, as the JSON list of POST /api/v1/agent/slice-namespaces
 * ([{"name", "workspace", "createdByAgent", "runningPods"}], caller decrefs), or NULL when it cannot
 * tell now (the cluster does not answer).
 */
json_t *egs_backend_slice_state(struct egs_backend *b);

/* Installs the interruption check of slow operations (fn may be NULL); arg is borrowed. */
void egs_backend_set_stop(struct egs_backend *b, egs_backend_stop_fn fn, void *arg);

/* Frees the backend (what is attached stays attached).  egs_backend_free(NULL) is a no-op. */
void egs_backend_free(struct egs_backend *b);

/* The local backend; see docs/internals/agent-protocol.md, "The local backend". */
struct egs_backend_local_config {
	const char *state_dir; /* created (mode 0700) when missing */
	const char *cluster;
	const char *on_attach; /* shell command, or NULL */
	const char *on_detach; /* shell command, or NULL */
	int hook_timeout_s;    /* 0: no limit */
};

/*
 * Opens the local backend: creates cfg->state_dir, takes its lock (one agent per state directory) and
 * loads <state_dir>/attach-state.json when present.  cfg's strings are copied.  On success stores the
 * backend in *out (caller frees with egs_backend_free()).  Fails with EGS_ERR_IO (directory, lock or
 * file unusable, another agent holds the lock) or EGS_ERR_INVALID (the state file is corrupt or
 * belongs to another cluster), writing why into err (errsz bytes).
 */
enum egs_err egs_backend_local_new(const struct egs_backend_local_config *cfg, struct egs_backend **out,
				   char *err, size_t errsz);

#endif

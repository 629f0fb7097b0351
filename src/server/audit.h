/*
 * audit.h: the audit log of the user-facing API's writes (issue 14 item 8).
 *
 * Every POST, PUT, PATCH and DELETE under /api/v1/ answered to an authenticated admin, owner or
 * viewer is recorded once, by the dispatcher's reply path (http.c) after the handler answered: who
 * (the API key's id, name and role; never the key), what (method, route, the object it named,
 * status and errorKey), when, and from where (the peer address of the connection; X-Forwarded-For is
 * not read, egsd has no trusted-proxy setting).  Denied and invalid writes (4xx) are recorded too;
 * request bodies never are.  Not recorded: agent routes (/api/v1/agent/..., every few seconds per
 * node), writes that change nothing and only compute (POST /api/v1/gpr/waittime), the dev clock, and
 * requests that never authenticated (401: no actor; the access log has them).
 *
 * An entry joins the turn's group commit (egs_state_audit), so the reply waits for it like for any
 * change: an answered write is in the log.  A turn whose commit fails (507/503) leaves no entry, as
 * it leaves nothing else.  Admins without a project scope read it with GET /api/v1/audit; entries
 * older than --audit-retention days (default 90) are pruned once a minute.
 */
#ifndef EGS_AUDIT_H
#define EGS_AUDIT_H

#include "server/server.h"

/* Called with every envelope reply before it is sent or held: records r when it is an audited write
 * (status and env, the reply's envelope, borrowed). */
void egs_audit_answer(struct egs_req *r, int status, json_t *env);
/* The same for a success whose envelope is not built as JSON (egs_reply_ok_str): target is the
 * object it named (borrowed). */
void egs_audit_answer_target(struct egs_req *r, int status, const char *target);
/* At start, after the load: continues the ids after the largest stored one. */
enum egs_err egs_audit_start(struct egs_server *srv);
/* Once a minute between turns: deletes entries older than the retention. */
void egs_audit_prune(struct egs_server *srv, int64_t now);

#endif

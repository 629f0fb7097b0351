/*
 * backend.c: the backend-independent part of the cluster backend interface: dispatch and the
 * attachment copies.
 */
#include "agent/backend.h"

#include <stdlib.h>
#include <string.h>

enum egs_err egs_backend_attach(struct egs_backend *b, const struct egs_attach_req *req, char *msg,
				size_t msgsz)
{
	EGS_ASSERT(req->node && req->gpr_id && req->workspace && req->namespaces);
	msg[0] = '\0';
	return b->ops->attach(b, req, msg, msgsz);
}

bool egs_backend_has_slices(const struct egs_backend *b)
{
	return b->ops->slice_access && b->ops->slice_release && b->ops->slice_state;
}

enum egs_err egs_backend_slice_access(struct egs_backend *b, const struct egs_slice_req *req,
				      struct egs_slice_token *tok, char *msg, size_t msgsz)
{
	EGS_ASSERT(egs_backend_has_slices(b) && req->workspace && req->namespaces && req->namespaces->n > 0 &&
		   req->service_account);
	memset(tok, 0, sizeof(*tok));
	msg[0] = '\0';
	return b->ops->slice_access(b, req, tok, msg, msgsz);
}

enum egs_err egs_backend_slice_release(struct egs_backend *b, const char *workspace, const char *ns,
				       const char *service_account, char *msg, size_t msgsz)
{
	EGS_ASSERT(egs_backend_has_slices(b) && workspace && ns && service_account);
	msg[0] = '\0';
	return b->ops->slice_release(b, workspace, ns, service_account, msg, msgsz);
}

json_t *egs_backend_slice_state(struct egs_backend *b)
{
	EGS_ASSERT(egs_backend_has_slices(b));
	return b->ops->slice_state(b);
}

enum egs_err egs_backend_detach(struct egs_backend *b, const char *node, const char *gpr_id, char *msg,
				size_t msgsz)
{
	EGS_ASSERT(node);
	msg[0] = '\0';
	return b->ops->detach(b, node, gpr_id, msg, msgsz);
}

bool egs_backend_attached_gpr(struct egs_backend *b, const char *node, char *gpr, size_t gprsz)
{
	return b->ops->attached_gpr(b, node, gpr, gprsz);
}

void egs_backend_list(struct egs_backend *b, struct egs_attachment **out, size_t *n)
{
	b->ops->list(b, out, n);
}

void egs_backend_shared_gprs(struct egs_backend *b, const char *node, struct egs_strlist *out)
{
	struct egs_attachment *atts;
	size_t n;
	if (b->ops->dedicated_only)
		return;
	egs_backend_list(b, &atts, &n);
	for (size_t i = 0; i < n; i++)
		if (atts[i].shares && strcmp(atts[i].node, node) == 0)
			egs_strlist_add(out, atts[i].gpr_id);
	egs_attachments_free(atts, n);
}

void egs_attachments_free(struct egs_attachment *a, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		egs_free(a[i].shares);
		egs_free(a[i].node);
		egs_free(a[i].gpr_id);
		egs_free(a[i].workspace);
		egs_strlist_cleanup(&a[i].namespaces);
		egs_free(a[i].start_time);
		egs_free(a[i].exit_time);
		egs_free(a[i].attached_at);
	}
	egs_free(a);
}

void egs_backend_set_stop(struct egs_backend *b, egs_backend_stop_fn fn, void *arg)
{
	b->stop = fn;
	b->stop_arg = arg;
}

void egs_backend_free(struct egs_backend *b)
{
	if (b)
		b->ops->free(b);
}

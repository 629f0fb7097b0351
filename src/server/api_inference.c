/*
 * api_inference.c: the public SDK's inference endpoint routes (/api/v1/inference-endpoint...).
 *
 * Inference endpoints are model servers deployed into a workspace's namespace; serving them needs the
 * Kubernetes backend, which this egsd does not run yet.  Until it does, each route exists, checks the
 * caller's role like the real one will, and answers 501 NOT_IMPLEMENTED in the envelope, so a client
 * learns why instead of meeting a missing route (404 ROUTE_NOT_FOUND).  Nothing is stored.
 */
#include "server/server.h"

static void not_served(struct egs_req *r, unsigned roles)
{
	if (!egs_require_role(r, roles))
		return;
	egs_reply_err(r, EGS_ERR_NOT_IMPLEMENTED, NULL, NULL,
		      "inference endpoints need the Kubernetes backend, which this egsd does not run yet");
}

static void endpoint_read(struct egs_req *r)
{
	not_served(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER));
}

static void endpoint_write(struct egs_req *r)
{
	not_served(r, EGS_R(ADMIN) | EGS_R(OWNER));
}

const struct egs_route egs_routes_inference[] = {
	{ EVHTTP_REQ_GET, "/api/v1/inference-endpoint/list", endpoint_read, false },
	{ EVHTTP_REQ_GET, "/api/v1/inference-endpoint", endpoint_read, false },
	{ EVHTTP_REQ_POST, "/api/v1/inference-endpoint", endpoint_write, false },
	{ EVHTTP_REQ_DELETE, "/api/v1/inference-endpoint", endpoint_write, false },
	{ 0, NULL, NULL, false },
};

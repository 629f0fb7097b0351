/*
 * api_agent_infer.c: the inference endpoints of a cluster, for its agent (inference.h; the agent side is
 * src/agent/k8s_infer.c; docs/internals/agent-protocol.md, section 7).
 *
 *   GET  /api/v1/agent/inference-endpoints  {items: [{id, namespace, endpointName, want, objects, observed}]}
 *   POST /api/v1/agent/inference-endpoints  {id, present, ready, readyReplicas, replicas, message}
 *
 * want is "present" while the objects should run (the GPR is Provisioned, or the endpoint has none) and
 * "absent" otherwise.  An endpoint is listed while it is wanted, and after that until the agent reports
 * its objects gone ("offered": set when it is first listed as present, cleared by that report), so that
 * nothing the agent may have created is forgotten.  A deleted endpoint leaves the store at that report.
 * Agent role only; an agent sees and reports only its own cluster's endpoints.
 */
#include "server/inference.h"
#include "server/template.h"

#include "core/util.h"

#include <stdlib.h>
#include <string.h>

#define MESSAGE_MAX 400

static const char *str_at(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

/* Writes spec (taken) into d and marks it for the store. */
static void put(struct egs_req *r, struct egs_doc *d, json_t *spec)
{
	free(d->spec);
	d->spec = egs_doc_dump(spec);
	d->updated_at = egs_now(r->srv);
	json_decref(spec);
	egs_state_touch(&r->srv->st, EGS_KIND_ENDPOINT, d);
}

static void agent_infer_list(struct egs_req *r)
{
	struct egs_state *st = &r->srv->st;
	json_t *items;
	const char *k;
	void *v;

	if (!egs_require_role(r, EGS_R(AGENT)))
		return;
	items = json_array();
	for (size_t i = 0; egs_map_next(&st->endpoints, &i, &k, &v);) {
		json_t *s = egs_doc_spec(v);
		bool want = egs_infer_wanted(st, s);
		if (!strcmp(str_at(s, "cluster"), r->who.cluster) && (want || json_is_true(json_object_get(s, "offered")))) {
			json_array_append_new(items, json_pack("{s:s, s:s, s:s, s:s, s:O, s:O}", "id", k, "namespace",
							       str_at(s, "namespace"), "endpointName",
							       str_at(s, "endpointName"), "want", want ? "present" : "absent",
							       "objects", json_object_get(s, "objects"), "observed",
							       json_object_get(s, "observed")));
			if (want && !json_is_true(json_object_get(s, "offered"))) {
				json_object_set_new(s, "offered", json_true());
				put(r, v, json_incref(s));
			}
		}
		json_decref(s);
	}
	egs_reply_ok(r, json_pack("{s:o}", "items", items));
}

static void agent_infer_report(struct egs_req *r)
{
	static const char *const fields[] = { "id", "present", "ready", "readyReplicas", "replicas", "message", NULL };
	char id[EGS_ID_MAX], msg[MESSAGE_MAX] = "";
	bool present = false, ready = false;
	int64_t nready = 0, n = 0;
	struct egs_doc *d;
	json_t *s = NULL, *obs;

	if (!egs_require_role(r, EGS_R(AGENT)) || !egs_body_required(r) || !egs_body_only(r, fields) ||
	    !egs_get_str(r, r->body, "id", true, id, sizeof(id)) || !egs_get_bool(r, r->body, "present", &present, NULL) ||
	    !egs_get_bool(r, r->body, "ready", &ready, NULL) ||
	    !egs_get_int(r, r->body, "readyReplicas", false, 0, 100000, &nready, NULL) ||
	    !egs_get_int(r, r->body, "replicas", false, 0, 100000, &n, NULL) ||
	    !egs_get_str(r, r->body, "message", false, msg, sizeof(msg)))
		return;
	d = egs_state_doc(&r->srv->st, EGS_KIND_ENDPOINT, id);
	if (d)
		s = egs_doc_spec(d);
	if (!d || strcmp(str_at(s, "cluster"), r->who.cluster) != 0) {
		json_decref(s);
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "ENDPOINT_NOT_FOUND", "id", "no inference endpoint %s on cluster %s", id,
			      r->who.cluster);
		return;
	}
	if (!present && !egs_infer_wanted(&r->srv->st, s) && json_is_true(json_object_get(s, "deleting"))) {
		json_decref(s);
		egs_state_del(&r->srv->st, EGS_KIND_ENDPOINT, d); /* its objects are gone: so is it */
		egs_reply_ok(r, json_pack("{s:s}", "id", id));
		return;
	}
	obs = json_pack("{s:b, s:b, s:I, s:I, s:s}", "present", present, "ready", present && ready, "readyReplicas",
			(json_int_t)nready, "replicas", (json_int_t)n, "message", msg);
	bool settled = !present && !egs_infer_wanted(&r->srv->st, s) && json_is_true(json_object_get(s, "offered"));
	if (!json_equal(obs, json_object_get(s, "observed")) || settled) {
		json_object_set_new(s, "observed", obs);
		if (settled)
			json_object_set_new(s, "offered", json_false());
		put(r, d, s);
	} else {
		json_decref(obs);
		json_decref(s);
	}
	egs_reply_ok(r, json_pack("{s:s}", "id", id));
}

const struct egs_route egs_routes_agent_infer[] = {
	{ EVHTTP_REQ_GET, "/api/v1/agent/inference-endpoints", agent_infer_list, false },
	{ EVHTTP_REQ_POST, "/api/v1/agent/inference-endpoints", agent_infer_report, false },
	{ 0, NULL, NULL, false },
};

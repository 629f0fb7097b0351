/*
 * k8s_infer.c: the inference endpoint controller (k8s_infer.h).  No cache: an endpoint has a handful of
 * objects, each read with one GET per round, so what the round sees is the API server's present state.
 * Only the kinds egsd may render (src/server/infer_render.c) have a path here; any other is reported as
 * a failure, so egsd cannot make the agent write anything else.
 */
#include "agent/k8s_infer.h"

#include "agent/k8s_internal.h"
#include "agent/log.h"
#include "core/util.h"

#include <egs/egs.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define CALL_TIMEOUT_S 10
#define INFER_LABEL "egs.kubeslice.io/inference-endpoint"

struct egs_infer {
	struct egs_k8s *k;
	struct egs_client *egs;
	int interval_ms;
	pthread_t thread;
	bool started;
	atomic_bool closing;
};

/* What a round saw of one endpoint's objects. */
struct seen {
	bool io;               /* the API server did not answer: report nothing this round */
	int ready, replicas;   /* over its workloads */
	char message[400];     /* a failure, "" when none */
};

static const struct {
	const char *api_version, *kind, *prefix, *resource;
	bool workload;
} kinds[] = {
	{ "apps/v1", "Deployment", "/apis/apps/v1", "deployments", true },
	{ "apps/v1", "StatefulSet", "/apis/apps/v1", "statefulsets", true },
	{ "v1", "Service", "/api/v1", "services", false },
	{ "v1", "ConfigMap", "/api/v1", "configmaps", false },
};

static bool closing(void *arg)
{
	return atomic_load(&((struct egs_infer *)arg)->closing);
}

static const char *str_at(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

/* The collection path of obj in ns into out (and its kind's index), or -1 for a kind we do not write. */
static int collection(json_t *obj, const char *ns, char *out, size_t outsz)
{
	char esc[200];
	for (int i = 0; i < (int)EGS_ARRAY_LEN(kinds); i++) {
		if (strcmp(kinds[i].api_version, str_at(obj, "apiVersion")) || strcmp(kinds[i].kind, str_at(obj, "kind")))
			continue;
		if (!egs_kube_escape(ns, esc, sizeof(esc)))
			return -1;
		int n = snprintf(out, outsz, "%s/namespaces/%s/%s", kinds[i].prefix, esc, kinds[i].resource);
		return n > 0 && (size_t)n < outsz ? i : -1;
	}
	return -1;
}

/* Whether obj (an API server answer) is endpoint's. */
static bool ours(json_t *obj, const char *endpoint)
{
	return !strcmp(str_at(json_object_get(json_object_get(obj, "metadata"), "labels"), INFER_LABEL), endpoint);
}

/* Adds obj's readiness (kind i) to s. */
static void count_ready(struct seen *s, int i, json_t *obj)
{
	json_t *st = json_object_get(obj, "status");
	if (kinds[i].workload) {
		json_t *want = json_object_get(json_object_get(obj, "spec"), "replicas");
		s->replicas += want ? (int)json_integer_value(want) : 1;
		s->ready += (int)json_integer_value(json_object_get(st, "readyReplicas"));
	}
}

/* GET (into *out) and the result: EGS_OK, EGS_ERR_NOT_FOUND, or another code with msg. */
static enum egs_err get(struct egs_infer *c, const char *path, json_t **out, char *msg, size_t msgsz)
{
	long status;
	*out = NULL;
	return egs_kube_call(c->k->kube, "GET", path, NULL, NULL, c->k->api_timeout_s, &status, out, msg, msgsz);
}

/* Creates the objects of item that are missing and reads the readiness of all. */
static void apply(struct egs_infer *c, json_t *item, struct seen *s)
{
	const char *ns = str_at(item, "namespace"), *ep = str_at(item, "endpointName");
	json_t *obj, *have;
	size_t j;
	char coll[400], path[700], esc[300], msg[300];

	json_array_foreach(json_object_get(item, "objects"), j, obj) {
		const char *name = str_at(json_object_get(obj, "metadata"), "name");
		int i = collection(obj, ns, coll, sizeof(coll));
		if (i < 0 || !egs_kube_escape(name, esc, sizeof(esc))) {
			snprintf(s->message, sizeof(s->message), "%s %s: not a kind the agent creates", str_at(obj, "kind"), name);
			return;
		}
		snprintf(path, sizeof(path), "%s/%s", coll, esc);
		enum egs_err rc = get(c, path, &have, msg, sizeof(msg));
		if (rc == EGS_ERR_NOT_FOUND) {
			long status;
			json_decref(have);
			have = NULL;
			rc = egs_kube_call(c->k->kube, "POST", coll, NULL, obj, c->k->api_timeout_s, &status, &have, msg,
					   sizeof(msg));
			if (rc == EGS_OK)
				EGS_LOG_INFO("inference endpoint %s/%s: created %s %s", ns, ep, kinds[i].kind, name);
		}
		if (rc == EGS_OK && !ours(have, ep))
			snprintf(s->message, sizeof(s->message), "%s %s exists in %s and is not this endpoint's",
				 kinds[i].kind, name, ns);
		else if (rc == EGS_OK)
			count_ready(s, i, have);
		else if (rc == EGS_ERR_IO)
			s->io = true;
		else
			snprintf(s->message, sizeof(s->message), "%s %s: %s", kinds[i].kind, name, msg);
		json_decref(have);
		if (s->io || *s->message)
			return;
	}
}

/* Deletes the objects of item that exist and are the endpoint's; true when none is left. */
static bool remove_all(struct egs_infer *c, json_t *item, struct seen *s)
{
	const char *ns = str_at(item, "namespace"), *ep = str_at(item, "endpointName");
	json_t *objs = json_object_get(item, "objects"), *have;
	char coll[400], path[700], esc[300], msg[300];
	bool gone = true;

	for (size_t j = json_array_size(objs); j-- > 0;) {
		json_t *obj = json_array_get(objs, j);
		const char *name = str_at(json_object_get(obj, "metadata"), "name");
		int i = collection(obj, ns, coll, sizeof(coll));
		long status;
		if (i < 0 || !egs_kube_escape(name, esc, sizeof(esc)))
			continue; /* never created */
		snprintf(path, sizeof(path), "%s/%s", coll, esc);
		enum egs_err rc = get(c, path, &have, msg, sizeof(msg));
		bool mine = rc == EGS_OK && ours(have, ep);
		json_decref(have);
		if (rc == EGS_ERR_IO) {
			s->io = true;
			return false;
		}
		if (!mine)
			continue; /* gone, or someone else's */
		rc = egs_kube_call(c->k->kube, "DELETE", path, NULL, NULL, c->k->api_timeout_s, &status, NULL, msg, sizeof(msg));
		if (rc == EGS_OK)
			EGS_LOG_INFO("inference endpoint %s/%s: deleted %s %s", ns, ep, kinds[i].kind, name);
		else if (rc != EGS_ERR_NOT_FOUND)
			EGS_LOG_WARN("inference endpoint %s/%s: cannot delete %s %s: %s", ns, ep, kinds[i].kind, name, msg);
		if (rc == EGS_ERR_IO)
			s->io = true;
		gone = false; /* the next round sees it gone */
	}
	return gone;
}

static void report(struct egs_infer *c, json_t *item, bool present, const struct seen *s)
{
	bool ready = present && !*s->message && s->ready >= s->replicas;
	json_t *body = json_pack("{s:s, s:b, s:b, s:i, s:i, s:s}", "id", str_at(item, "id"), "present", present, "ready",
				 ready, "readyReplicas", s->ready, "replicas", s->replicas, "message", s->message);
	json_t *obs = json_object_get(item, "observed"), *data = NULL;
	bool same = obs && json_is_true(json_object_get(obs, "present")) == present &&
		    json_is_true(json_object_get(obs, "ready")) == ready &&
		    json_integer_value(json_object_get(obs, "readyReplicas")) == s->ready &&
		    json_integer_value(json_object_get(obs, "replicas")) == s->replicas &&
		    !strcmp(str_at(obs, "message"), s->message);

	if ((!same || !present) &&
	    egs_client_call(c->egs, "POST", "/api/v1/agent/inference-endpoints", body, CALL_TIMEOUT_S, NULL, &data) != EGS_OK)
		EGS_LOG_DEBUG("inference endpoint %s: egsd: %s", str_at(item, "endpointName"), egs_client_errmsg(c->egs));
	json_decref(body);
	json_decref(data);
}

static void round_once(struct egs_infer *c)
{
	json_t *data = NULL, *item;
	size_t i;

	if (egs_client_call(c->egs, "GET", "/api/v1/agent/inference-endpoints", NULL, CALL_TIMEOUT_S, NULL, &data) !=
	    EGS_OK) {
		EGS_LOG_DEBUG("inference endpoints: egsd: %s", egs_client_errmsg(c->egs));
		goto out;
	}
	json_array_foreach(json_object_get(data, "items"), i, item) {
		struct seen s = { 0 };
		if (closing(c))
			break;
		if (!strcmp(str_at(item, "want"), "present")) {
			apply(c, item, &s);
			if (!s.io)
				report(c, item, true, &s);
		} else if (remove_all(c, item, &s) && !s.io) {
			report(c, item, false, &s);
		}
	}
out:
	json_decref(data);
}

static void *infer_main(void *arg)
{
	struct egs_infer *c = arg;

	while (!closing(c)) {
		round_once(c);
		for (int waited = 0; waited < c->interval_ms && !closing(c); waited += 100) {
			struct timespec ts = { 0, 100 * 1000000L };
			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

enum egs_err egs_infer_start(const struct egs_infer_config *cfg, struct egs_infer **out, char *err, size_t errsz)
{
	struct egs_infer *c = egs_calloc(1, sizeof(*c));

	*out = NULL;
	c->k = (struct egs_k8s *)cfg->backend;
	c->interval_ms = cfg->interval_ms > 0 ? cfg->interval_ms : 1000;
	c->egs = egs_client_new(cfg->server_url, cfg->token);
	if (!c->egs || (cfg->ca_file && egs_client_set_ca_file(c->egs, cfg->ca_file) != EGS_OK)) {
		snprintf(err, errsz, "inference endpoints: --server or --ca-file is not usable");
		egs_infer_free(c);
		return EGS_ERR_INVALID;
	}
	egs_client_set_abort(c->egs, closing, c);
	if (pthread_create(&c->thread, NULL, infer_main, c) != 0) {
		snprintf(err, errsz, "inference endpoints: cannot start the controller's thread");
		egs_infer_free(c);
		return EGS_ERR_IO;
	}
	c->started = true;
	*out = c;
	return EGS_OK;
}

void egs_infer_free(struct egs_infer *c)
{
	if (!c)
		return;
	atomic_store(&c->closing, true);
	if (c->started)
		pthread_join(c->thread, NULL);
	egs_client_free(c->egs);
	egs_free(c);
}

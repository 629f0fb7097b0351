/*
 * webhook.c: the admission webhook (webhook.h): the review (pure) and its HTTPS server (libevent's
 * evhttp over OpenSSL bufferevents, one thread with its own event base).
 *
 * The mutation is a JSON Patch that adds only what is missing, so a reinvoked webhook or a pod that
 * already carries the toleration and affinity is left as it is.  The node affinity is ANDed into every
 * existing nodeSelectorTerm (terms are ORed by Kubernetes, so adding a term would widen the pod's
 * choice instead of narrowing it).
 */
#include "agent/webhook.h"

#include "agent/k8s_node.h"
#include "agent/log.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/thread.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#define REVIEW_MAX (3 * 1024 * 1024) /* the API server's own request limit */
#define AFFINITY_PATH "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"

/* ---- the review ---- */

static json_t *toleration(void)
{
	return json_pack("{s:s, s:s, s:s, s:s}", "key", EGS_K8S_TAINT_KEY, "operator", "Equal", "value",
			 EGS_K8S_TAINT_VALUE, "effect", "NoSchedule");
}

static json_t *expression(const char *ws)
{
	return json_pack("{s:s, s:s, s:[s]}", "key", EGS_K8S_LABEL_SLICE, "operator", "In", "values", ws);
}

static void op_add(json_t *ops, const char *path, json_t *value)
{
	json_array_append_new(ops, json_pack("{s:s, s:s, s:o}", "op", "add", "path", path, "value", value));
}

/* Does a nodeSelectorTerm already hold our expression? */
static bool term_has(json_t *term)
{
	json_t *e;
	size_t i;
	json_array_foreach(json_object_get(term, "matchExpressions"), i, e) {
		const char *k = json_string_value(json_object_get(e, "key"));
		if (k && strcmp(k, EGS_K8S_LABEL_SLICE) == 0)
			return true;
	}
	return false;
}

/* The operations that give pod the node affinity to workspace ws. */
static void affinity_ops(json_t *pod, const char *ws, json_t *ops)
{
	json_t *aff = json_object_get(json_object_get(pod, "spec"), "affinity");
	json_t *na = json_object_get(aff, "nodeAffinity");
	json_t *req = json_object_get(na, "requiredDuringSchedulingIgnoredDuringExecution");
	json_t *terms = json_object_get(req, "nodeSelectorTerms"), *t;
	json_t *one = json_pack("{s:[{s:[o]}]}", "nodeSelectorTerms", "matchExpressions", expression(ws));
	char path[256];
	size_t i;

	if (!json_is_object(aff)) {
		op_add(ops, "/spec/affinity", json_pack("{s:{s:o}}", "nodeAffinity",
							"requiredDuringSchedulingIgnoredDuringExecution", one));
	} else if (!json_is_object(na)) {
		op_add(ops, "/spec/affinity/nodeAffinity", json_pack("{s:o}", "requiredDuringSchedulingIgnoredDuringExecution", one));
	} else if (!json_is_object(req) || !json_array_size(terms)) {
		op_add(ops, AFFINITY_PATH, one);
	} else {
		json_decref(one);
		json_array_foreach(terms, i, t) {
			if (term_has(t))
				continue;
			if (json_is_array(json_object_get(t, "matchExpressions"))) {
				snprintf(path, sizeof(path), AFFINITY_PATH "/nodeSelectorTerms/%zu/matchExpressions/-", i);
				op_add(ops, path, expression(ws));
			} else {
				snprintf(path, sizeof(path), AFFINITY_PATH "/nodeSelectorTerms/%zu/matchExpressions", i);
				op_add(ops, path, json_pack("[o]", expression(ws)));
			}
		}
	}
}

/* The JSON Patch operations for a GPU pod of slice ws (an empty array when it has everything). */
static json_t *mutation(json_t *pod, const char *ws)
{
	json_t *ops = json_array();
	json_t *tols = json_object_get(json_object_get(pod, "spec"), "tolerations");

	if (!egs_k8s_pod_tolerates_egs(pod)) {
		if (json_is_array(tols))
			op_add(ops, "/spec/tolerations/-", toleration());
		else
			op_add(ops, "/spec/tolerations", json_pack("[o]", toleration()));
	}
	affinity_ops(pod, ws, ops);
	return ops;
}

static void set_patch(json_t *resp, json_t *ops)
{
	char *text = json_dumps(ops, JSON_COMPACT);
	size_t n = strlen(text), b64sz = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
	char *b64 = egs_malloc(b64sz);

	sodium_bin2base64(b64, b64sz, (const unsigned char *)text, n, sodium_base64_VARIANT_ORIGINAL);
	json_object_set_new(resp, "patchType", json_string("JSONPatch"));
	json_object_set_new(resp, "patch", json_string(b64));
	egs_free(b64);
	free(text);
}

json_t *egs_webhook_review(const char *path, json_t *review, egs_webhook_slice_fn slice, void *arg)
{
	json_t *req = json_object_get(review, "request"), *pod = json_object_get(req, "object"), *resp;
	const char *uid = json_string_value(json_object_get(req, "uid"));
	const char *res = json_string_value(json_object_get(json_object_get(req, "resource"), "resource"));
	const char *sub = json_string_value(json_object_get(req, "subResource"));
	const char *op = json_string_value(json_object_get(req, "operation"));
	const char *ns = json_string_value(json_object_get(req, "namespace"));
	char ws[EGS_NAME_MAX] = "";
	bool in_slice, is_pod;

	if (!uid)
		return NULL;
	resp = json_pack("{s:s, s:b}", "uid", uid, "allowed", 1);
	is_pod = res && strcmp(res, "pods") == 0 && (!sub || !*sub) && json_is_object(pod) && ns && op &&
		 (strcmp(op, "CREATE") == 0 || strcmp(op, "UPDATE") == 0);
	in_slice = is_pod && slice(arg, ns, ws, sizeof(ws));
	if (is_pod && strcmp(path, "/mutate") == 0 && in_slice && strcmp(op, "CREATE") == 0 &&
	    egs_k8s_pod_gpus(pod) > 0) {
		json_t *ops = mutation(pod, ws);
		if (json_array_size(ops))
			set_patch(resp, ops);
		json_decref(ops);
	} else if (is_pod && strcmp(path, "/validate") == 0 && !in_slice && egs_k8s_pod_tolerates_egs(pod)) {
		char msg[400];
		snprintf(msg, sizeof(msg), "pods outside slice namespaces may not tolerate %s: its nodes are "
					   "dedicated to slices; request GPUs through a GPR", EGS_K8S_TAINT_KEY);
		json_object_set_new(resp, "allowed", json_false());
		json_object_set_new(resp, "status", json_pack("{s:i, s:s, s:s}", "code", 403, "reason", "Forbidden",
							      "message", msg));
	}
	return json_pack("{s:s, s:s, s:o}", "apiVersion", "admission.k8s.io/v1", "kind", "AdmissionReview", "response",
			 resp);
}

json_t *egs_webhook_configuration(bool mutating, const char *url_base, const char *ca_pem)
{
	size_t n = strlen(ca_pem), b64sz = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
	char *b64 = egs_malloc(b64sz), url[512];
	json_t *sel, *c;

	sodium_bin2base64(b64, b64sz, (const unsigned char *)ca_pem, n, sodium_base64_VARIANT_ORIGINAL);
	snprintf(url, sizeof(url), "%s/%s", url_base, mutating ? "mutate" : "validate");
	/* Mutating: only slice namespaces, and failing closed (a GPU pod must not escape its affinity).
	 * Validating: every namespace but kube-system, failing open (the cluster keeps working while the
	 * agent is down; the taint still keeps pods without the toleration off the nodes). */
	sel = mutating ? json_pack("{s:[{s:s, s:s}]}", "matchExpressions", "key", EGS_K8S_LABEL_SLICE, "operator", "Exists") :
			 json_pack("{s:[{s:s, s:s, s:[s]}]}", "matchExpressions", "key", "kubernetes.io/metadata.name",
				   "operator", "NotIn", "values", "kube-system");
	c = json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:[{s:s, s:[s], s:s, s:s, s:i, s:{s:s, s:s}, s:o,"
		      " s:[{s:[s, s], s:[s], s:[s], s:[s], s:s}]}]}",
		      "apiVersion", "admissionregistration.k8s.io/v1", "kind",
		      mutating ? "MutatingWebhookConfiguration" : "ValidatingWebhookConfiguration", "metadata", "name",
		      "egs-agent", "labels", "app.kubernetes.io/managed-by", "egs-agent", "webhooks", "name",
		      mutating ? "mutate.pods.egs.kubeslice.io" : "validate.pods.egs.kubeslice.io",
		      "admissionReviewVersions", "v1", "sideEffects", "None", "failurePolicy",
		      mutating ? "Fail" : "Ignore", "timeoutSeconds", 5, "clientConfig", "url", url, "caBundle", b64,
		      "namespaceSelector", sel, "rules", "operations", "CREATE", "UPDATE", "apiGroups", "",
		      "apiVersions", "v1", "resources", "pods", "scope", "Namespaced");
	EGS_ASSERT(c);
	egs_free(b64);
	return c;
}

/* ---- the server ---- */

struct egs_webhook {
	struct event_base *base;
	struct evhttp *http;
	SSL_CTX *ctx;
	pthread_t thread;
	bool started;
	egs_webhook_slice_fn slice;
	void *arg;
};

static struct bufferevent *make_bev(struct event_base *base, void *arg)
{
	struct egs_webhook *w = arg;
	SSL *ssl = SSL_new(w->ctx);
	return bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
}

static void reply(struct evhttp_request *req, int code, const char *reason, json_t *body)
{
	struct evbuffer *out = evbuffer_new();
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;

	if (text)
		evbuffer_add(out, text, strlen(text));
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
	evhttp_send_reply(req, code, reason, out);
	evbuffer_free(out);
	free(text);
}

static void on_request(struct evhttp_request *req, void *arg)
{
	struct egs_webhook *w = arg;
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	json_t *review = NULL, *ans = NULL;

	if (!path || (strcmp(path, "/mutate") != 0 && strcmp(path, "/validate") != 0)) {
		reply(req, 404, "Not Found", NULL);
		return;
	}
	if (evhttp_request_get_command(req) != EVHTTP_REQ_POST || len > REVIEW_MAX) {
		reply(req, len > REVIEW_MAX ? 413 : 405, len > REVIEW_MAX ? "Too Large" : "Method Not Allowed", NULL);
		return;
	}
	review = json_loadb((const char *)evbuffer_pullup(in, -1), len, 0, NULL);
	ans = review ? egs_webhook_review(path, review, w->slice, w->arg) : NULL;
	if (ans)
		reply(req, 200, "OK", ans);
	else
		reply(req, 400, "Bad Request", NULL);
	json_decref(review);
	json_decref(ans);
}

static void *serve(void *arg)
{
	event_base_dispatch(((struct egs_webhook *)arg)->base);
	return NULL;
}

static enum egs_err tls_context(struct egs_webhook *w, const char *cert, const char *key, char *err, size_t errsz)
{
	w->ctx = SSL_CTX_new(TLS_server_method());
	if (!w->ctx || SSL_CTX_set_min_proto_version(w->ctx, TLS1_2_VERSION) != 1 ||
	    SSL_CTX_use_certificate_chain_file(w->ctx, cert) != 1 ||
	    SSL_CTX_use_PrivateKey_file(w->ctx, key, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(w->ctx) != 1) {
		char e[256];
		ERR_error_string_n(ERR_get_error(), e, sizeof(e));
		snprintf(err, errsz, "webhook certificate %s / key %s: %s", cert, key, e);
		return EGS_ERR_IO;
	}
	return EGS_OK;
}

enum egs_err egs_webhook_start(const char *addr, int port, const char *cert_file, const char *key_file,
			       egs_webhook_slice_fn slice, void *arg, struct egs_webhook **out, char *err, size_t errsz)
{
	struct egs_webhook *w = egs_calloc(1, sizeof(*w));
	enum egs_err rc;

	*out = NULL;
	w->slice = slice;
	w->arg = arg;
	evthread_use_pthreads();
	rc = tls_context(w, cert_file, key_file, err, errsz);
	if (rc != EGS_OK)
		goto fail;
	w->base = event_base_new();
	w->http = w->base ? evhttp_new(w->base) : NULL;
	if (!w->http || evhttp_bind_socket(w->http, addr ? addr : "0.0.0.0", (ev_uint16_t)port) != 0) {
		snprintf(err, errsz, "webhook: cannot listen on %s:%d", addr ? addr : "0.0.0.0", port);
		rc = EGS_ERR_IO;
		goto fail;
	}
	evhttp_set_bevcb(w->http, make_bev, w);
	evhttp_set_gencb(w->http, on_request, w);
	evhttp_set_max_body_size(w->http, REVIEW_MAX + 1);
	evhttp_set_timeout(w->http, 10);
	if (pthread_create(&w->thread, NULL, serve, w) != 0) {
		snprintf(err, errsz, "webhook: cannot start its thread");
		rc = EGS_ERR_IO;
		goto fail;
	}
	w->started = true;
	*out = w;
	return EGS_OK;
fail:
	egs_webhook_free(w);
	return rc;
}

void egs_webhook_free(struct egs_webhook *w)
{
	if (!w)
		return;
	if (w->started) {
		event_base_loopbreak(w->base);
		pthread_join(w->thread, NULL);
	}
	if (w->http)
		evhttp_free(w->http);
	if (w->base)
		event_base_free(w->base);
	if (w->ctx)
		SSL_CTX_free(w->ctx);
	egs_free(w);
}

/*
 * k8s_drain.c: detach on Kubernetes, and the Events the backend writes.
 *
 * Detach: cordon the node (recording that the agent did, so that it uncordons only its own cordon),
 * evict the slice's pods on it through the Eviction subresource (policy/v1) with the grace period,
 * retry evictions a PodDisruptionBudget refuses (429) until the drain deadline and then delete those
 * pods, wait until every such pod is gone, then remove the labels and the cordon in one patch.
 * DaemonSet pods stay.  The slice's pods are the pods in the attachment's namespaces and any pod that
 * tolerates the EGS taint (only those can run on a managed node).
 *
 * Every step reads the cluster again, so a detach interrupted anywhere (agent stopped, API server
 * down) is finished by the next one: the labels stay until the pods are gone, the node stays
 * reported attached, and egsd keeps asking.
 */
#include "agent/k8s_internal.h"

#include "agent/log.h"
#include "core/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define POLL_MS 300
#define GONE_SLACK_S 60 /* beyond the drain deadline and the grace period */

/* Is pod one of the slice's pods that a drain must remove? */
static bool victim(json_t *pod, const struct egs_attachment *att)
{
	const char *ns = json_string_value(json_object_get(json_object_get(pod, "metadata"), "namespace"));
	const char *phase = json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));

	if (!ns || egs_k8s_pod_daemonset(pod))
		return false;
	if (phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0))
		return false;
	return egs_strlist_has(&att->namespaces, ns) || egs_k8s_pod_tolerates_egs(pod);
}

/* The pods on node (caller decrefs *pods, an array). */
static enum egs_err pods_on(struct egs_k8s *k, const char *node, json_t **pods, char *msg, size_t msgsz)
{
	char sel[400], esc[500], path[600];
	json_t *ans = NULL;
	long status;
	enum egs_err rc;

	snprintf(sel, sizeof(sel), "spec.nodeName=%s", node);
	egs_kube_escape(sel, esc, sizeof(esc));
	snprintf(path, sizeof(path), "/api/v1/pods?fieldSelector=%s", esc);
	rc = egs_kube_call(k->kube, "GET", path, NULL, NULL, k->api_timeout_s, &status, &ans, msg, msgsz);
	*pods = json_incref(json_object_get(ans, "items"));
	json_decref(ans);
	if (rc == EGS_OK && !json_is_array(*pods)) {
		json_decref(*pods);
		*pods = json_array();
	}
	return rc;
}

/* Evicts pod (deletes it once the PDB deadline passed).  Sets *held when a PDB refused it. */
static void evict(struct egs_k8s *k, json_t *pod, bool past_deadline, bool *held)
{
	json_t *md = json_object_get(pod, "metadata");
	const char *ns = json_string_value(json_object_get(md, "namespace"));
	const char *name = json_string_value(json_object_get(md, "name"));
	char path[700], ens[300], ename[300], msg[256];
	json_t *body;
	long status;
	enum egs_err rc;

	if (!name || json_object_get(md, "deletionTimestamp") || !egs_kube_escape(ns, ens, sizeof(ens)) ||
	    !egs_kube_escape(name, ename, sizeof(ename)))
		return; /* terminating already: wait for it */
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s/eviction", ens, ename);
	body = egs_k8s_eviction(ns, name, k->evict_grace_s);
	rc = egs_kube_call(k->kube, "POST", path, NULL, body, k->api_timeout_s, &status, NULL, msg, sizeof(msg));
	json_decref(body);
	if (rc == EGS_OK) {
		EGS_LOG_INFO("evicting pod %s/%s (grace %d s)", ns, name, k->evict_grace_s);
	} else if (rc == EGS_ERR_BUSY && past_deadline) {
		snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", ens, ename);
		body = json_pack("{s:s, s:s, s:i}", "apiVersion", "v1", "kind", "DeleteOptions", "gracePeriodSeconds",
				 k->evict_grace_s);
		rc = egs_kube_call(k->kube, "DELETE", path, NULL, body, k->api_timeout_s, &status, NULL, msg, sizeof(msg));
		json_decref(body);
		EGS_LOG_WARN("pod %s/%s: a PodDisruptionBudget held its eviction past the %d s drain deadline; %s", ns,
			     name, k->drain_timeout_s, rc == EGS_OK || rc == EGS_ERR_NOT_FOUND ? "deleted it" : msg);
	} else if (rc == EGS_ERR_BUSY) {
		*held = true;
	} else if (rc != EGS_ERR_NOT_FOUND) {
		EGS_LOG_WARN("pod %s/%s: eviction failed: %s", ns, name, msg);
	}
}

/* Sleeps ms unless the backend is stopping; false when it is. */
static bool pause_ms(struct egs_k8s *k, int ms)
{
	for (int t = 0; t < ms; t += 50) {
		if (egs__k8s_stopping(k))
			return false;
		usleep(50 * 1000);
	}
	return !egs__k8s_stopping(k);
}

/* Evicts the slice's pods on node and waits until they are gone. */
static enum egs_err drain(struct egs_k8s *k, const char *node, const struct egs_attachment *att, char *msg,
			  size_t msgsz)
{
	time_t start = time(NULL), pdb_deadline = start + k->drain_timeout_s;
	time_t gone_deadline = pdb_deadline + k->evict_grace_s + GONE_SLACK_S;
	bool said_held = false;

	for (;;) {
		json_t *pods, *pod;
		size_t i, left = 0;
		bool held = false;
		enum egs_err rc = pods_on(k, node, &pods, msg, msgsz);

		if (rc != EGS_OK) {
			json_decref(pods);
			return rc;
		}
		json_array_foreach(pods, i, pod) {
			if (!victim(pod, att))
				continue;
			left++;
			evict(k, pod, time(NULL) >= pdb_deadline, &held);
		}
		json_decref(pods);
		if (left == 0)
			return EGS_OK;
		if (held && !said_held) {
			EGS_LOG_INFO("node %s: a PodDisruptionBudget holds the drain; retrying until %d s", node,
				     k->drain_timeout_s);
			said_held = true;
		}
		if (time(NULL) > gone_deadline) {
			snprintf(msg, msgsz, "node %s: %zu pods of the slice are still there after %ld s", node, left,
				 (long)(time(NULL) - start));
			return EGS_ERR_CONFLICT;
		}
		if (!pause_ms(k, POLL_MS)) {
			snprintf(msg, msgsz, "interrupted while draining node %s", node);
			return EGS_ERR_IO;
		}
	}
}

/* The detach itself, op_mu held. */
static enum egs_err detach_locked(struct egs_k8s *k, const char *name, const char *gpr_id, char *msg, size_t msgsz)
{
	struct egs_attachment *att = egs_calloc(1, sizeof(*att));
	struct egs_k8s_node n;
	json_t *node = NULL, *patch = NULL;
	bool ours;
	enum egs_err rc = egs__k8s_node_get(k, name, &node, msg, msgsz);

	if (rc == EGS_ERR_NOT_FOUND) {
		egs_strlcpy(msg, "not attached", msgsz); /* the node left the cluster */
		rc = EGS_OK;
		goto out;
	}
	if (rc != EGS_OK)
		goto out;
	if (!egs_k8s_node_attachment(node, att) || (gpr_id && *gpr_id && strcmp(att->gpr_id, gpr_id) != 0)) {
		egs_strlcpy(msg, "not attached", msgsz);
		goto out;
	}
	egs_k8s_node_read(node, &n);
	ours = n.our_cordon || !n.unschedulable;
	if (!n.unschedulable) {
		patch = egs_k8s_patch_cordon();
		rc = egs__k8s_node_patch(k, name, patch, msg, msgsz);
		json_decref(patch);
		if (rc != EGS_OK)
			goto out;
	}
	rc = drain(k, name, att, msg, msgsz);
	if (rc != EGS_OK)
		goto out;
	patch = egs_k8s_patch_detach(ours);
	rc = egs__k8s_node_patch(k, name, patch, msg, msgsz);
	json_decref(patch);
	if (rc != EGS_OK)
		goto out;
	egs_strlcpy(msg, "detached", msgsz);
	EGS_LOG_INFO("node %s: detached from %s (slice %s)", name, att->gpr_id, att->workspace);
	egs__k8s_events(k, &att->namespaces, att->gpr_id, "NodeDetached", "Normal", "node %s left the slice %s after "
			"its pods were evicted", name, att->workspace);
out:
	json_decref(node);
	egs_attachments_free(att, 1);
	return rc;
}

enum egs_err egs__k8s_detach(struct egs_backend *b, const char *node, const char *gpr_id, char *msg, size_t msgsz)
{
	struct egs_k8s *k = (struct egs_k8s *)b;
	enum egs_err rc;

	pthread_mutex_lock(&k->op_mu);
	rc = detach_locked(k, node, gpr_id, msg, msgsz);
	pthread_mutex_unlock(&k->op_mu);
	return egs__k8s_later(k, rc, msg, msgsz);
}

void egs__k8s_events(struct egs_k8s *k, const struct egs_strlist *nss, const char *gpr_id, const char *reason,
		     const char *type, const char *fmt, ...)
{
	char text[512], now[32], path[400], esc[300], msg[256];
	va_list ap;
	long status;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	egs_utf8_sanitize(text);
	egs_time_format((int64_t)time(NULL), now, sizeof(now));
	for (size_t i = 0; i < nss->n; i++) {
		json_t *ev = egs_k8s_event(nss->v[i], gpr_id, reason, text, type, now, atomic_fetch_add(&k->event_seq, 1));
		if (egs_kube_escape(nss->v[i], esc, sizeof(esc))) {
			snprintf(path, sizeof(path), "/api/v1/namespaces/%s/events", esc);
			if (egs_kube_call(k->kube, "POST", path, NULL, ev, k->api_timeout_s, &status, NULL, msg,
					  sizeof(msg)) != EGS_OK)
				EGS_LOG_WARN("event %s in namespace %s: %s", reason, nss->v[i], msg);
		}
		json_decref(ev);
	}
}

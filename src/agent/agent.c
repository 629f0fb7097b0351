/*
 * agent.c: the protocol loop of egs-agent (see agent.h and docs/internals/agent-protocol.md).
 *
 * Shared state (registered, its generation, the heartbeat interval, the heartbeat kick) lives under
 * one mutex with one condition variable that every change broadcasts, so any wait wakes at once on
 * stop.  The registration generation lets the action thread say "the registration I polled under
 * failed" without undoing a newer registration the heartbeat thread just made.
 *
 * Nothing is retried inside one call: a lost result or heartbeat is harmless because actions are
 * derived again by the control plane on every poll and every backend operation is idempotent.
 */
#include "agent/agent.h"

#include "agent/log.h"
#include "core/util.h"

#include <egs/egs.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CALL_TIMEOUT_S 15     /* register, heartbeat, result */
#define POLL_SLACK_S 15       /* the long poll's timeout beyond its wait */
#define DEFAULT_INTERVAL_S 5  /* heartbeat interval until egsd says otherwise */
#define MSG_MAX 512
#define RESULT_MSG_MAX 300    /* egsd takes result messages of up to 399 bytes */

struct egs_agent {
	char *url, *cluster;
	struct egs_devices *dev;
	struct egs_backend *be;
	int poll_wait_s, max_backoff_s;
	struct egs_client *hb_client, *act_client;
	atomic_bool stop;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* CLOCK_MONOTONIC; broadcast on every change below and on stop */
	bool registered;   /* under mu */
	uint64_t reg_gen;  /* under mu: bumped by each successful registration */
	int interval_s;    /* under mu */
	bool hb_kick;      /* under mu: send a heartbeat now (an action changed the attachments) */
	pthread_t hb_thread, act_thread;
	bool started;
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool abort_check(void *arg)
{
	return egs_agent_stopping(arg);
}

bool egs_agent_stopping(const struct egs_agent *a)
{
	return atomic_load(&a->stop);
}

/* Wakes every waiter; call with mu held after changing shared state. */
static void changed(struct egs_agent *a)
{
	pthread_cond_broadcast(&a->cv);
}

/*
 * Waits until deadline (monotonic ms), stop, or, when wake_on_kick, a heartbeat kick or the loss of
 * the registration.  Returns false on stop.
 */
static bool wait_until(struct egs_agent *a, int64_t deadline, bool wake_on_kick)
{
	struct timespec ts = {.tv_sec = deadline / 1000, .tv_nsec = (deadline % 1000) * 1000000L};

	pthread_mutex_lock(&a->mu);
	while (!egs_agent_stopping(a) && now_ms() < deadline && !(wake_on_kick && (a->hb_kick || !a->registered)))
		pthread_cond_timedwait(&a->cv, &a->mu, &ts);
	if (wake_on_kick)
		a->hb_kick = false;
	pthread_mutex_unlock(&a->mu);
	return !egs_agent_stopping(a);
}

static bool nap(struct egs_agent *a, int64_t ms)
{
	return wait_until(a, now_ms() + ms, false);
}

/* Waits until registered; stores the registration's generation.  Returns false on stop. */
static bool wait_registered(struct egs_agent *a, uint64_t *gen)
{
	pthread_mutex_lock(&a->mu);
	while (!egs_agent_stopping(a) && !a->registered)
		pthread_cond_wait(&a->cv, &a->mu);
	*gen = a->reg_gen;
	pthread_mutex_unlock(&a->mu);
	return !egs_agent_stopping(a);
}

/* Drops registration gen (if still current) so that the heartbeat thread registers again. */
static void lose_registration(struct egs_agent *a, uint64_t gen)
{
	pthread_mutex_lock(&a->mu);
	if (a->registered && a->reg_gen == gen) {
		a->registered = false;
		changed(a);
	}
	pthread_mutex_unlock(&a->mu);
}

static void kick_heartbeat(struct egs_agent *a)
{
	pthread_mutex_lock(&a->mu);
	a->hb_kick = true;
	changed(a);
	pthread_mutex_unlock(&a->mu);
}

/* ---- register and heartbeat ---- */

static json_t *register_body(struct egs_agent *a)
{
	json_t *nodes = json_array();

	for (size_t i = 0; i < a->dev->n_nodes; i++) {
		const struct egs_dev_node *n = &a->dev->nodes[i];
		json_t *gpus = json_array(), *o;
		char gpr[128];
		for (int g = 0; g < n->gpu_count; g++)
			json_array_append_new(gpus, json_pack("{s:s, s:i}", "uuid", n->gpus[g].uuid, "index",
							      n->gpus[g].index));
		egs_backend_attached_gpr(a->be, n->name, gpr, sizeof(gpr));
		o = json_pack("{s:s, s:s, s:s, s:i, s:I, s:o, s:s}", "name", n->name, "instanceType",
			      n->instance_type, "gpuModel", n->gpu_model, "gpuCount", n->gpu_count, "memoryMiB",
			      (json_int_t)n->memory_mib, "gpus", gpus, "attachedGpr", gpr);
		if (n->cloud_provider[0])
			json_object_set_new(o, "cloudProvider", json_string(n->cloud_provider));
		if (n->region[0])
			json_object_set_new(o, "region", json_string(n->region));
		json_array_append_new(nodes, o);
	}
	return json_pack("{s:s, s:s, s:o}", "clusterName", a->cluster, "agentVersion", EGS_AGENT_VERSION,
			 "nodes", nodes);
}

static json_t *heartbeat_body(struct egs_agent *a)
{
	json_t *nodes = json_array();
	int64_t now = (int64_t)time(NULL);

	for (size_t i = 0; i < a->dev->n_nodes; i++) {
		const struct egs_dev_node *n = &a->dev->nodes[i];
		struct egs_gpu_sample *s = egs_calloc((size_t)n->gpu_count, sizeof(*s));
		enum egs_health health = EGS_HEALTH_HEALTHY;
		json_t *gpus = json_array();
		bool sampled = egs_devices_sample(a->dev, i, now, &health, NULL, 0, s) == EGS_OK;
		char gpr[128];

		for (int g = 0; sampled && g < n->gpu_count; g++)
			json_array_append_new(gpus, json_pack("{s:s, s:i, s:f, s:f, s:f, s:I}", "uuid",
							      n->gpus[g].uuid, "index", n->gpus[g].index, "powerW",
							      s[g].power_w, "tempC", s[g].temp_c, "utilPct",
							      s[g].util_pct, "memUsedMiB",
							      (json_int_t)s[g].mem_used_mib));
		egs_backend_attached_gpr(a->be, n->name, gpr, sizeof(gpr));
		json_array_append_new(nodes, json_pack("{s:s, s:s, s:s, s:o, s:[]}", "name", n->name, "health",
						       egs_health_name(health), "attachedGpr", gpr, "gpus", gpus,
						       "workloads"));
		egs_free(s);
	}
	return json_pack("{s:s, s:o}", "clusterName", a->cluster, "nodes", nodes);
}

/* One registration attempt.  On success marks the agent registered. */
static enum egs_err register_once(struct egs_agent *a, char *why, size_t whysz)
{
	json_t *body = register_body(a), *data = NULL;
	long status = 0;
	enum egs_err err;
	json_int_t interval;

	err = egs_client_call(a->hb_client, "POST", "/api/v1/agent/register", body, CALL_TIMEOUT_S, &status,
			      &data);
	if (err != EGS_OK) {
		if (status)
			snprintf(why, whysz, "HTTP %ld: %s", status, egs_client_errmsg(a->hb_client));
		else
			snprintf(why, whysz, "%s", egs_client_errmsg(a->hb_client));
		goto out;
	}
	interval = json_integer_value(json_object_get(data, "heartbeatIntervalSeconds"));
	if (interval < 1 || interval > 300)
		interval = DEFAULT_INTERVAL_S;
	pthread_mutex_lock(&a->mu);
	a->registered = true;
	a->reg_gen++;
	a->interval_s = (int)interval;
	changed(a);
	pthread_mutex_unlock(&a->mu);
	EGS_LOG_INFO("registered cluster %s with %s: %zu nodes, heartbeat every %d s", a->cluster, a->url,
		     a->dev->n_nodes, (int)interval);
out:
	json_decref(body);
	json_decref(data);
	return err;
}

/* One heartbeat.  Drops the registration when egsd answers 401/404 or cannot be reached. */
static void heartbeat_once(struct egs_agent *a, uint64_t gen)
{
	json_t *body = heartbeat_body(a), *data = NULL;
	long status = 0;
	enum egs_err err;

	err = egs_client_call(a->hb_client, "POST", "/api/v1/agent/heartbeat", body, CALL_TIMEOUT_S, &status,
			      &data);
	if (egs_agent_stopping(a))
		goto out;
	if (err == EGS_OK) {
		EGS_LOG_DEBUG("heartbeat sent; %lld pending actions",
			      (long long)json_integer_value(json_object_get(data, "pendingActions")));
	} else if (status == 0 || status == 401 || status == 404) {
		EGS_LOG_WARN("heartbeat failed (%s%s); registering again", status ? "HTTP " : "",
			     status ? (status == 401 ? "401" : "404") : egs_client_errmsg(a->hb_client));
		lose_registration(a, gen);
	} else {
		EGS_LOG_WARN("heartbeat refused: HTTP %ld: %s", status, egs_client_errmsg(a->hb_client));
	}
out:
	json_decref(body);
	json_decref(data);
}

/* A pause of about base_s seconds, spread by +-25 % so that a fleet of agents does not stampede. */
static int64_t jittered_ms(int base_s, unsigned *seed)
{
	int64_t ms = (int64_t)base_s * 1000;
	*seed = *seed * 1103515245u + 12345u;
	return ms * 3 / 4 + (int64_t)((*seed >> 8) % (unsigned)(ms / 2 + 1));
}

static void *heartbeat_main(void *arg)
{
	struct egs_agent *a = arg;
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
	char why[MSG_MAX], last_why[MSG_MAX] = "";
	int backoff = 1;
	int64_t next = 0;

	while (!egs_agent_stopping(a)) {
		uint64_t gen;
		int interval;
		bool registered;

		pthread_mutex_lock(&a->mu);
		registered = a->registered;
		gen = a->reg_gen;
		interval = a->interval_s;
		pthread_mutex_unlock(&a->mu);

		if (!registered) {
			if (register_once(a, why, sizeof(why)) == EGS_OK) {
				backoff = 1;
				last_why[0] = '\0';
				next = now_ms(); /* the first samples right away */
				continue;
			}
			if (egs_agent_stopping(a))
				break;
			/* Say it once per distinct reason; repeats while egsd is down go to debug. */
			egs_agent_log(strcmp(why, last_why) ? EGS_ALOG_WARN : EGS_ALOG_DEBUG,
				      "cannot register with %s: %s; retrying in about %d s", a->url, why, backoff);
			egs_strlcpy(last_why, why, sizeof(last_why));
			nap(a, jittered_ms(backoff, &seed));
			backoff = backoff * 2 > a->max_backoff_s ? a->max_backoff_s : backoff * 2;
			continue;
		}
		if (!wait_until(a, next, true))
			break;
		pthread_mutex_lock(&a->mu);
		registered = a->registered && a->reg_gen == gen;
		pthread_mutex_unlock(&a->mu);
		if (!registered)
			continue;
		heartbeat_once(a, gen);
		next = now_ms() + (int64_t)interval * 1000;
	}
	return NULL;
}

/* ---- actions ---- */

static const char *str_field(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* The pre-checks of an attach: the node is one of ours and healthy. */
static bool precheck(struct egs_agent *a, const char *node, char *msg, size_t msgsz)
{
	const struct egs_dev_node *n = egs_devices_find(a->dev, node);
	struct egs_gpu_sample *s;
	enum egs_health health = EGS_HEALTH_UNHEALTHY;

	if (!n) {
		snprintf(msg, msgsz, "pre-check failed: node %s is not served by this agent", node);
		return false;
	}
	s = egs_calloc((size_t)n->gpu_count, sizeof(*s));
	egs_devices_sample(a->dev, (size_t)(n - a->dev->nodes), (int64_t)time(NULL), &health, NULL, 0, s);
	egs_free(s);
	if (health != EGS_HEALTH_HEALTHY) {
		snprintf(msg, msgsz, "pre-check failed: node %s is %s", node, egs_health_name(health));
		return false;
	}
	egs_strlcpy(msg, "pre-checks passed", msgsz);
	return true;
}

/* Validates an optional RFC 3339 time field into *out ("" when absent). */
static bool time_field(json_t *act, const char *key, const char **out, char *msg, size_t msgsz)
{
	json_t *v = json_object_get(act, key);
	int64_t t;

	*out = "";
	if (!v || json_is_null(v))
		return true;
	if (!json_is_string(v) || !egs_time_parse(json_string_value(v), &t)) {
		snprintf(msg, msgsz, "malformed action: %s is not an RFC 3339 time", key);
		return false;
	}
	*out = json_string_value(v);
	return true;
}

static bool do_attach(struct egs_agent *a, json_t *act, const char *node, const char *gpr, char *msg,
		      size_t msgsz)
{
	struct egs_strlist namespaces = {0};
	struct egs_attach_req req = {.node = node, .gpr_id = gpr, .namespaces = &namespaces};
	json_t *ns = json_object_get(act, "namespaces"), *v;
	bool ok = false;
	size_t i;

	req.workspace = str_field(act, "workspace");
	if (!req.workspace || !*req.workspace) {
		egs_strlcpy(msg, "malformed action: workspace missing", msgsz);
		goto out;
	}
	if (ns && !json_is_array(ns)) {
		egs_strlcpy(msg, "malformed action: namespaces is not a list", msgsz);
		goto out;
	}
	json_array_foreach(ns, i, v) {
		if (!json_string_length(v)) {
			egs_strlcpy(msg, "malformed action: namespaces holds a non-string", msgsz);
			goto out;
		}
		egs_strlist_add(&namespaces, json_string_value(v));
	}
	if (!time_field(act, "startTime", &req.start_time, msg, msgsz) ||
	    !time_field(act, "exitTime", &req.exit_time, msg, msgsz))
		goto out;
	if (!precheck(a, node, msg, msgsz))
		goto out;
	ok = egs_backend_attach(a->be, &req, msg, msgsz) == EGS_OK;
out:
	egs_strlist_cleanup(&namespaces);
	return ok;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when s does not start one. */
static size_t utf8_seq(const unsigned char *s)
{
	size_t n = s[0] < 0x80 ? 1 : s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3 :
		   s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;

	for (size_t i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((n == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0))) ||
	    (n == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))))
		return 0; /* overlong, surrogate or beyond U+10FFFF */
	return n;
}

/* Copies msg into out as valid UTF-8 (a hook may print anything; JSON strings must be UTF-8), cut at
 * a character boundary to fit outsz bytes; invalid bytes become '?'. */
static void clean_message(const char *msg, char *out, size_t outsz)
{
	const unsigned char *s = (const unsigned char *)msg;
	size_t k = 0;

	while (*s) {
		size_t n = utf8_seq(s);
		if (k + (n ? n : 1) >= outsz)
			break;
		if (n) {
			memcpy(out + k, s, n);
			k += n;
			s += n;
		} else {
			out[k++] = '?';
			s++;
		}
	}
	out[k] = '\0';
}

static void report(struct egs_agent *a, const char *id, const char *type, const char *gpr, const char *node,
		   bool ok, const char *msg)
{
	char clean[RESULT_MSG_MAX];
	json_t *body;
	long status = 0;

	clean_message(msg, clean, sizeof(clean));
	body = json_pack("{s:s, s:s, s:s, s:s, s:b, s:s}", "actionId", id, "type", type, "gprId", gpr, "node",
			 node, "ok", ok, "message", clean);
	if (!body) {
		EGS_LOG_WARN("action %s: ids are not valid UTF-8; result not reported", id);
		return;
	}

	if (egs_client_call(a->act_client, "POST", "/api/v1/agent/actions/result", body, CALL_TIMEOUT_S,
			    &status, NULL) != EGS_OK && !egs_agent_stopping(a))
		EGS_LOG_WARN("action %s: cannot report the result (%s%s%s); egsd will ask again", id,
			     status ? "HTTP " : "", status ? "error: " : "", egs_client_errmsg(a->act_client));
	json_decref(body);
}

static void run_action(struct egs_agent *a, json_t *act)
{
	const char *id = str_field(act, "actionId"), *type = str_field(act, "type");
	const char *gpr = str_field(act, "gprId"), *node = str_field(act, "node");
	char msg[MSG_MAX] = "";
	bool ok;

	if (!id || !type || !gpr || !node) {
		EGS_LOG_WARN("ignoring an action without actionId, type, gprId or node");
		return;
	}
	EGS_LOG_INFO("action %s: starting", id);
	if (!egs_devices_find(a->dev, node)) {
		snprintf(msg, sizeof(msg), "node %s is not served by this agent", node);
		ok = false;
	} else if (strcmp(type, "attach") == 0) {
		ok = do_attach(a, act, node, gpr, msg, sizeof(msg));
	} else if (strcmp(type, "detach") == 0) {
		ok = egs_backend_detach(a->be, node, gpr, msg, sizeof(msg)) == EGS_OK;
	} else if (strcmp(type, "precheck") == 0) {
		ok = precheck(a, node, msg, sizeof(msg));
	} else {
		snprintf(msg, sizeof(msg), "unknown action type '%s'", type);
		ok = false;
	}
	if (egs_agent_stopping(a) && !ok) {
		/* Cut short by the shutdown, not failed: reporting it would mark a good node unhealthy. */
		EGS_LOG_INFO("action %s: interrupted by shutdown (%s); not reported", id, msg);
		return;
	}
	egs_agent_log(ok ? EGS_ALOG_INFO : EGS_ALOG_WARN, "action %s: %s: %s", id, ok ? "ok" : "failed", msg);
	report(a, id, type, gpr, node, ok, msg);
	kick_heartbeat(a);
}

static void *action_main(void *arg)
{
	struct egs_agent *a = arg;
	char path[64];
	uint64_t gen;

	snprintf(path, sizeof(path), "/api/v1/agent/actions?wait=%d", a->poll_wait_s);
	while (wait_registered(a, &gen)) {
		json_t *data = NULL, *actions, *act;
		int64_t t0 = now_ms();
		long status = 0;
		enum egs_err err;
		size_t i;

		err = egs_client_call(a->act_client, "GET", path, NULL, a->poll_wait_s + POLL_SLACK_S, &status,
				      &data);
		if (egs_agent_stopping(a)) {
			json_decref(data);
			break;
		}
		if (err != EGS_OK && (status == 0 || status == 401 || status == 404)) {
			EGS_LOG_WARN("action poll failed (%s%s); registering again", status ? "HTTP " : "",
				     status ? (status == 401 ? "401" : "404") : egs_client_errmsg(a->act_client));
			lose_registration(a, gen);
		} else if (err != EGS_OK) {
			EGS_LOG_WARN("action poll refused: HTTP %ld: %s", status, egs_client_errmsg(a->act_client));
			nap(a, 5000);
		} else {
			actions = json_object_get(data, "actions");
			json_array_foreach(actions, i, act) {
				if (egs_agent_stopping(a))
					break;
				run_action(a, act);
			}
			/* A server that does not hold the poll must not turn it into a busy loop. */
			if (json_array_size(actions) == 0 && now_ms() - t0 < 1000)
				nap(a, 1000);
		}
		json_decref(data);
	}
	return NULL;
}

/* ---- lifecycle ---- */

struct egs_agent *egs_agent_new(const struct egs_agent_config *cfg)
{
	struct egs_agent *a;
	pthread_condattr_t ca;

	EGS_ASSERT(cfg->server_url && cfg->cluster && cfg->token && cfg->devices && cfg->backend);
	a = egs_calloc(1, sizeof(*a));
	a->hb_client = egs_client_new(cfg->server_url, cfg->token);
	a->act_client = egs_client_new(cfg->server_url, cfg->token);
	if (!a->hb_client || !a->act_client) {
		egs_client_free(a->hb_client);
		egs_client_free(a->act_client);
		egs_free(a);
		return NULL;
	}
	a->url = egs_strdup(cfg->server_url);
	a->cluster = egs_strdup(cfg->cluster);
	a->dev = cfg->devices;
	a->be = cfg->backend;
	a->poll_wait_s = cfg->poll_wait_s > 0 && cfg->poll_wait_s <= 60 ? cfg->poll_wait_s : 25;
	a->max_backoff_s = cfg->max_backoff_s > 0 ? cfg->max_backoff_s : 10;
	a->interval_s = DEFAULT_INTERVAL_S;
	atomic_init(&a->stop, false);
	pthread_mutex_init(&a->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&a->cv, &ca);
	pthread_condattr_destroy(&ca);
	egs_client_set_abort(a->hb_client, abort_check, a);
	egs_client_set_abort(a->act_client, abort_check, a);
	egs_backend_set_stop(a->be, abort_check, a);
	return a;
}

enum egs_err egs_agent_start(struct egs_agent *a)
{
	EGS_ASSERT(!a->started);
	if (pthread_create(&a->hb_thread, NULL, heartbeat_main, a) != 0)
		return EGS_ERR_IO;
	if (pthread_create(&a->act_thread, NULL, action_main, a) != 0) {
		egs_agent_stop(a);
		pthread_join(a->hb_thread, NULL);
		return EGS_ERR_IO;
	}
	a->started = true;
	return EGS_OK;
}

void egs_agent_stop(struct egs_agent *a)
{
	atomic_store(&a->stop, true);
	pthread_mutex_lock(&a->mu);
	changed(a);
	pthread_mutex_unlock(&a->mu);
}

void egs_agent_free(struct egs_agent *a)
{
	if (!a)
		return;
	if (a->started) {
		egs_agent_stop(a);
		pthread_join(a->hb_thread, NULL);
		pthread_join(a->act_thread, NULL);
	}
	egs_backend_set_stop(a->be, NULL, NULL);
	egs_client_free(a->hb_client);
	egs_client_free(a->act_client);
	pthread_cond_destroy(&a->cv);
	pthread_mutex_destroy(&a->mu);
	egs_free(a->url);
	egs_free(a->cluster);
	egs_free(a);
}

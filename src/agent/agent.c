/*
 * agent.c: the protocol loop of egs-agent (see agent.h and docs/internals/agent-protocol.md):
 * registration, GPU sampling, heartbeats and the action poll.  Carrying out one action is
 * agent_actions.c.
 *
 * Shared state (registered, its generation, the heartbeat interval, the heartbeat kick, the node
 * states) lives under one mutex with one condition variable that every change broadcasts, so any
 * wait wakes at once on stop.  The registration generation lets the action thread say "the
 * registration I polled under failed" without undoing a newer registration the heartbeat thread just
 * made.
 *
 * Nothing is retried inside one call: a lost result or heartbeat is harmless because actions are
 * derived again by the control plane on every poll and every backend operation is idempotent.
 */
#include "agent/agent_internal.h"

#include "agent/clock.h"
#include "agent/log.h"
#include "core/buf.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CALL_TIMEOUT_S 15     /* register, heartbeat, result */
#define POLL_SLACK_S 15       /* the long poll's timeout beyond its wait */
#define DEFAULT_INTERVAL_S 5  /* heartbeat interval until egsd says otherwise */
#define WORKLOADS_MAX 64      /* processes reported per node */
#define FEATURE_CHECKS "checks"
#define FEATURE_PODS "pods"      /* egsd takes pendingPods in heartbeats */
#define KICK_GAP_MS 250       /* least time between heartbeats that actions asked for */

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
 * the registration; *kicked (may be NULL) says whether a kick ended it.  Returns false on stop.
 */
static bool wait_until(struct egs_agent *a, int64_t deadline, bool wake_on_kick, bool *kicked)
{
	struct timespec ts = {.tv_sec = deadline / 1000, .tv_nsec = (deadline % 1000) * 1000000L};

	pthread_mutex_lock(&a->mu);
	while (!egs_agent_stopping(a) && egs_clock_ms() < deadline && !(wake_on_kick && (a->hb_kick || !a->registered)))
		pthread_cond_timedwait(&a->cv, &a->mu, &ts);
	if (kicked)
		*kicked = wake_on_kick && a->hb_kick;
	if (wake_on_kick)
		a->hb_kick = false;
	pthread_mutex_unlock(&a->mu);
	return !egs_agent_stopping(a);
}

static bool nap(struct egs_agent *a, int64_t ms)
{
	return wait_until(a, egs_clock_ms() + ms, false, NULL);
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

void egs__agent_pause(struct egs_agent *a, int64_t ms)
{
	nap(a, ms);
}

void egs__agent_kick(struct egs_agent *a)
{
	pthread_mutex_lock(&a->mu);
	a->hb_kick = true;
	changed(a);
	pthread_mutex_unlock(&a->mu);
}

void egs__agent_mark(struct egs_agent *a, size_t i, const char *why)
{
	EGS_ASSERT(i < a->dev->n_nodes);
	pthread_mutex_lock(&a->mu);
	a->nodes[i].mark_until = (int64_t)time(NULL) + a->quarantine_s;
	egs_strlcpy(a->nodes[i].mark_why, why, sizeof(a->nodes[i].mark_why));
	a->hb_kick = true;
	changed(a);
	pthread_mutex_unlock(&a->mu);
	EGS_LOG_WARN("node %s is reported Unhealthy for %d s: %s", a->dev->nodes[i].name, a->quarantine_s, why);
}

/* The health a heartbeat reports for node i: the device's, made Unhealthy by an unexpired check
 * failure.  Stores the reason in *why (borrowed from the state).  Caller holds mu. */
static enum egs_health effective_health(struct egs_agent *a, size_t i, int64_t now, const char **why)
{
	struct egs__node_state *s = &a->nodes[i];

	*why = s->why;
	if (s->health == EGS_HEALTH_HEALTHY && s->mark_until > now) {
		*why = s->mark_why;
		return EGS_HEALTH_UNHEALTHY;
	}
	return s->health;
}

/* ---- sampling ---- */

/* Samples every node into the node states.  Returns true when some node's health now differs from
 * what the last heartbeat said (a heartbeat should go out at once). */
static bool sample_all(struct egs_agent *a)
{
	int64_t now = (int64_t)time(NULL);
	bool differs = false;

	for (size_t i = 0; i < a->dev->n_nodes; i++) {
		const struct egs_dev_node *n = &a->dev->nodes[i];
		struct egs__node_state *s = &a->nodes[i];
		struct egs_gpu_sample tmp[64];
		enum egs_health h = EGS_HEALTH_UNHEALTHY, eff;
		char why[EGS_DEV_WHY_MAX];
		const char *unused;

		EGS_ASSERT(n->gpu_count <= 64);
		egs_devices_sample(a->dev, i, now, &h, why, sizeof(why), tmp);
		pthread_mutex_lock(&a->mu);
		if (s->sampled && h != s->health)
			EGS_LOG_INFO("node %s is now %s%s%s", n->name, egs_health_name(h), why[0] ? ": " : "", why);
		s->sampled = true;
		s->health = h;
		egs_strlcpy(s->why, why, sizeof(s->why));
		memcpy(s->gpus, tmp, (size_t)n->gpu_count * sizeof(*tmp));
		eff = effective_health(a, i, now, &unused);
		differs |= s->reported_once && eff != s->reported;
		pthread_mutex_unlock(&a->mu);
	}
	return differs;
}

/* ---- register and heartbeat ---- */

/* Appends the compact JSON of v (not NULL) to b. */
static void append_json(struct egs_buf *b, json_t *v)
{
	size_t n = json_dumpb(v, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
	EGS_ASSERT(n > 0);
	egs_buf_reserve(b, n);
	EGS_ASSERT(json_dumpb(v, b->p + b->len, n, JSON_COMPACT | JSON_ENCODE_ANY) == n);
	b->len += n;
}

static void append_text(struct egs_buf *b, const char *text)
{
	egs_buf_put(b, text, strlen(text));
}

/*
 * The registration body as JSON text (caller frees).  Built node by node: at 1,000 nodes of 8 GPUs the
 * body as one jansson tree is about 5 MB, most of the agent's peak memory (bench/k8s); the text is 0.7 MB.
 */
static char *register_text(struct egs_agent *a)
{
	struct egs_buf b = { 0 };
	json_t *head = json_pack("{s:s, s:s}", "clusterName", a->cluster, "agentVersion", EGS_AGENT_VERSION);

	append_json(&b, head);
	json_decref(head);
	b.len--; /* reopen the object: drop its '}' */
	append_text(&b, ",\"nodes\":[");
	for (size_t i = 0; i < a->dev->n_nodes; i++) {
		const struct egs_dev_node *n = &a->dev->nodes[i];
		char gpr[128];
		struct egs_strlist shared = {0};
		egs_backend_attached_gpr(a->be, n->name, gpr, sizeof(gpr));
		egs_backend_shared_gprs(a->be, n->name, &shared);
		json_t *o = egs_report_register_node(n, gpr, n->address[0] ? n->address : a->address);
		if (!a->no_sharing)
			egs_report_add_sharing(o, &shared, true);
		egs_strlist_cleanup(&shared);
		if (i)
			append_text(&b, ",");
		append_json(&b, o);
		json_decref(o);
	}
	append_text(&b, "]");
	if (a->unmanaged) {
		append_text(&b, ",\"unmanagedNodes\":");
		append_json(&b, a->unmanaged);
	}
	if (egs_backend_has_slices(a->be)) /* it mints slice tokens (agent_slice.c) */
		append_text(&b, ",\"features\":[\"sliceAccess\"]");
	append_text(&b, "}");
	egs_buf_cstr(&b);
	return b.p;
}

/* Lists the GPU processes of every node (outside the lock: it is device I/O).  procs has
 * n_nodes * WORKLOADS_MAX entries; counts[i] gets node i's number (capped). */
static void list_processes(struct egs_agent *a, struct egs_gpu_proc *procs, size_t *counts, int64_t now)
{
	for (size_t i = 0; i < a->dev->n_nodes; i++) {
		size_t n = 0;
		if (egs_devices_processes(a->dev, i, now, procs + i * WORKLOADS_MAX, WORKLOADS_MAX, &n) != EGS_OK)
			n = 0;
		counts[i] = n < WORKLOADS_MAX ? n : WORKLOADS_MAX;
	}
}

static json_t *heartbeat_body(struct egs_agent *a)
{
	int64_t now = (int64_t)time(NULL);
	size_t nn = a->dev->n_nodes, *counts = egs_calloc(nn + 1, sizeof(*counts));
	struct egs_gpu_proc *procs = egs_calloc(nn * WORKLOADS_MAX + 1, sizeof(*procs));
	char(*gprs)[128] = egs_calloc(nn + 1, sizeof(*gprs));
	struct egs_strlist *shared = egs_calloc(nn + 1, sizeof(*shared));
	json_t *nodes = json_array(), **wls = egs_calloc(nn + 1, sizeof(*wls)), *pending = NULL, *body;

	list_processes(a, procs, counts, now);
	egs_devices_workloads(a->dev, now, wls, &pending); /* pods, where the backend knows them */
	for (size_t i = 0; i < nn; i++) {
		egs_backend_attached_gpr(a->be, a->dev->nodes[i].name, gprs[i], sizeof(gprs[i]));
		egs_backend_shared_gprs(a->be, a->dev->nodes[i].name, &shared[i]);
	}
	pthread_mutex_lock(&a->mu);
	for (size_t i = 0; i < nn; i++) {
		struct egs__node_state *s = &a->nodes[i];
		const char *why;
		enum egs_health h = effective_health(a, i, now, &why);
		s->reported = h;
		s->reported_once = true;
		/* A node that does not answer is left out, as if its host were down: egsd then makes it
		 * Unschedulable after three missed heartbeats, as it would for a dead host. */
		if (h == EGS_HEALTH_UNSCHEDULABLE)
			continue;
		json_t *o = egs_report_heartbeat_node(&a->dev->nodes[i], h, why, gprs[i], s->sampled ? s->gpus : NULL,
						      procs + i * WORKLOADS_MAX, counts[i]);
		if (!a->no_sharing)
			egs_report_add_sharing(o, &shared[i], false);
		if (wls[i])
			json_object_set(o, "workloads", wls[i]);
		json_array_append_new(nodes, o);
	}
	pthread_mutex_unlock(&a->mu);
	for (size_t i = 0; i < nn; i++) {
		egs_strlist_cleanup(&shared[i]);
		json_decref(wls[i]);
	}
	egs_free(wls);
	egs_free(shared);
	egs_free(counts);
	egs_free(procs);
	egs_free(gprs);
	body = json_pack("{s:s, s:o}", "clusterName", a->cluster, "nodes", nodes);
	if (pending && atomic_load(&a->server_pods)) /* an egsd without "pods" refuses the field */
		json_object_set(body, "pendingPods", pending);
	json_decref(pending);
	return body;
}

/* Does the registration answer list feature in data.features? */
static bool has_feature(json_t *data, const char *feature)
{
	json_t *f = json_object_get(data, "features"), *v;
	size_t i;

	json_array_foreach(f, i, v) {
		if (json_is_string(v) && strcmp(json_string_value(v), feature) == 0)
			return true;
	}
	return false;
}

/* One registration attempt.  On success marks the agent registered. */
static enum egs_err register_once(struct egs_agent *a, char *why, size_t whysz)
{
	char *body = register_text(a);
	json_t *data = NULL;
	long status = 0;
	enum egs_err err;
	json_int_t interval;

	err = egs_client_call_text(a->hb_client, "POST", "/api/v1/agent/register", body, CALL_TIMEOUT_S, &status,
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
	atomic_store(&a->server_checks, has_feature(data, FEATURE_CHECKS));
	atomic_store(&a->server_pods, has_feature(data, FEATURE_PODS));
	pthread_mutex_lock(&a->mu);
	a->registered = true;
	a->reg_gen++;
	a->interval_s = (int)interval;
	changed(a);
	pthread_mutex_unlock(&a->mu);
	EGS_LOG_INFO("registered cluster %s with %s: %zu nodes, heartbeat every %d s", a->cluster, a->url,
		     a->dev->n_nodes, (int)interval);
out:
	egs_free(body);
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

/* Registers once; on failure logs (once per distinct reason) and sleeps the backoff.  Returns true
 * when registered. */
static bool try_register(struct egs_agent *a, int *backoff, unsigned *seed, char *last_why, size_t whysz)
{
	char why[EGS__AGENT_MSG_MAX];

	if (register_once(a, why, sizeof(why)) == EGS_OK) {
		*backoff = 1;
		last_why[0] = '\0';
		return true;
	}
	if (egs_agent_stopping(a))
		return false;
	/* Say it once per distinct reason; repeats while egsd is down go to debug. */
	egs_agent_log(strcmp(why, last_why) ? EGS_ALOG_WARN : EGS_ALOG_DEBUG,
		      "cannot register with %s: %s; retrying in about %d s", a->url, why, *backoff);
	egs_strlcpy(last_why, why, whysz);
	nap(a, jittered_ms(*backoff, seed));
	*backoff = *backoff * 2 > a->max_backoff_s ? a->max_backoff_s : *backoff * 2;
	return false;
}

static void *heartbeat_main(void *arg)
{
	struct egs_agent *a = arg;
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
	char last_why[EGS__AGENT_MSG_MAX] = "";
	int backoff = 1;
	int64_t next_hb = 0, next_sample = 0, last_hb = 0, sample_ms = (int64_t)a->sample_interval_s * 1000;

	while (!egs_agent_stopping(a)) {
		uint64_t gen;
		int interval;
		bool registered, kicked = false;

		pthread_mutex_lock(&a->mu);
		registered = a->registered;
		gen = a->reg_gen;
		interval = a->interval_s;
		pthread_mutex_unlock(&a->mu);

		if (!registered) {
			if (try_register(a, &backoff, &seed, last_why, sizeof(last_why)))
				next_hb = next_sample = egs_clock_ms(); /* the first samples right away */
			continue;
		}
		if (egs_clock_ms() >= next_sample) {
			if (sample_all(a))
				next_hb = egs_clock_ms(); /* a node's health changed: say so now */
			next_sample = egs_clock_ms() + sample_ms;
		}
		if (egs_clock_ms() >= next_hb) {
			last_hb = egs_clock_ms();
			heartbeat_once(a, gen);
			next_hb = egs_clock_ms() + (int64_t)interval * 1000;
		}
		if (!wait_until(a, next_hb < next_sample ? next_hb : next_sample, true, &kicked))
			break;
		/* An action changed something: fresh samples and a heartbeat now, but not more often than every
		 * KICK_GAP_MS, so that a batch of actions (a 64-node GPR) costs a few heartbeats, not one each. */
		if (kicked) {
			int64_t now = egs_clock_ms();
			next_hb = next_sample = last_hb + KICK_GAP_MS > now ? last_hb + KICK_GAP_MS : now;
		}
	}
	return NULL;
}

/* ---- the action poll ---- */

static void *action_main(void *arg)
{
	struct egs_agent *a = arg;
	char path[64];
	uint64_t gen;

	snprintf(path, sizeof(path), "/api/v1/agent/actions?wait=%d", a->poll_wait_s);
	while (wait_registered(a, &gen)) {
		json_t *data = NULL, *actions, *act;
		int64_t t0 = egs_clock_ms();
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
				egs__agent_run_action(a, act, actions);
			}
			/* A server that does not hold the poll must not turn it into a busy loop. */
			if (json_array_size(actions) == 0 && egs_clock_ms() - t0 < 1000)
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

	EGS_ASSERT(cfg->server_url && cfg->cluster && cfg->token && cfg->devices && cfg->backend);
	a = egs_calloc(1, sizeof(*a));
	a->hb_client = egs_client_new(cfg->server_url, cfg->token);
	a->act_client = egs_client_new(cfg->server_url, cfg->token);
	if (!a->hb_client || !a->act_client ||
	    (cfg->ca_file && (egs_client_set_ca_file(a->hb_client, cfg->ca_file) != EGS_OK ||
			      egs_client_set_ca_file(a->act_client, cfg->ca_file) != EGS_OK))) {
		egs_client_free(a->hb_client);
		egs_client_free(a->act_client);
		egs_free(a);
		return NULL;
	}
	a->url = egs_strdup(cfg->server_url);
	a->cluster = egs_strdup(cfg->cluster);
	a->checks_dir = egs_strdup(cfg->checks_dir);
	a->address = egs_strdup(cfg->address ? cfg->address : "");
	a->unmanaged = cfg->unmanaged ? json_incref(cfg->unmanaged) : NULL;
	a->no_sharing = cfg->no_sharing;
	a->dev = cfg->devices;
	a->be = cfg->backend;
	a->checks = cfg->checks;
	a->poll_wait_s = cfg->poll_wait_s > 0 && cfg->poll_wait_s <= 60 ? cfg->poll_wait_s : 25;
	a->max_backoff_s = cfg->max_backoff_s > 0 ? cfg->max_backoff_s : 10;
	a->quarantine_s = cfg->quarantine_s > 0 ? cfg->quarantine_s : 300;
	a->sample_interval_s = cfg->sample_interval_s > 0 ? cfg->sample_interval_s : 1;
	a->interval_s = DEFAULT_INTERVAL_S;
	a->nodes = egs_calloc(a->dev->n_nodes + 1, sizeof(*a->nodes));
	for (size_t i = 0; i < a->dev->n_nodes; i++)
		a->nodes[i].gpus = egs_calloc((size_t)a->dev->nodes[i].gpu_count, sizeof(*a->nodes[i].gpus));
	atomic_init(&a->stop, false);
	atomic_init(&a->server_checks, false);
	atomic_init(&a->server_pods, false);
	pthread_mutex_init(&a->mu, NULL);
	egs_clock_cond_init(&a->cv);
	egs_client_set_abort(a->hb_client, abort_check, a);
	egs_client_set_abort(a->act_client, abort_check, a);
	egs_backend_set_stop(a->be, abort_check, a);
	egs__agent_slice_init(a, cfg->server_url, cfg->token, cfg->ca_file);
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
	if (egs__agent_slice_start(a) != EGS_OK) {
		egs_agent_stop(a);
		pthread_join(a->hb_thread, NULL);
		pthread_join(a->act_thread, NULL);
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
	egs_agent_stop(a); /* the slice report thread may run without the others */
	egs__agent_slice_cleanup(a);
	egs_backend_set_stop(a->be, NULL, NULL);
	egs_client_free(a->hb_client);
	egs_client_free(a->act_client);
	pthread_cond_destroy(&a->cv);
	pthread_mutex_destroy(&a->mu);
	for (size_t i = 0; i < a->dev->n_nodes; i++)
		egs_free(a->nodes[i].gpus);
	egs_free(a->nodes);
	egs_free(a->url);
	egs_free(a->cluster);
	egs_free(a->checks_dir);
	egs_free(a->address);
	json_decref(a->unmanaged);
	egs_free(a);
}

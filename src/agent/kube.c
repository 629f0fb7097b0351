/*
 * kube.c: the Kubernetes API client's transport (kube.h): JSON requests and watch streams over
 * HTTPS with libcurl.
 *
 * Connections are kept: each call takes a curl handle from a pool and puts it back afterwards, so
 * the handle's connection serves the next call (a watch holds its handle for as long as it runs).
 * Credentials: a bearer token (read again from its file whenever the file's mtime or size changes,
 * checked at most once a second), and/or a client certificate; the CA comes from PEM data in memory
 * (CURLOPT_CAINFO_BLOB) or a file.  Answers are capped at 64 MiB, watch events at 16 MiB.
 */
#include "agent/kube.h"
#include "core/buf.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define BODY_MAX (64u * 1024 * 1024)
#define EVENT_MAX (16u * 1024 * 1024)
#define POOL_MAX 8
#define TOKEN_MAX 16384

struct egs_kube {
	struct egs_kube_config cfg; /* owned copy; cert/key/CA files are read into the PEM fields */
	pthread_mutex_t mu;         /* guards pool, auth, token_mtime, token_size, token_checked */
	CURL *pool[POOL_MAX];
	size_t n_pool;
	char *auth; /* "Authorization: Bearer ..." or NULL */
	int64_t token_mtime, token_size, token_checked;
	egs_kube_stop_fn stop;
	void *stop_arg;
};

/* A growing answer, or the line buffer of a watch. */
struct body {
	struct egs_buf text;
	size_t max;
	bool too_large;
	/* watch only */
	egs_kube_event_fn fn;
	void *arg;
	bool ended;    /* fn asked to stop */
	bool bad_json; /* an event was not JSON */
	time_t last_byte;
	int idle_s;
	struct egs_kube *k;
	CURL *h;
	egs_kube_stop_fn stop; /* the call's own stop check, or NULL */
	void *stop_arg;
};

static char *dupn(const char *s)
{
	return s ? egs_strdup(s) : NULL;
}

/* Reads a small file (a PEM bundle, a token) into a new string.  NULL when unreadable. */
static char *read_small(const char *path, size_t max)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	size_t n;

	if (!f)
		return NULL;
	buf = egs_malloc(max + 1);
	n = fread(buf, 1, max, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

/* Sets the Authorization header from token (whitespace trimmed).  Caller holds mu. */
static void set_token(struct egs_kube *k, const char *token)
{
	size_t start = 0, end = strlen(token), n;

	while (start < end && strchr(" \t\r\n", token[start]))
		start++;
	while (end > start && strchr(" \t\r\n", token[end - 1]))
		end--;
	if (k->auth) {
		explicit_bzero(k->auth, strlen(k->auth));
		egs_free(k->auth);
	}
	n = strlen("Authorization: Bearer ") + (end - start) + 1;
	k->auth = egs_malloc(n);
	snprintf(k->auth, n, "Authorization: Bearer %.*s", (int)(end - start), token + start);
}

/* Reads the token file again when it changed (checked at most once a second).  Caller holds mu. */
static void refresh_token(struct egs_kube *k)
{
	struct stat st;
	time_t now = time(NULL);
	char *t;

	if (!k->cfg.token_file || (int64_t)now == k->token_checked)
		return;
	k->token_checked = (int64_t)now;
	if (stat(k->cfg.token_file, &st) != 0)
		return; /* keep the last token: the kubelet replaces the file atomically */
	if ((int64_t)st.st_mtime == k->token_mtime && (int64_t)st.st_size == k->token_size && k->auth)
		return;
	t = read_small(k->cfg.token_file, TOKEN_MAX);
	if (!t)
		return;
	set_token(k, t);
	explicit_bzero(t, strlen(t));
	egs_free(t);
	k->token_mtime = (int64_t)st.st_mtime;
	k->token_size = (int64_t)st.st_size;
}

/* Replaces *file by its contents in *pem.  False when unreadable. */
static bool load_pem(char **pem, char **file, char *err, size_t errsz)
{
	if (*pem || !*file)
		return true;
	*pem = read_small(*file, 1024 * 1024);
	if (!*pem) {
		snprintf(err, errsz, "cannot read %s", *file);
		return false;
	}
	return true;
}

enum egs_err egs_kube_new(const struct egs_kube_config *cfg, struct egs_kube **out, char *err, size_t errsz)
{
	struct egs_kube *k = egs_calloc(1, sizeof(*k));

	EGS_ASSERT(cfg->server);
	*out = NULL;
	k->cfg = (struct egs_kube_config){
		.server = dupn(cfg->server), .token = dupn(cfg->token), .token_file = dupn(cfg->token_file),
		.ca_pem = dupn(cfg->ca_pem), .ca_file = dupn(cfg->ca_file), .cert_pem = dupn(cfg->cert_pem),
		.cert_file = dupn(cfg->cert_file), .key_pem = dupn(cfg->key_pem), .key_file = dupn(cfg->key_file),
		.insecure = cfg->insecure,
	};
	pthread_mutex_init(&k->mu, NULL);
	if (!load_pem(&k->cfg.ca_pem, &k->cfg.ca_file, err, errsz) ||
	    !load_pem(&k->cfg.cert_pem, &k->cfg.cert_file, err, errsz) ||
	    !load_pem(&k->cfg.key_pem, &k->cfg.key_file, err, errsz)) {
		egs_kube_free(k);
		return EGS_ERR_IO;
	}
	if (k->cfg.token)
		set_token(k, k->cfg.token);
	refresh_token(k);
	if (k->cfg.token_file && !k->auth) {
		snprintf(err, errsz, "cannot read the token file %s", k->cfg.token_file);
		egs_kube_free(k);
		return EGS_ERR_IO;
	}
	*out = k;
	return EGS_OK;
}

void egs_kube_free(struct egs_kube *k)
{
	if (!k)
		return;
	for (size_t i = 0; i < k->n_pool; i++)
		curl_easy_cleanup(k->pool[i]);
	if (k->auth) {
		explicit_bzero(k->auth, strlen(k->auth));
		egs_free(k->auth);
	}
	if (k->cfg.key_pem)
		explicit_bzero(k->cfg.key_pem, strlen(k->cfg.key_pem));
	if (k->cfg.token)
		explicit_bzero(k->cfg.token, strlen(k->cfg.token));
	egs_kube_config_cleanup(&k->cfg);
	pthread_mutex_destroy(&k->mu);
	egs_free(k);
}

void egs_kube_set_stop(struct egs_kube *k, egs_kube_stop_fn fn, void *arg)
{
	k->stop = fn;
	k->stop_arg = arg;
}

const char *egs_kube_server(const struct egs_kube *k)
{
	return k->cfg.server;
}

bool egs_kube_escape(const char *s, char *out, size_t outsz)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
			     strchr("-._~", *p);
		if (o + (plain ? 1 : 3) >= outsz)
			return false;
		if (plain) {
			out[o++] = (char)*p;
		} else {
			out[o++] = '%';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		}
	}
	if (o >= outsz)
		return false;
	out[o] = '\0';
	return true;
}

/* ---- handles ---- */

/* Takes a handle from the pool (or a new one) and the current Authorization header (copied into
 * *auth, caller frees). */
static CURL *take_handle(struct egs_kube *k, char **auth)
{
	CURL *h;

	pthread_mutex_lock(&k->mu);
	refresh_token(k);
	*auth = dupn(k->auth);
	h = k->n_pool ? k->pool[--k->n_pool] : NULL;
	pthread_mutex_unlock(&k->mu);
	if (!h)
		h = curl_easy_init();
	EGS_ASSERT(h);
	curl_easy_reset(h);
	return h;
}

static void give_handle(struct egs_kube *k, CURL *h, char *auth)
{
	if (auth) {
		explicit_bzero(auth, strlen(auth));
		egs_free(auth);
	}
	pthread_mutex_lock(&k->mu);
	if (k->n_pool < POOL_MAX) {
		k->pool[k->n_pool++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&k->mu);
	if (h)
		curl_easy_cleanup(h);
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct body *b = arg;
	size_t n = size * nmemb;

	if (!egs_buf_put_max(&b->text, ptr, n, b->max)) {
		b->too_large = true;
		return 0;
	}
	return n;
}

/* Progress: aborts on stop, and a watch that heard nothing for idle_s seconds. */
static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct body *b = arg;
	(void)dt, (void)dn, (void)ut, (void)un;
	if ((b->k->stop && b->k->stop(b->k->stop_arg)) || (b->stop && b->stop(b->stop_arg)))
		return 1;
	if (b->idle_s > 0 && time(NULL) - b->last_byte > b->idle_s)
		return 1;
	return 0;
}

/* Sets what every request shares: URL, TLS, headers, callbacks. */
static void set_common(struct egs_kube *k, CURL *h, const char *url, struct curl_slist *headers, struct body *b,
		       char *curl_err)
{
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "egs-agent");
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 5L);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, curl_err);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, b);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	if (k->cfg.ca_pem) {
		struct curl_blob blob = {.data = k->cfg.ca_pem, .len = strlen(k->cfg.ca_pem), .flags = CURL_BLOB_COPY};
		curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
	}
	if (k->cfg.cert_pem && k->cfg.key_pem) {
		struct curl_blob c = {.data = k->cfg.cert_pem, .len = strlen(k->cfg.cert_pem), .flags = CURL_BLOB_COPY};
		struct curl_blob kb = {.data = k->cfg.key_pem, .len = strlen(k->cfg.key_pem), .flags = CURL_BLOB_COPY};
		curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &c);
		curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
		curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &kb);
		curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
	}
	if (k->cfg.insecure) {
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	}
}

static struct curl_slist *make_headers(const char *auth, const char *content_type)
{
	struct curl_slist *l = curl_slist_append(NULL, "Accept: application/json");
	char ct[128];

	l = curl_slist_append(l, "Expect:");
	snprintf(ct, sizeof(ct), "Content-Type: %s", content_type ? content_type : "");
	l = curl_slist_append(l, ct);
	if (auth)
		l = curl_slist_append(l, auth);
	EGS_ASSERT(l);
	return l;
}

static char *make_url(const struct egs_kube *k, const char *path)
{
	size_t n = strlen(k->cfg.server) + strlen(path) + 1;
	char *url = egs_malloc(n);
	snprintf(url, n, "%s%s", k->cfg.server, path);
	return url;
}

/* Maps an HTTP status to the egs_err of kube.h. */
static enum egs_err err_of_status(long status)
{
	if (status >= 200 && status < 300)
		return EGS_OK;
	switch (status) {
	case 401: return EGS_ERR_UNAUTHENTICATED;
	case 403: return EGS_ERR_FORBIDDEN;
	case 404: return EGS_ERR_NOT_FOUND;
	case 409: return EGS_ERR_CONFLICT;
	case 410: return EGS_ERR_EXPIRED;
	case 429: return EGS_ERR_BUSY;
	default: return status >= 400 && status < 500 ? EGS_ERR_INVALID : EGS_ERR_IO;
	}
}

/* Writes the error message of a non-2xx answer: the Status object's message, else the status. */
static void status_message(long status, json_t *ans, char *err, size_t errsz)
{
	const char *msg = json_string_value(json_object_get(ans, "message"));
	snprintf(err, errsz, "HTTP %ld%s%s", status, msg ? ": " : "", msg ? msg : "");
}

enum egs_err egs_kube_call(struct egs_kube *k, const char *method, const char *path, const char *content_type,
			   json_t *body, int timeout_s, long *status, json_t **out, char *err, size_t errsz)
{
	struct body b = {.max = BODY_MAX, .k = k};
	char curl_err[CURL_ERROR_SIZE] = "", *auth = NULL, *payload = NULL, *url = make_url(k, path);
	CURL *h = take_handle(k, &auth);
	struct curl_slist *headers = make_headers(auth, body ? (content_type ? content_type : "application/json") : NULL);
	json_t *ans = NULL;
	enum egs_err rc;
	CURLcode cc;

	EGS_ASSERT(path[0] == '/' && timeout_s > 0);
	*status = 0;
	if (out)
		*out = NULL;
	err[0] = '\0';
	set_common(k, h, url, headers, &b, curl_err);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)timeout_s);
	if (body) {
		payload = json_dumps(body, JSON_COMPACT);
		EGS_ASSERT(payload);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, payload);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(payload));
	}
	if (strcmp(method, "POST") != 0 && !(strcmp(method, "GET") == 0 && !body))
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	else if (!body && strcmp(method, "POST") == 0)
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
	cc = curl_easy_perform(h);
	if (cc != CURLE_OK) {
		snprintf(err, errsz, "%s %s: %s", method, k->cfg.server,
			 b.too_large ? "the answer is too large" : curl_err[0] ? curl_err : curl_easy_strerror(cc));
		rc = EGS_ERR_IO;
		goto out;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	ans = b.text.len ? json_loadb(b.text.p, b.text.len, 0, NULL) : NULL;
	rc = err_of_status(*status);
	if (rc != EGS_OK)
		status_message(*status, ans, err, errsz);
	if (out) {
		*out = ans;
		ans = NULL;
	}
out:
	json_decref(ans);
	curl_slist_free_all(headers);
	give_handle(k, h, auth);
	egs_free(payload);
	egs_free(url);
	egs_buf_cleanup(&b.text);
	return rc;
}

/* ---- watch ---- */

/* Hands every complete line of b to its callback and keeps the rest. */
static void split_lines(struct body *b)
{
	struct egs_buf *t = &b->text;
	size_t start = 0;
	char *nl;

	while (!b->ended && (nl = memchr(t->p + start, '\n', t->len - start)) != NULL) {
		size_t n = (size_t)(nl - (t->p + start));
		if (n > 0) {
			json_t *ev = json_loadb(t->p + start, n, 0, NULL);
			if (!json_is_object(ev))
				b->bad_json = b->ended = true;
			else if (!b->fn(b->arg, ev))
				b->ended = true;
			json_decref(ev);
		}
		start += n + 1;
	}
	memmove(t->p, t->p + start, t->len - start);
	t->len -= start;
}

static size_t on_watch(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct body *b = arg;
	size_t n = size * nmemb;
	long status = 0;

	b->last_byte = time(NULL);
	if (on_body(ptr, size, nmemb, arg) != n)
		return 0;
	/* An error answer is one JSON Status object, read whole after the transfer. */
	curl_easy_getinfo(b->h, CURLINFO_RESPONSE_CODE, &status);
	if (status < 300)
		split_lines(b);
	return b->ended ? 0 : n;
}

enum egs_err egs_kube_watch(struct egs_kube *k, const char *path, int idle_s, egs_kube_event_fn fn, void *arg,
			    egs_kube_stop_fn stop, void *stop_arg, long *status, char *err, size_t errsz)
{
	struct body b = {.max = EVENT_MAX, .fn = fn, .arg = arg, .k = k, .idle_s = idle_s, .last_byte = time(NULL),
			 .stop = stop, .stop_arg = stop_arg};
	char curl_err[CURL_ERROR_SIZE] = "", *auth = NULL, *url = make_url(k, path);
	CURL *h = take_handle(k, &auth);
	struct curl_slist *headers = make_headers(auth, NULL);
	enum egs_err rc = EGS_OK;
	CURLcode cc;

	*status = 0;
	err[0] = '\0';
	b.h = h;
	set_common(k, h, url, headers, &b, curl_err);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_watch);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	cc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	if (*status >= 300) {
		json_t *ans = b.text.len ? json_loadb(b.text.p, b.text.len, 0, NULL) : NULL;
		rc = err_of_status(*status);
		status_message(*status, ans, err, errsz);
		json_decref(ans);
	} else if (b.ended && !b.bad_json) {
		rc = EGS_OK;
	} else if (cc != CURLE_OK || b.bad_json) {
		rc = b.too_large ? EGS_ERR_TOO_LARGE : EGS_ERR_IO;
		snprintf(err, errsz, "watch %s: %s", path,
			 b.bad_json ? "an event is not JSON" : b.too_large ? "an event is too large" :
			 cc == CURLE_ABORTED_BY_CALLBACK ? "stopped or silent" : curl_err[0] ? curl_err :
			 curl_easy_strerror(cc));
	}
	curl_slist_free_all(headers);
	give_handle(k, h, auth);
	egs_free(url);
	egs_buf_cleanup(&b.text);
	return rc;
}

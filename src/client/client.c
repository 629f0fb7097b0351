/*
 * client.c: libegs's HTTP core: one libcurl easy handle per client (so connections are kept alive
 * between calls), JSON bodies through jansson, and the envelope unwrapped into data or error.
 *
 * Invariants: an answer is buffered up to EGS_CLIENT_MAX_BODY and refused beyond it; redirects are not
 * followed (they would carry the bearer token elsewhere); only http and https are spoken, and https
 * always verifies the peer and its name (against the system store or the client's CA file); the token
 * is kept in one preformatted header and never copied into messages.
 */
#include "core/buf.h"
#include "core/common.h"

#include "client/internal.h"

#include <egs/egs.h>

#include <ctype.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ERRMSG_MAX 512

struct egs_client {
	CURL *curl;
	char *base; /* base URL without a trailing slash */
	char *auth; /* "Authorization: Bearer <token>", or NULL */
	char *api_key; /* kept by egs_client_authenticate() to renew an expired token, or NULL */
	char *ca_file; /* the CA certificates to trust for https (egs_client_set_ca_file), or NULL: system */
	egs_client_abort_fn abort_fn;
	void *abort_arg;
	long timeout_s; /* of the typed calls (api.c) */
	long status;    /* of the last call; 0 = no answer */
	char errmsg[ERRMSG_MAX];
	char errkey[64];    /* error.errorKey of the last answer */
	char errfield[128]; /* error.data.field of the last answer */
	char curl_err[CURL_ERROR_SIZE];
};

/* An answer's body being read. */
struct body {
	struct egs_buf text;
	bool too_large;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static bool has_ctl(const char *s)
{
	for (; *s; s++)
		if (iscntrl((unsigned char)*s))
			return true;
	return false;
}

struct egs_client *egs_client_new(const char *base_url, const char *bearer_token)
{
	struct egs_client *c = NULL;
	size_t n;

	if (!base_url || has_ctl(base_url))
		return NULL;
	if (strncasecmp(base_url, "http://", 7) != 0 && strncasecmp(base_url, "https://", 8) != 0)
		return NULL;
	if (bearer_token && has_ctl(bearer_token))
		return NULL; /* a CR or LF would let the token inject headers (egs_client_set_token checks too) */
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK)
		return NULL;

	c = egs_calloc(1, sizeof(*c));
	c->curl = curl_easy_init();
	if (!c->curl) {
		egs_free(c);
		return NULL;
	}
	n = strlen(base_url);
	while (n > 0 && base_url[n - 1] == '/')
		n--;
	c->base = egs_strndup(base_url, n);
	c->timeout_s = EGS_CLIENT_TIMEOUT_S;
	EGS_ASSERT(egs_client_set_token(c, bearer_token) == EGS_OK);
	return c;
}

/* Frees a secret without leaving it lying in freed heap memory; sets *s to NULL. */
static void wipe(char **s)
{
	if (*s) {
		volatile char *p = *s;
		while (*p)
			*p++ = '\0';
	}
	egs_free(*s);
	*s = NULL;
}

static void drop_auth(struct egs_client *c)
{
	wipe(&c->auth);
}

enum egs_err egs_client_set_token(struct egs_client *c, const char *bearer_token)
{
	size_t sz;

	if (bearer_token && has_ctl(bearer_token))
		return EGS_ERR_INVALID;
	drop_auth(c);
	if (!bearer_token || !*bearer_token)
		return EGS_OK;
	sz = strlen(bearer_token) + sizeof("Authorization: Bearer ");
	c->auth = egs_malloc(sz);
	snprintf(c->auth, sz, "Authorization: Bearer %s", bearer_token);
	return EGS_OK;
}

void egs_client_set_timeout(struct egs_client *c, long timeout_s)
{
	EGS_ASSERT(timeout_s > 0);
	c->timeout_s = timeout_s;
}

long egs__client_timeout(const struct egs_client *c)
{
	return c->timeout_s;
}

void egs_client_free(struct egs_client *c)
{
	if (!c)
		return;
	curl_easy_cleanup(c->curl);
	drop_auth(c);
	wipe(&c->api_key);
	egs_free(c->ca_file);
	egs_free(c->base);
	egs_free(c);
}

enum egs_err egs_client_set_ca_file(struct egs_client *c, const char *path)
{
	if (path) {
		FILE *f = fopen(path, "r");
		if (!f)
			return EGS_ERR_IO;
		fclose(f);
	}
	egs_free(c->ca_file);
	c->ca_file = path ? egs_strdup(path) : NULL;
	return EGS_OK;
}

void egs_client_set_abort(struct egs_client *c, egs_client_abort_fn fn, void *arg)
{
	c->abort_fn = fn;
	c->abort_arg = arg;
}

const char *egs_client_errmsg(const struct egs_client *c)
{
	return c->errmsg;
}

const char *egs_client_errkey(const struct egs_client *c)
{
	return c->errkey;
}

const char *egs_client_errfield(const struct egs_client *c)
{
	return c->errfield;
}

long egs_client_status(const struct egs_client *c)
{
	return c->status;
}

/* Stores a one-line message: control characters (a server's newlines) become spaces. */
static void set_errmsg(struct egs_client *c, const char *msg)
{
	egs_strlcpy(c->errmsg, msg, sizeof(c->errmsg));
	for (char *p = c->errmsg; *p; p++)
		if (iscntrl((unsigned char)*p))
			*p = ' ';
}

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct body *b = userdata;
	size_t n = size * nmemb;

	if (!egs_buf_put_max(&b->text, ptr, n, EGS_CLIENT_MAX_BODY)) {
		b->too_large = true;
		return 0; /* makes curl fail the transfer with CURLE_WRITE_ERROR */
	}
	return n;
}

static int on_progress(void *clientp, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	struct egs_client *c = clientp;
	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	return c->abort_fn && c->abort_fn(c->abort_arg) ? 1 : 0;
}

/* The errorKeys that name a more precise error than their status (see sdk/python/egs/exceptions.py). */
static const struct {
	const char *key;
	enum egs_err err;
} error_keys[] = {
	{"UNAUTHENTICATED", EGS_ERR_UNAUTHENTICATED},
	{"TOKEN_EXPIRED", EGS_ERR_EXPIRED},
	{"API_KEY_EXPIRED", EGS_ERR_EXPIRED},
	{"API_KEY_INVALID", EGS_ERR_BAD_REQUEST},
	{"FORBIDDEN", EGS_ERR_FORBIDDEN},
	{"GPR_ALREADY_PROVISIONED", EGS_ERR_GPR_PROVISIONED},
	{"GPR_ALREADY_RELEASED", EGS_ERR_GPR_RELEASED},
	{"GPR_NOT_PROVISIONED", EGS_ERR_GPR_NOT_PROVISIONED},
	{"GPR_ALREADY_FINISHED", EGS_ERR_GPR_FINISHED},
	{"WORKSPACE_HAS_ACTIVE_GPR", EGS_ERR_BUSY},
	{"RESOURCE_BUSY", EGS_ERR_BUSY},
	{"METHOD_NOT_ALLOWED", EGS_ERR_METHOD},
	{"VALIDATION_FAILED", EGS_ERR_INVALID},
	{"BAD_REQUEST", EGS_ERR_BAD_REQUEST},
	{"MALFORMED_JSON", EGS_ERR_BAD_REQUEST},
	{"GPR_UNSATISFIABLE", EGS_ERR_UNSATISFIABLE},
	{"STORAGE_FULL", EGS_ERR_STORAGE_FULL},
	{"STORE_UNAVAILABLE", EGS_ERR_UNAVAILABLE},
	{"TOO_MANY_CONNECTIONS", EGS_ERR_UNAVAILABLE},
};

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

static enum egs_err err_of_status(long status)
{
	switch (status) {
	case 400:
		return EGS_ERR_BAD_REQUEST;
	case 401:
		return EGS_ERR_UNAUTHENTICATED;
	case 403:
		return EGS_ERR_FORBIDDEN;
	case 404:
		return EGS_ERR_NOT_FOUND;
	case 409:
		return EGS_ERR_CONFLICT;
	case 405:
		return EGS_ERR_METHOD;
	case 413:
		return EGS_ERR_TOO_LARGE;
	case 503:
		return EGS_ERR_UNAVAILABLE;
	case 507:
		return EGS_ERR_STORAGE_FULL;
	case 422:
		return EGS_ERR_INVALID;
	default:
		if (status >= 400 && status < 500)
			return EGS_ERR_BAD_REQUEST;
		if (status == 500)
			return EGS_ERR_STORE;
		return EGS_ERR_IO; /* 502/503/504 (a proxy, a restart), 1xx, or a 3xx we did not follow */
	}
}

static enum egs_err err_of_answer(long status, json_t *error)
{
	const char *key = json_string_value(json_object_get(error, "errorKey"));

	for (size_t i = 0; key && i < EGS_ARRAY_LEN(error_keys); i++)
		if (strcmp(key, error_keys[i].key) == 0)
			return error_keys[i].err;
	/* The families: WORKSPACE_NOT_FOUND, CLUSTER_ALREADY_EXISTS, PROJECT_NOT_FOUND, ... */
	if (key && ends_with(key, "_NOT_FOUND"))
		return EGS_ERR_NOT_FOUND;
	if (key && ends_with(key, "_ALREADY_EXISTS"))
		return EGS_ERR_EXISTS;
	return err_of_status(status);
}

/* Turns an error answer into its egs_err, message and error object (new reference in *error_out). */
static enum egs_err unwrap_error(struct egs_client *c, long status, json_t *env, json_t **error_out)
{
	json_t *error = json_object_get(env, "error");
	const char *msg, *key, *field;
	char fallback[64];

	if (!json_is_object(error))
		error = NULL;
	key = json_string_value(json_object_get(error, "errorKey"));
	field = json_string_value(json_object_get(json_object_get(error, "data"), "field"));
	egs_strlcpy(c->errkey, key ? key : "", sizeof(c->errkey));
	egs_strlcpy(c->errfield, field ? field : "", sizeof(c->errfield));
	msg = json_string_value(json_object_get(error, "message"));
	if (!msg || !*msg)
		msg = json_string_value(json_object_get(env, "message"));
	if (!msg || !*msg) {
		snprintf(fallback, sizeof(fallback), "HTTP status %ld", status);
		msg = fallback;
	}
	set_errmsg(c, msg);
	*error_out = json_incref(error);
	return err_of_answer(status, error);
}

/* Sets the options of one call on the (reset) handle. */
static void set_options(struct egs_client *c, const char *method, const char *url, const char *payload,
			long timeout_s, struct curl_slist *headers, struct body *b)
{
	CURL *h = c->curl;

	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "libegs/0.1.0");
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(h, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	/* Verification is libcurl's default; said here so that no later edit turns it off unnoticed. */
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
	if (c->ca_file) { /* this file only: not the system's CA directory as well */
		curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
		curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
	}
	curl_easy_setopt(h, CURLOPT_TIMEOUT, timeout_s);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, timeout_s < 10 ? timeout_s : 10L);
	curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)EGS_CLIENT_MAX_BODY);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->curl_err);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, c);
	if (strcmp(method, "POST") == 0 && !payload)
		payload = ""; /* an empty body, never the default read callback (stdin) */
	if (payload) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, payload);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(payload));
	}
	if (strcmp(method, "GET") == 0 && !payload)
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	else if (strcmp(method, "POST") != 0)
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
}

static struct curl_slist *make_headers(const struct egs_client *c, bool has_body)
{
	struct curl_slist *l = NULL;

	l = curl_slist_append(l, "Accept: application/json");
	l = curl_slist_append(l, "Expect:"); /* no 100-continue round trip on larger bodies */
	/* Without a body, an empty value removes curl's default form Content-Type of POST. */
	l = curl_slist_append(l, has_body ? "Content-Type: application/json" : "Content-Type:");
	if (c->auth)
		l = curl_slist_append(l, c->auth);
	EGS_ASSERT(l);
	return l;
}

/* Maps a failed transfer to its error and message. */
static enum egs_err transport_error(struct egs_client *c, CURLcode rc, const struct body *b)
{
	if (b->too_large || rc == CURLE_FILESIZE_EXCEEDED) {
		set_errmsg(c, "the answer exceeds 16 MiB");
		return EGS_ERR_TOO_LARGE;
	}
	if (rc == CURLE_ABORTED_BY_CALLBACK)
		set_errmsg(c, "aborted");
	else
		set_errmsg(c, c->curl_err[0] ? c->curl_err : curl_easy_strerror(rc));
	return EGS_ERR_IO;
}

/* Unwraps a complete answer: the envelope's data on 2xx, its error object otherwise (into *out). */
static enum egs_err read_answer(struct egs_client *c, long status, const struct body *b, json_t **out)
{
	enum egs_err err;
	json_error_t jerr;
	json_t *env = b->text.len > 0 ? json_loadb(b->text.p, b->text.len, 0, &jerr) : NULL;

	*out = NULL;
	if (status >= 200 && status < 300) {
		if (b->text.len > 0 && !json_is_object(env)) {
			set_errmsg(c, "the answer is not a JSON envelope");
			err = EGS_ERR_IO;
		} else {
			*out = json_object_get(env, "data");
			*out = json_is_null(*out) ? NULL : json_incref(*out);
			err = EGS_OK;
		}
	} else {
		err = unwrap_error(c, status, env, out);
	}
	json_decref(env);
	return err;
}

/* One request and its answer: egs_client_call() without the token renewal.  The body is body
 * (serialised here) or text (already JSON, borrowed; used when body is NULL), or neither. */
static enum egs_err call_once(struct egs_client *c, const char *method, const char *path, json_t *body,
			      const char *text, long timeout_s, long *http_status, json_t **data)
{
	enum egs_err err = EGS_ERR_IO;
	struct body b = {0};
	struct curl_slist *headers = NULL;
	char *payload = NULL, *url = NULL;
	const char *send = text;
	json_t *out = NULL;
	long status = 0;
	size_t url_sz;
	CURLcode rc;

	EGS_ASSERT(c && method && path && path[0] == '/' && timeout_s > 0);
	c->errmsg[0] = '\0';
	c->errkey[0] = '\0';
	c->errfield[0] = '\0';
	c->curl_err[0] = '\0';
	if (body) {
		/* Sized first, then written once: json_dumps() grows a buffer by doubling and copies it at the
		 * end, three times the body at its peak (an agent's registration of 1,000 nodes is ~700 KB). */
		size_t n = json_dumpb(body, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
		EGS_ASSERT(n > 0); /* fails only on out of memory: jansson refuses invalid UTF-8 earlier */
		payload = malloc(n + 1);
		EGS_ASSERT(payload && json_dumpb(body, payload, n, JSON_COMPACT | JSON_ENCODE_ANY) == n);
		payload[n] = '\0';
		send = payload;
	}
	url_sz = strlen(c->base) + strlen(path) + 1;
	url = egs_malloc(url_sz);
	snprintf(url, url_sz, "%s%s", c->base, path);
	headers = make_headers(c, send != NULL);

	curl_easy_reset(c->curl); /* keeps the connection cache */
	set_options(c, method, url, send, timeout_s, headers, &b);
	rc = curl_easy_perform(c->curl);
	if (rc != CURLE_OK) {
		err = transport_error(c, rc, &b);
		if (err == EGS_ERR_TOO_LARGE) /* an answer did arrive; say which */
			curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
		goto out;
	}
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	err = read_answer(c, status, &b, &out);
out:
	c->status = status;
	if (http_status)
		*http_status = status;
	if (data)
		*data = out;
	else
		json_decref(out);
	curl_slist_free_all(headers);
	egs_buf_cleanup(&b.text);
	egs_free(url);
	free(payload);
	return err;
}

/* POST /api/v1/auth with the key; installs the token on success. */
static enum egs_err login(struct egs_client *c, const char *api_key, long timeout_s)
{
	json_t *body = json_pack("{s:s}", "apiKey", api_key ? api_key : ""), *data = NULL;
	enum egs_err err = call_once(c, "POST", "/api/v1/auth", body, NULL, timeout_s, NULL, &data);
	const char *token = json_string_value(json_object_get(data, "token"));

	if (err == EGS_OK && !(token && *token && egs_client_set_token(c, token) == EGS_OK)) {
		set_errmsg(c, "the answer to POST /api/v1/auth holds no usable token");
		err = EGS_ERR_IO;
	}
	json_decref(body);
	json_decref(data);
	return err;
}

enum egs_err egs_client_authenticate(struct egs_client *c, const char *api_key)
{
	enum egs_err err;

	EGS_ASSERT(api_key);
	wipe(&c->api_key);
	err = login(c, api_key, c->timeout_s);
	if (err == EGS_OK)
		c->api_key = egs_strdup(api_key);
	return err;
}

/* egs_client_call() and egs_client_call_text(): one of body and text. */
static enum egs_err call(struct egs_client *c, const char *method, const char *path, json_t *body, const char *text,
			 long timeout_s, long *http_status, json_t **data)
{
	enum egs_err err = call_once(c, method, path, body, text, timeout_s, http_status, data);

	/* A token outlived by a long session (a wait of hours) is renewed once with the kept key. */
	if (err == EGS_ERR_EXPIRED && c->api_key && strcmp(c->errkey, "TOKEN_EXPIRED") == 0) {
		if (data)
			json_decref(*data);
		err = login(c, c->api_key, timeout_s);
		if (err == EGS_OK)
			err = call_once(c, method, path, body, text, timeout_s, http_status, data);
		else if (data)
			*data = NULL;
	}
	return err;
}

enum egs_err egs_client_call(struct egs_client *c, const char *method, const char *path, json_t *body,
			     long timeout_s, long *http_status, json_t **data)
{
	return call(c, method, path, body, NULL, timeout_s, http_status, data);
}

enum egs_err egs_client_call_text(struct egs_client *c, const char *method, const char *path, const char *json_text,
				  long timeout_s, long *http_status, json_t **data)
{
	EGS_ASSERT(json_text);
	return call(c, method, path, NULL, json_text, timeout_s, http_status, data);
}

/*
 * egsd_harness.c: a whole egsd inside a libFuzzer process (egsd_harness.h says what it does and
 * what it does not).
 *
 * Invariant: only this thread turns egsd's event loop, and only between inputs or inside an
 * exchange, so a reply is always read after everything egsd did for it (including the group commit,
 * which holds replies until the turn's transaction is on disk).
 */
#include "egsd_harness.h"

#include "server/conn.h"

#include "server/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <event2/http.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ANSWER_MAX (16u << 20) /* kept of an answer; lists of a grown world can be long */
#define EXCHANGE_MS 2000

static struct egs_server srv;
static bool running;
static char dir[96];
static int port;
static unsigned long inputs;
static char agent_token[128];
static FILE *devnull;

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- one exchange ---- */

struct answer {
	char *p;
	size_t len, cap;
};

/* Reads what egsd has sent so far; false once the connection is closed (or broken). */
static bool drain(int fd, struct answer *a)
{
	for (;;) {
		char buf[16384];
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0)
			return false;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
		if (a->len + (size_t)n + 1 > ANSWER_MAX)
			continue; /* a long list: the rest is read and dropped, the check skips a cut answer */
		if (a->len + (size_t)n + 1 > a->cap) {
			a->cap = a->cap * 2 + (size_t)n + 1;
			a->p = realloc(a->p, a->cap);
			if (!a->p)
				abort();
		}
		memcpy(a->p + a->len, buf, (size_t)n);
		a->len += (size_t)n;
		a->p[a->len] = '\0';
	}
}

static char *exchange(const unsigned char *data, size_t len, size_t *out_len)
{
	struct answer a = { calloc(1, 1), 0, 1 };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || !a.p || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		abort();
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	int64_t deadline = mono_ms() + EXCHANGE_MS;
	bool open = true;
	for (size_t sent = 0; sent < len && open && mono_ms() < deadline;) {
		ssize_t n = send(fd, data + sent, len - sent, MSG_NOSIGNAL);
		if (n > 0)
			sent += (size_t)n;
		else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			break; /* egsd refused the rest (a 413) and closed */
		event_base_loop(srv.base, EVLOOP_NONBLOCK);
		open = drain(fd, &a);
	}
	shutdown(fd, SHUT_WR);
	while (open && mono_ms() < deadline) {
		event_base_loop(srv.base, EVLOOP_NONBLOCK);
		open = drain(fd, &a);
	}
	close(fd);
	for (int i = 0; i < 4; i++) /* let egsd see the close and free the connection */
		event_base_loop(srv.base, EVLOOP_NONBLOCK);
	*out_len = a.len;
	return a.p;
}

/* Builds a request (Connection: close) and exchanges it; returns the answer (caller frees). */
static char *request(const char *method, const char *path, enum egs_fuzz_who who, const unsigned char *body,
		     size_t len, size_t *out_len)
{
	char head[1024];
	const char *cred = who == EGS_FUZZ_ADMIN ? EGS_FUZZ_ADMIN_KEY : who == EGS_FUZZ_AGENT ? agent_token : NULL;
	int n = snprintf(head, sizeof(head),
			 "%s %s HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\nContent-Type: application/json\r\n"
			 "%s%s%sContent-Length: %zu\r\n\r\n",
			 method, path, cred ? "Authorization: Bearer " : "", cred ? cred : "", cred ? "\r\n" : "", len);
	unsigned char *msg = malloc((size_t)n + len + 1);
	if (!msg || n <= 0 || (size_t)n >= sizeof(head))
		abort();
	memcpy(msg, head, (size_t)n);
	if (len)
		memcpy(msg + n, body, len);
	char *answer = exchange(msg, (size_t)n + len, out_len);
	free(msg);
	return answer;
}

/* ---- the oracle ---- */

static int status_of(const char *p, size_t len)
{
	if (len < 12 || strncmp(p, "HTTP/1.", 7) != 0)
		return 0;
	return (int)strtol(p + 9, NULL, 10);
}

static void fail(const char *why, const char *answer, size_t len)
{
	fprintf(stderr, "fuzz: %s; egsd answered:\n%.*s\n", why, (int)(len > 4000 ? 4000 : len), answer);
	abort();
}

/* Checks one JSON answer body against the envelope rules. */
static void check_envelope(int status, const char *body, size_t blen, const char *answer, size_t len)
{
	json_t *doc = json_loadb(body, blen, 0, NULL);
	if (!doc)
		fail("a JSON answer that does not parse", answer, len);
	json_t *code = json_object_get(doc, "statusCode");
	if (code && json_integer_value(code) != status)
		fail("statusCode differs from the HTTP status", answer, len);
	if (code && status >= 400) {
		json_t *err = json_object_get(doc, "error");
		const char *key = json_string_value(json_object_get(err, "errorKey"));
		if (!key || !*key)
			fail("an error envelope without errorKey", answer, len);
		if (!strcmp(key, "VALIDATION_FAILED") && !json_string_value(json_object_get(json_object_get(err, "data"), "field")))
			fail("a VALIDATION_FAILED that names no field", answer, len);
	}
	json_decref(doc);
}

void egs_fuzz_check_answer(const char *answer, size_t len)
{
	size_t at = 0;
	while (at < len) {
		const char *p = answer + at;
		int status = status_of(p, len - at);
		if (!status)
			return;
		if (status == 500)
			fail("500", answer, len);
		const char *end = strstr(p, "\r\n\r\n");
		if (!end)
			return;
		size_t head = (size_t)(end + 4 - p), blen = 0;
		bool json = false;
		for (const char *h = p; h < end; h = strstr(h, "\r\n") + 2) {
			if (!strncasecmp(h, "Content-Length:", 15))
				blen = strtoul(h + 15, NULL, 10);
			if (!strncasecmp(h, "Content-Type: application/json", 30))
				json = true;
		}
		if (head + blen > len - at)
			return; /* cut short (the exchange's deadline) */
		if (json && blen)
			check_envelope(status, p + head, blen, answer, len);
		at += head + blen;
	}
}

/* ---- the world ---- */

/* A call of the world's set-up that must succeed; returns its data (caller decrefs). */
static json_t *must(const char *method, const char *path, enum egs_fuzz_who who, const char *body)
{
	size_t len;
	char *answer = request(method, path, who, (const unsigned char *)body, strlen(body), &len);
	const char *b = strstr(answer, "\r\n\r\n");
	json_t *doc = b && status_of(answer, len) == 200 ? json_loads(b + 4, 0, NULL) : NULL;
	if (!doc)
		fail("the harness's world could not be built", answer, len);
	free(answer);
	json_t *data = json_incref(json_object_get(doc, "data"));
	json_decref(doc);
	return data;
}

static void build_world(void)
{
	json_t *c = must("POST", "/api/v1/clusters", EGS_FUZZ_ADMIN, "{\"clusterName\":\"c1\"}");
	snprintf(agent_token, sizeof(agent_token), "%s", json_string_value(json_object_get(c, "agentToken")));
	json_decref(c);
	json_t *nodes = json_array(), *beats = json_array();
	for (int n = 1; n <= 2; n++) {
		json_t *gpus = json_array();
		char name[8];
		snprintf(name, sizeof(name), "n%d", n);
		for (int g = 0; g < 8; g++) {
			char uuid[32];
			snprintf(uuid, sizeof(uuid), "GPU-%s-%d", name, g);
			json_array_append_new(gpus, json_pack("{s:s, s:i}", "uuid", uuid, "index", g));
		}
		json_array_append_new(nodes, json_pack("{s:s, s:s, s:s, s:i, s:i, s:o}", "name", name, "instanceType",
						       "p5.48xlarge", "gpuModel", "NVIDIA-H100-80GB-HBM3", "gpuCount", 8,
						       "memoryMiB", 81920, "gpus", gpus));
		json_array_append_new(beats, json_pack("{s:s, s:s, s:s}", "name", name, "health", "Healthy", "attachedGpr", ""));
	}
	json_t *reg_body = json_pack("{s:s, s:o}", "clusterName", "c1", "nodes", nodes);
	json_t *beat_body = json_pack("{s:s, s:o}", "clusterName", "c1", "nodes", beats);
	char *reg = json_dumps(reg_body, JSON_COMPACT), *beat = json_dumps(beat_body, JSON_COMPACT);
	json_decref(reg_body);
	json_decref(beat_body);
	json_decref(must("POST", "/api/v1/agent/register", EGS_FUZZ_AGENT, reg));
	json_decref(must("POST", "/api/v1/agent/heartbeat", EGS_FUZZ_AGENT, beat));
	free(reg);
	free(beat);
	static const char *const setup[][3] = {
		{ "POST", "/api/v1/slice-workspace", "{\"workspaceName\":\"w\",\"clusters\":[\"c1\"],\"namespaces\":[\"w-ns\"]}" },
		{ "POST", "/api/v1/slice-workspace", "{\"workspaceName\":\"w2\",\"clusters\":[\"c1\"]}" },
		{ "POST", "/api/v1/gpr-template",
		  "{\"name\":\"t1\",\"clusterName\":\"c1\",\"numberOfGPUs\":1,\"numberOfGPUNodes\":1,\"exitDuration\":\"1h\"}" },
		{ "POST", "/api/v1/gpr-template-binding",
		  "{\"workspaceName\":\"w\",\"clusters\":[{\"clusterName\":\"c1\",\"defaultTemplateName\":\"t1\",\"templates\":[\"t1\"]}]}" },
		{ "POST", "/api/v1/gpr",
		  "{\"gprName\":\"big\",\"sliceName\":\"w\",\"numberOfGPUs\":8,\"numberOfGPUNodes\":2,\"exitDuration\":\"1h\"}" },
		{ "POST", "/api/v1/gpr",
		  "{\"gprName\":\"waiting\",\"sliceName\":\"w\",\"numberOfGPUs\":8,\"numberOfGPUNodes\":1,\"exitDuration\":\"1h\"}" },
	};
	for (size_t i = 0; i < sizeof(setup) / sizeof(setup[0]); i++)
		json_decref(must(setup[i][0], setup[i][1], EGS_FUZZ_ADMIN, setup[i][2]));
}

static void start(void)
{
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(dir, sizeof(dir), "%s/egs-fuzz-XXXXXX", base);
	char key_file[160];
	if (!mkdtemp(dir))
		abort();
	snprintf(key_file, sizeof(key_file), "%s/fuzz-admin.key", dir);
	FILE *f = fopen(key_file, "w");
	if (!f || fputs(EGS_FUZZ_ADMIN_KEY "\n", f) < 0 || fclose(f) != 0)
		abort();
	memset(&srv, 0, sizeof(srv));
	srv.log = devnull;
	srv.log_requests = false;
	srv.state_cfg.backfill = 1;
	srv.admin_key_file = key_file;
	if (egs_server_start(&srv, "127.0.0.1:0", dir, true) != EGS_OK)
		abort();
	srv.admin_key_file = NULL; /* (key_file goes out of scope; it was read) */
	port = egs_conns_port(srv.conns);
	if (!port)
		abort();
	running = true;
	build_world();
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static void stop(void)
{
	egs_server_stop(&srv);
	nftw(dir, remove_one, 8, FTW_DEPTH | FTW_PHYS);
	running = false;
}

static void at_exit(void)
{
	if (running)
		stop();
}

void egs_fuzz_egsd_ready(void)
{
	if (!devnull) {
		/* Webhooks the fuzzer configures go to a proxy on a closed loopback port: no DNS lookup, no
		 * packet leaves the machine, and egsd's delivery code (notify.c) still runs and fails. */
		setenv("http_proxy", "http://127.0.0.1:9", 1);
		setenv("https_proxy", "http://127.0.0.1:9", 1);
		unsetenv("no_proxy");
		unsetenv("NO_PROXY");
		devnull = fopen("/dev/null", "w");
		if (!devnull || sodium_init() < 0)
			abort();
		atexit(at_exit);
	}
	if (running && ++inputs % EGS_FUZZ_RESET == 0)
		stop();
	if (!running)
		start();
}

char *egs_fuzz_egsd_raw(const unsigned char *data, size_t len, size_t *out_len)
{
	return exchange(data, len, out_len);
}

int egs_fuzz_egsd_call(const char *method, const char *path, enum egs_fuzz_who who, const unsigned char *body,
		       size_t len)
{
	size_t alen;
	char *answer = request(method, path, who, body, len, &alen);
	egs_fuzz_check_answer(answer, alen);
	int status = status_of(answer, alen);
	free(answer);
	return status;
}

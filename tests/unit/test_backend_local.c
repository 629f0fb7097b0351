/*
 * test_backend_local.c: the local cluster backend: attach/detach and their idempotence, the state
 * file round trip across reopen, the state directory lock, the hooks' environment, hook failures
 * reported with their last output line, hook timeouts and interruption, and shared attachments (GPU
 * sharing): a set per node with their shares, over-commit and dedicated conflicts, detach freeing
 * exactly one GPR's shares, the file round trip and the hooks' EGS_GPU_SHARES.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/backend.h"

#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct fixture {
	char dir[64];
	char state_dir[128];
	char path[192]; /* the state file */
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/egs-test-backend-XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->state_dir, sizeof(f->state_dir), "%s/state/sub", f->dir); /* created with parents */
	snprintf(f->path, sizeof(f->path), "%s/attach-state.json", f->state_dir);
	*state = f;
	return 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

static struct egs_backend *open_backend(struct fixture *f, const char *on_attach, const char *on_detach,
					int timeout_s)
{
	struct egs_backend_local_config cfg = {
		.state_dir = f->state_dir,
		.cluster = "worker-1",
		.on_attach = on_attach,
		.on_detach = on_detach,
		.hook_timeout_s = timeout_s,
	};
	struct egs_backend *b = NULL;
	char err[512] = "";
	enum egs_err rc = egs_backend_local_new(&cfg, &b, err, sizeof(err));
	if (rc != EGS_OK)
		fail_msg("egs_backend_local_new: %s", err);
	return b;
}

static enum egs_err attach(struct egs_backend *b, const char *node, const char *gpr, char *msg, size_t msgsz)
{
	static char *ns_v[] = {"llm-dev", "llm-prod"};
	struct egs_strlist ns = {.v = ns_v, .n = 2};
	struct egs_attach_req req = {
		.node = node,
		.gpr_id = gpr,
		.workspace = "llm-gpt",
		.namespaces = &ns,
		.start_time = "2026-11-23T10:00:00Z",
		.exit_time = "2026-11-23T16:00:00Z",
	};
	return egs_backend_attach(b, &req, msg, msgsz);
}

/* A shared attach of gpr on node: shares "uuid=centi" pairs, n of them. */
static enum egs_err attach_shared(struct egs_backend *b, const char *node, const char *gpr,
				  const struct egs_gpu_share *shares, size_t n, char *msg, size_t msgsz)
{
	static char *ns_v[] = {"team-a"};
	struct egs_strlist ns = {.v = ns_v, .n = 1};
	struct egs_attach_req req = {
		.node = node,
		.gpr_id = gpr,
		.workspace = "team-a",
		.namespaces = &ns,
		.start_time = "",
		.exit_time = "",
		.shares = shares,
		.n_shares = n,
	};
	return egs_backend_attach(b, &req, msg, msgsz);
}

static size_t shared_count(struct egs_backend *b, const char *node)
{
	struct egs_strlist l = {0};
	egs_backend_shared_gprs(b, node, &l);
	size_t n = l.n;
	egs_strlist_cleanup(&l);
	return n;
}

static char *slurp(const char *path)
{
	FILE *fp = fopen(path, "rb");
	char *buf = calloc(1, 65536);
	if (fp) {
		size_t n = fread(buf, 1, 65535, fp);
		buf[n] = '\0';
		fclose(fp);
	}
	return buf;
}

static void test_attach_detach_round_trip(void **state)
{
	struct fixture *f = *state;
	struct egs_backend *b = open_backend(f, NULL, NULL, 0);
	struct egs_attachment *atts;
	char msg[256], gpr[64];
	json_error_t jerr;
	json_t *root, *node;
	size_t n;

	assert_false(egs_backend_attached_gpr(b, "n1", gpr, sizeof(gpr)));
	assert_string_equal(gpr, "");
	assert_int_equal(attach(b, "n1", "gpr-1bb22a0b-9388", msg, sizeof(msg)), EGS_OK);
	assert_string_equal(msg, "attached");
	assert_true(egs_backend_attached_gpr(b, "n1", gpr, sizeof(gpr)));
	assert_string_equal(gpr, "gpr-1bb22a0b-9388");

	/* Idempotent: the same GPR again is fine; another GPR conflicts. */
	assert_int_equal(attach(b, "n1", "gpr-1bb22a0b-9388", msg, sizeof(msg)), EGS_OK);
	assert_string_equal(msg, "already attached");
	assert_int_equal(attach(b, "n1", "gpr-other", msg, sizeof(msg)), EGS_ERR_CONFLICT);
	assert_non_null(strstr(msg, "gpr-1bb22a0b-9388"));
	assert_int_equal(attach(b, "n2", "gpr-1bb22a0b-9388", msg, sizeof(msg)), EGS_OK);

	/* The state file says so, in the documented shape. */
	root = json_load_file(f->path, 0, &jerr);
	assert_non_null(root);
	assert_int_equal(json_integer_value(json_object_get(root, "version")), 1);
	assert_string_equal(json_string_value(json_object_get(root, "cluster")), "worker-1");
	node = json_object_get(json_object_get(root, "nodes"), "n1");
	assert_string_equal(json_string_value(json_object_get(node, "gprId")), "gpr-1bb22a0b-9388");
	assert_string_equal(json_string_value(json_object_get(node, "workspace")), "llm-gpt");
	assert_string_equal(json_string_value(json_array_get(json_object_get(node, "namespaces"), 1)), "llm-prod");
	assert_string_equal(json_string_value(json_object_get(node, "exitTime")), "2026-11-23T16:00:00Z");
	json_decref(root);
	egs_backend_free(b);

	/* Reopened: the attachments survived. */
	b = open_backend(f, NULL, NULL, 0);
	egs_backend_list(b, &atts, &n);
	assert_int_equal(n, 2);
	for (size_t i = 0; i < n; i++) {
		assert_string_equal(atts[i].gpr_id, "gpr-1bb22a0b-9388");
		assert_string_equal(atts[i].workspace, "llm-gpt");
		assert_int_equal(atts[i].namespaces.n, 2);
		assert_string_equal(atts[i].start_time, "2026-11-23T10:00:00Z");
		assert_true(strlen(atts[i].attached_at) == 20);
	}
	egs_attachments_free(atts, n);

	/* Detach: of another GPR or of a free node changes nothing; of the right one detaches. */
	assert_int_equal(egs_backend_detach(b, "n1", "gpr-other", msg, sizeof(msg)), EGS_OK);
	assert_string_equal(msg, "not attached");
	assert_true(egs_backend_attached_gpr(b, "n1", gpr, sizeof(gpr)));
	assert_int_equal(egs_backend_detach(b, "n9", "gpr-1bb22a0b-9388", msg, sizeof(msg)), EGS_OK);
	assert_string_equal(msg, "not attached");
	assert_int_equal(egs_backend_detach(b, "n1", "gpr-1bb22a0b-9388", msg, sizeof(msg)), EGS_OK);
	assert_string_equal(msg, "detached");
	assert_false(egs_backend_attached_gpr(b, "n1", gpr, sizeof(gpr)));
	assert_int_equal(egs_backend_detach(b, "n1", "gpr-1bb22a0b-9388", msg, sizeof(msg)), EGS_OK);
	assert_string_equal(msg, "not attached");
	egs_backend_free(b);

	b = open_backend(f, NULL, NULL, 0);
	egs_backend_list(b, &atts, &n);
	assert_int_equal(n, 1);
	assert_string_equal(atts[0].node, "n2");
	egs_attachments_free(atts, n);
	egs_backend_free(b);
}

static void test_lock_and_bad_state(void **state)
{
	struct fixture *f = *state;
	struct egs_backend *b = open_backend(f, NULL, NULL, 0), *b2 = NULL;
	struct egs_backend_local_config cfg = {.state_dir = f->state_dir, .cluster = "worker-1"};
	char err[512], msg[128];
	FILE *fp;

	/* One agent per state directory. */
	assert_int_equal(egs_backend_local_new(&cfg, &b2, err, sizeof(err)), EGS_ERR_IO);
	assert_null(b2);
	assert_non_null(strstr(err, "another egs-agent"));
	assert_int_equal(attach(b, "n1", "gpr-1", msg, sizeof(msg)), EGS_OK);
	egs_backend_free(b);

	/* The state of another cluster is refused. */
	cfg.cluster = "worker-2";
	assert_int_equal(egs_backend_local_new(&cfg, &b2, err, sizeof(err)), EGS_ERR_INVALID);
	assert_non_null(strstr(err, "belongs to cluster 'worker-1'"));

	/* A corrupt file is an error naming the file, never silently an empty state. */
	fp = fopen(f->path, "w");
	assert_non_null(fp);
	fputs("{\"version\": 1,\n \"cluster\": ", fp);
	fclose(fp);
	cfg.cluster = "worker-1";
	assert_int_equal(egs_backend_local_new(&cfg, &b2, err, sizeof(err)), EGS_ERR_INVALID);
	assert_non_null(strstr(err, f->path));
	assert_null(b2);
}

static void test_hook_environment(void **state)
{
	struct fixture *f = *state;
	char cmd[512], env_path[192], msg[256];
	struct egs_backend *b;
	char *env;

	snprintf(env_path, sizeof(env_path), "%s/env.txt", f->dir);
	snprintf(cmd, sizeof(cmd), "env | grep '^EGS_' | sort > '%s'; echo hook ran", env_path);
	setenv("EGS_NODE", "inherited-value-must-be-replaced", 1);
	b = open_backend(f, cmd, cmd, 10);
	assert_int_equal(attach(b, "h100-node-1", "gpr-1bb22a0b-9388", msg, sizeof(msg)), EGS_OK);
	assert_string_equal(msg, "attached");
	env = slurp(env_path);
	assert_string_equal(env, "EGS_ACTION=attach\n"
				 "EGS_CLUSTER=worker-1\n"
				 "EGS_EXIT_TIME=2026-11-23T16:00:00Z\n"
				 "EGS_GPR_ID=gpr-1bb22a0b-9388\n"
				 "EGS_GPU_SHARES=\n"
				 "EGS_NAMESPACES=llm-dev,llm-prod\n"
				 "EGS_NODE=h100-node-1\n"
				 "EGS_SHARING_MODE=dedicated\n"
				 "EGS_START_TIME=2026-11-23T10:00:00Z\n"
				 "EGS_WORKSPACE=llm-gpt\n");
	free(env);
	unlink(env_path);

	/* The detach hook sees the attachment's values. */
	assert_int_equal(egs_backend_detach(b, "h100-node-1", "gpr-1bb22a0b-9388", msg, sizeof(msg)), EGS_OK);
	env = slurp(env_path);
	assert_non_null(strstr(env, "EGS_ACTION=detach\n"));
	assert_non_null(strstr(env, "EGS_WORKSPACE=llm-gpt\n"));
	assert_non_null(strstr(env, "EGS_NAMESPACES=llm-dev,llm-prod\n"));
	free(env);
	unsetenv("EGS_NODE");
	egs_backend_free(b);
}

static void test_hook_failure(void **state)
{
	struct fixture *f = *state;
	struct egs_backend *b;
	char msg[256], gpr[64];

	b = open_backend(f, "echo preparing; echo 'no capacity on switch sw-3' >&2; echo; exit 3", NULL, 10);
	assert_int_equal(attach(b, "n1", "gpr-1", msg, sizeof(msg)), EGS_ERR_IO);
	assert_string_equal(msg, "no capacity on switch sw-3");
	assert_false(egs_backend_attached_gpr(b, "n1", gpr, sizeof(gpr)));
	assert_int_equal(access(f->path, F_OK), -1); /* nothing was ever recorded */
	egs_backend_free(b);

	b = open_backend(f, "exit 7", NULL, 10);
	assert_int_equal(attach(b, "n1", "gpr-1", msg, sizeof(msg)), EGS_ERR_IO);
	assert_string_equal(msg, "exited with status 7");
	egs_backend_free(b);

	b = open_backend(f, "kill -9 $$", NULL, 10);
	assert_int_equal(attach(b, "n1", "gpr-1", msg, sizeof(msg)), EGS_ERR_IO);
	assert_string_equal(msg, "killed by signal 9");
	egs_backend_free(b);

	/* A failed detach hook leaves the node attached. */
	b = open_backend(f, "true", "echo drain failed: pods still running; exit 1", 10);
	assert_int_equal(attach(b, "n1", "gpr-1", msg, sizeof(msg)), EGS_OK);
	assert_int_equal(egs_backend_detach(b, "n1", "gpr-1", msg, sizeof(msg)), EGS_ERR_IO);
	assert_string_equal(msg, "drain failed: pods still running");
	assert_true(egs_backend_attached_gpr(b, "n1", gpr, sizeof(gpr)));
	egs_backend_free(b);
}

static bool stop_now(void *arg)
{
	(void)arg;
	return true;
}

static double elapsed_s(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

static void test_hook_timeout_and_stop(void **state)
{
	struct fixture *f = *state;
	struct egs_backend *b;
	struct timespec t0;
	char msg[256], gpr[64];

	/* The hook's children die with it: the whole process group is killed. */
	b = open_backend(f, "sleep 30 & sleep 30", NULL, 1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(attach(b, "n1", "gpr-1", msg, sizeof(msg)), EGS_ERR_IO);
	assert_string_equal(msg, "timed out after 1 s");
	assert_true(elapsed_s(&t0) < 5);
	assert_false(egs_backend_attached_gpr(b, "n1", gpr, sizeof(gpr)));

	egs_backend_set_stop(b, stop_now, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(attach(b, "n1", "gpr-1", msg, sizeof(msg)), EGS_ERR_IO);
	assert_string_equal(msg, "interrupted");
	assert_true(elapsed_s(&t0) < 2);
	egs_backend_free(b);

	/* A hook that leaves a background job holding its output open still completes. */
	b = open_backend(f, "sleep 3 & echo started", NULL, 10);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(attach(b, "n1", "gpr-1", msg, sizeof(msg)), EGS_OK);
	assert_true(elapsed_s(&t0) < 2);
	egs_backend_free(b);
}

static void test_shared_attachments(void **state)
{
	struct fixture *f = *state;
	char cmd[512], env_path[192], msg[256], gpr[64];
	snprintf(env_path, sizeof(env_path), "%s/env.txt", f->dir);
	snprintf(cmd, sizeof(cmd), "env | grep '^EGS_GPU_SHARES\\|^EGS_SHARING_MODE' | sort > '%s'", env_path);
	struct egs_backend *b = open_backend(f, cmd, NULL, 10);
	const struct egs_gpu_share small[] = {{"GPU-a", 20}}, big[] = {{"GPU-a", 60}, {"GPU-b", 60}};
	const struct egs_gpu_share third[] = {{"GPU-a", 25}, {"GPU-b", 25}};

	/* Seed 003: 0.2 then 1.2 on two devices, two GPRs on one node. */
	assert_int_equal(attach_shared(b, "n1", "gpr-small", small, 1, msg, sizeof(msg)), EGS_OK);
	char *env = slurp(env_path);
	assert_string_equal(env, "EGS_GPU_SHARES=GPU-a=0.20\nEGS_SHARING_MODE=shared\n");
	free(env);
	assert_int_equal(attach_shared(b, "n1", "gpr-big", big, 2, msg, sizeof(msg)), EGS_OK);
	assert_int_equal(shared_count(b, "n1"), 2);
	assert_false(egs_backend_attached_gpr(b, "n1", gpr, sizeof(gpr))); /* no dedicated attachment */
	/* Repeats succeed at once; a third that would over-commit GPU-a (0.80 + 0.25) is refused. */
	assert_int_equal(attach_shared(b, "n1", "gpr-big", big, 2, msg, sizeof(msg)), EGS_OK);
	assert_string_equal(msg, "already attached");
	assert_int_equal(attach_shared(b, "n1", "gpr-third", third, 2, msg, sizeof(msg)), EGS_ERR_CONFLICT);
	assert_non_null(strstr(msg, "GPU-a"));
	/* A dedicated GPR cannot take a node holding shares, nor shares a dedicated node. */
	assert_int_equal(attach(b, "n1", "gpr-whole", msg, sizeof(msg)), EGS_ERR_CONFLICT);
	assert_int_equal(attach(b, "n2", "gpr-whole", msg, sizeof(msg)), EGS_OK);
	assert_int_equal(attach_shared(b, "n2", "gpr-third", third, 2, msg, sizeof(msg)), EGS_ERR_CONFLICT);
	egs_backend_free(b);

	/* The file keeps both kinds across a reopen. */
	b = open_backend(f, NULL, NULL, 0);
	assert_int_equal(shared_count(b, "n1"), 2);
	assert_true(egs_backend_attached_gpr(b, "n2", gpr, sizeof(gpr)));
	assert_string_equal(gpr, "gpr-whole");
	struct egs_attachment *atts;
	size_t n, seen = 0;
	egs_backend_list(b, &atts, &n);
	assert_int_equal(n, 3);
	for (size_t i = 0; i < n; i++)
		if (!strcmp(atts[i].gpr_id, "gpr-big")) {
			assert_int_equal(atts[i].n_shares, 2);
			assert_string_equal(atts[i].shares[1].uuid, "GPU-b");
			assert_int_equal(atts[i].shares[1].centi, 60);
			seen++;
		}
	assert_int_equal(seen, 1);
	egs_attachments_free(atts, n);

	/* Detaching the 0.2 frees exactly its share: the third GPR (0.25 on each) fits now. */
	assert_int_equal(egs_backend_detach(b, "n1", "gpr-small", msg, sizeof(msg)), EGS_OK);
	assert_string_equal(msg, "detached");
	assert_int_equal(shared_count(b, "n1"), 1);
	assert_int_equal(attach_shared(b, "n1", "gpr-third", third, 2, msg, sizeof(msg)), EGS_OK);
	assert_int_equal(egs_backend_detach(b, "n1", "gpr-small", msg, sizeof(msg)), EGS_OK);
	assert_string_equal(msg, "not attached");
	/* Without a GPR id only a dedicated attachment is detached. */
	assert_int_equal(egs_backend_detach(b, "n1", NULL, msg, sizeof(msg)), EGS_OK);
	assert_string_equal(msg, "not attached");
	assert_int_equal(shared_count(b, "n1"), 2);
	egs_backend_free(b);

	/* A malformed share in the file is an error naming the file. */
	FILE *fp = fopen(f->path, "w");
	assert_non_null(fp);
	fputs("{\"version\": 1, \"cluster\": \"worker-1\", \"nodes\": {}, \"shared\": [{\"node\": \"n1\", "
	      "\"gprId\": \"g\", \"shares\": {\"GPU-a\": \"1.50\"}}]}", fp);
	fclose(fp);
	struct egs_backend_local_config cfg = {.state_dir = f->state_dir, .cluster = "worker-1"};
	char err[512];
	assert_int_equal(egs_backend_local_new(&cfg, &b, err, sizeof(err)), EGS_ERR_INVALID);
	assert_non_null(strstr(err, "shared[0]"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_attach_detach_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lock_and_bad_state, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hook_environment, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hook_failure, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hook_timeout_and_stop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_shared_attachments, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

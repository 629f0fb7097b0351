/*
 * test_checks.c: the pre-provisioning and post-exit checks over the mock device backend's timelines:
 * each built-in check passing, failing and skipping with the output an operator sees, the run order
 * and the costly check skipped after a failure, list parsing, summaries, the JSON form, and the per-GPR
 * log files.  The connectivity check talks to real listeners on 127.0.0.1.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/checks.h"
#include "agent/peer.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#define T0 1700000000LL

/* One node, 2 GPUs: a process appears on GPU 1 at 10 s and goes at 20 s; GPU 0 reads less memory than
 * advertised from 30 s to 40 s; GPU 1 falls off the bus at 100 s. */
static const char devices_yaml[] = "nodes:\n"
				   "  - name: n1\n"
				   "    instanceType: p5\n"
				   "    gpuModel: H100\n"
				   "    gpuCount: 2\n"
				   "    memoryMiB: 81920\n"
				   "    gpus:\n"
				   "      - timeline:\n"
				   "          - {at: 30, memTotalMiB: 40960}\n"
				   "          - {at: 40, memTotalMiB: 81920}\n"
				   "      - timeline:\n"
				   "          - {at: 10, processes: [{pid: 4242, name: python, memUsedMiB: 2048}]}\n"
				   "          - {at: 20, processes: []}\n"
				   "          - {at: 100, lost: true}\n";

struct fixture {
	struct egs_devices *dev;
	char dir[64];
	struct egs_checks_config cfg;
	struct egs_check_ctx ctx;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char err[256];

	if (egs_devices_mock_parse(devices_yaml, strlen(devices_yaml), "d.yaml", "worker-1", &f->dev, err,
				   sizeof(err)) != EGS_OK)
		return -1;
	egs_devices_mock_set_start(f->dev, T0);
	snprintf(f->dir, sizeof(f->dir), "/tmp/egs-test-checks-XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	f->cfg.pre = egs_checks_all(EGS_CHECK_PRE);
	f->cfg.post = egs_checks_all(EGS_CHECK_POST);
	f->cfg.storage_path = f->dir;
	f->cfg.connect_timeout_ms = 500;
	f->ctx = (struct egs_check_ctx){.cfg = &f->cfg, .dev = f->dev, .node = 0, .cluster = "worker-1",
					.gpr_id = "gpr-1", .phase = EGS_CHECK_PRE, .now = T0};
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
	egs_devices_free(f->dev);
	free(f);
	return 0;
}

static const struct egs_check_result *result(const struct egs_check_report *rep, const char *name)
{
	for (size_t i = 0; i < rep->n; i++)
		if (strcmp(rep->results[i].name, name) == 0)
			return &rep->results[i];
	fail_msg("no result for %s", name);
	return NULL;
}

static void expect(const struct egs_check_report *rep, const char *name, enum egs_check_status st, const char *text)
{
	const struct egs_check_result *r = result(rep, name);
	if (r->status != st || !strstr(r->output, text))
		fail_msg("%s: status %d output '%s'; wanted status %d with '%s'", name, r->status, r->output, st, text);
}

static void test_all_pass_single_node(void **state)
{
	struct fixture *f = *state;
	struct egs_check_report rep;
	char sum[300];

	egs_checks_run(&f->ctx, &rep);
	assert_int_equal(rep.n, 6);
	assert_true(egs_checks_ok(&rep));
	assert_string_equal(rep.results[0].name, "node-health");
	assert_string_equal(rep.results[5].name, "nccl");
	expect(&rep, "node-health", EGS_CHECK_PASSED, "2 GPUs healthy, hottest");
	expect(&rep, "gpu-inventory", EGS_CHECK_PASSED, "2 GPUs of H100 with at least 81920 MiB each");
	expect(&rep, "gpu-processes", EGS_CHECK_PASSED, "no compute process");
	expect(&rep, "storage", EGS_CHECK_PASSED, "is present");
	expect(&rep, "connectivity", EGS_CHECK_SKIPPED, "single-node GPR");
	expect(&rep, "nccl", EGS_CHECK_SKIPPED, "no --check-nccl command");
	egs_checks_summary(&rep, sum, sizeof(sum));
	assert_string_equal(sum, "pre-checks passed: node-health, gpu-inventory, gpu-processes, storage; skipped: "
				 "connectivity, nccl");
}

static void test_stray_process_fails(void **state)
{
	struct fixture *f = *state;
	struct egs_check_report rep;
	char sum[300];

	f->ctx.now = T0 + 10;
	f->cfg.nccl_command = "true";
	f->ctx.n_peers = 1;
	f->ctx.peers = &(struct egs_check_peer){.node = "n2"};
	egs_checks_run(&f->ctx, &rep);
	assert_false(egs_checks_ok(&rep));
	expect(&rep, "gpu-processes", EGS_CHECK_FAILED, "GPU 1 runs pid 4242 (python, 2048 MiB)");
	expect(&rep, "storage", EGS_CHECK_PASSED, ""); /* cheap checks still run after a failure */
	expect(&rep, "connectivity", EGS_CHECK_SKIPPED, "no address known for the 1 other node(s)");
	expect(&rep, "nccl", EGS_CHECK_SKIPPED, "not run: gpu-processes failed");
	assert_string_equal(rep.results[rep.failed].name, "gpu-processes");
	egs_checks_summary(&rep, sum, sizeof(sum));
	assert_string_equal(sum, "pre-check gpu-processes failed: GPU 1 runs pid 4242 (python, 2048 MiB)");

	/* The post-exit checks see it too: a drain that left a process behind. */
	f->ctx.phase = EGS_CHECK_POST;
	egs_checks_run(&f->ctx, &rep);
	assert_int_equal(rep.n, 3);
	expect(&rep, "gpu-processes", EGS_CHECK_FAILED, "pid 4242");
	egs_checks_summary(&rep, sum, sizeof(sum));
	assert_string_equal(sum, "post-check gpu-processes failed: GPU 1 runs pid 4242 (python, 2048 MiB)");
	f->ctx.now = T0 + 20;
	egs_checks_run(&f->ctx, &rep);
	assert_true(egs_checks_ok(&rep));
	egs_checks_summary(&rep, sum, sizeof(sum));
	assert_string_equal(sum, "post-checks passed: node-health, gpu-processes, storage");
}

static void test_inventory_and_health(void **state)
{
	struct fixture *f = *state;
	struct egs_check_report rep;

	f->ctx.now = T0 + 35;
	egs_checks_run(&f->ctx, &rep);
	expect(&rep, "node-health", EGS_CHECK_PASSED, "");
	expect(&rep, "gpu-inventory", EGS_CHECK_FAILED, "GPU 0 (");
	expect(&rep, "gpu-inventory", EGS_CHECK_FAILED, ") has 40960 MiB, 81920 MiB advertised");

	f->ctx.now = T0 + 100;
	egs_checks_run(&f->ctx, &rep);
	expect(&rep, "node-health", EGS_CHECK_FAILED, "GPU 1 (");
	expect(&rep, "node-health", EGS_CHECK_FAILED, ") fell off the bus");
	expect(&rep, "gpu-inventory", EGS_CHECK_FAILED, "1 of 2 advertised GPUs answer (GPU 1,");
	assert_string_equal(rep.results[rep.failed].name, "node-health");
}

static void test_storage(void **state)
{
	struct fixture *f = *state;
	struct egs_check_report rep;
	char path[128], pattern[128];
	int fd;

	f->cfg.pre = 1u << 3; /* storage alone */
	snprintf(pattern, sizeof(pattern), "%s/{node}/data", f->dir);
	f->cfg.storage_path = pattern;
	egs_checks_run(&f->ctx, &rep);
	assert_int_equal(rep.n, 1);
	snprintf(path, sizeof(path), "%s/n1/data: No such file or directory", f->dir);
	expect(&rep, "storage", EGS_CHECK_FAILED, path);

	snprintf(path, sizeof(path), "%s/n1", f->dir);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/n1/data", f->dir);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	close(fd);
	egs_checks_run(&f->ctx, &rep);
	expect(&rep, "storage", EGS_CHECK_FAILED, "is not a directory");

	unlink(path);
	assert_int_equal(mkdir(path, 0700), 0);
	egs_checks_run(&f->ctx, &rep);
	expect(&rep, "storage", EGS_CHECK_PASSED, " free");

	f->cfg.storage_path = NULL;
	egs_checks_run(&f->ctx, &rep);
	expect(&rep, "storage", EGS_CHECK_SKIPPED, "no --check-storage path");
}

/* A port nothing listens on (bound, then closed). */
static int dead_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

/* A socket that accepts connections (the kernel does) but never says anything. */
static int mute_listener(int *port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 4), 0);
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	*port = ntohs(sa.sin_port);
	return fd;
}

static void test_connectivity(void **state)
{
	struct fixture *f = *state;
	struct egs_peer_listener *l1 = NULL, *l2 = NULL;
	struct egs_check_peer peers[3];
	struct egs_check_report rep;
	char err[256], want[256];
	int mute_port, mute = mute_listener(&mute_port);

	assert_int_equal(egs_peer_listener_start("127.0.0.1", 0, "worker-1", &l1, err, sizeof(err)), EGS_OK);
	assert_int_equal(egs_peer_listener_start(NULL, 0, "worker-2", &l2, err, sizeof(err)), EGS_OK);
	f->cfg.pre = 1u << 4; /* connectivity alone */
	memset(peers, 0, sizeof(peers));
	snprintf(peers[0].node, sizeof(peers[0].node), "n2");
	snprintf(peers[0].address, sizeof(peers[0].address), "127.0.0.1:%d", egs_peer_listener_port(l1));
	snprintf(peers[1].node, sizeof(peers[1].node), "n3");
	snprintf(peers[1].address, sizeof(peers[1].address), "localhost:%d", egs_peer_listener_port(l2));
	snprintf(peers[2].node, sizeof(peers[2].node), "n4");
	f->ctx.peers = peers;
	f->ctx.n_peers = 3;
	egs_checks_run(&f->ctx, &rep);
	expect(&rep, "connectivity", EGS_CHECK_PASSED, "reached 2 peer agent(s) in at most");
	expect(&rep, "connectivity", EGS_CHECK_PASSED, "some peers have no known address");

	snprintf(peers[1].address, sizeof(peers[1].address), "127.0.0.1:%d", dead_port());
	egs_checks_run(&f->ctx, &rep);
	snprintf(want, sizeof(want), "cannot reach the agent of n3 at %s: Connection refused", peers[1].address);
	expect(&rep, "connectivity", EGS_CHECK_FAILED, want);

	snprintf(peers[1].address, sizeof(peers[1].address), "127.0.0.1:%d", mute_port);
	egs_checks_run(&f->ctx, &rep);
	expect(&rep, "connectivity", EGS_CHECK_FAILED, "connected, but no banner within 500 ms");
	assert_true(rep.results[0].duration_ms >= 400 && rep.results[0].duration_ms < 3000);

	snprintf(peers[1].address, sizeof(peers[1].address), "no-port");
	egs_checks_run(&f->ctx, &rep);
	expect(&rep, "connectivity", EGS_CHECK_FAILED, "'no-port' is not host:port");

	close(mute);
	egs_peer_listener_free(l1);
	egs_peer_listener_free(l2);
	egs_peer_listener_free(NULL);
}

static void test_nccl_command(void **state)
{
	struct fixture *f = *state;
	struct egs_check_peer peers[2] = {{.node = "n2", .address = "10.0.0.2:7946"}, {.node = "n3", .address = ""}};
	struct egs_check_report rep;

	f->cfg.pre = 1u << 5; /* nccl alone */
	f->ctx.peers = peers;
	f->ctx.n_peers = 2;
	f->cfg.nccl_command = "test \"$EGS_CHECK $EGS_NODE $EGS_CLUSTER $EGS_GPR_ID $EGS_NODES $EGS_PEER_ADDRESSES "
			      "$EGS_GPU_COUNT\" = 'nccl n1 worker-1 gpr-1 n1,n2,n3 10.0.0.2:7946, 2' || exit 3; "
			      "echo 'all_reduce_perf: busbw 182.4 GB/s'";
	egs_checks_run(&f->ctx, &rep);
	expect(&rep, "nccl", EGS_CHECK_PASSED, "all_reduce_perf: busbw 182.4 GB/s");

	f->cfg.nccl_command = "echo 'NCCL WARN timeout'; exit 1";
	egs_checks_run(&f->ctx, &rep);
	expect(&rep, "nccl", EGS_CHECK_FAILED, "NCCL WARN timeout");

	f->cfg.nccl_command = "sleep 5";
	f->cfg.nccl_timeout_s = 1;
	egs_checks_run(&f->ctx, &rep);
	expect(&rep, "nccl", EGS_CHECK_FAILED, "timed out after 1 s");

	f->ctx.n_peers = 0;
	egs_checks_run(&f->ctx, &rep);
	expect(&rep, "nccl", EGS_CHECK_SKIPPED, "single-node GPR");
}

static void test_parse_list(void **state)
{
	unsigned set = 0;
	char err[128];
	(void)state;

	assert_int_equal(egs_checks_parse_list("node-health,storage", EGS_CHECK_PRE, &set, err, sizeof(err)), EGS_OK);
	assert_int_equal(set, (1u << 0) | (1u << 3));
	assert_int_equal(egs_checks_parse_list("none", EGS_CHECK_PRE, &set, err, sizeof(err)), EGS_OK);
	assert_int_equal(set, 0);
	assert_int_equal(egs_checks_parse_list("", EGS_CHECK_POST, &set, err, sizeof(err)), EGS_OK);
	assert_int_equal(set, 0);
	assert_int_equal(egs_checks_parse_list("node-health,bogus", EGS_CHECK_PRE, &set, err, sizeof(err)),
			 EGS_ERR_INVALID);
	assert_string_equal(err, "unknown check 'bogus'");
	assert_int_equal(egs_checks_parse_list("connectivity", EGS_CHECK_POST, &set, err, sizeof(err)), EGS_ERR_INVALID);
	assert_string_equal(err, "check 'connectivity' does not run after a detach");
	assert_int_equal(egs_checks_all(EGS_CHECK_PRE), 0x3f);
	assert_int_equal(egs_checks_all(EGS_CHECK_POST), (1u << 0) | (1u << 2) | (1u << 3));
}

static void test_json_and_log(void **state)
{
	struct fixture *f = *state;
	struct egs_check_report rep;
	char dir[128], path[192], err[256], line[4096];
	json_t *j, *o;
	json_error_t jerr;
	FILE *fp;
	struct timeval old[2] = {{.tv_sec = 1000}, {.tv_sec = 1000}};

	f->ctx.now = T0 + 10;
	egs_checks_run(&f->ctx, &rep);
	j = egs_checks_json(&rep);
	assert_int_equal(json_array_size(j), 6);
	o = json_array_get(j, 2);
	assert_string_equal(json_string_value(json_object_get(o, "name")), "gpu-processes");
	assert_string_equal(json_string_value(json_object_get(o, "phase")), "pre");
	assert_string_equal(json_string_value(json_object_get(o, "status")), "failed");
	assert_non_null(strstr(json_string_value(json_object_get(o, "output")), "pid 4242"));
	assert_true(json_is_integer(json_object_get(o, "durationMs")));
	json_decref(j);

	snprintf(dir, sizeof(dir), "%s/checks", f->dir);
	assert_int_equal(egs_checks_log_append(dir, "worker-1", "gpr-1", "n1", T0, &rep, err, sizeof(err)), EGS_OK);
	f->ctx.now = T0 + 20;
	egs_checks_run(&f->ctx, &rep);
	assert_int_equal(egs_checks_log_append(dir, "worker-1", "gpr-1", "n1", T0 + 20, &rep, err, sizeof(err)), EGS_OK);
	assert_int_equal(egs_checks_log_append(dir, "worker-1", "../escape", "n1", T0, &rep, err, sizeof(err)),
			 EGS_ERR_INVALID);

	snprintf(path, sizeof(path), "%s/gpr-1.jsonl", dir);
	fp = fopen(path, "r");
	assert_non_null(fp);
	assert_non_null(fgets(line, sizeof(line), fp));
	o = json_loads(line, 0, &jerr);
	assert_non_null(o);
	assert_string_equal(json_string_value(json_object_get(o, "gprId")), "gpr-1");
	assert_string_equal(json_string_value(json_object_get(o, "node")), "n1");
	assert_string_equal(json_string_value(json_object_get(o, "time")), "2023-11-14T22:13:20Z");
	assert_true(json_is_false(json_object_get(o, "ok")));
	assert_int_equal(json_array_size(json_object_get(o, "checks")), 6);
	json_decref(o);
	assert_non_null(fgets(line, sizeof(line), fp));
	o = json_loads(line, 0, &jerr);
	assert_true(json_is_true(json_object_get(o, "ok")));
	json_decref(o);
	assert_null(fgets(line, sizeof(line), fp));
	fclose(fp);

	assert_int_equal(egs_checks_log_prune(dir, T0, 86400), 0);
	assert_int_equal(utimes(path, old), 0);
	assert_int_equal(egs_checks_log_prune(dir, T0, 86400), 1);
	assert_int_not_equal(access(path, F_OK), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_all_pass_single_node, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stray_process_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_inventory_and_health, setup, teardown),
		cmocka_unit_test_setup_teardown(test_storage, setup, teardown),
		cmocka_unit_test_setup_teardown(test_connectivity, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nccl_command, setup, teardown),
		cmocka_unit_test(test_parse_list),
		cmocka_unit_test_setup_teardown(test_json_and_log, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

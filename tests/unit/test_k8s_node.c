/*
 * test_k8s_node.c: what the kubernetes backend reads from nodes and pods (GPU node discovery, opt-out,
 * attributes, every health rule, the attachment labels) and what it writes (attach, detach, cordon
 * and taint patches that keep other taints and carry the resourceVersion, evictions, events).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/k8s_node.h"

#include <string.h>

static json_t *node(const char *extra_labels, const char *spec, const char *status)
{
	char text[4096];
	json_error_t e;
	snprintf(text, sizeof(text),
		 "{\"metadata\": {\"name\": \"gpu-1\", \"resourceVersion\": \"42\", \"labels\": {"
		 "\"nvidia.com/gpu.product\": \"NVIDIA-H100-80GB-HBM3\", \"nvidia.com/gpu.memory\": \"81559\","
		 "\"node.kubernetes.io/instance-type\": \"p5.48xlarge\", \"topology.kubernetes.io/region\": \"us-east-1\","
		 "\"topology.kubernetes.io/zone\": \"us-east-1a\"%s}},"
		 " \"spec\": {\"providerID\": \"aws:///us-east-1a/i-1\"%s},"
		 " \"status\": {\"capacity\": {\"nvidia.com/gpu\": \"8\"}, \"allocatable\": {\"nvidia.com/gpu\": \"8\"},"
		 " \"conditions\": [{\"type\": \"Ready\", \"status\": \"True\"}]%s}}",
		 extra_labels, spec, status);
	json_t *j = json_loads(text, 0, &e);
	if (!j)
		fail_msg("bad test JSON: %s", e.text);
	return j;
}

static void test_discovery(void **state)
{
	struct egs_k8s_node n;
	json_t *j = node("", "", "");
	(void)state;

	assert_true(egs_k8s_node_read(j, &n));
	assert_string_equal(n.name, "gpu-1");
	assert_true(n.gpu);
	assert_true(n.managed);
	assert_string_equal(n.model, "NVIDIA-H100-80GB-HBM3");
	assert_int_equal(n.gpu_count, 8);
	assert_int_equal(n.memory_mib, 81559);
	assert_string_equal(n.instance_type, "p5.48xlarge");
	assert_string_equal(n.region, "us-east-1");
	assert_string_equal(n.zone, "us-east-1a");
	assert_string_equal(n.cloud_provider, "aws");
	assert_int_equal(n.health, EGS_HEALTH_HEALTHY);
	assert_false(n.tainted);
	json_decref(j);

	j = node(", \"kubeslice.io/managed-by-egs\": \"false\"", "", "");
	assert_true(egs_k8s_node_read(j, &n));
	assert_true(n.gpu);
	assert_false(n.managed);
	json_decref(j);

	j = json_pack("{s:{s:s}, s:{s:{s:s}}}", "metadata", "name", "cpu-1", "status", "capacity", "cpu", "16");
	assert_true(egs_k8s_node_read(j, &n));
	assert_false(n.gpu);
	assert_false(n.managed);
	json_decref(j);

	j = json_pack("{s:{s:s}}", "spec", "x", "y"); /* no name */
	assert_false(egs_k8s_node_read(j, &n));
	json_decref(j);
}

static void expect_unhealthy(const char *labels, const char *spec, const char *status, const char *why)
{
	struct egs_k8s_node n;
	json_t *j = node(labels, spec, status);
	assert_true(egs_k8s_node_read(j, &n));
	assert_int_equal(n.health, EGS_HEALTH_UNHEALTHY);
	if (!strstr(n.why, why))
		fail_msg("'%s' lacks '%s'", n.why, why);
	json_decref(j);
}

static void test_health(void **state)
{
	struct egs_k8s_node n;
	json_t *j;
	(void)state;

	/* the later "conditions" key wins in jansson: the Ready condition turns False */
	expect_unhealthy("", "", ", \"conditions\": [{\"type\": \"Ready\", \"status\": \"False\", \"reason\": "
				 "\"KubeletNotReady\"}]", "NotReady (Ready=False: KubeletNotReady)");
	expect_unhealthy("", ", \"taints\": [{\"key\": \"node.kubernetes.io/unreachable\", \"effect\": \"NoExecute\"}]",
			 "", "node.kubernetes.io/unreachable");
	expect_unhealthy("", ", \"unschedulable\": true", "", "cordoned outside EGS");
	expect_unhealthy("", "", ", \"allocatable\": {\"nvidia.com/gpu\": \"6\"}", "only 6 of 8 GPUs");
	/* The agent's own cordon (during a drain) is not a failure. */
	j = node("", ", \"unschedulable\": true", "");
	json_object_set_new(json_object_get(j, "metadata"), "annotations",
			    json_pack("{s:s}", EGS_K8S_ANN_CORDONED, "true"));
	assert_true(egs_k8s_node_read(j, &n));
	assert_int_equal(n.health, EGS_HEALTH_HEALTHY);
	assert_true(n.our_cordon);
	json_decref(j);
}

static void test_attach_detach_patches(void **state)
{
	struct egs_strlist ns = {0};
	struct egs_attach_req req = {.node = "gpu-1", .gpr_id = "gpr-1", .workspace = "ws", .namespaces = &ns,
				      .start_time = "2026-11-25T10:00:00Z", .exit_time = "2026-11-25T12:00:00Z"};
	struct egs_attachment att;
	json_t *p, *j;
	(void)state;

	egs_strlist_add(&ns, "ws-dev");
	egs_strlist_add(&ns, "ws-prod");
	p = egs_k8s_patch_attach(&req, "2026-11-25T10:00:01Z");
	j = node("", "", "");
	/* A node carrying the patch reads back as the attachment. */
	json_object_update_recursive(j, p);
	assert_true(egs_k8s_node_attachment(j, &att));
	assert_string_equal(att.gpr_id, "gpr-1");
	assert_string_equal(att.workspace, "ws");
	assert_int_equal(att.namespaces.n, 2);
	assert_string_equal(att.namespaces.v[1], "ws-prod");
	assert_string_equal(att.exit_time, "2026-11-25T12:00:00Z");
	assert_string_equal(att.attached_at, "2026-11-25T10:00:01Z");
	free(att.node), free(att.gpr_id), free(att.workspace), free(att.start_time), free(att.exit_time);
	free(att.attached_at);
	egs_strlist_cleanup(&att.namespaces);
	json_decref(p);

	p = egs_k8s_patch_detach(true);
	assert_true(json_is_null(json_object_get(json_object_get(json_object_get(p, "metadata"), "labels"),
						 EGS_K8S_LABEL_GPR)));
	assert_true(json_is_null(json_object_get(json_object_get(p, "spec"), "unschedulable")));
	json_decref(p);
	p = egs_k8s_patch_detach(false); /* someone else's cordon stays */
	assert_null(json_object_get(p, "spec"));
	json_decref(p);
	json_decref(j);
	egs_strlist_cleanup(&ns);
}

static void test_taint_patch(void **state)
{
	json_t *j = node("", ", \"taints\": [{\"key\": \"other\", \"value\": \"x\", \"effect\": \"NoExecute\"}]", "");
	json_t *p, *taints;
	struct egs_k8s_node n;
	(void)state;

	p = egs_k8s_patch_taint(j, true);
	assert_non_null(p);
	assert_string_equal(json_string_value(json_object_get(json_object_get(p, "metadata"), "resourceVersion")), "42");
	taints = json_object_get(json_object_get(p, "spec"), "taints");
	assert_int_equal(json_array_size(taints), 2); /* the other taint is kept */
	assert_string_equal(json_string_value(json_object_get(json_array_get(taints, 0), "key")), "other");
	json_object_set(json_object_get(j, "spec"), "taints", taints);
	json_decref(p);
	assert_true(egs_k8s_node_read(j, &n));
	assert_true(n.tainted);
	assert_null(egs_k8s_patch_taint(j, true)); /* nothing to do */
	p = egs_k8s_patch_taint(j, false);
	assert_int_equal(json_array_size(json_object_get(json_object_get(p, "spec"), "taints")), 1);
	json_decref(p);
	json_decref(j);
	j = node("", "", "");
	assert_null(egs_k8s_patch_taint(j, false));
	json_decref(j);
}

static void test_pods_evictions_events(void **state)
{
	json_t *pod = json_loads("{\"metadata\": {\"name\": \"p\", \"namespace\": \"ws-dev\", \"ownerReferences\":"
				 " [{\"kind\": \"ReplicaSet\"}]}, \"spec\": {\"tolerations\": [{\"key\": \"kubeslice.io/egs\","
				 " \"operator\": \"Exists\"}], \"containers\": [{\"resources\": {\"limits\": "
				 "{\"nvidia.com/gpu\": \"2\"}}}, {\"resources\": {\"requests\": {\"nvidia.com/gpu\": 1}}}]}}",
				 0, NULL);
	json_t *ds = json_loads("{\"metadata\": {\"ownerReferences\": [{\"kind\": \"DaemonSet\"}]}}", 0, NULL);
	json_t *e;
	(void)state;

	assert_int_equal(egs_k8s_pod_gpus(pod), 3);
	assert_true(egs_k8s_pod_tolerates_egs(pod));
	assert_false(egs_k8s_pod_daemonset(pod));
	assert_true(egs_k8s_pod_daemonset(ds));
	assert_int_equal(egs_k8s_pod_gpus(ds), 0);
	e = egs_k8s_eviction("ws-dev", "p", 30);
	assert_string_equal(json_string_value(json_object_get(e, "apiVersion")), "policy/v1");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(e, "deleteOptions"), "gracePeriodSeconds")), 30);
	json_decref(e);
	e = egs_k8s_event("ws-dev", "gpr-1", "NodeAttached", "m", "Normal", "2026-11-25T10:00:01Z", 7);
	assert_string_equal(json_string_value(json_object_get(json_object_get(e, "metadata"), "name")),
			    "gpr-1.2026-11-25t10-00-01z.7");
	/* A cluster-scoped involvedObject needs its namespace set to the event's for the API server. */
	assert_string_equal(json_string_value(json_object_get(json_object_get(e, "involvedObject"), "namespace")),
			    "ws-dev");
	json_decref(e);
	json_decref(pod);
	json_decref(ds);
}

/* The node cache keeps less, and reads the same. */
static void test_trim_reads_the_same(void **state)
{
	const char *specs[] = {"", ", \"unschedulable\": true, \"taints\": [{\"key\": \"kubeslice.io/egs\", \"value\": "
			       "\"dedicated-node\", \"effect\": \"NoSchedule\"}]"};
	(void)state;
	for (size_t i = 0; i < 2; i++) {
		json_t *j = node(", \"kubeslice.io/gpr\": \"gpr-1\"", specs[i],
				 ", \"images\": [{\"names\": [\"big\"], \"sizeBytes\": 1}], \"conditions\": [{\"type\": "
				 "\"MemoryPressure\", \"status\": \"False\"}, {\"type\": \"Ready\", \"status\": \"True\", "
				 "\"message\": \"long text\"}]");
		json_object_set_new(json_object_get(j, "metadata"), "annotations",
				    json_pack("{s:s, s:s}", EGS_K8S_ANN_CORDONED, "true", "kubeadm.alpha/x", "y"));
		json_t *t = egs_k8s_node_trim(j);
		struct egs_k8s_node a, b;
		assert_true(egs_k8s_node_read(j, &a));
		assert_true(egs_k8s_node_read(t, &b));
		assert_memory_equal(&a, &b, sizeof(a));
		assert_null(json_object_get(json_object_get(t, "status"), "images"));
		assert_int_equal(json_array_size(json_object_get(json_object_get(t, "status"), "conditions")), 1);
		assert_null(json_object_get(json_object_get(json_object_get(t, "metadata"), "annotations"), "kubeadm.alpha/x"));
		assert_string_equal(json_string_value(json_object_get(json_object_get(t, "metadata"), "resourceVersion")), "42");
		json_decref(t);
		json_decref(j);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_discovery),          cmocka_unit_test(test_health),
		cmocka_unit_test(test_attach_detach_patches), cmocka_unit_test(test_taint_patch),
		cmocka_unit_test(test_pods_evictions_events), cmocka_unit_test(test_trim_reads_the_same),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

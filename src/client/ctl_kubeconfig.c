/*
 * ctl_kubeconfig.c: a slice workspace's kubeconfig in egsctl: `egsctl kubeconfig WORKSPACE --cluster C`
 * prints it (POST /api/v1/slice-workspace/kube-config), `egsctl regenerate kubeconfig WORKSPACE
 * [--cluster C]` cuts off every kubeconfig handed out so far (POST .../kube-config/regenerate; the
 * clusters' agents recreate the slice's ServiceAccount, docs/internals/agent-protocol.md section 5).
 */
#include "core/common.h"

#include "client/ctl.h"

#include <stdio.h>
#include <string.h>

/* POSTs body (borrowed) to path on the run's client; *data gets the answer (caller decrefs).  CTL_OK or
 * the exit code, printed. */
static int post(struct ctl *c, const char *path, json_t *body, json_t **data, const char *what)
{
	int code;
	long status = 0;
	struct egs_client *cl = ctl_client(c, &code);

	*data = NULL;
	if (!cl)
		return code;
	enum egs_err err = egs_client_call(cl, "POST", path, body, c->request_timeout_s, &status, data);
	return err ? ctl_fail(c, err, what) : CTL_OK;
}

int ctl_cmd_kubeconfig(struct ctl *c, int argc, char **argv)
{
	static const char help_text[] =
		"usage: egsctl kubeconfig WORKSPACE --cluster CLUSTER [> FILE]\n"
		"\n"
		"Prints the workspace's kubeconfig for one of its clusters: the cluster's API server and CA and\n"
		"the token of the slice's ServiceAccount, which works in the slice's namespaces only.  Exits 1\n"
		"(KUBECONFIG_NOT_READY, with the reason) until the cluster's agent has reported a token.\n"
		"\n"
		"options:\n"
		"  --cluster NAME   the cluster (required)\n";
	const char *cluster = NULL, *pos[2];
	const struct ctl_opt opts[] = {{"cluster", 0, &cluster, NULL, NULL}, {NULL, 0, NULL, NULL, NULL}};
	json_t *data = NULL, *body;
	char what[200];
	int npos, rc;
	bool help;

	rc = ctl_args(c, argc, argv, 1, opts, pos, 2, &npos, &help);
	if (rc || help)
		return ctl_help(rc, help, help_text);
	if (npos != 1 || !cluster)
		return ctl_usage(c, "usage: egsctl kubeconfig WORKSPACE --cluster CLUSTER");
	snprintf(what, sizeof(what), "kubeconfig of workspace %s on cluster %s", pos[0], cluster);
	body = json_pack("{s:s, s:s}", "workspaceName", pos[0], "clusterName", cluster);
	rc = post(c, "/api/v1/slice-workspace/kube-config", body, &data, what);
	if (rc == CTL_OK)
		fputs(ctl_str(data, "kubeConfig"), stdout);
	json_decref(body);
	json_decref(data);
	return rc;
}

int ctl_cmd_regenerate(struct ctl *c, int argc, char **argv)
{
	static const char help_text[] =
		"usage: egsctl regenerate kubeconfig WORKSPACE [--cluster CLUSTER]\n"
		"\n"
		"Cuts off every kubeconfig of the workspace handed out so far (on one cluster, or on all of\n"
		"them): egsd drops the stored token at once and each cluster's agent recreates the slice's\n"
		"ServiceAccount, which invalidates every token minted for it.  Download the new kubeconfig with\n"
		"`egsctl kubeconfig` once the agent has reported it (seconds).  Admins and the workspace's\n"
		"owners may.\n"
		"\n"
		"options:\n"
		"  --cluster NAME   only this cluster of the workspace\n";
	static const char *const headers[] = {"CLUSTER", "GENERATION", "AGENT-MINTS-TOKENS"};
	const char *cluster = NULL, *pos[3];
	const struct ctl_opt opts[] = {{"cluster", 0, &cluster, NULL, NULL}, {NULL, 0, NULL, NULL, NULL}};
	json_t *data = NULL, *body, *x;
	char what[200];
	int npos, rc;
	size_t i;
	bool help;

	rc = ctl_args(c, argc, argv, 1, opts, pos, 3, &npos, &help);
	if (rc || help)
		return ctl_help(rc, help, help_text);
	if (npos != 2 || strcmp(pos[0], "kubeconfig") != 0)
		return ctl_usage(c, "usage: egsctl regenerate kubeconfig WORKSPACE [--cluster CLUSTER]");
	if ((rc = ctl_check_format(c, 1u << CTL_OUT_TABLE | 1u << CTL_OUT_JSON | 1u << CTL_OUT_YAML)) != CTL_OK)
		return rc;
	snprintf(what, sizeof(what), "regenerate kubeconfig of workspace %s", pos[1]);
	body = json_pack("{s:s}", "workspaceName", pos[1]);
	if (cluster)
		json_object_set_new(body, "clusterName", json_string(cluster));
	rc = post(c, "/api/v1/slice-workspace/kube-config/regenerate", body, &data, what);
	if (rc == CTL_OK && !ctl_print_data(c, data)) {
		struct ctl_table *t = ctl_table_new(headers, 3);
		json_array_foreach(json_object_get(data, "clusters"), i, x) {
			char gen[24];
			snprintf(gen, sizeof(gen), "%lld", ctl_int_of(x, "generation"));
			ctl_table_add(t, ctl_str(x, "clusterName"), gen,
				      json_is_true(json_object_get(x, "agentMintsTokens")) ? "true" : "false");
		}
		ctl_table_print(t, stdout);
		ctl_table_free(t);
	}
	json_decref(body);
	json_decref(data);
	return rc;
}

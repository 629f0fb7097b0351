/*
 * ctl_template.c: GPR templates and template bindings in `egsctl get` and `egsctl describe`
 * (docs/templates.md; apply -f and delete -f are in ctl_apply.c).  A binding is named after its
 * workspace.
 */
#include "core/common.h"

#include "client/ctl.h"

#include <stdio.h>
#include <string.h>

static const char *or_dash(const char *s)
{
	return s && *s ? s : "-";
}

/* The named objects fetched one by one, or the whole list; CTL_OK or the exit code (printed). */
static int fetch(struct ctl *c, struct egs_client *cl, bool binding, const char *const *names, int nnames,
		 json_t **items)
{
	char what[128];

	if (nnames == 0) {
		enum egs_err err = egs_client_template_list(cl, binding, items);
		return err ? ctl_fail(c, err, binding ? "list gpr template bindings" : "list gpr templates") : CTL_OK;
	}
	*items = json_array();
	for (int i = 0; i < nnames; i++) {
		json_t *o = NULL;
		enum egs_err err = egs_client_template_get(cl, binding, names[i], &o);
		if (err) {
			snprintf(what, sizeof(what), "%s %s", binding ? "gprtemplatebinding" : "gprtemplate", names[i]);
			return ctl_fail(c, err, what);
		}
		json_array_append_new(*items, o);
	}
	return CTL_OK;
}

static void template_rows(struct ctl *c, json_t *items)
{
	static const char *const headers[] = {"NAME", "CLUSTER", "GPUS", "SHAPE", "DURATION", "PRIORITY", "INSTANCE",
					      "MEMORY/GPU"};
	struct ctl_table *t = ctl_table_new(headers, c->format == CTL_OUT_WIDE ? 8 : 6);
	json_t *x;
	size_t i;

	json_array_foreach(items, i, x) {
		char gpus[40], prio[16], mem[24];
		snprintf(gpus, sizeof(gpus), "%lldx%lld", ctl_int_of(x, "numberOfGPUNodes"), ctl_int_of(x, "numberOfGPUs"));
		snprintf(prio, sizeof(prio), "%lld", ctl_int_of(x, "priority"));
		snprintf(mem, sizeof(mem), "%lldMiB", ctl_int_of(x, "memoryPerGpu"));
		ctl_table_add(t, ctl_str(x, "name"), ctl_str(x, "clusterName"), gpus, or_dash(ctl_str(x, "gpuShape")),
			      ctl_str(x, "exitDuration"), prio, or_dash(ctl_str(x, "instanceType")), mem);
	}
	ctl_table_print(t, stdout);
	ctl_table_free(t);
}

static void binding_rows(struct ctl *c, json_t *items)
{
	static const char *const headers[] = {"WORKSPACE", "CLUSTER", "DEFAULT", "TEMPLATES", "AUTO-GPR"};
	struct ctl_table *t = ctl_table_new(headers, 5);
	json_t *x, *cl;
	size_t i, j;

	(void)c;
	json_array_foreach(items, i, x) {
		const char *autogpr = json_is_true(json_object_get(x, "enableAutoGPR")) ? "true" : "false";
		if (!json_array_size(json_object_get(x, "clusters")))
			ctl_table_add(t, ctl_str(x, "name"), "-", "-", "-", autogpr);
		json_array_foreach(json_object_get(x, "clusters"), j, cl) {
			char list[400];
			ctl_joined(json_object_get(cl, "templates"), list, sizeof(list));
			ctl_table_add(t, ctl_str(x, "name"), ctl_str(cl, "clusterName"),
				      or_dash(ctl_str(cl, "defaultTemplateName")), or_dash(list), autogpr);
		}
	}
	ctl_table_print(t, stdout);
	ctl_table_free(t);
}

int ctl_get_templates(struct ctl *c, struct egs_client *cl, bool binding, const char *const *names, int nnames)
{
	json_t *items = NULL, *x;
	size_t i;
	int rc = fetch(c, cl, binding, names, nnames, &items);

	if (rc != CTL_OK)
		goto out;
	if (c->format == CTL_OUT_NAME) {
		json_array_foreach(items, i, x)
			printf("%s/%s\n", binding ? "gprtemplatebinding" : "gprtemplate", ctl_str(x, "name"));
		goto out;
	}
	/* one named object prints as itself, a listing as {"items": [...]} (as get does for gprs) */
	json_t *shown = nnames == 1 ? json_incref(json_array_get(items, 0)) : json_pack("{s:O}", "items", items);
	bool done = ctl_print_data(c, shown);
	json_decref(shown);
	if (!done && binding)
		binding_rows(c, items);
	else if (!done)
		template_rows(c, items);
out:
	json_decref(items);
	return rc;
}

static void field(const char *name, const char *value)
{
	printf("%-17s %s\n", name, value);
}

int ctl_describe_template(struct ctl *c, bool binding, const char *name)
{
	json_t *o = NULL, *x;
	char buf[400], what[128];
	size_t i;
	enum egs_err err = egs_client_template_get(c->client, binding, name, &o);

	if (err) {
		snprintf(what, sizeof(what), "%s %s", binding ? "gprtemplatebinding" : "gprtemplate", name);
		return ctl_fail(c, err, what);
	}
	if (ctl_print_data(c, o))
		goto out;
	if (binding) {
		field("Workspace:", ctl_str(o, "name"));
		field("Auto GPR:", json_is_true(json_object_get(o, "enableAutoGPR")) ? "true (stored; egsd creates no GPR by itself)"
										      : "false");
		printf("Clusters:\n");
		json_array_foreach(json_object_get(o, "clusters"), i, x) {
			ctl_joined(json_object_get(x, "templates"), buf, sizeof(buf));
			printf("  %s: default %s; templates %s\n", ctl_str(x, "clusterName"),
			       or_dash(ctl_str(x, "defaultTemplateName")), or_dash(buf));
		}
		goto out;
	}
	snprintf(buf, sizeof(buf), "%lld node(s) x %lld GPU(s), at least %lld MiB per GPU",
		 ctl_int_of(o, "numberOfGPUNodes"), ctl_int_of(o, "numberOfGPUs"), ctl_int_of(o, "memoryPerGpu"));
	field("Name:", ctl_str(o, "name"));
	field("Project:", or_dash(ctl_str(o, "projectName")));
	field("Cluster:", ctl_str(o, "clusterName"));
	field("Request:", buf);
	field("GPU shape:", or_dash(ctl_str(o, "gpuShape")));
	field("Instance type:", or_dash(ctl_str(o, "instanceType")));
	field("Duration:", ctl_str(o, "exitDuration"));
	snprintf(buf, sizeof(buf), "%lld", ctl_int_of(o, "priority"));
	field("Priority:", buf);
	snprintf(buf, sizeof(buf), "%s%s%s%s%s", json_is_true(json_object_get(o, "enableEviction")) ? "enableEviction " : "",
		 json_is_true(json_object_get(o, "requeueOnFailure")) ? "requeueOnFailure " : "",
		 json_is_true(json_object_get(o, "enforceIdleTimeOut")) ? "enforceIdleTimeOut (idle " : "",
		 json_is_true(json_object_get(o, "enforceIdleTimeOut")) ? ctl_str(o, "idleTimeOutDuration") : "",
		 json_is_true(json_object_get(o, "enforceIdleTimeOut")) ? ")" : "");
	field("Options:", or_dash(buf));
	field("Updated:", or_dash(ctl_str(o, "updatedAt")));
out:
	json_decref(o);
	return CTL_OK;
}

/*
 * template.h: GPR templates and template bindings inside egsd (api_template.c for the templates and
 * the GPR-from-template path, api_template_binding.c for the bindings).  Both are struct egs_doc of
 * the state, their spec canonical JSON that only these files write and read.
 */
#ifndef EGS_TEMPLATE_H
#define EGS_TEMPLATE_H

#include "server/server.h"

/* The parsed spec of a stored doc (caller decrefs); never NULL. */
json_t *egs_doc_spec(const struct egs_doc *d);
/* Canonical text of a spec (sorted keys, compact), for struct egs_doc.spec; caller frees. */
char *egs_doc_dump(json_t *spec /* borrowed */);
/* Stores spec (borrowed) as the doc of kind named name: a new one in project (created now) when the
 * state has none of that name, else its spec replaced; touched either way.  Returns it (borrowed). */
struct egs_doc *egs_doc_put(struct egs_server *srv, enum egs_kind kind, const char *name, const char *project,
			    json_t *spec);
/* The docs of map m that keep(r, doc) accepts, sorted by name; the array is the caller's to free,
 * the docs stay borrowed from the state. */
const struct egs_doc **egs_docs_sorted(struct egs_req *r, struct egs_map *m,
				       bool (*keep)(struct egs_req *r, const struct egs_doc *d), size_t *n);

/* The template `name` in the caller's project (borrowed), or NULL after replying 404
 * GPR_TEMPLATE_NOT_FOUND naming `field`. */
struct egs_doc *egs_template_find(struct egs_req *r, const char *name, const char *field);
/* The binding that lists template `name` (borrowed) or NULL; cluster (may be NULL) receives the
 * cluster it is listed for. */
const struct egs_doc *egs_template_bound(struct egs_state *st, const char *name, char cluster[EGS_NAME_MAX]);

/* POST /api/v1/gpr with `templateName` (or with neither templateName nor numberOfGPUNodes, when the
 * workspace's binding has a default template for the body's clusterName, or a single default): checks
 * the template and that the workspace's binding lists it for the template's cluster, then replaces
 * r->body with the template's request plus the body's gprName (default: the template's name) and
 * sliceName.  Any other field the body sets to a value
 * other than null, "", false or the template's own is refused (422 naming it): a template fixes the
 * shape.  Returns true with r->body replaced (or untouched when the body names no template); false
 * after replying. */
bool egs_template_apply(struct egs_req *r);

/* Drops the binding of workspace `ws`, if any (its workspace is being deleted). */
void egs_template_forget_workspace(struct egs_server *srv, const char *ws);

#endif

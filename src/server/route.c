/*
 * route.c: which route of the tables (http.c's route_tables) answers a method and path.
 *
 * The rule is the tables' order: the first route whose pattern matches the path and whose method is
 * the request's answers it; a path that some route matches under another method is "known" (405,
 * not 404).  Walking about a hundred patterns with egs_path_match for every request cost more than
 * the rest of a status read's routing and metrics together (issue 16), so an index is built on first
 * use: literal paths (nearly all) in a hash map to their routes in table order, and the few patterns
 * with a {segment} in a list in table order.  A lookup takes the literal routes of the path and scans
 * only the patterns that come before the first literal route of the request's method, which gives
 * the same answer as the walk over every table.
 *
 * The index is built once from static tables and never changes (egsd's loop thread only); the last
 * answer of each lookup is kept with its question (lookup_memo).
 */
#include "server/server.h"

#include "core/map.h"

#include <string.h>

struct route_ref {
	const struct egs_route *rt;
	size_t ord; /* position over all tables */
};

struct literal {
	struct route_ref *refs; /* routes with this exact path, table order (owned) */
	size_t n;
};

static struct {
	bool built;
	struct egs_map literals; /* path -> struct literal (owned; never freed: static tables) */
	struct route_ref *patterns;
	size_t n_patterns;
} idx;

static void build(void)
{
	size_t nt, ord = 0;
	const struct egs_route *const *tables = egs__route_tables(&nt);
	egs_map_init(&idx.literals);
	for (size_t t = 0; t < nt; t++) {
		for (const struct egs_route *rt = tables[t]; rt->fn; rt++, ord++) {
			struct route_ref ref = { rt, ord };
			if (strchr(rt->path, '{')) {
				idx.patterns = egs_realloc(idx.patterns, (idx.n_patterns + 1) * sizeof(*idx.patterns));
				idx.patterns[idx.n_patterns++] = ref;
				continue;
			}
			struct literal *l = egs_map_get(&idx.literals, rt->path);
			if (!l) {
				l = egs_calloc(1, sizeof(*l));
				egs_map_put(&idx.literals, rt->path, l);
			}
			l->refs = egs_realloc(l->refs, (l->n + 1) * sizeof(*l->refs));
			l->refs[l->n++] = ref;
		}
	}
	idx.built = true;
}

bool egs_path_match(const char *pattern, const char *path)
{
	while (*pattern && *path) {
		if (pattern[0] == '{') {
			const char *close = strchr(pattern, '}');
			EGS_ASSERT(close); /* route tables are code */
			if (*path == '/')
				return false;
			while (*path && *path != '/')
				path++;
			pattern = close + 1;
			continue;
		}
		if (*pattern++ != *path++)
			return false;
	}
	return !*pattern && !*path;
}

/* The first route (table order) matching path with method m, or with any method when any_method;
 * *known: some route matches path. */
static const struct egs_route *lookup(enum evhttp_cmd_type m, bool any_method, const char *path, bool *known)
{
	if (!idx.built)
		build();
	const struct literal *l = egs_map_get(&idx.literals, path);
	const struct route_ref *best = NULL;
	for (size_t i = 0; l && i < l->n && !best; i++)
		if (any_method || l->refs[i].rt->method == m)
			best = &l->refs[i];
	*known = l != NULL;
	for (size_t i = 0; i < idx.n_patterns; i++) {
		const struct route_ref *p = &idx.patterns[i];
		if (best && p->ord > best->ord)
			break;
		if (!egs_path_match(p->rt->path, path))
			continue;
		*known = true;
		if (any_method || p->rt->method == m) {
			best = p;
			break;
		}
	}
	return best ? best->rt : NULL;
}

/* The last answer of each of the two lookups a request makes (its route at dispatch, its pattern for
 * the metrics' label), kept with its question: a client repeating one request (a status read, a
 * create) skips the hash of the path and the pattern scan.  The index never changes, so an answer
 * stays true for its question. */
struct memo {
	char path[128];
	enum evhttp_cmd_type m;
	const struct egs_route *rt;
	bool known, set;
};

static const struct egs_route *lookup_memo(struct memo *mo, enum evhttp_cmd_type m, bool any_method,
					   const char *path, bool *known)
{
	if (mo->set && mo->m == m && strcmp(mo->path, path) == 0) {
		*known = mo->known;
		return mo->rt;
	}
	const struct egs_route *rt = lookup(m, any_method, path, known);
	size_t len = strlen(path);
	mo->set = len < sizeof(mo->path);
	if (mo->set) {
		memcpy(mo->path, path, len + 1);
		mo->m = m;
		mo->rt = rt;
		mo->known = *known;
	}
	return rt;
}

const struct egs_route *egs_route_find(enum evhttp_cmd_type m, const char *path, bool *path_known)
{
	static struct memo mo;
	return lookup_memo(&mo, m, false, path, path_known);
}

const char *egs_route_pattern(const char *path)
{
	static struct memo mo;
	bool known;
	const struct egs_route *rt = lookup_memo(&mo, EVHTTP_REQ_GET, true, path, &known);
	return rt ? rt->path : NULL;
}

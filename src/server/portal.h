/*
 * portal.h: the web portal's static files (web/, built into build/portal) served by egsd at "/".
 *
 * Two sources: the files compiled into egsd at build time (web/tools/embed.mjs writes them as a C
 * table, each with a gzip copy), or a directory read at each request (`egsd --portal DIR`, for
 * working on the portal without relinking).  Every answer carries a strict Content-Security-Policy
 * (no inline script, nothing from another origin); files under assets/ have content hashes in their
 * names and are cached for a year, index.html is revalidated every time.  A GET of any other path
 * outside /api/ that names no file answers index.html, so the portal's own routes survive a reload.
 */
#ifndef EGS_PORTAL_H
#define EGS_PORTAL_H

#include <stdbool.h>
#include <stddef.h>

struct egs_req;

/* One embedded file: path relative to the portal root ("index.html", "assets/main-X.js"), its bytes
 * and a gzip copy (gz NULL when gzip does not make it smaller).  Static data, never freed. */
struct egs_portal_file {
	const char *path;
	const unsigned char *data;
	size_t len;
	const unsigned char *gz;
	size_t gz_len;
};

/* The table that `make all` generates from the portal's build (build/gen/portal_assets.c), ended
 * by an entry whose path is NULL.  Only egsd links it. */
extern const struct egs_portal_file egs_portal_embedded[];

struct egs_portal; /* opaque */

/* A portal over the embedded table files (borrowed, static, NULL-path terminated).  Caller frees. */
struct egs_portal *egs_portal_new_embedded(const struct egs_portal_file *files);
/* A portal reading files from dir (copied) at each request; NULL when dir is not a directory with an
 * index.html.  Caller frees. */
struct egs_portal *egs_portal_new_dir(const char *dir);
void egs_portal_free(struct egs_portal *p); /* NULL is a no-op */

/* Answers r from the portal when r is a GET or HEAD of a path the portal owns (not /api/, a clean
 * path); returns false, having sent nothing, otherwise (the caller then answers 404). */
bool egs_portal_serve(struct egs_portal *p, struct egs_req *r);

/* The Content-Type for a file name by its extension ("application/octet-stream" when unknown). */
const char *egs_portal_content_type(const char *path);

/* True when path (a request path starting with '/') may name a portal file or route: only letters,
 * digits, '-', '_', '.' and '/', no empty segment, no segment starting with '.', and not /api. */
bool egs_portal_path_ok(const char *path);

#endif

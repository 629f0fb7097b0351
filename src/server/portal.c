/*
 * portal.c: serves the portal's static files (portal.h).  Paths are checked before anything is
 * looked up, so no request can name a file outside the portal's root; an embedded file is sent by
 * reference (no copy), a directory's file with evbuffer_add_file.  Answers are sent at once, never
 * held for a commit: they read no state.
 */
#include "server/portal.h"

#include "core/util.h"
#include "server/conn.h"
#include "server/server.h"

#include <event2/buffer.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define PORTAL_FILE_MAX (16 * 1024 * 1024)

/* default-src 'self' and nothing inline: a script injected into a page can neither run nor call out. */
static const char CSP[] = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
			  "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
			  "form-action 'self'; frame-ancestors 'none'";

struct egs_portal {
	const struct egs_portal_file *files; /* embedded table, or NULL */
	char *dir;                           /* owned, or NULL */
};

struct egs_portal *egs_portal_new_embedded(const struct egs_portal_file *files)
{
	struct egs_portal *p = egs_calloc(1, sizeof(*p));
	p->files = files;
	return p;
}

struct egs_portal *egs_portal_new_dir(const char *dir)
{
	char path[4096];
	struct stat sb;
	if (snprintf(path, sizeof(path), "%s/index.html", dir) >= (int)sizeof(path) || stat(path, &sb) != 0 ||
	    !S_ISREG(sb.st_mode))
		return NULL;
	struct egs_portal *p = egs_calloc(1, sizeof(*p));
	p->dir = egs_strdup(dir);
	return p;
}

void egs_portal_free(struct egs_portal *p)
{
	if (!p)
		return;
	free(p->dir);
	free(p);
}

const char *egs_portal_content_type(const char *path)
{
	static const struct {
		const char *ext, *type;
	} types[] = {
		{ ".html", "text/html; charset=utf-8" }, { ".js", "text/javascript; charset=utf-8" },
		{ ".css", "text/css; charset=utf-8" },   { ".svg", "image/svg+xml" },
		{ ".png", "image/png" },                 { ".json", "application/json" },
		{ ".map", "application/json" },          { ".txt", "text/plain; charset=utf-8" },
		{ ".ico", "image/x-icon" },              { ".woff2", "font/woff2" },
	};
	const char *dot = strrchr(path, '.');
	if (dot && !strchr(dot, '/'))
		for (size_t i = 0; i < EGS_ARRAY_LEN(types); i++)
			if (strcmp(dot, types[i].ext) == 0)
				return types[i].type;
	return "application/octet-stream";
}

bool egs_portal_path_ok(const char *path)
{
	if (path[0] != '/')
		return false;
	const char *seg = path + 1;
	if (strncasecmp(seg, "api", 3) == 0 && (seg[3] == '/' || seg[3] == '\0'))
		return false;
	for (const char *c = seg; *c; c++) {
		bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
			  *c == '-' || *c == '_' || *c == '.' || *c == '/';
		if (!ok)
			return false;
		if (c == seg || c[-1] == '/') { /* a segment starts: not empty, not hidden, not "." or ".." */
			if (*c == '/' || *c == '.')
				return false;
		}
	}
	return true;
}

/* True when the Accept-Encoding header lists gzip (or *) without q=0. */
static bool accepts_gzip(const char *ae)
{
	if (!ae)
		return false;
	const char *p = ae;
	while (*p) {
		while (*p == ' ' || *p == ',')
			p++;
		const char *tok = p;
		while (*p && *p != ',' && *p != ';' && *p != ' ')
			p++;
		size_t n = (size_t)(p - tok);
		bool named = (n == 4 && strncasecmp(tok, "gzip", 4) == 0) || (n == 1 && *tok == '*');
		bool zero = false;
		while (*p && *p != ',') { /* parameters: only q matters */
			if (*p == 'q' && p[1] == '=') {
				double q = strtod(p + 2, NULL);
				zero = q <= 0.0;
			}
			p++;
		}
		if (named && !zero)
			return true;
	}
	return false;
}

static const struct egs_portal_file *find_embedded(const struct egs_portal *p, const char *rel)
{
	for (const struct egs_portal_file *f = p->files; f->path; f++)
		if (strcmp(f->path, rel) == 0)
			return f;
	return NULL;
}

/* Opens dir/rel when it is a regular file of at most PORTAL_FILE_MAX bytes; -1 otherwise. */
static int open_in_dir(const struct egs_portal *p, const char *rel, off_t *size)
{
	char path[4096];
	if (snprintf(path, sizeof(path), "%s/%s", p->dir, rel) >= (int)sizeof(path))
		return -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat sb;
	if (fd < 0)
		return -1;
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size > PORTAL_FILE_MAX) {
		close(fd);
		return -1;
	}
	*size = sb.st_size;
	return fd;
}

/* Fills buf with rel's bytes (gzip ones when gzip is true and a copy exists; *gzipped says which).
 * False when the portal has no such file. */
static bool load(const struct egs_portal *p, const char *rel, bool gzip, struct evbuffer *buf, bool *gzipped)
{
	*gzipped = false;
	if (p->files) {
		const struct egs_portal_file *f = find_embedded(p, rel);
		if (!f)
			return false;
		if (gzip && f->gz) {
			*gzipped = true;
			return evbuffer_add_reference(buf, f->gz, f->gz_len, NULL, NULL) == 0;
		}
		return evbuffer_add_reference(buf, f->data, f->len, NULL, NULL) == 0;
	}
	off_t size;
	int fd = open_in_dir(p, rel, &size);
	if (fd < 0)
		return false;
	if (size == 0) {
		close(fd);
		return true;
	}
	return evbuffer_add_file(buf, fd, 0, size) == 0; /* takes fd */
}

/* An unknown path that looks like a file (an asset, a name with an extension) is a 404, never the
 * SPA's index.html: a browser must not run HTML as a script. */
static bool looks_like_file(const char *rel)
{
	const char *last = strrchr(rel, '/');
	last = last ? last + 1 : rel;
	return strncmp(rel, "assets/", 7) == 0 || strchr(last, '.') != NULL;
}

bool egs_portal_serve(struct egs_portal *p, struct egs_req *r)
{
	if (!p || (r->method != EVHTTP_REQ_GET && r->method != EVHTTP_REQ_HEAD) || !egs_portal_path_ok(r->path))
		return false;
	/* "//host/x" parses as an authority and the path /x: only a request whose target is the path
	 * itself (plus a query) is the portal's. */
	const char *target = egs_hreq_target(r->hq);
	size_t plen = strlen(r->path);
	if (!target || strncmp(target, r->path, plen) != 0 || (target[plen] && target[plen] != '?'))
		return false;
	const char *rel = r->path[1] ? r->path + 1 : "index.html";
	bool gzip = accepts_gzip(egs_req_header(r, "Accept-Encoding")), gzipped;
	struct evbuffer *buf = evbuffer_new();
	EGS_ASSERT(buf);
	if (!load(p, rel, gzip, buf, &gzipped)) {
		if (looks_like_file(rel) || !load(p, "index.html", gzip, buf, &gzipped)) {
			evbuffer_free(buf);
			return false;
		}
		rel = "index.html";
	}
	bool hashed = strncmp(rel, "assets/", 7) == 0;
	egs_reply_header(r, "Content-Type", egs_portal_content_type(rel));
	egs_reply_header(r, "Cache-Control", hashed ? "public, max-age=31536000, immutable" : "no-cache");
	egs_reply_header(r, "Content-Security-Policy", CSP);
	egs_reply_header(r, "X-Content-Type-Options", "nosniff");
	egs_reply_header(r, "Referrer-Policy", "no-referrer");
	egs_reply_header(r, "Vary", "Accept-Encoding");
	if (gzipped)
		egs_reply_header(r, "Content-Encoding", "gzip");
	egs_reply_raw(r, 200, buf);
	evbuffer_free(buf);
	return true;
}

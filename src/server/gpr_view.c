/*
 * gpr_view.c: the serialized reply of GET /api/v1/gpr?gprId=, kept until anything could change it.
 *
 * Building a GPR's view with jansson and dumping it cost about 85% of a status read's instructions
 * (issue 16).  The reply's bytes (the whole envelope) are kept in a small direct-mapped table of
 * VIEW_SLOTS entries, keyed by gprId, and served again while all of these still hold:
 *
 *   - st.generation is unchanged: every egs_state_touch/egs_state_del bumps it, so any committed or
 *     pending change of any object (the GPR, a node, its workspace) drops every kept view;
 *   - srv->view_epoch is unchanged: it moves on whatever changes a view's inputs without a touch
 *     (egs_views_changed): each write request (not GET), each commit turn and planner slice (the
 *     estimates are set without a touch), each housekeeping tick, a model reload (a follower's sync,
 *     a failed commit), a price change;
 *   - egs_now() is the same second (estimatedWaitTime, remainingDuration and cost move with time);
 *   - the turn has no pending changes and no held replies (a reply built now would be held and the
 *     commit may still move estimates: such reads build their view as before, uncached).
 *
 * So a view is at most as old as the last change of anything, never of the GPR alone: conservative,
 * and the cache needs no list of the fields a view reads.  Access checks are not cached: the
 * caller's role and scope are checked on every read before the kept bytes are sent.
 *
 * Memory: at most VIEW_SLOTS kept replies (about 1 KiB each), whatever the number of GPRs, plus the
 * replaced ones that replies still on their way out hold.
 *
 * A kept reply's bytes are shared, not copied: a read hands evhttp a reference to them (a 1 KiB copy
 * into a 2 KiB evbuffer chain was about 1,900 instructions of a kept read), counted so that a view
 * rendered again while an earlier reply still waits in an output buffer (or is held for a commit)
 * leaves that reply its bytes.  Loop thread only, like evhttp's buffers.
 */
#include "server/server.h"

#include "server/gpr_render.h"

#include "core/util.h"

#include <stdlib.h>
#include <string.h>

#define VIEW_SLOTS 1024 /* a power of two */

/* One rendered reply: the whole envelope, compact JSON.  Held by its slot while kept and by every
 * reply buffer that references it; freed by the last (bytes_release). */
struct view_bytes {
	size_t refs;
	size_t len;
	char data[];
};

struct view_slot {
	char id[EGS_ID_MAX]; /* "" = empty */
	uint64_t generation, epoch;
	int64_t now;
	struct view_bytes *kept; /* one reference; NULL = empty */
};

struct egs_views {
	struct view_slot slot[VIEW_SLOTS];
	struct egs_obuf scratch; /* where a view is rendered before it is kept */
	uint64_t hits, misses;
};

static void bytes_release(struct view_bytes *b)
{
	EGS_ASSERT(b->refs > 0);
	if (--b->refs == 0)
		free(b);
}

/* evbuffer's cleanup of a reference (evbuffer_add_reference): the reply no longer needs the bytes. */
static void reply_done(const void *data, size_t len, void *arg)
{
	(void)data;
	(void)len;
	bytes_release(arg);
}

struct egs_views *egs_views_new(void)
{
	return egs_calloc(1, sizeof(struct egs_views));
}

void egs_views_free(struct egs_views *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < VIEW_SLOTS; i++)
		if (v->slot[i].kept)
			bytes_release(v->slot[i].kept);
	egs_obuf_cleanup(&v->scratch);
	free(v);
}

void egs_views_changed(struct egs_server *srv)
{
	srv->view_epoch++;
}

static struct view_slot *slot_of(struct egs_views *v, const char *id)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (const unsigned char *c = (const unsigned char *)id; *c; c++)
		h = (h ^ *c) * 16777619u;
	return &v->slot[h & (VIEW_SLOTS - 1)];
}

/* g's reply (the same bytes egs_reply_ok(egs_json_gpr()) would send), rendered by gpr_render.c into
 * the views' scratch buffer and copied out; one reference, the caller's. */
static struct view_bytes *build(struct egs_server *srv, const struct egs_gpr *g, int64_t now)
{
	struct egs_obuf *o = &srv->views->scratch;
	o->len = 0;
	egs_render_gpr_reply(o, g, now, egs_gpr_cost(srv, g, now));
	struct view_bytes *b = egs_malloc(sizeof(*b) + o->len);
	b->refs = 1;
	b->len = o->len;
	memcpy(b->data, o->p, o->len);
	return b;
}

/* Builds g's reply into s (the same bytes egs_reply_ok would send) and keys it by the state now.  The
 * bytes s kept before stay with the replies that still reference them. */
static void render(struct egs_server *srv, struct view_slot *s, const struct egs_gpr *g, int64_t now)
{
	if (s->kept)
		bytes_release(s->kept);
	s->kept = build(srv, g, now);
	egs_strlcpy(s->id, g->id, sizeof(s->id));
	s->generation = srv->st.generation;
	s->epoch = srv->view_epoch;
	s->now = now;
}

void egs_gpr_view_reply(struct egs_req *r, const struct egs_gpr *g)
{
	struct egs_server *srv = r->srv;
	int64_t now = egs_now(srv);
	if (!srv->views) {
		egs_reply_ok(r, egs_json_gpr(srv, g));
		return;
	}
	if (egs_state_has_changes(&srv->st) || srv->held.len) {
		/* held for the turn's commit: built now, not kept */
		struct view_bytes *b = build(srv, g, now);
		egs_reply_json_ref(r, b->data, b->len, reply_done, b);
		return;
	}
	struct view_slot *s = slot_of(srv->views, g->id);
	if (s->generation == srv->st.generation && s->epoch == srv->view_epoch && s->now == now &&
	    strcmp(s->id, g->id) == 0) {
		srv->views->hits++;
	} else {
		srv->views->misses++;
		render(srv, s, g, now);
	}
	s->kept->refs++; /* the reply's reference, released by reply_done once evhttp is done with it */
	egs_reply_json_ref(r, s->kept->data, s->kept->len, reply_done, s->kept);
}

void egs_views_counts(const struct egs_views *v, uint64_t *hits, uint64_t *misses)
{
	*hits = v ? v->hits : 0;
	*misses = v ? v->misses : 0;
}

/*
 * gpr_view.c: the serialized reply of GET /api/v1/gpr?gprId=, kept until something it shows changes.
 *
 * A status read's view is written by gpr_render.c (about 10,700 instructions against jansson's
 * 182,000, issue 16), and the reply's bytes (the whole envelope) are kept in a small direct-mapped
 * table of VIEW_SLOTS entries keyed by gprId.  A view is a function of the GPR's own fields, of
 * `now` and of its cost (egs_gpr_cost: prices, the shape of its first node), and nothing else, so a
 * kept view is served again while all of these hold:
 *
 *   - the GPR's view_stamp is the one the view was built at: egs_state_restamp gives it a stamp
 *     never given out before on every egs_state_touch of it (each call, not only a turn's first),
 *     when it enters the state, when the planner moves its estimate (sched_place.c set_estimate)
 *     and when an agent reports a check run for it;
 *   - srv->view_epoch is unchanged: it moves only where GPRs are replaced or changed in bulk without
 *     a touch (egs_views_changed): a model swap (reload, a failed commit, a follower's full load:
 *     the fresh state's stamps start again), a follower's sync, a follower taking over;
 *   - the cost, computed on every read, is the same double (so a price change or a node's new
 *     shape shows at once, and the cost of a running GPR moves with time);
 *   - egs_now() is the same second, or, for a view that counts nothing from now (no wait to an
 *     estimate in the future, no remaining duration), any later second;
 *   - the GPR is in the state: every GPR that enters it gets a stamp (> 0), and one that never did
 *     (an aged GPR read from the store, server/aged.h, stamp 0) is built each time.
 *
 * So a view survives every change of other GPRs, nodes and workspaces that does not move what it
 * shows: a create behind it, a heartbeat, a commit turn.  Reads while a turn has pending changes are
 * served the same way: the view shows the GPR as it is now (its stamp moved with any pending change
 * of it); a failed commit swaps the model, which drops every kept view.  Access checks are not
 * cached: the caller's role and scope are checked on every read before the kept bytes are sent.
 *
 * Durability: a view also keeps the change clock (state.h view_clock) of the last change it shows:
 * the GPR's stamp, or, for a view that shows a cost (a GPR that holds GPUs), the later of it and the
 * last price change (or, when the GPR names no GPU shape, its first node's shape gives the price:
 * the clock when the view was built).  Its reply goes out at once when every
 * change up to that clock is durable (egs_reply_view_ref, durable.c "Shown"), and waits for the
 * commit or fsync otherwise, as any reply does (http.c).
 *
 * EGSD_VIEW_CHECK=1 in egsd's environment (the API tests set it) renders every kept view again when
 * it is served and aborts if the bytes differ: a missed restamp fails the test that shows it.
 *
 * Memory: at most VIEW_SLOTS kept replies (about 1 KiB each), whatever the number of GPRs, plus the
 * replaced ones that replies still on their way out hold.
 *
 * A kept reply's bytes are shared, not copied: a read hands the front a reference to them (a 1 KiB
 * copy into a 2 KiB evbuffer chain was about 1,900 instructions of a kept read), counted so that a
 * view rendered again while an earlier reply still waits in an output buffer (or is held for a
 * commit) leaves that reply its bytes.  Loop thread only.
 */
#include "server/server.h"

#include "server/gpr_render.h"
#include "server/observe.h"

#include "core/util.h"

#include <stdio.h>
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
	uint64_t stamp, epoch;
	int64_t now;
	bool timed; /* it shows a duration counted from now */
	double cost;
	uint64_t shows; /* the change clock of the last change it shows (state.h view_clock) */
	struct view_bytes *kept; /* one reference; NULL = empty */
};

struct egs_views {
	struct view_slot slot[VIEW_SLOTS];
	struct egs_buf scratch; /* where a view is rendered before it is kept */
	bool check;              /* EGSD_VIEW_CHECK: render a served view again and compare */
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
	struct egs_views *v = egs_calloc(1, sizeof(struct egs_views));
	const char *check = getenv("EGSD_VIEW_CHECK");
	v->check = check && strcmp(check, "1") == 0;
	return v;
}

void egs_views_free(struct egs_views *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < VIEW_SLOTS; i++)
		if (v->slot[i].kept)
			bytes_release(v->slot[i].kept);
	egs_buf_cleanup(&v->scratch);
	free(v);
}

void egs_views_changed(struct egs_server *srv)
{
	srv->view_epoch++;
	egs_durable_shown_reset(srv); /* what the new model shows is durable once the writes so far are */
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
static struct view_bytes *build(struct egs_server *srv, const struct egs_gpr *g, int64_t now, double cost)
{
	struct egs_buf *o = &srv->views->scratch;
	o->len = 0;
	egs_render_gpr_reply(o, g, now, cost);
	struct view_bytes *b = egs_malloc(sizeof(*b) + o->len);
	b->refs = 1;
	b->len = o->len;
	memcpy(b->data, o->p, o->len);
	return b;
}

/* The change clock of the last change a view of g built now shows: g's own fields changed at its
 * stamp at the latest (every change of them restamps it).  A cost, when it shows one (egs_gpr_cost
 * is 0 whatever else holds while g holds no GPUs), also moves with the prices, which change at
 * srv->shown.prices, and, for a GPR that names no GPU shape, with the shape of its first node, which
 * changes without restamping g: for that one, the clock of now. */
static uint64_t shown_clock(const struct egs_server *srv, const struct egs_gpr *g, int64_t now)
{
	int64_t from, to;
	if (!srv->obs || !egs_gpr_held(g, now, &from, &to))
		return g->view_stamp;
	if (!g->gpu_shape[0])
		return srv->st.view_clock;
	return g->view_stamp > srv->shown.prices ? g->view_stamp : srv->shown.prices;
}

/* Builds g's reply into s and keys it by what it was built from.  The bytes s kept before stay with
 * the replies that still reference them. */
static void render(struct egs_server *srv, struct view_slot *s, const struct egs_gpr *g, int64_t now, double cost)
{
	if (s->kept)
		bytes_release(s->kept);
	s->kept = build(srv, g, now, cost);
	struct egs_gpr_facts f;
	egs_gpr_facts(g, now, &f);
	egs_strlcpy(s->id, g->id, sizeof(s->id));
	s->stamp = g->view_stamp;
	s->epoch = srv->view_epoch;
	s->now = now;
	s->timed = f.timed;
	s->cost = cost;
	s->shows = shown_clock(srv, g, now);
}

/* Whether s holds g's view as a build now would write it (the file comment's rules). */
static bool still_true(const struct egs_server *srv, const struct view_slot *s, const struct egs_gpr *g,
		       int64_t now, double cost)
{
	return s->kept && s->stamp == g->view_stamp && s->epoch == srv->view_epoch &&
	       (s->now == now || (!s->timed && now > s->now)) && memcmp(&s->cost, &cost, sizeof(cost)) == 0 &&
	       strcmp(s->id, g->id) == 0;
}

/* EGSD_VIEW_CHECK: the kept bytes s is about to serve are what g's view is now, or egsd aborts. */
static void check_kept(struct egs_server *srv, const struct view_slot *s, const struct egs_gpr *g, int64_t now,
		       double cost)
{
	struct view_bytes *b = build(srv, g, now, cost);
	bool same = b->len == s->kept->len && memcmp(b->data, s->kept->data, b->len) == 0;
	if (!same)
		fprintf(stderr, "level=fatal msg=\"kept status view is stale\" gpr=%s stamp=%llu\n kept: %.*s\n now:  %.*s\n",
			g->id, (unsigned long long)g->view_stamp, (int)s->kept->len, s->kept->data, (int)b->len, b->data);
	bytes_release(b);
	EGS_ASSERT(same);
}

void egs_gpr_view_reply(struct egs_req *r, const struct egs_gpr *g)
{
	struct egs_server *srv = r->srv;
	int64_t now = egs_now(srv);
	double cost = egs_gpr_cost(srv, g, now);
	if (!srv->views) {
		egs_reply_ok(r, egs_json_gpr(srv, g));
		return;
	}
	if (!g->view_stamp) { /* never in the state (an aged GPR read from the store): built each time */
		struct view_bytes *b = build(srv, g, now, cost);
		egs_reply_json_ref(r, b->data, b->len, reply_done, b);
		return;
	}
	struct view_slot *s = slot_of(srv->views, g->id);
	if (still_true(srv, s, g, now, cost)) {
		srv->views->hits++;
		if (srv->views->check)
			check_kept(srv, s, g, now, cost);
	} else {
		srv->views->misses++;
		render(srv, s, g, now, cost);
	}
	s->kept->refs++; /* the reply's reference, released by reply_done once the front is done with it */
	egs_reply_view_ref(r, s->kept->data, s->kept->len, s->shows, reply_done, s->kept);
}

/* evbuffer's cleanup of a list's reply: its bytes were the caller's buffer. */
static void list_done(const void *data, size_t len, void *arg)
{
	(void)data;
	(void)len;
	free(arg);
}

void egs_gpr_list_reply(struct egs_req *r, const struct egs_gpr *const *gprs, size_t n, bool paged,
			const char *next)
{
	struct egs_server *srv = r->srv;
	int64_t now = egs_now(srv);
	struct egs_buf b = { 0 };
	static const char head[] = "{\"statusCode\":200,\"status\":\"OK\",\"message\":\"Success\",\"data\":{\"items\":[";
	egs_render_raw(&b, head, sizeof(head) - 1);
	for (size_t i = 0; i < n; i++) {
		if (i)
			egs_render_raw(&b, ",", 1);
		egs_render_gpr(&b, gprs[i], now, egs_gpr_cost(srv, gprs[i], now));
	}
	egs_render_raw(&b, "]", 1);
	if (paged) {
		egs_render_raw(&b, ",\"continue\":", 12);
		if (next)
			egs_render_str(&b, next);
		else
			egs_render_raw(&b, "null", 4);
	}
	egs_render_raw(&b, "}}", 2);
	egs_reply_json_ref(r, b.p, b.len, list_done, b.p);
}

void egs_views_counts(const struct egs_views *v, uint64_t *hits, uint64_t *misses)
{
	*hits = v ? v->hits : 0;
	*misses = v ? v->misses : 0;
}

/*
 * gpr_render.h: a GPR's wire view written straight as bytes, without building a jansson tree.
 *
 * A status read that builds its view with egs_json_gpr() (views.c: json_pack of ~45 keys) and dumps
 * it spends most of its instructions in jansson (issue 16).  egs_render_gpr() writes the same view
 * into a growable byte buffer (core/buf.h) directly.  The promise, checked byte for byte by
 * tests/unit/test_gpr_render.c over thousands of generated GPRs: the bytes equal jansson's
 * JSON_COMPACT dump of egs_json_gpr_at(g, now, cost) (same key order, same number formatting, same
 * string escaping).  egs_json_gpr stays the source of the view's shape for the places that need a
 * json_t (the list, the queue, the agent's spec); a field added there must be added here too, and
 * the unit test fails until it is.
 *
 * Both read the derived fields (estimates, allocation, remaining time) through egs_gpr_facts(), so
 * the two cannot disagree on what a field holds, only on how it is written.
 */
#ifndef EGS_GPR_RENDER_H
#define EGS_GPR_RENDER_H

#include "core/buf.h"
#include "core/model.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a GPR's view shows that is not a field of struct egs_gpr, at `now`. */
struct egs_gpr_facts {
	int64_t est;       /* estimatedStartTime (0 = null) */
	bool has_wait;     /* estimatedWaitTime is a duration (else null)... */
	int64_t wait;      /* ...of this many seconds */
	int allocated;     /* numGpusAllocated of a dedicated GPR (whole GPUs) */
	int64_t remaining; /* remainingDuration, seconds */
	const char *internal_state;
	bool timed; /* a later now would show other durations (a wait or a remaining duration) */
};
void egs_gpr_facts(const struct egs_gpr *g, int64_t now, struct egs_gpr_facts *f);

/* The GPR view as a jansson tree (views.c): the wire JSON of GET /api/v1/gpr's data, at `now` and
 * with cost (egs_gpr_cost) already computed.  Returns a new reference. */
json_t *egs_json_gpr_at(const struct egs_gpr *g, int64_t now, double cost);

/* Appends to b the bytes json_dump(egs_json_gpr_at(g, now, cost), JSON_COMPACT) gives.  g is
 * borrowed; its strings must be valid UTF-8 (as jansson requires of them too). */
void egs_render_gpr(struct egs_buf *b, const struct egs_gpr *g, int64_t now, double cost);
/* Appends s as a JSON string, escaped as jansson escapes it. */
void egs_render_str(struct egs_buf *b, const char *s);
/* Appends n bytes of s as they are. */
void egs_render_raw(struct egs_buf *b, const char *s, size_t n);
/* Appends the whole reply: {"statusCode":200,"status":"OK","message":"Success","data":<view>}. */
void egs_render_gpr_reply(struct egs_buf *b, const struct egs_gpr *g, int64_t now, double cost);

#endif

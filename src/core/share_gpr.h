/*
 * share_gpr.h: shared GPRs on the state: which node's devices each one holds, what the agents say is
 * attached, and the transitions that follow from that.  The arithmetic is core/share.h.
 *
 * A started shared GPR (share_centi > 0) holds g->shares of one node, g->nodes.v[0], while it is
 * Provisioning or Provisioned, and while it is Releasing until its agent reports it detached.  The
 * node lists the GPRs holding shares of it in n->shared.  egs_share_sync() is the one place that
 * changes that list, and every GPR transition calls it (egs_gpr_set_state), so the list follows from
 * the GPR's state and the node's attachments and is never edited by hand.  A shared GPR sent back to
 * the queue loses its shares; one that ended keeps them as a record.
 *
 * n->attached_shared is what the node's agent reported attached (registration, heartbeats, action
 * results; runtime only).  At load a Provisioned or Releasing shared GPR counts as attached, as a
 * dedicated node's stored attachedGpr does, until its agent says otherwise.
 *
 * Rules the planner and the views build on: a node holding shares (or with a shared attachment) is
 * not free for dedicated GPRs; a node held by a dedicated GPR takes no shares; a node whose agent did
 * not register the "sharing" feature, or did not list its GPUs, never takes shares.
 */
#ifndef EGS_SHARE_GPR_H
#define EGS_SHARE_GPR_H

#include "core/share.h"
#include "core/state.h"

/* True when n may take shares: its agent speaks sharing and listed every GPU with its UUID. */
bool egs_node_can_share(const struct egs_node *n);
/* True when n holds shares or its agent reports a shared attachment. */
bool egs_share_node_busy(const struct egs_node *n);
/* True when n's agent reports a shared attachment that holds no shares of n (its size is unknown:
 * a GPR released or moved meanwhile, whose detach has not come back yet). */
bool egs_share_node_stale(const struct egs_node *n);

/* The hundredths allocated on each device of n (alloc has EGS_SHARE_DEV_MAX entries, n->gpu_count of
 * them used): EGS_SHARE_WHOLE everywhere while a dedicated GPR holds or is attached to n, else the sum
 * of the shares n->shared holds.  This is the allocation map of GET /api/v1/nodes/{node}/gpu-alloc-map. */
void egs_share_node_alloc(const struct egs_node *n, int *alloc);
/* g's shares as hundredths per device index of n (take has EGS_SHARE_DEV_MAX entries). */
void egs_share_takes(const struct egs_node *n, const struct egs_gpr *g, int *take);
/* True when take (per device of n) fits n now: no dedicated GPR on it, no stale attachment, and room
 * on every device given the shares it holds. */
bool egs_share_fits_now(const struct egs_node *n, const int *take);

/* Records that g (shared, about to be provisioned) takes take (per device of n) on n: g->nodes
 * becomes n alone, g->shares the non-zero takes by GPU UUID, g->cluster n's cluster when unset.  The
 * caller then moves g to Provisioning, which makes n list it. */
void egs_share_start(struct egs_state *st, struct egs_gpr *g, struct egs_node *n, const int *take);

/* Makes n->shared of the node g holds (or held) agree with g's state and attachment.  now (0: do not
 * note it) becomes the node's free_since when it is left holding nothing.  No-op for dedicated GPRs. */
void egs_share_sync(struct egs_state *st, struct egs_gpr *g, int64_t now);
/* Called for each GPR the store loads (through egs_state_add_gpr): counts a Provisioned or Releasing
 * shared GPR as attached to its node and links it. */
void egs_share_loaded(struct egs_state *st, struct egs_gpr *g);
/* True when g's agent reports g attached to its node. */
bool egs_share_attached(const struct egs_state *st, const struct egs_gpr *g);

/* An agent's report of the shared GPRs attached to n (registration and heartbeats; ids borrowed):
 * replaces n->attached_shared, then a Provisioning GPR now attached becomes Provisioned and a
 * Releasing one no longer attached becomes Complete. */
void egs_share_set_attached(struct egs_state *st, struct egs_node *n, const struct egs_strlist *ids, int64_t now);
/* One attach (attached true) or detach result for shared GPR gpr_id on n, with the same follow-ups. */
void egs_share_note_attached(struct egs_state *st, struct egs_node *n, const char *gpr_id, bool attached,
			     int64_t now);

/* Remediation of a provisioned shared GPR whose node is no longer schedulable: its shares move to a
 * healthy node of the same cluster where they fit now (Warning NodeReplaced; the agent attaches
 * there and detaches the old node when it can), else one Warning NodeFailed and a retry at the next
 * plan. */
void egs_share_remediate(struct egs_state *st, struct egs_gpr *g, int64_t now);

#endif

/*
 * share.h: the arithmetic of GPU sharing, pure and without state.
 *
 * A shared GPR (gpuSharingMode Shared) asks for a number of GPUs with at most two decimals (0.2, 1.2,
 * 2) on one node; the devices of that node may then be split between GPRs of different workspaces.
 * Shares are integers in hundredths of a GPU ("centi-GPUs": 0.60 is 60) so that no floating point ever
 * decides whether something fits.  A device holds at most EGS_SHARE_WHOLE.
 *
 * egs_share_fit() is the allocation rule (seed 003): one device with room when there is one (the best
 * fit), otherwise the request spread as evenly as hundredths allow over the fewest devices that can
 * take it, preferring the devices with the most room.  On two free devices, 0.2 then 1.2 leave 0.80
 * and 0.60 allocated.
 *
 * The timeline is what the planner knows of one node while it walks the queue: the shares running
 * and reserved there, each until its end.  Every share it holds started no later than the planner's
 * floor for the node, so after the floor usage only ever goes down: a request that fits at its start
 * fits for its whole window.
 */
#ifndef EGS_SHARE_H
#define EGS_SHARE_H

#include "core/common.h"

#define EGS_SHARE_WHOLE 100   /* one GPU, in hundredths */
#define EGS_SHARE_DEV_MAX 64  /* devices of one node (egsd refuses more at registration) */
#define EGS_SHARE_TEXT_MAX 16 /* "64.00" and its NUL, with room to spare */

/*
 * Chooses how a node whose device i has room[i] hundredths free (0..EGS_SHARE_WHOLE, ndev devices,
 * at most EGS_SHARE_DEV_MAX) takes a request of `request` hundredths.  When request fits one device,
 * the device with the least room that still fits takes it all (ties: the lowest index).  Otherwise
 * the smallest k >= 2 for which the k devices with the most room (ties: the lowest index) can take
 * request split evenly (request / k each, the remainder's hundredths one each on the first of them)
 * is used.  On success writes take[0..ndev) (hundredths per device, 0 for untouched ones) and returns
 * true; returns false when the node cannot hold the request now (take is then all 0).
 */
bool egs_share_fit(const int *room, int ndev, int request, int *take);

/* Converts a JSON number of GPUs to hundredths: true when v is in (0, max_centi / 100] with at most
 * two decimals (0.2, 1.25, 3); false for 0.001, negatives, NaN and infinities. */
bool egs_share_from_number(double v, int max_centi, int *centi);

/* Writes centi as a decimal with exactly two decimals ("0.60", "1.00") into buf (n bytes). */
void egs_share_format(int centi, char *buf, size_t n);

/* Parses a share written as egs_share_format does (digits, '.', at most two decimals; "1", "0.6"
 * and "0.60" all work) into hundredths; false for anything else or for 0 or more than max_centi. */
bool egs_share_parse(const char *s, int max_centi, int *centi);

/* One allocation on a node's timeline: take[d] hundredths of device d until end. */
struct egs_share_alloc {
	int64_t end;
	int take[EGS_SHARE_DEV_MAX];
};

/* The shares running or reserved on one node (caller-owned storage; see the file comment). */
struct egs_share_timeline {
	int ndev;
	int64_t last_start; /* the latest start added: nothing placed later may start before it */
	struct egs_share_alloc *v; /* owned */
	size_t n, cap;
};

void egs_share_timeline_init(struct egs_share_timeline *tl, int ndev);
void egs_share_timeline_cleanup(struct egs_share_timeline *tl);
/* Records take[0..ndev) from start until end (take is copied). */
void egs_share_timeline_add(struct egs_share_timeline *tl, int64_t start, int64_t end, const int *take);
/* The latest end on tl, INT64_MIN when it holds nothing. */
int64_t egs_share_timeline_end(const struct egs_share_timeline *tl);
/*
 * The earliest time t >= max(floor, tl->last_start) at which `request` fits the devices' room left by
 * the allocations still running at t (those whose end is after t), trying the floor and then each
 * end after it in order.  tl may be NULL (an idle node of ndev devices).  Writes the take at t
 * (egs_share_fit) and returns t, or INT64_MAX when not even the empty node can hold the request.
 */
int64_t egs_share_timeline_earliest(const struct egs_share_timeline *tl, int ndev, int64_t floor, int request,
				    int *take);

#endif

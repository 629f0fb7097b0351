/*
 * outbox.h: the webhook outbox, the durable side of notify.c's worker.
 *
 * A notification is a stored document (EGS_KIND_OUTBOX, named by its idempotency key) from the
 * turn that recorded its event until the receiver answers 2xx or the message is given up: it is
 * written in that turn's group commit (so the event and its notification are stored together, or
 * neither is), handed to the worker only after that commit, rewritten with its attempt count and
 * next-try time after each failed attempt, and deleted once it is delivered, failed for good or
 * dropped.  At start every stored message is handed to the worker again, oldest event first, with
 * the attempts it already had: delivery is at least once, and receivers deduplicate by the key, the
 * same on every attempt and after a restart (header `Idempotency-Key`, body field `idempotencyKey`).
 */
#ifndef EGS_OUTBOX_H
#define EGS_OUTBOX_H

#include "server/notify.h"
#include "server/server.h"

/* Commit turn, before the commit: a stored message for each of the turn's new events that its
 * workspace's webhook should hear (GPR lifecycle and alert events of a workspace with a URL). */
void egs_outbox_before_commit(struct egs_server *srv, int64_t now);
/* After that commit succeeded: hands the turn's new messages to the worker. */
void egs_outbox_committed(struct egs_server *srv);
/* At start, once the worker runs: hands every stored message to it, oldest event first.  A stored
 * message that does not parse is deleted (logged). */
void egs_outbox_resume(struct egs_server *srv);
/* The worker's result callback (egs_notify_new's done; arg is the server): counts it, updates or
 * deletes the stored message, and records NotificationFailed when a message is given up. */
void egs_outbox_done(void *arg, const struct egs_notify_result *res);

#endif

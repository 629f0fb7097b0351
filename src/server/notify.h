/*
 * notify.h: webhook delivery (Slack-compatible incoming webhooks) on a worker thread.
 *
 * The loop thread queues a message (URL, JSON payload, a tag naming its workspace) and returns at
 * once; the worker POSTs it with libcurl, retrying network errors, 408, 429 and 5xx answers with
 * exponential backoff (base, doubling, capped, with +-20% jitter) up to max_attempts.  Other 4xx
 * answers fail at once: a wrong URL does not get better.  Messages to one URL go out in the order
 * they were queued; a URL that is down holds back only its own messages.  The queue is bounded:
 * a message that does not fit is dropped and reported as such.
 *
 * Results come back to the loop thread: the worker appends them to a list and writes a byte to a
 * pipe whose read end is an event of the loop, whose callback hands each result to `done`.  The
 * worker never touches anything of the loop's (struct egs_state in particular).  Every message
 * carries an idempotency key, sent as the header `Idempotency-Key` on every attempt, and each failed
 * attempt that will be retried is reported too (EGS_NOTIFY_RETRY, with the delay): the loop keeps
 * the messages in the store (outbox.c), so they survive a restart and are handed back here with the
 * attempts they already had.
 */
#ifndef EGS_NOTIFY_H
#define EGS_NOTIFY_H

#include "core/common.h"

#include <event2/event.h>

struct egs_notify_config {
	size_t max_queue;       /* messages waiting at most (default 1000) */
	int max_attempts;       /* tries per message (default 10) */
	int64_t backoff_ms;     /* first retry delay (default 1000) */
	int64_t backoff_max_ms; /* cap (default 60000) */
	long timeout_ms;        /* per attempt (default 5000) */
	bool allow_private;     /* post to loopback, link-local and metadata addresses too (default no) */
};

/* RETRY: an attempt failed and the message stays queued; the others end the message. */
enum egs_notify_outcome { EGS_NOTIFY_DELIVERED, EGS_NOTIFY_FAILED, EGS_NOTIFY_DROPPED, EGS_NOTIFY_RETRY };

#define EGS_NOTIFY_KEY_MAX 64

struct egs_notify_result {
	enum egs_notify_outcome outcome;
	char tag[64];      /* the tag given to egs_notify_send */
	char key[EGS_NOTIFY_KEY_MAX]; /* the idempotency key given to egs_notify_send */
	int attempts;      /* attempts made so far, those before a restart included */
	int64_t retry_ms;  /* RETRY: the next attempt is due in this many milliseconds */
	long http_status;  /* last answer's status, 0 when there was none */
	char error[160];   /* why the last attempt failed, "" when delivered */
};

typedef void (*egs_notify_done_fn)(void *arg, const struct egs_notify_result *res);

struct egs_notify;

/* Starts the worker.  cfg may be NULL (defaults); done (called on base's thread) may be NULL.
 * Returns EGS_ERR_IO when the pipe or thread cannot be created.  *out is freed with
 * egs_notify_free. */
enum egs_err egs_notify_new(struct event_base *base, const struct egs_notify_config *cfg, egs_notify_done_fn done,
			    void *arg, struct egs_notify **out);
/* Stops the worker (an attempt in flight ends within its timeout), drops what is still queued
 * without reporting it, and frees everything.  NULL is a no-op. */
void egs_notify_free(struct egs_notify *n);

/* Queues a POST of payload (JSON text, copied) to url (copied) with the header `Idempotency-Key: key`
 * (printable ASCII, shorter than EGS_NOTIFY_KEY_MAX).  attempts: tries already made (0 for a new
 * message; a message resumed after a restart keeps its count against max_attempts); the first try is
 * due in delay_ms.  Returns false when the queue is full: the message is dropped and a DROPPED result
 * follows. */
bool egs_notify_send(struct egs_notify *n, const char *url, const char *tag, const char *key, const char *payload,
		     int attempts, int64_t delay_ms);
/* Messages queued or in flight. */
size_t egs_notify_pending(struct egs_notify *n);

/* True when url is an http(s) URL egsd may post to (no spaces, quotes or control characters, at
 * most 512 bytes).  *why (optional) receives a static reason on failure. */
bool egs_notify_url_valid(const char *url, const char **why);
/* True when url's host is a loopback, "this host", link-local or cloud metadata address (in any
 * form curl accepts: 127.1, [::ffff:127.0.0.1], 0x7f000001) or localhost.  The worker also refuses
 * such addresses at connect time unless allow_private, so a DNS name cannot reach them either. */
bool egs_notify_url_private(const char *url);

#endif

/*
 * egsd_harness.h: a whole egsd inside a libFuzzer process, for the targets that feed requests to the
 * real server (fuzz_http, fuzz_body, fuzz_agent).
 *
 * The harness starts egsd's server (src/server) on 127.0.0.1 with an ephemeral port, a SQLite store
 * in a fresh temporary directory (on /dev/shm when there is one: its fsync costs nothing), the dev
 * clock, and a fixed bootstrap admin key (EGS_FUZZ_ADMIN_KEY, adopted as --admin-key-file does), so
 * seed inputs can carry a working credential.  It then builds a small world through the API itself:
 * cluster c1 with an agent that registered two 8-GPU nodes, workspaces w and w2, a template t1, and
 * two GPRs (one provisioning, one queued).  Each exchange connects a real TCP socket, sends the bytes,
 * and turns egsd's event loop in this thread until egsd closes the connection, so every byte goes
 * through the connection front, evhttp, the dispatcher, the body check and the handler.
 *
 * Webhook deliveries go through a proxy on a closed loopback port (http_proxy), so fuzzing never
 * resolves or reaches a host the fuzzer wrote into a webhook URL.
 *
 * State accumulates over a run (what one input creates, the next sees); every EGS_FUZZ_RESET inputs
 * the server is stopped and started again on a fresh directory, so the store stays small.  A crash
 * found this way may need the inputs before it: replay the whole corpus directory when one input
 * alone does not reproduce it.
 */
#ifndef EGS_FUZZ_EGSD_HARNESS_H
#define EGS_FUZZ_EGSD_HARNESS_H

#include <stdbool.h>
#include <stddef.h>

#define EGS_FUZZ_ADMIN_KEY "00000000-0000-4000-8000-00000000f022"
#define EGS_FUZZ_RESET 4000

/* Who sends a request the harness builds. */
enum egs_fuzz_who { EGS_FUZZ_ANON, EGS_FUZZ_ADMIN, EGS_FUZZ_AGENT };

/* Starts egsd and its world the first time; later calls count inputs and restart egsd every
 * EGS_FUZZ_RESET of them.  Aborts when egsd cannot start (a harness bug, not a finding). */
void egs_fuzz_egsd_ready(void);

/* Sends len raw bytes on a new connection (then shuts the write side down) and returns what egsd
 * answered until it closed the connection (caller frees; *out_len its length; NUL-terminated). */
char *egs_fuzz_egsd_raw(const unsigned char *data, size_t len, size_t *out_len);

/* Sends one well-framed request (Connection: close) with body (len bytes, may be NULL) as who and
 * checks the answer (egs_fuzz_check_answer).  Returns the HTTP status, 0 when none came. */
int egs_fuzz_egsd_call(const char *method, const char *path, enum egs_fuzz_who who, const unsigned char *body,
		       size_t len);

/* Aborts when an answer shows a bug: a 500, a JSON envelope whose statusCode differs from the HTTP
 * status, an error envelope without an errorKey, or a 422 VALIDATION_FAILED that names no field
 * (every refused field is named: docs/internals/http.md).  Answers cut short are left alone. */
void egs_fuzz_check_answer(const char *answer, size_t len);

#endif

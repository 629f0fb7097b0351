/*
 * webhook.h: the admission webhook egs-agent serves for its cluster's API server (docs/kubernetes.md,
 * "Admission"): AdmissionReview v1 over HTTPS.
 *
 *   POST /mutate:   a pod created in a slice namespace (labelled kubeslice.io/slice=<workspace>) that
 *                   requests nvidia.com/gpu gets the toleration of the EGS taint and a required node
 *                   affinity to kubeslice.io/slice=<workspace>, so it runs only on its slice's nodes
 *                   (and waits, Pending, until the GPR's nodes are attached).  CPU-only pods and pods
 *                   outside slices are left alone.
 *   POST /validate: a pod outside every slice namespace that tolerates the EGS taint is refused, so
 *                   nobody jumps the queue onto dedicated nodes.
 *
 * The review itself (egs_webhook_review()) is a pure function, unit-tested; the server runs in its own
 * thread with libevent and OpenSSL.
 */
#ifndef EGS_AGENT_WEBHOOK_H
#define EGS_AGENT_WEBHOOK_H

#include "core/common.h"

#include <jansson.h>

/* Writes the slice (workspace) namespace ns belongs to into ws (wssz bytes) and returns true; false
 * when ns is not a slice namespace. */
typedef bool (*egs_webhook_slice_fn)(void *arg, const char *ns, char *ws, size_t wssz);

/*
 * Answers one AdmissionReview (review borrowed) for path "/mutate" or "/validate": returns a new
 * AdmissionReview v1 with the response (uid copied; allowed; for /mutate a base64 JSONPatch when the
 * pod needs one; for a refusal status.code 403 and a message).  A review that is not a v1 Pod review
 * is allowed unchanged (the configurations only send pods).  NULL when review has no request.uid.
 */
json_t *egs_webhook_review(const char *path, json_t *review, egs_webhook_slice_fn slice, void *arg);

struct egs_webhook;

/*
 * Starts the HTTPS server on addr:port (addr NULL: all addresses) with the certificate chain and key
 * in PEM files, answering in its own thread.  Stores it in *out (free with egs_webhook_free()).
 * EGS_ERR_IO with why in err when the files or the port are unusable.
 */
enum egs_err egs_webhook_start(const char *addr, int port, const char *cert_file, const char *key_file,
			       egs_webhook_slice_fn slice, void *arg, struct egs_webhook **out, char *err, size_t errsz);

/* Stops the server and frees it.  egs_webhook_free(NULL) is a no-op. */
void egs_webhook_free(struct egs_webhook *w);

/*
 * The MutatingWebhookConfiguration (mutating) or ValidatingWebhookConfiguration "egs-agent" that points
 * the API server at url_base ("https://host:port") with ca_pem (the CA that signed the server's
 * certificate; PEM text).  Caller decrefs.
 */
json_t *egs_webhook_configuration(bool mutating, const char *url_base, const char *ca_pem);

#endif

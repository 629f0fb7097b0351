/*
 * auth.c: API keys and bearer tokens.
 *
 * An API key is 128 random bits printed as a UUID (the format existing EGS clients send).  Only its
 * BLAKE2b-256 hash is stored; a presented key is hashed, looked up by hash and then compared in
 * constant time (sodium_memcmp), so neither the store nor the timing of a lookup reveals a key.
 * A bearer token is "egs1.<key id>.<expiry>.<mac>" with an HMAC-SHA512/256 (crypto_auth) under a
 * secret kept in the store: verifying one costs one MAC and one map lookup, and deleting or expiring
 * the key revokes its tokens at once.  Neither keys nor tokens are ever logged.
 */
#include "server/server.h"

#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void egs_auth_hash(const char *key, unsigned char hash[32])
{
	crypto_generichash(hash, 32, (const unsigned char *)key, strlen(key), NULL, 0);
}

void egs_auth_new_key(char key[37], unsigned char hash[32])
{
	unsigned char b[16];
	randombytes_buf(b, sizeof(b));
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* variant 1 */
	snprintf(key, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
		 b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
	sodium_memzero(b, sizeof(b));
	egs_auth_hash(key, hash);
}

bool egs_auth_key_wellformed(const char *key)
{
	static const int dash[] = { 8, 13, 18, 23 };
	if (strlen(key) != 36)
		return false;
	for (int i = 0, d = 0; i < 36; i++) {
		if (d < 4 && i == dash[d]) {
			if (key[i] != '-')
				return false;
			d++;
		} else if (!((key[i] >= '0' && key[i] <= '9') || (key[i] >= 'a' && key[i] <= 'f') ||
			     (key[i] >= 'A' && key[i] <= 'F'))) {
			return false;
		}
	}
	return true;
}

void egs_new_id(const char *prefix, char out[EGS_ID_MAX])
{
	unsigned char b[6];
	randombytes_buf(b, sizeof(b));
	snprintf(out, EGS_ID_MAX, "%s-%02x%02x%02x%02x-%02x%02x", prefix, b[0], b[1], b[2], b[3], b[4], b[5]);
}

static void token_mac(struct egs_server *srv, const char *msg, size_t len, char hex[65])
{
	unsigned char mac[crypto_auth_BYTES];
	crypto_auth(mac, (const unsigned char *)msg, len, srv->token_secret);
	egs_hash_hex(mac, hex);
}

void egs_auth_mint(struct egs_server *srv, const struct egs_apikey *key, int64_t exp, char *out, size_t outsz)
{
	char msg[96];
	int n = snprintf(msg, sizeof(msg), "egs1.%s.%lld", key->id, (long long)exp);
	char hex[65];
	token_mac(srv, msg, (size_t)n, hex);
	snprintf(out, outsz, "%s.%s", msg, hex);
}

static bool fill_principal(struct egs_req *r, const struct egs_apikey *k)
{
	struct egs_principal *w = &r->who;
	/* An Editor key is an Owner limited to its workspace (api_auth.c refuses one without it). */
	w->role = k->role == EGS_ROLE_EDITOR ? EGS_ROLE_OWNER : k->role;
	w->key = k;
	egs_strlcpy(w->key_id, k->id, sizeof(w->key_id));
	egs_strlcpy(w->project, k->project, sizeof(w->project));
	egs_strlcpy(w->workspace, k->workspace, sizeof(w->workspace));
	egs_strlcpy(w->cluster, k->cluster, sizeof(w->cluster));
	r->authed = true;
	return true;
}

/* Checks a token; returns the key or NULL (with *err set). */
static const struct egs_apikey *check_token(struct egs_req *r, const char *tok, enum egs_err *err)
{
	struct egs_server *srv = r->srv;
	*err = EGS_ERR_UNAUTHENTICATED;
	const char *last = strrchr(tok, '.');
	if (!last || strlen(last + 1) != 64 || (size_t)(last - tok) >= 96)
		return NULL;
	char hex[65];
	token_mac(srv, tok, (size_t)(last - tok), hex);
	if (sodium_memcmp(hex, last + 1, 64) != 0)
		return NULL;
	/* The MAC is good, so the fields are ours: "egs1.<id>.<exp>". */
	char id[EGS_ID_MAX];
	const char *p = tok + 5, *dot = strchr(p, '.');
	if (!dot || dot > last || (size_t)(dot - p) >= sizeof(id))
		return NULL;
	memcpy(id, p, (size_t)(dot - p));
	id[dot - p] = '\0';
	char *end;
	long long exp = strtoll(dot + 1, &end, 10);
	if (end != last)
		return NULL;
	const struct egs_apikey *k = egs_state_apikey(&srv->st, id);
	if (!k)
		return NULL;
	int64_t now = egs_now(srv);
	if (exp <= now || (k->expires_at && k->expires_at <= now)) {
		*err = EGS_ERR_EXPIRED;
		return NULL;
	}
	return k;
}

bool egs_authenticate(struct egs_req *r)
{
	const char *h = evhttp_find_header(evhttp_request_get_input_headers(r->ev), "Authorization");
	if (!h || strncasecmp(h, "Bearer ", 7) != 0) {
		egs_reply_err(r, EGS_ERR_UNAUTHENTICATED, NULL, NULL, "Unauthenticated: send Authorization: Bearer <token or API key>");
		return false;
	}
	const char *cred = h + 7;
	while (*cred == ' ')
		cred++;
	enum egs_err err = EGS_ERR_UNAUTHENTICATED;
	const struct egs_apikey *k = NULL;
	if (strncmp(cred, "egs1.", 5) == 0) {
		k = check_token(r, cred, &err);
	} else if (egs_auth_key_wellformed(cred)) {
		unsigned char hash[32];
		egs_auth_hash(cred, hash);
		k = egs_state_apikey_by_hash(&r->srv->st, hash);
		if (k && sodium_memcmp(k->hash, hash, 32) != 0)
			k = NULL;
		if (k && k->expires_at && k->expires_at <= egs_now(r->srv)) {
			err = EGS_ERR_EXPIRED;
			k = NULL;
		}
		if (!k && err == EGS_ERR_EXPIRED) {
			egs_reply_err(r, EGS_ERR_KEY_EXPIRED, NULL, NULL, "Api Key has expired");
			return false;
		}
	}
	if (!k) {
		if (err == EGS_ERR_EXPIRED)
			egs_reply_err(r, EGS_ERR_EXPIRED, NULL, NULL, "the token has expired; authenticate again");
		else
			egs_reply_err(r, EGS_ERR_UNAUTHENTICATED, NULL, NULL, "Unauthenticated");
		return false;
	}
	return fill_principal(r, k);
}

/*
 * auth.c: API keys and bearer tokens.
 *
 * An API key is 128 random bits printed as a UUID (the format existing EGS clients send).  Only its
 * BLAKE2b-256 hash is stored; a presented key is hashed, looked up by hash and then compared in
 * constant time (sodium_memcmp), so neither the store nor the timing of a lookup reveals a key.
 * A bearer token is "egs1.<key id>.<expiry>.<mac>" with an HMAC-SHA512/256 (crypto_auth) under a
 * secret kept in the store: verifying one costs one MAC and one map lookup, and deleting or expiring
 * the key revokes its tokens at once.  Neither keys nor tokens are ever logged.
 *
 * The credential cache (issue 16): a credential that authenticated once is found again by a keyed
 * SipHash-128 of its text (a PRF under a random key drawn at start, so a tag cannot be forged or made
 * to collide) instead of a BLAKE2b hash and a map lookup by hash (a key) or an HMAC (a token).  A hit
 * names the key by its id and carries the key hash seen at first sight; the key is then looked up by
 * id on every request and its stored hash compared in constant time, so deleting a key (or a reload
 * that replaced it) fails the very next request, and expiry is checked as before.  Only tags, ids and
 * hashes are kept, never a credential's text.  Tokens are cached under the token secret they were
 * checked with: another secret (a follower that loaded its leader's) empties the cache.
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

/* Checks a token; returns the key (*token_exp its expiry) or NULL (with *err set). */
static const struct egs_apikey *check_token(struct egs_req *r, const char *tok, enum egs_err *err,
						int64_t *token_exp)
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
	*token_exp = exp;
	return k;
}

/* ---- the credential cache ---- */

/* 128 sets of 2 slots (a slot is ~100 bytes).  Direct-mapped, two credentials whose tags met in one
 * slot (1 in 256 for a pair; 1.2% among three) pushed each other out on every use; now it takes three
 * in one set, and the one used least recently makes room. */
#define AUTH_CACHE_SETS 128
#define AUTH_CACHE_WAYS 2
_Static_assert(crypto_shorthash_siphashx24_BYTES == 16, "the tag is compared with crypto_verify_16");

struct auth_slot {
	unsigned char tag[crypto_shorthash_siphashx24_BYTES]; /* keyed hash of the credential text */
	unsigned char hash[32];                               /* the key's hash at first sight */
	char key_id[EGS_ID_MAX];
	int64_t token_exp; /* a token's expiry; 0 for an API key */
	bool used;
};

/* One per process: egsd serves one state.  An entry is only a hint checked against the live key on
 * every use (id lookup and hash compare), so even a second server in one process (the fuzzers) could
 * not be let in by another's entry.  egsd's loop thread only. */
static struct {
	bool ready;
	unsigned char sip_key[crypto_shorthash_siphashx24_KEYBYTES];
	unsigned char secret[crypto_auth_KEYBYTES]; /* the token secret the token entries were checked under */
	struct auth_slot slot[AUTH_CACHE_SETS][AUTH_CACHE_WAYS];
	unsigned char mru[AUTH_CACHE_SETS]; /* the way of each set used last */
	unsigned sets; /* AUTH_CACHE_SETS; EGS_TEST_AUTH_CACHE_SETS=1 puts every credential in one set */
	uint64_t hits, misses;
} cache;

void egs_auth_cache_counts(uint64_t *hits, uint64_t *misses)
{
	*hits = cache.hits;
	*misses = cache.misses;
}

/* The set cred would occupy (its number), its tag in tag.  Empties the cache when the token secret
 * changed. */
static unsigned cache_set(const struct egs_server *srv, const char *cred, unsigned char *tag)
{
	if (!cache.ready) {
		randombytes_buf(cache.sip_key, sizeof(cache.sip_key));
		const char *t = getenv("EGS_TEST_AUTH_CACHE_SETS");
		long n = t ? strtol(t, NULL, 10) : 0;
		cache.sets = n >= 1 && n <= AUTH_CACHE_SETS ? (unsigned)n : AUTH_CACHE_SETS;
		cache.ready = true;
	}
	if (memcmp(cache.secret, srv->token_secret, sizeof(cache.secret)) != 0) {
		memset(cache.slot, 0, sizeof(cache.slot));
		memcpy(cache.secret, srv->token_secret, sizeof(cache.secret));
	}
	crypto_shorthash_siphashx24(tag, (const unsigned char *)cred, strlen(cred), cache.sip_key);
	return tag[0] % cache.sets;
}

/* The slot of set that holds tag, or NULL. */
static struct auth_slot *cache_way(unsigned set, const unsigned char *tag)
{
	for (unsigned w = 0; w < AUTH_CACHE_WAYS; w++) {
		struct auth_slot *s = &cache.slot[set][w];
		/* constant time, as sodium_memcmp, in a fraction of its instructions */
		if (s->used && crypto_verify_16(s->tag, tag) == 0) {
			cache.mru[set] = (unsigned char)w;
			return s;
		}
	}
	return NULL;
}

/* The live key of a cached credential, or NULL (a miss: never seen, replaced, deleted or re-keyed). */
static const struct egs_apikey *cache_find(struct egs_server *srv, const struct auth_slot *s)
{
	if (!s)
		return NULL;
	const struct egs_apikey *k = egs_state_apikey(&srv->st, s->key_id);
	if (!k || crypto_verify_32(k->hash, s->hash) != 0)
		return NULL;
	return k;
}

/* Where a credential of set goes after it was checked: the slot its tag had (a stale entry), else
 * an empty one, else the one not used last. */
static struct auth_slot *cache_room(unsigned set, struct auth_slot *had)
{
	unsigned w = 0;
	if (had)
		w = (unsigned)(had - cache.slot[set]);
	else if (cache.slot[set][0].used)
		w = cache.slot[set][1].used ? 1u - cache.mru[set] : 1u;
	cache.mru[set] = (unsigned char)w;
	return &cache.slot[set][w];
}

static void cache_put(struct auth_slot *s, const unsigned char *tag, const struct egs_apikey *k, int64_t token_exp)
{
	memcpy(s->tag, tag, sizeof(s->tag));
	memcpy(s->hash, k->hash, sizeof(s->hash));
	egs_strlcpy(s->key_id, k->id, sizeof(s->key_id));
	s->token_exp = token_exp;
	s->used = true;
}

/* Checks a credential's text the first time: a token's MAC or an API key's hash.  Returns the key or
 * NULL with *err set (EXPIRED, KEY_EXPIRED or UNAUTHENTICATED); *token_exp is a token's expiry. */
static const struct egs_apikey *check_cred(struct egs_req *r, const char *cred, enum egs_err *err, int64_t *token_exp)
{
	*err = EGS_ERR_UNAUTHENTICATED;
	*token_exp = 0;
	if (strncmp(cred, "egs1.", 5) == 0)
		return check_token(r, cred, err, token_exp);
	if (!egs_auth_key_wellformed(cred))
		return NULL;
	unsigned char hash[32];
	egs_auth_hash(cred, hash);
	const struct egs_apikey *k = egs_state_apikey_by_hash(&r->srv->st, hash);
	if (k && sodium_memcmp(k->hash, hash, 32) != 0)
		k = NULL;
	if (k && k->expires_at && k->expires_at <= egs_now(r->srv)) {
		*err = EGS_ERR_KEY_EXPIRED;
		return NULL;
	}
	return k;
}

bool egs_authenticate(struct egs_req *r)
{
	const char *h = egs_req_header(r, "Authorization");
	if (!h || strncasecmp(h, "Bearer ", 7) != 0) {
		egs_reply_err(r, EGS_ERR_UNAUTHENTICATED, NULL, NULL, "Unauthenticated: send Authorization: Bearer <token or API key>");
		return false;
	}
	const char *cred = h + 7;
	while (*cred == ' ')
		cred++;
	enum egs_err err = EGS_ERR_UNAUTHENTICATED;
	unsigned char tag[crypto_shorthash_siphashx24_BYTES];
	unsigned set = cache_set(r->srv, cred, tag);
	struct auth_slot *slot = cache_way(set, tag);
	const struct egs_apikey *k = cache_find(r->srv, slot);
	int64_t token_exp = k ? slot->token_exp : 0;
	if (k) {
		cache.hits++;
		int64_t now = egs_now(r->srv);
		bool key_expired = k->expires_at && k->expires_at <= now;
		if (token_exp && (token_exp <= now || key_expired))
			err = EGS_ERR_EXPIRED; /* as check_token words it */
		else if (key_expired)
			err = EGS_ERR_KEY_EXPIRED;
		if (err != EGS_ERR_UNAUTHENTICATED)
			k = NULL;
	} else {
		cache.misses++;
		k = check_cred(r, cred, &err, &token_exp);
		if (k)
			cache_put(cache_room(set, slot), tag, k, token_exp);
	}
	if (!k) {
		if (err == EGS_ERR_KEY_EXPIRED)
			egs_reply_err(r, EGS_ERR_KEY_EXPIRED, NULL, NULL, "Api Key has expired");
		else if (err == EGS_ERR_EXPIRED)
			egs_reply_err(r, EGS_ERR_EXPIRED, NULL, NULL, "the token has expired; authenticate again");
		else
			egs_reply_err(r, EGS_ERR_UNAUTHENTICATED, NULL, NULL, "Unauthenticated");
		return false;
	}
	return fill_principal(r, k);
}

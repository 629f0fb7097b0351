/*
 * main.c: egsd's command line.  egsd --listen HOST:PORT --data DIR [--store-url URL] [--dev-clock] [--portal DIR]
 * [--tls-cert FILE --tls-key FILE]
 */
#include "server/server.h"

#include "core/util.h"
#include "server/loop_alloc.h"
#include "server/portal.h"

#include <getopt.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: egsd --listen HOST:PORT --data DIR [--dev-clock] [--token-ttl SECONDS] [--quiet] [options]\n"
		   "  --listen     address to serve the API on (default 127.0.0.1:8080)\n"
		   "  --data       data directory: egs.db (SQLite) and admin.key (default ./var)\n"
		   "  --store-url  where the state lives instead of DIR/egs.db: postgres://... (PostgreSQL,\n"
		   "               docs/ha.md) or a SQLite file path; --store is the same\n"
		   "  --advertise HOST:PORT\n"
		   "               where the other egsd on the same PostgreSQL database reach this one when it\n"
		   "               leads (default: --listen, or the host name when that is a wildcard address)\n"
		   "  --dev-clock  a test clock that stands still and moves only by POST /api/v1/debug/clock\n"
		   "  --token-ttl  lifetime of bearer tokens from /api/v1/auth (default 3600)\n"
		   "  --fair-half-life SECONDS\n"
		   "               half-life of the GPU usage that orders equal priorities (default 86400;\n"
		   "               0 turns fairness off: first come, first served)\n"
		   "  --preempt-min-runtime SECONDS\n"
		   "               a GPR must have run this long before a high-priority request may evict it\n"
		   "               (default 600)\n"
		   "  --max-nodes-per-gpr N\n"
		   "               the global hard limit of numberOfGPUNodes (1-1024, default 64) unless an admin\n"
		   "               sets one (PUT /api/v1/settings/policy; docs/policies.md)\n"
		   "  --no-backfill\n"
		   "               turn off conservative backfill in the planner (on by default: a GPR may start in the\n"
		   "               hole before a reservation when it ends by then; docs/internals/queue-and-scheduler.md)\n"
		   "  --portal DIR serve the web portal at / from DIR (a build of web/) instead of the copy built\n"
		   "               into egsd, for working on the portal\n"
		   "  --max-connections N\n"
		   "               open client connections at most; the least recently active idle one is closed\n"
		   "               for a new one (default: the descriptor limit, ulimit -n, less 64)\n"
		   "  --allow-private-webhooks\n"
		   "               accept webhook URLs on loopback, link-local and cloud metadata addresses\n"
		   "               (refused by default: a workspace admin could reach egsd's own host)\n"
		   "  --admin-key-file FILE\n"
		   "               at the first start, adopt the API key in FILE as the bootstrap admin key instead of\n"
		   "               making one (a Kubernetes Secret; deploy/kubernetes/controller)\n"
		   "  --tls-cert FILE --tls-key FILE\n"
		   "               serve HTTPS (TLS 1.2+) with the certificate chain and private key in FILE (PEM);\n"
		   "               both or neither (default: plain HTTP)\n"
		   "  --slice-token-ttl SECONDS\n"
		   "               lifetime asked of the agents for slice ServiceAccount tokens, the ones in\n"
		   "               workspace kubeconfigs (600 to 31622400, default 604800: 7 days); renewed when a\n"
		   "               quarter is left\n"
		   "  --finished-retention DURATION\n"
		   "               finished GPRs (Complete, Cancelled, Rejected, Error) older than this leave memory\n"
		   "               and are read back from the store when asked for, e.g. 24h or 7d (default 24h;\n"
		   "               0 keeps every GPR in memory)\n"
		   "  --audit-retention DAYS\n"
		   "               keep audit log entries this many days (default 90; 0 keeps them forever)\n"
		   "  --quiet      no access log line per request\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' }, { "data", required_argument, NULL, 'd' },
		{ "dev-clock", no_argument, NULL, 'c' },    { "token-ttl", required_argument, NULL, 't' },
		{ "quiet", no_argument, NULL, 'q' },        { "help", no_argument, NULL, 'h' },
		{ "fair-half-life", required_argument, NULL, 'f' },
		{ "preempt-min-runtime", required_argument, NULL, 'p' },
		{ "max-nodes-per-gpr", required_argument, NULL, 'n' },
		{ "backfill", no_argument, NULL, 'b' }, /* the default since backfill keeps every promise */
		{ "no-backfill", no_argument, NULL, 'B' },
		{ "portal", required_argument, NULL, 'P' },
		{ "max-connections", required_argument, NULL, 'm' },
		{ "allow-private-webhooks", no_argument, NULL, 'W' },
		{ "audit-retention", required_argument, NULL, 'R' },
		{ "finished-retention", required_argument, NULL, 'F' },
		{ "admin-key-file", required_argument, NULL, 'K' },
		{ "tls-cert", required_argument, NULL, 'C' }, { "tls-key", required_argument, NULL, 'k' },
		{ "slice-token-ttl", required_argument, NULL, 'T' },
		{ "store-url", required_argument, NULL, 's' }, { "store", required_argument, NULL, 's' },
		{ "advertise", required_argument, NULL, 'A' },
		{ NULL, 0, NULL, 0 },
	};
	/* Every turn allocates and frees its requests, rows and replies together (~1-2 MB under a create
	 * burst): with glibc's default 128 KiB trim threshold the heap's top was given back with brk()
	 * and taken again every turn, each time paying a page fault per 4 KiB page (issue 16: ~30 brk
	 * per turn, ~2 page faults per create).  Keep up to 64 MiB of free top, grow 4 MiB at a time. */
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
	mallopt(M_TOP_PAD, 4 << 20);
	mallopt(M_MMAP_THRESHOLD, 4 << 20);
	egs_loop_alloc_install(); /* jansson's and libevent's blocks kept on this, the loop's thread: before any of their calls */
	const char *listen = "127.0.0.1:8080", *data = "./var", *portal_dir = NULL;
	bool dev_clock = false;
	struct egs_server srv;
	memset(&srv, 0, sizeof(srv));
	srv.log_requests = true;
	srv.state_cfg.backfill = 1;
	srv.audit_retention_days = 90;
	srv.state_cfg.finished_retention_s = 86400;
	int c;
	while ((c = getopt_long(argc, argv, "l:d:ct:qhf:p:n:", opts, NULL)) != -1) {
		switch (c) {
		case 'l': listen = optarg; break;
		case 'd': data = optarg; break;
		case 'c': dev_clock = true; break;
		case 't': {
			if (!egs_int_parse(optarg, 1, 10LL * 365 * 86400, &srv.token_ttl_s)) {
				fprintf(stderr, "egsd: --token-ttl must be a positive number of seconds\n");
				return 2;
			}
			break;
		}
		case 'f':
		case 'p': {
			int64_t v;
			if (!egs_int_parse(optarg, 0, 100LL * 365 * 86400, &v)) {
				fprintf(stderr, "egsd: --%s must be a number of seconds\n",
					c == 'f' ? "fair-half-life" : "preempt-min-runtime");
				return 2;
			}
			if (c == 'f')
				srv.state_cfg.fair_half_life_s = v ? v : -1;
			else
				srv.state_cfg.preempt_min_runtime_s = v ? v : -1;
			break;
		}
		case 'n': {
			int64_t n;
			if (!egs_int_parse(optarg, 1, 1024, &n)) {
				fprintf(stderr, "egsd: --max-nodes-per-gpr must be a number from 1 to 1024\n");
				return 2;
			}
			srv.max_nodes_per_gpr = (int)n;
			break;
		}
		case 'm': {
			int64_t n;
			if (!egs_int_parse(optarg, 16, 1 << 24, &n)) {
				fprintf(stderr, "egsd: --max-connections must be a number from 16 to 16777216\n");
				return 2;
			}
			srv.max_connections = (long)n;
			break;
		}
		case 'W': srv.allow_private_webhooks = true; break;
		case 'R':
			if (!egs_int_parse(optarg, 0, 100 * 365, &srv.audit_retention_days)) {
				fprintf(stderr, "egsd: --audit-retention must be a number of days from 0 to 36500\n");
				return 2;
			}
			break;
		case 'F': {
			const char *why;
			int64_t v = 0;
			if (strcmp(optarg, "0") != 0 && (!egs_duration_parse(optarg, &v, &why) || v < 1)) {
				fprintf(stderr, "egsd: --finished-retention must be a duration such as 30s, 24h or 7d (0: keep all)\n");
				return 2;
			}
			srv.state_cfg.finished_retention_s = v;
			break;
		}
		case 's':
			if (!*optarg) {
				fprintf(stderr, "egsd: --store-url must not be empty\n");
				return 2;
			}
			srv.store_url = optarg;
			break;
		case 'A':
			if (!strchr(optarg, ':') || strlen(optarg) >= sizeof(srv.advertised)) {
				fprintf(stderr, "egsd: --advertise must be HOST:PORT\n");
				return 2;
			}
			srv.advertise = optarg;
			break;
		case 'q': srv.log_requests = false; break;
		case 'b': srv.state_cfg.backfill = 1; break;
		case 'B': srv.state_cfg.backfill = 0; break;
		case 'P': portal_dir = optarg; break;
		case 'K': srv.admin_key_file = optarg; break;
		case 'C': srv.tls_cert = optarg; break;
		case 'k': srv.tls_key = optarg; break;
		case 'T':
			if (!egs_int_parse(optarg, 600, 366LL * 86400, &srv.slice_token_ttl_s)) {
				fprintf(stderr, "egsd: --slice-token-ttl must be a number of seconds from 600 to 31622400\n");
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!srv.tls_cert != !srv.tls_key) {
		fprintf(stderr, "egsd: --tls-cert and --tls-key go together (HTTPS needs both)\n");
		return 2;
	}
	if (sodium_init() < 0) {
		fprintf(stderr, "egsd: libsodium failed to initialise\n");
		return 1;
	}
	srv.portal = portal_dir ? egs_portal_new_dir(portal_dir) : egs_portal_new_embedded(egs_portal_embedded);
	if (!srv.portal) {
		fprintf(stderr, "egsd: --portal %s is not a directory with an index.html (build web/ first)\n", portal_dir);
		return 2;
	}
	static char logbuf[1 << 16];
	setvbuf(stderr, logbuf, _IOFBF, sizeof(logbuf));
	srv.log = stderr;
	if (egs_server_start(&srv, listen, data, dev_clock) != EGS_OK) {
		fflush(stderr);
		egs_server_stop(&srv);
		egs_portal_free(srv.portal);
		return 1;
	}
	event_base_dispatch(srv.base);
	fprintf(srv.log, "level=info msg=\"egsd stopped\" requests=%llu\n", (unsigned long long)srv.requests);
	bool stepped_down = srv.stepped_down;
	egs_server_stop(&srv);
	egs_portal_free(srv.portal);
	return stepped_down ? 70 : 0; /* 70: it led and lost it (docs/ha.md); a supervisor restarts it */
}

/*
 * ctl.h: egsctl's modules (src/client/egsctl.c and ctl_*.c) and what they share: the run context,
 * option parsing, exit codes, output helpers.  Not part of libegs's public API.
 *
 * Exit codes are a contract with scripts (docs/egsctl.md); every path out of a command returns one
 * of enum ctl_exit.  Results go to stdout, messages and progress to stderr.
 */
#ifndef EGS_CLIENT_CTL_H
#define EGS_CLIENT_CTL_H

#include <egs/egs.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum ctl_exit {
	CTL_OK = 0,
	CTL_FAILED = 1,      /* the server refused the request (invalid, unsatisfiable, ...) */
	CTL_USAGE = 2,       /* bad command line or manifest: nothing was sent */
	CTL_NOT_FOUND = 3,   /* the object does not exist (or is outside the key's scope) */
	CTL_AUTH = 4,        /* no credentials, refused key, or the role may not do this */
	CTL_UNREACHABLE = 5, /* the server could not be reached, or failed (5xx) */
	CTL_TIMEOUT = 6,     /* wait: the condition was not met within --timeout */
	CTL_CONFLICT = 7,    /* the object's state forbids it (provisioned, already released, ...) */
	CTL_NEVER = 8,       /* wait: the GPR reached a state from which the condition cannot be met */
	CTL_INTERRUPTED = 130,
};

enum ctl_format { CTL_OUT_TABLE, CTL_OUT_WIDE, CTL_OUT_JSON, CTL_OUT_YAML, CTL_OUT_NAME };

/* One run of egsctl: global options and the connection, made on first use. */
struct ctl {
	const char *config_path; /* --config, $EGS_CONFIG, or ~/.config/egs/config */
	const char *context;     /* --context */
	const char *server;      /* --server */
	const char *key_file;    /* --key-file */
	const char *ca_file;     /* --ca-file */
	const char *output;      /* -o as given (NULL = table) */
	enum ctl_format format;
	long request_timeout_s;  /* --request-timeout */
	const char *cmd;         /* "get", "apply", ... for messages */
	struct egs_client *client;
	char server_url[512];    /* what client talks to, for messages */
	char context_name[128];  /* "" when flags alone gave the server */
	char ca_path[4096];      /* CA certificates for https: --ca-file or the context's certificate-authority;
				  * "" = the system store (ctl_credentials) */
};

/* ---- options (ctl_args.c) ---- */

/* The values of a repeatable option (-f a -f b), borrowed from argv. */
#define CTL_LIST_MAX 64
struct ctl_list {
	const char *v[CTL_LIST_MAX + 1]; /* room for a terminating NULL */
	int n;
};

/* One option of a command: --name VALUE (or --name=VALUE, -s VALUE), or a flag without a value.
 * Exactly one of value, flag and list is set. */
struct ctl_opt {
	const char *name;      /* long name without "--" */
	char short_name;       /* 0 = none */
	const char **value;    /* an option with a value (the last one given wins) */
	bool *flag;            /* a flag */
	struct ctl_list *list; /* a repeatable option with a value */
};

/*
 * Parses argv[first..argc) against the command's opts plus the global options (which may appear
 * anywhere), collecting positional arguments into pos (at most maxpos; *npos receives the count).
 * "--help" / "-h" sets *help.  Returns CTL_OK, or CTL_USAGE after printing what is wrong.
 */
int ctl_args(struct ctl *c, int argc, char **argv, int first, const struct ctl_opt *opts, const char **pos,
	     int maxpos, int *npos, bool *help);

/* After ctl_args(): prints text (the command's --help) on stdout when help was asked and the line
 * parsed; returns rc. */
int ctl_help(int rc, bool help, const char *text);

/* Checks -o against the formats a command supports (a mask of 1u << CTL_OUT_*). */
int ctl_check_format(struct ctl *c, unsigned allowed);

/* Prints "egsctl CMD: message" on stderr and returns code (a convenience for `return ctl_usage(...)`). */
int ctl_errorf(struct ctl *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define ctl_usage(c, ...) ctl_errorf((c), CTL_USAGE, __VA_ARGS__)

/* The exit code for a libegs error. */
int ctl_exit_of(enum egs_err err);

/*
 * Reports a failed call on c->client for `what` ("get gpr gpr-1"): the server's message and a hint
 * where one helps (unreachable server, refused key); returns its exit code.
 */
int ctl_fail(struct ctl *c, enum egs_err err, const char *what);

/* Makes client trust c->ca_path for https (when set); a CA file that cannot be read is a usage
 * error (returned; CTL_OK otherwise). */
int ctl_use_ca(struct ctl *c, struct egs_client *client);

/* ctl_fail() for a failed POST /api/v1/auth: every refusal of the key exits CTL_AUTH. */
int ctl_auth_failed(struct ctl *c, enum egs_err err);

/*
 * The authenticated client of this run (made on first use from flags, environment and the config
 * file; see ctl_config.c).  On failure prints why and returns NULL with *code set.
 */
struct egs_client *ctl_client(struct ctl *c, int *code);

/* Parses an integer option in [min, max]; on failure prints a usage error naming opt. */
bool ctl_int(struct ctl *c, const char *opt, const char *s, long min, long max, long *out);
/* Parses a duration option ("10m", "90s", "1h30m"); on failure prints a usage error. */
bool ctl_duration(struct ctl *c, const char *opt, const char *s, int64_t *out);

/* ---- config (ctl_config.c) ---- */

/* Fills server URL and API key for this run (flags > $EGS_SERVER/$EGS_API_KEY > context), and
 * c->ca_path (--ca-file > the context's certificate-authority). */
int ctl_credentials(struct ctl *c, char *url, size_t urlsz, char *key, size_t keysz);
int ctl_cmd_login(struct ctl *c, int argc, char **argv);
int ctl_cmd_config(struct ctl *c, int argc, char **argv);

/* ---- output (ctl_output.c) ---- */

/* A table: add cells row by row, then print with columns aligned (kubectl style). */
struct ctl_table;
struct ctl_table *ctl_table_new(const char *const *headers, size_t ncols);
void ctl_table_add(struct ctl_table *t, ...); /* ncols const char* cells (NULL prints as "") */
void ctl_table_print(struct ctl_table *t, FILE *f);
void ctl_table_free(struct ctl_table *t);

/* Prints v as indented JSON or as YAML (a document; lists as {"items": [...]} by the caller). */
void ctl_print_json(json_t *v, FILE *f);
void ctl_print_yaml(json_t *v, FILE *f);
/* Prints v in c's format when it is json or yaml; returns false for table formats. */
bool ctl_print_data(struct ctl *c, json_t *v);

/* JSON helpers that never return NULL: a member's string ("" when absent), its integer. */
const char *ctl_str(json_t *o, const char *key);
long long ctl_int_of(json_t *o, const char *key);
/* Sorts a JSON array in place with cmp, which compares two json_t *const * (qsort's way). */
void ctl_sort_json(json_t *items, int (*cmp)(const void *, const void *));
/* A member that is a whole or fractional number as text ("8", "0.2"; "0" when absent). */
void ctl_num_text(json_t *o, const char *key, char *buf, size_t n);
/* Relative time for tables: "5m", "2h3m", "3d" for t in the past; "in 5m" for the future; "-". */
void ctl_age(const char *rfc3339, int64_t now, char *buf, size_t n);
/* Duration text "1h2m3s" trimmed of zero parts for display ("2h", "1h30m"). */
void ctl_duration_text(int64_t secs, char *buf, size_t n);
/* The strings of JSON array a joined as "a, b" into buf (n bytes, cut to fit; non-strings as ""). */
void ctl_joined(json_t *a, char *buf, size_t n);

/* ---- commands ----
 * Each runs one command: argv is the command line without the command's own name (argv[0] is the
 * program), options anywhere; each prints its --help on stdout and returns an enum ctl_exit. */
int ctl_cmd_get(struct ctl *c, int argc, char **argv);
int ctl_cmd_describe(struct ctl *c, int argc, char **argv);
int ctl_cmd_create(struct ctl *c, int argc, char **argv);
int ctl_cmd_waittime(struct ctl *c, int argc, char **argv);
int ctl_cmd_release(struct ctl *c, int argc, char **argv);
int ctl_cmd_delete(struct ctl *c, int argc, char **argv);
int ctl_cmd_apply(struct ctl *c, int argc, char **argv);
int ctl_cmd_wait(struct ctl *c, int argc, char **argv);
int ctl_cmd_kubeconfig(struct ctl *c, int argc, char **argv); /* ctl_kubeconfig.c */
int ctl_cmd_regenerate(struct ctl *c, int argc, char **argv); /* ctl_kubeconfig.c */
/* GPR templates (binding false) or template bindings (true) for get and describe (ctl_template.c):
 * the named ones, or every one when nnames is 0; exit codes as the other commands. */
int ctl_get_templates(struct ctl *c, struct egs_client *cl, bool binding, const char *const *names, int nnames);
int ctl_describe_template(struct ctl *c, bool binding, const char *name);
/* delete -f (ctl_apply.c), reached from ctl_cmd_delete; force deletes workspaces whose namespaces run pods. */
int ctl_delete_files(struct ctl *c, const char *const *files, bool release, bool ignore_missing, bool force);

/* ---- waiting with progress (ctl_wait.c) ---- */

/*
 * Waits until GPR id is in state `want` (a provisioningStatus), for at most timeout_s seconds,
 * polling once a second and showing the queue position, the estimate and every state change on
 * stderr (a live line on a terminal, plain lines otherwise).  Returns CTL_OK, CTL_TIMEOUT,
 * CTL_NEVER, CTL_INTERRUPTED or the exit code of a failed call.  deadline_mono (monotonic seconds)
 * bounds several waits together; 0 = now + timeout_s.
 */
int ctl_wait_gpr(struct ctl *c, const char *id, const char *want, int64_t timeout_s, double deadline_mono);
/* The canonical spelling of a provisioningStatus given in any case ("provisioned"), or NULL. */
const char *ctl_state_name(const char *s);
/* Monotonic seconds. */
double ctl_mono(void);
/* The queue position (1-based) of GPR id and the queue's length (GET /api/v1/queue; from the
 * Queued GPRs the caller sees, by estimated start, on servers without it); 0 when not queued. */
int ctl_queue_position(struct ctl *c, const char *id, int *of);
/* Sorts GPR objects into queue order (estimated start, then priority high first, then id). */
void ctl_sort_queue(json_t *items);

#endif

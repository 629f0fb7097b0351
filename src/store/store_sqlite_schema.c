/*
 * store_sqlite_schema.c: the SQLite store's schema (store_sqlite.c runs it at open).
 *
 * Schema changes are append-only migrations: egs__sqlite_migrations[i] brings PRAGMA user_version
 * from i to i + 1 inside its own transaction.  A database newer than this build is refused.  Each
 * entry has a twin of the same number in store_pg_schema.c.
 */
#include "store/store_sqlite.h"

/* Never edit a shipped entry: add a new one.  Columns here must match the lists in `kinds`. */
const char *const egs__sqlite_migrations[] = {
	/* 1: the initial schema */
	"CREATE TABLE meta ("
	"  key TEXT PRIMARY KEY NOT NULL,"
	"  value TEXT NOT NULL);"
	"CREATE TABLE projects ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  created_at INTEGER NOT NULL);"
	"CREATE TABLE clusters ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  api_server TEXT,"
	"  ca_data TEXT,"
	"  agent_key_id TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL);"
	"CREATE TABLE nodes ("
	"  key TEXT PRIMARY KEY NOT NULL CHECK (key <> ''),"
	"  cluster TEXT NOT NULL,"
	"  name TEXT NOT NULL,"
	"  instance_type TEXT NOT NULL,"
	"  gpu_shape TEXT NOT NULL,"
	"  cloud_provider TEXT NOT NULL,"
	"  region TEXT NOT NULL,"
	"  gpu_count INTEGER NOT NULL,"
	"  memory_mib INTEGER NOT NULL,"
	"  temp_threshold REAL NOT NULL,"
	"  power_threshold REAL NOT NULL,"
	"  health TEXT NOT NULL,"
	"  gpr_id TEXT NOT NULL,"
	"  attached_gpr TEXT NOT NULL,"
	"  allocated_at INTEGER NOT NULL,"
	"  gpus TEXT NOT NULL);" /* JSON [{"uuid":..,"index":..}] */
	"CREATE TABLE workspaces ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  description TEXT,"
	"  clusters TEXT NOT NULL,"   /* JSON ["c1",..] */
	"  namespaces TEXT NOT NULL," /* JSON [{"name":..,"clusters":[..]}] */
	"  users TEXT NOT NULL,"      /* JSON [{"username":..,"email":..}] */
	"  created_at INTEGER NOT NULL);"
	"CREATE TABLE gprs ("
	"  id TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),"
	"  name TEXT NOT NULL,"
	"  workspace TEXT NOT NULL,"
	"  cluster TEXT NOT NULL,"
	"  instance_type TEXT NOT NULL,"
	"  gpu_shape TEXT NOT NULL,"
	"  created_by TEXT NOT NULL,"
	"  gpus_per_node INTEGER NOT NULL,"
	"  node_count INTEGER NOT NULL,"
	"  memory_mib INTEGER NOT NULL,"
	"  exit_duration_s INTEGER NOT NULL,"
	"  idle_timeout_s INTEGER NOT NULL,"
	"  priority INTEGER NOT NULL,"
	"  flags INTEGER NOT NULL,"
	"  preferred_clusters TEXT NOT NULL," /* JSON */
	"  state TEXT NOT NULL,"
	"  failure_reason TEXT,"
	"  pending_reason TEXT,"
	"  created_at INTEGER NOT NULL,"
	"  start_ts INTEGER NOT NULL,"
	"  exit_at INTEGER NOT NULL,"
	"  completion_ts INTEGER NOT NULL,"
	"  retry_count INTEGER NOT NULL,"
	"  delayed_count INTEGER NOT NULL,"
	"  seq INTEGER NOT NULL,"
	"  nodes TEXT NOT NULL," /* JSON ["cluster/name",..] */
	"  marks_sent INTEGER NOT NULL);"
	"CREATE TABLE api_keys ("
	"  id TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),"
	"  name TEXT NOT NULL,"
	"  user_name TEXT NOT NULL,"
	"  description TEXT,"
	"  role TEXT NOT NULL,"
	"  project TEXT NOT NULL,"
	"  workspace TEXT NOT NULL,"
	"  cluster TEXT NOT NULL,"
	"  hash BLOB NOT NULL CHECK (length(hash) = 32),"
	"  created_at INTEGER NOT NULL,"
	"  expires_at INTEGER NOT NULL);"
	"CREATE UNIQUE INDEX api_keys_hash ON api_keys(hash);"
	"CREATE TABLE events ("
	"  id INTEGER PRIMARY KEY,"
	"  time INTEGER NOT NULL,"
	"  first_time INTEGER NOT NULL,"
	"  count INTEGER NOT NULL,"
	"  type TEXT NOT NULL,"
	"  reason TEXT NOT NULL,"
	"  object_kind TEXT NOT NULL,"
	"  object_name TEXT NOT NULL,"
	"  workspace TEXT NOT NULL,"
	"  message TEXT NOT NULL);"
	"CREATE INDEX events_time ON events(time);",
	/* 2: a Slack-compatible webhook per workspace (observability) */
	"ALTER TABLE workspaces ADD COLUMN webhook_url TEXT;",
	/* 3: the planner: who preempted a GPR, and the fair-share key it was queued with (NULL = none) */
	"ALTER TABLE gprs ADD COLUMN evicted_by TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE gprs ADD COLUMN fair_key REAL;",
	/* 4: a workspace's policy (limits and approvals), canonical JSON written by egsd */
	"ALTER TABLE workspaces ADD COLUMN policy TEXT;",
	/* 5: GPU sharing: a shared GPR's request and shares, JSON {"request": 120, "devices": {"<uuid>": 60}}
	 * (NULL for dedicated GPRs). */
	"ALTER TABLE gprs ADD COLUMN shares TEXT;",
	/* 6: GPR templates and template bindings (struct egs_doc): spec is the canonical JSON egsd wrote */
	"CREATE TABLE gpr_templates ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  spec TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL,"
	"  updated_at INTEGER NOT NULL);"
	"CREATE TABLE gpr_template_bindings ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  spec TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL,"
	"  updated_at INTEGER NOT NULL);",
	/* 7: slice access (struct egs_doc named after its workspace): spec is canonical JSON whose tokens are
	 * sealed with the key in the data directory (src/server/kubecred.c); the store never sees one in clear */
	"CREATE TABLE kube_credentials ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  spec TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL,"
	"  updated_at INTEGER NOT NULL);",
	/* 8: state that must survive a restart (docs/internals/store.md): active alerts (src/server/alerts.c)
	 * and undelivered webhook messages (src/server/outbox.c) as struct egs_doc, and the early release
	 * or cancel the planner holds for a GPR (core/held.h) as JSON {until, ghost, nodes}, NULL when none */
	"CREATE TABLE alerts ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  spec TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL,"
	"  updated_at INTEGER NOT NULL);"
	"CREATE TABLE webhook_outbox ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  spec TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL,"
	"  updated_at INTEGER NOT NULL);"
	"ALTER TABLE gprs ADD COLUMN held TEXT;",
	/* 9: the GPUProvisioningRequest custom resources' GPRs (struct egs_doc named after the CR's uid): spec is
	 * {"gprId", "cluster", "namespace", "name", "generation"} (src/server/api_agent_gpr.c) */
	"CREATE TABLE gpr_links ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  spec TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL,"
	"  updated_at INTEGER NOT NULL);",
	/* 10: a node's zone (topology.kubernetes.io/zone, from the kubernetes agent; '' when unknown) */
	"ALTER TABLE nodes ADD COLUMN zone TEXT NOT NULL DEFAULT '';",
	/* 11: the audit log of the user-facing API's writes (src/server/audit.c); ids are given by egsd */
	"CREATE TABLE audit ("
	"  id INTEGER PRIMARY KEY NOT NULL,"
	"  time INTEGER NOT NULL,"
	"  key_id TEXT NOT NULL,"
	"  key_name TEXT NOT NULL,"
	"  role TEXT NOT NULL,"
	"  method TEXT NOT NULL,"
	"  route TEXT NOT NULL,"
	"  target TEXT NOT NULL,"
	"  status INTEGER NOT NULL,"
	"  error_key TEXT NOT NULL,"
	"  peer TEXT NOT NULL);"
	"CREATE INDEX audit_time ON audit(time);",
	/* 12: inference endpoints (struct egs_doc named by id): spec is the endpoint as
	 * src/server/api_inference.c keeps it (workspace, cluster, namespace, GPR, rendered objects, what the
	 * agent observed) */
	"CREATE TABLE inference_endpoints ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  spec TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL,"
	"  updated_at INTEGER NOT NULL);",
	/* 13: finished GPRs that left memory are read back by these (egs_store_gprs_find); partial, so a
	 * GPR enters them once, when it finishes, and a create pays nothing for them */
	"CREATE INDEX gprs_finished_ws ON gprs(workspace, id) WHERE "
	"state IN ('Complete', 'Cancelled', 'Rejected', 'Error');"
	"CREATE INDEX gprs_finished_at ON gprs(completion_ts) WHERE "
	"state IN ('Complete', 'Cancelled', 'Rejected', 'Error');",
	/* 14: the same indexes over an OR of the states instead of 13's IN list: SQLite evaluates an IN list
	 * of more than two constants through a temporary b-tree, built anew each time a row is written, so
	 * every GPR insert or update built two (~20,000 instructions of a create's ~113,000, issue 16) */
	"DROP INDEX gprs_finished_ws;"
	"DROP INDEX gprs_finished_at;"
	"CREATE INDEX gprs_finished_ws ON gprs(workspace, id) WHERE " EGS_ROWS_FINISHED ";"
	"CREATE INDEX gprs_finished_at ON gprs(completion_ts) WHERE " EGS_ROWS_FINISHED ";",
	/* 15: nothing for SQLite, which has no BRIN (its PostgreSQL twin turns the events' and audit
	 * entries' time indexes into BRIN: a B-tree entry per row was 6-8% of the server's CPU per create) */
	"SELECT 1;",
	/* 16: nothing (PostgreSQL's 16 is the followers' change log; SQLite has one egsd per file) */
	"SELECT 1;",
};

int egs_store_schema_version(void)
{
	return (int)EGS_ARRAY_LEN(egs__sqlite_migrations);
}

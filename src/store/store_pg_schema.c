/*
 * store_pg_schema.c: the PostgreSQL store's schema, as append-only migrations: entry i brings the
 * database from schema version i to i + 1 (the version is meta's schema_version row; store_pg.c
 * runs them).  Each entry is the twin of store_sqlite_schema.c's migration of the same number, with
 * PostgreSQL types: BIGINT for INTEGER, DOUBLE PRECISION for REAL, BYTEA for BLOB.
 */
#include "store/store_pg.h"

/* Never edit a shipped entry: add a new one, the twin of store_sqlite_schema.c's migration of the same
 * number (egs_store_open_pg refuses to run when the two lists differ in length). */
const char *const egs__pg_migrations[] = {
	/* 1: the initial schema */
	"CREATE TABLE meta ("
	"  key TEXT PRIMARY KEY NOT NULL,"
	"  value TEXT NOT NULL);"
	"CREATE TABLE projects ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  created_at BIGINT NOT NULL);"
	"CREATE TABLE clusters ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  api_server TEXT,"
	"  ca_data TEXT,"
	"  agent_key_id TEXT NOT NULL,"
	"  created_at BIGINT NOT NULL);"
	"CREATE TABLE nodes ("
	"  key TEXT PRIMARY KEY NOT NULL CHECK (key <> ''),"
	"  cluster TEXT NOT NULL,"
	"  name TEXT NOT NULL,"
	"  instance_type TEXT NOT NULL,"
	"  gpu_shape TEXT NOT NULL,"
	"  cloud_provider TEXT NOT NULL,"
	"  region TEXT NOT NULL,"
	"  gpu_count BIGINT NOT NULL,"
	"  memory_mib BIGINT NOT NULL,"
	"  temp_threshold DOUBLE PRECISION NOT NULL,"
	"  power_threshold DOUBLE PRECISION NOT NULL,"
	"  health TEXT NOT NULL,"
	"  gpr_id TEXT NOT NULL,"
	"  attached_gpr TEXT NOT NULL,"
	"  allocated_at BIGINT NOT NULL,"
	"  gpus TEXT NOT NULL);"
	"CREATE TABLE workspaces ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  description TEXT,"
	"  clusters TEXT NOT NULL,"
	"  namespaces TEXT NOT NULL,"
	"  users TEXT NOT NULL,"
	"  created_at BIGINT NOT NULL);"
	"CREATE TABLE gprs ("
	"  id TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),"
	"  name TEXT NOT NULL,"
	"  workspace TEXT NOT NULL,"
	"  cluster TEXT NOT NULL,"
	"  instance_type TEXT NOT NULL,"
	"  gpu_shape TEXT NOT NULL,"
	"  created_by TEXT NOT NULL,"
	"  gpus_per_node BIGINT NOT NULL,"
	"  node_count BIGINT NOT NULL,"
	"  memory_mib BIGINT NOT NULL,"
	"  exit_duration_s BIGINT NOT NULL,"
	"  idle_timeout_s BIGINT NOT NULL,"
	"  priority BIGINT NOT NULL,"
	"  flags BIGINT NOT NULL,"
	"  preferred_clusters TEXT NOT NULL,"
	"  state TEXT NOT NULL,"
	"  failure_reason TEXT,"
	"  pending_reason TEXT,"
	"  created_at BIGINT NOT NULL,"
	"  start_ts BIGINT NOT NULL,"
	"  exit_at BIGINT NOT NULL,"
	"  completion_ts BIGINT NOT NULL,"
	"  retry_count BIGINT NOT NULL,"
	"  delayed_count BIGINT NOT NULL,"
	"  seq BIGINT NOT NULL,"
	"  nodes TEXT NOT NULL,"
	"  marks_sent BIGINT NOT NULL);"
	"CREATE TABLE api_keys ("
	"  id TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),"
	"  name TEXT NOT NULL,"
	"  user_name TEXT NOT NULL,"
	"  description TEXT,"
	"  role TEXT NOT NULL,"
	"  project TEXT NOT NULL,"
	"  workspace TEXT NOT NULL,"
	"  cluster TEXT NOT NULL,"
	"  hash BYTEA NOT NULL CHECK (octet_length(hash) = 32),"
	"  created_at BIGINT NOT NULL,"
	"  expires_at BIGINT NOT NULL);"
	"CREATE UNIQUE INDEX api_keys_hash ON api_keys(hash);"
	"CREATE TABLE events ("
	"  id BIGINT PRIMARY KEY,"
	"  time BIGINT NOT NULL,"
	"  first_time BIGINT NOT NULL,"
	"  count BIGINT NOT NULL,"
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
	"ALTER TABLE gprs ADD COLUMN fair_key DOUBLE PRECISION;",
	/* 4: a workspace's policy (limits and approvals), canonical JSON written by egsd */
	"ALTER TABLE workspaces ADD COLUMN policy TEXT;",
	/* 5: GPU sharing: a shared GPR's request and shares as JSON (NULL for dedicated GPRs) */
	"ALTER TABLE gprs ADD COLUMN shares TEXT;",
	/* 6: GPR templates and template bindings (struct egs_doc): spec is the canonical JSON egsd wrote */
	"CREATE TABLE gpr_templates ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  spec TEXT NOT NULL,"
	"  created_at BIGINT NOT NULL,"
	"  updated_at BIGINT NOT NULL);"
	"CREATE TABLE gpr_template_bindings ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  spec TEXT NOT NULL,"
	"  created_at BIGINT NOT NULL,"
	"  updated_at BIGINT NOT NULL);",
	/* 7: slice access (struct egs_doc named after its workspace): spec is canonical JSON whose tokens are
	 * sealed with the key in the data directory (src/server/kubecred.c); the store never sees one in clear */
	"CREATE TABLE kube_credentials ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  spec TEXT NOT NULL,"
	"  created_at BIGINT NOT NULL,"
	"  updated_at BIGINT NOT NULL);",
	/* 8 (the twin of SQLite's 8): state that must survive a restart (docs/internals/store.md): active alerts (src/server/alerts.c)
	 * and undelivered webhook messages (src/server/outbox.c) as struct egs_doc, and the early release
	 * or cancel the planner holds for a GPR (core/held.h) as JSON {until, ghost, nodes}, NULL when none */
	"CREATE TABLE alerts ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  spec TEXT NOT NULL,"
	"  created_at BIGINT NOT NULL,"
	"  updated_at BIGINT NOT NULL);"
	"CREATE TABLE webhook_outbox ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  spec TEXT NOT NULL,"
	"  created_at BIGINT NOT NULL,"
	"  updated_at BIGINT NOT NULL);"
	"ALTER TABLE gprs ADD COLUMN held TEXT;",
	/* 9: the GPUProvisioningRequest custom resources' GPRs (struct egs_doc named after the CR's uid): spec is
	 * {"gprId", "cluster", "namespace", "name", "generation"} (src/server/api_agent_gpr.c) */
	"CREATE TABLE gpr_links ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  spec TEXT NOT NULL,"
	"  created_at BIGINT NOT NULL,"
	"  updated_at BIGINT NOT NULL);",
	/* 10 (the twin of SQLite's 10): a node's zone (topology.kubernetes.io/zone; '' when unknown) */
	"ALTER TABLE nodes ADD COLUMN zone TEXT NOT NULL DEFAULT '';",
	/* 11 (the twin of SQLite's 11): the audit log of the user-facing API's writes (src/server/audit.c); ids are given by egsd */
	"CREATE TABLE audit ("
	"  id BIGINT PRIMARY KEY NOT NULL,"
	"  time BIGINT NOT NULL,"
	"  key_id TEXT NOT NULL,"
	"  key_name TEXT NOT NULL,"
	"  role TEXT NOT NULL,"
	"  method TEXT NOT NULL,"
	"  route TEXT NOT NULL,"
	"  target TEXT NOT NULL,"
	"  status BIGINT NOT NULL,"
	"  error_key TEXT NOT NULL,"
	"  peer TEXT NOT NULL);"
	"CREATE INDEX audit_time ON audit(time);",
	/* 12 (the twin of SQLite's 12): inference endpoints (struct egs_doc named by id; src/server/api_inference.c) */
	"CREATE TABLE inference_endpoints ("
	"  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
	"  project TEXT NOT NULL,"
	"  spec TEXT NOT NULL,"
	"  created_at BIGINT NOT NULL,"
	"  updated_at BIGINT NOT NULL);",
	/* 13 (the twin of SQLite's 13): partial indexes over finished GPRs, read back by egs_store_gprs_find */
	"CREATE INDEX gprs_finished_ws ON gprs(workspace, id) WHERE "
	"state IN ('Complete', 'Cancelled', 'Rejected', 'Error');"
	"CREATE INDEX gprs_finished_at ON gprs(completion_ts) WHERE "
	"state IN ('Complete', 'Cancelled', 'Rejected', 'Error');",
	/* 14 (the twin of SQLite's 14): the same indexes over EGS_ROWS_FINISHED's OR of the states, the
	 * condition egs_store_gprs_find's queries now repeat */
	"DROP INDEX gprs_finished_ws;"
	"DROP INDEX gprs_finished_at;"
	"CREATE INDEX gprs_finished_ws ON gprs(workspace, id) WHERE " EGS_ROWS_FINISHED ";"
	"CREATE INDEX gprs_finished_at ON gprs(completion_ts) WHERE " EGS_ROWS_FINISHED ";",
	/* 15 (the twin of SQLite's 15, which changes nothing there): the time indexes of the two
	 * append-only logs as BRIN, a summary per 128 pages, not a B-tree entry per row: both are written in
	 * time order, so the summaries stay narrow, and a row in a page range not yet summarised costs its
	 * insert nothing (autovacuum summarises full ranges).  Retention and the audit listing's time
	 * bounds read them as before (docs/internals/store.md). */
	"DROP INDEX events_time;"
	"CREATE INDEX events_time ON events USING brin(time) WITH (autosummarize = on);"
	"DROP INDEX audit_time;"
	"CREATE INDEX audit_time ON audit USING brin(time) WITH (autosummarize = on);",
	/* 16 (SQLite's 16 is empty): the followers' change log (store_pg_follow.c), one row per committed
	 * turn of the leader, written in the turn's transaction: the kind (enum egs_kind, or
	 * EGS_PG_CHANGE_EVENT) and key of every row it wrote */
	"CREATE TABLE changes ("
	"  turn BIGINT PRIMARY KEY NOT NULL,"
	"  kinds SMALLINT[] NOT NULL,"
	"  keys TEXT[] NOT NULL);",
};

const int egs__pg_nmigrations = (int)EGS_ARRAY_LEN(egs__pg_migrations);

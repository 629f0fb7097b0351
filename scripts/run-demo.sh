#!/bin/sh
# `make run`: egsd on 127.0.0.1:8080 with data under ./var, and two clusters, worker-1 and worker-2,
# each served by an egs-agent over mock GPU devices (deploy/demo/*.yaml).  Ctrl-C stops everything.
set -eu
cd "$(dirname "$0")/.."
LISTEN=${EGS_LISTEN:-127.0.0.1:8080}
URL="http://$LISTEN"
VAR=${EGS_VAR:-./var}
BIN=./build/bin
mkdir -p "$VAR/agents"

pids=""
cleanup() { [ -n "$pids" ] && kill $pids 2>/dev/null; wait 2>/dev/null; echo "egs demo stopped"; }
on_signal() { exit 0; }
trap cleanup EXIT
trap on_signal INT TERM

$BIN/egsd --listen "$LISTEN" --data "$VAR" 2>>"$VAR/egsd.log" &
pids="$!"
i=0
until curl -fs "$URL/healthz" >/dev/null 2>&1; do
	i=$((i + 1))
	if [ $i -gt 100 ] || ! kill -0 $pids 2>/dev/null; then
		echo "egsd did not start (is $LISTEN in use?); see $VAR/egsd.log" >&2
		tail -5 "$VAR/egsd.log" >&2
		exit 1
	fi
	sleep 0.1
done
KEY=$(cat "$VAR/admin.key")

for c in worker-1 worker-2; do
	tok="$VAR/agents/$c.token"
	if [ ! -s "$tok" ]; then
		curl -fsS -X POST "$URL/api/v1/clusters" -H "Authorization: Bearer $KEY" \
			-d "{\"clusterName\":\"$c\",\"apiServer\":\"https://$c.example.internal:6443\"}" |
			python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["agentToken"])' >"$tok.tmp"
		chmod 600 "$tok.tmp"
		mv "$tok.tmp" "$tok"
	fi
	$BIN/egs-agent --server "$URL" --cluster "$c" --token-file "$tok" --devices "deploy/demo/$c.yaml" \
		--backend local --state-dir "$VAR/agents/$c" 2>>"$VAR/agent-$c.log" &
	pids="$pids $!"
done

cat <<MSG

  EGS is running at $URL  (logs in $VAR/*.log; Ctrl-C stops it)
  Portal:          $URL/  (sign in with the admin API key below)
  Admin API key:   $VAR/admin.key
  Clusters:        worker-1 (2 x 8 H100 80GB), worker-2 (2 x 8 A100 40GB, 1 x 4 T4)

  Try:
    curl -s $URL/api/v1/inventory/list -H "Authorization: Bearer \$(cat $VAR/admin.key)"
  or the Python SDK (sdk/python):
    PYTHONPATH=sdk/python python3 -c 'import egs; a = egs.authenticate("$URL", open("$VAR/admin.key").read().strip()); print([n.gpu_node_name for n in egs.inventory(None, a)])'

MSG
wait

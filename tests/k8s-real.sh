#!/bin/sh
# tests/k8s-real.sh: the kubernetes backend's end-to-end scenario against a REAL cluster (kind, k3s, ...):
# egsd and `egs-agent --backend kubernetes` on this host, the cluster from $KUBECONFIG.  Not run in CI (our
# build machines cannot run an API server; tests/api/test_k8s_backend.py runs the same steps against
# tests/fake-k8s).  It makes one node look like a GPU node (labels nvidia.com/gpu.product and
# nvidia.com/gpu.memory, and 1 nvidia.com/gpu of capacity patched into its status, as a device plugin
# would), then: discovery and the EGS taint, a GPR provisioned onto it (node labels, slice namespace), a pod
# of the slice running there, release (the pod evicted, labels and cordon gone); then slice access
# (tests/api/test_slice_access_k8s.py): the workspace's kubeconfig from egsd works in the slice's namespace
# and is refused on nodes and in kube-system, gets 401 after regeneration while the new one works, and
# deleting the workspace is refused while the namespace runs a pod and, forced, deletes the namespace the
# agent created; and cleans up after itself.
#
#   KUBECONFIG=~/.kube/config tests/k8s-real.sh [node]
#
# The webhook is not registered here (the API server would have to reach this host); the pod carries the
# toleration and node selector the webhook would add.  Needs kubectl and curl.
set -eu
cd "$(dirname "$0")/.."
: "${KUBECONFIG:?set KUBECONFIG to the cluster's kubeconfig}"
export KUBECONFIG
NODE=${1:-$(kubectl get nodes -o jsonpath='{.items[0].metadata.name}')}
NS=egs-real-test
WORK=$(mktemp -d)
PORT=${EGS_PORT:-18480}
EGSD_PID=""
AGENT_PID=""

say() { printf '# %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*"; [ -f "$WORK/agent.log" ] && tail -30 "$WORK/agent.log"; exit 1; }
cleanup() {
	[ -n "$AGENT_PID" ] && kill "$AGENT_PID" 2>/dev/null && wait "$AGENT_PID" 2>/dev/null || true
	[ -n "$EGSD_PID" ] && kill "$EGSD_PID" 2>/dev/null && wait "$EGSD_PID" 2>/dev/null || true
	kubectl delete namespace "$NS" --wait=false >/dev/null 2>&1 || true
	kubectl label node "$NODE" nvidia.com/gpu.product- nvidia.com/gpu.memory- kubeslice.io/slice- \
		kubeslice.io/gpr- >/dev/null 2>&1 || true
	kubectl taint node "$NODE" kubeslice.io/egs- >/dev/null 2>&1 || true
	kubectl patch node "$NODE" --subresource=status --type=json \
		-p '[{"op":"remove","path":"/status/capacity/nvidia.com~1gpu"}]' >/dev/null 2>&1 || true
	kubectl uncordon "$NODE" >/dev/null 2>&1 || true
	kubectl delete clusterrole egs-slice-user >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# until SECONDS CMD...: runs CMD every second until it succeeds.
until_ok() {
	n=$1; shift
	while [ "$n" -gt 0 ]; do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 1; n=$((n - 1))
	done
	return 1
}
api() { curl -fsS -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' "$@"; }
field() { /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }

make -j2 all >/dev/null
say "node $NODE becomes a 1-GPU node"
kubectl label node "$NODE" --overwrite nvidia.com/gpu.product=NVIDIA-TEST-GPU nvidia.com/gpu.memory=16384 >/dev/null
kubectl patch node "$NODE" --subresource=status --type=merge \
	-p '{"status":{"capacity":{"nvidia.com/gpu":"1"},"allocatable":{"nvidia.com/gpu":"1"}}}' >/dev/null

build/bin/egsd --listen "127.0.0.1:$PORT" --data "$WORK/egsd" --dev-clock >"$WORK/egsd.log" 2>&1 &
EGSD_PID=$!
until_ok 10 curl -fsS "http://127.0.0.1:$PORT/healthz" || fail "egsd did not start"
KEY=$(cat "$WORK/egsd/admin.key")
SERVER=$(kubectl config view --raw --minify --flatten -o jsonpath='{.clusters[0].cluster.server}')
CA=$(kubectl config view --raw --minify --flatten -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
TOKEN=$(api -X POST "http://127.0.0.1:$PORT/api/v1/clusters" \
	-d "{\"clusterName\":\"real\",\"apiServer\":\"$SERVER\",\"caData\":\"$CA\"}" | field 'd["data"]["agentToken"]')
kubectl apply -f deploy/kubernetes/worker/slice-user-role.yaml >/dev/null
printf '%s\n' "$TOKEN" >"$WORK/token"
chmod 600 "$WORK/token"
build/bin/egs-agent --server "http://127.0.0.1:$PORT" --cluster real --token-file "$WORK/token" \
	--backend kubernetes --kubeconfig "$KUBECONFIG" --state-dir "$WORK/state" --evict-grace 5 \
	--drain-timeout 30 >"$WORK/agent.log" 2>&1 &
AGENT_PID=$!

inventory_has() { api "http://127.0.0.1:$PORT/api/v1/inventory/list" | field 'd["data"]["items"]' | grep -q "'$NODE'"; }
until_ok 30 inventory_has || fail "$NODE is not in egsd's inventory"
say "discovered; tainted?"
tainted() { kubectl get node "$NODE" -o jsonpath='{.spec.taints[*].key}' | grep -q kubeslice.io/egs; }
until_ok 10 tainted || fail "no EGS taint on $NODE"

api -X POST "http://127.0.0.1:$PORT/api/v1/slice-workspace" -d "{\"workspaceName\":\"real-ws\",\"clusters\":[\"real\"],
	\"namespaces\":[\"$NS\"],\"username\":\"u\",\"email\":\"u@example.com\"}" >/dev/null
GPR=$(api -X POST "http://127.0.0.1:$PORT/api/v1/gpr" -d '{"gprName":"real","sliceName":"real-ws","numberOfGPUs":1,
	"numberOfGPUNodes":1,"exitDuration":"1h","priority":101}' | field 'd["data"]["gprId"]')
state() { api "http://127.0.0.1:$PORT/api/v1/gpr?gprId=$GPR" | field 'd["data"]["status"]["provisioningStatus"]'; }
is_state() { [ "$(state)" = "$1" ]; }
until_ok 60 is_state Provisioned || fail "GPR $GPR is $(state), not Provisioned"
say "provisioned $GPR"
[ "$(kubectl get node "$NODE" -o jsonpath='{.metadata.labels.kubeslice\.io/gpr}')" = "$GPR" ] || fail "no GPR label"
[ "$(kubectl get ns "$NS" -o jsonpath='{.metadata.labels.kubeslice\.io/slice}')" = real-ws ] || fail "namespace label"

kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: gpu-job, namespace: $NS}
spec:
  nodeSelector: {kubeslice.io/slice: real-ws}
  tolerations: [{key: kubeslice.io/egs, operator: Equal, value: dedicated-node, effect: NoSchedule}]
  containers: [{name: main, image: registry.k8s.io/pause:3.9, resources: {limits: {nvidia.com/gpu: "1"}}}]
EOF
running() { [ "$(kubectl -n "$NS" get pod gpu-job -o jsonpath='{.status.phase}')" = Running ]; }
until_ok 120 running || fail "the slice's pod does not run on $NODE"
say "the slice's pod runs on $NODE; releasing"

api -X PUT "http://127.0.0.1:$PORT/api/v1/gpr" -d "{\"gprId\":\"$GPR\",\"earlyRelease\":true}" >/dev/null
until_ok 120 is_state Complete || fail "GPR $GPR is $(state), not Complete"
gone() { ! kubectl -n "$NS" get pod gpu-job >/dev/null 2>&1; }
until_ok 30 gone || fail "the pod was not evicted"
[ -z "$(kubectl get node "$NODE" -o jsonpath='{.metadata.labels.kubeslice\.io/gpr}')" ] || fail "GPR label left"
[ -z "$(kubectl get node "$NODE" -o jsonpath='{.spec.unschedulable}')" ] || fail "node left cordoned"
kubectl get events -n "$NS" | grep -q NodeDetached || fail "no NodeDetached event in $NS"
say "released: pod evicted, labels and cordon gone, events written"

# Slice access: the agent made a ServiceAccount and RoleBinding in $NS and reported a token.
kc() { # kc FILE: the workspace's kubeconfig into FILE once egsd hands it out
	api -X POST "http://127.0.0.1:$PORT/api/v1/slice-workspace/kube-config" \
		-d '{"workspaceName":"real-ws","clusterName":"real"}' | field 'd["data"]["kubeConfig"]' >"$1"
}
until_ok 60 kc "$WORK/slice1" || fail "no kubeconfig for real-ws"
[ "$(kubectl -n "$NS" get rolebinding egs-slice-user -o jsonpath='{.roleRef.name}')" = egs-slice-user ] ||
	fail "no RoleBinding egs-slice-user in $NS"
as() { f=$1; shift; KUBECONFIG=$f kubectl "$@"; }
as "$WORK/slice1" get pods >/dev/null || fail "the slice's kubeconfig cannot list pods in $NS"
as "$WORK/slice1" get nodes 2>&1 | grep -qi forbidden || fail "the slice's kubeconfig may list nodes"
as "$WORK/slice1" -n kube-system get pods 2>&1 | grep -qi forbidden || fail "the slice's kubeconfig reaches kube-system"
say "the slice's kubeconfig works in $NS only; regenerating"
api -X POST "http://127.0.0.1:$PORT/api/v1/slice-workspace/kube-config/regenerate" -d '{"workspaceName":"real-ws"}' >/dev/null
until_ok 60 kc "$WORK/slice2" || fail "no kubeconfig after the regeneration"
as "$WORK/slice1" get pods 2>&1 | grep -qi unauthorized || fail "the old kubeconfig still works after regeneration"
as "$WORK/slice2" get pods >/dev/null || fail "the new kubeconfig does not work"
say "regenerated: the old kubeconfig gets 401, the new one works"

kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: waiting, namespace: $NS}
spec: {containers: [{name: main, image: registry.k8s.io/pause:3.9}]}
EOF
ws_delete() { curl -sS -o "$WORK/del.json" -w '%{http_code}' -X DELETE -H "Authorization: Bearer $KEY" \
	-H 'Content-Type: application/json' "http://127.0.0.1:$PORT/api/v1/slice-workspace" -d "$1"; }
refused() { [ "$(ws_delete '{"workspaceName":"real-ws"}')" = 409 ] && grep -q NAMESPACE_HAS_PODS "$WORK/del.json"; }
until_ok 30 refused || fail "deleting the workspace with a pod in $NS was not refused: $(cat "$WORK/del.json")"
[ "$(ws_delete '{"workspaceName":"real-ws","force":true}')" = 200 ] || fail "forced delete: $(cat "$WORK/del.json")"
ns_gone() { ! kubectl get namespace "$NS" >/dev/null 2>&1; }
until_ok 120 ns_gone || fail "namespace $NS (created by the agent) was not deleted with the workspace"
say "workspace deletion: refused while a pod runs, forced: the agent's namespace deleted"
echo "PASS"

/*
 * openapi.c: GET /api/v1/openapi.json, the OpenAPI 3.0 description of the whole EGS API, built
 * from the two tables below on each request (a few hundred objects: well under a millisecond).
 *
 * The schemas are written in a compact notation so that the tables read like the API itself:
 *
 *   "gprId:s ~exitTimestamp:t status:GprStatus nodes:[s] reason:e(Normal|Warning) webhookUrl:s?"
 *
 * One property per word, NAME:TYPE; a leading '~' makes it optional (absent from some answers);
 * "@Other" copies Other's properties.  TYPE is s (string), t (RFC 3339 date-time string), i
 * (integer), n (number), b (boolean), any, obj (any object), [TYPE] (array), m(TYPE) (object whose
 * values are TYPE), e(A|B) (one of these strings), or a schema's Name; a trailing '?' adds null.
 * Objects are closed (additionalProperties: false): tests/api/test_openapi.py validates the answers
 * of real calls against this document, so a field added to an answer without being added here fails
 * the tests.  Keeping that test green is what keeps this description true.
 *
 * The request schemas are enforced, not only described: body_check.c checks the JSON type of every
 * field of every request body against them before the handler runs (docs/api.md, "Wrong types").
 *
 * Invariant: the tables are code; a malformed entry is a bug and trips EGS_ASSERT in the tests.
 */
#include "server/server.h"

#include "server/conn.h"

#include "core/util.h"

#include <event2/buffer.h>
#include <string.h>
#include <strings.h>

#define NODE_PROPS                                                                                                \
	"gpuNodeName:s gpuShape:s gpuModelName:s instanceType:s clusterName:s memory:i gpuCount:i "               \
	"availableGPUs:i gpuTempThreshold:n gpuPowerThreshold:n cloudProvider:s region:s "                        \
	"nodeHealth:e(Healthy|Unhealthy|Unschedulable) gpuNodeStatus:e(NODE_AVAILABLE|NODE_RESERVED) "            \
	"gpuNodeState:e(NODE_AVAILABLE|NODE_RESERVED) lastHeartbeat:t? gpus:[NodeGpu] ~address:s ~zone:s"

struct schema_def {
	const char *name;
	const char *props;
};

#define INFER_STATE "e(Queued|Provisioning|Ready|Failed|Released|Deleting)"
#define STATE "e(Pending|Queued|Provisioning|Provisioned|Releasing|Complete|Cancelled|Rejected|Error|Failed)"
#define GPR_REQUEST_FIELDS                                                                                        \
	"~gprName:s ~requestName:s ~sliceName:s ~clusterName:s? ~numberOfGPUs:n ~numberOfGPUNodes:i "             \
	"~instanceType:s? ~gpuShape:s? ~memoryPerGPU:i? ~memoryPerGpu:i? ~exitDuration:s ~priority:i "            \
	"~idleTimeOutDuration:s? ~enforceIdleTimeOut:b? ~enableEviction:b? ~requeueOnFailure:b? "                  \
	"~preferredClusters:[s]? ~enableAutoClusterSelection:b? ~enableAutoGpuSelection:b? ~multiNode:b? "         \
	"~dedicatedNodes:b? ~enableRDMA:b? ~enableSecondaryNetwork:b? ~gpuSharingMode:s? ~templateName:s"

static const struct schema_def schemas[] = {
	/* envelope pieces */
	{"ErrorData", "~field:s"},
	{"Error", "errorKey:s message:s data:ErrorData?"},
	{"ErrorEnvelope", "statusCode:i status:e(Error) message:s data:any error:Error"},
	/* auth, keys, projects */
	{"AuthRequest", "apiKey:s"},
	{"Token", "token:s"},
	{"ApiKey", "keyId:s name:s userName:s description:s role:e(Admin|Owner|Editor|Viewer|Agent) workspaceName:s? "
		   "projectName:s? createdAt:t validUntil:t? ~clusterName:s"},
	{"ApiKeyCreated", "@ApiKey apiKey:s"},
	{"WhoAmI", "@ApiKey serverTime:i"},
	{"ApiKeyList", "items:[ApiKey]"},
	{"ApiKeyRequest", "name:s ~userName:s ~description:s role:e(Admin|Owner|Editor|Viewer) ~validity:s ~workspaceName:s "
			  "~projectName:s"},
	{"ApiKeyDelete", "~keyId:s ~name:s ~projectName:s ~apiKey:s"},
	{"KeyId", "keyId:s"},
	{"Project", "projectName:s"},
	{"ProjectList", "items:[Project]"},
	/* GPR templates and bindings (the public SDK's shapes) */
	{"GprTemplateRequest", "name:s clusterName:s numberOfGPUs:i numberOfGPUNodes:i ~memoryPerGpu:i? ~memoryPerGPU:i? "
			       "~gpuShape:s? ~instanceType:s? exitDuration:s ~priority:i? ~enforceIdleTimeOut:b? "
			       "~enableEviction:b? ~requeueOnFailure:b? ~idleTimeOutDuration:s?"},
	{"GprTemplate", "name:s clusterName:s numberOfGPUs:i numberOfGPUNodes:i memoryPerGpu:i gpuShape:s instanceType:s "
			"exitDuration:s priority:i enforceIdleTimeOut:b enableEviction:b requeueOnFailure:b "
			"idleTimeOutDuration:s projectName:s createdAt:t updatedAt:t"},
	{"GprTemplateList", "items:[GprTemplate]"},
	{"GprTemplateRef", "gprTemplateName:s"},
	{"BindingClusterRequest", "clusterName:s ~defaultTemplateName:s? ~templates:[s]?"},
	/* inference endpoints (the public SDK's shapes; src/server/api_inference.c) */
	{"InferenceEndpointRequest", "clusterName:s endpointName:s workspace:s ~modelSpec:obj? ~gpuSpec:obj? "
				     "~rawModelSpec:s?"},
	{"InferenceEndpointName", "endpointName:s"},
	{"InferenceEndpointRef", "endpoint:s workspace:s ~cluster:s"},
	{"InferenceEndpointBrief", "endpointName:s modelName:s status:" INFER_STATE " endpoint:s clusterName:s namespace:s"},
	{"InferenceEndpointList", "endpoints:[InferenceEndpointBrief]"},
	{"InferenceDnsRecord", "dns:s type:s value:s"},
	{"InferenceGpuRequest", "gprName:s gprId:s instanceType:s gpuShape:s numberOfGPUs:i numberOfGPUNodes:i "
				"memoryPerGPU:s status:s"},
	{"InferenceEndpoint", "@InferenceEndpointBrief predictStatus:e(Ready|NotReady) ingressStatus:s tryCommand:[s] "
			      "dnsRecords:[InferenceDnsRecord] gpuRequests:[InferenceGpuRequest] message:s readyReplicas:i "
			      "replicas:i"},
	{"InferenceEndpointAnswer", "endpoint:InferenceEndpoint"},
	{"Empty", ""},
	{"GprTemplateBindingRequest", "workspaceName:s ~clusters:[BindingClusterRequest]? ~enableAutoGPR:b?"},
	{"BindingCluster", "clusterName:s defaultTemplateName:s templates:[s] defaultTemplateStatus:s templateStatus:m(s)"},
	{"GprTemplateBinding", "name:s clusters:[BindingCluster] enableAutoGPR:b"},
	{"GprTemplateBindingAnswer", "@GprTemplateBinding namespace:s"},
	{"GprTemplateBindingList", "templateBindings:[GprTemplateBinding]"},
	{"GprTemplateBindingRef", "gprTemplateBindingName:s"},
	/* clusters and inventory */
	{"ClusterRequest", "clusterName:s ~projectName:s ~apiServer:s ~caData:s?"},
	{"ClusterUpdate", "clusterName:s ~apiServer:s ~caData:s?"},
	{"ClusterRegistered", "clusterName:s projectName:s agentToken:s"},
	{"ClusterName", "clusterName:s"},
	{"Cluster", "clusterName:s projectName:s apiServer:s agentConnected:b lastSeen:t? nodes:i gpus:i"},
	{"ClusterList", "items:[Cluster]"},
	{"Allocation", "gprId:s gprName:s sliceName:s totalGPUsAllocated:n allocationTimeStamp:t"},
	{"NodeGpu", "uuid:s index:i powerW:n tempC:n utilPct:n memUsedMiB:i"},
	/* managedNodes carry allocationTimeStamp as the public SDK reads it (a protobuf Timestamp) */
	{"Timestamp", "seconds:i nanos:i"},
	{"SdkAllocation", "gprId:s gprName:s sliceName:s totalGPUsAllocated:n allocationTimeStamp:Timestamp"},
	{"Node", NODE_PROPS " allocation:[Allocation]"},
	{"SdkNode", NODE_PROPS " allocation:[SdkAllocation]"},
	/* GPU nodes that opted out of EGS, as their agent registered them (never scheduled). */
	{"UnmanagedNode", "gpuNodeName:s gpuShape:s gpuModelName:s instanceType:s clusterName:s memory:i gpuCount:i "
			  "availableGPUs:i cloudProvider:s region:s nodeHealth:e(Unmanaged) gpuNodeStatus:e(NODE_UNMANAGED) "
			  "gpuNodeState:e(NODE_UNMANAGED)"},
	{"Inventory", "items:[Node] managedNodes:[SdkNode] unmanagedNodes:[UnmanagedNode]"},
	{"NodeList", "items:[Node]"},
	{"WorkspaceHolding", "nodeName:[s] instanceType:s memory:i totalGpus:i gpuShape:s gprId:s clusterName:s "
			     "memoryPerGpu:i gpuPerNode:i totalGpuNodes:i"},
	{"WorkspaceInventory", "items:[WorkspaceHolding]"},
	{"Gpu", "uuid:s index:i gpuNodeName:s clusterName:s gpuShape:s memory:i gprId:s powerW:n tempC:n utilPct:n "
		"memUsedMiB:i"},
	{"GpuList", "items:[Gpu]"},
	{"ThresholdsRequest", "clusterName:s ~gpuNodeName:s ~gpuTempThreshold:n ~gpuPowerThreshold:n"},
	{"ThresholdsSet", "clusterName:s nodes:i"},
	/* workspaces */
	{"WorkspaceRequest", "workspaceName:s clusters:[s] ~namespaces:[s] ~username:s ~email:s ~projectName:s "
			     "~description:s"},
	{"WorkspaceUser", "username:s ~email:s"},
	{"WorkspaceUpdate", "workspaceName:s ~addNamespaces:[s] ~removeNamespaces:[s] ~addClusters:[s] "
			    "~removeClusters:[s] ~addUsers:[WorkspaceUser] ~removeUsers:[s] ~description:s ~webhookUrl:s? "
			    "~force:b"},
	{"WorkspaceRef", "workspaceName:s"},
	{"WorkspaceDelete", "workspaceName:s ~force:b"},
	{"SliceNamespace", "clusterName:s namespace:s createdByAgent:b runningPods:i"},
	{"KubeConfigRequest", "workspaceName:s clusterName:s"},
	{"KubeConfig", "kubeConfig:s"},
	{"WorkspaceNamespace", "namespace:s clusters:[s]"},
	{"Workspace", "name:s overlayNetworkDeploymentMode:s maxClusters:i sliceDescription:s clusters:[s] "
		      "namespaces:[WorkspaceNamespace]"},
	{"WorkspaceDetail", "@Workspace users:[WorkspaceUser] projectName:s ~sliceNamespaces:[SliceNamespace]"},
	{"WorkspaceList", "workspaces:[Workspace]"},
	/* policies */
	{"PriorityRange", "min:i max:i"},
	{"PolicyLimits", "~maxGPRs:i? ~maxExitDurationPerGPR:s? ~priorityRange:PriorityRange? ~gpuShapes:[s]? "
			 "~maxGPUPerGpr:i? ~maxMemoryPerGpr:i? ~concurrentGpuQuota:i? ~maxNodesPerGpr:i?"},
	{"Policy", "@PolicyLimits ~enableAutoEviction:b? ~requeueOnFailure:b? ~softLimits:PolicyLimits?"},
	{"WorkspacePolicy", "workspaceName:s @Policy"},
	/* GPRs */
	{"GprRequest", GPR_REQUEST_FIELDS},
	{"GprUpdate", "gprId:s ~earlyRelease:b ~extendBy:s " GPR_REQUEST_FIELDS},
	{"GprRef", "gprId:s"},
	{"GprReason", "gprId:s ~reason:s"},
	{"GprUpdated", "gprId:s ~exitTimestamp:t"},
	{"GprEvicted", "gprId:s provisioningStatus:" STATE},
	{"CheckResult", "name:s phase:e(pre|post) status:e(passed|failed|skipped) ~output:s ~durationMs:i"},
	{"CheckRun", "node:s phase:e(pre|post) time:t? ok:b checks:[CheckResult]"},
	{"GprStatus", "provisioningStatus:" STATE " failureReason:s numGpusAllocated:n startTimestamp:t? "
		      "completionTimestamp:t? cost:s nodes:[s] internalState:e(Queued|Provisioned|Released) retryCount:i "
		      "delayedCount:i pendingReason:s? exitTimestamp:t? remainingDuration:s createdTimestamp:t? ~checks:[CheckRun] evictedBy:s?"},
	{"Gpr", "gprId:s gprName:s sliceName:s clusterName:s numberOfGPUs:n numberOfGPUNodes:i instanceType:s "
		"memoryPerGPU:i memoryPerGpu:i priority:i gpuSharingMode:e(Dedicated|Shared) estimatedStartTime:t? "
		"estimatedWaitTime:s? "
		"exitDuration:s earlyRelease:b gpuShape:s multiNode:b dedicatedNodes:b enableRDMA:b "
		"enableSecondaryNetwork:b idleTimeOutDuration:s enforceIdleTimeOut:b enableEviction:b requeueOnFailure:b "
		"preferredClusters:[s] enableAutoClusterSelection:b enableAutoGpuSelection:b status:GprStatus"},
	{"GprList", "items:[Gpr] ~continue:s?"},
	{"WaitOption", "clusterName:s gpuShape:s instanceType:s estimatedStartTime:t? estimatedWaitTime:s? freeNodes:i "
		       "totalNodes:i available:b"},
	{"WaitTime", "estimatedStartTime:t? estimatedWaitTime:s? items:[WaitOption]"},
	/* queue */
	{"QueueEntry", "gprId:s gprName:s sliceName:s clusterName:s gpuShape:s instanceType:s numberOfGPUNodes:i "
		       "numberOfGPUs:n priority:i estimatedStartTime:t? estimatedWaitTime:s? provisioningStatus:" STATE
		       " position:i? positionInGroup:i? ~pendingReason:s workspaceRecentGpuHours:n"},
	{"QueueGroup", "clusterName:s gpuShape:s queued:i nextEstimatedStart:t?"},
	{"Queue", "items:[QueueEntry] groups:[QueueGroup] queueLength:i"},
	{"QueueTop", "gprId:s priority:i"},
	/* the schedule view of the portal (api_portal.c) */
	{"ScheduleSlot", "gprId:s gprName:s sliceName:s kind:s start:t end:t priority:i numberOfGPUs:i numberOfGPUNodes:i "
			 "~sharedGPUs:n"},
	{"ScheduleNode", "clusterName:s gpuNodeName:s gpuShape:s instanceType:s gpuCount:i nodeHealth:e(Healthy|Unhealthy) "
			 "slots:[ScheduleSlot]"},
	{"Schedule", "now:t nodes:[ScheduleNode] unplaced:[ScheduleSlot] queueLength:i"},
	/* events and alerts */
	{"InvolvedObject", "kind:s name:s"},
	{"Event", "id:i type:e(Normal|Warning) reason:s involvedObject:InvolvedObject workspace:s? message:s count:i "
		  "firstTimestamp:t lastTimestamp:t"},
	{"EventList", "items:[Event] continue:s?"},
	{"Alert", "id:s reason:s severity:s clusterName:s value:n peak:n threshold:n unit:s since:t lastUpdated:t "
		  "gpuNodeName:s sliceName:s? gprId:s? ~gpuUuid:s ~gpuIndex:i"},
	{"AlertList", "items:[Alert] total:i"},
	/* the audit log (audit.c) */
	{"AuditActor", "keyId:s keyName:s role:e(Admin|Owner|Viewer|Agent)"},
	{"AuditEntry", "id:s time:t actor:AuditActor method:e(POST|PUT|PATCH|DELETE) route:s target:s status:i "
		       "errorKey:s peer:s"},
	{"AuditList", "items:[AuditEntry] continue:s?"},
	/* GPU views */
	{"GpuRow", "uuid:s index:i gpuNodeName:s clusterName:s gpuShape:s powerW:n tempC:n utilPct:n memUsedMiB:i "
		   "memTotalMiB:i gpuPowerThreshold:n gpuTempThreshold:n hotspot:b alerts:[s] workloads:[s] sampledAt:t? "
		   "gprId:s? sliceName:s?"},
	{"GpuSummary", "gpus:i hotspots:i avgUtilPct:n totalPowerW:n highestPowerGpu:GpuRow? highestTempGpu:GpuRow?"},
	{"GpuTable", "summary:GpuSummary items:[GpuRow]"},
	{"SeriesPoint", "t:t? powerW:n tempC:n utilPct:n memUsedMiB:n samples:i"},
	{"SeriesSummary", "powerMeanW:n powerMaxW:n tempMeanC:n tempMaxC:n utilMeanPct:n utilMaxPct:n memMaxMiB:n"},
	{"GpuSeries", "uuid:s index:i gpuNodeName:s clusterName:s step:s maxPoints:i since:t? until:t? "
		      "summary:SeriesSummary? points:[SeriesPoint]"},
	{"Workload", "name:s namespace:s model:s modelConfig:s? jobType:s? labels:m(s) gpuNodeName:s? clusterName:s "
		     "gprId:s? sliceName:s? summary:GpuSummary gpus:[GpuRow] ~phase:s ~gpuRequest:i "
		     "~waitingForGpr:WaitingFor? ~reason:s ~message:s ~since:s"},
	{"WaitingFor", "gprId:s state:" STATE},
	{"WorkloadList", "items:[Workload]"},
	{"Model", "model:s modelConfig:s? jobType:s? workloads:[s] nodes:[s] gprIds:[s] gpusCommitted:i hotspots:i "
		  "avgUtilPct:n totalPowerW:n highestPowerGpu:GpuRow? highestTempGpu:GpuRow?"},
	{"ModelList", "items:[Model]"},
	{"ObservabilitySettingsUpdate", "~exitWarning:s ~eventRetention:i ~eventTTL:s ~defaultGpuTempThreshold:n "
					"~defaultGpuPowerThreshold:n ~gpuUtilThreshold:n ~tempHysteresis:n ~powerHysteresis:n "
					"~utilHysteresis:n ~seriesStep:s ~seriesPoints:i"},
	{"ObservabilitySettings", "exitWarning:s eventRetention:i eventTTL:s defaultGpuTempThreshold:n "
				  "defaultGpuPowerThreshold:n gpuUtilThreshold:n tempHysteresis:n powerHysteresis:n "
				  "utilHysteresis:n seriesStep:s seriesPoints:i"},
	{"Notifications", "sliceName:s webhookConfigured:b webhookUrl:s? delivered:i failed:i lastDelivered:t? "
			  "lastFailure:t? lastError:s pending:i"},
	/* cost, usage, insights */
	{"PriceChange", "from:t pricePerGpuHour:n"},
	{"Price", "gpuShape:s pricePerGpuHour:n history:[PriceChange]"},
	{"Prices", "currency:s items:[Price]"},
	{"PriceRequest", "gpuShape:s pricePerGpuHour:n ~currency:s"},
	{"PriceSet", "gpuShape:s pricePerGpuHour:n currency:s from:t"},
	{"UsageByShape", "gpuShape:s gpuHours:n cost:n"},
	{"UsageGpr", "gprId:s gprName:s gpuShape:s gpus:n from:t? to:t? gpuHours:n cost:n provisioningStatus:" STATE},
	{"UsageWorkspace", "sliceName:s gpuHours:n cost:n gprs:i byShape:[UsageByShape] items:[UsageGpr]"},
	{"Usage", "since:t? until:t? currency:s items:[UsageWorkspace]"},
	{"InsightPoint", "t:t? demandGpuHours:n capacityGpuHours:n usedGpuHours:n requests:i"},
	{"InsightSeries", "gpuShape:s clusterName:s capacityGpus:i points:[InsightPoint]"},
	{"WaitBucket", "t:t? count:i medianSeconds:i p95Seconds:i"},
	{"WaitedShape", "gpuShape:s requests:i queuedNow:i totalWaitHours:n medianSeconds:i p95Seconds:i"},
	{"EarlyReleaseRate", "sliceName:s provisioned:i earlyReleased:i rate:n gpuHoursReturned:n"},
	{"QueueInsights", "since:t? until:t? bucket:s series:[InsightSeries] waitTimes:[WaitBucket] "
			  "mostWaitedShapes:[WaitedShape] earlyRelease:[EarlyReleaseRate]"},
	/* admin */
	{"ClockRequest", "advance:s ~keepHeartbeats:b"},
	{"Clock", "now:t offsetSeconds:i"},
	{"Health", "status:s store:e(sqlite|postgres) role:e(leader|follower) epoch:i ~leader:s ~behindTurns:i ~syncedAgoMs:i ~fullLoads:i ~appliedCatchUps:i ~loading:b"},
	/* agents */
	{"AgentNode", "name:s instanceType:s gpuModel:s ~gpuCount:i ~memoryMiB:i ~cloudProvider:s ~region:s ~zone:s ~gpus:[obj] ~address:s ~attachedGpr:any "
		      "~attachedShared:any ~features:[s]?"},
	{"AgentUnmanagedNode", "name:s ~instanceType:s ~gpuModel:s ~gpuCount:i ~memoryMiB:i ~cloudProvider:s ~region:s"},
	{"AgentRegister", "~clusterName:s ~agentVersion:s nodes:[AgentNode] ~unmanagedNodes:[AgentUnmanagedNode] ~features:[s]"},
	{"AgentRegistered", "nodes:i heartbeatIntervalSeconds:i features:[s]"},
	{"AgentHeartbeat", "~clusterName:s nodes:[obj] ~pendingPods:[obj]"},
	{"HeartbeatAck", "pendingActions:i"},
	{"AgentEvent", "id:i type:e(Normal|Warning) reason:s message:s gprId:s workspace:s namespaces:[s] count:i "
		       "firstTimestamp:t lastTimestamp:t"},
	{"AgentEvents", "events:[AgentEvent] last:i"},
	{"AgentAction", "actionId:s type:e(precheck|attach|detach|sliceAccess|sliceRelease) ~gprId:s ~node:s workspace:s "
			"~namespaces:[s] ~namespace:s ~startTime:t ~exitTime:t ~gprNodes:[GprNode] ~shares:m(s) ~serviceAccount:s "
			"~generation:i ~tokenTtlSeconds:i ~reason:e(missing|regenerate|namespaces|expiring)"},
	{"GprNode", "node:s cluster:s address:s"},
	{"AgentActions", "actions:[AgentAction]"},
	{"AgentResult", "~clusterName:s ~actionId:s type:e(precheck|attach|detach) gprId:s node:s ok:b ~message:s ~checks:[CheckResult]?"},
	{"ActionAck", "actionId:s"},
	{"SliceAccessReport", "~clusterName:s ~actionId:s workspace:s generation:i ok:b ~token:s ~expiresAt:t "
			      "~serviceAccount:s ~namespaces:[s] ~message:s"},
	{"SliceAccessAck", "workspace:s generation:i stored:b"},
	{"AgentGprApply", "namespace:s name:s uid:s generation:i spec:obj"},
	{"AgentGprRef", "uid:s"},
	{"AgentGprEnded", "gprId:s? provisioningStatus:s?"},
	{"AgentGprEvent", "type:s reason:s message:s time:t"},
	{"AgentGprLink", "uid:s namespace:s name:s generation:i gprId:s gpr:Gpr? events:[AgentGprEvent]"},
	{"AgentGprList", "items:[AgentGprLink]"},
	{"AgentEndpointObserved", "present:b ready:b readyReplicas:i replicas:i message:s"},
	{"AgentEndpoint", "id:s namespace:s endpointName:s want:e(present|absent) objects:[obj] observed:AgentEndpointObserved"},
	{"AgentEndpointList", "items:[AgentEndpoint]"},
	{"AgentEndpointReport", "id:s present:b ~ready:b ~readyReplicas:i ~replicas:i ~message:s"},
	{"AgentEndpointRef", "id:s"},
	{"KubeConfigRegenerate", "workspaceName:s ~clusterName:s"},
	{"KubeConfigGeneration", "clusterName:s generation:i agentMintsTokens:b"},
	{"KubeConfigRegenerated", "workspaceName:s clusters:[KubeConfigGeneration]"},
	{"SliceNamespaceReport", "name:s workspace:s ~createdByAgent:b runningPods:i"},
	{"SliceNamespacesReport", "~clusterName:s namespaces:[SliceNamespaceReport]"},
	{"SliceNamespacesAck", "clusterName:s namespaces:i"},
};

/* ---- the notation ---- */

static const char *find_props(const char *name, size_t len)
{
	for (size_t i = 0; i < EGS_ARRAY_LEN(schemas); i++)
		if (strlen(schemas[i].name) == len && !strncmp(schemas[i].name, name, len))
			return schemas[i].props;
	return NULL;
}

static json_t *type_expr(const char **p);

/* A schema's $ref (the name must exist). */
static json_t *ref(const char *name, size_t len)
{
	char buf[128];

	EGS_ASSERT(find_props(name, len) && len < 64);
	snprintf(buf, sizeof(buf), "#/components/schemas/%.*s", (int)len, name);
	return json_pack("{s:s}", "$ref", buf);
}

/* e(A|B|C) after the "e(" */
static json_t *enum_expr(const char **p)
{
	json_t *values = json_array();

	for (;;) {
		size_t n = strcspn(*p, "|)");
		EGS_ASSERT(n > 0 && (*p)[n]);
		json_array_append_new(values, json_stringn(*p, n));
		*p += n + 1;
		if ((*p)[-1] == ')')
			break;
	}
	return json_pack("{s:s, s:o}", "type", "string", "enum", values);
}

static json_t *base_expr(const char **p)
{
	static const struct {
		const char *word;
		const char *json;
	} words[] = {{"any", "{}"}, {"obj", "{\"type\":\"object\"}"}, {"s", "{\"type\":\"string\"}"},
		     {"t", "{\"type\":\"string\",\"format\":\"date-time\"}"}, {"i", "{\"type\":\"integer\"}"},
		     {"n", "{\"type\":\"number\"}"}, {"b", "{\"type\":\"boolean\"}"}};
	const char *s = *p;
	size_t n;
	json_t *inner;

	if (*s == '[' || !strncmp(s, "m(", 2)) {
		*p += *s == '[' ? 1 : 2;
		inner = type_expr(p);
		EGS_ASSERT(**p == (*s == '[' ? ']' : ')'));
		(*p)++;
		return *s == '[' ? json_pack("{s:s, s:o}", "type", "array", "items", inner)
				 : json_pack("{s:s, s:o}", "type", "object", "additionalProperties", inner);
	}
	if (!strncmp(s, "e(", 2)) {
		*p += 2;
		return enum_expr(p);
	}
	n = strcspn(s, " ?])");
	*p += n;
	for (size_t i = 0; i < EGS_ARRAY_LEN(words); i++)
		if (strlen(words[i].word) == n && !strncmp(s, words[i].word, n))
			return json_loads(words[i].json, 0, NULL);
	return ref(s, n);
}

/* TYPE [?]: a trailing '?' admits null (a $ref is wrapped, as OpenAPI 3.0 wants). */
static json_t *type_expr(const char **p)
{
	json_t *t = base_expr(p);

	EGS_ASSERT(t);
	if (**p != '?')
		return t;
	(*p)++;
	if (json_object_get(t, "$ref"))
		return json_pack("{s:[o], s:b}", "allOf", t, "nullable", 1);
	if (json_object_size(t) == 0) /* any: null is in it already */
		return t;
	json_object_set_new(t, "nullable", json_true());
	return t;
}

/* Adds the properties of the list props to properties/required. */
static void add_props(const char *props, json_t *properties, json_t *required, int depth)
{
	const char *p = props;

	EGS_ASSERT(depth < 4);
	while (*p) {
		bool optional = *p == '~';
		size_t n;
		if (*p == ' ') {
			p++;
			continue;
		}
		if (*p == '@') {
			n = strcspn(p + 1, " ");
			add_props(find_props(p + 1, n), properties, required, depth + 1);
			p += n + 1;
			continue;
		}
		p += optional;
		n = strcspn(p, ":");
		EGS_ASSERT(p[n] == ':' && n > 0);
		char name[64];
		snprintf(name, sizeof(name), "%.*s", (int)n, p);
		p += n + 1;
		json_object_set_new(properties, name, type_expr(&p));
		if (!optional)
			json_array_append_new(required, json_string(name));
		EGS_ASSERT(*p == ' ' || *p == '\0');
	}
}

static json_t *object_schema(const char *props)
{
	json_t *properties = json_object(), *required = json_array();
	json_t *o = json_pack("{s:s, s:o}", "type", "object", "properties", properties);

	add_props(props, properties, required, 0);
	if (json_array_size(required))
		json_object_set_new(o, "required", required);
	else
		json_decref(required);
	json_object_set_new(o, "additionalProperties", json_false());
	return o;
}

/* ---- operations ---- */

/* Who may call a route, as the descriptions say it. */
#define PUBLIC "no authentication"
#define ALL "Admin, Owner, Viewer"
#define ADMIN "Admin"
#define WRITERS "Admin, Owner"
#define AGENT "Agent (a cluster's agent token)"

enum media { JSON_ENVELOPE, TEXT_PLAIN, EVENT_STREAM, RAW_JSON };

struct op {
	const char *method, *path, *tag, *roles;
	const char *query; /* "name name! name:i": '!' required, ":i" integer */
	const char *body;  /* request schema name, or NULL */
	const char *data;  /* TYPE of the envelope's data (NULL: null) */
	enum media media;
	const char *summary;
};

#define EV_FILTERS "workspace sliceName gprId node gpuNodeName clusterName type reason kind since until"

static const struct op ops[] = {
	{"post", "/api/v1/auth", "Auth", PUBLIC, NULL, "AuthRequest", "Token", JSON_ENVELOPE,
	 "Exchange an API key for a bearer token (its expiry is in the X-Token-Expires-At header)"},
	{"post", "/api/v1/api-key", "Auth", ADMIN, NULL, "ApiKeyRequest", "ApiKeyCreated", JSON_ENVELOPE,
	 "Create an API key (the key itself is shown only in this answer)"},
	{"get", "/api/v1/api-key/list", "Auth", ADMIN, "workspaceName", NULL, "ApiKeyList", JSON_ENVELOPE,
	 "List API keys (those limited to workspaceName when given)"},
	{"delete", "/api/v1/api-key", "Auth", ADMIN, NULL, "ApiKeyDelete", "KeyId", JSON_ENVELOPE,
	 "Delete an API key (its tokens stop working at once)"},
	{"post", "/api/v1/projects", "Auth", ADMIN, NULL, "Project", "Project", JSON_ENVELOPE, "Create a project"},
	{"get", "/api/v1/projects", "Auth", ADMIN, NULL, NULL, "ProjectList", JSON_ENVELOPE, "List projects"},
	{"post", "/api/v1/clusters", "Clusters", ADMIN, NULL, "ClusterRequest", "ClusterRegistered", JSON_ENVELOPE,
	 "Register a cluster; the answer holds its agent token, shown only once"},
	{"put", "/api/v1/clusters", "Clusters", ADMIN, NULL, "ClusterUpdate", "ClusterName", JSON_ENVELOPE,
	 "Set a cluster's API server URL and CA"},
	{"get", "/api/v1/clusters", "Clusters", ALL, NULL, NULL, "ClusterList", JSON_ENVELOPE,
	 "List clusters and whether their agents are connected"},
	{"post", "/api/v1/slice-workspace", "Workspaces", ADMIN, NULL, "WorkspaceRequest", "WorkspaceRef", JSON_ENVELOPE,
	 "Create a slice workspace"},
	{"put", "/api/v1/slice-workspace", "Workspaces", ADMIN, NULL, "WorkspaceUpdate", "Workspace", JSON_ENVELOPE,
	 "Add or remove clusters, namespaces and users; set the description or webhook (removing a namespace that "
	 "still runs pods: 409 NAMESPACE_HAS_PODS unless force is true)"},
	{"delete", "/api/v1/slice-workspace", "Workspaces", ADMIN, NULL, "WorkspaceDelete", "WorkspaceRef", JSON_ENVELOPE,
	 "Delete a workspace (its waiting GPRs are cancelled; refused while one is active, and with 409 "
	 "NAMESPACE_HAS_PODS while one of its namespaces runs pods, unless force is true)"},
	{"get", "/api/v1/slice-workspace", "Workspaces", ALL, "workspaceName!", NULL, "WorkspaceDetail", JSON_ENVELOPE,
	 "One workspace, with its users, project and the slice namespaces its clusters' agents report"},
	{"get", "/api/v1/slice-workspace/list", "Workspaces", ALL, NULL, NULL, "WorkspaceList", JSON_ENVELOPE,
	 "List workspaces"},
	{"post", "/api/v1/slice-workspace/kube-config", "Workspaces", WRITERS, NULL, "KubeConfigRequest", "KubeConfig",
	 JSON_ENVELOPE, "A kubeconfig for the workspace's namespace on one of its clusters, with the slice's "
	 "ServiceAccount token that cluster's agent reported (409 KUBECONFIG_NOT_READY until then)"},
	{"post", "/api/v1/slice-workspace/kube-config/regenerate", "Workspaces", WRITERS, NULL, "KubeConfigRegenerate",
	 "KubeConfigRegenerated", JSON_ENVELOPE, "Drop the workspace's tokens (on one cluster or all) and have the "
	 "agents recreate the ServiceAccount, so that every kubeconfig handed out so far stops working"},
	{"get", "/api/v1/slice-workspace/kube-config", "Workspaces", WRITERS, NULL, NULL, "KubeConfig", JSON_ENVELOPE,
	 "The same as POST, for clients that send the KubeConfigRequest body with a GET"},
	{"put", "/api/v1/slice-workspace/policy", "Policies", ADMIN, NULL, "WorkspacePolicy", "WorkspacePolicy",
	 JSON_ENVELOPE, "Set a workspace's policy, replacing the whole of it: hard limits refuse a GPR (422 "
	 "POLICY_LIMIT_EXCEEDED), softLimits send it to Pending for an admin's approval"},
	{"get", "/api/v1/slice-workspace/policy", "Policies", ALL, "workspaceName!", NULL, "WorkspacePolicy",
	 JSON_ENVELOPE, "A workspace's policy (only what it sets)"},
	{"delete", "/api/v1/slice-workspace/policy", "Policies", ADMIN, NULL, "WorkspaceRef", "WorkspaceRef",
	 JSON_ENVELOPE, "Clear a workspace's policy (404 POLICY_NOT_FOUND when it has none)"},
	{"get", "/api/v1/settings/policy", "Policies", ALL, NULL, NULL, "Policy", JSON_ENVELOPE,
	 "The global policy every workspace obeys (maxNodesPerGpr always set)"},
	{"put", "/api/v1/settings/policy", "Policies", ADMIN, NULL, "Policy", "Policy", JSON_ENVELOPE,
	 "Set the global policy, replacing the whole of it (an admin of every project)"},
	{"get", "/api/v1/inventory/list", "Inventory", ALL, NULL, NULL, "Inventory", JSON_ENVELOPE,
	 "GPU nodes the caller may see (items; managedNodes and unmanagedNodes for the SDK)"},
	{"get", "/api/v1/inventory", "Inventory", ALL, "sliceName!", NULL, "WorkspaceInventory", JSON_ENVELOPE,
	 "What a workspace holds now"},
	{"get", "/api/v1/nodes", "Inventory", ADMIN, "clusterName", NULL, "NodeList", JSON_ENVELOPE,
	 "Nodes with their latest GPU samples"},
	{"get", "/api/v1/gpus", "Inventory", ADMIN, NULL, NULL, "GpuList", JSON_ENVELOPE, "Every GPU with its latest sample"},
	{"get", "/api/v1/nodes/{node}/gpu-alloc-map", "Inventory", ALL, "clusterName", NULL, "m(s)", JSON_ENVELOPE,
	 "The share allocated on each GPU of a node, by GPU UUID, with two decimals (\"0.60\"; \"1.00\" under a dedicated "
	 "GPR); clusterName when two clusters have a node of that name"},
	{"put", "/api/v1/nodes/thresholds", "Inventory", ADMIN, NULL, "ThresholdsRequest", "ThresholdsSet", JSON_ENVELOPE,
	 "Set the temperature and power alert thresholds of a cluster's nodes (or one node)"},
	{"post", "/api/v1/gpr", "GPRs", WRITERS, NULL, "GprRequest", "GprRef", JSON_ENVELOPE,
	 "Create a GPU provision request (422 GPR_UNSATISFIABLE when no node could ever hold it)"},
	{"put", "/api/v1/gpr", "GPRs", WRITERS, NULL, "GprUpdate", "GprUpdated", JSON_ENVELOPE,
	 "Change a waiting GPR, release a provisioned one early (earlyRelease) or extend it (extendBy)"},
	{"delete", "/api/v1/gpr", "GPRs", WRITERS, NULL, "GprRef", "GprRef", JSON_ENVELOPE, "Cancel a waiting GPR"},
	{"get", "/api/v1/gpr", "GPRs", ALL, "gprId!", NULL, "Gpr", JSON_ENVELOPE, "One GPR with its status"},
	{"get", "/api/v1/gpr/list", "GPRs", ALL, "sliceName status limit:i continue", NULL, "GprList", JSON_ENVELOPE,
	 "The GPRs of a workspace (or of every workspace the caller sees), oldest first; limit (1-1000) or continue "
	 "(the previous page's token) pages them, and the answer then carries continue (null on the last page)"},
	{"post", "/api/v1/gpr/waittime", "GPRs", ALL, NULL, "GprRequest", "WaitTime", JSON_ENVELOPE,
	 "When a request would start, per cluster, GPU shape and instance type, earliest first"},
	{"post", "/api/v1/gpr/approve", "GPRs", ADMIN, NULL, "GprRef", "GprRef", JSON_ENVELOPE, "Approve a Pending GPR"},
	{"post", "/api/v1/gpr/reject", "GPRs", ADMIN, NULL, "GprReason", "GprRef", JSON_ENVELOPE, "Reject a Pending GPR"},
	{"post", "/api/v1/gpr/evict", "GPRs", ADMIN, NULL, "GprReason", "GprEvicted", JSON_ENVELOPE,
	 "Evict a provisioned GPR, with a reason"},
	{"get", "/api/v1/queue", "Queue", ALL, "clusterName gpuShape", NULL, "Queue", JSON_ENVELOPE,
	 "Waiting GPRs in queue order with their global position, then the Pending ones"},
	{"post", "/api/v1/queue/top", "Queue", ADMIN, NULL, "GprRef", "QueueTop", JSON_ENVELOPE,
	 "Move a queued GPR to the top of the queue"},
	{"get", "/api/v1/schedule", "Queue", ADMIN, "clusterName", NULL, "Schedule", JSON_ENVELOPE,
	 "Each node's timeline: what holds it now and the queued GPRs planned on it (the planner's estimated starts; "
	 "the nodes drawn by replaying the plan in queue order)"},
	{"get", "/api/v1/auth/whoami", "Auth", ALL, NULL, NULL, "WhoAmI", JSON_ENVELOPE,
	 "The caller's own API key (role and scope) and the server's clock, for the portal"},
	{"get", "/api/v1/events", "Events", ALL, EV_FILTERS " limit:i continue", NULL, "EventList", JSON_ENVELOPE,
	 "Events of the caller's scope, newest first, paged with continue"},
	{"get", "/api/v1/audit", "Audit", ADMIN, "since until actor limit:i continue", NULL, "AuditList", JSON_ENVELOPE,
	 "The audit log of writes (who, what, when, from where), oldest first, paged with continue; admins without a "
	 "project scope only"},
	{"get", "/api/v1/events/watch", "Events", ALL, EV_FILTERS " resourceVersion", NULL, NULL, EVENT_STREAM,
	 "The same events as a server-sent event stream (Last-Event-ID resumes)"},
	{"get", "/api/v1/gpus/table", "Observability", ALL, "sliceName workspace gprId workload namespace sort", NULL,
	 "GpuTable", JSON_ENVELOPE, "GPUs hottest first, hotspots marked"},
	{"get", "/api/v1/gpus/series", "Observability", ALL, "uuid! window since until", NULL, "GpuSeries", JSON_ENVELOPE,
	 "One GPU's time series"},
	{"get", "/api/v1/workloads", "Observability", ALL, "sliceName workspace gprId", NULL, "WorkloadList", JSON_ENVELOPE,
	 "AI workloads (pods or processes) with their GPUs"},
	{"get", "/api/v1/models", "Observability", ALL, "sliceName workspace model", NULL, "ModelList", JSON_ENVELOPE,
	 "Models: GPUs committed and the hottest GPUs"},
	{"get", "/api/v1/alerts", "Observability", ALL, "sliceName workspace node reason", NULL, "AlertList", JSON_ENVELOPE,
	 "Active alerts"},
	{"get", "/api/v1/settings/observability", "Observability", ADMIN, NULL, NULL, "ObservabilitySettings",
	 JSON_ENVELOPE, "Observability settings"},
	{"put", "/api/v1/settings/observability", "Observability", ADMIN, NULL, "ObservabilitySettingsUpdate",
	 "ObservabilitySettings", JSON_ENVELOPE, "Change observability settings"},
	{"get", "/api/v1/notifications", "Observability", ALL, "sliceName! workspace", NULL, "Notifications",
	 JSON_ENVELOPE, "A workspace's webhook and its delivery record"},
	{"get", "/metrics", "Observability", ALL, NULL, NULL, NULL, TEXT_PLAIN,
	 "Prometheus metrics (DCGM exporter names, workspace and GPR labels)"},
	{"get", "/api/v1/prices", "Usage", ALL, NULL, NULL, "Prices", JSON_ENVELOPE, "Price per GPU-hour of each shape"},
	{"put", "/api/v1/prices", "Usage", ADMIN, NULL, "PriceRequest", "PriceSet", JSON_ENVELOPE,
	 "Set a shape's price from now on"},
	{"get", "/api/v1/usage", "Usage", ALL, "sliceName since until", NULL, "Usage", JSON_ENVELOPE,
	 "GPU-hours, cost and GPRs per workspace"},
	{"get", "/api/v1/insights/queue", "Usage", ALL, "sliceName since until bucket", NULL, "QueueInsights",
	 JSON_ENVELOPE, "Demand against capacity, wait times, most waited-for shapes, early releases"},
	{"post", "/api/v1/gpr-template", "Templates", ADMIN, NULL, "GprTemplateRequest", "GprTemplateRef", JSON_ENVELOPE,
	 "Create a GPR template: a request shape for POST /api/v1/gpr {templateName, sliceName}"},
	{"put", "/api/v1/gpr-template", "Templates", ADMIN, NULL, "GprTemplateRequest", "GprTemplateRef", JSON_ENVELOPE,
	 "Replace a GPR template (its cluster stays while a binding lists it)"},
	{"delete", "/api/v1/gpr-template", "Templates", ADMIN, NULL, "GprTemplateRef", "GprTemplateRef", JSON_ENVELOPE,
	 "Delete a GPR template (409 GPR_TEMPLATE_IN_USE while a binding lists it)"},
	{"get", "/api/v1/gpr-template", "Templates", ALL, "gprTemplateName!", NULL, "GprTemplate", JSON_ENVELOPE,
	 "One GPR template"},
	{"get", "/api/v1/gpr-template/list", "Templates", ALL, NULL, NULL, "GprTemplateList", JSON_ENVELOPE,
	 "The GPR templates of the caller's project"},
	{"post", "/api/v1/gpr-template-binding", "Templates", ADMIN, NULL, "GprTemplateBindingRequest",
	 "GprTemplateBindingAnswer", JSON_ENVELOPE,
	 "Bind templates to a workspace per cluster, with a default (the binding is named after the workspace)"},
	{"put", "/api/v1/gpr-template-binding", "Templates", ADMIN, NULL, "GprTemplateBindingRequest",
	 "GprTemplateBindingAnswer", JSON_ENVELOPE, "Replace a workspace's template binding"},
	{"delete", "/api/v1/gpr-template-binding", "Templates", ADMIN, NULL, "GprTemplateBindingRef",
	 "GprTemplateBindingRef", JSON_ENVELOPE, "Delete a workspace's template binding"},
	{"get", "/api/v1/gpr-template-binding", "Templates", ALL, "gprTemplateBindingName!", NULL, "GprTemplateBinding",
	 JSON_ENVELOPE, "One workspace's template binding"},
	{"get", "/api/v1/gpr-template-binding/list", "Templates", ALL, NULL, NULL, "GprTemplateBindingList",
	 JSON_ENVELOPE, "The template bindings of the workspaces the caller sees"},
	{"get", "/api/v1/inference-endpoint/list", "Inference", ALL, "workspace!", NULL, "InferenceEndpointList",
	 JSON_ENVELOPE, "The inference endpoints of a workspace"},
	{"get", "/api/v1/inference-endpoint", "Inference", ALL, "workspace! endpoint! cluster", NULL,
	 "InferenceEndpointAnswer", JSON_ENVELOPE, "One inference endpoint: status, URL, readiness, its GPR"},
	{"post", "/api/v1/inference-endpoint", "Inference", WRITERS, NULL, "InferenceEndpointRequest",
	 "InferenceEndpointName", JSON_ENVELOPE,
	 "Create an inference endpoint: a GPR and a model server (modelSpec) or the given manifests (rawModelSpec) "
	 "in the workspace's namespace on the cluster, on the GPR's nodes"},
	{"delete", "/api/v1/inference-endpoint", "Inference", WRITERS, NULL, "InferenceEndpointRef", "Empty",
	 JSON_ENVELOPE, "Delete an inference endpoint: its GPR ends and the agent removes its objects"},
	{"post", "/api/v1/debug/clock", "Admin", ADMIN, NULL, "ClockRequest", "Clock", JSON_ENVELOPE,
	 "Move the clock forward (egsd --dev-clock only; 404 otherwise)"},
	{"get", "/healthz", "Admin", PUBLIC, NULL, NULL, "Health", JSON_ENVELOPE, "200 when ready"},
	{"post", "/api/v1/agent/register", "Agent", AGENT, NULL, "AgentRegister", "AgentRegistered", JSON_ENVELOPE,
	 "An agent registers its cluster's nodes and GPUs"},
	{"post", "/api/v1/agent/heartbeat", "Agent", AGENT, NULL, "AgentHeartbeat", "HeartbeatAck", JSON_ENVELOPE,
	 "Node health, GPU samples and workloads"},
	{"get", "/api/v1/agent/actions", "Agent", AGENT, "wait:i", NULL, "AgentActions", JSON_ENVELOPE,
	 "Long poll for actions (precheck, attach, detach)"},
	{"get", "/api/v1/agent/events", "Agent", AGENT, "after:i limit:i", NULL, "AgentEvents", JSON_ENVELOPE,
	 "The GPR transitions of the agent's cluster after an event id, to mirror into the cluster"},
	{"post", "/api/v1/agent/actions/result", "Agent", AGENT, NULL, "AgentResult", "ActionAck", JSON_ENVELOPE,
	 "The result of one action"},
	{"post", "/api/v1/agent/slice-access", "Agent", AGENT, NULL, "SliceAccessReport", "SliceAccessAck", JSON_ENVELOPE,
	 "The ServiceAccount token the agent minted for a sliceAccess action (or why it could not)"},
	{"post", "/api/v1/agent/gprs", "Agent", AGENT, NULL, "AgentGprApply", "GprRef", JSON_ENVELOPE,
	 "Create or update the GPR of a GPUProvisioningRequest custom resource in a slice namespace of the agent's "
	 "cluster (the user API's validation, templates and policies; idempotent per uid and generation)"},
	{"delete", "/api/v1/agent/gprs", "Agent", AGENT, NULL, "AgentGprRef", "AgentGprEnded", JSON_ENVELOPE,
	 "A custom resource was deleted: cancel its waiting GPR or release its running one, and forget the link"},
	{"get", "/api/v1/agent/gprs", "Agent", AGENT, NULL, NULL, "AgentGprList", JSON_ENVELOPE,
	 "The custom resources' GPRs of the agent's cluster with their status and recent events"},
	{"get", "/api/v1/agent/inference-endpoints", "Agent", AGENT, NULL, NULL, "AgentEndpointList", JSON_ENVELOPE,
	 "The inference endpoints of the agent's cluster: the objects to apply or remove"},
	{"post", "/api/v1/agent/inference-endpoints", "Agent", AGENT, NULL, "AgentEndpointReport", "AgentEndpointRef",
	 JSON_ENVELOPE, "What the agent observed of an endpoint's objects: present, readiness, a failure"},
	{"post", "/api/v1/agent/slice-namespaces", "Agent", AGENT, NULL, "SliceNamespacesReport", "SliceNamespacesAck",
	 JSON_ENVELOPE, "The slice namespaces the agent set up and the pods running in each"},
	{"get", "/api/v1/openapi.json", "Meta", PUBLIC, NULL, NULL, NULL, RAW_JSON, "This document"},
};

const char *egs_openapi_schema(const char *name, size_t len)
{
	return find_props(name, len);
}

const char *egs_openapi_body(const char *method, const char *path)
{
	for (size_t i = 0; i < EGS_ARRAY_LEN(ops); i++)
		if (!strcasecmp(ops[i].method, method) && !strcmp(ops[i].path, path))
			return ops[i].body ? find_props(ops[i].body, strlen(ops[i].body)) : NULL;
	return NULL;
}

static json_t *media_schema(const char *type, json_t *schema)
{
	return json_pack("{s:{s:o}}", type, "schema", schema);
}

/* {statusCode: 200, status: "OK", message, data: TYPE}. */
static json_t *envelope(const char *data)
{
	const char *p = data;
	json_t *d = data ? type_expr(&p) : json_pack("{s:b}", "nullable", 1);

	EGS_ASSERT(!data || *p == '\0');
	return json_pack("{s:s, s:[s, s, s, s], s:{s:{s:s, s:[i]}, s:{s:s, s:[s]}, s:{s:s}, s:o}, s:b}", "type", "object",
			 "required", "statusCode", "status", "message", "data", "properties", "statusCode", "type", "integer",
			 "enum", 200, "status", "type", "string", "enum", "OK", "message", "type", "string", "data", d,
			 "additionalProperties", 0);
}

static json_t *success(const struct op *o)
{
	switch (o->media) {
	case TEXT_PLAIN:
		return media_schema("text/plain", json_pack("{s:s}", "type", "string"));
	case EVENT_STREAM:
		return media_schema("text/event-stream", json_pack("{s:s}", "type", "string"));
	case RAW_JSON:
		return media_schema("application/json", json_pack("{s:s}", "type", "object"));
	default:
		return media_schema("application/json", envelope(o->data));
	}
}

static json_t *parameters(const char *query)
{
	json_t *list = json_array();
	const char *p = query;

	while (p && *p) {
		size_t n = strcspn(p, " !:");
		char name[64];
		bool required = false, integer = false;
		snprintf(name, sizeof(name), "%.*s", (int)n, p);
		p += n;
		if (*p == '!')
			required = true, p++;
		if (!strncmp(p, ":i", 2))
			integer = true, p += 2;
		json_array_append_new(list, json_pack("{s:s, s:s, s:b, s:{s:s}}", "name", name, "in", "query", "required",
						      required, "schema", "type", integer ? "integer" : "string"));
		while (*p == ' ')
			p++;
	}
	return list;
}

/* The {name} segments of path as required string path parameters, appended to list. */
static void path_parameters(const char *path, json_t *list)
{
	for (const char *p = strchr(path, '{'); p; p = strchr(p + 1, '{')) {
		size_t n = strcspn(p + 1, "}");
		char name[64];
		snprintf(name, sizeof(name), "%.*s", (int)n, p + 1);
		json_array_append_new(list, json_pack("{s:s, s:s, s:b, s:{s:s}}", "name", name, "in", "path", "required", 1,
						      "schema", "type", "string"));
	}
}

static json_t *operation(const struct op *o)
{
	char id[128], desc[160];
	size_t n = 0;
	json_t *op;

	for (const char *s = o->method; *s && n + 1 < sizeof(id); s++)
		id[n++] = *s;
	for (const char *s = o->path + (strncmp(o->path, "/api/v1", 7) ? 0 : 7); *s && n + 1 < sizeof(id); s++)
		if (!strchr("/-.{}", *s))
			id[n++] = strchr("/-.{", s[-1]) ? (char)(*s & ~0x20) : *s;
	id[n] = '\0';
	snprintf(desc, sizeof(desc), "Who may call it: %s.", o->roles);
	op = json_pack("{s:s, s:s, s:s, s:[s], s:{s:{s:s, s:o}, s:{s:s}}}", "operationId", id, "summary", o->summary,
		       "description", desc, "tags", o->tag, "responses", "200", "description", "Success", "content",
		       success(o), "default", "$ref", "#/components/responses/Error");
	if (o->query || strchr(o->path, '{')) {
		json_t *params = parameters(o->query);
		path_parameters(o->path, params);
		json_object_set_new(op, "parameters", params);
	}
	if (o->body)
		json_object_set_new(op, "requestBody",
				    json_pack("{s:b, s:o}", "required", 1, "content",
					      media_schema("application/json", ref(o->body, strlen(o->body)))));
	if (!strcmp(o->roles, PUBLIC))
		json_object_set_new(op, "security", json_array());
	return op;
}

static json_t *components(void)
{
	json_t *s = json_object();

	for (size_t i = 0; i < EGS_ARRAY_LEN(schemas); i++)
		json_object_set_new(s, schemas[i].name, object_schema(schemas[i].props));
	return json_pack("{s:o, s:{s:{s:s, s:o}}, s:{s:{s:s, s:s}}}", "schemas", s, "responses", "Error", "description",
			 "An error in the envelope: error.errorKey says which (docs: README's error keys), "
			 "error.data.field names the field at fault",
			 "content",
			 media_schema("application/json", json_pack("{s:s}", "$ref", "#/components/schemas/ErrorEnvelope")),
			 "securitySchemes", "bearer", "type", "http", "scheme", "bearer");
}

/* The whole document (a new reference). */
static json_t *document(void)
{
	json_t *paths = json_object();

	for (size_t i = 0; i < EGS_ARRAY_LEN(ops); i++) {
		json_t *item = json_object_get(paths, ops[i].path);
		if (!item) {
			item = json_object();
			json_object_set_new(paths, ops[i].path, item);
		}
		EGS_ASSERT(!json_object_get(item, ops[i].method)); /* one entry per route */
		json_object_set_new(item, ops[i].method, operation(&ops[i]));
	}
	return json_pack("{s:s, s:{s:s, s:s, s:s}, s:[{s:s}], s:[{s:[]}], s:o, s:o}", "openapi", "3.0.3", "info", "title",
			 "Elastic GPU Service API", "version", "1",
			 "description",
			 "The public EGS REST API (v1) as egsd speaks it, and what egsd adds beside it.  Every JSON "
			 "answer is the envelope {statusCode, status, message, data} (plus error on failures); "
			 "authenticate with POST /api/v1/auth and send Authorization: Bearer <token>.",
			 "servers", "url", "/", "security", "bearer", "paths", paths, "components", components());
}

static void openapi_get(struct egs_req *r)
{
	json_t *doc = document();
	char *text = json_dumps(doc, JSON_COMPACT);
	struct evbuffer *b = evbuffer_new();

	EGS_ASSERT(text && b);
	evbuffer_add(b, text, strlen(text));
	egs_hreq_content_type(r->hq, "application/json");
	egs_hreq_reply(r->hq, 200, b); /* the document itself: tools read it without an envelope */
	evbuffer_free(b);
	free(text);
	json_decref(doc);
	egs_obs_request(r->srv, "GET", r->path, 200, r->t0_us);
	r->hq = NULL;
}

const struct egs_route egs_routes_openapi[] = {
	{ EVHTTP_REQ_GET, "/api/v1/openapi.json", openapi_get, true },
	{ 0, NULL, NULL, false },
};

// A GPR's details ("Click GPR to view the request details"): its request, status, nodes, checks and events.
import { egs } from '../api.js';
import { Link, path } from '../router.jsx';
import { useLiveReload, useLoad } from '../ui/hooks.js';
import { Card, ErrorBox, Loading, Status } from '../ui/misc.jsx';
import { fmtTime } from '../ui/format.js';

const FIELDS = [
  ['gprId', 'ID'], ['sliceName', 'Slice'], ['clusterName', 'Cluster'], ['gpuShape', 'GPU shape'], ['instanceType', 'Instance type'],
  ['numberOfGPUNodes', 'GPU nodes'], ['numberOfGPUs', 'GPUs per node'], ['gpuSharingMode', 'Sharing'], ['priority', 'Priority'],
  ['exitDuration', 'Reserved for'], ['estimatedWaitTime', 'Estimated wait'],
];

export function GprDetail({ slice, id }) {
  const { data: g, error, reload } = useLoad(() => egs.gprStatus(id), [id]);
  const ev = useLoad(() => egs.events({ gprId: id, limit: 50 }), [id]);
  useLiveReload(() => {
    reload();
    ev.reload();
  }, (e) => e.involvedObject && e.involvedObject.name === id);
  if (error) return <ErrorBox error={error} />;
  if (!g) return <Loading />;
  const s = g.status;
  return (
    <>
      <p>
        <Link href={path('gprs', slice)}>GPU Requests of {slice}</Link>
      </p>
      <h1>
        {g.gprName} <Status gpr={g} />
      </h1>
      <div class="grid2">
        <Card title="Request" id="gpr-req">
          <dl class="kv">
            {FIELDS.map(([k, label]) => (
              <>
                <dt>{label}</dt>
                <dd>{String(g[k] ?? '—')}</dd>
              </>
            ))}
          </dl>
        </Card>
        <Card title="Status" id="gpr-status">
          <dl class="kv">
            <dt>Estimated start</dt>
            <dd>{fmtTime(g.estimatedStartTime)}</dd>
            <dt>Started</dt>
            <dd>{fmtTime(s.startTimestamp)}</dd>
            <dt>Reserved until</dt>
            <dd>{fmtTime(s.exitTimestamp)}</dd>
            <dt>Remaining</dt>
            <dd>{s.remainingDuration}</dd>
            <dt>GPUs allocated</dt>
            <dd>{s.numGpusAllocated}</dd>
            <dt>Nodes</dt>
            <dd>{s.nodes.join(', ') || '—'}</dd>
            <dt>Cost</dt>
            <dd>{s.cost}</dd>
            {s.pendingReason && (
              <>
                <dt>Waiting for approval</dt>
                <dd>{s.pendingReason}</dd>
              </>
            )}
            {s.failureReason && (
              <>
                <dt>Failure</dt>
                <dd>{s.failureReason}</dd>
              </>
            )}
          </dl>
        </Card>
      </div>
      <Card title="Events" id="gpr-events">
        <ul class="list">
          {((ev.data && ev.data.items) || []).map((e) => (
            <li class={e.type === 'Warning' ? 'warn' : ''}>
              <strong>{e.reason}</strong> {e.message} <span class="muted">{fmtTime(e.lastTimestamp)}</span>
            </li>
          ))}
        </ul>
      </Card>
    </>
  );
}

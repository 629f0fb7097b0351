// View GPR Queue (user guide): waiting GPRs in queue order with their position and estimate; a user
// sees its own with their global position.  Admins move one to the top, approve or reject pending ones.
import { useState } from 'preact/hooks';
import { egs } from '../api.js';
import { Link, path } from '../router.jsx';
import { useLiveReload, useLoad } from '../ui/hooks.js';
import { ErrorBox, Loading, Stat, Status } from '../ui/misc.jsx';
import { VTable } from '../ui/table.jsx';
import { fmtTime } from '../ui/format.js';
import { useMe } from '../ui/me.js';

export function Queue() {
  const me = useMe();
  const { data, error, reload } = useLoad(() => egs.queue(), []);
  const [err, setErr] = useState(null);
  useLiveReload(reload, (e) => e.involvedObject && e.involvedObject.kind === 'GPR');
  const act = (fn) => async () => {
    setErr(null);
    try {
      await fn();
      reload();
    } catch (e) {
      setErr(e);
    }
  };
  const columns = [
    { key: 'position', label: 'Position', render: (q) => q.position ?? 'pending' },
    { key: 'positionInGroup', label: 'In cluster and shape', render: (q) => q.positionInGroup ?? '—' },
    { key: 'gprName', label: 'Name', render: (q) => <Link href={path('gprs', q.sliceName, q.gprId)}>{q.gprName}</Link> },
    { key: 'sliceName', label: 'Slice' },
    { key: 'clusterName', label: 'Cluster', render: (q) => q.clusterName || 'any' },
    { key: 'gpuShape', label: 'Shape', render: (q) => q.gpuShape || 'any' },
    { key: 'priority', label: 'Priority' },
    { key: 'est', label: 'Estimated start', render: (q) => fmtTime(q.estimatedStartTime) },
    { key: 'status', label: 'Status', render: (q) => <Status value={q.provisioningStatus} /> },
  ];
  if (me.isAdmin)
    columns.push({
      key: 'actions',
      label: 'Actions',
      render: (q) =>
        q.provisioningStatus === 'Pending' ? (
          <div class="actions">
            <button type="button" class="small" onClick={act(() => egs.gprApprove(q.gprId))} aria-label={`Approve ${q.gprName}`}>
              Approve
            </button>
            <button type="button" class="small danger" onClick={act(() => egs.gprReject(q.gprId, 'rejected in the portal'))} aria-label={`Reject ${q.gprName}`}>
              Reject
            </button>
          </div>
        ) : (
          <button type="button" class="small" onClick={act(() => egs.queueTop(q.gprId))} disabled={q.position === 1} aria-label={`Move ${q.gprName} to the top`}>
            Move to top
          </button>
        ),
    });
  if (error) return <ErrorBox error={error} />;
  if (!data) return <Loading />;
  const mine = data.items.filter((q) => q.position);
  return (
    <>
      <h1>GPR Queue</h1>
      <div class="stats">
        <Stat label="waiting in the whole queue" value={data.queueLength} />
        {!me.isAdmin && <Stat label="my first position" value={mine.length ? mine[0].position : '—'} />}
        <Stat label="pending approval" value={data.items.filter((q) => !q.position).length} />
      </div>
      <ErrorBox error={err} />
      <VTable label="Queue" columns={columns} rows={data.items} rowKey={(q) => q.gprId} empty="The queue is empty." />
      <h2>By cluster and shape</h2>
      <ul class="list">
        {data.groups.map((g) => (
          <li>
            {g.clusterName || 'any cluster'} · {g.gpuShape || 'any shape'}: {g.queued} waiting, next start {fmtTime(g.nextEstimatedStart)}
          </li>
        ))}
      </ul>
    </>
  );
}

// The dashboard: my slices, my GPRs with their state and estimated start, GPUs in use, recent events.
import { egs } from '../api.js';
import { Link, path } from '../router.jsx';
import { useLive, useLiveReload, useLoad } from '../ui/hooks.js';
import { Card, ErrorBox, Loading, Stat, Status } from '../ui/misc.jsx';
import { fmtTime, statusOf } from '../ui/format.js';
import { useState } from 'preact/hooks';

const MAX_SLICES = 20; // the dashboard summarizes; the GPU Requests page lists everything
const MAX_ROWS = 50;

async function load() {
  const { workspaces } = await egs.workspaceList();
  const lists = await Promise.all(workspaces.slice(0, MAX_SLICES).map((w) => egs.gprList(w.name).then((d) => d.items)));
  return { workspaces, gprs: lists.flat() };
}

export function Dashboard() {
  const { data, error, reload } = useLoad(load, []);
  const ev = useLoad(() => egs.events({ limit: 8 }), []);
  const [recent, setRecent] = useState([]);
  useLiveReload(reload, (e) => e.involvedObject && e.involvedObject.kind === 'GPR');
  useLive((e) => setRecent((r) => [e, ...r.filter((x) => x.id !== e.id)].slice(0, 8)));
  if (error || !data)
    return (
      <>
        <h1>Dashboard</h1>
        {error ? <ErrorBox error={error} /> : <Loading />}
      </>
    );
  const active = data.gprs.filter((g) => !['Complete', 'Cancelled', 'Rejected', 'Failed'].includes(statusOf(g)));
  const inUse = data.gprs.reduce((n, g) => n + (statusOf(g) === 'Provisioned' ? g.status.numGpusAllocated || 0 : 0), 0);
  const queued = data.gprs.filter((g) => statusOf(g) === 'Queued').length;
  const events = [...recent, ...((ev.data && ev.data.items) || []).filter((e) => !recent.some((r) => r.id === e.id))].slice(0, 8);
  return (
    <>
      <h1>Dashboard</h1>
      <div class="stats">
        <Stat label="slices" value={data.workspaces.length} />
        <Stat label="GPUs in use" value={inUse} />
        <Stat label="GPRs queued" value={queued} />
        <Stat label="active GPRs" value={active.length} />
      </div>
      <div class="grid2">
        <Card title="My slices" id="dash-slices">
          {data.workspaces.length === 0 ? (
            <p class="muted">No slice yet: ask your EGS admin for a slice workspace.</p>
          ) : (
            <ul class="list">
              {data.workspaces.map((w) => (
                <li>
                  <Link href={path('gprs', w.name)}>{w.name}</Link> <span class="muted">{w.clusters.join(', ')}</span>
                </li>
              ))}
            </ul>
          )}
        </Card>
        <Card title="Recent events" id="dash-events">
          <ul class="list events-mini">
            {events.map((e) => (
              <li class={e.type === 'Warning' ? 'warn' : ''}>
                <strong>{e.reason}</strong> {e.message} <span class="muted">{fmtTime(e.lastTimestamp)}</span>
              </li>
            ))}
          </ul>
          <Link href="/events">All events</Link>
        </Card>
      </div>
      <Card title="My GPU requests" id="dash-gprs">
        {active.length === 0 ? (
          <p class="muted">No active GPU request.</p>
        ) : (
          <div class="scroll-x" tabIndex={0} role="region" aria-label="My GPU requests">
            <table>
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Slice</th>
                  <th scope="col">GPUs</th>
                  <th scope="col">Status</th>
                  <th scope="col">Estimated start</th>
                  <th scope="col">Reserved until</th>
                </tr>
              </thead>
              <tbody>
                {active.slice(0, MAX_ROWS).map((g) => (
                  <tr data-gpr={g.gprId}>
                    <td>
                      <Link href={path('gprs', g.sliceName, g.gprId)}>{g.gprName}</Link>
                    </td>
                    <td>{g.sliceName}</td>
                    <td>{g.numberOfGPUs * g.numberOfGPUNodes}</td>
                    <td>
                      <Status gpr={g} />
                    </td>
                    <td>{statusOf(g) === 'Queued' ? fmtTime(g.estimatedStartTime) : fmtTime(g.status.startTimestamp)}</td>
                    <td>{fmtTime(g.status.exitTimestamp)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
            {active.length > MAX_ROWS && (
              <p class="muted">
                and {active.length - MAX_ROWS} more: see <Link href="/gprs">GPU Requests</Link>
              </p>
            )}
          </div>
        )}
      </Card>
    </>
  );
}

// The schedule view (admin): a timeline of each node of a cluster: what holds it now and which
// GPRs are planned on it and when (GET /api/v1/schedule: the planner's estimated starts, drawn on
// the nodes a replay of the plan gives them).
import { useState } from 'preact/hooks';
import { egs } from '../../api.js';
import { navigate, path } from '../../router.jsx';
import { useLiveReload, useLoad } from '../../ui/hooks.js';
import { ErrorBox, Loading } from '../../ui/misc.jsx';
import { fmtTime } from '../../ui/format.js';

const HORIZONS = { '6h': 6, '24h': 24, '3d': 72, '7d': 168 };

export function Schedule({ arg: cluster }) {
  const clusters = useLoad(() => egs.clusters(), []);
  const { data, error, reload } = useLoad(() => egs.schedule(cluster), [cluster]);
  const [hz, setHz] = useState('24h');
  useLiveReload(reload, (e) => ['GPR', 'Node'].includes(e.involvedObject && e.involvedObject.kind));
  const names = ((clusters.data && clusters.data.items) || []).map((c) => c.clusterName);
  const t0 = data ? Date.parse(data.now) : 0;
  const span = HORIZONS[hz] * 3600e3;
  const pct = (t) => Math.max(0, Math.min(100, ((Date.parse(t) - t0) / span) * 100));
  const marks = [0, 0.25, 0.5, 0.75, 1];
  return (
    <>
      <h1>Schedule{cluster ? ` of ${cluster}` : ''}</h1>
      <div class="toolbar">
        <div class="field inline">
          <label for="sch-cluster">Cluster</label>
          <select id="sch-cluster" value={cluster || ''} onChange={(e) => navigate(path('admin', 'schedule', e.currentTarget.value))}>
            <option value="">All clusters</option>
            {names.map((c) => (
              <option value={c}>{c}</option>
            ))}
          </select>
        </div>
        <div class="field inline">
          <label for="sch-hz">Horizon</label>
          <select id="sch-hz" value={hz} onChange={(e) => setHz(e.currentTarget.value)}>
            {Object.keys(HORIZONS).map((h) => (
              <option value={h}>{h}</option>
            ))}
          </select>
        </div>
      </div>
      <ErrorBox error={error} />
      {!data ? (
        <Loading />
      ) : (
        <>
          <p class="muted">
            Now {fmtTime(data.now)} · {data.queueLength} GPRs waiting. Bars: <span class="key k-held">holds it now</span>{' '}
            <span class="key k-planned">planned</span>
          </p>
          <div class="timeline-wrap" tabIndex={0} role="region" aria-label="Schedule timeline">
          <div class="timeline" role="table" aria-label="Schedule of each node">
            <div class="tl-row tl-head" role="row">
              <span class="tl-node" role="columnheader">
                Node
              </span>
              <div class="tl-lane" role="columnheader">
                {marks.map((m) => (
                  <span class="tl-mark" style={{ left: m * 100 + '%' }}>
                    {m === 0 ? 'now' : '+' + Math.round(m * HORIZONS[hz]) + 'h'}
                  </span>
                ))}
              </div>
            </div>
            {data.nodes.map((n) => (
              <div class="tl-row" role="row" data-node={n.gpuNodeName}>
                <span class="tl-node" role="rowheader">
                  {n.clusterName}/{n.gpuNodeName}
                  <small>
                    {n.gpuCount} x {n.gpuShape}
                    {n.nodeHealth !== 'Healthy' ? ' · ' + n.nodeHealth : ''}
                  </small>
                </span>
                <div class="tl-lane" role="cell">
                  {n.slots.length === 0 && <span class="sr">free, nothing planned</span>}
                  {n.slots.map((s) => {
                    const l = pct(s.start), r = pct(s.end);
                    const label = `${s.gprName} (${s.sliceName}), ${s.kind}, ${fmtTime(s.start)} to ${fmtTime(s.end)}`;
                    return (
                      <span class={'tl-bar ' + (s.kind === 'Planned' ? 'k-planned' : 'k-held')} style={{ left: l + '%', width: Math.max(0.8, r - l) + '%' }} title={label} data-gpr={s.gprId}>
                        <span class="sr">{label}</span>
                        <span aria-hidden="true">{s.gprName}</span>
                      </span>
                    );
                  })}
                </div>
              </div>
            ))}
          </div>
          </div>
          {data.unplaced.length > 0 && (
            <>
              <h2>Estimated but not drawn</h2>
              <ul class="list">
                {data.unplaced.map((s) => (
                  <li>
                    {s.gprName} ({s.sliceName}) from {fmtTime(s.start)}
                  </li>
                ))}
              </ul>
            </>
          )}
        </>
      )}
    </>
  );
}

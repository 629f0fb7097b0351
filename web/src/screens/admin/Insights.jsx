// Queue insights (admin): demand against capacity per shape and cluster, waiting times, the most
// waited-for shapes and early releases per slice (GET /api/v1/insights/queue).
import { useState } from 'preact/hooks';
import { egs } from '../../api.js';
import { useLoad } from '../../ui/hooks.js';
import { ErrorBox, Loading } from '../../ui/misc.jsx';
import { BarChart, LineChart } from '../../ui/chart.jsx';
import { fmtNum } from '../../ui/format.js';

export function Insights() {
  const [since, setSince] = useState('7d');
  const { data, error } = useLoad(() => egs.insights({ since, bucket: since === '1d' ? '1h' : '1d' }), [since]);
  return (
    <>
      <h1>Queue insights</h1>
      <div class="field inline">
        <label for="in-since">Period</label>
        <select id="in-since" value={since} onChange={(e) => setSince(e.currentTarget.value)}>
          {['1d', '7d', '30d'].map((s) => (
            <option value={s}>last {s}</option>
          ))}
        </select>
      </div>
      <ErrorBox error={error} />
      {!data ? (
        <Loading />
      ) : (
        <>
          <div class="grid2">
            {data.series.map((s) => (
              <BarChart
                title={`${s.gpuShape} on ${s.clusterName}: GPU-hours`}
                groups={s.points.map((p) => ({ label: String(p.t).slice(5, 13), values: [p.demandGpuHours, p.usedGpuHours, p.capacityGpuHours] }))}
                keys={[{ label: 'demand', class: 'c1' }, { label: 'used', class: 'c2' }, { label: 'capacity', class: 'c3' }]}
              />
            ))}
          </div>
          <LineChart
            title="Wait from creation to start (minutes): median and p95"
            x={data.waitTimes.map((w) => String(w.t || '').slice(5, 13))}
            series={[
              { label: 'median', values: data.waitTimes.map((w) => (w.count ? w.medianSeconds / 60 : null)), class: 'c1' },
              { label: 'p95', values: data.waitTimes.map((w) => (w.count ? w.p95Seconds / 60 : null)), class: 'c2' },
            ]}
          />
          <div class="grid2">
            <section class="card" aria-labelledby="in-shapes">
              <h2 id="in-shapes">Most waited-for shapes</h2>
              <ul class="list">
                {data.mostWaitedShapes.map((m) => (
                  <li>
                    {m.gpuShape || 'any'}: {m.requests} requests, {m.queuedNow} queued now, {fmtNum(m.totalWaitHours)} h waited
                  </li>
                ))}
              </ul>
            </section>
            <section class="card" aria-labelledby="in-early">
              <h2 id="in-early">Early releases</h2>
              <ul class="list">
                {data.earlyRelease.map((e) => (
                  <li>
                    {e.sliceName}: {e.earlyReleased} of {e.provisioned} ({fmtNum((e.rate || 0) * 100)} %), {fmtNum(e.gpuHoursReturned)} GPU-hours returned
                  </li>
                ))}
              </ul>
            </section>
          </div>
        </>
      )}
    </>
  );
}

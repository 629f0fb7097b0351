// View GPUs (user guide): the GPU table, hottest first (power, then temperature), hotspots marked,
// and "View Dashboard": the time series of the selected GPU.
import { useState } from 'preact/hooks';
import { egs } from '../api.js';
import { useRoute } from '../router.jsx';
import { useLoad } from '../ui/hooks.js';
import { ErrorBox, Loading, Stat } from '../ui/misc.jsx';
import { VTable } from '../ui/table.jsx';
import { LineChart } from '../ui/chart.jsx';
import { fmtNum } from '../ui/format.js';
import { SlicePicker } from './SlicePicker.jsx';

function Series({ uuid }) {
  const [win, setWin] = useState('1h');
  const { data, error } = useLoad(() => egs.gpuSeries(uuid, win), [uuid, win]);
  return (
    <section class="card" aria-label="GPU dashboard">
      <h2>
        GPU {data ? `${data.gpuNodeName} #${data.index}` : uuid}
      </h2>
      <div class="field inline">
        <label for="win">Window</label>
        <select id="win" value={win} onChange={(e) => setWin(e.currentTarget.value)}>
          {['15m', '1h', '2h'].map((w) => (
            <option value={w}>{w}</option>
          ))}
        </select>
      </div>
      <ErrorBox error={error} />
      {data && (
        <>
          <LineChart
            title="Power (W), temperature (°C), utilization (%)"
            x={data.points.map((p) => String(p.t).slice(11, 16))}
            series={[
              { label: 'power W', values: data.points.map((p) => p.powerW), class: 'c1' },
              { label: 'temperature °C', values: data.points.map((p) => p.tempC), class: 'c2' },
              { label: 'utilization %', values: data.points.map((p) => p.utilPct), class: 'c3' },
            ]}
          />
          {data.points.length === 0 && <p class="muted">No sample in this window yet.</p>}
        </>
      )}
    </section>
  );
}

export function Gpus({ slice }) {
  const { params } = useRoute();
  const workload = params.get('workload') || undefined;
  const [sort, setSort] = useState('');
  const [sel, setSel] = useState(null);
  const { data, error } = useLoad(() => (slice ? egs.gpuTable({ sliceName: slice, workload, sort }) : Promise.resolve(null)), [slice, workload, sort]);
  const columns = [
    { key: 'view', label: 'Dashboard', render: (g) => (
      <button type="button" class="small" aria-pressed={sel === g.uuid} onClick={() => setSel(g.uuid)} aria-label={`View dashboard of ${g.gpuNodeName} GPU ${g.index}`}>
        View
      </button>
    ) },
    { key: 'node', label: 'Node', render: (g) => `${g.gpuNodeName} #${g.index}` },
    { key: 'powerW', label: 'Power W', render: (g) => fmtNum(g.powerW) },
    { key: 'tempC', label: 'Temp °C', render: (g) => fmtNum(g.tempC) },
    { key: 'utilPct', label: 'Util %', render: (g) => fmtNum(g.utilPct) },
    { key: 'mem', label: 'Memory MiB', render: (g) => `${g.memUsedMiB} / ${g.memTotalMiB}` },
    { key: 'hotspot', label: 'Hotspot', render: (g) => (g.hotspot ? 'yes' : '') },
    { key: 'workloads', label: 'Workloads', render: (g) => (g.workloads || []).map((w) => w.name || w).join(', ') || '—' },
  ];
  return (
    <>
      <h1>GPUs{workload ? ` of ${workload}` : ''}</h1>
      <div class="toolbar">
        <SlicePicker base="gpus" slice={slice} />
        <div class="field inline">
          <label for="gsort">Sort</label>
          <select id="gsort" value={sort} onChange={(e) => setSort(e.currentTarget.value)}>
            <option value="">hottest first</option>
            <option value="power">power</option>
            <option value="temperature">temperature</option>
            <option value="utilization">utilization</option>
          </select>
        </div>
      </div>
      <ErrorBox error={error} />
      {slice && !data && !error && <Loading />}
      {data && (
        <>
          <div class="stats">
            <Stat label="GPUs" value={data.summary.gpus} />
            <Stat label="hotspots" value={data.summary.hotspots} />
            <Stat label="average utilization" value={fmtNum(data.summary.avgUtilPct) + ' %'} />
            <Stat label="total power" value={fmtNum(data.summary.totalPowerW) + ' W'} />
          </div>
          <VTable label="GPU table" columns={columns} rows={data.items} rowKey={(g) => g.uuid} rowClass={(g) => (g.hotspot ? 'warn' : '')} empty="No GPU in this slice now." />
          {sel && <Series uuid={sel} />}
        </>
      )}
    </>
  );
}

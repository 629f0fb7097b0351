// View AI Workloads (user guide): the models running in a slice with the infrastructure committed
// to them and their summary (high power GPU, high temperature GPU, average utilization).
import { egs } from '../api.js';
import { Link, path } from '../router.jsx';
import { useLiveReload, useLoad } from '../ui/hooks.js';
import { ErrorBox, Loading } from '../ui/misc.jsx';
import { fmtNum } from '../ui/format.js';
import { SlicePicker } from './SlicePicker.jsx';

export function GpuRef({ g }) {
  if (!g) return '—';
  return `${g.gpuNodeName} #${g.index} (${fmtNum(g.powerW)} W, ${fmtNum(g.tempC)} °C)`;
}

export function Workloads({ slice }) {
  const { data, error, reload } = useLoad(() => (slice ? egs.models({ sliceName: slice }) : Promise.resolve({ items: [] })), [slice]);
  useLiveReload(reload, (e) => e.involvedObject && e.involvedObject.kind === 'GPR');
  return (
    <>
      <h1>AI Workloads</h1>
      <div class="toolbar">
        <SlicePicker base="workloads" slice={slice} />
        {slice && <Link href={path('pods', slice)}>Go to Pods</Link>}
        {slice && <Link href={path('gpus', slice)}>Go to GPUs</Link>}
      </div>
      <ErrorBox error={error} />
      {!data ? (
        <Loading />
      ) : data.items.length === 0 ? (
        <p class="muted">No AI workload is running on this slice's GPUs.</p>
      ) : (
        <div class="scroll-x" tabIndex={0} role="region" aria-label="Models">
          <table>
            <thead>
              <tr>
                <th scope="col">Model</th>
                <th scope="col">Job</th>
                <th scope="col">Workloads</th>
                <th scope="col">GPUs committed</th>
                <th scope="col">High power GPU</th>
                <th scope="col">High temperature GPU</th>
                <th scope="col">Average utilization</th>
              </tr>
            </thead>
            <tbody>
              {data.items.map((m) => (
                <tr>
                  <td>
                    <Link href={path('workloads', slice, m.model)}>{m.model}</Link>
                  </td>
                  <td>{m.jobType || '—'}</td>
                  <td>{m.workloads.length}</td>
                  <td>{m.gpusCommitted}</td>
                  <td>
                    <GpuRef g={m.highestPowerGpu} />
                  </td>
                  <td>
                    <GpuRef g={m.highestTempGpu} />
                  </td>
                  <td>{fmtNum(m.avgUtilPct)} %</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}

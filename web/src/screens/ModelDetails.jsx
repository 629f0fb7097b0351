// Model Details (user guide): one model's configuration, the GPU infrastructure committed to it,
// its summary, and the way down to its pods and GPUs.
import { egs } from '../api.js';
import { Link, path } from '../router.jsx';
import { useLoad } from '../ui/hooks.js';
import { Card, ErrorBox, Loading, Stat } from '../ui/misc.jsx';
import { fmtNum } from '../ui/format.js';
import { GpuRef } from './Workloads.jsx';

export function ModelDetails({ slice, model }) {
  const { data, error } = useLoad(() => egs.models({ sliceName: slice, model }), [slice, model]);
  if (error) return <ErrorBox error={error} />;
  if (!data) return <Loading />;
  const m = data.items[0];
  if (!m) return <p class="muted">Model {model} has no workload running in {slice}.</p>;
  return (
    <>
      <p>
        <Link href={path('workloads', slice)}>AI workloads of {slice}</Link>
      </p>
      <h1>Model {m.model}</h1>
      <div class="stats">
        <Stat label="GPUs committed" value={m.gpusCommitted} />
        <Stat label="hotspots" value={m.hotspots} />
        <Stat label="average utilization" value={fmtNum(m.avgUtilPct) + ' %'} />
        <Stat label="total power" value={fmtNum(m.totalPowerW) + ' W'} />
      </div>
      <Card title="Summary" id="model-summary">
        <dl class="kv">
          <dt>Configuration</dt>
          <dd>{m.modelConfig || '—'}</dd>
          <dt>Job type</dt>
          <dd>{m.jobType || '—'}</dd>
          <dt>High power GPU</dt>
          <dd>
            <GpuRef g={m.highestPowerGpu} />
          </dd>
          <dt>High temperature GPU</dt>
          <dd>
            <GpuRef g={m.highestTempGpu} />
          </dd>
          <dt>Nodes</dt>
          <dd>{m.nodes.join(', ')}</dd>
          <dt>GPRs</dt>
          <dd>{m.gprIds.join(', ') || '—'}</dd>
        </dl>
      </Card>
      <div class="row">
        <Link class="button" href={path('pods', slice, { model: m.model })}>
          Go to Pods
        </Link>
        <Link class="button" href={path('gpus', slice, { workload: m.model })}>
          Go to GPUs
        </Link>
      </div>
    </>
  );
}

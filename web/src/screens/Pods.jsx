// View Pods (user guide): the pods (or processes) running with GPUs in a slice.
import { egs } from '../api.js';
import { useRoute } from '../router.jsx';
import { useLiveReload, useLoad } from '../ui/hooks.js';
import { ErrorBox, Loading } from '../ui/misc.jsx';
import { VTable } from '../ui/table.jsx';
import { fmtNum } from '../ui/format.js';
import { SlicePicker } from './SlicePicker.jsx';

export function Pods({ slice }) {
  const { params } = useRoute();
  const model = params.get('model');
  const { data, error, reload } = useLoad(() => (slice ? egs.workloads({ sliceName: slice }) : Promise.resolve({ items: [] })), [slice]);
  useLiveReload(reload, (e) => e.involvedObject && e.involvedObject.kind === 'GPR');
  const rows = data ? data.items.filter((w) => !model || w.model === model) : [];
  const columns = [
    { key: 'name', label: 'Pod' },
    { key: 'namespace', label: 'Namespace', render: (w) => w.namespace || '—' },
    { key: 'model', label: 'Model' },
    { key: 'node', label: 'Node', render: (w) => `${w.clusterName}/${w.gpuNodeName}` },
    { key: 'gpus', label: 'GPUs', render: (w) => w.gpus.map((g) => '#' + g.index).join(' ') },
    { key: 'util', label: 'Avg utilization', render: (w) => fmtNum(w.summary.avgUtilPct) + ' %' },
    { key: 'power', label: 'Power', render: (w) => fmtNum(w.summary.totalPowerW) + ' W' },
  ];
  return (
    <>
      <h1>Pods{model ? ` of ${model}` : ''}</h1>
      <SlicePicker base="pods" slice={slice} />
      <ErrorBox error={error} />
      {!data ? <Loading /> : <VTable label="Pods" columns={columns} rows={rows} rowKey={(w) => `${w.clusterName}/${w.gpuNodeName}/${w.namespace}/${w.name}`} empty="No pod with GPUs." />}
    </>
  );
}

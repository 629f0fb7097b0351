// Alerts (admin): the active alerts, newest first (GPU temperature, power, utilization, node health).
import { egs } from '../../api.js';
import { useLiveReload, useLoad } from '../../ui/hooks.js';
import { ErrorBox, Loading } from '../../ui/misc.jsx';
import { VTable } from '../../ui/table.jsx';
import { fmtNum, fmtTime } from '../../ui/format.js';

export function Alerts() {
  const { data, error, reload } = useLoad(() => egs.alerts({}), []);
  useLiveReload(reload, (e) => e.involvedObject && e.involvedObject.kind === 'Node');
  const columns = [
    { key: 'reason', label: 'Alert' },
    { key: 'node', label: 'Node', render: (a) => `${a.clusterName}/${a.gpuNodeName}${a.gpuIndex !== undefined && a.gpuIndex !== null ? ' #' + a.gpuIndex : ''}` },
    { key: 'value', label: 'Value', render: (a) => `${fmtNum(a.value)} ${a.unit || ''} (peak ${fmtNum(a.peak)}, threshold ${fmtNum(a.threshold)})` },
    { key: 'sliceName', label: 'Slice', render: (a) => a.sliceName || '—' },
    { key: 'gprId', label: 'GPR', render: (a) => a.gprId || '—' },
    { key: 'since', label: 'Since', render: (a) => fmtTime(a.since) },
  ];
  return (
    <>
      <h1>Alerts</h1>
      <ErrorBox error={error} />
      {!data ? <Loading /> : <VTable label="Active alerts" columns={columns} rows={data.items} rowKey={(a) => `${a.reason}/${a.clusterName}/${a.gpuNodeName}/${a.gpuUuid || ''}`} empty="No active alert." />}
    </>
  );
}

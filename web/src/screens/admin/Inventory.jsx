// Inventory (admin): the nodes of each cluster with their shape, health, GPUs free and holder.
import { useState } from 'preact/hooks';
import { egs } from '../../api.js';
import { Link, path } from '../../router.jsx';
import { useLiveReload, useLoad } from '../../ui/hooks.js';
import { ErrorBox, Loading, Stat } from '../../ui/misc.jsx';
import { VTable } from '../../ui/table.jsx';
import { fmtTime } from '../../ui/format.js';

export function Inventory() {
  const { data, error, reload } = useLoad(() => egs.inventory(), []);
  const [cluster, setCluster] = useState('');
  useLiveReload(reload, (e) => ['Node', 'Cluster', 'GPR'].includes(e.involvedObject && e.involvedObject.kind));
  if (error) return <ErrorBox error={error} />;
  if (!data) return <Loading />;
  const clusters = [...new Set(data.items.map((n) => n.clusterName))].sort();
  const rows = data.items.filter((n) => !cluster || n.clusterName === cluster);
  const columns = [
    { key: 'clusterName', label: 'Cluster' },
    { key: 'gpuNodeName', label: 'Node' },
    { key: 'gpuShape', label: 'GPU shape' },
    { key: 'instanceType', label: 'Instance' },
    { key: 'gpus', label: 'GPUs free / total', render: (n) => `${n.availableGPUs} / ${n.gpuCount}` },
    { key: 'nodeHealth', label: 'Health' },
    { key: 'gpuNodeStatus', label: 'State' },
    { key: 'alloc', label: 'Held by', render: (n) => (n.allocation || []).map((a) => a.sliceName || a.gprId || a).join(', ') || '—' },
    { key: 'lastHeartbeat', label: 'Last heartbeat', render: (n) => fmtTime(n.lastHeartbeat) },
  ];
  return (
    <>
      <h1>Inventory</h1>
      <div class="stats">
        <Stat label="clusters" value={clusters.length} />
        <Stat label="nodes" value={rows.length} />
        <Stat label="GPUs" value={rows.reduce((s, n) => s + n.gpuCount, 0)} />
        <Stat label="GPUs free" value={rows.reduce((s, n) => s + n.availableGPUs, 0)} />
      </div>
      <div class="toolbar">
        <div class="field inline">
          <label for="inv-cluster">Cluster</label>
          <select id="inv-cluster" value={cluster} onChange={(e) => setCluster(e.currentTarget.value)}>
            <option value="">All clusters</option>
            {clusters.map((c) => (
              <option value={c}>{c}</option>
            ))}
          </select>
        </div>
        <Link href={path('admin', 'schedule', cluster)}>Schedule view</Link>
      </div>
      <VTable label="Nodes" columns={columns} rows={rows} rowKey={(n) => n.clusterName + '/' + n.gpuNodeName} />
    </>
  );
}

// View Slice Workspace (user guide): the caller's slices with their clusters and namespaces, the
// kubeconfig of each cluster; admins create slices (namespaces and users) and edit them.
import { useState } from 'preact/hooks';
import { egs } from '../api.js';
import { Link, path } from '../router.jsx';
import { useLiveReload, useLoad } from '../ui/hooks.js';
import { Card, ErrorBox, Loading, download } from '../ui/misc.jsx';
import { useMe } from '../ui/me.js';
import { SliceCreate, SliceEdit } from './SliceForm.jsx';

function Kubeconfig({ ws, cluster }) {
  const [err, setErr] = useState(null);
  const get = async () => {
    setErr(null);
    try {
      const d = await egs.kubeconfig(ws, cluster);
      download(`${ws}-${cluster}.kubeconfig.yaml`, d.kubeConfig);
    } catch (e) {
      setErr(e);
    }
  };
  return (
    <>
      <button type="button" class="small" onClick={get} aria-label={`Download the kubeconfig of ${ws} on ${cluster}`}>
        Kubeconfig {cluster}
      </button>
      <ErrorBox error={err} />
    </>
  );
}

export function Slices({ slice }) {
  const me = useMe();
  const { data, error, reload } = useLoad(() => egs.workspaceList(), []);
  const [editing, setEditing] = useState(null);
  useLiveReload(reload, (e) => e.involvedObject && e.involvedObject.kind === 'Workspace');
  if (error) return <ErrorBox error={error} />;
  if (!data) return <Loading />;
  const list = slice ? data.workspaces.filter((w) => w.name === slice) : data.workspaces;
  return (
    <>
      <h1>Slices</h1>
      {me.isAdmin && <SliceCreate done={reload} />}
      {list.length === 0 && <p class="muted">No slice workspace yet.</p>}
      <div class="grid2">
        {list.map((w) => (
          <Card title={w.name} id={'slice-' + w.name}>
            {w.sliceDescription && <p>{w.sliceDescription}</p>}
            <dl class="kv">
              <dt>Clusters</dt>
              <dd>{w.clusters.join(', ') || '—'}</dd>
              <dt>Namespaces</dt>
              <dd>{w.namespaces.map((n) => n.namespace).join(', ') || '—'}</dd>
            </dl>
            <div class="actions">
              <Link href={path('gprs', w.name)}>GPU requests</Link>
              <Link href={path('workloads', w.name)}>AI workloads</Link>
              {me.canWrite && w.clusters.map((c) => <Kubeconfig ws={w.name} cluster={c} />)}
              {me.isAdmin && (
                <button type="button" class="small" onClick={() => setEditing(editing === w.name ? null : w.name)}>
                  Edit
                </button>
              )}
            </div>
            {editing === w.name && (
              <SliceEdit
                ws={w}
                done={() => {
                  setEditing(null);
                  reload();
                }}
              />
            )}
          </Card>
        ))}
      </div>
    </>
  );
}

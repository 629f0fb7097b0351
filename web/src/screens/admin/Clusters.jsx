// Clusters (admin): the registered clusters and their agents; register one (its agent token is
// shown once) or change its API server URL.
import { useState } from 'preact/hooks';
import { egs } from '../../api.js';
import { useLiveReload, useLoad } from '../../ui/hooks.js';
import { Card, ErrorBox, Loading, Secret } from '../../ui/misc.jsx';
import { Field, Form, useForm } from '../../ui/form.jsx';
import { fmtTime } from '../../ui/format.js';

export function Clusters() {
  const { data, error, reload } = useLoad(() => egs.clusters(), []);
  const [token, setToken] = useState(null);
  const reg = useForm({ clusterName: '', apiServer: '', projectName: '' });
  const upd = useForm({ clusterName: '', apiServer: '' });
  useLiveReload(reload, (e) => e.involvedObject && e.involvedObject.kind === 'Cluster');
  return (
    <>
      <h1>Clusters</h1>
      <ErrorBox error={error} />
      {!data ? (
        <Loading />
      ) : (
        <div class="scroll-x" tabIndex={0} role="region" aria-label="Clusters">
          <table>
            <thead>
              <tr>
                <th scope="col">Cluster</th>
                <th scope="col">Project</th>
                <th scope="col">API server</th>
                <th scope="col">Agent</th>
                <th scope="col">Nodes</th>
                <th scope="col">GPUs</th>
              </tr>
            </thead>
            <tbody>
              {data.items.map((c) => (
                <tr>
                  <td>{c.clusterName}</td>
                  <td>{c.projectName}</td>
                  <td>{c.apiServer || '—'}</td>
                  <td>{c.agentConnected ? 'connected' : 'not connected'} · {fmtTime(c.lastSeen)}</td>
                  <td>{c.nodes}</td>
                  <td>{c.gpus}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <div class="grid2">
        <Card title="Register a cluster" id="cl-reg">
          <Form
            form={reg}
            label="Register a cluster"
            onSubmit={async (v) => {
              const spec = { clusterName: v.clusterName };
              if (v.apiServer) spec.apiServer = v.apiServer;
              if (v.projectName) spec.projectName = v.projectName;
              const d = await egs.clusterRegister(spec);
              setToken({ name: v.clusterName, token: d.agentToken });
              reg.reset();
              reload();
            }}
          >
            <Field name="clusterName" label="Cluster name" required />
            <Field name="apiServer" label="Kubernetes API server URL" />
            <Field name="projectName" label="Project (optional)" />
            <button type="submit" disabled={reg.busy}>
              Register
            </button>
          </Form>
          {token && <Secret label={`The agent token of ${token.name}: give it to its egs-agent (--token-file).`} value={token.token} />}
        </Card>
        <Card title="Change a cluster's API server" id="cl-upd">
          <Form
            form={upd}
            label="Change a cluster"
            onSubmit={async (v) => {
              await egs.clusterUpdate({ clusterName: v.clusterName, apiServer: v.apiServer });
              upd.reset();
              reload();
            }}
          >
            <Field name="clusterName" label="Cluster name" />
            <Field name="apiServer" label="API server URL" />
            <button type="submit" disabled={upd.busy}>
              Save
            </button>
          </Form>
        </Card>
      </div>
    </>
  );
}

// API keys (admin): list, create (the key is shown once: it is the user's access token to the
// portal), delete.
import { useState } from 'preact/hooks';
import { egs } from '../../api.js';
import { useLoad } from '../../ui/hooks.js';
import { ErrorBox, Loading, Secret } from '../../ui/misc.jsx';
import { VTable } from '../../ui/table.jsx';
import { Field, Form, useForm } from '../../ui/form.jsx';
import { fmtTime } from '../../ui/format.js';

export function ApiKeys() {
  const { data, error, reload } = useLoad(() => egs.apiKeys(), []);
  const [made, setMade] = useState(null);
  const [err, setErr] = useState(null);
  const form = useForm({ name: '', userName: '', role: 'Owner', workspaceName: '', projectName: '', validity: '90d', description: '' });
  const columns = [
    { key: 'name', label: 'Name' },
    { key: 'userName', label: 'User', render: (k) => k.userName || '—' },
    { key: 'role', label: 'Role' },
    { key: 'scope', label: 'Scope', render: (k) => k.workspaceName || k.projectName || k.clusterName || 'everything' },
    { key: 'validUntil', label: 'Valid until', render: (k) => fmtTime(k.validUntil) },
    { key: 'del', label: 'Delete', render: (k) => (
      <button
        type="button"
        class="small danger"
        aria-label={`Delete key ${k.name}`}
        onClick={async () => {
          setErr(null);
          try {
            await egs.apiKeyDelete(k.keyId);
            reload();
          } catch (e) {
            setErr(e);
          }
        }}
      >
        Delete
      </button>
    ) },
  ];
  return (
    <>
      <h1>API Keys</h1>
      <ErrorBox error={error || err} />
      <Form
        form={form}
        label="Create an API key"
        class="panel"
        onSubmit={async (v) => {
          const spec = { name: v.name, role: v.role };
          for (const k of ['userName', 'workspaceName', 'projectName', 'validity', 'description']) if (v[k]) spec[k] = v[k];
          const d = await egs.apiKeyCreate(spec);
          setMade({ name: v.name, key: d.apiKey || d.key });
          form.reset();
          reload();
        }}
      >
        <h2>Create an API key</h2>
        <div class="cols">
          <Field name="name" label="Key name" required />
          <Field name="userName" label="User name" />
          <Field name="role" label="Role" type="select" options={['Owner', 'Viewer', 'Admin']} />
          <Field name="workspaceName" label="Slice (optional)" />
          <Field name="projectName" label="Project (optional)" />
          <Field name="validity" label="Valid for" hint="90d, or a date like 2027-01-31" />
          <Field name="description" label="Description" />
        </div>
        <button type="submit" disabled={form.busy}>
          Create key
        </button>
      </Form>
      {made && <Secret label={`API key ${made.name}: send it to its user, who signs in to the portal with it.`} value={made.key} />}
      {!data ? <Loading /> : <VTable label="API keys" columns={columns} rows={data.items} rowKey={(k) => k.keyId} />}
    </>
  );
}

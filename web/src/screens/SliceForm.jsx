// The admin's slice forms: create a slice workspace with clusters, namespaces and a user; edit one
// (add or remove namespaces, clusters and users).
import { useState } from 'preact/hooks';
import { egs } from '../api.js';
import { useLoad } from '../ui/hooks.js';
import { Field, Form, names, useForm } from '../ui/form.jsx';

export function SliceCreate({ done }) {
  const [open, setOpen] = useState(false);
  const clusters = useLoad(() => egs.clusters(), []);
  const form = useForm({ workspaceName: '', clusters: '', namespaces: '', username: '', email: '', projectName: '', description: '' });
  const all = ((clusters.data && clusters.data.items) || []).map((c) => c.clusterName);
  const create = async (v) => {
    const spec = { workspaceName: v.workspaceName, clusters: names(v.clusters), namespaces: names(v.namespaces) };
    for (const k of ['username', 'email', 'projectName', 'description']) if (v[k]) spec[k] = v[k];
    await egs.workspaceCreate(spec);
    form.reset();
    setOpen(false);
    done();
  };
  if (!open)
    return (
      <button type="button" onClick={() => setOpen(true)}>
        Create slice
      </button>
    );
  return (
    <Form form={form} onSubmit={create} label="Create slice" class="panel">
      <h2>Create slice</h2>
      <div class="cols">
        <Field name="workspaceName" label="Slice name" required />
        <Field name="clusters" label="Clusters" hint={all.length ? 'comma separated: ' + all.join(', ') : 'comma separated'} />
        <Field name="namespaces" label="Namespaces" hint="comma separated" />
        <Field name="username" label="User name" />
        <Field name="email" label="User email" type="email" />
        <Field name="projectName" label="Project (optional)" />
        <Field name="description" label="Description" />
      </div>
      <div class="row">
        <button type="submit" disabled={form.busy}>
          Create
        </button>
        <button type="button" class="ghost" onClick={() => setOpen(false)}>
          Cancel
        </button>
      </div>
    </Form>
  );
}

export function SliceEdit({ ws, done }) {
  const form = useForm({ addNamespaces: '', removeNamespaces: '', addClusters: '', removeClusters: '', addUser: '', addEmail: '', removeUsers: '', description: ws.sliceDescription || '' });
  const save = async (v) => {
    const c = { workspaceName: ws.name };
    for (const k of ['addNamespaces', 'removeNamespaces', 'addClusters', 'removeClusters', 'removeUsers']) if (v[k]) c[k] = names(v[k]);
    if (v.addUser) c.addUsers = [{ username: v.addUser, email: v.addEmail || undefined }];
    if (v.description !== (ws.sliceDescription || '')) c.description = v.description;
    try {
      await egs.workspaceUpdate(c);
    } catch (e) {
      if (e.field === 'addUsers') e.field = 'addUser';
      throw e;
    }
    done();
  };
  return (
    <Form form={form} onSubmit={save} label={`Edit ${ws.name}`} class="panel">
      <div class="cols">
        <Field name="addNamespaces" label="Add namespaces" />
        <Field name="removeNamespaces" label="Remove namespaces" />
        <Field name="addClusters" label="Add clusters" />
        <Field name="removeClusters" label="Remove clusters" />
        <Field name="addUser" label="Add user" />
        <Field name="addEmail" label="Their email" type="email" />
        <Field name="removeUsers" label="Remove users" />
        <Field name="description" label="Description" />
      </div>
      <div class="row">
        <button type="submit" disabled={form.busy}>
          Save
        </button>
        <button type="button" class="ghost" onClick={done}>
          Cancel
        </button>
      </div>
    </Form>
  );
}

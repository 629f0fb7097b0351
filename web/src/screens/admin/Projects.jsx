// Projects (admin): the tenant boundary; list and create.
import { egs } from '../../api.js';
import { useLoad } from '../../ui/hooks.js';
import { ErrorBox, Loading } from '../../ui/misc.jsx';
import { Field, Form, useForm } from '../../ui/form.jsx';

export function Projects() {
  const { data, error, reload } = useLoad(() => egs.projects(), []);
  const form = useForm({ projectName: '' });
  return (
    <>
      <h1>Projects</h1>
      <ErrorBox error={error} />
      {!data ? (
        <Loading />
      ) : (
        <ul class="list">
          {data.items.map((p) => (
            <li>{p.projectName}</li>
          ))}
        </ul>
      )}
      <Form
        form={form}
        label="Create a project"
        class="panel"
        onSubmit={async (v) => {
          await egs.projectCreate(v.projectName);
          form.reset();
          reload();
        }}
      >
        <Field name="projectName" label="New project name" />
        <button type="submit" disabled={form.busy}>
          Create project
        </button>
      </Form>
    </>
  );
}

// Login to the User Portal (user guide): the access token from the admin is an EGS API key.
import { signIn, signOutReason } from '../api.js';
import { Field, Form, useForm } from '../ui/form.jsx';

export function SignIn() {
  const form = useForm({ apiKey: '' });
  return (
    <main class="signin" id="main">
      <h1>EGS portal</h1>
      <p>Sign in with the access token (API key) your EGS admin gave you.</p>
      {signOutReason && <p class="notice" role="status">{signOutReason}</p>}
      <Form form={form} label="Sign in" onSubmit={(v) => signIn(v.apiKey)}>
        <Field name="apiKey" label="API key" type="password" autoComplete="off" required />
        <button type="submit" disabled={form.busy}>
          Sign in
        </button>
      </Form>
      <p class="muted">The key is kept in this tab's memory only; the session ends with the tab.</p>
    </main>
  );
}

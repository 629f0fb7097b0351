// Small shared pieces: the error box, the loading line, cards, status badges, copy-once secrets.
import { statusOf } from './format.js';

export function ErrorBox({ error }) {
  if (!error) return null;
  return (
    <p class="error" role="alert">
      {error.message}
      {error.key ? ` (${error.key})` : ''}
    </p>
  );
}

export function Loading({ what = 'Loading' }) {
  return (
    <p class="muted" role="status">
      {what}…
    </p>
  );
}

export function Status({ gpr, value }) {
  const s = value || statusOf(gpr);
  return <span class={'badge s-' + String(s).toLowerCase()}>{s}</span>;
}

export function Card({ title, children, id }) {
  return (
    <section class="card" aria-labelledby={id}>
      <h2 id={id}>{title}</h2>
      {children}
    </section>
  );
}

export function Stat({ label, value }) {
  return (
    <div class="stat">
      <span class="stat-v">{value}</span>
      <span class="stat-l">{label}</span>
    </div>
  );
}

/** A secret shown once (a new API key, an agent token), with its purpose. */
export function Secret({ label, value }) {
  return (
    <div class="secret" role="status">
      <p>{label} It is shown only now:</p>
      <code data-secret>{value}</code>
    </div>
  );
}

/** Saves text as a file (the kubeconfig download). */
export function download(name, text, type = 'application/yaml') {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

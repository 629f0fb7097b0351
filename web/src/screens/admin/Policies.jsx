// Policies (admin): a slice's hard limits and soft limits (over a soft one a GPR waits for
// approval), and the global policy (docs/policies.md).
import { useEffect, useState } from 'preact/hooks';
import { egs } from '../../api.js';
import { useLoad } from '../../ui/hooks.js';
import { Card, ErrorBox } from '../../ui/misc.jsx';
import { Field, Form, names, useForm } from '../../ui/form.jsx';

const NUMS = ['maxGPRs', 'maxGPUPerGpr', 'maxMemoryPerGpr', 'concurrentGpuQuota', 'maxNodesPerGpr'];
const BLANK = { maxGPRs: '', maxExitDurationPerGPR: '', priorityMin: '', priorityMax: '', gpuShapes: '', maxGPUPerGpr: '', maxMemoryPerGpr: '', concurrentGpuQuota: '', maxNodesPerGpr: '', softLimits: '' };

function toForm(p) {
  const v = { ...BLANK };
  if (!p) return v;
  for (const k of NUMS) if (p[k] !== undefined && p[k] !== null) v[k] = String(p[k]);
  if (p.maxExitDurationPerGPR) v.maxExitDurationPerGPR = p.maxExitDurationPerGPR;
  if (p.priorityRange) {
    v.priorityMin = String(p.priorityRange.min);
    v.priorityMax = String(p.priorityRange.max);
  }
  if (p.gpuShapes) v.gpuShapes = p.gpuShapes.join(', ');
  if (p.softLimits) v.softLimits = JSON.stringify(p.softLimits, null, 1);
  return v;
}

function toBody(v) {
  const b = {};
  for (const k of NUMS) if (v[k] !== '') b[k] = Number(v[k]);
  if (v.maxExitDurationPerGPR) b.maxExitDurationPerGPR = v.maxExitDurationPerGPR;
  if (v.priorityMin || v.priorityMax) b.priorityRange = { min: Number(v.priorityMin || 1), max: Number(v.priorityMax || 1000) };
  if (v.gpuShapes) b.gpuShapes = names(v.gpuShapes);
  if (v.softLimits.trim()) {
    try {
      b.softLimits = JSON.parse(v.softLimits);
    } catch {
      throw Object.assign(new Error('softLimits must be a JSON object, e.g. {"maxGPRs": 2}'), { field: 'softLimits' });
    }
  }
  return b;
}

function mapField(e) {
  if (e.field && e.field.startsWith('softLimits')) e.field = 'softLimits';
  else if (e.field && e.field.startsWith('priorityRange')) e.field = 'priorityMin';
  return e;
}

function PolicyForm({ initial, onSave, label, global }) {
  const form = useForm(toForm(initial));
  useEffect(() => form.reset(toForm(initial)), [initial]);
  return (
    <Form
      form={form}
      label={label}
      onSubmit={async (v) => {
        try {
          await onSave(toBody(v));
        } catch (e) {
          throw mapField(e);
        }
      }}
    >
      <div class="cols">
        {!global && <Field name="maxGPRs" label="Max GPRs" type="number" />}
        {!global && <Field name="maxExitDurationPerGPR" label="Max duration per GPR" hint="e.g. 24h" />}
        {!global && <Field name="priorityMin" label="Lowest priority" type="number" />}
        {!global && <Field name="priorityMax" label="Highest priority" type="number" />}
        {!global && <Field name="gpuShapes" label="GPU shapes allowed" hint="comma separated; empty: all" />}
        {!global && <Field name="maxGPUPerGpr" label="Max GPUs per GPR" type="number" />}
        {!global && <Field name="maxMemoryPerGpr" label="Max GPU memory per GPR (GB)" type="number" />}
        {!global && <Field name="concurrentGpuQuota" label="Concurrent GPU quota" type="number" />}
        <Field name="maxNodesPerGpr" label="Max nodes per GPR" type="number" />
      </div>
      {!global && <Field name="softLimits" label="Soft limits (JSON: the same members)" type="textarea" hint='e.g. {"maxGPUPerGpr": 8}' />}
      <button type="submit" disabled={form.busy}>
        Save
      </button>
    </Form>
  );
}

export function Policies() {
  const slices = useLoad(() => egs.workspaceList(), []);
  const [ws, setWs] = useState('');
  const names_ = slices.data ? slices.data.workspaces.map((w) => w.name) : [];
  useEffect(() => {
    if (!ws && names_.length) setWs(names_[0]);
  }, [names_.join()]);
  const pol = useLoad(() => (ws ? egs.policyGet(ws) : Promise.resolve(null)), [ws]);
  const glob = useLoad(() => egs.policyGlobal(), []);
  const [msg, setMsg] = useState('');
  return (
    <>
      <h1>Policies</h1>
      <p role="status" class="muted">
        {msg}
      </p>
      <Card title="Slice policy" id="pol-ws">
        <div class="field inline">
          <label for="pol-slice">Slice</label>
          <select id="pol-slice" value={ws} onChange={(e) => setWs(e.currentTarget.value)}>
            {names_.map((n) => (
              <option value={n}>{n}</option>
            ))}
          </select>
        </div>
        <ErrorBox error={pol.error} />
        {ws && pol.data && (
          <PolicyForm
            label={`Policy of ${ws}`}
            initial={pol.data}
            onSave={async (b) => {
              await egs.policySet({ workspaceName: ws, ...b });
              setMsg(`Saved the policy of ${ws}.`);
              pol.reload();
            }}
          />
        )}
      </Card>
      <Card title="Global policy" id="pol-global">
        <ErrorBox error={glob.error} />
        {glob.data && (
          <PolicyForm
            global
            label="Global policy"
            initial={glob.data}
            onSave={async (b) => {
              await egs.policyGlobalSet(b);
              setMsg('Saved the global policy.');
              glob.reload();
            }}
          />
        )}
      </Card>
    </>
  );
}

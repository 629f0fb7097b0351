// Create GPR (user guide): name and number of GPU nodes, GPU shape, priority, reserve-for duration;
// "Get Wait Time" shows every cluster and shape that could hold the request with its estimated
// start; the user picks one and clicks "Request GPUs".
import { useState } from 'preact/hooks';
import { egs } from '../api.js';
import { navigate, path } from '../router.jsx';
import { useLoad } from '../ui/hooks.js';
import { Field, Form, useForm } from '../ui/form.jsx';
import { fmtTime } from '../ui/format.js';

function request(slice, v, pick) {
  const r = {
    gprName: v.gprName,
    sliceName: slice,
    numberOfGPUNodes: Number(v.numberOfGPUNodes),
    numberOfGPUs: Number(v.numberOfGPUs),
    priority: Number(v.priority),
    exitDuration: v.exitDuration,
  };
  if (v.gpuShape) r.gpuShape = v.gpuShape;
  if (v.memoryPerGPU) r.memoryPerGPU = Number(v.memoryPerGPU);
  if (v.enableEviction) r.enableEviction = true;
  if (v.requeueOnFailure) r.requeueOnFailure = true;
  if (pick) {
    r.clusterName = pick.clusterName;
    r.gpuShape = pick.gpuShape;
    r.instanceType = pick.instanceType;
  }
  return r;
}

export function CreateGpr({ slice }) {
  const inv = useLoad(() => egs.inventoryWorkspace(slice).catch(() => egs.inventory()), [slice]);
  const shapes = [...new Set(((inv.data && inv.data.items) || []).map((n) => n.gpuShape))].sort();
  const form = useForm({
    gprName: '',
    numberOfGPUNodes: '1',
    numberOfGPUs: '1',
    gpuShape: '',
    priority: '101',
    exitDuration: '1h',
    memoryPerGPU: '',
    enableEviction: false,
    requeueOnFailure: false,
  });
  const [options, setOptions] = useState(null);
  const [pick, setPick] = useState(null);
  const waittime = () =>
    form.submit(async (v) => {
      const d = await egs.gprWaittime(request(slice, v, null));
      setOptions(d.items);
      setPick(d.items.find((i) => i.available !== false) || null);
    });
  const create = async (v) => {
    await egs.gprCreate(request(slice, v, pick));
    navigate(path('gprs', slice));
  };
  return (
    <>
      <h1>Create GPU Request</h1>
      <p class="muted">Slice {slice}</p>
      <Form form={form} onSubmit={create} label="Create GPU request">
        <div class="cols">
          <Field name="gprName" label="GPR name" required />
          <Field name="numberOfGPUNodes" label="Number of GPU nodes" type="number" min="1" />
          <Field name="numberOfGPUs" label="GPUs per node" type="number" min="0.01" step="any" />
          <Field name="gpuShape" label="GPU shape" type="select" options={[{ value: '', label: 'Any shape' }, ...shapes]} />
          <Field name="priority" label="Priority" type="number" min="1" max="1000" hint="1-100 low, 101-200 medium, 201-300 high" />
          <Field name="exitDuration" label="Reserve for" hint="a duration: 6h, 90m, 0d6h0m" />
          <Field name="memoryPerGPU" label="Memory per GPU (GB, optional)" type="number" min="0" />
        </div>
        <Field name="enableEviction" label="May be evicted by a high-priority request" type="checkbox" />
        <Field name="requeueOnFailure" label="Requeue when evicted or failed" type="checkbox" />
        <div class="row">
          <button type="button" onClick={waittime} disabled={form.busy}>
            Get Wait Time
          </button>
        </div>
        {options && (
          <fieldset class="avail">
            <legend>Available GPUs</legend>
            {options.length === 0 && <p class="muted">No cluster of this slice can hold this request.</p>}
            <div class="scroll-x" tabIndex={0} role="region" aria-label="Available GPUs">
              <table>
                <thead>
                  <tr>
                    <th scope="col">Pick</th>
                    <th scope="col">Cluster</th>
                    <th scope="col">GPU shape</th>
                    <th scope="col">Instance type</th>
                    <th scope="col">Free / total nodes</th>
                    <th scope="col">Estimated start</th>
                    <th scope="col">Wait</th>
                  </tr>
                </thead>
                <tbody>
                  {options.map((o, i) => {
                    const id = 'opt-' + i;
                    return (
                      <tr class={pick === o ? 'picked' : ''}>
                        <td>
                          <input type="radio" name="pick" id={id} checked={pick === o} disabled={o.available === false} onChange={() => setPick(o)} aria-label={`${o.clusterName} ${o.gpuShape}, start ${fmtTime(o.estimatedStartTime)}`} />
                        </td>
                        <td>
                          <label for={id}>{o.clusterName}</label>
                        </td>
                        <td>{o.gpuShape}</td>
                        <td>{o.instanceType}</td>
                        <td>
                          {o.freeNodes} / {o.totalNodes}
                        </td>
                        <td>{o.available === false ? 'cannot hold it' : fmtTime(o.estimatedStartTime)}</td>
                        <td>{o.estimatedWaitTime}</td>
                      </tr>
                    );
                  })}
                </tbody>
              </table>
            </div>
          </fieldset>
        )}
        <div class="row">
          <button type="submit" disabled={form.busy || !pick}>
            Request GPUs
          </button>
          <button type="button" class="ghost" onClick={() => navigate(path('gprs', slice))}>
            Cancel
          </button>
        </div>
      </Form>
    </>
  );
}

// GPU Provision Requests (user guide): the GPRs of a slice with their state, and the actions of
// "Manage GPR Queue": edit or delete a queued one, release early, extend; admins also evict.
import { useState } from 'preact/hooks';
import { egs } from '../api.js';
import { Link, path } from '../router.jsx';
import { useLiveReload, useLoad } from '../ui/hooks.js';
import { ErrorBox, Loading, Status } from '../ui/misc.jsx';
import { VTable } from '../ui/table.jsx';
import { fmtTime, statusOf } from '../ui/format.js';
import { useMe } from '../ui/me.js';
import { Field, Form, useForm } from '../ui/form.jsx';
import { SlicePicker } from './SlicePicker.jsx';

const WAITING = ['Queued', 'Pending'];

function ActionForm({ act, done }) {
  const { gpr, kind } = act;
  const init = kind === 'edit' ? { gprName: gpr.gprName, priority: String(gpr.priority) } : kind === 'extend' ? { extendBy: '30m' } : { reason: '' };
  const form = useForm(init);
  const run = async (v) => {
    if (kind === 'edit') await egs.gprUpdate(gpr.gprId, { gprName: v.gprName, priority: Number(v.priority) });
    else if (kind === 'extend') await egs.gprExtend(gpr.gprId, v.extendBy);
    else await egs.gprEvict(gpr.gprId, v.reason);
    done(true);
  };
  const title = { edit: 'Edit', extend: 'Extend', evict: 'Evict' }[kind];
  return (
    <Form form={form} onSubmit={run} label={`${title} ${gpr.gprName}`} class="panel">
      <h2>
        {title} {gpr.gprName}
      </h2>
      {kind === 'edit' && (
        <>
          <Field name="gprName" label="Name" />
          <Field name="priority" label="Priority (1-1000)" type="number" min="1" max="1000" />
        </>
      )}
      {kind === 'extend' && <Field name="extendBy" label="Extend by" hint="a duration: 30m, 1h, 0d2h0m" />}
      {kind === 'evict' && <Field name="reason" label="Reason" />}
      <div class="row">
        <button type="submit" disabled={form.busy}>
          {title}
        </button>
        <button type="button" class="ghost" onClick={() => done(false)}>
          Cancel
        </button>
      </div>
    </Form>
  );
}

export function GpuRequests({ slice }) {
  const me = useMe();
  const { data, error, reload } = useLoad(() => (slice ? egs.gprList(slice) : Promise.resolve({ items: [] })), [slice]);
  const [act, setAct] = useState(null);
  const [actErr, setActErr] = useState(null);
  useLiveReload(reload, (e) => !!slice && e.workspace === slice);
  const oneShot = (fn) => async () => {
    setActErr(null);
    try {
      await fn();
      reload();
    } catch (e) {
      setActErr(e);
    }
  };
  const actions = (g) => {
    if (!me.canWrite) return null;
    const s = statusOf(g);
    return (
      <div class="actions">
        {WAITING.includes(s) && (
          <button type="button" class="small" onClick={() => setAct({ gpr: g, kind: 'edit' })}>
            Edit
          </button>
        )}
        {WAITING.includes(s) && (
          <button type="button" class="small danger" onClick={oneShot(() => egs.gprCancel(g.gprId))}>
            Delete
          </button>
        )}
        {s === 'Provisioned' && (
          <button type="button" class="small" onClick={oneShot(() => egs.gprRelease(g.gprId))} aria-label={`Release ${g.gprName} early`}>
            Release early
          </button>
        )}
        {s === 'Provisioned' && (
          <button type="button" class="small" onClick={() => setAct({ gpr: g, kind: 'extend' })}>
            Extend
          </button>
        )}
        {s === 'Provisioned' && me.isAdmin && (
          <button type="button" class="small danger" onClick={() => setAct({ gpr: g, kind: 'evict' })}>
            Evict
          </button>
        )}
      </div>
    );
  };
  const columns = [
    { key: 'gprName', label: 'Name', render: (g) => <Link href={path('gprs', g.sliceName, g.gprId)}>{g.gprName}</Link> },
    { key: 'gpus', label: 'GPUs', render: (g) => (g.gpuSharingMode === 'Shared' ? g.numberOfGPUs : g.numberOfGPUs * g.numberOfGPUNodes) },
    { key: 'numberOfGPUNodes', label: 'Nodes' },
    { key: 'priority', label: 'Priority' },
    { key: 'gpuShape', label: 'Shape' },
    { key: 'est', label: 'Estimated start', render: (g) => (WAITING.includes(statusOf(g)) ? fmtTime(g.estimatedStartTime) : fmtTime(g.status.startTimestamp)) },
    { key: 'until', label: 'Reserved until', render: (g) => fmtTime(g.status.exitTimestamp) },
    { key: 'status', label: 'Status', render: (g) => <Status gpr={g} /> },
    { key: 'actions', label: 'Actions', render: actions },
  ];
  return (
    <>
      <h1>GPU Requests</h1>
      <div class="toolbar">
        <SlicePicker base="gprs" slice={slice} />
        {slice && me.canWrite && (
          <Link class="button" href={path('gprs', slice, 'new')}>
            Create GPU Request
          </Link>
        )}
      </div>
      <ErrorBox error={error || actErr} />
      {act && (
        <ActionForm
          act={act}
          done={(changed) => {
            setAct(null);
            if (changed) reload();
          }}
        />
      )}
      {!data ? (
        <Loading />
      ) : (
        <VTable label={`GPU requests of ${slice || 'no slice'}`} columns={columns} rows={data.items} rowKey={(g) => g.gprId} rowClass={(g) => 'gpr-' + statusOf(g).toLowerCase()} empty="No GPU request in this slice." />
      )}
    </>
  );
}

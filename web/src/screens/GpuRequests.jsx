// GPU Provision Requests (user guide): the GPRs of a slice with their state, and the actions of
// "Manage GPR Queue": edit or delete a queued one, release early, extend; admins also evict.
// Paged from the server, oldest first (`limit`, `continue`): the first page at once, the next ones
// as the table scrolls to its end, so a slice of 10,000 GPRs shows its first rows without fetching
// all of them.  A change (an action here, a live event of the slice) reloads the rows loaded so far.
import { useEffect, useRef, useState } from 'preact/hooks';
import { egs } from '../api.js';
import { Link, path } from '../router.jsx';
import { useLiveReload } from '../ui/hooks.js';
import { ErrorBox, Loading, Status } from '../ui/misc.jsx';
import { VTable } from '../ui/table.jsx';
import { fmtTime, statusOf } from '../ui/format.js';
import { useMe } from '../ui/me.js';
import { Field, Form, useForm } from '../ui/form.jsx';
import { SlicePicker } from './SlicePicker.jsx';

const WAITING = ['Queued', 'Pending'];
const PAGE = 200;
const MAX_PAGE = 1000; // the server's largest limit

/**
 * The GPRs of slice, paged: {rows (null until the first page), error, more (the next page; no-op
 * while one is loading or after the last), reload (the rows loaded so far again, at least a page),
 * hasMore}.
 */
function usePagedGprs(slice) {
  const [rows, setRows] = useState(null);
  const [error, setError] = useState(null);
  const next = useRef(undefined); // undefined: first page; null: no more
  const busy = useRef(false);
  const gen = useRef(0);
  const loaded = useRef(0);
  loaded.current = rows ? rows.length : 0;
  // Fetches pages from token until want rows or the end; null when superseded (slice changed).
  const fetchRows = async (my, token, want) => {
    let items = [];
    do {
      const d = await egs.gprPage(slice, { limit: Math.min(MAX_PAGE, want - items.length), continue: token });
      if (my !== gen.current) return null;
      items = items.concat(d.items);
      token = d.continue;
    } while (token && items.length < want);
    return { items, token };
  };
  const run = async (my, token, want, apply) => {
    busy.current = true;
    try {
      const got = await fetchRows(my, token, want);
      if (!got) return;
      next.current = got.token;
      setRows((r) => apply(r || [], got.items));
      setError(null);
    } catch (e) {
      if (my === gen.current) setError(e);
    } finally {
      if (my === gen.current) busy.current = false;
    }
  };
  const more = () => {
    if (!slice || busy.current || next.current === null) return;
    run(gen.current, next.current, PAGE, (r, items) => [...r, ...items]);
  };
  const reload = () => {
    if (!slice) return;
    run(++gen.current, undefined, Math.max(PAGE, loaded.current), (_, items) => items);
  };
  useEffect(() => {
    gen.current++;
    next.current = undefined;
    busy.current = false;
    setError(null);
    setRows(slice ? null : []);
    if (slice) run(gen.current, undefined, PAGE, (_, items) => items);
  }, [slice]);
  return { rows, error, more, reload, hasMore: !!next.current };
}

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
  const { rows, error, more, reload, hasMore } = usePagedGprs(slice);
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
      {!rows ? (
        <Loading />
      ) : (
        <>
          {slice && (
            <p class="muted" role="status">
              {rows.length} GPU requests shown{hasMore ? ', more load as you scroll' : ''}
            </p>
          )}
          <VTable label={`GPU requests of ${slice || 'no slice'}`} columns={columns} rows={rows} rowKey={(g) => g.gprId} onEnd={more} rowClass={(g) => 'gpr-' + statusOf(g).toLowerCase()} empty="No GPU request in this slice." />
        </>
      )}
    </>
  );
}

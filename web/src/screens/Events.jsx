// Alerts and Events (user guide): the events of the caller's slices, newest first, filtered on the
// server (type, reason, kind, slice, GPR, since), searched in what is loaded, paged from the server
// as the list scrolls (`continue`), with new events arriving live.
import { useEffect, useRef, useState } from 'preact/hooks';
import { egs } from '../api.js';
import { useLive } from '../ui/hooks.js';
import { ErrorBox } from '../ui/misc.jsx';
import { VTable } from '../ui/table.jsx';
import { fmtTime } from '../ui/format.js';

const EMPTY = { type: '', reason: '', kind: '', workspace: '', gprId: '', since: '' };
const PAGE = 200;

function matches(e, f) {
  return (!f.type || e.type === f.type) && (!f.reason || e.reason === f.reason) && (!f.kind || e.involvedObject.kind === f.kind) &&
    (!f.workspace || e.workspace === f.workspace) && (!f.gprId || e.involvedObject.name === f.gprId || (e.message || '').includes(f.gprId));
}

export function Events() {
  const [filter, setFilter] = useState(EMPTY);
  const [draft, setDraft] = useState(EMPTY);
  const [search, setSearch] = useState('');
  const [rows, setRows] = useState([]);
  const [error, setError] = useState(null);
  const next = useRef(undefined); // undefined: first page; null: no more
  const loading = useRef(false);
  const gen = useRef(0);
  const more = async () => {
    if (loading.current || next.current === null) return;
    loading.current = true;
    const my = gen.current;
    try {
      const d = await egs.events({ ...filter, limit: PAGE, continue: next.current });
      if (my !== gen.current) return;
      next.current = d.continue;
      setRows((r) => [...r, ...d.items]);
      setError(null);
    } catch (e) {
      setError(e);
      next.current = null;
    } finally {
      loading.current = false;
    }
  };
  useEffect(() => {
    gen.current++;
    next.current = undefined;
    loading.current = false;
    setRows([]);
    more();
  }, [filter]);
  useLive((e) => {
    if (matches(e, filter)) setRows((r) => [e, ...r.filter((x) => x.id !== e.id)]);
  });
  const q = search.trim().toLowerCase();
  const shown = q ? rows.filter((e) => `${e.reason} ${e.message} ${e.involvedObject.name} ${e.workspace || ''}`.toLowerCase().includes(q)) : rows;
  const input = (k, label, opts) => (
    <div class="field">
      <label for={'ev-' + k}>{label}</label>
      {opts ? (
        <select id={'ev-' + k} value={draft[k]} onChange={(e) => setDraft({ ...draft, [k]: e.currentTarget.value })}>
          {opts.map((o) => (
            <option value={o}>{o || 'any'}</option>
          ))}
        </select>
      ) : (
        <input id={'ev-' + k} value={draft[k]} onInput={(e) => setDraft({ ...draft, [k]: e.currentTarget.value })} />
      )}
    </div>
  );
  const columns = [
    { key: 'lastTimestamp', label: 'Time', render: (e) => fmtTime(e.lastTimestamp) },
    { key: 'type', label: 'Type' },
    { key: 'reason', label: 'Reason' },
    { key: 'object', label: 'Object', render: (e) => `${e.involvedObject.kind} ${e.involvedObject.name}` },
    { key: 'workspace', label: 'Slice', render: (e) => e.workspace || '—' },
    { key: 'message', label: 'Message', class: 'wide' },
    { key: 'count', label: 'Count' },
  ];
  return (
    <>
      <h1>Events</h1>
      <form
        class="filters"
        aria-label="Event filters"
        onSubmit={(e) => {
          e.preventDefault();
          setFilter({ ...draft });
        }}
      >
        {input('type', 'Type', ['', 'Normal', 'Warning'])}
        {input('kind', 'Object kind', ['', 'GPR', 'Node', 'Cluster', 'Workspace', 'GPUShape'])}
        {input('reason', 'Reason')}
        {input('workspace', 'Slice')}
        {input('gprId', 'GPR ID')}
        {input('since', 'Since (1h, or a time)')}
        <button type="submit">Apply</button>
      </form>
      <div class="field">
        <label for="ev-search">Search loaded events</label>
        <input id="ev-search" type="search" value={search} onInput={(e) => setSearch(e.currentTarget.value)} />
      </div>
      <ErrorBox error={error} />
      <p class="muted" role="status">
        {shown.length} events shown{next.current ? ', more load as you scroll' : ''}
      </p>
      <VTable label="Events" columns={columns} rows={shown} rowKey={(e) => e.id} onEnd={q ? undefined : more} rowClass={(e) => (e.type === 'Warning' ? 'warn' : '')} height={560} />
    </>
  );
}

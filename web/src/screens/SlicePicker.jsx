// Select a slice (workspace): the first step of most user-guide screens.
import { egs } from '../api.js';
import { navigate, path } from '../router.jsx';
import { useLoad } from '../ui/hooks.js';
import { useEffect } from 'preact/hooks';

/** A slice selector that navigates to base/<slice>; picks the first slice when none is chosen. */
export function SlicePicker({ base, slice, allowAll = false }) {
  const { data } = useLoad(() => egs.workspaceList(), []);
  const names = data ? data.workspaces.map((w) => w.name) : [];
  useEffect(() => {
    // Only while the address still names no slice: the user may have picked one meanwhile.
    if (!slice && !allowAll && names.length && location.pathname === path(base)) navigate(path(base, names[0]), { replace: true });
  }, [slice, names.join()]);
  return (
    <div class="field inline">
      <label for="slice-pick">Slice</label>
      <select id="slice-pick" value={slice || ''} onChange={(e) => navigate(path(base, e.currentTarget.value))}>
        {allowAll && <option value="">All slices</option>}
        {!allowAll && !slice && <option value="">—</option>}
        {names.map((n) => (
          <option value={n}>{n}</option>
        ))}
      </select>
    </div>
  );
}

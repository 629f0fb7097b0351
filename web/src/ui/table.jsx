// A virtualized table: a real <table> (headers, rows, cells for screen readers) in a scrolling
// region that renders only the rows in view plus a margin, so 10,000 rows stay responsive.
// Spacer rows keep the scroll height; onEnd asks for the next server page near the bottom.
import { useEffect, useRef, useState } from 'preact/hooks';

const ROW = 40; // px: every row has this height (CSS .vt td)
const OVERSCAN = 8;

/**
 * columns: [{key, label, render?(row) -> node, class?}]; rows: array; rowKey(row) -> key.
 * label: the accessible name of the table.  onEnd: called when the last rows come into view.
 */
export function VTable({ columns, rows, rowKey, label, onEnd, height = 480, empty = 'Nothing here yet.', rowClass }) {
  const box = useRef(null);
  const [top, setTop] = useState(0);
  const total = rows.length;
  const view = Math.min(height, Math.max(total, 1) * ROW + ROW + 2);
  const first = Math.max(0, Math.floor(top / ROW) - OVERSCAN);
  const count = Math.ceil(view / ROW) + 2 * OVERSCAN;
  const last = Math.min(total, first + count);
  useEffect(() => {
    if (onEnd && total && last >= total - 2) onEnd();
  }, [last, total]);
  return (
    <div
      class="vt"
      ref={box}
      tabIndex={0}
      role="region"
      aria-label={label}
      style={{ maxHeight: height + 'px' }}
      onScroll={(e) => setTop(e.currentTarget.scrollTop)}
    >
      <table aria-rowcount={total + 1}>
        <thead>
          <tr aria-rowindex={1}>
            {columns.map((c) => (
              <th scope="col" class={c.class}>
                {c.label}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {first > 0 && (
            <tr aria-hidden="true" class="spacer">
              <td colSpan={columns.length} style={{ height: first * ROW + 'px' }} />
            </tr>
          )}
          {rows.slice(first, last).map((row, i) => (
            <tr key={rowKey(row)} aria-rowindex={first + i + 2} class={rowClass ? rowClass(row) : undefined}>
              {columns.map((c) => (
                <td class={c.class}>{c.render ? c.render(row) : row[c.key] ?? '—'}</td>
              ))}
            </tr>
          ))}
          {last < total && (
            <tr aria-hidden="true" class="spacer">
              <td colSpan={columns.length} style={{ height: (total - last) * ROW + 'px' }} />
            </tr>
          )}
          {total === 0 && (
            <tr>
              <td colSpan={columns.length} class="empty">
                {empty}
              </td>
            </tr>
          )}
        </tbody>
      </table>
    </div>
  );
}

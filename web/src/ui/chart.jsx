// Charts in plain SVG (no chart library: these two shapes are all the portal draws).

const W = 640, H = 200, PAD = { l: 44, r: 10, t: 10, b: 24 };

function ticks(min, max) {
  if (min === max) return [min];
  return [min, (min + max) / 2, max];
}

/**
 * A line chart.  series: [{label, values: [number|null], class}], x: [label per point].
 * Each series gets its own scale when scale="each" (power, temperature and utilization share no unit).
 */
export function LineChart({ title, series, x, scale = 'shared', unit = '' }) {
  const n = x.length;
  const all = series.flatMap((s) => s.values.filter((v) => v !== null && v !== undefined));
  const gmin = Math.min(0, ...all), gmax = Math.max(1, ...all);
  const px = (i) => PAD.l + (n <= 1 ? 0 : (i * (W - PAD.l - PAD.r)) / (n - 1));
  const summary = series
    .map((s) => {
      const v = s.values.filter((a) => a !== null && a !== undefined);
      return v.length ? `${s.label}: last ${v[v.length - 1]}, max ${Math.max(...v)}` : `${s.label}: no data`;
    })
    .join('; ');
  return (
    <figure class="chart">
      <figcaption>{title}</figcaption>
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={`${title}. ${summary}`} preserveAspectRatio="none">
        <line class="axis" x1={PAD.l} y1={H - PAD.b} x2={W - PAD.r} y2={H - PAD.b} />
        {scale === 'shared' &&
          ticks(gmin, gmax).map((t) => {
            const y = H - PAD.b - ((t - gmin) / (gmax - gmin || 1)) * (H - PAD.t - PAD.b);
            return (
              <g>
                <line class="grid" x1={PAD.l} x2={W - PAD.r} y1={y} y2={y} />
                <text class="tick" x={PAD.l - 4} y={y + 4} text-anchor="end">
                  {Math.round(t)}
                  {unit}
                </text>
              </g>
            );
          })}
        {series.map((s) => {
          const v = s.values.filter((a) => a !== null && a !== undefined);
          const min = scale === 'shared' ? gmin : Math.min(0, ...v), max = scale === 'shared' ? gmax : Math.max(1, ...v);
          const pts = s.values
            .map((val, i) =>
              val === null || val === undefined
                ? null
                : `${px(i).toFixed(1)},${(H - PAD.b - ((val - min) / (max - min || 1)) * (H - PAD.t - PAD.b)).toFixed(1)}`,
            )
            .filter(Boolean)
            .join(' ');
          return <polyline class={'line ' + (s.class || '')} points={pts} />;
        })}
        {n > 0 && (
          <>
            <text class="tick" x={PAD.l} y={H - 6}>
              {x[0]}
            </text>
            <text class="tick" x={W - PAD.r} y={H - 6} text-anchor="end">
              {x[n - 1]}
            </text>
          </>
        )}
      </svg>
      <ul class="legend">
        {series.map((s) => (
          <li class={s.class}>{s.label}</li>
        ))}
      </ul>
    </figure>
  );
}

/** Grouped bars: groups [{label, values: [number]}], keys: [{label, class}]. */
export function BarChart({ title, groups, keys, unit = '' }) {
  const max = Math.max(1, ...groups.flatMap((g) => g.values));
  const gw = (W - PAD.l - PAD.r) / Math.max(1, groups.length);
  const bw = Math.max(2, (gw * 0.8) / keys.length);
  return (
    <figure class="chart">
      <figcaption>{title}</figcaption>
      <svg
        viewBox={`0 0 ${W} ${H}`}
        role="img"
        preserveAspectRatio="none"
        aria-label={`${title}. ` + groups.map((g) => `${g.label}: ${g.values.map((v, i) => `${keys[i].label} ${v}${unit}`).join(', ')}`).join('; ')}
      >
        <line class="axis" x1={PAD.l} y1={H - PAD.b} x2={W - PAD.r} y2={H - PAD.b} />
        <text class="tick" x={PAD.l - 4} y={PAD.t + 8} text-anchor="end">
          {Math.round(max)}
          {unit}
        </text>
        {groups.map((g, gi) =>
          g.values.map((v, ki) => {
            const h = (v / max) * (H - PAD.t - PAD.b);
            return <rect class={'bar ' + keys[ki].class} x={PAD.l + gi * gw + gw * 0.1 + ki * bw} y={H - PAD.b - h} width={bw - 1} height={h} />;
          }),
        )}
        {groups.length > 0 && (
          <>
            <text class="tick" x={PAD.l} y={H - 6}>
              {groups[0].label}
            </text>
            <text class="tick" x={W - PAD.r} y={H - 6} text-anchor="end">
              {groups[groups.length - 1].label}
            </text>
          </>
        )}
      </svg>
      <ul class="legend">
        {keys.map((k) => (
          <li class={k.class}>{k.label}</li>
        ))}
      </ul>
    </figure>
  );
}

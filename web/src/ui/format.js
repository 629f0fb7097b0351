// Formatting of API values for people: times, durations, numbers.

export function fmtTime(ts) {
  if (!ts) return '—';
  const d = new Date(ts);
  if (isNaN(d)) return String(ts);
  return d.toISOString().replace('T', ' ').slice(0, 16) + ' UTC';
}

export function fmtDuration(s) {
  if (s === null || s === undefined) return '—';
  if (typeof s === 'string') return s;
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
  return (d ? d + 'd ' : '') + (d || h ? h + 'h ' : '') + m + 'm';
}

export function fmtNum(n, digits = 1) {
  if (n === null || n === undefined || isNaN(n)) return '—';
  return Number(n).toFixed(digits).replace(/\.0+$/, '');
}

/** The priority band of the API (1-100 low, 101-200 medium, 201+ high). */
export function band(p) {
  return p > 200 ? 'high' : p > 100 ? 'medium' : 'low';
}

export function statusOf(gpr) {
  return (gpr.status && gpr.status.provisioningStatus) || gpr.provisioningStatus || '—';
}

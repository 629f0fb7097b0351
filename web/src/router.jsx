// A small history router: paths like /gprs/team-a are the portal's own (egsd answers index.html
// for them), so a reload or a shared link lands on the same screen.
import { useEffect, useState } from 'preact/hooks';

const subs = new Set();

export function navigate(path, { replace = false } = {}) {
  if (path === location.pathname + location.search) return;
  history[replace ? 'replaceState' : 'pushState'](null, '', path);
  for (const fn of subs) fn();
}

addEventListener('popstate', () => {
  for (const fn of subs) fn();
});

/** The current path split into segments, and the query parameters. */
export function useRoute() {
  const [, tick] = useState(0);
  useEffect(() => {
    const fn = () => tick((n) => n + 1);
    subs.add(fn);
    return () => subs.delete(fn);
  }, []);
  const parts = location.pathname.split('/').filter(Boolean).map(decodeURIComponent);
  return { parts, params: new URLSearchParams(location.search), path: location.pathname };
}

/** A link that navigates without a reload (keyboard: a real <a href>). */
export function Link({ href, children, ...rest }) {
  return (
    <a
      href={href}
      onClick={(e) => {
        if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
        e.preventDefault();
        navigate(href);
      }}
      {...rest}
    >
      {children}
    </a>
  );
}

/** Builds a portal path from segments (each encoded) and optional query parameters. */
export function path(...segs) {
  let params = null;
  if (segs.length && typeof segs[segs.length - 1] === 'object') params = segs.pop();
  let p = '/' + segs.filter((s) => s !== undefined && s !== '').map(encodeURIComponent).join('/');
  if (params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
    if (q.toString()) p += '?' + q;
  }
  return p;
}

// Data hooks: load a call's answer, reload it on live events.
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { watchEvents } from '../api.js';

/** Runs fn() (a promise) when deps change; {data, error, loading, reload}. */
export function useLoad(fn, deps) {
  const [state, set] = useState({ data: null, error: null, loading: true });
  const seq = useRef(0);
  const reload = useCallback(() => {
    const my = ++seq.current;
    set((s) => ({ ...s, loading: true }));
    return fn().then(
      (data) => my === seq.current && set({ data, error: null, loading: false }),
      (error) => my === seq.current && set({ data: null, error, loading: false }),
    );
  }, deps);
  useEffect(() => {
    reload();
  }, [reload]);
  return { ...state, reload };
}

// One event stream for the whole portal; screens subscribe to it.
const subs = new Set();
let stop = null;
let connected = false;
const stateSubs = new Set();

export function startLive() {
  if (stop) return;
  stop = watchEvents({}, (ev) => {
    for (const fn of subs) fn(ev);
  }, (on) => {
    connected = on;
    for (const fn of stateSubs) fn(on);
  });
}

export function stopLive() {
  if (stop) stop();
  stop = null;
}

/** Calls fn(event) for every event of the caller's scope as it is committed. */
export function useLive(fn) {
  const ref = useRef(fn);
  ref.current = fn;
  useEffect(() => {
    const h = (ev) => ref.current(ev);
    subs.add(h);
    return () => subs.delete(h);
  }, []);
}

/** Whether the event stream is connected. */
export function useLiveState() {
  const [on, set] = useState(connected);
  useEffect(() => {
    stateSubs.add(set);
    return () => stateSubs.delete(set);
  }, []);
  return on;
}

/**
 * Reloads when an event matching pred arrives: 150 ms after the last of a burst, and at most once a
 * second while events keep coming, so a busy cluster does not turn a list into a reload loop.
 */
export function useLiveReload(reload, pred = () => true) {
  const t = useRef(null);
  const last = useRef(0);
  useLive((ev) => {
    if (!pred(ev)) return;
    clearTimeout(t.current);
    const wait = Math.max(150, last.current + 1000 - Date.now());
    t.current = setTimeout(() => {
      last.current = Date.now();
      reload();
    }, wait);
  });
  useEffect(() => () => clearTimeout(t.current), []);
}

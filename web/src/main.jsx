// The portal's entry: the session decides between sign-in and the screens; the path picks the screen.
import './style.css';
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { currentSession, onSession, restore, signOut } from './api.js';
import { useRoute } from './router.jsx';
import { MeCtx } from './ui/me.js';
import { Layout } from './ui/layout.jsx';
import { startLive, stopLive } from './ui/hooks.js';
import { SignIn } from './screens/SignIn.jsx';
import { Dashboard } from './screens/Dashboard.jsx';
import { Slices } from './screens/Slices.jsx';
import { GpuRequests } from './screens/GpuRequests.jsx';
import { CreateGpr } from './screens/CreateGpr.jsx';
import { GprDetail } from './screens/GprDetail.jsx';
import { Queue } from './screens/Queue.jsx';
import { Workloads } from './screens/Workloads.jsx';
import { ModelDetails } from './screens/ModelDetails.jsx';
import { Pods } from './screens/Pods.jsx';
import { Gpus } from './screens/Gpus.jsx';
import { Events } from './screens/Events.jsx';
import { Inventory } from './screens/admin/Inventory.jsx';
import { Schedule } from './screens/admin/Schedule.jsx';
import { Clusters } from './screens/admin/Clusters.jsx';
import { Projects } from './screens/admin/Projects.jsx';
import { ApiKeys } from './screens/admin/ApiKeys.jsx';
import { Policies } from './screens/admin/Policies.jsx';
import { Usage } from './screens/admin/Usage.jsx';
import { Insights } from './screens/admin/Insights.jsx';
import { Alerts } from './screens/admin/Alerts.jsx';

const ADMIN = { inventory: Inventory, schedule: Schedule, clusters: Clusters, projects: Projects, keys: ApiKeys,
  policies: Policies, usage: Usage, insights: Insights, alerts: Alerts };

function Screen() {
  const { parts } = useRoute();
  const [a, b, c] = parts;
  useEffect(() => {
    const m = document.getElementById('main');
    if (m) m.focus({ preventScroll: true }); // keyboard and screen-reader users land on the new screen
  }, [parts.join('/')]);
  switch (a) {
    case undefined: return <Dashboard />;
    case 'slices': return <Slices slice={b} />;
    case 'gprs':
      if (b && c === 'new') return <CreateGpr slice={b} />;
      if (b && c) return <GprDetail slice={b} id={c} />;
      return <GpuRequests slice={b} />;
    case 'queue': return <Queue />;
    case 'workloads': return b && c ? <ModelDetails slice={b} model={c} /> : <Workloads slice={b} />;
    case 'pods': return <Pods slice={b} />;
    case 'gpus': return <Gpus slice={b} />;
    case 'events': return <Events />;
    case 'admin': {
      const S = ADMIN[b];
      if (S) return <S arg={c} />;
    }
  }
  return (
    <section>
      <h1>Not found</h1>
      <p>The portal has no page at this address.</p>
    </section>
  );
}

function initialTheme() {
  const t = localStorage.getItem('egs.theme');
  if (t === 'dark' || t === 'light') return t;
  return matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light';
}

function App() {
  const [session, setSession] = useState(currentSession());
  const [ready, setReady] = useState(false);
  const [theme, setTheme] = useState(initialTheme);
  useEffect(() => {
    document.documentElement.dataset.theme = theme;
  }, [theme]);
  useEffect(() => {
    const off = onSession((s) => setSession(s ? { ...s } : null));
    restore().finally(() => setReady(true));
    return off;
  }, []);
  useEffect(() => {
    if (session) startLive();
    else stopLive();
  }, [!!session]);
  if (!ready) return null;
  if (!session) return <SignIn />;
  const flip = () => {
    const t = theme === 'dark' ? 'light' : 'dark';
    localStorage.setItem('egs.theme', t);
    setTheme(t);
  };
  return (
    <MeCtx.Provider value={session.me}>
      <Layout onSignOut={() => signOut()} theme={theme} onTheme={flip}>
        <Screen />
      </Layout>
    </MeCtx.Provider>
  );
}

render(<App />, document.getElementById('app'));

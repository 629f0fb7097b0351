// The frame of every screen: the sidebar of the user guide ("Slices", "GPU Requests", "AI
// Workloads", ...), the header with the user, the bell to the events, the theme and sign-out.
import { Link, useRoute } from '../router.jsx';
import { useMe } from './me.js';
import { useLiveState } from './hooks.js';

const USER_NAV = [
  ['/', 'Dashboard'],
  ['/slices', 'Slices'],
  ['/gprs', 'GPU Requests'],
  ['/queue', 'GPR Queue'],
  ['/workloads', 'AI Workloads'],
  ['/gpus', 'GPUs'],
  ['/events', 'Events'],
];
const ADMIN_NAV = [
  ['/admin/inventory', 'Inventory'],
  ['/admin/schedule', 'Schedule'],
  ['/admin/clusters', 'Clusters'],
  ['/admin/projects', 'Projects'],
  ['/admin/keys', 'API Keys'],
  ['/admin/policies', 'Policies'],
  ['/admin/usage', 'Usage and cost'],
  ['/admin/insights', 'Queue insights'],
  ['/admin/alerts', 'Alerts'],
];

function Nav({ items, path, label }) {
  return (
    <ul aria-label={label}>
      {items.map(([href, text]) => {
        const cur = href === '/' ? path === '/' : path === href || path.startsWith(href + '/');
        return (
          <li>
            <Link href={href} aria-current={cur ? 'page' : undefined}>
              {text}
            </Link>
          </li>
        );
      })}
    </ul>
  );
}

export function Layout({ children, onSignOut, theme, onTheme }) {
  const me = useMe();
  const { path } = useRoute();
  const live = useLiveState();
  return (
    <div class="shell">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <span class="brand">EGS</span>
        <span class={'live ' + (live ? 'on' : 'off')} role="status" title="live updates">
          {live ? 'live' : 'offline'}
        </span>
        <span class="who">
          {me.userName || me.name} · {me.role}
          {me.workspaceName ? ` · ${me.workspaceName}` : me.projectName ? ` · ${me.projectName}` : ''}
        </span>
        <Link href="/events" class="bell" aria-label="Events">
          <svg viewBox="0 0 24 24" width="20" height="20" aria-hidden="true">
            <path d="M12 22a2 2 0 0 0 2-2h-4a2 2 0 0 0 2 2zm6-6V11a6 6 0 0 0-5-5.9V4a1 1 0 0 0-2 0v1.1A6 6 0 0 0 6 11v5l-2 2v1h16v-1z" />
          </svg>
        </Link>
        <button type="button" class="ghost" onClick={onTheme} aria-label={`Switch to ${theme === 'dark' ? 'light' : 'dark'} theme`}>
          {theme === 'dark' ? 'Light' : 'Dark'}
        </button>
        <button type="button" class="ghost" onClick={onSignOut}>
          Sign out
        </button>
      </header>
      <nav class="side" aria-label="Main">
        <details open={!matchMedia('(max-width: 760px)').matches}>
          <summary>Menu</summary>
          <Nav items={USER_NAV} path={path} label="User" />
          {me.isAdmin && (
            <>
              <p class="nav-h">Admin</p>
              <Nav items={ADMIN_NAV} path={path} label="Admin" />
            </>
          )}
        </details>
      </nav>
      <main id="main" tabIndex={-1}>
        {children}
      </main>
    </div>
  );
}

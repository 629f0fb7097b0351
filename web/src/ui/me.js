// Who is signed in, and what the portal offers them.  The API still checks every call: this only
// hides actions a role cannot take (a Viewer reads only; an Owner manages its workspaces' GPRs;
// an Admin manages everything of its project, or of all projects when unscoped).
import { createContext } from 'preact';
import { useContext } from 'preact/hooks';

export const MeCtx = createContext(null);

export function useMe() {
  const me = useContext(MeCtx) || {};
  return {
    ...me,
    isAdmin: me.role === 'Admin',
    canWrite: me.role === 'Admin' || me.role === 'Owner',
  };
}

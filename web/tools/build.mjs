// Builds the portal into a directory (default ../build/portal): one minified ES module and one
// stylesheet under assets/ with content hashes in their names, and index.html naming them.
// Usage: node tools/build.mjs [OUTDIR]
import * as esbuild from 'esbuild';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const out = resolve(process.argv[2] || join(root, '..', 'build', 'portal'));
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const result = await esbuild.build({
  absWorkingDir: root,
  entryPoints: ['src/main.jsx'],
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['es2020'],
  outdir: out,
  entryNames: 'assets/[name]-[hash]',
  assetNames: 'assets/[name]-[hash]',
  jsx: 'automatic',
  jsxImportSource: 'preact',
  legalComments: 'none',
  metafile: true,
  logLevel: 'warning',
});

let js = null, css = null;
for (const file of Object.keys(result.metafile.outputs)) {
  const name = 'assets/' + basename(file);
  if (file.endsWith('.js')) js = name;
  else if (file.endsWith('.css')) css = name;
}
if (!js || !css) throw new Error('the build made no script or no stylesheet');
const html = readFileSync(join(root, 'src', 'index.html'), 'utf8')
  .replace('%STYLE%', '/' + css)
  .replace('%SCRIPT%', '/' + js);
writeFileSync(join(out, 'index.html'), html);
console.log(`portal: ${out} (${js}, ${css})`);

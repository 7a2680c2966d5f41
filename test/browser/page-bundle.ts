/** A page script of test/browser/pages bundled with esbuild for Chromium, ready to inline in a `<script>`. */
import { build } from 'esbuild';

export const bundlePage = async (file: string, target: 'es2020' | 'es2022'): Promise<string> => {
  const out = await build({
    entryPoints: [new URL(`./pages/${file}`, import.meta.url).pathname],
    bundle: true,
    format: 'iife',
    platform: 'browser',
    target,
    write: false,
    logLevel: 'silent',
  });
  return out.outputFiles[0]!.text.replace(/<\/script/gi, '<\\/script');
};

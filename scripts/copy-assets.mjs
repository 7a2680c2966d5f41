// tsc does not copy non-TS assets: the Lua scripts are read from disk at start, beside their module.
import { cpSync, chmodSync, existsSync } from 'node:fs';

cpSync('src/log/lua', 'dist/src/log/lua', { recursive: true });
if (existsSync('dist/src/cli.js')) chmodSync('dist/src/cli.js', 0o755);

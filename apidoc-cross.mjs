import fs from 'node:fs';
import * as yaml from 'js-yaml';
import { parseYamlSubset } from './dist-apidoc/test/support/yaml-subset.js';
import { isDeepStrictEqual } from 'node:util';
const src = fs.readFileSync(process.argv[2] ?? 'docs/openapi.yaml', 'utf8');
const a = yaml.load(src);
const b = parseYamlSubset(src);
console.log('equal', isDeepStrictEqual(a, b));
if (!isDeepStrictEqual(a,b)) { 
  const walk = (x, y, p) => { if (typeof x !== 'object' || x === null) { if (x !== y) console.log(p, JSON.stringify(x), JSON.stringify(y)); return; } for (const k of new Set([...Object.keys(x), ...Object.keys(y ?? {})])) walk(x[k], y?.[k], p + '.' + k); };
  walk(a, b, '$');
}

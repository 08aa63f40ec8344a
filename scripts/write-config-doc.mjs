// Writes docs/configuration.md and .env.example from the compiled variable table (run after the build).
import fs from 'node:fs';
const { renderConfigurationDoc, renderEnvExample } = await import('../dist/shared/config/configuration-doc.js');
fs.writeFileSync(new URL('../docs/configuration.md', import.meta.url), renderConfigurationDoc());
fs.writeFileSync(new URL('../.env.example', import.meta.url), renderEnvExample());
console.log('wrote docs/configuration.md and .env.example');

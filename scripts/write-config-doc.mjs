// Writes docs/configuration.md from the compiled variable table (run after the build).
import fs from 'node:fs';
const { renderConfigurationDoc } = await import('../dist/shared/config/configuration-doc.js');
fs.writeFileSync(new URL('../docs/configuration.md', import.meta.url), renderConfigurationDoc());
console.log('wrote docs/configuration.md');

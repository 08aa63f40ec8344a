import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { renderConfigurationDoc, renderEnvExample } from '../../shared/config/configuration-doc.js';
import { VARIABLES } from '../../shared/config/index.js';
import { packageRoot } from '../../shared/version.js';

describe('docs/configuration.md', () => {
  it('is exactly what the variable table renders (run npm run docs:config after a change)', () => {
    const file = fs.readFileSync(path.join(packageRoot(), 'docs', 'configuration.md'), 'utf8');
    expect(file).to.equal(renderConfigurationDoc());
  });
  it('.env.example is exactly what the variable table renders', () => {
    const file = fs.readFileSync(path.join(packageRoot(), '.env.example'), 'utf8');
    expect(file).to.equal(renderEnvExample());
    for (const v of VARIABLES) expect(file).to.contain(`#${v.name}=`);
  });
  it('names every variable', () => {
    const doc = renderConfigurationDoc();
    for (const v of VARIABLES) expect(doc).to.contain(`\`${v.name}\``);
  });
});

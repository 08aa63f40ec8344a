import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { renderConfigurationDoc } from '../../shared/config/configuration-doc.js';
import { VARIABLES } from '../../shared/config/index.js';
import { packageRoot } from '../../shared/version.js';

describe('docs/configuration.md', () => {
  it('is exactly what the variable table renders (run npm run docs:config after a change)', () => {
    const file = fs.readFileSync(path.join(packageRoot(), 'docs', 'configuration.md'), 'utf8');
    expect(file).to.equal(renderConfigurationDoc());
  });
  it('names every variable', () => {
    const doc = renderConfigurationDoc();
    for (const v of VARIABLES) expect(doc).to.contain(`\`${v.name}\``);
  });
});

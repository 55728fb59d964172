import { fork } from 'node:child_process';

/** CPU time (user + system) this process used, in ms. */
export function selfCpuMs() {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/**
 * The client process (the module at `moduleUrl`, forked with IPC), called like a function:
 * call(command, args) → its result.
 */
export function startClients(moduleUrl) {
  const child = fork(moduleUrl, {
    stdio: 'inherit',
  });
  const pending = new Map();
  let next = 0;
  child.on('message', ({ id, result, error }) => {
    const call = pending.get(id);
    pending.delete(id);
    if (error === undefined) call?.done(result);
    else call?.fail(new Error(error));
  });
  child.on('exit', (code, signal) => {
    for (const call of pending.values())
      call.fail(new Error(`the client process exited (${code ?? signal})`));
    pending.clear();
  });
  return {
    call(command, args) {
      return new Promise((done, fail) => {
        const id = next++;
        pending.set(id, { done, fail });
        child.send({ id, command, args });
      });
    },
    close() {
      if (child.exitCode === null && child.signalCode === null) child.kill();
    },
  };
}

// A bench child process's side of the IPC its parent calls it through (client-process.mjs,
// kiln-process.mjs): `{ id, command, args }` in, `{ id, result }` or `{ id, error }` out.

/** Answers each message by running `commands[command](args)`, sync or async. */
export function answerCommands(commands) {
  process.on('message', ({ id, command, args }) => {
    Promise.resolve()
      .then(() => commands[command](args))
      .then(
        (result) => process.send({ id, result }),
        (error) => process.send({ id, error: String(error?.stack ?? error) }),
      );
  });
}

/**
 * What a migration has to tell whoever runs it (rows it changed, say), said through the logger of
 * the run (runMigrations). Outside a run there is no one to tell: notes are dropped.
 */
export type MigrationNote = (fields: Record<string, unknown>, message: string) => void;

let listener: MigrationNote | undefined;

/** Says `message` to whoever runs the migrations now. */
export function noteFromMigration(fields: Record<string, unknown>, message: string): void {
  listener?.(fields, message);
}

/** Runs `run` with `note` hearing what migrations say meanwhile. */
export async function hearingMigrationNotes<T>(
  note: MigrationNote,
  run: () => Promise<T>,
): Promise<T> {
  const previous = listener;
  listener = note;
  try {
    return await run();
  } finally {
    listener = previous;
  }
}
